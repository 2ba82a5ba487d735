/* SPDX-License-Identifier: BSD-3-Clause */
/* dfccl-bench --model: the alpha-beta model of the ring and the trees at
 * scale (bench_model.c). */
#ifndef DFCCL_TOOLS_BENCH_MODEL_H_
#define DFCCL_TOOLS_BENCH_MODEL_H_

#include <stdio.h>

/* Print the model's table for 8 to 1024 GPUs. */
void bench_model_print(FILE *out);

#endif
