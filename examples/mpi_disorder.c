/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Example: nonblocking allreduces on 8 duplicated communicators, started in
 * a different random order on every rank, then one MPI_Waitall. This is a
 * correct MPI program. With a stream-ordered GPU collective library under
 * MPI it hangs: each rank's GPU runs the first collective it was given and
 * busy-waits for peers that are running a different one. With dfccl the
 * daemon preempts whichever collective is stuck, so it completes.
 * Buffers are device memory when built with CUDA and a GPU is visible
 * (run with --mca coll_dfccl_backend cuda|auto), host memory otherwise
 * (run with --mca coll_dfccl_backend host to put them on dfccl).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef HAVE_CUDART
#include <cuda_runtime_api.h>
#endif
#include "example_util.h" /* select_device() */

#define NCOMMS 8
/* elements per collective; the first argument overrides it */
static int COUNT = 64 * 1024;

static void *buf_alloc(int dev, size_t bytes)
{
#ifdef HAVE_CUDART
    if (dev) {
        void *p = NULL;
        return cudaMalloc(&p, bytes) == cudaSuccess ? p : NULL;
    }
#endif
    return malloc(bytes);
}

static void buf_copy(int dev, void *dst, const void *src, size_t bytes)
{
#ifdef HAVE_CUDART
    if (dev) {
        cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
        return;
    }
#endif
    memcpy(dst, src, bytes);
}

static void buf_free(int dev, void *p)
{
#ifdef HAVE_CUDART
    if (dev) {
        cudaFree(p);
        return;
    }
#endif
    free(p);
}

int main(int argc, char **argv)
{
    MPI_Comm comms[NCOMMS];
    MPI_Request reqs[NCOMMS];
    float *bufs[NCOMMS], *host;
    int order[NCOMMS], rank, size, errors = 0, all;
    int dev;

    MPI_Init(&argc, &argv);
    if (argc > 1) {
        COUNT = atoi(argv[1]);
    }
    host = malloc(COUNT * sizeof(float));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    dev = select_device();
    for (int c = 0; c < NCOMMS; c++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &comms[c]);
        for (int i = 0; i < COUNT; i++) {
            host[i] = (float)(rank + c);
        }
        bufs[c] = buf_alloc(dev, COUNT * sizeof(float));
        buf_copy(dev, bufs[c], host, COUNT * sizeof(float));
        order[c] = c;
    }
    /* a different permutation on every rank */
    srand(1234 + 977 * rank);
    for (int i = NCOMMS - 1; i > 0; i--) {
        int j = rand() % (i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    printf("rank %d: starting MPI_Iallreduce on %s buffers in the order", rank,
           dev ? "device" : "host");
    for (int c = 0; c < NCOMMS; c++) {
        printf(" %d", order[c]);
    }
    printf("\n");
    fflush(stdout);
    for (int i = 0; i < NCOMMS; i++) {
        int c = order[i];
        MPI_Iallreduce(MPI_IN_PLACE, bufs[c], COUNT, MPI_FLOAT, MPI_SUM, comms[c], &reqs[c]);
    }
    MPI_Waitall(NCOMMS, reqs, MPI_STATUSES_IGNORE);
    for (int c = 0; c < NCOMMS; c++) {
        float want = (float)(size * (size - 1) / 2 + size * c);
        buf_copy(dev, host, bufs[c], COUNT * sizeof(float));
        for (int i = 0; i < COUNT; i++) {
            if (host[i] != want) {
                errors++;
                break;
            }
        }
        buf_free(dev, bufs[c]);
        MPI_Comm_free(&comms[c]);
    }
    MPI_Allreduce(&errors, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("disorder: %d ranks, %d communicators, all completed, %s\n", size, NCOMMS,
               all == 0 ? "results correct" : "WRONG RESULTS");
    }
    free(host);
    MPI_Finalize();
    return all == 0 ? 0 : 1;
}
