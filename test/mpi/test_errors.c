/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An error on one rank ends cleanly everywhere. After a correct
 * MPI_Allreduce, the last rank passes one element more than the others to
 * the next MPI_Allreduce on the same communicator: an incorrect program,
 * whose mismatch dfccl detects when the collective runs.
 *
 * By default the communicator has MPI_ERRORS_RETURN, and the mismatch is
 * made twice, each on its own duplicate of MPI_COMM_WORLD: with the
 * blocking call, then with MPI_Iallreduce (the error comes from MPI_Wait).
 * Every rank must get an error, neither success nor a hang; the error
 * class must be the same on every rank (the classes are gathered over
 * MPI_COMM_WORLD with host buffers, by MPI_Gather, which dfccl does not
 * run); and MPI_Finalize must complete. Exit status 0 when all of that
 * holds.
 *
 * With --fatal the communicator has MPI_ERRORS_ARE_FATAL: the job must
 * abort through Open MPI's handler. No call may return; run_mpi_tests.sh
 * checks that mpirun fails with the handler's message and no crash.
 * With --device the buffers are device memory on the GPU chosen after
 * MPI_Init from the node-local rank.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "test_util.h"

#define COUNT 4096

static int rank, size, fatal;

/*
 * A correct allreduce on comm, then one whose count is one larger on the
 * last rank: blocking, or nonblocking and MPI_Wait. Returns the error
 * class of the mismatched call (MPI_SUCCESS if it succeeded); *bad is set
 * when the correct call failed or gave a wrong result.
 */
static int mismatch(MPI_Comm comm, int nonblocking, int *bad)
{
    int *h = malloc((COUNT + 1) * sizeof(int)), *s = test_buf_new((COUNT + 1) * sizeof(int));
    int *r = test_buf_new((COUNT + 1) * sizeof(int));
    int n = rank == size - 1 ? COUNT + 1 : COUNT, rc, cls = MPI_SUCCESS;
    const char *how = nonblocking ? "MPI_Iallreduce + MPI_Wait" : "MPI_Allreduce";
    char msg[MPI_MAX_ERROR_STRING];
    MPI_Request req;
    double t0;

    for (int i = 0; i <= COUNT; i++) {
        h[i] = rank + i;
    }
    test_put(s, h, (COUNT + 1) * sizeof(int));
    rc = MPI_Allreduce(s, r, COUNT, MPI_INT, MPI_SUM, comm);
    test_get(h, r, (COUNT + 1) * sizeof(int));
    for (int i = 0; rc == MPI_SUCCESS && i < COUNT; i++) {
        if (h[i] != size * i + size * (size - 1) / 2) {
            rc = MPI_ERR_OTHER;
        }
    }
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "rank %d: FAIL the correct MPI_Allreduce before the mismatch failed "
                "or gave a wrong result\n", rank);
        *bad = 1;
    }

    if (fatal) {
        printf("rank %d: starting the mismatched %s\n", rank, how);
        fflush(stdout);
    }
    t0 = MPI_Wtime();
    if (nonblocking) {
        rc = MPI_Iallreduce(s, r, n, MPI_INT, MPI_SUM, comm, &req);
        if (rc == MPI_SUCCESS) {
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
    } else {
        rc = MPI_Allreduce(s, r, n, MPI_INT, MPI_SUM, comm);
    }
    if (fatal) {
        fprintf(stderr, "rank %d: FAIL %s with a mismatched count returned (%d) under "
                "MPI_ERRORS_ARE_FATAL instead of aborting the job\n", rank, how, rc);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    MPI_Error_class(rc, &cls);
    printf("rank %d: %s with count %d (%d on the last rank, %d on the others) returned "
           "error class %d after %.2f s%s%s\n", rank, how, n, COUNT + 1, COUNT, cls,
           MPI_Wtime() - t0, rc != MPI_SUCCESS ? ": " : "",
           rc != MPI_SUCCESS ? test_errstr(rc, msg) : "");
    fflush(stdout);
    test_buf_free(s);
    test_buf_free(r);
    free(h);
    return cls;
}

int main(int argc, char **argv)
{
    int classes[2] = {MPI_SUCCESS, MPI_SUCCESS}, *all = NULL, bad = 0;
    MPI_Comm comm[2];
    const test_flag_t flags[] = {{"--fatal", &fatal}, {NULL, NULL}};
    int rc;

    if ((rc = test_args(argc, argv, "test_errors", flags)) >= 0 ||
        (rc = test_init(&argc, &argv, "test_errors", 0, &rank, &size)) != 0) {
        return rc;
    }
    for (int i = 0; i < 2; i++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &comm[i]);
        MPI_Comm_set_errhandler(comm[i], fatal ? MPI_ERRORS_ARE_FATAL : MPI_ERRORS_RETURN);
    }
    if (fatal) {
        mismatch(comm[0], 0, &bad); /* does not return */
    }
    classes[0] = mismatch(comm[0], 0, &bad);
    classes[1] = mismatch(comm[1], 1, &bad);

    /* every rank's classes to rank 0, through the other components */
    if (rank == 0) {
        all = malloc(2 * size * sizeof(int));
    }
    MPI_Gather(classes, 2, MPI_INT, all, 2, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int t = 0; t < 2; t++) {
            const char *how = t ? "MPI_Iallreduce" : "MPI_Allreduce";
            for (int r = 0; r < size; r++) {
                int c = all[2 * r + t];
                if (c == MPI_SUCCESS) {
                    fprintf(stderr, "FAIL: rank %d's %s with a mismatched count succeeded\n",
                            r, how);
                    bad = 1;
                } else if (c != all[t]) {
                    fprintf(stderr, "FAIL: %s with a mismatched count: error class %d on rank "
                            "%d, %d on rank 0\n", how, c, r, all[t]);
                    bad = 1;
                }
            }
            if (all[t] != MPI_SUCCESS) {
                char s[MPI_MAX_ERROR_STRING];
                printf("test_errors: %s with a mismatched count: error class %d on rank 0 "
                       "(%s)\n", how, all[t], test_errstr(all[t], s));
            }
        }
        free(all);
    }
    for (int i = 0; i < 2; i++) {
        MPI_Comm_free(&comm[i]);
    }
    MPI_Finalize();
    if (rank == 0) {
        printf("test_errors: %d ranks, %s\n", size, bad ? "FAILED" : "every rank got the same "
               "error class, MPI_Finalize completed");
    }
    return bad;
}
