/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Cross-check of the incremental cycle search.  Random small worlds are driven
 * by random events (any collective in any order, random synchronizations),
 * and after every event the simulator's answer is compared with a plain
 * search of the dependency graph built here from scratch, part by part, as
 * the model states it:
 *   - an executing part -> each part of its collective that is invoked but
 *     not executing, or not invoked on a suspended GPU (that GPU cannot
 *     invoke it before its suspension ends);
 *   - an invoked, not executing part -> every executing part of its GPU;
 *   - a part not invoked on a suspended GPU -> every part of that GPU that
 *     was executing when it synchronized and is not done.
 * The test also checks that a round never stalls without a cycle.
 */
#include "sim.h"
#include "sim_test.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GPUS   6
#define MAX_GROUPS 5
#define MAX_PARTS  256

typedef struct brute {
    const dfccl_sim_world_t *world;
    const dfccl_sim_round_t *round;
    int32_t                  n;
    int32_t                  gpu[MAX_PARTS];
    int32_t                  coll[MAX_PARTS];
    dfccl_sim_part_state_t   st[MAX_PARTS];
    int                      in_sync[MAX_PARTS];
    uint8_t                  color[MAX_PARTS];
} brute_t;

static uint64_t test_rng;

static uint32_t rnd(uint32_t n)
{
    test_rng ^= test_rng << 13;
    test_rng ^= test_rng >> 7;
    test_rng ^= test_rng << 17;
    return (uint32_t)(test_rng % n);
}

static int brute_edge(const brute_t *b, int32_t u, int32_t v)
{
    int suspended;

    if (u == v) {
        return 0;
    }
    if (b->st[u] == DFCCL_SIM_PART_EXECUTING) {
        if ((b->coll[u] != b->coll[v]) || (b->gpu[u] == b->gpu[v])) {
            return 0;
        }
        suspended = dfccl_sim_round_suspended(b->round, b->gpu[v]);
        return (b->st[v] == DFCCL_SIM_PART_INVOKED) ||
               ((b->st[v] == DFCCL_SIM_PART_UNINVOKED) && suspended);
    }
    if (b->gpu[u] != b->gpu[v]) {
        return 0;
    }
    if (b->st[u] == DFCCL_SIM_PART_INVOKED) {
        return b->st[v] == DFCCL_SIM_PART_EXECUTING;
    }
    if ((b->st[u] == DFCCL_SIM_PART_UNINVOKED) && dfccl_sim_round_suspended(b->round,
                                                                            b->gpu[u])) {
        return (b->st[v] == DFCCL_SIM_PART_EXECUTING) && b->in_sync[v];
    }
    return 0;
}

static int brute_dfs(brute_t *b, int32_t u)
{
    b->color[u] = 1;
    for (int32_t v = 0; v < b->n; v++) {
        if (!brute_edge(b, u, v)) {
            continue;
        }
        if (b->color[v] == 1) {
            return 1;
        }
        if ((b->color[v] == 0) && brute_dfs(b, v)) {
            return 1;
        }
    }
    b->color[u] = 2;
    return 0;
}

static int brute_cycle(const dfccl_sim_world_t *world, const dfccl_sim_round_t *round)
{
    brute_t b;

    memset(&b, 0, sizeof(b));
    b.world = world;
    b.round = round;
    for (int32_t c = 0; c < world->coll_num; c++) {
        int32_t k = world->coll_group[c];

        for (int32_t m = world->group_gpu_off[k]; m < world->group_gpu_off[k + 1]; m++) {
            if (b.n >= MAX_PARTS) {
                ck_abort_msg("too many parts");
            }
            b.gpu[b.n]     = world->group_gpus[m];
            b.coll[b.n]    = c;
            b.st[b.n]      = dfccl_sim_round_part_state(round, b.gpu[b.n], c);
            b.in_sync[b.n] = dfccl_sim_round_part_in_sync(round, b.gpu[b.n], c);
            b.n++;
        }
    }
    for (int32_t u = 0; u < b.n; u++) {
        if ((b.color[u] == 0) && brute_dfs(&b, u)) {
            return 1;
        }
    }
    return 0;
}

/* A random free grouping, as JSON. */
static void random_config(char *buf, size_t len, const char *model, int limit)
{
    int gpus   = 2 + (int)rnd(MAX_GPUS - 1);
    int groups = 1 + (int)rnd(MAX_GROUPS);
    size_t off = 0;
    int used[MAX_GPUS];

    off += (size_t)snprintf(buf + off, len - off,
                            "{\"model\": \"%s\", \"grouping_policy\": \"Arbitrary\", "
                            "\"resource_limit\": %d, \"gpu_num\": %d, \"group_num\": %d, "
                            "\"gpu_per_group\": [", model, limit, gpus, groups);
    for (int k = 0; k < groups; k++) {
        int size = 1 + (int)rnd((uint32_t)gpus), n = 0;

        memset(used, 0, sizeof(used));
        off += (size_t)snprintf(buf + off, len - off, "%s[", k ? ", " : "");
        while (n < size) {
            int g = (int)rnd((uint32_t)gpus);

            if (!used[g]) {
                used[g] = 1;
                off += (size_t)snprintf(buf + off, len - off, "%s%d", n ? ", " : "", g);
                n++;
            }
        }
        off += (size_t)snprintf(buf + off, len - off, "]");
    }
    off += (size_t)snprintf(buf + off, len - off, "], \"coll_cnt_per_group\": [");
    for (int k = 0; k < groups; k++) {
        off += (size_t)snprintf(buf + off, len - off, "%s%u", k ? ", " : "", 1 + rnd(4));
    }
    snprintf(buf + off, len - off, "]}");
}

/* Drive one random round; returns 1 if it deadlocked. */
static int random_round(const dfccl_sim_world_t *world, dfccl_sim_round_t *round, int sync_model,
                        const char *json)
{
    int32_t cand[MAX_GPUS], colls[64];
    int32_t ncand, ncoll, g;
    int deadlock, expect;

    dfccl_sim_round_reset(round);
    for (;;) {
        ncand = 0;
        for (g = 0; g < world->gpu_num; g++) {
            ncoll = 0;
            for (int32_t c = 0; c < world->coll_num; c++) {
                int32_t k = world->coll_group[c];

                for (int32_t m = world->group_gpu_off[k]; m < world->group_gpu_off[k + 1];
                     m++) {
                    if ((world->group_gpus[m] == g) &&
                        (dfccl_sim_round_part_state(round, g, c) == DFCCL_SIM_PART_UNINVOKED)) {
                        ncoll++;
                    }
                }
            }
            if ((ncoll > 0) && !dfccl_sim_round_suspended(round, g)) {
                cand[ncand++] = g;
            }
        }
        if (ncand == 0) {
            /* nothing can move: the round must be complete */
            if (!dfccl_sim_round_complete(round)) {
                ck_abort_msg("stall without a cycle in %s", json);
            }
            return 0;
        }
        g = cand[rnd((uint32_t)ncand)];
        /* Check's assertions talk to the parent process; only call them on failure */
        if (sync_model && (rnd(4) == 0)) {
            if (dfccl_sim_round_sync(round, g, &deadlock) != DFCCL_SIM_OK) {
                ck_abort_msg("sync on GPU %d refused in %s", g, json);
            }
        } else {
            ncoll = 0;
            for (int32_t c = 0; c < world->coll_num; c++) {
                int32_t k = world->coll_group[c];

                for (int32_t m = world->group_gpu_off[k]; m < world->group_gpu_off[k + 1];
                     m++) {
                    if ((world->group_gpus[m] == g) &&
                        (dfccl_sim_round_part_state(round, g, c) == DFCCL_SIM_PART_UNINVOKED)) {
                        colls[ncoll++] = c;
                    }
                }
            }
            if (dfccl_sim_round_invoke(round, g, colls[rnd((uint32_t)ncoll)], &deadlock) !=
                DFCCL_SIM_OK) {
                ck_abort_msg("invocation on GPU %d refused in %s", g, json);
            }
        }
        expect = brute_cycle(world, round);
        if (deadlock != expect) {
            ck_abort_msg("incremental search says %d, full graph says %d, in %s", deadlock,
                         expect, json);
        }
        if (deadlock) {
            return 1;
        }
    }
}

static void random_worlds(const char *model, int limit, int worlds, int rounds)
{
    char json[2048];
    dfccl_sim_config_t *config;
    dfccl_sim_world_t *world;
    dfccl_sim_round_t *round;
    dfccl_sim_msg_t msg;
    int deadlocks = 0, total = 0;

    for (int w = 0; w < worlds; w++) {
        random_config(json, sizeof(json), model, limit);
        if ((dfccl_sim_config_parse(json, &msg, &config) != DFCCL_SIM_OK) ||
            (dfccl_sim_world_create(config, &msg, &world) != DFCCL_SIM_OK) ||
            (dfccl_sim_round_create(world, &round) != DFCCL_SIM_OK)) {
            ck_abort_msg("cannot set up %s: %s", json, msg.text);
        }
        for (int r = 0; r < rounds; r++) {
            deadlocks += random_round(world, round, world->model == DFCCL_SIM_MODEL_SYNC,
                                      json);
            total++;
        }
        dfccl_sim_round_destroy(round);
        dfccl_sim_world_destroy(world);
        dfccl_sim_config_destroy(config);
    }
    /* both outcomes must be exercised */
    ck_assert_int_gt(deadlocks, 0);
    ck_assert_int_lt(deadlocks, total);
}

START_TEST(test_random_single)
{
    test_rng = 0x1234567ULL;
    random_worlds("Single", -1, 300, 10);
}
END_TEST

START_TEST(test_random_sync_unlimited)
{
    test_rng = 0x7654321ULL;
    random_worlds("StreamWithSync", -1, 300, 10);
}
END_TEST

START_TEST(test_random_sync_limit_one)
{
    test_rng = 0xabcdefULL;
    random_worlds("StreamWithSync", 1, 300, 10);
}
END_TEST

START_TEST(test_random_sync_limit_two)
{
    test_rng = 0xfedcbaULL;
    random_worlds("StreamWithSync", 2, 300, 10);
}
END_TEST

int main(void)
{
    TCase *tc;
    Suite *suite = sim_test_suite("sim-graph", "graph", 0, &tc);

    tcase_add_test(tc, test_random_single);
    tcase_add_test(tc, test_random_sync_unlimited);
    tcase_add_test(tc, test_random_sync_limit_one);
    tcase_add_test(tc, test_random_sync_limit_two);
    return sim_test_run(suite);
}
