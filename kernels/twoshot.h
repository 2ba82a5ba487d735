/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two-shot allreduce, for mid-size messages on groups whose ranks all reach
 * each other: a reduce-scatter and an allgather, each one hop of direct
 * writes into the peers' connector regions (a ring of slots per sender in
 * every rank's region, as in one shot). A channel's share is cut into n
 * parts; rank r reduces part r.
 *
 *   step 0  write part q of our input to rank q (every q but us), wait for
 *           the n - 1 copies of part r the peers wrote to us, and reduce
 *           them with ours into part r of the output
 *   step 1  write part r of the output to every peer, wait for the peers'
 *           reduced parts and copy them to the output
 *
 * Each rank sends 2(n - 1)/n of its input, as in the ring, in two hops
 * instead of 2(n - 1). The data moves as in SIMPLE: whole vectors, then,
 * after a barrier, one flag word per step that thread 0 releases (the
 * release is cumulative: a peer that acquires the flag sees the data). A
 * slot of our ring at a peer holds the part we send in step 0, the part we
 * send in step 1, and the two flags, each on its own cache line.
 *
 * Only rank r reduces part r, so the order of its reduction needs no
 * agreement: it starts from its own input, which makes an in-place call
 * safe (part r of the input is read before the output overwrites it).
 *
 * Preemption stays exact: only thread 0's waits for flags can run out of
 * spins, and both come before anything is written to the output; after
 * them the step runs to its end. A step's data goes out once: the dynamic
 * context records it (DFCCL_SHOT_SENT), and it stays in the peers' slots
 * until they are done with the call. A rank publishes its head once, after
 * step 1, so no peer refills a slot we may still read. Credit is taken as
 * in one shot (dfccl_oneshot_credit), before step 0.
 */
#ifndef DFCCL_KERNELS_TWOSHOT_H_
#define DFCCL_KERNELS_TWOSHOT_H_

#include "oneshot.h"

/* Thread 0: wait, at most x->spin polls, until every peer's flag of `step`
 * in our region has reached `seq1` (the flags only grow). */
DFCCL_F_DEVICE uint32_t dfccl_twoshot_arrived(const dfccl_exec_t *x, const char *mine,
                                              uint64_t ring, uint64_t flag_off, uint64_t seq1)
{
    const int n = x->st->nranks, me = x->st->rank;

    for (int q = 0; q < n; q++) {
        const uint64_t *f = (const uint64_t *)(const void *)(mine + (uint64_t)q * ring + flag_off);

        if (q == me) {
            continue;
        }
        for (uint32_t i = 0; dfccl_ld_acquire_sys(f) < seq1; i++) {
            if (i >= x->spin || (((i & 63) == 63) && dfccl_ld_relaxed(x->abort_flag))) {
                return 0;
            }
            dfccl_pause();
        }
    }
    return 1;
}

/* After a barrier that ordered the block's writes of a step before it:
 * thread 0 releases the step's flag at every peer. */
DFCCL_F_DEVICE void dfccl_twoshot_post(const dfccl_exec_t *x, uint64_t at, uint64_t seq1)
{
    if (DFCCL_TID == 0) {
        for (int q = 0; q < x->st->nranks; q++) {
            if (q != x->st->rank) {
                dfccl_st_release_sys((uint64_t *)(void *)(x->ch->peer[q] + at), seq1);
            }
        }
    }
}

/* Part q of the channel's share, of pe elements but the last: its first
 * element in *beg, and its element count (0 past the share). */
DFCCL_F_DEVICE uint64_t dfccl_twoshot_part(const dfccl_chan_t *ch, uint64_t pe, int q,
                                           uint64_t *beg)
{
    *beg = DFCCL_MIN(ch->cnt, (uint64_t)q * pe);
    return DFCCL_MIN(ch->cnt, *beg + pe) - *beg;
}

DFCCL_F_NOINLINE int dfccl_twoshot_allreduce(dfccl_exec_t *x)
{
    const dfccl_coll_static_t *st = x->st;
    const dfccl_chan_t *ch        = x->ch;
    const int n = st->nranks, me = st->rank;
    const int dt = st->dtype, op = st->op;
    const uint64_t esz    = st->elem_size;
    const uint64_t pe     = DFCCL_TWOSHOT_PART_ELEMS(ch->cnt, (uint64_t)n, esz);
    const uint64_t pbytes = pe * esz;
    const uint64_t ring   = (uint64_t)st->nslots * st->slot_bytes;
    const uint64_t at     = sizeof(dfccl_conn_ctrl_t) + (x->dyn.send_seq % st->nslots) *
                                                           (uint64_t)st->slot_bytes;
    const uint64_t ours   = at + (uint64_t)me * ring; /* our ring's slot at a peer */
    const uint64_t flag0  = 2 * pbytes, flag1 = flag0 + DFCCL_CACHELINE;
    const uint64_t seq1   = x->dyn.send_seq + 1;
    const char *src       = x->sendbuff + ch->off * esz;
    char *dst             = x->recvbuff + ch->off * esz;
    const char *mine      = (const char *)ch->recv_ctrl + at;
    const int mover       = DFCCL_TID < DFCCL_NMOVERS;
    uint64_t mbeg;
    const uint64_t mcnt   = dfccl_twoshot_part(ch, pe, me, &mbeg);

    if (x->dyn.step == 0) {
        if (x->dyn.slice < DFCCL_SHOT_SENT(0)) {
            DFCCL_SHOT_BLOCK_WAIT(x, dfccl_oneshot_credit(x));
            DFCCL_STAMP(x->ctl, DFCCL_STAGE_CREDIT);
            for (int k = 1; mover && k < n; k++) {
                const int q = (me + k) % n;
                uint64_t qbeg;
                const uint64_t qcnt = dfccl_twoshot_part(ch, pe, q, &qbeg);
                if (qcnt > 0) {
                    dfccl_reduce_copy(dt, op, src + qbeg * esz, NULL, x->ch->peer[q] + ours, NULL,
                                      qcnt, 0);
                }
            }
            dfccl_block_sync();
            dfccl_twoshot_post(x, ours + flag0, seq1);
            DFCCL_STAMP(x->ctl, DFCCL_STAGE_SENT0);
            x->dyn.slice = DFCCL_SHOT_SENT(0);
            dfccl_prim_moved(x); /* saved if we are switched out below */
        }
        DFCCL_SHOT_BLOCK_WAIT(x, dfccl_twoshot_arrived(x, mine, ring, flag0, seq1));
        DFCCL_STAMP(x->ctl, DFCCL_STAGE_ARRIVED0);
        /* ours first, then the peers' copies, into the output */
        for (int k = 1; k < n; k++) {
            const char *in = mine + (uint64_t)((me + k) % n) * ring;
            if (mover && mcnt > 0) {
                dfccl_reduce_copy(dt, op, in, k == 1 ? src + mbeg * esz : dst + mbeg * esz,
                                  dst + mbeg * esz, NULL, mcnt,
                                  (k == n - 1 && op == DFCCL_K_AVG) ? (uint32_t)n : 0);
            }
            dfccl_block_sync();
        }
        DFCCL_STAMP(x->ctl, DFCCL_STAGE_REDUCED);
        x->dyn.step = 1;
        dfccl_prim_moved(x);
    }

    /* step 1: our reduced part to every peer, then theirs into the output */
    if (x->dyn.slice < DFCCL_SHOT_SENT(1)) {
        /* two peers per pass: one load of our part feeds both */
        for (int k = 1; mover && k < n && mcnt > 0; k += 2) {
            dfccl_reduce_copy(dt, op, dst + mbeg * esz, NULL,
                              x->ch->peer[(me + k) % n] + ours + pbytes,
                              k + 1 < n ? x->ch->peer[(me + k + 1) % n] + ours + pbytes : NULL,
                              mcnt, 0);
        }
        dfccl_block_sync();
        dfccl_twoshot_post(x, ours + flag1, seq1);
        DFCCL_STAMP(x->ctl, DFCCL_STAGE_SENT1);
        x->dyn.slice = DFCCL_SHOT_SENT(1);
        dfccl_prim_moved(x);
    }
    DFCCL_SHOT_BLOCK_WAIT(x, dfccl_twoshot_arrived(x, mine, ring, flag1, seq1));
    DFCCL_STAMP(x->ctl, DFCCL_STAGE_ARRIVED1);
    for (int k = 1; mover && k < n; k++) {
        const int q = (me + k) % n;
        uint64_t qbeg;
        const uint64_t qcnt = dfccl_twoshot_part(ch, pe, q, &qbeg);
        if (qcnt > 0) {
            dfccl_reduce_copy(dt, op, mine + (uint64_t)q * ring + pbytes, NULL, dst + qbeg * esz,
                              NULL, qcnt, 0);
        }
    }
    dfccl_block_sync(); /* every copy out of our region is done */
    DFCCL_STAMP(x->ctl, DFCCL_STAGE_COPIED);
    x->dyn.send_seq++;
    x->dyn.recv_seq++;
    if (DFCCL_TID == 0) {
        dfccl_st_consumed(&((dfccl_conn_ctrl_t *)(void *)ch->recv_ctrl)->head, x->dyn.recv_seq);
    }
    dfccl_prim_moved(x);
    return DFCCL_PRIM_DONE;
}

#endif /* DFCCL_KERNELS_TWOSHOT_H_ */
