/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An incorrect program fails well under MPI: every rank but the last calls
 * MPI_Allreduce, the last never does. With coll_dfccl_timeout set, dfccl
 * gives up on the collective, and the error reaches the communicator's
 * error handler (MPI_ERRORS_RETURN here: the call returns an error code)
 * instead of hanging. The program then goes on (a barrier through the
 * other components) and finalizes cleanly.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define COUNT 4096

int main(int argc, char **argv)
{
    static float buf[COUNT];
    int rank, size, rc = MPI_SUCCESS, bad = 0, cls = 0;
    double t0, t;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (int i = 0; i < COUNT; i++) {
        buf[i] = (float)rank;
    }
    if (rank != size - 1) {
        t0 = MPI_Wtime();
        rc = MPI_Allreduce(MPI_IN_PLACE, buf, COUNT, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        t  = MPI_Wtime() - t0;
        MPI_Error_class(rc, &cls);
        printf("rank %d: MPI_Allreduce without rank %d returned error class %d after %.1f s\n",
               rank, size - 1, cls, t);
        if (rc == MPI_SUCCESS || t > 60) {
            fprintf(stderr, "rank %d: expected an error within the timeout\n", rank);
            bad = 1;
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return bad;
}
