/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A CUDA program that resets its device before MPI_Finalize, as CUDA's
 * samples end (cudaDeviceReset, so that profilers flush): allreduces on
 * device buffers through dfccl, a check of their results, cudaFree, the
 * reset, a pause in which dfccl's progress thread runs, then MPI_Finalize
 * must return. The reset frees every CUDA allocation dfccl made, the
 * queues it shares with its daemon included: finalizing must not touch
 * them. The sums are checked before the reset; the exit status is 0 only
 * if every rank finalized with no failure. GPU builds only (--device).
 */
#include <stdlib.h>
#include <time.h>
#include "test_util.h"

int main(int argc, char **argv)
{
    const size_t count = 1 << 16;
    int rank, size, rc, failures = 0, total = 0;
    float *host, *buf;

    rc = test_args(argc, argv, "test_devreset", NULL);
    if (rc >= 0) {
        return rc;
    }
    if (!test_device) {
        fprintf(stderr, "test_devreset: needs --device (a GPU build)\n");
        return 2;
    }
    rc = test_init(&argc, &argv, "test_devreset", 0, &rank, &size);
    if (rc != 0) {
        return rc;
    }
    host = malloc(count * sizeof(float));
    buf  = test_buf_new(count * sizeof(float));
    for (int it = 0; it < 10; it++) {
        for (size_t i = 0; i < count; i++) {
            host[i] = (float)(rank + 1 + it);
        }
        test_put(buf, host, count * sizeof(float));
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        test_get(host, buf, count * sizeof(float));
        for (size_t i = 0; i < count; i++) {
            if (host[i] != (float)(size * (size + 1) / 2 + size * it)) {
                test_fail("allreduce", "iteration %d element %zu: %g", it, i, host[i]);
                break;
            }
        }
    }
    test_buf_free(buf);
    free(host);
    /* every rank's tally before the reset: MPI's own collectives on host
     * memory do not need the GPU */
    MPI_Allreduce(&test_failures, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
#ifdef HAVE_CUDART
    if (cudaDeviceReset() != cudaSuccess) {
        test_fail("cudaDeviceReset", "failed");
    }
#endif
    {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL); /* dfccl's progress thread polls meanwhile */
    }
    total = failures + test_failures;
    MPI_Finalize();
    if (rank == 0) {
        printf("test_devreset: %d ranks, device reset before MPI_Finalize: %d failures in all\n",
               size, total);
    }
    return total != 0;
}
