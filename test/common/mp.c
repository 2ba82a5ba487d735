/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Multi-process test harness (see mp.h). Ranks are forked children sharing
 * an anonymous mapping that holds a process-shared barrier and one
 * allgather slot per rank.
 */
#define _GNU_SOURCE
#include "mp.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DFCCL_TEST_SLOT (64 << 10)

struct dfccl_test_oob {
    pthread_barrier_t barrier;
    int               nranks;
    char              slots[];
};

static __thread int dfccl_test_my_rank;

int dfccl_test_oob_allgather(const void *sendbuf, void *recvbuf, size_t bytes, void *arg)
{
    dfccl_test_oob_t *oob = arg;

    if (bytes > DFCCL_TEST_SLOT) {
        return -1;
    }
    memcpy(oob->slots + (size_t)dfccl_test_my_rank * DFCCL_TEST_SLOT, sendbuf, bytes);
    pthread_barrier_wait(&oob->barrier);
    for (int i = 0; i < oob->nranks; i++) {
        memcpy((char *)recvbuf + (size_t)i * bytes, oob->slots + (size_t)i * DFCCL_TEST_SLOT,
               bytes);
    }
    pthread_barrier_wait(&oob->barrier);
    return 0;
}

void dfccl_test_barrier(dfccl_test_oob_t *oob)
{
    pthread_barrier_wait(&oob->barrier);
}

unsigned long long dfccl_test_sum_u64(dfccl_test_oob_t *oob, unsigned long long v)
{
    unsigned long long all[64], sum = 0;

    dfccl_test_oob_allgather(&v, all, sizeof(v), oob);
    for (int i = 0; i < oob->nranks; i++) {
        sum += all[i];
    }
    return sum;
}

void dfccl_test_setup(int rank, int nranks, dfccl_test_oob_t *oob, const dfccl_config_t *cfg,
                      dfccl_rank_ctx_t *ctx_p, dfccl_group_t *group_p)
{
    dfccl_config_t c;
    dfccl_status_t st;

    if (cfg != NULL) {
        c = *cfg;
    } else {
        if (getenv("DFCCL_BACKEND") == NULL) {
            setenv("DFCCL_BACKEND", "host", 1);
        }
        dfcclConfigInit(&c);
    }
    st = dfcclInit(&c, ctx_p);
    if (st != DFCCL_OK) {
        fprintf(stderr, "rank %d: dfcclInit: %s\n", rank, dfcclGetErrorString(st));
        exit(2);
    }
    st = dfcclGroupCreate(*ctx_p, nranks, rank, dfccl_test_oob_allgather, oob, "test", group_p);
    if (st != DFCCL_OK) {
        fprintf(stderr, "rank %d: dfcclGroupCreate: %s\n", rank, dfcclGetErrorString(st));
        exit(2);
    }
}

int dfccl_test_mp_run(int nranks, double timeout_s, dfccl_test_rank_fn_t fn, void *arg)
{
    size_t bytes = sizeof(dfccl_test_oob_t) + (size_t)nranks * DFCCL_TEST_SLOT;
    dfccl_test_oob_t *oob;
    pthread_barrierattr_t attr;
    pid_t pids[64];
    int failed = 0, left = nranks;
    struct timespec t0, t;

    if (nranks < 1 || nranks > 64) {
        return -1;
    }
    oob = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (oob == MAP_FAILED) {
        perror("mmap");
        return -1;
    }
    oob->nranks = nranks;
    pthread_barrierattr_init(&attr);
    pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&oob->barrier, &attr, (unsigned)nranks);
    fflush(stdout);
    fflush(stderr);

    for (int r = 0; r < nranks; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            int rc;
            dfccl_test_my_rank = r;
            rc = fn(r, nranks, oob, arg);
            fflush(stdout);
            fflush(stderr);
            _exit(rc == 0 ? 0 : 1);
        }
        if (pids[r] < 0) {
            perror("fork");
            for (int i = 0; i < r; i++) {
                kill(pids[i], SIGKILL);
            }
            return -1;
        }
    }

    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (left > 0) {
        int status;
        pid_t p = waitpid(-1, &status, WNOHANG);
        if (p > 0) {
            for (int r = 0; r < nranks; r++) {
                if (pids[r] == p) {
                    pids[r] = 0;
                    left--;
                    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                        fprintf(stderr, "rank %d failed (%s %d)\n", r,
                                WIFEXITED(status) ? "exit" : "signal",
                                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
                        failed = 1;
                    }
                }
            }
            continue;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) >
            timeout_s) {
            fprintf(stderr, "TIMEOUT: %d rank(s) still running after %.0f s: a hang; "
                    "killing them\n", left, timeout_s);
            for (int r = 0; r < nranks; r++) {
                if (pids[r] > 0) {
                    kill(pids[r], SIGKILL);
                    waitpid(pids[r], NULL, 0);
                }
            }
            failed = 1;
            break;
        }
        usleep(2000);
    }
    pthread_barrier_destroy(&oob->barrier);
    munmap(oob, bytes);
    return failed ? 1 : 0;
}
