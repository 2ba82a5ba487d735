/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Broadcast runs on dfccl (it moves bytes: any contiguous type); barrier
 * has no buffer and takes the previous module, in order with the
 * communicator's other calls.
 */
#include "coll_dfccl.h"

#include <string.h>

static int dfccl_plan_bcast(const mca_coll_dfccl_args_t *a, mca_coll_dfccl_plan_t *p)
{
    int root     = ompi_comm_rank(a->comm) == a->root;
    size_t bytes = mca_coll_dfccl_contig_bytes(a->rdt, (size_t)(a->rcount > 0 ? a->rcount : 0));

    memset(p, 0, sizeof(*p));
    if (bytes == 0) {
        return 0;
    }
    p->sig.kind  = DFCCL_KIND_BROADCAST;
    p->sig.count = bytes;
    p->sig.dtype = DFCCL_UINT8;
    p->sig.root  = a->root;
    p->s_user    = NULL; /* the root sends from the buffer itself */
    p->r_user    = a->rbuf;
    p->r_bytes   = bytes;
    p->r_in      = root;
    p->r_out     = !root;
    p->out_bytes = bytes;
    return 1;
}

MCA_COLL_DFCCL_ENTRY(bcast, MCA_COLL_DFCCL_BCAST, dfccl_plan_bcast,
                     (void *buf, int count, struct ompi_datatype_t *dt, int root),
                     .rbuf = buf, .rcount = count, .rdt = dt, .root = root)

/* No buffers, so no parameters of its own: the three forms by hand. */
int mca_coll_dfccl_barrier(struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_dfccl_args_t a = {
        .coll = MCA_COLL_DFCCL_BARRIER, .form = MCA_COLL_DFCCL_BLOCKING, .root = -1, .comm = comm};

    return mca_coll_dfccl_call(MCA_COLL_DFCCL_MODULE(module), &a, NULL, NULL);
}

int mca_coll_dfccl_ibarrier(struct ompi_communicator_t *comm, ompi_request_t **request,
                            mca_coll_base_module_t *module)
{
    mca_coll_dfccl_args_t a = {.coll = MCA_COLL_DFCCL_BARRIER,
                               .form = MCA_COLL_DFCCL_NONBLOCKING,
                               .root = -1,
                               .comm = comm};

    return mca_coll_dfccl_call(MCA_COLL_DFCCL_MODULE(module), &a, NULL, request);
}

int mca_coll_dfccl_barrier_init(struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_dfccl_args_t a = {.coll = MCA_COLL_DFCCL_BARRIER,
                               .form = MCA_COLL_DFCCL_PERSISTENT,
                               .root = -1,
                               .comm = comm,
                               .info = info};

    return mca_coll_dfccl_call(MCA_COLL_DFCCL_MODULE(module), &a, NULL, request);
}
