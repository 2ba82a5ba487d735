/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Ring algorithms of the five collectives, written only as primitive calls.
 * Each one runs one channel of a collective: the channel's element range
 * [ch->off, ch->off + ch->cnt) in loops, each loop as a sequence of steps,
 * each step as a chunk of slices. x->dyn (loop, step, slice) says where the
 * collective stands, so a preempted collective re-enters the same function
 * and resumes at the primitive that was stuck. Every rank derives chunk
 * sizes from the same static context, so an empty chunk is skipped on both
 * ends of a connector alike.
 *
 * Positions are the group's ring order (dfccl_coll_static_t.ring_pos):
 * position r receives from r-1 and sends to r+1 (mod n). It is rank order
 * unless the group's hosts hold ranks that are not consecutive; where
 * data belongs to a rank (allgather and reduce-scatter blocks, all-to-all
 * pairs), dfccl_ring_rank names the rank at a position.
 */
#ifndef DFCCL_KERNELS_ALGO_RING_H_
#define DFCCL_KERNELS_ALGO_RING_H_

#include "../prims.h"

DFCCL_F_DEVICE int dfccl_mod(int a, int n)
{
    a %= n;
    return a < 0 ? a + n : a;
}

/* The rank at ring position p. */
DFCCL_F_DEVICE int dfccl_ring_rank(const dfccl_exec_t *x, int p)
{
    return x->st->ring_ranks != NULL ? x->st->ring_ranks[p] : p;
}

/* Elements per chunk: a whole number of slices. */
DFCCL_F_DEVICE uint64_t dfccl_chunk_elems(const dfccl_exec_t *x)
{
    return x->slice_elems * x->st->chunk_slices;
}

/* Keep chunk boundaries 16-byte aligned for vector loops. */
DFCCL_F_DEVICE uint64_t dfccl_align_elems(const dfccl_exec_t *x, uint64_t e)
{
    uint64_t a = DFCCL_MAX(16u / x->st->elem_size, 1u);
    return DFCCL_DIV_UP(e, a) * a;
}

/*
 * Allreduce: reduce-scatter then allgather around the ring. A loop covers
 * n chunks; at step s rank r works on chunk (r - 1 - s) mod n:
 *   step 0           send          own input chunk
 *   steps 1..n-2     recvReduceSend
 *   step n-1         recvReduceCopySend (chunk r is now fully reduced)
 *   steps n..2n-3    recvCopySend  (pass the reduced chunks along)
 *   step 2n-2        recv          (the last reduced chunk)
 * The chunks of a loop become final in the receive buffer out of order
 * (chunk r at step n-1, the others in the allgather steps), and nothing
 * writes them afterwards (a reduce-scatter step writes no output): at the
 * end of loop l the channel's range is final up to the end of that loop,
 * which the channel's progress word then says (dfccl_prog_publish).
 */
DFCCL_F_DEVICE int dfccl_ring_allreduce(dfccl_exec_t *x)
{
    const int n = x->st->nranks, r = x->st->ring_pos;
    const uint64_t esz = x->st->elem_size, off = x->ch->off, cnt = x->ch->cnt;
    const uint64_t loop_elems = (uint64_t)n * dfccl_chunk_elems(x);
    const uint32_t nloops     = (uint32_t)DFCCL_DIV_UP(cnt, loop_elems);

    if (n == 1) {
        for (; x->dyn.loop < nloops; x->dyn.loop++, x->dyn.slice = 0) {
            uint64_t base = off + x->dyn.loop * loop_elems;
            int rc = dfccl_prim_chunk(x, DFCCL_P_COPY, x->sendbuff + base * esz,
                                      x->recvbuff + base * esz,
                                      DFCCL_MIN(loop_elems, off + cnt - base));
            if (rc != DFCCL_PRIM_OK) {
                return rc;
            }
            if (x->dyn.loop + 1 < nloops) {
                dfccl_prog_publish(x, (x->dyn.loop + 1) * loop_elems);
            }
        }
        return DFCCL_PRIM_DONE;
    }

    for (; x->dyn.loop < nloops; x->dyn.loop++, x->dyn.step = 0) {
        uint64_t base = off + x->dyn.loop * loop_elems;
        uint64_t rem  = DFCCL_MIN(loop_elems, off + cnt - base);
        uint64_t cs   = dfccl_align_elems(x, DFCCL_DIV_UP(rem, (uint64_t)n));

        for (; x->dyn.step < (uint32_t)(2 * n - 1); x->dyn.step++, x->dyn.slice = 0) {
            int s          = (int)x->dyn.step;
            uint64_t cbeg  = (uint64_t)dfccl_mod(r - 1 - s, n) * cs;
            uint64_t elems = cbeg < rem ? DFCCL_MIN(cs, rem - cbeg) : 0;
            uint32_t flags;
            int rc;

            if (s == 0) {
                flags = DFCCL_P_SEND;
            } else if (s < n - 1) {
                flags = DFCCL_P_RECV | DFCCL_P_REDUCE | DFCCL_P_SEND;
            } else if (s == n - 1) {
                flags = DFCCL_P_RECV | DFCCL_P_REDUCE | DFCCL_P_COPY | DFCCL_P_SEND |
                        DFCCL_P_FINAL;
            } else if (s < 2 * n - 2) {
                flags = DFCCL_P_RECV | DFCCL_P_COPY | DFCCL_P_SEND;
            } else {
                flags = DFCCL_P_RECV | DFCCL_P_COPY;
            }
            rc = dfccl_prim_chunk(x, flags, x->sendbuff + (base + cbeg) * esz,
                                  x->recvbuff + (base + cbeg) * esz, elems);
            if (rc != DFCCL_PRIM_OK) {
                return rc;
            }
        }
        if (x->dyn.loop + 1 < nloops) {
            dfccl_prog_publish(x, (x->dyn.loop + 1) * loop_elems);
        }
    }
    return DFCCL_PRIM_DONE;
}

/*
 * Allgather and reduce-scatter: a loop is a chunk of the channel's range of
 * every block, in n steps, step s on block q of n.
 *
 * Allgather: each rank contributes `count` elements; rank q's block lands at
 * recvbuff + q * count. Step s moves the chunk of the rank at position
 * (r - s) mod n:
 *   step 0         copySend      own input to own block and to the ring
 *   steps 1..n-2   recvCopySend
 *   step n-1       recv
 *
 * Reduce-scatter (`scatter`): rank q receives block q (count elements) of
 * the reduction of every rank's n * count input. Step s reduces the block
 * of the rank at position (r - 1 - s) mod n:
 *   step 0         send          own input of that block
 *   steps 1..n-2   recvReduceSend
 *   step n-1       recvReduceCopy (block r, into recvbuff)
 */
DFCCL_F_DEVICE int dfccl_ring_blocks(dfccl_exec_t *x, int scatter)
{
    const int n = x->st->nranks, r = x->st->ring_pos;
    const uint64_t esz = x->st->elem_size, off = x->ch->off, cnt = x->ch->cnt;
    const uint64_t C = x->st->count, ce = dfccl_chunk_elems(x);
    const uint32_t nloops = (uint32_t)DFCCL_DIV_UP(cnt, ce);
    const uint32_t mid    = scatter ? DFCCL_P_REDUCE : DFCCL_P_COPY;

    for (; x->dyn.loop < nloops; x->dyn.loop++, x->dyn.step = 0) {
        uint64_t base  = off + x->dyn.loop * ce;
        uint64_t elems = DFCCL_MIN(ce, off + cnt - base);

        for (; x->dyn.step < (uint32_t)n; x->dyn.step++, x->dyn.slice = 0) {
            int s      = (int)x->dyn.step;
            uint64_t q = (uint64_t)dfccl_ring_rank(x, dfccl_mod(r - s - scatter, n));
            uint32_t flags;
            int rc;

            if (n == 1) {
                flags = DFCCL_P_COPY;
            } else if (s == 0) {
                flags = scatter ? DFCCL_P_SEND : DFCCL_P_COPY | DFCCL_P_SEND;
            } else if (s < n - 1) {
                flags = DFCCL_P_RECV | mid | DFCCL_P_SEND;
            } else {
                flags = scatter ? DFCCL_P_RECV | DFCCL_P_REDUCE | DFCCL_P_COPY | DFCCL_P_FINAL
                                : DFCCL_P_RECV | DFCCL_P_COPY;
            }
            rc = dfccl_prim_chunk(x, flags, x->sendbuff + ((scatter ? q * C : 0) + base) * esz,
                                  x->recvbuff + ((scatter ? 0 : q * C) + base) * esz, elems);
            if (rc != DFCCL_PRIM_OK) {
                return rc;
            }
        }
    }
    return DFCCL_PRIM_DONE;
}

DFCCL_F_DEVICE int dfccl_ring_allgather(dfccl_exec_t *x)
{
    return dfccl_ring_blocks(x, 0);
}

DFCCL_F_DEVICE int dfccl_ring_reducescatter(dfccl_exec_t *x)
{
    return dfccl_ring_blocks(x, 1);
}

/*
 * A chain along the ring: every chunk of the channel's range takes the same
 * primitive, chosen by the rank's position in the chain. src and dst are the
 * buffers that position reads and writes, NULL where it touches neither.
 */
DFCCL_F_DEVICE int dfccl_ring_chain(dfccl_exec_t *x, uint32_t flags, const char *src, char *dst)
{
    const uint64_t esz = x->st->elem_size, off = x->ch->off, cnt = x->ch->cnt;
    const uint64_t ce     = dfccl_chunk_elems(x);
    const uint32_t nloops = (uint32_t)DFCCL_DIV_UP(cnt, ce);

    for (; x->dyn.loop < nloops; x->dyn.loop++, x->dyn.slice = 0) {
        uint64_t base = off + x->dyn.loop * ce;
        int rc = dfccl_prim_chunk(x, flags, src ? src + base * esz : NULL,
                                  dst ? dst + base * esz : NULL, DFCCL_MIN(ce, off + cnt - base));
        if (rc != DFCCL_PRIM_OK) {
            return rc;
        }
    }
    return DFCCL_PRIM_DONE;
}

/*
 * Broadcast from root along the ring root, root+1, ..., root-1 (positions).
 * By position p = (r - root) mod n:
 *   p = 0          copySend      (root: input to output and to the ring)
 *   0 < p < n-1    recvCopySend
 *   p = n-1        recv
 */
DFCCL_F_DEVICE int dfccl_ring_broadcast(dfccl_exec_t *x)
{
    const int n = x->st->nranks, p = dfccl_mod(x->st->ring_pos - x->st->ring_root, n);
    uint32_t flags;

    if (n == 1) {
        flags = DFCCL_P_COPY;
    } else if (p == 0) {
        flags = DFCCL_P_COPY | DFCCL_P_SEND;
    } else if (p < n - 1) {
        flags = DFCCL_P_RECV | DFCCL_P_COPY | DFCCL_P_SEND;
    } else {
        flags = DFCCL_P_RECV | DFCCL_P_COPY;
    }
    return dfccl_ring_chain(x, flags, p == 0 ? x->sendbuff : NULL, x->recvbuff);
}

/*
 * Reduce to root along the ring root+1, ..., root (positions). By position
 * p = (r - root - 1) mod n:
 *   p = 0          send
 *   0 < p < n-1    recvReduceSend
 *   p = n-1        recvReduceCopy (root, into recvbuff)
 */
DFCCL_F_DEVICE int dfccl_ring_reduce(dfccl_exec_t *x)
{
    const int n = x->st->nranks, p = dfccl_mod(x->st->ring_pos - x->st->ring_root - 1, n);
    uint32_t flags;

    if (n == 1) {
        flags = DFCCL_P_COPY;
    } else if (p == 0) {
        flags = DFCCL_P_SEND;
    } else if (p < n - 1) {
        flags = DFCCL_P_RECV | DFCCL_P_REDUCE | DFCCL_P_SEND;
    } else {
        flags = DFCCL_P_RECV | DFCCL_P_REDUCE | DFCCL_P_COPY | DFCCL_P_FINAL;
    }
    return dfccl_ring_chain(x, flags, x->sendbuff, p == n - 1 ? x->recvbuff : NULL);
}

/*
 * The link profile's probe (runtime/profile.c): a shift over the ring's
 * links of one class. Each chunk of the channel's range, in two steps:
 *   step 0    send           own buffer to the next position, if
 *                            DFCCL_K_PROBE_SEND
 *   step 1    recv + copy    the previous position's into the buffer, if
 *                            DFCCL_K_PROBE_RECV
 * The host sets the bits only on links of the class measured, so no data
 * waits for another link: each rank's time is that of its own links.
 * Nothing is forwarded, so the ring's links of a class may form chains or
 * the whole ring without a cycle of waits (a send needs only a free slot,
 * which the receiver's step 1 of an earlier chunk frees).
 */
DFCCL_F_DEVICE int dfccl_ring_probe(dfccl_exec_t *x)
{
    const uint64_t esz = x->st->elem_size, off = x->ch->off, cnt = x->ch->cnt;
    const uint64_t ce     = dfccl_chunk_elems(x);
    const uint32_t nloops = (uint32_t)DFCCL_DIV_UP(cnt, ce);
    const uint32_t probe  = x->st->probe;

    for (; x->dyn.loop < nloops; x->dyn.loop++, x->dyn.step = 0) {
        uint64_t base  = off + x->dyn.loop * ce;
        uint64_t elems = DFCCL_MIN(ce, off + cnt - base);

        for (; x->dyn.step < 2u; x->dyn.step++, x->dyn.slice = 0) {
            const uint32_t flags = x->dyn.step == 0
                                       ? ((probe & DFCCL_K_PROBE_SEND) ? DFCCL_P_SEND : 0u)
                                       : ((probe & DFCCL_K_PROBE_RECV)
                                              ? DFCCL_P_RECV | DFCCL_P_COPY
                                              : 0u);
            int rc;

            if (flags == 0) {
                continue;
            }
            rc = dfccl_prim_chunk(x, flags, x->sendbuff + base * esz, x->recvbuff + base * esz,
                                  elems);
            if (rc != DFCCL_PRIM_OK) {
                return rc;
            }
        }
    }
    return DFCCL_PRIM_DONE;
}

#endif /* DFCCL_KERNELS_ALGO_RING_H_ */
