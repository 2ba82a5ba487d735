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

/* What every rank must agree on; exchanged at registration. */
typedef struct {
    int32_t  kind;
    int32_t  dtype;
    int32_t  op;
    int32_t  root;
    int32_t  nranks;
    int32_t  nchannels;
    uint64_t count;
    uint32_t slot_bytes;
    uint32_t nslots;
    uint32_t chunk_slices;
    int32_t  status; /* this rank's local registration result */
} dfccl_coll_sig_t;

typedef struct {
    dfccl_coll_sig_t  sig;
    dfccl_conn_desc_t desc[DFCCL_MAX_CHANNELS];
} dfccl_reg_info_t;

#define DFCCL_CHUNK_SLICES 4

static const char *const dfccl_run_names[] = {"dfcclRunAllReduce", "dfcclRunAllGather",
                                              "dfcclRunReduceScatter", "dfcclRunReduce",
                                              "dfcclRunBroadcast"};
static const char *const dfccl_reg_names[] = {"dfcclRegisterAllReduce", "dfcclRegisterAllGather",
                                              "dfcclRegisterReduceScatter",
                                              "dfcclRegisterReduce", "dfcclRegisterBroadcast"};

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

/* Slot size for a collective: the configured size, or less for small
 * collectives, so that 1000s of small ones stay cheap. Same on all ranks. */
static uint32_t dfccl_coll_slot_bytes(const dfccl_config_t *cfg, int kind, size_t count,
                                      int dtype, int nranks, int nch)
{
    size_t bytes = count * dfccl_dtype_bytes(dtype);
    size_t step, slot = 256;

    step = (bytes + (size_t)nch - 1) / (size_t)nch;
    if (kind == DFCCL_COLL_ALLREDUCE) {
        step = (step + (size_t)nranks - 1) / (size_t)nranks;
    }
    step = (step + DFCCL_CHUNK_SLICES - 1) / DFCCL_CHUNK_SLICES;
    while (slot < step && slot < cfg->slot_bytes) {
        slot <<= 1;
    }
    return (uint32_t)(slot < cfg->slot_bytes ? slot : cfg->slot_bytes);
}

static const char *dfccl_sig_diff(const dfccl_coll_sig_t *a, const dfccl_coll_sig_t *b)
{
    if (a->kind != b->kind) return "collective";
    if (a->dtype != b->dtype) return "datatype";
    if (a->count != b->count) return "count";
    if (a->op != b->op) return "op";
    if (a->root != b->root) return "root";
    if (a->nranks != b->nranks) return "group size";
    if (a->nchannels != b->nchannels) return "channels (DFCCL_CHANNELS/DFCCL_MAX_BLOCKS)";
    if (a->slot_bytes != b->slot_bytes || a->nslots != b->nslots)
        return "connector size (DFCCL_SLOT_BYTES/DFCCL_SLOTS)";
    if (a->chunk_slices != b->chunk_slices) return "chunk size";
    return NULL;
}

static int dfccl_coll_find_free(struct dfccl_rank_ctx *ctx)
{
    for (int i = 0; i < ctx->cfg.max_colls; i++) {
        if (ctx->colls[i].state == DFCCL_COLL_FREE) {
            return i;
        }
    }
    return -1;
}

dfccl_status_t dfccl_coll_register(dfccl_group_t g, int kind, size_t count, int dtype, int op,
                                   int root, int priority, int *coll_id_p)
{
    const char *fn = dfccl_reg_names[kind];
    struct dfccl_rank_ctx *ctx;
    dfccl_reg_info_t *all = NULL, me;
    dfccl_chan_t chans[DFCCL_MAX_CHANNELS];
    dfccl_coll_t *c = NULL;
    dfccl_status_t st, local;
    size_t conn_bytes = 0;
    int id = -1, nch, next;

    DFCCL_CHECK(dfccl_coll_check_args(g, kind, count, dtype, op, root, coll_id_p));
    ctx  = g->ctx;
    nch  = dfccl_ring_nchannels(&ctx->cfg, kind, count, dtype, g->nranks);
    next = (g->rank + 1) % g->nranks;

    memset(&me, 0, sizeof(me));
    memset(chans, 0, sizeof(chans));
    me.sig.kind         = kind;
    me.sig.dtype        = dtype;
    me.sig.op           = dfccl_has_op(kind) ? op : 0;
    me.sig.root         = (kind == DFCCL_COLL_REDUCE || kind == DFCCL_COLL_BROADCAST) ? root : 0;
    me.sig.nranks       = g->nranks;
    me.sig.nchannels    = nch;
    me.sig.count        = count;
    me.sig.slot_bytes   = dfccl_coll_slot_bytes(&ctx->cfg, kind, count, dtype, g->nranks, nch);
    me.sig.nslots       = (uint32_t)ctx->cfg.nslots;
    me.sig.chunk_slices = DFCCL_CHUNK_SLICES;

    /* Local part: an id and this rank's receive connectors. A failure is
     * still taken through the allgather, so that every rank fails alike. */
    local = DFCCL_OK;
    pthread_mutex_lock(&ctx->lock);
    id = dfccl_coll_find_free(ctx);
    if (id < 0) {
        local = dfccl_error(DFCCL_ERR_NO_MEMORY, "%s on group %s: all %d collective ids are "
                            "registered; dfcclDeregister unused ones or raise DFCCL_MAX_COLLS",
                            fn, g->name, ctx->cfg.max_colls);
    } else {
        c        = &ctx->colls[id];
        c->state = DFCCL_COLL_IDLE; /* reserve */
    }
    pthread_mutex_unlock(&ctx->lock);
    if (local == DFCCL_OK && g->nranks > 1) {
        size_t region = sizeof(dfccl_conn_ctrl_t) + (size_t)me.sig.nslots * me.sig.slot_bytes;
        for (int ch = 0; ch < nch && local == DFCCL_OK; ch++) {
            void *lp, *dp;
            local = dfccl_pool_alloc(g, region, &lp, &dp, &me.desc[ch]);
            if (local == DFCCL_OK) {
                chans[ch].recv_ctrl = dp;
                chans[ch].recv_data = (char *)dp + sizeof(dfccl_conn_ctrl_t);
                conn_bytes += region;
            }
        }
    }
    me.sig.status = local;

    all = calloc((size_t)g->nranks, sizeof(*all));
    if (all == NULL) {
        st = dfccl_error(DFCCL_ERR_NO_MEMORY, "%s: out of host memory", fn);
        goto err;
    }
    if (g->allgather(&me, all, sizeof(me), g->allgather_arg) != 0) {
        st = dfccl_error(DFCCL_ERR_BOOTSTRAP, "%s on group %s: the out-of-band allgather "
                         "failed", fn, g->name);
        goto err;
    }
    for (int i = 0; i < g->nranks; i++) {
        const char *what = dfccl_sig_diff(&me.sig, &all[i].sig);
        if (all[i].sig.status != DFCCL_OK) {
            st = local != DFCCL_OK ? local :
                 dfccl_error((dfccl_status_t)all[i].sig.status, "%s on group %s: rank %d "
                             "failed to register (%s)", fn, g->name, i,
                             dfcclGetErrorString((dfccl_status_t)all[i].sig.status));
            goto err;
        }
        if (what != NULL) {
            st = dfccl_error(DFCCL_ERR_MISMATCH, "%s on group %s: rank %d registered %s of "
                             "%llu %s (op %s, root %d) but rank %d registered %s of %llu %s "
                             "(op %s, root %d): the %s differs; every rank must register the "
                             "group's collectives in the same order with the same arguments",
                             fn, g->name, g->rank, dfccl_coll_name(me.sig.kind),
                             (unsigned long long)me.sig.count, dfccl_dtype_name(me.sig.dtype),
                             dfccl_op_name(me.sig.op), me.sig.root, i,
                             dfccl_coll_name(all[i].sig.kind),
                             (unsigned long long)all[i].sig.count,
                             dfccl_dtype_name(all[i].sig.dtype), dfccl_op_name(all[i].sig.op),
                             all[i].sig.root, what);
            goto err;
        }
    }

    /* Send side: the next rank's receive connectors. */
    for (int ch = 0; ch < nch; ch++) {
        dfccl_ring_partition(kind, count, nch, ch, &chans[ch].off, &chans[ch].cnt);
        if (g->nranks > 1) {
            void *dp;
            st = dfccl_pool_map(g, next, &all[next].desc[ch], &dp);
            if (st != DFCCL_OK) {
                goto err;
            }
            chans[ch].send_ctrl = dp;
            chans[ch].send_data = (char *)dp + sizeof(dfccl_conn_ctrl_t);
        }
    }

    /* Barrier: once every peer has attached, segment names can go. */
    if (g->nranks > 1) {
        if (g->allgather(&me.sig, all, sizeof(me.sig), g->allgather_arg) != 0) {
            st = dfccl_error(DFCCL_ERR_BOOTSTRAP, "%s on group %s: the out-of-band allgather "
                             "failed", fn, g->name);
            goto err;
        }
        dfccl_pool_unlink_all(g);
    }

    /* Publish the static context for the daemon. */
    memset(&c->st, 0, sizeof(c->st));
    c->st.kind         = kind;
    c->st.dtype        = dtype;
    c->st.op           = me.sig.op;
    c->st.nranks       = g->nranks;
    c->st.rank         = g->rank;
    c->st.root         = me.sig.root;
    c->st.nchannels    = nch;
    c->st.priority     = priority;
    c->st.count        = count;
    c->st.slot_bytes   = me.sig.slot_bytes;
    c->st.nslots       = me.sig.nslots;
    c->st.chunk_slices = me.sig.chunk_slices;
    c->st.elem_size    = (uint32_t)dfccl_dtype_bytes(dtype);
    c->st.registered   = 1;
    {
        size_t nb = (size_t)ctx->cfg.max_blocks;
        dfccl_dyn_t zero[DFCCL_MAX_CHANNELS];
        memset(zero, 0, sizeof(zero));
        st = ctx->be->memcpy_h2d(ctx, (void *)&ctx->args.chans[(size_t)id * nb], chans,
                                 nb * sizeof(dfccl_chan_t));
        if (st == DFCCL_OK) {
            st = ctx->be->memcpy_h2d(ctx, &ctx->args.dyn[(size_t)id * nb], zero,
                                     nb * sizeof(dfccl_dyn_t));
        }
        if (st == DFCCL_OK) {
            st = ctx->be->memcpy_h2d(ctx, (void *)&ctx->args.colls[id], &c->st, sizeof(c->st));
        }
        if (st != DFCCL_OK) {
            goto err;
        }
    }
    free(all);

    pthread_mutex_lock(&ctx->lock);
    c->group  = g;
    c->status = DFCCL_OK;
    c->bytes  = conn_bytes;
    c->runs   = 0;
    g->ncolls++;
    ctx->nregistered++;
    pthread_mutex_unlock(&ctx->lock);
    dfccl_debug("registered %s id %d: %zu x %s on group %s, %d channel(s), slot %u",
                dfccl_coll_name(kind), id, count, dfccl_dtype_name(dtype), g->name, nch,
                me.sig.slot_bytes);
    *coll_id_p = id;
    return DFCCL_OK;

err:
    free(all);
    if (c != NULL) {
        pthread_mutex_lock(&ctx->lock);
        c->state = DFCCL_COLL_FREE;
        pthread_mutex_unlock(&ctx->lock);
    }
    return st;
}

dfccl_status_t dfcclRegisterAllReduce(size_t count, dfccl_datatype_t type, dfccl_op_t op,
                                      dfccl_group_t group, int priority, int *coll_id_p)
{
    return dfccl_coll_register(group, DFCCL_COLL_ALLREDUCE, count, type, op, 0, priority,
                               coll_id_p);
}

dfccl_status_t dfcclRegisterAllGather(size_t sendcount, dfccl_datatype_t type,
                                      dfccl_group_t group, int priority, int *coll_id_p)
{
    return dfccl_coll_register(group, DFCCL_COLL_ALLGATHER, sendcount, type, 0, 0, priority,
                               coll_id_p);
}

dfccl_status_t dfcclRegisterReduceScatter(size_t recvcount, dfccl_datatype_t type,
                                          dfccl_op_t op, dfccl_group_t group, int priority,
                                          int *coll_id_p)
{
    return dfccl_coll_register(group, DFCCL_COLL_REDUCESCATTER, recvcount, type, op, 0,
                               priority, coll_id_p);
}

dfccl_status_t dfcclRegisterReduce(size_t count, dfccl_datatype_t type, dfccl_op_t op,
                                   int root, dfccl_group_t group, int priority, int *coll_id_p)
{
    return dfccl_coll_register(group, DFCCL_COLL_REDUCE, count, type, op, root, priority,
                               coll_id_p);
}

dfccl_status_t dfcclRegisterBroadcast(size_t count, dfccl_datatype_t type, int root,
                                      dfccl_group_t group, int priority, int *coll_id_p)
{
    return dfccl_coll_register(group, DFCCL_COLL_BROADCAST, count, type, 0, root, priority,
                               coll_id_p);
}

dfccl_status_t dfcclDeregister(int coll_id, dfccl_rank_ctx_t ctx)
{
    dfccl_coll_t *c;
    dfccl_coll_static_t zero;
    dfccl_status_t st;

    if (ctx == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclDeregister: ctx is NULL");
    }
    pthread_mutex_lock(&ctx->lock);
    if (coll_id < 0 || coll_id >= ctx->cfg.max_colls ||
        ctx->colls[coll_id].state == DFCCL_COLL_FREE) {
        pthread_mutex_unlock(&ctx->lock);
        return dfccl_error(DFCCL_ERR_NOT_FOUND, "dfcclDeregister: collective id %d is not "
                           "registered on this rank context", coll_id);
    }
    c = &ctx->colls[coll_id];
    if (c->state == DFCCL_COLL_INFLIGHT) {
        pthread_mutex_unlock(&ctx->lock);
        return dfccl_error(DFCCL_ERR_BUSY, "dfcclDeregister: collective %d (%s on group %s) is "
                           "in flight; wait for it first", coll_id, dfccl_coll_name(c->st.kind),
                           c->group->name);
    }
    memset(&zero, 0, sizeof(zero));
    st = ctx->be->memcpy_h2d(ctx, (void *)&ctx->args.colls[coll_id], &zero, sizeof(zero));
    c->group->ncolls--;
    ctx->nregistered--;
    memset(c, 0, sizeof(*c));
    c->state = DFCCL_COLL_FREE;
    pthread_mutex_unlock(&ctx->lock);
    return st;
}

static dfccl_status_t dfccl_coll_run(int kind, const void *sendbuff, void *recvbuff,
                                     int coll_id, dfccl_callback_t callback, void *arg,
                                     dfccl_rank_ctx_t ctx)
{
    const char *fn = dfccl_run_names[kind];
    dfccl_coll_t *c;
    int need_send, need_recv;
    dfccl_status_t st;

    if (ctx == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "%s: ctx is NULL", fn);
    }
    pthread_mutex_lock(&ctx->lock);
    if (coll_id < 0 || coll_id >= ctx->cfg.max_colls ||
        ctx->colls[coll_id].state == DFCCL_COLL_FREE) {
        pthread_mutex_unlock(&ctx->lock);
        return dfccl_error(DFCCL_ERR_NOT_FOUND, "%s: collective id %d is not registered on "
                           "this rank context; use the id returned by dfcclRegister*", fn,
                           coll_id);
    }
    c = &ctx->colls[coll_id];
    if (c->st.kind != kind) {
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
    if (c->state == DFCCL_COLL_INFLIGHT) {
        pthread_mutex_unlock(&ctx->lock);
        return dfccl_error(DFCCL_ERR_BUSY, "%s: collective %d (%s of %llu %s on group %s) is "
                           "still in flight; wait for its completion before running it again, "
                           "or register a second one", fn, coll_id, dfccl_coll_name(kind),
                           (unsigned long long)c->st.count, dfccl_dtype_name(c->st.dtype),
                           c->group->name);
    }
    need_send = c->st.count > 0 &&
                !(kind == DFCCL_COLL_BROADCAST && c->st.rank != c->st.root);
    need_recv = c->st.count > 0 && !(kind == DFCCL_COLL_REDUCE && c->st.rank != c->st.root);
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
    c->callback     = callback;
    c->callback_arg = arg;
    c->state        = DFCCL_COLL_INFLIGHT;
    c->start_ns     = dfccl_time_ns();
    c->runs++;
    ctx->inflight++;
    ctx->submitted++;
    st = dfccl_ctx_submit(ctx, DFCCL_SQE_RUN, coll_id, sendbuff, recvbuff);
    if (st != DFCCL_OK && ctx->launches == 0) {
        /* Nothing reached the daemon: undo. */
        c->state = DFCCL_COLL_IDLE;
        ctx->inflight--;
    }
    pthread_mutex_unlock(&ctx->lock);
    return st;
}

dfccl_status_t dfcclRunAllReduce(const void *sendbuff, void *recvbuff, int coll_id,
                                 dfccl_callback_t callback, void *callback_args,
                                 dfccl_rank_ctx_t ctx)
{
    return dfccl_coll_run(DFCCL_COLL_ALLREDUCE, sendbuff, recvbuff, coll_id, callback,
                          callback_args, ctx);
}

dfccl_status_t dfcclRunAllGather(const void *sendbuff, void *recvbuff, int coll_id,
                                 dfccl_callback_t callback, void *callback_args,
                                 dfccl_rank_ctx_t ctx)
{
    return dfccl_coll_run(DFCCL_COLL_ALLGATHER, sendbuff, recvbuff, coll_id, callback,
                          callback_args, ctx);
}

dfccl_status_t dfcclRunReduceScatter(const void *sendbuff, void *recvbuff, int coll_id,
                                     dfccl_callback_t callback, void *callback_args,
                                     dfccl_rank_ctx_t ctx)
{
    return dfccl_coll_run(DFCCL_COLL_REDUCESCATTER, sendbuff, recvbuff, coll_id, callback,
                          callback_args, ctx);
}

dfccl_status_t dfcclRunReduce(const void *sendbuff, void *recvbuff, int coll_id,
                              dfccl_callback_t callback, void *callback_args,
                              dfccl_rank_ctx_t ctx)
{
    return dfccl_coll_run(DFCCL_COLL_REDUCE, sendbuff, recvbuff, coll_id, callback,
                          callback_args, ctx);
}

dfccl_status_t dfcclRunBroadcast(const void *sendbuff, void *recvbuff, int coll_id,
                                 dfccl_callback_t callback, void *callback_args,
                                 dfccl_rank_ctx_t ctx)
{
    return dfccl_coll_run(DFCCL_COLL_BROADCAST, sendbuff, recvbuff, coll_id, callback,
                          callback_args, ctx);
}

dfccl_status_t dfcclQuery(int coll_id, dfccl_rank_ctx_t ctx)
{
    dfccl_status_t st;

    if (ctx == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclQuery: ctx is NULL");
    }
    pthread_mutex_lock(&ctx->lock);
    if (coll_id < 0 || coll_id >= ctx->cfg.max_colls ||
        ctx->colls[coll_id].state == DFCCL_COLL_FREE) {
        pthread_mutex_unlock(&ctx->lock);
        return dfccl_error(DFCCL_ERR_NOT_FOUND, "dfcclQuery: collective id %d is not "
                           "registered on this rank context", coll_id);
    }
    st = ctx->colls[coll_id].state == DFCCL_COLL_INFLIGHT ? DFCCL_INPROGRESS :
                                                            ctx->colls[coll_id].status;
    pthread_mutex_unlock(&ctx->lock);
    return st;
}

dfccl_status_t dfcclWait(int coll_id, int timeout_ms, dfccl_rank_ctx_t ctx)
{
    uint64_t deadline = 0;
    dfccl_status_t st;

    if (timeout_ms >= 0) {
        deadline = dfccl_time_ns() + (uint64_t)timeout_ms * 1000000ull;
    }
    for (;;) {
        uint64_t gen = __atomic_load_n(&ctx->kick_gen, __ATOMIC_ACQUIRE);

        st = dfcclQuery(coll_id, ctx);
        if (st != DFCCL_INPROGRESS) {
            return st;
        }
        if (deadline != 0 && dfccl_time_ns() > deadline) {
            return dfccl_error(DFCCL_ERR_TIMEOUT, "dfcclWait: collective %d (%s on group %s) "
                               "did not complete within %d ms", coll_id,
                               dfccl_coll_name(ctx->colls[coll_id].st.kind),
                               ctx->colls[coll_id].group->name, timeout_ms);
        }
        if (ctx->cfg.progress == DFCCL_PROGRESS_EXPLICIT) {
            if (dfccl_ctx_progress(ctx) == 0) {
                sched_yield();
            }
        } else {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 1000000;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            /* Completions bump kick_gen under cq_lock: no lost wake-up. */
            pthread_mutex_lock(&ctx->cq_lock);
            if (ctx->kick_gen == gen) {
                pthread_cond_timedwait(&ctx->cond, &ctx->cq_lock, &ts);
            }
            pthread_mutex_unlock(&ctx->cq_lock);
        }
    }
}
