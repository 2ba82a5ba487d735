/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers of the GPU tests: find the visible GPUs without initializing CUDA
 * in the parent (which then forks the ranks: CUDA does not survive fork),
 * and set up a rank on GPU rank % ndev with the CUDA backend.
 */
#ifndef DFCCL_TEST_GPU_COMMON_H_
#define DFCCL_TEST_GPU_COMMON_H_

#include "mp.h"

/* Exit status of a skipped test (automake). */
#define DFCCL_GPU_TEST_SKIP 77

/* Visible GPUs, probed in a child process. 0 when none. */
int dfccl_gpu_test_ndev(void);

/* Select GPU rank % ndev, then init a CUDA-backend context and a group of
 * all ranks (exits the rank on failure). */
void dfccl_gpu_test_setup(int rank, int nranks, int ndev, dfccl_test_oob_t *oob,
                          dfccl_rank_ctx_t *ctx_p, dfccl_group_t *group_p);

/* Ranks from DFCCL_TEST_NRANKS, else `dflt`. */
int dfccl_gpu_test_nranks(int dflt);

#endif
