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
 * On groups of DFCCL_TWOSHOT_FUSE_RANKS ranks and more, where every
 * pointer, slot and part is a whole number of 16-byte vectors, the
 * reduction of step 0 and the writes of step 1 are one pass: each
 * thread loads its vectors of our input and of the n - 1 copies, reduces
 * them and stores the result to the output and to every peer at once, so
 * our part is read once and the block syncs once. The n - 1 parts a rank
 * sends in step 0, and those it copies out in step 1, go on teams of warps,
 * one per part, all in flight together.
 *
 * On groups of at most DFCCL_TWOSHOT_PAIR_RANKS ranks (two), the two steps
 * become one: each rank writes its whole share to the peer (the slot's two
 * parts hold it), waits for the peer's, and reduces both into the output in
 * rank order, so that both ranks compute the same bits. Each rank still
 * sends its share once, but the call pays one release and one flag wait
 * instead of two of each.
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
#ifndef DFCCL_KERNELS_ALGO_TWOSHOT_H_
#define DFCCL_KERNELS_ALGO_TWOSHOT_H_

#include "shot.h"

/* Least group size that takes the one-pass reduction (below it, the
 * reduction and step 1's writes are two passes, which are the faster on
 * two ranks). */
#ifndef DFCCL_TWOSHOT_FUSE_RANKS
#define DFCCL_TWOSHOT_FUSE_RANKS 3
#endif

/* Largest group that takes the one-step form (each rank reduces the whole
 * share; the slot's two parts must hold it, which they do for two ranks
 * only). 0 turns it off. */
#ifndef DFCCL_TWOSHOT_PAIR_RANKS
#define DFCCL_TWOSHOT_PAIR_RANKS 2
#endif
#if DFCCL_TWOSHOT_PAIR_RANKS > 2
#error "DFCCL_TWOSHOT_PAIR_RANKS: the slots hold a whole share for two ranks at most"
#endif

/* Vectors per thread in flight in the one-pass reduction. */
#if defined(__CUDACC__)
#define DFCCL_TWOSHOT_UNROLL 4
#else
#define DFCCL_TWOSHOT_UNROLL 1
#endif

/* Thread 0: wait, at most x->spin polls, until every peer's flag of `step`
 * in our region has reached `seq1` (the flags only grow). Each poll reads
 * the flags together (dfccl_shot_least), and one fence makes them acquires
 * once all have arrived. */
DFCCL_F_DEVICE uint32_t dfccl_twoshot_arrived(const dfccl_exec_t *x, const char *mine,
                                              uint64_t ring, uint64_t flag_off, uint64_t seq1)
{
    for (uint32_t i = 0;; i++) {
        if (dfccl_shot_least(x->st->nranks, x->st->rank, NULL, mine, ring, flag_off) >= seq1) {
            dfccl_fence_acquire_sys();
            return 1;
        }
        if (i >= x->spin || (((i & 63) == 63) && dfccl_ld_relaxed(x->abort_flag))) {
            return 0;
        }
        dfccl_pause();
    }
}

/* After a barrier that ordered the block's writes of a step before it:
 * thread 0 releases the step's flag at every peer, with one fence (it
 * waits until the block's writes have reached the peers) before all the
 * flags' stores. */
DFCCL_F_DEVICE void dfccl_twoshot_post(const dfccl_exec_t *x, uint64_t at, uint64_t seq1)
{
    if (DFCCL_TID == 0) {
        dfccl_fence_release_sys();
        for (int q = 0; q < x->st->nranks; q++) {
            if (q != x->st->rank) {
                dfccl_st_relaxed_sys((uint64_t *)(void *)(x->ch->peer[q] + at), seq1);
            }
        }
    }
}

/* After the block's writes of `step`: the barrier that orders them before
 * the flag at `at` (dfccl_twoshot_post), and the step recorded as sent,
 * so that a replay does not send it again. */
DFCCL_F_DEVICE void dfccl_twoshot_sent(dfccl_exec_t *x, uint64_t at, uint64_t seq1, int step,
                                       int stage)
{
    dfccl_block_sync();
    dfccl_twoshot_post(x, at, seq1);
    DFCCL_STAMP(x->ctl, stage);
    (void)stage;
    x->dyn.slice = DFCCL_SHOT_SENT(step);
    dfccl_prim_moved(x);
}

/* Part q of the channel's share, of pe elements but the last: its first
 * element in *beg, and its element count (0 past the share). */
DFCCL_F_DEVICE uint64_t dfccl_twoshot_part(const dfccl_chan_t *ch, uint64_t pe, int q,
                                           uint64_t *beg)
{
    *beg = DFCCL_MIN(ch->cnt, (uint64_t)q * pe);
    return DFCCL_MIN(ch->cnt, *beg + pe) - *beg;
}

/*
 * Teams for the n - 1 parts a rank sends (step 0) or copies out (step 1):
 * with a warp of movers per part at least, the movers split into n - 1
 * teams of whole warps, one per part, so that every part's loads are in
 * flight at once (a spare warp sits out); else the movers take the parts
 * one after the other. Sets this thread's first part and stride, and its
 * number and the size of its team.
 */
DFCCL_F_DEVICE void dfccl_twoshot_team(int nparts, int *k0, int *kstep, uint64_t *tid,
                                       uint64_t *nt)
{
#if defined(__CUDACC__)
    const int warps = DFCCL_NMOVERS / 32;

    if (nparts > 1 && warps >= nparts) {
        const int per  = warps / nparts;
        const int team = (DFCCL_TID / 32) / per;
        *k0    = team < nparts ? team : nparts;
        *kstep = nparts;
        *tid   = (uint64_t)(DFCCL_TID - team * per * 32);
        *nt    = (uint64_t)per * 32;
        return;
    }
#endif
    *k0    = 0;
    *kstep = 1;
    *tid   = (uint64_t)DFCCL_TID;
    *nt    = (uint64_t)DFCCL_NMOVERS;
}

/* dfccl_copy_team as a function of its own: inlined twice into two shot it
 * overflows the function's registers. */
DFCCL_F_NOINLINE void dfccl_twoshot_copy(const void *src, void *dst, uint64_t bytes,
                                         uint64_t tid, uint64_t nt)
{
    dfccl_copy_team(src, dst, NULL, bytes, tid, nt);
}

/* What the one-pass reduction of two shot works on. */
typedef struct {
    const char *src;   /* our part of the input */
    char *dst;         /* our part of the output */
    const char *mine;  /* the slot of sender 0's ring in our region */
    char *const *peer; /* the peers' regions */
    uint64_t ring;     /* bytes of a sender's ring */
    uint64_t at1;      /* offset of our step-1 part at a peer */
    uint64_t nv;       /* 16-byte vectors in our part */
    int n, me;
} dfccl_twoshot_pass_t;

/*
 * Steps 0 and 1 of two shot in one pass over our part: reduce our input
 * with the n - 1 copies the peers wrote to us, in the order of the
 * two-step form (x_ a peer's element, y_ the result so far: input, then
 * peers me + 1, me + 2, ...), and store the result to the output and into
 * our slot at every peer. The movers share the vectors,
 * DFCCL_TWOSHOT_UNROLL per thread in flight. One loop per type and op, so
 * that the loop a call runs is short.
 */
#define DFCCL_TWOSHOT_PASS(T, EXPR)                                                              \
    do {                                                                                         \
        const uint64_t nt_ = (uint64_t)DFCCL_NMOVERS, nv_ = p->nv, ring_ = p->ring;              \
        const int n_ = p->n, me_ = p->me;                                                        \
        const uint32_t div_ = (uint32_t)n_; /* AVG only: applied with the last peer */          \
        const char *src_ = p->src, *mine_ = p->mine;                                             \
        char *dst_ = p->dst;                                                                     \
        char *to_[DFCCL_ONESHOT_MAX_RANKS - 1];                                                  \
        /* the peers' step-1 parts, in registers: the stores below may alias                    \
         * anything the compiler would otherwise load again */                                  \
        DFCCL_PRAGMA_UNROLL                                                                      \
        for (int k_ = 1; k_ < DFCCL_ONESHOT_MAX_RANKS; k_++) {                                   \
            to_[k_ - 1] = k_ < n_ ? p->peer[(me_ + k_) % n_] + p->at1 : NULL;                   \
        }                                                                                        \
        for (uint64_t j_ = (uint64_t)DFCCL_TID; j_ < nv_; j_ += nt_ * DFCCL_TWOSHOT_UNROLL) {   \
            dfccl_vec_t acc_[DFCCL_TWOSHOT_UNROLL];                                              \
            DFCCL_PRAGMA_UNROLL                                                                  \
            for (int u_ = 0; u_ < DFCCL_TWOSHOT_UNROLL; u_++) {                                  \
                acc_[u_] = dfccl_vld(src_ + 16 * DFCCL_MIN(j_ + u_ * nt_, nv_ - 1));             \
            }                                                                                    \
            for (int k_ = 1; k_ < n_; k_++) {                                                    \
                const char *in_ = mine_ + (uint64_t)((me_ + k_) % n_) * ring_;                  \
                const uint32_t dv_ = k_ == n_ - 1 ? div_ : 0;                                    \
                dfccl_vec_t b_[DFCCL_TWOSHOT_UNROLL];                                            \
                (void)dv_;                                                                       \
                DFCCL_PRAGMA_UNROLL                                                              \
                for (int u_ = 0; u_ < DFCCL_TWOSHOT_UNROLL; u_++) {                              \
                    b_[u_] = dfccl_vld(in_ + 16 * DFCCL_MIN(j_ + u_ * nt_, nv_ - 1));            \
                }                                                                                \
                DFCCL_PRAGMA_UNROLL                                                              \
                for (int u_ = 0; u_ < DFCCL_TWOSHOT_UNROLL; u_++) {                              \
                    union { dfccl_vec_t v; T e[16 / sizeof(T)]; } xa_, ya_;                      \
                    xa_.v = b_[u_];                                                              \
                    ya_.v = acc_[u_];                                                            \
                    DFCCL_PRAGMA_UNROLL                                                          \
                    for (int e_ = 0; e_ < (int)(16 / sizeof(T)); e_++) {                         \
                        const T x_ = xa_.e[e_], y_ = ya_.e[e_];                                  \
                        ya_.e[e_] = (EXPR);                                                      \
                    }                                                                            \
                    acc_[u_] = ya_.v;                                                            \
                }                                                                                \
            }                                                                                    \
            DFCCL_PRAGMA_UNROLL                                                                  \
            for (int u_ = 0; u_ < DFCCL_TWOSHOT_UNROLL; u_++) {                                  \
                const uint64_t v_ = j_ + u_ * nt_;                                               \
                if (v_ < nv_) {                                                                  \
                    dfccl_vst(dst_ + 16 * v_, acc_[u_]);                                         \
                    DFCCL_PRAGMA_UNROLL                                                          \
                    for (int k_ = 0; k_ < DFCCL_ONESHOT_MAX_RANKS - 1; k_++) {                   \
                        if (to_[k_] != NULL) {                                                   \
                            dfccl_vst(to_[k_] + 16 * v_, acc_[u_]);                              \
                        }                                                                        \
                    }                                                                            \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
    } while (0)

#define DFCCL_DEFINE_TWOSHOT_INT(NAME, T, U)                                                     \
    DFCCL_F_NOINLINE void dfccl_twoshot_pass_##NAME(const dfccl_twoshot_pass_t *p, int op)      \
    {                                                                                            \
        DFCCL_RED_INT_OPS(DFCCL_TWOSHOT_PASS, T, U)                                              \
    }
DFCCL_INT_TYPES(DFCCL_DEFINE_TWOSHOT_INT)

#define DFCCL_DEFINE_TWOSHOT_FLOAT(NAME, T)                                                      \
    DFCCL_F_NOINLINE void dfccl_twoshot_pass_##NAME(const dfccl_twoshot_pass_t *p, int op)      \
    {                                                                                            \
        switch (op) {                                                                            \
        case DFCCL_K_SUM:  DFCCL_TWOSHOT_PASS(T, x_ + y_); break;                                \
        case DFCCL_K_PROD: DFCCL_TWOSHOT_PASS(T, x_ * y_); break;                                \
        case DFCCL_K_MIN:  DFCCL_TWOSHOT_PASS(T, x_ < y_ ? x_ : y_); break;                      \
        case DFCCL_K_MAX:  DFCCL_TWOSHOT_PASS(T, x_ > y_ ? x_ : y_); break;                      \
        case DFCCL_K_AVG:  DFCCL_TWOSHOT_PASS(T, dv_ > 1 ? (x_ + y_) / (T)dv_ : x_ + y_); break; \
        default: break;                                                                          \
        }                                                                                        \
    }
DFCCL_DEFINE_TWOSHOT_FLOAT(f32, float)
DFCCL_DEFINE_TWOSHOT_FLOAT(f64, double)

/* 16-bit floats: computed in float32, rounded on every store, as in the
 * two-operand loops. */
#define DFCCL_DEFINE_TWOSHOT_HALF(NAME, TO_F, FROM_F)                                            \
    DFCCL_F_NOINLINE void dfccl_twoshot_pass_##NAME(const dfccl_twoshot_pass_t *p, int op)      \
    {                                                                                            \
        switch (op) {                                                                            \
        case DFCCL_K_SUM:  DFCCL_TWOSHOT_PASS(uint16_t, FROM_F(TO_F(x_) + TO_F(y_))); break;     \
        case DFCCL_K_PROD: DFCCL_TWOSHOT_PASS(uint16_t, FROM_F(TO_F(x_) * TO_F(y_))); break;     \
        case DFCCL_K_MIN:                                                                        \
            DFCCL_TWOSHOT_PASS(uint16_t, FROM_F(TO_F(x_) < TO_F(y_) ? TO_F(x_) : TO_F(y_)));     \
            break;                                                                               \
        case DFCCL_K_MAX:                                                                        \
            DFCCL_TWOSHOT_PASS(uint16_t, FROM_F(TO_F(x_) > TO_F(y_) ? TO_F(x_) : TO_F(y_)));     \
            break;                                                                               \
        case DFCCL_K_AVG:                                                                        \
            DFCCL_TWOSHOT_PASS(uint16_t, FROM_F(dfccl_red_f32_op(op, dv_, TO_F(x_), TO_F(y_)))); \
            break;                                                                               \
        default: break;                                                                          \
        }                                                                                        \
    }
DFCCL_DEFINE_TWOSHOT_HALF(f16, dfccl_half_to_float, dfccl_float_to_half)
DFCCL_DEFINE_TWOSHOT_HALF(bf16, dfccl_bf16_to_float, dfccl_float_to_bf16)

DFCCL_F_DEVICE void dfccl_twoshot_pass(int dtype, int op, const dfccl_twoshot_pass_t *p)
{
    switch (dtype) {
    case DFCCL_K_INT8:     dfccl_twoshot_pass_i8(p, op); break;
    case DFCCL_K_UINT8:    dfccl_twoshot_pass_u8(p, op); break;
    case DFCCL_K_INT32:    dfccl_twoshot_pass_i32(p, op); break;
    case DFCCL_K_UINT32:   dfccl_twoshot_pass_u32(p, op); break;
    case DFCCL_K_INT64:    dfccl_twoshot_pass_i64(p, op); break;
    case DFCCL_K_UINT64:   dfccl_twoshot_pass_u64(p, op); break;
    case DFCCL_K_FLOAT16:  dfccl_twoshot_pass_f16(p, op); break;
    case DFCCL_K_BFLOAT16: dfccl_twoshot_pass_bf16(p, op); break;
    case DFCCL_K_FLOAT32:  dfccl_twoshot_pass_f32(p, op); break;
    case DFCCL_K_FLOAT64:  dfccl_twoshot_pass_f64(p, op); break;
    default: break;
    }
}

/* The call's end, once the block has read everything the peers wrote into
 * our region: the next slot, and our head for the peers' credit. */
DFCCL_F_DEVICE int dfccl_twoshot_done(dfccl_exec_t *x)
{
    DFCCL_STAMP(x->ctl, DFCCL_STAGE_COPIED);
    x->dyn.send_seq++;
    x->dyn.recv_seq++;
    if (DFCCL_TID == 0) {
        dfccl_st_consumed(&((dfccl_conn_ctrl_t *)(void *)x->ch->recv_ctrl)->head,
                          x->dyn.recv_seq);
    }
    dfccl_prim_moved(x);
    return DFCCL_PRIM_DONE;
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
    /* whole vectors everywhere: steps 0 and 1 go in one pass */
    const int fused = n >= DFCCL_TWOSHOT_FUSE_RANKS &&
                      ((((uintptr_t)src | (uintptr_t)dst | (uintptr_t)mine | ours | ring) & 15) |
                       ((ch->cnt * esz) & 15)) == 0;
    int k0, kstep;
    uint64_t ttid, tnt;

    dfccl_twoshot_team(n - 1, &k0, &kstep, &ttid, &tnt);

    if (n <= DFCCL_TWOSHOT_PAIR_RANKS) {
        /* one step: our whole share to the peer, the peer's into the output
         * with ours, in rank order; nothing reaches the output before the
         * wait has passed, and after it the call runs to its end */
        const char *in = mine + (uint64_t)(1 - me) * ring;

        if (x->dyn.slice < DFCCL_SHOT_SENT(0)) {
            DFCCL_SHOT_BLOCK_WAIT(x, dfccl_oneshot_credit(x));
            DFCCL_STAMP(x->ctl, DFCCL_STAGE_CREDIT);
            if (mover && ch->cnt > 0) {
                dfccl_twoshot_copy(src, x->ch->peer[1 - me] + ours, ch->cnt * esz, ttid, tnt);
            }
            dfccl_twoshot_sent(x, ours + flag0, seq1, 0, DFCCL_STAGE_SENT0);
        }
        DFCCL_SHOT_BLOCK_WAIT(x, dfccl_twoshot_arrived(x, mine, ring, flag0, seq1));
        DFCCL_STAMP(x->ctl, DFCCL_STAGE_ARRIVED0);
        if (mover && ch->cnt > 0) {
            dfccl_reduce_copy(dt, op, me == 0 ? src : in, me == 0 ? in : src, dst, NULL, ch->cnt,
                              op == DFCCL_K_AVG ? 2u : 0u);
        }
        dfccl_block_sync(); /* every read of our region is done */
        return dfccl_twoshot_done(x);
    }

    if (x->dyn.step == 0) {
        if (x->dyn.slice < DFCCL_SHOT_SENT(0)) {
            DFCCL_SHOT_BLOCK_WAIT(x, dfccl_oneshot_credit(x));
            DFCCL_STAMP(x->ctl, DFCCL_STAGE_CREDIT);
            for (int k = k0; mover && k < n - 1; k += kstep) {
                const int q = (me + 1 + k) % n;
                uint64_t qbeg;
                const uint64_t qcnt = dfccl_twoshot_part(ch, pe, q, &qbeg);
                if (qcnt > 0) {
                    dfccl_twoshot_copy(src + qbeg * esz, x->ch->peer[q] + ours, qcnt * esz, ttid,
                                       tnt);
                }
            }
            dfccl_twoshot_sent(x, ours + flag0, seq1, 0, DFCCL_STAGE_SENT0);
        }
        DFCCL_SHOT_BLOCK_WAIT(x, dfccl_twoshot_arrived(x, mine, ring, flag0, seq1));
        DFCCL_STAMP(x->ctl, DFCCL_STAGE_ARRIVED0);
        if (fused) {
            /* step 1's writes too: nothing can be switched out before its
             * flag goes below, so a replay never finds step 1 half sent */
            if (mover && mcnt > 0) {
                dfccl_twoshot_pass_t p;
                p.src  = src + mbeg * esz;
                p.dst  = dst + mbeg * esz;
                p.mine = mine;
                p.peer = x->ch->peer;
                p.ring = ring;
                p.at1  = ours + pbytes;
                p.nv   = mcnt * esz / 16;
                p.n    = n;
                p.me   = me;
                dfccl_twoshot_pass(dt, op, &p);
            }
        } else {
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
        }
        DFCCL_STAMP(x->ctl, DFCCL_STAGE_REDUCED);
        x->dyn.step = 1;
        dfccl_prim_moved(x);
    }

    /* step 1: our reduced part to every peer (written by the one pass
     * already), then theirs into the output */
    if (x->dyn.slice < DFCCL_SHOT_SENT(1)) {
        /* two peers per pass: one load of our part feeds both */
        for (int k = 1; !fused && mover && k < n && mcnt > 0; k += 2) {
            dfccl_reduce_copy(dt, op, dst + mbeg * esz, NULL,
                              x->ch->peer[(me + k) % n] + ours + pbytes,
                              k + 1 < n ? x->ch->peer[(me + k + 1) % n] + ours + pbytes : NULL,
                              mcnt, 0);
        }
        dfccl_twoshot_sent(x, ours + flag1, seq1, 1, DFCCL_STAGE_SENT1);
    }
    DFCCL_SHOT_BLOCK_WAIT(x, dfccl_twoshot_arrived(x, mine, ring, flag1, seq1));
    DFCCL_STAMP(x->ctl, DFCCL_STAGE_ARRIVED1);
    for (int k = k0; mover && k < n - 1; k += kstep) {
        const int q = (me + 1 + k) % n;
        uint64_t qbeg;
        const uint64_t qcnt = dfccl_twoshot_part(ch, pe, q, &qbeg);
        if (qcnt > 0) {
            dfccl_twoshot_copy(mine + (uint64_t)q * ring + pbytes, dst + qbeg * esz, qcnt * esz,
                               ttid, tnt);
        }
    }
    dfccl_block_sync(); /* every copy out of our region is done */
    return dfccl_twoshot_done(x);
}

#endif /* DFCCL_KERNELS_ALGO_TWOSHOT_H_ */
