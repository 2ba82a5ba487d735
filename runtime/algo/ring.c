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

/*
 * The primitive a ring collective runs at `step` of a loop on this rank
 * (DFCCL_WHERE_* bits), as kernels/ring.h lists them; broadcast and reduce
 * run one primitive per loop, by position from the root. For reports of
 * where a rank waits.
 */
uint32_t dfccl_ring_step_prim(const dfccl_coll_static_t *st, uint32_t step)
{
    const int n = st->nranks, r = st->rank, s = (int)step;
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
        p = ((r - st->root) % n + n) % n;
        return p == 0 ? cp | sd : p < n - 1 ? rv | cp | sd : rv | cp;
    case DFCCL_COLL_REDUCE:
        p = ((r - st->root - 1) % n + n) % n;
        return p == 0 ? sd : p < n - 1 ? rv | rd | sd : rv | rd | cp;
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
