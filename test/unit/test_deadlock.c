/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The deadlock scenarios, in real separate processes, each under a timeout
 * so that a hang fails the test:
 *  - disorder: 8 collectives started in a different random order on every
 *    rank, 200 iterations, results checked, preemptions reported (> 0);
 *    also with explicit progress (no poller thread), on 8 groups, and with
 *    allgathers and reduce-scatters among the allreduces;
 *  - device synchronization between collectives started in opposite orders
 *    (on the host backend: dfcclSynchronize, which waits until no daemon
 *    block runs); voluntary quits > 0;
 *  - two threads per rank, each running blocking collectives on its own
 *    group, in opposite orders on different ranks;
 *  - more collectives in flight than the submission queue holds (1000
 *    registered, all started at once in random order);
 *  - a late joiner;
 *  - a late peer's submission relaunches a daemon that quit stuck, without
 *    waiting out its doubled gap (and only with DFCCL_PEER_BELLS on);
 *  - a one-shot collective replayed after its peer completed it and gave
 *    its connector memory to a new registration writes nothing there;
 *  - priorities: of two collectives that become ready together (a batch),
 *    the higher-priority one completes first;
 *  - the grid follows the registered collectives;
 *  - runs that arrive just as the daemon quits.
 * Each runs at the rank counts it names, or at those DFCCL_TEST_RANKS lists
 * (unit_rank_counts), e.g. 8 on a machine with 8 GPUs.
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon_types.h"
#include "mp.h"
#include "suite.h"
#include "unit_util.h"

/* Any group the harness runs; a scenario of one-shot collectives runs on
 * up to DFCCL_ONESHOT_MAX_RANKS, as they do. */
#define DL_ANY DFCCL_TEST_MAX_RANKS

/* Runs fn on each of the rank counts `def` (ended by 0), or those of
 * DFCCL_TEST_RANKS (unit_rank_counts, from 2 to `most`): the test fails at
 * the first count that fails. */
static void dl_run_ranks(const int *def, int most, double timeout_s, dfccl_test_rank_fn_t fn,
                         void *arg)
{
    int ns[UNIT_RANK_COUNTS_MAX];
    int k = unit_rank_counts(def, NULL, 2, most, ns);

    for (int i = 0; i < k; i++) {
        ck_assert_msg(dfccl_test_mp_run(ns[i], timeout_s, fn, arg) == 0, "failed on %d ranks",
                      ns[i]);
    }
}

static unsigned long long stat_sum(dfccl_test_oob_t *oob, dfccl_rank_ctx_t ctx, int which)
{
    dfccl_stats_t s;
    dfcclGetStats(ctx, &s);
    return dfccl_test_sum_u64(oob, which == 0 ? s.preemptions :
                                   which == 1 ? s.quits : s.collectives);
}

static void shuffle(int *v, int n, unsigned *seed)
{
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(rand_r(seed) % (unsigned)(i + 1)), t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

/* Fill rank r's input of collective c, iteration it; check the allreduce. */
static void fill(float *h, size_t n, int r, int c, int it)
{
    for (size_t i = 0; i < n; i++) {
        h[i] = (float)((r + 1) * (c + 1) + (int)(i % 5) + it % 3);
    }
}

static int check_sum(const float *h, size_t n, int nranks, int c, int it)
{
    for (size_t i = 0; i < n; i++) {
        float e = 0;
        for (int r = 0; r < nranks; r++) {
            e += (float)((r + 1) * (c + 1) + (int)(i % 5) + it % 3);
        }
        if (h[i] != e) {
            fprintf(stderr, "collective %d iteration %d: [%zu] = %g, expected %g\n", c, it, i,
                    h[i], e);
            return 1;
        }
    }
    return 0;
}

/* The output of collective c of `kind`, iteration it, on `rank` of nranks,
 * whose inputs fill() wrote: an allgather of n elements per rank (rank r's
 * at r * n, filled as r's) or a reduce-scatter of n per rank (the sum of
 * the ranks' elements rank * n + i). */
static int check_kind(const float *h, int kind, size_t n, int rank, int nranks, int c, int it)
{
    for (size_t i = 0; i < (kind == DFCCL_COLL_ALLGATHER ? n * (size_t)nranks : n); i++) {
        float e = 0;
        if (kind == DFCCL_COLL_ALLGATHER) {
            e = (float)(((int)(i / n) + 1) * (c + 1) + (int)(i % n % 5) + it % 3);
        } else {
            const size_t j = (size_t)rank * n + i;
            for (int r = 0; r < nranks; r++) {
                e += (float)((r + 1) * (c + 1) + (int)(j % 5) + it % 3);
            }
        }
        if (h[i] != e) {
            fprintf(stderr, "rank %d: %s %d iteration %d: [%zu] = %g, expected %g\n", rank,
                    kind == DFCCL_COLL_ALLGATHER ? "allgather" : "reduce-scatter", c, it, i,
                    h[i], e);
            return 1;
        }
    }
    return 0;
}

/* ---- disorder ----------------------------------------------------------- */

#define NCOLL 8

typedef struct {
    int    iters;
    size_t counts[NCOLL];
    int    groups;   /* 1: all on one group, else one group per collective */
    int    explicit; /* DFCCL_PROGRESS=explicit: progress only inside dfcclWait */
    const char *arrivals; /* DFCCL_ARRIVALS, or NULL for the default */
    const char *oneshot;  /* DFCCL_ONESHOT_BYTES, or NULL for the default */
    const char *chbytes;  /* DFCCL_ONESHOT_CHANNEL_BYTES, or NULL: default */
    const char *twoshot;  /* DFCCL_TWOSHOT_BYTES, or NULL for the default */
    const char *tsbytes;  /* DFCCL_TWOSHOT_CHANNEL_BYTES, or NULL: default */
    int min_two;          /* collectives that must take two shot, at least */
    const char *crowd;    /* DFCCL_SPIN_CROWD, or NULL for the default */
    const char *fresh;    /* DFCCL_SPIN_FRESH, or NULL for the default */
    const char *window;   /* DFCCL_SQ_WINDOW, or NULL for the default */
    const int *kinds;     /* each collective's kind (DFCCL_COLL_ALLREDUCE, _ALLGATHER
                           * or _REDUCESCATTER), or NULL: all allreduces; every call
                           * in place, counts per rank */
    const char *gather;   /* DFCCL_ONESHOT_GATHER_BYTES, or NULL for the default */
    int min_one;          /* collectives that must take one shot, at least */
    const int *algos;     /* each collective's algorithm (dfccl_algo_choice_t, asked
                           * for through dfcclRegister), or NULL: the default */
} disorder_arg_t;

static int disorder_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    const disorder_arg_t *a = varg;
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g[NCOLL];
    int id[NCOLL], order[NCOLL];
    float *d[NCOLL], *h[NCOLL];
    unsigned seed = 12345u + (unsigned)rank * 7919u;
    unsigned long long pre;

    if (a->explicit) {
        setenv("DFCCL_PROGRESS", "explicit", 1);
    }
    dfccl_test_setenv("DFCCL_ARRIVALS", a->arrivals);
    dfccl_test_setenv("DFCCL_ONESHOT_BYTES", a->oneshot);
    dfccl_test_setenv("DFCCL_ONESHOT_CHANNEL_BYTES", a->chbytes);
    dfccl_test_setenv("DFCCL_TWOSHOT_BYTES", a->twoshot);
    dfccl_test_setenv("DFCCL_TWOSHOT_CHANNEL_BYTES", a->tsbytes);
    dfccl_test_setenv("DFCCL_SPIN_CROWD", a->crowd);
    dfccl_test_setenv("DFCCL_SPIN_FRESH", a->fresh);
    dfccl_test_setenv("DFCCL_SQ_WINDOW", a->window);
    dfccl_test_setenv("DFCCL_ONESHOT_GATHER_BYTES", a->gather);
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g[0]);
    for (int c = 1; c < NCOLL; c++) {
        if (a->groups > 1) {
            DFCCL_TEST_CHECK(dfcclGroupCreate(ctx, n, rank, dfccl_test_oob_allgather, oob,
                                              "extra", &g[c]) == DFCCL_OK, "group");
        } else {
            g[c] = g[0];
        }
    }
    for (int c = 0; c < NCOLL; c++) {
        const int kind = a->kinds != NULL ? a->kinds[c] : DFCCL_COLL_ALLREDUCE;
        const size_t cnt = a->counts[c];
        dfccl_status_t st;

        if (a->algos != NULL) {
            dfccl_coll_desc_t desc = {(dfccl_coll_kind_t)kind, cnt, DFCCL_FLOAT32, DFCCL_SUM, 0,
                                      0, (dfccl_algo_choice_t)a->algos[c], 0, 0};
            st = dfcclRegister(&desc, g[c], &id[c]);
        } else if (kind == DFCCL_COLL_ALLGATHER) {
            st = dfcclRegisterAllGather(cnt, DFCCL_FLOAT32, g[c], 0, &id[c]);
        } else if (kind == DFCCL_COLL_REDUCESCATTER) {
            st = dfcclRegisterReduceScatter(cnt, DFCCL_FLOAT32, DFCCL_SUM, g[c], 0, &id[c]);
        } else {
            st = dfcclRegisterAllReduce(cnt, DFCCL_FLOAT32, DFCCL_SUM, g[c], 0, &id[c]);
        }
        DFCCL_TEST_CHECK(st == DFCCL_OK, "register: %s", dfcclGetErrorString(st));
        /* allgather output and reduce-scatter input: n shares */
        d[c]     = dfccl_test_malloc(ctx, cnt * (size_t)n * sizeof(float));
        h[c]     = malloc(cnt * (size_t)n * sizeof(float));
        order[c] = c;
    }
    if (a->min_two > 0 || a->min_one > 0) {
        dfccl_stats_t stats;
        DFCCL_TEST_CHECK(dfcclGetStats(ctx, &stats) == DFCCL_OK, "stats");
        DFCCL_TEST_CHECK(stats.twoshot >= a->min_two, "%d of %d collectives take two shot, "
                         "expected at least %d", stats.twoshot, NCOLL, a->min_two);
        DFCCL_TEST_CHECK(stats.oneshot >= a->min_one, "%d of %d collectives take one shot, "
                         "expected at least %d", stats.oneshot, NCOLL, a->min_one);
    }
    for (int it = 0; it < a->iters; it++) {
        shuffle(order, NCOLL, &seed);
        for (int k = 0; k < NCOLL; k++) {
            const int c    = order[k];
            const int kind = a->kinds != NULL ? a->kinds[c] : DFCCL_COLL_ALLREDUCE;
            const size_t cnt = a->counts[c];
            dfccl_status_t st;

            if (kind == DFCCL_COLL_ALLGATHER) {
                /* in place: our share at its place in the output */
                float *mine = d[c] + (size_t)rank * cnt;
                fill(h[c], cnt, rank, c, it);
                dfccl_test_put(ctx, mine, h[c], cnt * sizeof(float));
                st = dfcclRunAllGather(mine, d[c], id[c], NULL, NULL, ctx);
            } else if (kind == DFCCL_COLL_REDUCESCATTER) {
                fill(h[c], cnt * (size_t)n, rank, c, it);
                dfccl_test_put(ctx, d[c], h[c], cnt * (size_t)n * sizeof(float));
                st = dfcclRunReduceScatter(d[c], d[c], id[c], NULL, NULL, ctx);
            } else {
                fill(h[c], cnt, rank, c, it);
                dfccl_test_put(ctx, d[c], h[c], cnt * sizeof(float));
                st = dfcclRunAllReduce(d[c], d[c], id[c], NULL, NULL, ctx);
            }
            DFCCL_TEST_CHECK(st == DFCCL_OK, "run: %s", dfcclGetErrorString(st));
        }
        for (int c = 0; c < NCOLL; c++) {
            const int kind = a->kinds != NULL ? a->kinds[c] : DFCCL_COLL_ALLREDUCE;
            const size_t cnt = a->counts[c];
            dfccl_status_t st = dfcclWait(id[c], dfccl_test_wait_ms(120000), ctx);

            DFCCL_TEST_CHECK(st == DFCCL_OK, "wait: %s", dfcclGetErrorString(st));
            dfccl_test_get(ctx, h[c], d[c],
                           cnt * (kind == DFCCL_COLL_ALLGATHER ? (size_t)n : 1) * sizeof(float));
            if (kind == DFCCL_COLL_ALLREDUCE ? check_sum(h[c], cnt, n, c, it)
                                             : check_kind(h[c], kind, cnt, rank, n, c, it)) {
                return 1;
            }
        }
    }
    pre = stat_sum(oob, ctx, 0);
    if (rank == 0) {
        printf("disorder: %d ranks, %d iterations x %d collectives%s on %d group(s)%s, "
               "arrivals %s, one shot up to %s bytes (allgather, reduce-scatter %s), two "
               "shot up to %s: all correct, %llu preemptions\n", n,
               a->iters, NCOLL, a->kinds != NULL ? " of three kinds" : "", a->groups,
               a->explicit ? ", explicit progress" : "",
               a->arrivals != NULL ? a->arrivals : "default",
               a->oneshot != NULL ? a->oneshot : "default",
               a->gather != NULL ? a->gather : "default",
               a->twoshot != NULL ? a->twoshot : "default", pre);
    }
    DFCCL_TEST_CHECK(pre > 0, "no preemption in %d disordered iterations", a->iters);
    for (int c = 0; c < NCOLL; c++) {
        dfcclDeregister(id[c], ctx);
        dfccl_test_free(ctx, d[c]);
        free(h[c]);
    }
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    return 0;
}

START_TEST(test_disorder)
{
    disorder_arg_t a = {.iters = 200,
                        .counts = {1, 100, 1000, 4096, 10000, 33333, 65536, 100000}, .groups = 1};
    if (getenv("DFCCL_TEST_QUICK") != NULL) {
        a.iters = 20;
    }
    dl_run_ranks((const int[]){4, 0}, DL_ANY, 300, disorder_body, &a);
}
END_TEST

START_TEST(test_disorder_explicit_progress)
{
    disorder_arg_t a = {.iters = 50,
                        .counts = {1, 100, 1000, 4096, 10000, 33333, 65536, 100000}, .groups = 1,
                        .explicit = 1};
    dl_run_ranks((const int[]){3, 0}, DL_ANY, 300, disorder_body, &a);
}
END_TEST

START_TEST(test_disorder_groups)
{
    /* one group per collective, mid-sized collectives, 2 and 3 ranks */
    disorder_arg_t a = {.iters = 50,
                        .counts = {65536, 65536, 65536, 65536, 131072, 1024, 7, 65536},
                        .groups = NCOLL};
    dl_run_ranks((const int[]){2, 3, 0}, DL_ANY, 300, disorder_body, &a);
}
END_TEST

START_TEST(test_disorder_arrivals)
{
    /* every policy of the scheduler on either backend (the tests above
     * run the backend's default): queue order only, a look for arrived
     * data after a pass with a stuck collective, and in every pass */
    disorder_arg_t a = {.iters = 50,
                        .counts = {1, 100, 1000, 4096, 10000, 33333, 65536, 100000}, .groups = 1,
                        .arrivals = "off"};
    dl_run_ranks((const int[]){3, 0}, DL_ANY, 300, disorder_body, &a);
    a.arrivals = "stuck";
    dl_run_ranks((const int[]){3, 0}, DL_ANY, 300, disorder_body, &a);
    a.arrivals = "always";
    dl_run_ranks((const int[]){4, 0}, DL_ANY, 300, disorder_body, &a);
}
END_TEST

START_TEST(test_disorder_sq_window)
{
    /* the leader reading one SQ entry per poll, three (a burst of 8 is
     * taken in polls that find 2 or 3 and stop short) and the most, 16
     * (GPUs: a lane each; the host backend reads one whatever the
     * setting), on 4 ranks */
    static const char *const windows[] = {"1", "3", "16"};

    for (size_t i = 0; i < sizeof(windows) / sizeof(windows[0]); i++) {
        disorder_arg_t a = {.iters  = 50,
                            .counts = {1, 100, 1000, 4096, 10000, 33333, 65536, 100000},
                            .groups = 1,
                            .window = windows[i]};
        dl_run_ranks((const int[]){4, 0}, DL_ANY, 300, disorder_body, &a);
    }
}
END_TEST

START_TEST(test_disorder_spins)
{
    /* the thresholds of a crowded queue on either backend (the host's
     * default has no cap): a cap of 2 polls with first runs that give way
     * after one, then first runs that wait like any other, on the ring,
     * in one shot and in two shot */
    disorder_arg_t a = {.iters = 50,
                        .counts = {1, 100, 1000, 4096, 10000, 33333, 65536, 100000}, .groups = 1,
                        .crowd = "2", .fresh = "1"};
    dl_run_ranks((const int[]){4, 0}, DL_ANY, 300, disorder_body, &a);
    a.fresh = "4000000000";
    dl_run_ranks((const int[]){3, 0}, DL_ANY, 300, disorder_body, &a);
    a.crowd   = "4000000000";
    a.fresh   = "1";
    a.oneshot = "65536";
    dl_run_ranks((const int[]){3, 0}, DL_ANY, 300, disorder_body, &a);
    a.oneshot = "0";
    a.twoshot = "16777216";
    a.tsbytes = "4096";
    a.crowd   = "2";
    dl_run_ranks((const int[]){4, 0}, DL_ANY, 300, disorder_body, &a);
}
END_TEST

START_TEST(test_disorder_algos)
{
    /* every allreduce on the ring, then those up to 64 KiB in one shot
     * (1 to 65536 floats: five of the eight), whatever the backend's
     * default, then one shot on several channels */
    disorder_arg_t a = {.iters = 50,
                        .counts = {1, 100, 1000, 4096, 10000, 33333, 65536, 100000}, .groups = 1,
                        .oneshot = "0"};
    dl_run_ranks((const int[]){3, 0}, DL_ANY, 300, disorder_body, &a);
    a.oneshot = "65536";
    dl_run_ranks((const int[]){3, 4, 0}, DL_ANY, 300, disorder_body, &a);
    /* one shot on channels of 8 KiB, each share at most 64 KiB: on the
     * host backend's 2 channels those of up to 10000 floats, on a GPU's 16
     * all eight */
    a.oneshot = "2097152";
    a.chbytes = "8192";
    dl_run_ranks((const int[]){4, 0}, DL_ANY, 300, disorder_body, &a);
    /* two shot on channels of at least 4 KiB: on 2 and 3 ranks all but
     * the largest (each rank's part of a share of 100000 floats is 67 KB
     * or more on the host backend's 2 channels, past a 64 KiB LL slot),
     * on 4 to 8 ranks all eight, on more none (two shot takes groups of
     * up to DFCCL_ONESHOT_MAX_RANKS) */
    a.oneshot = "0";
    a.twoshot = "16777216";
    a.tsbytes = "4096";
    {
        int ns[UNIT_RANK_COUNTS_MAX];
        int k = unit_rank_counts((const int[]){3, 4, 0}, NULL, 2, DL_ANY, ns);

        for (int i = 0; i < k; i++) {
            a.min_two = ns[i] > DFCCL_ONESHOT_MAX_RANKS ? 0 : ns[i] < 4 ? NCOLL - 1 : NCOLL;
            ck_assert_msg(dfccl_test_mp_run(ns[i], 300, disorder_body, &a) == 0,
                          "two shot on %d ranks failed", ns[i]);
        }
    }
}
END_TEST

/* ---- synchronization between collectives in opposite orders ------------- */

static int sync_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    int id[2];
    size_t count = 50000;
    float *d[2], *h[2];
    unsigned long long quits;

    /* A generous timeout, which must never fire here: the poller thread's
     * health check runs beside collectives started by this one. */
    {
        char t[32];
        snprintf(t, sizeof(t), "%.0f", 60 * dfccl_test_scale_max());
        setenv("DFCCL_TIMEOUT", t, 0);
    }
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    for (int c = 0; c < 2; c++) {
        DFCCL_TEST_CHECK(dfcclRegisterAllReduce(count, DFCCL_FLOAT32, DFCCL_SUM, g, 0, &id[c]) ==
                         DFCCL_OK, "register");
        d[c] = dfccl_test_malloc(ctx, count * sizeof(float));
        h[c] = malloc(count * sizeof(float));
    }
    for (int it = 0; it < 5; it++) {
        int first = rank % 2, second = 1 - first;
        fill(h[0], count, rank, 0, it);
        fill(h[1], count, rank, 1, it);
        dfccl_test_put(ctx, d[0], h[0], count * sizeof(float));
        dfccl_test_put(ctx, d[1], h[1], count * sizeof(float));
        DFCCL_TEST_CHECK(dfcclRunAllReduce(d[first], d[first], id[first], NULL, NULL, ctx) ==
                         DFCCL_OK, "run first");
        /* The device synchronization: returns only once the daemon is off
         * the device, which requires its voluntary quit. */
        DFCCL_TEST_CHECK(dfcclSynchronize(ctx) == DFCCL_OK, "synchronize");
        DFCCL_TEST_CHECK(dfcclRunAllReduce(d[second], d[second], id[second], NULL, NULL, ctx) ==
                         DFCCL_OK, "run second");
        for (int c = 0; c < 2; c++) {
            DFCCL_TEST_CHECK(dfcclWait(id[c], dfccl_test_wait_ms(120000), ctx) == DFCCL_OK, "wait");
            dfccl_test_get(ctx, h[c], d[c], count * sizeof(float));
            if (check_sum(h[c], count, n, c, it)) {
                return 1;
            }
        }
    }
    quits = stat_sum(oob, ctx, 1);
    if (rank == 0) {
        printf("synchronization: %d ranks, 5 iterations: all correct, %llu voluntary quits\n", n,
               quits);
    }
    DFCCL_TEST_CHECK(quits > 0, "no voluntary quit");
    for (int c = 0; c < 2; c++) {
        dfcclDeregister(id[c], ctx);
        dfccl_test_free(ctx, d[c]);
        free(h[c]);
    }
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    return 0;
}

START_TEST(test_disorder_kinds)
{
    /* allgathers and reduce-scatters (in place) among allreduces, all in
     * one shot up to 64 KiB per rank (all eight), on 3 and 4 ranks, then
     * the allgathers and reduce-scatters on the ring; one shot takes groups
     * of up to DFCCL_ONESHOT_MAX_RANKS */
    static const int kinds[NCOLL] = {
        DFCCL_COLL_ALLREDUCE,     DFCCL_COLL_ALLGATHER, DFCCL_COLL_REDUCESCATTER,
        DFCCL_COLL_ALLGATHER,     DFCCL_COLL_REDUCESCATTER, DFCCL_COLL_ALLREDUCE,
        DFCCL_COLL_ALLGATHER,     DFCCL_COLL_REDUCESCATTER};
    disorder_arg_t a = {.iters = 50, .counts = {1, 100, 1000, 4096, 3001, 16, 2047, 16384},
                        .groups = 1, .kinds = kinds, .oneshot = "65536", .gather = "65536",
                        .min_one = NCOLL};
    dl_run_ranks((const int[]){3, 4, 0}, DFCCL_ONESHOT_MAX_RANKS, 300, disorder_body, &a);
    a.gather  = "0";
    a.min_one = 2;
    dl_run_ranks((const int[]){3, 0}, DFCCL_ONESHOT_MAX_RANKS, 300, disorder_body, &a);
}
END_TEST

START_TEST(test_synchronize)
{
    dl_run_ranks((const int[]){2, 4, 0}, DL_ANY, 120, sync_body, NULL);
}
END_TEST

/* ---- threads on different groups --------------------------------------- */

typedef struct {
    dfccl_rank_ctx_t ctx;
    int              id;
    int              c, rank, nranks;
    int              rc;
} thread_arg_t;

static void *thread_main(void *varg)
{
    thread_arg_t *t = varg;
    size_t count    = 20000;
    float *d, *h = malloc(count * 4);

    dfccl_test_thread_setup();
    d = dfccl_test_malloc(t->ctx, count * sizeof(float));

    for (int it = 0; it < 20 && t->rc == 0; it++) {
        fill(h, count, t->rank, t->c, it);
        dfccl_test_put(t->ctx, d, h, count * sizeof(float));
        if (dfcclRunAllReduce(d, d, t->id, NULL, NULL, t->ctx) != DFCCL_OK ||
            dfcclWait(t->id, dfccl_test_wait_ms(120000), t->ctx) != DFCCL_OK) {
            t->rc = 1;
            break;
        }
        dfccl_test_get(t->ctx, h, d, count * sizeof(float));
        t->rc = check_sum(h, count, t->nranks, t->c, it);
        /* ranks drift apart so that the two groups interleave differently */
        if ((t->rank + t->c) % 2) {
            usleep(500);
        }
    }
    dfccl_test_free(t->ctx, d);
    free(h);
    return NULL;
}

static int threads_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g[2];
    thread_arg_t t[2];
    pthread_t th[2];

    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g[0]);
    DFCCL_TEST_CHECK(dfcclGroupCreate(ctx, n, rank, dfccl_test_oob_allgather, oob, "second",
                                      &g[1]) == DFCCL_OK, "group");
    for (int c = 0; c < 2; c++) {
        memset(&t[c], 0, sizeof(t[c]));
        t[c].ctx = ctx; t[c].c = c; t[c].rank = rank; t[c].nranks = n;
        DFCCL_TEST_CHECK(dfcclRegisterAllReduce(20000, DFCCL_FLOAT32, DFCCL_SUM, g[c], 0,
                                                &t[c].id) == DFCCL_OK, "register");
    }
    /* start the threads in opposite orders on even and odd ranks */
    for (int k = 0; k < 2; k++) {
        int c = rank % 2 ? 1 - k : k;
        pthread_create(&th[c], NULL, thread_main, &t[c]);
        usleep(1000);
    }
    for (int c = 0; c < 2; c++) {
        pthread_join(th[c], NULL);
        DFCCL_TEST_CHECK(t[c].rc == 0, "thread %d failed", c);
    }
    if (rank == 0) {
        printf("threads: %d ranks x 2 threads x 20 blocking allreduces: all correct\n", n);
    }
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    return 0;
}

START_TEST(test_threads)
{
    dl_run_ranks((const int[]){2, 4, 0}, DL_ANY, 120, threads_body, NULL);
}
END_TEST

/* ---- more collectives than resources ------------------------------------ */

#define NMANY 1000

static int many_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    dfccl_config_t cfg;
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    int *id = malloc(NMANY * sizeof(int)), *order = malloc(NMANY * sizeof(int));
    int32_t *d, h[16];
    unsigned seed = 99u + (unsigned)rank;
    dfccl_stats_t s;

    setenv("DFCCL_BACKEND", "host", 0);
    dfcclConfigInit(&cfg);
    cfg.sq_entries = 16; /* far fewer than the collectives in flight */
    dfccl_test_setup(rank, n, oob, &cfg, &ctx, &g);
    d = dfccl_test_malloc(ctx, (size_t)NMANY * 16 * sizeof(int32_t));
    for (int c = 0; c < NMANY; c++) {
        dfccl_status_t st = dfcclRegisterAllReduce(16, DFCCL_INT32, DFCCL_SUM, g, 0, &id[c]);
        DFCCL_TEST_CHECK(st == DFCCL_OK, "register %d: %s", c, dfcclGetErrorString(st));
        for (int i = 0; i < 16; i++) {
            h[i] = rank + c + i;
        }
        dfccl_test_put(ctx, d + (size_t)c * 16, h, sizeof(h));
        order[c] = c;
    }
    dfcclGetStats(ctx, &s);
    if (rank == 0) {
        printf("scale: %d collectives registered, %zu bytes of connectors, %.1f KiB each\n",
               s.registered, s.connector_bytes, (double)s.connector_bytes / NMANY / 1024.0);
    }
    DFCCL_TEST_CHECK(s.registered == NMANY, "registered %d", s.registered);
    shuffle(order, NMANY, &seed);
    for (int k = 0; k < NMANY; k++) {
        int c = order[k];
        DFCCL_TEST_CHECK(dfcclRunAllReduce(d + (size_t)c * 16, d + (size_t)c * 16, id[c], NULL,
                                           NULL, ctx) == DFCCL_OK, "run %d", c);
    }
    for (int c = 0; c < NMANY; c++) {
        DFCCL_TEST_CHECK(dfcclWait(id[c], dfccl_test_wait_ms(200000), ctx) == DFCCL_OK,
                         "wait %d", c);
        dfccl_test_get(ctx, h, d + (size_t)c * 16, sizeof(h));
        for (int i = 0; i < 16; i++) {
            int32_t e = 0;
            for (int r = 0; r < n; r++) {
                e += r + c + i;
            }
            DFCCL_TEST_CHECK(h[i] == e, "collective %d [%d] = %d, expected %d", c, i, h[i], e);
        }
    }
    if (rank == 0) {
        printf("scale: %d collectives in random order per rank through a %d-entry SQ: all "
               "correct\n", NMANY, cfg.sq_entries);
    }
    dfccl_test_free(ctx, d);
    free(id);
    free(order);
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    return 0;
}

START_TEST(test_many_collectives)
{
    dl_run_ranks((const int[]){2, 0}, DL_ANY, 300, many_body, NULL);
}
END_TEST

/* ---- past the connector budget ----------------------------------------- */

#define NBUDGET     12
#define BUDGET_CNT  (256 * 1024) /* floats: 1 MiB allreduces */
#define BUDGET_MAX  ((size_t)4 << 20)

/*
 * The connector budget for budget_body on this group: 4 MiB where at least
 * 3 of the NBUDGET registrations go past it; else (on more ranks, where a
 * rank's connectors of a collective are smaller) the budget of NBUDGET - 3
 * full registrations and a half, in *budget_p. A registration's connector
 * bytes are measured without a budget, in a context of its own.
 */
static int budget_for(int rank, int n, dfccl_test_oob_t *oob, size_t *budget_p)
{
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    dfccl_stats_t s;
    size_t before, full;
    int id;

    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    DFCCL_TEST_CHECK(dfcclGetStats(ctx, &s) == DFCCL_OK, "stats");
    before = s.connector_bytes;
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(BUDGET_CNT, DFCCL_FLOAT32, DFCCL_SUM, g, 0, &id) ==
                         DFCCL_OK, "register: %s", dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(dfcclGetStats(ctx, &s) == DFCCL_OK, "stats");
    full = s.connector_bytes - before;
    DFCCL_TEST_CHECK(full > 0, "a registration holds no connector bytes");
    dfccl_test_barrier(oob); /* every rank has registered: it may go */
    DFCCL_TEST_CHECK(dfcclDeregister(id, ctx) == DFCCL_OK && dfcclDestroy(ctx) == DFCCL_OK,
                     "deregister and destroy: %s", dfcclGetLastErrorMessage());
    *budget_p = BUDGET_MAX / full <= NBUDGET - 3 ? BUDGET_MAX
                                                 : full * (NBUDGET - 3) + full / 2;
    return 0;
}

/*
 * Registrations past DFCCL_CONN_BUDGET get lean connectors: the first ones
 * hold full-size connectors up to the budget, every later one less, and
 * all of them, full and lean, run correctly in a different order on every
 * rank. Deregistering gives the budget back.
 */
static int budget_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    dfccl_config_t cfg;
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    size_t delta[NBUDGET], prev = 0, full, budget;
    int id[NBUDGET], order[NBUDGET], nfull = 0;
    unsigned seed = 7u + (unsigned)rank;
    float *d, *h = malloc(BUDGET_CNT * sizeof(float));
    dfccl_stats_t s;

    (void)arg;
    setenv("DFCCL_BACKEND", "host", 0);
    if (budget_for(rank, n, oob, &budget)) {
        return 1;
    }
    dfcclConfigInit(&cfg);
    cfg.conn_budget = budget;
    dfccl_test_setup(rank, n, oob, &cfg, &ctx, &g);
    d = dfccl_test_malloc(ctx, (size_t)NBUDGET * BUDGET_CNT * sizeof(float));
    for (int c = 0; c < NBUDGET; c++) {
        dfccl_status_t st = dfcclRegisterAllReduce(BUDGET_CNT, DFCCL_FLOAT32, DFCCL_SUM, g, 0,
                                                   &id[c]);
        DFCCL_TEST_CHECK(st == DFCCL_OK, "register %d: %s", c, dfcclGetErrorString(st));
        dfcclGetStats(ctx, &s);
        delta[c] = s.connector_bytes - prev;
        prev     = s.connector_bytes;
        order[c] = c;
    }
    full = delta[0];
    while (nfull < NBUDGET && delta[nfull] == full) {
        nfull++;
    }
    DFCCL_TEST_CHECK(full > 0 && (size_t)nfull * full <= budget &&
                         (size_t)(nfull + 1) * full > budget,
                     "%d registrations of %zu connector bytes each before the first lean one, "
                     "with a budget of %zu", nfull, full, budget);
    DFCCL_TEST_CHECK(nfull <= NBUDGET - 3, "only %d of %d registrations went lean",
                     NBUDGET - nfull, NBUDGET);
    for (int c = nfull; c < NBUDGET; c++) {
        /* at most 16 channels of 2 slots of 32 KiB (LL: twice), and a
         * control block per channel */
        size_t most = 16 * (2 * (64u << 10) + (64u << 10));
        DFCCL_TEST_CHECK(delta[c] == delta[nfull] && delta[c] < full && delta[c] <= most,
                         "registration %d past the budget holds %zu connector bytes (full "
                         "%zu, lean at most %zu)", c, delta[c], full, most);
    }
    for (int it = 0; it < 3; it++) {
        for (int c = 0; c < NBUDGET; c++) {
            fill(h, BUDGET_CNT, rank, c, it);
            dfccl_test_put(ctx, d + (size_t)c * BUDGET_CNT, h, BUDGET_CNT * sizeof(float));
        }
        shuffle(order, NBUDGET, &seed);
        for (int k = 0; k < NBUDGET; k++) {
            float *p = d + (size_t)order[k] * BUDGET_CNT;
            DFCCL_TEST_CHECK(dfcclRunAllReduce(p, p, id[order[k]], NULL, NULL, ctx) == DFCCL_OK,
                             "run %d", order[k]);
        }
        for (int c = 0; c < NBUDGET; c++) {
            DFCCL_TEST_CHECK(dfcclWait(id[c], dfccl_test_wait_ms(120000), ctx) == DFCCL_OK,
                             "wait %d: %s", c, dfcclGetLastErrorMessage());
            dfccl_test_get(ctx, h, d + (size_t)c * BUDGET_CNT, BUDGET_CNT * sizeof(float));
            if (check_sum(h, BUDGET_CNT, n, c, it)) {
                return 1;
            }
        }
    }
    for (int c = 0; c < NBUDGET; c++) {
        DFCCL_TEST_CHECK(dfcclDeregister(id[c], ctx) == DFCCL_OK, "deregister %d", c);
    }
    dfcclGetStats(ctx, &s);
    prev = s.connector_bytes;
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(BUDGET_CNT, DFCCL_FLOAT32, DFCCL_SUM, g, 0, &id[0]) ==
                         DFCCL_OK, "register again");
    dfcclGetStats(ctx, &s);
    DFCCL_TEST_CHECK(s.connector_bytes - prev == full,
                     "after deregistering everything a registration holds %zu bytes, not %zu",
                     s.connector_bytes - prev, full);
    if (rank == 0) {
        printf("budget: %d ranks, %zu-byte budget: %d registrations of %zu connector bytes, "
               "%d lean ones of %zu, all correct in 3 disordered rounds\n", n, budget, nfull,
               full, NBUDGET - nfull, delta[NBUDGET - 1]);
    }
    DFCCL_TEST_CHECK(dfcclDeregister(id[0], ctx) == DFCCL_OK, "deregister");
    dfccl_test_free(ctx, d);
    free(h);
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    return 0;
}

START_TEST(test_conn_budget)
{
    dl_run_ranks((const int[]){2, 4, 0}, DL_ANY, 200, budget_body, NULL);
}
END_TEST

/* ---- LL connector slots ------------------------------------------------ */

#define LLS_CNT 256 /* floats: a 1 KiB allreduce, carried in LL */
#define LLS_RUNS 40

/*
 * An LL collective of small slots gets up to ll_slots slots (16 by
 * default): with ll_slots 4, 8 and the default, its connector grows by the
 * same slot bytes per slot (so the default holds 16), and each runs right
 * many times around its slots.
 */
static int ll_slots_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    const int setting[3] = {4, 8, 0};
    size_t bytes[3];
    float h[LLS_CNT];

    (void)arg;
    for (int k = 0; k < 3; k++) {
        dfccl_config_t cfg;
        dfccl_rank_ctx_t ctx;
        dfccl_group_t g;
        dfccl_stats_t s;
        size_t before;
        float *d;
        int id;

        setenv("DFCCL_BACKEND", "host", 0);
        dfcclConfigInit(&cfg);
        cfg.ll_slots = setting[k];
        dfccl_test_setup(rank, n, oob, &cfg, &ctx, &g);
        d = dfccl_test_malloc(ctx, sizeof(h));
        dfcclGetStats(ctx, &s);
        before = s.connector_bytes;
        DFCCL_TEST_CHECK(dfcclRegisterAllReduce(LLS_CNT, DFCCL_FLOAT32, DFCCL_SUM, g, 0, &id) ==
                             DFCCL_OK, "register (ll_slots %d)", setting[k]);
        dfcclGetStats(ctx, &s);
        bytes[k] = s.connector_bytes - before;
        for (int it = 0; it < LLS_RUNS; it++) {
            fill(h, LLS_CNT, rank, k, it);
            dfccl_test_put(ctx, d, h, sizeof(h));
            DFCCL_TEST_CHECK(dfcclRunAllReduce(d, d, id, NULL, NULL, ctx) == DFCCL_OK &&
                                 dfcclWait(id, dfccl_test_wait_ms(60000), ctx) == DFCCL_OK,
                             "run %d (ll_slots %d): %s", it, setting[k],
                             dfcclGetLastErrorMessage());
            dfccl_test_get(ctx, h, d, sizeof(h));
            if (check_sum(h, LLS_CNT, n, k, it)) {
                return 1;
            }
        }
        DFCCL_TEST_CHECK(dfcclDeregister(id, ctx) == DFCCL_OK, "deregister");
        dfccl_test_free(ctx, d);
        DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    }
    DFCCL_TEST_CHECK(bytes[1] > bytes[0] && bytes[2] - bytes[1] == 2 * (bytes[1] - bytes[0]),
                     "connector bytes with 4, 8 and 16 LL slots: %zu, %zu, %zu", bytes[0],
                     bytes[1], bytes[2]);
    if (rank == 0) {
        printf("ll slots: %d ranks, connector bytes with 4, 8 and 16 slots %zu, %zu, %zu; "
               "%d runs each correct\n", n, bytes[0], bytes[1], bytes[2], LLS_RUNS);
    }
    return 0;
}

START_TEST(test_ll_slots)
{
    dl_run_ranks((const int[]){2, 3, 0}, DL_ANY, 120, ll_slots_body, NULL);
}
END_TEST

/* ---- a late joiner ------------------------------------------------------ */

static int late_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    int id;
    float *d, h[4096];

    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    /* rank 0 registers and runs late, after the others quit for idleness */
    if (rank == 0) {
        usleep(300000);
    }
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(4096, DFCCL_FLOAT32, DFCCL_SUM, g, 0, &id) ==
                     DFCCL_OK, "register");
    d = dfccl_test_malloc(ctx, sizeof(h));
    fill(h, 4096, rank, 0, 0);
    dfccl_test_put(ctx, d, h, sizeof(h));
    DFCCL_TEST_CHECK(dfcclRunAllReduce(d, d, id, NULL, NULL, ctx) == DFCCL_OK, "run");
    DFCCL_TEST_CHECK(dfcclWait(id, dfccl_test_wait_ms(60000), ctx) == DFCCL_OK, "wait");
    dfccl_test_get(ctx, h, d, sizeof(h));
    if (check_sum(h, 4096, n, 0, 0)) {
        return 1;
    }
    return unit_rank_end(ctx, d);
}

START_TEST(test_late_joiner)
{
    dl_run_ranks((const int[]){3, 0}, DL_ANY, 60, late_body, NULL);
}
END_TEST

/* ---- a late peer's bell ------------------------------------------------ */

/*
 * Ranks 0..n-2 run an allreduce; rank n-1 runs it once their daemons have
 * been launched 8 times and are off. With a 2 ms quit and a relaunch gap
 * of 20 ms times the load factor (dfccl_test_scale, 1 to 4), the early
 * daemons quit stuck and are relaunched after gaps that double, 20, 40,
 * ..., 1280 ms, and the next one is due 2.56 s (up to 10 s under load)
 * after the eighth: only the late rank's bell can bring it forward, well
 * before, even when a loaded machine slows the barrier between them down.
 * No rank leaves before every rank has its result: a peer that exited is
 * an error while a collective is in flight. *arg: DFCCL_PEER_BELLS.
 */
static int bell_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    const int bells = *(const int *)arg;
    dfccl_config_t cfg;
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    dfccl_stats_t st;
    int id;
    float *d, h[1024];

    DFCCL_TEST_CHECK(dfcclConfigInit(&cfg) == DFCCL_OK, "config");
    cfg.quit_us     = 2000;
    cfg.relaunch_us = (uint32_t)(20000 * dfccl_test_scale());
    cfg.peer_bells  = bells;
    dfccl_test_setup(rank, n, oob, &cfg, &ctx, &g);
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(1024, DFCCL_FLOAT32, DFCCL_SUM, g, 0, &id) ==
                     DFCCL_OK, "register");
    d = dfccl_test_malloc(ctx, sizeof(h));
    fill(h, 1024, rank, 0, 0);
    dfccl_test_put(ctx, d, h, sizeof(h));
    dfccl_test_barrier(oob);
    if (rank != n - 1) {
        DFCCL_TEST_CHECK(dfcclRunAllReduce(d, d, id, NULL, NULL, ctx) == DFCCL_OK, "run");
        do {
            usleep(1000);
            dfcclGetStats(ctx, &st);
        } while (st.launches < 8 || st.running);
    }
    dfccl_test_barrier(oob);
    if (rank == n - 1) {
        DFCCL_TEST_CHECK(dfcclRunAllReduce(d, d, id, NULL, NULL, ctx) == DFCCL_OK, "run");
    }
    DFCCL_TEST_CHECK(dfcclWait(id, dfccl_test_wait_ms(60000), ctx) == DFCCL_OK, "wait");
    dfccl_test_barrier(oob);
    dfccl_test_get(ctx, h, d, sizeof(h));
    if (check_sum(h, 1024, n, 0, 0)) {
        return 1;
    }
    dfcclGetStats(ctx, &st);
    if (rank == 0) {
        printf("late peer, bells %s: rank 0 had %llu launches, %llu on a peer's bell\n",
               bells ? "on" : "off", (unsigned long long)st.launches,
               (unsigned long long)st.peer_relaunches);
        DFCCL_TEST_CHECK(bells ? st.peer_relaunches >= 1 : st.peer_relaunches == 0,
                         "bells %d: %llu relaunches on a peer's bell", bells,
                         (unsigned long long)st.peer_relaunches);
    }
    return unit_rank_end(ctx, d);
}

START_TEST(test_late_peer_bell)
{
    int on = 1, off = 0;

    dl_run_ranks((const int[]){3, 0}, DL_ANY, 60, bell_body, &on);
    dl_run_ranks((const int[]){2, 0}, DL_ANY, 60, bell_body, &off);
}
END_TEST

/* ---- a replay after the peer re-registered --------------------------- */

/*
 * A one-shot allreduce X: rank 0 sends its lines, gets stuck (its peers
 * have not started) and its daemon quits; with peer bells off and a 1 s
 * relaunch gap it stays off. Its peers (rank 1 on 2 ranks, every other
 * rank on more) then run X (rank 0's lines are there), wait, deregister X
 * and register Y of the same shape, which gets X's connector memory. Only
 * then is rank 0's daemon relaunched and X replayed. A replay that wrote
 * its lines again would put X's input into Y's first slot at a peer with
 * Y's first flag, and the peer's first Y would take it for rank 0's Y
 * input. All ranks then run Y with new inputs, the peers well before rank
 * 0, and check it.
 */
#define REPLAY_COUNT 64

/* Wait for X, check it, deregister it and register Y in its place. */
static int replay_next(dfccl_rank_ctx_t ctx, dfccl_group_t g, int x, float *d, int n, int *y)
{
    float h[REPLAY_COUNT];

    DFCCL_TEST_CHECK(dfcclWait(x, dfccl_test_wait_ms(60000), ctx) == DFCCL_OK, "wait X");
    dfccl_test_get(ctx, h, d, sizeof(h));
    if (check_sum(h, REPLAY_COUNT, n, 0, 0)) {
        return 1;
    }
    DFCCL_TEST_CHECK(dfcclDeregister(x, ctx) == DFCCL_OK, "deregister X");
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(REPLAY_COUNT, DFCCL_FLOAT32, DFCCL_SUM, g, 0, y) ==
                     DFCCL_OK, "register Y");
    return 0;
}

static int replay_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    dfccl_config_t cfg;
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    dfccl_stats_t st;
    int x, y;
    unsigned long long launches = 0;
    float *d, h[REPLAY_COUNT];

    (void)arg;
    DFCCL_TEST_CHECK(dfcclConfigInit(&cfg) == DFCCL_OK, "config");
    cfg.quit_us     = 2000;
    /* the peers run, deregister and register within this gap (1 s on an
     * idle machine, longer on a loaded one) */
    cfg.relaunch_us = (uint32_t)(1000000 * dfccl_test_scale());
    cfg.peer_bells  = 0;
    dfccl_test_setup(rank, n, oob, &cfg, &ctx, &g);
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(REPLAY_COUNT, DFCCL_FLOAT32, DFCCL_SUM, g, 0, &x) ==
                     DFCCL_OK, "register X");
    d = dfccl_test_malloc(ctx, sizeof(h));
    fill(h, REPLAY_COUNT, rank, 0, 0);
    dfccl_test_put(ctx, d, h, sizeof(h));
    dfccl_test_barrier(oob);
    if (rank == 0) {
        DFCCL_TEST_CHECK(dfcclRunAllReduce(d, d, x, NULL, NULL, ctx) == DFCCL_OK, "run X");
        do { /* sent, stuck, quit */
            usleep(1000);
            dfcclGetStats(ctx, &st);
        } while (st.launches < 1 || st.running);
        launches = st.launches;
    }
    dfccl_test_barrier(oob);
    if (rank != 0) {
        DFCCL_TEST_CHECK(dfcclRunAllReduce(d, d, x, NULL, NULL, ctx) == DFCCL_OK, "run X");
        if (replay_next(ctx, g, x, d, n, &y)) {
            return 1;
        }
    }
    dfccl_test_barrier(oob);
    if (rank == 0) {
        dfcclGetStats(ctx, &st);
        /* the scenario needs the replay to come after the peers' registrations */
        DFCCL_TEST_CHECK(st.launches == launches, "rank 0's daemon was relaunched (%llu "
                         "launches, %llu before) before its peers re-registered",
                         (unsigned long long)st.launches, launches);
        if (replay_next(ctx, g, x, d, n, &y)) {
            return 1;
        }
    }
    dfccl_test_barrier(oob);
    /* the peers first, and rank 0 only 100 ms later: a stale line would
     * let the peers complete Y without rank 0 */
    fill(h, REPLAY_COUNT, rank, 1, 1);
    dfccl_test_put(ctx, d, h, sizeof(h));
    if (rank != 0) {
        DFCCL_TEST_CHECK(dfcclRunAllReduce(d, d, y, NULL, NULL, ctx) == DFCCL_OK, "run Y");
        usleep(100000);
    }
    dfccl_test_barrier(oob);
    if (rank == 0) {
        DFCCL_TEST_CHECK(dfcclRunAllReduce(d, d, y, NULL, NULL, ctx) == DFCCL_OK, "run Y");
    }
    DFCCL_TEST_CHECK(dfcclWait(y, dfccl_test_wait_ms(60000), ctx) == DFCCL_OK, "wait Y: %s",
                     dfcclGetLastErrorMessage());
    dfccl_test_get(ctx, h, d, sizeof(h));
    if (check_sum(h, REPLAY_COUNT, n, 1, 1)) {
        fprintf(stderr, "rank %d: Y after a replay of X across the re-registration\n", rank);
        return 1;
    }
    dfccl_test_barrier(oob); /* a rank that exits first fails the others' waits */
    return unit_rank_end(ctx, d);
}

START_TEST(test_replay_after_reregister)
{
    dl_run_ranks((const int[]){2, 0}, DFCCL_ONESHOT_MAX_RANKS, 60, replay_body, NULL);
}
END_TEST

/* ---- priorities --------------------------------------------------------- */

static volatile int prio_done_order[4];
static volatile int prio_done_n;

static void prio_cb(int id, dfccl_status_t st, void *arg)
{
    prio_done_order[prio_done_n++] = (int)(intptr_t)arg;
}

static int prio_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    int lo, hi, hi_first = 0;
    size_t small = 1024;
    float *dl, *dh;

    /* Every rank runs the two in the same order, so nothing needs a
     * preemption here; without one, the order is the task queue's. (With
     * the usual spin thresholds, a rank whose peer lags may switch to the
     * low-priority collective, and both ranks may then finish it first.) */
    setenv("DFCCL_SPIN_HEAD", "4000000000", 1);
    setenv("DFCCL_SPIN_MIN", "4000000000", 1);
    setenv("DFCCL_SPIN_CROWD", "4000000000", 1);
    /* The callbacks must run in the order of the completion queue: with a
     * poller thread, it and dfcclWait may each take one completion and run
     * their callbacks in either order. Here only dfcclWait takes them. */
    setenv("DFCCL_PROGRESS", "explicit", 1);
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(small, DFCCL_FLOAT32, DFCCL_SUM, g, 0, &lo) ==
                     DFCCL_OK, "register");
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(small, DFCCL_FLOAT32, DFCCL_SUM, g, 10, &hi) ==
                     DFCCL_OK, "register");
    dl = dfccl_test_malloc(ctx, small * 4);
    dh = dfccl_test_malloc(ctx, small * 4);
    for (int it = 0; it < 5; it++) {
        prio_done_n = 0;
        dfccl_test_barrier(oob);
        /* Both become ready together (one batch): the high-priority one must
         * complete first, on every rank, although it was started second. */
        DFCCL_TEST_CHECK(dfcclBatchStart(ctx) == DFCCL_OK, "batch");
        DFCCL_TEST_CHECK(dfcclRunAllReduce(dl, dl, lo, prio_cb, (void *)1, ctx) == DFCCL_OK,
                         "run");
        DFCCL_TEST_CHECK(dfcclRunAllReduce(dh, dh, hi, prio_cb, (void *)2, ctx) == DFCCL_OK,
                         "run");
        DFCCL_TEST_CHECK(dfcclBatchEnd(ctx) == DFCCL_OK, "batch");
        DFCCL_TEST_CHECK(dfcclWait(lo, dfccl_test_wait_ms(60000), ctx) == DFCCL_OK, "wait");
        DFCCL_TEST_CHECK(dfcclWait(hi, dfccl_test_wait_ms(60000), ctx) == DFCCL_OK, "wait");
        if (prio_done_n == 2 && prio_done_order[0] == 2 && prio_done_order[1] == 1) {
            hi_first++;
        }
    }
    if (rank == 0) {
        printf("priority: the high-priority collective completed before the low-priority one "
               "in %d of 5 rounds\n", hi_first);
    }
    DFCCL_TEST_CHECK(hi_first == 5, "high priority completed first in only %d of 5 rounds",
                     hi_first);
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    return 0;
}

START_TEST(test_priority)
{
    dl_run_ranks((const int[]){2, 0}, DL_ANY, 120, prio_body, NULL);
}
END_TEST

/* ---- running again as soon as the callback signals -------------------- */

static volatile int rerun_flag;

static void rerun_cb(int id, dfccl_status_t st, void *arg)
{
    (void)id;
    (void)arg;
    __atomic_store_n(&rerun_flag, st == DFCCL_OK ? 1 : -1, __ATOMIC_RELEASE);
    usleep(200); /* a callback with more to do: the woken thread runs first */
}

/*
 * A completion callback wakes a thread that runs the same collective again
 * at once, as the MPI component does for back-to-back blocking calls of one
 * signature: the run must be accepted even while the callback (on the
 * poller thread) has not returned yet. dfcclWait still returns only after
 * the callback ran. Every result is checked.
 */
static int rerun_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    const size_t count = 256;
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    const char *prog = getenv("DFCCL_PROGRESS");
    int id, busy = 0, explicit = prog != NULL && strcmp(prog, "explicit") == 0;
    float *d, *h;

    (void)arg;
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(count, DFCCL_FLOAT32, DFCCL_SUM, g, 0, &id) ==
                     DFCCL_OK, "register");
    d = dfccl_test_malloc(ctx, count * sizeof(float));
    h = malloc(count * sizeof(float));
    DFCCL_TEST_CHECK(h != NULL, "malloc");
    for (int it = 0; it < 300; it++) {
        dfccl_status_t st;
        fill(h, count, rank, 0, it);
        dfccl_test_put(ctx, d, h, count * sizeof(float));
        __atomic_store_n(&rerun_flag, 0, __ATOMIC_RELEASE);
        st = dfcclRunAllReduce(d, d, id, rerun_cb, NULL, ctx);
        busy += st == DFCCL_ERR_BUSY;
        DFCCL_TEST_CHECK(st == DFCCL_OK, "iteration %d: run right after the callback: %s", it,
                         dfcclGetLastErrorMessage());
        while (__atomic_load_n(&rerun_flag, __ATOMIC_ACQUIRE) == 0) {
            if (explicit) {
                dfcclProgress(ctx, NULL);
            } else {
                sched_yield(); /* the poller thread runs the callback */
            }
        }
        DFCCL_TEST_CHECK(rerun_flag == 1, "iteration %d: completed with an error", it);
        /* the data is complete when the callback runs */
        dfccl_test_get(ctx, h, d, count * sizeof(float));
        if (check_sum(h, count, n, 0, it)) {
            return 1;
        }
    }
    DFCCL_TEST_CHECK(dfcclWait(id, dfccl_test_wait_ms(60000), ctx) == DFCCL_OK, "wait");
    DFCCL_TEST_CHECK(busy == 0, "%d runs refused as busy", busy);
    free(h);
    return unit_rank_end(ctx, d);
}

START_TEST(test_rerun_after_callback)
{
    dl_run_ranks((const int[]){2, 0}, DL_ANY, 120, rerun_body, NULL);
}
END_TEST

/* ---- grid size ------------------------------------------------------------ */

/* Start allreduce `id` in place on d, with input `fill` of collective c. */
static int grid_run(dfccl_rank_ctx_t ctx, int id, int c, float *d, float *h, size_t count,
                    int rank, int it)
{
    fill(h, count, rank, c, it);
    dfccl_test_put(ctx, d, h, count * sizeof(float));
    DFCCL_TEST_CHECK(dfcclRunAllReduce(d, d, id, NULL, NULL, ctx) == DFCCL_OK, "run: %s",
                     dfcclGetLastErrorMessage());
    return 0;
}

/* Wait for it and check the sum. */
static int grid_check(dfccl_rank_ctx_t ctx, int id, int c, float *d, float *h, size_t count,
                      int n, int it)
{
    DFCCL_TEST_CHECK(dfcclWait(id, dfccl_test_wait_ms(60000), ctx) == DFCCL_OK, "wait: %s",
                     dfcclGetLastErrorMessage());
    dfccl_test_get(ctx, h, d, count * sizeof(float));
    return check_sum(h, count, n, c, it);
}

/*
 * The daemon's grid is the most channels of a registered collective: one
 * block while only a small collective is registered; a larger collective
 * registered and run while that one-block daemon runs makes it quit and
 * come back with four blocks (its SQE waits meanwhile); after the large
 * one is deregistered, the next launch is one block again; and the context
 * is destroyed with a large collective registered that never ran.
 */
static int grid_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    const size_t small = 16, big = 16384; /* 64 B: 1 channel; 64 KiB: 4 */
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    dfccl_stats_t s;
    int a, b;
    float *da, *db, *h;

    setenv("DFCCL_MAX_BLOCKS", "4", 1);
    setenv("DFCCL_CHANNEL_BYTES", "4096", 1);
    setenv("DFCCL_QUIT_US", "300000", 1); /* the daemon stays up between runs */
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(small, DFCCL_FLOAT32, DFCCL_SUM, g, 0, &a) ==
                     DFCCL_OK, "register");
    da = dfccl_test_malloc(ctx, small * sizeof(float));
    db = dfccl_test_malloc(ctx, big * sizeof(float));
    h  = malloc(big * sizeof(float));
    DFCCL_TEST_CHECK(h != NULL, "malloc");

    if (grid_run(ctx, a, 0, da, h, small, rank, 0) || grid_check(ctx, a, 0, da, h, small, n, 0)) {
        return 1;
    }
    dfcclGetStats(ctx, &s);
    DFCCL_TEST_CHECK(s.blocks == 1, "one 1-channel collective registered: %d blocks", s.blocks);

    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(big, DFCCL_FLOAT32, DFCCL_SUM, g, 0, &b) ==
                     DFCCL_OK, "register");
    for (int it = 1; it <= 4; it++) {
        /* the small one first: the one-block daemon is running when the
         * large one arrives (in the first iteration) */
        if (grid_run(ctx, a, 0, da, h, small, rank, it) ||
            grid_run(ctx, b, 1, db, h, big, rank, it) ||
            grid_check(ctx, a, 0, da, h, small, n, it) ||
            grid_check(ctx, b, 1, db, h, big, n, it)) {
            return 1;
        }
    }
    dfcclGetStats(ctx, &s);
    DFCCL_TEST_CHECK(s.blocks == 4, "a 4-channel collective registered: %d blocks", s.blocks);
    if (rank == 0) {
        printf("grid: 1 block for a 1-channel collective, 4 once a 4-channel one was "
               "registered and run while the small daemon ran (%llu launches, %llu quits)\n",
               (unsigned long long)s.launches, (unsigned long long)s.quits);
    }

    DFCCL_TEST_CHECK(dfcclDeregister(b, ctx) == DFCCL_OK, "deregister");
    dfccl_test_barrier(oob);
    /* until the daemon has quit for idleness (DFCCL_QUIT_US): a busy
     * machine may take longer than any fixed sleep */
    for (struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0) == 0;) {
        do {
            DFCCL_TEST_CHECK(dfcclGetStats(ctx, &s) == DFCCL_OK, "stats");
            clock_gettime(CLOCK_MONOTONIC, &t1);
            DFCCL_TEST_CHECK(t1.tv_sec - t0.tv_sec < 30 * dfccl_test_scale(), "the idle daemon "
                             "did not quit");
            usleep(1000);
        } while (s.running);
        break;
    }
    if (grid_run(ctx, a, 0, da, h, small, rank, 9) || grid_check(ctx, a, 0, da, h, small, n, 9)) {
        return 1;
    }
    dfcclGetStats(ctx, &s);
    DFCCL_TEST_CHECK(s.blocks == 1, "large collective deregistered: %d blocks", s.blocks);
    /* a large collective registered but never run when the context goes:
     * the exit must still reach every block (dfcclDestroy returns) */
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(big, DFCCL_FLOAT32, DFCCL_SUM, g, 0, &b) ==
                     DFCCL_OK, "register");
    dfccl_test_free(ctx, da);
    dfccl_test_free(ctx, db);
    free(h);
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    return 0;
}

START_TEST(test_grid)
{
    dl_run_ranks((const int[]){2, 3, 0}, DL_ANY, 120, grid_body, NULL);
}
END_TEST

/* ---- quit race ------------------------------------------------------------ */

/*
 * Runs that arrive just as the daemon quits: the quit time is short and each
 * rank idles a random time around it before every run, so that entries land
 * before, during and after block 0's quit decision. The host asks the driver
 * whether the daemon runs only when block 0 has said it is quitting; an entry
 * that neither side saw would never run, and the wait would time out.
 */
static int quitrace_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    const size_t count = 16;
    const int iters = 300, quit_us = 200;
    unsigned seed = 7u + 31u * (unsigned)rank;
    char quit[16];
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    dfccl_stats_t s;
    float *d, h[16];
    int a;

    snprintf(quit, sizeof(quit), "%d", quit_us);
    setenv("DFCCL_QUIT_US", quit, 1);
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(count, DFCCL_FLOAT32, DFCCL_SUM, g, 0, &a) ==
                     DFCCL_OK, "register");
    d = dfccl_test_malloc(ctx, count * sizeof(float));
    /* Past the planned runs, a machine so loaded that the daemon's threads
     * never saw a quiet gap gets longer gaps (up to 100 ms, for at most 200
     * more runs, the same on every rank) until its daemon has quit and
     * been relaunched: the race must have been run, not only tried. */
    for (int it = 0, gap = 3 * quit_us; it < iters + 200; it++) {
        if (it >= iters) {
            /* every rank's answer, so that all stop at the same run */
            dfcclGetStats(ctx, &s);
            if (dfccl_test_sum_u64(oob, s.quits > 0 && s.launches > 1) == (unsigned)n) {
                break;
            }
            gap = gap < 100000 ? 2 * gap : gap;
        }
        usleep((useconds_t)(rand_r(&seed) % (unsigned)gap));
        if (grid_run(ctx, a, 0, d, h, count, rank, it)) {
            return 1;
        }
        DFCCL_TEST_CHECK(dfcclWait(a, dfccl_test_wait_ms(20000), ctx) == DFCCL_OK,
                         "iteration %d: wait: %s", it, dfcclGetLastErrorMessage());
        dfccl_test_get(ctx, h, d, count * sizeof(float));
        if (check_sum(h, count, n, 0, it)) {
            return 1;
        }
    }
    dfcclGetStats(ctx, &s);
    DFCCL_TEST_CHECK(s.quits > 0 && s.launches > 1,
                     "the daemon never quit between runs (%llu quits, %llu launches)",
                     (unsigned long long)s.quits, (unsigned long long)s.launches);
    if (rank == 0) {
        printf("quit race: %d runs, each after 0 to %d us idle with a %d us quit time: "
               "%llu launches, %llu quits on rank 0\n", iters, 3 * quit_us, quit_us,
               (unsigned long long)s.launches, (unsigned long long)s.quits);
    }
    return unit_rank_end(ctx, d);
}

START_TEST(test_quit_race)
{
    dl_run_ranks((const int[]){2, 3, 0}, DL_ANY, 180, quitrace_body, NULL);
}
END_TEST

int main(void)
{
    Suite *s  = suite_create("deadlock");
    TCase *tc = dfccl_test_case(s, "scenarios", 900);

    tcase_add_test(tc, test_disorder);
    tcase_add_test(tc, test_disorder_explicit_progress);
    tcase_add_test(tc, test_disorder_groups);
    tcase_add_test(tc, test_disorder_arrivals);
    tcase_add_test(tc, test_disorder_sq_window);
    tcase_add_test(tc, test_disorder_spins);
    tcase_add_test(tc, test_disorder_algos);
    tcase_add_test(tc, test_disorder_kinds);
    tcase_add_test(tc, test_synchronize);
    tcase_add_test(tc, test_threads);
    tcase_add_test(tc, test_many_collectives);
    tcase_add_test(tc, test_conn_budget);
    tcase_add_test(tc, test_ll_slots);
    tcase_add_test(tc, test_late_joiner);
    tcase_add_test(tc, test_late_peer_bell);
    tcase_add_test(tc, test_replay_after_reregister);
    tcase_add_test(tc, test_priority);
    tcase_add_test(tc, test_grid);
    tcase_add_test(tc, test_quit_race);
    tc = dfccl_test_case(s, "rerun", 300);
    tcase_add_test(tc, test_rerun_after_callback);
    return dfccl_test_run(s, CK_VERBOSE);
}
