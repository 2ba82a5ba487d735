/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The mesh (kernels/algo/alltoall.h): all-to-alls on groups whose ranks all
 * write into each other's connectors (one host, no net, at most
 * DFCCL_ONESHOT_MAX_RANKS ranks). A channel's region at each rank holds a
 * connector per sender; in step k every rank sends to rank + k and
 * receives from rank - k, so each block crosses one link once, where the
 * ring would carry it up to n - 1 hops.
 *
 *   1. channels: a channel per DFCCL_CHANNEL_BYTES of a rank's data for its
 *      peers, at most DFCCL_CHANNELS, or DFCCL_MAX_BLOCKS from
 *      DFCCL_MESH_WIDE_BYTES up (a block both sends and receives a slice
 *      in turn, so large transfers need more blocks to fill the links
 *      than the ring does); alltoallv (each rank knows only its
 *      own counts, and the layout must be the same on every rank):
 *      DFCCL_CHANNELS;
 *   2. layout: per sender, DFCCL_SLOTS slots as large as a pair's share of
 *      the channel cut into DFCCL_STEP_SLICES slices, at most
 *      DFCCL_MESH_SLOT_BYTES, or more on fewer ranks (alltoallv: that
 *      size), LL where the slot
 *      holds at most DFCCL_LL_BYTES (as the ring decides);
 *   3. cost: n - 1 steps of one hop, (n - 1) / n of the data out of every
 *      rank.
 */
#include "../dfccl_int.h"

/* The least of a mesh connector's largest slot (dfccl_algo_region_slot
 * raises it on fewer ranks). A region holds n - 1 connectors, so the
 * ring's slot (up to DFCCL_SLOT_BYTES) would take n - 1 times its memory;
 * with every pair's transfer in flight at once, slices of this size keep
 * the links busy. */
#define DFCCL_MESH_SLOT_BYTES (128u << 10)

static int dfccl_mesh_plan(const dfccl_config_t *cfg, const struct dfccl_group *g, int kind,
                           size_t count, int dtype, int *nch_p)
{
    const size_t bytes = count * dfccl_dtype_bytes(dtype) * (size_t)(g->nranks - 1);
    size_t most        = (size_t)cfg->max_channels;

    if ((kind != DFCCL_COLL_ALLTOALL && kind != DFCCL_COLL_ALLTOALLV) ||
        (g->nranks > 1 && (g->nranks > DFCCL_ONESHOT_MAX_RANKS || !g->all_local || g->net))) {
        return 0; /* one rank: a copy, with its table of pairs */
    }
    if (cfg->mesh_wide_bytes != 0 && bytes >= cfg->mesh_wide_bytes &&
        (size_t)cfg->max_blocks > most) {
        most = (size_t)cfg->max_blocks;
    }
    *nch_p = kind == DFCCL_COLL_ALLTOALLV
                 ? cfg->max_channels
                 : dfccl_nchannels_for(bytes, cfg->min_channel_bytes, most, count);
    return 1;
}

static size_t dfccl_mesh_layout(const dfccl_config_t *cfg, const struct dfccl_group *g, int nch,
                                dfccl_coll_static_t *st)
{
    /* a pair's share of a channel, in DFCCL_STEP_SLICES slices */
    const size_t slices = cfg->step_slices > 0 ? (size_t)cfg->step_slices : 1;
    const size_t share  = (st->count + (size_t)nch - 1) / (size_t)nch * st->elem_size;
    const size_t slice  = (share + slices - 1) / slices;
    uint32_t most       = dfccl_algo_region_slot(cfg, g, DFCCL_MESH_SLOT_BYTES);

    /* alltoallv: slots of the least, whatever its counts (its layout cannot
     * depend on them), in every registration MPI makes */
    if (st->kind == DFCCL_COLL_ALLTOALLV) {
        most = most < DFCCL_MESH_SLOT_BYTES ? most : DFCCL_MESH_SLOT_BYTES;
        return dfccl_algo_sender_slots(cfg, st, nch, most, 0, most);
    }
    return dfccl_algo_sender_slots(cfg, st, nch, 256, (double)slice, most);
}

/* n - 1 steps, each one hop to another peer; a rank sends (n - 1) / n of
 * its data (bytes: all of it) */
static double dfccl_mesh_cost_us(const struct dfccl_group *g, int kind, size_t bytes)
{
    (void)kind;
    return dfccl_algo_alpha_beta(g, g->nranks - 1,
                                 (double)(g->nranks - 1) / g->nranks * (double)bytes);
}

DFCCL_ALGO_DEFINE(mesh, DFCCL_K_ALGO_MESH,
                  "it takes all-to-alls on groups of 2 to 8 ranks that all write to each other");
