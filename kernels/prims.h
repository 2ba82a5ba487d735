/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Primitives of the daemon: one call moves one slice through the connectors
 * with any fusion of recv, reduce, copy and send. A primitive first polls, at
 * most `spin` times, until its recv connector is readable and its send
 * connector is writable. If it is not ready by then it returns
 * DFCCL_PRIM_STUCK having touched nothing, so the collective can be preempted
 * and the primitive replayed later (idempotent). Once ready it moves the data
 * and only then publishes: the send connector's tail, then the recv
 * connector's head.
 */
#ifndef DFCCL_KERNELS_PRIMS_H_
#define DFCCL_KERNELS_PRIMS_H_

#include "daemon_types.h"
#include "reduce.h"

enum {
    DFCCL_P_RECV   = 1u << 0, /* read the slot from the recv connector */
    DFCCL_P_SEND   = 1u << 1, /* write the result to the send connector */
    DFCCL_P_REDUCE = 1u << 2, /* result = recv (op) src */
    DFCCL_P_COPY   = 1u << 3, /* write the result to dst */
    DFCCL_P_FINAL  = 1u << 4  /* last reduction of an AVG: divide by nranks */
};

enum {
    DFCCL_PRIM_OK    = 0,
    DFCCL_PRIM_STUCK = 1,
    DFCCL_PRIM_DONE  = 2
};

/* Block-shared control words (shared memory on GPUs). */
typedef struct {
    uint32_t ready;   /* primitives: connectors ready */
    uint32_t ntasks;
    uint32_t exiting;
    uint32_t quit;    /* scheduler: quit decision of this pass */
    uint32_t rc;      /* scheduler: return code decided at the top of a pass */
    uint32_t active;  /* scheduler: SQEs pulled at the top of a pass */
    uint32_t resize;  /* scheduler: a RESIZE or REMAP SQE asked this launch to quit */
    uint32_t hready[2]; /* SIMPLE with a publishing warp: connectors ready,
                         * by the parity of the primitive (dfccl_prim_posted) */
    uint32_t arrived;   /* scheduler: queue positions (below 32) whose
                         * previous rank has sent data not yet received */
    uint32_t task_rc;   /* scheduler: what a collective run by a team of */
    uint32_t task_moved; /* the block's first warps returned, and whether it moved */
    uint32_t done_runs;  /* thread 0: dyn.runs of the collective it just completed,
                          * for its progress word (dfccl_daemon_post_cqe) */
    /* warp 0, polling the SQ (block 0, dfccl_daemon_fetch_sq) or the log
     * (dfccl_daemon_pull_log): the entries its lanes found, their spans
     * (1 + the entries of their batch written before them), and lane 0's
     * decision to poll again */
    dfccl_sqe_t sqe[DFCCL_SQ_WINDOW_MAX];
    uint32_t    span[DFCCL_SQ_WINDOW_MAX];
    uint32_t    sq_go;
    uint32_t    pad2;
#ifdef DFCCL_STAGE_TIMES
    uint64_t stamp[DFCCL_NSTAGES]; /* thread 0: when the task reached each stage */
#endif
} dfccl_blk_ctl_t;

/* Thread 0 stamps the first time the running task reaches `stage`. */
#ifdef DFCCL_STAGE_TIMES
#define DFCCL_STAMP(ctl, stage)                                                \
    do {                                                                       \
        if (DFCCL_TID == 0 && (ctl)->stamp[stage] == 0) {                      \
            (ctl)->stamp[stage] = dfccl_now_ns();                              \
        }                                                                      \
    } while (0)
#else
#define DFCCL_STAMP(ctl, stage) ((void)0)
#endif

/* Thread 0 clears the stamps: at launch and after each completion. */
DFCCL_F_DEVICE void dfccl_stage_clear(dfccl_blk_ctl_t *ctl)
{
#ifdef DFCCL_STAGE_TIMES
    for (int i = 0; i < DFCCL_NSTAGES; i++) {
        ctl->stamp[i] = 0;
    }
#else
    (void)ctl;
#endif
}

/* The collective being executed by a block: the "active context slot". */
typedef struct {
    const dfccl_coll_static_t *st;
    const dfccl_chan_t        *ch;
    dfccl_dyn_t                dyn;   /* identical copy in every thread */
    const char                *sendbuff;
    char                      *recvbuff;
    dfccl_blk_ctl_t           *ctl;
    const uint64_t            *abort_flag;
    uint64_t                   slice_elems;
    char                      *ll_scratch; /* this block's DFCCL_LL_MAX_BYTES */
    uint32_t                   spin;
    uint32_t                   spin_sticky;
    uint32_t                   progressed; /* primitives done in this activation */
    uint32_t                   handoffs;   /* dfccl_prim_posted calls in this activation */
    uint32_t                   dirty;      /* dyn changed without progress: save it */
    uint32_t                   nthreads;   /* threads running it: the block's first */
    uint32_t                   chan;       /* its channel (the block's index) */
} dfccl_exec_t;

/* Poll until the connectors allow `flags`, at most x->spin times. */
DFCCL_F_DEVICE uint32_t dfccl_prim_wait(dfccl_exec_t *x, uint32_t flags)
{
    const dfccl_chan_t *ch = x->ch;
    uint32_t nslots        = x->st->nslots;
    dfccl_dyn_t *d         = &x->dyn; /* thread 0's copy holds the caches */

    for (uint32_t i = 0;; i++) {
        uint32_t ok = 1;
        if ((flags & DFCCL_P_RECV) && d->tail_cache <= d->recv_seq) {
            d->tail_cache = dfccl_ld_acquire_sys(&ch->recv_ctrl->tail);
            ok            = d->tail_cache > d->recv_seq;
        }
        if (ok && (flags & DFCCL_P_SEND) && d->send_seq - d->head_cache >= nslots) {
            d->head_cache = dfccl_ld_acquire_sys(&ch->send_ctrl->head);
            ok            = d->send_seq - d->head_cache < nslots;
        }
        if (ok) {
            return 1;
        }
        if (i >= x->spin) {
            return 0;
        }
        if (((i & 63) == 63) && dfccl_ld_relaxed(x->abort_flag)) {
            return 0;
        }
        dfccl_pause();
    }
}

/*
 * Thread 0 waits for the connectors (dfccl_prim_wait) and the threads
 * running the collective learn the outcome: nonzero when they allow
 * `flags`, 0 when the primitive is STUCK (every thread returns then).
 */
DFCCL_F_DEVICE int dfccl_prim_ready(dfccl_exec_t *x, uint32_t flags)
{
    if (DFCCL_TID == 0) {
        x->ctl->ready = dfccl_prim_wait(x, flags);
    }
    dfccl_team_sync(x->nthreads);
    if (!x->ctl->ready) {
        dfccl_team_sync(x->nthreads); /* everyone read `ready` before it changes */
        return 0;
    }
    return 1;
}

/* Bookkeeping after a primitive moved its slice (every thread). */
DFCCL_F_DEVICE void dfccl_prim_moved(dfccl_exec_t *x)
{
    x->dyn.started = 1;
    x->progressed++;
    x->spin = x->spin_sticky; /* progress: wait longer for the rest of it */
}

/* Lines each thread of an LL primitive polls at once (loads in flight). */
#ifndef DFCCL_LL_UNROLL
#define DFCCL_LL_UNROLL 4
#endif

/* Word i of a slice of `bytes` at p: whole and aligned, or byte by byte
 * (the last word of a slice may be partial, a user buffer unaligned). */
DFCCL_F_DEVICE uint64_t dfccl_ll_get(const char *p, uint64_t i, uint64_t bytes)
{
    const uint64_t o = i * 8;
    uint64_t v       = 0;

    if (o + 8 <= bytes && ((uintptr_t)p & 7) == 0) {
        return dfccl_ld_word(p + o);
    }
    for (uint64_t k = 0; k < 8 && o + k < bytes; k++) {
        v |= (uint64_t)dfccl_ld_byte(p + o + k) << (8 * k);
    }
    return v;
}

DFCCL_F_DEVICE void dfccl_ll_put(char *p, uint64_t i, uint64_t bytes, uint64_t v)
{
    const uint64_t o = i * 8;

    if (o + 8 <= bytes && ((uintptr_t)p & 7) == 0) {
        dfccl_st_word(p + o, v);
        return;
    }
    for (uint64_t k = 0; k < 8 && o + k < bytes; k++) {
        p[o + k] = (char)(uint8_t)(v >> (8 * k));
    }
}

/* An LL primitive's source words of one thread's turn (lines i0, i0 + nt,
 * ...): into sv for a reduction, into v where nothing is received. */
DFCCL_F_DEVICE void dfccl_ll_src(uint32_t flags, const char *src, uint64_t bytes,
                                 uint64_t nlines, uint64_t i0, uint64_t nt, uint64_t *v,
                                 uint64_t *sv)
{
    const int reduce = (flags & DFCCL_P_REDUCE) != 0, recv = (flags & DFCCL_P_RECV) != 0;

    if (!reduce && recv) {
        return;
    }
    for (int u = 0; u < DFCCL_LL_UNROLL; u++) {
        const uint64_t i = i0 + (uint64_t)u * nt;
        const uint64_t w = i < nlines ? dfccl_ll_get(src, i, bytes) : 0;

        if (reduce) {
            sv[u] = w;
        }
        if (!recv) {
            v[u] = w;
        }
    }
}

/*
 * The LL form of a primitive (st->proto == DFCCL_K_PROTO_LL, slices of at
 * most DFCCL_LL_MAX_BYTES): a slot holds one 16-byte line per 8 bytes of
 * data, each line flagged with the low 32 bits of the slot's sequence
 * number plus one (registration zeroes the region, so a flag never matches
 * memory left from before). Thread 0 first makes sure the next rank's slot
 * is free. Then every thread running the collective (the block, or the
 * team of a small one) works on its own lines, DFCCL_LL_UNROLL at a time,
 * with no barrier: it polls a line until its flags match, reduces its 8
 * bytes with the source, stores the result into the next rank's line and
 * into dst. A vote of those threads at the end decides whether the primitive
 * happened. If a line did not arrive within the spin threshold the
 * primitive is STUCK and commits nothing: the sequence numbers and the
 * receive head stay, so its replay polls the same lines, and everything it
 * wrote already is written again with the same values (the next rank
 * consumes a line only when all lines of the slot carry the flag, so a
 * partly written slot is only seen as not yet arrived). The one write that
 * is not idempotent, a reduction into dst when dst overlaps the source (in
 * place), waits for the vote in the block's scratch. The only publication
 * is the receive head; the sender writes no tail: the flags are the data's
 * arrival. At least one line goes through, so every send pairs with one
 * receive.
 */
DFCCL_F_DEVICE int dfccl_prim_ll(dfccl_exec_t *x, uint32_t flags, const char *src, char *dst,
                                 uint64_t n)
{
    const dfccl_coll_static_t *st = x->st;
    const dfccl_chan_t *ch        = x->ch;
    const uint64_t bytes  = n * st->elem_size;
    const uint64_t nlines = bytes == 0 ? 1 : DFCCL_DIV_UP(bytes, 8);
    const uint64_t stride = 2ull * st->slot_bytes;
    const uint64_t nt     = (uint64_t)x->nthreads;
    const uint32_t full   = (1u << DFCCL_LL_UNROLL) - 1;
    const int reduce      = (flags & DFCCL_P_REDUCE) != 0;
    const int stash       = reduce && (flags & DFCCL_P_COPY) && dst < src + bytes &&
                      src < dst + bytes;
    const uint32_t div    = (flags & DFCCL_P_FINAL) ? (uint32_t)st->nranks : 0;
    uint64_t *scratch     = (uint64_t *)(void *)x->ll_scratch;
    const char *rl        = NULL;
    char *sl              = NULL;
    uint32_t rflag = 0, sflag = 0;
    int ok = 1;

    uint64_t v[DFCCL_LL_UNROLL], sv[DFCCL_LL_UNROLL];

    /* The source (of a reduction, or of a send) is read before the lines
     * are polled and before the send credit is checked: its load is then
     * off the ring's path (the peer's line arrives last), and it is
     * replayed harmlessly if the primitive is STUCK. Each thread's first
     * lines are read here, the others at the top of their turn. */
    dfccl_ll_src(flags, src, bytes, nlines, (uint64_t)DFCCL_TID, nt, v, sv);
    if (flags & DFCCL_P_RECV) {
        rl    = ch->recv_data + (x->dyn.recv_seq % st->nslots) * stride;
        rflag = (uint32_t)(x->dyn.recv_seq + 1);
    }
    if (flags & DFCCL_P_SEND) {
        sl    = ch->send_data + (x->dyn.send_seq % st->nslots) * stride;
        sflag = (uint32_t)(x->dyn.send_seq + 1);
        if (!dfccl_prim_ready(x, DFCCL_P_SEND)) {
            return DFCCL_PRIM_STUCK;
        }
    }

    for (uint64_t i0 = (uint64_t)DFCCL_TID; ok && i0 < nlines; i0 += nt * DFCCL_LL_UNROLL) {
        if (i0 != (uint64_t)DFCCL_TID) {
            dfccl_ll_src(flags, src, bytes, nlines, i0, nt, v, sv);
        }
        if (flags & DFCCL_P_RECV) {
            uint32_t got = 0, d0, d1;
            /* one look at every line, then up to `spin` more at the missing */
            for (uint32_t s = 0;; s++) {
                for (int u = 0; u < DFCCL_LL_UNROLL; u++) {
                    const uint64_t i = i0 + (uint64_t)u * nt;
                    if (got & (1u << u)) {
                        continue;
                    }
                    if (i >= nlines) {
                        got |= 1u << u;
                    } else if (dfccl_ll_load(rl + i * DFCCL_LL_LINE, rflag, &d0, &d1)) {
                        v[u] = (uint64_t)d0 | ((uint64_t)d1 << 32);
                        got |= 1u << u;
                    }
                }
                if (got == full) {
                    break;
                }
                if (s >= x->spin) {
                    ok = 0;
                    break;
                }
                dfccl_pause();
            }
            if (!ok) {
                break;
            }
        }
        for (int u = 0; u < DFCCL_LL_UNROLL; u++) {
            const uint64_t i = i0 + (uint64_t)u * nt;
            uint64_t r = v[u];
            if (i >= nlines) {
                break;
            }
            if (reduce) {
                r = dfccl_red_word(st->dtype, st->op, div, r, sv[u]);
            }
            if (flags & DFCCL_P_SEND) {
                dfccl_ll_store(sl + i * DFCCL_LL_LINE, (uint32_t)r, (uint32_t)(r >> 32), sflag);
            }
            if (flags & DFCCL_P_COPY) {
                if (stash) {
                    scratch[i] = r;
                } else {
                    dfccl_ll_put(dst, i, bytes, r);
                }
            }
        }
    }
    if (!dfccl_team_all(ok, x->nthreads)) {
        return DFCCL_PRIM_STUCK; /* nothing committed */
    }
    if (flags & DFCCL_P_RECV) {
        DFCCL_STAMP(x->ctl, DFCCL_STAGE_ARRIVED0); /* a diagnostic build */
    }
    if (stash) { /* each thread its own lines: no barrier needed */
        for (uint64_t i = (uint64_t)DFCCL_TID; i < nlines; i += nt) {
            dfccl_ll_put(dst, i, bytes, scratch[i]);
        }
    }
    if (flags & DFCCL_P_SEND) {
        x->dyn.send_seq++;
    }
    if (flags & DFCCL_P_RECV) {
        x->dyn.recv_seq++;
        if (DFCCL_TID == 0) {
            /* every thread's polls returned before the vote */
            dfccl_st_consumed(&ch->recv_ctrl->head, x->dyn.recv_seq);
        }
    }
    dfccl_prim_moved(x);
    return DFCCL_PRIM_OK;
}

/* SIMPLE: move slice n of the primitive (recv slot or src, reduced with
 * src, into dst and/or the send slot). Called by the movers only. */
DFCCL_F_DEVICE void dfccl_prim_move(const dfccl_exec_t *x, uint32_t flags, const char *src,
                                    char *dst, uint64_t n)
{
    const dfccl_coll_static_t *st = x->st;
    const dfccl_chan_t *ch        = x->ch;
    const uint64_t slot           = (uint64_t)st->slot_bytes;
    const char *in  = (flags & DFCCL_P_RECV) ?
                          ch->recv_data + (x->dyn.recv_seq % st->nslots) * slot : src;
    char *sendslot  = (flags & DFCCL_P_SEND) ?
                          ch->send_data + (x->dyn.send_seq % st->nslots) * slot : NULL;
    char *out0      = (flags & DFCCL_P_COPY) ? dst : sendslot;
    char *out1      = (flags & DFCCL_P_COPY) ? sendslot : NULL;

    if (n > 0 && out0 != NULL) {
        dfccl_reduce_copy(st->dtype, st->op, in, (flags & DFCCL_P_REDUCE) ? src : NULL, out0,
                          out1, n, (flags & DFCCL_P_FINAL) ? (uint32_t)st->nranks : 0);
    }
}

/*
 * SIMPLE, after a barrier that ordered the movers' accesses to the slots
 * before thread `publisher`: every thread advances its copy of the
 * sequence numbers, and the publisher releases the send tail (cumulative:
 * a receiver that acquires it sees the whole slot; a full system fence
 * here would cost far more) and stores the receive head, which needs no
 * fence (dfccl_st_consumed).
 */
DFCCL_F_DEVICE void dfccl_prim_commit(dfccl_exec_t *x, uint32_t flags, int publisher)
{
    const dfccl_chan_t *ch = x->ch;

    if (flags & DFCCL_P_SEND) {
        x->dyn.send_seq++;
    }
    if (flags & DFCCL_P_RECV) {
        x->dyn.recv_seq++;
    }
    if (DFCCL_TID == publisher) {
        if (flags & DFCCL_P_SEND) {
            dfccl_st_release_sys(&ch->send_ctrl->tail, x->dyn.send_seq);
        }
        if (flags & DFCCL_P_RECV) {
            dfccl_st_consumed(&ch->recv_ctrl->head, x->dyn.recv_seq);
        }
    }
    dfccl_prim_moved(x);
}

/*
 * SIMPLE with a publishing warp (GPU blocks of at least 128 threads): thread
 * 0 polls the connectors and tells the movers (threads below DFCCL_NMOVERS)
 * through their own barrier; they move the slice and meet the last warp at
 * the handoff barrier, where it learns whether the primitive happened. The
 * first thread of that warp then publishes the slice (the release of the
 * send tail waits until the block's stores have reached the peer) while the
 * movers already poll for and move the next slice: they wait for the
 * publisher only at the next handoff. `ready` is kept by the parity of the
 * primitive: thread 0 writes it for primitive k + 2 only after every thread
 * passed the handoff of k + 1, so after the last warp read it for k. A
 * STUCK primitive moves and publishes nothing; every thread returns STUCK.
 */
DFCCL_F_DEVICE int dfccl_prim_posted(dfccl_exec_t *x, uint32_t flags, const char *src,
                                     char *dst, uint64_t n)
{
    const uint32_t par = x->handoffs++ & 1u;
    const int movers   = DFCCL_NMOVERS;

    if (DFCCL_TID < movers) {
        if (DFCCL_TID == 0) {
            x->ctl->hready[par] = dfccl_prim_wait(x, flags);
        }
        dfccl_bar_named(DFCCL_BAR_MOVERS, (uint32_t)movers);
        if (x->ctl->hready[par]) {
            dfccl_prim_move(x, flags, src, dst, n);
        }
    }
    dfccl_bar_named(DFCCL_BAR_HANDOFF, (uint32_t)DFCCL_NTHREADS);
    if (!x->ctl->hready[par]) {
        return DFCCL_PRIM_STUCK;
    }
    dfccl_prim_commit(x, flags, movers);
    return DFCCL_PRIM_OK;
}

DFCCL_F_DEVICE int dfccl_prim(dfccl_exec_t *x, uint32_t flags, const char *src, char *dst,
                              uint64_t n)
{
    const int comm = (flags & (DFCCL_P_RECV | DFCCL_P_SEND)) != 0;

    if (x->st->proto == DFCCL_K_PROTO_LL && comm) {
        return dfccl_prim_ll(x, flags, src, dst, n);
    }
    if (comm && DFCCL_NMOVERS < DFCCL_NTHREADS) {
        return dfccl_prim_posted(x, flags, src, dst, n);
    }
    /* one thread per block (host), blocks below 128 threads, or a copy
     * that involves no connector: thread 0 publishes after a barrier */
    if (comm && !dfccl_prim_ready(x, flags)) {
        return DFCCL_PRIM_STUCK;
    }
    if (DFCCL_TID < DFCCL_NMOVERS) {
        dfccl_prim_move(x, flags, src, dst, n);
    }
    dfccl_block_sync();
    dfccl_prim_commit(x, flags, 0);
    return DFCCL_PRIM_OK;
}

/*
 * Partial completion: the first `elems` elements of this channel's range
 * are final in the receive buffer for the run in flight (the channel's
 * progress word, DFCCL_K_PROG_WORD; none where ch->progress is NULL). An
 * algorithm that finalizes its range in order calls it between
 * primitives, never inside one: a STUCK primitive returns before the
 * call, so nothing is published early, and a preempted collective resumes
 * past it, so nothing is published twice (a word published again would
 * hold the same value). The whole range goes with the completion
 * (dfccl_daemon_post_cqe), so the algorithm publishes only what comes
 * before its last part. The threads running it
 * meet first, so that thread 0's release covers every thread's writes to
 * the buffer (an LL primitive's threads write their lines after its vote,
 * without another barrier). The release is at GPU scope, as a CQE's
 * (dfccl_st_to_host): what reads the data after seeing the word reads it
 * through this GPU (a kernel polling the word, or work that the host
 * starts once it saw it). A range past the word's elements field is
 * published with the completion only.
 */
DFCCL_F_DEVICE void dfccl_prog_publish(dfccl_exec_t *x, uint64_t elems)
{
    uint64_t *word = x->ch->progress;

    if (word == NULL || elems >= DFCCL_K_PROG_ALL) {
        return;
    }
    dfccl_team_sync(x->nthreads);
    if (DFCCL_TID == 0) {
        dfccl_st_to_host(word, DFCCL_K_PROG_WORD(x->dyn.runs + 1u, elems));
    }
}

/*
 * Run the primitive `flags` over a chunk of `elems` elements, one slice at a
 * time, resuming at x->dyn.slice.
 */
DFCCL_F_DEVICE int dfccl_prim_chunk(dfccl_exec_t *x, uint32_t flags, const char *src, char *dst,
                                    uint64_t elems)
{
    uint64_t esz = x->st->elem_size;

    while ((uint64_t)x->dyn.slice * x->slice_elems < elems) {
        uint64_t o = (uint64_t)x->dyn.slice * x->slice_elems;
        uint64_t n = DFCCL_MIN(x->slice_elems, elems - o);
        int rc     = dfccl_prim(x, flags, src ? src + o * esz : NULL, dst ? dst + o * esz : NULL,
                                n);
        if (rc != DFCCL_PRIM_OK) {
            return rc;
        }
        x->dyn.slice++;
    }
    return DFCCL_PRIM_OK;
}

#endif /* DFCCL_KERNELS_PRIMS_H_ */
