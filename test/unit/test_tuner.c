/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The tuner (DFCCL_TUNER) and the links it reads (DFCCL_PROFILE), on 2 to
 * 4 ranks (quick mode, DFCCL_TEST_QUICK: 2 and 3):
 *
 *   - profile at creation: alpha, beta and a collective's cost positive
 *     and finite, bit for bit the same on every rank, for the class of link
 *     the group has (shm on the host backend) and refused for the others;
 *   - DFCCL_PROFILE=off: the backend's nominal values, unchanged;
 *   - a group on two hosts (DFCCL_HOST_ID: rank 0 on one, the others on
 *     the other, so the ring has net and shm edges): both classes measured
 *     (dfccl_profile_info_t.measured_links), each the same on every rank,
 *     the ring's view (dfcclGroupModel) their combination, and the model's
 *     prediction of a ring allreduce made from each class's values, both
 *     measured and nominal;
 *   - DFCCL_TUNER=model: for every collective at sizes from 4 bytes to 64
 *     MiB, the pick (dfcclPredict) is an algorithm that can run it, the
 *     least predicted of those that can (or, within DFCCL_TUNER_MARGIN of
 *     it, the static thresholds' pick), the same on every rank, and what
 *     dfcclRegister runs (dfcclGetCollInfo);
 *   - DFCCL_TUNER=static: the same picks as the size thresholds, written
 *     out here again, whatever the group's measured links;
 *   - the user's choice over the tuner: DFCCL_ALGO and dfcclRegister's;
 *   - collectives chosen by the model give the right results;
 *   - dfcclPredict's and dfcclGroupLinkModel's bad arguments;
 *   - DFCCL_PROFILE_EVERY: refreshes run while collectives run in a
 *     different order on every rank, take effect at the same registration
 *     everywhere (generation and every class's values the same on every
 *     rank after each registration), the collectives give the right
 *     results, and the group and context are destroyed with the refreshes'
 *     collectives on them; on one host and on two.
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
#include <unistd.h>

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

/* Rank 0 on one host, the others on another: a ring of n edges, 2 of
 * them net (0 -> 1 and n-1 -> 0), the others shared memory. */
#define TUNER_NET_EDGES 2
static void tuner_two_hosts(int rank)
{
    setenv("DFCCL_HOST_ID", rank == 0 ? "dfccl-tuner-host-a" : "dfccl-tuner-host-b", 1);
}

/* The ring's view of a group of two hosts (tuner_two_hosts) from its
 * classes' values (dfcclGroupLinkModel): docs/tuning.md. */
static void tuner_ring_view(dfccl_group_t g, int n, double *a_p, double *b_p)
{
    double an = 0, bn = 0, as = 0, bs = 0;

    dfcclGroupLinkModel(g, DFCCL_LINK_NET, &an, &bn, NULL);
    dfcclGroupLinkModel(g, DFCCL_LINK_SHM, &as, &bs, NULL);
    *a_p = (TUNER_NET_EDGES * an + (n - TUNER_NET_EDGES) * as) / n;
    *b_p = bn < bs ? bn : bs;
}

static int tuner_near(double x, double y)
{
    return fabs(x - y) <= 1e-9 * fabs(y);
}

/* The link model after creation: positive, finite, the same everywhere;
 * on the host backend the nominal values where nothing was measured (off;
 * auto under the static tuner) and others where it was. `mode`:
 * DFCCL_PROFILE, and for auto the tuner after a dash; "hosts-" first: on
 * two hosts (tuner_two_hosts). */
static int profile_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    const int hosts  = strncmp(varg, "hosts-", 6) == 0;
    const char *mode = (const char *)varg + (hosts ? 6 : 0);
    const int measured = strcmp(mode, "create") == 0 || strcmp(mode, "auto-model") == 0;
    const unsigned want = 1u << DFCCL_LINK_SHM | 1u << DFCCL_LINK_NET; /* two hosts */
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    dfccl_profile_info_t info;
    double a = 0, b = 0, la = 0, lb = 0, c = -1, ra, rb;
    int present = 0;

    if (hosts) {
        tuner_two_hosts(rank);
    }
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
    DFCCL_TEST_CHECK(dfcclGroupProfileInfo(g, &info) == DFCCL_OK &&
                         tuner_same(oob, n, info.measured_links),
                     "rank %d: measured classes %#x differ from another rank's", rank,
                     info.measured_links);
    if (hosts) {
        /* both classes, each measured on its own (or both nominal), and
         * the ring sees their combination */
        DFCCL_TEST_CHECK((unsigned)present == want, "two hosts: links present %#x", present);
        DFCCL_TEST_CHECK(info.measured_links == (measured ? want : 0u),
                         "two hosts, DFCCL_PROFILE %s: classes measured %#x, not %#x", mode,
                         info.measured_links, measured ? want : 0u);
        tuner_ring_view(g, n, &ra, &rb);
        DFCCL_TEST_CHECK(tuner_near(a, ra) && tuner_near(b, rb),
                         "two hosts: the ring's alpha %g and beta %g are not its classes' "
                         "combination %g and %g", a, b, ra, rb);
        if (!measured && dfcclGetBackend(ctx) == DFCCL_BACKEND_HOST) {
            DFCCL_TEST_CHECK(tuner_near(a, (TUNER_NET_EDGES * 5.0 + (n - TUNER_NET_EDGES)) / n) &&
                                 b == 10.0,
                             "two hosts, nominal: the ring's alpha %g, beta %g", a, b);
        }
        goto out;
    }
    /* one host, no net: one class, shared memory on the host backend, p2p
     * or shm on GPUs; never the net */
    DFCCL_TEST_CHECK(present != 0 && (present & (present - 1)) == 0 &&
                         !(present & (1 << DFCCL_LINK_NET)),
                     "links present: %#x", present);
    DFCCL_TEST_CHECK(info.measured_links == (measured ? (unsigned)present : 0u),
                     "DFCCL_PROFILE %s: classes measured %#x, links present %#x", mode,
                     info.measured_links, present);
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
out:
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

START_TEST(test_tuner_profile_hosts)
{
    ck_assert_int_eq(dfccl_test_mp_run(3, 120, profile_body, "hosts-create"), 0);
    ck_assert_int_eq(dfccl_test_mp_run(3, 120, profile_body, "hosts-off"), 0);
    if (!tuner_quick()) {
        ck_assert_int_eq(dfccl_test_mp_run(4, 120, profile_body, "hosts-create"), 0);
    }
}
END_TEST

/*
 * On two hosts (tuner_two_hosts), the model's time of a ring allreduce is
 * made from each class's values: with no channel limit
 * (DFCCL_MODEL_BLOCK_MBPS) and a slice costing 1 ns, T = c + 2 (n - 1)
 * alpha + 2 (n - 1) / n S / beta, alpha and beta the ring's view of its
 * classes (the mean hop, the slowest class), within 1 % (the slices).
 * `varg`: DFCCL_PROFILE.
 */
static int hosts_model_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    dfccl_coll_desc_t d = {DFCCL_KIND_ALLREDUCE, 0, DFCCL_FLOAT32, DFCCL_SUM, 0, 0,
                           DFCCL_ALGO_RING, 0, 0};
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    dfccl_algo_choice_t pick;
    double a, b, c = 0, us = 0, want;

    tuner_two_hosts(rank);
    setenv("DFCCL_PROFILE", varg, 1);
    setenv("DFCCL_TUNER", "model", 1);
    setenv("DFCCL_MODEL_BLOCK_MBPS", "4000000000", 1);
    setenv("DFCCL_MODEL_SLICE_NS", "1", 1);
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    tuner_ring_view(g, n, &a, &b);
    DFCCL_TEST_CHECK(dfcclGroupLinkModel(g, DFCCL_LINK_NET, NULL, NULL, &c) == DFCCL_OK,
                     "net link: %s", dfcclGetLastErrorMessage());
    for (size_t bytes = 4096; bytes <= ((size_t)4 << 20); bytes *= 32) {
        d.count = bytes / 4;
        d.algo  = DFCCL_ALGO_RING;
        DFCCL_TEST_CHECK(dfcclPredict(g, &d, -1, NULL, &us) == DFCCL_OK, "predict: %s",
                         dfcclGetLastErrorMessage());
        want = c + 2.0 * (n - 1) * a + 2.0 * (n - 1) / n * (double)bytes / (b * 1e3);
        DFCCL_TEST_CHECK(fabs(us - want) <= 0.01 * want,
                         "DFCCL_PROFILE %s, a ring allreduce of %zu bytes: predicted %g us, "
                         "from the classes' values %g us", (const char *)varg, bytes, us, want);
        /* and the tuner's pick is one that runs across hosts */
        d.algo = DFCCL_ALGO_AUTO;
        DFCCL_TEST_CHECK(dfcclPredict(g, &d, -1, &pick, NULL) == DFCCL_OK &&
                             pick == DFCCL_ALGO_RING,
                         "two hosts: %zu bytes pick %s", bytes, tuner_algos[pick]);
    }
    DFCCL_TEST_CHECK(dfcclGroupDestroy(g) == DFCCL_OK, "group destroy");
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    return 0;
}

START_TEST(test_tuner_hosts_model)
{
    ck_assert_int_eq(dfccl_test_mp_run(3, 120, hosts_model_body, "off"), 0);
    ck_assert_int_eq(dfccl_test_mp_run(3, 120, hosts_model_body, "create"), 0);
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

/* The model after a registration, the same on every rank: its generation,
 * the classes measured, the ring's view and every class's values (shm on
 * one host of the host backend, shm and net on two). */
static int refresh_same(dfccl_test_oob_t *oob, int n, dfccl_group_t g, const char *when,
                        dfccl_profile_info_t *info_p)
{
    double a = 0, b = 0, c = 0;

    DFCCL_TEST_CHECK(dfcclGroupProfileInfo(g, info_p) == DFCCL_OK && dfcclGroupModel(g, &a, &b) ==
                         DFCCL_OK,
                     "%s: %s", when, dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(tuner_same(oob, n, info_p->generation) &&
                         tuner_same(oob, n, info_p->measured_links) &&
                         tuner_same(oob, n, tuner_bits(a)) && tuner_same(oob, n, tuner_bits(b)),
                     "%s: generation %llu, classes measured %#x, the ring's alpha %g us, beta "
                     "%g GB/s differ from another rank's", when,
                     (unsigned long long)info_p->generation, info_p->measured_links, a, b);
    for (int l = 0; l < DFCCL_LINK_COUNT; l++) {
        /* the same classes everywhere (the group's shape), so every rank
         * takes part in the same sums */
        if (dfcclGroupLinkModel(g, (dfccl_link_t)l, &a, &b, &c) != DFCCL_OK) {
            continue;
        }
        DFCCL_TEST_CHECK(tuner_same(oob, n, tuner_bits(a)) && tuner_same(oob, n, tuner_bits(b)) &&
                             tuner_same(oob, n, tuner_bits(c)),
                         "%s: class %d's alpha %g us, beta %g GB/s, collective %g us differ "
                         "from another rank's", when, l, a, b, c);
    }
    return 0;
}

/*
 * DFCCL_PROFILE_EVERY=4 with DFCCL_TUNER=model: an allreduce and an
 * allgather run in a random order on every rank, iteration after
 * iteration, and every third iteration a new allreduce is registered (its
 * plan from the model in force) and run. Then every rank waits (polling,
 * with a deadline) until it has run every refresh due, registers once more,
 * and finds all of them in effect; dfcclGroupProfile on top adds one.
 */
#define RF_ITERS 12
#define RF_COUNT 4096
static int refresh_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    static const size_t sizes[] = {3, 1000, 70000, 300001};
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    dfccl_profile_info_t info, start;
    unsigned seed = 777u + 31u * (unsigned)rank;
    float *ar, *hf;
    int32_t *ag, *hi;
    int ids[2], extra[RF_ITERS / 3 + 1], nextra = 0, last;
    double t0;

    if (varg != NULL) {
        tuner_two_hosts(rank);
    }
    setenv("DFCCL_TUNER", "model", 1);
    setenv("DFCCL_PROFILE_EVERY", "4", 1);
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    if (refresh_same(oob, n, g, "after creation", &start) != 0) {
        return 1;
    }
    DFCCL_TEST_CHECK(start.generation == 1 && start.refreshes == 0,
                     "after creation: generation %llu, refreshes %llu",
                     (unsigned long long)start.generation,
                     (unsigned long long)start.refreshes);
    DFCCL_TEST_CHECK(varg == NULL || start.measured_links == (1u << DFCCL_LINK_SHM |
                                                              1u << DFCCL_LINK_NET),
                     "two hosts: classes measured %#x", start.measured_links);
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(RF_COUNT, DFCCL_FLOAT32, DFCCL_SUM, g, 0, &ids[0]) ==
                         DFCCL_OK &&
                         dfcclRegisterAllGather(RF_COUNT, DFCCL_INT32, g, 0, &ids[1]) ==
                             DFCCL_OK,
                     "register: %s", dfcclGetLastErrorMessage());
    ar = dfccl_test_malloc(ctx, 300001 * sizeof(float));
    ag = dfccl_test_malloc(ctx, (size_t)n * RF_COUNT * sizeof(int32_t));
    hf = malloc(300001 * sizeof(float));
    hi = malloc((size_t)n * RF_COUNT * sizeof(int32_t));
    DFCCL_TEST_CHECK(hf != NULL && hi != NULL, "out of memory");
    for (int it = 0; it < RF_ITERS; it++) {
        const int first = (int)(rand_r(&seed) % 2);

        for (size_t i = 0; i < RF_COUNT; i++) {
            hf[i] = (float)(rank + it + (int)(i % 5));
            hi[(size_t)rank * RF_COUNT + i] = rank * 100000 + it * 100 + (int)(i % 7);
        }
        dfccl_test_put(ctx, ar, hf, RF_COUNT * sizeof(float));
        dfccl_test_put(ctx, ag + (size_t)rank * RF_COUNT, hi + (size_t)rank * RF_COUNT,
                       RF_COUNT * sizeof(int32_t));
        for (int k = 0; k < 2; k++) {
            const int c = k == 0 ? first : 1 - first;
            DFCCL_TEST_CHECK((c == 0 ? dfcclRunAllReduce(ar, ar, ids[0], NULL, NULL, ctx)
                                     : dfcclRunAllGather(ag + (size_t)rank * RF_COUNT, ag,
                                                         ids[1], NULL, NULL, ctx)) == DFCCL_OK,
                             "iteration %d: run %d: %s", it, c, dfcclGetLastErrorMessage());
        }
        for (int c = 0; c < 2; c++) {
            dfccl_status_t st = dfcclWait(ids[c], dfccl_test_wait_ms(30000), ctx);
            DFCCL_TEST_CHECK(st == DFCCL_OK, "iteration %d: wait %d: %s", it, c,
                             dfcclGetLastErrorMessage());
        }
        dfccl_test_get(ctx, hf, ar, RF_COUNT * sizeof(float));
        dfccl_test_get(ctx, hi, ag, (size_t)n * RF_COUNT * sizeof(int32_t));
        for (size_t i = 0; i < RF_COUNT; i++) {
            const float want = (float)(n * (n - 1) / 2 + n * (it + (int)(i % 5)));
            DFCCL_TEST_CHECK(hf[i] == want, "iteration %d: allreduce element %zu is %g, not %g",
                             it, i, (double)hf[i], (double)want);
            for (int r = 0; r < n; r++) {
                DFCCL_TEST_CHECK(hi[(size_t)r * RF_COUNT + i] ==
                                     r * 100000 + it * 100 + (int)(i % 7),
                                 "iteration %d: allgather block %d element %zu is %d", it, r,
                                 i, hi[(size_t)r * RF_COUNT + i]);
            }
        }
        if (it % 3 == 2) {
            /* a registration while refreshes come and go: planned with the
             * same model on every rank (else it would not pair) */
            const size_t count = sizes[nextra % 4];
            char when[64];

            DFCCL_TEST_CHECK(dfcclRegisterAllReduce(count, DFCCL_FLOAT32, DFCCL_SUM, g, 0,
                                                    &extra[nextra]) == DFCCL_OK,
                             "register %zu: %s", count, dfcclGetLastErrorMessage());
            snprintf(when, sizeof(when), "iteration %d", it);
            if (refresh_same(oob, n, g, when, &info) != 0) {
                return 1;
            }
            for (size_t i = 0; i < count; i++) {
                hf[i] = (float)(rank + 1);
            }
            dfccl_test_put(ctx, ar, hf, count * sizeof(float));
            DFCCL_TEST_CHECK(unit_run_wait(dfcclRunAllReduce(ar, ar, extra[nextra], NULL, NULL,
                                                             ctx),
                                           extra[nextra], 30000, ctx) == DFCCL_OK,
                             "run %zu: %s", count, dfcclGetLastErrorMessage());
            dfccl_test_get(ctx, hf, ar, count * sizeof(float));
            for (size_t i = 0; i < count; i++) {
                DFCCL_TEST_CHECK(hf[i] == (float)(n * (n + 1) / 2), "registered at iteration "
                                 "%d: element %zu is %g", it, i, (double)hf[i]);
            }
            nextra++;
        }
    }
    /* every rank has completed the same collectives: the refreshes due
     * are the same everywhere and need no call of ours to run */
    t0 = unit_now_s();
    for (;;) {
        DFCCL_TEST_CHECK(dfcclGroupProfileInfo(g, &info) == DFCCL_OK, "info");
        if (info.refreshes >= 1 && info.refreshes == info.collectives / 4) {
            break;
        }
        DFCCL_TEST_CHECK(unit_now_s() - t0 < dfccl_test_wait_ms(60000) / 1e3,
                         "rank %d: %llu refresh(es) of %llu due after %llu collectives", rank,
                         (unsigned long long)info.refreshes,
                         (unsigned long long)(info.collectives / 4),
                         (unsigned long long)info.collectives);
        dfcclProgress(ctx, NULL); /* DFCCL_PROGRESS=explicit: the refreshes' callbacks */
        usleep(1000);
    }
    DFCCL_TEST_CHECK(info.collectives == 2 * RF_ITERS + (unsigned long long)nextra,
                     "%llu collectives counted, %d run", (unsigned long long)info.collectives,
                     2 * RF_ITERS + nextra);
    dfccl_test_barrier(oob);
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(5, DFCCL_FLOAT32, DFCCL_SUM, g, 0, &last) ==
                         DFCCL_OK,
                     "register: %s", dfcclGetLastErrorMessage());
    if (refresh_same(oob, n, g, "at the end", &info) != 0) {
        return 1;
    }
    DFCCL_TEST_CHECK(info.pending == 0 && info.generation == start.generation + info.refreshes,
                     "at the end: generation %llu after %llu refreshes, %llu pending",
                     (unsigned long long)info.generation, (unsigned long long)info.refreshes,
                     (unsigned long long)info.pending);
    if (rank == 0) {
        printf("refresh: %d ranks, %llu collectives, %llu refreshes, generation %llu\n", n,
               (unsigned long long)info.collectives, (unsigned long long)info.refreshes,
               (unsigned long long)info.generation);
    }
    DFCCL_TEST_CHECK(dfcclGroupProfile(g, NULL, NULL) == DFCCL_OK, "profile: %s",
                     dfcclGetLastErrorMessage());
    if (refresh_same(oob, n, g, "after dfcclGroupProfile", &start) != 0) {
        return 1;
    }
    DFCCL_TEST_CHECK(start.generation == info.generation + 1 && start.pending == 0,
                     "after dfcclGroupProfile: generation %llu", 
                     (unsigned long long)start.generation);
    DFCCL_TEST_CHECK(dfcclDeregister(last, ctx) == DFCCL_OK && dfcclDeregister(ids[0], ctx) ==
                         DFCCL_OK && dfcclDeregister(ids[1], ctx) == DFCCL_OK,
                     "deregister: %s", dfcclGetLastErrorMessage());
    for (int i = 0; i < nextra; i++) {
        DFCCL_TEST_CHECK(dfcclDeregister(extra[i], ctx) == DFCCL_OK, "deregister: %s",
                         dfcclGetLastErrorMessage());
    }
    /* rank 0 destroys its group, the others leave theirs to dfcclDestroy */
    if (rank == 0) {
        DFCCL_TEST_CHECK(dfcclGroupDestroy(g) == DFCCL_OK, "group destroy: %s",
                         dfcclGetLastErrorMessage());
    }
    free(hf);
    free(hi);
    dfccl_test_free(ctx, ag);
    return unit_rank_end(ctx, ar);
}

START_TEST(test_tuner_refresh)
{
    ck_assert_int_eq(dfccl_test_mp_run(2, 300, refresh_body, NULL), 0);
    /* on two hosts: every class measured again with its probes */
    ck_assert_int_eq(dfccl_test_mp_run(3, 300, refresh_body, "hosts"), 0);
    if (!tuner_quick()) {
        ck_assert_int_eq(dfccl_test_mp_run(3, 300, refresh_body, NULL), 0);
    }
}
END_TEST

int main(void)
{
    Suite *s  = suite_create("tuner");
    TCase *tc = dfccl_test_case(s, "tuner", 1000);

    tcase_add_test(tc, test_tuner_profile);
    tcase_add_test(tc, test_tuner_profile_hosts);
    tcase_add_test(tc, test_tuner_hosts_model);
    tcase_add_test(tc, test_tuner_model);
    tcase_add_test(tc, test_tuner_static);
    tcase_add_test(tc, test_tuner_asked);
    tcase_add_test(tc, test_tuner_results);
    tcase_add_test(tc, test_tuner_refresh);
    return dfccl_test_run(s, CK_NORMAL);
}
