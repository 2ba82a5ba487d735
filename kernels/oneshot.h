/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One-shot allreduce, allgather and reduce-scatter, for small messages on
 * groups whose ranks all reach each other: one primitive, in which every
 * rank writes what each peer needs of its input in LL lines into its own
 * ring of slots at that peer (the peer's connector region for this
 * collective holds one ring per sender), then polls the lines the peers
 * wrote into its own region and reduces the n inputs in rank order, so
 * that every rank computes the same bits (allgather: places them). A ring
 * takes n - 1 hops one after the other, 2(n - 1) for an allreduce; this
 * takes one.
 *
 * Preemption stays exact: if a line has not arrived within the spin
 * threshold the primitive is STUCK and nothing reduced goes to the output
 * (allgather places lines as they come, which a replay places again); its
 * replay polls the same lines again. Our own lines go out once per call:
 * the dynamic context records that they were written (DFCCL_SHOT_SENT), and
 * they stay in the peers' slots until every peer is done with the call. A
 * replay must not write them again: a peer that took them may since have
 * completed the call, deregistered the collective and given its connector
 * memory to a new registration, where a late line with the same slot and
 * flag would pass for the new collective's data. When the output overlaps
 * the input, a reduced result goes to the output only after the block's
 * vote, through the block's scratch, so that a replay still finds the
 * input; otherwise it goes straight to the output (a replay writes the
 * same values again).
 *
 * Credit: a sender may fill slot s of its ring at a peer once that peer has
 * consumed the call nslots before. Each receiver publishes one head (the
 * calls it has completed) in its region's control words; thread 0 keeps the
 * least head over the peers it has read and reads them all again only when
 * that runs out (once every nslots calls).
 */
#ifndef DFCCL_KERNELS_ONESHOT_H_
#define DFCCL_KERNELS_ONESHOT_H_

#include "prims.h"

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
 * reduce-scatter (q = me: the chunk we keep). */
DFCCL_F_DEVICE const char *dfccl_shot_src(const dfccl_exec_t *x, int q)
{
    const dfccl_coll_static_t *st = x->st;
    const uint64_t chunk = st->kind == DFCCL_COLL_REDUCESCATTER ? (uint64_t)q * st->count : 0;

    return x->sendbuff + (chunk + x->ch->off) * st->elem_size;
}

/*
 * One channel of a one-shot allreduce, allgather or reduce-scatter. Every
 * rank writes to every peer q, in LL lines, the channel's range of what q
 * needs of it (allreduce and allgather: our input; reduce-scatter: our
 * chunk q), then takes the peers' lines: allreduce and reduce-scatter
 * reduce them with ours in rank order into the block's scratch, which goes
 * to the output after the vote; allgather writes each peer's lines to its
 * place in the output as they come (a replay writes the same values again;
 * in place, our own place holds our input, which it rewrites unchanged).
 */
DFCCL_F_DEVICE int dfccl_oneshot_run(dfccl_exec_t *x)
{
    const dfccl_coll_static_t *st = x->st;
    const dfccl_chan_t *ch        = x->ch;
    const int n = st->nranks, me = st->rank;
    const int gather      = st->kind == DFCCL_COLL_ALLGATHER;
    const uint64_t esz    = st->elem_size;
    const uint64_t bytes  = ch->cnt * esz;
    const uint64_t nlines = bytes == 0 ? 1 : DFCCL_DIV_UP(bytes, 8);
    const uint64_t stride = 2ull * st->slot_bytes;          /* one slot in LL lines */
    const uint64_t ring   = (uint64_t)st->nslots * stride;  /* one sender's slots */
    const uint64_t at     = sizeof(dfccl_conn_ctrl_t) + (x->dyn.send_seq % st->nslots) * stride;
    const uint32_t flag   = (uint32_t)(x->dyn.send_seq + 1);
    const char *src       = dfccl_shot_src(x, me);
    char *dst             = x->recvbuff + ch->off * esz;
    const char *mine      = (const char *)ch->recv_ctrl;
    uint64_t *scratch     = (uint64_t *)(void *)x->ll_scratch;
    /* the whole send and receive buffers (reduce-scatter reads n chunks) */
    const uint64_t sbytes = st->count * esz * (st->kind == DFCCL_COLL_REDUCESCATTER ? n : 1);
    const int direct      = !gather && (x->recvbuff + st->count * esz <= x->sendbuff ||
                                        x->sendbuff + sbytes <= x->recvbuff);
    int ok = 1;

    if (x->dyn.slice < DFCCL_SHOT_SENT(0)) {
        const int scatter = st->kind == DFCCL_COLL_REDUCESCATTER;

        DFCCL_SHOT_BLOCK_WAIT(x, dfccl_oneshot_credit(x));
        DFCCL_STAMP(x->ctl, DFCCL_STAGE_CREDIT);

        /* every line goes to every peer first, so that no peer waits for a
         * line of ours behind our wait for one of theirs */
        for (uint64_t i = (uint64_t)DFCCL_TID; i < nlines; i += (uint64_t)x->nthreads) {
            const uint64_t v = scatter ? 0 : dfccl_ll_get(src, i, bytes);

            for (int q = 0; q < n; q++) {
                if (q != me) {
                    const uint64_t w = scatter ? dfccl_ll_get(dfccl_shot_src(x, q), i, bytes)
                                               : v;
                    dfccl_ll_store(x->ch->peer[q] + at + (uint64_t)me * ring +
                                       i * DFCCL_LL_LINE,
                                   (uint32_t)w, (uint32_t)(w >> 32), flag);
                }
            }
        }
        /* sent once: a replay only polls (see the top of this file); the
         * context is saved, but sending alone does not make it sticky */
        x->dyn.slice = DFCCL_SHOT_SENT(0);
        x->dirty     = 1;
    }
    if (gather) {
        const uint64_t part = st->count * esz; /* a rank's place in the output */

        for (uint64_t i = (uint64_t)DFCCL_TID; i < nlines && ok; i += (uint64_t)x->nthreads) {
            for (int q = 0; q < n && ok; q++) {
                const uint64_t w =
                    q == me ? dfccl_ll_get(src, i, bytes)
                            : dfccl_shot_poll(x, mine + at + (uint64_t)q * ring +
                                                     i * DFCCL_LL_LINE,
                                              flag, &ok);
                if (ok) {
                    dfccl_ll_put(dst + (uint64_t)q * part, i, bytes, w);
                }
            }
        }
    } else {
        for (uint64_t i = (uint64_t)DFCCL_TID; i < nlines; i += (uint64_t)x->nthreads) {
            const uint64_t acc = dfccl_shot_reduce(x, mine + at, ring, i,
                                                   dfccl_ll_get(src, i, bytes), flag, &ok);
            if (!ok) {
                break;
            }
            if (direct) {
                dfccl_ll_put(dst, i, bytes, acc);
            } else {
                scratch[i] = acc;
            }
        }
    }
    if (!dfccl_team_all(ok, x->nthreads)) {
        return DFCCL_PRIM_STUCK; /* nothing committed in place (allgather: nothing final) */
    }
    DFCCL_STAMP(x->ctl, DFCCL_STAGE_ARRIVED0);
    if (!gather && !direct) {
        for (uint64_t i = (uint64_t)DFCCL_TID; i < nlines; i += (uint64_t)x->nthreads) {
            dfccl_ll_put(dst, i, bytes, scratch[i]); /* its own lines: no barrier needed */
        }
    }
    DFCCL_STAMP(x->ctl, DFCCL_STAGE_COPIED);
    x->dyn.send_seq++;
    x->dyn.recv_seq++;
    if (DFCCL_TID == 0) { /* every thread's polls returned before the vote */
        dfccl_st_consumed(&((dfccl_conn_ctrl_t *)(void *)ch->recv_ctrl)->head, x->dyn.recv_seq);
    }
    dfccl_prim_moved(x);
    return DFCCL_PRIM_DONE;
}

#endif /* DFCCL_KERNELS_ONESHOT_H_ */
