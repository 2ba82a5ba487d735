/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One shot (kernels/algo/oneshot.h): small allreduces, allgathers,
 * reduce-scatters and alltoalls on groups whose ranks all write into each other's
 * connectors (one host, no net, p2p to every GPU), in LL:
 *
 *   1. every rank writes what each peer needs of its input (all of it for
 *      an allreduce, the peer's block for a reduce-scatter, its own block
 *      for an allgather) into that peer's connector, one LL slot per
 *      channel and peer;
 *   2. every rank reads the n slots of each channel and reduces them in
 *      rank order (or places them), so every rank computes the same bits;
 *   3. one hop instead of the ring's 2(n-1) (allreduce) or n-1.
 *
 * A channel per DFCCL_ONESHOT_CHANNEL_BYTES of a rank's share, at most
 * DFCCL_CHANNELS (one on a pair up to DFCCL_PAIR_ONESHOT_BYTES), each
 * channel's share at most one LL slot (DFCCL_LL_MAX_BYTES).
 */
#include "../dfccl_int.h"

static int dfccl_oneshot_plan(const dfccl_config_t *cfg, const struct dfccl_group *g, int kind,
                              size_t count, int dtype, int *nch_p)
{
    const size_t esz   = dfccl_dtype_bytes(dtype);
    const size_t bytes = count * esz; /* allgather, reduce-scatter, alltoall: a rank's share */
    uint64_t off, cnt;
    int nch;

    if ((kind != DFCCL_COLL_ALLREDUCE && kind != DFCCL_COLL_ALLGATHER &&
         kind != DFCCL_COLL_REDUCESCATTER && kind != DFCCL_COLL_ALLTOALL) ||
        !dfccl_algo_all_local(cfg, g) || bytes == 0) {
        return 0;
    }
    nch = dfccl_nchannels_for(bytes, cfg->oneshot_channel_bytes, (size_t)cfg->max_channels,
                              count);
    if (g->pair && bytes <= cfg->pair_oneshot_bytes) {
        nch = 1; /* a block past the first starts microseconds later */
    }
    dfccl_ring_partition(kind, count, nch, 0, &off, &cnt);
    if (cnt * esz > DFCCL_LL_MAX_BYTES) {
        return 0;
    }
    *nch_p = nch;
    return 1;
}

static size_t dfccl_oneshot_layout(const dfccl_config_t *cfg, const struct dfccl_group *g,
                                   int nch, dfccl_coll_static_t *st)
{
    /* one slot holds a channel's share (channel 0's is the largest); a
     * ring of LL slots per sender, as many as hold DFCCL_LL_RING_BYTES but
     * at least two (a rank may then be one call ahead) */
    uint64_t off, cnt;
    size_t slot = 256;

    (void)g;
    dfccl_ring_partition((int)st->kind, st->count, nch, 0, &off, &cnt);
    while (slot < cnt * st->elem_size) {
        slot <<= 1;
    }
    st->nchannels    = nch;
    st->chunk_slices = 1;
    st->slot_bytes   = (uint32_t)slot;
    st->proto        = DFCCL_K_PROTO_LL;
    st->nslots       = dfccl_algo_ll_slots(cfg, st->slot_bytes, 2);
    st->team         = dfccl_algo_team(cfg, cnt * st->elem_size);
    return sizeof(dfccl_conn_ctrl_t) + (size_t)st->nranks * st->nslots * st->slot_bytes * 2;
}

/* one hop; every rank writes what each of its n - 1 peers needs: all of
 * the buffer (allreduce), a rank's share (allgather, reduce-scatter), a
 * pair's block (alltoall: bytes / n). In LL (dfccl_algo_predict_us
 * counts the bytes twice). */
static double dfccl_oneshot_cost_us(const struct dfccl_group *g, int kind, size_t bytes)
{
    const double n = g->nranks;

    return dfccl_algo_alpha_beta(g, 1, (n - 1) * (double)bytes / (kind == DFCCL_COLL_ALLTOALL
                                                                       ? n : 1.0));
}

DFCCL_ALGO_DEFINE(oneshot, DFCCL_K_ALGO_ONESHOT,
                  "it takes allreduces, allgathers, reduce-scatters and alltoalls of up to 64 KiB a "
                  "channel, on groups of 2 to 8 ranks that all write to each other, with LL allowed");
