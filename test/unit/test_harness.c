/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The multi-process harness itself (test/common/mp.c), without dfccl: ranks
 * that pass make a run pass; a rank that fails, hangs in the barrier or is
 * killed makes it fail, within its timeout and never by hanging, including
 * its teardown after a rank died inside the barrier; and a rank expected to
 * die (dfccl_test_mp_run_killed) may die inside the barrier too.
 */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "mp.h"
#include "suite.h"
#include "unit_util.h"

/* The timeout (seconds on an idle machine) of a run that must hang. */
#define HANG_S 1.0

/* Every rank: an allgather of its rank and a barrier; 0 when it saw all. */
static int pass_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    int all[DFCCL_TEST_MAX_RANKS];

    (void)arg;
    DFCCL_TEST_CHECK(dfccl_test_oob_allgather(&rank, all, sizeof(rank), oob) == 0, "allgather");
    for (int r = 0; r < n; r++) {
        DFCCL_TEST_CHECK(all[r] == r, "slot %d holds %d", r, all[r]);
    }
    dfccl_test_barrier(oob);
    return 0;
}

START_TEST(test_pass)
{
    ck_assert_int_eq(dfccl_test_mp_run(1, 30, pass_body, NULL), 0);
    ck_assert_int_eq(dfccl_test_mp_run(3, 30, pass_body, NULL), 0);
}
END_TEST

/* Rank 1 fails; the others pass. */
static int fail_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    (void)n;
    (void)oob;
    (void)arg;
    return rank == 1;
}

START_TEST(test_rank_fails)
{
    ck_assert_int_eq(dfccl_test_mp_run(3, 30, fail_body, NULL), 1);
}
END_TEST

/* Rank 1 leaves (*arg 0: returns, 1: is killed) before the barrier that
 * the others wait in: a hang, until the harness kills them inside it. */
static int hang_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    (void)n;
    if (rank == 1) {
        if (*(const int *)arg) {
            raise(SIGKILL);
        }
        return 0;
    }
    dfccl_test_barrier(oob);
    return 0;
}

START_TEST(test_hang_fails)
{
    const int how[2] = {0, 1};

    for (int i = 0; i < 2; i++) {
        double t0 = unit_now_s(), secs;
        int rc    = dfccl_test_mp_run(3, HANG_S, hang_body, (void *)&how[i]);

        secs = unit_now_s() - t0;
        printf("harness: rank 1 %s, the others in the barrier: run returned %d after %.1f s\n",
               how[i] ? "killed" : "gone", rc, secs);
        ck_assert_msg(rc == 1, "a run whose ranks hang returned %d, not 1 (a failure)", rc);
    }
}
END_TEST

static void *killer_main(void *arg)
{
    (void)arg;
    usleep(50000); /* the rank's main thread is inside the barrier by now */
    raise(SIGKILL);
    return NULL;
}

/* Rank 1 waits alone in the barrier until a thread of its own kills it;
 * the others pass without it. */
static int killed_inside_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    pthread_t th;

    (void)n;
    (void)arg;
    if (rank == 1) {
        DFCCL_TEST_CHECK(pthread_create(&th, NULL, killer_main, NULL) == 0, "thread");
        dfccl_test_barrier(oob);
        return 1; /* never: the barrier waits for ranks that do not come */
    }
    return 0;
}

START_TEST(test_killed_inside_barrier)
{
    /* the expected death passes, and the teardown, with the barrier left
     * with a waiter that will never return, ends */
    ck_assert_int_eq(dfccl_test_mp_run_killed(3, 30, killed_inside_body, NULL, 1), 0);
    /* unexpected, it fails */
    ck_assert_int_eq(dfccl_test_mp_run(3, 30, killed_inside_body, NULL), 1);
}
END_TEST

int main(void)
{
    Suite *s  = suite_create("harness");
    TCase *tc = dfccl_test_case(s, "harness", 60);

    tcase_add_test(tc, test_pass);
    tcase_add_test(tc, test_rank_fails);
    tcase_add_test(tc, test_hang_fails);
    tcase_add_test(tc, test_killed_inside_barrier);
    return dfccl_test_run(s, CK_VERBOSE);
}
