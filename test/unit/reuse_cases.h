/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The bodies of test_coll.c and test_deadlock.c, for a program that runs
 * them under other settings (another transport, MSCCL programs): both
 * files are included with their main renamed, and what the including
 * program does not call is not an error.
 */
#ifndef DFCCL_TEST_UNIT_REUSE_CASES_H_
#define DFCCL_TEST_UNIT_REUSE_CASES_H_

#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-variable"

#define main dfccl_test_coll_main
#include "test_coll.c"
#undef main
#define main dfccl_test_deadlock_main
#include "test_deadlock.c"
#undef main

#endif /* DFCCL_TEST_UNIT_REUSE_CASES_H_ */
