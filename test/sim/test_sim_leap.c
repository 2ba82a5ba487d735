/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The leaping engine of the synchronization model without a cap (leap.c)
 * against the step engine (round.c): for the same seed, every round must end
 * the same way (deadlock or not, stalled or not) after the same number of
 * events and steps.  Checked on random small worlds, free and Megatron,
 * with probabilities from rare to most events, and on Table 1's
 * synchronization configurations, at their own probabilities and higher
 * ones.
 */
#include "sim.h"
#include "sim_test.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t test_rng = 0x2545f4914f6cdd1dULL;

static uint32_t rnd(uint32_t n)
{
    test_rng ^= test_rng << 13;
    test_rng ^= test_rng >> 7;
    test_rng ^= test_rng << 17;
    return (uint32_t)(test_rng % n);
}

/* Run rounds [0, rounds) both ways; returns the deadlocks, fails on a difference. */
static uint64_t compare(const dfccl_sim_world_t *world, uint64_t seed, uint64_t rounds,
                        const char *what)
{
    dfccl_sim_outcome_t step, leap;
    dfccl_sim_round_t *round;
    uint64_t deadlocks = 0;

    ck_assert(dfccl_sim_round_create(world, &round) == DFCCL_SIM_OK);
    for (uint64_t i = 0; i < rounds; i++) {
        dfccl_sim_round_run(round, seed, i, DFCCL_SIM_RUN_FULL | DFCCL_SIM_RUN_STEPWISE, &step);
        dfccl_sim_round_run(round, seed, i, DFCCL_SIM_RUN_FULL | DFCCL_SIM_RUN_LEAP, &leap);
        ck_assert_msg((step.deadlocked == leap.deadlocked) && (step.stalled == leap.stalled) &&
                      (step.events == leap.events) && (step.steps == leap.steps),
                      "%s, seed %llu, round %llu: stepped: deadlock %d, %llu events, %llu "
                      "steps; leapt: deadlock %d, %llu events, %llu steps", what,
                      (unsigned long long)seed, (unsigned long long)i, step.deadlocked,
                      (unsigned long long)step.events, (unsigned long long)step.steps,
                      leap.deadlocked, (unsigned long long)leap.events,
                      (unsigned long long)leap.steps);
        ck_assert_int_eq(step.stalled, 0);
        deadlocks += (uint64_t)step.deadlocked;
    }
    dfccl_sim_round_destroy(round);
    return deadlocks;
}

static const double probs[] = {0.0, 1e-3, 0.01, 0.05, 0.2, 0.5, 0.9};

/* A free grouping of 1 to 10 GPUs, some in no group, some groups of one. */
static dfccl_sim_config_t *random_free(char *what, size_t len)
{
    dfccl_sim_config_t *config = calloc(1, sizeof(*config));
    int32_t gpus, groups, size, n = 0, pick[16];

    ck_assert_ptr_nonnull(config);
    gpus                       = 1 + (int32_t)rnd(10);
    groups                     = 1 + (int32_t)rnd(6);
    config->model              = DFCCL_SIM_MODEL_SYNC;
    config->grouping           = DFCCL_SIM_GROUPING_ARBITRARY;
    config->resource_limit     = -1;
    config->gpu_num            = gpus;
    config->group_num          = groups;
    config->group_gpu_off      = calloc((size_t)groups + 1, sizeof(int32_t));
    config->group_gpus         = calloc((size_t)groups * (size_t)gpus, sizeof(int32_t));
    config->coll_cnt_per_group = calloc((size_t)groups, sizeof(int64_t));
    for (int32_t k = 0; k < groups; k++) {
        /* a random subset, in random order */
        for (int32_t g = 0; g < gpus; g++) {
            pick[g] = g;
        }
        for (int32_t g = gpus - 1; g > 0; g--) {
            int32_t j = (int32_t)rnd((uint32_t)g + 1), t = pick[g];

            pick[g] = pick[j];
            pick[j] = t;
        }
        size                          = 1 + (int32_t)rnd((uint32_t)gpus);
        config->group_gpu_off[k]      = n;
        config->coll_cnt_per_group[k] = (rnd(8) == 0) ? 0 : 1 + rnd(40);
        for (int32_t m = 0; m < size; m++) {
            config->group_gpus[n++] = pick[m];
        }
    }
    config->group_gpu_off[groups] = n;
    config->disorder_prob         = probs[rnd(sizeof(probs) / sizeof(probs[0]))];
    config->sync_prob             = probs[rnd(sizeof(probs) / sizeof(probs[0]))];
    snprintf(what, len, "free grouping of %d GPUs, %d groups, disorder %g, sync %g", gpus,
             groups, config->disorder_prob, config->sync_prob);
    return config;
}

static dfccl_sim_config_t *random_megatron(char *what, size_t len)
{
    dfccl_sim_config_t *config = calloc(1, sizeof(*config));

    ck_assert_ptr_nonnull(config);
    config->model                 = DFCCL_SIM_MODEL_SYNC;
    config->grouping              = DFCCL_SIM_GROUPING_MEGATRON;
    config->resource_limit        = -1;
    config->tp_group_size         = 1 + (int32_t)rnd(4);
    config->dp_group_size         = 1 + (int32_t)rnd(4);
    config->pp_group_size         = 1 + (int32_t)rnd(3);
    config->coll_cnt_per_tp_group = rnd(30);
    config->coll_cnt_per_dp_group = rnd(60);
    config->disorder_prob         = probs[rnd(sizeof(probs) / sizeof(probs[0]))];
    config->sync_prob             = probs[rnd(sizeof(probs) / sizeof(probs[0]))];
    snprintf(what, len, "Megatron (%d, %d, %d), disorder %g, sync %g", config->tp_group_size,
             config->dp_group_size, config->pp_group_size, config->disorder_prob,
             config->sync_prob);
    return config;
}

START_TEST(test_random_worlds)
{
    uint64_t deadlocks = 0;
    char what[160];

    for (int i = 0; i < 1500; i++) {
        dfccl_sim_config_t *config = (i % 3 == 2) ? random_megatron(what, sizeof(what)) :
                                                    random_free(what, sizeof(what));
        dfccl_sim_world_t *world   = sim_test_world(config);

        deadlocks += compare(world, 1000 + (uint64_t)i, 12, what);
        dfccl_sim_world_destroy(world);
        dfccl_sim_config_destroy(config);
    }
    /* the comparison covered rounds that deadlock */
    ck_assert_uint_gt(deadlocks, 1000);
}
END_TEST

/* Table 1's synchronization rows, at their probabilities and at higher ones. */
START_TEST(test_table1_sync_configs)
{
    static const double raised[][2] = {{0, 0}, {4e-3, 4e-3}, {2e-2, 1e-2}, {1e-3, 5e-2}};
    char *names[64], what[512];
    dfccl_sim_config_t *config;
    dfccl_sim_world_t *world;
    uint64_t rounds;
    size_t n = sim_test_config_names("table1-sync-", names, 64);

    ck_assert_uint_eq(n, 10);
    for (size_t i = 0; i < n; i++) {
        config = sim_test_config_load(names[i]);
        for (size_t r = 0; r < sizeof(raised) / sizeof(raised[0]); r++) {
            if (r > 0) {
                config->disorder_prob = raised[r][0];
                config->sync_prob     = raised[r][1];
            }
            world  = sim_test_world(config);
            rounds = (world->real_parts > 1000000) ? 2 : 6;
            snprintf(what, sizeof(what), "%s, disorder %g, sync %g", names[i],
                     config->disorder_prob, config->sync_prob);
            compare(world, 2025 + r, rounds, what);
            dfccl_sim_world_destroy(world);
        }
        dfccl_sim_config_destroy(config);
        free(names[i]);
    }
}
END_TEST

/* The runner's default picks an engine; the counts are those of stepping. */
START_TEST(test_run_default_matches_stepwise)
{
    static const char *json =
            "{\"model\": \"StreamWithSync\", \"grouping_policy\": \"Megatron\", "
            "\"disorder_prob\": 0.005, \"sync_prob\": 0.005, "
            "\"tp_group_size\": 4, \"dp_group_size\": 4, \"pp_group_size\": 4, "
            "\"coll_cnt_per_tp_group\": 400, \"coll_cnt_per_dp_group\": 1200}";
    dfccl_sim_run_params_t params = {0};
    dfccl_sim_run_result_t base, step;
    dfccl_sim_config_t *config;
    dfccl_sim_world_t *world;
    dfccl_sim_msg_t msg;

    ck_assert(dfccl_sim_config_parse(json, &msg, &config) == DFCCL_SIM_OK);
    world          = sim_test_world(config);
    params.rounds  = 400;
    params.seed    = 99;
    params.threads = 2;
    ck_assert(dfccl_sim_run(world, &params, &base) == DFCCL_SIM_OK);
    params.flags = DFCCL_SIM_RUN_STEPWISE;
    ck_assert(dfccl_sim_run(world, &params, &step) == DFCCL_SIM_OK);
    ck_assert_uint_gt(base.deadlocks, 0);
    ck_assert_uint_eq(base.deadlocks, step.deadlocks);
    ck_assert_uint_eq(base.stepped, step.stepped);
    ck_assert_uint_eq(base.events, step.events);
    ck_assert_uint_eq(base.stalled, 0);
    dfccl_sim_world_destroy(world);
    dfccl_sim_config_destroy(config);
}
END_TEST

int main(void)
{
    TCase *tc;
    Suite *suite = sim_test_suite("sim-leap", "leap", 0, &tc);

    tcase_add_test(tc, test_random_worlds);
    tcase_add_test(tc, test_table1_sync_configs);
    tcase_add_test(tc, test_run_default_matches_stepwise);
    return sim_test_run(suite);
}
