/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What one shot (oneshot.h) and two shot (twoshot.h) share: the marks of
 * what a preempted call already wrote, the block-wide wait, the credit a
 * sender takes before it fills a peer's slot, and the polls and reductions
 * of LL lines from the peers' rings. Credit: a sender may fill slot s of
 * its ring at a peer once that peer has consumed the call nslots before.
 * Each receiver publishes one head (the calls it has completed) in its
 * region's control words; thread 0 keeps the least head over the peers it
 * has read and reads them all again only when that runs out (once every
 * nslots calls).
 */
#ifndef DFCCL_KERNELS_ALGO_SHOT_H_
#define DFCCL_KERNELS_ALGO_SHOT_H_

#include "../prims.h"

/* dfccl_dyn_t.slice of a one- or two-shot allreduce: our data (and in two
 * shot the flag) of step 0 (1) or of both steps (2) has been written to the
 * peers. */
#define DFCCL_SHOT_SENT(step) ((uint32_t)(step) + 1u)

/* Thread 0 evaluates `expr` (a wait) and the threads running the
 * collective learn its answer; when it is 0, every one of them returns
 * DFCCL_PRIM_STUCK from the caller. */
#define DFCCL_SHOT_BLOCK_WAIT(x, expr)                                                           \
    do {                                                                                         \
        if (DFCCL_TID == 0) {                                                                    \
            (x)->ctl->ready = (expr);                                                            \
        }                                                                                        \
        dfccl_team_sync((x)->nthreads);                                                          \
        if (!(x)->ctl->ready) {                                                                  \
            dfccl_team_sync((x)->nthreads); /* everyone read `ready` before it changes */       \
            return DFCCL_PRIM_STUCK;                                                             \
        }                                                                                        \
    } while (0)

/* The least of the words at addr(q) + off of the n - 1 ranks q other than
 * `me`, where addr(q) is peer[q] when `peer` is given, else base + q *
 * stride: relaxed loads, up to 8 in flight together (one round trip, not
 * one per peer). A caller that goes on because of the answer fences once
 * (dfccl_fence_acquire_sys), which makes them acquires. */
DFCCL_F_DEVICE uint64_t dfccl_shot_least(int n, int me, char *const *peer, const char *base,
                                         uint64_t stride, uint64_t off)
{
    uint64_t least = UINT64_MAX;

    for (int q0 = 0; q0 < n; q0 += 8) {
        uint64_t w[8];
DFCCL_PRAGMA_UNROLL
        for (int k = 0; k < 8; k++) {
            const int q   = q0 + k;
            const char *a = peer != NULL ? peer[q < n ? q : 0] : base + (uint64_t)q * stride;
            w[k] = q < n && q != me ? dfccl_ld_relaxed((const uint64_t *)(const void *)(a + off))
                                    : UINT64_MAX;
        }
DFCCL_PRAGMA_UNROLL
        for (int k = 0; k < 8; k++) {
            least = DFCCL_MIN(least, w[k]);
        }
    }
    return least;
}

/* Thread 0: wait, at most x->spin polls, until every peer has consumed the
 * call nslots before this one. */
DFCCL_F_DEVICE uint32_t dfccl_oneshot_credit(dfccl_exec_t *x)
{
    const dfccl_coll_static_t *st = x->st;
    dfccl_dyn_t *d = &x->dyn;

    for (uint32_t i = 0;; i++) {
        uint64_t least;

        /* a peer that completed this call already (it took our lines from
         * an earlier try) is one ahead of us */
        if (d->head_cache >= d->send_seq || d->send_seq - d->head_cache < st->nslots) {
            return 1;
        }
        /* the peers' heads across NVLink */
        least = dfccl_shot_least(st->nranks, st->rank, x->ch->peer, NULL, 0,
                                 offsetof(dfccl_conn_ctrl_t, head));
        d->head_cache = least;
        if (least >= d->send_seq || d->send_seq - least < st->nslots) {
            dfccl_fence_acquire_sys(); /* before our writes into the slots */
            return 1;
        }
        if (i >= x->spin || (((i & 63) == 63) && dfccl_ld_relaxed(x->abort_flag))) {
            return 0;
        }
        dfccl_pause();
    }
}

/* One LL line's 8 data bytes once it carries `flag`, polled at most x->spin
 * times; *ok = 0 (and 0 returned) if it has not arrived by then. */
DFCCL_F_DEVICE uint64_t dfccl_shot_poll(const dfccl_exec_t *x, const char *line, uint32_t flag,
                                        int *ok)
{
    uint32_t d0 = 0, d1 = 0;

    for (uint32_t s = 0; !dfccl_ll_load(line, flag, &d0, &d1); s++) {
        if (s >= x->spin) {
            *ok = 0;
            return 0;
        }
        dfccl_pause();
    }
    return (uint64_t)d0 | ((uint64_t)d1 << 32);
}

/* Word i of the n ranks' inputs reduced in rank order (the same bits on
 * every rank): ours is v, rank q's is line i of ring q at `rings` (rings
 * `ring` bytes apart). *ok = 0 if a line has not arrived within x->spin. */
DFCCL_F_DEVICE uint64_t dfccl_shot_reduce(const dfccl_exec_t *x, const char *rings,
                                          uint64_t ring, uint64_t i, uint64_t v, uint32_t flag,
                                          int *ok)
{
    const dfccl_coll_static_t *st = x->st;
    const int n = st->nranks, me = st->rank;
    const uint32_t div = st->op == DFCCL_K_AVG ? (uint32_t)n : 0;
    uint64_t acc       = 0;

    for (int q = 0; q < n && *ok; q++) {
        const char *line = rings + (uint64_t)q * ring + i * DFCCL_LL_LINE;
        const uint64_t w = q == me ? v : dfccl_shot_poll(x, line, flag, ok);
        acc = q == 0 ? w : dfccl_red_word(st->dtype, st->op, q == n - 1 ? div : 0, acc, w);
    }
    return acc;
}

/* Our input share that line i of peer q's copy comes from: the channel's
 * range of our input in allreduce and allgather, of our chunk for q in
 * reduce-scatter and alltoall (q = me: the chunk we keep). */
DFCCL_F_DEVICE const char *dfccl_shot_src(const dfccl_exec_t *x, int q)
{
    const dfccl_coll_static_t *st = x->st;
    const uint64_t chunk =
        st->kind == DFCCL_COLL_REDUCESCATTER || st->kind == DFCCL_COLL_ALLTOALL
            ? (uint64_t)q * st->count : 0;

    return x->sendbuff + (chunk + x->ch->off) * st->elem_size;
}

#endif /* DFCCL_KERNELS_ALGO_SHOT_H_ */
