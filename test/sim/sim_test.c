/* SPDX-License-Identifier: BSD-3-Clause */
#include "sim_test.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef SIM_CONFIG_DIR
#define SIM_CONFIG_DIR "../../tools/sim/configs"
#endif

dfccl_sim_world_t *sim_test_world(const dfccl_sim_config_t *config)
{
    dfccl_sim_world_t *world;
    dfccl_sim_msg_t msg = {{0}};

    ck_assert_msg(dfccl_sim_world_create(config, &msg, &world) == DFCCL_SIM_OK, "%s",
                  msg.text);
    return world;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

size_t sim_test_config_names(const char *prefix, char **names, size_t max)
{
    DIR *dir = opendir(SIM_CONFIG_DIR);
    struct dirent *entry;
    size_t n = 0, len;

    ck_assert_msg(dir != NULL, "cannot open %s", SIM_CONFIG_DIR);
    while (((entry = readdir(dir)) != NULL) && (n < max)) {
        len = strlen(entry->d_name);
        if ((strncmp(entry->d_name, prefix, strlen(prefix)) == 0) && (len > 5) &&
            (strcmp(entry->d_name + len - 5, ".json") == 0)) {
            names[n++] = strdup(entry->d_name);
        }
    }
    closedir(dir);
    qsort(names, n, sizeof(names[0]), name_cmp);
    return n;
}

dfccl_sim_config_t *sim_test_config_load(const char *name)
{
    char path[4096];
    dfccl_sim_config_t *config;
    dfccl_sim_msg_t msg;

    snprintf(path, sizeof(path), "%s/%s", SIM_CONFIG_DIR, name);
    ck_assert_msg(dfccl_sim_config_load(path, &msg, &config) == DFCCL_SIM_OK, "%s: %s", path,
                  msg.text);
    return config;
}

Suite *sim_test_suite(const char *suite_name, const char *tcase_name, double timeout_s,
                      TCase **tc_p)
{
    Suite *suite = suite_create(suite_name);

    *tc_p = tcase_create(tcase_name);
    tcase_set_timeout(*tc_p, timeout_s > 0 ? timeout_s : SIM_TEST_TIMEOUT_S);
    suite_add_tcase(suite, *tc_p);
    return suite;
}

int sim_test_run(Suite *suite)
{
    SRunner *runner = srunner_create(suite);
    int failed;

    srunner_run_all(runner, CK_NORMAL);
    failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return (failed == 0) ? EXIT_SUCCESS : EXIT_FAILURE;
}
