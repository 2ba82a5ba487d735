/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA backend: the daemon is a persistent kernel on the device that was
 * current at dfcclInit, launched on a non-blocking stream, so that it never
 * synchronizes with the legacy default stream. Queues, statistics and the
 * abort flag are pinned host memory mapped into the device; daemon state is
 * device memory. Host-device copies go through a private non-blocking
 * stream and a pinned staging buffer, so they neither wait for the daemon
 * nor act as a device synchronization. Whether the daemon runs is read from
 * an event recorded after each launch: the host and the GPU share no
 * atomics. Without nvcc (CUDA runtime only) the backend is not offered.
 */
#include "cuda_int.h"
#include "../../kernels/daemon_host.h"
#include "../../kernels/port.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include <string.h>

#define DFCCL_CUDA_STAGE_BYTES (1ul << 20)

typedef struct {
    cudaStream_t    daemon;      /* the daemon's stream */
    cudaStream_t    copy;        /* copies and memsets */
    cudaEvent_t     done;        /* recorded after every launch */
    int             launched;
    int             threads;     /* per block */
    int             query_failed; /* cudaEventQuery error already reported */
    pthread_mutex_t copy_lock;   /* the staging buffer */
    void           *stage;
} dfccl_cuda_be_t;

static dfccl_status_t dfccl_cuda_host_alloc(struct dfccl_rank_ctx *ctx, size_t bytes,
                                            void **ptr_p);
static void dfccl_cuda_host_free(struct dfccl_rank_ctx *ctx, void *ptr);

dfccl_status_t dfccl_cuda_device_enter(const struct dfccl_rank_ctx *ctx, int *prev_p)
{
    int cur;

    if (ctx->device_lost) {
        return DFCCL_ERR_CUDA; /* said once, by dfccl_ctx_device_lost */
    }
    DFCCL_CHECK(DFCCL_CUDA(cudaGetDevice(&cur)));
    if (cur != ctx->device) {
        DFCCL_CHECK(DFCCL_CUDA(cudaSetDevice(ctx->device)));
    }
    *prev_p = cur;
    return DFCCL_OK;
}

void dfccl_cuda_device_leave(const struct dfccl_rank_ctx *ctx, int prev)
{
    if (prev != ctx->device) {
        (void)DFCCL_CUDA(cudaSetDevice(prev));
    }
}

static dfccl_status_t dfccl_cuda_bind_thread(struct dfccl_rank_ctx *ctx)
{
    return DFCCL_CUDA(cudaSetDevice(ctx->device));
}

int dfccl_cuda_device_count(void)
{
#ifdef HAVE_CUDA
    int n = 0;

    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
#else
    return 0; /* no daemon kernel without nvcc: the backend is not offered */
#endif
}

/*
 * The CUDA backend was asked for: fail unless a GPU is visible, saying why
 * not in words a user can act on. The runtime reports a machine without
 * any driver as "CUDA driver version is insufficient"; the driver version
 * it gives (0 when no driver is installed) tells that apart from a driver
 * that is really too old.
 */
dfccl_status_t dfccl_cuda_check_visible(const char *fn)
{
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    int n = 0, drv = 0, rt = 0;
    cudaError_t ce = cudaGetDeviceCount(&n);
    char why[256];

    (void)cudaGetLastError();
    if (ce == cudaSuccess && n > 0) {
        return DFCCL_OK;
    }
    (void)cudaDriverGetVersion(&drv);
    (void)cudaRuntimeGetVersion(&rt);
    (void)cudaGetLastError();
    if (ce == cudaErrorInsufficientDriver && drv == 0) {
        snprintf(why, sizeof(why), "no NVIDIA driver is installed or loaded (libcuda.so.1 "
                 "is not found)");
    } else if (ce == cudaErrorInsufficientDriver) {
        snprintf(why, sizeof(why), "the NVIDIA driver (CUDA %d.%d) is older than the CUDA "
                 "runtime dfccl was built with (%d.%d); update the driver", drv / 1000,
                 drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
    } else if (ce == cudaSuccess || ce == cudaErrorNoDevice) {
        snprintf(why, sizeof(why), "the driver sees no GPU%s%s%s", vis != NULL ?
                 " (CUDA_VISIBLE_DEVICES=\"" : "", vis != NULL ? vis : "",
                 vis != NULL ? "\")" : "");
    } else {
        snprintf(why, sizeof(why), "cudaGetDeviceCount failed: %s (%s)", cudaGetErrorString(ce),
                 cudaGetErrorName(ce));
    }
    return dfccl_error(DFCCL_ERR_UNSUPPORTED, "%s: the CUDA backend was requested "
                       "(DFCCL_BACKEND=cuda) but no GPU or CUDA driver is visible: %s; check "
                       "nvidia-smi, or set DFCCL_BACKEND=host (auto picks the host backend "
                       "where no GPU is visible)", fn, why);
}

static void dfccl_cuda_fini(struct dfccl_rank_ctx *ctx)
{
    dfccl_cuda_be_t *h = ctx->be_priv;
    int prev;

    if (h == NULL) {
        return;
    }
    dfccl_cuda_host_free(ctx, h->stage);
    if (dfccl_cuda_device_enter(ctx, &prev) == DFCCL_OK) {
        if (h->done != NULL) {
            (void)DFCCL_CUDA(cudaEventDestroy(h->done));
        }
        if (h->copy != NULL) {
            (void)DFCCL_CUDA(cudaStreamDestroy(h->copy));
        }
        if (h->daemon != NULL) {
            (void)DFCCL_CUDA(cudaStreamDestroy(h->daemon));
        }
        dfccl_cuda_device_leave(ctx, prev);
    }
    pthread_mutex_destroy(&h->copy_lock);
    free(h);
    ctx->be_priv = NULL;
}

/* The UUID of visible device `dev`, which names the same GPU in every
 * process of the machine whatever its CUDA_VISIBLE_DEVICES. */
dfccl_status_t dfccl_cuda_uuid(int dev, unsigned char uuid[16])
{
    struct cudaDeviceProp p;

    DFCCL_CHECK(DFCCL_CUDA(cudaGetDeviceProperties(&p, dev)));
    memcpy(uuid, p.uuid.bytes, 16);
    return DFCCL_OK;
}

static dfccl_status_t dfccl_cuda_init(struct dfccl_rank_ctx *ctx)
{
    dfccl_cuda_be_t *h;
    dfccl_status_t st;
    int dev, map = 0;

#ifndef HAVE_CUDA
    return dfccl_error(DFCCL_ERR_UNSUPPORTED, "dfcclInit: dfccl was built without nvcc, so "
                       "it has no daemon kernel for GPUs; rebuild with nvcc in PATH (or "
                       "--with-cuda=DIR) or set DFCCL_BACKEND=host");
#endif
    DFCCL_CHECK(DFCCL_CUDA(cudaGetDevice(&dev)));
    DFCCL_CHECK(DFCCL_CUDA(cudaDeviceGetAttribute(&map, cudaDevAttrCanMapHostMemory, dev)));
    if (!map) {
        return dfccl_error(DFCCL_ERR_UNSUPPORTED, "dfcclInit: device %d cannot map host "
                           "memory, which the daemon's queues need", dev);
    }
    DFCCL_CHECK(dfccl_cuda_uuid(dev, ctx->device_uuid));
    h = calloc(1, sizeof(*h));
    if (h == NULL) {
        return dfccl_error(DFCCL_ERR_NO_MEMORY, "cuda backend: out of host memory");
    }
    pthread_mutex_init(&h->copy_lock, NULL);
    ctx->device  = dev;
    ctx->be_priv = h;
    h->threads   = DFCCL_MIN(ctx->cfg.threads_per_block, DFCCL_DAEMON_MAX_THREADS) & ~31;
    h->threads   = DFCCL_MAX(h->threads, 32);

    st = DFCCL_CUDA(cudaStreamCreateWithFlags(&h->daemon, cudaStreamNonBlocking));
    if (st == DFCCL_OK) {
        st = DFCCL_CUDA(cudaStreamCreateWithFlags(&h->copy, cudaStreamNonBlocking));
    }
    if (st == DFCCL_OK) {
        st = DFCCL_CUDA(cudaEventCreateWithFlags(&h->done, cudaEventDisableTiming));
    }
    if (st == DFCCL_OK) {
        st = dfccl_cuda_host_alloc(ctx, DFCCL_CUDA_STAGE_BYTES, &h->stage);
    }
    if (st != DFCCL_OK) {
        dfccl_cuda_fini(ctx);
        return st;
    }
    dfccl_info("cuda backend on device %d, %d threads per block", dev, h->threads);
    return DFCCL_OK;
}

dfccl_status_t dfccl_cuda_memset(struct dfccl_rank_ctx *ctx, void *ptr, size_t bytes)
{
    dfccl_cuda_be_t *h = ctx->be_priv;
    dfccl_status_t st;
    int prev;

    DFCCL_CHECK(dfccl_cuda_device_enter(ctx, &prev));
    st = DFCCL_CUDA(cudaMemsetAsync(ptr, 0, bytes, h->copy));
    if (st == DFCCL_OK) {
        st = DFCCL_CUDA(cudaStreamSynchronize(h->copy));
    }
    dfccl_cuda_device_leave(ctx, prev);
    return st;
}

static dfccl_status_t dfccl_cuda_dev_alloc(struct dfccl_rank_ctx *ctx, size_t bytes,
                                           void **ptr_p)
{
    dfccl_status_t st;
    void *p = NULL;
    int prev;

    DFCCL_CHECK(dfccl_cuda_device_enter(ctx, &prev));
    st = DFCCL_CUDA(cudaMalloc(&p, bytes ? bytes : 1));
    dfccl_cuda_device_leave(ctx, prev);
    if (st != DFCCL_OK) {
        return dfccl_error(DFCCL_ERR_NO_MEMORY, "cuda backend: cannot allocate %zu bytes of "
                           "device memory on device %d", bytes, ctx->device);
    }
    st = dfccl_cuda_memset(ctx, p, bytes);
    if (st != DFCCL_OK) {
        (void)DFCCL_CUDA(cudaFree(p));
        return st;
    }
    *ptr_p = p;
    return DFCCL_OK;
}

static void dfccl_cuda_dev_free(struct dfccl_rank_ctx *ctx, void *ptr)
{
    int prev;

    if (ptr != NULL && dfccl_cuda_device_enter(ctx, &prev) == DFCCL_OK) {
        (void)DFCCL_CUDA(cudaFree(ptr));
        dfccl_cuda_device_leave(ctx, prev);
    }
}

/*
 * Host memory that the daemon maps: pages of our own mapping, registered
 * with CUDA, rather than cudaHostAlloc's. A program may reset the device
 * (cudaDeviceReset, as CUDA's samples do before they exit) before dfccl is
 * finalized: that frees every CUDA allocation, and pages of cudaHostAlloc
 * would vanish under the host threads that read the queues. Registered
 * pages only lose their registration, and stay readable until dfccl
 * unmaps them. A mapping of their own (not the heap's pages) keeps what
 * the driver does to pinned pages away from other data. The page before
 * the memory holds the mapping's length.
 */
static dfccl_status_t dfccl_cuda_host_alloc(struct dfccl_rank_ctx *ctx, size_t bytes,
                                            void **ptr_p)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t len  = ((bytes ? bytes : 1) + page - 1) / page * page;
    dfccl_status_t st;
    char *m;
    int prev;

    m = mmap(NULL, page + len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        return dfccl_error(DFCCL_ERR_NO_MEMORY, "cuda backend: cannot map %zu bytes of host "
                           "memory: %s", bytes, strerror(errno));
    }
    *(size_t *)(void *)m = page + len; /* mmap's pages come zeroed */
    st = dfccl_cuda_device_enter(ctx, &prev);
    if (st == DFCCL_OK) {
        st = DFCCL_CUDA(cudaHostRegister(m + page, len, cudaHostRegisterMapped |
                                                            cudaHostRegisterPortable));
        dfccl_cuda_device_leave(ctx, prev);
    }
    if (st != DFCCL_OK) {
        munmap(m, page + len);
        return dfccl_error(DFCCL_ERR_NO_MEMORY, "cuda backend: cannot pin and map %zu bytes of "
                           "host memory (cudaHostRegister)", bytes);
    }
    *ptr_p = m + page;
    return DFCCL_OK;
}

static void dfccl_cuda_host_free(struct dfccl_rank_ctx *ctx, void *ptr)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    char *m;
    int prev;

    if (ptr == NULL) {
        return;
    }
    if (dfccl_cuda_device_enter(ctx, &prev) == DFCCL_OK) {
        (void)DFCCL_CUDA(cudaHostUnregister(ptr));
        dfccl_cuda_device_leave(ctx, prev);
    }
    m = (char *)ptr - page;
    munmap(m, *(size_t *)(void *)m);
}

/* Whether the device was reset since dfcclInit: our pinned staging pages
 * are no longer known to CUDA then. */
static int dfccl_cuda_lost(struct dfccl_rank_ctx *ctx)
{
    dfccl_cuda_be_t *h = ctx->be_priv;
    struct cudaPointerAttributes at;

    if (h == NULL || h->stage == NULL) {
        return 0;
    }
    if (cudaPointerGetAttributes(&at, h->stage) != cudaSuccess) {
        (void)cudaGetLastError();
        return 1;
    }
    return at.type != cudaMemoryTypeHost;
}

static void *dfccl_cuda_host_dev_ptr(struct dfccl_rank_ctx *ctx, void *ptr)
{
    void *d = NULL;
    int prev;

    if (ptr == NULL || dfccl_cuda_device_enter(ctx, &prev) != DFCCL_OK) {
        return NULL;
    }
    if (DFCCL_CUDA(cudaHostGetDevicePointer(&d, ptr, 0)) != DFCCL_OK) {
        d = NULL;
    }
    dfccl_cuda_device_leave(ctx, prev);
    return d;
}

/* Copy through the staging buffer on the private stream. `to_dev`: host
 * source -> any destination; otherwise any source -> host destination. */
static dfccl_status_t dfccl_cuda_copy(struct dfccl_rank_ctx *ctx, void *dst, const void *src,
                                      size_t bytes, int to_dev)
{
    dfccl_cuda_be_t *h = ctx->be_priv;
    dfccl_status_t st  = DFCCL_OK;
    int prev;

    DFCCL_CHECK(dfccl_cuda_device_enter(ctx, &prev));
    pthread_mutex_lock(&h->copy_lock);
    for (size_t o = 0; o < bytes && st == DFCCL_OK; o += DFCCL_CUDA_STAGE_BYTES) {
        size_t n = DFCCL_MIN(bytes - o, DFCCL_CUDA_STAGE_BYTES);
        if (to_dev) {
            memcpy(h->stage, (const char *)src + o, n);
            st = DFCCL_CUDA(cudaMemcpyAsync((char *)dst + o, h->stage, n, cudaMemcpyDefault,
                                            h->copy));
        } else {
            st = DFCCL_CUDA(cudaMemcpyAsync(h->stage, (const char *)src + o, n,
                                            cudaMemcpyDefault, h->copy));
        }
        if (st == DFCCL_OK) {
            st = DFCCL_CUDA(cudaStreamSynchronize(h->copy));
        }
        if (st == DFCCL_OK && !to_dev) {
            memcpy((char *)dst + o, h->stage, n);
        }
    }
    pthread_mutex_unlock(&h->copy_lock);
    dfccl_cuda_device_leave(ctx, prev);
    return st;
}

static dfccl_status_t dfccl_cuda_memcpy_h2d(struct dfccl_rank_ctx *ctx, void *dst,
                                            const void *src, size_t bytes)
{
    return dfccl_cuda_copy(ctx, dst, src, bytes, 1);
}

static dfccl_status_t dfccl_cuda_memcpy_d2h(struct dfccl_rank_ctx *ctx, void *dst,
                                            const void *src, size_t bytes)
{
    return dfccl_cuda_copy(ctx, dst, src, bytes, 0);
}

static dfccl_status_t dfccl_cuda_launch(struct dfccl_rank_ctx *ctx)
{
#ifdef HAVE_CUDA
    dfccl_cuda_be_t *h = ctx->be_priv;
    dfccl_status_t st;
    int prev, rc;

    DFCCL_CHECK(dfccl_cuda_device_enter(ctx, &prev));
    rc = dfccl_daemon_cuda_launch(&ctx->args, h->threads, h->daemon);
    if (rc != 0) {
        st = dfccl_error(DFCCL_ERR_CUDA, "cuda backend: launching the daemon (%u blocks of %d "
                         "threads) on device %d failed: %s", ctx->args.nblocks, h->threads,
                         ctx->device, cudaGetErrorString((cudaError_t)rc));
    } else {
        st = DFCCL_CUDA(cudaEventRecord(h->done, h->daemon));
        if (st == DFCCL_OK) {
            h->launched = 1;
        }
    }
    dfccl_cuda_device_leave(ctx, prev);
    return st;
#else
    return dfccl_error(DFCCL_ERR_UNSUPPORTED, "cuda backend: built without nvcc");
#endif
}

static int dfccl_cuda_running(struct dfccl_rank_ctx *ctx)
{
    dfccl_cuda_be_t *h = ctx->be_priv;
    cudaError_t e;

    if (!h->launched) {
        return 0;
    }
    e = cudaEventQuery(h->done);
    if (e == cudaErrorNotReady) {
        return 1;
    }
    if (e != cudaSuccess && !h->query_failed) {
        h->query_failed = 1;
        (void)cudaGetLastError();
        dfccl_error(DFCCL_ERR_CUDA, "cuda backend: the daemon on device %d failed: %s; the "
                    "device is unusable, destroy the context", ctx->device,
                    cudaGetErrorString(e));
    }
    return 0;
}

static dfccl_status_t dfccl_cuda_wait_idle(struct dfccl_rank_ctx *ctx)
{
    dfccl_cuda_be_t *h = ctx->be_priv;

    if (!h->launched) {
        return DFCCL_OK;
    }
    return DFCCL_CUDA(cudaEventSynchronize(h->done));
}

static dfccl_status_t dfccl_cuda_synchronize(struct dfccl_rank_ctx *ctx)
{
    dfccl_status_t st;
    int prev;

    DFCCL_CHECK(dfccl_cuda_device_enter(ctx, &prev));
    st = DFCCL_CUDA(cudaDeviceSynchronize());
    dfccl_cuda_device_leave(ctx, prev);
    return st;
}

static int dfccl_cuda_buffer_ok(struct dfccl_rank_ctx *ctx, const void *ptr)
{
    struct cudaPointerAttributes at;

    if (ptr == NULL || cudaPointerGetAttributes(&at, ptr) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return at.type == cudaMemoryTypeManaged ||
           (at.type == cudaMemoryTypeDevice && at.device == ctx->device);
}

static dfccl_status_t dfccl_cuda_host_register(struct dfccl_rank_ctx *ctx, void *ptr,
                                               size_t bytes, void **dev_p)
{
    dfccl_status_t st;
    void *d = NULL;
    int prev;

    DFCCL_CHECK(dfccl_cuda_device_enter(ctx, &prev));
    st = DFCCL_CUDA(cudaHostRegister(ptr, bytes,
                                     cudaHostRegisterMapped | cudaHostRegisterPortable));
    if (st == DFCCL_OK) {
        st = DFCCL_CUDA(cudaHostGetDevicePointer(&d, ptr, 0));
        if (st != DFCCL_OK) {
            (void)DFCCL_CUDA(cudaHostUnregister(ptr));
        }
    }
    dfccl_cuda_device_leave(ctx, prev);
    if (st == DFCCL_OK) {
        *dev_p = d;
    }
    return st;
}

static void dfccl_cuda_host_unregister(struct dfccl_rank_ctx *ctx, void *ptr)
{
    int prev;

    if (ptr != NULL && dfccl_cuda_device_enter(ctx, &prev) == DFCCL_OK) {
        (void)DFCCL_CUDA(cudaHostUnregister(ptr));
        dfccl_cuda_device_leave(ctx, prev);
    }
}

const dfccl_backend_ops_t dfccl_backend_cuda = {
    .name            = "cuda",
    .init            = dfccl_cuda_init,
    .fini            = dfccl_cuda_fini,
    .dev_alloc       = dfccl_cuda_dev_alloc,
    .dev_free        = dfccl_cuda_dev_free,
    .host_alloc      = dfccl_cuda_host_alloc,
    .host_free       = dfccl_cuda_host_free,
    .host_dev_ptr    = dfccl_cuda_host_dev_ptr,
    .memcpy_h2d      = dfccl_cuda_memcpy_h2d,
    .memcpy_d2h      = dfccl_cuda_memcpy_d2h,
    .dev_zero        = dfccl_cuda_memset,
    .launch          = dfccl_cuda_launch,
    .running         = dfccl_cuda_running,
    .wait_idle       = dfccl_cuda_wait_idle,
    .synchronize     = dfccl_cuda_synchronize,
    .buffer_ok       = dfccl_cuda_buffer_ok,
    .host_register   = dfccl_cuda_host_register,
    .host_unregister = dfccl_cuda_host_unregister,
    .bind_thread     = dfccl_cuda_bind_thread,
    .lost            = dfccl_cuda_lost,
};
