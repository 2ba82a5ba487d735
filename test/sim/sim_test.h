/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the tests of dfccl-sim share: a world made of a configuration, the
 * Table 1 configurations that ship in tools/sim/configs, and the Check
 * suite of a test program. The helpers fail the running test on an error.
 */
#ifndef DFCCL_SIM_TEST_H_
#define DFCCL_SIM_TEST_H_

#include "sim.h"

#include <check.h>
#include <stddef.h>

/* The world of `config`. */
dfccl_sim_world_t *sim_test_world(const dfccl_sim_config_t *config);

/* The names of the configurations NAME.json in the shipped configuration
 * directory whose NAME starts with `prefix`, sorted, at most `max` of them
 * (free each): their count. */
size_t sim_test_config_names(const char *prefix, char **names, size_t max);

/* The shipped configuration file `name`, loaded. */
dfccl_sim_config_t *sim_test_config_load(const char *name);

/* A suite of one test case, whose tests time out after `timeout_s` seconds
 * (0: SIM_TEST_TIMEOUT_S); the case in *tc_p, for its tests. Check keeps
 * the names, not copies. */
Suite *sim_test_suite(const char *suite_name, const char *tcase_name, double timeout_s,
                      TCase **tc_p);

/* The timeout of a test that names none: a bound for a hang, not a speed
 * target. Check's own default (4 s) is shorter than what a test that takes
 * a second alone takes on a loaded 2-core machine. */
#define SIM_TEST_TIMEOUT_S 600.0

/* Run every test of `suite` (and free it): main's exit status. */
int sim_test_run(Suite *suite);

#endif
