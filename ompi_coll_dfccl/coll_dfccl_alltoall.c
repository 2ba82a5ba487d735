/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Exchanges: alltoall, alltoallv, alltoallw and the neighborhood
 * collectives of process topologies take the previous module, with CUDA
 * memory staged through host memory (every block of a v or w form within
 * the span its counts and displacements give; a neighborhood's blocks
 * follow from its in- and out-degree).
 */
#include "coll_dfccl.h"

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

MCA_COLL_DFCCL_ENTRY(alltoall, MCA_COLL_DFCCL_ALLTOALL, NULL, DFCCL_ONE_PARAMS, DFCCL_ONE_ARGS)
MCA_COLL_DFCCL_ENTRY(alltoallv, MCA_COLL_DFCCL_ALLTOALLV, NULL, DFCCL_V_PARAMS, DFCCL_V_ARGS)
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
