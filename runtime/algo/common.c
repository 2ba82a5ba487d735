/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the algorithm modules share: the slots of an LL connector, and
 * whether a group's ranks all write into each other's connectors. Below
 * every module, so that the modules and the chooser above them never call
 * each other in a loop.
 */
#include "../dfccl_int.h"

/* Slots of an LL connector: as many as hold DFCCL_LL_RING_BYTES of data, so
 * that senders of small slices rarely run out of credit (and read the
 * receiver's head across the link), but no fewer than `least` and no more
 * than cfg->ll_slots (`least` wins). Same on all ranks. */
uint32_t dfccl_algo_ll_slots(const dfccl_config_t *cfg, uint32_t slot_bytes, size_t least)
{
    size_t n = DFCCL_LL_RING_BYTES / (slot_bytes > 0 ? slot_bytes : 1);

    if (n > (size_t)cfg->ll_slots) {
        n = (size_t)cfg->ll_slots;
    }
    if (n < least) {
        n = least;
    }
    return (uint32_t)n;
}

size_t dfccl_algo_sender_conns(const dfccl_config_t *cfg, dfccl_coll_static_t *st, int nch,
                               uint32_t slot, int ll)
{
    size_t conn;

    st->team         = 0;
    st->nchannels    = nch;
    st->nslots       = (uint32_t)cfg->nslots;
    st->chunk_slices = 1;
    st->slot_bytes   = slot;
    st->proto        = DFCCL_K_PROTO_SIMPLE;
    if (ll) {
        if (st->slot_bytes > cfg->ll_max_bytes) {
            st->slot_bytes = (uint32_t)cfg->ll_max_bytes;
        }
        st->proto  = DFCCL_K_PROTO_LL;
        st->nslots = dfccl_algo_ll_slots(cfg, st->slot_bytes, (size_t)cfg->nslots);
    }
    conn = (size_t)DFCCL_MESH_CONN_BYTES(st->nslots, st->slot_bytes, ll);
    /* a connector per other rank */
    return sizeof(dfccl_conn_ctrl_t) + (size_t)(st->nranks > 1 ? st->nranks - 1 : 0) * conn;
}

size_t dfccl_algo_sender_slots(const dfccl_config_t *cfg, dfccl_coll_static_t *st, int nch,
                               uint32_t slot, double want, uint32_t most)
{
    while ((double)slot < want && slot < most) {
        slot <<= 1;
    }
    return dfccl_algo_sender_conns(cfg, st, nch, slot,
                                   cfg->proto == DFCCL_PROTO_LL ||
                                       (cfg->proto != DFCCL_PROTO_SIMPLE &&
                                        slot <= cfg->ll_max_bytes));
}

uint32_t dfccl_algo_region_slot(const dfccl_config_t *cfg, const struct dfccl_group *g,
                                uint32_t least)
{
    uint32_t most = least;

    while ((uint64_t)most * 2 * (uint64_t)g->nranks <= cfg->slot_bytes) {
        most <<= 1;
    }
    return most > cfg->slot_bytes ? (uint32_t)cfg->slot_bytes : most;
}

/* Whether the group's ranks all write into each other's connectors, with
 * LL allowed: what one and two shot need. Same on all ranks. */
int dfccl_algo_all_local(const dfccl_config_t *cfg, const struct dfccl_group *g)
{
    return g->nranks >= 2 && g->nranks <= DFCCL_ONESHOT_MAX_RANKS && g->all_local && !g->net &&
           cfg->proto != DFCCL_PROTO_SIMPLE;
}

/*
 * Threads of a block that run a channel whose primitives move at most
 * `bytes` in LL (DFCCL_TEAM_THREADS: one-shot collectives and LL MSCCL
 * programs): one per LL line, in multiples of cfg->team_threads; 0 (the
 * whole block) when that is not fewer than the block's threads, or the
 * setting is 0. A local choice: ranks may differ.
 */
uint32_t dfccl_algo_team(const dfccl_config_t *cfg, uint64_t bytes)
{
    const uint64_t unit  = (uint64_t)cfg->team_threads;
    const uint64_t lines = bytes == 0 ? 1 : (bytes + 7) / 8;
    uint64_t team;

    if (unit == 0) {
        return 0;
    }
    team = (lines + unit - 1) / unit * unit;
    return team >= (uint64_t)cfg->threads_per_block ? 0 : (uint32_t)team;
}
