/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Soak test: 4 forked ranks run many collectives of every kind and of mixed
 * sizes and types on three groups (all ranks, pairs of ranks and a second
 * group of all ranks), each rank in its own random order per round, with
 * dfcclSynchronize at random points while collectives are outstanding, and
 * a collective of every group re-registered with a new size now and then.
 * Every result is checked. Resident memory (/proc/self/statm) and
 * dfcclGetStats().device_bytes are printed at the start and at the end; the
 * test fails if the resident memory grew by more than 64 MiB, if the
 * context's own memory (device_bytes less connectors) changed, or if any
 * result is wrong; the harness timeout makes a hang a failure.
 *
 * DFCCL_SOAK_COUNT sets the collectives run per rank. The default is scaled
 * down so that the test takes well under a minute on a 2-core machine; the
 * full count, for the GPU lane, is 1000000. DFCCL_SOAK_SYNC_EVERY (default
 * 24) sets how often a rank synchronizes: after 1 in that many runs.
 */
#define _GNU_SOURCE
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mp.h"
#include "rel_colls.h"
#include "suite.h"

#define SOAK_RANKS        4
#define SOAK_GROUPS       3
#define SOAK_PER_GROUP    6
#define SOAK_COLLS        (SOAK_GROUPS * SOAK_PER_GROUP)
#define SOAK_FULL_COUNT   1000000L
#define SOAK_DEFAULT      2880L
#define SOAK_RSS_BOUND    (64l << 20)

/* Subgroup bootstrap on top of the harness's allgather of all ranks: the
 * pair groups {0,1} and {2,3} are created at the same time, so every rank
 * takes part in each allgather and keeps the blocks of its pair. */
typedef struct {
    dfccl_test_oob_t *oob;
    int               nworld;
    int               first; /* world rank of the group's rank 0 */
    int               size;
} soak_sub_t;

static int soak_sub_allgather(const void *sendbuf, void *recvbuf, size_t bytes, void *arg)
{
    soak_sub_t *s = arg;
    char *all     = malloc(bytes * (size_t)s->nworld);
    int rc;

    if (all == NULL) {
        return -1;
    }
    rc = dfccl_test_oob_allgather(sendbuf, all, bytes, s->oob);
    memcpy(recvbuf, all + bytes * (size_t)s->first, bytes * (size_t)s->size);
    free(all);
    return rc;
}

static long soak_rss_bytes(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");

    if (f != NULL) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2) {
            resident = 0;
        }
        fclose(f);
    }
    return resident * sysconf(_SC_PAGESIZE);
}

static double soak_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The same on every rank: the shape of collective j of group g. */
static void soak_shape(rel_coll_t *c, int g, int j, unsigned version)
{
    static const size_t sizes[] = {1, 7, 64, 255, 1024, 3000, 4096, 10007, 65536};
    static const dfccl_datatype_t reduce_types[] = {DFCCL_FLOAT32, DFCCL_INT64, DFCCL_FLOAT64,
                                                    DFCCL_INT32};
    static const dfccl_datatype_t move_types[] = {DFCCL_UINT8, DFCCL_INT32, DFCCL_FLOAT64};
    unsigned h = (unsigned)(g * 131 + j * 17) + version * 2654435761u;
    size_t n   = sizeof(sizes) / sizeof(sizes[0]);

    memset(c, 0, sizeof(*c));
    c->kind  = (rel_kind_t)(j % REL_KINDS);
    /* mostly small collectives, now and then a large one */
    c->count = sizes[(h >> 3) % (h % 4 == 0 ? n : n - 2)];
    c->salt  = g * SOAK_PER_GROUP + j + (int)version;
    c->op    = (dfccl_op_t)((h >> 7) % 3 == 0 ? DFCCL_SUM : (h >> 7) % 3 == 1 ? DFCCL_MIN
                                                                               : DFCCL_MAX);
    if (c->kind == REL_ALLGATHER || c->kind == REL_BROADCAST) {
        c->type = move_types[(h >> 5) % 3];
    } else {
        c->type = reduce_types[(h >> 5) % 4];
    }
    c->root = (int)((h >> 9) % 2);
}

typedef struct {
    long count;      /* collectives per rank */
    int  sync_every; /* a synchronization after 1 in this many runs (0: none) */
} soak_arg_t;

typedef struct {
    int  rounds, syncs, reregs;
    long rss0, rss1, rss2;
    size_t dev1, dev2, conn1, conn2;
} soak_result_t;

static int soak_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    const soak_arg_t *a = varg;
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g[SOAK_GROUPS];
    soak_sub_t pair = {oob, n, (rank / 2) * 2, 2};
    int grank[SOAK_GROUPS], gsize[SOAK_GROUPS];
    rel_coll_t c[SOAK_COLLS];
    int order[SOAK_COLLS];
    unsigned seed = 777u + (unsigned)rank * 7919u;
    unsigned version[SOAK_GROUPS] = {0};
    soak_result_t r;
    dfccl_stats_t s;
    dfccl_status_t st;
    double t0;

    memset(&r, 0, sizeof(r));
    r.rss0 = soak_rss_bytes();
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g[0]);
    grank[0] = rank;
    gsize[0] = n;
    DFCCL_TEST_CHECK(dfcclGroupCreate(ctx, 2, rank % 2, soak_sub_allgather, &pair, "pair",
                                      &g[1]) == DFCCL_OK, "pair group: %s",
                     dfcclGetLastErrorMessage());
    grank[1] = rank % 2;
    gsize[1] = 2;
    DFCCL_TEST_CHECK(dfcclGroupCreate(ctx, n, rank, dfccl_test_oob_allgather, oob, "world2",
                                      &g[2]) == DFCCL_OK, "second group: %s",
                     dfcclGetLastErrorMessage());
    grank[2] = rank;
    gsize[2] = n;
    for (int k = 0; k < SOAK_COLLS; k++) {
        int gi = k / SOAK_PER_GROUP;
        soak_shape(&c[k], gi, k % SOAK_PER_GROUP, 0);
        c[k].in_place = (rank + k) % 3 == 0; /* a local choice */
        st = rel_coll_setup(&c[k], ctx, g[gi], grank[gi], gsize[gi], k % 3);
        DFCCL_TEST_CHECK(st == DFCCL_OK, "register %d: %s", k, dfcclGetLastErrorMessage());
        order[k] = k;
    }

    t0 = soak_now();
    for (long done = 0; done < a->count; r.rounds++) {
        int round = r.rounds;

        /* A random order per rank, device synchronizations at random
         * points with collectives outstanding. */
        for (int i = SOAK_COLLS - 1; i > 0; i--) {
            int j = (int)(rand_r(&seed) % (unsigned)(i + 1)), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (int i = 0; i < SOAK_COLLS; i++) {
            rel_coll_t *cc = &c[order[i]];
            rel_coll_fill(cc, ctx, round);
            st = rel_coll_run(cc, ctx);
            DFCCL_TEST_CHECK(st == DFCCL_OK, "round %d: run %s: %s", round,
                             rel_kind_name(cc->kind), dfcclGetLastErrorMessage());
            if (a->sync_every > 0 && rand_r(&seed) % (unsigned)a->sync_every == 0) {
                st = dfcclSynchronize(ctx);
                DFCCL_TEST_CHECK(st == DFCCL_OK, "synchronize: %s", dfcclGetLastErrorMessage());
                r.syncs++;
            }
        }
        for (int k = 0; k < SOAK_COLLS; k++) {
            st = dfcclWait(c[k].id, dfccl_test_wait_ms(300000), ctx);
            DFCCL_TEST_CHECK(st == DFCCL_OK, "round %d: wait %s id %d: %s", round,
                             rel_kind_name(c[k].kind), c[k].id, dfcclGetLastErrorMessage());
            if (rel_coll_check(&c[k], ctx, round)) {
                return 1;
            }
        }
        done += SOAK_COLLS;
        if (round == 0) {
            /* the first round allocated what the daemon keeps */
            r.rss1 = soak_rss_bytes();
            dfcclGetStats(ctx, &s);
            r.dev1  = s.device_bytes;
            r.conn1 = s.connector_bytes;
        }
        /* Every 16 rounds, one collective of every group gets a new shape:
         * the same on every rank, so registration order still matches. */
        if (round % 16 == 15) {
            for (int gi = 0; gi < SOAK_GROUPS; gi++) {
                int j = (int)(version[gi] % SOAK_PER_GROUP), k = gi * SOAK_PER_GROUP + j;
                version[gi]++;
                DFCCL_TEST_CHECK(rel_coll_teardown(&c[k], ctx) == DFCCL_OK, "deregister");
                soak_shape(&c[k], gi, j, version[gi]);
                c[k].in_place = (rank + k + (int)version[gi]) % 3 == 0;
                st = rel_coll_setup(&c[k], ctx, g[gi], grank[gi], gsize[gi], k % 3);
                DFCCL_TEST_CHECK(st == DFCCL_OK, "re-register %d: %s", k,
                                 dfcclGetLastErrorMessage());
                r.reregs++;
            }
        }
        if (rank == 0 && r.rounds % 500 == 499) {
            printf("soak: %ld collectives per rank, %.1f s\n", done, soak_now() - t0);
            fflush(stdout);
        }
    }
    r.rss2 = soak_rss_bytes();
    dfcclGetStats(ctx, &s);
    r.dev2  = s.device_bytes;
    r.conn2 = s.connector_bytes;
    {
        unsigned long long syncs = dfccl_test_sum_u64(oob, (unsigned long long)r.syncs);
        unsigned long long pre   = dfccl_test_sum_u64(oob, s.preemptions);
        unsigned long long quits = dfccl_test_sum_u64(oob, s.quits);
        double secs = soak_now() - t0;

        printf("soak rank %d: %d rounds x %d collectives, %d re-registrations; RSS %.1f MiB "
               "before setup, %.1f MiB after the first round, %.1f MiB at the end; "
               "device_bytes %zu (connectors %zu) after the first round, %zu (connectors %zu) "
               "at the end\n", rank, r.rounds, SOAK_COLLS, r.reregs, r.rss0 / 1048576.0,
               r.rss1 / 1048576.0, r.rss2 / 1048576.0, r.dev1, r.conn1, r.dev2, r.conn2);
        fflush(stdout);
        dfccl_test_barrier(oob);
        if (rank == 0) {
            printf("soak: %d ranks, %ld collectives per rank (%ld in all) on %d groups in %.1f "
                   "s (%.0f per second per rank), all correct; %llu device synchronizations, "
                   "%llu preemptions, %llu voluntary quits\n", n, (long)r.rounds * SOAK_COLLS,
                   (long)r.rounds * SOAK_COLLS * n, SOAK_GROUPS, secs,
                   (double)r.rounds * SOAK_COLLS / secs, syncs, pre, quits);
        }
    }
    DFCCL_TEST_CHECK(r.rss2 - r.rss1 <= SOAK_RSS_BOUND, "RSS grew by %.1f MiB (bound %.0f MiB)",
                     (r.rss2 - r.rss1) / 1048576.0, SOAK_RSS_BOUND / 1048576.0);
    DFCCL_TEST_CHECK(r.dev2 - r.conn2 == r.dev1 - r.conn1, "context memory changed: %zu -> %zu",
                     r.dev1 - r.conn1, r.dev2 - r.conn2);
    for (int k = 0; k < SOAK_COLLS; k++) {
        DFCCL_TEST_CHECK(rel_coll_teardown(&c[k], ctx) == DFCCL_OK, "deregister");
    }
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy: %s", dfcclGetLastErrorMessage());
    return 0;
}

static soak_arg_t soak_arg;
static double soak_timeout;

START_TEST(test_soak)
{
    ck_assert_int_eq(dfccl_test_mp_run(SOAK_RANKS, soak_timeout, soak_body, &soak_arg), 0);
}
END_TEST

int main(void)
{
    const char *env = getenv("DFCCL_SOAK_COUNT");
    Suite *s        = suite_create("soak");
    TCase *tc;

    soak_arg.count = env != NULL ? atol(env) : SOAK_DEFAULT;
    env = getenv("DFCCL_SOAK_SYNC_EVERY");
    soak_arg.sync_every = env != NULL ? atoi(env) : 24;
    if (soak_arg.count < SOAK_COLLS) {
        soak_arg.count = SOAK_COLLS;
    }
    /* generous: 40 ms per collective on top of two minutes (the scaled-down
     * count takes 40 to 90 s on 2 loaded cores; a hang is still caught) */
    soak_timeout = 120.0 + 0.04 * (double)soak_arg.count;
    if (soak_arg.count < SOAK_FULL_COUNT) {
        printf("soak: %ld collectives per rank, scaled down from the full %ld "
               "(set DFCCL_SOAK_COUNT=%ld for the full soak)\n", soak_arg.count,
               SOAK_FULL_COUNT, SOAK_FULL_COUNT);
    }
    printf("soak: harness timeout %.0f s\n", soak_timeout);
    fflush(stdout);
    /* the harness's own timeout (scaled with the load as it runs) fires first */
    tc = dfccl_test_case(s, "soak", soak_timeout + 60.0);
    tcase_add_test(tc, test_soak);
    return dfccl_test_run(s, CK_VERBOSE);
}
