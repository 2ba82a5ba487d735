/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Registered collectives: registration (collective over the group: it
 * checks that every rank registers the same thing, allocates the
 * collective's own connectors and exchanges where they are), the static
 * context the daemon runs, and the run/query/wait/deregister calls.
 */
#include "dfccl_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/*
 * Lean connectors, for registrations past DFCCL_CONN_BUDGET: at most 16
 * channels of 2 slots of at most 32 KiB, 1 MiB, so that a thousand fit in
 * 1 GiB. A slice costs microseconds whatever its size, so a collective's
 * speed follows channels x slot bytes: with 1 MiB of connectors, 2 slots
 * beat 4, and 16 channels of 32 KiB slots do best.
 */
#define DFCCL_LEAN_CHANNELS   16
#define DFCCL_LEAN_SLOTS      2
#define DFCCL_LEAN_SLOT_BYTES (32u << 10)

/* The settings that must be the same on every rank for registrations to
 * match, named in mismatch errors. */
static const char dfccl_coll_layout_vars[] =
    "DFCCL_ALGO, DFCCL_STRAGGLER, DFCCL_PROFILE_EVERY, DFCCL_TUNER, DFCCL_TUNER_MARGIN, "
    "DFCCL_MODEL_SLICE_NS, DFCCL_MODEL_BLOCK_MBPS, DFCCL_MSCCL_XML_FILES, DFCCL_CHANNELS, "
    "DFCCL_MAX_BLOCKS, DFCCL_WIDE_BYTES, "
    "DFCCL_WIDE_CHANNELS, DFCCL_MESH_WIDE_BYTES, DFCCL_TREE_WIDE_BYTES, DFCCL_PAIR_BYTES, "
    "DFCCL_PAIR_RING_BYTES, DFCCL_PAIR_ONESHOT_BYTES, DFCCL_CONN_BUDGET, DFCCL_SLOT_BYTES, "
    "DFCCL_SLOTS, DFCCL_LL_SLOTS, DFCCL_STEP_SLICES, DFCCL_PROTO, DFCCL_LL_BYTES, "
    "DFCCL_ONESHOT_BYTES, DFCCL_ONESHOT_CHANNEL_BYTES, DFCCL_ONESHOT_GATHER_BYTES, "
    "DFCCL_TWOSHOT_BYTES and DFCCL_TWOSHOT_CHANNEL_BYTES";

static const char *const dfccl_run_names[] = {"dfcclRunAllReduce", "dfcclRunAllGather",
                                              "dfcclRunReduceScatter", "dfcclRunReduce",
                                              "dfcclRunBroadcast", "dfcclRunAllToAll",
                                              "dfcclRunAllToAllv"};
static const char *const dfccl_reg_names[] = {"dfcclRegisterAllReduce", "dfcclRegisterAllGather",
                                              "dfcclRegisterReduceScatter",
                                              "dfcclRegisterReduce", "dfcclRegisterBroadcast",
                                              "dfcclRegisterAllToAll",
                                              "dfcclRegisterAllToAllv"};

static int dfccl_is_float(int dtype)
{
    return dtype == DFCCL_FLOAT16 || dtype == DFCCL_BFLOAT16 || dtype == DFCCL_FLOAT32 ||
           dtype == DFCCL_FLOAT64;
}

static int dfccl_has_op(int kind)
{
    return kind == DFCCL_COLL_ALLREDUCE || kind == DFCCL_COLL_REDUCESCATTER ||
           kind == DFCCL_COLL_REDUCE;
}

static dfccl_status_t dfccl_coll_check_args(dfccl_group_t g, int kind, size_t count, int dtype,
                                            int op, int root, int *coll_id_p)
{
    const char *fn = dfccl_reg_names[kind];
    size_t total;

    if (g == NULL || coll_id_p == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "%s: group and coll_id_p must not be NULL",
                           fn);
    }
    if (dtype < 0 || dtype >= DFCCL_DATATYPE_COUNT) {
        return dfccl_error(DFCCL_ERR_UNSUPPORTED, "%s on group %s: datatype %d is not "
                           "supported; use one of dfccl_datatype_t", fn, g->name, dtype);
    }
    if (dfccl_has_op(kind)) {
        if (op < 0 || op >= DFCCL_OP_COUNT) {
            return dfccl_error(DFCCL_ERR_UNSUPPORTED, "%s on group %s: op %d is not "
                               "supported; use sum, prod, min, max or avg", fn, g->name, op);
        }
        if (op == DFCCL_AVG && !dfccl_is_float(dtype)) {
            return dfccl_error(DFCCL_ERR_UNSUPPORTED, "%s on group %s: avg is supported only "
                               "for floating types, not %s; use sum and divide", fn, g->name,
                               dfccl_dtype_name(dtype));
        }
    }
    if (kind == DFCCL_COLL_REDUCE || kind == DFCCL_COLL_BROADCAST) {
        if (root < 0 || root >= g->nranks) {
            return dfccl_error(DFCCL_ERR_INVALID_ARG, "%s on group %s: root %d is not a rank "
                               "of the group (0..%d)", fn, g->name, root, g->nranks - 1);
        }
    }
    if (__builtin_mul_overflow(count, dfccl_dtype_bytes(dtype), &total) ||
        __builtin_mul_overflow(total, (size_t)g->nranks, &total) || total > (1ull << 50)) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "%s on group %s: count %zu of %s overflows "
                           "the addressable size; split the collective", fn, g->name, count,
                           dfccl_dtype_name(dtype));
    }
    return DFCCL_OK;
}

/* An alltoallv's counts and displacements (for `fn`): given, within the
 * addressable size, and our own block's the same both ways. */
static dfccl_status_t dfccl_coll_check_counts(dfccl_group_t g, int dtype,
                                              const size_t *const *v, const char *fn)
{
    static const char *const names[4] = {"sendcounts", "sdispls", "recvcounts", "rdispls"};
    const size_t esz = dfccl_dtype_bytes(dtype);

    for (int i = 0; i < 4; i++) {
        if (v[i] == NULL) {
            return dfccl_error(DFCCL_ERR_INVALID_ARG, "%s on group %s: %s is NULL; pass %d "
                               "entries", fn, g->name, names[i], g->nranks);
        }
    }
    for (int q = 0; q < g->nranks; q++) {
        for (int i = 0; i < 4; i += 2) {
            size_t end;
            if (__builtin_add_overflow(v[i][q], v[i + 1][q], &end) ||
                __builtin_mul_overflow(end, esz, &end) || end > (1ull << 50)) {
                return dfccl_error(DFCCL_ERR_INVALID_ARG, "%s on group %s: %s[%d] + %s[%d] "
                                   "of %s overflows the addressable size", fn, g->name,
                                   names[i], q, names[i + 1], q, dfccl_dtype_name(dtype));
            }
        }
    }
    if (v[0][g->rank] != v[2][g->rank]) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "%s on group %s: rank %d sends itself "
                           "sendcounts[%d] = %zu elements but receives recvcounts[%d] = %zu; "
                           "they must be equal", fn, g->name, g->rank, g->rank, v[0][g->rank],
                           g->rank, v[2][g->rank]);
    }
    return DFCCL_OK;
}

/*
 * The mesh's table of pairs (every channel's dfccl_chan_t.pairs, in t) for
 * the runs from `run` on, with counts v (NULL: the registered count for
 * every pair), and the spans of the buffers those runs touch: each pair's
 * count cut into channels as the ring cuts a count. Each pair's connector
 * sequences go on from where the counts before, in force since their
 * RUN0, left them.
 */
static void dfccl_coll_pairs_fill(const dfccl_coll_static_t *st, const size_t *const *v,
                                  uint64_t run, uint64_t *t, size_t *span_send,
                                  size_t *span_recv)
{
    const size_t n = (size_t)st->nranks, nch = (size_t)st->nchannels;
    const uint64_t se = st->slot_bytes >= st->elem_size ? st->slot_bytes / st->elem_size : 1;

    *span_send = *span_recv = 0;
    for (size_t q = 0; q < n; q++) {
        const uint64_t sc = v != NULL ? v[0][q] : st->count, sd = v != NULL ? v[1][q] : q * st->count;
        const uint64_t rc = v != NULL ? v[2][q] : st->count, rd = v != NULL ? v[3][q] : q * st->count;

        if (sc > 0 && (sc + sd) * st->elem_size > *span_send) {
            *span_send = (sc + sd) * st->elem_size;
        }
        if (rc > 0 && (rc + rd) * st->elem_size > *span_recv) {
            *span_recv = (rc + rd) * st->elem_size;
        }
        for (size_t ch = 0; ch < nch; ch++) {
            uint64_t *e = t + (ch * n + q) * DFCCL_PAIR_WORDS;
            const uint64_t done = run - e[DFCCL_PAIR_RUN0];
            uint64_t off, cnt;

            e[DFCCL_PAIR_SBASE] += done * ((e[DFCCL_PAIR_SCNT] + se - 1) / se);
            e[DFCCL_PAIR_RBASE] += done * ((e[DFCCL_PAIR_RCNT] + se - 1) / se);
            e[DFCCL_PAIR_RUN0] = run;
            dfccl_ring_partition(st->kind, sc, (int)nch, (int)ch, &off, &cnt);
            e[DFCCL_PAIR_SRC]  = sd + off;
            e[DFCCL_PAIR_SCNT] = cnt;
            dfccl_ring_partition(st->kind, rc, (int)nch, (int)ch, &off, &cnt);
            e[DFCCL_PAIR_DST]  = rd + off;
            e[DFCCL_PAIR_RCNT] = cnt;
        }
    }
}

/* Bytes of the table of pairs. */
static size_t dfccl_coll_pairs_bytes(const dfccl_coll_static_t *st)
{
    return (size_t)st->nchannels * (size_t)st->nranks * DFCCL_PAIR_WORDS * sizeof(uint64_t);
}

/* The table of pairs at registration, on the host and in device memory
 * (*dev_p). */
static dfccl_status_t dfccl_coll_pairs(struct dfccl_rank_ctx *ctx, dfccl_coll_t *c,
                                       const size_t *const *v, void **dev_p)
{
    const size_t bytes = dfccl_coll_pairs_bytes(&c->st);
    dfccl_status_t rc;

    c->pairs_host = calloc(1, bytes);
    if (c->pairs_host == NULL) {
        return dfccl_error(DFCCL_ERR_NO_MEMORY, "%s: out of host memory",
                           dfccl_reg_names[c->st.kind]);
    }
    dfccl_coll_pairs_fill(&c->st, v, 0, c->pairs_host, &c->span_send, &c->span_recv);
    rc = ctx->be->dev_alloc(ctx, bytes, dev_p);
    if (rc == DFCCL_OK) {
        rc = ctx->be->memcpy_h2d(ctx, *dev_p, c->pairs_host, bytes);
    }
    return rc;
}

/*
 * An alltoallv run with counts of its own (dfcclRunAllToAllvCounts), from
 * this run on: where they differ from the table's, the new table goes to
 * the device before the run, and a peer that now gets data from us and was
 * never looked up is looked up at the run.
 */
static dfccl_status_t dfccl_coll_run_counts(struct dfccl_rank_ctx *ctx, dfccl_coll_t *c,
                                            const size_t *const *v, const char *fn)
{
    const dfccl_coll_static_t *st = &c->st;
    const size_t bytes = dfccl_coll_pairs_bytes(st), n = (size_t)st->nranks;
    size_t span_send, span_recv;
    uint64_t *t;
    int same = 1;
    dfccl_status_t rc;

    DFCCL_CHECK(dfccl_coll_check_counts(c->group, st->dtype, v, fn));
    t = malloc(bytes);
    if (t == NULL) {
        return dfccl_error(DFCCL_ERR_NO_MEMORY, "%s: out of host memory", fn);
    }
    memcpy(t, c->pairs_host, bytes);
    dfccl_coll_pairs_fill(st, v, c->runs, t, &span_send, &span_recv);
    for (size_t e = 0; e < bytes / sizeof(*t); e += DFCCL_PAIR_WORDS) {
        same = same && memcmp(&t[e], &c->pairs_host[e], DFCCL_PAIR_SBASE * sizeof(*t)) == 0;
    }
    if (same) {
        free(t); /* the table stands: its sequences advance by themselves */
        return DFCCL_OK;
    }
    rc = ctx->be->memcpy_h2d(ctx, c->pairs, t, bytes);
    if (rc != DFCCL_OK) {
        free(t);
        return rc;
    }
    free(c->pairs_host);
    c->pairs_host = t;
    c->span_send  = span_send;
    c->span_recv  = span_recv;
    c->ctx_new    = 1;
    for (size_t e = 0; e < bytes / sizeof(*t); e += DFCCL_PAIR_WORDS) {
        const size_t ch = e / DFCCL_PAIR_WORDS / n, q = e / DFCCL_PAIR_WORDS % n;

        if (t[e + DFCCL_PAIR_SCNT] > 0 && q != (size_t)st->rank && c->chans[ch].peer[q] == NULL) {
            c->resolved = 0;
        }
    }
    return DFCCL_OK;
}

/* The refusal of an alltoallv on a group that is not one mesh. */
static dfccl_status_t dfccl_coll_no_alltoallv(dfccl_group_t g, const char *fn)
{
    return dfccl_error(DFCCL_ERR_UNSUPPORTED, "%s on group %s: an alltoallv needs a group "
                       "whose ranks all write into each other's connectors (one host, 2 to %d "
                       "ranks, no net edge); on this group register dfcclRegisterAllToAll with "
                       "the largest count and pad the blocks", fn, g->name,
                       DFCCL_ONESHOT_MAX_RANKS);
}

__thread int dfccl_coll_want_id = -1;
__thread uint32_t dfccl_coll_probe;
__thread uint64_t dfccl_coll_flush_ns;

static int dfccl_coll_find_free(struct dfccl_rank_ctx *ctx)
{
    if (dfccl_coll_want_id >= 0) {
        return ctx->colls[dfccl_coll_want_id].state == DFCCL_COLL_FREE ? dfccl_coll_want_id : -1;
    }
    for (int i = 0; i < ctx->cfg.max_colls; i++) {
        if (ctx->colls[i].state == DFCCL_COLL_FREE) {
            return i;
        }
    }
    return -1;
}

/* Signature of a registration: [0] valid marker, then what must match. */
static void dfccl_coll_make_sig(const dfccl_coll_static_t *st, uint64_t nreg, uint64_t sig[8])
{
    sig[1] = (uint64_t)st->kind | ((uint64_t)st->dtype << 16) | ((uint64_t)st->op << 32);
    sig[2] = st->count;
    sig[3] = (uint64_t)(uint32_t)st->root | ((uint64_t)(uint32_t)st->nranks << 32);
    sig[4] = (uint64_t)(uint32_t)st->nchannels | ((uint64_t)st->chunk_slices << 32);
    sig[5] = (uint64_t)st->slot_bytes | ((uint64_t)st->nslots << 32);
    sig[6] = nreg;
    sig[7] = st->proto | ((uint64_t)st->algo << 32);
    sig[0] = 0x9e3779b97f4a7c15ull;
    for (int i = 1; i < 8; i++) {
        sig[0] = (sig[0] ^ sig[i]) * 0x100000001b3ull;
    }
    sig[0] |= 1; /* never 0: 0 means "not registered yet" */
}

/* Reset a receive connector we own (it may be reused memory) and publish
 * our signature in it, last. */
static dfccl_status_t dfccl_coll_write_sig(struct dfccl_rank_ctx *ctx, void *host_ctrl,
                                           void *dev_ctrl, const uint64_t sig[8])
{
    dfccl_conn_ctrl_t fresh;

    memset(&fresh, 0, sizeof(fresh));
    if (host_ctrl != NULL) {
        dfccl_conn_ctrl_t *c = host_ctrl;
        __atomic_store_n(&c->sig[0], 0, __ATOMIC_RELEASE);
        c->tail = 0;
        c->head = 0;
        for (int i = 1; i < 8; i++) {
            c->sig[i] = sig[i];
        }
        __atomic_store_n(&c->sig[0], sig[0], __ATOMIC_RELEASE);
        return DFCCL_OK;
    }
    memcpy(fresh.sig, sig, sizeof(fresh.sig));
    return ctx->be->memcpy_h2d(ctx, dev_ctrl, &fresh, sizeof(fresh));
}

static dfccl_status_t dfccl_coll_read_sig(struct dfccl_rank_ctx *ctx, void *host_ctrl,
                                          void *dev_ctrl, uint64_t sig[8])
{
    if (host_ctrl != NULL) {
        dfccl_conn_ctrl_t *c = host_ctrl;
        sig[0] = __atomic_load_n(&c->sig[0], __ATOMIC_ACQUIRE);
        for (int i = 1; i < 8; i++) {
            sig[i] = c->sig[i];
        }
        return DFCCL_OK;
    }
    return ctx->be->memcpy_d2h(ctx, sig, ((dfccl_conn_ctrl_t *)dev_ctrl)->sig, 8 * sizeof(uint64_t));
}

/* Does the collective use the mesh's connectors (one per sender in each
 * region, written through peer[])? */
static int dfccl_coll_meshed(const dfccl_coll_static_t *st)
{
    return st->algo == DFCCL_K_ALGO_MESH || st->algo == DFCCL_K_ALGO_MSCCL ||
           st->algo == DFCCL_K_ALGO_TREE || st->algo == DFCCL_K_ALGO_CTREE;
}

/* Does channel `ch` of this collective send anything to the ring's next rank? A
 * channel that does not needs no send connector: the next rank may finish
 * (and even reuse the region) without waiting for us. */
static int dfccl_coll_sends(const dfccl_coll_t *c, int ch)
{
    const dfccl_coll_static_t *st = &c->st;
    int last = (st->ring_pos - st->ring_root + st->nranks) % st->nranks == st->nranks - 1;

    if (c->chans[ch].cnt == 0 || st->nranks == 1 || dfccl_coll_meshed(st)) {
        return 0; /* the mesh, MSCCL and trees write to their peers' regions (peer[]) */
    }
    if (st->probe != 0) {
        return (st->probe & DFCCL_K_PROBE_SEND) != 0; /* only over a link it measures */
    }
    if (st->kind == DFCCL_COLL_BROADCAST) {
        return !last; /* the root's predecessor only receives */
    }
    if (st->kind == DFCCL_COLL_REDUCE) {
        return st->rank != st->root; /* the root only receives */
    }
    return 1;
}

/*
 * Rank q's connector region of channel `ch` of collective `id` (where we
 * write): 1 with *dev_p set once rank q has made this registration and
 * its signature there is ours, 0 while it has not registered this far
 * (its region at this place may still belong to another collective) or
 * once it has deregistered it, or an error status.
 */
static int dfccl_coll_find_peer(struct dfccl_rank_ctx *ctx, int id, int q, int ch, void **dev_p)
{
    dfccl_coll_t *c       = &ctx->colls[id];
    struct dfccl_group *g = c->group;
    const dfccl_dir_t *d  = dfccl_pool_dir_of(g, q);
    void *host;
    uint64_t peer[8];
    dfccl_status_t st;
    int rc;

    if (d == NULL) {
        return dfccl_error(DFCCL_ERR_INTERNAL, "collective %d on group %s: no directory of "
                           "rank %d", id, g->name, q);
    }
    if (__atomic_load_n(&d->nreg, __ATOMIC_ACQUIRE) <= c->sig[6]) {
        return 0;
    }
    rc = dfccl_pool_resolve_rank(g, q, c->conn_seg[ch], c->conn_off[ch], &host, dev_p);
    if (rc <= 0) {
        return rc;
    }
    st = dfccl_coll_read_sig(ctx, host, *dev_p, peer);
    if (st != DFCCL_OK) {
        return st;
    }
    /* A region freed (its signature cleared) or reused by a later
     * registration of rank q: q has deregistered this one (registered and
     * not run, here too). Nothing can pair with it there any more; a run
     * of it waits, as for a rank that never registered it. */
    if (memcmp(peer, c->sig, sizeof(peer)) != 0 &&
        (peer[6] > c->sig[6] || peer[0] == 0)) {
        return 0;
    }
    if (memcmp(peer, c->sig, sizeof(peer)) != 0) {
        char mine[160], theirs[160];
        dfccl_coll_describe_sig(c->sig, mine, sizeof(mine));
        dfccl_coll_describe_sig(peer, theirs, sizeof(theirs));
        st = dfccl_error(DFCCL_ERR_MISMATCH, "collective %d on group %s: rank %d registered "
                         "%s but rank %d registered %s at the same position; every rank "
                         "must register the group's collectives in the same order with the "
                         "same arguments (and the same %s)", id, g->name, g->rank, mine, q,
                         theirs, dfccl_coll_layout_vars);
        /* every collective of the group from this registration on pairs
         * with the wrong one: the other ranks fail theirs too */
        dfccl_dir_publish_fail(g, DFCCL_FAIL_FROM, c->sig[6], 0, st,
                               dfcclGetLastErrorMessage());
        return st;
    }
    return 1;
}

/*
 * Find the next rank's connectors of collective `id`: 1 when all are found
 * (and pushed to the daemon), 0 when the next rank has not registered it
 * yet, or a negative status. ctx->lock held.
 */
static int dfccl_coll_resolve(struct dfccl_rank_ctx *ctx, int id)
{
    dfccl_coll_t *c       = &ctx->colls[id];
    struct dfccl_group *g = c->group;
    const size_t nb       = (size_t)ctx->cfg.max_blocks;
    dfccl_status_t st;

    /* a rank found a mismatch at or before this registration: it cannot
     * pair with the right collective anywhere */
    if (dfccl_group_failed_run(g, c, 1, &st, NULL, 0) >= 0) {
        char msg[2048];
        dfccl_group_failed_run(g, c, 1, &st, msg, sizeof(msg));
        return dfccl_error(st, "%s", msg);
    }
    if (c->resolved) {
        return 1;
    }
    /* one and two shot: every peer's region of each channel, where we
     * write */
    for (int ch = 0; c->st.algo != DFCCL_K_ALGO_RING && ch < c->st.nchannels; ch++) {
        for (int q = 0; q < g->nranks; q++) {
            void *dev;
            int rc;

            if (q == g->rank) {
                c->chans[ch].peer[q] = (char *)c->chans[ch].recv_ctrl;
                continue;
            }
            /* the mesh: a peer we send nothing on this channel may complete
             * the collective without us, and even register another one in
             * its region: we need not find it */
            if (c->chans[ch].peer[q] != NULL ||
                (c->st.algo == DFCCL_K_ALGO_MESH &&
                 c->pairs_host[((size_t)ch * (size_t)g->nranks + (size_t)q) * DFCCL_PAIR_WORDS +
                               DFCCL_PAIR_SCNT] == 0) ||
                (c->st.algo == DFCCL_K_ALGO_MSCCL && !dfccl_msccl_sends_to(c, ch, q)) ||
                ((c->st.algo == DFCCL_K_ALGO_TREE || c->st.algo == DFCCL_K_ALGO_CTREE) &&
                 !dfccl_tree_sends_to(&c->st, ch, q))) {
                continue;
            }
            rc = dfccl_coll_find_peer(ctx, id, q, ch, &dev);
            if (rc <= 0) {
                return rc;
            }
            c->chans[ch].peer[q] = dev;
        }
    }
    for (int ch = 0; ch < c->st.nchannels; ch++) {
        void *dev;
        int rc;

        if (c->chans[ch].send_ctrl != NULL || !dfccl_coll_sends(c, ch)) {
            continue;
        }
        rc = dfccl_coll_find_peer(ctx, id, g->ring_next, ch, &dev);
        if (rc <= 0) {
            return rc;
        }
        c->chans[ch].send_ctrl = dev;
        c->chans[ch].send_data = (char *)dev + sizeof(dfccl_conn_ctrl_t);
    }
    st = c->st.algo == DFCCL_K_ALGO_MSCCL ? dfccl_msccl_resolve(ctx, c) : DFCCL_OK;
    if (st == DFCCL_OK) {
        st = ctx->be->memcpy_h2d(ctx, (void *)&ctx->args.chans[(size_t)id * nb], c->chans,
                                 (size_t)c->st.nchannels * sizeof(dfccl_chan_t));
    }
    if (st != DFCCL_OK) {
        return st;
    }
    c->resolved = 1;
    c->ctx_new  = 1;
    return 1;
}

static void dfccl_coll_free_host(struct dfccl_rank_ctx *ctx, dfccl_coll_t *c)
{
    dfccl_msccl_release(ctx, c);
    if (c->pairs != NULL) {
        ctx->be->dev_free(ctx, c->pairs);
        c->pairs = NULL;
    }
    free(c->pairs_host);
    c->pairs_host = NULL;
    free(c->chans);
    free(c->conn_seg);
    free(c->conn_off);
    free(c->stage);
    c->chans    = NULL;
    c->conn_seg = NULL;
    c->conn_off = NULL;
    c->stage    = NULL;
}

/*
 * The proxy may still read the staging regions of abandoned net channels:
 * they go to the context, which frees them after stopping the proxy. If the
 * list cannot grow, they stay allocated until the process ends.
 */
static void dfccl_coll_keep_stage(struct dfccl_rank_ctx *ctx, dfccl_coll_t *c, int nch)
{
    for (int ch = 0; c->stage != NULL && ch < nch; ch++) {
        void **grown;
        if (c->stage[ch] == NULL) {
            continue;
        }
        grown = realloc(ctx->orphans, (size_t)(ctx->norphans + 1) * sizeof(*grown));
        if (grown != NULL) {
            ctx->orphans                   = grown;
            ctx->orphans[ctx->norphans++] = c->stage[ch];
        }
        c->stage[ch] = NULL;
    }
}

void dfccl_coll_release(struct dfccl_rank_ctx *ctx, int id)
{
    dfccl_coll_t *c = &ctx->colls[id];

    dfccl_coll_free_host(ctx, c);
    free(c->errmsg);
    c->errmsg = NULL;
    if (c->strag) {
        ctx->be->dev_free(ctx, c->strag_ident);
        ctx->be->dev_free(ctx, c->strag_scratch);
        c->strag_ident = c->strag_scratch = NULL;
    }
}

dfccl_status_t dfccl_coll_register(dfccl_group_t g, int kind, size_t count, int dtype, int op,
                                   int root, int priority, const size_t *const *v, int want,
                                   int *coll_id_p)
{
    const char *fn = dfccl_reg_names[kind];
    struct dfccl_rank_ctx *ctx;
    dfccl_coll_t *c;
    dfccl_coll_static_t st;
    dfccl_dyn_t zero[DFCCL_MAX_CHANNELS];
    dfccl_status_t rc = DFCCL_OK;
    size_t region, nb;
    const dfccl_algo_t *algo;
    int id, nch, onch = 1;

    DFCCL_CHECK(dfccl_coll_check_args(g, kind, count, dtype, op, root, coll_id_p));
    if (g->ctx->group_register != NULL) {
        DFCCL_CHECK(g->ctx->group_register(g)); /* DFCCL_PROFILE_EVERY's refresh */
    }
    if (kind == DFCCL_COLL_ALLTOALLV) {
        if (v[0] == NULL && v[1] == NULL && v[2] == NULL && v[3] == NULL) {
            v = NULL; /* every count 0 until a run gives its own */
        } else {
            DFCCL_CHECK(dfccl_coll_check_counts(g, dtype, v, fn));
        }
    }
    ctx = g->ctx;
    nb  = (size_t)ctx->cfg.max_blocks;
    dfccl_algo_ring.plan(&ctx->cfg, g, kind, count, dtype, &nch);

    memset(&st, 0, sizeof(st));
    st.kind         = kind;
    st.dtype        = dtype;
    st.op           = dfccl_has_op(kind) ? op : 0;
    st.nranks       = g->nranks;
    st.rank         = g->rank;
    st.root         = (kind == DFCCL_COLL_REDUCE || kind == DFCCL_COLL_BROADCAST) ? root : 0;
    st.ring_pos     = g->ring_pos;
    st.ring_root    = dfccl_group_ring_pos(g, st.root);
    st.ring_ranks   = g->ring_dev;
    st.priority     = priority;
    st.count        = count;
    st.elem_size    = (uint32_t)dfccl_dtype_bytes(dtype);
    st.registered   = 1;
    st.probe        = dfccl_coll_probe;
    /* the scheduler's look at receive connectors (dfccl_daemon_arrived)
     * is one read of this GPU's memory with p2p, of host memory from a
     * thread on the host backend; across PCIe (shm connectors on GPUs) it
     * would delay every pass, so it is off there */
    st.recv_poll    = ctx->backend == DFCCL_BACKEND_HOST ||
                      (g->pool.transport == DFCCL_TRANSPORT_P2P && !g->prev_net);
    if (want != DFCCL_ALGO_AUTO) {
        dfccl_config_t mine = ctx->cfg;
        mine.algo           = (dfccl_algo_choice_t)want;
        algo                = dfccl_algo_select(&mine, g, kind, count, dtype, op, &onch);
    } else {
        algo = dfccl_algo_select(&ctx->cfg, g, kind, count, dtype, op, &onch);
    }
    st.algo         = algo->id;
    region          = algo->layout(&ctx->cfg, g, onch, &st);
    if (kind == DFCCL_COLL_ALLTOALLV && st.algo != DFCCL_K_ALGO_MESH) {
        return dfccl_coll_no_alltoallv(g, fn);
    }
    if (dfccl_coll_meshed(&st)) {
        st.recv_poll = 0; /* the region's own tail never moves: see its connectors */
    }

    pthread_mutex_lock(&ctx->lock);
    /* One and two shot take n slots per channel where the ring takes one:
     * past the group's connector budget the collective runs on the ring
     * (and may get lean connectors below). Same on every rank, as below. */
    if (st.algo != DFCCL_K_ALGO_RING) {
        if (ctx->cfg.conn_budget != 0 && kind != DFCCL_COLL_ALLTOALLV &&
            g->conn_bytes + (size_t)onch * region > ctx->cfg.conn_budget) {
            st.algo = DFCCL_K_ALGO_RING;
            region  = dfccl_algo_ring.layout(&ctx->cfg, g, nch, &st);
        } else {
            nch = onch;
        }
    }
    /* Past the group's connector budget a collective gets lean connectors.
     * Registrations and deregistrations come in the same order on every
     * rank, so g->conn_bytes, and with it the choice, is the same there. */
    if (g->nranks > 1 && ctx->cfg.conn_budget != 0 && st.algo == DFCCL_K_ALGO_RING &&
        g->conn_bytes + (size_t)nch * region > ctx->cfg.conn_budget) {
        dfccl_coll_static_t lean = st;
        dfccl_config_t lcfg      = ctx->cfg;
        size_t lregion;

        lcfg.nslots      = DFCCL_LEAN_SLOTS;
        lcfg.ll_slots    = DFCCL_LEAN_SLOTS;
        lcfg.step_slices = 1;
        if (lcfg.slot_bytes > DFCCL_LEAN_SLOT_BYTES) {
            lcfg.slot_bytes = DFCCL_LEAN_SLOT_BYTES;
        }
        lregion = dfccl_algo_ring.layout(&lcfg, g,
                                         nch < DFCCL_LEAN_CHANNELS ? nch : DFCCL_LEAN_CHANNELS,
                                         &lean);
        if ((size_t)lean.nchannels * lregion < (size_t)nch * region) {
            if (!g->lean_warned) {
                g->lean_warned = 1;
                dfccl_log_msg(0, __FILE__, __LINE__,
                              "%s on group %s: its connectors (%zu KiB) would take the "
                              "group's connector bytes past DFCCL_CONN_BUDGET=%zu, so it and later "
                              "registrations past the budget get lean connectors (%d "
                              "channel(s), %u-byte slots), which are slower; raise "
                              "DFCCL_CONN_BUDGET (same on every rank) or deregister unused "
                              "collectives", fn, g->name, (size_t)nch * region >> 10,
                              ctx->cfg.conn_budget, lean.nchannels, lean.slot_bytes);
            }
            st     = lean;
            nch    = lean.nchannels;
            region = lregion;
        }
    }
    id = dfccl_coll_find_free(ctx);
    if (id < 0) {
        pthread_mutex_unlock(&ctx->lock);
        return dfccl_error(DFCCL_ERR_NO_MEMORY, "%s on group %s: all %d collective ids are "
                           "registered; dfcclDeregister unused ones or raise DFCCL_MAX_COLLS",
                           fn, g->name, ctx->cfg.max_colls);
    }
    c = &ctx->colls[id];
    memset(c, 0, sizeof(*c));
    c->chans    = calloc((size_t)nch, sizeof(*c->chans));
    c->conn_seg = calloc((size_t)nch, sizeof(*c->conn_seg));
    c->conn_off = calloc((size_t)nch, sizeof(*c->conn_off));
    c->stage    = calloc((size_t)nch, sizeof(*c->stage));
    if (c->chans == NULL || c->conn_seg == NULL || c->conn_off == NULL || c->stage == NULL) {
        rc = dfccl_error(DFCCL_ERR_NO_MEMORY, "%s: out of host memory", fn);
        goto err;
    }
    c->st = st;
    dfccl_coll_make_sig(&st, g->nreg, c->sig);
    /* Our receive connectors: at the same place as every rank's, since all
     * ranks register the group's collectives in the same order. */
    /* progress words: zero, so that no word of an earlier registration of
     * this id carries a run of this one */
    memset(&ctx->progress[(size_t)id * nb], 0, nb * sizeof(uint64_t));
    for (int ch = 0; ch < nch; ch++) {
        dfccl_ring_partition(kind, count, nch, ch, &c->chans[ch].off, &c->chans[ch].cnt);
        c->chans[ch].progress = ctx->args.progress + (size_t)id * nb + (size_t)ch;
        if (g->nranks > 1) {
            void *host, *dev;
            rc = dfccl_pool_alloc(g, region, &host, &dev, &c->conn_seg[ch], &c->conn_off[ch]);
            if (rc == DFCCL_OK &&
                (st.proto == DFCCL_K_PROTO_LL || st.algo == DFCCL_K_ALGO_TWOSHOT ||
                 dfccl_coll_meshed(&st))) {
                /* LL and two-shot flags from an earlier owner of this
                 * memory must not match, nor the counters of the mesh's
                 * connectors start elsewhere than 0: zero the slots
                 * before the signature lets the peers send */
                size_t data = region - sizeof(dfccl_conn_ctrl_t);
                if (host != NULL) {
                    memset((char *)host + sizeof(dfccl_conn_ctrl_t), 0, data);
                } else {
                    rc = ctx->be->dev_zero(ctx, (char *)dev + sizeof(dfccl_conn_ctrl_t), data);
                }
            }
            if (rc == DFCCL_OK) {
                rc = dfccl_coll_write_sig(ctx, host, dev, c->sig);
            }
            if (rc != DFCCL_OK) {
                goto err;
            }
            c->chans[ch].recv_ctrl = dev;
            c->chans[ch].recv_data = (char *)dev + sizeof(dfccl_conn_ctrl_t);
            c->bytes += region;
            c->region = region;
            if (g->prev_net) {
                char *data;
                rc = dfccl_net_chan_add(g, id, ch, 0, host, &st, c->sig, &data);
                if (rc != DFCCL_OK) {
                    goto err;
                }
                if (data != NULL) {
                    c->chans[ch].recv_data = data; /* the net's registered slots */
                }
            }
        }
        if (g->next_net && g->nranks > 1 && dfccl_coll_sends(c, ch)) {
            /* The net send connector: a staging region laid out like a
             * connector, which the daemon fills as if it were the next
             * rank's and the proxy ships. It is this rank's own mapped host
             * memory, outside the group's pool: the pool may be device
             * memory (p2p from the previous rank), which the proxy cannot
             * read, and the pool's layout stays the same on every rank.
             * Where the net keeps the slots in registered memory of its own
             * (DFCCL_NET_MEM), the region here is the ctrl words only. */
            const size_t sbytes = dfccl_net_mem_own(ctx, &st) ? sizeof(dfccl_conn_ctrl_t) : region;
            void *dev;
            char *data;
            rc = ctx->be->host_alloc(ctx, sbytes, &c->stage[ch]);
            if (rc == DFCCL_OK) {
                dev = ctx->be->host_dev_ptr(ctx, c->stage[ch]);
                rc  = dev != NULL ? dfccl_coll_write_sig(ctx, c->stage[ch], dev, c->sig)
                                  : dfccl_error(DFCCL_ERR_INTERNAL, "%s: no device address "
                                                "for the net staging memory", fn);
            }
            if (rc != DFCCL_OK) {
                goto err;
            }
            c->bytes += region;
            c->chans[ch].send_ctrl = dev;
            c->chans[ch].send_data = (char *)dev + sizeof(dfccl_conn_ctrl_t);
            rc = dfccl_net_chan_add(g, id, ch, 1, c->stage[ch], &st, c->sig, &data);
            if (rc != DFCCL_OK) {
                goto err;
            }
            if (data != NULL) {
                c->chans[ch].send_data = data;
            }
        }
    }
    if (st.algo == DFCCL_K_ALGO_MSCCL) {
        rc = dfccl_msccl_setup(ctx, g, c);
        if (rc != DFCCL_OK) {
            goto err;
        }
    }
    if (st.algo == DFCCL_K_ALGO_MESH) {
        rc = dfccl_coll_pairs(ctx, c, v, &c->pairs);
        if (rc != DFCCL_OK) {
            goto err;
        }
        for (int ch = 0; ch < nch; ch++) {
            c->chans[ch].pairs = (const uint64_t *)c->pairs +
                                 (size_t)ch * (size_t)g->nranks * DFCCL_PAIR_WORDS;
        }
    } else if (kind == DFCCL_COLL_ALLTOALL) {
        c->span_send = c->span_recv = count * st.elem_size * (size_t)g->nranks;
    }
    g->nreg++;
    if (g->pool.dir != NULL) {
        dfccl_strag_registered(g, c->sig[6]);
        dfccl_dir_publish_reg(g, c->sig);
        __atomic_store_n(&g->pool.dir->nreg, g->nreg, __ATOMIC_RELEASE);
    }
    memset(zero, 0, sizeof(zero));
    rc = ctx->be->memcpy_h2d(ctx, (void *)&ctx->args.chans[(size_t)id * nb], c->chans,
                             (size_t)nch * sizeof(dfccl_chan_t));
    if (rc == DFCCL_OK) {
        rc = ctx->be->memcpy_h2d(ctx, &ctx->args.dyn[(size_t)id * nb], zero,
                                 nb * sizeof(dfccl_dyn_t));
    }
    if (rc == DFCCL_OK) {
        rc = ctx->be->memcpy_h2d(ctx, (void *)&ctx->args.colls[id], &st, sizeof(st));
    }
    if (rc != DFCCL_OK) {
        goto err;
    }
    c->resolved = g->nranks == 1;
    c->ctx_new  = 1;
    c->group    = g;
    c->ok_send  = NULL;
    c->ok_recv  = NULL;
    c->state    = DFCCL_COLL_IDLE;
    c->status   = DFCCL_OK;
    g->ncolls++;
    if (g->nranks > 1) {
        c->pool_bytes = (size_t)nch * region;
        g->conn_bytes += c->pool_bytes;
    }
    ctx->nregistered++;
    if (!c->resolved) {
        /* often possible already; else at run, which reports what fails */
        dfccl_error_quiet(1);
        dfccl_coll_resolve(ctx, id);
        dfccl_error_quiet(0);
    }
    pthread_mutex_unlock(&ctx->lock);
    dfccl_debug("registered %s id %d: %zu x %s on group %s, %d channel(s), slot %u",
                dfccl_coll_name(kind), id, count, dfccl_dtype_name(dtype), g->name, nch,
                st.slot_bytes);
    *coll_id_p = id;
    return DFCCL_OK;

err:
    /* nothing ran: whatever is not flushed at once is dropped */
    if (dfccl_net_coll_remove(ctx, id, dfccl_time_ns()) != DFCCL_OK) {
        dfccl_coll_keep_stage(ctx, c, nch);
        c->region = 0; /* its memory stays with the abandoned channels */
    }
    for (int ch = 0; c->region != 0 && ch < nch && c->chans != NULL; ch++) {
        if (c->chans[ch].recv_ctrl != NULL) {
            dfccl_pool_free(g, c->conn_seg[ch], c->conn_off[ch], c->region);
        }
        if (c->stage != NULL) {
            ctx->be->host_free(ctx, c->stage[ch]);
        }
    }
    dfccl_coll_free_host(ctx, c);
    c->state = DFCCL_COLL_FREE;
    pthread_mutex_unlock(&ctx->lock);
    return rc;
}

dfccl_status_t dfcclRegisterAllReduce(size_t count, dfccl_datatype_t type, dfccl_op_t op,
                                      dfccl_group_t group, int priority, int *coll_id_p)
{
    const dfccl_coll_desc_t d = {.kind     = DFCCL_KIND_ALLREDUCE,
                                 .count    = count,
                                 .type     = type,
                                 .op       = op,
                                 .priority = priority,
                                 .algo     = DFCCL_ALGO_AUTO};

    return dfcclRegister(&d, group, coll_id_p); /* DFCCL_STRAGGLER applies */
}

dfccl_status_t dfcclRegisterAllGather(size_t sendcount, dfccl_datatype_t type,
                                      dfccl_group_t group, int priority, int *coll_id_p)
{
    return dfccl_coll_register(group, DFCCL_COLL_ALLGATHER, sendcount, type, 0, 0, priority,
                               NULL, DFCCL_ALGO_AUTO, coll_id_p);
}

dfccl_status_t dfcclRegisterReduceScatter(size_t recvcount, dfccl_datatype_t type,
                                          dfccl_op_t op, dfccl_group_t group, int priority,
                                          int *coll_id_p)
{
    return dfccl_coll_register(group, DFCCL_COLL_REDUCESCATTER, recvcount, type, op, 0,
                               priority, NULL, DFCCL_ALGO_AUTO, coll_id_p);
}

dfccl_status_t dfcclRegisterReduce(size_t count, dfccl_datatype_t type, dfccl_op_t op,
                                   int root, dfccl_group_t group, int priority, int *coll_id_p)
{
    return dfccl_coll_register(group, DFCCL_COLL_REDUCE, count, type, op, root, priority,
                               NULL, DFCCL_ALGO_AUTO, coll_id_p);
}

dfccl_status_t dfcclRegisterBroadcast(size_t count, dfccl_datatype_t type, int root,
                                      dfccl_group_t group, int priority, int *coll_id_p)
{
    return dfccl_coll_register(group, DFCCL_COLL_BROADCAST, count, type, 0, root, priority,
                               NULL, DFCCL_ALGO_AUTO, coll_id_p);
}

dfccl_status_t dfcclGroupSupports(dfccl_group_t g, int kind)
{
    int nch;
    dfccl_status_t st;

    if (g == NULL || kind < 0 || kind >= DFCCL_COLL_KIND_COUNT) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclGroupSupports: %s",
                           g == NULL ? "group is NULL" : "kind is not a dfccl_coll_kind_t");
    }
    if (kind != DFCCL_COLL_ALLTOALLV ||
        dfccl_algo_mesh.plan(&g->ctx->cfg, g, kind, 0, DFCCL_UINT8, &nch)) {
        return DFCCL_OK;
    }
    dfccl_error_quiet(1);
    st = dfccl_coll_no_alltoallv(g, "dfcclRegisterAllToAllv");
    dfccl_error_quiet(0);
    return st;
}

dfccl_status_t dfcclRegisterAllToAll(size_t count, dfccl_datatype_t type, dfccl_group_t group,
                                     int priority, int *coll_id_p)
{
    return dfccl_coll_register(group, DFCCL_COLL_ALLTOALL, count, type, 0, 0, priority, NULL,
                               DFCCL_ALGO_AUTO, coll_id_p);
}

dfccl_status_t dfcclRegisterAllToAllv(const size_t *sendcounts, const size_t *sdispls,
                                      const size_t *recvcounts, const size_t *rdispls,
                                      dfccl_datatype_t type, dfccl_group_t group, int priority,
                                      int *coll_id_p)
{
    const size_t *const v[4] = {sendcounts, sdispls, recvcounts, rdispls};

    return dfccl_coll_register(group, DFCCL_COLL_ALLTOALLV, 0, type, 0, 0, priority, v,
                               DFCCL_ALGO_AUTO, coll_id_p);
}

_Static_assert((int)DFCCL_KIND_ALLREDUCE == (int)DFCCL_COLL_ALLREDUCE &&
                   (int)DFCCL_KIND_ALLGATHER == (int)DFCCL_COLL_ALLGATHER &&
                   (int)DFCCL_KIND_REDUCESCATTER == (int)DFCCL_COLL_REDUCESCATTER &&
                   (int)DFCCL_KIND_REDUCE == (int)DFCCL_COLL_REDUCE &&
                   (int)DFCCL_KIND_BROADCAST == (int)DFCCL_COLL_BROADCAST &&
                   (int)DFCCL_KIND_ALLTOALL == (int)DFCCL_COLL_ALLTOALL &&
                   (int)DFCCL_KIND_ALLTOALLV == (int)DFCCL_COLL_ALLTOALLV &&
                   (int)DFCCL_KIND_COUNT == (int)DFCCL_COLL_KIND_COUNT,
               "the public collective kinds are the daemon's");

/*
 * A straggler-tolerant allreduce (DFCCL_COLL_STRAGGLER): the user's
 * registration, which runs every run (in one phase, or as phase 2), then
 * right after it on every rank its partner for phase 1 (the same op; sum
 * for avg, so that phase 2's avg divides the sum of both phases once),
 * and the buffers of the op's identity and of a relay's output.
 */
static dfccl_status_t dfccl_coll_register_strag(const dfccl_coll_desc_t *d, dfccl_group_t g,
                                                int *coll_id_p)
{
    const size_t bytes = d->count * dfccl_dtype_bytes(d->type);
    struct dfccl_rank_ctx *ctx;
    void *host = NULL, *ident = NULL, *scratch = NULL;
    const char *why;
    dfccl_coll_t *c, *p;
    dfccl_status_t st;
    int id, pid;

    if (g == NULL || coll_id_p == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclRegister: group and coll_id_p must "
                           "not be NULL");
    }
    if (d->kind != DFCCL_KIND_ALLREDUCE) {
        return dfccl_error(DFCCL_ERR_UNSUPPORTED, "dfcclRegister on group %s: "
                           "DFCCL_COLL_STRAGGLER is for allreduces only, not %s; register it "
                           "without the flag", g->name, dfccl_coll_name((int)d->kind));
    }
    if ((unsigned)d->op >= DFCCL_OP_COUNT) {
        return dfccl_error(DFCCL_ERR_UNSUPPORTED, "dfcclRegister on group %s: "
                           "DFCCL_COLL_STRAGGLER needs an op with an identity element: sum, "
                           "prod, min, max or avg, not %d", g->name, (int)d->op);
    }
    why = g->nranks > 1 ? dfccl_strag_unfit(g) : NULL;
    if (why != NULL) {
        return dfccl_error(DFCCL_ERR_UNSUPPORTED, "dfcclRegister on group %s: "
                           "DFCCL_COLL_STRAGGLER is not available there: %s; register it "
                           "without the flag", g->name, why);
    }
    DFCCL_CHECK(dfccl_coll_register(g, DFCCL_COLL_ALLREDUCE, d->count, d->type, d->op, 0,
                                    d->priority, NULL, (int)d->algo, &id));
    if (g->nranks == 1 || bytes == 0) {
        *coll_id_p = id; /* nobody can be late, or there is nothing to wait for */
        return DFCCL_OK;
    }
    ctx = g->ctx;
    st  = dfccl_coll_register(g, DFCCL_COLL_ALLREDUCE, d->count, d->type,
                              d->op == DFCCL_AVG ? DFCCL_SUM : d->op, 0, d->priority, NULL,
                              (int)d->algo, &pid);
    if (st != DFCCL_OK) {
        goto err_user;
    }
    host = malloc(bytes);
    if (host == NULL) {
        st = dfccl_error(DFCCL_ERR_NO_MEMORY, "dfcclRegister: out of host memory");
        goto err_peer;
    }
    dfccl_strag_identity(d->op, d->type, d->count, host);
    st = ctx->be->dev_alloc(ctx, bytes, &ident);
    if (st == DFCCL_OK) {
        st = ctx->be->dev_alloc(ctx, bytes, &scratch);
    }
    if (st == DFCCL_OK) {
        st = ctx->be->memcpy_h2d(ctx, ident, host, bytes);
    }
    free(host);
    if (st != DFCCL_OK) {
        goto err_mem;
    }
    pthread_mutex_lock(&ctx->lock);
    c                 = &ctx->colls[id];
    p                 = &ctx->colls[pid];
    c->strag          = 1;
    c->strag_peer     = pid;
    c->strag_ident    = ident;
    c->strag_scratch  = scratch;
    c->strag_wait_fixed = d->straggler_wait_us != 0;
    c->strag_opt        = d->op != DFCCL_AVG;
    c->strag_model_us   = dfccl_strag_wait_us(&ctx->cfg, g, dfccl_algo_by_id(c->st.algo),
                                              d->count, d->type, (int)c->st.nchannels);
    c->strag_wait_us    = d->straggler_wait_us != 0 ? d->straggler_wait_us
                                                    : (uint32_t)c->strag_model_us;
    p->strag_internal = 1;
    p->strag_peer     = id;
    ctx->nstrag++;
    pthread_mutex_unlock(&ctx->lock);
    dfccl_debug("collective %d on group %s is straggler-tolerant: phase 1 on %d, wait %u us",
                id, g->name, pid, c->strag_wait_us);
    *coll_id_p = id;
    return DFCCL_OK;

err_mem:
    if (scratch != NULL) {
        ctx->be->dev_free(ctx, scratch);
    }
    if (ident != NULL) {
        ctx->be->dev_free(ctx, ident);
    }
err_peer:
    dfcclDeregister(pid, ctx);
err_user:
    dfcclDeregister(id, g->ctx);
    return st;
}

dfccl_status_t dfcclRegister(const dfccl_coll_desc_t *desc, dfccl_group_t group,
                             int *coll_id_p)
{
    dfccl_coll_desc_t d;

    if (desc == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclRegister: desc is NULL");
    }
    if ((unsigned)desc->kind >= DFCCL_KIND_COUNT) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclRegister: collective kind %d is not "
                           "one of dfccl_coll_kind_t", (int)desc->kind);
    }
    if ((unsigned)desc->algo > (unsigned)DFCCL_ALGO_CTREE) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclRegister: algorithm %d is not one of "
                           "dfccl_algo_choice_t (DFCCL_ALGO_AUTO to DFCCL_ALGO_CTREE); leave "
                           "it 0 for the configuration's", (int)desc->algo);
    }
    if (desc->kind == DFCCL_KIND_ALLTOALLV) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclRegister: an alltoallv takes counts "
                           "and displacements per rank, which dfccl_coll_desc_t cannot hold; "
                           "register it with dfcclRegisterAllToAllv");
    }
    if ((desc->flags & ~DFCCL_COLL_STRAGGLER) != 0) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclRegister: flags 0x%x are not "
                           "DFCCL_COLL_* flags", desc->flags & ~DFCCL_COLL_STRAGGLER);
    }
    d = *desc;
    if (dfccl_strag_want(&d, group)) {
        return dfccl_coll_register_strag(&d, group, coll_id_p);
    }
    return dfccl_coll_register(group, (int)desc->kind, desc->count, desc->type,
                               dfccl_has_op((int)desc->kind) ? desc->op : 0,
                               desc->kind == DFCCL_KIND_REDUCE ||
                                       desc->kind == DFCCL_KIND_BROADCAST
                                   ? desc->root
                                   : 0,
                               desc->priority, NULL, (int)desc->algo, coll_id_p);
}

/*
 * Collective `coll_id` of `ctx` in *c_p, called with ctx->lock held. An id
 * that is not registered, or is the internal phase 1 of a straggler-tolerant
 * one, releases the lock and fails with the error of the
 * API call `fn` (`hint` completes its message).
 */
static dfccl_status_t dfccl_coll_lookup(dfccl_rank_ctx_t ctx, int coll_id, const char *fn,
                                        const char *hint, dfccl_coll_t **c_p)
{
    *c_p = NULL;
    if (coll_id < 0 || coll_id >= ctx->cfg.max_colls ||
        ctx->colls[coll_id].state == DFCCL_COLL_FREE) {
        pthread_mutex_unlock(&ctx->lock);
        return dfccl_error(DFCCL_ERR_NOT_FOUND, "%s: collective id %d is not registered on "
                           "this rank context%s", fn, coll_id, hint);
    }
    if (ctx->colls[coll_id].strag_internal) {
        pthread_mutex_unlock(&ctx->lock);
        return dfccl_error(DFCCL_ERR_NOT_FOUND, "%s: collective id %d is phase 1 of "
                           "straggler-tolerant collective %d, not one of the caller's; use "
                           "that one", fn, coll_id, ctx->colls[coll_id].strag_peer);
    }
    *c_p = &ctx->colls[coll_id];
    return DFCCL_OK;
}

dfccl_status_t dfcclGetCollInfo(int coll_id, dfccl_rank_ctx_t ctx, dfccl_coll_info_t *info_p)
{
    dfccl_coll_t *c;
    dfccl_coll_info_t info;
    dfccl_status_t st;

    if (ctx == NULL || info_p == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclGetCollInfo: ctx and info_p must not "
                           "be NULL");
    }
    pthread_mutex_lock(&ctx->lock);
    st = dfccl_coll_lookup(ctx, coll_id, "dfcclGetCollInfo", "", &c);
    if (st != DFCCL_OK) {
        return st;
    }
    info.algo      = c->st.algo == DFCCL_K_ALGO_MSCCL ? c->ms_name
                                                      : dfccl_algo_by_id(c->st.algo)->name;
    info.nchannels = (int)c->st.nchannels;
    info.proto     = c->st.proto == DFCCL_K_PROTO_LL ? "ll" : "simple";
    info.excluded  = __builtin_popcountll(c->group->excl_mask);
    info.straggler = c->strag;
    info.straggler_wait_us = c->strag_wait_us;
    info.split_runs        = c->strag_splits;
    pthread_mutex_unlock(&ctx->lock);
    *info_p = info;
    return DFCCL_OK;
}

/* dfcclDeregister of one registration (ctx->lock held, released). */
static dfccl_status_t dfccl_coll_deregister(dfccl_rank_ctx_t ctx, int coll_id, dfccl_coll_t *c)
{
    dfccl_coll_static_t zero;
    dfccl_status_t st = DFCCL_OK, nst;

    if (c->state == DFCCL_COLL_INFLIGHT || c->state == DFCCL_COLL_CLOSING ||
        c->state == DFCCL_COLL_COMPLETING) {
        pthread_mutex_unlock(&ctx->lock);
        return dfccl_error(DFCCL_ERR_BUSY, "dfcclDeregister: collective %d (%s on group %s) is "
                           "%s", coll_id, dfccl_coll_name(c->st.kind), c->group->name,
                           c->state == DFCCL_COLL_CLOSING ?
                               "being deregistered by another thread" :
                               "in flight; wait for it first");
    }
    memset(&zero, 0, sizeof(zero));
    if (!ctx->device_lost) { /* else the daemon's copy is gone with the device */
        st = ctx->be->memcpy_h2d(ctx, (void *)&ctx->args.colls[coll_id], &zero, sizeof(zero));
    }
    if (c->deferred) {
        c->deferred = 0;
        ctx->ndeferred--;
    }
    /* net: the proxy ships what the daemon published before the staging
     * region goes. That can take as long as the next rank takes to run the
     * collective, so the wait holds no context lock: the poller's health
     * checks and dfcclAbort still work meanwhile. */
    c->state = DFCCL_COLL_CLOSING;
    pthread_mutex_unlock(&ctx->lock);
    nst = dfccl_net_coll_remove(ctx, coll_id, dfccl_coll_flush_ns != 0 ? dfccl_coll_flush_ns
                                                                        : dfccl_net_deadline(ctx));
    pthread_mutex_lock(&ctx->lock);
    if (nst != DFCCL_OK) {
        /* the proxy may still read the regions: they stay allocated */
        if (nst == DFCCL_ERR_ABORTED) {
            st = dfccl_error(nst, "dfcclDeregister: collective %d (%s on group %s): the rank "
                             "context was aborted while the net transport still held its "
                             "data; it is deregistered, but its connector memory stays "
                             "allocated until the context is destroyed", coll_id,
                             dfccl_coll_name(c->st.kind), c->group->name);
        } else {
            st = dfccl_error(nst, "dfcclDeregister: collective %d (%s on group %s): its last "
                             "data did not reach the next rank within %g s (DFCCL_TIMEOUT); it "
                             "is deregistered, but its connector memory stays allocated until "
                             "the context is destroyed", coll_id, dfccl_coll_name(c->st.kind),
                             c->group->name, ctx->cfg.timeout_s);
        }
        dfccl_coll_keep_stage(ctx, c, c->st.nchannels);
        c->region = 0;
    }
    for (int ch = 0; c->region != 0 && ch < c->st.nchannels; ch++) {
        dfccl_status_t fst = dfccl_pool_free(c->group, c->conn_seg[ch], c->conn_off[ch],
                                             c->region);
        if (st == DFCCL_OK) {
            st = fst;
        }
        ctx->be->host_free(ctx, c->stage[ch]);
    }
    c->group->ncolls--;
    c->group->conn_bytes -= c->pool_bytes;
    ctx->nregistered--;
    dfccl_coll_free_host(ctx, c);
    free(c->errmsg);
    memset(c, 0, sizeof(*c));
    c->state = DFCCL_COLL_FREE;
    pthread_mutex_unlock(&ctx->lock);
    return st;
}

/* Wait until phase-1 collective `pid` (every one: -1) runs no relay, the
 * context aborts or DFCCL_TIMEOUT passes. ctx->lock held (released
 * meanwhile). */
static void dfccl_coll_strag_drain(dfccl_rank_ctx_t ctx, int pid)
{
    const uint64_t deadline = dfccl_time_ns() + (uint64_t)(ctx->cfg.timeout_s * 1e9);

    for (;;) {
        int busy = 0;

        for (int id = pid < 0 ? 0 : pid; id < (pid < 0 ? ctx->cfg.max_colls : pid + 1); id++) {
            const dfccl_coll_t *p = &ctx->colls[id];
            busy |= p->strag_internal && (p->state == DFCCL_COLL_INFLIGHT ||
                                          p->state == DFCCL_COLL_COMPLETING);
        }
        if (!busy || ctx->aborted ||
            (ctx->cfg.timeout_s > 0 && dfccl_time_ns() > deadline)) {
            return;
        }
        pthread_mutex_unlock(&ctx->lock);
        if (dfccl_ctx_progress(ctx) == 0) {
            sched_yield();
        }
        pthread_mutex_lock(&ctx->lock);
    }
}

void dfccl_coll_strag_settle(struct dfccl_rank_ctx *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    if (ctx->nstrag > 0) {
        dfccl_coll_strag_drain(ctx, -1);
    }
    pthread_mutex_unlock(&ctx->lock);
}

dfccl_status_t dfcclDeregister(int coll_id, dfccl_rank_ctx_t ctx)
{
    dfccl_coll_t *c;
    dfccl_status_t st, pst;
    void *ident, *scratch;
    int pid;

    if (ctx == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclDeregister: ctx is NULL");
    }
    (void)dfccl_ctx_device_lost(ctx);
    pthread_mutex_lock(&ctx->lock);
    st = dfccl_coll_lookup(ctx, coll_id, "dfcclDeregister", "", &c);
    if (st != DFCCL_OK) {
        return st;
    }
    if (!c->strag) {
        return dfccl_coll_deregister(ctx, coll_id, c);
    }
    /* a straggler-tolerant one: its partner too, once a relay it runs
     * for a late run of ours has completed (it needs no run of ours) */
    pid     = c->strag_peer;
    ident   = c->strag_ident;
    scratch = c->strag_scratch;
    st      = dfccl_coll_deregister(ctx, coll_id, c);
    pthread_mutex_lock(&ctx->lock);
    if (c->state != DFCCL_COLL_FREE) {
        pthread_mutex_unlock(&ctx->lock);
        return st; /* in flight: nothing changed */
    }
    ctx->nstrag--;
    dfccl_coll_strag_drain(ctx, pid);
    pst = dfccl_coll_deregister(ctx, pid, &ctx->colls[pid]);
    if (st == DFCCL_OK) {
        st = pst;
    }
    if (st == DFCCL_OK || ctx->colls[pid].state == DFCCL_COLL_FREE) {
        ctx->be->dev_free(ctx, ident);
        ctx->be->dev_free(ctx, scratch);
    }
    return st;
}

static int dfccl_coll_strag_step(struct dfccl_rank_ctx *ctx, int id);
static void dfccl_coll_strag_done(int id, dfccl_status_t status, void *arg);

/* A run; v: an alltoallv's counts for it (dfcclRunAllToAllvCounts), or
 * NULL. */
static dfccl_status_t dfccl_coll_run(int kind, const void *sendbuff, void *recvbuff,
                                     int coll_id, dfccl_callback_t callback, void *arg,
                                     dfccl_rank_ctx_t ctx, const size_t *const *v)
{
    const char *fn = v != NULL ? "dfcclRunAllToAllvCounts"
                     : kind < 0 ? "dfcclRun" : dfccl_run_names[kind];
    dfccl_coll_t *c;
    int need_send, need_recv, resolved;
    dfccl_status_t st;

    if (ctx == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "%s: ctx is NULL", fn);
    }
    pthread_mutex_lock(&ctx->lock);
    /* an exclusion registers it again on the survivors: a moment */
    while (ctx->fault_held != NULL && coll_id >= 0 && coll_id < ctx->cfg.max_colls &&
           ctx->fault_held[coll_id] == 1) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 1000000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&ctx->cond, &ctx->lock, &ts);
    }
    st = dfccl_coll_lookup(ctx, coll_id, fn, "; use the id returned by dfcclRegister*", &c);
    if (st != DFCCL_OK) {
        return st;
    }
    if (kind < 0) {
        kind = (int)c->st.kind;
    } else if (c->st.kind != kind) {
        pthread_mutex_unlock(&ctx->lock);
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "%s: collective id %d on group %s was "
                           "registered as %s; run it with %s", fn, coll_id, c->group->name,
                           dfccl_coll_name(c->st.kind), dfccl_run_names[c->st.kind]);
    }
    if (ctx->aborted) {
        pthread_mutex_unlock(&ctx->lock);
        return dfccl_error(DFCCL_ERR_ABORTED, "%s: the rank context was aborted; destroy it",
                           fn);
    }
    if (ctx->fault_held != NULL && ctx->fault_held[coll_id] == 2) {
        ctx->fault_held[coll_id] = 0; /* the exclusion runs it again */
    }
    if (c->state == DFCCL_COLL_INFLIGHT) {
        pthread_mutex_unlock(&ctx->lock);
        return dfccl_error(DFCCL_ERR_BUSY, "%s: collective %d (%s of %llu %s on group %s) is "
                           "still in flight; wait for its completion before running it again, "
                           "or register a second one", fn, coll_id, dfccl_coll_name(kind),
                           (unsigned long long)c->st.count, dfccl_dtype_name(c->st.dtype),
                           c->group->name);
    }
    if (c->state == DFCCL_COLL_CLOSING) {
        pthread_mutex_unlock(&ctx->lock);
        return dfccl_error(DFCCL_ERR_BUSY, "%s: collective %d (%s on group %s) is being "
                           "deregistered by another thread", fn, coll_id,
                           dfccl_coll_name(kind), c->group->name);
    }
    if (v != NULL) {
        st = dfccl_coll_run_counts(ctx, c, v, fn);
        if (st != DFCCL_OK) {
            pthread_mutex_unlock(&ctx->lock);
            return st;
        }
    }
    need_send = c->st.count > 0 &&
                !(kind == DFCCL_COLL_BROADCAST && c->st.rank != c->st.root);
    need_recv = c->st.count > 0 && !(kind == DFCCL_COLL_REDUCE && c->st.rank != c->st.root);
    if (kind == DFCCL_COLL_ALLTOALL || kind == DFCCL_COLL_ALLTOALLV) {
        const char *s = sendbuff, *r = recvbuff;

        need_send = c->span_send > 0;
        need_recv = c->span_recv > 0;
        /* a block is sent after blocks are received, wherever they are */
        if (need_send && need_recv && s != NULL && r != NULL && s < r + c->span_recv &&
            r < s + c->span_send) {
            pthread_mutex_unlock(&ctx->lock);
            return dfccl_error(DFCCL_ERR_INVALID_ARG, "%s: collective %d (%s on group %s): "
                               "the send buffer %p (%zu bytes) and the receive buffer %p "
                               "(%zu bytes) overlap; an all-to-all in place needs its input "
                               "copied aside first", fn, coll_id, dfccl_coll_name(kind),
                               c->group->name, sendbuff, c->span_send, recvbuff,
                               c->span_recv);
        }
    }
    if (need_send && sendbuff != NULL && sendbuff == c->ok_send) {
        need_send = 0;
    }
    if (need_recv && recvbuff != NULL && (void *)recvbuff == c->ok_recv) {
        need_recv = 0;
    }
    if ((need_send && (sendbuff == NULL || !ctx->be->buffer_ok(ctx, sendbuff))) ||
        (need_recv && (recvbuff == NULL || !ctx->be->buffer_ok(ctx, recvbuff)))) {
        pthread_mutex_unlock(&ctx->lock);
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "%s: collective %d (%s of %llu %s on group "
                           "%s): %s buffer %p is NULL or not %s memory; pass %s buffers of "
                           "the registered size", fn, coll_id, dfccl_coll_name(kind),
                           (unsigned long long)c->st.count, dfccl_dtype_name(c->st.dtype),
                           c->group->name,
                           (need_send && (sendbuff == NULL || !ctx->be->buffer_ok(ctx, sendbuff)))
                               ? "send" : "receive",
                           (need_send && (sendbuff == NULL || !ctx->be->buffer_ok(ctx, sendbuff)))
                               ? sendbuff : (const void *)recvbuff,
                           ctx->backend == DFCCL_BACKEND_HOST ? "host" : "device",
                           ctx->backend == DFCCL_BACKEND_HOST ? "host" : "device");
    }
    if (need_send) {
        c->ok_send = sendbuff;
    }
    if (need_recv) {
        c->ok_recv = recvbuff;
    }
    resolved = dfccl_coll_resolve(ctx, coll_id);
    if (resolved < 0) {
        pthread_mutex_unlock(&ctx->lock);
        return (dfccl_status_t)resolved;
    }
    free(c->errmsg);
    c->errmsg       = NULL;
    c->callback     = callback;
    c->callback_arg = arg;
    c->state        = DFCCL_COLL_INFLIGHT;
    c->start_ns     = dfccl_time_ns();
    c->runs++;
    ctx->inflight++;
    ctx->submitted++;
    c->pend_send = sendbuff;
    c->pend_recv = recvbuff;
    if (c->group->fault_state != DFCCL_GFAULT_NONE) {
        /* its group is excluding a rank: it runs on the survivors */
        c->fault = DFCCL_CFAULT_HELD;
        pthread_mutex_unlock(&ctx->lock);
        return DFCCL_OK;
    }
    if (c->group->pool.dir != NULL) {
        /* for the diagnosis of a timeout on any rank: we joined this run */
        __atomic_store_n(&c->group->pool.dir->runs[c->sig[6] % DFCCL_DIR_RUNS], c->runs,
                         __ATOMIC_RELEASE);
    }
    if (c->strag) {
        /* Straggler-tolerant: wait for the others, at most its wait, then
         * go in one phase or two (dfccl_coll_strag_step, on the progress
         * path: dfcclRun* returns at once). The last rank to arrive, or
         * one that finds the run decided, goes at once from here. */
        c->strag_phase    = DFCCL_STRAG_WAIT;
        c->strag_user_cb  = callback;
        c->strag_user_arg = arg;
        c->callback       = dfccl_coll_strag_done;
        c->callback_arg   = ctx;
        c->deferred       = 1;
        c->pend_send   = sendbuff;
        c->pend_recv   = recvbuff;
        ctx->ndeferred++;
        dfccl_coll_strag_step(ctx, coll_id); /* an error: the progress path's */
        pthread_mutex_unlock(&ctx->lock);
        dfccl_ctx_kick(ctx);
        return DFCCL_OK;
    }
    if (!resolved) {
        /* The next rank has not registered it yet: submit once it has. */
        c->deferred  = 1;
        ctx->ndeferred++;
        pthread_mutex_unlock(&ctx->lock);
        dfccl_ctx_kick(ctx);
        return DFCCL_OK;
    }
    st = dfccl_ctx_submit(ctx, DFCCL_SQE_RUN, coll_id, sendbuff, recvbuff);
    if (st != DFCCL_OK && ctx->launches == 0) {
        /* Nothing reached the daemon: undo. */
        c->state = DFCCL_COLL_IDLE;
        ctx->inflight--;
    }
    pthread_mutex_unlock(&ctx->lock);
    return st;
}

dfccl_status_t dfcclRun(const void *sendbuff, void *recvbuff, int coll_id,
                        dfccl_callback_t callback, void *callback_args, dfccl_rank_ctx_t ctx)
{
    return dfccl_coll_run(-1, sendbuff, recvbuff, coll_id, callback, callback_args, ctx, NULL);
}

/* The named runs: dfcclRun that checks the kind too. */
#define DFCCL_RUN_NAMED(_name, _kind)                                                            \
    dfccl_status_t dfcclRun##_name(const void *sendbuff, void *recvbuff, int coll_id,             \
                                   dfccl_callback_t callback, void *callback_args,                \
                                   dfccl_rank_ctx_t ctx)                                          \
    {                                                                                            \
        return dfccl_coll_run(_kind, sendbuff, recvbuff, coll_id, callback, callback_args, ctx,  \
                              NULL);                                                             \
    }

DFCCL_RUN_NAMED(AllReduce, DFCCL_COLL_ALLREDUCE)
DFCCL_RUN_NAMED(AllGather, DFCCL_COLL_ALLGATHER)
DFCCL_RUN_NAMED(ReduceScatter, DFCCL_COLL_REDUCESCATTER)
DFCCL_RUN_NAMED(Reduce, DFCCL_COLL_REDUCE)
DFCCL_RUN_NAMED(Broadcast, DFCCL_COLL_BROADCAST)
DFCCL_RUN_NAMED(AllToAll, DFCCL_COLL_ALLTOALL)
DFCCL_RUN_NAMED(AllToAllv, DFCCL_COLL_ALLTOALLV)

dfccl_status_t dfcclRunAllToAllvCounts(const void *sendbuff, const size_t *sendcounts,
                                       const size_t *sdispls, void *recvbuff,
                                       const size_t *recvcounts, const size_t *rdispls,
                                       int coll_id, dfccl_callback_t callback,
                                       void *callback_args, dfccl_rank_ctx_t ctx)
{
    const size_t *const v[4] = {sendcounts, sdispls, recvcounts, rdispls};

    return dfccl_coll_run(DFCCL_COLL_ALLTOALLV, sendbuff, recvbuff, coll_id, callback,
                          callback_args, ctx, v);
}

/*
 * Straggler tolerance (docs/stragglers.md; the shared decision is
 * straggler.c's). A run of a straggler-tolerant collective c waits on the
 * progress path for every rank to start it, at most c->strag_wait_us.
 * Then, with the late ranks agreed:
 *   - nobody late: c runs, once, as any collective;
 *   - an early rank runs phase 1 on the partner p with its data; when p
 *     completes, phase 2 runs on c: the lowest early rank contributes
 *     phase 1's result (in place), the other early ranks the identity;
 *   - a late rank's runtime has run p already for it, with the identity
 *     (a relay, dfccl_coll_strag_poll), or runs it now; its own data
 *     goes into phase 2 on c, submitted at once.
 * Phase 2's result, on every rank, is the full reduction. Both phases are
 * ordinary runs of registered collectives, in the same order on every
 * rank (p then c), so the daemon may interleave them with anything.
 */

/* Phase 1 of a run on partner `pid` (ctx->lock held). */
static void dfccl_coll_strag_p1_done(int pid, dfccl_status_t status, void *arg);

static dfccl_status_t dfccl_coll_strag_p1(struct dfccl_rank_ctx *ctx, int pid,
                                          const void *sendbuff, void *recvbuff)
{
    dfccl_coll_t *p = &ctx->colls[pid];
    dfccl_status_t st;

    free(p->errmsg);
    p->errmsg       = NULL;
    p->callback     = dfccl_coll_strag_p1_done;
    p->callback_arg = ctx;
    p->state        = DFCCL_COLL_INFLIGHT;
    p->start_ns     = dfccl_time_ns();
    p->runs++;
    ctx->inflight++;
    if (p->group->pool.dir != NULL) {
        __atomic_store_n(&p->group->pool.dir->runs[p->sig[6] % DFCCL_DIR_RUNS], p->runs,
                         __ATOMIC_RELEASE);
    }
    st = dfccl_ctx_submit(ctx, DFCCL_SQE_RUN, pid, sendbuff, recvbuff);
    if (st != DFCCL_OK && ctx->launches == 0) {
        p->state = DFCCL_COLL_IDLE;
        ctx->inflight--;
        return st;
    }
    return DFCCL_OK;
}

/* Submit the run of c that waited (one phase, or phase 2), with
 * `sendbuff`. ctx->lock held. */
static int dfccl_coll_strag_go(struct dfccl_rank_ctx *ctx, int id, const void *sendbuff)
{
    dfccl_coll_t *c = &ctx->colls[id];

    /* a run that every rank has started (one phase, or phase 2 on a late
     * rank) takes about a run's time from here: it refines the wait */
    c->strag_go_ns = c->strag_phase == DFCCL_STRAG_ONE || (c->strag_late >> c->group->rank) & 1
                         ? dfccl_time_ns()
                         : 0;
    c->deferred = 0;
    ctx->ndeferred--;
    dfccl_ctx_submit(ctx, DFCCL_SQE_RUN, id, sendbuff, c->pend_recv);
    return 1;
}

/* The wait of c's current run (ns): fixed by the registration, else twice
 * the group's latest measured run time, else the model's. ctx->lock held. */
static uint64_t dfccl_coll_strag_wait_ns(dfccl_coll_t *c)
{
    if (!c->strag_wait_fixed) {
        double est = dfccl_strag_est_get(c->group, c->sig[6]);
        double w;

        if (est <= 0) {
            est = c->strag_est_us;
        }
        w = est > 0 ? 2.0 * est : c->strag_model_us;
        c->strag_wait_us = w < 1.0 ? 1u : w > 1e9 ? 1000000000u : (uint32_t)w;
    }
    return (uint64_t)c->strag_wait_us * 1000ull;
}

/*
 * The end of a run of straggler-tolerant c (its callback slot): the wait
 * follows the run's measured time, then the caller's callback runs. The
 * ski-rental price is the time of two runs; the model's (at registration)
 * stands until a run has been measured here, and an average of the last
 * runs (weights 1/4) from then on: what a run costs under this machine's
 * load, which the model does not know.
 */
static void dfccl_coll_strag_done(int id, dfccl_status_t status, void *arg)
{
    struct dfccl_rank_ctx *ctx = arg;
    dfccl_coll_t *c            = &ctx->colls[id];
    dfccl_callback_t cb;
    void *uarg;

    pthread_mutex_lock(&ctx->lock);
    cb   = c->strag_user_cb;
    uarg = c->strag_user_arg;
    if (status == DFCCL_OK && c->strag_go_ns != 0) {
        const double us = (double)dfccl_since(dfccl_time_ns(), c->strag_go_ns) / 1e3;

        c->strag_est_us = c->strag_est_us > 0 ? 0.75 * c->strag_est_us + 0.25 * us : us;
        /* for every rank of the group: the ranks that wait are seldom
         * the ones that measure (the last to arrive) */
        dfccl_strag_est_put(c->group, c->sig[6], c->strag_est_us);
    }
    c->strag_go_ns = 0;
    pthread_mutex_unlock(&ctx->lock);
    if (cb != NULL) {
        cb(id, status, uarg);
    }
}

/* The partner's completion: on an early rank, phase 2 follows. */
static void dfccl_coll_strag_p1_done(int pid, dfccl_status_t status, void *arg)
{
    struct dfccl_rank_ctx *ctx = arg;
    dfccl_coll_t *p            = &ctx->colls[pid];
    dfccl_coll_t *c;
    int id, first = 0;

    pthread_mutex_lock(&ctx->lock);
    id = p->strag_peer;
    c  = &ctx->colls[id];
    if (!c->strag || c->state != DFCCL_COLL_INFLIGHT || !c->deferred ||
        c->strag_phase != DFCCL_STRAG_P1) {
        pthread_mutex_unlock(&ctx->lock); /* a relay's end, or c failed meanwhile */
        return;
    }
    if (status == DFCCL_OK && c->strag_opt) {
        /* optimistic: p ran with the data of every rank that committed;
         * the run is decided by now (the late ranks relay only once it
         * is, and with nobody late the last to commit decided) */
        const int64_t late = dfccl_strag_decide(c->group, c->sig[6], c->runs, 0, 0, 0);

        if (late == 0) {
            c->deferred    = 0;
            ctx->ndeferred--;
            c->strag_phase = DFCCL_STRAG_ONE;
            pthread_mutex_unlock(&ctx->lock);
            dfccl_ctx_complete(ctx, id, DFCCL_OK); /* p's result is the whole */
            return;
        }
        if (late < 0) {
            status = dfccl_error(DFCCL_ERR_INTERNAL, "straggler-tolerant collective %d on "
                                 "group %s: run %llu completed undecided", id, c->group->name,
                                 (unsigned long long)c->runs);
        } else {
            c->strag_late = (uint32_t)late;
            c->strag_splits++;
            ctx->strag_splits++;
        }
    }
    if (status != DFCCL_OK) {
        c->deferred = 0;
        ctx->ndeferred--;
        free(c->errmsg);
        c->errmsg = p->errmsg != NULL ? strdup(p->errmsg) : strdup(dfcclGetLastErrorMessage());
        pthread_mutex_unlock(&ctx->lock);
        dfccl_ctx_fail(ctx, id, status);
        return;
    }
    while (first < c->group->nranks && ((c->strag_late >> first) & 1u)) {
        first++;
    }
    c->strag_phase = DFCCL_STRAG_P2;
    dfccl_coll_strag_go(ctx, id, c->group->rank == first ? c->pend_recv : c->strag_ident);
    pthread_mutex_unlock(&ctx->lock);
}

/*
 * This rank is late for c's run: its runtime relays phase 1 on c's partner
 * (once a run; with the op's identity, into scratch) unless it did, then
 * c runs phase 2 with the rank's data. 0 while the partner's previous run
 * still completes here, 1 once c is submitted, or an error. ctx->lock
 * held.
 */
static int dfccl_coll_strag_late(struct dfccl_rank_ctx *ctx, int id, int p_busy)
{
    dfccl_coll_t *c = &ctx->colls[id];
    dfccl_status_t st;

    if (c->strag_relay_run != c->runs) {
        if (p_busy) {
            return 0; /* the previous run's relay is still finishing here */
        }
        st = dfccl_coll_strag_p1(ctx, c->strag_peer, c->strag_ident, c->strag_scratch);
        if (st != DFCCL_OK) {
            return st;
        }
        c->strag_relay_run = c->runs;
        ctx->strag_relays++;
    }
    c->strag_splits++;
    ctx->strag_splits++;
    c->strag_phase = DFCCL_STRAG_P2;
    return dfccl_coll_strag_go(ctx, id, c->pend_send);
}

/*
 * The optimistic protocol (every op but avg): a rank that arrives commits
 * its data to the run (straggler.c) and submits p with it at once; with
 * nobody late p's run is the whole run, and the user's completes with it,
 * without running c. A rank whose wait ends before every rank committed
 * marks the others late: p's run becomes phase 1 (they relay it) and c
 * runs phase 2. 1 once c is submitted, 0 while the run goes on, or an
 * error. ctx->lock held.
 */
static int dfccl_coll_strag_step_opt(struct dfccl_rank_ctx *ctx, int id)
{
    dfccl_coll_t *c       = &ctx->colls[id];
    dfccl_coll_t *p       = &ctx->colls[c->strag_peer];
    struct dfccl_group *g = c->group;
    const int p_busy      = p->state == DFCCL_COLL_INFLIGHT || p->state == DFCCL_COLL_CLOSING;
    dfccl_status_t st;
    int64_t late;
    int rc;

    if (c->strag_phase == DFCCL_STRAG_P1) {
        if (dfccl_strag_decide(g, c->sig[6], c->runs, 0, 0, 0) < 0 &&
            dfccl_since(dfccl_time_ns(), c->start_ns) >= dfccl_coll_strag_wait_ns(c)) {
            dfccl_strag_expire(g, c->sig[6], c->runs);
        }
        return 0; /* p's completion goes on */
    }
    if (c->strag_phase != DFCCL_STRAG_WAIT) {
        return 0;
    }
    rc = dfccl_coll_resolve(ctx, id);
    if (rc > 0) {
        rc = dfccl_coll_resolve(ctx, c->strag_peer);
    }
    if (rc <= 0) {
        return rc;
    }
    late = dfccl_strag_decide(g, c->sig[6], c->runs, 0, 0, 0);
    if (late < 0) {
        if (p_busy) {
            return 0; /* our relay of the previous run still completes here */
        }
        late = dfccl_strag_commit(g, c->sig[6], c->runs);
    }
    if (late > 0) {
        /* decided before we could commit: we are late */
        c->strag_late = (uint32_t)late;
        return dfccl_coll_strag_late(ctx, id, p_busy);
    }
    c->strag_late = 0;
    st = dfccl_coll_strag_p1(ctx, c->strag_peer, c->pend_send, c->pend_recv);
    if (st != DFCCL_OK) {
        return st;
    }
    c->strag_phase = DFCCL_STRAG_P1;
    /* the last to commit: p takes about a run's time from here */
    c->strag_go_ns = late == 0 ? dfccl_time_ns() : 0;
    return 0;
}

/* A waiting run of straggler-tolerant c: 1 once submitted (it is no
 * longer deferred), 0 while it waits, or an error. ctx->lock held. */
static int dfccl_coll_strag_step(struct dfccl_rank_ctx *ctx, int id)
{
    dfccl_coll_t *c       = &ctx->colls[id];
    dfccl_coll_t *p       = &ctx->colls[c->strag_peer];
    struct dfccl_group *g = c->group;
    const int p_busy      = p->state == DFCCL_COLL_INFLIGHT || p->state == DFCCL_COLL_CLOSING;
    dfccl_status_t st;
    int64_t late;
    int rc;

    if (c->strag_opt) {
        return dfccl_coll_strag_step_opt(ctx, id);
    }
    if (c->strag_phase != DFCCL_STRAG_WAIT) {
        return 0; /* phase 1 runs: its completion submits phase 2 */
    }
    rc = dfccl_coll_resolve(ctx, id);
    if (rc > 0) {
        rc = dfccl_coll_resolve(ctx, c->strag_peer);
    }
    if (rc <= 0) {
        return rc;
    }
    late = dfccl_strag_decide(g, c->sig[6], c->runs, 1,
                              dfccl_since(dfccl_time_ns(), c->start_ns),
                              dfccl_coll_strag_wait_ns(c));
    if (late < 0) {
        return 0;
    }
    c->strag_late = (uint32_t)late;
    if (late == 0) {
        c->strag_phase = DFCCL_STRAG_ONE;
        return dfccl_coll_strag_go(ctx, id, c->pend_send);
    }
    if ((late >> g->rank) & 1) {
        return dfccl_coll_strag_late(ctx, id, p_busy);
    }
    if (p_busy) {
        return 0;
    }
    st = dfccl_coll_strag_p1(ctx, c->strag_peer, c->pend_send, c->pend_recv);
    if (st != DFCCL_OK) {
        return st;
    }
    c->strag_splits++;
    ctx->strag_splits++;
    c->strag_phase = DFCCL_STRAG_P1;
    return 0;
}

/* Late runs of ours that the early ranks started without us: relay
 * phase 1 for them before our application starts them. ctx->lock held. */
static void dfccl_coll_strag_poll(struct dfccl_rank_ctx *ctx)
{
    ctx->strag_watch = 0;
    for (int id = 0, seen = 0; id < ctx->cfg.max_colls && seen < ctx->nstrag; id++) {
        dfccl_coll_t *c = &ctx->colls[id], *p;
        uint64_t run;
        int64_t late;
        int rc;

        if (!c->strag) {
            continue;
        }
        seen++;
        if (c->state != DFCCL_COLL_IDLE && c->state != DFCCL_COLL_COMPLETING) {
            continue;
        }
        run = c->runs + 1;
        if (c->strag_relay_run == run) {
            continue;
        }
        late = dfccl_strag_decide(c->group, c->sig[6], run, 0, 0, 0);
        if (late < 0 && dfccl_strag_started(c->group, c->sig[6], run)) {
            ctx->strag_watch = 1; /* a peer started it: a decision may come */
        }
        if (late <= 0 || !((late >> c->group->rank) & 1)) {
            continue;
        }
        p = &ctx->colls[c->strag_peer];
        if (p->state == DFCCL_COLL_INFLIGHT || p->state == DFCCL_COLL_CLOSING) {
            continue;
        }
        dfccl_error_quiet(1);
        rc = dfccl_coll_resolve(ctx, c->strag_peer);
        dfccl_error_quiet(0);
        if (rc > 0 &&
            dfccl_coll_strag_p1(ctx, c->strag_peer, c->strag_ident, c->strag_scratch) ==
                DFCCL_OK) {
            c->strag_relay_run = run;
            ctx->strag_relays++;
        }
    }
}

/*
 * Submit deferred runs whose peers have registered by now. A run whose
 * registration turns out mismatched completes with the error. Returns the
 * number of runs completed with an error (their callbacks are due).
 */
int dfccl_coll_resolve_deferred(struct dfccl_rank_ctx *ctx)
{
    int failed[16], nfailed = 0;

    pthread_mutex_lock(&ctx->lock);
    if (ctx->nstrag > 0) {
        dfccl_coll_strag_poll(ctx);
    }
    for (int id = 0; id < ctx->cfg.max_colls && ctx->ndeferred > 0; id++) {
        dfccl_coll_t *c = &ctx->colls[id];
        int rc;
        if (!c->deferred) {
            continue;
        }
        dfccl_pool_reap(c->group);
        if (c->strag) {
            rc = dfccl_coll_strag_step(ctx, id);
            if (rc >= 0) {
                continue;
            }
        } else {
            rc = dfccl_coll_resolve(ctx, id);
            if (rc == 0) {
                continue;
            }
        }
        c->deferred = 0;
        ctx->ndeferred--;
        if (rc > 0) {
            dfccl_ctx_submit(ctx, DFCCL_SQE_RUN, id, c->pend_send, c->pend_recv);
        } else if (nfailed < 16) {
            c->status = (dfccl_status_t)rc;
            free(c->errmsg);
            c->errmsg = strdup(dfcclGetLastErrorMessage());
            failed[nfailed++] = id;
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    for (int i = 0; i < nfailed; i++) {
        dfccl_ctx_fail(ctx, failed[i], ctx->colls[failed[i]].status);
    }
    return nfailed;
}

dfccl_status_t dfcclQuery(int coll_id, dfccl_rank_ctx_t ctx)
{
    dfccl_coll_t *c;
    dfccl_status_t st;

    if (ctx == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclQuery: ctx is NULL");
    }
    pthread_mutex_lock(&ctx->lock);
    if (ctx->fault_held != NULL && coll_id >= 0 && coll_id < ctx->cfg.max_colls &&
        ctx->fault_held[coll_id]) {
        pthread_mutex_unlock(&ctx->lock);
        return DFCCL_INPROGRESS; /* an exclusion registers it again */
    }
    st = dfccl_coll_lookup(ctx, coll_id, "dfcclQuery", "", &c);
    if (st != DFCCL_OK) {
        return st;
    }
    st = c->state == DFCCL_COLL_INFLIGHT || c->state == DFCCL_COLL_COMPLETING
             ? DFCCL_INPROGRESS
             : c->status;
    if (st < 0 && c->errmsg != NULL) {
        /* the error was found on the poller thread: tell this thread too */
        dfccl_set_last_error(c->errmsg);
    }
    pthread_mutex_unlock(&ctx->lock);
    return st;
}

_Static_assert(DFCCL_PROGRESS_RUN_BITS == DFCCL_K_PROG_RUN_BITS &&
                   DFCCL_PROGRESS_ELEMS_BITS == DFCCL_K_PROG_ELEMS_BITS &&
                   DFCCL_PARTIAL_MAX_CHANNELS == DFCCL_MAX_CHANNELS,
               "the public progress words are the daemon's");

/* Bytes of the receive buffer a run of c writes on this rank. */
static size_t dfccl_coll_recv_bytes(const dfccl_coll_t *c)
{
    const dfccl_coll_static_t *st = &c->st;
    const size_t bytes = (size_t)st->count * st->elem_size;

    switch (st->kind) {
    case DFCCL_COLL_ALLGATHER:
    case DFCCL_COLL_ALLTOALL:  return bytes * (size_t)st->nranks;
    case DFCCL_COLL_ALLTOALLV: return c->span_recv;
    case DFCCL_COLL_REDUCE:    return st->rank == st->root ? bytes : 0;
    default:                   return bytes;
    }
}

/* Collective `id`'s partial completion for its consumers (ctx->lock
 * held): its algorithm's granularity (dfccl_algo_t.partial), its
 * channels' ranges, and the run its latest dfcclRun* is (a run deferred
 * until the peers register is submitted later, as the next one). */
static void dfccl_coll_partial(struct dfccl_rank_ctx *ctx, int id, dfccl_partial_t *p)
{
    const dfccl_coll_t *c    = &ctx->colls[id];
    const dfccl_algo_t *algo = dfccl_algo_by_id(c->st.algo);
    const size_t nb          = (size_t)ctx->cfg.max_blocks;

    memset(p, 0, sizeof(*p));
    p->granularity = algo->partial != NULL ? algo->partial(&c->st) : 0;
    p->whole_only  = p->granularity == 0;
    p->nchannels   = (int)c->st.nchannels;
    p->run         = (c->prog_runs + (c->deferred ? 1u : 0u)) &
                     ((1ull << DFCCL_PROGRESS_RUN_BITS) - 1);
    p->elem_size   = c->st.elem_size;
    p->total_bytes = dfccl_coll_recv_bytes(c);
    for (int ch = 0; ch < p->nchannels; ch++) {
        p->chan_off[ch]   = (size_t)c->chans[ch].off * c->st.elem_size;
        p->chan_bytes[ch] = (size_t)c->chans[ch].cnt * c->st.elem_size;
    }
    p->words = ctx->args.progress + (size_t)id * nb;
}

/* The partial completion of `coll_id` for API call `fn`: DFCCL_OK with
 * ctx->lock held, or the lookup's error with it released. */
static dfccl_status_t dfccl_coll_partial_lock(struct dfccl_rank_ctx *ctx, int coll_id,
                                              const char *fn, dfccl_coll_t **c_p,
                                              dfccl_partial_t *p)
{
    dfccl_status_t st;

    pthread_mutex_lock(&ctx->lock);
    st = dfccl_coll_lookup(ctx, coll_id, fn, "; pass the id that dfcclRegister* returned", c_p);
    if (st == DFCCL_OK) {
        dfccl_coll_partial(ctx, coll_id, p);
    }
    return st;
}

dfccl_status_t dfcclGetProgress(int coll_id, dfccl_rank_ctx_t ctx, dfccl_partial_t *partial_p)
{
    dfccl_partial_t p;
    dfccl_coll_t *c;
    dfccl_status_t st;

    if (ctx == NULL || partial_p == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclGetProgress: ctx and partial_p must "
                           "not be NULL");
    }
    st = dfccl_coll_partial_lock(ctx, coll_id, "dfcclGetProgress", &c, &p);
    if (st != DFCCL_OK) {
        return st;
    }
    pthread_mutex_unlock(&ctx->lock);
    *partial_p = p;
    return DFCCL_OK;
}

dfccl_status_t dfcclQueryRange(int coll_id, size_t offset, dfccl_rank_ctx_t ctx,
                               size_t *bytes_ready_p)
{
    const size_t nb = ctx != NULL ? (size_t)ctx->cfg.max_blocks : 0;
    dfccl_partial_t p;
    dfccl_coll_t *c;
    dfccl_status_t st;
    size_t ready;

    if (ctx == NULL || bytes_ready_p == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclQueryRange: ctx and bytes_ready_p "
                           "must not be NULL");
    }
    st = dfccl_coll_partial_lock(ctx, coll_id, "dfcclQueryRange", &c, &p);
    if (st != DFCCL_OK) {
        return st;
    }
    if (offset > p.total_bytes) {
        char label[256];

        dfccl_coll_label(ctx, coll_id, label, sizeof(label));
        pthread_mutex_unlock(&ctx->lock);
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclQueryRange: offset %zu is past the "
                           "end of the receive buffer of %s (%zu bytes on this rank); pass "
                           "an offset of at most %zu", offset, label, p.total_bytes,
                           p.total_bytes);
    }
    if (c->state == DFCCL_COLL_COMPLETING && c->status == DFCCL_OK) {
        st    = DFCCL_INPROGRESS; /* as dfcclQuery says, until the callback returned */
        ready = p.total_bytes - offset;
    } else if (c->state == DFCCL_COLL_INFLIGHT || c->state == DFCCL_COLL_COMPLETING) {
        /* the words, which only the daemon writes (host view); a run that
         * failed keeps what they said */
        st    = DFCCL_INPROGRESS;
        ready = c->deferred ? 0 : dfcclPartialReady(&p, ctx->progress + (size_t)coll_id * nb,
                                                    offset);
    } else {
        st    = c->status;
        ready = c->runs > 0 ? p.total_bytes - offset : 0;
        if (st < 0 && c->errmsg != NULL) {
            dfccl_set_last_error(c->errmsg);
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    if (st >= 0) {
        *bytes_ready_p = ready;
    }
    return st;
}

dfccl_status_t dfcclWait(int coll_id, int timeout_ms, dfccl_rank_ctx_t ctx)
{
    uint64_t deadline = 0, spin_end;
    uint32_t idle_polls = 0;
    dfccl_status_t st;

    if (ctx == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclWait: ctx is NULL");
    }
    if (timeout_ms >= 0) {
        deadline = dfccl_time_ns() + (uint64_t)timeout_ms * 1000000ull;
    }
    spin_end = dfccl_time_ns() + (uint64_t)ctx->cfg.wait_spin_us * 1000ull;
    for (;;) {
        uint64_t gen = __atomic_load_n(&ctx->kick_gen, __ATOMIC_SEQ_CST), now;

        st = dfcclQuery(coll_id, ctx);
        if (st != DFCCL_INPROGRESS) {
            return st;
        }
        now = dfccl_time_ns();
        if (deadline != 0 && now > deadline) {
            return dfccl_error(DFCCL_ERR_TIMEOUT, "dfcclWait: collective %d (%s on group %s) "
                               "did not complete within %d ms", coll_id,
                               dfccl_coll_name(ctx->colls[coll_id].st.kind),
                               ctx->colls[coll_id].group->name, timeout_ms);
        }
        if (ctx->cfg.progress == DFCCL_PROGRESS_EXPLICIT ||
            (ctx->cfg.wait_spin_us > 0 && now < spin_end)) {
            /* poll the completion queue on this thread: no wake-up needed.
             * Between polls the core pauses a moment, and gives way to
             * others only every 64th time: a CQE that lands during a
             * sched_yield is seen after the system call returns. */
            __atomic_store_n(&ctx->app_poll_ns, now, __ATOMIC_RELAXED);
            if (dfccl_ctx_progress(ctx) == 0) {
                if ((++idle_polls & 63u) == 0) {
                    sched_yield();
                } else {
                    dfccl_cpu_relax();
                }
            }
        } else {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 1000000;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            /* Completions kick: no lost wake-up (dfccl_ctx_kick). */
            dfccl_ctx_wait_kick(ctx, gen, &ts);
        }
    }
}
