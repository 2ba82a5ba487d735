/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The device-synchronization deadlock cases on real GPUs. Two allreduces A
 * and B are registered on the same ranks; even ranks start A, then
 * synchronize the device, then start B; odd ranks do the same with B first.
 * A stream-ordered library hangs here: each rank's synchronization waits
 * for a collective that needs the other rank's second call. The daemon
 * quits voluntarily when stuck, so the synchronization returns. Two
 * synchronizations are tried: cudaDeviceSynchronize, and the implicit one
 * of cudaMallocHost/cudaFreeHost. Each scenario runs under a timeout.
 */
#include "gpu_common.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SYNC_DEVICE = 0, SYNC_MALLOC_HOST = 1 };

static int g_ndev;

#define N     (1u << 20)
#define ITERS 5

static int device_sync(int mode)
{
    void *p = NULL;

    if (mode == SYNC_DEVICE) {
        return cudaDeviceSynchronize() != cudaSuccess;
    }
    if (cudaMallocHost(&p, 1 << 20) != cudaSuccess) {
        return 1;
    }
    return cudaFreeHost(p) != cudaSuccess;
}

static int rank_main(int rank, int nranks, dfccl_test_oob_t *oob, void *arg)
{
    int mode = *(int *)arg, ids[2], bad = 0;
    float *d[2], *h = malloc(N * sizeof(float));
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    dfccl_stats_t stats;

    DFCCL_TEST_CHECK(h != NULL, "malloc");
    dfccl_gpu_test_setup(rank, nranks, g_ndev, oob, &ctx, &g);
    for (int k = 0; k < 2; k++) {
        DFCCL_TEST_CHECK(dfcclRegisterAllReduce(N, DFCCL_FLOAT32, DFCCL_SUM, g, 0, &ids[k]) ==
                             DFCCL_OK, "register: %s", dfcclGetLastErrorMessage());
        DFCCL_TEST_CHECK(cudaMalloc((void **)&d[k], N * sizeof(float)) == cudaSuccess,
                         "cudaMalloc");
    }
    for (int it = 0; it < ITERS; it++) {
        int first = (rank + it) % 2; /* the order flips between ranks */

        for (int k = 0; k < 2; k++) {
            for (size_t i = 0; i < N; i++) {
                h[i] = (float)((k + 1) * (rank + 1));
            }
            dfccl_test_put(ctx, d[k], h, N * sizeof(float)); /* landed on return */
        }
        dfccl_test_barrier(oob);
        DFCCL_TEST_CHECK(dfcclRunAllReduce(d[first], d[first], ids[first], NULL, NULL, ctx) ==
                             DFCCL_OK, "run: %s", dfcclGetLastErrorMessage());
        DFCCL_TEST_CHECK(device_sync(mode) == 0, "%s failed",
                         mode == SYNC_DEVICE ? "cudaDeviceSynchronize" :
                                               "cudaMallocHost/cudaFreeHost");
        DFCCL_TEST_CHECK(dfcclRunAllReduce(d[1 - first], d[1 - first], ids[1 - first], NULL,
                                           NULL, ctx) == DFCCL_OK, "run: %s",
                         dfcclGetLastErrorMessage());
        for (int k = 0; k < 2; k++) {
            DFCCL_TEST_CHECK(dfcclWait(ids[k], 60000, ctx) == DFCCL_OK, "wait: %s",
                             dfcclGetLastErrorMessage());
        }
        for (int k = 0; k < 2; k++) {
            float want = (float)((k + 1) * nranks * (nranks + 1) / 2);
            DFCCL_TEST_CHECK(cudaMemcpy(h, d[k], N * sizeof(float), cudaMemcpyDeviceToHost) ==
                                 cudaSuccess, "cudaMemcpy");
            for (size_t i = 0; i < N; i++) {
                if (h[i] != want && bad++ < 5) {
                    fprintf(stderr, "rank %d it %d: coll %d [%zu] = %g, want %g\n", rank, it,
                            k, i, h[i], want);
                }
            }
        }
    }
    dfcclGetStats(ctx, &stats);
    if (rank == 0) {
        printf("%s: %d ranks, %d iterations: no deadlock; rank 0: %llu launches, %llu quits, "
               "%llu preemptions\n", mode == SYNC_DEVICE ? "cudaDeviceSynchronize" :
               "cudaMallocHost/cudaFreeHost", nranks, ITERS,
               (unsigned long long)stats.launches, (unsigned long long)stats.quits,
               (unsigned long long)stats.preemptions);
    }
    for (int k = 0; k < 2; k++) {
        dfcclDeregister(ids[k], ctx);
        cudaFree(d[k]);
    }
    dfcclGroupDestroy(g);
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy: %s", dfcclGetLastErrorMessage());
    free(h);
    return bad != 0;
}

int main(void)
{
    int nranks = dfccl_gpu_test_nranks(2), rc = 0;

    g_ndev = dfccl_gpu_test_ndev();
    if (g_ndev == 0) {
        printf("no GPU visible: skipped\n");
        return DFCCL_GPU_TEST_SKIP;
    }
    for (int mode = SYNC_DEVICE; mode <= SYNC_MALLOC_HOST; mode++) {
        if (dfccl_test_mp_run(nranks, 120, rank_main, &mode) != 0) {
            fprintf(stderr, "%s between collectives: FAILED\n",
                    mode == SYNC_DEVICE ? "cudaDeviceSynchronize" : "cudaMallocHost");
            rc = 1;
        }
    }
    return rc;
}
