/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers shared by the MPI tests: the node-local rank and the choice of a
 * GPU from it, made after MPI_Init as most MPI programs make it (the ranks
 * of one node numbered by a communicator of type MPI_COMM_TYPE_SHARED), and
 * a check of CUDA runtime calls that aborts the job with the call's text.
 */
#ifndef DFCCL_TEST_MPI_UTIL_H_
#define DFCCL_TEST_MPI_UTIL_H_

#include <mpi.h>
#include <stdio.h>
#ifdef HAVE_CUDART
#include <cuda_runtime_api.h>
#endif

/* This rank's number among the ranks of its node. */
static inline int test_local_rank(void)
{
    MPI_Comm node;
    int local = 0;

    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    return local;
}

#ifdef HAVE_CUDART
/* A CUDA runtime call that must succeed: on failure, say which and abort. */
#define TEST_CUDA(_call)                                                                  \
    do {                                                                                  \
        cudaError_t _e = (_call);                                                         \
        if (_e != cudaSuccess) {                                                          \
            int _r = -1;                                                                  \
            MPI_Comm_rank(MPI_COMM_WORLD, &_r);                                           \
            fprintf(stderr, "rank %d: %s:%d: %s failed: %s\n", _r, __FILE__, __LINE__,   \
                    #_call, cudaGetErrorString(_e));                                      \
            MPI_Abort(MPI_COMM_WORLD, 2);                                                 \
        }                                                                                 \
    } while (0)

/* The number of visible GPUs, 0 when there is none (or no driver). */
static inline int test_gpu_count(void)
{
    int n = 0;

    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        n = 0;
    }
    return n;
}

/* One GPU per node-local rank, chosen after MPI_Init; returns it, or -1
 * without a GPU. */
static inline int test_select_device(void)
{
    int local = test_local_rank(), n = test_gpu_count();

    if (n == 0) {
        return -1;
    }
    TEST_CUDA(cudaSetDevice(local % n));
    return local % n;
}
#endif

#endif
