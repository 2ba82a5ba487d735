/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The dfccl deadlock demo (native API), meant for 4 ranks:
 *   mpirun -np 4 examples/demo [iterations]
 * MPI only bootstraps the group (MPI_Allgather as dfccl's out-of-band
 * allgather); every collective runs through libdfccl.
 *
 * Part 1: every rank invokes the same 8 collectives (allreduce, allgather,
 * reduce-scatter, reduce, broadcast) in its own random order, iteration
 * after iteration. A stream-ordered library (NCCL) hangs on the first
 * iteration: each GPU spins in the collective it was given first.
 * Part 2: ranks invoke two collectives in opposite orders with a device
 * synchronization in between (cudaDeviceSynchronize on GPUs). With NCCL the
 * synchronization never returns: it waits for a kernel that waits for a
 * peer, which is itself waiting in its own synchronization.
 * dfccl completes both: the daemon preempts the stuck collective, and quits
 * voluntarily so that the synchronization can finish.
 *
 * It runs on GPUs when dfccl was built with CUDA and a GPU is visible, on
 * the host backend otherwise (DFCCL_BACKEND=host forces it).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dfccl.h"
#ifdef HAVE_CUDART
#include <cuda_runtime_api.h>
#endif

#define NCOLL 8
#define COUNT (256 * 1024) /* float elements per rank and collective */

typedef struct {
    int  kind; /* 0 allreduce, 1 allgather, 2 reduce-scatter, 3 reduce, 4 broadcast */
    int  id;
    float *send, *recv;
    size_t sendn, recvn;
    const char *name;
} coll_t;

static int on_gpu;

static int oob_allgather(const void *sendbuf, void *recvbuf, size_t bytes, void *arg)
{
    return MPI_Allgather(sendbuf, (int)bytes, MPI_BYTE, recvbuf, (int)bytes, MPI_BYTE,
                         *(MPI_Comm *)arg) == MPI_SUCCESS ? 0 : -1;
}

static void *dev_alloc(size_t bytes)
{
    void *p = NULL;
#ifdef HAVE_CUDART
    if (on_gpu) {
        return cudaMalloc(&p, bytes) == cudaSuccess ? p : NULL;
    }
#endif
    p = malloc(bytes);
    return p;
}

static void copy(void *dst, const void *src, size_t bytes)
{
#ifdef HAVE_CUDART
    if (on_gpu) {
        /* cudaMemcpy from pageable memory may return before the data has
         * landed; dfccl's daemon is not ordered after it: wait for it */
        cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
        cudaStreamSynchronize(cudaStreamLegacy);
        return;
    }
#endif
    memcpy(dst, src, bytes);
}

static void device_synchronize(dfccl_rank_ctx_t ctx)
{
#ifdef HAVE_CUDART
    if (on_gpu) {
        cudaDeviceSynchronize(); /* the real thing */
        return;
    }
#endif
    dfcclSynchronize(ctx); /* host backend: waits until no daemon block runs */
}

static dfccl_status_t run(dfccl_rank_ctx_t ctx, coll_t *c)
{
    switch (c->kind) {
    case 0: return dfcclRunAllReduce(c->send, c->recv, c->id, NULL, NULL, ctx);
    case 1: return dfcclRunAllGather(c->send, c->recv, c->id, NULL, NULL, ctx);
    case 2: return dfcclRunReduceScatter(c->send, c->recv, c->id, NULL, NULL, ctx);
    case 3: return dfcclRunReduce(c->send, c->recv, c->id, NULL, NULL, ctx);
    default: return dfcclRunBroadcast(c->send, c->recv, c->id, NULL, NULL, ctx);
    }
}

/* Every rank r contributes r + 1 + (i % 3): check the result of c. */
static int verify(coll_t *c, int rank, int n, float *host)
{
    copy(host, c->recv, c->recvn * sizeof(float));
    for (size_t i = 0; i < c->recvn; i++) {
        float e;
        size_t gi = c->kind == 2 ? (size_t)rank * c->recvn + i : i;
        switch (c->kind) {
        case 1: e = (float)((int)(i / COUNT) + 1 + (int)((i % COUNT) % 3)); break;
        case 3: if (rank != 0) return 0; /* fall through: root 0 */
        /* fallthrough */
        case 0:
        case 2: e = (float)(n * (n + 1) / 2 + n * (int)(gi % 3)); break;
        default: e = (float)(1 + (int)(i % 3)); break; /* root 0's data */
        }
        if (host[i] != e) {
            fprintf(stderr, "rank %d: %s: element %zu is %g, expected %g\n", rank, c->name, i,
                    host[i], e);
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const char *names[] = {"allreduce", "allgather", "reduce-scatter", "reduce",
                                  "broadcast"};
    int kinds[NCOLL] = {0, 0, 1, 2, 3, 4, 0, 1};
    int rank, n, iters = argc > 1 ? atoi(argv[1]) : 20, order[NCOLL], wrong = 0;
    MPI_Comm comm = MPI_COMM_WORLD;
    dfccl_rank_ctx_t ctx;
    dfccl_group_t group;
    dfccl_stats_t st;
    coll_t c[NCOLL];
    float *host;
    unsigned seed;
    double t0, t1, t2;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    seed = 1000u + (unsigned)rank * 7919u;

#ifdef HAVE_CUDART
    {
        int ndev = 0;
        const char *be = getenv("DFCCL_BACKEND");
        if ((be == NULL || strcmp(be, "host") != 0) && cudaGetDeviceCount(&ndev) == cudaSuccess &&
            ndev > 0) {
            cudaSetDevice(rank % ndev); /* dfccl uses the current device */
            on_gpu = 1;
        }
    }
#endif
    if (!on_gpu) {
        setenv("DFCCL_BACKEND", "host", 0);
    }
    if (dfcclInit(NULL, &ctx) != DFCCL_OK ||
        dfcclGroupCreate(ctx, n, rank, oob_allgather, &comm, "MPI_COMM_WORLD", &group) !=
            DFCCL_OK) {
        fprintf(stderr, "rank %d: dfccl setup failed: %s\n", rank, dfcclGetLastErrorMessage());
        MPI_Abort(comm, 1);
    }
    host = malloc((size_t)COUNT * n * sizeof(float));
    for (int k = 0; k < NCOLL; k++) {
        dfccl_status_t s;
        c[k].kind  = kinds[k];
        c[k].name  = names[kinds[k]];
        c[k].sendn = kinds[k] == 2 ? (size_t)COUNT * n : COUNT;
        c[k].recvn = kinds[k] == 1 ? (size_t)COUNT * n : COUNT;
        switch (kinds[k]) {
        case 0: s = dfcclRegisterAllReduce(COUNT, DFCCL_FLOAT32, DFCCL_SUM, group, 0, &c[k].id); break;
        case 1: s = dfcclRegisterAllGather(COUNT, DFCCL_FLOAT32, group, 0, &c[k].id); break;
        case 2: s = dfcclRegisterReduceScatter(COUNT, DFCCL_FLOAT32, DFCCL_SUM, group, 0, &c[k].id); break;
        case 3: s = dfcclRegisterReduce(COUNT, DFCCL_FLOAT32, DFCCL_SUM, 0, group, 0, &c[k].id); break;
        default: s = dfcclRegisterBroadcast(COUNT, DFCCL_FLOAT32, 0, group, 0, &c[k].id); break;
        }
        if (s != DFCCL_OK) {
            fprintf(stderr, "rank %d: register: %s\n", rank, dfcclGetLastErrorMessage());
            MPI_Abort(comm, 1);
        }
        c[k].send = dev_alloc(c[k].sendn * sizeof(float));
        c[k].recv = dev_alloc(c[k].recvn * sizeof(float));
        for (size_t i = 0; i < c[k].sendn; i++) {
            host[i] = (float)(rank + 1 + (int)(i % 3));
        }
        copy(c[k].send, host, c[k].sendn * sizeof(float));
        order[k] = k;
    }
    if (rank == 0) {
        printf("dfccl demo: %d ranks on the %s backend, %d collectives of %d floats per rank\n",
               n, on_gpu ? "CUDA" : "host", NCOLL, COUNT);
    }

    /* Part 1: the same 8 collectives, a different random order per rank */
    MPI_Barrier(comm);
    t0 = MPI_Wtime();
    for (int it = 0; it < iters; it++) {
        for (int k = NCOLL - 1; k > 0; k--) {
            int j = (int)(rand_r(&seed) % (unsigned)(k + 1)), t = order[k];
            order[k] = order[j];
            order[j] = t;
        }
        if (it == 0) {
            printf("rank %d invokes:", rank);
            for (int k = 0; k < NCOLL; k++) {
                printf(" %d:%s", order[k], c[order[k]].name);
            }
            printf("\n");
            fflush(stdout);
        }
        for (int k = 0; k < NCOLL; k++) {
            if (run(ctx, &c[order[k]]) != DFCCL_OK) {
                fprintf(stderr, "rank %d: run: %s\n", rank, dfcclGetLastErrorMessage());
                MPI_Abort(comm, 1);
            }
        }
        for (int k = 0; k < NCOLL; k++) {
            if (dfcclWait(c[k].id, 120000, ctx) != DFCCL_OK) {
                fprintf(stderr, "rank %d: wait: %s\n", rank, dfcclGetLastErrorMessage());
                MPI_Abort(comm, 1);
            }
        }
    }
    t1 = MPI_Wtime();
    for (int k = 0; k < NCOLL; k++) {
        wrong += verify(&c[k], rank, n, host);
    }

    /* Part 2: opposite orders with a device synchronization in between */
    for (int it = 0; it < 3; it++) {
        coll_t *first = rank % 2 ? &c[1] : &c[0], *second = rank % 2 ? &c[0] : &c[1];
        run(ctx, first);
        device_synchronize(ctx);
        run(ctx, second);
        if (dfcclWait(c[0].id, 120000, ctx) != DFCCL_OK ||
            dfcclWait(c[1].id, 120000, ctx) != DFCCL_OK) {
            fprintf(stderr, "rank %d: wait: %s\n", rank, dfcclGetLastErrorMessage());
            MPI_Abort(comm, 1);
        }
    }
    t2 = MPI_Wtime();
    wrong += verify(&c[0], rank, n, host) + verify(&c[1], rank, n, host);

    dfcclGetStats(ctx, &st);
    printf("rank %d: part 1: %d iterations of 8 disordered collectives in %.3f s; part 2: 3 "
           "synchronized opposite-order pairs in %.3f s; results %s; preemptions %llu, "
           "voluntary quits %llu, daemon launches %llu\n", rank, iters, t1 - t0, t2 - t1,
           wrong ? "WRONG" : "correct", (unsigned long long)st.preemptions,
           (unsigned long long)st.quits, (unsigned long long)st.launches);
    fflush(stdout);
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_INT, MPI_SUM, comm);
    if (rank == 0) {
        printf("dfccl demo: %s\n", wrong ? "FAILED: wrong results" :
                                           "all collectives completed with correct results");
    }
    for (int k = 0; k < NCOLL; k++) {
        dfcclDeregister(c[k].id, ctx);
    }
    dfcclGroupDestroy(group);
    dfcclDestroy(ctx);
    free(host);
    MPI_Finalize();
    return wrong ? 1 : 0;
}
