/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reproducer of a bug found by fuzzing (test/fuzz/crashes/api-wait-null-ctx):
 * dfcclWait with a NULL context must return DFCCL_ERR_INVALID_ARG, as every
 * other call does, and not dereference it. Listed in XFAIL_TESTS until the
 * library is fixed; then it passes (XPASS fails the suite) and moves to TESTS.
 */
#include <stdio.h>

#include "dfccl.h"

int main(void)
{
    dfccl_status_t st = dfcclWait(0, 0, NULL);

    printf("dfcclWait(0, 0, NULL) returned %s\n", dfcclGetErrorString(st));
    return st == DFCCL_ERR_INVALID_ARG ? 0 : 1;
}
