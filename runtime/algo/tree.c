/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The tree allreduces (kernels/algo/tree.h), on groups whose ranks all
 * write into each other's connectors (one host, no net, at most
 * DFCCL_ONESHOT_MAX_RANKS ranks):
 *
 *   - tree: two binary trees (dfccl_tree_shape), the first half of the
 *     channels on one and the second half on the other, each channel its
 *     part of the buffer, so each tree carries half of the data;
 *   - ctree: one tree carrying all of it, C-Cube's overlapped tree.
 *
 *   1. channels: the ring's count, or DFCCL_MAX_BLOCKS from
 *      DFCCL_TREE_WIDE_BYTES (tree: even, for the two trees);
 *   2. layout: the mesh's, a connector per sender in each region (a rank
 *      uses those of its parent and children); slots of a chunk. tree:
 *      the channel's part in DFCCL_STEP_SLICES chunks, as the ring cuts a
 *      step. ctree: K chunks a channel, from the alpha-beta model of a
 *      pipelined tree of height h: a chunk of M/K bytes takes 2h hops up
 *      and down and the chunks follow one another a hop apart, so
 *      T(K) = (2h - 1 + K) (alpha + M / (K beta)), least at
 *      K = sqrt((2h - 1) M / (alpha beta)) (beta: bytes per microsecond;
 *      the group's alpha and beta, group.c); chunks of at least 256 bytes
 *      and at most DFCCL_TREE_SLOT_BYTES (and DFCCL_SLOT_BYTES). LL where
 *      a slot holds at most DFCCL_LL_BYTES, as the ring decides;
 *   3. cost: 2h hops, the data (ctree) or half of it (tree) once up and
 *      twice down per node.
 */
#include "../dfccl_int.h"

#include <math.h>

/* The largest chunk: a region holds a connector per rank, so the ring's
 * slot (up to DFCCL_SLOT_BYTES) would take n times its memory. */
#define DFCCL_TREE_SLOT_BYTES (128u << 10)

static int dfccl_tree_can(const struct dfccl_group *g, int kind, size_t count)
{
    return kind == DFCCL_COLL_ALLREDUCE && count > 0 && g->nranks >= 2 &&
           g->nranks <= DFCCL_ONESHOT_MAX_RANKS && g->all_local && !g->net;
}

/* The ring's channels, or from DFCCL_TREE_WIDE_BYTES every block: a tree
 * channel's block runs a chunk's steps up and down one after another, so
 * large trees need many blocks to fill the links. */
static int dfccl_tree_nchannels(const dfccl_config_t *cfg, const struct dfccl_group *g,
                                int kind, size_t count, int dtype)
{
    const size_t bytes = count * dfccl_dtype_bytes(dtype);

    if (cfg->tree_wide_bytes != 0 && bytes >= cfg->tree_wide_bytes &&
        cfg->max_blocks > cfg->max_channels) {
        return dfccl_nchannels_for(bytes, cfg->min_channel_bytes, (size_t)cfg->max_blocks,
                                   count);
    }
    return dfccl_ring_nchannels(cfg, kind, count, dtype, g->nranks, g->nranks == 2);
}

static int dfccl_tree_plan(const dfccl_config_t *cfg, const struct dfccl_group *g, int kind,
                           size_t count, int dtype, int *nch_p)
{
    int nch;

    if (!dfccl_tree_can(g, kind, count)) {
        return 0;
    }
    nch = dfccl_tree_nchannels(cfg, g, kind, count, dtype);
    /* two trees, a channel each at least, while there are elements */
    if (nch % 2 != 0 && (size_t)nch < count &&
        (nch + 1 <= cfg->max_blocks && nch + 1 <= DFCCL_MAX_CHANNELS)) {
        nch++;
    }
    *nch_p = nch;
    return 1;
}

static int dfccl_ctree_plan(const dfccl_config_t *cfg, const struct dfccl_group *g, int kind,
                            size_t count, int dtype, int *nch_p)
{
    if (!dfccl_tree_can(g, kind, count)) {
        return 0;
    }
    *nch_p = dfccl_tree_nchannels(cfg, g, kind, count, dtype);
    return 1;
}

/* The layout for chunks of at least `chunk` bytes. */
static size_t dfccl_tree_conns(const dfccl_config_t *cfg, dfccl_coll_static_t *st, int nch,
                               double chunk)
{
    return dfccl_algo_sender_slots(cfg, st, nch, 256, chunk,
                                   cfg->slot_bytes < DFCCL_TREE_SLOT_BYTES
                                       ? (uint32_t)cfg->slot_bytes
                                       : DFCCL_TREE_SLOT_BYTES);
}

/* A channel's part of the buffer, in bytes. */
static double dfccl_tree_part(const dfccl_coll_static_t *st, int nch)
{
    return (double)((st->count + (size_t)nch - 1) / (size_t)nch) * (double)st->elem_size;
}

static size_t dfccl_tree_layout(const dfccl_config_t *cfg, const struct dfccl_group *g, int nch,
                                dfccl_coll_static_t *st)
{
    const double slices = cfg->step_slices > 0 ? (double)cfg->step_slices : 1.0;

    (void)g;
    return dfccl_tree_conns(cfg, st, nch, dfccl_tree_part(st, nch) / slices);
}

static size_t dfccl_ctree_layout(const dfccl_config_t *cfg, const struct dfccl_group *g,
                                 int nch, dfccl_coll_static_t *st)
{
    const double m  = dfccl_tree_part(st, nch);
    const double h2 = 2.0 * dfccl_tree_height(g->nranks) - 1.0;
    /* alpha in us, beta in GB/s: bytes per us is beta * 1e3 */
    const double bw = g->beta_gbps * 1e3 > 1.0 ? g->beta_gbps * 1e3 : 1.0;
    double k = sqrt(h2 * m / ((g->alpha_us > 0 ? g->alpha_us : 1.0) * bw));

    if (k < 1.0) {
        k = 1.0;
    }
    return dfccl_tree_conns(cfg, st, nch, m / floor(k));
}

static double dfccl_tree_cost_us(const struct dfccl_group *g, int kind, size_t bytes)
{
    (void)kind;
    return dfccl_algo_alpha_beta(g, 2.0 * dfccl_tree_height(g->nranks), (double)bytes);
}

static double dfccl_ctree_cost_us(const struct dfccl_group *g, int kind, size_t bytes)
{
    (void)kind;
    return dfccl_algo_alpha_beta(g, 2.0 * dfccl_tree_height(g->nranks), 2.0 * (double)bytes);
}

/* Whether this rank sends to rank q on channel ch: q is its parent or a
 * child in that channel's tree. */
int dfccl_tree_sends_to(const dfccl_coll_static_t *st, int ch, int q)
{
    const int tree = st->algo == DFCCL_K_ALGO_TREE && ch >= (int)st->nchannels / 2;
    int parent, kid[2];

    dfccl_tree_shape((int)st->nranks, (int)st->rank, tree, &parent, kid);
    return q >= 0 && (q == parent || q == kid[0] || q == kid[1]);
}

/* A channel's range is final chunk by chunk, a slot each, from its start
 * (kernels/algo/tree.h). */
static size_t dfccl_tree_partial(const dfccl_coll_static_t *st)
{
    return (size_t)(st->slot_bytes / st->elem_size) * st->elem_size;
}

#define dfccl_ctree_partial dfccl_tree_partial

DFCCL_ALGO_DEFINE_PARTIAL(tree, DFCCL_K_ALGO_TREE,
                          "it takes allreduces on groups of 2 to 8 ranks that all write to each "
                          "other");
DFCCL_ALGO_DEFINE_PARTIAL(ctree, DFCCL_K_ALGO_CTREE,
                          "it takes allreduces on groups of 2 to 8 ranks that all write to each "
                          "other");
