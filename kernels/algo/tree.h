/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Tree allreduces (runtime/algo/tree.c chose the shape and the chunks):
 * `tree`, two binary trees, each carrying half of the data on half of the
 * channels, and `ctree`, one tree carrying all of it (C-Cube's overlapped
 * tree). The trees are heaps over positions (dfccl_tree_shape).
 *
 * A channel's range goes in chunks of a slot. At step t a node sends
 * chunk t up, reduced with what its children sent up; the root's
 * reduction is the start of the chunk's way down, which it sends on at
 * once; every other node then takes chunk t - D down (D = nslots - 2), so
 * that chunks on their way up and down overlap. The connectors are the
 * mesh's (alltoall.h): each ordered pair of ranks has its own, which
 * carries every chunk of the channel once per run, so chunk t of run k is
 * slot sequence k * chunks + t on every connector.
 *
 * A step's primitives, in order:
 *   up, leaf:          send input -> parent
 *   up, one child:     recv child + input -> parent
 *   up, two children:  recv child 0 + input -> output;
 *                      recv child 1 + output -> parent
 *   root, one child:   recv child + input -> output, child
 *   root, two:         recv child 0 + input -> output;
 *                      recv child 1 + output -> output, child 0;
 *                      send output -> child 1
 *   down (not root):   recv parent -> output, child 0 (leaf: output only);
 *                      send output -> child 1
 * The root's last reduction is the final one (AVG divides there). An inner
 * node's partial sum waits in the output, which the chunk's way down
 * overwrites later; in place, the input it overwrote is read no more.
 *
 * Connector credit: before its step t a node has received chunk t - 1 - D
 * from its parent, whose step for it came after it took our chunk
 * t - 1 - D, and chunk t - 1 from each child, which took our chunk
 * t - 2 - D before sending it; with D = nslots - 2 those lower bounds of
 * the peers' heads leave a free slot for every send of the step, so no
 * send reads a head across the link.
 *
 * Preemption: dyn.step is the step, dyn.slice the primitive within it; a
 * STUCK primitive moved nothing and runs again when the collective does.
 *
 * Partial completion: a chunk is final in the output once the root has
 * made its last reduction of it, or another node has taken it down from
 * its parent, and nothing writes it afterwards (a partial sum goes only
 * into a chunk not yet taken down). At the end of step t the root has
 * finished chunks 0..t, another node chunks 0..t - D: the channel's
 * progress word says so (dfccl_prog_publish).
 */
#ifndef DFCCL_KERNELS_ALGO_TREE_H_
#define DFCCL_KERNELS_ALGO_TREE_H_

#include "alltoall.h"

/* Primitives of a step (see the top of this file). */
DFCCL_F_DEVICE uint32_t dfccl_tree_nprims(int parent, const int kid[2], int up, int down)
{
    const int kids = (kid[0] >= 0) + (kid[1] >= 0);
    uint32_t n     = 0;

    if (up) {
        n += parent < 0 ? (kids == 2 ? 3u : 1u) : (kids == 2 ? 2u : 1u);
    }
    if (down && parent >= 0) {
        n += kids == 2 ? 2u : 1u;
    }
    return n;
}

/* One primitive of chunk `c` (sequence base + c on its connectors): flags,
 * receiving from `from` and sending to `to` (-1: neither). */
DFCCL_F_DEVICE int dfccl_tree_prim(dfccl_exec_t *x, const dfccl_chan_t *home,
                                   dfccl_chan_t *view, uint32_t flags, int from, int to,
                                   const char *src, char *dst, uint64_t n, uint64_t base,
                                   uint64_t c, uint64_t credit)
{
    if (from >= 0) {
        dfccl_mesh_pair(x->st, home, view, from, 0);
        x->dyn.recv_seq   = base + c;
        x->dyn.tail_cache = 0; /* our own memory */
    }
    if (to >= 0) {
        dfccl_mesh_pair(x->st, home, view, to, 1);
        x->dyn.send_seq   = base + c;
        x->dyn.head_cache = credit;
    }
    return dfccl_prim(x, flags, src, dst, n);
}

/* Primitive k of a step's up part (up) or down part for chunk c, whose
 * input and output are at ic and oc (see the top of this file). */
DFCCL_F_DEVICE int dfccl_tree_step_prim(dfccl_exec_t *x, const dfccl_chan_t *home,
                                        dfccl_chan_t *view, int parent, const int kid[2], int up,
                                        uint32_t k, const char *ic, char *oc, uint64_t n,
                                        uint64_t base, uint64_t c, uint64_t credit)
{
    const uint32_t rr = DFCCL_P_RECV | DFCCL_P_REDUCE, last = rr | DFCCL_P_COPY |
                                                              DFCCL_P_SEND | DFCCL_P_FINAL;

    if (up && parent < 0) { /* the root: reduce, then down */
        if (k == 0) {
            return kid[1] < 0 ? dfccl_tree_prim(x, home, view, last, kid[0], kid[0], ic, oc, n,
                                                base, c, credit)
                              : dfccl_tree_prim(x, home, view, rr | DFCCL_P_COPY, kid[0], -1, ic,
                                                oc, n, base, c, credit);
        }
        return k == 1 ? dfccl_tree_prim(x, home, view, last, kid[1], kid[0], oc, oc, n, base, c,
                                        credit)
                      : dfccl_tree_prim(x, home, view, DFCCL_P_SEND, -1, kid[1], oc, NULL, n,
                                        base, c, credit);
    }
    if (up) {
        if (kid[0] < 0) {
            return dfccl_tree_prim(x, home, view, DFCCL_P_SEND, -1, parent, ic, NULL, n, base,
                                   c, credit);
        }
        if (kid[1] < 0) {
            return dfccl_tree_prim(x, home, view, rr | DFCCL_P_SEND, kid[0], parent, ic, NULL,
                                   n, base, c, credit);
        }
        return k == 0 ? dfccl_tree_prim(x, home, view, rr | DFCCL_P_COPY, kid[0], -1, ic, oc, n,
                                        base, c, credit)
                      : dfccl_tree_prim(x, home, view, rr | DFCCL_P_SEND, kid[1], parent, oc,
                                        NULL, n, base, c, credit);
    }
    return k == 0 ? dfccl_tree_prim(x, home, view,
                                    DFCCL_P_RECV | DFCCL_P_COPY |
                                        (kid[0] >= 0 ? DFCCL_P_SEND : 0u),
                                    parent, kid[0], NULL, oc, n, base, c, credit)
                  : dfccl_tree_prim(x, home, view, DFCCL_P_SEND, -1, kid[1], oc, NULL, n, base,
                                    c, credit);
}

DFCCL_F_DEVICE int dfccl_tree_allreduce(dfccl_exec_t *x)
{
    const dfccl_coll_static_t *st = x->st;
    const dfccl_chan_t *home      = x->ch;
    const uint64_t esz = st->elem_size, se = x->slice_elems;
    const uint64_t chunks = DFCCL_DIV_UP(home->cnt, se);
    const uint64_t lag    = st->nslots >= 2 ? st->nslots - 2u : 0;
    const uint64_t base   = x->dyn.calls * chunks;
    const int tree        = st->algo == DFCCL_K_ALGO_TREE && x->chan >= st->nchannels / 2u;
    const char *in        = x->sendbuff + home->off * esz;
    char *out             = x->recvbuff + home->off * esz;
    int parent, kid[2], rc = DFCCL_PRIM_OK;
    dfccl_chan_t view = *home;

    if (chunks == 0) {
        return DFCCL_PRIM_DONE;
    }
    dfccl_tree_shape((int)st->nranks, (int)st->rank, tree, &parent, kid);
    x->ch = &view;
    for (; rc == DFCCL_PRIM_OK && x->dyn.step < chunks + (parent < 0 ? 0 : lag);
         x->dyn.step++, x->dyn.slice = 0) {
        const uint64_t t   = x->dyn.step;
        const int up       = t < chunks;
        const uint32_t nup = up ? dfccl_tree_nprims(parent, kid, 1, 0) : 0;
        const uint32_t np  = dfccl_tree_nprims(parent, kid, up, parent >= 0 && t >= lag);
        /* the peers' heads, at least (see the top of this file) */
        const uint64_t credit = base + (t >= lag + 1 ? t - lag - 1 : 0);

        for (; x->dyn.slice < np; x->dyn.slice++) {
            /* the up primitives first, on chunk t; then chunk t - lag's down */
            const int is_up  = x->dyn.slice < nup;
            const uint64_t c = is_up ? t : t - lag;
            const uint64_t o = c * se;

            rc = dfccl_tree_step_prim(x, home, &view, parent, kid, is_up,
                                      is_up ? x->dyn.slice : x->dyn.slice - nup,
                                      in + o * esz, out + o * esz,
                                      DFCCL_MIN(se, home->cnt - o), base, c, credit);
            if (rc != DFCCL_PRIM_OK) {
                break;
            }
        }
        if (rc != DFCCL_PRIM_OK) {
            break;
        }
        if (parent < 0 ? t + 1 < chunks : t >= lag && t + 1 < chunks + lag) {
            dfccl_prog_publish(x, DFCCL_MIN((t + 1 - (parent < 0 ? 0 : lag)) * se, home->cnt));
        }
    }
    x->ch = home;
    if (rc != DFCCL_PRIM_OK) {
        return rc;
    }
    x->dyn.calls++;
    return DFCCL_PRIM_DONE;
}

#endif /* DFCCL_KERNELS_ALGO_TREE_H_ */
