/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Example: a device synchronization between nonblocking collectives started
 * in opposite orders. Even ranks start an MPI_Iallreduce on communicator A,
 * call cudaDeviceSynchronize, then start one on B; odd ranks do B, sync, A.
 * With a stream-ordered GPU library the synchronization never returns: the
 * first collective waits for peers whose own first collective is the other
 * one. dfccl's daemon quits voluntarily when everything it holds is stuck,
 * so the synchronization returns and both collectives finish after
 * MPI_Waitall. Without CUDA (or without a GPU) the synchronization is
 * skipped with a message, and the collectives still run in opposite orders
 * on host buffers (dfccl's own synchronize is not reachable through MPI).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef HAVE_CUDART
#include <cuda_runtime_api.h>
#endif
#include "example_util.h" /* select_device() */

/* elements per collective; the first argument overrides it */
static int COUNT = 128 * 1024;

int main(int argc, char **argv)
{
    MPI_Comm comm[2];
    MPI_Request reqs[2];
    float *buf[2], *host;
    int rank, size, dev = 0, errors = 0, all;

    MPI_Init(&argc, &argv);
    if (argc > 1) {
        COUNT = atoi(argv[1]);
    }
    host = malloc(COUNT * sizeof(float));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    dev = select_device();
    for (int c = 0; c < 2; c++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &comm[c]);
        for (int i = 0; i < COUNT; i++) {
            host[i] = (float)(rank * 2 + c);
        }
        buf[c] = malloc(COUNT * sizeof(float));
#ifdef HAVE_CUDART
        if (dev) {
            free(buf[c]);
            cudaMalloc((void **)&buf[c], COUNT * sizeof(float));
            cudaMemcpy(buf[c], host, COUNT * sizeof(float), cudaMemcpyHostToDevice);
            continue;
        }
#endif
        memcpy(buf[c], host, COUNT * sizeof(float));
    }
    int first = rank % 2, second = 1 - first;
    printf("rank %d: MPI_Iallreduce on communicator %c, %s, then on %c\n", rank, 'A' + first,
           dev ? "cudaDeviceSynchronize" : "no GPU: device synchronization skipped",
           'A' + second);
    fflush(stdout);
    MPI_Iallreduce(MPI_IN_PLACE, buf[first], COUNT, MPI_FLOAT, MPI_SUM, comm[first],
                   &reqs[first]);
#ifdef HAVE_CUDART
    if (dev) {
        cudaDeviceSynchronize();
    }
#endif
    MPI_Iallreduce(MPI_IN_PLACE, buf[second], COUNT, MPI_FLOAT, MPI_SUM, comm[second],
                   &reqs[second]);
    MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
    for (int c = 0; c < 2; c++) {
        float want = (float)(size * (size - 1) + size * c);
#ifdef HAVE_CUDART
        if (dev) {
            cudaMemcpy(host, buf[c], COUNT * sizeof(float), cudaMemcpyDeviceToHost);
            cudaFree(buf[c]);
        } else
#endif
        {
            memcpy(host, buf[c], COUNT * sizeof(float));
            free(buf[c]);
        }
        for (int i = 0; i < COUNT; i++) {
            if (host[i] != want) {
                errors++;
                break;
            }
        }
        MPI_Comm_free(&comm[c]);
    }
    MPI_Allreduce(&errors, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("devsync: %d ranks, collectives in opposite orders%s completed, %s\n", size,
               dev ? " around cudaDeviceSynchronize" : "", all == 0 ? "results correct"
                                                                    : "WRONG RESULTS");
    }
    free(host);
    MPI_Finalize();
    return all == 0 ? 0 : 1;
}
