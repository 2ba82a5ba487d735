/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Multi-process test harness: runs a function on N forked ranks with an
 * out-of-band allgather over shared memory, and fails (killing every rank)
 * when they do not all finish within a timeout, so a hang is a failure.
 */
#ifndef DFCCL_TEST_MP_H_
#define DFCCL_TEST_MP_H_

#include <stddef.h>

#include "dfccl.h"

typedef struct dfccl_test_oob dfccl_test_oob_t;

/* Body of one rank: return 0 on success. */
typedef int (*dfccl_test_rank_fn_t)(int rank, int nranks, dfccl_test_oob_t *oob, void *arg);

/*
 * How much longer than on an idle machine things may take here: the load
 * average per core (at least 1, at most 4: a busy 2-core CI machine runs 4
 * ranks of several threads each beside other jobs), times
 * DFCCL_TEST_TIMEOUT_SCALE (default 1; e.g. 10 under valgrind). Every
 * bound on time in the tests is a bound on an idle machine times this, so
 * that a loaded machine slows a test down without failing it, and a hang
 * still fails within a bounded time.
 */
double dfccl_test_scale(void);
/* The most dfccl_test_scale can be (for outer bounds such as Check's). */
double dfccl_test_scale_max(void);
/* `base_ms` milliseconds, scaled: a dfcclWait timeout. */
int dfccl_test_wait_ms(int base_ms);

/* The most ranks dfccl_test_mp_run runs. */
#define DFCCL_TEST_MAX_RANKS 64

/* Run fn on nranks processes (1 to DFCCL_TEST_MAX_RANKS). Returns 0 if all returned 0 in time:
 * timeout_s on an idle machine, scaled by dfccl_test_scale as the run
 * goes on. */
int dfccl_test_mp_run(int nranks, double timeout_s, dfccl_test_rank_fn_t fn, void *arg);

/* The same, where rank `killed_rank` is expected to die of SIGKILL. */
int dfccl_test_mp_run_killed(int nranks, double timeout_s, dfccl_test_rank_fn_t fn, void *arg,
                             int killed_rank);

/* dfccl_oob_allgather_fn_t over the harness's shared memory. */
int dfccl_test_oob_allgather(const void *sendbuf, void *recvbuf, size_t bytes, void *arg);

/* Barrier of all ranks. */
void dfccl_test_barrier(dfccl_test_oob_t *oob);

/* Set `name` to `value` in this rank's environment, before
 * dfccl_test_setup; a NULL value leaves the variable as it is (the
 * default). */
void dfccl_test_setenv(const char *name, const char *value);

/* Init a context (host backend unless DFCCL_BACKEND says otherwise) and a
 * group of all ranks; exits the rank with a message on failure. */
void dfccl_test_setup(int rank, int nranks, dfccl_test_oob_t *oob, const dfccl_config_t *cfg,
                      dfccl_rank_ctx_t *ctx_p, dfccl_group_t *group_p);

/* After dfccl_test_setup: 1 if ranks 0 and 1 are on two GPUs that reach
 * each other (always 1 on the host backend), so that a group of two is a
 * pair (DFCCL_PAIR_BYTES); 0 when they share a GPU. */
int dfccl_test_two_devices(void);

/* Call first in every extra thread of a rank: a new thread starts on CUDA
 * device 0, not on the rank's GPU. */
void dfccl_test_thread_setup(void);

/* Buffers for collectives: host memory on the host backend, device memory
 * on the CUDA backend. put/get copy from/to host memory; sync is the
 * backend's device synchronization (dfcclSynchronize). */
void *dfccl_test_malloc(dfccl_rank_ctx_t ctx, size_t bytes);
void dfccl_test_free(dfccl_rank_ctx_t ctx, void *p);
void dfccl_test_put(dfccl_rank_ctx_t ctx, void *dst, const void *src, size_t bytes);
void dfccl_test_get(dfccl_rank_ctx_t ctx, void *dst, const void *src, size_t bytes);

/* Sum a counter over all ranks. */
unsigned long long dfccl_test_sum_u64(dfccl_test_oob_t *oob, unsigned long long v);

#define DFCCL_TEST_CHECK(_cond, ...)                                            \
    do {                                                                        \
        if (!(_cond)) {                                                         \
            fprintf(stderr, "rank check failed at %s:%d: %s: ", __FILE__,       \
                    __LINE__, #_cond);                                          \
            fprintf(stderr, __VA_ARGS__);                                       \
            fprintf(stderr, "\n");                                              \
            return 1;                                                           \
        }                                                                       \
    } while (0)

#endif
