/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Host side of the ring algorithms: how many channels a collective uses and
 * which part of the data each channel carries. Every rank computes the same
 * answer from the same registration arguments and configuration.
 */
#include "../dfccl_int.h"

int dfccl_ring_nchannels(const dfccl_config_t *cfg, int kind, size_t count, int dtype,
                         int nranks, int pair)
{
    size_t bytes = count * dfccl_dtype_bytes(dtype);
    size_t most = (size_t)cfg->max_channels;

    if (kind == DFCCL_COLL_ALLGATHER || kind == DFCCL_COLL_REDUCESCATTER) {
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
