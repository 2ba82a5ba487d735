/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared-memory transport: connector regions in POSIX shared-memory
 * segments. A segment is created with mode 0600 by the rank that receives
 * through it, attached by its ring predecessor (which writes into it), and
 * unlinked as soon as registration's barrier shows the peer has attached, so
 * nothing is left in /dev/shm if a process dies later.
 */
#include "../dfccl_int.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

dfccl_status_t dfccl_shm_create(dfccl_seg_t *seg, const char *name, size_t bytes)
{
    int fd;
    void *p;

    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
        return dfccl_error(DFCCL_ERR_TRANSPORT, "shm transport: shm_open(%s) failed: %m; "
                           "check that /dev/shm is mounted and writable", name);
    }
    if (ftruncate(fd, (off_t)bytes) != 0) {
        close(fd);
        shm_unlink(name);
        return dfccl_error(DFCCL_ERR_TRANSPORT, "shm transport: ftruncate(%s, %zu) failed: %m; "
                           "/dev/shm may be too small", name, bytes);
    }
    p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        shm_unlink(name);
        return dfccl_error(DFCCL_ERR_TRANSPORT, "shm transport: mmap(%s, %zu) failed: %m",
                           name, bytes);
    }
    memset(seg, 0, sizeof(*seg));
    seg->base     = p;
    seg->dev_base = p;
    seg->bytes    = bytes;
    seg->linked   = 1;
    seg->owner    = 1;
    snprintf(seg->name, sizeof(seg->name), "%s", name);
    return DFCCL_OK;
}

dfccl_status_t dfccl_shm_attach(dfccl_seg_t *seg, const char *name, size_t bytes)
{
    int fd;
    void *p;

    fd = shm_open(name, O_RDWR, 0600);
    if (fd < 0) {
        return dfccl_error(DFCCL_ERR_TRANSPORT, "shm transport: cannot attach peer segment "
                           "%s: %m; the peer may have exited", name);
    }
    p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        return dfccl_error(DFCCL_ERR_TRANSPORT, "shm transport: mmap of peer segment %s "
                           "failed: %m", name);
    }
    memset(seg, 0, sizeof(*seg));
    seg->base     = p;
    seg->dev_base = p;
    seg->bytes    = bytes;
    snprintf(seg->name, sizeof(seg->name), "%s", name);
    return DFCCL_OK;
}

void dfccl_shm_unlink(dfccl_seg_t *seg)
{
    if (seg->linked) {
        shm_unlink(seg->name);
        seg->linked = 0;
    }
}

void dfccl_shm_release(dfccl_seg_t *seg)
{
    dfccl_shm_unlink(seg);
    if (seg->base != NULL) {
        munmap(seg->base, seg->bytes);
        seg->base = NULL;
    }
}
