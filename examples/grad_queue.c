/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Gradient queuing (C-Cube) with partial completion, native API:
 *   mpirun -np 2 examples/grad_queue [steps] [work]
 * MPI only bootstraps the group; the allreduce runs through libdfccl.
 *
 * A data-parallel training step of a model of NLAYERS layers whose
 * gradients lie in one buffer, layer 0 first. Each step allreduces the
 * gradients and then updates every layer's parameters (momentum SGD; `work`
 * repeats the update's arithmetic, standing for a costlier optimizer). It
 * runs the step twice, on separate copies of the parameters:
 *
 *   whole:  wait for the whole allreduce, then update the layers;
 *   queued: update layer k as soon as its bytes of the allreduce are final
 *           (dfcclQueryRange on the host backend; on GPUs a consumer kernel
 *           that polls the progress words, dfcclPartialReady), while the
 *           rest of the allreduce goes on.
 *
 * It prints both times per step and their ratio, and checks that both
 * copies of the parameters end up the same. It runs on GPUs when dfccl was
 * built with CUDA (and nvcc, for the consumer kernel) and a GPU is
 * visible, on the host backend otherwise (DFCCL_BACKEND=host forces it).
 * DFCCL_ALGO picks the allreduce's algorithm: ring (the default policy's
 * for these sizes), ctree and tree complete in order; the others complete
 * as a whole, so queuing gains nothing there.
 */
#include <math.h>
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dfccl.h"
#include "example_util.h"
#include "grad_queue.h"

static const size_t layer_elems[NLAYERS] = {96 << 10, 192 << 10, 256 << 10, 256 << 10,
                                            320 << 10, 256 << 10, 192 << 10, 96 << 10};

static int on_gpu;

static int oob_allgather(const void *sendbuf, void *recvbuf, size_t bytes, void *arg)
{
    return MPI_Allgather(sendbuf, (int)bytes, MPI_BYTE, recvbuf, (int)bytes, MPI_BYTE,
                         *(MPI_Comm *)arg) == MPI_SUCCESS ? 0 : -1;
}

static void die(int rank, const char *what)
{
    fprintf(stderr, "rank %d: %s: %s\n", rank, what, dfcclGetLastErrorMessage());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Layer k's elements on the host: the update both modes run. */
static void update_layer(const gq_model_t *m, int k, const float *grad, float *param,
                         float *mom)
{
    gq_update_range(m, grad, param, mom, m->off[k], m->off[k] + m->elems[k]);
}

/* One step on the host backend; returns its seconds, and (queued) when
 * layer 0 was final in *first_p. */
static double step_host(dfccl_rank_ctx_t ctx, int id, const gq_model_t *m, const float *g,
                        float *r, float *param, float *mom, int queued, int rank,
                        double *first_p)
{
    const double t0 = MPI_Wtime();

    if (dfcclRunAllReduce(g, r, id, NULL, NULL, ctx) != DFCCL_OK) {
        die(rank, "run");
    }
    if (!queued && dfcclWait(id, -1, ctx) != DFCCL_OK) {
        die(rank, "wait");
    }
    for (int k = 0; k < NLAYERS; k++) {
        if (queued) {
            /* layer k once its bytes are final (its channel has passed
             * it, whatever the channels before it have done) */
            const size_t off = m->off[k] * sizeof(float), bytes = m->elems[k] * sizeof(float);
            size_t ready     = 0;
            dfccl_status_t st;

            while ((st = dfcclQueryRange(id, off, ctx, &ready)) == DFCCL_INPROGRESS &&
                   ready < bytes) {
                sched_yield(); /* the daemon's threads may share this core */
            }
            if (st < 0) {
                die(rank, "dfcclQueryRange");
            }
            if (k == 0) {
                *first_p = MPI_Wtime() - t0;
            }
        }
        update_layer(m, k, r, param, mom);
    }
    if (queued && dfcclWait(id, -1, ctx) != DFCCL_OK) {
        die(rank, "wait");
    }
    return MPI_Wtime() - t0;
}

#ifdef GQ_KERNEL
/* One step on a GPU: the consumer kernel updates each layer once the
 * progress words say its bytes are final (queued), or after the wait
 * (whole: the words say so already). Returns its seconds. */
static double step_gpu(dfccl_rank_ctx_t ctx, int id, const gq_model_t *m, const float *g,
                       float *r, float *param, float *mom, int queued, int rank,
                       void *stream)
{
    const double t0 = MPI_Wtime();
    dfccl_partial_t p;
    int failed = 0;

    if (dfcclRunAllReduce(g, r, id, NULL, NULL, ctx) != DFCCL_OK ||
        dfcclGetProgress(id, ctx, &p) != DFCCL_OK) {
        die(rank, "run");
    }
    if (!queued && dfcclWait(id, -1, ctx) != DFCCL_OK) {
        die(rank, "wait");
    }
    if (gq_launch_update(&p, m, r, param, mom, stream) != 0 ||
        gq_finish(stream, &failed) != 0 || failed) {
        fprintf(stderr, "rank %d: the consumer kernel failed%s\n", rank,
                failed ? " (a layer's bytes never came)" : "");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (queued && dfcclWait(id, -1, ctx) != DFCCL_OK) {
        die(rank, "wait");
    }
    return MPI_Wtime() - t0;
}
#endif

static void *buf_alloc(size_t bytes)
{
#ifdef HAVE_CUDART
    if (on_gpu) {
        void *p = NULL;
        return cudaMalloc(&p, bytes) == cudaSuccess && cudaMemset(p, 0, bytes) == cudaSuccess
                   ? p
                   : NULL;
    }
#endif
    return calloc(1, bytes);
}

static void buf_put(void *dst, const void *src, size_t bytes)
{
#ifdef HAVE_CUDART
    if (on_gpu) {
        cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
        cudaStreamSynchronize(cudaStreamLegacy); /* see dfcclRunAllReduce */
        return;
    }
#endif
    memcpy(dst, src, bytes);
}

int main(int argc, char **argv)
{
    MPI_Comm comm = MPI_COMM_WORLD;
    int rank, n, steps, id, worse = 0;
    dfccl_rank_ctx_t ctx;
    dfccl_group_t group;
    dfccl_coll_info_t info;
    dfccl_partial_t p;
    gq_model_t m;
    float *h, *g, *r, *pw, *mw, *pq, *mq;
    double sum[3] = {0, 0, 0};
    size_t total = 0;
#ifdef GQ_KERNEL
    cudaStream_t stream = NULL; /* the consumer kernel's */
#endif

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    steps = argc > 1 ? atoi(argv[1]) : 10;
    memset(&m, 0, sizeof(m));
    m.work = argc > 2 ? atoi(argv[2]) : 8;
    m.lr   = 0.01f;
    m.inv_n = 1.0f / (float)n;
    for (int k = 0; k < NLAYERS; k++) {
        m.off[k]   = total;
        m.elems[k] = layer_elems[k];
        total += layer_elems[k];
    }
#if defined(HAVE_CUDART) && defined(GQ_KERNEL)
    {
        const char *be = getenv("DFCCL_BACKEND");
        /* dfccl uses the current device */
        if ((be == NULL || strcmp(be, "host") != 0) && select_device()) {
            cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
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
        die(rank, "dfccl setup");
    }
    if (dfcclRegisterAllReduce(total, DFCCL_FLOAT32, DFCCL_SUM, group, 0, &id) != DFCCL_OK ||
        dfcclGetCollInfo(id, ctx, &info) != DFCCL_OK || dfcclGetProgress(id, ctx, &p) != DFCCL_OK) {
        die(rank, "register");
    }
    h  = malloc(total * sizeof(float));
    g  = buf_alloc(total * sizeof(float));
    r  = buf_alloc(total * sizeof(float));
    pw = buf_alloc(total * sizeof(float));
    mw = buf_alloc(total * sizeof(float));
    pq = buf_alloc(total * sizeof(float));
    mq = buf_alloc(total * sizeof(float));
    if (h == NULL || g == NULL || r == NULL || pw == NULL || mw == NULL || pq == NULL ||
        mq == NULL) {
        fprintf(stderr, "rank %d: out of memory\n", rank);
        MPI_Abort(comm, 1);
    }
    for (size_t i = 0; i < total; i++) {
        h[i] = 1.0f;
    }
    buf_put(pw, h, total * sizeof(float));
    buf_put(pq, h, total * sizeof(float));
    if (rank == 0) {
        printf("gradient queuing: %d ranks on the %s backend, %s allreduce of %zu floats "
               "(%d layers, %d channel(s), %s), update work %d\n",
               n, on_gpu ? "CUDA" : "host", info.algo, total, NLAYERS, info.nchannels,
               p.whole_only ? "whole only" : "completes in order", m.work);
        if (!p.whole_only) {
            printf("  a channel's final part grows by %zu bytes at a time\n", p.granularity);
        }
    }

    for (int s = 0; s < steps; s++) {
        double t[3] = {0, 0, 0}; /* whole, queued, layer 0 final (host) */

        for (size_t i = 0; i < total; i++) { /* this step's gradients */
            h[i] = (float)((i * 7 + (size_t)s * 13 + (size_t)rank) % 101) * 0.01f;
        }
        buf_put(g, h, total * sizeof(float));
        for (int queued = 0; queued < 2; queued++) {
            MPI_Barrier(comm);
#ifdef GQ_KERNEL
            if (on_gpu) {
                t[queued] = step_gpu(ctx, id, &m, g, r, queued ? pq : pw, queued ? mq : mw,
                                     queued, rank, stream);
                continue;
            }
#endif
            t[queued] = step_host(ctx, id, &m, g, r, queued ? pq : pw, queued ? mq : mw, queued,
                                  rank, &t[2]);
        }
        MPI_Allreduce(MPI_IN_PLACE, t, 3, MPI_DOUBLE, MPI_MAX, comm);
        /* the first step's whole run also pays the collective's first
         * launch and resolution: the mean leaves it out */
        for (int i = 0; i < 3 && (s > 0 || steps == 1); i++) {
            sum[i] += t[i];
        }
        if (rank == 0) {
            printf("step %d: whole %.3f ms, queued %.3f ms, whole/queued %.2f", s, t[0] * 1e3,
                   t[1] * 1e3, t[0] / t[1]);
            if (!on_gpu) {
                printf(" (queued: layer 0 final after %.3f ms)", t[2] * 1e3);
            }
            printf("\n");
        }
    }

    /* both modes ran the same updates on the same gradients */
    {
        float *a = malloc(total * sizeof(float)), *b = malloc(total * sizeof(float));
#ifdef HAVE_CUDART
        if (on_gpu) {
            cudaMemcpy(a, pw, total * sizeof(float), cudaMemcpyDefault);
            cudaMemcpy(b, pq, total * sizeof(float), cudaMemcpyDefault);
        } else
#endif
        {
            memcpy(a, pw, total * sizeof(float));
            memcpy(b, pq, total * sizeof(float));
        }
        for (size_t i = 0; i < total; i++) {
            if (a[i] != b[i] || !isfinite(a[i])) {
                fprintf(stderr, "rank %d: parameter %zu: %g after whole steps, %g after "
                        "queued ones\n", rank, i, a[i], b[i]);
                worse = 1;
                break;
            }
        }
        free(a);
        free(b);
    }
    MPI_Allreduce(MPI_IN_PLACE, &worse, 1, MPI_INT, MPI_MAX, comm);
    if (rank == 0 && steps > 0) {
        const int counted = steps > 1 ? steps - 1 : 1;
        printf("mean over %d step(s)%s: whole %.3f ms, queued %.3f ms, whole/queued %.2f; "
               "parameters %s\n", counted, steps > 1 ? " after the first" : "",
               sum[0] / counted * 1e3, sum[1] / counted * 1e3, sum[0] / sum[1],
               worse ? "DIFFER" : "the same");
        if (!on_gpu) {
            printf("queued: layer 0 was final after %.3f ms on average\n",
                   sum[2] / counted * 1e3);
        }
    }
    if (dfcclDeregister(id, ctx) != DFCCL_OK || dfcclDestroy(ctx) != DFCCL_OK) {
        die(rank, "teardown");
    }
    MPI_Finalize();
    return worse;
}
