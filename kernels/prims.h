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
    uint32_t resize;  /* scheduler: a RESIZE SQE asked this launch to quit */
    uint32_t pad[1];
} dfccl_blk_ctl_t;

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

/* Bookkeeping after a primitive moved its slice (every thread). */
DFCCL_F_DEVICE void dfccl_prim_moved(dfccl_exec_t *x)
{
    x->dyn.started = 1;
    x->progressed++;
    x->spin = x->spin_sticky; /* progress: wait longer for the rest of it */
}

/*
 * The LL form of a primitive (st->proto == DFCCL_K_PROTO_LL, slices of at
 * most DFCCL_LL_MAX_BYTES): a slot holds one 16-byte line per 8 bytes of
 * data, each line flagged with the low 32 bits of the slot's sequence
 * number plus one (registration zeroes the region, so a flag never matches
 * memory left from before). Thread 0 waits for send credit as in SIMPLE;
 * every thread polls its own lines; a block-wide vote decides whether the
 * primitive runs or is STUCK, having consumed nothing. Then the received
 * data is unpacked into the block's scratch, reduced or copied there with
 * the same loops as SIMPLE, and packed into the next rank's slot. The only
 * release is the receive head (the slot may be reused); the sender's tail
 * is not written: the flags are the data's arrival. At least one line goes
 * through, so every send pairs with one receive.
 */
DFCCL_F_DEVICE int dfccl_prim_ll(dfccl_exec_t *x, uint32_t flags, const char *src, char *dst,
                                 uint64_t n)
{
    const dfccl_coll_static_t *st = x->st;
    const dfccl_chan_t *ch        = x->ch;
    const uint64_t bytes  = n * st->elem_size;
    const uint64_t nlines = bytes == 0 ? 1 : DFCCL_DIV_UP(bytes, 8);
    const uint64_t stride = 2ull * st->slot_bytes;
    char *scratch         = x->ll_scratch;
    const char *rl        = NULL;
    char *sl              = NULL;
    const void *a;
    void *d0, *d1;
    uint32_t rflag = 0, sflag = 0, v0, v1;
    int ok = 1;

    if (flags & DFCCL_P_RECV) {
        rl    = ch->recv_data + (x->dyn.recv_seq % st->nslots) * stride;
        rflag = (uint32_t)(x->dyn.recv_seq + 1);
    }
    if (flags & DFCCL_P_SEND) {
        sl    = ch->send_data + (x->dyn.send_seq % st->nslots) * stride;
        sflag = (uint32_t)(x->dyn.send_seq + 1);
        if (DFCCL_TID == 0) {
            ok = (int)dfccl_prim_wait(x, DFCCL_P_SEND);
        }
    }
    if (flags & DFCCL_P_RECV) {
        for (uint64_t i = (uint64_t)DFCCL_TID; ok && i < nlines; i += (uint64_t)DFCCL_NTHREADS) {
            for (uint32_t s = 0; !dfccl_ll_load(rl + i * DFCCL_LL_LINE, rflag, &v0, &v1); s++) {
                if (s >= x->spin) {
                    ok = 0;
                    break;
                }
                dfccl_pause();
            }
        }
    }
    if (!dfccl_block_all(ok)) {
        return DFCCL_PRIM_STUCK; /* nothing consumed, nothing sent */
    }

    if (flags & DFCCL_P_RECV) {
        for (uint64_t i = (uint64_t)DFCCL_TID; i < nlines; i += (uint64_t)DFCCL_NTHREADS) {
            uint32_t *w = (uint32_t *)(void *)(scratch + i * 8);
            (void)dfccl_ll_load(rl + i * DFCCL_LL_LINE, rflag, &v0, &v1);
            w[0] = v0;
            w[1] = v1;
        }
        dfccl_block_sync();
    }
    /* result = (recv or src) (op) src, to dst and/or the scratch */
    a  = (flags & DFCCL_P_RECV) ? (const void *)scratch : (const void *)src;
    d0 = (flags & DFCCL_P_COPY) ? (void *)dst : (void *)scratch;
    d1 = ((flags & DFCCL_P_COPY) && (flags & DFCCL_P_SEND)) ? (void *)scratch : NULL;
    if (n > 0) { /* in place (d0 == a) the copy still fills d1 */
        dfccl_reduce_copy(st->dtype, st->op, a, (flags & DFCCL_P_REDUCE) ? src : NULL, d0, d1, n,
                          (flags & DFCCL_P_FINAL) ? (uint32_t)st->nranks : 0);
    }
    dfccl_block_sync();
    if (flags & DFCCL_P_SEND) {
        for (uint64_t i = (uint64_t)DFCCL_TID; i < nlines; i += (uint64_t)DFCCL_NTHREADS) {
            const uint32_t *w = (const uint32_t *)(const void *)(scratch + i * 8);
            dfccl_ll_store(sl + i * DFCCL_LL_LINE, w[0], w[1], sflag);
        }
        x->dyn.send_seq++;
    }
    if (flags & DFCCL_P_RECV) {
        x->dyn.recv_seq++;
        if (DFCCL_TID == 0) {
            /* every thread's reads of the slot are behind the barriers */
            dfccl_st_release_sys(&ch->recv_ctrl->head, x->dyn.recv_seq);
        }
    }
    dfccl_prim_moved(x);
    return DFCCL_PRIM_OK;
}

DFCCL_F_DEVICE int dfccl_prim(dfccl_exec_t *x, uint32_t flags, const char *src, char *dst,
                              uint64_t n)
{
    const dfccl_coll_static_t *st = x->st;
    const dfccl_chan_t *ch        = x->ch;
    const char *in;
    char *sendslot = NULL, *out0, *out1;

    if (st->proto == DFCCL_K_PROTO_LL && (flags & (DFCCL_P_RECV | DFCCL_P_SEND))) {
        return dfccl_prim_ll(x, flags, src, dst, n);
    }
    if (flags & (DFCCL_P_RECV | DFCCL_P_SEND)) {
        if (DFCCL_TID == 0) {
            x->ctl->ready = dfccl_prim_wait(x, flags);
        }
        dfccl_block_sync();
        if (!x->ctl->ready) {
            dfccl_block_sync(); /* everyone read `ready` before it changes */
            return DFCCL_PRIM_STUCK;
        }
    }

    in = (flags & DFCCL_P_RECV) ?
             ch->recv_data + (x->dyn.recv_seq % st->nslots) * (uint64_t)st->slot_bytes :
             src;
    if (flags & DFCCL_P_SEND) {
        sendslot = ch->send_data + (x->dyn.send_seq % st->nslots) * (uint64_t)st->slot_bytes;
    }
    out0 = (flags & DFCCL_P_COPY) ? dst : sendslot;
    out1 = (flags & DFCCL_P_COPY) ? sendslot : NULL;
    if (n > 0 && out0 != NULL) {
        dfccl_reduce_copy(st->dtype, st->op, in, (flags & DFCCL_P_REDUCE) ? src : NULL, out0,
                          out1, n, (flags & DFCCL_P_FINAL) ? (uint32_t)st->nranks : 0);
    }
    dfccl_block_sync();

    if (flags & DFCCL_P_SEND) {
        x->dyn.send_seq++;
    }
    if (flags & DFCCL_P_RECV) {
        x->dyn.recv_seq++;
    }
    if (DFCCL_TID == 0) {
        /* The barrier above orders every thread's data writes before this
         * thread's release store of the tail; a release is cumulative, so a
         * receiver that acquires the tail sees the whole slot. (A full
         * system fence here cost ~10 us per primitive on H200s.) */
        if (flags & DFCCL_P_SEND) {
            dfccl_st_release_sys(&ch->send_ctrl->tail, x->dyn.send_seq);
        }
        if (flags & DFCCL_P_RECV) {
            dfccl_st_release_sys(&ch->recv_ctrl->head, x->dyn.recv_seq);
        }
    }
    dfccl_prim_moved(x);
    return DFCCL_PRIM_OK;
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
