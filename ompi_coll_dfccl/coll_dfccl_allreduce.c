/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reductions: allreduce and reduce run on dfccl (predefined integer and
 * floating types with SUM, PROD, MIN and MAX, counts above zero); scan,
 * exscan and reduce_local, and every other type or op, take the previous
 * module, with CUDA memory staged through host memory.
 */
#include "coll_dfccl.h"

#include <string.h>

static size_t dfccl_esize(struct ompi_datatype_t *dt)
{
    size_t size;

    ompi_datatype_type_size(dt, &size);
    return size;
}

/* allreduce (every rank writes count elements) and reduce (the root only;
 * MPI_IN_PLACE on the root) */
static int dfccl_plan_reduction(const mca_coll_dfccl_args_t *a, mca_coll_dfccl_plan_t *p,
                                dfccl_coll_kind_t kind)
{
    int out     = kind == DFCCL_KIND_ALLREDUCE || ompi_comm_rank(a->comm) == a->root;
    int inplace = out && a->sbuf == MPI_IN_PLACE;
    size_t bytes;

    memset(p, 0, sizeof(*p));
    if (a->rcount <= 0 || !mca_coll_dfccl_map_type(a->rdt, &p->sig.dtype) ||
        !mca_coll_dfccl_map_op(a->op, &p->sig.op)) {
        return 0;
    }
    bytes        = (size_t)a->rcount * dfccl_esize(a->rdt);
    p->sig.kind  = kind;
    p->sig.count = (size_t)a->rcount;
    p->sig.root  = a->root;
    p->s_user    = inplace ? NULL : a->sbuf;
    p->s_bytes   = bytes;
    p->r_user    = out ? a->rbuf : NULL;
    p->r_bytes   = out ? bytes : 0;
    p->r_in      = inplace;
    p->r_out     = out;
    p->out_bytes = p->r_bytes;
    return 1;
}

static int dfccl_plan_allreduce(const mca_coll_dfccl_args_t *a, mca_coll_dfccl_plan_t *p)
{
    return dfccl_plan_reduction(a, p, DFCCL_KIND_ALLREDUCE);
}

static int dfccl_plan_reduce(const mca_coll_dfccl_args_t *a, mca_coll_dfccl_plan_t *p)
{
    return dfccl_plan_reduction(a, p, DFCCL_KIND_REDUCE);
}

#define DFCCL_REDUCTION_PARAMS                                                             \
    (const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt, struct ompi_op_t *op)
#define DFCCL_REDUCTION_ARGS                                                               \
    .sbuf = sbuf, .rbuf = rbuf, .scount = count, .rcount = count, .sdt = dt, .rdt = dt,    \
    .op = op

MCA_COLL_DFCCL_ENTRY(allreduce, MCA_COLL_DFCCL_ALLREDUCE, dfccl_plan_allreduce,
                     DFCCL_REDUCTION_PARAMS, DFCCL_REDUCTION_ARGS, .root = -1)
MCA_COLL_DFCCL_ENTRY(reduce, MCA_COLL_DFCCL_REDUCE, dfccl_plan_reduce,
                     (const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                      struct ompi_op_t *op, int root),
                     DFCCL_REDUCTION_ARGS, .root = root)
MCA_COLL_DFCCL_ENTRY(scan, MCA_COLL_DFCCL_SCAN, NULL, DFCCL_REDUCTION_PARAMS,
                     DFCCL_REDUCTION_ARGS, .root = -1)
MCA_COLL_DFCCL_ENTRY(exscan, MCA_COLL_DFCCL_EXSCAN, NULL, DFCCL_REDUCTION_PARAMS,
                     DFCCL_REDUCTION_ARGS, .root = -1)

/* Local, on the module of MPI_COMM_WORLD (Open MPI routes it there):
 * never queued, only staged. */
int mca_coll_dfccl_reduce_local(const void *inbuf, void *inoutbuf, int count,
                                struct ompi_datatype_t *dt, struct ompi_op_t *op,
                                mca_coll_base_module_t *module)
{
    mca_coll_dfccl_module_t *m = MCA_COLL_DFCCL_MODULE(module);
    mca_coll_dfccl_args_t a    = {.coll   = MCA_COLL_DFCCL_REDUCE_LOCAL,
                                  .form   = MCA_COLL_DFCCL_BLOCKING,
                                  .sbuf   = inbuf,
                                  .rbuf   = inoutbuf,
                                  .scount = count,
                                  .rcount = count,
                                  .sdt    = dt,
                                  .rdt    = dt,
                                  .op     = op,
                                  .root   = -1,
                                  .comm   = m->comm};

    return mca_coll_dfccl_fallback(m, &a, NULL);
}
