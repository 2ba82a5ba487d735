/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fault exclusion (dfcclGroupSetFaultPolicy, issue 51 item 4), on real
 * processes, each under a timeout:
 *  - 4 ranks run a loop of allreduces and allgathers on a group that
 *    excludes failed ranks, and allreduces on a second such group; rank 2
 *    dies (SIGKILL) in the middle of the loop, while the others have the
 *    next iteration's runs in flight. The survivors go on: those runs and
 *    every later one complete with DFCCL_OK, each allreduce holds the sum
 *    over the survivors and each allgather the survivors' blocks in rank
 *    order, and both groups report rank 2 excluded (dfcclGroupExcluded,
 *    dfcclGetCollInfo);
 *  - the same with rank 2 dying 1 ms into its runs: each survivor's run of
 *    that iteration has its data or the survivors' sum, or fails because
 *    another survivor completed it first;
 *  - the same, and then rank 3 exits too: the survivors' group excludes it
 *    in its turn;
 *  - a group without the opt-in still fails, naming the dead rank;
 *  - DFCCL_FAULT_POLICY=exclude without the calls: the survivors go on as
 *    in the first;
 *  - across hosts (DFCCL_HOST_ID: ranks 0,1 on host a and 2,3 on host b,
 *    or a b a b, or a a b with rank 2 alone on b over TCP only): the
 *    first case, with rank 2 on another host than some survivors, whose
 *    detection, agreement and new group go through the net transport;
 *    and without the opt-in, every survivor fails naming rank 2, in
 *    bounded time;
 *  - the policy is refused on a net group where some rank has only local
 *    edges and did not start the net transport; DFCCL_FAULT_POLICY=exclude
 *    set before the group is created makes it start there too.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mp.h"
#include "suite.h"
#include "unit_util.h"

#define AR_COUNT  (1 << 16)
#define AG_COUNT  1024
#define B_COUNT   4096
#define ITERS     10
#define DIE_AT    4 /* rank 2 dies before it runs this iteration */
#define DEAD_RANK 2
#define SECOND_AT 7 /* test_exclude_twice: rank 3 exits before this iteration */

/* DIE_ENV: DIE_BEFORE with DFCCL_FAULT_POLICY=exclude instead of the calls */
enum { DIE_BEFORE = 0, DIE_MID, DIE_TWICE, DIE_ENV };

/* What rank r gives in iteration `it`, element i. */
static float ar_value(int r, int it, size_t i)
{
    return (float)((r + 1) * (it + 1) + (int)(i % 7));
}

/* 1 if h holds the sum over the `nalive` ranks of `alive` in iteration
 * `it`, else 0, with a message naming `what` unless it is NULL. */
static int sum_ok(const float *h, size_t count, int it, const int *alive, int nalive,
                  const char *what)
{
    for (size_t i = 0; i < count; i++) {
        float want = 0;
        for (int k = 0; k < nalive; k++) {
            want += ar_value(alive[k], it, i);
        }
        if (h[i] != want) {
            if (what != NULL) {
                fprintf(stderr, "iteration %d: %s element %zu is %g, the sum over %d rank(s) "
                        "is %g\n", it, what, i, h[i], nalive, want);
            }
            return 0;
        }
    }
    return 1;
}

/* An allgather's output of iteration `it` from the `nalive` ranks `alive`,
 * in that order. */
static int ag_ok(const int32_t *hg, int it, const int *alive, int nalive)
{
    for (int k = 0; k < nalive; k++) {
        for (size_t i = 0; i < AG_COUNT; i++) {
            if (hg[(size_t)k * AG_COUNT + i] != alive[k] * 1000 + it) {
                return 0;
            }
        }
    }
    return 1;
}

/* The n ranks (*all) and the survivors of DEAD_RANK (*surv, *nsurv). */
static void ranks_of(int n, int all[8], int surv[8], int *nsurv)
{
    *nsurv = 0;
    for (int r = 0; r < n; r++) {
        all[r] = r;
        if (r != DEAD_RANK) {
            surv[(*nsurv)++] = r;
        }
    }
}

/* A run that DEAD_RANK was in when it died completed: h holds the sum over
 * all n ranks (its data came through) or over the survivors (run again
 * without it); `what` names it in the message about the survivors' sum. */
static int sum_whole_or_survivors(const float *h, size_t count, int it, int n,
                                  const char *what)
{
    int all[8], surv[8], nsurv;

    ranks_of(n, all, surv, &nsurv);
    return sum_ok(h, count, it, all, n, NULL) || sum_ok(h, count, it, surv, nsurv, what);
}

static int ag_whole_or_survivors(const int32_t *hg, int it, int n)
{
    int all[8], surv[8], nsurv;

    ranks_of(n, all, surv, &nsurv);
    return ag_ok(hg, it, all, n) || ag_ok(hg, it, surv, nsurv);
}

/* Wait for the three runs (ids) that DEAD_RANK was in when it died: each
 * completes, or fails where another survivor completed it first (st: how
 * each ended). With `say`, each end is printed. 0, or 1 after a failed
 * check (message printed). */
static int wait_cut_runs(dfccl_rank_ctx_t ctx, const int ids[3], int it, int say,
                         dfccl_status_t st[3])
{
    for (int k = 0; k < 3; k++) {
        st[k] = dfcclWait(ids[k], dfccl_test_wait_ms(30000), ctx);
        DFCCL_TEST_CHECK(st[k] == DFCCL_OK ||
                         (st[k] == DFCCL_ERR_ABORTED &&
                          strstr(dfcclGetLastErrorMessage(), "completed this run")),
                         "iteration %d: run %d: %s (%s)", it, k, dfcclGetErrorString(st[k]),
                         dfcclGetLastErrorMessage());
        if (say) {
            printf("mid-run death: rank 0, run %d of iteration %d: %s\n", k, it,
                   dfcclGetErrorString(st[k]));
        }
    }
    return 0;
}

/* Wait for `id`, expecting DFCCL_OK. */
#define WAIT_OK(_id, _what)                                                                 \
    do {                                                                                    \
        dfccl_status_t _st = dfcclWait((_id), dfccl_test_wait_ms(30000), ctx);              \
        DFCCL_TEST_CHECK(_st == DFCCL_OK, "iteration %d: %s: %s (%s)", it, (_what),         \
                         dfcclGetErrorString(_st), dfcclGetLastErrorMessage());             \
    } while (0)

static int exclude_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    dfccl_rank_ctx_t ctx;
    dfccl_group_t ga, gb;
    int ar, ag, br, excl[8], nex, alive[8], nalive;
    float *send, *recv, *bsend, *brecv, *h;
    int32_t *agsend, *agrecv, *hg;
    dfccl_coll_info_t info;
    const int mode = *(const int *)arg, mid = mode == DIE_MID;

    if (mode == DIE_ENV) {
        dfccl_test_setenv("DFCCL_FAULT_POLICY", "exclude");
    }
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &ga);
    DFCCL_TEST_CHECK(dfcclGroupCreate(ctx, n, rank, dfccl_test_oob_allgather, oob, "second",
                                      &gb) == DFCCL_OK, "second group: %s",
                     dfcclGetLastErrorMessage());
    if (mode != DIE_ENV) {
        DFCCL_TEST_CHECK(dfcclGroupSetFaultPolicy(ga, DFCCL_FAULT_EXCLUDE) == DFCCL_OK,
                         "policy: %s", dfcclGetLastErrorMessage());
        DFCCL_TEST_CHECK(dfcclGroupSetFaultPolicy(gb, DFCCL_FAULT_EXCLUDE) == DFCCL_OK,
                         "policy: %s", dfcclGetLastErrorMessage());
    }
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(AR_COUNT, DFCCL_FLOAT32, DFCCL_SUM, ga, 0, &ar) ==
                     DFCCL_OK, "register allreduce");
    DFCCL_TEST_CHECK(dfcclRegisterAllGather(AG_COUNT, DFCCL_INT32, ga, 0, &ag) == DFCCL_OK,
                     "register allgather");
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(B_COUNT, DFCCL_FLOAT32, DFCCL_SUM, gb, 0, &br) ==
                     DFCCL_OK, "register allreduce of the second group");
    send   = dfccl_test_malloc(ctx, AR_COUNT * sizeof(float));
    recv   = dfccl_test_malloc(ctx, AR_COUNT * sizeof(float));
    bsend  = dfccl_test_malloc(ctx, B_COUNT * sizeof(float));
    brecv  = dfccl_test_malloc(ctx, B_COUNT * sizeof(float));
    agsend = dfccl_test_malloc(ctx, AG_COUNT * sizeof(int32_t));
    agrecv = dfccl_test_malloc(ctx, (size_t)n * AG_COUNT * sizeof(int32_t));
    h      = malloc(AR_COUNT * sizeof(float));
    hg     = malloc((size_t)n * AG_COUNT * sizeof(int32_t));
    DFCCL_TEST_CHECK(h != NULL && hg != NULL, "host memory");

    for (int it = 0; it < ITERS; it++) {
        if (rank == DEAD_RANK && it == DIE_AT && !mid) {
            kill(getpid(), SIGKILL);
        }
        if (mode == DIE_TWICE && rank == 3 && it == SECOND_AT) {
            _exit(0); /* gone without a word, as a crash that exits */
        }
        for (size_t i = 0; i < AR_COUNT; i++) {
            h[i] = ar_value(rank, it, i);
        }
        dfccl_test_put(ctx, send, h, AR_COUNT * sizeof(float));
        dfccl_test_put(ctx, bsend, h, B_COUNT * sizeof(float));
        for (size_t i = 0; i < AG_COUNT; i++) {
            hg[i] = rank * 1000 + it;
        }
        dfccl_test_put(ctx, agsend, hg, AG_COUNT * sizeof(int32_t));
        DFCCL_TEST_CHECK(dfcclRunAllReduce(send, recv, ar, NULL, NULL, ctx) == DFCCL_OK,
                         "run allreduce: %s", dfcclGetLastErrorMessage());
        DFCCL_TEST_CHECK(dfcclRunAllGather(agsend, agrecv, ag, NULL, NULL, ctx) == DFCCL_OK,
                         "run allgather: %s", dfcclGetLastErrorMessage());
        DFCCL_TEST_CHECK(dfcclRunAllReduce(bsend, brecv, br, NULL, NULL, ctx) == DFCCL_OK,
                         "run second allreduce: %s", dfcclGetLastErrorMessage());
        if (rank == DEAD_RANK && it == DIE_AT) {
            usleep(1000);
            kill(getpid(), SIGKILL);
        }
        if ((mid && it == DIE_AT) ||
            (getenv("FAULT_TEST_ACROSS_HOSTS") != NULL && it == DIE_AT - 1)) {
            /* The runs the dead rank was in (DIE_AT): each completes with
             * its data (it got that far), runs again over the survivors,
             * or fails where another survivor completed it first. Across
             * hosts, the dead rank's last run (DIE_AT - 1) may lack its
             * data on a survivor though the dead rank completed it: its
             * sends were with UCX, not yet delivered (rendezvous needs the
             * sender). Such a run ends in the same three ways; the later
             * ones are exact. */
            const int ids[3] = {ar, ag, br}, last = it == DIE_AT - 1;
            dfccl_status_t st[3];
            DFCCL_TEST_CHECK(wait_cut_runs(ctx, ids, it, !last && rank == 0, st) == 0,
                             "iteration %d", it);
            if (st[0] == DFCCL_OK) {
                dfccl_test_get(ctx, h, recv, AR_COUNT * sizeof(float));
                DFCCL_TEST_CHECK(sum_whole_or_survivors(h, AR_COUNT, it, n, "allreduce"),
                                 "iteration %d: neither the sum over %d ranks nor over the "
                                 "survivors", it, n);
            }
            if (last && st[1] == DFCCL_OK) {
                dfccl_test_get(ctx, hg, agrecv, (size_t)n * AG_COUNT * sizeof(int32_t));
                DFCCL_TEST_CHECK(ag_whole_or_survivors(hg, it, n),
                                 "iteration %d: the allgather holds neither the %d ranks' "
                                 "blocks nor the survivors'", it, n);
            }
            if (last && st[2] == DFCCL_OK) {
                dfccl_test_get(ctx, h, brecv, B_COUNT * sizeof(float));
                DFCCL_TEST_CHECK(sum_whole_or_survivors(h, B_COUNT, it, n, "second allreduce"),
                                 "iteration %d: neither the sum over %d ranks nor over the "
                                 "survivors", it, n);
            }
            continue;
        } else {
            WAIT_OK(ar, "allreduce");
            WAIT_OK(ag, "allgather");
            WAIT_OK(br, "second allreduce");
        }

        /* who took part: everyone before the death, the survivors from the
         * iteration the dead rank never joined */
        nalive = 0;
        for (int r = 0; r < n; r++) {
            if ((it < DIE_AT || r != DEAD_RANK) &&
                (mode != DIE_TWICE || it < SECOND_AT || r != 3)) {
                alive[nalive++] = r;
            }
        }
        dfccl_test_get(ctx, h, recv, AR_COUNT * sizeof(float));
        DFCCL_TEST_CHECK(sum_ok(h, AR_COUNT, it, alive, nalive, "allreduce"), "sum");
        dfccl_test_get(ctx, h, brecv, B_COUNT * sizeof(float));
        DFCCL_TEST_CHECK(sum_ok(h, B_COUNT, it, alive, nalive, "second allreduce"), "sum");
        dfccl_test_get(ctx, hg, agrecv, (size_t)nalive * AG_COUNT * sizeof(int32_t));
        for (int k = 0; k < nalive; k++) {
            for (size_t i = 0; i < AG_COUNT; i++) {
                DFCCL_TEST_CHECK(hg[(size_t)k * AG_COUNT + i] == alive[k] * 1000 + it,
                                 "iteration %d: allgather block %d element %zu is %d, want %d",
                                 it, k, i, hg[(size_t)k * AG_COUNT + i], alive[k] * 1000 + it);
            }
        }
        for (int k = 0; k < 2; k++) {
            DFCCL_TEST_CHECK(dfcclGroupExcluded(k == 0 ? ga : gb, excl, &nex) == DFCCL_OK,
                             "excluded");
            DFCCL_TEST_CHECK(nex == n - nalive && (nex == 0 || excl[0] == DEAD_RANK) &&
                             (nex < 2 || excl[1] == 3),
                             "iteration %d: group %d: %d rank(s) excluded, first %d", it, k,
                             nex, nex > 0 ? excl[0] : -1);
        }
        DFCCL_TEST_CHECK(dfcclGetCollInfo(ar, ctx, &info) == DFCCL_OK &&
                         info.excluded == n - nalive,
                         "iteration %d: coll info says %d excluded", it, info.excluded);
    }
    DFCCL_TEST_CHECK(dfcclDeregister(ar, ctx) == DFCCL_OK, "deregister");
    DFCCL_TEST_CHECK(dfcclDeregister(ag, ctx) == DFCCL_OK, "deregister");
    DFCCL_TEST_CHECK(dfcclDeregister(br, ctx) == DFCCL_OK, "deregister");
    DFCCL_TEST_CHECK(dfcclGroupDestroy(gb) == DFCCL_OK, "destroy");
    DFCCL_TEST_CHECK(dfcclGroupDestroy(ga) == DFCCL_OK, "destroy");
    dfccl_test_free(ctx, send);
    dfccl_test_free(ctx, bsend);
    dfccl_test_free(ctx, brecv);
    dfccl_test_free(ctx, agsend);
    dfccl_test_free(ctx, agrecv);
    free(h);
    free(hg);
    return unit_rank_end(ctx, recv);
}

START_TEST(test_exclude)
{
    static int mode = DIE_BEFORE;

    ck_assert_int_eq(dfccl_test_mp_run_killed(4, 120, exclude_body, &mode, DEAD_RANK), 0);
}
END_TEST

START_TEST(test_exclude_mid_run)
{
    static int mode = DIE_MID;

    ck_assert_int_eq(dfccl_test_mp_run_killed(4, 120, exclude_body, &mode, DEAD_RANK), 0);
}
END_TEST

/* Rank 2 dies, then rank 3 of the group as created (2 of the survivors'):
 * the survivors' group excludes in its turn, and the ranks reported are
 * those of the group as created. */
START_TEST(test_exclude_twice)
{
    static int mode = DIE_TWICE;

    ck_assert_int_eq(dfccl_test_mp_run_killed(4, 120, exclude_body, &mode, DEAD_RANK), 0);
}
END_TEST

/* DFCCL_FAULT_POLICY=exclude, no dfcclGroupSetFaultPolicy: the survivors
 * go on as in test_exclude. */
START_TEST(test_exclude_env)
{
    static int mode = DIE_ENV;

    ck_assert_int_eq(dfccl_test_mp_run_killed(4, 120, exclude_body, &mode, DEAD_RANK), 0);
}
END_TEST

/* Without the opt-in: the error names the dead rank, as before. */
static int default_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    int id, nex = -1;
    float *d;
    dfccl_status_t st = DFCCL_OK;

    (void)arg;
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(1 << 16, DFCCL_FLOAT32, DFCCL_SUM, g, 0, &id) ==
                     DFCCL_OK, "register");
    d = dfccl_test_malloc(ctx, (1 << 16) * sizeof(float));
    dfccl_test_barrier(oob);
    if (rank == DEAD_RANK) {
        kill(getpid(), SIGKILL);
    }
    DFCCL_TEST_CHECK(dfcclRunAllReduce(d, d, id, NULL, NULL, ctx) == DFCCL_OK, "run");
    st = dfcclWait(id, dfccl_test_wait_ms(30000), ctx);
    DFCCL_TEST_CHECK(st == DFCCL_ERR_ABORTED, "wait returned %s", dfcclGetErrorString(st));
    DFCCL_TEST_CHECK(strstr(dfcclGetLastErrorMessage(), "rank 2") != NULL &&
                     strstr(dfcclGetLastErrorMessage(), "has exited") != NULL, "message: %s",
                     dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(dfcclGroupExcluded(g, NULL, &nex) == DFCCL_OK && nex == 0,
                     "%d excluded without the opt-in", nex);
    return unit_rank_end(ctx, d);
}

START_TEST(test_default_aborts)
{
    ck_assert_int_eq(dfccl_test_mp_run_killed(4, 60, default_body, NULL, DEAD_RANK), 0);
}
END_TEST

/* Layouts of ranks over simulated hosts. */
enum { HOSTS_HALVES = 0, HOSTS_INTERLEAVED, HOSTS_LONE, HOSTS_ONE_FAR };

/* DFCCL_HOST_ID of rank r of n in layout `layout`: halves (0,1 | 2,3),
 * interleaved (a b a b), lone (a a b: the last rank alone), one far
 * (a a a b). */
static void hosts_env(int rank, int n, int layout)
{
    int b;

    switch (layout) {
    case HOSTS_HALVES:
        b = rank >= n / 2;
        break;
    case HOSTS_INTERLEAVED:
        b = rank % 2;
        break;
    default:
        b = rank == n - 1;
        break;
    }
    dfccl_test_setenv("DFCCL_HOST_ID", b ? "dfccl-test-host-b" : "dfccl-test-host-a");
    unsetenv("DFCCL_NET");
    if (layout == HOSTS_LONE) {
        /* TCP only: the lone rank's exit closes its connections, and that
         * is all its survivors see of it (no process of their host) */
        dfccl_test_setenv("UCX_TLS", "tcp,self");
    }
}

typedef struct {
    int layout;
    int mode;
} hosts_arg_t;

/* exclude_body across simulated hosts, under DFCCL_TIMEOUT: every wait of
 * the exclusion is bounded. */
static int hosts_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    const hosts_arg_t *a = arg;
    char tmo[32];

    snprintf(tmo, sizeof(tmo), "%.0f", 60 * dfccl_test_scale_max());
    dfccl_test_setenv("DFCCL_TIMEOUT", tmo);
    dfccl_test_setenv("FAULT_TEST_ACROSS_HOSTS", "1");
    hosts_env(rank, n, a->layout);
    return exclude_body(rank, n, oob, (void *)&a->mode);
}

/* Ranks 0,1 on host a, 2,3 on host b: rank 2 dies; 0 and 1 hear it over
 * the net (rank 3's message, rank 1's watch of its next rank). */
START_TEST(test_hosts_exclude)
{
    static hosts_arg_t a = {HOSTS_HALVES, DIE_BEFORE};

    ck_assert_int_eq(dfccl_test_mp_run_killed(4, 180, hosts_body, &a, DEAD_RANK), 0);
}
END_TEST

/* a b a b: rank 2 shares host a with rank 0; 1 and 3 are on host b. */
START_TEST(test_hosts_exclude_interleaved)
{
    static hosts_arg_t a = {HOSTS_INTERLEAVED, DIE_BEFORE};

    ck_assert_int_eq(dfccl_test_mp_run_killed(4, 180, hosts_body, &a, DEAD_RANK), 0);
}
END_TEST

/* Dying 1 ms into its runs, across hosts. */
START_TEST(test_hosts_exclude_mid_run)
{
    static hosts_arg_t a = {HOSTS_HALVES, DIE_MID};

    ck_assert_int_eq(dfccl_test_mp_run_killed(4, 180, hosts_body, &a, DEAD_RANK), 0);
}
END_TEST

/* DFCCL_FAULT_POLICY=exclude across hosts, no calls. */
START_TEST(test_hosts_exclude_env)
{
    static hosts_arg_t a = {HOSTS_INTERLEAVED, DIE_ENV};

    ck_assert_int_eq(dfccl_test_mp_run_killed(4, 180, hosts_body, &a, DEAD_RANK), 0);
}
END_TEST

/* Three ranks, rank 2 alone on host b: only its closed connections tell. */
START_TEST(test_hosts_exclude_lone)
{
    static hosts_arg_t a = {HOSTS_LONE, DIE_BEFORE};

    ck_assert_int_eq(dfccl_test_mp_run_killed(3, 180, hosts_body, &a, DEAD_RANK), 0);
}
END_TEST

/* Across hosts without the opt-in: each survivor's run fails with a
 * message naming rank 2, within DFCCL_TIMEOUT and a margin (no hang). */
static int hosts_default_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    const double tmo = 10 * dfccl_test_scale_max();
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    int id, nex = -1;
    float *s, *d;
    dfccl_status_t st;
    char v[32];
    double t0;

    (void)arg;
    snprintf(v, sizeof(v), "%.0f", tmo);
    dfccl_test_setenv("DFCCL_TIMEOUT", v);
    hosts_env(rank, n, HOSTS_HALVES);
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(1 << 16, DFCCL_FLOAT32, DFCCL_SUM, g, 0, &id) ==
                     DFCCL_OK, "register");
    s = dfccl_test_malloc(ctx, (1 << 16) * sizeof(float));
    d = dfccl_test_malloc(ctx, (1 << 16) * sizeof(float));
    DFCCL_TEST_CHECK(unit_run_wait(dfcclRunAllReduce(s, d, id, NULL, NULL, ctx), id, 60000,
                                   ctx) == DFCCL_OK, "the first allreduce: %s",
                     dfcclGetLastErrorMessage());
    dfccl_test_barrier(oob);
    if (rank == DEAD_RANK) {
        kill(getpid(), SIGKILL);
    }
    t0 = unit_now_s();
    DFCCL_TEST_CHECK(dfcclRunAllReduce(s, d, id, NULL, NULL, ctx) == DFCCL_OK, "run");
    st = dfcclWait(id, dfccl_test_wait_ms(60000), ctx);
    printf("hosts, default policy: rank %d: %s after %.1f s: %s\n", rank,
           dfcclGetErrorString(st), unit_now_s() - t0, dfcclGetLastErrorMessage());
    fflush(stdout);
    DFCCL_TEST_CHECK(st != DFCCL_OK, "wait returned %s",
                     dfcclGetErrorString(st));
    DFCCL_TEST_CHECK(strstr(dfcclGetLastErrorMessage(), "rank 2") != NULL, "message: %s",
                     dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(unit_now_s() - t0 < tmo + 30 * dfccl_test_scale(), "the failure took "
                     "%.1f s", unit_now_s() - t0);
    DFCCL_TEST_CHECK(dfcclGroupExcluded(g, NULL, &nex) == DFCCL_OK && nex == 0,
                     "%d excluded without the opt-in", nex);
    /* the context is aborted: the calls only end it */
    (void)dfcclDeregister(id, ctx);
    dfccl_test_free(ctx, s);
    dfccl_test_free(ctx, d);
    (void)dfcclDestroy(ctx);
    return 0;
}

START_TEST(test_hosts_default_aborts)
{
    ck_assert_int_eq(dfccl_test_mp_run_killed(4, 180, hosts_default_body, NULL, DEAD_RANK), 0);
}
END_TEST

/* A net group where rank 1 has only local edges (hosts a a a b) and the
 * policy was not set before it was created: refused, and the group keeps
 * the default. */
static int net_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;

    (void)arg;
    hosts_env(rank, n, HOSTS_ONE_FAR);
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    EXPECT(dfcclGroupSetFaultPolicy(g, DFCCL_FAULT_EXCLUDE), DFCCL_ERR_UNSUPPORTED, "net");
    DFCCL_TEST_CHECK(dfcclGroupDestroy(g) == DFCCL_OK, "destroy");
    return unit_rank_end(ctx, NULL);
}

START_TEST(test_net_refused)
{
    ck_assert_int_eq(dfccl_test_mp_run(4, 60, net_body, NULL), 0);
}
END_TEST

/* The same layout with DFCCL_FAULT_POLICY=exclude: every rank starts the
 * net transport, the group runs, and the explicit call is accepted. */
static int net_env_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    float *d, h[64];
    int id;

    (void)arg;
    hosts_env(rank, n, HOSTS_ONE_FAR);
    dfccl_test_setenv("DFCCL_FAULT_POLICY", "exclude");
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(64, DFCCL_FLOAT32, DFCCL_SUM, g, 0, &id) ==
                     DFCCL_OK, "register: %s", dfcclGetLastErrorMessage());
    d = dfccl_test_malloc(ctx, sizeof(h));
    for (int i = 0; i < 64; i++) {
        h[i] = (float)(rank + i);
    }
    dfccl_test_put(ctx, d, h, sizeof(h));
    DFCCL_TEST_CHECK(unit_run_wait(dfcclRunAllReduce(d, d, id, NULL, NULL, ctx), id, 30000,
                                   ctx) == DFCCL_OK,
                     "run: %s", dfcclGetLastErrorMessage());
    dfccl_test_get(ctx, h, d, sizeof(h));
    for (int i = 0; i < 64; i++) {
        DFCCL_TEST_CHECK(h[i] == (float)(n * i + n * (n - 1) / 2), "element %d is %g", i,
                         (double)h[i]);
    }
    DFCCL_TEST_CHECK(dfcclGroupSetFaultPolicy(g, DFCCL_FAULT_EXCLUDE) == DFCCL_OK,
                     "policy on a net group whose ranks all started the net: %s",
                     dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(dfcclDeregister(id, ctx) == DFCCL_OK, "deregister");
    DFCCL_TEST_CHECK(dfcclGroupDestroy(g) == DFCCL_OK, "destroy");
    return unit_rank_end(ctx, d);
}

START_TEST(test_net_env)
{
    ck_assert_int_eq(dfccl_test_mp_run(4, 60, net_env_body, NULL), 0);
}
END_TEST

int main(void)
{
    Suite *s  = suite_create("fault");
    TCase *tc = dfccl_test_case(s, "exclude", 600);

    tcase_add_test(tc, test_exclude);
    tcase_add_test(tc, test_exclude_mid_run);
    tcase_add_test(tc, test_exclude_twice);
    tcase_add_test(tc, test_default_aborts);
    tcase_add_test(tc, test_net_refused);
    tcase_add_test(tc, test_exclude_env);
    tcase_add_test(tc, test_net_env);
    /* across hosts: each its own case, so that CK_RUN_CASE picks one */
    tc = dfccl_test_case(s, "hosts", 600);
    tcase_add_test(tc, test_hosts_exclude);
    tc = dfccl_test_case(s, "hosts_more", 600);
    tcase_add_test(tc, test_hosts_exclude_interleaved);
    tcase_add_test(tc, test_hosts_exclude_mid_run);
    tc = dfccl_test_case(s, "hosts_env", 300);
    tcase_add_test(tc, test_hosts_exclude_env);
    tc = dfccl_test_case(s, "hosts_lone", 300);
    tcase_add_test(tc, test_hosts_exclude_lone);
    tc = dfccl_test_case(s, "hosts_default", 300);
    tcase_add_test(tc, test_hosts_default_aborts);
    return dfccl_test_run(s, CK_VERBOSE);
}
