/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The part of a Check test program's main that every one repeats: test
 * cases bounded in time, and a run whose result is the exit status.
 */
#ifndef DFCCL_TEST_SUITE_H_
#define DFCCL_TEST_SUITE_H_

#include <check.h>

#include "mp.h"

/*
 * A new test case of s. Each of its tests may take timeout_s seconds on an
 * idle machine, scaled by dfccl_test_scale_max so that a loaded machine
 * does not fail it; 0 keeps CK_DEFAULT_TIMEOUT.
 */
static inline TCase *dfccl_test_case(Suite *s, const char *name, double timeout_s)
{
    TCase *tc = tcase_create(name);

    if (timeout_s > 0) {
        tcase_set_timeout(tc, timeout_s * dfccl_test_scale_max());
    }
    suite_add_tcase(s, tc);
    return tc;
}

/* Runs every test of s; main's exit status: 0 when all passed. */
static inline int dfccl_test_run(Suite *s, enum print_output mode)
{
    SRunner *sr = srunner_create(s);
    int failed;

    srunner_run_all(sr, mode);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

#endif /* DFCCL_TEST_SUITE_H_ */
