/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Failing well on incorrect programs and dead peers (host backend, real
 * processes, each under a timeout):
 *  - a collective that one rank never runs times out (DFCCL_TIMEOUT) with a
 *    message naming the collective, its group and which ranks joined; the
 *    daemon stops, later runs fail, and the context is destroyed cleanly;
 *  - a rank killed with SIGKILL while the others wait for it: they get an
 *    error naming the dead rank within seconds (no timeout configured), and
 *    no shared-memory segment of the dead process is left behind;
 *  - dfcclAbort completes collectives in flight with DFCCL_ERR_ABORTED.
 */
#include <check.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "mp.h"

/* Memory the ranks can write and the test process read afterwards. */
static int *mmap_shared_ints(int n)
{
    void *p = mmap(NULL, (size_t)n * sizeof(int), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Number of /dev/shm entries whose name starts with dfccl-<pid>-. */
static int shm_leftovers(int pid)
{
    char prefix[32];
    struct dirent *e;
    DIR *d = opendir("/dev/shm");
    int n = 0;

    snprintf(prefix, sizeof(prefix), "dfccl-%d-", pid);
    while (d != NULL && (e = readdir(d)) != NULL) {
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    }
    if (d != NULL) {
        closedir(d);
    }
    return n;
}

static int timeout_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    dfccl_config_t cfg;
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    int id;
    float *d;
    double t0;
    dfccl_status_t st;

    setenv("DFCCL_BACKEND", "host", 0);
    dfcclConfigInit(&cfg);
    cfg.timeout_s = 1;
    dfccl_test_setup(rank, n, oob, &cfg, &ctx, &g);
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(1000, DFCCL_FLOAT32, DFCCL_SUM, g, 0, &id) ==
                     DFCCL_OK, "register");
    d = dfccl_test_malloc(ctx, 1000 * sizeof(float));
    if (rank != n - 1) {
        /* the last rank never joins: an incorrect program */
        DFCCL_TEST_CHECK(dfcclRunAllReduce(d, d, id, NULL, NULL, ctx) == DFCCL_OK, "run");
        t0 = now_s();
        st = dfcclWait(id, 30000, ctx);
        DFCCL_TEST_CHECK(st == DFCCL_ERR_TIMEOUT, "wait returned %s", dfcclGetErrorString(st));
        DFCCL_TEST_CHECK(now_s() - t0 < 10, "timed out after %.1f s", now_s() - t0);
        DFCCL_TEST_CHECK(strstr(dfcclGetLastErrorMessage(), "allreduce of 1000 float32") &&
                         strstr(dfcclGetLastErrorMessage(), "group test") &&
                         strstr(dfcclGetLastErrorMessage(), "ranks not joined: 2"),
                         "message: %s", dfcclGetLastErrorMessage());
        if (rank == 0) {
            printf("timeout message: %s\n", dfcclGetLastErrorMessage());
        }
        st = dfcclRunAllReduce(d, d, id, NULL, NULL, ctx);
        DFCCL_TEST_CHECK(st == DFCCL_ERR_ABORTED, "run after the timeout: %s",
                         dfcclGetErrorString(st));
    }
    dfccl_test_barrier(oob);
    dfccl_test_free(ctx, d);
    st = dfcclDestroy(ctx);
    DFCCL_TEST_CHECK(st == DFCCL_OK, "destroy: %s", dfcclGetErrorString(st));
    return 0;
}

START_TEST(test_timeout)
{
    ck_assert_int_eq(dfccl_test_mp_run(3, 60, timeout_body, NULL), 0);
}
END_TEST

static int dead_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    int id, *pids = arg;
    float *d;
    double t0;
    dfccl_status_t st;

    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(1 << 20, DFCCL_FLOAT32, DFCCL_SUM, g, 0, &id) ==
                     DFCCL_OK, "register");
    d = dfccl_test_malloc(ctx, (1 << 20) * sizeof(float));
    pids[rank] = (int)getpid();
    dfccl_test_barrier(oob);
    if (rank == n - 1) {
        /* start, then die in the middle of it */
        dfcclRunAllReduce(d, d, id, NULL, NULL, ctx);
        usleep(2000);
        kill(getpid(), SIGKILL);
    }
    /* A GPU may finish the dying rank's part of the first allreduce within
     * its 2 ms; the second one it never joins. */
    for (int it = 0; it < 2; it++) {
        DFCCL_TEST_CHECK(dfcclRunAllReduce(d, d, id, NULL, NULL, ctx) == DFCCL_OK, "run");
        t0 = now_s();
        st = dfcclWait(id, 30000, ctx);
        if (st != DFCCL_OK) {
            break;
        }
    }
    DFCCL_TEST_CHECK(st == DFCCL_ERR_ABORTED, "wait returned %s", dfcclGetErrorString(st));
    DFCCL_TEST_CHECK(now_s() - t0 < 10, "noticed after %.1f s", now_s() - t0);
    DFCCL_TEST_CHECK(strstr(dfcclGetLastErrorMessage(), "has exited") != NULL, "message: %s",
                     dfcclGetLastErrorMessage());
    if (rank == 0) {
        printf("dead rank message: %s\n", dfcclGetLastErrorMessage());
    }
    dfccl_test_free(ctx, d);
    st = dfcclDestroy(ctx);
    DFCCL_TEST_CHECK(st == DFCCL_OK, "destroy: %s", dfcclGetErrorString(st));
    return 0;
}

START_TEST(test_dead_rank)
{
    int *pids = mmap_shared_ints(4);

    ck_assert_int_eq(dfccl_test_mp_run_killed(3, 60, dead_body, pids, 2), 0);
    for (int r = 0; r < 3; r++) {
        ck_assert_msg(shm_leftovers(pids[r]) == 0, "rank %d (pid %d) left %d segment(s)", r,
                      pids[r], shm_leftovers(pids[r]));
    }
}
END_TEST

static int abort_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    int id;
    float *d;
    dfccl_status_t st;

    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(1000, DFCCL_FLOAT32, DFCCL_SUM, g, 0, &id) ==
                     DFCCL_OK, "register");
    d = dfccl_test_malloc(ctx, 1000 * sizeof(float));
    if (rank == 0) {
        DFCCL_TEST_CHECK(dfcclRunAllReduce(d, d, id, NULL, NULL, ctx) == DFCCL_OK, "run");
        usleep(20000);
        DFCCL_TEST_CHECK(dfcclAbort(ctx) == DFCCL_OK, "abort");
        st = dfcclWait(id, 5000, ctx);
        DFCCL_TEST_CHECK(st == DFCCL_ERR_ABORTED, "wait returned %s", dfcclGetErrorString(st));
    }
    dfccl_test_barrier(oob);
    dfccl_test_free(ctx, d);
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    return 0;
}

START_TEST(test_abort)
{
    ck_assert_int_eq(dfccl_test_mp_run(2, 60, abort_body, NULL), 0);
}
END_TEST

int main(void)
{
    Suite *s  = suite_create("failure");
    TCase *tc = tcase_create("fail-well");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_timeout);
    tcase_add_test(tc, test_dead_rank);
    tcase_add_test(tc, test_abort);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_VERBOSE);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
