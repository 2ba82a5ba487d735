/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Gathers: allgather runs on dfccl (it moves bytes, so any type that is
 * contiguous on both sides, with equal bytes per rank); allgatherv,
 * gather and gatherv take the previous module, with CUDA memory staged
 * through host memory.
 */
#include "coll_dfccl.h"

#include <string.h>

static int dfccl_plan_allgather(const mca_coll_dfccl_args_t *a, mca_coll_dfccl_plan_t *p)
{
    int n = ompi_comm_size(a->comm), inplace = a->sbuf == MPI_IN_PLACE;
    size_t rbytes = mca_coll_dfccl_block_bytes(a, 0);

    memset(p, 0, sizeof(*p));
    if (rbytes == 0) {
        return 0;
    }
    p->sig.kind  = DFCCL_KIND_ALLGATHER;
    p->sig.count = rbytes;
    p->sig.dtype = DFCCL_UINT8;
    p->sig.root  = -1;
    p->s_user    = inplace ? NULL : a->sbuf;
    p->s_bytes   = rbytes;
    p->s_off     = (size_t)ompi_comm_rank(a->comm) * rbytes;
    p->r_user    = a->rbuf;
    p->r_bytes   = rbytes * n;
    p->r_in      = inplace;
    p->r_out     = 1;
    p->out_bytes = p->r_bytes;
    return 1;
}

#define DFCCL_GATHER_PARAMS                                                                \
    (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf, int rcount,    \
     struct ompi_datatype_t *rdt)
#define DFCCL_GATHERV_PARAMS                                                               \
    (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,                \
     const int *rcounts, const int *displs, struct ompi_datatype_t *rdt)
#define DFCCL_GATHER_ARGS                                                                  \
    .sbuf = sbuf, .scount = scount, .sdt = sdt, .rbuf = rbuf, .rcount = rcount, .rdt = rdt
#define DFCCL_GATHERV_ARGS                                                                 \
    .sbuf = sbuf, .scount = scount, .sdt = sdt, .rbuf = rbuf, .rcounts = rcounts,          \
    .rdispls = displs, .rdt = rdt

MCA_COLL_DFCCL_ENTRY(allgather, MCA_COLL_DFCCL_ALLGATHER, dfccl_plan_allgather,
                     DFCCL_GATHER_PARAMS, DFCCL_GATHER_ARGS, .root = -1)
MCA_COLL_DFCCL_ENTRY(allgatherv, MCA_COLL_DFCCL_ALLGATHERV, NULL, DFCCL_GATHERV_PARAMS,
                     DFCCL_GATHERV_ARGS, .root = -1)
MCA_COLL_DFCCL_ENTRY(gather, MCA_COLL_DFCCL_GATHER, NULL,
                     (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                      int rcount, struct ompi_datatype_t *rdt, int root),
                     DFCCL_GATHER_ARGS, .root = root)
MCA_COLL_DFCCL_ENTRY(gatherv, MCA_COLL_DFCCL_GATHERV, NULL,
                     (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                      const int *rcounts, const int *displs, struct ompi_datatype_t *rdt,
                      int root),
                     DFCCL_GATHERV_ARGS, .root = root)
