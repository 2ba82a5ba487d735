/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MSCCL programs as an algorithm (kernels/algo/msccl.h): the files named by
 * DFCCL_MSCCL_XML_FILES (colon-separated), loaded once per process with
 * runtime/msccl.c, run allreduces, allgathers, reduce-scatters and
 * alltoalls on groups whose ranks all write into each other's connectors.
 *
 *   1. choice: the first file, in the order given, for the collective and
 *      the group's size whose [minBytes, maxBytes) holds the collective's
 *      bytes (allreduce: its buffer; the others: the whole input or output,
 *      all ranks' parts) and that can serve it: the count a multiple of the
 *      input's chunks (every chunk the same size), an operation other than
 *      AVG, at most DFCCL_MAX_BLOCKS thread blocks on a rank, and both
 *      in-place and out-of-place calls (an allreduce, allgather or alltoall
 *      written for in place runs out of place by first copying its input
 *      into its output; a reduce-scatter needs both forms). A program that
 *      matches goes before the built-in algorithms; DFCCL_ALGO=msccl asks
 *      for one and says so when none serves;
 *   2. channels: as many as the most thread blocks of a rank, or the
 *      program's channels if more (channel c's regions hold its
 *      connectors); a rank runs thread block t on channel t;
 *   3. layout: the mesh's, a connector per sender in each region; slots as
 *      large as a chunk, up to 128 KiB, and the program's protocol (LL128
 *      runs as LL), unless DFCCL_PROTO says simple or ll;
 *   4. this rank's thread blocks, their steps and their counters go to
 *      device memory at registration, with the scratch buffer (its chunks
 *      the size of the others').
 */
#include "../dfccl_int.h"
#include "../msccl.h"

#include <stdlib.h>
#include <string.h>

#define DFCCL_MS_SLOT_BYTES (128u << 10)

static pthread_once_t dfccl_ms_once = PTHREAD_ONCE_INIT;
static dfccl_msccl_prog_t **dfccl_ms_progs;
static int dfccl_ms_nprogs;

static void dfccl_ms_load(void)
{
    const char *env = getenv("DFCCL_MSCCL_XML_FILES");
    char *list, *save = NULL;

    if (env == NULL || *env == '\0' || (list = strdup(env)) == NULL) {
        return;
    }
    for (char *path = strtok_r(list, ":", &save); path != NULL; path = strtok_r(NULL, ":", &save)) {
        dfccl_msccl_prog_t *p = NULL, **grown;
        char err[512];

        if (dfccl_msccl_load(path, &p, err, sizeof(err)) != 0) {
            dfccl_log_msg(0, __FILE__, __LINE__, "DFCCL_MSCCL_XML_FILES: %s is not used: %s",
                          path, err);
            continue;
        }
        grown = realloc(dfccl_ms_progs, (size_t)(dfccl_ms_nprogs + 1) * sizeof(*grown));
        if (grown == NULL) {
            dfccl_msccl_free(p);
            break;
        }
        dfccl_ms_progs                    = grown;
        dfccl_ms_progs[dfccl_ms_nprogs++] = p;
        dfccl_info("MSCCL program %s (%s, %s on %d ranks) loaded from %s", p->name,
                   dfccl_msccl_coll_name(p->coll), p->proto == DFCCL_MSCCL_SIMPLE ? "Simple"
                   : p->proto == DFCCL_MSCCL_LL ? "LL" : "LL128 (run as LL)", p->ngpus, path);
    }
    free(list);
}

/* dfccl's kind of an MSCCL collective, or -1 */
static int dfccl_ms_kind(int coll)
{
    switch (coll) {
    case DFCCL_MSCCL_COLL_ALLREDUCE:     return DFCCL_COLL_ALLREDUCE;
    case DFCCL_MSCCL_COLL_ALLGATHER:     return DFCCL_COLL_ALLGATHER;
    case DFCCL_MSCCL_COLL_REDUCESCATTER: return DFCCL_COLL_REDUCESCATTER;
    case DFCCL_MSCCL_COLL_ALLTOALL:      return DFCCL_COLL_ALLTOALL;
    default:                             return -1;
    }
}

/* Elements of a rank's input: `count` as registered. */
static uint64_t dfccl_ms_in_elems(int kind, size_t count, int n)
{
    return kind == DFCCL_COLL_ALLREDUCE || kind == DFCCL_COLL_ALLGATHER ? count
                                                                        : count * (uint64_t)n;
}

/* Chunks of a rank's input (io sizes of MSCCL's definitions). */
static int dfccl_ms_in_chunks(const dfccl_msccl_prog_t *p)
{
    return p->coll == DFCCL_MSCCL_COLL_ALLGATHER ? p->nchunksperloop / p->ngpus
                                                 : p->nchunksperloop;
}

static int dfccl_ms_max_tbs(const dfccl_msccl_prog_t *p)
{
    int most = 0;

    for (int r = 0; r < p->ngpus; r++) {
        most = p->gpus[r].ntbs > most ? p->gpus[r].ntbs : most;
    }
    return most;
}

/* Can program p run this collective on this group? */
static int dfccl_ms_serves(const dfccl_config_t *cfg, const struct dfccl_group *g,
                           const dfccl_msccl_prog_t *p, int kind, size_t count, int dtype)
{
    const int n = g->nranks, cin = dfccl_ms_in_chunks(p);
    const uint64_t nin = dfccl_ms_in_elems(kind, count, n);
    const uint64_t bytes = (kind == DFCCL_COLL_ALLREDUCE ? count : count * (uint64_t)n) *
                           dfccl_dtype_bytes(dtype);
    const int most = cfg->max_blocks < DFCCL_MAX_CHANNELS ? cfg->max_blocks : DFCCL_MAX_CHANNELS;

    if (dfccl_ms_kind(p->coll) != kind || p->ngpus != n || cin <= 0 ||
        (kind != DFCCL_COLL_ALLREDUCE && p->nchunksperloop % n != 0)) {
        return 0;
    }
    if (bytes < p->min_bytes || (p->max_bytes != UINT64_MAX && bytes >= p->max_bytes)) {
        return 0;
    }
    if (nin % (uint64_t)cin != 0 || !p->inplace ||
        (kind == DFCCL_COLL_REDUCESCATTER && !p->outofplace)) {
        return 0;
    }
    return dfccl_ms_max_tbs(p) <= most && p->nchannels <= most;
}

static const dfccl_msccl_prog_t *dfccl_ms_find(const dfccl_config_t *cfg,
                                               const struct dfccl_group *g, int kind,
                                               size_t count, int dtype)
{
    pthread_once(&dfccl_ms_once, dfccl_ms_load);
    if (g->nranks < 2 || g->nranks > DFCCL_ONESHOT_MAX_RANKS || !g->all_local || g->net) {
        return NULL;
    }
    for (int i = 0; i < dfccl_ms_nprogs; i++) {
        if (dfccl_ms_serves(cfg, g, dfccl_ms_progs[i], kind, count, dtype)) {
            return dfccl_ms_progs[i];
        }
    }
    return NULL;
}

static int dfccl_msccl_plan(const dfccl_config_t *cfg, const struct dfccl_group *g, int kind,
                            size_t count, int dtype, int *nch_p)
{
    const dfccl_msccl_prog_t *p = dfccl_ms_find(cfg, g, kind, count, dtype);
    int nch;

    if (p == NULL) {
        return 0;
    }
    nch    = dfccl_ms_max_tbs(p);
    *nch_p = p->nchannels > nch ? p->nchannels : nch;
    return 1;
}

static size_t dfccl_msccl_layout(const dfccl_config_t *cfg, const struct dfccl_group *g, int nch,
                                 dfccl_coll_static_t *st)
{
    const dfccl_msccl_prog_t *p = dfccl_ms_find(cfg, g, st->kind, st->count, st->dtype);
    uint64_t chunk = 0;
    /* A channel holds a connector per rank where the ring holds one: as
     * much memory per channel as the ring's slots take, shared among the
     * ranks, and at least DFCCL_MS_SLOT_BYTES where DFCCL_SLOT_BYTES
     * allows it. Small slots cost a handshake per slot and cap a
     * channel's bandwidth. */
    uint32_t slot = 256, most = dfccl_algo_region_slot(cfg, g, DFCCL_MS_SLOT_BYTES);
    size_t bytes;
    int ll;

    if (p != NULL) {
        chunk = dfccl_ms_in_elems(st->kind, st->count, g->nranks) /
                (uint64_t)dfccl_ms_in_chunks(p) * st->elem_size;
    }
    while (slot < chunk && slot < most) {
        slot <<= 1;
    }
    ll = cfg->proto == DFCCL_PROTO_LL ||
         (cfg->proto != DFCCL_PROTO_SIMPLE && p != NULL && p->proto != DFCCL_MSCCL_SIMPLE);
    bytes = dfccl_algo_sender_conns(cfg, st, nch, slot, ll);
    /* a small LL program runs on the first threads of each block: its
     * primitives move at most a chunk, or a slot */
    if (ll) {
        st->team = dfccl_algo_team(cfg, chunk < st->slot_bytes ? chunk : st->slot_bytes);
    }
    return bytes;
}

/* a program's steps in sequence, each a hop: as many as the longest
 * thread block has, each moving a chunk */
static double dfccl_msccl_cost_us(const struct dfccl_group *g, int kind, size_t bytes)
{
    (void)kind;
    return dfccl_algo_alpha_beta(g, (double)(g->nranks - 1), (double)bytes);
}

DFCCL_ALGO_DEFINE(msccl, DFCCL_K_ALGO_MSCCL,
                  "no program of DFCCL_MSCCL_XML_FILES serves it (collective, ranks, bytes, "
                  "a count that is a multiple of the input's chunks, op other than AVG, "
                  "thread blocks and channels within DFCCL_MAX_BLOCKS, on one host with every "
                  "rank writing to every other)");

/* Thread block t's channel (b: its part of the program): channel t's, with
 * its own connectors in channel b->chan's regions, as far as c->chans
 * knows them (a peer it sends nothing, count 0, was not looked for). */
static void dfccl_ms_view(const dfccl_coll_t *c, const dfccl_msccl_tb_t *b, int t,
                          dfccl_chan_t *v)
{
    const dfccl_coll_static_t *st = &c->st;
    const int ll                  = st->proto == DFCCL_K_PROTO_LL;

    *v = c->chans[t];
    if (b->chan < 0) {
        return;
    }
    if (b->send >= 0 && c->chans[b->chan].peer[b->send] != NULL) {
        v->send_ctrl = (dfccl_conn_ctrl_t *)(void *)(c->chans[b->chan].peer[b->send] +
                                                     DFCCL_MESH_CONN_AT(b->send, st->rank,
                                                                        st->nslots,
                                                                        st->slot_bytes, ll));
        v->send_data = (char *)v->send_ctrl + sizeof(dfccl_conn_ctrl_t);
    }
    if (b->recv >= 0) {
        v->recv_ctrl = (dfccl_conn_ctrl_t *)(void *)((char *)c->chans[b->chan].recv_ctrl +
                                                     DFCCL_MESH_CONN_AT(st->rank, b->recv,
                                                                        st->nslots,
                                                                        st->slot_bytes, ll));
        v->recv_data = (char *)v->recv_ctrl + sizeof(dfccl_conn_ctrl_t);
    }
}

dfccl_status_t dfccl_msccl_setup(struct dfccl_rank_ctx *ctx, struct dfccl_group *g,
                                 dfccl_coll_t *c)
{
    const dfccl_coll_static_t *st = &c->st;
    const dfccl_msccl_prog_t *p = dfccl_ms_find(&ctx->cfg, g, st->kind, st->count, st->dtype);
    const dfccl_msccl_gpu_t *gpu;
    const uint64_t cin = p != NULL ? (uint64_t)dfccl_ms_in_chunks(p) : 1;
    const uint64_t ce  = dfccl_ms_in_elems(st->kind, st->count, g->nranks) / cin;
    size_t o_done, o_nsteps, bytes = 0, sbytes;
    char *h, *dev = NULL;
    static int ll128_said;
    dfccl_status_t rc;

    if (p == NULL) {
        return dfccl_error(DFCCL_ERR_INTERNAL, "collective on group %s: its MSCCL program is "
                           "gone", g->name);
    }
    if (p->proto == DFCCL_MSCCL_LL128 && !__atomic_exchange_n(&ll128_said, 1, __ATOMIC_RELAXED)) {
        dfccl_log_msg(0, __FILE__, __LINE__, "MSCCL program %s asks for LL128, which dfccl runs "
                      "as LL", p->name);
    }
    /* each thread block with its channel and steps (DFCCL_MS_TB_BYTES),
     * then the counters */
    gpu = &p->gpus[st->rank];
    for (int t = 0; t < gpu->ntbs; t++) {
        bytes += (size_t)DFCCL_MS_TB_BYTES(gpu->tbs[t].nsteps);
    }
    o_done   = bytes;
    o_nsteps = o_done + (size_t)gpu->ntbs * sizeof(uint64_t);
    /* the lines a run asks for past its thread block stay inside */
    bytes    = o_nsteps + (size_t)gpu->ntbs * sizeof(int32_t) + DFCCL_MS_PREFETCH_BYTES;
    sbytes   = (size_t)gpu->chunks[2] * ce * st->elem_size;
    h        = calloc(1, bytes);
    if (h == NULL) {
        return dfccl_error(DFCCL_ERR_NO_MEMORY, "MSCCL program %s: out of host memory", p->name);
    }
    rc = ctx->be->dev_alloc(ctx, bytes, (void **)&dev);
    if (rc == DFCCL_OK && sbytes > 0) {
        rc = ctx->be->dev_alloc(ctx, sbytes, &c->ms_scratch);
    }
    if (rc != DFCCL_OK) {
        free(h);
        if (dev != NULL) {
            ctx->be->dev_free(ctx, dev);
        }
        return rc;
    }
    c->ms_dev = dev;
    for (int t = 0; t < st->nchannels; t++) {
        c->chans[t].msccl = NULL;
    }
    for (size_t t = 0, o = 0; t < (size_t)gpu->ntbs; t++) {
        const dfccl_msccl_tb_t *b = &gpu->tbs[t];
        dfccl_ms_tb_t *tb  = (dfccl_ms_tb_t *)(void *)(h + o);
        dfccl_ms_step_t *s = (dfccl_ms_step_t *)(uintptr_t)DFCCL_MS_STEPS(tb);

        ((int32_t *)(void *)(h + o_nsteps))[t] = b->nsteps;
        tb->chunk_elems  = ce;
        tb->scratch      = c->ms_scratch;
        tb->done         = (uint64_t *)(void *)(dev + o_done);
        tb->nsteps_of    = (const int32_t *)(const void *)(dev + o_nsteps);
        tb->ntbs         = gpu->ntbs;
        tb->inplace_only = !p->outofplace;
        tb->in_chunks    = (int32_t)cin;
        tb->tb           = (int32_t)t;
        tb->chan         = b->chan;
        tb->send         = b->send;
        tb->recv         = b->recv;
        tb->nsteps       = b->nsteps;
        for (int i = 0; i < b->nsteps; i++) {
            const dfccl_msccl_step_t *m = &b->steps[i];
            s[i].type   = m->type;
            s[i].srcbuf = m->srcbuf;
            s[i].dstbuf = m->dstbuf;
            s[i].hasdep = m->hasdep;
            s[i].srcoff = m->srcoff;
            s[i].dstoff = m->dstoff;
            s[i].cnt    = m->cnt;
            s[i].depid  = m->depid;
            s[i].deps   = m->deps;
        }
        c->chans[t].msccl = (const dfccl_ms_tb_t *)(const void *)(dev + o);
        /* its channel as far as it is known (the whole of it on one rank);
         * dfccl_msccl_resolve writes it again once the peers' are found */
        dfccl_ms_view(c, b, (int)t, (dfccl_chan_t *)(uintptr_t)DFCCL_MS_VIEW(tb));
        o += (size_t)DFCCL_MS_TB_BYTES(b->nsteps);
    }
    rc = ctx->be->memcpy_h2d(ctx, dev, h, bytes);
    free(h);
    if (rc != DFCCL_OK) {
        return rc;
    }
    c->ms_prog = p;
    snprintf(c->ms_name, sizeof(c->ms_name), "msccl:%s", p->name);
    c->bytes += bytes + sbytes;
    return DFCCL_OK;
}

dfccl_status_t dfccl_msccl_resolve(struct dfccl_rank_ctx *ctx, dfccl_coll_t *c)
{
    const dfccl_msccl_gpu_t *gpu = &c->ms_prog->gpus[c->st.rank];
    dfccl_status_t rc            = DFCCL_OK;

    for (int t = 0; t < gpu->ntbs && rc == DFCCL_OK; t++) {
        dfccl_chan_t v;

        dfccl_ms_view(c, &gpu->tbs[t], t, &v);
        rc = ctx->be->memcpy_h2d(ctx, (void *)(uintptr_t)DFCCL_MS_VIEW(c->chans[t].msccl), &v,
                                 sizeof(v));
    }
    return rc;
}

void dfccl_msccl_release(struct dfccl_rank_ctx *ctx, dfccl_coll_t *c)
{
    if (c->ms_dev != NULL) {
        ctx->be->dev_free(ctx, c->ms_dev);
    }
    if (c->ms_scratch != NULL) {
        ctx->be->dev_free(ctx, c->ms_scratch);
    }
    c->ms_dev     = NULL;
    c->ms_scratch = NULL;
    c->ms_prog    = NULL;
}

int dfccl_msccl_sends_to(const dfccl_coll_t *c, int ch, int q)
{
    const dfccl_msccl_gpu_t *gpu = &c->ms_prog->gpus[c->st.rank];

    /* With no data, a run sends nothing: a peer completes it without us
     * and may register another collective in its region, which we must not
     * look at. */
    if (c->st.count == 0) {
        return 0;
    }

    for (int t = 0; t < gpu->ntbs; t++) {
        if (gpu->tbs[t].chan == ch && gpu->tbs[t].send == q) {
            return 1;
        }
    }
    return 0;
}
