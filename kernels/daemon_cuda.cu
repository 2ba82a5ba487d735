/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * GPU build of the daemon: the scheduler and primitives of daemon.h as one
 * persistent kernel. Each CUDA block is one daemon block; within a block,
 * thread 0 takes the control decisions (polling connectors and queues) and
 * every thread moves data, except in SIMPLE primitives the last warp, which
 * publishes each slice while the others move the next (kernels/prims.h).
 * The launcher is called by the CUDA backend.
 */
#include "daemon_host.h"

#include "daemon.h"

#include <cuda_runtime.h>

__global__ void __launch_bounds__(DFCCL_DAEMON_MAX_THREADS, 1)
dfccl_daemon_kernel(const __grid_constant__ dfccl_daemon_args_t args)
{
    dfccl_daemon_block(&args, blockIdx.x);
}

extern "C" int dfccl_daemon_cuda_launch(const dfccl_daemon_args_t *args, int threads,
                                        void *stream)
{
    if (threads < 32 || threads > DFCCL_DAEMON_MAX_THREADS) {
        return (int)cudaErrorInvalidValue;
    }
    dfccl_daemon_kernel<<<args->nblocks, threads, 0, (cudaStream_t)stream>>>(*args);
    return (int)cudaGetLastError();
}
