/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Example: two threads under MPI_THREAD_MULTIPLE, each running blocking
 * allreduces on its own communicator. The threads interleave differently on
 * every rank, so one rank's GPU may get communicator A's collective first
 * while another's gets B's: with a stream-ordered GPU library both spin
 * forever. With dfccl the daemon preempts the stuck one and both finish.
 * Buffers: device memory with CUDA and a GPU, host memory otherwise.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef HAVE_CUDART
#include <cuda_runtime_api.h>
#endif
#include "example_util.h" /* select_device() */

/* elements per collective; the first argument overrides it */
static int COUNT = 32 * 1024;
#define ITERS 50

static int rank, size, dev;

typedef struct {
    MPI_Comm comm;
    int      id;
    int      errors;
} worker_t;

#ifdef HAVE_CUDART
static int device_id; /* the GPU chosen by select_device() */
#endif

static void *worker(void *arg)
{
    worker_t *w = arg;
    float *host = malloc(COUNT * sizeof(float)), *buf = host;

#ifdef HAVE_CUDART
    if (dev) {
        /* a new thread starts on device 0: use the process's GPU */
        cudaSetDevice(device_id);
        cudaMalloc((void **)&buf, COUNT * sizeof(float));
    }
#endif
    for (int it = 0; it < ITERS; it++) {
        float want = (float)(size * (size - 1) / 2 + size * (w->id + it));
        for (int i = 0; i < COUNT; i++) {
            host[i] = (float)(rank + w->id + it);
        }
#ifdef HAVE_CUDART
        if (dev) {
            cudaMemcpy(buf, host, COUNT * sizeof(float), cudaMemcpyHostToDevice);
        }
#endif
        MPI_Allreduce(MPI_IN_PLACE, buf, COUNT, MPI_FLOAT, MPI_SUM, w->comm);
#ifdef HAVE_CUDART
        if (dev) {
            cudaMemcpy(host, buf, COUNT * sizeof(float), cudaMemcpyDeviceToHost);
        }
#endif
        if (host[0] != want || host[COUNT - 1] != want) {
            w->errors++;
        }
    }
#ifdef HAVE_CUDART
    if (dev) {
        cudaFree(buf);
    }
#endif
    free(host);
    return NULL;
}

int main(int argc, char **argv)
{
    worker_t w[2];
    pthread_t th[2];
    int provided, errors, all;

    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (argc > 1) {
        COUNT = atoi(argv[1]);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0) {
            printf("threads: MPI_THREAD_MULTIPLE is not available; skipped\n");
        }
        MPI_Finalize();
        return 77;
    }
    dev = select_device();
#ifdef HAVE_CUDART
    if (dev) {
        cudaGetDevice(&device_id);
    }
#endif
    for (int i = 0; i < 2; i++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &w[i].comm);
        w[i].id     = i;
        w[i].errors = 0;
    }
    printf("rank %d: two threads, %d blocking MPI_Allreduce each on %s buffers, own "
           "communicator per thread\n", rank, ITERS, dev ? "device" : "host");
    fflush(stdout);
    /* start the threads in opposite orders on even and odd ranks */
    for (int i = 0; i < 2; i++) {
        int k = rank % 2 ? 1 - i : i;
        pthread_create(&th[k], NULL, worker, &w[k]);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
    }
    errors = w[0].errors + w[1].errors;
    for (int i = 0; i < 2; i++) {
        MPI_Comm_free(&w[i].comm);
    }
    MPI_Allreduce(&errors, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("threads: %d ranks, 2 threads x %d allreduces completed, %s\n", size, ITERS,
               all == 0 ? "results correct" : "WRONG RESULTS");
    }
    MPI_Finalize();
    return all == 0 ? 0 : 1;
}
