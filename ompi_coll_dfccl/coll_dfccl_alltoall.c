/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Exchanges: alltoall and alltoallv run on dfccl. They move bytes, so any
 * type that is contiguous (lb 0, extent equal to size) on both sides:
 * alltoall with equal bytes per block on both sides is dfccl's all-to-all
 * of that many bytes; alltoallv is dfccl's alltoallv with its counts and
 * displacements in bytes, on the span of each side that its blocks cover
 * (negative displacements included). dfccl runs alltoallv only on groups
 * whose ranks write into each other's connectors (one host, a few ranks);
 * where it refuses, the communicator's alltoallvs take the previous
 * module. MPI_IN_PLACE: dfccl needs the input apart from the output, so it
 * is copied from the receive buffer into a temporary first (s_copy).
 * Other types, alltoallw and the neighborhood collectives of process
 * topologies take the previous module, with CUDA memory staged through
 * host memory (every block of a v or w form within the span its counts and
 * displacements give; a neighborhood's blocks follow from its in- and
 * out-degree).
 */
#include "coll_dfccl.h"

#include <string.h>

/* The size of a type whose `count` elements are count * size contiguous
 * bytes for every count, or 0. */
static size_t dfccl_dense_size(struct ompi_datatype_t *dt)
{
    ptrdiff_t lb, extent;
    size_t size = mca_coll_dfccl_contig_bytes(dt, 1);

    ompi_datatype_get_extent(dt, &lb, &extent);
    return size > 0 && lb == 0 && (size_t)extent == size ? size : 0;
}

static int dfccl_plan_alltoall(const mca_coll_dfccl_args_t *a, mca_coll_dfccl_plan_t *p)
{
    int n = ompi_comm_size(a->comm), inplace = a->sbuf == MPI_IN_PLACE;
    /* every rank's blocks are the same size (MPI's rule): the same choice
     * on every rank */
    size_t rbytes = mca_coll_dfccl_block_bytes(a, 1);

    memset(p, 0, sizeof(*p));
    if (rbytes == 0) {
        return 0;
    }
    p->sig.kind  = DFCCL_KIND_ALLTOALL;
    p->sig.count = rbytes;
    p->sig.dtype = DFCCL_UINT8;
    p->sig.root  = -1;
    p->s_user    = inplace ? NULL : a->sbuf;
    p->s_bytes   = rbytes * n;
    p->s_copy    = inplace;
    p->r_user    = a->rbuf;
    p->r_bytes   = rbytes * n;
    p->r_out     = 1;
    p->out_bytes = p->r_bytes;
    return 1;
}

/* One side's blocks in bytes; [*lo, *lo + *len) of the buffer holds them. */
static void dfccl_v_side(int n, const int *counts, const int *displs, size_t size,
                         size_t *cnt_b, size_t *disp_b, ptrdiff_t *lo, size_t *len)
{
    ptrdiff_t l = 0, h = 0;
    int any = 0;

    for (int q = 0; q < n; q++) {
        ptrdiff_t d = (ptrdiff_t)displs[q] * (ptrdiff_t)size, e;
        if (counts[q] <= 0) {
            continue;
        }
        e = d + (ptrdiff_t)((size_t)counts[q] * size);
        l = !any || d < l ? d : l;
        h = !any || e > h ? e : h;
        any = 1;
    }
    *lo  = l;
    *len = (size_t)(h - l);
    for (int q = 0; q < n && cnt_b != NULL; q++) {
        cnt_b[q]  = counts[q] > 0 ? (size_t)counts[q] * size : 0;
        disp_b[q] = counts[q] > 0 ? (size_t)((ptrdiff_t)displs[q] * (ptrdiff_t)size - l) : 0;
    }
}

int mca_coll_dfccl_alltoallv_layout(const mca_coll_dfccl_args_t *a, size_t *v, ptrdiff_t *s_lo,
                                    size_t *s_len, ptrdiff_t *r_lo, size_t *r_len)
{
    int n = ompi_comm_size(a->comm), inplace = a->sbuf == MPI_IN_PLACE;
    /* in place, the receive side's counts and displacements are the input's */
    const int *sc = inplace ? a->rcounts : a->scounts, *sd = inplace ? a->rdispls : a->sdispls;
    size_t rsize = dfccl_dense_size(a->rdt);
    size_t ssize = inplace ? rsize : dfccl_dense_size(a->sdt);

    if (rsize == 0 || ssize == 0) {
        return 0;
    }
    dfccl_v_side(n, sc, sd, ssize, v, v != NULL ? v + n : NULL, s_lo, s_len);
    dfccl_v_side(n, a->rcounts, a->rdispls, rsize, v != NULL ? v + 2 * n : NULL,
                 v != NULL ? v + 3 * n : NULL, r_lo, r_len);
    return 1;
}

static int dfccl_plan_alltoallv(const mca_coll_dfccl_args_t *a, mca_coll_dfccl_plan_t *p)
{
    int inplace = a->sbuf == MPI_IN_PLACE;
    ptrdiff_t s_lo, r_lo;
    size_t s_len, r_len;

    memset(p, 0, sizeof(*p));
    /* whether the types are dense is the same on every rank (docs/mpi.md);
     * the counts are not, so they decide nothing here */
    if (ompi_comm_size(a->comm) > MCA_COLL_DFCCL_A2AV_MAX_RANKS ||
        !mca_coll_dfccl_alltoallv_layout(a, NULL, &s_lo, &s_len, &r_lo, &r_len)) {
        return 0;
    }
    p->sig.kind  = DFCCL_KIND_ALLTOALLV;
    p->sig.dtype = DFCCL_UINT8;
    p->sig.root  = -1;
    p->s_user    = inplace || a->sbuf == NULL ? NULL : (const char *)a->sbuf + s_lo;
    p->s_bytes   = s_len;
    p->s_copy    = inplace;
    p->r_user    = a->rbuf == NULL ? NULL : (char *)a->rbuf + r_lo;
    p->r_bytes   = r_len;
    p->r_in      = 1; /* a temporary keeps what lies between the blocks */
    p->r_out     = 1;
    p->out_bytes = r_len;
    return 1;
}

#define DFCCL_ONE_PARAMS                                                                   \
    (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf, int rcount,    \
     struct ompi_datatype_t *rdt)
#define DFCCL_ONE_ARGS                                                                     \
    .sbuf = sbuf, .scount = scount, .sdt = sdt, .rbuf = rbuf, .rcount = rcount, .rdt = rdt, \
    .root = -1
#define DFCCL_V_PARAMS                                                                     \
    (const void *sbuf, const int *scounts, const int *sdispls, struct ompi_datatype_t *sdt, \
     void *rbuf, const int *rcounts, const int *rdispls, struct ompi_datatype_t *rdt)
#define DFCCL_V_ARGS                                                                       \
    .sbuf = sbuf, .scounts = scounts, .sdispls = sdispls, .sdt = sdt, .rbuf = rbuf,        \
    .rcounts = rcounts, .rdispls = rdispls, .rdt = rdt, .root = -1
/* a type per block: displacements in elements (int) or, for the
 * neighborhood form, in bytes (MPI_Aint), kept in args fields of their own */
#define DFCCL_W_PARAMS(disp_t)                                                             \
    (const void *sbuf, const int *scounts, const disp_t *sdispls,                          \
     struct ompi_datatype_t *const *sdts, void *rbuf, const int *rcounts,                  \
     const disp_t *rdispls, struct ompi_datatype_t *const *rdts)
#define DFCCL_W_ARGS(sdispls_field, rdispls_field)                                         \
    .sbuf = sbuf, .scounts = scounts, .sdispls_field = sdispls, .sdts = sdts, .rbuf = rbuf, \
    .rcounts = rcounts, .rdispls_field = rdispls, .rdts = rdts, .root = -1

MCA_COLL_DFCCL_ENTRY(alltoall, MCA_COLL_DFCCL_ALLTOALL, dfccl_plan_alltoall, DFCCL_ONE_PARAMS,
                     DFCCL_ONE_ARGS)
MCA_COLL_DFCCL_ENTRY(alltoallv, MCA_COLL_DFCCL_ALLTOALLV, dfccl_plan_alltoallv,
                     DFCCL_V_PARAMS, DFCCL_V_ARGS)
MCA_COLL_DFCCL_ENTRY(alltoallw, MCA_COLL_DFCCL_ALLTOALLW, NULL, DFCCL_W_PARAMS(int),
                     DFCCL_W_ARGS(sdispls, rdispls))
MCA_COLL_DFCCL_ENTRY(neighbor_allgather, MCA_COLL_DFCCL_NEIGHBOR_ALLGATHER, NULL,
                     DFCCL_ONE_PARAMS, DFCCL_ONE_ARGS)
MCA_COLL_DFCCL_ENTRY(neighbor_allgatherv, MCA_COLL_DFCCL_NEIGHBOR_ALLGATHERV, NULL,
                     (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                      const int *rcounts, const int *displs, struct ompi_datatype_t *rdt),
                     .sbuf = sbuf, .scount = scount, .sdt = sdt, .rbuf = rbuf,
                     .rcounts = rcounts, .rdispls = displs, .rdt = rdt, .root = -1)
MCA_COLL_DFCCL_ENTRY(neighbor_alltoall, MCA_COLL_DFCCL_NEIGHBOR_ALLTOALL, NULL,
                     DFCCL_ONE_PARAMS, DFCCL_ONE_ARGS)
MCA_COLL_DFCCL_ENTRY(neighbor_alltoallv, MCA_COLL_DFCCL_NEIGHBOR_ALLTOALLV, NULL,
                     DFCCL_V_PARAMS, DFCCL_V_ARGS)
MCA_COLL_DFCCL_ENTRY(neighbor_alltoallw, MCA_COLL_DFCCL_NEIGHBOR_ALLTOALLW, NULL,
                     DFCCL_W_PARAMS(MPI_Aint), DFCCL_W_ARGS(sdispls_b, rdispls_b))
