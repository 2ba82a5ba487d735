/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * All-to-all, written as primitive calls like the ring (ring.h), in two
 * programs:
 *
 *  - the mesh (groups whose ranks all write into each other's connectors):
 *    every rank owns, in each channel's region, a connector per sender.
 *    Step 0 copies our own block. Then, slice by slice, round i sends slice
 *    i of our block for every peer into our connector at that peer
 *    (starting with rank me + 1), then receives slice i of every peer's
 *    block for us from its connector here: every link carries data at once,
 *    and each block crosses one link once.
 *  - the ring (every other group, same counts for every pair): block
 *    (me + s) travels s hops. In phase s (1..n-1) we send our block for
 *    rank me + s, forward the s - 1 blocks that pass through us, and
 *    receive the block that rank me - s sent us.
 *
 * Each connector of the mesh has its own sequence: a pair's connector
 * advances by that pair's slices per run (dyn.calls runs so far; from the
 * sequence at run DFCCL_PAIR_RUN0, where an alltoallv's counts last
 * changed), and the
 * primitives run on a view of the channel (dfccl_chan_t) whose send and
 * receive connectors are the pair's. dyn.step (1 + the round) and
 * dyn.slice (the round's n - 1 sends, then its n - 1 receives) say where a
 * preempted run resumes: a primitive is STUCK before it moves anything,
 * and one that returned OK is not run again. The ring's steps are those of
 * ring.h.
 */
#ifndef DFCCL_KERNELS_ALGO_ALLTOALL_H_
#define DFCCL_KERNELS_ALGO_ALLTOALL_H_

#include "ring.h"

/* The connector for sender q in rank `owner`'s `region` (the layout of
 * DFCCL_MESH_CONN_AT): its control words and slots. */
DFCCL_F_DEVICE void dfccl_mesh_conn(const dfccl_coll_static_t *st, char *region, int owner,
                                    int q, dfccl_conn_ctrl_t **ctrl_p, char **data_p)
{
    char *c = region + DFCCL_MESH_CONN_AT(owner, q, st->nslots, st->slot_bytes,
                                          st->proto == DFCCL_K_PROTO_LL);

    *ctrl_p = (dfccl_conn_ctrl_t *)(void *)c;
    *data_p = c + sizeof(dfccl_conn_ctrl_t);
}

/* One primitive of a mesh pair: the pair's slice `i` of `cnt` elements at
 * `buf`, sent (P_SEND, from buf) or received (P_RECV | P_COPY, into buf),
 * on the pair's connector at sequence base + i. */
DFCCL_F_DEVICE int dfccl_mesh_slice(dfccl_exec_t *x, uint32_t flags, char *buf, uint64_t cnt,
                                    uint64_t base, uint64_t i)
{
    const uint64_t o = i * x->slice_elems;
    const uint64_t n = DFCCL_MIN(x->slice_elems, cnt - o);
    char *p          = buf + o * x->st->elem_size;

    if (flags & DFCCL_P_SEND) {
        x->dyn.send_seq = base + i;
        return dfccl_prim(x, flags, p, NULL, n);
    }
    x->dyn.recv_seq = base + i;
    return dfccl_prim(x, flags, NULL, p, n);
}

/* Point the view's connectors at pair `q`'s: ours at q for sending
 * (send), or q's at us for receiving. */
DFCCL_F_DEVICE void dfccl_mesh_pair(const dfccl_coll_static_t *st, const dfccl_chan_t *home,
                                    dfccl_chan_t *view, int q, int send)
{
    dfccl_conn_ctrl_t *ctrl;
    char *data;

    if (send) {
        dfccl_mesh_conn(st, home->peer[q], q, st->rank, &ctrl, &data);
        view->send_ctrl = ctrl;
        view->send_data = data;
    } else {
        dfccl_mesh_conn(st, (char *)home->recv_ctrl, st->rank, q, &ctrl, &data);
        view->recv_ctrl = ctrl;
        view->recv_data = data;
    }
}

DFCCL_F_DEVICE int dfccl_mesh_alltoall(dfccl_exec_t *x)
{
    const dfccl_coll_static_t *st = x->st;
    const dfccl_chan_t *home      = x->ch;
    const int n = st->nranks, me = st->rank, peers = n - 1;
    const uint64_t esz = st->elem_size, se = x->slice_elems;
    const uint64_t *own = home->pairs + (uint64_t)me * DFCCL_PAIR_WORDS;
    /* same counts for every pair: our peers' progress bounds their heads */
    const int uniform   = st->kind == DFCCL_COLL_ALLTOALL;
    uint64_t rounds = 0;
    dfccl_chan_t view = *home;
    int rc = DFCCL_PRIM_OK;

    if (x->dyn.step == 0) {
        /* our own block: nothing crosses a link */
        rc = dfccl_prim_chunk(x, DFCCL_P_COPY, x->sendbuff + own[DFCCL_PAIR_SRC] * esz,
                              x->recvbuff + own[DFCCL_PAIR_DST] * esz, own[DFCCL_PAIR_SCNT]);
        if (rc != DFCCL_PRIM_OK) {
            return rc;
        }
        x->dyn.step  = 1;
        x->dyn.slice = 0;
    }
    for (int q = 0; q < n; q++) {
        const uint64_t *e = home->pairs + (uint64_t)q * DFCCL_PAIR_WORDS;
        if (q != me) {
            rounds = DFCCL_MAX(rounds, DFCCL_DIV_UP(e[DFCCL_PAIR_SCNT], se));
            rounds = DFCCL_MAX(rounds, DFCCL_DIV_UP(e[DFCCL_PAIR_RCNT], se));
        }
    }
    x->ch = &view;
    /* round i (dyn.step - 1): slice i to every peer, then slice i from every
     * peer (dyn.slice: the n - 1 sends, then the n - 1 receives) */
    for (; x->dyn.step - 1 < rounds; x->dyn.step++, x->dyn.slice = 0) {
        const uint64_t i = x->dyn.step - 1;

        for (; x->dyn.slice < (uint32_t)(2 * peers); x->dyn.slice++) {
            const int send     = x->dyn.slice < (uint32_t)peers;
            const int k        = 1 + (int)(send ? x->dyn.slice : x->dyn.slice - (uint32_t)peers);
            const int q        = dfccl_mod(send ? me + k : me - k, n);
            const uint64_t *e  = home->pairs + (uint64_t)q * DFCCL_PAIR_WORDS;
            const uint64_t cnt = e[send ? DFCCL_PAIR_SCNT : DFCCL_PAIR_RCNT];
            const uint64_t ns  = DFCCL_DIV_UP(cnt, se);
            const uint64_t base = e[send ? DFCCL_PAIR_SBASE : DFCCL_PAIR_RBASE] +
                                  (x->dyn.calls - e[DFCCL_PAIR_RUN0]) * ns;

            if (i >= ns) {
                continue; /* nothing more for this pair */
            }
            dfccl_mesh_pair(st, home, &view, q, send);
            if (send) {
                /* Peer q sent us its slice i - 1 (or ended its previous
                 * run) only after it had received slice i - 2 from every
                 * rank: with two slots or more, a free one waits for us.
                 * An alltoallv's pair may have nothing for us: ask q. */
                x->dyn.head_cache = uniform && base + i >= 1 ? base + i - 1 : 0;
                rc = dfccl_mesh_slice(x, DFCCL_P_SEND,
                                      (char *)x->sendbuff + e[DFCCL_PAIR_SRC] * esz, cnt, base,
                                      i);
            } else {
                x->dyn.tail_cache = 0; /* ours to read: our own memory */
                rc = dfccl_mesh_slice(x, DFCCL_P_RECV | DFCCL_P_COPY,
                                      x->recvbuff + e[DFCCL_PAIR_DST] * esz, cnt, base, i);
            }
            if (rc != DFCCL_PRIM_OK) {
                x->ch = home;
                return rc;
            }
        }
    }
    x->ch = home;
    x->dyn.calls++;
    return DFCCL_PRIM_DONE;
}

/*
 * The ring: the channel's range [ch->off, ch->off + ch->cnt) of every
 * block, in loops of a chunk. Per loop, step 0 copies our own chunk; then,
 * in ring positions, phase s (1..n-1) takes s + 1 steps: send our chunk for
 * position r + s, s - 1 times receive and send on (chunks of positions
 * r - 1 .. r - s + 1 on their way), then receive position r - s's chunk
 * for us. The previous rank
 * sends s chunks in phase s and we receive s: the connector pairs them in
 * order.
 */
DFCCL_F_DEVICE int dfccl_ring_alltoall(dfccl_exec_t *x)
{
    const int n = x->st->nranks, r = x->st->ring_pos, me = x->st->rank;
    const uint64_t esz = x->st->elem_size, off = x->ch->off, cnt = x->ch->cnt;
    const uint64_t C = x->st->count, ce = dfccl_chunk_elems(x);
    const uint32_t nloops = (uint32_t)DFCCL_DIV_UP(cnt, ce);
    const uint32_t nsteps = 1u + (uint32_t)(n - 1) * (uint32_t)(n + 2) / 2u;

    for (; x->dyn.loop < nloops; x->dyn.loop++, x->dyn.step = 0) {
        const uint64_t base  = off + x->dyn.loop * ce;
        const uint64_t elems = DFCCL_MIN(ce, off + cnt - base);

        for (; x->dyn.step < nsteps; x->dyn.step++, x->dyn.slice = 0) {
            uint32_t t = x->dyn.step, s = 1, k;
            const char *src = NULL;
            char *dst       = NULL;
            uint32_t flags;
            int rc;

            if (t == 0) {
                flags = DFCCL_P_COPY;
                src   = x->sendbuff + ((uint64_t)me * C + base) * esz;
                dst   = x->recvbuff + ((uint64_t)me * C + base) * esz;
            } else {
                for (t -= 1; t >= s + 1; s++) {
                    t -= s + 1;
                }
                k = t;
                if (k == 0) {
                    flags = DFCCL_P_SEND;
                    src   = x->sendbuff +
                            ((uint64_t)dfccl_ring_rank(x, dfccl_mod(r + (int)s, n)) * C + base) *
                                esz;
                } else if (k < s) {
                    flags = DFCCL_P_RECV | DFCCL_P_SEND;
                } else {
                    flags = DFCCL_P_RECV | DFCCL_P_COPY;
                    dst   = x->recvbuff +
                            ((uint64_t)dfccl_ring_rank(x, dfccl_mod(r - (int)s, n)) * C + base) *
                                esz;
                }
            }
            rc = dfccl_prim_chunk(x, flags, src, dst, elems);
            if (rc != DFCCL_PRIM_OK) {
                return rc;
            }
        }
    }
    return DFCCL_PRIM_DONE;
}

#endif /* DFCCL_KERNELS_ALGO_ALLTOALL_H_ */
