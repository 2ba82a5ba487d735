/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Whole-run properties of dfccl-sim:
 *   - with disorder_prob = 0 the intended order is consistent across GPUs and
 *     no round deadlocks, in either model, on small Megatron and free
 *     groupings and on every Table 1 configuration of tools/sim/configs
 *     (stepped in full, with few rounds);
 *   - the same seed gives the same count with one thread or two;
 *   - counting rounds that drew no disorder skip as successful without
 *     stepping them gives the same count as stepping them.
 */
#include "sim.h"
#include "sim_test.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SMALL_MEGATRON(model, disorder, sync)                                      \
    "{\"model\": \"" model "\", \"grouping_policy\": \"Megatron\", "              \
    "\"disorder_prob\": " disorder ", \"sync_prob\": " sync ", "                  \
    "\"tp_group_size\": 2, \"dp_group_size\": 3, \"pp_group_size\": 2, "          \
    "\"coll_cnt_per_tp_group\": 20, \"coll_cnt_per_dp_group\": 60}"

#define SMALL_FREE(model, disorder, sync)                                          \
    "{\"model\": \"" model "\", \"grouping_policy\": \"Arbitrary\", "             \
    "\"disorder_prob\": " disorder ", \"sync_prob\": " sync ", "                  \
    "\"gpu_num\": 8, \"group_num\": 5, "                                          \
    "\"gpu_per_group\": [[0, 1, 5], [1, 3, 6], [0, 2, 7], [0, 4, 1], "            \
    "[4, 2, 3, 5, 6, 7]], \"coll_cnt_per_group\": [20, 60, 20, 60, 20]}"

static dfccl_sim_world_t *world_from_json(const char *json)
{
    dfccl_sim_config_t *config;
    dfccl_sim_world_t *world;
    dfccl_sim_msg_t msg = {{0}};

    ck_assert_msg(dfccl_sim_config_parse(json, &msg, &config) == DFCCL_SIM_OK, "%s", msg.text);
    world = sim_test_world(config);
    dfccl_sim_config_destroy(config);
    return world;
}

static dfccl_sim_run_result_t run(const dfccl_sim_world_t *world, uint64_t rounds,
                                  uint64_t seed, int threads, unsigned flags)
{
    dfccl_sim_run_params_t params = {0};
    dfccl_sim_run_result_t result = {0};

    params.rounds  = rounds;
    params.seed    = seed;
    params.threads = threads;
    params.flags   = flags;
    ck_assert(dfccl_sim_run(world, &params, &result) == DFCCL_SIM_OK);
    ck_assert_int_eq(result.stalled, 0);
    return result;
}

static void check_no_deadlock(const char *json, uint64_t rounds)
{
    dfccl_sim_world_t *world = world_from_json(json);
    dfccl_sim_run_result_t result;

    result = run(world, rounds, 7, 2, DFCCL_SIM_RUN_FULL);
    ck_assert_uint_eq(result.stepped, rounds);
    ck_assert_msg(result.deadlocks == 0, "%llu deadlocks with disorder_prob 0 in %s",
                  (unsigned long long)result.deadlocks, json);
    dfccl_sim_world_destroy(world);
}

START_TEST(test_no_disorder_small)
{
    check_no_deadlock(SMALL_MEGATRON("Single", "0", "0"), 50);
    check_no_deadlock(SMALL_MEGATRON("StreamWithSync", "0", "0.2"), 50);
    check_no_deadlock(SMALL_FREE("Single", "0", "0"), 50);
    check_no_deadlock(SMALL_FREE("StreamWithSync", "0", "0.2"), 50);
    check_no_deadlock(SMALL_FREE("StreamWithSync", "0", "0.9"), 50);
}
END_TEST

/* Disorder does make these small worlds deadlock (the test above is not empty). */
START_TEST(test_disorder_deadlocks_small)
{
    const char *jsons[] = {
        SMALL_MEGATRON("Single", "0.05", "0"),
        SMALL_MEGATRON("StreamWithSync", "0.05", "0.2"),
        SMALL_FREE("Single", "0.05", "0"),
        SMALL_FREE("StreamWithSync", "0.05", "0.2"),
    };

    for (size_t i = 0; i < sizeof(jsons) / sizeof(jsons[0]); i++) {
        dfccl_sim_world_t *world      = world_from_json(jsons[i]);
        dfccl_sim_run_result_t result = run(world, 50, 7, 2, DFCCL_SIM_RUN_FULL);

        ck_assert_msg(result.deadlocks > 0, "no deadlock in %s", jsons[i]);
        dfccl_sim_world_destroy(world);
    }
}
END_TEST

/* Every Table 1 configuration, with disorder_prob forced to 0. */
START_TEST(test_no_disorder_table1_configs)
{
    char *names[256];
    dfccl_sim_config_t *config;
    dfccl_sim_world_t *world;
    dfccl_sim_run_result_t result;
    size_t n = sim_test_config_names("", names, 256);
    uint64_t rounds;

    ck_assert_msg(n == 18, "%zu configurations shipped, expected Table 1's 18", n);
    for (size_t i = 0; i < n; i++) {
        config                = sim_test_config_load(names[i]);
        config->disorder_prob = 0.0;
        world  = sim_test_world(config);
        rounds = (world->real_parts > 1000000) ? 1 : 4;
        result = run(world, rounds, 11, 2, DFCCL_SIM_RUN_FULL);
        ck_assert_msg(result.deadlocks == 0, "%s deadlocks with disorder_prob 0", names[i]);
        ck_assert_uint_eq(result.stepped, rounds);
        ck_assert_uint_ge(result.events, rounds * (uint64_t)world->real_parts);
        dfccl_sim_world_destroy(world);
        dfccl_sim_config_destroy(config);
        free(names[i]);
    }
}
END_TEST

START_TEST(test_same_seed_any_threads)
{
    const char *jsons[] = {
        SMALL_FREE("Single", "0.01", "0"),
        SMALL_MEGATRON("StreamWithSync", "0.02", "0.05"),
    };

    for (size_t i = 0; i < sizeof(jsons) / sizeof(jsons[0]); i++) {
        dfccl_sim_world_t *world   = world_from_json(jsons[i]);
        dfccl_sim_run_result_t one = run(world, 400, 42, 1, 0);
        dfccl_sim_run_result_t two = run(world, 400, 42, 2, 0);
        dfccl_sim_run_result_t other = run(world, 400, 43, 2, 0);

        ck_assert_msg((one.deadlocks > 0) && (one.deadlocks < 400), "%llu of 400 in %s",
                      (unsigned long long)one.deadlocks, jsons[i]);
        ck_assert_uint_eq(one.deadlocks, two.deadlocks);
        ck_assert_uint_eq(one.events, two.events);
        /* another seed gives another run */
        ck_assert(other.events != one.events);
        dfccl_sim_world_destroy(world);
    }
}
END_TEST

START_TEST(test_unstepped_rounds_match_stepped)
{
    const char *jsons[] = {
        SMALL_FREE("Single", "0.002", "0"),
        SMALL_MEGATRON("StreamWithSync", "0.002", "0.1"),
    };

    for (size_t i = 0; i < sizeof(jsons) / sizeof(jsons[0]); i++) {
        dfccl_sim_world_t *world    = world_from_json(jsons[i]);
        dfccl_sim_run_result_t fast = run(world, 600, 5, 2, 0);
        dfccl_sim_run_result_t full = run(world, 600, 5, 2, DFCCL_SIM_RUN_FULL);

        ck_assert_uint_eq(fast.deadlocks, full.deadlocks);
        ck_assert_uint_gt(fast.deadlocks, 0);
        ck_assert_uint_lt(fast.stepped, 600);
        ck_assert_uint_gt(fast.stepped, 0);
        ck_assert_uint_eq(full.stepped, 600);
        dfccl_sim_world_destroy(world);
    }
}
END_TEST

/* The layout and the global round-robin order, checked on a Megatron world. */
START_TEST(test_megatron_layout)
{
    dfccl_sim_world_t *world = world_from_json(SMALL_MEGATRON("Single", "0", "0"));
    int32_t g, pos, c, prev;

    ck_assert_int_eq(world->gpu_num, 12);
    ck_assert_int_eq(world->group_num, 10);
    ck_assert_int_eq(world->coll_num, 2 * (3 * 20 + 2 * 60));
    /* stage 0: TP groups {0,1} {2,3} {4,5}, then DP groups {0,2,4} {1,3,5} */
    ck_assert_int_eq(world->group_gpus[world->group_gpu_off[1]], 2);
    ck_assert_int_eq(world->group_gpus[world->group_gpu_off[3] + 2], 4);
    ck_assert_int_eq(world->group_gpus[world->group_gpu_off[4] + 1], 3);
    ck_assert_int_eq(world->group_gpus[world->group_gpu_off[5]], 6);
    /* the global order: one collective of each group in turn */
    for (c = 0; c < 10; c++) {
        ck_assert_int_eq(world->coll_group[c], c);
        ck_assert_int_eq(world->coll_index[c], 0);
    }
    ck_assert_int_eq(dfccl_sim_world_coll_id(world, 3, 1), 13);
    for (g = 0; g < world->gpu_num; g++) {
        ck_assert_int_eq(world->gpu_len[g], 80);
        /* a GPU's list is its collectives by rising id */
        prev = -1;
        for (pos = 0; pos < world->gpu_len[g]; pos++) {
            c = world->part_coll[dfccl_sim_world_part(world, g, pos)];
            ck_assert_int_gt(c, prev);
            prev = c;
        }
    }
    /* GPU 0 (TP group 0, DP group 3): TP and DP alternate, then DP only */
    for (pos = 0; pos < 80; pos++) {
        c = world->part_coll[dfccl_sim_world_part(world, 0, pos)];
        ck_assert_int_eq(world->coll_group[c], ((pos < 40) && (pos % 2 == 0)) ? 0 : 3);
        ck_assert_int_eq(world->coll_index[c], (pos < 40) ? pos / 2 : pos - 20);
    }
    /* every member entry points back at its collective */
    for (c = 0; c < world->coll_num; c++) {
        for (int32_t m = world->coll_part0[c]; m < world->coll_part0[c + 1]; m++) {
            ck_assert_int_eq(world->part_coll[world->coll_members[m].part], c);
            ck_assert_int_eq(world->coll_members[m].part % world->gpu_num,
                             world->coll_members[m].gpu);
        }
    }
    dfccl_sim_world_destroy(world);
}
END_TEST

int main(void)
{
    TCase *tc;
    Suite *suite = sim_test_suite("sim-order", "order", 0, &tc);

    tcase_add_test(tc, test_no_disorder_small);
    tcase_add_test(tc, test_disorder_deadlocks_small);
    tcase_add_test(tc, test_no_disorder_table1_configs);
    tcase_add_test(tc, test_same_seed_any_threads);
    tcase_add_test(tc, test_unstepped_rounds_match_stepped);
    tcase_add_test(tc, test_megatron_layout);
    return sim_test_run(suite);
}
