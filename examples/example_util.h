/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the MPI examples share: the choice of this rank's GPU.
 */
#ifndef DFCCL_EXAMPLE_UTIL_H_
#define DFCCL_EXAMPLE_UTIL_H_

#include <mpi.h>
#ifdef HAVE_CUDART
#include <cuda_runtime_api.h>
#endif

/* One GPU per rank of this node, chosen after MPI_Init as MPI programs
 * usually choose it: the ranks that share the node are numbered by a
 * communicator of type MPI_COMM_TYPE_SHARED. The dfccl component binds to
 * the GPU of the first device buffer a collective gets. Returns 1 when a
 * GPU was selected (device buffers), 0 without one (host buffers). */
static inline int select_device(void)
{
#ifdef HAVE_CUDART
    MPI_Comm node;
    int local = 0, n = 0;

    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0 &&
        cudaSetDevice(local % n) == cudaSuccess) {
        return 1;
    }
    cudaGetLastError();
#endif
    return 0;
}

#endif
