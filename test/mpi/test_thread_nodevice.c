/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two threads under MPI_THREAD_MULTIPLE, each running collectives on its
 * own duplicate of MPI_COMM_WORLD at the same time. The main thread
 * chooses its GPU after MPI_Init from the node-local rank. The second
 * thread never calls cudaSetDevice, as threads of many programs (and of
 * libraries they call) do not: its device buffers land on device 0, which
 * is another GPU than the main thread's on every rank but the node's
 * first. Each thread runs allreduce (out of place, in place, nonblocking),
 * allgather, bcast, reduce_scatter_block and alltoall for a number of
 * iterations and checks every element. With --device the buffers are
 * device memory (the GPU lane); without it, host memory (the host backend
 * in CI). Exit status 0 when every check passed on every rank; 77 when
 * MPI_THREAD_MULTIPLE is not available, or with --device and no GPU.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef HAVE_CUDART
#include <cuda_runtime_api.h>
#endif
#include "test_util.h"

#define COUNT 4096
#define ITERS 20

static int rank, size, device;

typedef struct {
    const char *who;
    MPI_Comm    comm;
    int         id;
    int         gpu; /* the device its buffers are on; -1 on host */
    int         errors;
} worker_t;

static void *buf_new(size_t bytes)
{
    void *p = NULL;
#ifdef HAVE_CUDART
    if (device) {
        TEST_CUDA(cudaMalloc(&p, bytes));
        return p;
    }
#endif
    p = malloc(bytes);
    if (p == NULL) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

static void buf_del(void *p)
{
#ifdef HAVE_CUDART
    if (device) {
        cudaFree(p);
        return;
    }
#endif
    free(p);
}

/* host image in, complete before the MPI call */
static void put(void *d, const void *h, size_t bytes)
{
#ifdef HAVE_CUDART
    if (device) {
        TEST_CUDA(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
        TEST_CUDA(cudaStreamSynchronize(cudaStreamLegacy));
        return;
    }
#endif
    memcpy(d, h, bytes);
}

static void get(void *h, const void *d, size_t bytes)
{
#ifdef HAVE_CUDART
    if (device) {
        TEST_CUDA(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
        return;
    }
#endif
    memcpy(h, d, bytes);
}

static int val(int r, int id, int it, size_t i)
{
    return r * 100000 + id * 10000 + it * 100 + (int)(i % 97);
}

static void report(worker_t *w, const char *coll, int it, size_t i, int got, int want)
{
    if (w->errors++ < 10) {
        fprintf(stderr, "rank %d: FAIL %s thread, %s iteration %d: element %zu is %d, "
                "expected %d\n", rank, w->who, coll, it, i, got, want);
    }
}

static void rc_check(worker_t *w, const char *coll, int it, int rc)
{
    if (rc != MPI_SUCCESS) {
        char s[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, s, &len);
        if (w->errors++ < 10) {
            fprintf(stderr, "rank %d: FAIL %s thread, %s iteration %d: %s\n", rank, w->who,
                    coll, it, s);
        }
    }
}

static void *worker(void *arg)
{
    worker_t *w = arg;
    size_t n = COUNT, all = (size_t)COUNT * size;
    int *h = malloc(all * sizeof(int)), *o = malloc(all * sizeof(int));
    int *s, *r, *g, *g2;
    MPI_Request req;

    w->gpu = -1;
#ifdef HAVE_CUDART
    if (device) {
        TEST_CUDA(cudaGetDevice(&w->gpu));
    }
#endif
    s  = buf_new(n * sizeof(int));
    r  = buf_new(n * sizeof(int));
    g  = buf_new(all * sizeof(int));
    g2 = buf_new(all * sizeof(int));
    for (int it = 0; it < ITERS; it++) {
        int root = (it + w->id) % size;

        /* allreduce sum, out of place */
        for (size_t i = 0; i < n; i++) {
            h[i] = val(rank, w->id, it, i);
        }
        put(s, h, n * sizeof(int));
        rc_check(w, "allreduce", it, MPI_Allreduce(s, r, COUNT, MPI_INT, MPI_SUM, w->comm));
        get(o, r, n * sizeof(int));
        for (size_t i = 0; i < n; i++) {
            int want = 0;
            for (int p = 0; p < size; p++) {
                want += val(p, w->id, it, i);
            }
            if (o[i] != want) {
                report(w, "allreduce", it, i, o[i], want);
                break;
            }
        }
        /* allreduce max in place, nonblocking */
        put(r, h, n * sizeof(int));
        rc_check(w, "iallreduce", it,
                 MPI_Iallreduce(MPI_IN_PLACE, r, COUNT, MPI_INT, MPI_MAX, w->comm, &req));
        rc_check(w, "iallreduce wait", it, MPI_Wait(&req, MPI_STATUS_IGNORE));
        get(o, r, n * sizeof(int));
        for (size_t i = 0; i < n; i++) {
            int want = val(size - 1, w->id, it, i);
            if (o[i] != want) {
                report(w, "iallreduce in-place max", it, i, o[i], want);
                break;
            }
        }
        /* allgather */
        rc_check(w, "allgather", it,
                 MPI_Allgather(s, COUNT, MPI_INT, g, COUNT, MPI_INT, w->comm));
        get(o, g, all * sizeof(int));
        for (size_t i = 0; i < all; i++) {
            int want = val((int)(i / n), w->id, it, i % n);
            if (o[i] != want) {
                report(w, "allgather", it, i, o[i], want);
                break;
            }
        }
        /* bcast */
        for (size_t i = 0; i < n; i++) {
            h[i] = rank == root ? val(root, w->id, it, i) : -1;
        }
        put(r, h, n * sizeof(int));
        rc_check(w, "bcast", it, MPI_Bcast(r, COUNT, MPI_INT, root, w->comm));
        get(o, r, n * sizeof(int));
        for (size_t i = 0; i < n; i++) {
            if (o[i] != val(root, w->id, it, i)) {
                report(w, "bcast", it, i, o[i], val(root, w->id, it, i));
                break;
            }
        }
        /* reduce_scatter_block of what allgather left in g: rank p's part
         * is size times the gathered block of rank p */
        rc_check(w, "reduce_scatter_block", it,
                 MPI_Reduce_scatter_block(g, r, COUNT, MPI_INT, MPI_SUM, w->comm));
        get(o, r, n * sizeof(int));
        for (size_t i = 0; i < n; i++) {
            int want = size * val(rank, w->id, it, i);
            if (o[i] != want) {
                report(w, "reduce_scatter_block", it, i, o[i], want);
                break;
            }
        }
        /* alltoall (not one of dfccl's: staged on device buffers) */
        for (size_t i = 0; i < all; i++) {
            h[i] = val(rank, w->id, it, i) + (int)(i / n) * 7;
        }
        put(g, h, all * sizeof(int));
        rc_check(w, "alltoall", it, MPI_Alltoall(g, COUNT, MPI_INT, g2, COUNT, MPI_INT, w->comm));
        get(o, g2, all * sizeof(int));
        for (size_t i = 0; i < all; i++) {
            int src = (int)(i / n), want = val(src, w->id, it, rank * n + i % n) + rank * 7;
            if (o[i] != want) {
                report(w, "alltoall", it, i, o[i], want);
                break;
            }
        }
    }
    buf_del(s);
    buf_del(r);
    buf_del(g);
    buf_del(g2);
    free(h);
    free(o);
    return NULL;
}

int main(int argc, char **argv)
{
    worker_t w[2] = {{"main", MPI_COMM_NULL, 0, -1, 0}, {"second", MPI_COMM_NULL, 1, -1, 0}};
    pthread_t th;
    int provided, errors, all;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--device") == 0) {
#ifdef HAVE_CUDART
            device = 1;
#else
            fprintf(stderr, "test_thread_nodevice: --device needs a build with CUDA\n");
            return 77;
#endif
        } else {
            fprintf(stderr, "usage: test_thread_nodevice [--device]\n");
            return 2;
        }
    }
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0) {
            printf("test_thread_nodevice: MPI_THREAD_MULTIPLE is not available; skipped\n");
        }
        MPI_Finalize();
        return 77;
    }
#ifdef HAVE_CUDART
    /* the main thread's GPU, after MPI_Init, from the node-local rank */
    if (device && test_select_device() < 0) {
        if (rank == 0) {
            fprintf(stderr, "test_thread_nodevice: --device but no GPU is visible\n");
        }
        MPI_Finalize();
        return 77;
    }
#endif
    for (int i = 0; i < 2; i++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &w[i].comm);
        MPI_Comm_set_errhandler(w[i].comm, MPI_ERRORS_RETURN);
    }
    /* the second thread never selects a device */
    pthread_create(&th, NULL, worker, &w[1]);
    worker(&w[0]);
    pthread_join(th, NULL);
    if (device) {
        printf("rank %d: the main thread's buffers on GPU %d, the second thread's on GPU %d\n",
               rank, w[0].gpu, w[1].gpu);
    }
    errors = w[0].errors + w[1].errors;
    for (int i = 0; i < 2; i++) {
        MPI_Comm_free(&w[i].comm);
    }
    MPI_Allreduce(&errors, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("test_thread_nodevice: %d ranks, 2 threads x %d iterations of 6 collectives on "
               "%s buffers, %d failures in all\n", size, ITERS, device ? "device" : "host",
               all);
    }
    MPI_Finalize();
    return all == 0 ? 0 : 1;
}
