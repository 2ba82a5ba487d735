/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Correctness of every collective the dfccl coll component takes, under
 * mpirun: allreduce, allgather, reduce_scatter_block, reduce_scatter (equal,
 * unequal and zero counts), reduce and bcast; each blocking, nonblocking and
 * persistent (MPIX_*_init + MPI_Start); in place and out of
 * place; over every predefined type dfccl maps and SUM, PROD, MIN, MAX; at
 * a few sizes. It also runs calls dfccl must hand to the previous module
 * (a type and an op it does not have, a derived type) and checks those too.
 * The same program checks the fallback path: run without coll_dfccl_backend
 * =host, every call must give the same results through the other components.
 * With --device (a CUDA build), every collective runs on device copies of
 * its buffers, for the GPU lane; the fallback calls then check the staging
 * of device buffers through host memory. The GPU is chosen after MPI_Init
 * from the node-local rank, as MPI programs choose it. Exit status 0 when
 * every check passed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "test_util.h"

typedef struct {
    MPI_Datatype dt;
    const char  *name;
    size_t       size;
    int          is_float;
} type_t;

static type_t types[] = {
    {0, "char", 1, 0},          {0, "signed char", 1, 0}, {0, "unsigned char", 1, 0},
    {0, "byte", 1, 0},          {0, "int", sizeof(int), 0}, {0, "unsigned", sizeof(unsigned), 0},
    {0, "long", sizeof(long), 0}, {0, "int64_t", 8, 0}, {0, "uint64_t", 8, 0},
    {0, "float", 4, 1},         {0, "double", 8, 1},
};
#define NTYPES ((int)(sizeof(types) / sizeof(types[0])))

static MPI_Op ops[4];
static const char *const op_names[] = {"sum", "prod", "min", "max"};

static int rank, size, checks;

/* With --device (test_device), the buffer a collective gets is a device
 * copy of the host buffer `h` (filled on the host); dev_back copies a
 * result back and frees the copy, dev_drop only frees it. Without --device
 * they pass `h` on. */
static void *dev_in(void *h, size_t bytes)
{
    void *d = h;

    if (test_device) {
        d = test_buf_new(bytes);
        test_put(d, h, bytes);
    }
    return d;
}

static void dev_back(void *h, void *d, size_t bytes)
{
    if (test_device) {
        test_get(h, d, bytes);
        test_buf_free(d);
    }
}

static void dev_drop(void *d)
{
    if (test_device) {
        test_buf_free(d);
    }
}

static void types_init(void)
{
    MPI_Datatype dts[] = {MPI_CHAR, MPI_SIGNED_CHAR, MPI_UNSIGNED_CHAR, MPI_BYTE, MPI_INT,
                          MPI_UNSIGNED, MPI_LONG, MPI_INT64_T, MPI_UINT64_T, MPI_FLOAT,
                          MPI_DOUBLE};
    for (int i = 0; i < NTYPES; i++) {
        types[i].dt = dts[i];
    }
    ops[0] = MPI_SUM;
    ops[1] = MPI_PROD;
    ops[2] = MPI_MIN;
    ops[3] = MPI_MAX;
}

/* Element i of rank r: 1 or 2, so that products of 4 ranks fit in int8. */
static double value(int r, size_t i)
{
    return (double)(1 + (int)((r + i) % 2));
}

static void put(const type_t *t, void *buf, size_t i, double v)
{
    switch (t->size * 2 + t->is_float) {
    case 2:  ((int8_t *)buf)[i] = (int8_t)v; break;
    case 8:  ((int32_t *)buf)[i] = (int32_t)v; break;
    case 16: ((int64_t *)buf)[i] = (int64_t)v; break;
    case 9:  ((float *)buf)[i] = (float)v; break;
    case 17: ((double *)buf)[i] = v; break;
    }
}

static double get(const type_t *t, const void *buf, size_t i)
{
    switch (t->size * 2 + t->is_float) {
    case 2:  return ((const int8_t *)buf)[i];
    case 8:  return ((const int32_t *)buf)[i];
    case 16: return (double)((const int64_t *)buf)[i];
    case 9:  return ((const float *)buf)[i];
    case 17: return ((const double *)buf)[i];
    }
    return -1;
}

static double reduce_all(int op, size_t i)
{
    double acc = value(0, i);
    for (int r = 1; r < size; r++) {
        double v = value(r, i);
        acc      = op == 0 ? acc + v : op == 1 ? acc * v : op == 2 ? (v < acc ? v : acc)
                                                              : (v > acc ? v : acc);
    }
    return acc;
}

static void check(int ok, const char *what, const char *coll, int form, int inplace,
                  const char *tname, const char *oname, size_t count, size_t at, double got,
                  double want)
{
    char call[160];

    checks++;
    if (!ok) {
        snprintf(call, sizeof(call), "%s %s %s%s %s %s count %zu", what, coll, form_names[form],
                 inplace ? " in-place" : "", tname, oname ? oname : "", count);
        test_fail(call, "element %zu is %g, expected %g", at, got, want);
    }
}

/* Run the request-producing form (or the blocking call) and wait. */
#define RUN_FORMS(_form, _blocking, _nonblocking, _persistent)                 \
    do {                                                                       \
        MPI_Request _req;                                                      \
        if ((_form) == BLOCKING) {                                             \
            _blocking;                                                         \
        } else if ((_form) == NONBLOCKING) {                                   \
            _nonblocking;                                                      \
            MPI_Wait(&_req, MPI_STATUS_IGNORE);                                \
        } else {                                                               \
            _persistent;                                                       \
            MPI_Start(&_req);                                                  \
            MPI_Wait(&_req, MPI_STATUS_IGNORE);                                \
            MPI_Request_free(&_req);                                           \
        }                                                                      \
    } while (0)

static void test_allreduce(const type_t *t, int op, size_t count, int form, int inplace)
{
    char *s = malloc(count * t->size + 1), *r = malloc(count * t->size + 1);
    int n   = (int)count;

    for (size_t i = 0; i < count; i++) {
        put(t, s, i, value(rank, i));
        put(t, r, i, inplace ? value(rank, i) : -1);
    }
    char *ds = dev_in(s, count * t->size + 1), *dr = dev_in(r, count * t->size + 1);
    const void *sb = inplace ? MPI_IN_PLACE : ds;
    RUN_FORMS(form, MPI_Allreduce(sb, dr, n, t->dt, ops[op], MPI_COMM_WORLD),
              MPI_Iallreduce(sb, dr, n, t->dt, ops[op], MPI_COMM_WORLD, &_req),
              MPIX_Allreduce_init(sb, dr, n, t->dt, ops[op], MPI_COMM_WORLD, MPI_INFO_NULL,
                                  &_req));
    dev_drop(ds);
    dev_back(r, dr, count * t->size + 1);
    for (size_t i = 0; i < count; i++) {
        double want = reduce_all(op, i), got = get(t, r, i);
        check(got == want, "value", "allreduce", form, inplace, t->name, op_names[op], count,
              i, got, want);
        if (got != want) {
            break;
        }
    }
    free(s);
    free(r);
}

static void test_reduce(const type_t *t, int op, size_t count, int form, int inplace, int root)
{
    char *s = malloc(count * t->size + 1), *r = malloc(count * t->size + 1);
    int n   = (int)count;
    int ip  = inplace && rank == root;

    for (size_t i = 0; i < count; i++) {
        put(t, s, i, value(rank, i));
        put(t, r, i, ip ? value(rank, i) : -1);
    }
    char *ds = dev_in(s, count * t->size + 1), *dr = dev_in(r, count * t->size + 1);
    const void *sb = ip ? MPI_IN_PLACE : ds;
    RUN_FORMS(form, MPI_Reduce(sb, dr, n, t->dt, ops[op], root, MPI_COMM_WORLD),
              MPI_Ireduce(sb, dr, n, t->dt, ops[op], root, MPI_COMM_WORLD, &_req),
              MPIX_Reduce_init(sb, dr, n, t->dt, ops[op], root, MPI_COMM_WORLD, MPI_INFO_NULL,
                               &_req));
    dev_drop(ds);
    dev_back(r, dr, count * t->size + 1);
    for (size_t i = 0; rank == root && i < count; i++) {
        double want = reduce_all(op, i), got = get(t, r, i);
        check(got == want, "value", "reduce", form, inplace, t->name, op_names[op], count, i,
              got, want);
        if (got != want) {
            break;
        }
    }
    free(s);
    free(r);
}

static void test_rsb(const type_t *t, int op, size_t count, int form, int inplace)
{
    size_t total = count * size;
    char *s = malloc(total * t->size + 1), *r = malloc(total * t->size + 1);
    int n   = (int)count;

    for (size_t i = 0; i < total; i++) {
        put(t, s, i, value(rank, i));
        put(t, r, i, inplace ? value(rank, i) : -1);
    }
    char *ds = dev_in(s, total * t->size + 1), *dr = dev_in(r, total * t->size + 1);
    const void *sb = inplace ? MPI_IN_PLACE : ds;
    RUN_FORMS(form, MPI_Reduce_scatter_block(sb, dr, n, t->dt, ops[op], MPI_COMM_WORLD),
              MPI_Ireduce_scatter_block(sb, dr, n, t->dt, ops[op], MPI_COMM_WORLD, &_req),
              MPIX_Reduce_scatter_block_init(sb, dr, n, t->dt, ops[op], MPI_COMM_WORLD,
                                             MPI_INFO_NULL, &_req));
    dev_drop(ds);
    dev_back(r, dr, total * t->size + 1);
    for (size_t i = 0; i < count; i++) {
        double want = reduce_all(op, rank * count + i), got = get(t, r, i);
        check(got == want, "value", "reduce_scatter_block", form, inplace, t->name,
              op_names[op], count, i, got, want);
        if (got != want) {
            break;
        }
    }
    free(s);
    free(r);
}

/* unequal: rank i receives (i + shift) % 3 * count / 2 elements (some zero) */
static void test_rs(const type_t *t, int op, size_t count, int form, int inplace, int unequal)
{
    int *counts = malloc(size * sizeof(int));
    size_t total = 0, displ = 0;

    for (int i = 0; i < size; i++) {
        counts[i] = unequal ? (int)(((i + 1) % 3) * count / 2) : (int)count;
        if (i == rank) {
            displ = total;
        }
        total += counts[i];
    }
    char *s = malloc(total * t->size + 1), *r = malloc(total * t->size + 1);
    for (size_t i = 0; i < total; i++) {
        put(t, s, i, value(rank, i));
        put(t, r, i, inplace ? value(rank, i) : -1);
    }
    char *ds = dev_in(s, total * t->size + 1), *dr = dev_in(r, total * t->size + 1);
    const void *sb = inplace ? MPI_IN_PLACE : ds;
    RUN_FORMS(form, MPI_Reduce_scatter(sb, dr, counts, t->dt, ops[op], MPI_COMM_WORLD),
              MPI_Ireduce_scatter(sb, dr, counts, t->dt, ops[op], MPI_COMM_WORLD, &_req),
              MPIX_Reduce_scatter_init(sb, dr, counts, t->dt, ops[op], MPI_COMM_WORLD,
                                       MPI_INFO_NULL, &_req));
    dev_drop(ds);
    dev_back(r, dr, total * t->size + 1);
    for (int i = 0; i < counts[rank]; i++) {
        double want = reduce_all(op, displ + i), got = get(t, r, i);
        check(got == want, unequal ? "unequal" : "value", "reduce_scatter", form, inplace,
              t->name, op_names[op], count, i, got, want);
        if (got != want) {
            break;
        }
    }
    free(counts);
    free(s);
    free(r);
}

static void test_allgather(const type_t *t, size_t count, int form, int inplace)
{
    size_t total = count * size;
    char *s = malloc(count * t->size + 1), *r = malloc(total * t->size + 1);
    int n   = (int)count;

    for (size_t i = 0; i < count; i++) {
        put(t, s, i, (double)((rank * 7 + i) % 100));
    }
    for (size_t i = 0; i < total; i++) {
        put(t, r, i, -1);
    }
    if (inplace) {
        memcpy(r + rank * count * t->size, s, count * t->size);
    }
    char *ds = dev_in(s, count * t->size + 1), *dr = dev_in(r, total * t->size + 1);
    const void *sb = inplace ? MPI_IN_PLACE : ds;
    int sn = inplace ? 0 : n;
    RUN_FORMS(form, MPI_Allgather(sb, sn, t->dt, dr, n, t->dt, MPI_COMM_WORLD),
              MPI_Iallgather(sb, sn, t->dt, dr, n, t->dt, MPI_COMM_WORLD, &_req),
              MPIX_Allgather_init(sb, sn, t->dt, dr, n, t->dt, MPI_COMM_WORLD, MPI_INFO_NULL,
                                  &_req));
    dev_drop(ds);
    dev_back(r, dr, total * t->size + 1);
    for (size_t i = 0; i < total; i++) {
        double want = (double)(((i / count) * 7 + i % count) % 100), got = get(t, r, i);
        check(got == want, "value", "allgather", form, inplace, t->name, NULL, count, i, got,
              want);
        if (got != want) {
            break;
        }
    }
    free(s);
    free(r);
}

static void test_bcast(const type_t *t, size_t count, int form, int root)
{
    char *b = malloc(count * t->size + 1);
    int n   = (int)count;

    for (size_t i = 0; i < count; i++) {
        put(t, b, i, rank == root ? (double)((i * 3 + root) % 100) : -1);
    }
    char *db = dev_in(b, count * t->size + 1);
    RUN_FORMS(form, MPI_Bcast(db, n, t->dt, root, MPI_COMM_WORLD),
              MPI_Ibcast(db, n, t->dt, root, MPI_COMM_WORLD, &_req),
              MPIX_Bcast_init(db, n, t->dt, root, MPI_COMM_WORLD, MPI_INFO_NULL, &_req));
    dev_back(b, db, count * t->size + 1);
    for (size_t i = 0; i < count; i++) {
        double want = (double)((i * 3 + root) % 100), got = get(t, b, i);
        check(got == want, "value", "bcast", form, 0, t->name, NULL, count, i, got, want);
        if (got != want) {
            break;
        }
    }
    free(b);
}

/* Calls dfccl must hand on: a type it lacks, a user op, a derived type. */
static void user_max(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    for (int i = 0; i < *len; i++) {
        int a = ((int *)in)[i], *b = &((int *)inout)[i];
        *b    = a > *b ? a : *b;
    }
}

static void test_fallbacks(void)
{
    short s[5], r[5];
    int si[6], ri[6];
    MPI_Op uop;
    MPI_Datatype pair;

    for (int i = 0; i < 5; i++) {
        s[i] = (short)(rank + i);
    }
    {
        short *ds = dev_in(s, sizeof(s)), *dr = dev_in(r, sizeof(r));
        MPI_Allreduce(ds, dr, 5, MPI_SHORT, MPI_SUM, MPI_COMM_WORLD);
        dev_drop(ds);
        dev_back(r, dr, sizeof(r));
    }
    for (int i = 0; i < 5; i++) {
        double want = (double)(size * (size - 1) / 2 + size * i);
        check(r[i] == want, "fallback", "allreduce short", 0, 0, "short", "sum", 5, i, r[i],
              want);
    }
    MPI_Op_create(user_max, 1, &uop);
    for (int i = 0; i < 6; i++) {
        si[i] = rank * 10 + i;
    }
    {
        int *ds = dev_in(si, sizeof(si)), *dr = dev_in(ri, sizeof(ri));
        MPI_Allreduce(ds, dr, 6, MPI_INT, uop, MPI_COMM_WORLD);
        dev_drop(ds);
        dev_back(ri, dr, sizeof(ri));
    }
    for (int i = 0; i < 6; i++) {
        check(ri[i] == (size - 1) * 10 + i, "fallback", "allreduce user-op", 0, 0, "int",
              "user", 6, i, ri[i], (size - 1) * 10 + i);
    }
    MPI_Op_free(&uop);
    MPI_Type_vector(3, 1, 2, MPI_INT, &pair); /* non-contiguous */
    MPI_Type_commit(&pair);
    for (int i = 0; i < 6; i++) {
        si[i] = rank == 0 ? 100 + i : -1;
    }
    {
        int *db = dev_in(si, sizeof(si));
        MPI_Bcast(db, 1, pair, 0, MPI_COMM_WORLD);
        dev_back(si, db, sizeof(si));
    }
    for (int i = 0; i < 6; i += 2) {
        check(si[i] == 100 + i, "fallback", "bcast vector", 0, 0, "vector", NULL, 1, i, si[i],
              100 + i);
    }
    MPI_Type_free(&pair);
}

/*
 * A blocking collective keeps Open MPI's other transfers moving: rank 1
 * starts a send too large to go eagerly (the rest of its data leaves only
 * when rank 1 itself makes progress), then enters a blocking allreduce
 * that rank 0 joins only once that message has arrived. A blocking call
 * that did not drive Open MPI's progress while it waits would hang here.
 */
static void test_progress(void)
{
    enum { BIG = 1 << 20 };
    char *msg = calloc(BIG, 1);
    double v = rank + 1.0, sum = 0.0;
    MPI_Request req = MPI_REQUEST_NULL;

    if (msg == NULL) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (size == 1) {
        /* nothing to receive: the allreduce alone */
    } else if (rank == 1) {
        memset(msg, 7, BIG);
        MPI_Isend(msg, BIG, MPI_CHAR, 0, 77, MPI_COMM_WORLD, &req);
    } else if (rank == 0) {
        MPI_Recv(msg, BIG, MPI_CHAR, 1, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        check(msg[0] == 7 && msg[BIG - 1] == 7, "p2p during", "allreduce", BLOCKING, 0, "char",
              NULL, BIG, BIG - 1, msg[BIG - 1], 7);
    }
    {
        double *ds = dev_in(&v, sizeof(v)), *dr = dev_in(&sum, sizeof(sum));
        MPI_Allreduce(ds, dr, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        dev_drop(ds);
        dev_back(&sum, dr, sizeof(sum));
    }
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    check(sum == size * (size + 1) / 2.0, "value after p2p", "allreduce", BLOCKING, 0, "double",
          "sum", 1, 0, sum, size * (size + 1) / 2.0);
    free(msg);
}

/*
 * --device: a synchronous copy or memset right before the call, with no
 * synchronization of the test's own. cudaMemcpy from pageable memory and
 * cudaMemset may return before their data lands; the component makes them
 * complete on return (CU_POINTER_ATTRIBUTE_SYNC_MEMOPS on the buffers) and
 * waits for CUDA's default stream on a buffer's first call. Rounds with new
 * values in the same buffers, each result checked whole.
 */
static void test_copies_in_flight(void)
{
#ifdef HAVE_CUDART
    enum { N = 4 << 20, ROUNDS = 6 };
    int *h = malloc((size_t)N * sizeof(int)), *ds = NULL, *dr = NULL;
    unsigned char *h8 = malloc(N), *bs = NULL, *br = NULL;

    if (!test_device) {
        free(h);
        free(h8);
        return;
    }
    if (h == NULL || h8 == NULL ||
        cudaMalloc((void **)&ds, (size_t)N * sizeof(int)) != cudaSuccess ||
        cudaMalloc((void **)&dr, (size_t)N * sizeof(int)) != cudaSuccess ||
        cudaMalloc((void **)&bs, N) != cudaSuccess || cudaMalloc((void **)&br, N) != cudaSuccess) {
        fprintf(stderr, "rank %d: allocations for the copies-in-flight test failed\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int round = 0; round < ROUNDS; round++) {
        for (size_t i = 0; i < N; i++) {
            h[i] = round * 7 + rank + (int)(i % 13);
        }
        cudaMemcpy(ds, h, (size_t)N * sizeof(int), cudaMemcpyHostToDevice);
        MPI_Allreduce(ds, dr, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        cudaMemcpy(h, dr, (size_t)N * sizeof(int), cudaMemcpyDeviceToHost);
        for (size_t i = 0; i < N; i++) {
            int want = size * (round * 7 + (int)(i % 13)) + size * (size - 1) / 2;
            if (i == N - 1 || h[i] != want) {
                check(h[i] == want, "copy in flight", "allreduce", BLOCKING, 0, "int", "sum",
                      N, i, h[i], want);
                break;
            }
        }
        cudaMemset(bs, round + rank + 1, N);
        MPI_Allreduce(bs, br, N, MPI_UNSIGNED_CHAR, MPI_MAX, MPI_COMM_WORLD);
        cudaMemcpy(h8, br, N, cudaMemcpyDeviceToHost);
        for (size_t i = 0; i < N; i++) {
            if (i == N - 1 || h8[i] != round + size) {
                check(h8[i] == round + size, "memset in flight", "allreduce", BLOCKING, 0,
                      "unsigned char", "max", N, i, h8[i], round + size);
                break;
            }
        }
    }
    cudaFree(ds);
    cudaFree(dr);
    cudaFree(bs);
    cudaFree(br);
    free(h);
    free(h8);
#endif
}

int main(int argc, char **argv)
{
    size_t counts[] = {1, 7, 1000};
    size_t big      = 70000; /* several chunks and channels, one type and op */
    int quick       = 0, rc;
    const test_flag_t flags[] = {{"--quick", &quick}, {NULL, NULL}};

    if ((rc = test_args(argc, argv, "test_coll", flags)) >= 0 ||
        (rc = test_init(&argc, &argv, "test_coll", 0, &rank, &size)) != 0) {
        return rc;
    }
    types_init();

    for (int form = 0; form < NFORMS; form++) {
        for (int ip = 0; ip < 2; ip++) {
            for (int ti = 0; ti < NTYPES; ti++) {
                const type_t *t = &types[ti];
                for (int op = 0; op < 4; op++) {
                    if (t->dt == MPI_BYTE) {
                        continue; /* MPI has no arithmetic on MPI_BYTE */
                    }
                    for (int c = 0; c < (quick ? 1 : 3); c++) {
                        size_t n = counts[quick ? 1 : c];
                        test_allreduce(t, op, n, form, ip);
                        test_reduce(t, op, n, form, ip, (int)(n % size));
                        test_rsb(t, op, n, form, ip);
                        test_rs(t, op, n, form, ip, 0);
                        test_rs(t, op, n, form, ip, 1);
                    }
                }
                for (int c = 0; c < (quick ? 1 : 3); c++) {
                    size_t n = counts[quick ? 1 : c];
                    test_allgather(t, n, form, ip);
                    if (!ip) {
                        test_bcast(t, n, form, (int)((n + 1) % size));
                    }
                }
            }
            if (!quick) {
                test_allreduce(&types[9], 0, big, form, ip);
                test_rsb(&types[10], 3, big, form, ip);
                test_rs(&types[4], 0, big, form, ip, 1);
                test_allgather(&types[2], big, form, ip);
                test_reduce(&types[10], 1, big, form, ip, size - 1);
                test_bcast(&types[4], big, form, 0);
            }
        }
    }
    test_fallbacks();
    test_progress();
    test_copies_in_flight();

    return test_finish(test_failures, "test_coll: %d ranks, %s buffers, %d checks on rank 0", size,
                       test_device ? "device" : "host", checks);
}
