/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The ring (kernels/algo/ring.h): every collective on any group. Each channel
 * carries an equal part of the data around the ring of ranks; a step is
 * cut into slices that pipeline through connector slots of at most
 * DFCCL_SLOT_BYTES, carried in LL or SIMPLE. This file says how many
 * channels a collective uses, which part of the data each carries, how its
 * connectors are laid out and what it costs:
 *
 *   1. channels: a channel per DFCCL_CHANNEL_BYTES of the data, at most
 *      DFCCL_CHANNELS (DFCCL_WIDE_CHANNELS from DFCCL_WIDE_BYTES up; every
 *      block for a pair's allreduces from DFCCL_PAIR_BYTES; one for a
 *      pair's small allgathers and reduce-scatters);
 *   2. layout: DFCCL_SLOTS slots per connector, a step cut into
 *      DFCCL_STEP_SLICES slices of at least DFCCL_MIN_PIPE_SLICE bytes, the
 *      slot as small as a slice, and LL for slots of up to DFCCL_LL_BYTES;
 *   3. cost: an allreduce takes 2(n-1) hops and moves 2(n-1)/n of the data
 *      on every link, the others n-1 hops and (n-1)/n of it (reduce and
 *      broadcast all of it, all-to-all (n-1)/2 of it: blocks cross up to
 *      n-1 links).
 *
 * Every rank computes the same answer from the same registration
 * arguments and configuration.
 */
#include "../dfccl_int.h"

/* The smallest slice a ring step is cut into: each slice costs a
 * connector round trip, which a small slice cannot hide. */
#define DFCCL_MIN_PIPE_SLICE (16u << 10)

int dfccl_ring_nchannels(const dfccl_config_t *cfg, int kind, size_t count, int dtype,
                         int nranks, int pair)
{
    size_t bytes = count * dfccl_dtype_bytes(dtype);
    size_t most = (size_t)cfg->max_channels;

    if (kind == DFCCL_COLL_ALLGATHER || kind == DFCCL_COLL_REDUCESCATTER ||
        kind == DFCCL_COLL_ALLTOALL) {
        bytes *= (size_t)nranks;
    }
    /* The largest allreduces, allgathers and reduce-scatters may spread
     * over more blocks (a channel per block), and on a pair of GPUs the
     * large allreduces over every daemon block. */
    if (cfg->wide_bytes != 0 && bytes >= cfg->wide_bytes &&
        (kind == DFCCL_COLL_ALLREDUCE || kind == DFCCL_COLL_ALLGATHER ||
         kind == DFCCL_COLL_REDUCESCATTER) &&
        (size_t)cfg->wide_channels > most) {
        most = (size_t)cfg->wide_channels;
    }
    if (pair && cfg->pair_bytes != 0 && bytes >= cfg->pair_bytes &&
        kind == DFCCL_COLL_ALLREDUCE && (size_t)cfg->max_blocks > most) {
        most = (size_t)cfg->max_blocks;
    }
    /* and their small reduce-scatters and allgathers on one channel: a
     * channel more costs more than it moves */
    if (pair && bytes <= cfg->pair_ring_bytes &&
        (kind == DFCCL_COLL_ALLGATHER || kind == DFCCL_COLL_REDUCESCATTER)) {
        most = 1;
    }
    return dfccl_nchannels_for(bytes, cfg->min_channel_bytes, most, count);
}

/* A channel per `per` bytes, at most `most` and at most one per element,
 * at least one. */
int dfccl_nchannels_for(size_t bytes, size_t per, size_t most, size_t count)
{
    size_t nch = (bytes + per - 1) / per;

    if (nch > most) {
        nch = most;
    }
    if (nch > count) {
        nch = count;
    }
    return nch < 1 ? 1 : (int)nch;
}

/* Channel `ch`'s element range: equal parts, boundaries 16-byte aligned
 * (alignment in elements is applied by the caller through `count`'s type:
 * here parts are multiples of 16 elements, enough for every type). */
void dfccl_ring_partition(int kind, size_t count, int nchannels, int ch, uint64_t *off_p,
                          uint64_t *cnt_p)
{
    uint64_t per = (count + (uint64_t)nchannels - 1) / (uint64_t)nchannels;
    uint64_t off;

    per = (per + 15) & ~15ull;
    off = (uint64_t)ch * per;
    if (off > count) {
        off = count;
    }
    *off_p = off;
    *cnt_p = (count - off) < per ? (count - off) : per;
}

/*
 * The primitive a ring collective runs at `step` of a loop on this rank
 * (DFCCL_WHERE_* bits), as kernels/algo/ring.h lists them; broadcast and reduce
 * run one primitive per loop, by position from the root. For reports of
 * where a rank waits.
 */
uint32_t dfccl_ring_step_prim(const dfccl_coll_static_t *st, uint32_t step)
{
    const int n = st->nranks, r = st->ring_pos, s = (int)step;
    const uint32_t rv = DFCCL_WHERE_RECV, sd = DFCCL_WHERE_SEND, rd = DFCCL_WHERE_REDUCE,
                   cp = DFCCL_WHERE_COPY;
    int p;

    if (n == 1) {
        return cp;
    }
    switch (st->kind) {
    case DFCCL_COLL_ALLREDUCE:
        return s == 0 ? sd : s < n - 1 ? rv | rd | sd : s == n - 1 ? rv | rd | cp | sd
                           : s < 2 * n - 2 ? rv | cp | sd : rv | cp;
    case DFCCL_COLL_ALLGATHER:
        return s == 0 ? cp | sd : s < n - 1 ? rv | cp | sd : rv | cp;
    case DFCCL_COLL_REDUCESCATTER:
        return s == 0 ? sd : s < n - 1 ? rv | rd | sd : rv | rd | cp;
    case DFCCL_COLL_BROADCAST:
        p = ((r - st->ring_root) % n + n) % n;
        return p == 0 ? cp | sd : p < n - 1 ? rv | cp | sd : rv | cp;
    case DFCCL_COLL_REDUCE:
        p = ((r - st->ring_root - 1) % n + n) % n;
        return p == 0 ? sd : p < n - 1 ? rv | rd | sd : rv | rd | cp;
    case DFCCL_COLL_ALLTOALL:
    case DFCCL_COLL_ALLTOALLV:
        /* mesh: step k sends to r + k and receives from r - k; ring:
         * phases of send, forward, receive */
        return s == 0 ? cp : st->algo == DFCCL_K_ALGO_MESH ? sd | rv | cp : sd | rv;
    default:
        return 0;
    }
}

/* "recvReduceSend" and the like, from DFCCL_WHERE_* bits. */
void dfccl_prim_name(uint32_t flags, char *buf, size_t len)
{
    static const char *const parts[] = {"recv", "Reduce", "Copy", "Send"};
    static const uint32_t bits[]     = {DFCCL_WHERE_RECV, DFCCL_WHERE_REDUCE, DFCCL_WHERE_COPY,
                                        DFCCL_WHERE_SEND};
    size_t o = 0;

    buf[0] = '\0';
    for (int i = 0; i < 4 && o + 8 < len; i++) {
        if (flags & bits[i]) {
            o += (size_t)snprintf(buf + o, len - o, "%s", parts[i]);
        }
    }
    if (o > 0 && buf[0] >= 'A' && buf[0] <= 'Z') {
        buf[0] = (char)(buf[0] - 'A' + 'a');
    }
    if (o == 0) {
        snprintf(buf, len, "?");
    }
}

/*
 * Slices per ring step: the setting, but fewer than the slots of a
 * connector. In the first step of a ring every rank sends a whole step
 * before it receives anything, and each later primitive needs a full slot
 * from the previous rank and a free one at the next: with as many slots as
 * slices every slot would be full and no rank could go on. Same on all
 * ranks.
 */
static uint32_t dfccl_ring_step_slices(const dfccl_config_t *cfg)
{
    int s = cfg->step_slices < cfg->nslots ? cfg->step_slices : cfg->nslots - 1;

    return (uint32_t)(s < 1 ? 1 : s);
}

/*
 * Slot size for a collective: the configured size, or less for small
 * collectives, so that 1000s of small ones stay cheap. A ring step is cut
 * into dfccl_ring_step_slices slices to pipeline it, but not into slices
 * below DFCCL_MIN_PIPE_SLICE: each slice costs a connector round trip, which
 * small steps cannot hide. Same on all ranks.
 */
static uint32_t dfccl_ring_slot_bytes(const dfccl_config_t *cfg, int kind, size_t count,
                                      int dtype, int nranks, int nch)
{
    size_t bytes = count * dfccl_dtype_bytes(dtype);
    size_t step, slice, slot = 256, nslices = dfccl_ring_step_slices(cfg);

    step = (bytes + (size_t)nch - 1) / (size_t)nch;
    if (kind == DFCCL_COLL_ALLREDUCE) {
        step = (step + (size_t)nranks - 1) / (size_t)nranks;
    }
    slice = (step + nslices - 1) / nslices;
    if (slice < DFCCL_MIN_PIPE_SLICE) {
        slice = step < DFCCL_MIN_PIPE_SLICE ? step : DFCCL_MIN_PIPE_SLICE;
    }
    step = slice;
    while (slot < step && slot < cfg->slot_bytes) {
        slot <<= 1;
    }
    return (uint32_t)(slot < cfg->slot_bytes ? slot : cfg->slot_bytes);
}

/*
 * Protocol of a collective (DFCCL_K_PROTO_*): with DFCCL_PROTO=auto, LL when
 * its slots hold at most DFCCL_LL_BYTES; with ll, always (the slots cut
 * down to that); only on groups of more than one rank without net edges
 * (the net proxies ship slots on the SIMPLE counters). The backend default
 * was resolved by dfcclInit. Same on all ranks.
 */
static uint32_t dfccl_ring_proto(const dfccl_config_t *cfg, const struct dfccl_group *g,
                                 uint32_t *slot_bytes_p)
{
    if (g->nranks < 2 || g->net || cfg->proto == DFCCL_PROTO_SIMPLE) {
        return DFCCL_K_PROTO_SIMPLE;
    }
    if (cfg->proto == DFCCL_PROTO_LL) {
        if (*slot_bytes_p > cfg->ll_max_bytes) {
            *slot_bytes_p = (uint32_t)cfg->ll_max_bytes;
        }
        return DFCCL_K_PROTO_LL;
    }
    return *slot_bytes_p <= cfg->ll_max_bytes ? DFCCL_K_PROTO_LL : DFCCL_K_PROTO_SIMPLE;
}

static int dfccl_ring_plan(const dfccl_config_t *cfg, const struct dfccl_group *g, int kind,
                           size_t count, int dtype, int *nch_p)
{
    *nch_p = dfccl_ring_nchannels(cfg, kind, count, dtype, g->nranks, g->pair);
    /* a rank on the way of an alltoallv's block would need its size */
    return kind != DFCCL_COLL_ALLTOALLV;
}

static size_t dfccl_ring_layout(const dfccl_config_t *cfg, const struct dfccl_group *g, int nch,
                                dfccl_coll_static_t *st)
{
    st->team         = 0; /* the whole block */
    st->nchannels    = nch;
    st->nslots       = (uint32_t)cfg->nslots;
    st->chunk_slices = dfccl_ring_step_slices(cfg);
    st->slot_bytes   = dfccl_ring_slot_bytes(cfg, (int)st->kind, st->count, (int)st->dtype,
                                             (int)st->nranks, nch);
    st->proto        = dfccl_ring_proto(cfg, g, &st->slot_bytes);
    if (st->proto == DFCCL_K_PROTO_LL) {
        st->nslots = dfccl_algo_ll_slots(cfg, st->slot_bytes, (size_t)cfg->nslots);
    }
    return sizeof(dfccl_conn_ctrl_t) +
           (size_t)st->nslots * st->slot_bytes * (st->proto == DFCCL_K_PROTO_LL ? 2 : 1);
}

/* Hops in sequence, and the bytes every rank sends over its link: an
 * allreduce 2 (n - 1) steps of 1/n of the data each; allgather and
 * reduce-scatter n - 1 steps of a rank's share; reduce and broadcast pass
 * the whole buffer along the chain, pipelined; an all-to-all's block for
 * the rank k ahead crosses k links, (n - 1) / 2 of a rank's data on every
 * link. */
static double dfccl_ring_cost_us(const struct dfccl_group *g, int kind, size_t bytes)
{
    const double n = g->nranks;
    double hops = n - 1, moved = (n - 1) / n * (double)bytes;

    switch (kind) {
    case DFCCL_COLL_ALLREDUCE:
        hops *= 2;
        moved *= 2;
        break;
    case DFCCL_COLL_ALLGATHER:
    case DFCCL_COLL_REDUCESCATTER:
        moved = (n - 1) * (double)bytes; /* bytes: one rank's share */
        break;
    case DFCCL_COLL_REDUCE:
    case DFCCL_COLL_BROADCAST:
        moved = (double)bytes;
        break;
    case DFCCL_COLL_ALLTOALL:
        moved = (n - 1) / 2 * (double)bytes;
        break;
    }
    return dfccl_algo_alpha_beta(g, hops, moved);
}

/* An allreduce's channel is final up to the end of each loop of n chunks
 * (kernels/algo/ring.h); the other collectives complete as a whole. */
static size_t dfccl_ring_partial(const dfccl_coll_static_t *st)
{
    if (st->kind != DFCCL_COLL_ALLREDUCE) {
        return 0;
    }
    return (size_t)st->nranks * (st->slot_bytes / st->elem_size) * st->chunk_slices *
           st->elem_size;
}

DFCCL_ALGO_DEFINE_PARTIAL(ring, DFCCL_K_ALGO_RING, "the ring runs every collective but alltoallv");
