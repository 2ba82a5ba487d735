/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers shared by the MPI tests: see test_util.h. */
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

const char *const form_names[NFORMS] = {"blocking", "nonblocking", "persistent"};
int test_device;
int test_failures;

int test_args(int argc, char **argv, const char *prog, const test_flag_t *flags)
{
    for (int i = 1; i < argc; i++) {
        const test_flag_t *f = flags;

        if (strcmp(argv[i], "--device") == 0) {
#ifdef HAVE_CUDART
            test_device = 1;
            continue;
#else
            fprintf(stderr, "%s: --device needs a build with CUDA\n", prog);
            return 77;
#endif
        }
        while (f->name != NULL && strcmp(argv[i], f->name) != 0) {
            f++;
        }
        if (f->name == NULL) {
            fprintf(stderr, "usage: %s [--device]", prog);
            for (f = flags; f->name != NULL; f++) {
                fprintf(stderr, " [%s]", f->name);
            }
            fprintf(stderr, "\n");
            return 2;
        }
        *f->flag = 1;
    }
    return -1;
}

int test_local_rank(void)
{
    MPI_Comm node;
    int local = 0;

    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    return local;
}

#ifdef HAVE_CUDART
int test_gpu_count(void)
{
    int n = 0;

    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        n = 0;
    }
    return n;
}

/* One GPU per node-local rank; returns it, or -1 without a GPU. */
static int select_device(void)
{
    int local = test_local_rank(), n = test_gpu_count();

    if (n == 0) {
        return -1;
    }
    TEST_CUDA(cudaSetDevice(local % n));
    return local % n;
}
#endif

int test_init(int *argc, char ***argv, const char *prog, int multiple, int *rank, int *size)
{
    int provided = MPI_THREAD_SINGLE;

    if (multiple) {
        MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    } else {
        MPI_Init(argc, argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    if (multiple && provided < MPI_THREAD_MULTIPLE) {
        if (*rank == 0) {
            printf("%s: MPI_THREAD_MULTIPLE is not available; skipped\n", prog);
        }
        MPI_Finalize();
        return 77;
    }
#ifdef HAVE_CUDART
    /* as MPI programs choose their GPU: after MPI_Init, from the node-local
     * rank; the component binds to it at the first device buffer */
    if (test_device && select_device() < 0) {
        if (*rank == 0) {
            fprintf(stderr, "%s: --device but no GPU is visible\n", prog);
        }
        MPI_Finalize();
        return 77;
    }
#endif
    return 0;
}

void *test_buf_new(size_t bytes)
{
    void *p = NULL;
#ifdef HAVE_CUDART
    if (test_device) {
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

void test_buf_free(void *p)
{
#ifdef HAVE_CUDART
    if (test_device) {
        cudaFree(p);
        return;
    }
#endif
    free(p);
}

void test_put(void *buf, const void *host, size_t bytes)
{
#ifdef HAVE_CUDART
    if (test_device) {
        TEST_CUDA(cudaMemcpy(buf, host, bytes, cudaMemcpyHostToDevice));
        TEST_CUDA(cudaStreamSynchronize(cudaStreamLegacy));
        return;
    }
#endif
    memcpy(buf, host, bytes);
}

void test_get(void *host, const void *buf, size_t bytes)
{
#ifdef HAVE_CUDART
    if (test_device) {
        TEST_CUDA(cudaMemcpy(host, buf, bytes, cudaMemcpyDeviceToHost));
        return;
    }
#endif
    memcpy(host, buf, bytes);
}

void test_vfail(const char *what, const char *fmt, va_list ap)
{
    char msg[256];
    int rank = -1;

    if (++test_failures > 30) {
        return;
    }
    vsnprintf(msg, sizeof(msg), fmt, ap);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr, "rank %d: FAIL %s: %s\n", rank, what, msg);
}

void test_fail(const char *what, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    test_vfail(what, fmt, ap);
    va_end(ap);
}

const char *test_errstr(int rc, char *s)
{
    int len = 0;

    s[0] = '\0';
    MPI_Error_string(rc, s, &len);
    return s;
}

int test_finish(int failures, const char *fmt, ...)
{
    int rank = 0, all = 0;
    va_list ap;

    /* WORLD may return errors (MPI_ERRORS_RETURN): a failed sum fails too */
    if (MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS) {
        all = failures + 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf(", %d failures in all\n", all);
    }
    MPI_Finalize();
    return all == 0 ? 0 : 1;
}
