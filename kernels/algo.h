/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The daemon's algorithms: each is a device program in kernels/algo/
 * (ring.h, oneshot.h, twoshot.h, alltoall.h, msccl.h, tree.h, written as
 * primitive calls) with its host module in runtime/algo/, which chose it
 * at registration and laid out its connectors. dfccl_algo_run runs one channel of a collective on the
 * program its static context names, and returns what the program's last
 * primitive returned (DONE, or STUCK to be preempted and resumed).
 */
#ifndef DFCCL_KERNELS_ALGO_H_
#define DFCCL_KERNELS_ALGO_H_

#include "algo/alltoall.h"
#include "algo/msccl.h"
#include "algo/oneshot.h"
#include "algo/ring.h"
#include "algo/tree.h"
#include "algo/twoshot.h"

DFCCL_F_DEVICE int dfccl_algo_run(dfccl_exec_t *x)
{
    if (x->st->algo == DFCCL_K_ALGO_ONESHOT) {
        return dfccl_oneshot_run(x);
    }
    if (x->st->algo == DFCCL_K_ALGO_TWOSHOT) {
        return dfccl_twoshot_allreduce(x);
    }
    if (x->st->algo == DFCCL_K_ALGO_MESH) {
        return dfccl_mesh_alltoall(x);
    }
    if (x->st->algo == DFCCL_K_ALGO_MSCCL) {
        return dfccl_msccl_run(x);
    }
    if (x->st->algo == DFCCL_K_ALGO_TREE || x->st->algo == DFCCL_K_ALGO_CTREE) {
        return dfccl_tree_allreduce(x);
    }
    if (x->st->probe != 0) {
        return dfccl_ring_probe(x);
    }
    switch (x->st->kind) {
    case DFCCL_COLL_ALLREDUCE:     return dfccl_ring_allreduce(x);
    case DFCCL_COLL_ALLGATHER:     return dfccl_ring_allgather(x);
    case DFCCL_COLL_REDUCESCATTER: return dfccl_ring_reducescatter(x);
    case DFCCL_COLL_REDUCE:        return dfccl_ring_reduce(x);
    case DFCCL_COLL_BROADCAST:     return dfccl_ring_broadcast(x);
    case DFCCL_COLL_ALLTOALL:      return dfccl_ring_alltoall(x);
    default:                       return DFCCL_PRIM_DONE;
    }
}

#endif /* DFCCL_KERNELS_ALGO_H_ */
