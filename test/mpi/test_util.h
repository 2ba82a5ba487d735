/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers shared by the MPI tests (test_util.c): the command line and MPI
 * initialization of a test, with the choice of a GPU after MPI_Init as most
 * MPI programs make it (from the node-local rank, the ranks of one node
 * numbered by a communicator of type MPI_COMM_TYPE_SHARED); the buffers a
 * collective gets (device memory with --device, host memory otherwise);
 * failure messages; the job-wide tally at the end; and a check of CUDA
 * runtime calls that aborts the job with the call's text.
 */
#ifndef DFCCL_TEST_MPI_UTIL_H_
#define DFCCL_TEST_MPI_UTIL_H_

#include <mpi.h>
#if defined(OPEN_MPI)
#include <mpi-ext.h>
#endif
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#ifdef HAVE_CUDART
#include <cuda_runtime_api.h>
#endif

/* The forms a collective runs in: the blocking call, the nonblocking call
 * and MPI_Wait, or the persistent MPIX_*_init and MPI_Start. */
enum { BLOCKING, NONBLOCKING, PERSISTENT, NFORMS };
extern const char *const form_names[NFORMS];

/* --device (test_args): the collectives get device memory. */
extern int test_device;

/* A flag of a test's command line: `name` sets *flag to 1. */
typedef struct {
    const char *name;
    int        *flag;
} test_flag_t;

/*
 * The command line of test `prog`: --device and the flags of `flags` (a
 * list ended by {NULL, NULL}). Returns -1 when it is good, else the exit
 * status: 77 for --device in a build without CUDA, 2 (after the usage) for
 * anything else.
 */
int test_args(int argc, char **argv, const char *prog, const test_flag_t *flags);

/*
 * MPI_Init (MPI_Init_thread with MPI_THREAD_MULTIPLE when `multiple`), this
 * rank and the size of MPI_COMM_WORLD, and with --device this rank's GPU.
 * Returns 0 to go on, or 77 after MPI_Finalize, with a line from rank 0,
 * when the test cannot run here (MPI_THREAD_MULTIPLE missing, or --device
 * without a GPU).
 */
int test_init(int *argc, char ***argv, const char *prog, int multiple, int *rank, int *size);

/* Buffers that a collective gets: device memory with --device, else host
 * memory; test_put copies a host image in, complete before the MPI call,
 * and test_get copies a result out. Failures abort the job. */
void *test_buf_new(size_t bytes);
void  test_buf_free(void *p);
void  test_put(void *buf, const void *host, size_t bytes);
void  test_get(void *host, const void *buf, size_t bytes);

/* The failures of this rank, counted by test_vfail. */
extern int test_failures;

/* Counts a failure and prints the first 30 as
 * "rank R: FAIL <what>: <message>". */
void test_fail(const char *what, const char *fmt, ...);
void test_vfail(const char *what, const char *fmt, va_list ap);

/* The text of MPI error code rc, in s (MPI_MAX_ERROR_STRING bytes). */
const char *test_errstr(int rc, char *s);

/*
 * The end of a test: the failures of every rank summed, rank 0 prints
 * "<fmt ...>, N failures in all", then MPI_Finalize. Returns the exit
 * status: 0 when there was none.
 */
int test_finish(int failures, const char *fmt, ...);

/* This rank's number among the ranks of its node. */
int test_local_rank(void);

#ifdef HAVE_CUDART
/* A CUDA runtime call that must succeed: on failure, say which and abort. */
#define TEST_CUDA(_call)                                                                  \
    do {                                                                                  \
        cudaError_t _e = (_call);                                                         \
        if (_e != cudaSuccess) {                                                          \
            int _r = -1;                                                                  \
            MPI_Comm_rank(MPI_COMM_WORLD, &_r);                                           \
            fprintf(stderr, "rank %d: %s:%d: %s failed: %s\n", _r, __FILE__, __LINE__,   \
                    #_call, cudaGetErrorString(_e));                                      \
            MPI_Abort(MPI_COMM_WORLD, 2);                                                 \
        }                                                                                 \
    } while (0)

/* The number of visible GPUs, 0 when there is none (or no driver). */
int test_gpu_count(void);
#endif

#endif
