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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "test_util.h"

#define COUNT 4096
#define ITERS 20

static int rank, size;

typedef struct {
    const char *who;
    MPI_Comm    comm;
    int         id;
    int         gpu; /* the device its buffers are on; -1 on host */
    int         errors;
} worker_t;

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
    if (rc != MPI_SUCCESS && w->errors++ < 10) {
        char s[MPI_MAX_ERROR_STRING];
        fprintf(stderr, "rank %d: FAIL %s thread, %s iteration %d: %s\n", rank, w->who, coll,
                it, test_errstr(rc, s));
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
    if (test_device) {
        TEST_CUDA(cudaGetDevice(&w->gpu));
    }
#endif
    s  = test_buf_new(n * sizeof(int));
    r  = test_buf_new(n * sizeof(int));
    g  = test_buf_new(all * sizeof(int));
    g2 = test_buf_new(all * sizeof(int));
    for (int it = 0; it < ITERS; it++) {
        int root = (it + w->id) % size;

        /* allreduce sum, out of place */
        for (size_t i = 0; i < n; i++) {
            h[i] = val(rank, w->id, it, i);
        }
        test_put(s, h, n * sizeof(int));
        rc_check(w, "allreduce", it, MPI_Allreduce(s, r, COUNT, MPI_INT, MPI_SUM, w->comm));
        test_get(o, r, n * sizeof(int));
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
        test_put(r, h, n * sizeof(int));
        rc_check(w, "iallreduce", it,
                 MPI_Iallreduce(MPI_IN_PLACE, r, COUNT, MPI_INT, MPI_MAX, w->comm, &req));
        rc_check(w, "iallreduce wait", it, MPI_Wait(&req, MPI_STATUS_IGNORE));
        test_get(o, r, n * sizeof(int));
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
        test_get(o, g, all * sizeof(int));
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
        test_put(r, h, n * sizeof(int));
        rc_check(w, "bcast", it, MPI_Bcast(r, COUNT, MPI_INT, root, w->comm));
        test_get(o, r, n * sizeof(int));
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
        test_get(o, r, n * sizeof(int));
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
        test_put(g, h, all * sizeof(int));
        rc_check(w, "alltoall", it, MPI_Alltoall(g, COUNT, MPI_INT, g2, COUNT, MPI_INT, w->comm));
        test_get(o, g2, all * sizeof(int));
        for (size_t i = 0; i < all; i++) {
            int src = (int)(i / n), want = val(src, w->id, it, rank * n + i % n) + rank * 7;
            if (o[i] != want) {
                report(w, "alltoall", it, i, o[i], want);
                break;
            }
        }
    }
    test_buf_free(s);
    test_buf_free(r);
    test_buf_free(g);
    test_buf_free(g2);
    free(h);
    free(o);
    return NULL;
}

int main(int argc, char **argv)
{
    worker_t w[2] = {{"main", MPI_COMM_NULL, 0, -1, 0}, {"second", MPI_COMM_NULL, 1, -1, 0}};
    pthread_t th;
    const test_flag_t flags[] = {{NULL, NULL}};
    int rc;

    if ((rc = test_args(argc, argv, "test_thread_nodevice", flags)) >= 0 ||
        (rc = test_init(&argc, &argv, "test_thread_nodevice", 1, &rank, &size)) != 0) {
        return rc;
    }
    for (int i = 0; i < 2; i++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &w[i].comm);
        MPI_Comm_set_errhandler(w[i].comm, MPI_ERRORS_RETURN);
    }
    /* the second thread never selects a device */
    pthread_create(&th, NULL, worker, &w[1]);
    worker(&w[0]);
    pthread_join(th, NULL);
    if (test_device) {
        printf("rank %d: the main thread's buffers on GPU %d, the second thread's on GPU %d\n",
               rank, w[0].gpu, w[1].gpu);
    }
    for (int i = 0; i < 2; i++) {
        MPI_Comm_free(&w[i].comm);
    }
    return test_finish(w[0].errors + w[1].errors,
                       "test_thread_nodevice: %d ranks, 2 threads x %d iterations of 6 "
                       "collectives on %s buffers", size, ITERS,
                       test_device ? "device" : "host");
}
