/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The tuner (DFCCL_TUNER) and the links it reads (DFCCL_PROFILE), on 2 to
 * 4 ranks (quick mode, DFCCL_TEST_QUICK: 2 and 3):
 *
 *   - profile at creation: alpha, beta and a collective's cost positive
 *     and finite, bit for bit the same on every rank, for the class of link
 *     the group has (shm on the host backend) and refused for the others;
 *   - DFCCL_PROFILE=off: the backend's nominal values, unchanged;
 *   - DFCCL_TUNER=model: for every collective at sizes from 4 bytes to 64
 *     MiB, the pick (dfcclPredict) is an algorithm that can run it, the
 *     least predicted of those that can (or, within DFCCL_TUNER_MARGIN of
 *     it, the static thresholds' pick), the same on every rank, and what
 *     dfcclRegister runs (dfcclGetCollInfo);
 *   - DFCCL_TUNER=static: the same picks as the size thresholds, written
 *     out here again, whatever the group's measured links;
 *   - the user's choice over the tuner: DFCCL_ALGO and dfcclRegister's;
 *   - collectives chosen by the model give the right results;
 *   - dfcclPredict's and dfcclGroupLinkModel's bad arguments.
 *
 * Nothing here times anything: the tuner's targets are read from
 * dfccl-bench --algos.
 *
 * test_coll.c and test_deadlock.c are included with their main renamed.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reuse_cases.h"

static int tuner_quick(void)
{
    return getenv("DFCCL_TEST_QUICK") != NULL;
}

/* dfccl_algo_choice_t's names, as dfcclGetCollInfo says them */
static const char *const tuner_algos[] = {"auto", "ring",  "oneshot", "twoshot",
                                          "mesh", "msccl", "tree",    "ctree"};
#define TUNER_NALGOS 8

static const int tuner_kinds[] = {DFCCL_KIND_ALLREDUCE, DFCCL_KIND_ALLGATHER,
                                  DFCCL_KIND_REDUCESCATTER, DFCCL_KIND_REDUCE,
                                  DFCCL_KIND_BROADCAST, DFCCL_KIND_ALLTOALL};
#define TUNER_NKINDS ((int)(sizeof(tuner_kinds) / sizeof(tuner_kinds[0])))

/* A double's bits, to compare values across ranks exactly. */
static unsigned long long tuner_bits(double v)
{
    unsigned long long b;

    memcpy(&b, &v, sizeof(b));
    return b;
}

/* 1 if every rank passed the same `v` (sums of v and of its square's low
 * bits agree with n times this rank's). */
static int tuner_same(dfccl_test_oob_t *oob, int n, unsigned long long v)
{
    const unsigned long long h = v * 0x9e3779b97f4a7c15ull ^ (v >> 29);

    return dfccl_test_sum_u64(oob, v) == (unsigned long long)n * v &&
           dfccl_test_sum_u64(oob, h) == (unsigned long long)n * h;
}

/* The link model after creation: positive, finite, the same everywhere;
 * on the host backend the nominal values where nothing was measured (off;
 * auto under the static tuner) and others where it was. `mode`:
 * DFCCL_PROFILE, and for auto the tuner after a dash. */
static int profile_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    const char *mode = varg;
    const int measured = strcmp(mode, "create") == 0 || strcmp(mode, "auto-model") == 0;
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    double a = 0, b = 0, la = 0, lb = 0, c = -1;
    int present = 0;

    if (strncmp(mode, "auto-", 5) == 0) {
        setenv("DFCCL_PROFILE", "auto", 1);
        setenv("DFCCL_TUNER", mode + 5, 1);
    } else {
        setenv("DFCCL_PROFILE", mode, 1);
    }
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    DFCCL_TEST_CHECK(dfcclGroupModel(g, &a, &b) == DFCCL_OK, "model: %s",
                     dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(isfinite(a) && isfinite(b) && a > 0 && b > 0, "alpha %g us, beta %g GB/s",
                     a, b);
    for (int l = 0; l < DFCCL_LINK_COUNT; l++) {
        dfccl_status_t st = dfcclGroupLinkModel(g, (dfccl_link_t)l, &la, &lb, &c);

        if (st == DFCCL_ERR_UNSUPPORTED) {
            continue;
        }
        DFCCL_TEST_CHECK(st == DFCCL_OK, "link %d: %s", l, dfcclGetLastErrorMessage());
        DFCCL_TEST_CHECK(isfinite(la) && isfinite(lb) && isfinite(c) && la > 0 && lb > 0 &&
                             c >= 0,
                         "link %d: alpha %g, beta %g, a collective %g", l, la, lb, c);
        DFCCL_TEST_CHECK(tuner_same(oob, n, tuner_bits(la)) && tuner_same(oob, n, tuner_bits(lb)) &&
                             tuner_same(oob, n, tuner_bits(c)),
                         "rank %d: link %d's alpha %g, beta %g, collective %g differ from "
                         "another rank's", rank, l, la, lb, c);
        present |= 1 << l;
    }
    /* one host, no net: shared memory on the host backend, p2p or shm on
     * GPUs; never the net */
    DFCCL_TEST_CHECK(present != 0 && !(present & (1 << DFCCL_LINK_NET)),
                     "links present: %#x", present);
    if (dfcclGetBackend(ctx) == DFCCL_BACKEND_HOST) {
        DFCCL_TEST_CHECK(present == 1 << DFCCL_LINK_SHM, "host backend links: %#x", present);
        dfcclGroupLinkModel(g, DFCCL_LINK_SHM, &la, &lb, &c);
        DFCCL_TEST_CHECK(la == a && lb == b, "the slowest class (shm: %g, %g) is not what "
                         "dfcclGroupModel says (%g, %g)", la, lb, a, b);
        DFCCL_TEST_CHECK(measured != (a == 1.0 && b == 10.0 && c == 10.0),
                         "DFCCL_PROFILE %s: alpha %g, beta %g, collective %g, %s the host "
                         "backend's nominal 1, 10, 10", mode, a, b, c,
                         measured ? "still" : "not");
    }
    DFCCL_TEST_CHECK(dfcclGroupDestroy(g) == DFCCL_OK, "group destroy");
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    return 0;
}

START_TEST(test_tuner_profile)
{
    ck_assert_int_eq(dfccl_test_mp_run(2, 120, profile_body, "create"), 0);
    ck_assert_int_eq(dfccl_test_mp_run(3, 120, profile_body, "create"), 0);
    if (!tuner_quick()) {
        ck_assert_int_eq(dfccl_test_mp_run(4, 120, profile_body, "create"), 0);
    }
    ck_assert_int_eq(dfccl_test_mp_run(2, 120, profile_body, "off"), 0);
    ck_assert_int_eq(dfccl_test_mp_run(2, 120, profile_body, "auto-static"), 0);
    ck_assert_int_eq(dfccl_test_mp_run(2, 120, profile_body, "auto-model"), 0);
}
END_TEST

/* The sizes the picks are checked at: a rank's bytes (a pair's for
 * alltoall), 4 bytes to 64 MiB by 4. */
#define TUNER_SIZES 13

static size_t tuner_bytes(int i)
{
    return (size_t)4 << (2 * i);
}

/* DFCCL_TUNER=model with DFCCL_TUNER_MARGIN `varg`: the pick of every kind
 * and size can run, is the least predicted or the static thresholds' pick
 * within the margin of it, the same on every rank, and what registration
 * runs. */
static int model_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    const double margin = 1.0 + strtod(varg, NULL) / 100.0;
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    unsigned long long picks = 0;
    int moved = 0;

    setenv("DFCCL_TUNER", "model", 1);
    setenv("DFCCL_TUNER_MARGIN", varg, 1);
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    for (int k = 0; k < TUNER_NKINDS; k++) {
        for (int i = 0; i < TUNER_SIZES; i++) {
            dfccl_coll_desc_t d = {(dfccl_coll_kind_t)tuner_kinds[k], tuner_bytes(i) / 4,
                                   DFCCL_FLOAT32, DFCCL_SUM, 0, 0, DFCCL_ALGO_AUTO, 0, 0};
            dfccl_algo_choice_t pick = DFCCL_ALGO_AUTO, fixed = DFCCL_ALGO_AUTO, again;
            dfccl_coll_info_t info;
            double us = -1, least = INFINITY, fixed_us = -1, cand;
            int id;

            DFCCL_TEST_CHECK(dfcclPredict(g, &d, -1, &pick, &us) == DFCCL_OK &&
                                 dfcclPredict(g, &d, DFCCL_TUNER_STATIC, &fixed, &fixed_us) ==
                                     DFCCL_OK,
                             "predict: %s", dfcclGetLastErrorMessage());
            DFCCL_TEST_CHECK(pick > DFCCL_ALGO_AUTO && pick < TUNER_NALGOS && isfinite(us) &&
                                 us > 0,
                             "%s of %zu bytes: pick %d, %g us",
                             dfccl_coll_name_for_test(tuner_kinds[k]), tuner_bytes(i), pick, us);
            for (int a = 1; a < TUNER_NALGOS; a++) {
                d.algo = (dfccl_algo_choice_t)a;
                if (dfcclPredict(g, &d, -1, &again, &cand) == DFCCL_OK) {
                    DFCCL_TEST_CHECK(again == (dfccl_algo_choice_t)a && isfinite(cand) &&
                                         cand > 0,
                                     "%s asked for, %d given, %g us", tuner_algos[a], again,
                                     cand);
                    least = cand < least ? cand : least;
                } else {
                    DFCCL_TEST_CHECK(a != (int)pick, "%s of %zu bytes: the pick, %s, cannot "
                                     "run it", dfccl_coll_name_for_test(tuner_kinds[k]),
                                     tuner_bytes(i), tuner_algos[a]);
                }
            }
            DFCCL_TEST_CHECK(pick == fixed ? fixed_us <= least * margin
                                           : us == least && fixed_us > least * margin,
                             "%s of %zu bytes: the pick %s takes %g us, the static pick %s "
                             "%g, the least %g", dfccl_coll_name_for_test(tuner_kinds[k]),
                             tuner_bytes(i), tuner_algos[pick], us, tuner_algos[fixed],
                             fixed_us, least);
            moved += pick != fixed;
            /* what registration runs (past the connector budget the ring
             * would: far from it here) */
            d.algo = DFCCL_ALGO_AUTO;
            DFCCL_TEST_CHECK(dfcclRegister(&d, g, &id) == DFCCL_OK, "register: %s",
                             dfcclGetLastErrorMessage());
            DFCCL_TEST_CHECK(dfcclGetCollInfo(id, ctx, &info) == DFCCL_OK &&
                                 strcmp(info.algo, tuner_algos[pick]) == 0,
                             "%s of %zu bytes ran on %s, the pick was %s",
                             dfccl_coll_name_for_test(tuner_kinds[k]), tuner_bytes(i),
                             info.algo, tuner_algos[pick]);
            DFCCL_TEST_CHECK(dfcclDeregister(id, ctx) == DFCCL_OK, "deregister");
            picks = picks * 8 + (unsigned long long)pick;
            picks ^= picks >> 41;
        }
    }
    DFCCL_TEST_CHECK(tuner_same(oob, n, picks), "rank %d picked otherwise than another rank",
                     rank);
    if (rank == 0) {
        printf("model on %d ranks, margin %s%%: %d of %d picks differ from the thresholds'\n",
               n, (const char *)varg, moved, TUNER_NKINDS * TUNER_SIZES);
    }
    DFCCL_TEST_CHECK(dfcclGroupDestroy(g) == DFCCL_OK, "group destroy");
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    return 0;
}

START_TEST(test_tuner_model)
{
    ck_assert_int_eq(dfccl_test_mp_run(2, 120, model_body, "0"), 0);
    ck_assert_int_eq(dfccl_test_mp_run(3, 120, model_body, "10"), 0);
    if (!tuner_quick()) {
        ck_assert_int_eq(dfccl_test_mp_run(4, 120, model_body, "0"), 0);
        ck_assert_int_eq(dfccl_test_mp_run(2, 120, model_body, "10"), 0);
    }
}
END_TEST

/*
 * The static thresholds, written out again for the host backend's groups
 * of one host (every rank writes to every other): allreduces up to
 * DFCCL_ONESHOT_BYTES one shot, then two shot up to DFCCL_TWOSHOT_BYTES;
 * allgathers and reduce-scatters whose share is up to
 * DFCCL_ONESHOT_GATHER_BYTES one shot; alltoalls one shot up to that a pair,
 * the mesh above; the ring for everything else. One and two shot also
 * need their shares to fit (64 KiB a channel): dfcclPredict's named
 * answer says whether they do.
 */
static int static_expect(dfccl_group_t g, int kind, size_t bytes, size_t one, size_t gather,
                         size_t two)
{
    dfccl_coll_desc_t d = {(dfccl_coll_kind_t)kind, bytes / 4, DFCCL_FLOAT32, DFCCL_SUM,
                           0, 0, DFCCL_ALGO_ONESHOT, 0, 0};
    const int shot_ok   = dfcclPredict(g, &d, -1, NULL, NULL) == DFCCL_OK;
    int two_ok;

    d.algo = DFCCL_ALGO_TWOSHOT;
    two_ok = dfcclPredict(g, &d, -1, NULL, NULL) == DFCCL_OK;
    switch (kind) {
    case DFCCL_KIND_ALLTOALL:
        return bytes <= gather && shot_ok ? DFCCL_ALGO_ONESHOT : DFCCL_ALGO_MESH;
    case DFCCL_KIND_ALLREDUCE:
        if (bytes <= one && shot_ok) {
            return DFCCL_ALGO_ONESHOT;
        }
        return bytes > one && bytes <= two && two_ok ? DFCCL_ALGO_TWOSHOT : DFCCL_ALGO_RING;
    case DFCCL_KIND_ALLGATHER:
    case DFCCL_KIND_REDUCESCATTER:
        return bytes <= gather && shot_ok ? DFCCL_ALGO_ONESHOT : DFCCL_ALGO_RING;
    }
    return DFCCL_ALGO_RING;
}

static int static_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    /* the thresholds: the host backend's, or set here */
    const char *const *env = varg;
    const size_t one = strtoul(env[0], NULL, 0), gather = strtoul(env[1], NULL, 0);
    const size_t two = strtoul(env[2], NULL, 0);
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;

    setenv("DFCCL_TUNER", "static", 1);
    setenv("DFCCL_ONESHOT_BYTES", env[0], 1);
    setenv("DFCCL_ONESHOT_GATHER_BYTES", env[1], 1);
    setenv("DFCCL_TWOSHOT_BYTES", env[2], 1);
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    for (int pass = 0; pass < 2; pass++) {
        for (int k = 0; k < TUNER_NKINDS; k++) {
            for (int i = 0; i < TUNER_SIZES; i++) {
                dfccl_coll_desc_t d = {(dfccl_coll_kind_t)tuner_kinds[k], tuner_bytes(i) / 4,
                                       DFCCL_FLOAT32, DFCCL_SUM, 0, 0, DFCCL_ALGO_AUTO, 0, 0};
                const int want = static_expect(g, tuner_kinds[k], tuner_bytes(i), one, gather,
                                               two);
                dfccl_algo_choice_t pick = DFCCL_ALGO_AUTO, asked = DFCCL_ALGO_AUTO;

                DFCCL_TEST_CHECK(dfcclPredict(g, &d, -1, &pick, NULL) == DFCCL_OK &&
                                     dfcclPredict(g, &d, DFCCL_TUNER_STATIC, &asked, NULL) ==
                                         DFCCL_OK,
                                 "predict: %s", dfcclGetLastErrorMessage());
                DFCCL_TEST_CHECK((int)pick == want && asked == pick,
                                 "pass %d, %s of %zu bytes: static picks %s (asked for as "
                                 "static: %s), the thresholds %s", pass,
                                 dfccl_coll_name_for_test(tuner_kinds[k]), tuner_bytes(i),
                                 tuner_algos[pick], tuner_algos[asked], tuner_algos[want]);
            }
        }
        /* the measured links change no static choice */
        if (pass == 0) {
            DFCCL_TEST_CHECK(dfcclGroupProfile(g, NULL, NULL) == DFCCL_OK, "profile: %s",
                             dfcclGetLastErrorMessage());
        }
    }
    DFCCL_TEST_CHECK(dfcclGroupDestroy(g) == DFCCL_OK, "group destroy");
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    return 0;
}

START_TEST(test_tuner_static)
{
    static const char *const host[]  = {"16384", "16384", "0"};
    static const char *const moved[] = {"1024", "65536", "1048576"};

    ck_assert_int_eq(dfccl_test_mp_run(2, 120, static_body, (void *)host), 0);
    ck_assert_int_eq(dfccl_test_mp_run(3, 120, static_body, (void *)moved), 0);
}
END_TEST

/* The user's choice stays: DFCCL_ALGO=ring over the model, and
 * dfcclRegister's algorithm over both; and bad arguments. */
static int asked_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    dfccl_coll_desc_t d = {DFCCL_KIND_ALLREDUCE, 2, DFCCL_FLOAT32, DFCCL_SUM, 0, 0,
                           DFCCL_ALGO_AUTO, 0, 0};
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    dfccl_algo_choice_t pick;
    dfccl_coll_info_t info;
    int id;

    (void)varg;
    setenv("DFCCL_TUNER", "model", 1);
    setenv("DFCCL_ALGO", "ring", 1);
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    for (int i = 0; i < TUNER_SIZES; i++) {
        d.count = tuner_bytes(i) / 4;
        DFCCL_TEST_CHECK(dfcclPredict(g, &d, -1, &pick, NULL) == DFCCL_OK &&
                             pick == DFCCL_ALGO_RING,
                         "DFCCL_ALGO=ring: %zu bytes pick %s", tuner_bytes(i), tuner_algos[pick]);
    }
    d.count = 1000;
    d.algo  = DFCCL_ALGO_CTREE;
    DFCCL_TEST_CHECK(dfcclRegister(&d, g, &id) == DFCCL_OK, "register: %s",
                     dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(dfcclGetCollInfo(id, ctx, &info) == DFCCL_OK &&
                         strcmp(info.algo, "ctree") == 0,
                     "ctree asked for, %s ran", info.algo);
    DFCCL_TEST_CHECK(dfcclDeregister(id, ctx) == DFCCL_OK, "deregister");
    /* a named algorithm that cannot run it: refused, not printed */
    d.algo = DFCCL_ALGO_MESH;
    DFCCL_TEST_CHECK(dfcclPredict(g, &d, -1, &pick, NULL) == DFCCL_ERR_UNSUPPORTED,
                     "the mesh predicted for an allreduce");
    d.algo = DFCCL_ALGO_AUTO;
    DFCCL_TEST_CHECK(dfcclPredict(NULL, &d, -1, NULL, NULL) == DFCCL_ERR_INVALID_ARG &&
                         dfcclPredict(g, NULL, -1, NULL, NULL) == DFCCL_ERR_INVALID_ARG &&
                         dfcclPredict(g, &d, 2, NULL, NULL) == DFCCL_ERR_INVALID_ARG,
                     "bad arguments to dfcclPredict");
    d.algo = (dfccl_algo_choice_t)99;
    DFCCL_TEST_CHECK(dfcclPredict(g, &d, -1, NULL, NULL) == DFCCL_ERR_INVALID_ARG,
                     "algorithm 99 predicted");
    DFCCL_TEST_CHECK(dfcclGroupLinkModel(g, DFCCL_LINK_NET, NULL, NULL, NULL) ==
                             DFCCL_ERR_UNSUPPORTED &&
                         dfcclGroupLinkModel(g, DFCCL_LINK_COUNT, NULL, NULL, NULL) ==
                             DFCCL_ERR_INVALID_ARG &&
                         dfcclGroupLinkModel(NULL, DFCCL_LINK_SHM, NULL, NULL, NULL) ==
                             DFCCL_ERR_INVALID_ARG,
                     "bad arguments to dfcclGroupLinkModel");
    DFCCL_TEST_CHECK(dfcclGroupDestroy(g) == DFCCL_OK, "group destroy");
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    return 0;
}

START_TEST(test_tuner_asked)
{
    ck_assert_int_eq(dfccl_test_mp_run(2, 120, asked_body, NULL), 0);
}
END_TEST

/* Results of collectives whose algorithm the model chose, every kind at
 * counts from 1 to past the one-shot sizes, in place and out of place. */
static int results_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    const uint64_t counts[] = {1, 37, 1000, 8192 + 5, 65536 + 7, 300001};
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    int failures = 0, algo;

    (void)varg;
    setenv("DFCCL_TUNER", "model", 1);
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    for (int k = 0; k < TUNER_NKINDS; k++) {
        for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
            for (int inplace = 0; inplace < (tuner_kinds[k] == DFCCL_KIND_ALLTOALL ? 1 : 2);
                 inplace++) {
                failures += run_case(ctx, g, rank, n, tuner_kinds[k], DFCCL_FLOAT32, DFCCL_SUM,
                                     counts[i], inplace, &algo);
            }
        }
    }
    failures += run_case(ctx, g, rank, n, DFCCL_COLL_ALLREDUCE, DFCCL_INT8, DFCCL_MAX, 4099, 0,
                         &algo);
    failures += run_case(ctx, g, rank, n, DFCCL_COLL_ALLREDUCE, DFCCL_FLOAT64, DFCCL_AVG, 777, 1,
                         &algo);
    DFCCL_TEST_CHECK(dfcclGroupDestroy(g) == DFCCL_OK, "group destroy");
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    return failures;
}

START_TEST(test_tuner_results)
{
    ck_assert_int_eq(dfccl_test_mp_run(2, 300, results_body, NULL), 0);
    ck_assert_int_eq(dfccl_test_mp_run(3, 300, results_body, NULL), 0);
    if (!tuner_quick()) {
        ck_assert_int_eq(dfccl_test_mp_run(4, 300, results_body, NULL), 0);
    }
}
END_TEST

int main(void)
{
    Suite *s  = suite_create("tuner");
    TCase *tc = dfccl_test_case(s, "tuner", 1000);

    tcase_add_test(tc, test_tuner_profile);
    tcase_add_test(tc, test_tuner_model);
    tcase_add_test(tc, test_tuner_static);
    tcase_add_test(tc, test_tuner_asked);
    tcase_add_test(tc, test_tuner_results);
    return dfccl_test_run(s, CK_NORMAL);
}
