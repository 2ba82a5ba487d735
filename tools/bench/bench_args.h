/* SPDX-License-Identifier: BSD-3-Clause */
/* The command-line values of the benchmarks (dfccl-bench, dfccl-ucx-bw):
 * sizes with K, M and G suffixes, bounded integers and step factors, read
 * and written alike by both (bench_args.c). Each returns 0, or -1 where
 * the text is not such a value; the caller names the option. */
#ifndef DFCCL_TOOLS_BENCH_ARGS_H_
#define DFCCL_TOOLS_BENCH_ARGS_H_

#include <stddef.h>

/* A number of bytes from 1 to 1T, with an optional K, M or G suffix
 * (KiB, MiB, GiB): 8, 64K, 1.5M, 1G. */
int bench_args_size(const char *s, size_t *v);

/* A decimal integer from lo to hi. */
int bench_args_int(const char *s, long lo, long hi, long *v);

/* A size multiplier above 1, up to 1024. */
int bench_args_factor(const char *s, double *v);

/* A size as the user would write it: 1K, 3M, 12345. */
const char *bench_args_size_text(size_t v, char *buf, size_t len);

#endif
