/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A short run on 2 ranks (forked, under the harness timeout): one
 * collective of each kind, a few rounds in opposite orders on the two
 * ranks, results checked, then everything deregistered and destroyed. It is
 * small on purpose: scripts/valgrind.sh runs it under valgrind, where the
 * host daemon's threads crawl. DFCCL_TEST_TIMEOUT (seconds) overrides the
 * harness timeout. Exit status 0 when every rank succeeded.
 */
#include <stdio.h>
#include <stdlib.h>

#include "mp.h"
#include "rel_colls.h"

#define SMALL_ROUNDS 3

static int small_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    rel_coll_t c[REL_KINDS] = {
        {.kind = REL_ALLREDUCE, .type = DFCCL_FLOAT32, .op = DFCCL_SUM, .count = 1000, .salt = 1},
        {.kind = REL_ALLGATHER, .type = DFCCL_INT32, .count = 300, .salt = 2},
        {.kind = REL_REDUCESCATTER, .type = DFCCL_INT64, .op = DFCCL_SUM, .count = 257,
         .salt = 3},
        {.kind = REL_REDUCE, .type = DFCCL_FLOAT64, .op = DFCCL_MAX, .root = 1, .count = 99,
         .salt = 4},
        {.kind = REL_BROADCAST, .type = DFCCL_UINT8, .root = 0, .count = 4097, .salt = 5},
    };
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    dfccl_status_t st;

    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    for (int k = 0; k < REL_KINDS; k++) {
        c[k].in_place = k == REL_ALLREDUCE;
        st = rel_coll_setup(&c[k], ctx, g, rank, n, 0);
        DFCCL_TEST_CHECK(st == DFCCL_OK, "register %s: %s", rel_kind_name(c[k].kind),
                         dfcclGetLastErrorMessage());
    }
    for (int round = 0; round < SMALL_ROUNDS; round++) {
        for (int j = 0; j < REL_KINDS; j++) {
            int k = rank % 2 ? REL_KINDS - 1 - j : j; /* opposite orders */
            rel_coll_fill(&c[k], ctx, round);
            st = rel_coll_run(&c[k], ctx);
            DFCCL_TEST_CHECK(st == DFCCL_OK, "run %s: %s", rel_kind_name(c[k].kind),
                             dfcclGetLastErrorMessage());
        }
        for (int k = 0; k < REL_KINDS; k++) {
            st = dfcclWait(c[k].id, -1, ctx);
            DFCCL_TEST_CHECK(st == DFCCL_OK, "wait %s: %s", rel_kind_name(c[k].kind),
                             dfcclGetLastErrorMessage());
            DFCCL_TEST_CHECK(rel_coll_check(&c[k], ctx, round) == 0, "wrong result");
        }
    }
    for (int k = 0; k < REL_KINDS; k++) {
        DFCCL_TEST_CHECK(rel_coll_teardown(&c[k], ctx) == DFCCL_OK, "deregister");
    }
    DFCCL_TEST_CHECK(dfcclGroupDestroy(g) == DFCCL_OK, "group destroy");
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    if (rank == 0) {
        printf("small run: 2 ranks, %d rounds x %d collectives (every kind): all correct\n",
               SMALL_ROUNDS, REL_KINDS);
    }
    return 0;
}

int main(void)
{
    const char *t = getenv("DFCCL_TEST_TIMEOUT");
    double timeout = t != NULL ? atof(t) : 60.0;

    if (getenv("DFCCL_BACKEND") == NULL) {
        setenv("DFCCL_BACKEND", "host", 1);
    }
    return dfccl_test_mp_run(2, timeout > 0 ? timeout : 60.0, small_body, NULL) == 0 ? 0 : 1;
}
