/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Correctness of collectives on device buffers with the CUDA backend: ranks
 * (2 by default, DFCCL_TEST_NRANKS) on GPUs rank % ndev run allreduce
 * (float sum, out of place and in place; int32 max), allgather,
 * reduce-scatter (float sum, in place) and broadcast over sizes from one element to 16 Mi elements (at most
 * DFCCL_TEST_MAX_COUNT, for runs under compute-sanitizer), each a few times
 * so that connectors are reused, and compare every element with the exact
 * expected value.
 */
#include "gpu_common.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_ndev;

#define WAIT_MS 60000

static int check_cuda(cudaError_t e, const char *what, int rank)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "rank %d: %s: %s\n", rank, what, cudaGetErrorString(e));
        return 1;
    }
    return 0;
}

/* Allreduce of `n` floats, sum; values are small integers, so exact. */
static int run_allreduce_f32(dfccl_rank_ctx_t ctx, dfccl_group_t g, int rank, int nranks,
                             size_t n, int in_place)
{
    float *h = malloc(n * sizeof(float)), *d_in = NULL, *d_out = NULL;
    int id, bad = 0;

    DFCCL_TEST_CHECK(h != NULL, "malloc");
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(n, DFCCL_FLOAT32, DFCCL_SUM, g, 0, &id) == DFCCL_OK,
                     "register %zu: %s", n, dfcclGetLastErrorMessage());
    if (check_cuda(cudaMalloc((void **)&d_in, n * sizeof(float)), "cudaMalloc", rank) ||
        check_cuda(cudaMalloc((void **)&d_out, n * sizeof(float)), "cudaMalloc", rank)) {
        return 1;
    }
    for (int it = 0; it < 3; it++) {
        for (size_t i = 0; i < n; i++) {
            h[i] = (float)((rank + 1) * (int)((i + (size_t)it) % 13));
        }
        dfccl_test_put(ctx, d_in, h, n * sizeof(float)); /* landed on return */
        if (in_place) {
            DFCCL_TEST_CHECK(dfcclRunAllReduce(d_in, d_in, id, NULL, NULL, ctx) == DFCCL_OK,
                             "run: %s", dfcclGetLastErrorMessage());
        } else {
            DFCCL_TEST_CHECK(dfcclRunAllReduce(d_in, d_out, id, NULL, NULL, ctx) == DFCCL_OK,
                             "run: %s", dfcclGetLastErrorMessage());
        }
        DFCCL_TEST_CHECK(dfcclWait(id, WAIT_MS, ctx) == DFCCL_OK, "allreduce of %zu floats "
                         "did not complete: %s", n, dfcclGetLastErrorMessage());
        if (check_cuda(cudaMemcpy(h, in_place ? d_in : d_out, n * sizeof(float),
                                  cudaMemcpyDeviceToHost), "cudaMemcpy", rank)) {
            return 1;
        }
        for (size_t i = 0; i < n; i++) {
            float want = (float)(nranks * (nranks + 1) / 2 * (int)((i + (size_t)it) % 13));
            if (h[i] != want && bad++ < 5) {
                fprintf(stderr, "rank %d: allreduce n=%zu%s it %d: [%zu] = %g, want %g\n",
                        rank, n, in_place ? " in place" : "", it, i, h[i], want);
            }
        }
    }
    DFCCL_TEST_CHECK(dfcclDeregister(id, ctx) == DFCCL_OK, "deregister");
    cudaFree(d_in);
    cudaFree(d_out);
    free(h);
    return bad != 0;
}

/* Run collective `id` in place on device buffer d: put `put_bytes` of h
 * there, run it with `run` (dfcclRunAllReduce or dfcclRunReduceScatter),
 * wait, and copy its first `get_bytes` back into h. `what` names it in the
 * messages. Nonzero on failure. */
static int run_in_place(dfccl_rank_ctx_t ctx, int rank, int id,
                        dfccl_status_t (*run)(const void *, void *, int, dfccl_callback_t,
                                              void *, dfccl_rank_ctx_t),
                        void *d, void *h, size_t put_bytes, size_t get_bytes, const char *what)
{
    dfccl_test_put(ctx, d, h, put_bytes);
    DFCCL_TEST_CHECK(run(d, d, id, NULL, NULL, ctx) == DFCCL_OK, "run");
    DFCCL_TEST_CHECK(dfcclWait(id, WAIT_MS, ctx) == DFCCL_OK, "%s did not complete", what);
    return check_cuda(cudaMemcpy(h, d, get_bytes, cudaMemcpyDeviceToHost), "memcpy", rank);
}

static int run_allreduce_i32_max(dfccl_rank_ctx_t ctx, dfccl_group_t g, int rank, int nranks,
                                 size_t n)
{
    int32_t *h = malloc(n * sizeof(int32_t)), *d = NULL;
    int id, bad = 0;

    DFCCL_TEST_CHECK(h != NULL, "malloc");
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(n, DFCCL_INT32, DFCCL_MAX, g, 0, &id) == DFCCL_OK,
                     "register: %s", dfcclGetLastErrorMessage());
    for (size_t i = 0; i < n; i++) {
        h[i] = (int32_t)((i * 7 + (size_t)rank * 3) % 101) - 50;
    }
    if (check_cuda(cudaMalloc((void **)&d, n * sizeof(int32_t)), "cudaMalloc", rank)) {
        return 1;
    }
    if (run_in_place(ctx, rank, id, dfcclRunAllReduce, d, h, n * sizeof(int32_t),
                     n * sizeof(int32_t), "int32 max")) {
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        int32_t want = -1000;
        for (int r = 0; r < nranks; r++) {
            int32_t v = (int32_t)((i * 7 + (size_t)r * 3) % 101) - 50;
            want      = v > want ? v : want;
        }
        if (h[i] != want && bad++ < 5) {
            fprintf(stderr, "rank %d: int32 max n=%zu: [%zu] = %d, want %d\n", rank, n, i,
                    h[i], want);
        }
    }
    dfcclDeregister(id, ctx);
    cudaFree(d);
    free(h);
    return bad != 0;
}

/* Allgather of n floats per rank, then broadcast of n floats from the last
 * rank. */
static int run_allgather_bcast(dfccl_rank_ctx_t ctx, dfccl_group_t g, int rank, int nranks,
                               size_t n)
{
    size_t total = n * (size_t)nranks;
    float *h = malloc(total * sizeof(float)), *d_in = NULL, *d_out = NULL;
    int ag, bc, bad = 0, root = nranks - 1;

    DFCCL_TEST_CHECK(h != NULL, "malloc");
    DFCCL_TEST_CHECK(dfcclRegisterAllGather(n, DFCCL_FLOAT32, g, 0, &ag) == DFCCL_OK,
                     "register allgather: %s", dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(dfcclRegisterBroadcast(n, DFCCL_FLOAT32, root, g, 0, &bc) == DFCCL_OK,
                     "register broadcast: %s", dfcclGetLastErrorMessage());
    for (size_t i = 0; i < n; i++) {
        h[i] = (float)(rank * 1000 + (int)(i % 997));
    }
    if (check_cuda(cudaMalloc((void **)&d_in, n * sizeof(float)), "cudaMalloc", rank) ||
        check_cuda(cudaMalloc((void **)&d_out, total * sizeof(float)), "cudaMalloc", rank)) {
        return 1;
    }
    dfccl_test_put(ctx, d_in, h, n * sizeof(float));
    DFCCL_TEST_CHECK(dfcclRunAllGather(d_in, d_out, ag, NULL, NULL, ctx) == DFCCL_OK, "run");
    DFCCL_TEST_CHECK(dfcclWait(ag, WAIT_MS, ctx) == DFCCL_OK, "allgather did not complete");
    if (check_cuda(cudaMemcpy(h, d_out, total * sizeof(float), cudaMemcpyDeviceToHost),
                   "memcpy", rank)) {
        return 1;
    }
    for (size_t i = 0; i < total; i++) {
        float want = (float)((int)(i / n) * 1000 + (int)((i % n) % 997));
        if (h[i] != want && bad++ < 5) {
            fprintf(stderr, "rank %d: allgather n=%zu: [%zu] = %g, want %g\n", rank, n, i,
                    h[i], want);
        }
    }
    DFCCL_TEST_CHECK(dfcclRunBroadcast(d_in, d_in, bc, NULL, NULL, ctx) == DFCCL_OK, "run");
    DFCCL_TEST_CHECK(dfcclWait(bc, WAIT_MS, ctx) == DFCCL_OK, "broadcast did not complete");
    if (check_cuda(cudaMemcpy(h, d_in, n * sizeof(float), cudaMemcpyDeviceToHost), "memcpy",
                   rank)) {
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        float want = (float)(root * 1000 + (int)(i % 997));
        if (h[i] != want && bad++ < 5) {
            fprintf(stderr, "rank %d: broadcast n=%zu: [%zu] = %g, want %g\n", rank, n, i,
                    h[i], want);
        }
    }
    dfcclDeregister(ag, ctx);
    dfcclDeregister(bc, ctx);
    cudaFree(d_in);
    cudaFree(d_out);
    free(h);
    return bad != 0;
}

/* Reduce-scatter of n floats per rank, in place: the input (n per rank,
 * nranks of them) and the output (its first n) share one buffer. */
static int run_reducescatter(dfccl_rank_ctx_t ctx, dfccl_group_t g, int rank, int nranks,
                             size_t n)
{
    size_t total = n * (size_t)nranks;
    float *h = malloc(total * sizeof(float)), *d = NULL;
    int id, bad = 0;

    DFCCL_TEST_CHECK(h != NULL, "malloc");
    DFCCL_TEST_CHECK(dfcclRegisterReduceScatter(n, DFCCL_FLOAT32, DFCCL_SUM, g, 0, &id) ==
                         DFCCL_OK,
                     "register reduce-scatter: %s", dfcclGetLastErrorMessage());
    for (size_t j = 0; j < total; j++) {
        h[j] = (float)((j * 3 + (size_t)rank * 5) % 61);
    }
    if (check_cuda(cudaMalloc((void **)&d, total * sizeof(float)), "cudaMalloc", rank)) {
        return 1;
    }
    if (run_in_place(ctx, rank, id, dfcclRunReduceScatter, d, h, total * sizeof(float),
                     n * sizeof(float), "reduce-scatter")) {
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        const size_t j = (size_t)rank * n + i;
        float want     = 0;
        for (int r = 0; r < nranks; r++) {
            want += (float)((j * 3 + (size_t)r * 5) % 61);
        }
        if (h[i] != want && bad++ < 5) {
            fprintf(stderr, "rank %d: reduce-scatter n=%zu: [%zu] = %g, want %g\n", rank, n,
                    i, h[i], want);
        }
    }
    dfcclDeregister(id, ctx);
    cudaFree(d);
    free(h);
    return bad != 0;
}

static int rank_main(int rank, int nranks, dfccl_test_oob_t *oob, void *arg)
{
    static const size_t sizes[] = {1, 7, 4096, 65536 + 5, (1u << 20) + 3, 16u << 20};
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    int rc = 0;

    const char *max_env = getenv("DFCCL_TEST_MAX_COUNT");
    size_t max_count    = max_env != NULL ? strtoull(max_env, NULL, 0) : ~(size_t)0;

    dfccl_gpu_test_setup(rank, nranks, g_ndev, oob, &ctx, &g);
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]) && rc == 0; s++) {
        if (sizes[s] > max_count) {
            break;
        }
        rc |= run_allreduce_f32(ctx, g, rank, nranks, sizes[s], 0);
        rc |= run_allreduce_f32(ctx, g, rank, nranks, sizes[s], 1);
        if (sizes[s] <= (1u << 20) + 3) {
            rc |= run_allreduce_i32_max(ctx, g, rank, nranks, sizes[s]);
            rc |= run_allgather_bcast(ctx, g, rank, nranks, sizes[s]);
            rc |= run_reducescatter(ctx, g, rank, nranks, sizes[s]);
        }
    }
    DFCCL_TEST_CHECK(dfcclGroupDestroy(g) == DFCCL_OK, "group destroy: %s",
                     dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy: %s", dfcclGetLastErrorMessage());
    if (rc == 0 && rank == 0) {
        printf("%d ranks on %d GPU(s): collectives on device buffers correct\n", nranks,
               g_ndev);
    }
    return rc;
}

int main(void)
{
    int nranks = dfccl_gpu_test_nranks(2);

    g_ndev = dfccl_gpu_test_ndev();
    if (g_ndev == 0) {
        printf("no GPU visible: skipped\n");
        return DFCCL_GPU_TEST_SKIP;
    }
    return dfccl_test_mp_run(nranks, 300, rank_main, NULL) == 0 ? 0 : 1;
}
