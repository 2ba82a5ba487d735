/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Multi-process test harness (see mp.h). Ranks are forked children sharing
 * an anonymous mapping that holds a process-shared barrier and one
 * allgather slot per rank. Every wait of the test process ends: for the
 * ranks (the timeout, then SIGKILL), for a killed rank to be reaped (a
 * bound), and at teardown, where the barrier is destroyed only if no rank
 * died inside it (glibc's pthread_barrier_destroy waits for every waiter
 * to leave, which a killed one never does). A rank dies with the test
 * process (PR_SET_PDEATHSIG), so a test killed by Check's own timeout
 * leaves no rank behind.
 */
#define _GNU_SOURCE
#include "config.h"
#include "mp.h"

#ifdef HAVE_CUDART
#include <cuda_runtime_api.h>
#endif

#include <errno.h>
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DFCCL_TEST_SLOT (64 << 10)

struct dfccl_test_oob {
    pthread_barrier_t barrier;
    int               nranks;
    int               in_barrier; /* threads inside pthread_barrier_wait */
    char              slots[];
};

static __thread int dfccl_test_my_rank;
#ifdef HAVE_CUDART
static int dfccl_test_device = -1; /* the rank's GPU, for its other threads */
#endif

/* A crashing rank prints where, so a CI log says more than "signal 11". */
static void dfccl_test_crash(int sig)
{
    void *frames[48];
    int n = backtrace(frames, 48);
    fprintf(stderr, "rank %d: signal %d, backtrace:\n", dfccl_test_my_rank, sig);
    backtrace_symbols_fd(frames, n, 2);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* The barrier, counted: a rank killed inside it leaves in_barrier above 0,
 * and the teardown then knows not to destroy it. */
static void dfccl_test_oob_wait(dfccl_test_oob_t *oob)
{
    __atomic_add_fetch(&oob->in_barrier, 1, __ATOMIC_SEQ_CST);
    pthread_barrier_wait(&oob->barrier);
    __atomic_sub_fetch(&oob->in_barrier, 1, __ATOMIC_SEQ_CST);
}

int dfccl_test_oob_allgather(const void *sendbuf, void *recvbuf, size_t bytes, void *arg)
{
    dfccl_test_oob_t *oob = arg;

    if (bytes > DFCCL_TEST_SLOT) {
        return -1;
    }
    memcpy(oob->slots + (size_t)dfccl_test_my_rank * DFCCL_TEST_SLOT, sendbuf, bytes);
    dfccl_test_oob_wait(oob);
    for (int i = 0; i < oob->nranks; i++) {
        memcpy((char *)recvbuf + (size_t)i * bytes, oob->slots + (size_t)i * DFCCL_TEST_SLOT,
               bytes);
    }
    dfccl_test_oob_wait(oob);
    return 0;
}

void dfccl_test_barrier(dfccl_test_oob_t *oob)
{
    dfccl_test_oob_wait(oob);
}

unsigned long long dfccl_test_sum_u64(dfccl_test_oob_t *oob, unsigned long long v)
{
    unsigned long long all[DFCCL_TEST_MAX_RANKS], sum = 0;

    dfccl_test_oob_allgather(&v, all, sizeof(v), oob);
    for (int i = 0; i < oob->nranks; i++) {
        sum += all[i];
    }
    return sum;
}

void dfccl_test_setenv(const char *name, const char *value)
{
    if (value != NULL) {
        setenv(name, value, 1);
    }
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
#ifdef HAVE_CUDART
    if (c.backend == DFCCL_BACKEND_CUDA) {
        int ndev = 0;
        if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
            fprintf(stderr, "rank %d: DFCCL_BACKEND=cuda but no GPU is visible\n", rank);
            exit(2);
        }
        cudaSetDevice(rank % ndev);
        dfccl_test_device = rank % ndev;
    }
#endif
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

int dfccl_test_two_devices(void)
{
#ifdef HAVE_CUDART
    if (dfccl_test_device >= 0) {
        int ndev = 0, can = 0;
        if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 2 ||
            cudaDeviceCanAccessPeer(&can, 0, 1) != cudaSuccess) {
            return 0;
        }
        return can;
    }
#endif
    return 1;
}

void dfccl_test_thread_setup(void)
{
#ifdef HAVE_CUDART
    if (dfccl_test_device >= 0) {
        cudaSetDevice(dfccl_test_device);
    }
#endif
}

void *dfccl_test_malloc(dfccl_rank_ctx_t ctx, size_t bytes)
{
    void *p = NULL;
#ifdef HAVE_CUDART
    if (dfcclGetBackend(ctx) == DFCCL_BACKEND_CUDA) {
        if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
            fprintf(stderr, "cudaMalloc(%zu) failed\n", bytes);
            exit(2);
        }
        cudaMemset(p, 0, bytes);
        return p;
    }
#endif
    p = calloc(1, bytes ? bytes : 1);
    if (p == NULL) {
        fprintf(stderr, "calloc(%zu) failed\n", bytes);
        exit(2);
    }
    return p;
}

void dfccl_test_free(dfccl_rank_ctx_t ctx, void *p)
{
#ifdef HAVE_CUDART
    if (dfcclGetBackend(ctx) == DFCCL_BACKEND_CUDA) {
        cudaFree(p);
        return;
    }
#endif
    free(p);
}

void dfccl_test_put(dfccl_rank_ctx_t ctx, void *dst, const void *src, size_t bytes)
{
#ifdef HAVE_CUDART
    if (dfcclGetBackend(ctx) == DFCCL_BACKEND_CUDA) {
        /* A cudaMemcpy from pageable memory returns once the data is staged,
         * maybe before it lands; dfccl's daemon, on its own stream, is not
         * ordered after it: wait for the default stream before any run. */
        if (cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
            cudaStreamSynchronize(cudaStreamLegacy) != cudaSuccess) {
            fprintf(stderr, "cudaMemcpy(%zu bytes) to the device failed\n", bytes);
            exit(2);
        }
        return;
    }
#endif
    memcpy(dst, src, bytes);
}

void dfccl_test_get(dfccl_rank_ctx_t ctx, void *dst, const void *src, size_t bytes)
{
#ifdef HAVE_CUDART
    if (dfcclGetBackend(ctx) == DFCCL_BACKEND_CUDA) {
        cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
        return;
    }
#endif
    memcpy(dst, src, bytes);
}

/* The most a loaded machine stretches a test's times (dfccl_test_scale). */
#define DFCCL_TEST_LOAD_MAX 4.0

static double dfccl_test_env_scale(void)
{
    const char *s = getenv("DFCCL_TEST_TIMEOUT_SCALE");
    double v      = s != NULL ? strtod(s, NULL) : 1.0;

    return v > 0 ? v : 1.0;
}

double dfccl_test_scale(void)
{
    double load = 0;
    long ncpu   = sysconf(_SC_NPROCESSORS_ONLN);

    if (getloadavg(&load, 1) != 1 || ncpu < 1) {
        load = 0;
        ncpu = 1;
    }
    load /= (double)ncpu;
    load = load < 1 ? 1 : load > DFCCL_TEST_LOAD_MAX ? DFCCL_TEST_LOAD_MAX : load;
    return load * dfccl_test_env_scale();
}

double dfccl_test_scale_max(void)
{
    return DFCCL_TEST_LOAD_MAX * dfccl_test_env_scale();
}

int dfccl_test_wait_ms(int base_ms)
{
    double ms = (double)base_ms * dfccl_test_scale();

    return ms > 2e9 ? 2000000000 : (int)ms;
}

static int dfccl_test_killed_rank = -1;

int dfccl_test_mp_run_killed(int nranks, double timeout_s, dfccl_test_rank_fn_t fn, void *arg,
                             int killed_rank)
{
    int rc;

    dfccl_test_killed_rank = killed_rank;
    rc = dfccl_test_mp_run(nranks, timeout_s, fn, arg);
    dfccl_test_killed_rank = -1;
    return rc;
}

/* How long a rank that was sent SIGKILL may take to be reaped, on an idle
 * machine (a process in the middle of a driver call dies when it returns
 * from it). */
#define DFCCL_TEST_REAP_S 10.0

static double dfccl_test_since(const struct timespec *t0)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}

/*
 * Kill the ranks still running (pids[r] > 0) and reap them, waiting at
 * most DFCCL_TEST_REAP_S, scaled. Returns how many could not be reaped
 * (still listed in pids, with a message); they may still hold the shared
 * mapping, which is then left to them.
 */
static int dfccl_test_kill_all(pid_t *pids, int nranks)
{
    struct timespec t0;
    int left = 0;

    for (int r = 0; r < nranks; r++) {
        if (pids[r] > 0) {
            kill(pids[r], SIGKILL);
            left++;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (left > 0 && dfccl_test_since(&t0) < DFCCL_TEST_REAP_S * dfccl_test_scale()) {
        for (int r = 0; r < nranks; r++) {
            if (pids[r] > 0 && waitpid(pids[r], NULL, WNOHANG) == pids[r]) {
                pids[r] = 0;
                left--;
            }
        }
        if (left > 0) {
            usleep(2000);
        }
    }
    for (int r = 0; r < nranks; r++) {
        if (pids[r] > 0) {
            fprintf(stderr, "rank %d (pid %d) did not die within %.0f s of SIGKILL; left "
                    "behind\n", r, (int)pids[r], DFCCL_TEST_REAP_S * dfccl_test_scale());
        }
    }
    return left;
}

int dfccl_test_mp_run(int nranks, double timeout_s, dfccl_test_rank_fn_t fn, void *arg)
{
    size_t bytes = sizeof(dfccl_test_oob_t) + (size_t)nranks * DFCCL_TEST_SLOT;
    dfccl_test_oob_t *oob;
    pthread_barrierattr_t attr;
    pid_t pids[DFCCL_TEST_MAX_RANKS], parent = getpid();
    int failed = 0, left = nranks, unreaped = 0;
    struct timespec t0;
    double scale, elapsed, next_scale = 1.0;

    if (nranks < 1 || nranks > DFCCL_TEST_MAX_RANKS) {
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
    pthread_barrierattr_destroy(&attr);
    fflush(stdout);
    fflush(stderr);

    for (int r = 0; r < nranks; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            int rc;
            /* no rank outlives the test process (killed by Check's timeout) */
            if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) {
                _exit(3);
            }
            dfccl_test_my_rank = r;
            signal(SIGSEGV, dfccl_test_crash);
            signal(SIGBUS, dfccl_test_crash);
            signal(SIGABRT, dfccl_test_crash);
            rc = fn(r, nranks, oob, arg);
            fflush(stdout);
            fflush(stderr);
            _exit(rc == 0 ? 0 : 1);
        }
        if (pids[r] < 0) {
            perror("fork");
            for (int i = r; i < nranks; i++) {
                pids[i] = 0;
            }
            unreaped = dfccl_test_kill_all(pids, nranks);
            failed   = -1;
            left     = 0;
            break;
        }
    }

    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* the limit grows with the load seen during the run, never shrinks:
     * read once a second (getloadavg reads /proc) */
    scale = dfccl_test_scale();
    while (left > 0) {
        int status;
        pid_t p = waitpid(-1, &status, WNOHANG);
        if (p > 0) {
            for (int r = 0; r < nranks; r++) {
                if (pids[r] == p) {
                    pids[r] = 0;
                    left--;
                    if (r == dfccl_test_killed_rank && WIFSIGNALED(status) &&
                        WTERMSIG(status) == SIGKILL) {
                        continue; /* it was meant to die */
                    }
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
        elapsed = dfccl_test_since(&t0);
        if (elapsed >= next_scale) {
            double now_scale = dfccl_test_scale();
            scale            = now_scale > scale ? now_scale : scale;
            next_scale       = elapsed + 1.0;
        }
        if (elapsed > timeout_s * scale) {
            fprintf(stderr, "TIMEOUT: %d rank(s) still running after %.0f s (%.0f s on an idle "
                    "machine, x%.1f for the load): a hang; killing them\n", left, elapsed,
                    timeout_s, scale);
            unreaped = dfccl_test_kill_all(pids, nranks);
            failed   = 1;
            break;
        }
        usleep(2000);
    }
    /* every rank is gone: a barrier with no waiter left can be destroyed;
     * one that a killed rank died inside would block its destroy forever,
     * and goes with the mapping */
    if (unreaped == 0 && __atomic_load_n(&oob->in_barrier, __ATOMIC_SEQ_CST) == 0) {
        pthread_barrier_destroy(&oob->barrier);
    }
    munmap(oob, bytes);
    return failed < 0 ? -1 : failed ? 1 : 0;
}
