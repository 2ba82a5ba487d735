/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One-shot allreduce, allgather, reduce-scatter and alltoall, for small messages on
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
 */
#ifndef DFCCL_KERNELS_ALGO_ONESHOT_H_
#define DFCCL_KERNELS_ALGO_ONESHOT_H_

#include "shot.h"

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
    /* alltoall: sends like a reduce-scatter, places like an allgather */
    const int gather      = st->kind == DFCCL_COLL_ALLGATHER || st->kind == DFCCL_COLL_ALLTOALL;
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
    const uint64_t sbytes = st->count * esz *
                            (st->kind == DFCCL_COLL_REDUCESCATTER || st->kind == DFCCL_COLL_ALLTOALL
                                 ? n : 1);
    const int direct      = !gather && (x->recvbuff + st->count * esz <= x->sendbuff ||
                                        x->sendbuff + sbytes <= x->recvbuff);
    int ok = 1;

    if (x->dyn.slice < DFCCL_SHOT_SENT(0)) {
        const int scatter =
            st->kind == DFCCL_COLL_REDUCESCATTER || st->kind == DFCCL_COLL_ALLTOALL;

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

#endif /* DFCCL_KERNELS_ALGO_ONESHOT_H_ */
