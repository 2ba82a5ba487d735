/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Partial completion (dfcclQueryRange, dfcclGetProgress and
 * dfcclPartialReady), on 2 to 8 ranks (quick mode, DFCCL_TEST_QUICK: 2 to
 * 4):
 *
 *   - allreduces on the ring, ctree and tree, watched while they run,
 *     through the host query and through the words: what a look claims
 *     never shrinks within a run, never passes the buffer's end, reaches
 *     it at completion, and the bytes it claims hold the run's result when
 *     it claims them (each run's values differ from the one before, so a
 *     run that took the previous run's progress for its own would be
 *     caught); some looks see a part of the buffer final and not all of
 *     it; from an offset in the middle the same holds;
 *   - the same preempted at every primitive (spin thresholds of 1,
 *     256-byte slots), with preemptions counted, and with SIMPLE slots;
 *   - "whole only" for one shot, two shot, the mesh (alltoall) and the
 *     ring's allgather: nothing until the run completes, then everything;
 *   - a run that fails: nothing claimed while it hangs, then its error;
 *   - bad input: each call names itself, the collective and the fix.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mp.h"
#include "suite.h"
#include "unit_util.h"

typedef struct {
    int         algo;    /* dfccl_algo_choice_t */
    int         preempt; /* spin thresholds of 1 and 256-byte slots */
    const char *proto;   /* DFCCL_PROTO, or NULL */
    int         runs;
} partial_arg_t;

static int partial_quick(void)
{
    return getenv("DFCCL_TEST_QUICK") != NULL;
}

/* Rank r's input of run k at i, and the allreduce's sum on n ranks: whole
 * numbers, exact in float32. */
static float partial_in(int k, int r, size_t i)
{
    return (float)(i % 1021) + (float)r + 7.0f * (float)k;
}

static float partial_sum(int k, int n, size_t i)
{
    return (float)n * ((float)(i % 1021) + 7.0f * (float)k) + (float)(n * (n - 1) / 2);
}

/* The floats of [from, to) (bytes) of d hold run k's sum: 0, else 1 with a
 * message. */
static int partial_check(dfccl_rank_ctx_t ctx, const float *d, float *h, int k, int n,
                         size_t from, size_t to, const char *how)
{
    const size_t a = from / sizeof(float), b = (to + sizeof(float) - 1) / sizeof(float);

    if (b <= a) {
        return 0;
    }
    dfccl_test_get(ctx, h + a, d + a, (b - a) * sizeof(float));
    for (size_t i = a; i < b; i++) {
        DFCCL_TEST_CHECK(h[i] == partial_sum(k, n, i), "run %d: %s claimed bytes up to %zu "
                         "final, but float %zu is %g, not %g", k, how, to, i, (double)h[i],
                         (double)partial_sum(k, n, i));
    }
    return 0;
}

/* A look at run k's progress from `offset`, by the query (words = 0) or the
 * words: within bounds and never behind the previous look (*last), its new
 * bytes checked; *mid counts looks that saw a part final and not all. */
static int partial_look(dfccl_rank_ctx_t ctx, int id, const dfccl_partial_t *p, int words,
                        size_t offset, const float *d, float *h, int k, int n, size_t *last,
                        unsigned long long *mid, int *done_p)
{
    const size_t total = p->total_bytes;
    size_t ready       = 0;
    dfccl_status_t st  = DFCCL_INPROGRESS;

    if (words) {
        ready = dfcclPartialReady(p, p->words, offset);
    } else {
        st = dfcclQueryRange(id, offset, ctx, &ready);
        DFCCL_TEST_CHECK(st == DFCCL_OK || st == DFCCL_INPROGRESS, "run %d: dfcclQueryRange: "
                         "%s: %s", k, dfcclGetErrorString(st), dfcclGetLastErrorMessage());
    }
    DFCCL_TEST_CHECK(offset + ready <= total, "run %d: %zu bytes from %zu claimed of %zu", k,
                     ready, offset, total);
    DFCCL_TEST_CHECK(ready >= *last, "run %d: progress from %zu went back from %zu to %zu "
                     "(%s)", k, offset, *last, ready, words ? "words" : "query");
    if (ready > 0 && ready < total - offset) {
        (*mid)++;
    }
    if (ready > *last) {
        if (partial_check(ctx, d, h, k, n, offset + *last, offset + ready,
                          words ? "the words" : "dfcclQueryRange") != 0) {
            return 1;
        }
        *last = ready;
    }
    if (st == DFCCL_OK) {
        DFCCL_TEST_CHECK(ready == total - offset, "run %d: complete, but %zu bytes from %zu "
                         "claimed of %zu", k, ready, offset, total);
        *done_p = 1;
    }
    return 0;
}

static int partial_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    const partial_arg_t *a = varg;
    const size_t count     = a->preempt ? 24 * 1024 + 3 : (n > 4 ? 64 : 192) * 1024 + 3;
    dfccl_coll_desc_t desc = {DFCCL_KIND_ALLREDUCE, count, DFCCL_FLOAT32, DFCCL_SUM, 0, 0,
                              (dfccl_algo_choice_t)a->algo, 0, 0};
    unsigned long long mid = 0, pre = 0, looks = 0;
    int host, runs = 0;
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    dfccl_coll_info_t info;
    float *s, *d, *h;
    int id;

    setenv("DFCCL_SLOT_BYTES", a->preempt ? "256" : "4096", 1);
    setenv("DFCCL_STEP_SLICES", "1", 1);
    if (a->preempt) {
        setenv("DFCCL_SPIN_HEAD", "1", 1);
        setenv("DFCCL_SPIN_MIN", "1", 1);
        setenv("DFCCL_SPIN_STICKY", "1", 1);
    }
    dfccl_test_setenv("DFCCL_PROTO", a->proto);
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    host = dfcclGetBackend(ctx) == DFCCL_BACKEND_HOST;
    DFCCL_TEST_CHECK(dfcclRegister(&desc, g, &id) == DFCCL_OK, "register: %s",
                     dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(dfcclGetCollInfo(id, ctx, &info) == DFCCL_OK, "info");
    s = dfccl_test_malloc(ctx, count * sizeof(float));
    d = dfccl_test_malloc(ctx, count * sizeof(float));
    h = malloc(count * sizeof(float));
    DFCCL_TEST_CHECK(s != NULL && d != NULL && h != NULL, "out of memory");
    for (size_t i = 0; i < count; i++) {
        h[i] = -1.0f; /* never a sum */
    }
    dfccl_test_put(ctx, d, h, count * sizeof(float));

    /* a->runs runs; on the host backend, while no look of any rank has
     * seen a run part done, up to 64 more: a loaded machine may keep every
     * looking thread off its core through a whole run (every rank counts
     * the same, so all stop after the same run) */
    for (int k = 1;; k++) {
        const int words = host && k % 2 == 0; /* the words are host memory there */
        const size_t offset = k % 3 == 0 ? count * sizeof(float) / 2 + 4 : 0;
        size_t last = 0, ready = 0;
        dfccl_partial_t p;
        dfccl_status_t st;
        int done = 0;

        for (size_t i = 0; i < count; i++) {
            h[i] = partial_in(k, rank, i);
        }
        dfccl_test_put(ctx, s, h, count * sizeof(float));
        /* all ranks' buffers are ready: none is still reading run k - 1's
         * result (a rank leaves its wait with the run complete) */
        dfccl_test_barrier(oob);
        st = dfcclRunAllReduce(s, d, id, NULL, NULL, ctx);
        DFCCL_TEST_CHECK(st == DFCCL_OK, "run %d: %s", k, dfcclGetLastErrorMessage());
        DFCCL_TEST_CHECK(dfcclGetProgress(id, ctx, &p) == DFCCL_OK, "progress: %s",
                         dfcclGetLastErrorMessage());
        DFCCL_TEST_CHECK(!p.whole_only && p.granularity > 0 && p.nchannels == info.nchannels &&
                             p.total_bytes == count * sizeof(float),
                         "%s: whole_only %d, granularity %zu, %d channel(s), %zu bytes",
                         info.algo, p.whole_only, p.granularity, p.nchannels, p.total_bytes);
        DFCCL_TEST_CHECK(p.run == (uint64_t)k, "run %d is tagged %llu", k,
                         (unsigned long long)p.run);
        while (!done) {
            if (words) {
                /* the device's view; completion still comes from the query */
                if (partial_look(ctx, id, &p, 1, offset, d, h, k, n, &last, &mid, &done) != 0) {
                    return 1;
                }
                done = dfcclQuery(id, ctx) != DFCCL_INPROGRESS;
            } else if (partial_look(ctx, id, &p, 0, offset, d, h, k, n, &last, &mid, &done) !=
                       0) {
                return 1;
            }
            looks++;
        }
        st = dfcclWait(id, dfccl_test_wait_ms(60000), ctx);
        DFCCL_TEST_CHECK(st == DFCCL_OK, "run %d: wait: %s", k, dfcclGetLastErrorMessage());
        st = dfcclQueryRange(id, offset, ctx, &ready);
        DFCCL_TEST_CHECK(st == DFCCL_OK && ready == count * sizeof(float) - offset,
                         "run %d complete: %s, %zu bytes from %zu", k, dfcclGetErrorString(st),
                         ready, offset);
        if (words) {
            /* the words say all of it, for this run, once it completed */
            DFCCL_TEST_CHECK(dfcclPartialReady(&p, p.words, 0) == count * sizeof(float),
                             "run %d complete: the words say %zu bytes", k,
                             dfcclPartialReady(&p, p.words, 0));
        }
        if (partial_check(ctx, d, h, k, n, 0, count * sizeof(float), "completion") != 0) {
            return 1;
        }
        runs = k;
        if (k >= a->runs &&
            (!host || k >= a->runs + 64 || dfccl_test_sum_u64(oob, mid) > 0)) {
            break;
        }
    }
    mid = dfccl_test_sum_u64(oob, mid);
    DFCCL_TEST_CHECK(dfcclDeregister(id, ctx) == DFCCL_OK, "deregister");
    dfccl_test_free(ctx, s);
    dfccl_test_free(ctx, d);
    free(h);
    if (unit_rank_end_counted(oob, ctx, g, &pre) != 0) {
        return 1;
    }
    if (rank == 0) {
        printf("%s on %d ranks%s%s%s: %d runs, %llu looks of rank 0, %llu of all ranks' "
               "saw part of the buffer final, %llu preemptions\n",
               info.algo, n, a->preempt ? " (preempted at every primitive)" : "",
               a->proto != NULL ? ", proto " : "", a->proto != NULL ? a->proto : "", runs,
               looks, mid, pre);
        fflush(stdout);
    }
    /* a GPU may finish a run between two looks of the host */
    DFCCL_TEST_CHECK(mid > 0 || !host, "no look saw part of the buffer final: partial "
                     "completion was never observed");
    DFCCL_TEST_CHECK(!a->preempt || pre > 0, "no preemption with spin thresholds of 1");
    return 0;
}

static void partial_run(const partial_arg_t *a, const int *ranks)
{
    for (; *ranks != 0; ranks++) {
        const double t0 = unit_now_s();
        ck_assert_int_eq(dfccl_test_mp_run(*ranks, 300, partial_body, (void *)a), 0);
        printf("  (%d ranks: %.1f s)\n", *ranks, unit_now_s() - t0);
        fflush(stdout);
    }
}

static const int partial_algos[] = {DFCCL_ALGO_RING, DFCCL_ALGO_CTREE, DFCCL_ALGO_TREE};

START_TEST(test_partial_watch)
{
    static const int all[] = {2, 3, 4, 5, 8, 0}, quick[] = {2, 3, 4, 0};
    const partial_arg_t a  = {partial_algos[_i], 0, NULL, 6};

    partial_run(&a, partial_quick() ? quick : all);
}
END_TEST

START_TEST(test_partial_simple)
{
    static const int ranks[] = {2, 4, 0};
    const partial_arg_t a    = {partial_algos[_i], 0, "simple", 3};

    partial_run(&a, ranks);
}
END_TEST

START_TEST(test_partial_preempted)
{
    static const int all[] = {2, 3, 4, 0}, quick[] = {2, 3, 0};
    const partial_arg_t a  = {partial_algos[_i], 1, NULL, 3};

    partial_run(&a, partial_quick() ? quick : all);
}
END_TEST

/* One collective that completes as a whole: while it runs nothing is
 * claimed, then everything. */
static int whole_one(dfccl_rank_ctx_t ctx, dfccl_group_t g, const dfccl_coll_desc_t *desc,
                     const char *algo)
{
    const size_t esz = sizeof(int32_t);
    const size_t out = desc->kind == DFCCL_KIND_ALLREDUCE ? desc->count
                                                          : desc->count * 8; /* enough */
    dfccl_coll_info_t info;
    dfccl_partial_t p;
    int32_t *s, *d;
    size_t ready = 1;
    dfccl_status_t st;
    int id;

    DFCCL_TEST_CHECK(dfcclRegister(desc, g, &id) == DFCCL_OK, "register %s: %s", algo,
                     dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(dfcclGetCollInfo(id, ctx, &info) == DFCCL_OK, "info");
    DFCCL_TEST_CHECK(strcmp(info.algo, algo) == 0, "asked for %s, runs %s", algo, info.algo);
    s = dfccl_test_malloc(ctx, out * esz);
    d = dfccl_test_malloc(ctx, out * esz);
    DFCCL_TEST_CHECK(dfcclQueryRange(id, 0, ctx, &ready) == DFCCL_OK && ready == 0,
                     "%s never ran: %zu bytes ready", algo, ready);
    for (int k = 1; k <= 3; k++) {
        int32_t h[8] = {0};
        dfccl_test_put(ctx, s, h, sizeof(h));
        DFCCL_TEST_CHECK(dfcclRun(s, d, id, NULL, NULL, ctx) == DFCCL_OK, "run %s", algo);
        DFCCL_TEST_CHECK(dfcclGetProgress(id, ctx, &p) == DFCCL_OK, "progress");
        DFCCL_TEST_CHECK(p.whole_only == 1 && p.granularity == 0, "%s: whole_only %d, "
                         "granularity %zu", algo, p.whole_only, p.granularity);
        while ((st = dfcclQueryRange(id, 0, ctx, &ready)) == DFCCL_INPROGRESS) {
            DFCCL_TEST_CHECK(ready == 0 || ready == p.total_bytes, "%s in flight: %zu of %zu "
                             "bytes claimed", algo, ready, p.total_bytes);
            if (dfcclGetBackend(ctx) == DFCCL_BACKEND_HOST) {
                const size_t w = dfcclPartialReady(&p, p.words, 0);
                DFCCL_TEST_CHECK(w == 0 || w == p.total_bytes, "%s: the words claim %zu of "
                                 "%zu bytes", algo, w, p.total_bytes);
            }
        }
        DFCCL_TEST_CHECK(st == DFCCL_OK && ready == p.total_bytes, "%s done: %s, %zu of %zu",
                         algo, dfcclGetErrorString(st), ready, p.total_bytes);
        DFCCL_TEST_CHECK(dfcclWait(id, dfccl_test_wait_ms(30000), ctx) == DFCCL_OK, "wait");
        if (dfcclGetBackend(ctx) == DFCCL_BACKEND_HOST) {
            DFCCL_TEST_CHECK(dfcclPartialReady(&p, p.words, 0) == p.total_bytes,
                             "%s: complete, the words say %zu of %zu bytes", algo,
                             dfcclPartialReady(&p, p.words, 0), p.total_bytes);
        }
    }
    DFCCL_TEST_CHECK(dfcclDeregister(id, ctx) == DFCCL_OK, "deregister");
    dfccl_test_free(ctx, s);
    dfccl_test_free(ctx, d);
    return 0;
}

static int whole_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    const dfccl_coll_desc_t cases[] = {
        {DFCCL_KIND_ALLREDUCE, 1000, DFCCL_INT32, DFCCL_SUM, 0, 0, DFCCL_ALGO_ONESHOT, 0, 0},
        {DFCCL_KIND_ALLREDUCE, 20000, DFCCL_INT32, DFCCL_SUM, 0, 0, DFCCL_ALGO_TWOSHOT, 0, 0},
        {DFCCL_KIND_ALLTOALL, 1000, DFCCL_INT32, 0, 0, 0, DFCCL_ALGO_MESH, 0, 0},
        {DFCCL_KIND_ALLGATHER, 1000, DFCCL_INT32, 0, 0, 0, DFCCL_ALGO_RING, 0, 0},
    };
    const char *const names[] = {"oneshot", "twoshot", "mesh", "ring"};
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    unsigned long long pre;

    (void)arg;
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (whole_one(ctx, g, &cases[i], names[i]) != 0) {
            return 1;
        }
    }
    return unit_rank_end_counted(oob, ctx, g, &pre);
}

START_TEST(test_partial_whole_only)
{
    ck_assert_int_eq(dfccl_test_mp_run(2, 120, whole_body, NULL), 0);
    ck_assert_int_eq(dfccl_test_mp_run(4, 120, whole_body, NULL), 0);
}
END_TEST

static int bad_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    dfccl_partial_t p;
    size_t ready = 7;
    unsigned long long pre;
    int id, gone;

    (void)arg;
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(64, DFCCL_INT32, DFCCL_SUM, g, 0, &id) == DFCCL_OK,
                     "register");
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(8, DFCCL_INT32, DFCCL_SUM, g, 0, &gone) == DFCCL_OK,
                     "register");
    DFCCL_TEST_CHECK(dfcclDeregister(gone, ctx) == DFCCL_OK, "deregister");
    EXPECT(dfcclQueryRange(id, 0, NULL, &ready), DFCCL_ERR_INVALID_ARG, "dfcclQueryRange");
    EXPECT(dfcclQueryRange(id, 0, ctx, NULL), DFCCL_ERR_INVALID_ARG, "bytes_ready_p");
    EXPECT(dfcclQueryRange(-1, 0, ctx, &ready), DFCCL_ERR_NOT_FOUND,
           "dfcclQueryRange: collective id -1 is not registered");
    EXPECT(dfcclQueryRange(1 << 24, 0, ctx, &ready), DFCCL_ERR_NOT_FOUND, "dfcclRegister");
    EXPECT(dfcclQueryRange(gone, 0, ctx, &ready), DFCCL_ERR_NOT_FOUND, "not registered");
    EXPECT(dfcclQueryRange(id, 64 * 4 + 1, ctx, &ready), DFCCL_ERR_INVALID_ARG,
           "offset 257 is past the end of the receive buffer of collective");
    DFCCL_TEST_CHECK(strstr(dfcclGetLastErrorMessage(), "at most 256") != NULL, "fix: %s",
                     dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(ready == 7, "an error set bytes_ready_p to %zu", ready);
    EXPECT(dfcclGetProgress(id, NULL, &p), DFCCL_ERR_INVALID_ARG, "dfcclGetProgress");
    EXPECT(dfcclGetProgress(id, ctx, NULL), DFCCL_ERR_INVALID_ARG, "partial_p");
    EXPECT(dfcclGetProgress(gone, ctx, &p), DFCCL_ERR_NOT_FOUND,
           "dfcclGetProgress: collective id");
    /* the end itself is fine: nothing from there */
    DFCCL_TEST_CHECK(dfcclQueryRange(id, 64 * 4, ctx, &ready) == DFCCL_OK && ready == 0,
                     "offset at the end: %zu", ready);
    DFCCL_TEST_CHECK(dfcclDeregister(id, ctx) == DFCCL_OK, "deregister");
    return unit_rank_end_counted(oob, ctx, g, &pre);
}

/* A run that fails (rank 0 runs alone and aborts): nothing of it is
 * claimed while it hangs, and the query then answers its error. */
static int failed_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    size_t ready = 7;
    float *d;
    dfccl_status_t st;
    int id;

    (void)n;
    (void)arg;
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(4096, DFCCL_FLOAT32, DFCCL_SUM, g, 0, &id) ==
                         DFCCL_OK,
                     "register");
    d = dfccl_test_malloc(ctx, 4096 * sizeof(float));
    dfccl_test_barrier(oob); /* both registered */
    if (rank == 0) {
        const double t0 = unit_now_s();

        DFCCL_TEST_CHECK(dfcclRunAllReduce(d, d, id, NULL, NULL, ctx) == DFCCL_OK, "run");
        while (unit_now_s() - t0 < 0.2) {
            st = dfcclQueryRange(id, 0, ctx, &ready);
            DFCCL_TEST_CHECK(st == DFCCL_INPROGRESS && ready == 0, "alone: %s, %zu bytes",
                             dfcclGetErrorString(st), ready);
        }
        DFCCL_TEST_CHECK(dfcclAbort(ctx) == DFCCL_OK, "abort");
        st = dfcclWait(id, dfccl_test_wait_ms(30000), ctx);
        DFCCL_TEST_CHECK(st == DFCCL_ERR_ABORTED, "wait: %s", dfcclGetErrorString(st));
        ready = 7;
        st    = dfcclQueryRange(id, 0, ctx, &ready);
        DFCCL_TEST_CHECK(st == DFCCL_ERR_ABORTED && ready == 7, "after the abort: %s, %zu",
                         dfcclGetErrorString(st), ready);
    }
    dfccl_test_barrier(oob);
    dfccl_test_free(ctx, d);
    st = dfcclDestroy(ctx);
    DFCCL_TEST_CHECK(st == DFCCL_OK, "destroy: %s", dfcclGetLastErrorMessage());
    return 0;
}

START_TEST(test_partial_failed)
{
    ck_assert_int_eq(dfccl_test_mp_run(2, 60, failed_body, NULL), 0);
}
END_TEST

START_TEST(test_partial_badinput)
{
    ck_assert_int_eq(dfccl_test_mp_run(2, 60, bad_body, NULL), 0);
}
END_TEST

int main(void)
{
    Suite *s  = suite_create("partial");
    TCase *tc = dfccl_test_case(s, "partial", 1000);

    tcase_add_loop_test(tc, test_partial_watch, 0, 3);
    tcase_add_loop_test(tc, test_partial_simple, 0, 2);
    tcase_add_loop_test(tc, test_partial_preempted, 0, 3);
    tcase_add_test(tc, test_partial_whole_only);
    tcase_add_test(tc, test_partial_failed);
    tcase_add_test(tc, test_partial_badinput);
    return dfccl_test_run(s, CK_NORMAL);
}
