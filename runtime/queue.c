/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The queues between the host and the daemon, and its launches: the
 * submission queue (one producer, the host, under the context lock; entries
 * that do not fit wait on the host), the completion of a collective (its
 * callback, then the registration's own bookkeeping through the context's
 * coll_release hook), the kick that wakes waiting threads, the grid of the
 * next launch, and the launch itself. The daemon is launched at the first
 * submission and relaunched after a voluntary quit when a new SQE arrives or
 * when fewer CQEs than SQEs have been seen.
 */
#include "dfccl_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

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
static uint32_t dfccl_ctx_grid_need(const struct dfccl_rank_ctx *ctx)
{
    uint32_t grid = 1;

    for (int id = 0; id < ctx->cfg.max_colls; id++) {
        if (ctx->colls[id].state != DFCCL_COLL_FREE &&
            (uint32_t)ctx->colls[id].st.nchannels > grid) {
            grid = (uint32_t)ctx->colls[id].st.nchannels;
        }
    }
    return grid > (uint32_t)ctx->cfg.max_blocks ? (uint32_t)ctx->cfg.max_blocks : grid;
}

static dfccl_status_t dfccl_ctx_size_grid(struct dfccl_rank_ctx *ctx)
{
    uint32_t grid = dfccl_ctx_grid_need(ctx), prev = ctx->args.nblocks;

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
dfccl_status_t dfccl_ctx_maybe_launch(struct dfccl_rank_ctx *ctx, int force)
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
void dfccl_ctx_drain_pending(struct dfccl_rank_ctx *ctx)
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
        ctx->colls[coll_id].prog_runs++;
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

void dfccl_ctx_narrow(struct dfccl_rank_ctx *ctx)
{
    if (!ctx->launched_ever || ctx->exit_posted || ctx->aborted || ctx->inflight > 0 ||
        ctx->args.nblocks <= dfccl_ctx_grid_need(ctx) || !ctx->be->running(ctx)) {
        return;
    }
    /* quits like a launch that started before a mapping (the daemon
     * ignores it in later launches) */
    dfccl_ctx_submit(ctx, DFCCL_SQE_REMAP, -1, (const void *)(uintptr_t)ctx->launches, NULL);
}

void dfccl_ctx_complete(struct dfccl_rank_ctx *ctx, int id, dfccl_status_t status)
{
    dfccl_coll_t *c = &ctx->colls[id];
    dfccl_callback_t cb;
    void *arg;
    uint64_t runs;

    pthread_mutex_lock(&ctx->lock);
    if (c->state != DFCCL_COLL_INFLIGHT) {
        int aborted = ctx->aborted;
        pthread_mutex_unlock(&ctx->lock);
        /* after an abort, a block's completion may still come for a
         * collective the abort completed: nothing is wrong then */
        if (!aborted) {
            dfccl_error(DFCCL_ERR_INTERNAL, "completion for collective %d which is not in "
                        "flight", id);
        }
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
    if (ctx->group_done != NULL) {
        ctx->group_done(c->group, id, status); /* c completes still: g stays */
    }

    pthread_mutex_lock(&ctx->lock);
    if (c->state == DFCCL_COLL_COMPLETING && c->runs == runs) {
        c->state = DFCCL_COLL_IDLE; /* else the callback's wake-up ran it again */
    }
    ctx->inflight--;
    pthread_mutex_unlock(&ctx->lock);
    dfccl_ctx_kick(ctx);
}
