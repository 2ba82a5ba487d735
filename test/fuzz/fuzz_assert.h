/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fuzz targets' assertion: a property that does not hold aborts with
 * the target's name (FZ_NAME), the place and a message, which libFuzzer
 * reports as a crash with its input.
 */
#ifndef DFCCL_FUZZ_ASSERT_H_
#define DFCCL_FUZZ_ASSERT_H_

#include <stdio.h>
#include <stdlib.h>

#define FZ_ASSERT(_cond, ...)                                                 \
    do {                                                                      \
        if (!(_cond)) {                                                       \
            fprintf(stderr, "%s: %s:%d: %s: ", FZ_NAME, __FILE__, __LINE__,   \
                    #_cond);                                                  \
            fprintf(stderr, __VA_ARGS__);                                     \
            fprintf(stderr, "\n");                                            \
            abort();                                                          \
        }                                                                     \
    } while (0)

#endif /* DFCCL_FUZZ_ASSERT_H_ */
