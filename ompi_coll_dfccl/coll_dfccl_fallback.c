/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fallback: a call that dfccl does not run goes to the module below it
 * (tuned, libnbc, basic: whatever Open MPI selected before dfccl), in the
 * form the application used. Open MPI on GPU machines is usually not
 * CUDA-aware, and a component that is not segfaults on a device buffer, so
 * the regions of a call that are CUDA memory (any GPU, managed, page-locked)
 * are copied to host memory first, and results copied back when the
 * previous module's call completes:
 *
 *   1. the call's send and receive regions on this rank (spans): from the
 *      counts, displacements, datatypes, root and MPI_IN_PLACE;
 *   2. each region that CUDA knows is mirrored in malloc'ed memory; input
 *      regions are copied down, and so are output regions that the call
 *      may write only in part (v and w forms, gaps of derived types), so
 *      that what it does not write keeps its value;
 *   3. the previous module runs on the mirrors: blocking at once; in every
 *      other case with its nonblocking form, whose request this component
 *      polls in opal_progress (a persistent request starts one nonblocking
 *      call per MPI_Start);
 *   4. output regions are copied back, and the request completes.
 */
#include "coll_dfccl.h"

#include <stdlib.h>
#include <string.h>

#include "ompi/mca/topo/topo.h"

int mca_coll_dfccl_has_previous(mca_coll_dfccl_module_t *m, mca_coll_dfccl_coll_t coll,
                                mca_coll_dfccl_form_t form)
{
    return m->prev[coll][form].fn != NULL;
}

/* One typed call per form: blocking (..., comm, module), nonblocking
 * (..., comm, request, module), persistent (..., comm, info, request,
 * module). */
#define DFCCL_PREV(_b, _nb, _ps, ...)                                                      \
    (form == MCA_COLL_DFCCL_BLOCKING                                                       \
         ? ((mca_coll_base_module_##_b##_fn_t)p->fn)(__VA_ARGS__, comm, p->module)         \
     : form == MCA_COLL_DFCCL_NONBLOCKING                                                  \
         ? ((mca_coll_base_module_##_nb##_fn_t)p->fn)(__VA_ARGS__, comm, request,         \
                                                       p->module)                         \
         : ((mca_coll_base_module_##_ps##_fn_t)p->fn)(__VA_ARGS__, comm, a->info,         \
                                                       request, p->module))

int mca_coll_dfccl_previous(mca_coll_dfccl_module_t *m, const mca_coll_dfccl_args_t *a,
                            mca_coll_dfccl_form_t form, const void *s, void *r,
                            ompi_request_t **request)
{
    const mca_coll_dfccl_prev_t *p    = &m->prev[a->coll][form];
    struct ompi_communicator_t *comm = a->comm;

    if (p->fn == NULL) {
        static const char *const forms[] = {"blocking", "nonblocking", "persistent"};
        mca_coll_dfccl_warn("no coll component below dfccl provides the %s form of %s on "
                            "communicator %s; add libnbc (nonblocking and persistent) or "
                            "basic to --mca coll", forms[form],
                            mca_coll_dfccl_coll_name(a->coll), comm->c_name);
        return OMPI_ERR_NOT_SUPPORTED;
    }
    switch (a->coll) {
    case MCA_COLL_DFCCL_ALLREDUCE:
        return DFCCL_PREV(allreduce, iallreduce, allreduce_init, s, r, a->rcount, a->rdt,
                          a->op);
    case MCA_COLL_DFCCL_REDUCE:
        return DFCCL_PREV(reduce, ireduce, reduce_init, s, r, a->rcount, a->rdt, a->op,
                          a->root);
    case MCA_COLL_DFCCL_REDUCE_LOCAL:
        return ((mca_coll_base_module_reduce_local_fn_t)p->fn)(s, r, a->rcount, a->rdt,
                                                               a->op, p->module);
    case MCA_COLL_DFCCL_SCAN:
        return DFCCL_PREV(scan, iscan, scan_init, s, r, a->rcount, a->rdt, a->op);
    case MCA_COLL_DFCCL_EXSCAN:
        return DFCCL_PREV(exscan, iexscan, exscan_init, s, r, a->rcount, a->rdt, a->op);
    case MCA_COLL_DFCCL_ALLGATHER:
    case MCA_COLL_DFCCL_NEIGHBOR_ALLGATHER:
        return DFCCL_PREV(allgather, iallgather, allgather_init, s, a->scount, a->sdt, r,
                          a->rcount, a->rdt);
    case MCA_COLL_DFCCL_ALLGATHERV:
    case MCA_COLL_DFCCL_NEIGHBOR_ALLGATHERV:
        return DFCCL_PREV(allgatherv, iallgatherv, allgatherv_init, s, a->scount, a->sdt, r,
                          a->rcounts, a->rdispls, a->rdt);
    case MCA_COLL_DFCCL_GATHER:
        return DFCCL_PREV(gather, igather, gather_init, s, a->scount, a->sdt, r, a->rcount,
                          a->rdt, a->root);
    case MCA_COLL_DFCCL_GATHERV:
        return DFCCL_PREV(gatherv, igatherv, gatherv_init, s, a->scount, a->sdt, r,
                          a->rcounts, a->rdispls, a->rdt, a->root);
    case MCA_COLL_DFCCL_REDUCE_SCATTER_BLOCK:
        return DFCCL_PREV(reduce_scatter_block, ireduce_scatter_block,
                          reduce_scatter_block_init, s, r, a->rcount, a->rdt, a->op);
    case MCA_COLL_DFCCL_REDUCE_SCATTER:
        return DFCCL_PREV(reduce_scatter, ireduce_scatter, reduce_scatter_init, s, r,
                          a->rcounts, a->rdt, a->op);
    case MCA_COLL_DFCCL_SCATTER:
        return DFCCL_PREV(scatter, iscatter, scatter_init, s, a->scount, a->sdt, r, a->rcount,
                          a->rdt, a->root);
    case MCA_COLL_DFCCL_SCATTERV:
        return DFCCL_PREV(scatterv, iscatterv, scatterv_init, s, a->scounts, a->sdispls,
                          a->sdt, r, a->rcount, a->rdt, a->root);
    case MCA_COLL_DFCCL_BCAST:
        return DFCCL_PREV(bcast, ibcast, bcast_init, r, a->rcount, a->rdt, a->root);
    case MCA_COLL_DFCCL_BARRIER:
        return form == MCA_COLL_DFCCL_BLOCKING
                   ? ((mca_coll_base_module_barrier_fn_t)p->fn)(comm, p->module)
               : form == MCA_COLL_DFCCL_NONBLOCKING
                   ? ((mca_coll_base_module_ibarrier_fn_t)p->fn)(comm, request, p->module)
                   : ((mca_coll_base_module_barrier_init_fn_t)p->fn)(comm, a->info, request,
                                                                     p->module);
    case MCA_COLL_DFCCL_ALLTOALL:
    case MCA_COLL_DFCCL_NEIGHBOR_ALLTOALL:
        return DFCCL_PREV(alltoall, ialltoall, alltoall_init, s, a->scount, a->sdt, r,
                          a->rcount, a->rdt);
    case MCA_COLL_DFCCL_ALLTOALLV:
    case MCA_COLL_DFCCL_NEIGHBOR_ALLTOALLV:
        return DFCCL_PREV(alltoallv, ialltoallv, alltoallv_init, s, a->scounts, a->sdispls,
                          a->sdt, r, a->rcounts, a->rdispls, a->rdt);
    case MCA_COLL_DFCCL_ALLTOALLW:
        return DFCCL_PREV(alltoallw, ialltoallw, alltoallw_init, s, a->scounts, a->sdispls,
                          a->sdts, r, a->rcounts, a->rdispls, a->rdts);
    case MCA_COLL_DFCCL_NEIGHBOR_ALLTOALLW:
        return DFCCL_PREV(neighbor_alltoallw, ineighbor_alltoallw, neighbor_alltoallw_init, s,
                          a->scounts, a->sdispls_b, a->sdts, r, a->rcounts, a->rdispls_b,
                          a->rdts);
    case MCA_COLL_DFCCL_NCOLLS:
        break;
    }
    return OMPI_ERR_NOT_SUPPORTED;
}

/* ---- the regions of a call --------------------------------------------------- */

/* Widen `s` by `count` elements of `dt` at byte displacement `disp`. */
static void dfccl_span_add(mca_coll_dfccl_stage_t *s, struct ompi_datatype_t *dt, size_t count,
                           ptrdiff_t disp)
{
    ptrdiff_t gap = 0, span, lo, hi;

    if (count == 0 || dt == NULL) {
        return;
    }
    span = opal_datatype_span(&dt->super, count, &gap);
    if (span <= 0) {
        return;
    }
    lo = disp + gap;
    hi = lo + span;
    if (s->hi <= s->lo) {
        s->lo = lo;
        s->hi = hi;
    } else {
        s->lo = lo < s->lo ? lo : s->lo;
        s->hi = hi > s->hi ? hi : s->hi;
    }
}

static ptrdiff_t dfccl_extent(struct ompi_datatype_t *dt)
{
    ptrdiff_t lb = 0, extent = 0;

    if (dt != NULL) {
        ompi_datatype_get_extent(dt, &lb, &extent);
    }
    return extent;
}

/* Blocks of a v form: counts[i] elements of dt at displs[i] extents. */
static void dfccl_span_v(mca_coll_dfccl_stage_t *s, struct ompi_datatype_t *dt, int n,
                         const int *counts, const int *displs)
{
    ptrdiff_t ext = dfccl_extent(dt);

    for (int i = 0; i < n; i++) {
        if (counts[i] > 0) {
            dfccl_span_add(s, dt, (size_t)counts[i], (ptrdiff_t)displs[i] * ext);
        }
    }
}

/* Blocks of a w form: a type per block, displacements in bytes. */
static void dfccl_span_w(mca_coll_dfccl_stage_t *s, struct ompi_datatype_t *const *dts, int n,
                         const int *counts, const int *displs, const MPI_Aint *displs_b)
{
    for (int i = 0; i < n; i++) {
        if (counts[i] > 0) {
            dfccl_span_add(s, dts[i], (size_t)counts[i],
                           displs_b != NULL ? (ptrdiff_t)displs_b[i] : (ptrdiff_t)displs[i]);
        }
    }
}

/* In and out degree of a process topology (0 without one). */
static void dfccl_degrees(struct ompi_communicator_t *comm, int *in, int *out)
{
    *in = *out = 0;
    if (comm->c_topo == NULL) {
        return;
    }
    if (OMPI_COMM_IS_CART(comm)) {
        *in = *out = 2 * comm->c_topo->mtc.cart->ndims;
    } else if (OMPI_COMM_IS_GRAPH(comm)) {
        const mca_topo_base_comm_graph_t *g = comm->c_topo->mtc.graph;
        int r                               = ompi_comm_rank(comm);
        *in = *out = g->index[r] - (r > 0 ? g->index[r - 1] : 0);
    } else if (OMPI_COMM_IS_DIST_GRAPH(comm)) {
        *in  = comm->c_topo->mtc.dist_graph->indegree;
        *out = comm->c_topo->mtc.dist_graph->outdegree;
    }
}

static int dfccl_dense(struct ompi_datatype_t *dt, size_t count)
{
    return dt != NULL && ompi_datatype_is_contiguous_memory_layout(dt, (int32_t)count);
}

int mca_coll_dfccl_spans(const mca_coll_dfccl_args_t *a, mca_coll_dfccl_stage_t sp[2])
{
    struct ompi_communicator_t *comm = a->comm;
    int n = ompi_comm_size(comm), rank = ompi_comm_rank(comm), root = rank == a->root;
    int inplace = a->sbuf == MPI_IN_PLACE, in, out;
    mca_coll_dfccl_stage_t *s = &sp[0], *r = &sp[1];
    size_t total = 0;

    memset(sp, 0, 2 * sizeof(*sp));
    s->user = (void *)a->sbuf;
    s->in   = 1;
    r->user = a->rbuf;
    r->out  = 1;
    switch (a->coll) {
    case MCA_COLL_DFCCL_ALLREDUCE:
    case MCA_COLL_DFCCL_SCAN:
    case MCA_COLL_DFCCL_EXSCAN:
        if (!inplace) {
            dfccl_span_add(s, a->sdt, (size_t)a->scount, 0);
        }
        dfccl_span_add(r, a->rdt, (size_t)a->rcount, 0);
        /* exscan leaves rank 0's receive buffer as it was */
        r->in = inplace || a->coll == MCA_COLL_DFCCL_EXSCAN ||
                !dfccl_dense(a->rdt, (size_t)a->rcount);
        break;
    case MCA_COLL_DFCCL_REDUCE:
        if (!(root && inplace)) {
            dfccl_span_add(s, a->sdt, (size_t)a->scount, 0);
        }
        if (root) {
            dfccl_span_add(r, a->rdt, (size_t)a->rcount, 0);
            r->in = inplace || !dfccl_dense(a->rdt, (size_t)a->rcount);
        }
        break;
    case MCA_COLL_DFCCL_REDUCE_LOCAL:
        dfccl_span_add(s, a->sdt, (size_t)a->scount, 0);
        dfccl_span_add(r, a->rdt, (size_t)a->rcount, 0);
        r->in = 1;
        break;
    case MCA_COLL_DFCCL_ALLGATHER:
    case MCA_COLL_DFCCL_ALLTOALL:
        if (!inplace) {
            dfccl_span_add(s, a->sdt,
                           (size_t)a->scount * (a->coll == MCA_COLL_DFCCL_ALLTOALL ? n : 1), 0);
        }
        dfccl_span_add(r, a->rdt, (size_t)a->rcount * n, 0);
        r->in = inplace || !dfccl_dense(a->rdt, (size_t)a->rcount * n);
        break;
    case MCA_COLL_DFCCL_ALLGATHERV:
        if (!inplace) {
            dfccl_span_add(s, a->sdt, (size_t)a->scount, 0);
        }
        dfccl_span_v(r, a->rdt, n, a->rcounts, a->rdispls);
        r->in = 1;
        break;
    case MCA_COLL_DFCCL_GATHER:
    case MCA_COLL_DFCCL_GATHERV:
        if (!(root && inplace)) {
            dfccl_span_add(s, a->sdt, (size_t)a->scount, 0);
        }
        if (root && a->coll == MCA_COLL_DFCCL_GATHER) {
            dfccl_span_add(r, a->rdt, (size_t)a->rcount * n, 0);
            r->in = inplace || !dfccl_dense(a->rdt, (size_t)a->rcount * n);
        } else if (root) {
            dfccl_span_v(r, a->rdt, n, a->rcounts, a->rdispls);
            r->in = 1;
        }
        break;
    case MCA_COLL_DFCCL_SCATTER:
    case MCA_COLL_DFCCL_SCATTERV:
        if (root && a->coll == MCA_COLL_DFCCL_SCATTER) {
            dfccl_span_add(s, a->sdt, (size_t)a->scount * n, 0);
        } else if (root) {
            dfccl_span_v(s, a->sdt, n, a->scounts, a->sdispls);
        }
        if (!(root && a->rbuf == MPI_IN_PLACE)) {
            dfccl_span_add(r, a->rdt, (size_t)a->rcount, 0);
            r->in = !dfccl_dense(a->rdt, (size_t)a->rcount);
        }
        break;
    case MCA_COLL_DFCCL_REDUCE_SCATTER_BLOCK:
    case MCA_COLL_DFCCL_REDUCE_SCATTER:
        if (a->coll == MCA_COLL_DFCCL_REDUCE_SCATTER) {
            for (int i = 0; i < n; i++) {
                total += (size_t)a->rcounts[i];
            }
        } else {
            total = (size_t)a->rcount * n;
        }
        if (inplace) {
            dfccl_span_add(r, a->rdt, total, 0);
            r->in = 1;
        } else {
            size_t mine = a->coll == MCA_COLL_DFCCL_REDUCE_SCATTER ? (size_t)a->rcounts[rank]
                                                                   : (size_t)a->rcount;
            dfccl_span_add(s, a->sdt, total, 0);
            dfccl_span_add(r, a->rdt, mine, 0);
            r->in = !dfccl_dense(a->rdt, mine);
        }
        break;
    case MCA_COLL_DFCCL_BCAST:
        dfccl_span_add(r, a->rdt, (size_t)a->rcount, 0);
        r->in  = root;
        r->out = !root;
        break;
    case MCA_COLL_DFCCL_BARRIER:
        break;
    case MCA_COLL_DFCCL_ALLTOALLV:
        if (!inplace) {
            dfccl_span_v(s, a->sdt, n, a->scounts, a->sdispls);
        }
        dfccl_span_v(r, a->rdt, n, a->rcounts, a->rdispls);
        r->in = 1;
        break;
    case MCA_COLL_DFCCL_ALLTOALLW:
        if (!inplace) {
            dfccl_span_w(s, a->sdts, n, a->scounts, a->sdispls, NULL);
        }
        dfccl_span_w(r, a->rdts, n, a->rcounts, a->rdispls, NULL);
        r->in = 1;
        break;
    case MCA_COLL_DFCCL_NEIGHBOR_ALLGATHER:
    case MCA_COLL_DFCCL_NEIGHBOR_ALLGATHERV:
    case MCA_COLL_DFCCL_NEIGHBOR_ALLTOALL:
    case MCA_COLL_DFCCL_NEIGHBOR_ALLTOALLV:
    case MCA_COLL_DFCCL_NEIGHBOR_ALLTOALLW:
        dfccl_degrees(comm, &in, &out);
        switch (a->coll) {
        case MCA_COLL_DFCCL_NEIGHBOR_ALLGATHER:
            dfccl_span_add(s, a->sdt, (size_t)a->scount, 0);
            dfccl_span_add(r, a->rdt, (size_t)a->rcount * in, 0);
            break;
        case MCA_COLL_DFCCL_NEIGHBOR_ALLGATHERV:
            dfccl_span_add(s, a->sdt, (size_t)a->scount, 0);
            dfccl_span_v(r, a->rdt, in, a->rcounts, a->rdispls);
            break;
        case MCA_COLL_DFCCL_NEIGHBOR_ALLTOALL:
            dfccl_span_add(s, a->sdt, (size_t)a->scount * out, 0);
            dfccl_span_add(r, a->rdt, (size_t)a->rcount * in, 0);
            break;
        case MCA_COLL_DFCCL_NEIGHBOR_ALLTOALLV:
            dfccl_span_v(s, a->sdt, out, a->scounts, a->sdispls);
            dfccl_span_v(r, a->rdt, in, a->rcounts, a->rdispls);
            break;
        default:
            dfccl_span_w(s, a->sdts, out, a->scounts, NULL, a->sdispls_b);
            dfccl_span_w(r, a->rdts, in, a->rcounts, NULL, a->rdispls_b);
            break;
        }
        /* blocks of MPI_PROC_NULL neighbours are not written */
        r->in = 1;
        break;
    case MCA_COLL_DFCCL_NCOLLS:
        break;
    }
    if (s->hi <= s->lo) {
        s->user = NULL;
    }
    if (r->hi <= r->lo) {
        r->user = NULL;
    }
    return (s->user != NULL) + (r->user != NULL);
}

/* ---- staging ----------------------------------------------------------------- */

void mca_coll_dfccl_stages_free(mca_coll_dfccl_req_t *req)
{
    for (int i = 0; i < req->nstages; i++) {
        free(req->stages[i].host);
    }
    req->nstages = 0;
}

static int dfccl_stages_up(mca_coll_dfccl_stage_t *st, int n)
{
    int rc = OMPI_SUCCESS;

    for (int i = 0; i < n; i++) {
        if (st[i].out && st[i].host != NULL &&
            mca_coll_dfccl_copy((char *)st[i].user + st[i].lo, st[i].host,
                                (size_t)(st[i].hi - st[i].lo)) != OMPI_SUCCESS) {
            rc = OMPI_ERROR;
        }
    }
    return rc;
}

/*
 * Mirror the CUDA-memory regions of `a` in host memory: st[] gets the
 * mirrors (host NULL: the region is used where it is), *s_p and *r_p the
 * pointers for the previous module. Returns the number of mirrors, or -1.
 */
static int dfccl_stage(const mca_coll_dfccl_args_t *a, mca_coll_dfccl_stage_t st[2],
                       const void **s_p, void **r_p)
{
    int nst = 0;

    *s_p = a->sbuf;
    *r_p = a->rbuf;
    memset(st, 0, 2 * sizeof(*st));
    if (mca_coll_dfccl_component.gpus == 0) {
        return 0;
    }
    mca_coll_dfccl_spans(a, st);
    for (int i = 0; i < 2; i++) {
        int dev, settle = 0;
        size_t bytes = (size_t)(st[i].hi - st[i].lo);

        st[i].host = NULL;
        if (st[i].user == NULL ||
            mca_coll_dfccl_mem_query(st[i].user, &dev, &settle) == MCA_COLL_DFCCL_MEM_HOST) {
            continue;
        }
        st[i].host = malloc(bytes);
        if (st[i].host == NULL ||
            (st[i].in && mca_coll_dfccl_copy(st[i].host, (char *)st[i].user + st[i].lo,
                                             bytes) != OMPI_SUCCESS)) {
            mca_coll_dfccl_warn("%s on communicator %s: cannot stage %zu bytes of CUDA memory "
                                "through host memory", mca_coll_dfccl_coll_name(a->coll),
                                a->comm->c_name, bytes);
            free(st[0].host);
            free(st[1].host);
            return -1;
        }
        if (i == 0) {
            *s_p = st[i].host - st[i].lo;
        } else {
            *r_p = st[i].host - st[i].lo;
        }
        nst++;
    }
    return nst;
}

int mca_coll_dfccl_fallback(mca_coll_dfccl_module_t *m, const mca_coll_dfccl_args_t *a,
                            mca_coll_dfccl_req_t *req)
{
    mca_coll_dfccl_component_t *cm = &mca_coll_dfccl_component;
    mca_coll_dfccl_stage_t st[2];
    const void *s;
    void *r;
    int nst, rc;

    __atomic_fetch_add(&cm->fallbacks, 1, __ATOMIC_RELAXED);
    nst = dfccl_stage(a, st, &s, &r);
    if (nst < 0) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    if (nst > 0) {
        __atomic_fetch_add(&cm->staged, 1, __ATOMIC_RELAXED);
        MCA_COLL_DFCCL_VERBOSE(3, "%s on communicator %s: staged through host memory",
                               mca_coll_dfccl_coll_name(a->coll), a->comm->c_name);
    }
    if (req == NULL) {
        rc = mca_coll_dfccl_previous(m, a, MCA_COLL_DFCCL_BLOCKING, s, r, NULL);
        if (rc == OMPI_SUCCESS && dfccl_stages_up(st, 2) != OMPI_SUCCESS) {
            rc = OMPI_ERROR;
        }
        free(st[0].host);
        free(st[1].host);
        return rc;
    }
    /* our request: the previous module's nonblocking form, polled */
    memcpy(req->stages, st, sizeof(st));
    req->nstages = 2;
    rc = mca_coll_dfccl_previous(m, a, MCA_COLL_DFCCL_NONBLOCKING, s, r, &req->inner);
    if (rc != OMPI_SUCCESS) {
        req->inner = NULL;
        mca_coll_dfccl_stages_free(req);
        return rc;
    }
    pthread_mutex_lock(&cm->done_lock);
    req->inner_next = cm->inner_head;
    cm->inner_head  = req;
    pthread_mutex_unlock(&cm->done_lock);
    mca_coll_dfccl_progress_need();
    return OMPI_SUCCESS;
}

int mca_coll_dfccl_fallback_progress(void)
{
    mca_coll_dfccl_component_t *cm = &mca_coll_dfccl_component;
    mca_coll_dfccl_req_t *done = NULL, **pp, *r;
    int n = 0;

    if (cm->inner_head == NULL) {
        return 0;
    }
    pthread_mutex_lock(&cm->done_lock);
    for (pp = &cm->inner_head; (r = *pp) != NULL;) {
        if (REQUEST_COMPLETE(r->inner)) {
            *pp           = r->inner_next;
            r->inner_next = done;
            done          = r;
        } else {
            pp = &r->inner_next;
        }
    }
    pthread_mutex_unlock(&cm->done_lock);
    while ((r = done) != NULL) {
        int rc = r->inner->req_status.MPI_ERROR;

        done = r->inner_next;
        ompi_request_free(&r->inner);
        r->inner = NULL;
        if (rc == MPI_SUCCESS && dfccl_stages_up(r->stages, r->nstages) != OMPI_SUCCESS) {
            rc = MPI_ERR_OTHER;
        }
        mca_coll_dfccl_stages_free(r);
        mca_coll_dfccl_req_finish(r, rc);
        n++;
    }
    return n;
}
