/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two-shot allreduce, for mid-size messages on groups whose ranks all reach
 * each other: a reduce-scatter and an allgather, each one hop of direct LL
 * writes into the peers' connector regions (the same layout as one shot: a
 * ring of slots per sender in every rank's region). A channel's share is
 * cut into n parts; rank r reduces part r.
 *
 *   step 0  write part q of our input to rank q (every q but us), poll the
 *           n - 1 copies of part r the peers wrote to us and reduce them
 *           with ours in rank order (every rank computes the same bits);
 *           after the block's vote the result goes to part r of the output
 *   step 1  write part r of the output to every peer, poll the peers'
 *           reduced parts and copy them to the output
 *
 * Each rank sends 2(n - 1)/n of its input, as in the ring, in two hops
 * instead of 2(n - 1). A slot of our ring at a peer holds, in LL lines, the
 * part we send in step 0 and, after it, the part we send in step 1.
 *
 * Preemption stays exact: step 0 commits nothing before its vote, and its
 * replay writes the same lines with the same flags again and polls the
 * same lines; only then does part r of the output change (in place, the
 * input of part r is needed by nobody else). Step 1 writes only parts the
 * peers reduced and replays the same copies. A rank publishes its head
 * once, after step 1, so no peer refills a slot we may still read.
 * Credit is taken as in one shot (dfccl_oneshot_credit), before step 0.
 */
#ifndef DFCCL_KERNELS_TWOSHOT_H_
#define DFCCL_KERNELS_TWOSHOT_H_

#include "oneshot.h"

DFCCL_F_DEVICE int dfccl_twoshot_allreduce(dfccl_exec_t *x)
{
    const dfccl_coll_static_t *st = x->st;
    const dfccl_chan_t *ch        = x->ch;
    const int n = st->nranks, me = st->rank;
    const uint64_t esz    = st->elem_size;
    const uint64_t pe     = DFCCL_TWOSHOT_PART_ELEMS(ch->cnt, (uint64_t)n, esz);
    const uint64_t gather = DFCCL_DIV_UP(pe * esz, 8) * DFCCL_LL_LINE; /* step 1's lines */
    const uint64_t stride = 2ull * st->slot_bytes;
    const uint64_t ring   = (uint64_t)st->nslots * stride;
    const uint64_t at     = sizeof(dfccl_conn_ctrl_t) + (x->dyn.send_seq % st->nslots) * stride;
    const uint32_t flag   = (uint32_t)(x->dyn.send_seq + 1);
    const char *src       = x->sendbuff + ch->off * esz;
    char *dst             = x->recvbuff + ch->off * esz;
    const char *mine      = (const char *)ch->recv_ctrl;
    uint64_t *scratch     = (uint64_t *)(void *)x->ll_scratch;
    const uint64_t mbeg   = DFCCL_MIN(ch->cnt, (uint64_t)me * pe);
    const uint64_t mbytes = (DFCCL_MIN(ch->cnt, mbeg + pe) - mbeg) * esz;
    const uint64_t mlines = DFCCL_DIV_UP(mbytes, 8);
    int ok = 1;

    if (x->dyn.step == 0) {
        if (DFCCL_TID == 0) {
            x->ctl->ready = dfccl_oneshot_credit(x);
        }
        dfccl_block_sync();
        if (!x->ctl->ready) {
            dfccl_block_sync(); /* everyone read `ready` before it changes */
            return DFCCL_PRIM_STUCK;
        }
        /* every part goes out before we wait for any (no peer waits for a
         * line of ours behind our wait for one of theirs) */
        for (int k = 1; k < n; k++) {
            const int q         = (me + k) % n;
            const uint64_t qbeg = DFCCL_MIN(ch->cnt, (uint64_t)q * pe);
            const uint64_t qb   = (DFCCL_MIN(ch->cnt, qbeg + pe) - qbeg) * esz;
            const uint64_t ql   = DFCCL_DIV_UP(qb, 8);
            char *to            = x->ch->peer[q] + at + (uint64_t)me * ring;

            for (uint64_t i = (uint64_t)DFCCL_TID; i < ql; i += (uint64_t)DFCCL_NTHREADS) {
                const uint64_t v = dfccl_ll_get(src + qbeg * esz, i, qb);
                dfccl_ll_store(to + i * DFCCL_LL_LINE, (uint32_t)v, (uint32_t)(v >> 32), flag);
            }
        }
        for (uint64_t i = (uint64_t)DFCCL_TID; i < mlines; i += (uint64_t)DFCCL_NTHREADS) {
            const uint64_t acc = dfccl_shot_reduce(x, mine + at, ring, i,
                                                   dfccl_ll_get(src + mbeg * esz, i, mbytes),
                                                   flag, &ok);
            if (!ok) {
                break;
            }
            scratch[i] = acc;
        }
        if (!dfccl_block_all(ok)) {
            return DFCCL_PRIM_STUCK; /* nothing committed */
        }
        for (uint64_t i = (uint64_t)DFCCL_TID; i < mlines; i += (uint64_t)DFCCL_NTHREADS) {
            dfccl_ll_put(dst + mbeg * esz, i, mbytes, scratch[i]);
        }
        x->dyn.step = 1;
        dfccl_prim_moved(x);
        dfccl_block_sync(); /* part r of the output is whole before step 1 reads it */
    }

    /* step 1: our reduced part to every peer, then theirs into the output */
    for (uint64_t i = (uint64_t)DFCCL_TID; i < mlines; i += (uint64_t)DFCCL_NTHREADS) {
        const uint64_t v = dfccl_ll_get(dst + mbeg * esz, i, mbytes);

        for (int k = 1; k < n; k++) {
            const int q = (me + k) % n;
            dfccl_ll_store(x->ch->peer[q] + at + (uint64_t)me * ring + gather + i * DFCCL_LL_LINE,
                           (uint32_t)v, (uint32_t)(v >> 32), flag);
        }
    }
    for (int k = 1; k < n && ok; k++) {
        const int q         = (me + n - k) % n;
        const uint64_t qbeg = DFCCL_MIN(ch->cnt, (uint64_t)q * pe);
        const uint64_t qb   = (DFCCL_MIN(ch->cnt, qbeg + pe) - qbeg) * esz;
        const uint64_t ql   = DFCCL_DIV_UP(qb, 8);
        const char *from    = mine + at + (uint64_t)q * ring + gather;

        for (uint64_t i = (uint64_t)DFCCL_TID; i < ql; i += (uint64_t)DFCCL_NTHREADS) {
            const uint64_t v = dfccl_shot_poll(x, from + i * DFCCL_LL_LINE, flag, &ok);
            if (!ok) {
                break;
            }
            dfccl_ll_put(dst + qbeg * esz, i, qb, v);
        }
    }
    if (!dfccl_block_all(ok)) {
        return DFCCL_PRIM_STUCK; /* the copies made are replayed alike */
    }
    x->dyn.send_seq++;
    x->dyn.recv_seq++;
    if (DFCCL_TID == 0) { /* every thread's polls returned before the vote */
        dfccl_st_consumed(&((dfccl_conn_ctrl_t *)(void *)ch->recv_ctrl)->head, x->dyn.recv_seq);
    }
    dfccl_prim_moved(x);
    return DFCCL_PRIM_DONE;
}

#endif /* DFCCL_KERNELS_TWOSHOT_H_ */
