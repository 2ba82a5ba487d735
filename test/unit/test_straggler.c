/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Straggler-tolerant allreduces (DFCCL_COLL_STRAGGLER), on 2 to 4 ranks of
 * the host backend, or on those DFCCL_TEST_RANKS lists (up to 31, what
 * the straggler path takes); the last rank sleeps before every run:
 *
 *   - 0.1, 1 and 10 ms late, with and without tolerance: every run's
 *     result is the full reduction on every rank, in place and not; with
 *     tolerance and 10 ms, some runs took two phases (the stats say so);
 *   - every op (sum, prod, min, max, avg) and a few types;
 *   - in disorder with other collectives, two tolerant ones in flight at
 *     once, in a different order on every rank;
 *   - bad input: each refused with one error that says why;
 *   - DFCCL_STRAGGLER=allreduce: plain allreduce registrations come out
 *     tolerant (and split when a rank is late), others stay ordinary.
 *
 * No timing is asserted: the bench measures (docs/stragglers.md).
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mp.h"
#include "suite.h"
#include "unit_util.h"

static int strag_quick(void)
{
    return getenv("DFCCL_TEST_QUICK") != NULL;
}

/* The largest group a straggler-tolerant allreduce takes (a bit per rank
 * in a 32-bit word, one bit for the decision). */
#define STRAG_MAX_RANKS 31

/* Runs fn on each of the rank counts `def` (ended by 0), `quick` in quick
 * mode (where not NULL), or those of DFCCL_TEST_RANKS (unit_rank_counts):
 * the test fails at the first count that fails. */
static void strag_run_ranks(const int *def, const int *quick, double timeout_s,
                            dfccl_test_rank_fn_t fn, void *arg)
{
    int ns[UNIT_RANK_COUNTS_MAX];
    int k = unit_rank_counts(def, quick, 2, STRAG_MAX_RANKS, ns);

    for (int i = 0; i < k; i++) {
        ck_assert_msg(dfccl_test_mp_run(ns[i], timeout_s, fn, arg) == 0, "failed on %d ranks",
                      ns[i]);
    }
}

/* Rank r's input of run k at i: whole numbers, exact in float32 sums. */
static float strag_in(int k, int r, size_t i)
{
    return (float)(i % 1021) + (float)r + 7.0f * (float)k;
}

static float strag_sum(int k, int n, size_t i)
{
    return (float)n * ((float)(i % 1021) + 7.0f * (float)k) + (float)(n * (n - 1) / 2);
}

typedef struct {
    int late_us;   /* the last rank sleeps this long before every run */
    int tolerant;  /* DFCCL_COLL_STRAGGLER */
    int runs;
    size_t count;
} strag_arg_t;

/* Register an allreduce, straggler-tolerant or not; tolerant > 1: with
 * that wait (us), else the ski-rental rule's. */
static dfccl_status_t strag_register(dfccl_group_t g, size_t count, dfccl_datatype_t type,
                                     dfccl_op_t op, int tolerant, int *id_p)
{
    dfccl_coll_desc_t d;

    memset(&d, 0, sizeof(d));
    d.kind  = DFCCL_KIND_ALLREDUCE;
    d.count = count;
    d.type  = type;
    d.op    = op;
    d.flags             = tolerant ? DFCCL_COLL_STRAGGLER : 0;
    d.straggler_wait_us = tolerant > 1 ? (uint32_t)tolerant : 0;
    return dfcclRegister(&d, g, id_p);
}

static int strag_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    const strag_arg_t *a = varg;
    const size_t bytes   = a->count * sizeof(float);
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    dfccl_stats_t s;
    dfccl_coll_info_t info;
    float *sbuf, *rbuf, *h;
    unsigned long long splits, relays, pre;
    int id;

    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    /* at 10 ms late, a wait of 2 ms: runs split whatever the load (the
     * rule's wait follows the measured run time, which a loaded machine
     * can stretch past 10 ms) */
    DFCCL_TEST_CHECK(strag_register(g, a->count, DFCCL_FLOAT32, DFCCL_SUM,
                                    a->tolerant && a->late_us >= 10000 ? 2000 : a->tolerant,
                                    &id) == DFCCL_OK,
                     "register: %s", dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(dfcclGetCollInfo(id, ctx, &info) == DFCCL_OK &&
                         info.straggler == (a->tolerant != 0) &&
                         (!a->tolerant || info.straggler_wait_us > 0),
                     "info: straggler %d, wait %u us", info.straggler, info.straggler_wait_us);
    sbuf = dfccl_test_malloc(ctx, bytes);
    rbuf = dfccl_test_malloc(ctx, bytes);
    h    = malloc(bytes);
    DFCCL_TEST_CHECK(sbuf != NULL && rbuf != NULL && h != NULL, "out of memory");
    for (int k = 0; k < a->runs; k++) {
        const int inplace = k % 3 == 2;
        float *out        = inplace ? sbuf : rbuf;
        dfccl_status_t st;

        for (size_t i = 0; i < a->count; i++) {
            h[i] = strag_in(k, rank, i);
        }
        dfccl_test_put(ctx, sbuf, h, bytes);
        dfccl_test_barrier(oob);
        if (rank == n - 1 && a->late_us > 0) {
            usleep((useconds_t)a->late_us);
        }
        st = unit_run_wait(dfcclRunAllReduce(sbuf, out, id, NULL, NULL, ctx), id, 30000, ctx);
        DFCCL_TEST_CHECK(st == DFCCL_OK, "run %d: %s: %s", k, dfcclGetErrorString(st),
                         dfcclGetLastErrorMessage());
        dfccl_test_get(ctx, h, out, bytes);
        for (size_t i = 0; i < a->count; i++) {
            DFCCL_TEST_CHECK(h[i] == strag_sum(k, n, i),
                             "rank %d run %d (%s, late %d us%s): element %zu is %g, not %g",
                             rank, k, a->tolerant ? "tolerant" : "plain", a->late_us,
                             inplace ? ", in place" : "", i, (double)h[i],
                             (double)strag_sum(k, n, i));
        }
    }
    DFCCL_TEST_CHECK(dfcclGetStats(ctx, &s) == DFCCL_OK, "stats");
    DFCCL_TEST_CHECK(dfcclGetCollInfo(id, ctx, &info) == DFCCL_OK &&
                         info.split_runs == s.straggler_splits,
                     "split runs %llu, stats %llu", (unsigned long long)info.split_runs,
                     (unsigned long long)s.straggler_splits);
    splits = dfccl_test_sum_u64(oob, s.straggler_splits);
    relays = dfccl_test_sum_u64(oob, s.straggler_relays);
    if (rank == 0) {
        printf("straggler: %d ranks, %s, late %d us: %d runs, %llu split (rank-runs), %llu "
               "relayed\n", n, a->tolerant ? "tolerant" : "plain", a->late_us, a->runs,
               splits, relays);
    }
    if (!a->tolerant) {
        DFCCL_TEST_CHECK(splits == 0 && relays == 0, "plain runs split: %llu", splits);
    } else if (a->late_us >= 10000) {
        DFCCL_TEST_CHECK(splits > 0, "no run took two phases with a rank %d us late",
                         a->late_us);
    }
    DFCCL_TEST_CHECK(dfcclDeregister(id, ctx) == DFCCL_OK, "deregister: %s",
                     dfcclGetLastErrorMessage());
    free(h);
    dfccl_test_free(ctx, sbuf);
    dfccl_test_free(ctx, rbuf);
    return unit_rank_end_counted(oob, ctx, g, &pre);
}

/* _i: late (0.1, 1, 10 ms), tolerance (on, off); each on 2, 3 and 4 ranks
 * (in quick mode 2 and 4) */
START_TEST(test_straggler_late)
{
    static const int late[3] = {100, 1000, 10000};
    strag_arg_t a;

    a.late_us  = late[_i % 3];
    a.tolerant = (_i / 3) % 2 == 0;
    a.runs     = strag_quick() ? 8 : 20;
    a.count    = _i % 2 ? 4096 : 1000;
    strag_run_ranks((const int[]){2, 3, 4, 0}, (const int[]){2, 4, 0}, 300, strag_body, &a);
}
END_TEST

/* Every op, and integer and double types: 3 ranks, the last 5 ms late,
 * a wait of 1 ms. */
static int ops_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    static const dfccl_op_t ops[] = {DFCCL_SUM, DFCCL_PROD, DFCCL_MIN, DFCCL_MAX, DFCCL_AVG};
    const size_t count = 777;
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    unsigned long long pre, splits;
    dfccl_stats_t s;
    int ids[10];

    (void)arg;
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    for (int o = 0; o < 5; o++) {
        DFCCL_TEST_CHECK(strag_register(g, count, DFCCL_INT32, ops[o], 1000, &ids[o]) ==
                                 DFCCL_OK ||
                             ops[o] == DFCCL_AVG,
                         "register int32 op %d: %s", o, dfcclGetLastErrorMessage());
        DFCCL_TEST_CHECK(strag_register(g, count, DFCCL_FLOAT64, ops[o], 1000, &ids[5 + o]) ==
                             DFCCL_OK,
                         "register float64 op %d: %s", o, dfcclGetLastErrorMessage());
    }
    for (int k = 0; k < 3; k++) {
        for (int o = 0; o < 5; o++) {
            for (int t = 0; t < 2; t++) {
                const size_t esz = t == 0 ? 4 : 8;
                void *d;
                char *h;
                dfccl_status_t st;

                if (t == 0 && ops[o] == DFCCL_AVG) {
                    continue; /* avg is for floating types */
                }
                d = dfccl_test_malloc(ctx, count * esz);
                h = malloc(count * esz);
                for (size_t i = 0; i < count; i++) {
                    /* prod: 1 or 2, so that the product stays exact */
                    const long v = ops[o] == DFCCL_PROD ? 1 + (long)((i + (size_t)rank + (size_t)k) % 2)
                                                        : (long)(i % 97) * (rank + 1) - 50 + k;
                    if (t == 0) {
                        ((int32_t *)h)[i] = (int32_t)v;
                    } else {
                        ((double *)h)[i] = (double)v;
                    }
                }
                dfccl_test_put(ctx, d, h, count * esz);
                dfccl_test_barrier(oob);
                if (rank == n - 1) {
                    usleep(5000);
                }
                st = unit_run_wait(dfcclRunAllReduce(d, d, ids[5 * t + o], NULL, NULL, ctx),
                                   ids[5 * t + o], 30000, ctx);
                DFCCL_TEST_CHECK(st == DFCCL_OK, "op %d type %d: %s", o, t,
                                 dfcclGetLastErrorMessage());
                dfccl_test_get(ctx, h, d, count * esz);
                for (size_t i = 0; i < count; i++) {
                    double want = ops[o] == DFCCL_PROD ? 1 : ops[o] == DFCCL_MIN ? 1e300
                                : ops[o] == DFCCL_MAX ? -1e300 : 0;
                    const double got = t == 0 ? (double)((int32_t *)h)[i] : ((double *)h)[i];

                    for (int r = 0; r < n; r++) {
                        const double v = ops[o] == DFCCL_PROD
                                             ? 1 + (double)((i + (size_t)r + (size_t)k) % 2)
                                             : (double)((long)(i % 97) * (r + 1) - 50 + k);
                        switch (ops[o]) {
                        case DFCCL_PROD: want *= v; break;
                        case DFCCL_MIN:  want = v < want ? v : want; break;
                        case DFCCL_MAX:  want = v > want ? v : want; break;
                        default:         want += v; break;
                        }
                    }
                    if (ops[o] == DFCCL_AVG) {
                        want /= n;
                    }
                    DFCCL_TEST_CHECK(got == want || (ops[o] == DFCCL_AVG &&
                                                     got - want < 1e-9 && want - got < 1e-9),
                                     "rank %d run %d op %d type %d: element %zu is %g, not %g",
                                     rank, k, o, t, i, got, want);
                }
                free(h);
                dfccl_test_free(ctx, d);
            }
        }
    }
    DFCCL_TEST_CHECK(dfcclGetStats(ctx, &s) == DFCCL_OK, "stats");
    splits = dfccl_test_sum_u64(oob, s.straggler_splits);
    DFCCL_TEST_CHECK(splits > 0, "no run took two phases with a rank 5 ms late");
    for (int i = 0; i < 10; i++) {
        if (i != 4) {
            DFCCL_TEST_CHECK(dfcclDeregister(ids[i], ctx) == DFCCL_OK, "deregister %d: %s", i,
                             dfcclGetLastErrorMessage());
        }
    }
    return unit_rank_end_counted(oob, ctx, g, &pre);
}

START_TEST(test_straggler_ops)
{
    strag_run_ranks((const int[]){3, 0}, NULL, 300, ops_body, NULL);
}
END_TEST

/* Disorder: two tolerant allreduces, a plain one and an allgather, started
 * in a different order on every rank and iteration (the last rank a little
 * late), all in flight together. */
#define DIS_N 4
static int disorder_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    const size_t count = 2048;
    const int iters    = strag_quick() ? 8 : 25;
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    unsigned long long pre;
    unsigned seed = 12345u + 77u * (unsigned)rank;
    float *in[DIS_N], *out[DIS_N], *h;
    int ids[DIS_N];

    (void)arg;
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    DFCCL_TEST_CHECK(strag_register(g, count, DFCCL_FLOAT32, DFCCL_SUM, 1, &ids[0]) == DFCCL_OK,
                     "register: %s", dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(dfcclRegisterAllGather(count, DFCCL_FLOAT32, g, 0, &ids[1]) == DFCCL_OK,
                     "register");
    DFCCL_TEST_CHECK(strag_register(g, count, DFCCL_FLOAT32, DFCCL_SUM, 1, &ids[2]) == DFCCL_OK,
                     "register: %s", dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(strag_register(g, count, DFCCL_FLOAT32, DFCCL_SUM, 0, &ids[3]) == DFCCL_OK,
                     "register");
    h = malloc(count * sizeof(float) * (size_t)n);
    for (int c = 0; c < DIS_N; c++) {
        in[c]  = dfccl_test_malloc(ctx, count * sizeof(float));
        out[c] = dfccl_test_malloc(ctx, count * sizeof(float) * (size_t)n);
    }
    for (int k = 0; k < iters; k++) {
        int order[DIS_N] = {0, 1, 2, 3};

        for (int i = DIS_N - 1; i > 0; i--) {
            const int j = (int)(rand_r(&seed) % (unsigned)(i + 1)), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (int c = 0; c < DIS_N; c++) {
            for (size_t i = 0; i < count; i++) {
                h[i] = strag_in(k + c, rank, i);
            }
            dfccl_test_put(ctx, in[c], h, count * sizeof(float));
        }
        dfccl_test_barrier(oob);
        for (int c = 0; c < DIS_N; c++) {
            if (rank == n - 1 && c == 1) {
                usleep(2000);
            }
            DFCCL_TEST_CHECK(dfcclRun(in[order[c]], out[order[c]], ids[order[c]], NULL, NULL,
                                      ctx) == DFCCL_OK,
                             "run: %s", dfcclGetLastErrorMessage());
        }
        for (int c = 0; c < DIS_N; c++) {
            dfccl_status_t st = dfcclWait(ids[c], dfccl_test_wait_ms(30000), ctx);

            DFCCL_TEST_CHECK(st == DFCCL_OK, "iteration %d collective %d: %s", k, c,
                             dfcclGetLastErrorMessage());
            dfccl_test_get(ctx, h, out[c], count * sizeof(float) * (c == 1 ? (size_t)n : 1));
            for (size_t i = 0; i < count * (c == 1 ? (size_t)n : 1); i++) {
                const float want = c == 1 ? strag_in(k + c, (int)(i / count), i % count)
                                          : strag_sum(k + c, n, i);
                DFCCL_TEST_CHECK(h[i] == want, "rank %d iteration %d collective %d: element "
                                 "%zu is %g, not %g", rank, k, c, i, (double)h[i],
                                 (double)want);
            }
        }
    }
    for (int c = 0; c < DIS_N; c++) {
        DFCCL_TEST_CHECK(dfcclDeregister(ids[c], ctx) == DFCCL_OK, "deregister: %s",
                         dfcclGetLastErrorMessage());
        dfccl_test_free(ctx, in[c]);
        dfccl_test_free(ctx, out[c]);
    }
    free(h);
    return unit_rank_end_counted(oob, ctx, g, &pre);
}

START_TEST(test_straggler_disorder)
{
    strag_run_ranks((const int[]){2, 4, 0}, NULL, 300, disorder_body, NULL);
}
END_TEST

/* A group of one rank needs no exchange: its allgather is a copy. */
static int strag_self_allgather(const void *send, void *recv, size_t bytes, void *arg)
{
    (void)arg;
    memcpy(recv, send, bytes);
    return 0;
}

/*
 * DFCCL_STRAGGLER=allreduce with DFCCL_STRAGGLER_WAIT_US=2000: plain
 * allreduce registrations (the shorthand and dfcclRegister without the
 * flag) come out straggler-tolerant with the configured wait, and with the
 * last rank 10 ms late some of their runs take two phases; a wait given
 * by the registration wins; an allgather, an allreduce of 0 elements and
 * an allreduce on a group of one rank stay ordinary, without an error.
 */
static int env_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    const size_t count = 4096, bytes = count * sizeof(float);
    const int runs     = strag_quick() ? 8 : 16;
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g, self;
    dfccl_coll_desc_t d;
    dfccl_coll_info_t info;
    dfccl_stats_t s;
    unsigned long long pre, splits;
    float *sbuf, *h;
    int id, id2, ag, zero, solo;

    (void)arg;
    dfccl_test_setenv("DFCCL_STRAGGLER", "allreduce");
    dfccl_test_setenv("DFCCL_STRAGGLER_WAIT_US", "2000");
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(count, DFCCL_FLOAT32, DFCCL_SUM, g, 0, &id) ==
                         DFCCL_OK,
                     "register: %s", dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(dfcclGetCollInfo(id, ctx, &info) == DFCCL_OK && info.straggler == 1 &&
                         info.straggler_wait_us == 2000,
                     "plain allreduce with DFCCL_STRAGGLER=allreduce: straggler %d, wait %u us",
                     info.straggler, info.straggler_wait_us);
    memset(&d, 0, sizeof(d));
    d.kind              = DFCCL_KIND_ALLREDUCE;
    d.count             = count;
    d.type              = DFCCL_FLOAT64;
    d.op                = DFCCL_MAX;
    d.straggler_wait_us = 500;
    DFCCL_TEST_CHECK(dfcclRegister(&d, g, &id2) == DFCCL_OK, "register: %s",
                     dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(dfcclGetCollInfo(id2, ctx, &info) == DFCCL_OK && info.straggler == 1 &&
                         info.straggler_wait_us == 500,
                     "dfcclRegister without the flag: straggler %d, wait %u us", info.straggler,
                     info.straggler_wait_us);
    DFCCL_TEST_CHECK(dfcclRegisterAllGather(8, DFCCL_FLOAT32, g, 0, &ag) == DFCCL_OK &&
                         dfcclGetCollInfo(ag, ctx, &info) == DFCCL_OK && info.straggler == 0,
                     "allgather: %s, straggler %d", dfcclGetLastErrorMessage(), info.straggler);
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(0, DFCCL_FLOAT32, DFCCL_SUM, g, 0, &zero) ==
                             DFCCL_OK &&
                         dfcclGetCollInfo(zero, ctx, &info) == DFCCL_OK && info.straggler == 0,
                     "allreduce of 0: %s, straggler %d", dfcclGetLastErrorMessage(),
                     info.straggler);
    DFCCL_TEST_CHECK(dfcclGroupCreate(ctx, 1, 0, strag_self_allgather, NULL, "self", &self) ==
                         DFCCL_OK,
                     "group of one: %s", dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(count, DFCCL_FLOAT32, DFCCL_SUM, self, 0, &solo) ==
                             DFCCL_OK &&
                         dfcclGetCollInfo(solo, ctx, &info) == DFCCL_OK && info.straggler == 0,
                     "allreduce on one rank: %s, straggler %d", dfcclGetLastErrorMessage(),
                     info.straggler);

    sbuf = dfccl_test_malloc(ctx, bytes);
    h    = malloc(bytes);
    DFCCL_TEST_CHECK(sbuf != NULL && h != NULL, "out of memory");
    for (int k = 0; k < runs; k++) {
        dfccl_status_t st;

        for (size_t i = 0; i < count; i++) {
            h[i] = strag_in(k, rank, i);
        }
        dfccl_test_put(ctx, sbuf, h, bytes);
        dfccl_test_barrier(oob);
        if (rank == n - 1) {
            usleep(10000);
        }
        st = unit_run_wait(dfcclRunAllReduce(sbuf, sbuf, id, NULL, NULL, ctx), id, 30000, ctx);
        DFCCL_TEST_CHECK(st == DFCCL_OK, "run %d: %s", k, dfcclGetLastErrorMessage());
        dfccl_test_get(ctx, h, sbuf, bytes);
        for (size_t i = 0; i < count; i++) {
            DFCCL_TEST_CHECK(h[i] == strag_sum(k, n, i), "rank %d run %d: element %zu is %g, "
                             "not %g", rank, k, i, (double)h[i], (double)strag_sum(k, n, i));
        }
    }
    DFCCL_TEST_CHECK(dfcclGetStats(ctx, &s) == DFCCL_OK, "stats");
    splits = dfccl_test_sum_u64(oob, s.straggler_splits);
    if (rank == 0) {
        printf("straggler by DFCCL_STRAGGLER: %d ranks, %d runs, %llu split (rank-runs)\n", n,
               runs, splits);
    }
    DFCCL_TEST_CHECK(splits > 0, "no run took two phases with a rank 10 ms late");
    DFCCL_TEST_CHECK(dfcclDeregister(solo, ctx) == DFCCL_OK && dfcclGroupDestroy(self) ==
                         DFCCL_OK,
                     "group of one: %s", dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(dfcclDeregister(id, ctx) == DFCCL_OK && dfcclDeregister(id2, ctx) ==
                         DFCCL_OK && dfcclDeregister(ag, ctx) == DFCCL_OK &&
                         dfcclDeregister(zero, ctx) == DFCCL_OK,
                     "deregister: %s", dfcclGetLastErrorMessage());
    free(h);
    dfccl_test_free(ctx, sbuf);
    return unit_rank_end_counted(oob, ctx, g, &pre);
}

START_TEST(test_straggler_env)
{
    strag_run_ranks((const int[]){3, 0}, NULL, 300, env_body, NULL);
}
END_TEST

static int bad_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    dfccl_coll_desc_t d;
    unsigned long long pre;
    float x[8];
    int id = -1, i;

    (void)arg;
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    memset(&d, 0, sizeof(d));
    d.kind  = DFCCL_KIND_ALLGATHER;
    d.count = 8;
    d.type  = DFCCL_FLOAT32;
    d.flags = DFCCL_COLL_STRAGGLER;
    EXPECT(dfcclRegister(&d, g, &id), DFCCL_ERR_UNSUPPORTED, "for allreduces only, not allgather");
    d.kind = DFCCL_KIND_ALLREDUCE;
    d.op   = (dfccl_op_t)17;
    EXPECT(dfcclRegister(&d, g, &id), DFCCL_ERR_UNSUPPORTED, "an op with an identity element");
    d.op    = DFCCL_SUM;
    d.flags = 0x6;
    EXPECT(dfcclRegister(&d, g, &id), DFCCL_ERR_INVALID_ARG, "flags 0x6 are not");
    d.flags = DFCCL_COLL_STRAGGLER;
    d.type  = DFCCL_INT32;
    d.op    = DFCCL_AVG;
    EXPECT(dfcclRegister(&d, g, &id), DFCCL_ERR_UNSUPPORTED, "avg is supported only");
    DFCCL_TEST_CHECK(id == -1, "a refused registration set the id");
    d.type = DFCCL_FLOAT32;
    d.op   = DFCCL_SUM;
    DFCCL_TEST_CHECK(dfcclRegister(&d, g, &id) == DFCCL_OK, "register: %s",
                     dfcclGetLastErrorMessage());
    /* its phase-1 partner is no id of the caller's */
    i = id + 1;
    EXPECT(dfcclRun(x, x, i, NULL, NULL, ctx), DFCCL_ERR_NOT_FOUND, "phase 1 of");
    EXPECT(dfcclDeregister(i, ctx), DFCCL_ERR_NOT_FOUND, "phase 1 of");
    DFCCL_TEST_CHECK(dfcclDeregister(id, ctx) == DFCCL_OK, "deregister: %s",
                     dfcclGetLastErrorMessage());
    return unit_rank_end_counted(oob, ctx, g, &pre);
}

START_TEST(test_straggler_badinput)
{
    strag_run_ranks((const int[]){2, 0}, NULL, 60, bad_body, NULL);
}
END_TEST

int main(void)
{
    Suite *s  = suite_create("straggler");
    TCase *tc = dfccl_test_case(s, "straggler", 1000);

    tcase_add_loop_test(tc, test_straggler_late, 0, 6);
    tcase_add_test(tc, test_straggler_ops);
    tcase_add_test(tc, test_straggler_disorder);
    tcase_add_test(tc, test_straggler_badinput);
    tcase_add_test(tc, test_straggler_env);
    return dfccl_test_run(s, CK_NORMAL);
}
