/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers of the GPU tests (see gpu_common.h).
 */
#include "gpu_common.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int dfccl_gpu_test_ndev(void)
{
    int status = 0;
    pid_t pid;

    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess) {
            n = 0;
        }
        _exit(n > 100 ? 100 : n);
    }
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
        return 0;
    }
    return WEXITSTATUS(status);
}

void dfccl_gpu_test_setup(int rank, int nranks, int ndev, dfccl_test_oob_t *oob,
                          dfccl_rank_ctx_t *ctx_p, dfccl_group_t *group_p)
{
    dfccl_config_t cfg;
    cudaError_t e;

    e = cudaSetDevice(rank % ndev);
    if (e != cudaSuccess) {
        fprintf(stderr, "rank %d: cudaSetDevice(%d): %s\n", rank, rank % ndev,
                cudaGetErrorString(e));
        exit(2);
    }
    if (dfcclConfigInit(&cfg) != DFCCL_OK) {
        fprintf(stderr, "rank %d: dfcclConfigInit failed\n", rank);
        exit(2);
    }
    cfg.backend = DFCCL_BACKEND_CUDA;
    dfccl_test_setup(rank, nranks, oob, &cfg, ctx_p, group_p);
}

int dfccl_gpu_test_nranks(int dflt)
{
    const char *s = getenv("DFCCL_TEST_NRANKS");
    int n         = s != NULL ? atoi(s) : 0;

    return n >= 1 && n <= 64 ? n : dflt;
}
