/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A CUDA driver function through the runtime (no link to libcuda), for
 * code built with the CUDA runtime's headers: the component's pointer
 * queries, and the tests that allocate memory through the driver.
 */
#ifndef DFCCL_CUDA_DRIVER_H_
#define DFCCL_CUDA_DRIVER_H_

#include <cuda_runtime_api.h>

/* The driver's `name` (its CUDA 12 version where there are several), or
 * NULL where this driver or runtime has none. */
static inline void *dfccl_cuda_driver_fn(const char *name)
{
    void *fn = NULL;
#if CUDART_VERSION >= 12050
    enum cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q) !=
            cudaSuccess || q != cudaDriverEntryPointSuccess) {
        fn = NULL;
    }
#elif CUDART_VERSION >= 12000
    enum cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
        fn = NULL;
    }
#elif CUDART_VERSION >= 11030
    if (cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault) != cudaSuccess) {
        fn = NULL;
    }
#else
    (void)name;
#endif
    cudaGetLastError(); /* a failed lookup leaves no error for the caller's next call */
    return fn;
}

#endif /* DFCCL_CUDA_DRIVER_H_ */
