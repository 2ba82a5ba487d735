/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers shared by the reliability tests: one registered collective of any
 * kind with its buffers, inputs that depend on the rank, the collective and
 * the round, and a check of every output element against the value
 * computed on the host. Values stay small integers, so float sums are exact.
 */
#ifndef DFCCL_TEST_REL_COLLS_H_
#define DFCCL_TEST_REL_COLLS_H_

#include <stddef.h>

#include "dfccl.h"

typedef enum {
    REL_ALLREDUCE = 0,
    REL_ALLGATHER,
    REL_REDUCESCATTER,
    REL_REDUCE,
    REL_BROADCAST,
    REL_KINDS
} rel_kind_t;

typedef struct {
    rel_kind_t       kind;
    dfccl_datatype_t type;   /* uint8, int32, int64, float32 or float64 */
    dfccl_op_t       op;     /* sum, min or max */
    int              root;
    size_t           count;  /* as registered (allgather: per rank; reduce-scatter: received) */
    int              salt;   /* makes the inputs of different collectives differ */
    int              rank, nranks; /* in the collective's group */
    int              id;
    int              in_place;
    void            *send, *recv;
    size_t           send_bytes, recv_bytes;
} rel_coll_t;

/* Register c (fields kind..salt set) on group g, where this process is
 * rank of nranks, and allocate its buffers. */
dfccl_status_t rel_coll_setup(rel_coll_t *c, dfccl_rank_ctx_t ctx, dfccl_group_t g, int rank,
                              int nranks, int priority);
/* Write the inputs of round `round` (and clear the output). */
void rel_coll_fill(rel_coll_t *c, dfccl_rank_ctx_t ctx, int round);
dfccl_status_t rel_coll_run(rel_coll_t *c, dfccl_rank_ctx_t ctx);
/* 0 if every output element is right, else 1 with a message on stderr. */
int rel_coll_check(rel_coll_t *c, dfccl_rank_ctx_t ctx, int round);
/* Deregister and free the buffers. */
dfccl_status_t rel_coll_teardown(rel_coll_t *c, dfccl_rank_ctx_t ctx);
const char *rel_kind_name(rel_kind_t kind);

#endif
