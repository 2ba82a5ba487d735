/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rank context: daemon memory, the submission queue (one producer, the
 * host, under the context lock), the per-block completion rings (scanned by
 * the poller), the poller thread, and the daemon's life cycle. The daemon is
 * launched at the first submission and relaunched after a voluntary quit
 * when a new SQE arrives or when fewer CQEs than SQEs have been seen.
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
static void dfccl_ctx_complete(struct dfccl_rank_ctx *ctx, int id, dfccl_status_t status);

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

    DFCCL_DEV(log, sizeof(dfccl_sqw_t) * a->log_entries);
    DFCCL_DEV(quit_epoch, DFCCL_CACHELINE);
    DFCCL_DEV(abort_dev, DFCCL_CACHELINE);
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
    be->dev_free(ctx, a->log);
    be->dev_free(ctx, a->quit_epoch);
    be->dev_free(ctx, a->abort_dev);
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
}

/*
 * Wake the poller and dfcclWait callers: tell threads waiting on ctx->cond
 * that something changed. A waiter counts itself in cond_waiters and then
 * reads kick_gen, both under cq_lock and sequentially consistent; a kick
 * bumps kick_gen and then reads cond_waiters. So either the kick sees the
 * waiter and broadcasts under the lock, or the waiter sees the new
 * generation and does not wait. With no waiter (the common case: the
 * application thread polls, the poller naps) a kick takes no lock: a
 * submission no longer queues behind the poller's hold of cq_lock.
 */
void dfccl_ctx_kick(struct dfccl_rank_ctx *ctx)
{
    __atomic_add_fetch(&ctx->kick_gen, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&ctx->cond_waiters, __ATOMIC_SEQ_CST) != 0) {
        pthread_mutex_lock(&ctx->cq_lock);
        pthread_cond_broadcast(&ctx->cond);
        pthread_mutex_unlock(&ctx->cq_lock);
    }
}

/* Wait on ctx->cond until `deadline` (CLOCK_REALTIME) unless a kick came
 * after generation `gen` was read (see dfccl_ctx_kick). */
void dfccl_ctx_wait_kick(struct dfccl_rank_ctx *ctx, uint64_t gen, const struct timespec *deadline)
{
    pthread_mutex_lock(&ctx->cq_lock);
    __atomic_add_fetch(&ctx->cond_waiters, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&ctx->kick_gen, __ATOMIC_SEQ_CST) == gen) {
        pthread_cond_timedwait(&ctx->cond, &ctx->cq_lock, deadline);
    }
    __atomic_sub_fetch(&ctx->cond_waiters, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&ctx->cq_lock);
}

/*
 * The grid of the next launch: as many blocks as the registered collective
 * with the most channels needs (at least one), so a daemon serving small
 * collectives holds one SM, not DFCCL_MAX_BLOCKS. Blocks that did not run in
 * the last launch start from the current end of the SQE log: every SQE
 * logged meanwhile was for fewer channels (dfccl_ctx_drain_pending holds
 * back larger ones while a smaller grid runs), and a log position read after
 * the ring wrapped would be wrong. The daemon is not running. ctx->lock held.
 */
static dfccl_status_t dfccl_ctx_size_grid(struct dfccl_rank_ctx *ctx)
{
    uint32_t grid = 1, prev = ctx->args.nblocks;

    for (int id = 0; id < ctx->cfg.max_colls; id++) {
        if (ctx->colls[id].state != DFCCL_COLL_FREE &&
            (uint32_t)ctx->colls[id].st.nchannels > grid) {
            grid = (uint32_t)ctx->colls[id].st.nchannels;
        }
    }
    if (grid > (uint32_t)ctx->cfg.max_blocks) {
        grid = (uint32_t)ctx->cfg.max_blocks;
    }
    if (ctx->exit_posted && grid > prev) {
        /* relaunched only so that blocks read the exit SQE: a block added
         * now would start past it and never exit */
        grid = prev;
    }
    if (grid > prev && ctx->launched_ever) {
        uint64_t heads[DFCCL_MAX_CHANNELS];
        uint64_t tail = __atomic_load_n(&ctx->sq_ctrl->head, __ATOMIC_ACQUIRE);
        for (uint32_t b = prev; b < grid; b++) {
            heads[b - prev] = tail;
        }
        DFCCL_CHECK(ctx->be->memcpy_h2d(ctx, &ctx->args.log_head[prev], heads,
                                        (grid - prev) * sizeof(uint64_t)));
    }
    ctx->args.nblocks = grid;
    return DFCCL_OK;
}

/* Launch the daemon if it is not running and has work. ctx->lock held. */
static dfccl_status_t dfccl_ctx_maybe_launch(struct dfccl_rank_ctx *ctx, int force)
{
    uint64_t now;
    int new_sqe = 0, peer_bell = 0;

    if (ctx->sync_pending || ctx->aborted) {
        return DFCCL_OK;
    }
    if (ctx->exit_posted && !force) {
        return DFCCL_OK;
    }
    now = dfccl_time_ns();
    if (!force) {
        /* Asking the backend whether the daemon runs is a driver call
         * (cudaEventQuery) that every progress pass of the poller and of
         * the waiting threads would otherwise make, under ctx->lock: it is
         * asked only when there is a reason to launch. SQEs that the
         * leader has fetched already (the SQ head it publishes) are no
         * reason: they are in the daemon's log, and if it quit before
         * running them the stuck path below relaunches it. */
        int waiting = ctx->inflight > ctx->ndeferred;
        new_sqe     = ctx->sq_tail != ctx->launched_tail &&
                  __atomic_load_n(&ctx->sq_ctrl->head, __ATOMIC_ACQUIRE) != ctx->sq_tail;
        if (!new_sqe && !waiting) {
            return DFCCL_OK;
        }
        /* A daemon of the latest launch whose block 0 has not said it is
         * quitting takes every entry published before this read (the
         * handshake in dfccl_daemon_block; the fence of
         * dfccl_ctx_drain_pending is this side's): no need to ask. */
        if (new_sqe && ctx->launched_ever &&
            __atomic_load_n(&ctx->sq_ctrl->quitting, __ATOMIC_ACQUIRE) != ctx->launches) {
            return DFCCL_OK;
        }
        /* Stuck work only: leave the device alone for a while, so that a
         * device synchronization waiting for the daemon can slip in. The
         * gap doubles with every relaunch that found nothing new (up to
         * 128x), and resets when a collective completes or an SQE arrives,
         * or when a peer submitted since the last launch (its bell moved,
         * on this host) or sent something (the net proxy received it):
         * what the stuck work waits for may have come,
         * and a daemon left off for the rest of a long gap would hold up
         * every rank. While a long collective runs, the daemon is asked
         * about at most once per relaunch_us. */
        if (!new_sqe) {
            uint64_t base = (uint64_t)ctx->cfg.relaunch_us * 1000ull;
            uint32_t k    = ctx->stuck_relaunches < 7 ? ctx->stuck_relaunches : 7;
            uint64_t since_launch = dfccl_since(now, ctx->last_launch_ns);

            if (since_launch < base || dfccl_since(now, ctx->running_seen_ns) < base) {
                return DFCCL_OK;
            }
            if (since_launch < (base << k)) {
                if (dfccl_group_peer_bells(ctx) == ctx->bells_at_launch) {
                    return DFCCL_OK;
                }
                peer_bell = 1;
            }
        }
    }
    if (ctx->be->running(ctx)) {
        if (!new_sqe && !force) {
            ctx->running_seen_ns = now;
        }
        return DFCCL_OK;
    }
    if (!force) {
        if (new_sqe || peer_bell) {
            ctx->stuck_relaunches = 0;
        } else {
            ctx->stuck_relaunches++;
        }
    }
    ctx->peer_relaunches += (uint64_t)peer_bell;
    ctx->bells_at_launch = dfccl_group_peer_bells(ctx);
    DFCCL_CHECK(dfccl_ctx_size_grid(ctx));
    ctx->launched_tail  = ctx->sq_tail;
    ctx->last_launch_ns = now;
    ctx->launches++;
    ctx->args.launch_epoch = ctx->launches;
    ctx->launched_ever = 1;
    return ctx->be->launch(ctx);
}

/* Write an entry into the SQ ring: each word carries its position's flag
 * (dfccl_sqw_t); `follow` entries after it were written before it. */
static void dfccl_ctx_write_sqw(struct dfccl_rank_ctx *ctx, uint64_t pos, const dfccl_sqe_t *e,
                                uint64_t follow)
{
    uint64_t *w = ctx->sq[pos % ctx->args.sq_entries].w, flag = (pos + 1) << 32;
    uint32_t v[DFCCL_SQW_WORDS];

    if (follow > DFCCL_SQW_FOLLOW_MAX) {
        follow = DFCCL_SQW_FOLLOW_MAX; /* the rest is taken in later passes */
    }
    v[DFCCL_SQW_KIND]      = (uint32_t)e->kind | (uint32_t)(follow << DFCCL_SQW_FOLLOW_SHIFT) |
                         (e->ctx_new ? DFCCL_SQW_CTX_NEW : 0u);
    v[DFCCL_SQW_COLL]      = (uint32_t)e->coll_id;
    v[DFCCL_SQW_SEND_LO]   = (uint32_t)e->sendbuff;
    v[DFCCL_SQW_SEND_HI]   = (uint32_t)(e->sendbuff >> 32);
    v[DFCCL_SQW_RECV_LO]   = (uint32_t)e->recvbuff;
    v[DFCCL_SQW_RECV_HI]   = (uint32_t)(e->recvbuff >> 32);
    v[DFCCL_SQW_NCHANNELS] = e->nchannels;
    v[DFCCL_SQW_PRIORITY]  = (uint32_t)e->priority;
    if (e->kind == DFCCL_SQE_RUN && e->coll_id >= 0 && e->coll_id < ctx->cfg.max_colls) {
        /* its blocks' CQEs to wait for (before the entry is visible) */
        __atomic_store_n(&ctx->cqe_need[e->coll_id], e->nchannels, __ATOMIC_RELAXED);
    }
    for (int i = 0; i < DFCCL_SQW_WORDS; i++) {
        __atomic_store_n(&w[i], flag | v[i], __ATOMIC_RELAXED);
    }
}

/*
 * Move host-queued SQEs into the SQ while it has room. The first entry of
 * a batch is written into the ring last, so the daemon's leader, reading in
 * order, finds it only when the whole batch is there and takes the batch in
 * one pass: a batch is scheduled (and ordered by priority) together.
 * ctx->lock held.
 */
static void dfccl_ctx_drain_pending(struct dfccl_rank_ctx *ctx)
{
    uint32_t cap = ctx->args.sq_entries;
    uint64_t head, first = ctx->sq_tail;
    dfccl_sqe_t e0; /* the batch's first entry, written last */

    if (ctx->batch_depth > 0 || ctx->pend_head == NULL) {
        return;
    }
    memset(&e0, 0, sizeof(e0));
    head = __atomic_load_n(&ctx->sq_ctrl->head, __ATOMIC_ACQUIRE);
    while (ctx->pend_head != NULL && ctx->sq_tail - head < cap) {
        struct dfccl_pending *p = ctx->pend_head;
        dfccl_sqe_t e           = p->sqe;
        /* The running grid is too small for this collective: it (and, in
         * order, everything after it) waits, and the daemon is asked (once
         * per launch) to quit so that the next launch is large enough. */
        int grow = p->sqe.kind == DFCCL_SQE_RUN && p->sqe.nchannels > ctx->args.nblocks;
        /* Device memory was mapped (a peer's connector segment opened, one
         * of ours allocated) while this launch may have been running: the
         * mapping works for a running kernel, but tools that check every
         * access (compute-sanitizer's memcheck) know only the allocations
         * made before the launch, and drop the running daemon's writes to
         * it as out of bounds. The run waits for a launch that started
         * after the mapping; this costs one relaunch per new segment. */
        int remap  = p->sqe.kind == DFCCL_SQE_RUN && ctx->launches <= ctx->map_epoch;
        int resize = (grow || remap) && ctx->launched_ever && ctx->be->running(ctx);

        if (resize) {
            if (ctx->resize_epoch == ctx->launches) {
                break;
            }
            ctx->resize_epoch = ctx->launches;
            memset(&e, 0, sizeof(e));
            e.coll_id = -1;
            if (grow) {
                e.kind      = DFCCL_SQE_RESIZE;
                e.nchannels = p->sqe.nchannels;
            } else {
                e.kind     = DFCCL_SQE_REMAP;
                e.sendbuff = ctx->launches;
            }
        }
        if (ctx->sq_tail == first) {
            e0 = e;
        } else {
            dfccl_ctx_write_sqw(ctx, ctx->sq_tail, &e, 0);
        }
        ctx->sq_tail++;
        if (resize) {
            break;
        }
        ctx->pend_head = p->next;
        if (ctx->pend_head == NULL) {
            ctx->pend_tail = NULL;
        }
        ctx->npending--;
        free(p);
    }
    if (ctx->sq_tail != first) {
        /* the batch's other entries are visible before its first one */
        __atomic_thread_fence(__ATOMIC_RELEASE);
        dfccl_ctx_write_sqw(ctx, first, &e0, ctx->sq_tail - first - 1);
        /* the store half of the handshake with a quitting daemon (the load
         * is in dfccl_ctx_maybe_launch) */
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
    }
}

dfccl_status_t dfccl_ctx_submit(struct dfccl_rank_ctx *ctx, int kind, int coll_id,
                                const void *sendbuff, void *recvbuff)
{
    struct dfccl_pending *p = malloc(sizeof(*p));
    dfccl_status_t st;

    if (p == NULL) {
        return dfccl_error(DFCCL_ERR_NO_MEMORY, "submit: out of host memory");
    }
    memset(p, 0, sizeof(*p));
    if (ctx->inflight == 1 || ctx->last_done_ns == 0) {
        ctx->last_done_ns = dfccl_time_ns(); /* grace for a dead peer starts now */
    }
    p->sqe.kind     = kind;
    p->sqe.coll_id  = coll_id;
    p->sqe.sendbuff = (uint64_t)(uintptr_t)sendbuff;
    p->sqe.recvbuff = (uint64_t)(uintptr_t)recvbuff;
    if (kind == DFCCL_SQE_RUN) {
        p->sqe.nchannels = (uint32_t)ctx->colls[coll_id].st.nchannels;
        p->sqe.priority  = ctx->colls[coll_id].st.priority;
        p->sqe.ctx_new   = (uint32_t)ctx->colls[coll_id].ctx_new;
        ctx->colls[coll_id].ctx_new = 0;
        dfccl_group_ring(ctx->colls[coll_id].group);
    }
    /* ctx->lock held by the caller. FIFO: through the host queue whenever
     * it is not empty, so SQEs keep their order. */
    if (ctx->pend_tail != NULL) {
        ctx->pend_tail->next = p;
    } else {
        ctx->pend_head = p;
    }
    ctx->pend_tail = p;
    ctx->npending++;
    if (ctx->batch_depth > 0) {
        return DFCCL_OK; /* published at dfcclBatchEnd */
    }
    dfccl_ctx_drain_pending(ctx);
    st = dfccl_ctx_maybe_launch(ctx, kind == DFCCL_SQE_EXIT);
    dfccl_ctx_kick(ctx);
    return st;
}

/* Completion of one collective seen in a CQ ring: mark it and run its
 * callback (outside every lock). While the callback runs the collective is
 * COMPLETING: a thread that the callback woke (an MPI request completed)
 * may run it again at once; dfcclWait and dfcclQuery report it finished
 * only after the callback has returned. */
void dfccl_ctx_fail(struct dfccl_rank_ctx *ctx, int id, dfccl_status_t status)
{
    dfccl_ctx_complete(ctx, id, status);
}

static void dfccl_ctx_complete(struct dfccl_rank_ctx *ctx, int id, dfccl_status_t status)
{
    dfccl_coll_t *c = &ctx->colls[id];
    dfccl_callback_t cb;
    void *arg;
    uint64_t runs;

    pthread_mutex_lock(&ctx->lock);
    if (c->state != DFCCL_COLL_INFLIGHT) {
        pthread_mutex_unlock(&ctx->lock);
        dfccl_error(DFCCL_ERR_INTERNAL, "completion for collective %d which is not in flight",
                    id);
        return;
    }
    cb        = c->callback;
    arg       = c->callback_arg;
    runs      = c->runs;
    c->status = status;
    c->state  = DFCCL_COLL_COMPLETING;
    /* for the group's other ranks: this rank finished its part, or failed
     * it (then theirs cannot complete either: they fail with it, unless
     * they told us first) */
    if (status == DFCCL_OK) {
        dfccl_dir_publish_done(c->group, c->sig[6], runs);
    } else if (!c->fail_remote) {
        dfccl_dir_publish_fail(c->group, DFCCL_FAIL_RUN, c->sig[6], runs, status,
                               c->errmsg != NULL ? c->errmsg : dfcclGetErrorString(status));
    }
    c->fail_remote = 0;
    pthread_mutex_unlock(&ctx->lock);

    if (cb != NULL) {
        cb(id, status, arg);
    }

    pthread_mutex_lock(&ctx->lock);
    if (c->state == DFCCL_COLL_COMPLETING && c->runs == runs) {
        c->state = DFCCL_COLL_IDLE; /* else the callback's wake-up ran it again */
    }
    ctx->inflight--;
    pthread_mutex_unlock(&ctx->lock);
    dfccl_ctx_kick(ctx);
}

/*
 * Abort the context: the daemon's blocks return at their next poll, every
 * collective in flight completes with an error (`culprit` with `status`,
 * the others with DFCCL_ERR_ABORTED) carrying `msg`, and nothing runs any
 * more; the context can still be destroyed.
 */
static void dfccl_ctx_abort(struct dfccl_rank_ctx *ctx, int culprit, dfccl_status_t status,
                            const char *msg)
{
    int n = 0, *ids;

    pthread_mutex_lock(&ctx->lock);
    if (ctx->aborted) {
        pthread_mutex_unlock(&ctx->lock);
        return;
    }
    ctx->aborted = 1;
    __atomic_store_n(ctx->abort_flag, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&ctx->lock);
    ctx->be->wait_idle(ctx); /* every block has seen the flag */

    ids = malloc((size_t)ctx->cfg.max_colls * sizeof(int));
    pthread_mutex_lock(&ctx->lock);
    while (ctx->pend_head != NULL) {
        struct dfccl_pending *p = ctx->pend_head;
        ctx->pend_head          = p->next;
        free(p);
    }
    ctx->pend_tail = NULL;
    ctx->npending  = 0;
    for (int id = 0; ids != NULL && id < ctx->cfg.max_colls; id++) {
        dfccl_coll_t *c = &ctx->colls[id];
        if (c->state != DFCCL_COLL_INFLIGHT) {
            continue;
        }
        if (c->deferred) {
            c->deferred = 0;
            ctx->ndeferred--;
        }
        free(c->errmsg);
        c->errmsg = strdup(msg);
        ids[n++]  = id;
    }
    pthread_mutex_unlock(&ctx->lock);
    dfccl_set_last_error(msg);
    for (int i = 0; i < n; i++) {
        dfccl_ctx_complete(ctx, ids[i], ids[i] == culprit ? status : DFCCL_ERR_ABORTED);
    }
    free(ids);
    /* after the runs' own records, so that a burst of them cannot hide it:
     * every group's other ranks fail what this rank has not finished */
    pthread_mutex_lock(&ctx->lock);
    for (struct dfccl_group *g = ctx->groups; g != NULL; g = g->next) {
        dfccl_dir_publish_fail(g, DFCCL_FAIL_ALL, 0, 0, status, msg);
    }
    pthread_mutex_unlock(&ctx->lock);
}

/* ---- reports: who joined a collective, and where the ranks wait --------- */

/* A collective in flight this long is reported where it waits (to peers,
 * through the group's directory), at most this often per context. */
#define DFCCL_WHERE_AFTER_NS 200000000ull
#define DFCCL_WHERE_EVERY_NS 200000000ull
/* A peer whose health check has not run for this long is "not
 * responding": it runs every 10 ms while its poller or an application
 * thread polls. */
#define DFCCL_STALE_NS 1000000000ull

/* Text appended to a fixed buffer, cut short (with "...") when full. */
typedef struct {
    char  *buf;
    size_t len, o;
} dfccl_text_t;

static void dfccl_text_add(dfccl_text_t *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void dfccl_text_add(dfccl_text_t *t, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (t->o + 4 >= t->len) {
        return;
    }
    va_start(ap, fmt);
    n = vsnprintf(t->buf + t->o, t->len - t->o, fmt, ap);
    va_end(ap);
    if (n < 0 || t->o + (size_t)n >= t->len) {
        t->o = t->len - 4;
        snprintf(t->buf + t->o, 4, "...");
        t->o = t->len;
        return;
    }
    t->o += (size_t)n;
}

/* A list item: ", " before all but the first. */
#define DFCCL_TEXT_ITEM(t, ...)                                                \
    do {                                                                       \
        if ((t)->o > 0) {                                                      \
            dfccl_text_add((t), ", ");                                         \
        }                                                                      \
        dfccl_text_add((t), __VA_ARGS__);                                      \
    } while (0)

/* The state letter of process `pid` (/proc/<pid>/stat: R, S, D, T for
 * stopped, t for stopped by a tracer, Z...), 0 if it cannot be read. */
static char dfccl_proc_state(int pid)
{
    char path[64], line[512], *p;
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    n = fread(line, 1, sizeof(line) - 1, f);
    fclose(f);
    line[n] = '\0';
    p = strrchr(line, ')'); /* the command name may hold anything */
    return p != NULL && p[1] == ' ' ? p[2] : 0;
}

/* Read `bytes` of daemon-visible memory (device memory on GPUs). */
static int dfccl_ctx_peek(struct dfccl_rank_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    int ok;

    dfccl_error_quiet(1);
    ok = src != NULL && ctx->be->memcpy_d2h(ctx, dst, src, bytes) == DFCCL_OK;
    dfccl_error_quiet(0);
    return ok;
}

/*
 * Where collective `id` (in flight) stands on this rank, in the words of
 * dfccl_dir_reg_t: the least advanced channel that has started (else the
 * first), its loop and step, the primitive the ring runs there, and what
 * that primitive waits for, read from its connectors. ctx->lock held.
 */
static void dfccl_coll_where(struct dfccl_rank_ctx *ctx, int id, uint64_t now,
                             dfccl_dir_reg_t *w)
{
    const dfccl_coll_t *c         = &ctx->colls[id];
    const dfccl_coll_static_t *st = &c->st;
    const int n = st->nranks, nch = st->nchannels;
    dfccl_dyn_t dyn[DFCCL_MAX_CHANNELS];
    const dfccl_chan_t *ch;
    int best = -1;

    memset(w, 0, sizeof(*w));
    w->where_run  = c->runs;
    w->where_ns   = now;
    w->where_peer = -1;
    if (c->deferred) {
        w->where_wait = DFCCL_WAIT_START;
        w->where_peer = (st->rank + 1) % n; /* its registration is awaited */
        return;
    }
    if (nch < 1 || nch > DFCCL_MAX_CHANNELS ||
        !dfccl_ctx_peek(ctx, dyn, &ctx->args.dyn[(size_t)id * ctx->cfg.max_blocks],
                        (size_t)nch * sizeof(dfccl_dyn_t))) {
        return;
    }
    for (int k = 0; k < nch; k++) {
        if (c->chans[k].cnt == 0 || !dyn[k].started) {
            continue;
        }
        if (best < 0 || dyn[k].loop < dyn[best].loop ||
            (dyn[k].loop == dyn[best].loop && dyn[k].step < dyn[best].step)) {
            best = k;
        }
    }
    if (best < 0) {
        best = 0;
        while (best + 1 < nch && c->chans[best].cnt == 0) {
            best++;
        }
    }
    ch = &c->chans[best];
    w->where_ch   = (uint32_t)best;
    w->where_loop = dyn[best].loop;
    w->where_step = dyn[best].step;
    if (st->algo != DFCCL_K_ALGO_RING) {
        w->where_wait = DFCCL_WAIT_SHOT;
        return;
    }
    w->where_flags = dfccl_ring_step_prim(st, dyn[best].step);
    if ((w->where_flags & DFCCL_WHERE_RECV) && ch->recv_ctrl != NULL) {
        int ready = 0;
        if (st->proto == DFCCL_K_PROTO_LL) {
            uint32_t line[4];
            const char *at = ch->recv_data +
                             (dyn[best].recv_seq % st->nslots) * 2ull * st->slot_bytes;
            const uint32_t flag = (uint32_t)(dyn[best].recv_seq + 1);
            ready = dfccl_ctx_peek(ctx, line, at, sizeof(line)) && line[1] == flag &&
                    line[3] == flag;
        } else {
            uint64_t tail = 0;
            ready = dfccl_ctx_peek(ctx, &tail, &ch->recv_ctrl->tail, sizeof(tail)) &&
                    tail > dyn[best].recv_seq;
        }
        if (!ready) {
            w->where_wait = DFCCL_WAIT_RECV;
            w->where_peer = (st->rank + n - 1) % n;
            return;
        }
    }
    if ((w->where_flags & DFCCL_WHERE_SEND) && ch->send_ctrl != NULL) {
        uint64_t head = 0;
        if (dfccl_ctx_peek(ctx, &head, &ch->send_ctrl->head, sizeof(head)) &&
            dyn[best].send_seq - head >= st->nslots) {
            w->where_wait = DFCCL_WAIT_SEND;
            w->where_peer = (st->rank + 1) % n;
            return;
        }
    }
    w->where_wait = DFCCL_WAIT_READY;
}

/* dfccl_dir_reg_t's where words in words. */
static void dfccl_where_text(const dfccl_coll_t *c, const dfccl_dir_reg_t *w, dfccl_text_t *t)
{
    char prim[48];

    dfccl_prim_name(w->where_flags, prim, sizeof(prim));
    switch (w->where_wait) {
    case DFCCL_WAIT_START:
        dfccl_text_add(t, "waits for rank %d to register it", w->where_peer);
        return;
    case DFCCL_WAIT_SHOT:
        dfccl_text_add(t, "in its %s (channel %u) waits for the peers' data",
                       c->st.algo == DFCCL_K_ALGO_TWOSHOT ? "two-shot steps" : "one-shot exchange",
                       w->where_ch);
        return;
    case DFCCL_WAIT_UNKNOWN:
        dfccl_text_add(t, "position unknown");
        return;
    }
    dfccl_text_add(t, "at %s (step %u, loop %u, channel %u) ", prim, w->where_step,
                   w->where_loop, w->where_ch);
    if (w->where_wait == DFCCL_WAIT_RECV) {
        dfccl_text_add(t, "waits for data from rank %d", w->where_peer);
    } else if (w->where_wait == DFCCL_WAIT_SEND) {
        dfccl_text_add(t, "waits for rank %d to free a connector slot", w->where_peer);
    } else {
        dfccl_text_add(t, "is ready and waits for its daemon to run it");
    }
}

/*
 * The state of collective `id` (in flight) across its group, from what
 * every rank of this host publishes: which ranks joined this run and which
 * did not (and why: not registered yet, another collective registered in
 * its place, an earlier run), which of those that joined do not respond
 * (stopped, exited, no progress), and where each waits. One line into
 * `buf`. ctx->lock held.
 */
static void dfccl_coll_report(struct dfccl_rank_ctx *ctx, int id, uint64_t now, char *buf,
                              size_t len)
{
    const dfccl_coll_t *c = &ctx->colls[id];
    struct dfccl_group *g = c->group;
    const uint64_t reg = c->sig[6], run = c->runs;
    char yes_b[256], no_b[1024], dead_b[512], far_b[128], done_b[128], where_b[1536];
    dfccl_text_t yes = {yes_b, sizeof(yes_b), 0}, no = {no_b, sizeof(no_b), 0},
                 dead = {dead_b, sizeof(dead_b), 0}, far = {far_b, sizeof(far_b), 0},
                 done = {done_b, sizeof(done_b), 0}, where = {where_b, sizeof(where_b), 0},
                 out = {buf, len, 0};

    yes_b[0] = no_b[0] = dead_b[0] = far_b[0] = done_b[0] = where_b[0] = '\0';
    for (int r = 0; r < g->nranks; r++) {
        const dfccl_dir_t *d = dfccl_pool_dir_of(g, r);
        dfccl_dir_reg_t rr;
        uint64_t nreg, runs;
        int have;
        char state;

        if (r == g->rank) {
            dfccl_dir_reg_t w;
            DFCCL_TEXT_ITEM(&yes, "%d", r);
            dfccl_coll_where(ctx, id, now, &w);
            dfccl_text_add(&where, "%srank %d (this rank) ", where.o ? "; " : "", r);
            dfccl_where_text(c, &w, &where);
            continue;
        }
        if (d == NULL) {
            DFCCL_TEXT_ITEM(&far, "%d", r);
            continue;
        }
        nreg = __atomic_load_n(&d->nreg, __ATOMIC_ACQUIRE);
        if (nreg <= reg) {
            DFCCL_TEXT_ITEM(&no, "%d (registered %llu collective(s) on the group; this is #%llu)",
                            r, (unsigned long long)nreg, (unsigned long long)reg + 1);
            continue;
        }
        have = dfccl_dir_read_reg(d, reg, &rr);
        if (have && memcmp(rr.sig, c->sig, sizeof(rr.sig)) != 0) {
            char other[192];
            dfccl_coll_describe_sig(rr.sig, other, sizeof(other));
            DFCCL_TEXT_ITEM(&no, "%d (registered another collective at this position: %s)", r,
                            other);
            continue;
        }
        runs = __atomic_load_n(&d->runs[reg % DFCCL_DIR_RUNS], __ATOMIC_ACQUIRE);
        if (runs < run) {
            if (runs + 1 == run) {
                DFCCL_TEXT_ITEM(&no, "%d (has not started run %llu)", r,
                                (unsigned long long)run);
            } else {
                DFCCL_TEXT_ITEM(&no, "%d (has run it %llu time(s); this is run %llu)", r,
                                (unsigned long long)runs, (unsigned long long)run);
            }
            continue;
        }
        DFCCL_TEXT_ITEM(&yes, "%d", r);
        if (have && rr.done >= run) {
            DFCCL_TEXT_ITEM(&done, "%d", r);
            continue;
        }
        state = dfccl_proc_state(g->pids[r]);
        if (kill(g->pids[r], 0) != 0 && errno == ESRCH) {
            DFCCL_TEXT_ITEM(&dead, "%d (process %d has exited)", r, g->pids[r]);
        } else if (state == 'T' || state == 't') {
            DFCCL_TEXT_ITEM(&dead, "%d (process %d is stopped, by SIGSTOP or a debugger)", r,
                            g->pids[r]);
        } else if (dfccl_since(now, __atomic_load_n(&d->beat_ns, __ATOMIC_ACQUIRE)) >
                   DFCCL_STALE_NS) {
            DFCCL_TEXT_ITEM(&dead, "%d (process %d: its dfccl progress has not run for %.1f s)",
                            r, g->pids[r],
                            (double)dfccl_since(now, d->beat_ns) / 1e9);
        }
        dfccl_text_add(&where, "%srank %d ", where.o ? "; " : "", r);
        if (have && rr.where_run == run) {
            dfccl_where_text(c, &rr, &where);
            dfccl_text_add(&where, " (%.1f s ago)",
                           (double)dfccl_since(now, rr.where_ns) / 1e9);
        } else {
            dfccl_text_add(&where, "has not reported where it waits yet");
        }
    }
    dfccl_text_add(&out, "ranks joined: %s; ranks not joined: %s", yes.o ? yes_b : "none",
                   no.o ? no_b : "none");
    if (dead.o > 0) {
        dfccl_text_add(&out, "; joined but not responding: %s", dead_b);
    }
    if (far.o > 0) {
        dfccl_text_add(&out, "; on other hosts (not visible from here): %s", far_b);
    }
    if (done.o > 0) {
        dfccl_text_add(&out, "; finished their part: %s", done_b);
    }
    dfccl_text_add(&out, "; where: %s", where_b);
}

/* The report of every collective in flight, a line each, into `out`. */
static void dfccl_ctx_dump(struct dfccl_rank_ctx *ctx, FILE *out)
{
    const size_t len = 4096;
    char *line = malloc(len), label[192];
    uint64_t now = dfccl_time_ns();
    int any = 0;

    if (line == NULL) {
        return;
    }
    pthread_mutex_lock(&ctx->lock);
    for (int id = 0; id < ctx->cfg.max_colls; id++) {
        const dfccl_coll_t *c = &ctx->colls[id];
        if (c->state != DFCCL_COLL_INFLIGHT) {
            continue;
        }
        dfccl_coll_label(ctx, id, label, sizeof(label));
        dfccl_coll_report(ctx, id, now, line, len);
        fprintf(out, "dfccl[%d]: state: %s, run %llu, in flight for %.1f s: %s\n",
                (int)getpid(), label, (unsigned long long)c->runs,
                (double)dfccl_since(now, c->start_ns) / 1e9, line);
        any = 1;
    }
    if (!any) {
        fprintf(out, "dfccl[%d]: state: no collective in flight (%d registered, %llu "
                "completed)%s\n", (int)getpid(), ctx->nregistered,
                (unsigned long long)ctx->completed, ctx->aborted ? "; the context is aborted" :
                                                                   "");
    }
    pthread_mutex_unlock(&ctx->lock);
    fflush(out);
    free(line);
}

dfccl_status_t dfcclDumpState(dfccl_rank_ctx_t ctx, FILE *out)
{
    if (ctx == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclDumpState: ctx is NULL");
    }
    dfccl_ctx_dump(ctx, out != NULL ? out : stderr);
    return DFCCL_OK;
}

/* SIGUSR1s received (DFCCL_SIGUSR1): the handler only counts them; each
 * context's health check prints its state when the count moved. */
static volatile sig_atomic_t dfccl_sigusr1_count;

static void dfccl_sigusr1_handler(int sig)
{
    (void)sig;
    dfccl_sigusr1_count++;
}

/* Install the handler once per process, keeping SA_RESTART semantics for
 * the application's system calls. */
static dfccl_status_t dfccl_sigusr1_install(void)
{
    static int installed;
    struct sigaction sa;

    if (__atomic_exchange_n(&installed, 1, __ATOMIC_ACQ_REL)) {
        return DFCCL_OK;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = dfccl_sigusr1_handler;
    sa.sa_flags   = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, NULL) != 0) {
        __atomic_store_n(&installed, 0, __ATOMIC_RELEASE);
        return dfccl_error(DFCCL_ERR_SYSTEM, "dfcclInit: DFCCL_SIGUSR1=1 but the SIGUSR1 "
                           "handler cannot be installed: %m");
    }
    return DFCCL_OK;
}

/* A watchdog line waiting to be printed outside the lock. */
typedef struct {
    char *text[16];
    int   n;
} dfccl_lines_t;

/* The hang watchdog (DFCCL_WARN_S): collective `id` has been in flight
 * past its next report time: one line naming it and its group, who joined
 * and where they wait; the next report comes after twice the time. The
 * collective keeps waiting. ctx->lock held. */
static void dfccl_ctx_watchdog(struct dfccl_rank_ctx *ctx, int id, uint64_t now,
                               dfccl_lines_t *lines)
{
    dfccl_coll_t *c = &ctx->colls[id];
    const size_t len = 4096;
    uint64_t waited;
    char label[192], *line;

    if (c->warn_run != c->runs) {
        c->warn_run     = c->runs;
        c->warn_next_ns = (uint64_t)(ctx->cfg.warn_s * 1e9);
    }
    waited = dfccl_since(now, c->start_ns);
    if (waited < c->warn_next_ns || lines->n == 16 || (line = malloc(len)) == NULL) {
        return;
    }
    c->warn_next_ns *= 2;
    dfccl_coll_label(ctx, id, label, sizeof(label));
    snprintf(line, len, "dfccl[%d]: watchdog: %s, run %llu, has waited %.1f s: ", (int)getpid(),
             label, (unsigned long long)c->runs, (double)waited / 1e9);
    dfccl_coll_report(ctx, id, now, line + strlen(line), len - strlen(line));
    if (strlen(line) + 160 < len) {
        snprintf(line + strlen(line), len - strlen(line), "; still waiting, next report after "
                 "%.0f s (DFCCL_WARN_S=%g; DFCCL_TIMEOUT makes a wait an error)",
                 (double)c->warn_next_ns / 1e9, ctx->cfg.warn_s);
    }
    lines->text[lines->n++] = line;
}

/* A failure record as a key for the relay's sets. */
static uint64_t dfccl_relay_key(const dfccl_dir_fail_t *f)
{
    return ((uint64_t)(f->origin + 1) << 52) ^ (f->kind << 48) ^ (f->reg << 24) ^ f->run;
}

static int dfccl_relay_has(const uint64_t *set, uint32_t n, uint64_t key)
{
    for (uint32_t i = 0; i < (n < 64 ? n : 64); i++) {
        if (set[i] == key) {
            return 1;
        }
    }
    return 0;
}

/* Send `f` to the group's net neighbours, once. */
static void dfccl_relay_send(struct dfccl_group *g, const dfccl_dir_fail_t *f)
{
    uint64_t key = dfccl_relay_key(f);

    if ((f->kind != DFCCL_FAIL_RUN && f->kind != DFCCL_FAIL_FROM) ||
        dfccl_relay_has(g->relay_sent, g->nrelay_sent, key)) {
        return;
    }
    g->relay_sent[g->nrelay_sent++ % 64] = key;
    dfccl_net_fail_send(g, f);
}

/*
 * Failures between hosts: the records that this host's ranks of a group
 * publish (a failed run, a mismatch) go to the group's net neighbours, and
 * what they send is published here as relayed (under its origin), where
 * this host's ranks read it and send it on, so that a record goes around
 * the ring once. An aborted context or a destroyed group stays on its
 * host: whether its rank had finished a run cannot be read from another.
 * ctx->lock held.
 */
static void dfccl_ctx_relay(struct dfccl_rank_ctx *ctx)
{
    dfccl_dir_fail_t f;
    int gid;

    if (__atomic_load_n(&ctx->net, __ATOMIC_ACQUIRE) == NULL) {
        return;
    }
    while (dfccl_net_fail_recv(ctx, &gid, &f)) {
        for (struct dfccl_group *g = ctx->groups; g != NULL; g = g->next) {
            uint64_t key = dfccl_relay_key(&f);
            /* what we sent, we knew already */
            if (g->id != gid || g->pool.dir == NULL || f.origin == g->rank ||
                dfccl_relay_has(g->relay_got, g->nrelay_got, key) ||
                dfccl_relay_has(g->relay_sent, g->nrelay_sent, key)) {
                continue;
            }
            g->relay_got[g->nrelay_got++ % 64] = key;
            dfccl_dir_publish_relayed(g, &f);
        }
    }
    for (struct dfccl_group *g = ctx->groups; g != NULL; g = g->next) {
        if (!g->next_net && !g->prev_net) {
            continue;
        }
        for (int r = 0; r < g->nranks; r++) {
            const dfccl_dir_t *d = dfccl_pool_dir_of(g, r);
            uint64_t nf;
            if (d == NULL) {
                continue;
            }
            if (dfccl_dir_read_note(d, DFCCL_FAIL_FROM, &f)) {
                dfccl_relay_send(g, &f);
            }
            nf = __atomic_load_n(&d->nfails, __ATOMIC_ACQUIRE);
            for (uint64_t i = nf > DFCCL_DIR_FAILS ? nf - DFCCL_DIR_FAILS : 0; i < nf; i++) {
                if (dfccl_dir_read_fail(d, i, &f)) {
                    dfccl_relay_send(g, &f);
                }
            }
        }
    }
}

/* Publish where this rank's long-running collectives wait, for the reports
 * of their other ranks. ctx->lock held. */
static void dfccl_ctx_publish_where(struct dfccl_rank_ctx *ctx, uint64_t now)
{
    if (dfccl_since(now, ctx->where_ns) < DFCCL_WHERE_EVERY_NS) {
        return;
    }
    ctx->where_ns = now;
    for (int id = 0; id < ctx->cfg.max_colls; id++) {
        dfccl_coll_t *c = &ctx->colls[id];
        dfccl_dir_reg_t w;
        if (c->state != DFCCL_COLL_INFLIGHT || c->group->pool.dir == NULL ||
            dfccl_since(now, c->start_ns) < DFCCL_WHERE_AFTER_NS) {
            continue;
        }
        dfccl_coll_where(ctx, id, now, &w);
        dfccl_dir_publish_where(c->group, c->sig[6], &w);
    }
}

/*
 * Every 10 ms: tell peers this rank is alive, unlink and attach segments,
 * and, while collectives are in flight, publish where they wait and check
 * them. A collective that a peer failed (a mismatch, its own failure, its
 * context aborted or its group destroyed before it finished) fails here
 * too, with the peer's reason: alone while it has not reached the daemon,
 * else by aborting the context. One past the timeout (DFCCL_TIMEOUT), or
 * a peer process that has exited while nothing completes, aborts the
 * context with a message that names the collective, its group, and who
 * has and has not joined it. One past the watchdog's time (DFCCL_WARN_S)
 * is reported and keeps waiting. SIGUSR1 (DFCCL_SIGUSR1) prints the state.
 */
static void dfccl_ctx_check_health(struct dfccl_rank_ctx *ctx)
{
    uint64_t now = dfccl_time_ns(), limit = (uint64_t)(ctx->cfg.timeout_s * 1e9);
    uint64_t warn = (uint64_t)(ctx->cfg.warn_s * 1e9);
    char msg[4096], label[192];
    int culprit = -1, alone[16], nalone = 0, dump = 0;
    dfccl_status_t status = DFCCL_OK, alone_st[16];
    dfccl_lines_t lines;

    if (dfccl_since(now, ctx->last_check_ns) < 10000000ull) {
        return;
    }
    ctx->last_check_ns = now;
    lines.n = 0;
    pthread_mutex_lock(&ctx->lock);
    /* Now, not before the lock: a collective started by another thread
     * while we waited for it is younger than a time read before. */
    now = dfccl_time_ns();
    for (struct dfccl_group *g = ctx->groups; g != NULL; g = g->next) {
        if (g->pool.dir != NULL) {
            __atomic_store_n(&g->pool.dir->beat_ns, now, __ATOMIC_RELEASE);
        }
        /* unlink our segments that their writers have attached by now */
        dfccl_pool_reap(g);
    }
    /* a mismatch the net transport found holds for the group's later
     * collectives too: said like one found here */
    {
        int nc;
        dfccl_status_t ns;
        if (dfccl_net_failed(ctx, &nc, &ns, msg, sizeof(msg)) && ns == DFCCL_ERR_MISMATCH &&
            nc >= 0 && nc < ctx->cfg.max_colls && ctx->colls[nc].state != DFCCL_COLL_FREE) {
            dfccl_dir_publish_fail(ctx->colls[nc].group, DFCCL_FAIL_FROM,
                                   ctx->colls[nc].sig[6], 0, ns, msg);
        }
    }
    dfccl_ctx_relay(ctx);
    if (ctx->cfg.sigusr1 && ctx->sigusr1_seen != (uint32_t)dfccl_sigusr1_count) {
        ctx->sigusr1_seen = (uint32_t)dfccl_sigusr1_count;
        dump              = 1;
    }
    if (ctx->aborted || ctx->inflight == 0) {
        pthread_mutex_unlock(&ctx->lock);
        if (dump) {
            dfccl_ctx_dump(ctx, stderr);
        }
        return;
    }
    dfccl_ctx_publish_where(ctx, now);
    for (int id = 0; id < ctx->cfg.max_colls && culprit < 0; id++) {
        dfccl_coll_t *c = &ctx->colls[id];
        struct dfccl_group *g = c->group;
        int r;
        if (c->state != DFCCL_COLL_INFLIGHT) {
            continue;
        }
        if (nalone < 16 && dfccl_group_failed_run(g, c, 0, &status, msg, sizeof(msg)) >= 0) {
            c->fail_remote = 1;
            if (c->deferred) {
                /* the daemon never saw it: it fails alone */
                c->deferred = 0;
                ctx->ndeferred--;
                free(c->errmsg);
                c->errmsg        = strdup(msg);
                alone_st[nalone] = status;
                alone[nalone++]  = id;
                continue;
            }
            culprit = id;
            break;
        }
        if (limit > 0 && dfccl_since(now, c->start_ns) > limit) {
            size_t o;
            dfccl_coll_label(ctx, id, label, sizeof(label));
            snprintf(msg, sizeof(msg), "%s did not complete within %g s: ", label,
                     ctx->cfg.timeout_s);
            o = strlen(msg);
            dfccl_coll_report(ctx, id, now, msg + o, sizeof(msg) - o);
            o = strlen(msg);
            snprintf(msg + o, sizeof(msg) - o, ". A rank may have stopped, or the program runs "
                     "collectives that never meet on every rank; raise DFCCL_TIMEOUT if it is "
                     "only slow");
            culprit = id;
            status  = DFCCL_ERR_TIMEOUT;
            break;
        }
        /* a dead peer: nothing can complete once what it sent is used up,
         * unless it finished its part of this run before it left (and,
         * without net edges, what it sent is in our connectors already) */
        for (r = 0; r < g->nranks && dfccl_since(now, ctx->last_done_ns) > 500000000ull; r++) {
            /* a process id means something only on our host */
            if (r != g->rank && g->same_host[r] && kill(g->pids[r], 0) != 0 &&
                errno == ESRCH && (g->net || !dfccl_group_rank_done(g, r, c))) {
                dfccl_pool_unlink_dead(g, r);
                dfccl_coll_label(ctx, id, label, sizeof(label));
                snprintf(msg, sizeof(msg), "%s cannot complete: rank %d (process %d) has "
                         "exited. The rank context is aborted; destroy it and end the job",
                         label, r, g->pids[r]);
                culprit = id;
                status  = DFCCL_ERR_ABORTED;
                break;
            }
        }
        if (culprit < 0 && warn > 0) {
            dfccl_ctx_watchdog(ctx, id, now, &lines);
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    for (int i = 0; i < lines.n; i++) {
        if (dfccl_log_level >= 0) {
            fprintf(stderr, "%s\n", lines.text[i]);
        }
        free(lines.text[i]);
    }
    if (dump) {
        dfccl_ctx_dump(ctx, stderr);
    }
    for (int i = 0; i < nalone; i++) {
        if (dfccl_log_level >= 0) {
            dfccl_print_error(ctx->colls[alone[i]].errmsg != NULL ? ctx->colls[alone[i]].errmsg
                                                                  : "");
        }
        dfccl_ctx_fail(ctx, alone[i], alone_st[i]);
    }
    if (culprit < 0 && dfccl_net_failed(ctx, &culprit, &status, msg, sizeof(msg))) {
        /* the net transport failed (peer gone, signature mismatch): no
         * collective of the context can rely on it any more */
        dfccl_error(status, "%s", msg);
        dfccl_ctx_abort(ctx, culprit, status, msg);
        return;
    }
    if (culprit >= 0) {
        dfccl_error(status, "%s", msg);
        dfccl_ctx_abort(ctx, culprit, status, msg);
    }
}

/* Poll every CQ ring once, run callbacks, feed the SQ, relaunch the
 * daemon if needed. Returns the number of completions. */
int dfccl_ctx_progress(struct dfccl_rank_ctx *ctx)
{
    const uint32_t cap = ctx->args.cq_entries;
    int ids_static[64], nids = 0, total = 0;

    pthread_mutex_lock(&ctx->cq_lock);
    for (uint32_t b = 0; b < ctx->args.max_blocks; b++) {
        uint64_t *ring = ctx->cq + (uint64_t)b * cap;
        uint64_t h     = ctx->cq_head[b];
        for (;;) {
            uint64_t v = __atomic_load_n(&ring[h % cap], __ATOMIC_ACQUIRE);
            int id     = (int)(uint32_t)v;
            if ((uint32_t)(v >> 32) != (uint32_t)(h + 1) || nids == 64) {
                break;
            }
            h++;
            if (id < 0 || id >= ctx->cfg.max_colls) {
                continue;
            }
            /* the last of its blocks' CQEs completes the collective */
            if (++ctx->cqe_seen[id] >= __atomic_load_n(&ctx->cqe_need[id], __ATOMIC_RELAXED)) {
                ctx->cqe_seen[id] = 0;
                ctx->completed++;
                ids_static[nids++] = id;
            }
        }
        if (h != ctx->cq_head[b]) {
            ctx->cq_head[b] = h;
            __atomic_store_n(&ctx->cq_ctrl[b].head, h, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&ctx->cq_lock);

    if (nids > 0) {
        pthread_mutex_lock(&ctx->lock);
        ctx->stuck_relaunches = 0;
        ctx->last_done_ns     = dfccl_time_ns();
        pthread_mutex_unlock(&ctx->lock);
    }
    for (int i = 0; i < nids; i++) {
        dfccl_ctx_complete(ctx, ids_static[i], DFCCL_OK);
        total++;
    }

    if (ctx->ndeferred > 0) {
        total += dfccl_coll_resolve_deferred(ctx);
    }
    dfccl_ctx_check_health(ctx);
    pthread_mutex_lock(&ctx->lock);
    dfccl_ctx_drain_pending(ctx);
    dfccl_ctx_maybe_launch(ctx, 0);
    pthread_mutex_unlock(&ctx->lock);
    return total;
}

static void *dfccl_poller_main(void *arg)
{
    struct dfccl_rank_ctx *ctx = arg;

    /* Short sleeps while collectives are in flight: the default 50 us
     * timer slack would add more than a small collective takes. */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);

    for (;;) {
        uint64_t gen = __atomic_load_n(&ctx->kick_gen, __ATOMIC_SEQ_CST);
        int busy, app_polls;

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
        busy = ctx->inflight > 0 || ctx->npending > 0 || ctx->ndeferred > 0;
        pthread_mutex_unlock(&ctx->lock);
        if (busy && ctx->backend == DFCCL_BACKEND_HOST) {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        } else if (busy) {
            sched_yield(); /* collectives in flight, nobody else polls */
        } else {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 10 * 1000 * 1000;
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

    st = dfccl_ctx_pick_backend(ctx);
    if (st != DFCCL_OK) {
        goto err_free;
    }
    dfccl_ctx_defaults(ctx);
    if (ctx->cfg.sigusr1) {
        st = dfccl_sigusr1_install();
        if (st != DFCCL_OK) {
            goto err_free;
        }
        ctx->sigusr1_seen = (uint32_t)dfccl_sigusr1_count; /* only those from now on */
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
    pthread_mutex_lock(&ctx->lock);
    if ((ctx->inflight > 0 || ctx->npending > 0) && !ctx->aborted) {
        uint64_t n = ctx->inflight;
        pthread_mutex_unlock(&ctx->lock);
        return dfccl_error(DFCCL_ERR_BUSY, "dfcclDestroy: %llu collective(s) still in flight; "
                           "wait for them (dfcclWait) before destroying the context",
                           (unsigned long long)n);
    }
    if (ctx->launched_ever && !ctx->aborted) {
        ctx->exit_posted = 1;
        st = dfccl_ctx_submit(ctx, DFCCL_SQE_EXIT, -1, NULL, NULL);
    }
    pthread_mutex_unlock(&ctx->lock);

    /* The exit SQE makes every block return; a block that quit before
     * reading it is relaunched to read it. */
    for (int tries = 0; st == DFCCL_OK && ctx->launched_ever && !ctx->aborted; tries++) {
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
    if (ctx->aborted) {
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
    pthread_mutex_unlock(&ctx->lock);
    s->running = ctx->be->running(ctx);
    return DFCCL_OK;
}

dfccl_backend_t dfcclGetBackend(dfccl_rank_ctx_t ctx)
{
    return ctx != NULL ? ctx->backend : DFCCL_BACKEND_AUTO;
}
