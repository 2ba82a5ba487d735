/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rank context: the backend, the configuration's defaults, the daemon's
 * memory, the poller thread, and the public calls that create, drive and
 * destroy a context. The queues are in queue.c, the progress loop and the
 * health checks in health.c, registration and runs in coll.c, which this
 * file hooks into the context (coll_release, coll_resolve) so that the
 * files below it never call back up.
 */
#include "dfccl_int.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void dfccl_ctx_free_mem(struct dfccl_rank_ctx *ctx);

static dfccl_status_t dfccl_ctx_pick_backend(struct dfccl_rank_ctx *ctx)
{
    dfccl_backend_t b = ctx->cfg.backend;

    if (b == DFCCL_BACKEND_AUTO) {
#ifdef HAVE_CUDART
        b = dfccl_cuda_device_count() > 0 ? DFCCL_BACKEND_CUDA : DFCCL_BACKEND_HOST;
#else
        b = DFCCL_BACKEND_HOST;
#endif
    }
    if (b == DFCCL_BACKEND_CUDA) {
#ifdef HAVE_CUDART
        DFCCL_CHECK(dfccl_cuda_check_visible("dfcclInit"));
        ctx->be = &dfccl_backend_cuda;
#else
        return dfccl_error(DFCCL_ERR_UNSUPPORTED, "dfcclInit: the CUDA backend was requested "
                           "but dfccl was built without CUDA; rebuild with --with-cuda or set "
                           "DFCCL_BACKEND=host");
#endif
    } else {
        ctx->be = &dfccl_backend_host;
    }
    ctx->backend = b;
    return DFCCL_OK;
}

/* Backend-dependent defaults (the tunables table, runtime/config.c). */
static void dfccl_ctx_defaults(struct dfccl_rank_ctx *ctx)
{
    dfccl_config_defaults(&ctx->cfg, ctx->backend == DFCCL_BACKEND_HOST);
}

static dfccl_status_t dfccl_ctx_alloc_mem(struct dfccl_rank_ctx *ctx)
{
    const dfccl_backend_ops_t *be = ctx->be;
    dfccl_daemon_args_t *a        = &ctx->args;
    uint32_t nb = (uint32_t)ctx->cfg.max_blocks, mc = (uint32_t)ctx->cfg.max_colls;
    void *p;

#define DFCCL_DEV(_field, _bytes)                                              \
    do {                                                                       \
        DFCCL_CHECK(be->dev_alloc(ctx, (_bytes), &p));                         \
        ctx->dev_bytes += (_bytes);                                            \
        a->_field = p;                                                         \
    } while (0)
#define DFCCL_MAPPED(_host, _field, _bytes)                                    \
    do {                                                                       \
        DFCCL_CHECK(be->host_alloc(ctx, (_bytes), &p));                        \
        ctx->_host = p;                                                        \
        a->_field  = be->host_dev_ptr(ctx, p);                                 \
    } while (0)

    a->sq_entries  = (uint32_t)ctx->cfg.sq_entries;
    a->log_entries = (uint32_t)ctx->cfg.sq_entries;
    a->sq_window   = (uint32_t)ctx->cfg.sq_window;
    a->cq_entries  = mc + 1; /* every collective in flight once: never full */
    a->max_colls   = mc;
    a->max_blocks  = nb;
    a->nblocks     = nb;
    a->spin_head   = ctx->cfg.spin_head;
    a->spin_min    = ctx->cfg.spin_min;
    a->spin_fresh  = ctx->cfg.spin_fresh;
    a->spin_crowd  = ctx->cfg.spin_crowd;
    a->spin_sticky = ctx->cfg.spin_sticky;
    a->priority_order = (uint32_t)ctx->cfg.priority_order;
    a->look_arrived   = ctx->cfg.arrivals == DFCCL_ARRIVALS_ALWAYS ? DFCCL_K_ARRIVALS_ALWAYS :
                        ctx->cfg.arrivals == DFCCL_ARRIVALS_STUCK  ? DFCCL_K_ARRIVALS_STUCK :
                                                                     DFCCL_K_ARRIVALS_OFF;
    a->quit_ns     = (uint64_t)ctx->cfg.quit_us * 1000ull;

    DFCCL_MAPPED(sq, sq, sizeof(dfccl_sqw_t) * a->sq_entries);
    DFCCL_MAPPED(sq_ctrl, sq_ctrl, sizeof(dfccl_sq_ctrl_t));
    DFCCL_MAPPED(cq, cq, sizeof(uint64_t) * a->cq_entries * nb);
    DFCCL_MAPPED(cq_ctrl, cq_ctrl, sizeof(dfccl_cq_ctrl_t) * nb);
    DFCCL_MAPPED(stats, stats, sizeof(dfccl_block_stats_t) * nb);
    DFCCL_MAPPED(abort_flag, abort_flag, DFCCL_CACHELINE);
    DFCCL_MAPPED(progress, progress, sizeof(uint64_t) * (size_t)mc * nb);

    DFCCL_DEV(log, sizeof(dfccl_sqw_t) * a->log_entries);
    DFCCL_DEV(quit_epoch, DFCCL_CACHELINE);
    DFCCL_DEV(abort_dev, DFCCL_CACHELINE);
    DFCCL_DEV(cancels, DFCCL_CACHELINE);
    DFCCL_DEV(log_head, sizeof(uint64_t) * nb);
    DFCCL_DEV(sq_next, DFCCL_CACHELINE);
    DFCCL_DEV(cq_tail, sizeof(uint64_t) * nb);
    DFCCL_DEV(task_count, sizeof(uint32_t) * nb);
    DFCCL_DEV(arrivals, sizeof(uint32_t) * nb);
    DFCCL_DEV(tasks, sizeof(dfccl_task_t) * (size_t)mc * nb);
    DFCCL_DEV(colls, sizeof(dfccl_coll_static_t) * mc);
    DFCCL_DEV(chans, sizeof(dfccl_chan_t) * (size_t)mc * nb);
    DFCCL_DEV(dyn, sizeof(dfccl_dyn_t) * (size_t)mc * nb);
    DFCCL_DEV(ll_scratch, (size_t)DFCCL_LL_MAX_BYTES * nb);
#undef DFCCL_DEV
#undef DFCCL_MAPPED

    ctx->cq_head  = calloc(nb, sizeof(uint64_t));
    ctx->cqe_seen = calloc(mc, sizeof(uint32_t));
    ctx->cqe_need = calloc(mc, sizeof(uint32_t));
    ctx->colls    = calloc(mc, sizeof(dfccl_coll_t));
    if (ctx->cq_head == NULL || ctx->cqe_seen == NULL || ctx->cqe_need == NULL ||
        ctx->colls == NULL) {
        return dfccl_error(DFCCL_ERR_NO_MEMORY, "dfcclInit: out of host memory");
    }
    return DFCCL_OK;
}

static void dfccl_ctx_free_mem(struct dfccl_rank_ctx *ctx)
{
    const dfccl_backend_ops_t *be = ctx->be;
    dfccl_daemon_args_t *a        = &ctx->args;

    if (be == NULL) {
        return;
    }
    be->host_free(ctx, ctx->sq);
    be->host_free(ctx, ctx->sq_ctrl);
    be->host_free(ctx, ctx->cq);
    be->host_free(ctx, ctx->cq_ctrl);
    be->host_free(ctx, ctx->stats);
    be->host_free(ctx, ctx->abort_flag);
    be->host_free(ctx, ctx->progress);
    be->dev_free(ctx, a->log);
    be->dev_free(ctx, a->quit_epoch);
    be->dev_free(ctx, a->abort_dev);
    be->dev_free(ctx, a->cancels);
    be->dev_free(ctx, a->log_head);
    be->dev_free(ctx, a->sq_next);
    be->dev_free(ctx, a->cq_tail);
    be->dev_free(ctx, a->task_count);
    be->dev_free(ctx, a->arrivals);
    be->dev_free(ctx, a->tasks);
    be->dev_free(ctx, (void *)a->colls);
    be->dev_free(ctx, (void *)a->chans);
    be->dev_free(ctx, a->dyn);
    be->dev_free(ctx, a->ll_scratch);
    free(ctx->cq_head);
    free(ctx->cqe_seen);
    free(ctx->cqe_need);
    for (int i = 0; ctx->colls != NULL && i < ctx->cfg.max_colls; i++) {
        dfccl_coll_release(ctx, i);
    }
    free(ctx->colls);
    free(ctx->fault_held);
}

static void *dfccl_poller_main(void *arg)
{
    struct dfccl_rank_ctx *ctx = arg;

    /* Short sleeps while collectives are in flight: the default 50 us
     * timer slack would add more than a small collective takes. */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);

    for (;;) {
        uint64_t gen = __atomic_load_n(&ctx->kick_gen, __ATOMIC_SEQ_CST);
        int busy, app_polls, strag;

        if (__atomic_load_n(&ctx->poller_stop, __ATOMIC_ACQUIRE)) {
            break;
        }
        /* While an application thread polls the completion queue itself
         * (dfcclWait spinning, dfcclProgress from an MPI progress loop) this
         * thread stays out of its way: it naps without polling, so the two
         * never take the context's locks at the same moment (an application
         * thread that finds a lock held may sleep in the kernel on a
         * collective's way). It naps rather than waiting on the condition, so that a kick
         * finds no waiter to wake through the kernel. It polls again once
         * the application thread has not polled for DFCCL_APP_POLL_NS. */
        app_polls = dfccl_since(dfccl_time_ns(),
                                __atomic_load_n(&ctx->app_poll_ns, __ATOMIC_RELAXED)) <
                    DFCCL_APP_POLL_NS;
        if (app_polls) {
            struct timespec ts = {0, ctx->backend == DFCCL_BACKEND_HOST ? 20000 : 50000};
            nanosleep(&ts, NULL);
            continue;
        }
        if (dfccl_ctx_progress(ctx) > 0) {
            continue;
        }
        pthread_mutex_lock(&ctx->lock);
        busy  = ctx->inflight > 0 || ctx->npending > 0 || ctx->ndeferred > 0;
        strag = ctx->nstrag > 0 ? 1 + ctx->strag_watch : 0;
        pthread_mutex_unlock(&ctx->lock);
        /* Naps, on the host backend while collectives are in flight, and
         * while a peer has started a run of a straggler-tolerant collective
         * that this rank has not: the early ranks of that run may ask for
         * a relay any moment, and nothing else wakes this thread for it
         * (docs/stragglers.md). */
        if ((busy && ctx->backend == DFCCL_BACKEND_HOST) || (!busy && strag == 2)) {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        } else if (busy) {
            sched_yield(); /* collectives in flight, nobody else polls */
        } else {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            /* straggler-tolerant collectives registered: a look each ms */
            ts.tv_nsec += (strag ? 1 : 10) * 1000 * 1000;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            dfccl_ctx_wait_kick(ctx, gen, &ts);
        }
    }
    return NULL;
}

dfccl_status_t dfcclInit(const dfccl_config_t *config, dfccl_rank_ctx_t *ctx_p)
{
    struct dfccl_rank_ctx *ctx;
    dfccl_status_t st;

    if (ctx_p == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclInit: ctx_p is NULL");
    }
    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL) {
        return dfccl_error(DFCCL_ERR_NO_MEMORY, "dfcclInit: out of host memory");
    }
    if (config != NULL) {
        ctx->cfg = *config;
    } else if ((st = dfcclConfigInit(&ctx->cfg)) != DFCCL_OK) {
        free(ctx);
        return st;
    }
    st = dfccl_config_check(&ctx->cfg, "dfcclInit");
    if (st != DFCCL_OK) {
        free(ctx);
        return st;
    }
    dfccl_log_level = ctx->cfg.verbose;
    ctx->uid = ((uint64_t)getpid() << 32) ^ dfccl_time_ns();
    {
        /* once per process: segments of jobs that died as a whole */
        static int swept;
        if (!__atomic_exchange_n(&swept, 1, __ATOMIC_ACQ_REL)) {
            dfccl_shm_sweep();
        }
    }
    pthread_mutex_init(&ctx->lock, NULL);
    pthread_mutex_init(&ctx->cq_lock, NULL);
    pthread_cond_init(&ctx->cond, NULL);
    ctx->coll_release  = dfccl_coll_release;
    ctx->coll_resolve  = dfccl_coll_resolve_deferred;
    ctx->kick          = dfccl_ctx_kick;
    ctx->fault_progress = dfccl_fault_progress;
    ctx->fault_found    = dfccl_fault_found;
    ctx->group_profile = dfccl_profile_group;
    ctx->group_born    = dfccl_fault_group_born;
    ctx->group_done     = dfccl_refresh_done;
    ctx->group_register = dfccl_refresh_register;
    ctx->group_retire   = dfccl_refresh_retire;

    st = dfccl_ctx_pick_backend(ctx);
    if (st != DFCCL_OK) {
        goto err_free;
    }
    dfccl_ctx_defaults(ctx);
    if (ctx->cfg.sigusr1) {
        st = dfccl_sigusr1_install(ctx);
        if (st != DFCCL_OK) {
            goto err_free;
        }
    }
    st = ctx->be->init(ctx);
    if (st != DFCCL_OK) {
        goto err_free;
    }
    st = dfccl_ctx_alloc_mem(ctx);
    if (st != DFCCL_OK) {
        goto err_mem;
    }
    if (ctx->cfg.progress == DFCCL_PROGRESS_THREAD) {
        if (pthread_create(&ctx->poller, NULL, dfccl_poller_main, ctx) != 0) {
            st = dfccl_error(DFCCL_ERR_SYSTEM, "dfcclInit: cannot start the poller thread: %m");
            goto err_mem;
        }
        ctx->poller_started = 1;
    }
    dfccl_info("rank context on backend %s: %d blocks, %d collectives max", ctx->be->name,
               ctx->cfg.max_blocks, ctx->cfg.max_colls);
    *ctx_p = ctx;
    return DFCCL_OK;

err_mem:
    dfccl_ctx_free_mem(ctx);
    ctx->be->fini(ctx);
err_free:
    pthread_mutex_destroy(&ctx->lock);
    pthread_mutex_destroy(&ctx->cq_lock);
    pthread_cond_destroy(&ctx->cond);
    free(ctx);
    return st;
}

/* A diagnostic build (DFCCL_STAGE_TIMES): each block's average time per
 * completed collective to reach each stage, to stderr. */
static void dfccl_ctx_print_stages(struct dfccl_rank_ctx *ctx)
{
#ifdef DFCCL_STAGE_TIMES
    static const char *const names[DFCCL_NSTAGES] = {
        "taken", "start", "credit", "sent0", "arrived0", "reduced",
        "sent1", "arrived1", "copied", "done", "cqe"};

    for (uint32_t b = 0; b < ctx->args.max_blocks; b++) {
        const dfccl_block_stats_t *bs = &ctx->stats[b];
        char line[512];
        int len = 0;
        if (bs->idle_passes != 0) {
            const double n = (double)bs->idle_passes * 1e3;
            fprintf(stderr, "dfccl idle passes, pid %d block %u: %llu, %.3f us each (poll %.3f, "
                    "barrier %.3f, rest %.3f)\n", (int)getpid(), b,
                    (unsigned long long)bs->idle_passes, (double)bs->idle_pass_ns / n,
                    (double)bs->idle_seg_ns[0] / n, (double)bs->idle_seg_ns[1] / n,
                    (double)bs->idle_seg_ns[2] / n);
        }
        if (bs->stage_n == 0) {
            continue;
        }
        for (int i = 1; i < DFCCL_NSTAGES && len < (int)sizeof(line) - 32; i++) {
            len += snprintf(line + len, sizeof(line) - (size_t)len, " %s %.2f", names[i],
                            (double)bs->stage_ns[i] / (double)bs->stage_n / 1e3);
        }
        fprintf(stderr, "dfccl stages (us per collective), pid %d block %u, %llu done:%s\n",
                (int)getpid(), b, (unsigned long long)bs->stage_n, line);
    }
#else
    (void)ctx;
#endif
}

dfccl_status_t dfcclDestroy(dfccl_rank_ctx_t ctx)
{
    dfccl_status_t st = DFCCL_OK;

    if (ctx == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclDestroy: ctx is NULL");
    }
    (void)dfccl_ctx_device_lost(ctx);
    dfccl_coll_strag_settle(ctx);
    dfccl_refresh_settle(ctx);
    pthread_mutex_lock(&ctx->lock);
    if ((ctx->inflight > 0 || ctx->npending > 0) && !ctx->aborted && !ctx->device_lost) {
        uint64_t n = ctx->inflight;
        pthread_mutex_unlock(&ctx->lock);
        return dfccl_error(DFCCL_ERR_BUSY, "dfcclDestroy: %llu collective(s) still in flight; "
                           "wait for them (dfcclWait) before destroying the context",
                           (unsigned long long)n);
    }
    if (ctx->launched_ever && !ctx->aborted && !ctx->device_lost) {
        ctx->exit_posted = 1;
        st = dfccl_ctx_submit(ctx, DFCCL_SQE_EXIT, -1, NULL, NULL);
    }
    pthread_mutex_unlock(&ctx->lock);

    /* The exit SQE makes every block return; a block that quit before
     * reading it is relaunched to read it. */
    for (int tries = 0; st == DFCCL_OK && ctx->launched_ever && !ctx->aborted && !ctx->device_lost;
         tries++) {
        int exited = 1;
        ctx->be->wait_idle(ctx);
        for (uint32_t b = 0; b < ctx->args.nblocks; b++) {
            if (!__atomic_load_n(&ctx->stats[b].exited, __ATOMIC_ACQUIRE)) {
                exited = 0;
            }
        }
        if (exited) {
            break;
        }
        pthread_mutex_lock(&ctx->lock);
        st = dfccl_ctx_maybe_launch(ctx, 1);
        pthread_mutex_unlock(&ctx->lock);
    }
    if (ctx->aborted && !ctx->device_lost) {
        ctx->be->wait_idle(ctx);
    }
    dfccl_ctx_print_stages(ctx);
    if (ctx->poller_started) {
        __atomic_store_n(&ctx->poller_stop, 1, __ATOMIC_RELEASE);
        dfccl_ctx_kick(ctx);
        pthread_join(ctx->poller, NULL);
    }
    /* the proxy sends what the daemon published last, then stops: before
     * the connector memory goes */
    dfccl_net_stop(ctx);
    for (int i = 0; i < ctx->norphans; i++) {
        ctx->be->host_free(ctx, ctx->orphans[i]);
    }
    free(ctx->orphans);
    dfccl_refresh_release(ctx);
    while (ctx->groups != NULL) {
        struct dfccl_group *g = ctx->groups;
        ctx->groups           = g->next;
        dfccl_group_free(g);
    }
    while (ctx->pend_head != NULL) {
        struct dfccl_pending *p = ctx->pend_head;
        ctx->pend_head          = p->next;
        free(p);
    }
    dfccl_ctx_free_mem(ctx);
    ctx->be->fini(ctx);
    pthread_mutex_destroy(&ctx->lock);
    pthread_mutex_destroy(&ctx->cq_lock);
    pthread_cond_destroy(&ctx->cond);
    free(ctx);
    return st;
}

dfccl_status_t dfcclAbort(dfccl_rank_ctx_t ctx)
{
    if (ctx == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclAbort: ctx is NULL");
    }
    dfccl_ctx_abort(ctx, -1, DFCCL_ERR_ABORTED, "the rank context was aborted by dfcclAbort");
    return DFCCL_OK;
}

dfccl_status_t dfcclBatchStart(dfccl_rank_ctx_t ctx)
{
    if (ctx == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclBatchStart: ctx is NULL");
    }
    pthread_mutex_lock(&ctx->lock);
    ctx->batch_depth++;
    pthread_mutex_unlock(&ctx->lock);
    return DFCCL_OK;
}

dfccl_status_t dfcclBatchEnd(dfccl_rank_ctx_t ctx)
{
    dfccl_status_t st = DFCCL_OK;

    if (ctx == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclBatchEnd: ctx is NULL");
    }
    pthread_mutex_lock(&ctx->lock);
    if (ctx->batch_depth == 0) {
        pthread_mutex_unlock(&ctx->lock);
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclBatchEnd without dfcclBatchStart");
    }
    if (--ctx->batch_depth == 0) {
        dfccl_ctx_drain_pending(ctx);
        st = dfccl_ctx_maybe_launch(ctx, 0);
    }
    pthread_mutex_unlock(&ctx->lock);
    dfccl_ctx_kick(ctx);
    return st;
}

dfccl_status_t dfcclProgress(dfccl_rank_ctx_t ctx, int *ncompleted_p)
{
    int n;

    if (ctx == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclProgress: ctx is NULL");
    }
    __atomic_store_n(&ctx->app_poll_ns, dfccl_time_ns(), __ATOMIC_RELAXED);
    n = dfccl_ctx_progress(ctx);
    if (ncompleted_p != NULL) {
        *ncompleted_p = n;
    }
    return DFCCL_OK;
}

dfccl_status_t dfcclSynchronize(dfccl_rank_ctx_t ctx)
{
    dfccl_status_t st;

    if (ctx == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclSynchronize: ctx is NULL");
    }
    if (ctx->be->synchronize != NULL) {
        return ctx->be->synchronize(ctx);
    }
    /* Host backend: like cudaDeviceSynchronize, wait until the daemon is
     * off the device, and keep it off while waiting. */
    pthread_mutex_lock(&ctx->lock);
    ctx->sync_pending++;
    pthread_mutex_unlock(&ctx->lock);
    st = ctx->be->wait_idle(ctx);
    pthread_mutex_lock(&ctx->lock);
    ctx->sync_pending--;
    dfccl_ctx_maybe_launch(ctx, 0);
    pthread_mutex_unlock(&ctx->lock);
    dfccl_ctx_kick(ctx);
    return st;
}

dfccl_status_t dfcclGetStats(dfccl_rank_ctx_t ctx, dfccl_stats_t *s)
{
    if (ctx == NULL || s == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclGetStats: NULL argument");
    }
    memset(s, 0, sizeof(*s));
    pthread_mutex_lock(&ctx->cq_lock);
    s->collectives = ctx->completed;
    pthread_mutex_unlock(&ctx->cq_lock);
    for (int b = 0; b < ctx->cfg.max_blocks; b++) {
        const dfccl_block_stats_t *bs = &ctx->stats[b];
        s->preemptions   += __atomic_load_n(&bs->preemptions, __ATOMIC_RELAXED);
        s->quits         += __atomic_load_n(&bs->quits, __ATOMIC_RELAXED);
        s->context_loads += __atomic_load_n(&bs->context_loads, __ATOMIC_RELAXED);
    }
    pthread_mutex_lock(&ctx->lock);
    s->launches   = ctx->launches;
    s->peer_relaunches = ctx->peer_relaunches;
    s->submitted  = ctx->submitted;
    s->registered = ctx->nregistered;
    s->device_bytes = ctx->dev_bytes;
    for (int i = 0; i < ctx->cfg.max_colls; i++) {
        if (ctx->colls[i].state != DFCCL_COLL_FREE) {
            s->connector_bytes += ctx->colls[i].bytes;
            s->oneshot += ctx->colls[i].st.algo == DFCCL_K_ALGO_ONESHOT;
            s->twoshot += ctx->colls[i].st.algo == DFCCL_K_ALGO_TWOSHOT;
        }
    }
    s->device_bytes += s->connector_bytes;
    s->blocks = ctx->launched_ever ? (int)ctx->args.nblocks : 0;
    s->straggler_splits = ctx->strag_splits;
    s->straggler_relays = ctx->strag_relays;
    pthread_mutex_unlock(&ctx->lock);
    s->running = ctx->be->running(ctx);
    return DFCCL_OK;
}

dfccl_backend_t dfcclGetBackend(dfccl_rank_ctx_t ctx)
{
    return ctx != NULL ? ctx->backend : DFCCL_BACKEND_AUTO;
}
