/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the unit tests share beyond the multi-process harness (mp.h): the
 * rank counts a test runs (DFCCL_TEST_RANKS), the check of a call's error,
 * the time, memory the ranks and the test process both see, a file's text,
 * a run and its wait, the end of a rank, and a registration mismatch.
 */
#ifndef DFCCL_TEST_UNIT_UTIL_H_
#define DFCCL_TEST_UNIT_UTIL_H_

#include "mp.h"

/* The most rank counts DFCCL_TEST_RANKS may list. */
#define UNIT_RANK_COUNTS_MAX 16

/*
 * The rank counts a multi-rank test runs, in ns_p (room for
 * UNIT_RANK_COUNTS_MAX): those DFCCL_TEST_RANKS lists ("2 4 8", spaces or
 * commas between), where it is set and not empty, so that a machine with
 * more GPUs can run every test with more ranks; else `quick` in quick mode
 * (DFCCL_TEST_QUICK), where it is not NULL; else `def`. Both lists end with
 * 0. Returns how many. A count of DFCCL_TEST_RANKS below `least` or above
 * `most` (what the test can run), or a list that is not whole numbers,
 * ends the calling process with a message and status 2: a test must never
 * run less than it was asked to and pass.
 */
int unit_rank_counts(const int *def, const int *quick, int least, int most, int *ns_p);

/* In a rank's body: `_call` returns `_status` and the last error message
 * holds `_needle` (needs <string.h>); else the rank fails with a message. */
#define EXPECT(_call, _status, _needle)                                                   \
    do {                                                                                  \
        dfccl_status_t _st = (_call);                                                     \
        DFCCL_TEST_CHECK(_st == (_status), "%s returned %s (%d), expected %d", #_call,    \
                         dfcclGetErrorString(_st), _st, (_status));                       \
        DFCCL_TEST_CHECK(strstr(dfcclGetLastErrorMessage(), (_needle)) != NULL,           \
                         "message of %s lacks \"%s\": %s", #_call, (_needle),             \
                         dfcclGetLastErrorMessage());                                     \
    } while (0)

/* Seconds on the monotonic clock. */
double unit_now_s(void);

/* `n` ints the ranks can write and the test process read afterwards
 * (zeroed); NULL if they cannot be mapped. */
int *unit_shared_ints(int n);

/* The whole text of the file at `path` (free it); NULL if it cannot be
 * opened. */
char *unit_read_file(const char *path);

/* The status of a run (`run_st`) and, if it started, of the wait for it:
 * `base_ms` milliseconds, scaled (dfccl_test_wait_ms). */
dfccl_status_t unit_run_wait(dfccl_status_t run_st, int id, int base_ms, dfccl_rank_ctx_t ctx);

/* The end of a rank: its buffer `d` freed and its context destroyed. 0, or
 * 1 with a message where dfcclDestroy fails. */
int unit_rank_end(dfccl_rank_ctx_t ctx, void *d);

/* The end of a rank that counts preemptions: every rank's, summed, in
 * *pre_p, then its group `g` and context destroyed. 0, or 1 with a
 * message. */
int unit_rank_end_counted(dfccl_test_oob_t *oob, dfccl_rank_ctx_t ctx, dfccl_group_t g,
                          unsigned long long *pre_p);

/*
 * A registration mismatch on the group `g` of every rank: rank 0
 * registers an allgather (8 int32) that its peers do not, then every rank
 * registers an allreduce of 1000 float32 (rank 0's second registration,
 * the others' first) and, once all have registered, runs it and waits for
 * it. 0 with the allreduce's buffer in *d_p, its status in *st_p and the
 * seconds from its run to its answer in *secs_p; 1 with a message where a
 * registration fails.
 */
int unit_mismatch_run(int rank, dfccl_test_oob_t *oob, dfccl_rank_ctx_t ctx, dfccl_group_t g,
                      float **d_p, dfccl_status_t *st_p, double *secs_p);

#endif
