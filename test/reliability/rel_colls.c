/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers shared by the reliability tests (see rel_colls.h): registration,
 * inputs and checks for every collective kind on the host or CUDA backend.
 */
#include "rel_colls.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mp.h"

static size_t rel_type_bytes(dfccl_datatype_t t)
{
    switch (t) {
    case DFCCL_UINT8:
        return 1;
    case DFCCL_INT32:
    case DFCCL_FLOAT32:
        return 4;
    default:
        return 8;
    }
}

static void rel_put(void *buf, dfccl_datatype_t t, size_t i, double v)
{
    switch (t) {
    case DFCCL_UINT8:
        ((uint8_t *)buf)[i] = (uint8_t)v;
        break;
    case DFCCL_INT32:
        ((int32_t *)buf)[i] = (int32_t)v;
        break;
    case DFCCL_INT64:
        ((int64_t *)buf)[i] = (int64_t)v;
        break;
    case DFCCL_FLOAT32:
        ((float *)buf)[i] = (float)v;
        break;
    default:
        ((double *)buf)[i] = v;
        break;
    }
}

static double rel_get(const void *buf, dfccl_datatype_t t, size_t i)
{
    switch (t) {
    case DFCCL_UINT8:
        return ((const uint8_t *)buf)[i];
    case DFCCL_INT32:
        return ((const int32_t *)buf)[i];
    case DFCCL_INT64:
        return (double)((const int64_t *)buf)[i];
    case DFCCL_FLOAT32:
        return ((const float *)buf)[i];
    default:
        return ((const double *)buf)[i];
    }
}

/* Input element i of rank r: a small integer (0..60). */
static double rel_value(const rel_coll_t *c, int r, size_t i, int round)
{
    return (double)(((size_t)r * 31u + i * 7u + (size_t)c->salt * 13u + (size_t)round) % 61u);
}

static double rel_reduce(const rel_coll_t *c, size_t i, int round)
{
    double acc = rel_value(c, 0, i, round);

    for (int r = 1; r < c->nranks; r++) {
        double v = rel_value(c, r, i, round);
        switch (c->op) {
        case DFCCL_MIN:
            acc = v < acc ? v : acc;
            break;
        case DFCCL_MAX:
            acc = v > acc ? v : acc;
            break;
        default:
            acc += v;
            break;
        }
    }
    return acc;
}

const char *rel_kind_name(rel_kind_t kind)
{
    static const char *const names[] = {"allreduce", "allgather", "reducescatter", "reduce",
                                        "broadcast"};
    return kind < REL_KINDS ? names[kind] : "?";
}

dfccl_status_t rel_coll_setup(rel_coll_t *c, dfccl_rank_ctx_t ctx, dfccl_group_t g, int rank,
                              int nranks, int priority)
{
    size_t eb = rel_type_bytes(c->type), n = c->count;
    dfccl_status_t st;

    c->rank       = rank;
    c->nranks     = nranks;
    c->send_bytes = n * eb;
    c->recv_bytes = n * eb;
    switch (c->kind) {
    case REL_ALLREDUCE:
        st = dfcclRegisterAllReduce(n, c->type, c->op, g, priority, &c->id);
        break;
    case REL_ALLGATHER:
        c->recv_bytes = n * eb * (size_t)nranks;
        st = dfcclRegisterAllGather(n, c->type, g, priority, &c->id);
        break;
    case REL_REDUCESCATTER:
        c->send_bytes = n * eb * (size_t)nranks;
        st = dfcclRegisterReduceScatter(n, c->type, c->op, g, priority, &c->id);
        break;
    case REL_REDUCE:
        st = dfcclRegisterReduce(n, c->type, c->op, c->root, g, priority, &c->id);
        break;
    default:
        st = dfcclRegisterBroadcast(n, c->type, c->root, g, priority, &c->id);
        break;
    }
    if (st != DFCCL_OK) {
        return st;
    }
    c->send = dfccl_test_malloc(ctx, c->send_bytes);
    c->recv = (c->in_place && c->kind != REL_ALLGATHER && c->kind != REL_REDUCESCATTER) ?
                  c->send : dfccl_test_malloc(ctx, c->recv_bytes);
    return DFCCL_OK;
}

void rel_coll_fill(rel_coll_t *c, dfccl_rank_ctx_t ctx, int round)
{
    size_t eb = rel_type_bytes(c->type), n = c->send_bytes / eb;
    void *h   = calloc(1, c->send_bytes + c->recv_bytes + 1);

    for (size_t i = 0; i < n; i++) {
        rel_put(h, c->type, i, rel_value(c, c->rank, i, round));
    }
    if (c->recv != c->send) {
        dfccl_test_put(ctx, c->recv, (char *)h + c->send_bytes, c->recv_bytes);
    }
    dfccl_test_put(ctx, c->send, h, c->send_bytes);
    free(h);
}

dfccl_status_t rel_coll_run(rel_coll_t *c, dfccl_rank_ctx_t ctx)
{
    switch (c->kind) {
    case REL_ALLREDUCE:
        return dfcclRunAllReduce(c->send, c->recv, c->id, NULL, NULL, ctx);
    case REL_ALLGATHER:
        return dfcclRunAllGather(c->send, c->recv, c->id, NULL, NULL, ctx);
    case REL_REDUCESCATTER:
        return dfcclRunReduceScatter(c->send, c->recv, c->id, NULL, NULL, ctx);
    case REL_REDUCE:
        return dfcclRunReduce(c->send, c->recv, c->id, NULL, NULL, ctx);
    default:
        return dfcclRunBroadcast(c->send, c->recv, c->id, NULL, NULL, ctx);
    }
}

int rel_coll_check(rel_coll_t *c, dfccl_rank_ctx_t ctx, int round)
{
    size_t eb = rel_type_bytes(c->type), n = c->recv_bytes / eb, bad = 0;
    void *h = malloc(c->recv_bytes + 1);

    if (c->kind == REL_REDUCE && c->rank != c->root) {
        free(h);
        return 0; /* only the root's output is defined */
    }
    dfccl_test_get(ctx, h, c->recv, c->recv_bytes);
    for (size_t i = 0; i < n; i++) {
        double e, got = rel_get(h, c->type, i);
        switch (c->kind) {
        case REL_ALLGATHER:
            e = rel_value(c, (int)(i / c->count), i % c->count, round);
            break;
        case REL_REDUCESCATTER:
            e = rel_reduce(c, (size_t)c->rank * c->count + i, round);
            break;
        case REL_BROADCAST:
            e = rel_value(c, c->root, i, round);
            break;
        default:
            e = rel_reduce(c, i, round);
            break;
        }
        if (got != e) {
            if (bad++ < 3) {
                fprintf(stderr, "%s id %d (count %zu, rank %d of %d, round %d): [%zu] = %g, "
                        "expected %g\n", rel_kind_name(c->kind), c->id, c->count, c->rank,
                        c->nranks, round, i, got, e);
            }
        }
    }
    free(h);
    return bad != 0;
}

dfccl_status_t rel_coll_teardown(rel_coll_t *c, dfccl_rank_ctx_t ctx)
{
    dfccl_status_t st = dfcclDeregister(c->id, ctx);

    if (c->recv != c->send) {
        dfccl_test_free(ctx, c->recv);
    }
    dfccl_test_free(ctx, c->send);
    c->send = c->recv = NULL;
    return st;
}
