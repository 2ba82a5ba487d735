/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Peer-to-peer transport: connector segments in the receiving rank's device
 * memory, shared with its ring predecessor through CUDA IPC, so that the
 * sender's daemon writes slots and control words straight into the
 * receiver's memory over NVLink or PCIe. A segment is one cudaMalloc
 * allocation (an IPC handle names a whole allocation), zeroed before its
 * handle is exported; peers open it with lazy peer access. The host has no
 * view of a p2p segment: seg->base stays NULL and seg->dev_base holds the
 * device address, so the runtime reaches it through the backend's copies.
 */
#include "../backend/cuda_int.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

_Static_assert(sizeof(cudaIpcMemHandle_t) <= sizeof(((dfccl_seg_t *)0)->ipc),
               "dfccl_seg_t.ipc too small for a cudaIpcMemHandle_t");
_Static_assert(sizeof(cudaIpcMemHandle_t) <= sizeof(((dfccl_conn_desc_t *)0)->ipc),
               "dfccl_conn_desc_t.ipc too small for a cudaIpcMemHandle_t");

dfccl_status_t dfccl_p2p_create(struct dfccl_rank_ctx *ctx, dfccl_seg_t *seg, size_t bytes)
{
    cudaIpcMemHandle_t handle;
    dfccl_status_t st;
    void *p = NULL;
    int prev;

    DFCCL_CHECK(dfccl_cuda_device_enter(ctx, &prev));
    st = DFCCL_CUDA(cudaMalloc(&p, bytes));
    dfccl_cuda_device_leave(ctx, prev);
    if (st != DFCCL_OK) {
        return dfccl_error(DFCCL_ERR_NO_MEMORY, "p2p transport: cannot allocate a %zu-byte "
                           "connector segment on device %d; register fewer or smaller "
                           "collectives, or lower DFCCL_SLOTS/DFCCL_SLOT_BYTES", bytes,
                           ctx->device);
    }
    st = dfccl_cuda_memset(ctx, p, bytes);
    if (st == DFCCL_OK) {
        st = dfccl_cuda_device_enter(ctx, &prev);
        if (st == DFCCL_OK) {
            st = DFCCL_CUDA(cudaIpcGetMemHandle(&handle, p));
            dfccl_cuda_device_leave(ctx, prev);
        }
    }
    if (st != DFCCL_OK) {
        if (dfccl_cuda_device_enter(ctx, &prev) == DFCCL_OK) {
            (void)DFCCL_CUDA(cudaFree(p));
            dfccl_cuda_device_leave(ctx, prev);
        }
        return st;
    }
    memset(seg, 0, sizeof(*seg));
    seg->dev_base  = p;
    seg->bytes     = bytes;
    seg->owner     = 1;
    seg->transport = DFCCL_TRANSPORT_P2P;
    memcpy(seg->ipc, &handle, sizeof(handle));
    return DFCCL_OK;
}

dfccl_status_t dfccl_p2p_attach(struct dfccl_rank_ctx *ctx, dfccl_seg_t *seg,
                                const dfccl_conn_desc_t *desc)
{
    cudaIpcMemHandle_t handle;
    dfccl_status_t st;
    void *p = NULL;
    int prev;

    memcpy(&handle, desc->ipc, sizeof(handle));
    DFCCL_CHECK(dfccl_cuda_device_enter(ctx, &prev));
    st = DFCCL_CUDA(cudaIpcOpenMemHandle(&p, handle, cudaIpcMemLazyEnablePeerAccess));
    dfccl_cuda_device_leave(ctx, prev);
    if (st != DFCCL_OK) {
        return dfccl_error(DFCCL_ERR_TRANSPORT, "p2p transport: cannot open the peer's "
                           "connector segment %u (%llu bytes) on device %d; the peer may have "
                           "exited, or the devices cannot share memory (try "
                           "DFCCL_TRANSPORT=shm)", desc->seg,
                           (unsigned long long)desc->seg_bytes, ctx->device);
    }
    memset(seg, 0, sizeof(*seg));
    seg->dev_base  = p;
    seg->bytes     = desc->seg_bytes;
    seg->owner     = 0;
    seg->transport = DFCCL_TRANSPORT_P2P;
    seg->index     = desc->seg;
    memcpy(seg->ipc, desc->ipc, sizeof(seg->ipc));
    return DFCCL_OK;
}

void dfccl_p2p_release(struct dfccl_rank_ctx *ctx, dfccl_seg_t *seg)
{
    int prev;

    if (seg->dev_base == NULL || dfccl_cuda_device_enter(ctx, &prev) != DFCCL_OK) {
        return;
    }
    if (seg->owner) {
        (void)DFCCL_CUDA(cudaFree(seg->dev_base));
    } else {
        (void)DFCCL_CUDA(cudaIpcCloseMemHandle(seg->dev_base));
    }
    dfccl_cuda_device_leave(ctx, prev);
    seg->dev_base = NULL;
}

/*
 * Peer access is a property of the (device, peer) pair in the process, not of
 * a communicator: enabling it a second time fails with
 * cudaErrorPeerAccessAlreadyEnabled, which error checkers such as
 * compute-sanitizer report. So each pair is enabled once per process, under a
 * lock, and the outcome is remembered; devices beyond the table (more than
 * 64) fall back to asking every time and clearing the "already" error.
 */
#define DFCCL_PEER_MAX_DEVICES 64
static pthread_mutex_t peer_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t peer_enabled[DFCCL_PEER_MAX_DEVICES];
static uint64_t peer_failed[DFCCL_PEER_MAX_DEVICES];

/* caller holds peer_lock and is on `device` */
static int peer_enable(int device, int peer_device)
{
    int known = device < DFCCL_PEER_MAX_DEVICES && peer_device < DFCCL_PEER_MAX_DEVICES;
    uint64_t bit = known ? UINT64_C(1) << peer_device : 0;
    cudaError_t e;

    if (known && (peer_enabled[device] & bit)) {
        return 1;
    }
    if (known && (peer_failed[device] & bit)) {
        return 0;
    }
    e = cudaDeviceEnablePeerAccess(peer_device, 0);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
    }
    if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) {
        dfccl_info("p2p transport: cudaDeviceEnablePeerAccess(%d) on device %d: %s",
                   peer_device, device, cudaGetErrorString(e));
        if (known) {
            peer_failed[device] |= bit;
        }
        return 0;
    }
    if (known) {
        peer_enabled[device] |= bit;
    }
    return 1;
}

/*
 * A peer's GPU that CUDA_VISIBLE_DEVICES hides from this process (as
 * Slurm's --gpus-per-task and per-rank wrapper scripts do) has no ordinal
 * here, so CUDA cannot say whether we reach it; CUDA IPC still maps its
 * memory where the two GPUs have peer access. NVML sees every GPU of the
 * machine by UUID: it is the driver's own library, opened at run time so
 * that dfccl neither links it nor needs its header (the few declarations
 * below are its stable C interface).
 */
typedef struct dfccl_nvml_dev *dfccl_nvml_dev_t;
#define DFCCL_NVML_P2P_WRITE 1 /* NVML_P2P_CAPS_INDEX_WRITE */
static struct {
    pthread_once_t once;
    int (*get_by_uuid)(const char *, dfccl_nvml_dev_t *);
    int (*p2p_status)(dfccl_nvml_dev_t, dfccl_nvml_dev_t, int, int *);
} nvml = {PTHREAD_ONCE_INIT, NULL, NULL};

static void nvml_open(void)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    int (*init)(void);

    if (h == NULL) {
        return;
    }
    *(void **)&init              = dlsym(h, "nvmlInit_v2");
    *(void **)&nvml.get_by_uuid  = dlsym(h, "nvmlDeviceGetHandleByUUID");
    *(void **)&nvml.p2p_status   = dlsym(h, "nvmlDeviceGetP2PStatus");
    if (init == NULL || nvml.get_by_uuid == NULL || nvml.p2p_status == NULL || init() != 0) {
        nvml.get_by_uuid = NULL;
        nvml.p2p_status  = NULL;
    }
}

/* NVML's name of a GPU: "GPU-" and the UUID's bytes in 8-4-4-4-12 groups. */
static void nvml_uuid_name(const unsigned char u[16], char name[48])
{
    char *p = name + sprintf(name, "GPU-");

    for (int i = 0; i < 16; i++) {
        p += sprintf(p, "%s%02x", i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "", u[i]);
    }
}

/* 1 if NVML says GPU `from` can write into GPU `to`; 0 if it says not, or
 * cannot say (no NVML). */
static int nvml_p2p_write(const unsigned char from[16], const unsigned char to[16])
{
    char a[48], b[48];
    dfccl_nvml_dev_t da, db;
    int status = -1;

    pthread_once(&nvml.once, nvml_open);
    if (nvml.p2p_status == NULL) {
        return 0;
    }
    nvml_uuid_name(from, a);
    nvml_uuid_name(to, b);
    return nvml.get_by_uuid(a, &da) == 0 && nvml.get_by_uuid(b, &db) == 0 &&
           nvml.p2p_status(da, db, DFCCL_NVML_P2P_WRITE, &status) == 0 && status == 0;
}

/* The visible GPUs' UUIDs, read once: cudaGetDeviceProperties is slow. */
static struct {
    pthread_once_t once;
    int            n;
    unsigned char  uuid[DFCCL_PEER_MAX_DEVICES][16];
} visible = {PTHREAD_ONCE_INIT, 0, {{0}}};

static void visible_read(void)
{
    int n = 0;

    if (DFCCL_CUDA(cudaGetDeviceCount(&n)) != DFCCL_OK) {
        return;
    }
    n = n < DFCCL_PEER_MAX_DEVICES ? n : DFCCL_PEER_MAX_DEVICES;
    for (int d = 0; d < n; d++) {
        if (dfccl_cuda_uuid(d, visible.uuid[d]) != DFCCL_OK) {
            return;
        }
        visible.n = d + 1;
    }
}

/* The ordinal here of the GPU with UUID `uuid`, or -1 if it is hidden. */
static int p2p_ordinal_of(const unsigned char uuid[16])
{
    pthread_once(&visible.once, visible_read);
    for (int d = 0; d < visible.n; d++) {
        if (memcmp(visible.uuid[d], uuid, 16) == 0) {
            return d;
        }
    }
    return -1;
}

int dfccl_p2p_reachable(struct dfccl_rank_ctx *ctx, int peer_device,
                        const unsigned char peer_uuid[16])
{
    static const unsigned char none[16];
    int can = 0, prev;

    if (memcmp(peer_uuid, none, 16) != 0) {
        if (memcmp(peer_uuid, ctx->device_uuid, 16) == 0) {
            return 1; /* another process on our GPU: IPC works */
        }
        peer_device = p2p_ordinal_of(peer_uuid);
        if (peer_device < 0) {
            can = nvml_p2p_write(peer_uuid, ctx->device_uuid) &&
                  nvml_p2p_write(ctx->device_uuid, peer_uuid);
            dfccl_info("p2p transport: a peer's GPU is hidden from device %d by "
                       "CUDA_VISIBLE_DEVICES; %s", ctx->device,
                       can ? "NVML reports peer access both ways: CUDA IPC maps its memory"
                           : "NVML does not report peer access both ways (or is missing): "
                             "shared host memory instead");
            return can;
        }
    } else if (peer_device == ctx->device) {
        return 1; /* another process on the same device: IPC works */
    }
    if (peer_device < 0 ||
        DFCCL_CUDA(cudaDeviceCanAccessPeer(&can, ctx->device, peer_device)) != DFCCL_OK ||
        !can) {
        return 0;
    }
    if (dfccl_cuda_device_enter(ctx, &prev) != DFCCL_OK) {
        return 0;
    }
    /* IPC mappings enable it lazily; enable it here too for direct use. */
    pthread_mutex_lock(&peer_lock);
    can = peer_enable(ctx->device, peer_device);
    pthread_mutex_unlock(&peer_lock);
    dfccl_cuda_device_leave(ctx, prev);
    return can;
}
