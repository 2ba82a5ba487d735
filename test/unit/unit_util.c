/* SPDX-License-Identifier: BSD-3-Clause */
#include "unit_util.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

int unit_rank_counts(const int *def, const int *quick, int least, int most, int *ns_p)
{
    const char *env = getenv("DFCCL_TEST_RANKS"), *p;
    const int *list = def;
    int k = 0;

    if (env == NULL || *env == '\0') {
        if (quick != NULL && getenv("DFCCL_TEST_QUICK") != NULL) {
            list = quick;
        }
        for (; list[k] != 0 && k < UNIT_RANK_COUNTS_MAX; k++) {
            ns_p[k] = list[k];
        }
        return k;
    }
    for (p = env; *p != '\0';) {
        char *end;
        long v;

        if (isspace((unsigned char)*p) || *p == ',') {
            p++;
            continue;
        }
        v = strtol(p, &end, 10);
        if (end == p || (*end != '\0' && !isspace((unsigned char)*end) && *end != ',') ||
            v < least || v > most || k == UNIT_RANK_COUNTS_MAX) {
            fprintf(stderr, "DFCCL_TEST_RANKS=\"%s\": \"%.*s\" is not a rank count this test "
                    "can run: it takes up to %d whole numbers from %d to %d, separated by "
                    "spaces or commas\n", env, (int)strcspn(p, " \t\n,"), p,
                    UNIT_RANK_COUNTS_MAX, least, most);
            exit(2);
        }
        ns_p[k++] = (int)v;
        p = end;
    }
    if (k == 0) {
        fprintf(stderr, "DFCCL_TEST_RANKS=\"%s\" lists no rank count\n", env);
        exit(2);
    }
    return k;
}

double unit_now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int *unit_shared_ints(int n)
{
    void *p = mmap(NULL, (size_t)n * sizeof(int), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

char *unit_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;

    if (f == NULL) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = calloc(1, (size_t)(n > 0 ? n : 0) + 1);
    if (buf != NULL && n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        buf[0] = '\0';
    }
    fclose(f);
    return buf;
}

dfccl_status_t unit_run_wait(dfccl_status_t run_st, int id, int base_ms, dfccl_rank_ctx_t ctx)
{
    return run_st == DFCCL_OK ? dfcclWait(id, dfccl_test_wait_ms(base_ms), ctx) : run_st;
}

int unit_rank_end(dfccl_rank_ctx_t ctx, void *d)
{
    dfccl_status_t st;

    dfccl_test_free(ctx, d);
    st = dfcclDestroy(ctx);
    DFCCL_TEST_CHECK(st == DFCCL_OK, "destroy: %s", dfcclGetErrorString(st));
    return 0;
}

int unit_rank_end_counted(dfccl_test_oob_t *oob, dfccl_rank_ctx_t ctx, dfccl_group_t g,
                          unsigned long long *pre_p)
{
    dfccl_stats_t s;

    DFCCL_TEST_CHECK(dfcclGetStats(ctx, &s) == DFCCL_OK, "stats");
    *pre_p = dfccl_test_sum_u64(oob, s.preemptions);
    DFCCL_TEST_CHECK(dfcclGroupDestroy(g) == DFCCL_OK, "group destroy");
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    return 0;
}

int unit_mismatch_run(int rank, dfccl_test_oob_t *oob, dfccl_rank_ctx_t ctx, dfccl_group_t g,
                      float **d_p, dfccl_status_t *st_p, double *secs_p)
{
    int x, y;
    double t0;

    if (rank == 0) {
        DFCCL_TEST_CHECK(dfcclRegisterAllGather(8, DFCCL_INT32, g, 0, &x) == DFCCL_OK,
                         "register the extra collective");
    }
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(1000, DFCCL_FLOAT32, DFCCL_SUM, g, 0, &y) ==
                     DFCCL_OK, "register");
    *d_p = dfccl_test_malloc(ctx, 1000 * sizeof(float));
    dfccl_test_barrier(oob); /* every registration is made: the mismatch is there */
    t0      = unit_now_s();
    *st_p   = unit_run_wait(dfcclRunAllReduce(*d_p, *d_p, y, NULL, NULL, ctx), y, 60000, ctx);
    *secs_p = unit_now_s() - t0;
    return 0;
}
