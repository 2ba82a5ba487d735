/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Hand-built scenarios for dfccl-sim: the basic deadlock situations of the
 * paper (Fig. 1(c), Fig. 1(d), the cycle of Fig. 2) must be found at the
 * event that closes the cycle and not before, and situations that look close
 * to a deadlock but are not (same order, no synchronization, a
 * synchronization on one side only, unlimited or sufficient resources) must
 * run to completion.
 */
#include "sim.h"
#include "sim_test.h"

#include <check.h>
#include <stdlib.h>

/*
 * Collective ids follow the global order, one collective of each group in
 * turn; in the worlds below that gives A, B, C, ... = 0, 1, 2, ...
 * (test_ids checks it).
 */
enum { A = 0, B = 1, C = 2, D = 3, E = 4 };

typedef struct scenario {
    dfccl_sim_world_t *world;
    dfccl_sim_round_t *round;
} scenario_t;

static void scenario_open(scenario_t *s, const char *json)
{
    dfccl_sim_config_t *config;
    dfccl_sim_msg_t msg = {{0}};

    ck_assert_msg(dfccl_sim_config_parse(json, &msg, &config) == DFCCL_SIM_OK, "%s", msg.text);
    ck_assert_msg(dfccl_sim_world_create(config, &msg, &s->world) == DFCCL_SIM_OK, "%s",
                  msg.text);
    dfccl_sim_config_destroy(config);
    ck_assert(dfccl_sim_round_create(s->world, &s->round) == DFCCL_SIM_OK);
    dfccl_sim_round_reset(s->round);
}

static void scenario_close(scenario_t *s)
{
    dfccl_sim_round_destroy(s->round);
    dfccl_sim_world_destroy(s->world);
}

/* Invoke and return whether the graph now has a cycle. */
static int inv(scenario_t *s, int32_t gpu, int32_t coll)
{
    int deadlock = -1;

    ck_assert_int_eq(dfccl_sim_round_invoke(s->round, gpu, coll, &deadlock), DFCCL_SIM_OK);
    return deadlock;
}

static int syn(scenario_t *s, int32_t gpu)
{
    int deadlock = -1;

    ck_assert_int_eq(dfccl_sim_round_sync(s->round, gpu, &deadlock), DFCCL_SIM_OK);
    return deadlock;
}

/* Two GPUs, one group, collectives A and B. */
#define TWO_GPUS(model, extra)                                                     \
    "{\"model\": \"" model "\", \"grouping_policy\": \"Arbitrary\", "             \
    "\"gpu_num\": 2, \"group_num\": 1, \"gpu_per_group\": [[0, 1]], "              \
    "\"coll_cnt_per_group\": [2]" extra "}"

/* Fig. 1(c): single queue, opposite order. */
START_TEST(test_fig1c_single_queue_opposite_order)
{
    scenario_t s;

    scenario_open(&s, TWO_GPUS("Single", ""));
    ck_assert(!inv(&s, 0, A));
    ck_assert(!inv(&s, 1, B));
    ck_assert(!inv(&s, 0, B));  /* B waits behind A on GPU 0 */
    ck_assert_int_eq(dfccl_sim_round_part_state(s.round, 0, A), DFCCL_SIM_PART_EXECUTING);
    ck_assert_int_eq(dfccl_sim_round_part_state(s.round, 0, B), DFCCL_SIM_PART_INVOKED);
    ck_assert(inv(&s, 1, A));   /* A waits behind B on GPU 1: A0 -> A1 -> B1 -> B0 -> A0 */
    ck_assert(!dfccl_sim_round_complete(s.round));
    scenario_close(&s);
}
END_TEST

START_TEST(test_single_queue_same_order)
{
    scenario_t s;

    scenario_open(&s, TWO_GPUS("Single", ""));
    ck_assert(!inv(&s, 0, A));
    ck_assert(!inv(&s, 0, B));
    ck_assert(!inv(&s, 1, A));
    ck_assert_int_eq(dfccl_sim_round_part_state(s.round, 0, A), DFCCL_SIM_PART_DONE);
    ck_assert_int_eq(dfccl_sim_round_part_state(s.round, 0, B), DFCCL_SIM_PART_EXECUTING);
    ck_assert(!inv(&s, 1, B));
    ck_assert(dfccl_sim_round_complete(s.round));
    scenario_close(&s);
}
END_TEST

/* Fig. 1(b): opposite order on streams with enough resources. */
START_TEST(test_fig1b_streams_opposite_order_no_sync)
{
    scenario_t s;

    scenario_open(&s, TWO_GPUS("StreamWithSync", ""));
    ck_assert(!inv(&s, 0, A));
    ck_assert(!inv(&s, 1, B));
    ck_assert(!inv(&s, 0, B));
    ck_assert(!inv(&s, 1, A));
    ck_assert(dfccl_sim_round_complete(s.round));
    scenario_close(&s);
}
END_TEST

/* Fig. 1(c) resource depletion: one resource unit per GPU. */
START_TEST(test_resource_depletion)
{
    scenario_t s;

    scenario_open(&s, TWO_GPUS("StreamWithSync", ", \"resource_limit\": 1"));
    ck_assert(!inv(&s, 0, A));
    ck_assert(!inv(&s, 1, B));
    ck_assert(!inv(&s, 0, B));
    ck_assert(inv(&s, 1, A));
    scenario_close(&s);

    /* two units are enough */
    scenario_open(&s, TWO_GPUS("StreamWithSync", ", \"resource_limit\": 2"));
    ck_assert(!inv(&s, 0, A));
    ck_assert(!inv(&s, 1, B));
    ck_assert(!inv(&s, 0, B));
    ck_assert(!inv(&s, 1, A));
    ck_assert(dfccl_sim_round_complete(s.round));
    scenario_close(&s);
}
END_TEST

/* Fig. 1(d): opposite order with a synchronization after the first one. */
START_TEST(test_fig1d_sync_opposite_order)
{
    scenario_t s;
    int deadlock;

    scenario_open(&s, TWO_GPUS("StreamWithSync", ""));
    ck_assert(!inv(&s, 0, A));
    ck_assert(!inv(&s, 1, B));
    ck_assert(!syn(&s, 0));
    ck_assert(dfccl_sim_round_suspended(s.round, 0));
    /* a suspended GPU issues nothing */
    ck_assert_int_eq(dfccl_sim_round_invoke(s.round, 0, B, &deadlock), DFCCL_SIM_ERR_BAD_EVENT);
    ck_assert(syn(&s, 1));
    scenario_close(&s);

    /* the same with the events of the two GPUs interleaved differently */
    scenario_open(&s, TWO_GPUS("StreamWithSync", ""));
    ck_assert(!inv(&s, 0, A));
    ck_assert(!syn(&s, 0));
    ck_assert(!inv(&s, 1, B));
    ck_assert(syn(&s, 1));
    scenario_close(&s);
}
END_TEST

START_TEST(test_sync_one_side_only)
{
    scenario_t s;

    scenario_open(&s, TWO_GPUS("StreamWithSync", ""));
    ck_assert(!inv(&s, 0, A));
    ck_assert(!inv(&s, 1, B));
    ck_assert(!syn(&s, 0));
    ck_assert(dfccl_sim_round_suspended(s.round, 0));
    ck_assert(!inv(&s, 1, A));  /* A succeeds, so GPU 0's suspension ends */
    ck_assert_int_eq(dfccl_sim_round_part_state(s.round, 1, A), DFCCL_SIM_PART_DONE);
    ck_assert(!dfccl_sim_round_suspended(s.round, 0));
    ck_assert(!inv(&s, 0, B));
    ck_assert(dfccl_sim_round_complete(s.round));
    scenario_close(&s);
}
END_TEST

START_TEST(test_sync_same_order)
{
    scenario_t s;

    scenario_open(&s, TWO_GPUS("StreamWithSync", ""));
    ck_assert(!inv(&s, 0, A));
    ck_assert(!syn(&s, 0));
    ck_assert(dfccl_sim_round_suspended(s.round, 0));
    ck_assert(!inv(&s, 1, A));  /* A succeeds: GPU 0 resumes */
    ck_assert(!dfccl_sim_round_suspended(s.round, 0));
    ck_assert(!syn(&s, 1));     /* nothing executes on GPU 1: no suspension */
    ck_assert(!dfccl_sim_round_suspended(s.round, 1));
    ck_assert(!inv(&s, 1, B));
    ck_assert(!inv(&s, 0, B));
    ck_assert(dfccl_sim_round_complete(s.round));
    scenario_close(&s);
}
END_TEST

/*
 * Fig. 2: GPU 0 executes A, B and C and then synchronizes, so D waits on it;
 * GPUs 1, 2 and 3 each execute one collective and synchronize before the one
 * the previous GPU needs.  A = {0, 1}, B = {0, 1, 2}, C = {0, 2, 3} and
 * D, E = {0, 1, 2, 3}.  The cycle A0 -> A1 -> B1 -> B2 -> C2 -> C3 -> D3 -> D0
 * -> A0 closes with GPU 3's synchronization.
 */
#define FIG2                                                                      \
    "{\"model\": \"StreamWithSync\", \"grouping_policy\": \"Arbitrary\", "        \
    "\"gpu_num\": 4, \"group_num\": 4, "                                          \
    "\"gpu_per_group\": [[0, 1], [0, 1, 2], [0, 2, 3], [0, 1, 2, 3]], "           \
    "\"coll_cnt_per_group\": [1, 1, 1, 2]}"

START_TEST(test_fig2_cycle)
{
    scenario_t s;

    scenario_open(&s, FIG2);
    ck_assert(!inv(&s, 0, A));
    ck_assert(!inv(&s, 0, B));
    ck_assert(!inv(&s, 0, C));
    ck_assert(!syn(&s, 0));
    ck_assert(!inv(&s, 1, B));
    ck_assert(!syn(&s, 1));
    ck_assert(!inv(&s, 2, C));
    ck_assert(!syn(&s, 2));
    ck_assert(!inv(&s, 3, D));
    ck_assert(syn(&s, 3));
    ck_assert(dfccl_sim_round_cycle_anywhere(s.round));
    scenario_close(&s);
}
END_TEST

/* The same start, but GPU 3 invokes C instead of synchronizing: all unwinds. */
START_TEST(test_fig2_broken_chain)
{
    scenario_t s;

    scenario_open(&s, FIG2);
    ck_assert(!inv(&s, 0, A));
    ck_assert(!inv(&s, 0, B));
    ck_assert(!inv(&s, 0, C));
    ck_assert(!syn(&s, 0));
    ck_assert(!inv(&s, 1, B));
    ck_assert(!syn(&s, 1));
    ck_assert(!inv(&s, 2, C));
    ck_assert(!syn(&s, 2));
    ck_assert(!inv(&s, 3, D));
    ck_assert(!inv(&s, 3, C));  /* C succeeds: GPU 2 resumes */
    ck_assert(!dfccl_sim_round_suspended(s.round, 2));
    ck_assert(!dfccl_sim_round_cycle_anywhere(s.round));
    ck_assert(!inv(&s, 2, B));  /* B succeeds: GPU 1 resumes */
    ck_assert(!dfccl_sim_round_suspended(s.round, 1));
    ck_assert(dfccl_sim_round_suspended(s.round, 0));
    ck_assert(!inv(&s, 1, A));  /* A succeeds: GPU 0 resumes */
    ck_assert(!dfccl_sim_round_suspended(s.round, 0));
    ck_assert(!inv(&s, 0, D));
    ck_assert(!inv(&s, 1, D));
    ck_assert(!inv(&s, 2, D));
    for (int32_t g = 0; g < 4; g++) {
        ck_assert(!inv(&s, g, E));
    }
    ck_assert(dfccl_sim_round_complete(s.round));
    scenario_close(&s);
}
END_TEST

/* Three GPUs in a ring of pairwise groups, single queue. */
#define RING3                                                                     \
    "{\"model\": \"Single\", \"grouping_policy\": \"Arbitrary\", "                \
    "\"gpu_num\": 3, \"group_num\": 3, "                                          \
    "\"gpu_per_group\": [[0, 1], [1, 2], [2, 0]], "                               \
    "\"coll_cnt_per_group\": [1, 1, 1]}"

START_TEST(test_single_queue_ring_of_three)
{
    scenario_t s;

    scenario_open(&s, RING3);
    ck_assert(!inv(&s, 0, C));
    ck_assert(!inv(&s, 1, A));
    ck_assert(!inv(&s, 2, B));
    ck_assert(!inv(&s, 0, A));
    ck_assert(!inv(&s, 1, B));
    ck_assert(inv(&s, 2, C));
    scenario_close(&s);

    /* GPU 2 takes C first: no ring */
    scenario_open(&s, RING3);
    ck_assert(!inv(&s, 0, C));
    ck_assert(!inv(&s, 1, A));
    ck_assert(!inv(&s, 2, C));
    ck_assert(!inv(&s, 0, A));
    ck_assert(!inv(&s, 2, B));
    ck_assert(!inv(&s, 1, B));
    ck_assert(dfccl_sim_round_complete(s.round));
    scenario_close(&s);
}
END_TEST

/*
 * A cycle closed when a waiting part starts because another collective
 * succeeds.  P = {0, 2}; Q and R = {0, 1}.  GPU 0 queues P, Q, R; GPU 1 queues
 * R, Q.  When GPU 2 invokes P, P succeeds and Q starts on GPU 0:
 * Q0 -> Q1 (waits behind R1) -> R1 -> R0 (waits behind Q0) -> Q0.
 */
START_TEST(test_single_queue_cycle_closed_by_completion)
{
    scenario_t s;
    const int32_t p = 0, q = 1, r = 2;

    scenario_open(&s, "{\"model\": \"Single\", \"grouping_policy\": \"Arbitrary\", "
                      "\"gpu_num\": 3, \"group_num\": 2, "
                      "\"gpu_per_group\": [[0, 2], [0, 1]], "
                      "\"coll_cnt_per_group\": [1, 2]}");
    ck_assert(!inv(&s, 0, p));
    ck_assert(!inv(&s, 0, q));
    ck_assert(!inv(&s, 0, r));
    ck_assert(!inv(&s, 1, r));
    ck_assert(!inv(&s, 1, q));
    ck_assert(!dfccl_sim_round_cycle_anywhere(s.round));
    ck_assert(inv(&s, 2, p));
    ck_assert_int_eq(dfccl_sim_round_part_state(s.round, 0, q), DFCCL_SIM_PART_EXECUTING);
    scenario_close(&s);
}
END_TEST

START_TEST(test_ids)
{
    scenario_t s;

    scenario_open(&s, TWO_GPUS("Single", ""));
    ck_assert_int_eq(dfccl_sim_world_coll_id(s.world, 0, 0), A);
    ck_assert_int_eq(dfccl_sim_world_coll_id(s.world, 0, 1), B);
    scenario_close(&s);
    scenario_open(&s, FIG2);
    ck_assert_int_eq(dfccl_sim_world_coll_id(s.world, 0, 0), A);
    ck_assert_int_eq(dfccl_sim_world_coll_id(s.world, 1, 0), B);
    ck_assert_int_eq(dfccl_sim_world_coll_id(s.world, 2, 0), C);
    ck_assert_int_eq(dfccl_sim_world_coll_id(s.world, 3, 0), D);
    ck_assert_int_eq(dfccl_sim_world_coll_id(s.world, 3, 1), E);
    ck_assert_int_eq(dfccl_sim_world_coll_id(s.world, 3, 2), -1);
    scenario_close(&s);
    scenario_open(&s, RING3);
    ck_assert_int_eq(dfccl_sim_world_coll_id(s.world, 2, 0), C);
    scenario_close(&s);
}
END_TEST

START_TEST(test_bad_events)
{
    scenario_t s;
    int deadlock;

    scenario_open(&s, RING3);
    /* the single-queue model has no synchronization */
    ck_assert_int_eq(dfccl_sim_round_sync(s.round, 0, &deadlock), DFCCL_SIM_ERR_BAD_EVENT);
    /* GPU 0 is not in group {1, 2} */
    ck_assert_int_eq(dfccl_sim_round_invoke(s.round, 0, B, &deadlock), DFCCL_SIM_ERR_BAD_EVENT);
    ck_assert_int_eq(dfccl_sim_round_invoke(s.round, 5, A, &deadlock), DFCCL_SIM_ERR_BAD_EVENT);
    ck_assert_int_eq(dfccl_sim_round_invoke(s.round, 0, 99, &deadlock),
                     DFCCL_SIM_ERR_BAD_EVENT);
    ck_assert(!inv(&s, 0, A));
    ck_assert_int_eq(dfccl_sim_round_invoke(s.round, 0, A, &deadlock), DFCCL_SIM_ERR_BAD_EVENT);
    ck_assert(!inv(&s, 0, C));
    /* GPU 0 is finished */
    ck_assert_int_eq(dfccl_sim_round_invoke(s.round, 0, C, &deadlock), DFCCL_SIM_ERR_BAD_EVENT);
    scenario_close(&s);

    scenario_open(&s, TWO_GPUS("StreamWithSync", ""));
    ck_assert(!inv(&s, 0, A));
    ck_assert(!inv(&s, 0, B));
    /* GPU 0 is finished: it issues no synchronization either */
    ck_assert_int_eq(dfccl_sim_round_sync(s.round, 0, &deadlock), DFCCL_SIM_ERR_BAD_EVENT);
    scenario_close(&s);
}
END_TEST

int main(void)
{
    TCase *tc;
    Suite *suite = sim_test_suite("sim-scenario", "scenario", 0, &tc);

    tcase_add_test(tc, test_fig1c_single_queue_opposite_order);
    tcase_add_test(tc, test_single_queue_same_order);
    tcase_add_test(tc, test_fig1b_streams_opposite_order_no_sync);
    tcase_add_test(tc, test_resource_depletion);
    tcase_add_test(tc, test_fig1d_sync_opposite_order);
    tcase_add_test(tc, test_sync_one_side_only);
    tcase_add_test(tc, test_sync_same_order);
    tcase_add_test(tc, test_fig2_cycle);
    tcase_add_test(tc, test_fig2_broken_chain);
    tcase_add_test(tc, test_single_queue_ring_of_three);
    tcase_add_test(tc, test_single_queue_cycle_closed_by_completion);
    tcase_add_test(tc, test_ids);
    tcase_add_test(tc, test_bad_events);
    return sim_test_run(suite);
}
