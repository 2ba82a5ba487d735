/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Scatters: reduce_scatter_block and reduce_scatter run on dfccl (types
 * and ops as for allreduce). reduce_scatter with equal counts is dfccl's
 * reduce-scatter; with unequal (or zero) counts it runs as an allreduce of
 * every block into a temporary, of which this rank's block is copied out:
 * twice the data, but no packing, and zero counts need nothing special.
 * scatter and scatterv take the previous module, with CUDA memory staged
 * through host memory.
 */
#include "coll_dfccl.h"

#include <string.h>

static size_t dfccl_esize(struct ompi_datatype_t *dt)
{
    size_t size;

    ompi_datatype_type_size(dt, &size);
    return size;
}

/* A plan of either form: `count` elements of `kind` from `s_bytes` of the
 * send buffer into `r_bytes` of the receive buffer, which holds the input
 * in place; what of it is copied out is the caller's to set. */
static void dfccl_plan_rs_fill(const mca_coll_dfccl_args_t *a, dfccl_coll_kind_t kind,
                               size_t count, size_t s_bytes, size_t r_bytes,
                               mca_coll_dfccl_plan_t *p)
{
    int inplace = a->sbuf == MPI_IN_PLACE;

    p->sig.kind  = kind;
    p->sig.count = count;
    p->sig.root  = -1;
    p->s_user    = inplace ? NULL : a->sbuf;
    p->s_bytes   = s_bytes;
    p->r_user    = a->rbuf;
    p->r_bytes   = r_bytes;
    p->r_in      = inplace;
    p->r_out     = 1;
}

/* dfccl's reduce-scatter of `count` per rank: in place the input is the
 * receive buffer (n blocks), the result its first block */
static int dfccl_plan_rs_blocks(const mca_coll_dfccl_args_t *a, size_t count,
                                mca_coll_dfccl_plan_t *p)
{
    int n = ompi_comm_size(a->comm), inplace = a->sbuf == MPI_IN_PLACE;
    size_t bytes = count * dfccl_esize(a->rdt);

    dfccl_plan_rs_fill(a, DFCCL_KIND_REDUCESCATTER, count, bytes * n,
                       inplace ? bytes * n : bytes, p);
    p->out_bytes = bytes;
    return 1;
}

static int dfccl_plan_rsb(const mca_coll_dfccl_args_t *a, mca_coll_dfccl_plan_t *p)
{
    memset(p, 0, sizeof(*p));
    if (a->rcount <= 0 || !mca_coll_dfccl_map_type(a->rdt, &p->sig.dtype) ||
        !mca_coll_dfccl_map_op(a->op, &p->sig.op)) {
        return 0;
    }
    return dfccl_plan_rs_blocks(a, (size_t)a->rcount, p);
}

static int dfccl_plan_rs(const mca_coll_dfccl_args_t *a, mca_coll_dfccl_plan_t *p)
{
    int n = ompi_comm_size(a->comm), rank = ompi_comm_rank(a->comm), equal = 1;
    size_t total = 0, displ = 0, esz = dfccl_esize(a->rdt);

    memset(p, 0, sizeof(*p));
    for (int i = 0; i < n; i++) {
        if (i == rank) {
            displ = total;
        }
        total += (size_t)a->rcounts[i];
        equal &= a->rcounts[i] == a->rcounts[0];
    }
    if (total == 0 || !mca_coll_dfccl_map_type(a->rdt, &p->sig.dtype) ||
        !mca_coll_dfccl_map_op(a->op, &p->sig.op)) {
        return 0;
    }
    if (equal) {
        return dfccl_plan_rs_blocks(a, (size_t)a->rcounts[0], p);
    }
    dfccl_plan_rs_fill(a, DFCCL_KIND_ALLREDUCE, total, total * esz, total * esz, p);
    p->r_tmp     = 1;
    p->out_off   = displ * esz;
    p->out_bytes = (size_t)a->rcounts[rank] * esz;
    return 1;
}

MCA_COLL_DFCCL_ENTRY(reduce_scatter_block, MCA_COLL_DFCCL_REDUCE_SCATTER_BLOCK, dfccl_plan_rsb,
                     (const void *sbuf, void *rbuf, int rcount, struct ompi_datatype_t *dt,
                      struct ompi_op_t *op),
                     .sbuf = sbuf, .rbuf = rbuf, .scount = rcount, .rcount = rcount, .sdt = dt,
                     .rdt = dt, .op = op, .root = -1)
MCA_COLL_DFCCL_ENTRY(reduce_scatter, MCA_COLL_DFCCL_REDUCE_SCATTER, dfccl_plan_rs,
                     (const void *sbuf, void *rbuf, const int *rcounts,
                      struct ompi_datatype_t *dt, struct ompi_op_t *op),
                     .sbuf = sbuf, .rbuf = rbuf, .rcounts = rcounts, .sdt = dt, .rdt = dt,
                     .op = op, .root = -1)
MCA_COLL_DFCCL_ENTRY(scatter, MCA_COLL_DFCCL_SCATTER, NULL,
                     (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                      int rcount, struct ompi_datatype_t *rdt, int root),
                     .sbuf = sbuf, .scount = scount, .sdt = sdt, .rbuf = rbuf,
                     .rcount = rcount, .rdt = rdt, .root = root)
MCA_COLL_DFCCL_ENTRY(scatterv, MCA_COLL_DFCCL_SCATTERV, NULL,
                     (const void *sbuf, const int *scounts, const int *displs,
                      struct ompi_datatype_t *sdt, void *rbuf, int rcount,
                      struct ompi_datatype_t *rdt, int root),
                     .sbuf = sbuf, .scounts = scounts, .sdispls = displs, .sdt = sdt,
                     .rbuf = rbuf, .rcount = rcount, .rdt = rdt, .root = root)
