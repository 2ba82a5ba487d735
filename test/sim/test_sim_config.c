/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Configuration input of dfccl-sim: good files parse (unknown keys ignored),
 * and each kind of bad input is refused with a message that names the key,
 * or the line and column of bad JSON or of text after the closing brace,
 * never with a crash.
 */
#include "sim.h"
#include "sim_test.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FREE_HEAD                                                                 \
    "\"model\": \"Single\", \"grouping_policy\": \"Arbitrary\", "

#define MEGA_HEAD                                                                 \
    "\"model\": \"StreamWithSync\", \"grouping_policy\": \"Megatron\", "

#define MEGA_SIZES                                                                \
    "\"tp_group_size\": 2, \"dp_group_size\": 2, \"pp_group_size\": 1, "          \
    "\"coll_cnt_per_tp_group\": 3, \"coll_cnt_per_dp_group\": 4"

typedef struct bad_case {
    const char        *json;
    dfccl_sim_status_t status;
    const char        *expect;  /* a piece of the message */
} bad_case_t;

static const bad_case_t bad_cases[] = {
    {"", DFCCL_SIM_ERR_PARSE, "not valid JSON"},
    {"{\"model\": ", DFCCL_SIM_ERR_PARSE, "not valid JSON"},
    {"{\"model\" \"Single\"}", DFCCL_SIM_ERR_PARSE, "not valid JSON"},
    {"{\"model\":\n \"Single\",, }", DFCCL_SIM_ERR_PARSE, "line 2, column 11"},
    {"{" MEGA_HEAD MEGA_SIZES "}}", DFCCL_SIM_ERR_PARSE, "text after the closing brace"},
    {"{" MEGA_HEAD MEGA_SIZES "}\n\n  {\"model\": \"Single\"}\n", DFCCL_SIM_ERR_PARSE,
     "line 3, column 3: text after the closing brace of the configuration "
     "(\"{\"model\": \"Single\"}\")"},
    {"{" MEGA_HEAD MEGA_SIZES "} x", DFCCL_SIM_ERR_PARSE, "(\"x\")"},
    {"{" MEGA_HEAD MEGA_SIZES "}\n// the end\n", DFCCL_SIM_ERR_PARSE, "line 2, column 1"},
    {"{" MEGA_HEAD MEGA_SIZES ", /* c */ \"fix_seed\": 1}", DFCCL_SIM_ERR_PARSE,
     "not valid JSON"},
    {"[1, 2]", DFCCL_SIM_ERR_PARSE, "JSON object"},
    {"null", DFCCL_SIM_ERR_PARSE, "JSON object"},
    {"{\"grouping_policy\": \"Megatron\", " MEGA_SIZES "}", DFCCL_SIM_ERR_INVALID_PARAM,
     "'model'"},
    {"{\"model\": \"Multi\", \"grouping_policy\": \"Megatron\", " MEGA_SIZES "}",
     DFCCL_SIM_ERR_INVALID_PARAM, "'model'"},
    {"{\"model\": 3, \"grouping_policy\": \"Megatron\", " MEGA_SIZES "}",
     DFCCL_SIM_ERR_INVALID_PARAM, "'model'"},
    {"{\"model\": \"Single\", " MEGA_SIZES "}", DFCCL_SIM_ERR_INVALID_PARAM,
     "'grouping_policy'"},
    {"{\"model\": \"Single\", \"grouping_policy\": \"3D\", " MEGA_SIZES "}",
     DFCCL_SIM_ERR_INVALID_PARAM, "'grouping_policy'"},
    {"{" MEGA_HEAD "\"dp_group_size\": 2, \"pp_group_size\": 1, "
     "\"coll_cnt_per_tp_group\": 3, \"coll_cnt_per_dp_group\": 4}",
     DFCCL_SIM_ERR_INVALID_PARAM, "'tp_group_size'"},
    {"{" MEGA_HEAD "\"tp_group_size\": 0, \"dp_group_size\": 2, \"pp_group_size\": 1, "
     "\"coll_cnt_per_tp_group\": 3, \"coll_cnt_per_dp_group\": 4}",
     DFCCL_SIM_ERR_INVALID_PARAM, "'tp_group_size'"},
    {"{" MEGA_HEAD "\"tp_group_size\": \"4\", \"dp_group_size\": 2, \"pp_group_size\": 1, "
     "\"coll_cnt_per_tp_group\": 3, \"coll_cnt_per_dp_group\": 4}",
     DFCCL_SIM_ERR_INVALID_PARAM, "'tp_group_size'"},
    {"{" MEGA_HEAD "\"tp_group_size\": 2.5, \"dp_group_size\": 2, \"pp_group_size\": 1, "
     "\"coll_cnt_per_tp_group\": 3, \"coll_cnt_per_dp_group\": 4}",
     DFCCL_SIM_ERR_INVALID_PARAM, "'tp_group_size'"},
    {"{" MEGA_HEAD "\"tp_group_size\": 2, \"dp_group_size\": 2, \"pp_group_size\": 1, "
     "\"coll_cnt_per_tp_group\": -3, \"coll_cnt_per_dp_group\": 4}",
     DFCCL_SIM_ERR_INVALID_PARAM, "'coll_cnt_per_tp_group'"},
    {"{" MEGA_HEAD "\"tp_group_size\": 2, \"dp_group_size\": 2, \"pp_group_size\": 1, "
     "\"coll_cnt_per_tp_group\": 3}",
     DFCCL_SIM_ERR_INVALID_PARAM, "'coll_cnt_per_dp_group'"},
    {"{" MEGA_HEAD "\"tp_group_size\": 60000, \"dp_group_size\": 60000, "
     "\"pp_group_size\": 60000, \"coll_cnt_per_tp_group\": 3, \"coll_cnt_per_dp_group\": 4}",
     DFCCL_SIM_ERR_TOO_LARGE, "'pp_group_size'"},
    {"{" MEGA_HEAD MEGA_SIZES ", \"disorder_prob\": 1.5}", DFCCL_SIM_ERR_INVALID_PARAM,
     "'disorder_prob'"},
    {"{" MEGA_HEAD MEGA_SIZES ", \"disorder_prob\": \"0.1\"}", DFCCL_SIM_ERR_INVALID_PARAM,
     "'disorder_prob'"},
    {"{" MEGA_HEAD MEGA_SIZES ", \"sync_prob\": -0.1}", DFCCL_SIM_ERR_INVALID_PARAM,
     "'sync_prob'"},
    {"{" MEGA_HEAD MEGA_SIZES ", \"sync_prob\": 1}", DFCCL_SIM_ERR_INVALID_PARAM,
     "'sync_prob'"},
    {"{" MEGA_HEAD MEGA_SIZES ", \"total_rounds\": 0}", DFCCL_SIM_ERR_INVALID_PARAM,
     "'total_rounds'"},
    {"{" MEGA_HEAD MEGA_SIZES ", \"total_rounds\": true}", DFCCL_SIM_ERR_INVALID_PARAM,
     "'total_rounds'"},
    {"{" MEGA_HEAD MEGA_SIZES ", \"fix_seed\": [1]}", DFCCL_SIM_ERR_INVALID_PARAM,
     "'fix_seed'"},
    {"{" MEGA_HEAD MEGA_SIZES ", \"resource_limit\": 0}", DFCCL_SIM_ERR_INVALID_PARAM,
     "'resource_limit'"},
    {"{" FREE_HEAD "\"group_num\": 1, \"gpu_per_group\": [[0, 1]], "
     "\"coll_cnt_per_group\": [2]}", DFCCL_SIM_ERR_INVALID_PARAM, "'gpu_num'"},
    {"{" FREE_HEAD "\"gpu_num\": 2, \"gpu_per_group\": [[0, 1]], "
     "\"coll_cnt_per_group\": [2]}", DFCCL_SIM_ERR_INVALID_PARAM, "'group_num'"},
    {"{" FREE_HEAD "\"gpu_num\": 2, \"group_num\": 1, \"coll_cnt_per_group\": [2]}",
     DFCCL_SIM_ERR_INVALID_PARAM, "'gpu_per_group'"},
    {"{" FREE_HEAD "\"gpu_num\": 2, \"group_num\": 1, \"gpu_per_group\": {\"a\": 1}, "
     "\"coll_cnt_per_group\": [2]}", DFCCL_SIM_ERR_INVALID_PARAM, "'gpu_per_group'"},
    {"{" FREE_HEAD "\"gpu_num\": 2, \"group_num\": 2, \"gpu_per_group\": [[0, 1]], "
     "\"coll_cnt_per_group\": [2, 2]}", DFCCL_SIM_ERR_INVALID_PARAM, "'gpu_per_group'"},
    {"{" FREE_HEAD "\"gpu_num\": 2, \"group_num\": 1, \"gpu_per_group\": [[0, 2]], "
     "\"coll_cnt_per_group\": [2]}", DFCCL_SIM_ERR_INVALID_PARAM, "'gpu_per_group'"},
    {"{" FREE_HEAD "\"gpu_num\": 2, \"group_num\": 1, \"gpu_per_group\": [[0, 0]], "
     "\"coll_cnt_per_group\": [2]}", DFCCL_SIM_ERR_INVALID_PARAM, "twice"},
    {"{" FREE_HEAD "\"gpu_num\": 2, \"group_num\": 1, \"gpu_per_group\": [[]], "
     "\"coll_cnt_per_group\": [2]}", DFCCL_SIM_ERR_INVALID_PARAM, "'gpu_per_group'"},
    {"{" FREE_HEAD "\"gpu_num\": 2, \"group_num\": 1, \"gpu_per_group\": [3], "
     "\"coll_cnt_per_group\": [2]}", DFCCL_SIM_ERR_INVALID_PARAM, "'gpu_per_group'"},
    {"{" FREE_HEAD "\"gpu_num\": 2, \"group_num\": 1, \"gpu_per_group\": [[\"0\"]], "
     "\"coll_cnt_per_group\": [2]}", DFCCL_SIM_ERR_INVALID_PARAM, "'gpu_per_group'"},
    {"{" FREE_HEAD "\"gpu_num\": 2, \"group_num\": 1, \"gpu_per_group\": [[0, 1]], "
     "\"coll_cnt_per_group\": 2}", DFCCL_SIM_ERR_INVALID_PARAM, "'coll_cnt_per_group'"},
    {"{" FREE_HEAD "\"gpu_num\": 2, \"group_num\": 1, \"gpu_per_group\": [[0, 1]], "
     "\"coll_cnt_per_group\": [-1]}", DFCCL_SIM_ERR_INVALID_PARAM, "'coll_cnt_per_group'"},
    {"{" FREE_HEAD "\"gpu_num\": 2, \"group_num\": 1, \"gpu_per_group\": [[0, 1]], "
     "\"coll_cnt_per_group\": [null]}", DFCCL_SIM_ERR_INVALID_PARAM, "'coll_cnt_per_group'"},
    {"{" FREE_HEAD "\"gpu_num\": 2, \"group_num\": 1, \"gpu_per_group\": [[0, 1]], "
     "\"coll_cnt_per_group\": [1e300]}", DFCCL_SIM_ERR_INVALID_PARAM, "'coll_cnt_per_group'"},
};

START_TEST(test_bad_input)
{
    const bad_case_t *bad = &bad_cases[_i];
    dfccl_sim_config_t *config = NULL;
    dfccl_sim_msg_t msg        = {{0}};
    dfccl_sim_status_t status;

    status = dfccl_sim_config_parse(bad->json, &msg, &config);
    ck_assert_msg(status == bad->status, "%s: status %d (%s), expected %d", bad->json, status,
                  msg.text, bad->status);
    ck_assert_msg(strstr(msg.text, bad->expect) != NULL, "%s: message '%s' lacks '%s'",
                  bad->json, msg.text, bad->expect);
    ck_assert_ptr_null(config);
}
END_TEST

START_TEST(test_good_input)
{
    dfccl_sim_config_t *config = NULL;
    dfccl_sim_world_t *world;
    dfccl_sim_msg_t msg = {{0}};

    ck_assert_msg(dfccl_sim_config_parse("{" MEGA_HEAD MEGA_SIZES ", \"comment\": [1, {}], "
                                         "\"gpu_num\": \"ignored for Megatron\", "
                                         "\"total_rounds\": 32000.0, \"fix_seed\": 9, "
                                         "\"disorder_prob\": 1e-06, \"sync_prob\": 0}",
                                         &msg, &config) == DFCCL_SIM_OK, "%s", msg.text);
    ck_assert_int_eq(config->model, DFCCL_SIM_MODEL_SYNC);
    ck_assert_int_eq(config->grouping, DFCCL_SIM_GROUPING_MEGATRON);
    ck_assert_int_eq(config->total_rounds, 32000);
    ck_assert_int_eq(config->fix_seed, 9);
    ck_assert(config->disorder_prob == 1e-06);
    ck_assert_int_eq(config->resource_limit, -1);
    ck_assert(dfccl_sim_world_create(config, &msg, &world) == DFCCL_SIM_OK);
    ck_assert_int_eq(world->gpu_num, 4);
    ck_assert_int_eq(world->group_num, 4);
    ck_assert_int_eq(world->coll_num, 2 * 3 + 2 * 4);
    ck_assert_int_eq(world->real_parts, 2 * (2 * 3 + 2 * 4));
    ck_assert_int_eq(world->max_len, 3 + 4);
    ck_assert_int_eq(world->limit, INT32_MAX);
    dfccl_sim_world_destroy(world);
    dfccl_sim_config_destroy(config);

    /* defaults, and a GPU in no group */
    ck_assert_msg(dfccl_sim_config_parse("{" FREE_HEAD "\"gpu_num\": 3, \"group_num\": 1, "
                                         "\"gpu_per_group\": [[2, 0]], "
                                         "\"coll_cnt_per_group\": [5]}",
                                         &msg, &config) == DFCCL_SIM_OK, "%s", msg.text);
    ck_assert_int_eq(config->total_rounds, 32000);
    ck_assert(config->disorder_prob == 0.0);
    ck_assert(dfccl_sim_world_create(config, &msg, &world) == DFCCL_SIM_OK);
    ck_assert_int_eq(world->limit, 1);
    ck_assert_int_eq(world->gpu_len[1], 0);
    ck_assert_int_eq(world->max_len, 5);
    ck_assert_int_eq(world->part_num, 15);
    ck_assert_int_eq(world->real_parts, 10);
    ck_assert_int_eq(world->trial_budget, 8);
    dfccl_sim_world_destroy(world);
    dfccl_sim_config_destroy(config);
}
END_TEST

START_TEST(test_load_file)
{
    char path[] = "/tmp/test_sim_config_XXXXXX";
    dfccl_sim_config_t *config = NULL;
    dfccl_sim_msg_t msg        = {{0}};
    FILE *file;
    int fd;

    ck_assert_int_eq(dfccl_sim_config_load("/nonexistent/dfccl-sim.json", &msg, &config),
                     DFCCL_SIM_ERR_IO);
    ck_assert(strstr(msg.text, "cannot open") != NULL);

    fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    file = fdopen(fd, "w");
    fputs("{" MEGA_HEAD MEGA_SIZES "}\n", file);
    fclose(file);
    ck_assert_msg(dfccl_sim_config_load(path, &msg, &config) == DFCCL_SIM_OK, "%s", msg.text);
    dfccl_sim_config_destroy(config);

    /* white space after the object is fine, anything else is not */
    file = fopen(path, "w");
    fputs("{" MEGA_HEAD "\n" MEGA_SIZES "\n}\n\t \n", file);
    fclose(file);
    ck_assert_msg(dfccl_sim_config_load(path, &msg, &config) == DFCCL_SIM_OK, "%s", msg.text);
    dfccl_sim_config_destroy(config);
    config = NULL;

    file = fopen(path, "w");
    fputs("{" MEGA_HEAD "\n" MEGA_SIZES "\n}\n}\n", file);
    fclose(file);
    ck_assert_int_eq(dfccl_sim_config_load(path, &msg, &config), DFCCL_SIM_ERR_PARSE);
    ck_assert_msg(strstr(msg.text, "line 4, column 1: text after the closing brace") != NULL,
                  "%s", msg.text);
    ck_assert_ptr_null(config);

    file = fopen(path, "w");
    fputs("{\"model\": \"Single\", \"grouping_policy\": ", file);
    fclose(file);
    ck_assert_int_eq(dfccl_sim_config_load(path, &msg, &config), DFCCL_SIM_ERR_PARSE);
    unlink(path);
}
END_TEST

int main(void)
{
    TCase *tc;
    Suite *suite = sim_test_suite("sim-config", "config", 0, &tc);

    tcase_add_loop_test(tc, test_bad_input, 0, sizeof(bad_cases) / sizeof(bad_cases[0]));
    tcase_add_test(tc, test_good_input);
    tcase_add_test(tc, test_load_file);
    return sim_test_run(suite);
}
