/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two shot (kernels/algo/twoshot.h): mid-sized allreduces on the groups of one
 * shot, written straight into the peers' connectors:
 *
 *   1. reduce-scatter in one hop: every rank writes each peer's part of
 *      its input into that peer's slot; each rank reduces its part from
 *      the n slots, in rank order;
 *   2. allgather in one hop: every rank writes its reduced part into every
 *      peer's slot, and copies the n parts out;
 *   3. two hops instead of the ring's 2(n-1), each moving (n-1)/n of the
 *      data.
 *
 * A channel per DFCCL_TWOSHOT_CHANNEL_BYTES, at most DFCCL_CHANNELS, each
 * rank's part of a channel at most DFCCL_LL_MAX_BYTES; a ring of at least
 * DFCCL_SLOTS slots per sender.
 */
#include "../dfccl_int.h"

static int dfccl_twoshot_plan(const dfccl_config_t *cfg, const struct dfccl_group *g, int kind,
                              size_t count, int dtype, int *nch_p)
{
    const size_t esz   = dfccl_dtype_bytes(dtype);
    const size_t bytes = count * esz;
    uint64_t off, cnt;
    int nch;

    if (kind != DFCCL_COLL_ALLREDUCE || !dfccl_algo_all_local(cfg, g) || bytes == 0) {
        return 0;
    }
    nch = dfccl_nchannels_for(bytes, cfg->twoshot_channel_bytes, (size_t)cfg->max_channels,
                              count);
    dfccl_ring_partition(kind, count, nch, 0, &off, &cnt);
    cnt = DFCCL_TWOSHOT_PART_ELEMS(cnt, (uint64_t)g->nranks, esz);
    if (cnt * esz > DFCCL_LL_MAX_BYTES) {
        return 0;
    }
    *nch_p = nch;
    return 1;
}

static size_t dfccl_twoshot_layout(const dfccl_config_t *cfg, const struct dfccl_group *g,
                                   int nch, dfccl_coll_static_t *st)
{
    /* a slot holds both parts a rank sends a peer (channel 0's parts are
     * the largest) and a flag per step, each on its own cache line; a ring
     * of such slots per sender, as many as hold DFCCL_LL_RING_BYTES but at
     * least cfg->nslots: with k slots a sender reads its peers' heads
     * across the link once every k - 1 back-to-back calls, not on every
     * call as with two */
    uint64_t off, cnt, slot;

    (void)g;
    dfccl_ring_partition((int)st->kind, st->count, nch, 0, &off, &cnt);
    slot = 2 * DFCCL_TWOSHOT_PART_ELEMS(cnt, (uint64_t)st->nranks, st->elem_size) *
               st->elem_size + 2 * DFCCL_CACHELINE;
    slot = (slot + 255) / 256 * 256;
    st->team         = 0; /* the whole block */
    st->nchannels    = nch;
    st->chunk_slices = 1;
    st->slot_bytes   = (uint32_t)slot;
    st->proto        = DFCCL_K_PROTO_SIMPLE;
    st->nslots       = dfccl_algo_ll_slots(cfg, st->slot_bytes, (size_t)cfg->nslots);
    return sizeof(dfccl_conn_ctrl_t) + (size_t)st->nranks * st->nslots * st->slot_bytes;
}

/* two hops, each moving (n-1)/n of the data on every link */
static double dfccl_twoshot_cost_us(const struct dfccl_group *g, int kind, size_t bytes)
{
    double n = g->nranks;

    (void)kind;
    return dfccl_algo_alpha_beta(g, 2, 2 * (n - 1) / n * (double)bytes);
}

DFCCL_ALGO_DEFINE(twoshot, DFCCL_K_ALGO_TWOSHOT,
                  "it takes allreduces whose parts fit a 64 KiB slot, on groups of 2 to 8 ranks "
                  "that all write to each other, with LL allowed");
