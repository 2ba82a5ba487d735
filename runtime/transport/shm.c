/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared-memory transport: connector regions in POSIX shared-memory
 * segments. A segment is created with mode 0600 by the rank that receives
 * through it, attached by its ring predecessor (which writes into it), and
 * unlinked as soon as registration's barrier shows the peer has attached, so
 * nothing is left in /dev/shm if a process dies later.
 */
#include "../dfccl_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The inode of this process's pid namespace, 0 if it cannot be read. */
static unsigned long dfccl_shm_pidns(void)
{
    struct stat st;

    return stat("/proc/self/ns/pid", &st) == 0 ? (unsigned long)st.st_ino : 0;
}

void dfccl_shm_name(char *buf, size_t len, const char *fmt, ...)
{
    int n = snprintf(buf, len, "/dfccl-%d-%lx-", (int)getpid(), dfccl_shm_pidns());
    va_list ap;

    if (n > 0 && (size_t)n < len) {
        va_start(ap, fmt);
        vsnprintf(buf + n, len - (size_t)n, fmt, ap);
        va_end(ap);
    }
}

/*
 * A job that died as a whole (every rank killed before the segments were
 * unlinked) leaves /dev/shm/dfccl-<pid>-<pidns>-... behind. Segments whose
 * creator no longer exists are unlinked here. Only names from this pid
 * namespace count: a pid from another namespace (a container sharing
 * /dev/shm) cannot be checked, so its segments are left alone. A pid that
 * was reused by a live process keeps its segments: safe, at worst late.
 */
int dfccl_shm_sweep(void)
{
    unsigned long ns = dfccl_shm_pidns();
    struct dirent *e;
    DIR *d;
    int n = 0;

    if (ns == 0 || (d = opendir("/dev/shm")) == NULL) {
        return 0;
    }
    while ((e = readdir(d)) != NULL) {
        char *end, path[300];
        long pid;
        unsigned long ens;

        if (strncmp(e->d_name, "dfccl-", 6) != 0) {
            continue;
        }
        pid = strtol(e->d_name + 6, &end, 10);
        if (end == e->d_name + 6 || *end != '-' || pid <= 0) {
            continue;
        }
        ens = strtoul(end + 1, &end, 16);
        if (*end != '-' || ens != ns || (pid_t)pid == getpid()) {
            continue;
        }
        if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) {
            snprintf(path, sizeof(path), "/%s", e->d_name);
            if (shm_unlink(path) == 0) {
                dfccl_info("removed %s, left by process %ld, which has exited", path, pid);
                n++;
            }
        }
    }
    closedir(d);
    return n;
}

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
        return dfccl_error(DFCCL_ERR_TRANSPORT, "shm transport: shm_open(%s) of a peer's "
                           "segment failed: %m", name);
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
