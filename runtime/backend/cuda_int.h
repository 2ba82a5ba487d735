/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private helpers of the CUDA backend and the p2p transport: the macro every
 * CUDA runtime call goes through, and a guard that makes the context's
 * device current on the calling thread (the poller and user threads may
 * have another device current) and restores the previous one.
 */
#ifndef DFCCL_RUNTIME_BACKEND_CUDA_INT_H_
#define DFCCL_RUNTIME_BACKEND_CUDA_INT_H_

#include "../dfccl_int.h"

#include <cuda_runtime_api.h>

/* Log the call text and the CUDA error once, clear the runtime's last
 * error (so that it is not reported again by a later call) and give a
 * status. */
#define DFCCL_CUDA(_call)                                                      \
    ({                                                                         \
        cudaError_t _ce    = (_call);                                          \
        dfccl_status_t _st = DFCCL_OK;                                         \
        if (_ce != cudaSuccess) {                                              \
            (void)cudaGetLastError();                                          \
            _st = dfccl_error(DFCCL_ERR_CUDA, "%s failed: %s (%s)", #_call,    \
                              cudaGetErrorString(_ce), cudaGetErrorName(_ce)); \
        }                                                                      \
        _st;                                                                   \
    })

/* Make ctx->device current; *prev_p gets the device to restore. */
dfccl_status_t dfccl_cuda_device_enter(const struct dfccl_rank_ctx *ctx, int *prev_p);
void dfccl_cuda_device_leave(const struct dfccl_rank_ctx *ctx, int prev);

/* The UUID of visible device `dev` (cudaDeviceProp.uuid). */
dfccl_status_t dfccl_cuda_uuid(int dev, unsigned char uuid[16]);

/* Zero `bytes` of device memory through the backend's private stream. */
dfccl_status_t dfccl_cuda_memset(struct dfccl_rank_ctx *ctx, void *ptr, size_t bytes);

#endif /* DFCCL_RUNTIME_BACKEND_CUDA_INT_H_ */
