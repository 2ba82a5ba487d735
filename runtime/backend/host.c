/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Host backend: the daemon's blocks are CPU threads running the same
 * scheduler and primitives as the GPU kernel (kernels/daemon_host.c).
 * "Device" and "mapped" memory are ordinary process memory; connectors live
 * in POSIX shared memory (runtime/transport/shm.c). A launch starts one
 * thread per block; the daemon runs until every thread has returned.
 */
#include "../dfccl_int.h"
#include "../../kernels/daemon_host.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    struct dfccl_rank_ctx *ctx;
    uint32_t               block;
} dfccl_host_block_arg_t;

typedef struct {
    pthread_mutex_t        lock;
    pthread_cond_t         idle;
    int                    live;     /* blocks still running */
    int                    nthreads; /* threads to join */
    pthread_t              threads[DFCCL_MAX_CHANNELS];
    dfccl_host_block_arg_t args[DFCCL_MAX_CHANNELS];
} dfccl_host_be_t;

static dfccl_status_t dfccl_host_init(struct dfccl_rank_ctx *ctx)
{
    dfccl_host_be_t *h = calloc(1, sizeof(*h));

    if (h == NULL) {
        return dfccl_error(DFCCL_ERR_NO_MEMORY, "host backend: out of memory");
    }
    pthread_mutex_init(&h->lock, NULL);
    pthread_cond_init(&h->idle, NULL);
    ctx->be_priv = h;
    return DFCCL_OK;
}

static void dfccl_host_join(dfccl_host_be_t *h)
{
    for (int i = 0; i < h->nthreads; i++) {
        pthread_join(h->threads[i], NULL);
    }
    h->nthreads = 0;
}

static void dfccl_host_fini(struct dfccl_rank_ctx *ctx)
{
    dfccl_host_be_t *h = ctx->be_priv;

    if (h == NULL) {
        return;
    }
    dfccl_host_join(h);
    pthread_mutex_destroy(&h->lock);
    pthread_cond_destroy(&h->idle);
    free(h);
    ctx->be_priv = NULL;
}

static dfccl_status_t dfccl_host_alloc(struct dfccl_rank_ctx *ctx, size_t bytes, void **ptr_p)
{
    void *p = NULL;

    if (posix_memalign(&p, DFCCL_CACHELINE, bytes ? bytes : 1) != 0) {
        return dfccl_error(DFCCL_ERR_NO_MEMORY, "host backend: cannot allocate %zu bytes",
                           bytes);
    }
    memset(p, 0, bytes);
    *ptr_p = p;
    return DFCCL_OK;
}

static dfccl_status_t dfccl_host_zero(struct dfccl_rank_ctx *ctx, void *ptr, size_t bytes)
{
    (void)ctx;
    memset(ptr, 0, bytes);
    return DFCCL_OK;
}

static void dfccl_host_free(struct dfccl_rank_ctx *ctx, void *ptr)
{
    free(ptr);
}

static void *dfccl_host_dev_ptr(struct dfccl_rank_ctx *ctx, void *ptr)
{
    return ptr;
}

static dfccl_status_t dfccl_host_memcpy(struct dfccl_rank_ctx *ctx, void *dst, const void *src,
                                        size_t bytes)
{
    memcpy(dst, src, bytes);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    return DFCCL_OK;
}

static void *dfccl_host_block_main(void *arg)
{
    dfccl_host_block_arg_t *ba = arg;
    struct dfccl_rank_ctx *ctx = ba->ctx;
    dfccl_host_be_t *h         = ctx->be_priv;

    dfccl_daemon_host_block(&ctx->args, ba->block);
    pthread_mutex_lock(&h->lock);
    if (--h->live == 0) {
        pthread_cond_broadcast(&h->idle);
    }
    pthread_mutex_unlock(&h->lock);
    ctx->kick(ctx); /* a quit may be what a waiting thread waits for */
    return NULL;
}

static dfccl_status_t dfccl_host_launch(struct dfccl_rank_ctx *ctx)
{
    dfccl_host_be_t *h = ctx->be_priv;
    uint32_t n         = ctx->args.nblocks;

    pthread_mutex_lock(&h->lock);
    if (h->live != 0) {
        pthread_mutex_unlock(&h->lock);
        return dfccl_error(DFCCL_ERR_INTERNAL, "host backend: launch while running");
    }
    pthread_mutex_unlock(&h->lock);
    dfccl_host_join(h);

    pthread_mutex_lock(&h->lock);
    h->live = (int)n;
    pthread_mutex_unlock(&h->lock);
    for (uint32_t b = 0; b < n; b++) {
        h->args[b].ctx   = ctx;
        h->args[b].block = b;
        if (pthread_create(&h->threads[b], NULL, dfccl_host_block_main, &h->args[b]) != 0) {
            /* Blocks already started run to their quit; account the rest. */
            pthread_mutex_lock(&h->lock);
            h->live -= (int)(n - b);
            pthread_mutex_unlock(&h->lock);
            h->nthreads = (int)b;
            return dfccl_error(DFCCL_ERR_SYSTEM, "host backend: pthread_create failed: %m");
        }
    }
    h->nthreads = (int)n;
    return DFCCL_OK;
}

static int dfccl_host_running(struct dfccl_rank_ctx *ctx)
{
    dfccl_host_be_t *h = ctx->be_priv;
    int live;

    pthread_mutex_lock(&h->lock);
    live = h->live;
    pthread_mutex_unlock(&h->lock);
    return live > 0;
}

static dfccl_status_t dfccl_host_wait_idle(struct dfccl_rank_ctx *ctx)
{
    dfccl_host_be_t *h = ctx->be_priv;

    pthread_mutex_lock(&h->lock);
    while (h->live > 0) {
        pthread_cond_wait(&h->idle, &h->lock);
    }
    pthread_mutex_unlock(&h->lock);
    return DFCCL_OK;
}

static int dfccl_host_buffer_ok(struct dfccl_rank_ctx *ctx, const void *ptr)
{
    return ptr != NULL;
}

const dfccl_backend_ops_t dfccl_backend_host = {
    .name         = "host",
    .init         = dfccl_host_init,
    .fini         = dfccl_host_fini,
    .dev_alloc    = dfccl_host_alloc,
    .dev_free     = dfccl_host_free,
    .host_alloc   = dfccl_host_alloc,
    .host_free    = dfccl_host_free,
    .host_dev_ptr = dfccl_host_dev_ptr,
    .memcpy_h2d   = dfccl_host_memcpy,
    .memcpy_d2h   = dfccl_host_memcpy,
    .dev_zero     = dfccl_host_zero,
    .launch       = dfccl_host_launch,
    .running      = dfccl_host_running,
    .wait_idle    = dfccl_host_wait_idle,
    .synchronize  = NULL, /* context.c: block relaunches, wait until idle */
    .buffer_ok    = dfccl_host_buffer_ok,
};
