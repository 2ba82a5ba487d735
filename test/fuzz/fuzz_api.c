/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for the argument checking of the native API. Each input
 * creates a rank context on the host backend with a group of one rank (its
 * out-of-band allgather is a memcpy), then drives a sequence of calls chosen
 * by the input: registrations with arbitrary count, type, op, root and
 * priority; runs of arbitrary ids with NULL or valid buffers of the
 * registered size (never wild pointers: the library cannot check those);
 * queries; waits with short timeouts; deregistrations; batches; progress;
 * synchronizations; statistics; calls with a NULL context; group creation
 * with bad arguments and group destruction. A small model of the context
 * (which ids are registered, of which kind and size, which may be in flight)
 * predicts the outcome of each call, and the target aborts when:
 *  - a call returns a status that dfccl.h does not document, or
 *    DFCCL_ERR_INTERNAL, or an error without a message;
 *  - a call with valid arguments fails, or one with invalid arguments
 *    succeeds;
 *  - a started collective does not complete within 10 s (a group of one
 *    rank needs nobody), or its result is wrong;
 *  - dfcclDestroy fails once every collective has been waited for.
 * Build and run it with scripts/fuzz.sh. FUZZ_API_NULL_CTX_WAIT=1 at build
 * time adds dfcclWait with a NULL context to the calls.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dfccl.h"

#define FZ_MAX_COLLS  16
#define FZ_MAX_BYTES  (256u << 10) /* larger collectives run only with NULL buffers */
#define FZ_MAX_BATCH  8

#ifndef FUZZ_API_NULL_CTX_WAIT
#define FUZZ_API_NULL_CTX_WAIT 0
#endif

#define FZ_NAME "fuzz_api"
#include "fuzz_assert.h"

typedef struct {
    const uint8_t *p;
    size_t         n;
} fz_in_t;

typedef struct {
    int    used;
    int    kind; /* 0 allreduce, 1 allgather, 2 reduce-scatter, 3 reduce, 4 broadcast */
    size_t count;
    int    type, op;
    int    inflight;   /* started and not seen complete */
    int    checkable;  /* the in-flight run has buffers whose result we know */
    void  *send, *recv;
    size_t bytes;
} fz_coll_t;

typedef struct {
    dfccl_rank_ctx_t ctx;
    dfccl_group_t    group;
    fz_coll_t        colls[FZ_MAX_COLLS];
    int              nregistered;
    int              batch;
    int              explicit_progress;
} fz_state_t;

static int fz_callbacks;

static uint8_t fz_u8(fz_in_t *in)
{
    uint8_t v = 0;
    if (in->n > 0) {
        v = in->p[0];
        in->p++;
        in->n--;
    }
    return v;
}

static uint64_t fz_bytes(fz_in_t *in, int nbytes)
{
    uint64_t v = 0;
    for (int i = 0; i < nbytes; i++) {
        v = (v << 8) | fz_u8(in);
    }
    return v;
}

static int fz_allgather(const void *sendbuf, void *recvbuf, size_t bytes, void *arg)
{
    memcpy(recvbuf, sendbuf, bytes);
    return 0;
}

static int fz_failing_allgather(const void *sendbuf, void *recvbuf, size_t bytes, void *arg)
{
    return -1;
}

static void fz_callback(int coll_id, dfccl_status_t status, void *arg)
{
    fz_callbacks++;
}

static size_t fz_type_bytes(int type)
{
    static const size_t b[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
    return (type >= 0 && type < DFCCL_DATATYPE_COUNT) ? b[type] : 0;
}

static int fz_is_float(int type)
{
    return type == DFCCL_FLOAT16 || type == DFCCL_BFLOAT16 || type == DFCCL_FLOAT32 ||
           type == DFCCL_FLOAT64;
}

/* Every status that dfccl.h documents, except DFCCL_ERR_INTERNAL (a bug). */
static void fz_check_status(dfccl_status_t st, const char *call)
{
    const char *msg;

    FZ_ASSERT(st >= DFCCL_ERR_TRANSPORT && st <= DFCCL_INPROGRESS,
              "%s returned %d, which dfccl.h does not document (or ERR_INTERNAL)", call,
              (int)st);
    FZ_ASSERT(dfcclGetErrorString(st) != NULL, "%s: no error string", call);
    if (st < 0) {
        msg = dfcclGetLastErrorMessage();
        FZ_ASSERT(msg != NULL && msg[0] != '\0', "%s returned %s without a message", call,
                  dfcclGetErrorString(st));
    }
}

/* An id: mostly one of the slots, sometimes anything. */
static int fz_pick_id(fz_in_t *in)
{
    uint8_t b = fz_u8(in);
    if (b < 224) {
        return b % FZ_MAX_COLLS;
    }
    return (int)(uint32_t)fz_bytes(in, 4);
}

static fz_coll_t *fz_slot(fz_state_t *s, int id)
{
    return (id >= 0 && id < FZ_MAX_COLLS && s->colls[id].used) ? &s->colls[id] : NULL;
}

static void fz_free_buffers(fz_coll_t *c)
{
    if (c->recv != c->send) {
        free(c->recv);
    }
    free(c->send);
    c->send = c->recv = NULL;
    c->checkable      = 0;
}

/* The inputs are byte patterns; with one rank every collective's result is
 * its input, whatever the op (the sum, min, max, product or average of
 * one value is that value). */
static void fz_check_result(const fz_coll_t *c)
{
    if (!c->checkable) {
        return;
    }
    for (size_t i = 0; i < c->bytes; i++) {
        uint8_t e = (uint8_t)(i * 13u + 7u);
        if (c->type == DFCCL_FLOAT16 || c->type == DFCCL_BFLOAT16 || c->type == DFCCL_FLOAT32 ||
            c->type == DFCCL_FLOAT64) {
            /* floats: the pattern may hold NaNs whose bits an op may
             * change; only allgather and broadcast move bytes untouched */
            if (c->kind != 1 && c->kind != 4) {
                return;
            }
        }
        FZ_ASSERT(((const uint8_t *)c->recv)[i] == e, "kind %d count %zu type %d: byte %zu is "
                  "%u, expected %u", c->kind, c->count, c->type, i,
                  ((const uint8_t *)c->recv)[i], e);
    }
}

/* Mark a collective seen complete. */
static void fz_completed(fz_coll_t *c, dfccl_status_t st)
{
    if (c->inflight && st == DFCCL_OK) {
        fz_check_result(c);
    }
    c->inflight = 0;
    fz_free_buffers(c);
}

static void fz_register(fz_state_t *s, fz_in_t *in)
{
    int kind     = fz_u8(in) % 5;
    uint8_t how  = fz_u8(in);
    int type     = (int)(int8_t)fz_u8(in) % 14;
    int op       = (int)(int8_t)fz_u8(in) % 8;
    int root     = (int)(int8_t)fz_u8(in) % 3;
    int priority = (int)(uint32_t)fz_bytes(in, 4);
    size_t count;
    int id = -12345, valid;
    size_t eb = fz_type_bytes(type);
    dfccl_status_t st;

    switch (how % 6) {
    case 0:
        count = 0;
        break;
    case 1:
        count = 1 + how / 6;
        break;
    case 2:
        count = (size_t)fz_bytes(in, 2);
        break;
    case 3:
        count = (size_t)fz_bytes(in, 3);
        break;
    case 4:
        count = (size_t)fz_bytes(in, 8);
        break;
    default:
        count = SIZE_MAX - (size_t)fz_u8(in);
        break;
    }
    switch (kind) {
    case 0:
        st = dfcclRegisterAllReduce(count, type, op, s->group, priority, &id);
        break;
    case 1:
        st = dfcclRegisterAllGather(count, type, s->group, priority, &id);
        break;
    case 2:
        st = dfcclRegisterReduceScatter(count, type, op, s->group, priority, &id);
        break;
    case 3:
        st = dfcclRegisterReduce(count, type, op, root, s->group, priority, &id);
        break;
    default:
        st = dfcclRegisterBroadcast(count, type, root, s->group, priority, &id);
        break;
    }
    fz_check_status(st, "dfcclRegister*");
    valid = eb != 0 && (count == 0 || count <= (1ull << 50) / eb);
    if (kind == 0 || kind == 2 || kind == 3) {
        valid = valid && op >= 0 && op < DFCCL_OP_COUNT && (op != DFCCL_AVG || fz_is_float(type));
    }
    if (kind == 3 || kind == 4) {
        valid = valid && root == 0;
    }
    if (!valid) {
        FZ_ASSERT(st != DFCCL_OK, "registration of kind %d count %zu type %d op %d root %d "
                  "succeeded", kind, count, type, op, root);
        return;
    }
    if (s->nregistered == FZ_MAX_COLLS) {
        FZ_ASSERT(st == DFCCL_ERR_NO_MEMORY, "registration beyond max_colls: %s",
                  dfcclGetErrorString(st));
        return;
    }
    FZ_ASSERT(st == DFCCL_OK, "valid registration (kind %d count %zu type %d op %d) failed: "
              "%s: %s", kind, count, type, op, dfcclGetErrorString(st),
              dfcclGetLastErrorMessage());
    FZ_ASSERT(id >= 0 && id < FZ_MAX_COLLS && !s->colls[id].used, "new id %d", id);
    memset(&s->colls[id], 0, sizeof(s->colls[id]));
    s->colls[id].used  = 1;
    s->colls[id].kind  = kind;
    s->colls[id].count = count;
    s->colls[id].type  = type;
    s->colls[id].op    = op;
    s->nregistered++;
}

static void fz_run(fz_state_t *s, fz_in_t *in)
{
    int id        = fz_pick_id(in);
    int kind      = fz_u8(in) % 8 < 6 ? -1 : fz_u8(in) % 5; /* mostly the right call */
    uint8_t bufs  = fz_u8(in);
    int with_cb   = bufs & 0x80;
    fz_coll_t *c  = fz_slot(s, id);
    void *send = NULL, *recv = NULL;
    size_t bytes = 0;
    int checkable = 0;
    dfccl_status_t st;

    if (kind < 0) {
        kind = c != NULL ? c->kind : 0;
    }
    if (c != NULL && c->count <= FZ_MAX_BYTES / fz_type_bytes(c->type)) {
        bytes = c->count * fz_type_bytes(c->type); /* one rank: every buffer this size */
        switch (bufs % 5) {
        case 0: /* NULL send */
            recv = malloc(bytes + 1);
            break;
        case 1: /* NULL receive */
            send = malloc(bytes + 1);
            break;
        case 2: /* both NULL */
            break;
        case 3: /* in place */
            send = recv = malloc(bytes + 1);
            break;
        default:
            send = malloc(bytes + 1);
            recv = malloc(bytes + 1);
            break;
        }
        if (send != NULL) {
            for (size_t i = 0; i < bytes; i++) {
                ((uint8_t *)send)[i] = (uint8_t)(i * 13u + 7u);
            }
        }
        if (recv != NULL && recv != send) {
            memset(recv, 0xa5, bytes);
        }
        checkable = send != NULL && recv != NULL;
    }
    switch (kind) {
    case 0:
        st = dfcclRunAllReduce(send, recv, id, with_cb ? fz_callback : NULL, NULL, s->ctx);
        break;
    case 1:
        st = dfcclRunAllGather(send, recv, id, with_cb ? fz_callback : NULL, NULL, s->ctx);
        break;
    case 2:
        st = dfcclRunReduceScatter(send, recv, id, with_cb ? fz_callback : NULL, NULL, s->ctx);
        break;
    case 3:
        st = dfcclRunReduce(send, recv, id, with_cb ? fz_callback : NULL, NULL, s->ctx);
        break;
    default:
        st = dfcclRunBroadcast(send, recv, id, with_cb ? fz_callback : NULL, NULL, s->ctx);
        break;
    }
    fz_check_status(st, "dfcclRun*");
    if (c == NULL) {
        FZ_ASSERT(st == DFCCL_ERR_NOT_FOUND, "run of unregistered id %d: %s", id,
                  dfcclGetErrorString(st));
    } else if (kind != c->kind) {
        FZ_ASSERT(st == DFCCL_ERR_INVALID_ARG, "run of id %d (kind %d) as kind %d: %s", id,
                  c->kind, kind, dfcclGetErrorString(st));
    } else if (c->count > 0 && (send == NULL || recv == NULL) && !(c->inflight && st == DFCCL_ERR_BUSY)) {
        FZ_ASSERT(st == DFCCL_ERR_INVALID_ARG, "run of id %d (count %zu) with a NULL buffer: %s",
                  id, c->count, dfcclGetErrorString(st));
    } else if (!c->inflight) {
        FZ_ASSERT(st == DFCCL_OK, "valid run of id %d failed: %s: %s", id,
                  dfcclGetErrorString(st), dfcclGetLastErrorMessage());
    } else {
        FZ_ASSERT(st == DFCCL_OK || st == DFCCL_ERR_BUSY, "run of id %d in flight: %s", id,
                  dfcclGetErrorString(st));
    }
    if (st == DFCCL_OK) {
        /* the previous run (if any) has completed: its buffers can go */
        fz_free_buffers(c);
        c->inflight  = 1;
        c->send      = send;
        c->recv      = recv;
        c->bytes     = bytes;
        c->checkable = checkable && c->count > 0;
        return;
    }
    if (recv != send) {
        free(recv);
    }
    free(send);
}

static void fz_query_or_wait(fz_state_t *s, fz_in_t *in, int wait)
{
    static const int timeouts[] = {0, 1, 2, 10, -1};
    int id        = fz_pick_id(in);
    int timeout   = timeouts[fz_u8(in) % 5];
    fz_coll_t *c  = fz_slot(s, id);
    dfccl_status_t st;

    if (timeout < 0 && s->batch > 0) {
        timeout = 2; /* a run held in an open batch never completes */
    }
    st = wait ? dfcclWait(id, timeout, s->ctx) : dfcclQuery(id, s->ctx);
    fz_check_status(st, wait ? "dfcclWait" : "dfcclQuery");
    if (c == NULL) {
        FZ_ASSERT(st == DFCCL_ERR_NOT_FOUND, "query/wait of unregistered id %d: %s", id,
                  dfcclGetErrorString(st));
        return;
    }
    if (!c->inflight) {
        FZ_ASSERT(st != DFCCL_INPROGRESS && st != DFCCL_ERR_TIMEOUT,
                  "query/wait of id %d not in flight: %s", id, dfcclGetErrorString(st));
    }
    if (wait) {
        FZ_ASSERT(st != DFCCL_INPROGRESS, "dfcclWait returned DFCCL_INPROGRESS");
        FZ_ASSERT(timeout >= 0 || st != DFCCL_ERR_TIMEOUT, "dfcclWait(-1) timed out");
    }
    if (st != DFCCL_INPROGRESS && st != DFCCL_ERR_TIMEOUT) {
        FZ_ASSERT(st == DFCCL_OK, "collective %d completed with %s: %s", id,
                  dfcclGetErrorString(st), dfcclGetLastErrorMessage());
        fz_completed(c, st);
    }
}

static void fz_deregister(fz_state_t *s, fz_in_t *in)
{
    int id       = fz_pick_id(in);
    fz_coll_t *c = fz_slot(s, id);
    dfccl_status_t st = dfcclDeregister(id, s->ctx);

    fz_check_status(st, "dfcclDeregister");
    if (c == NULL) {
        FZ_ASSERT(st == DFCCL_ERR_NOT_FOUND, "deregister of unregistered id %d: %s", id,
                  dfcclGetErrorString(st));
        return;
    }
    if (c->inflight) {
        FZ_ASSERT(st == DFCCL_OK || st == DFCCL_ERR_BUSY, "deregister of id %d in flight: %s",
                  id, dfcclGetErrorString(st));
    } else {
        FZ_ASSERT(st == DFCCL_OK, "deregister of idle id %d: %s", id, dfcclGetErrorString(st));
    }
    if (st == DFCCL_OK) {
        /* it had completed: its result is still in the buffers */
        fz_completed(c, DFCCL_OK);
        c->used = 0;
        s->nregistered--;
    }
}

static void fz_null_ctx(fz_in_t *in)
{
    int n = 0, id = fz_pick_id(in);
    dfccl_stats_t stats;
    dfccl_status_t st;

    switch (fz_u8(in) % (FUZZ_API_NULL_CTX_WAIT ? 10 : 9)) {
    case 0:
        st = dfcclRunAllReduce(NULL, NULL, id, NULL, NULL, NULL);
        break;
    case 1:
        st = dfcclQuery(id, NULL);
        break;
    case 2:
        st = dfcclDeregister(id, NULL);
        break;
    case 3:
        st = dfcclBatchStart(NULL);
        break;
    case 4:
        st = dfcclBatchEnd(NULL);
        break;
    case 5:
        st = dfcclProgress(NULL, &n);
        break;
    case 6:
        st = dfcclSynchronize(NULL);
        break;
    case 7:
        st = dfcclGetStats(NULL, &stats);
        break;
    case 8:
        st = dfcclDestroy(NULL);
        break;
    default:
        st = dfcclWait(id, 0, NULL);
        break;
    }
    fz_check_status(st, "a call with a NULL context");
    FZ_ASSERT(st == DFCCL_ERR_INVALID_ARG, "a call with a NULL context returned %s",
              dfcclGetErrorString(st));
}

static void fz_group_calls(fz_state_t *s, fz_in_t *in)
{
    dfccl_group_t g = NULL;
    uint8_t what    = fz_u8(in);
    int nranks      = (int)(int8_t)fz_u8(in);
    int rank        = (int)(int8_t)fz_u8(in);
    dfccl_status_t st;

    switch (what % 4) {
    case 0: /* bad rank or size */
        if (nranks == 1 && rank == 0) {
            nranks = 0;
        }
        st = dfcclGroupCreate(s->ctx, nranks, rank, fz_allgather, NULL, "fuzz-bad", &g);
        fz_check_status(st, "dfcclGroupCreate");
        /* nranks > 1 with a memcpy allgather: the other ranks' blocks are
         * garbage and the bootstrap must refuse them */
        FZ_ASSERT(st != DFCCL_OK, "dfcclGroupCreate(%d, %d) with one process succeeded", nranks,
                  rank);
        break;
    case 1:
        st = dfcclGroupCreate(s->ctx, 1, 0, NULL, NULL, "fuzz", &g);
        fz_check_status(st, "dfcclGroupCreate");
        FZ_ASSERT(st == DFCCL_ERR_INVALID_ARG, "NULL allgather: %s", dfcclGetErrorString(st));
        break;
    case 2:
        st = dfcclGroupCreate(s->ctx, 1, 0, fz_failing_allgather, NULL, NULL, &g);
        fz_check_status(st, "dfcclGroupCreate");
        FZ_ASSERT(st == DFCCL_ERR_BOOTSTRAP, "failing allgather: %s", dfcclGetErrorString(st));
        break;
    default: /* destroy the group and make a new one */
        st = dfcclGroupDestroy(s->group);
        fz_check_status(st, "dfcclGroupDestroy");
        if (s->nregistered > 0) {
            FZ_ASSERT(st == DFCCL_ERR_BUSY, "dfcclGroupDestroy with %d registered: %s",
                      s->nregistered, dfcclGetErrorString(st));
            break;
        }
        FZ_ASSERT(st == DFCCL_OK, "dfcclGroupDestroy: %s", dfcclGetErrorString(st));
        st = dfcclGroupCreate(s->ctx, 1, 0, fz_allgather, NULL, "fuzz", &s->group);
        FZ_ASSERT(st == DFCCL_OK, "dfcclGroupCreate: %s", dfcclGetLastErrorMessage());
        break;
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    setenv("DFCCL_BACKEND", "host", 1);
    setenv("DFCCL_VERBOSE", "-1", 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_in_t in = {data, size};
    fz_state_t s;
    dfccl_config_t cfg;
    dfccl_status_t st;
    dfccl_stats_t stats;
    int n;

    memset(&s, 0, sizeof(s));
    FZ_ASSERT(dfcclConfigInit(&cfg) == DFCCL_OK, "dfcclConfigInit: %s",
              dfcclGetLastErrorMessage());
    cfg.max_colls         = FZ_MAX_COLLS;
    cfg.verbose           = -1;
    s.explicit_progress   = fz_u8(&in) & 1;
    cfg.progress          = s.explicit_progress ? DFCCL_PROGRESS_EXPLICIT : DFCCL_PROGRESS_THREAD;
    st = dfcclInit(&cfg, &s.ctx);
    FZ_ASSERT(st == DFCCL_OK, "dfcclInit: %s", dfcclGetLastErrorMessage());
    st = dfcclGroupCreate(s.ctx, 1, 0, fz_allgather, NULL, "fuzz", &s.group);
    FZ_ASSERT(st == DFCCL_OK, "dfcclGroupCreate: %s", dfcclGetLastErrorMessage());

    for (int calls = 0; in.n > 0 && calls < 256; calls++) {
        switch (fz_u8(&in) % 13) {
        case 0:
        case 1:
            fz_register(&s, &in);
            break;
        case 2:
        case 3:
            fz_run(&s, &in);
            break;
        case 4:
            fz_query_or_wait(&s, &in, 0);
            break;
        case 5:
            fz_query_or_wait(&s, &in, 1);
            break;
        case 6:
            fz_deregister(&s, &in);
            break;
        case 7:
            if (s.batch < FZ_MAX_BATCH) {
                st = dfcclBatchStart(s.ctx);
                fz_check_status(st, "dfcclBatchStart");
                FZ_ASSERT(st == DFCCL_OK, "dfcclBatchStart: %s", dfcclGetErrorString(st));
                s.batch++;
            }
            break;
        case 8:
            st = dfcclBatchEnd(s.ctx);
            fz_check_status(st, "dfcclBatchEnd");
            FZ_ASSERT(s.batch > 0 ? st == DFCCL_OK : st == DFCCL_ERR_INVALID_ARG,
                      "dfcclBatchEnd at depth %d: %s", s.batch, dfcclGetErrorString(st));
            if (s.batch > 0) {
                s.batch--;
            }
            break;
        case 9:
            st = dfcclProgress(s.ctx, fz_u8(&in) & 1 ? &n : NULL);
            fz_check_status(st, "dfcclProgress");
            FZ_ASSERT(st == DFCCL_OK, "dfcclProgress: %s", dfcclGetErrorString(st));
            break;
        case 10:
            if (fz_u8(&in) & 1) {
                st = dfcclSynchronize(s.ctx);
                fz_check_status(st, "dfcclSynchronize");
                FZ_ASSERT(st == DFCCL_OK, "dfcclSynchronize: %s", dfcclGetErrorString(st));
            } else {
                st = dfcclGetStats(s.ctx, &stats);
                FZ_ASSERT(st == DFCCL_OK, "dfcclGetStats: %s", dfcclGetErrorString(st));
                FZ_ASSERT(stats.registered == s.nregistered, "stats say %d registered, the "
                          "model %d", stats.registered, s.nregistered);
            }
            break;
        case 11:
            fz_null_ctx(&in);
            break;
        default:
            fz_group_calls(&s, &in);
            break;
        }
    }

    /* Close the batches, wait for everything started, then destroy. */
    for (; s.batch > 0; s.batch--) {
        FZ_ASSERT(dfcclBatchEnd(s.ctx) == DFCCL_OK, "dfcclBatchEnd");
    }
    for (int id = 0; id < FZ_MAX_COLLS; id++) {
        fz_coll_t *c = &s.colls[id];
        if (c->used && c->inflight) {
            st = dfcclWait(id, 10000, s.ctx);
            FZ_ASSERT(st == DFCCL_OK, "final wait of id %d (kind %d, count %zu): %s: %s", id,
                      c->kind, c->count, dfcclGetErrorString(st), dfcclGetLastErrorMessage());
            fz_completed(c, st);
        }
    }
    st = dfcclDestroy(s.ctx);
    FZ_ASSERT(st == DFCCL_OK, "dfcclDestroy: %s: %s", dfcclGetErrorString(st),
              dfcclGetLastErrorMessage());
    for (int id = 0; id < FZ_MAX_COLLS; id++) {
        fz_free_buffers(&s.colls[id]);
    }
    return 0;
}
