/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The tree allreduces (DFCCL_ALGO=tree: two binary trees; ctree: one
 * tree, reduction and broadcast overlapped), on 2 to 8 ranks (quick mode,
 * DFCCL_TEST_QUICK: 2 to 4):
 *
 *   - every type and operation (on more than 4 ranks: int8 and float32
 *     with SUM, MAX and AVG), counts from 1 to a few slots a channel, in
 *     place and out of place; dfcclGetCollInfo must name the tree;
 *   - four channels (the two trees on two each), and every block from
 *     DFCCL_TREE_WIDE_BYTES;
 *   - preempted at every primitive (spin thresholds of 1, 256-byte slots:
 *     many chunks) with results checked and preemptions counted;
 *   - in disorder among ring, tree and ctree allreduces (each asked for
 *     through dfcclRegister's algorithm), on one group and on a group per
 *     collective;
 *   - dfcclRegister's algorithm over DFCCL_ALGO, an allgather asked for
 *     the tree (the default runs it), and an algorithm out of range;
 *   - dfcclGroupProfile, whose alpha and beta ctree's chunk count reads.
 *
 * test_coll.c and test_deadlock.c are included with their main renamed.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reuse_cases.h"

typedef struct {
    const char *algo;    /* DFCCL_ALGO, and what dfcclGetCollInfo must say */
    int         preempt; /* spin thresholds of 1 and 256-byte slots */
    const char *blocks;  /* DFCCL_MAX_BLOCKS and DFCCL_CHANNELS, or NULL */
} tree_arg_t;

static int tree_quick(void)
{
    return getenv("DFCCL_TEST_QUICK") != NULL;
}

static int tree_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    const tree_arg_t *a = varg;
    const uint64_t counts[] = {1, 37, 1000, 65536 + 7, 3 * 65536 + 5};
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    int failures = 0, cases = 0;
    unsigned long long pre;

    setenv("DFCCL_ALGO", a->algo, 1);
    dfccl_test_setenv("DFCCL_MAX_BLOCKS", a->blocks);
    dfccl_test_setenv("DFCCL_CHANNELS", a->blocks);
    if (a->preempt) {
        setenv("DFCCL_SPIN_HEAD", "1", 1);
        setenv("DFCCL_SPIN_MIN", "1", 1);
        setenv("DFCCL_SPIN_STICKY", "1", 1);
        setenv("DFCCL_SLOT_BYTES", "256", 1);
    }
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    run_case_algo = a->algo;
    for (int ti = 0; ti < NDTYPES; ti++) {
        const int t   = dtypes[ti];
        const int few = n > 4 || a->preempt || a->blocks != NULL;
        for (int op = 0; op < DFCCL_OP_COUNT; op++) {
            if ((op == DFCCL_AVG && !is_float(t)) || (op == DFCCL_PROD && t != DFCCL_INT32) ||
                (few && t != DFCCL_FLOAT32 && t != DFCCL_INT8) ||
                (few && op != DFCCL_SUM && op != DFCCL_MAX && op != DFCCL_AVG)) {
                continue;
            }
            for (int k = 0; k < (int)(sizeof(counts) / sizeof(counts[0])); k++) {
                /* the largest counts: a few cases (preempted: the smaller ones) */
                if (k >= (a->preempt ? 3 : 4) &&
                    (op != DFCCL_SUM || (t != DFCCL_FLOAT32 && t != DFCCL_INT8))) {
                    continue;
                }
                for (int inplace = 0; inplace < 2; inplace++) {
                    int algo = 0;
                    failures += run_case(ctx, g, rank, n, DFCCL_COLL_ALLREDUCE, t, op, counts[k],
                                         inplace, &algo);
                    cases++;
                }
            }
        }
    }
    run_case_algo = NULL;
    if (unit_rank_end_counted(oob, ctx, g, &pre) != 0) {
        return 1;
    }
    if (rank == 0) {
        printf("%s on %d ranks%s%s%s: %d allreduce cases, %d failures, %llu preemptions\n",
               a->algo, n, a->preempt ? " (preempted at every primitive)" : "",
               a->blocks != NULL ? ", channels " : "", a->blocks != NULL ? a->blocks : "",
               cases, failures, pre);
    }
    DFCCL_TEST_CHECK(!a->preempt || pre > 0, "no preemption with spin thresholds of 1");
    return failures;
}

static void tree_run(const tree_arg_t *a, const int *ranks)
{
    for (; *ranks != 0; ranks++) {
        const double t0 = unit_now_s();
        ck_assert_int_eq(dfccl_test_mp_run(*ranks, 300, tree_body, (void *)a), 0);
        printf("  (%s on %d ranks: %.1f s)\n", a->algo, *ranks, unit_now_s() - t0);
        fflush(stdout);
    }
}

static const char *const tree_algos[] = {"tree", "ctree"};

START_TEST(test_tree_matrix)
{
    static const int all[] = {2, 3, 4, 5, 8, 0}, quick[] = {2, 3, 4, 0};
    const tree_arg_t a     = {tree_algos[_i], 0, NULL};

    tree_run(&a, tree_quick() ? quick : all);
}
END_TEST

START_TEST(test_tree_channels)
{
    static const int ranks[] = {3, 4, 0};
    const tree_arg_t a       = {tree_algos[_i], 0, "4"};

    tree_run(&a, ranks);
}
END_TEST

/*
 * From DFCCL_TREE_WIDE_BYTES up, a tree takes DFCCL_MAX_BLOCKS channels,
 * below it DFCCL_CHANNELS; both compute right. (On GPUs the defaults make
 * large trees wide; here the settings make a small one so.)
 */
static int tree_wide_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    const char *algo = varg;
    static const size_t counts[] = {1000, 100000};
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    int failures = 0;

    setenv("DFCCL_ALGO", algo, 1);
    setenv("DFCCL_MAX_BLOCKS", "4", 1);
    setenv("DFCCL_CHANNELS", "1", 1);
    setenv("DFCCL_CHANNEL_BYTES", "4096", 1);
    setenv("DFCCL_TREE_WIDE_BYTES", "65536", 1);
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    run_case_algo = algo;
    for (int c = 0; c < 2; c++) {
        /* the two trees take a channel each at least */
        const int want = c == 1 ? 4 : strcmp(algo, "tree") == 0 ? 2 : 1;
        dfccl_coll_info_t info;
        int id, got = 0;

        DFCCL_TEST_CHECK(dfcclRegisterAllReduce(counts[c], DFCCL_FLOAT32, DFCCL_SUM, g, 0, &id) ==
                             DFCCL_OK,
                         "register: %s", dfcclGetLastErrorMessage());
        DFCCL_TEST_CHECK(dfcclGetCollInfo(id, ctx, &info) == DFCCL_OK, "info");
        DFCCL_TEST_CHECK(strcmp(info.algo, algo) == 0 && info.nchannels == want,
                         "allreduce of %zu float32 on %d ranks: %s on %d channels, expected %s "
                         "on %d", counts[c], n, info.algo, info.nchannels, algo, want);
        DFCCL_TEST_CHECK(dfcclDeregister(id, ctx) == DFCCL_OK, "deregister");
        failures += run_case(ctx, g, rank, n, DFCCL_COLL_ALLREDUCE, DFCCL_FLOAT32, DFCCL_SUM,
                             counts[c], 0, &got);
    }
    run_case_algo = NULL;
    DFCCL_TEST_CHECK(dfcclGroupDestroy(g) == DFCCL_OK, "group destroy");
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    return failures;
}

START_TEST(test_tree_wide)
{
    ck_assert_int_eq(dfccl_test_mp_run(3, 300, tree_wide_body, (void *)tree_algos[_i]), 0);
}
END_TEST

START_TEST(test_tree_preempted)
{
    static const int all[] = {2, 3, 4, 0}, quick[] = {2, 3, 0};
    const tree_arg_t a     = {tree_algos[_i], 1, NULL};

    tree_run(&a, tree_quick() ? quick : all);
}
END_TEST

START_TEST(test_tree_disorder)
{
    static const int algos[NCOLL] = {DFCCL_ALGO_RING,  DFCCL_ALGO_TREE, DFCCL_ALGO_CTREE,
                                     DFCCL_ALGO_TREE,  DFCCL_ALGO_RING, DFCCL_ALGO_CTREE,
                                     DFCCL_ALGO_CTREE, DFCCL_ALGO_TREE};
    disorder_arg_t a = {.iters  = tree_quick() ? 10 : 40,
                        .counts = {1000, 100, 65536, 4096, 100000, 33333, 7, 200000},
                        .algos  = algos};

    for (a.groups = 1; a.groups <= NCOLL; a.groups += NCOLL - 1) {
        const double t0 = unit_now_s();
        ck_assert_int_eq(dfccl_test_mp_run(4, 300, disorder_body, &a), 0);
        printf("  (disorder on %d group(s): %.1f s)\n", a.groups, unit_now_s() - t0);
        fflush(stdout);
    }
}
END_TEST

/* dfcclRegister's algorithm: it overrides DFCCL_ALGO, a collective the
 * tree cannot serve takes the default, and a value outside
 * dfccl_algo_choice_t is refused with a message saying what it takes. */
static int asked_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    dfccl_coll_desc_t ar = {DFCCL_KIND_ALLREDUCE, 1000, DFCCL_FLOAT32, DFCCL_SUM, 0, 0,
                            DFCCL_ALGO_CTREE, 0, 0};
    dfccl_coll_desc_t ag = {DFCCL_KIND_ALLGATHER, 1000, DFCCL_FLOAT32, DFCCL_SUM, 0, 0,
                            DFCCL_ALGO_TREE, 0, 0};
    dfccl_coll_info_t info;
    int id;

    (void)varg;
    setenv("DFCCL_ALGO", "ring", 1);
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    DFCCL_TEST_CHECK(dfcclRegister(&ar, g, &id) == DFCCL_OK, "register: %s",
                     dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(dfcclGetCollInfo(id, ctx, &info) == DFCCL_OK &&
                         strcmp(info.algo, "ctree") == 0,
                     "an allreduce asked for ctree ran on %s", info.algo);
    DFCCL_TEST_CHECK(dfcclDeregister(id, ctx) == DFCCL_OK, "deregister");
    DFCCL_TEST_CHECK(dfcclRegister(&ag, g, &id) == DFCCL_OK, "register: %s",
                     dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(dfcclGetCollInfo(id, ctx, &info) == DFCCL_OK &&
                         strcmp(info.algo, "tree") != 0,
                     "an allgather ran on the tree");
    DFCCL_TEST_CHECK(dfcclDeregister(id, ctx) == DFCCL_OK, "deregister");
    ar.algo = (dfccl_algo_choice_t)99;
    DFCCL_TEST_CHECK(dfcclRegister(&ar, g, &id) == DFCCL_ERR_INVALID_ARG &&
                         strstr(dfcclGetLastErrorMessage(), "dfccl_algo_choice_t") != NULL,
                     "algorithm 99: %s", dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(dfcclGroupDestroy(g) == DFCCL_OK, "group destroy");
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    return 0;
}

/* dfcclGroupProfile: alpha and beta measured, positive and finite, the
 * same on every rank and what dfcclGroupModel says afterwards; a ctree
 * registered after it is still correct. */
static int profile_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    double a0 = 0, b0 = 0, a = 0, b = 0, a2 = 0, b2 = 0;
    uint64_t bits[2], mine;
    int algo = 0;

    (void)varg;
    setenv("DFCCL_ALGO", "ctree", 1); /* the profile's ring is asked for itself */
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    DFCCL_TEST_CHECK(dfcclGroupModel(g, &a0, &b0) == DFCCL_OK && a0 > 0 && b0 > 0,
                     "nominal model: alpha %g beta %g", a0, b0);
    DFCCL_TEST_CHECK(dfcclGroupProfile(g, &a, &b) == DFCCL_OK, "profile: %s",
                     dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(isfinite(a) && isfinite(b) && a > 0 && b > 0,
                     "measured alpha %g us, beta %g GB/s", a, b);
    DFCCL_TEST_CHECK(dfcclGroupModel(g, &a2, &b2) == DFCCL_OK && a2 == a && b2 == b,
                     "dfcclGroupModel says %g, %g after the profile's %g, %g", a2, b2, a, b);
    memcpy(&bits[0], &a, sizeof(a));
    memcpy(&bits[1], &b, sizeof(b));
    mine = bits[0] * 1000003u ^ bits[1];
    DFCCL_TEST_CHECK(dfccl_test_sum_u64(oob, mine) == (unsigned long long)n * mine,
                     "rank %d: alpha %g, beta %g differ from another rank's", rank, a, b);
    if (rank == 0) {
        printf("profile on %d ranks: alpha %.2f us, beta %.2f GB/s (nominal %.2f, %.2f)\n", n,
               a, b, a0, b0);
    }
    run_case_algo = "ctree";
    DFCCL_TEST_CHECK(run_case(ctx, g, rank, n, DFCCL_COLL_ALLREDUCE, DFCCL_FLOAT32, DFCCL_SUM,
                              100000, 0, &algo) == 0,
                     "a ctree after the profile");
    run_case_algo = NULL;
    DFCCL_TEST_CHECK(dfcclGroupProfile(NULL, NULL, NULL) == DFCCL_ERR_INVALID_ARG,
                     "a NULL group");
    DFCCL_TEST_CHECK(dfcclGroupDestroy(g) == DFCCL_OK, "group destroy");
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    return 0;
}

START_TEST(test_tree_profile)
{
    ck_assert_int_eq(dfccl_test_mp_run(2, 120, profile_body, NULL), 0);
    ck_assert_int_eq(dfccl_test_mp_run(3, 120, profile_body, NULL), 0);
}
END_TEST

START_TEST(test_tree_asked)
{
    ck_assert_int_eq(dfccl_test_mp_run(2, 120, asked_body, NULL), 0);
}
END_TEST

int main(void)
{
    Suite *s  = suite_create("tree");
    TCase *tc = dfccl_test_case(s, "tree", 1000);

    tcase_add_loop_test(tc, test_tree_matrix, 0, 2);
    tcase_add_loop_test(tc, test_tree_channels, 0, 2);
    tcase_add_loop_test(tc, test_tree_wide, 0, 2);
    tcase_add_loop_test(tc, test_tree_preempted, 0, 2);
    tcase_add_test(tc, test_tree_disorder);
    tcase_add_test(tc, test_tree_asked);
    tcase_add_test(tc, test_tree_profile);
    return dfccl_test_run(s, CK_NORMAL);
}
