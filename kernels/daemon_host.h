/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Entry points of the daemon for the host backend and for the CUDA backend
 * (the kernel launcher), as seen from the runtime.
 */
#ifndef DFCCL_KERNELS_DAEMON_HOST_H_
#define DFCCL_KERNELS_DAEMON_HOST_H_

#include "daemon_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Run daemon block `block` on the calling thread until it quits or exits.
 * Returns DFCCL_DAEMON_QUIT, DFCCL_DAEMON_EXIT or DFCCL_DAEMON_ABORT. */
int dfccl_daemon_host_block(const dfccl_daemon_args_t *args, uint32_t block);

/* Most threads per block of the daemon kernel: its launch bounds, which
 * keep it within 128 registers without spilling. */
#define DFCCL_DAEMON_MAX_THREADS 512

/* Launch the daemon kernel with args->nblocks blocks of `threads` threads on
 * `stream` (a cudaStream_t). Returns 0 or a CUDA error code. */
int dfccl_daemon_cuda_launch(const dfccl_daemon_args_t *args, int threads, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* DFCCL_KERNELS_DAEMON_HOST_H_ */
