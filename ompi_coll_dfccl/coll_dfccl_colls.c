/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The MPI entry points: allreduce, allgather, reduce_scatter_block,
 * reduce_scatter, reduce and bcast, each blocking, nonblocking (MPI_I*) and
 * persistent (MPIX_*_init + MPI_Start).
 *
 * Routing. Each call takes one of three paths, decided before anything is
 * posted:
 *   dfccl    - the communicator has a dfccl group, the count is nonzero, the
 *              type and op map onto dfccl's (reductions: predefined integer
 *              and floating types with SUM, PROD, MIN, MAX; allgather and
 *              bcast move bytes, so any contiguous type), and every buffer
 *              that matters on this rank is memory dfccl takes (device or
 *              managed memory on the cuda backend, host memory on the host
 *              backend);
 *   staged   - otherwise, if some buffer is device memory: copy it to host
 *              memory, run the previous module there, copy the result back;
 *   previous - otherwise the previous module runs the call as it is.
 * The decision must be the same on every rank, or one rank waits in dfccl
 * for peers that went to the previous module. Type, op and counts are the
 * same on every rank by MPI's rules. The buffer kind is not: we assume every
 * rank passes the same kind of buffer, as GPU codes do. The cheap local
 * check is that a rank's own buffers are all of one kind; when they are not,
 * the call is staged and, at coll_dfccl_verbose >= 1, reported, because it is
 * where ranks may disagree.
 *
 * reduce_scatter with unequal counts runs as an allreduce of all counts
 * into a temporary buffer of the instance, of which this rank's block is
 * copied out at completion. It moves twice the data of a reduce-scatter
 * but needs no packing of the input, and zero counts need nothing special.
 * Equal counts (what benchmarks use) run as dfccl's reduce-scatter.
 */
#include "coll_dfccl.h"

#include <stdlib.h>
#include <string.h>

enum { DFCCL_BLOCKING, DFCCL_NONBLOCKING, DFCCL_PERSISTENT };
enum { DFCCL_PATH_DFCCL, DFCCL_PATH_STAGED, DFCCL_PATH_PREVIOUS };

static const char *const dfccl_path_names[] = {"dfccl", "staged", "previous"};

/* ---- types, ops, buffers --------------------------------------------------- */

static int dfccl_map_type(struct ompi_datatype_t *dt, dfccl_datatype_t *t)
{
    if (dt == MPI_CHAR || dt == MPI_SIGNED_CHAR || dt == MPI_INT8_T) {
        *t = DFCCL_INT8; /* char is signed on the platforms dfccl supports */
    } else if (dt == MPI_UNSIGNED_CHAR || dt == MPI_BYTE || dt == MPI_UINT8_T) {
        *t = DFCCL_UINT8;
    } else if (dt == MPI_INT || dt == MPI_INT32_T) {
        *t = DFCCL_INT32;
    } else if (dt == MPI_UNSIGNED || dt == MPI_UINT32_T) {
        *t = DFCCL_UINT32;
    } else if (dt == MPI_INT64_T || dt == MPI_LONG_LONG_INT || dt == MPI_LONG_LONG ||
               (dt == MPI_LONG && sizeof(long) == 8)) {
        *t = DFCCL_INT64;
    } else if (dt == MPI_UINT64_T || dt == MPI_UNSIGNED_LONG_LONG ||
               (dt == MPI_UNSIGNED_LONG && sizeof(unsigned long) == 8)) {
        *t = DFCCL_UINT64;
    } else if (dt == MPI_FLOAT) {
        *t = DFCCL_FLOAT32;
    } else if (dt == MPI_DOUBLE) {
        *t = DFCCL_FLOAT64;
    } else {
        return 0; /* MPI has no standard half type; others are not in dfccl */
    }
    return 1;
}

static int dfccl_map_op(struct ompi_op_t *op, dfccl_op_t *o)
{
    if (op == MPI_SUM) {
        *o = DFCCL_SUM;
    } else if (op == MPI_PROD) {
        *o = DFCCL_PROD;
    } else if (op == MPI_MIN) {
        *o = DFCCL_MIN;
    } else if (op == MPI_MAX) {
        *o = DFCCL_MAX;
    } else {
        return 0;
    }
    return 1;
}

/* Bytes of `count` elements of a contiguous type starting at lb 0, or 0. */
static size_t dfccl_contig_bytes(struct ompi_datatype_t *dt, int count)
{
    ptrdiff_t lb, extent;
    size_t size;

    if (count <= 0 || !ompi_datatype_is_contiguous_memory_layout(dt, count)) {
        return 0;
    }
    ompi_datatype_get_true_extent(dt, &lb, &extent);
    ompi_datatype_type_size(dt, &size);
    return lb == 0 ? size * (size_t)count : 0;
}

static size_t dfccl_type_size(struct ompi_datatype_t *dt)
{
    size_t size;

    ompi_datatype_type_size(dt, &size);
    return size;
}

/*
 * Which path the call takes (see the top of the file). `bufs` are the
 * buffers that matter on this rank (NULL entries are skipped).
 */
static int dfccl_route(mca_coll_dfccl_module_t *m, int supported, const void *const *bufs,
                       int nbufs, const char *coll, int *settle)
{
    mca_coll_dfccl_component_t *cm = &mca_coll_dfccl_component;
    int ndev = 0, n = 0, path;

    MCA_COLL_DFCCL_STAMP(MCA_COLL_DFCCL_T_ENTER);
    for (int i = 0; i < nbufs; i++) {
        if (bufs[i] != NULL && bufs[i] != MPI_IN_PLACE) {
            ndev += mca_coll_dfccl_device_buf(bufs[i], settle);
            n++;
        }
    }
    if (ndev > 0 && ndev < n) {
        MCA_COLL_DFCCL_VERBOSE(1, "%s on communicator %s mixes device and host buffers on "
                               "rank %d: staged through the previous module; every rank must "
                               "do the same or the job hangs", coll, m->comm->c_name,
                               ompi_comm_rank(m->comm));
        path = DFCCL_PATH_STAGED;
    } else if (m->group != NULL && supported &&
               (cm->mode == MCA_COLL_DFCCL_MODE_CUDA ? ndev == n : ndev == 0)) {
        path = DFCCL_PATH_DFCCL;
    } else {
        path = ndev > 0 ? DFCCL_PATH_STAGED : DFCCL_PATH_PREVIOUS;
    }
    if (path != DFCCL_PATH_DFCCL) {
        __atomic_fetch_add(&cm->fallbacks, 1, __ATOMIC_RELAXED);
    }
    MCA_COLL_DFCCL_VERBOSE(3, "%s on communicator %s: %s", coll, m->comm->c_name,
                           dfccl_path_names[path]);
    MCA_COLL_DFCCL_STAMP(MCA_COLL_DFCCL_T_ROUTED);
    return path;
}

/* ---- the dfccl path --------------------------------------------------------- */

static int dfccl_req_start(size_t count, ompi_request_t **requests)
{
    for (size_t i = 0; i < count; i++) {
        mca_coll_dfccl_req_t *req = (mca_coll_dfccl_req_t *)requests[i];
        int rc;

        req->completed                        = 0;
        req->super.super.req_state            = OMPI_REQUEST_ACTIVE;
        req->super.super.req_complete         = REQUEST_PENDING;
        req->super.super.req_status.MPI_ERROR = MPI_SUCCESS;
        if (req->inner != NULL) {
            /* staged: fresh host copies, then the previous module's request */
            for (int s = 0; s < req->nstages; s++) {
                mca_coll_dfccl_stage_t *st = &req->stages[s];
                if (st->down && mca_coll_dfccl_copy(st->host, (char *)st->dev + st->gap,
                                                    st->bytes) != OMPI_SUCCESS) {
                    return OMPI_ERROR;
                }
            }
            rc = req->inner->req_start(1, &req->inner);
            if (rc != OMPI_SUCCESS) {
                return rc;
            }
            mca_coll_dfccl_staged_track(req);
            continue;
        }
        rc = mca_coll_dfccl_op_start(req->op.module, &req->op.entry->sig, req);
        if (rc != OMPI_SUCCESS) {
            return rc;
        }
    }
    return OMPI_SUCCESS;
}

/*
 * Run `op` (buffers filled in) with signature `sig` in the given form.
 */
static int dfccl_run(mca_coll_dfccl_module_t *m, const mca_coll_dfccl_sig_t *sig,
                     const mca_coll_dfccl_op_t *op, int form, ompi_request_t **request)
{
    mca_coll_dfccl_req_t *req;
    ompi_request_t *r;
    int rc;

    req = mca_coll_dfccl_req_new(m->comm, form == DFCCL_PERSISTENT);
    if (req == NULL) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    MCA_COLL_DFCCL_STAMP(MCA_COLL_DFCCL_T_REQ);
    req->op        = *op;
    req->op.module = m;
    if (form == DFCCL_PERSISTENT) {
        pthread_mutex_lock(&m->lock);
        req->op.entry = mca_coll_dfccl_entry_get(m, sig);
        pthread_mutex_unlock(&m->lock);
        if (req->op.entry == NULL) {
            r = &req->super.super;
            ompi_request_free(&r);
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
        req->super.super.req_start = dfccl_req_start;
        *request                   = &req->super.super;
        return OMPI_SUCCESS;
    }
    req->super.super.req_state = OMPI_REQUEST_ACTIVE;
    rc                         = mca_coll_dfccl_op_start(m, sig, req);
    if (rc != OMPI_SUCCESS) {
        req->completed = 1;
        r              = &req->super.super;
        ompi_request_free(&r);
        return rc;
    }
    if (form == DFCCL_NONBLOCKING) {
        *request = &req->super.super;
        return OMPI_SUCCESS;
    }
    /* blocking: returns only when dfccl's work is done */
    r = &req->super.super;
    ompi_request_wait_completion(r);
    MCA_COLL_DFCCL_STAMP(MCA_COLL_DFCCL_T_WAITED);
    rc = r->req_status.MPI_ERROR;
    ompi_request_free(&r);
#ifdef DFCCL_STAGE_TIMES
    MCA_COLL_DFCCL_STAMP(MCA_COLL_DFCCL_T_FREED);
    mca_coll_dfccl_stamp_sum();
#endif
    return rc;
}

/* ---- the staged path -------------------------------------------------------- */

typedef struct {
    mca_coll_dfccl_stage_t s[MCA_COLL_DFCCL_MAX_STAGES];
    int n;
} dfccl_stages_t;

/* Add a host copy of (buf, count, dt); returns the pointer the previous
 * module must use in its place, or NULL when out of memory. */
static void *dfccl_stage_add(dfccl_stages_t *st, void *buf, size_t count,
                             struct ompi_datatype_t *dt, int down, int up)
{
    mca_coll_dfccl_stage_t *s = &st->s[st->n];
    ptrdiff_t gap             = 0;
    size_t span               = opal_datatype_span(&dt->super, count, &gap);

    s->dev   = buf;
    s->gap   = gap;
    s->bytes = span;
    s->down  = down;
    s->up    = up;
    s->host  = malloc(span > 0 ? span : 1);
    if (s->host == NULL) {
        return NULL;
    }
    st->n++;
    return s->host - gap;
}

static void dfccl_stages_free(dfccl_stages_t *st)
{
    for (int i = 0; i < st->n; i++) {
        free(st->s[i].host);
    }
    st->n = 0;
}

static int dfccl_stages_copy(dfccl_stages_t *st, int up)
{
    for (int i = 0; i < st->n; i++) {
        mca_coll_dfccl_stage_t *s = &st->s[i];
        int rc                    = OMPI_SUCCESS;
        if (up && s->up) {
            rc = mca_coll_dfccl_copy((char *)s->dev + s->gap, s->host, s->bytes);
        } else if (!up && s->down) {
            rc = mca_coll_dfccl_copy(s->host, (char *)s->dev + s->gap, s->bytes);
        }
        if (rc != OMPI_SUCCESS) {
            return rc;
        }
    }
    return OMPI_SUCCESS;
}

/* Before the previous module's call: copy down (unless persistent). */
static int dfccl_staged_begin(dfccl_stages_t *st, int form)
{
    if (form == DFCCL_PERSISTENT) {
        return OMPI_SUCCESS;
    }
    return dfccl_stages_copy(st, 0);
}

/*
 * After the previous module's call returned `rc` (and, unless blocking, its
 * request `inner`): blocking copies up; the others wrap `inner` in our
 * request, which copies up when it completes.
 */
static int dfccl_staged_end(mca_coll_dfccl_module_t *m, dfccl_stages_t *st, int form,
                            int rc, ompi_request_t *inner, ompi_request_t **request)
{
    mca_coll_dfccl_req_t *req;

    if (rc != OMPI_SUCCESS) {
        dfccl_stages_free(st);
        return rc;
    }
    if (form == DFCCL_BLOCKING) {
        rc = dfccl_stages_copy(st, 1);
        dfccl_stages_free(st);
        return rc;
    }
    req = mca_coll_dfccl_req_new(m->comm, form == DFCCL_PERSISTENT);
    if (req == NULL) {
        dfccl_stages_free(st);
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    memcpy(req->stages, st->s, sizeof(st->s));
    req->nstages = st->n;
    req->inner   = inner;
    st->n        = 0;
    if (form == DFCCL_PERSISTENT) {
        req->super.super.req_start = dfccl_req_start;
    } else {
        req->super.super.req_state = OMPI_REQUEST_ACTIVE;
        mca_coll_dfccl_staged_track(req);
    }
    *request = &req->super.super;
    return OMPI_SUCCESS;
}

/* ---- allreduce ----------------------------------------------------------------- */

static int dfccl_allreduce_any(const void *sbuf, void *rbuf, int count,
                               struct ompi_datatype_t *dt, struct ompi_op_t *mop,
                               struct ompi_communicator_t *comm, struct ompi_info_t *info,
                               ompi_request_t **request, mca_coll_dfccl_module_t *m, int form)
{
    int settle = 0; /* set by dfccl_route: wait for CUDA's default stream */
    int inplace         = sbuf == MPI_IN_PLACE;
    const void *bufs[2] = {rbuf, inplace ? NULL : sbuf};
    mca_coll_dfccl_sig_t sig = {MCA_COLL_DFCCL_ALLREDUCE, (size_t)count, 0, 0, -1};
    int supported = count > 0 && dfccl_map_type(dt, &sig.dtype) && dfccl_map_op(mop, &sig.op);
    mca_coll_dfccl_op_t op;
    dfccl_stages_t st = {.n = 0};
    ompi_request_t *inner = NULL;
    const void *hs;
    void *hr;
    int rc;

    switch (dfccl_route(m, supported, bufs, 2, "allreduce", &settle)) {
    case DFCCL_PATH_DFCCL:
        memset(&op, 0, sizeof(op));
        op.settle = settle;
        op.sbuf = inplace ? rbuf : sbuf;
        op.rbuf = rbuf;
        return dfccl_run(m, &sig, &op, form, request);
    case DFCCL_PATH_STAGED:
        hr = dfccl_stage_add(&st, rbuf, count, dt, inplace, 1);
        hs = inplace ? MPI_IN_PLACE : dfccl_stage_add(&st, (void *)sbuf, count, dt, 1, 0);
        if (hr == NULL || hs == NULL) {
            dfccl_stages_free(&st);
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
        rc = dfccl_staged_begin(&st, form);
        if (rc == OMPI_SUCCESS) {
            rc = form == DFCCL_BLOCKING
                     ? m->previous_allreduce(hs, hr, count, dt, mop, comm,
                                             m->previous_allreduce_module)
                 : form == DFCCL_NONBLOCKING
                     ? m->previous_iallreduce(hs, hr, count, dt, mop, comm, &inner,
                                              m->previous_iallreduce_module)
                     : m->previous_allreduce_init(hs, hr, count, dt, mop, comm, info, &inner,
                                                  m->previous_allreduce_init_module);
        }
        return dfccl_staged_end(m, &st, form, rc, inner, request);
    default:
        return form == DFCCL_BLOCKING
                   ? m->previous_allreduce(sbuf, rbuf, count, dt, mop, comm,
                                           m->previous_allreduce_module)
               : form == DFCCL_NONBLOCKING
                   ? m->previous_iallreduce(sbuf, rbuf, count, dt, mop, comm, request,
                                            m->previous_iallreduce_module)
                   : m->previous_allreduce_init(sbuf, rbuf, count, dt, mop, comm, info,
                                                request, m->previous_allreduce_init_module);
    }
}

/* ---- allgather ----------------------------------------------------------------- */

static int dfccl_allgather_any(const void *sbuf, int scount, struct ompi_datatype_t *sdt,
                               void *rbuf, int rcount, struct ompi_datatype_t *rdt,
                               struct ompi_communicator_t *comm, struct ompi_info_t *info,
                               ompi_request_t **request, mca_coll_dfccl_module_t *m, int form)
{
    int settle = 0; /* set by dfccl_route: wait for CUDA's default stream */
    int inplace = sbuf == MPI_IN_PLACE, size = ompi_comm_size(comm);
    int rank    = ompi_comm_rank(comm);
    const void *bufs[2] = {rbuf, inplace ? NULL : sbuf};
    size_t rbytes       = dfccl_contig_bytes(rdt, rcount);
    size_t sbytes       = inplace ? rbytes : dfccl_contig_bytes(sdt, scount);
    mca_coll_dfccl_sig_t sig = {MCA_COLL_DFCCL_ALLGATHER, rbytes, DFCCL_UINT8, DFCCL_SUM, -1};
    int supported = rbytes > 0 && sbytes == rbytes &&
                    dfccl_contig_bytes(rdt, rcount * size) == rbytes * (size_t)size;
    mca_coll_dfccl_op_t op;
    dfccl_stages_t st = {.n = 0};
    ompi_request_t *inner = NULL;
    const void *hs;
    void *hr;
    int rc;

    switch (dfccl_route(m, supported, bufs, 2, "allgather", &settle)) {
    case DFCCL_PATH_DFCCL:
        memset(&op, 0, sizeof(op));
        op.settle = settle;
        op.sbuf = inplace ? (char *)rbuf + (size_t)rank * rbytes : sbuf;
        op.rbuf = rbuf;
        return dfccl_run(m, &sig, &op, form, request);
    case DFCCL_PATH_STAGED:
        hr = dfccl_stage_add(&st, rbuf, (size_t)rcount * size, rdt, inplace, 1);
        hs = inplace ? MPI_IN_PLACE : dfccl_stage_add(&st, (void *)sbuf, scount, sdt, 1, 0);
        if (hr == NULL || hs == NULL) {
            dfccl_stages_free(&st);
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
        rc = dfccl_staged_begin(&st, form);
        if (rc == OMPI_SUCCESS) {
            rc = form == DFCCL_BLOCKING
                     ? m->previous_allgather(hs, scount, sdt, hr, rcount, rdt, comm,
                                             m->previous_allgather_module)
                 : form == DFCCL_NONBLOCKING
                     ? m->previous_iallgather(hs, scount, sdt, hr, rcount, rdt, comm, &inner,
                                              m->previous_iallgather_module)
                     : m->previous_allgather_init(hs, scount, sdt, hr, rcount, rdt, comm, info,
                                                  &inner, m->previous_allgather_init_module);
        }
        return dfccl_staged_end(m, &st, form, rc, inner, request);
    default:
        return form == DFCCL_BLOCKING
                   ? m->previous_allgather(sbuf, scount, sdt, rbuf, rcount, rdt, comm,
                                           m->previous_allgather_module)
               : form == DFCCL_NONBLOCKING
                   ? m->previous_iallgather(sbuf, scount, sdt, rbuf, rcount, rdt, comm,
                                            request, m->previous_iallgather_module)
                   : m->previous_allgather_init(sbuf, scount, sdt, rbuf, rcount, rdt, comm,
                                                info, request,
                                                m->previous_allgather_init_module);
    }
}

/* ---- reduce_scatter_block ---------------------------------------------------------- */

static int dfccl_rsb_any(const void *sbuf, void *rbuf, int rcount, struct ompi_datatype_t *dt,
                         struct ompi_op_t *mop, struct ompi_communicator_t *comm,
                         struct ompi_info_t *info, ompi_request_t **request,
                         mca_coll_dfccl_module_t *m, int form)
{
    int settle = 0; /* set by dfccl_route: wait for CUDA's default stream */
    int inplace = sbuf == MPI_IN_PLACE, size = ompi_comm_size(comm);
    const void *bufs[2] = {rbuf, inplace ? NULL : sbuf};
    mca_coll_dfccl_sig_t sig = {MCA_COLL_DFCCL_REDUCE_SCATTER, (size_t)rcount, 0, 0, -1};
    int supported = rcount > 0 && dfccl_map_type(dt, &sig.dtype) &&
                    dfccl_map_op(mop, &sig.op);
    mca_coll_dfccl_op_t op;
    dfccl_stages_t st = {.n = 0};
    ompi_request_t *inner = NULL;
    size_t total = (size_t)rcount * size;
    const void *hs;
    void *hr;
    int rc;

    switch (dfccl_route(m, supported, bufs, 2, "reduce_scatter_block", &settle)) {
    case DFCCL_PATH_DFCCL:
        memset(&op, 0, sizeof(op));
        op.settle = settle;
        op.sbuf = inplace ? rbuf : sbuf;
        op.rbuf = rbuf;
        return dfccl_run(m, &sig, &op, form, request);
    case DFCCL_PATH_STAGED:
        hr = dfccl_stage_add(&st, rbuf, inplace ? total : (size_t)rcount, dt, inplace, 1);
        hs = inplace ? MPI_IN_PLACE : dfccl_stage_add(&st, (void *)sbuf, total, dt, 1, 0);
        if (hr == NULL || hs == NULL) {
            dfccl_stages_free(&st);
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
        rc = dfccl_staged_begin(&st, form);
        if (rc == OMPI_SUCCESS) {
            rc = form == DFCCL_BLOCKING
                     ? m->previous_reduce_scatter_block(hs, hr, rcount, dt, mop, comm,
                                                        m->previous_reduce_scatter_block_module)
                 : form == DFCCL_NONBLOCKING
                     ? m->previous_ireduce_scatter_block(
                           hs, hr, rcount, dt, mop, comm, &inner,
                           m->previous_ireduce_scatter_block_module)
                     : m->previous_reduce_scatter_block_init(
                           hs, hr, rcount, dt, mop, comm, info, &inner,
                           m->previous_reduce_scatter_block_init_module);
        }
        return dfccl_staged_end(m, &st, form, rc, inner, request);
    default:
        return form == DFCCL_BLOCKING
                   ? m->previous_reduce_scatter_block(sbuf, rbuf, rcount, dt, mop, comm,
                                                      m->previous_reduce_scatter_block_module)
               : form == DFCCL_NONBLOCKING
                   ? m->previous_ireduce_scatter_block(sbuf, rbuf, rcount, dt, mop, comm,
                                                       request,
                                                       m->previous_ireduce_scatter_block_module)
                   : m->previous_reduce_scatter_block_init(
                         sbuf, rbuf, rcount, dt, mop, comm, info, request,
                         m->previous_reduce_scatter_block_init_module);
    }
}

/* ---- reduce_scatter (counts may differ, and be zero) ------------------------------- */

static int dfccl_rs_any(const void *sbuf, void *rbuf, const int *rcounts,
                        struct ompi_datatype_t *dt, struct ompi_op_t *mop,
                        struct ompi_communicator_t *comm, struct ompi_info_t *info,
                        ompi_request_t **request, mca_coll_dfccl_module_t *m, int form)
{
    int settle = 0; /* set by dfccl_route: wait for CUDA's default stream */
    int inplace = sbuf == MPI_IN_PLACE, size = ompi_comm_size(comm);
    int rank    = ompi_comm_rank(comm), equal = 1;
    const void *bufs[2] = {rbuf, inplace ? NULL : sbuf};
    mca_coll_dfccl_sig_t sig = {MCA_COLL_DFCCL_REDUCE_SCATTER, 0, 0, 0, -1};
    mca_coll_dfccl_op_t op;
    dfccl_stages_t st = {.n = 0};
    ompi_request_t *inner = NULL;
    size_t total = 0, displ = 0, esize = dfccl_type_size(dt);
    int supported, rc;
    const void *hs;
    void *hr;

    for (int i = 0; i < size; i++) {
        if (i == rank) {
            displ = total;
        }
        total += (size_t)rcounts[i];
        equal &= rcounts[i] == rcounts[0];
    }
    supported = total > 0 && dfccl_map_type(dt, &sig.dtype) && dfccl_map_op(mop, &sig.op);
    switch (dfccl_route(m, supported, bufs, 2, "reduce_scatter", &settle)) {
    case DFCCL_PATH_DFCCL:
        memset(&op, 0, sizeof(op));
        op.settle = settle;
        op.sbuf = inplace ? rbuf : sbuf;
        if (equal) {
            sig.count = (size_t)rcounts[0];
            op.rbuf   = rbuf;
        } else {
            sig.kind      = MCA_COLL_DFCCL_ALLREDUCE;
            sig.count     = total;
            op.tmp_bytes  = total * esize;
            op.copy_dst   = rbuf;
            op.copy_off   = displ * esize;
            op.copy_bytes = (size_t)rcounts[rank] * esize;
        }
        return dfccl_run(m, &sig, &op, form, request);
    case DFCCL_PATH_STAGED:
        hr = dfccl_stage_add(&st, rbuf, inplace ? total : (size_t)rcounts[rank], dt, inplace,
                             1);
        hs = inplace ? MPI_IN_PLACE : dfccl_stage_add(&st, (void *)sbuf, total, dt, 1, 0);
        if (hr == NULL || hs == NULL) {
            dfccl_stages_free(&st);
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
        rc = dfccl_staged_begin(&st, form);
        if (rc == OMPI_SUCCESS) {
            rc = form == DFCCL_BLOCKING
                     ? m->previous_reduce_scatter(hs, hr, rcounts, dt, mop, comm,
                                                  m->previous_reduce_scatter_module)
                 : form == DFCCL_NONBLOCKING
                     ? m->previous_ireduce_scatter(hs, hr, rcounts, dt, mop, comm, &inner,
                                                   m->previous_ireduce_scatter_module)
                     : m->previous_reduce_scatter_init(hs, hr, rcounts, dt, mop, comm, info,
                                                       &inner,
                                                       m->previous_reduce_scatter_init_module);
        }
        return dfccl_staged_end(m, &st, form, rc, inner, request);
    default:
        return form == DFCCL_BLOCKING
                   ? m->previous_reduce_scatter(sbuf, rbuf, rcounts, dt, mop, comm,
                                                m->previous_reduce_scatter_module)
               : form == DFCCL_NONBLOCKING
                   ? m->previous_ireduce_scatter(sbuf, rbuf, rcounts, dt, mop, comm, request,
                                                 m->previous_ireduce_scatter_module)
                   : m->previous_reduce_scatter_init(sbuf, rbuf, rcounts, dt, mop, comm, info,
                                                     request,
                                                     m->previous_reduce_scatter_init_module);
    }
}

/* ---- reduce ------------------------------------------------------------------------- */

static int dfccl_reduce_any(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                            struct ompi_op_t *mop, int root, struct ompi_communicator_t *comm,
                            struct ompi_info_t *info, ompi_request_t **request,
                            mca_coll_dfccl_module_t *m, int form)
{
    int settle = 0; /* set by dfccl_route: wait for CUDA's default stream */
    int is_root = ompi_comm_rank(comm) == root, inplace = is_root && sbuf == MPI_IN_PLACE;
    /* the receive buffer matters on the root only */
    const void *bufs[2] = {is_root ? rbuf : NULL, inplace ? NULL : sbuf};
    mca_coll_dfccl_sig_t sig = {MCA_COLL_DFCCL_REDUCE, (size_t)count, 0, 0, root};
    int supported = count > 0 && dfccl_map_type(dt, &sig.dtype) && dfccl_map_op(mop, &sig.op);
    mca_coll_dfccl_op_t op;
    dfccl_stages_t st = {.n = 0};
    ompi_request_t *inner = NULL;
    const void *hs;
    void *hr = NULL;
    int rc;

    switch (dfccl_route(m, supported, bufs, 2, "reduce", &settle)) {
    case DFCCL_PATH_DFCCL:
        memset(&op, 0, sizeof(op));
        op.settle = settle;
        op.sbuf = inplace ? rbuf : sbuf;
        op.rbuf = is_root ? rbuf : NULL;
        return dfccl_run(m, &sig, &op, form, request);
    case DFCCL_PATH_STAGED:
        if (is_root && rbuf != NULL) {
            hr = dfccl_stage_add(&st, rbuf, count, dt, inplace, 1);
            if (hr == NULL) {
                dfccl_stages_free(&st);
                return OMPI_ERR_OUT_OF_RESOURCE;
            }
        } else {
            hr = rbuf;
        }
        hs = inplace ? MPI_IN_PLACE : dfccl_stage_add(&st, (void *)sbuf, count, dt, 1, 0);
        if (hs == NULL) {
            dfccl_stages_free(&st);
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
        rc = dfccl_staged_begin(&st, form);
        if (rc == OMPI_SUCCESS) {
            rc = form == DFCCL_BLOCKING
                     ? m->previous_reduce(hs, hr, count, dt, mop, root, comm,
                                          m->previous_reduce_module)
                 : form == DFCCL_NONBLOCKING
                     ? m->previous_ireduce(hs, hr, count, dt, mop, root, comm, &inner,
                                           m->previous_ireduce_module)
                     : m->previous_reduce_init(hs, hr, count, dt, mop, root, comm, info,
                                               &inner, m->previous_reduce_init_module);
        }
        return dfccl_staged_end(m, &st, form, rc, inner, request);
    default:
        return form == DFCCL_BLOCKING
                   ? m->previous_reduce(sbuf, rbuf, count, dt, mop, root, comm,
                                        m->previous_reduce_module)
               : form == DFCCL_NONBLOCKING
                   ? m->previous_ireduce(sbuf, rbuf, count, dt, mop, root, comm, request,
                                         m->previous_ireduce_module)
                   : m->previous_reduce_init(sbuf, rbuf, count, dt, mop, root, comm, info,
                                             request, m->previous_reduce_init_module);
    }
}

/* ---- bcast ----------------------------------------------------------------------------- */

static int dfccl_bcast_any(void *buf, int count, struct ompi_datatype_t *dt, int root,
                           struct ompi_communicator_t *comm, struct ompi_info_t *info,
                           ompi_request_t **request, mca_coll_dfccl_module_t *m, int form)
{
    int settle = 0; /* set by dfccl_route: wait for CUDA's default stream */
    const void *bufs[1] = {buf};
    size_t bytes        = dfccl_contig_bytes(dt, count);
    mca_coll_dfccl_sig_t sig = {MCA_COLL_DFCCL_BCAST, bytes, DFCCL_UINT8, DFCCL_SUM, root};
    mca_coll_dfccl_op_t op;
    dfccl_stages_t st = {.n = 0};
    ompi_request_t *inner = NULL;
    int is_root = ompi_comm_rank(comm) == root, rc;
    void *hb;

    switch (dfccl_route(m, bytes > 0, bufs, 1, "bcast", &settle)) {
    case DFCCL_PATH_DFCCL:
        memset(&op, 0, sizeof(op));
        op.settle = settle;
        op.sbuf = buf;
        op.rbuf = buf;
        return dfccl_run(m, &sig, &op, form, request);
    case DFCCL_PATH_STAGED:
        hb = dfccl_stage_add(&st, buf, count, dt, is_root, !is_root);
        if (hb == NULL) {
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
        rc = dfccl_staged_begin(&st, form);
        if (rc == OMPI_SUCCESS) {
            rc = form == DFCCL_BLOCKING
                     ? m->previous_bcast(hb, count, dt, root, comm, m->previous_bcast_module)
                 : form == DFCCL_NONBLOCKING
                     ? m->previous_ibcast(hb, count, dt, root, comm, &inner,
                                          m->previous_ibcast_module)
                     : m->previous_bcast_init(hb, count, dt, root, comm, info, &inner,
                                              m->previous_bcast_init_module);
        }
        return dfccl_staged_end(m, &st, form, rc, inner, request);
    default:
        return form == DFCCL_BLOCKING
                   ? m->previous_bcast(buf, count, dt, root, comm, m->previous_bcast_module)
               : form == DFCCL_NONBLOCKING
                   ? m->previous_ibcast(buf, count, dt, root, comm, request,
                                        m->previous_ibcast_module)
                   : m->previous_bcast_init(buf, count, dt, root, comm, info, request,
                                            m->previous_bcast_init_module);
    }
}

/* ---- entry points ------------------------------------------------------------------------ */

/* A fallback form some lower component does not provide (e.g. persistent
 * collectives without libnbc). */
#define DFCCL_NEED(_m, _fn, _name)                                             \
    do {                                                                       \
        if ((_m)->previous_##_fn == NULL) {                                    \
            mca_coll_dfccl_warn("no coll component below dfccl provides %s; "  \
                                "add libnbc to --mca coll", _name);            \
            return OMPI_ERR_NOT_SUPPORTED;                                     \
        }                                                                      \
    } while (0)

#define M ((mca_coll_dfccl_module_t *)module)

int mca_coll_dfccl_allreduce(const void *sbuf, void *rbuf, int count,
                             struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                             struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    return dfccl_allreduce_any(sbuf, rbuf, count, dtype, op, comm, NULL, NULL, M,
                               DFCCL_BLOCKING);
}

int mca_coll_dfccl_iallreduce(const void *sbuf, void *rbuf, int count,
                              struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                              struct ompi_communicator_t *comm, ompi_request_t **request,
                              mca_coll_base_module_t *module)
{
    DFCCL_NEED(M, iallreduce, "MPI_Iallreduce");
    return dfccl_allreduce_any(sbuf, rbuf, count, dtype, op, comm, NULL, request, M,
                               DFCCL_NONBLOCKING);
}

int mca_coll_dfccl_allreduce_init(const void *sbuf, void *rbuf, int count,
                                  struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                  struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                  ompi_request_t **request, mca_coll_base_module_t *module)
{
    DFCCL_NEED(M, allreduce_init, "MPIX_Allreduce_init");
    return dfccl_allreduce_any(sbuf, rbuf, count, dtype, op, comm, info, request, M,
                               DFCCL_PERSISTENT);
}

int mca_coll_dfccl_allgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                             void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                             struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    return dfccl_allgather_any(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm, NULL, NULL,
                               M, DFCCL_BLOCKING);
}

int mca_coll_dfccl_iallgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                              void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                              struct ompi_communicator_t *comm, ompi_request_t **request,
                              mca_coll_base_module_t *module)
{
    DFCCL_NEED(M, iallgather, "MPI_Iallgather");
    return dfccl_allgather_any(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm, NULL,
                               request, M, DFCCL_NONBLOCKING);
}

int mca_coll_dfccl_allgather_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                                  void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                                  struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                  ompi_request_t **request, mca_coll_base_module_t *module)
{
    DFCCL_NEED(M, allgather_init, "MPIX_Allgather_init");
    return dfccl_allgather_any(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm, info,
                               request, M, DFCCL_PERSISTENT);
}

int mca_coll_dfccl_reduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                        struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                        struct ompi_communicator_t *comm,
                                        mca_coll_base_module_t *module)
{
    DFCCL_NEED(M, reduce_scatter_block, "MPI_Reduce_scatter_block");
    return dfccl_rsb_any(sbuf, rbuf, rcount, dtype, op, comm, NULL, NULL, M, DFCCL_BLOCKING);
}

int mca_coll_dfccl_ireduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                         struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                         struct ompi_communicator_t *comm,
                                         ompi_request_t **request,
                                         mca_coll_base_module_t *module)
{
    DFCCL_NEED(M, ireduce_scatter_block, "MPI_Ireduce_scatter_block");
    return dfccl_rsb_any(sbuf, rbuf, rcount, dtype, op, comm, NULL, request, M,
                         DFCCL_NONBLOCKING);
}

int mca_coll_dfccl_reduce_scatter_block_init(const void *sbuf, void *rbuf, int rcount,
                                             struct ompi_datatype_t *dtype,
                                             struct ompi_op_t *op,
                                             struct ompi_communicator_t *comm,
                                             struct ompi_info_t *info,
                                             ompi_request_t **request,
                                             mca_coll_base_module_t *module)
{
    DFCCL_NEED(M, reduce_scatter_block_init, "MPIX_Reduce_scatter_block_init");
    return dfccl_rsb_any(sbuf, rbuf, rcount, dtype, op, comm, info, request, M,
                         DFCCL_PERSISTENT);
}

int mca_coll_dfccl_reduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                                  struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                  struct ompi_communicator_t *comm,
                                  mca_coll_base_module_t *module)
{
    DFCCL_NEED(M, reduce_scatter, "MPI_Reduce_scatter");
    return dfccl_rs_any(sbuf, rbuf, rcounts, dtype, op, comm, NULL, NULL, M, DFCCL_BLOCKING);
}

int mca_coll_dfccl_ireduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                                   struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                   struct ompi_communicator_t *comm, ompi_request_t **request,
                                   mca_coll_base_module_t *module)
{
    DFCCL_NEED(M, ireduce_scatter, "MPI_Ireduce_scatter");
    return dfccl_rs_any(sbuf, rbuf, rcounts, dtype, op, comm, NULL, request, M,
                        DFCCL_NONBLOCKING);
}

int mca_coll_dfccl_reduce_scatter_init(const void *sbuf, void *rbuf, const int *rcounts,
                                       struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                       struct ompi_communicator_t *comm,
                                       struct ompi_info_t *info, ompi_request_t **request,
                                       mca_coll_base_module_t *module)
{
    DFCCL_NEED(M, reduce_scatter_init, "MPIX_Reduce_scatter_init");
    return dfccl_rs_any(sbuf, rbuf, rcounts, dtype, op, comm, info, request, M,
                        DFCCL_PERSISTENT);
}

int mca_coll_dfccl_reduce(const void *sbuf, void *rbuf, int count,
                          struct ompi_datatype_t *dtype, struct ompi_op_t *op, int root,
                          struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    return dfccl_reduce_any(sbuf, rbuf, count, dtype, op, root, comm, NULL, NULL, M,
                            DFCCL_BLOCKING);
}

int mca_coll_dfccl_ireduce(const void *sbuf, void *rbuf, int count,
                           struct ompi_datatype_t *dtype, struct ompi_op_t *op, int root,
                           struct ompi_communicator_t *comm, ompi_request_t **request,
                           mca_coll_base_module_t *module)
{
    DFCCL_NEED(M, ireduce, "MPI_Ireduce");
    return dfccl_reduce_any(sbuf, rbuf, count, dtype, op, root, comm, NULL, request, M,
                            DFCCL_NONBLOCKING);
}

int mca_coll_dfccl_reduce_init(const void *sbuf, void *rbuf, int count,
                               struct ompi_datatype_t *dtype, struct ompi_op_t *op, int root,
                               struct ompi_communicator_t *comm, struct ompi_info_t *info,
                               ompi_request_t **request, mca_coll_base_module_t *module)
{
    DFCCL_NEED(M, reduce_init, "MPIX_Reduce_init");
    return dfccl_reduce_any(sbuf, rbuf, count, dtype, op, root, comm, info, request, M,
                            DFCCL_PERSISTENT);
}

int mca_coll_dfccl_bcast(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                         struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    return dfccl_bcast_any(buf, count, dtype, root, comm, NULL, NULL, M, DFCCL_BLOCKING);
}

int mca_coll_dfccl_ibcast(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                          struct ompi_communicator_t *comm, ompi_request_t **request,
                          mca_coll_base_module_t *module)
{
    DFCCL_NEED(M, ibcast, "MPI_Ibcast");
    return dfccl_bcast_any(buf, count, dtype, root, comm, NULL, request, M,
                           DFCCL_NONBLOCKING);
}

int mca_coll_dfccl_bcast_init(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                              struct ompi_communicator_t *comm, struct ompi_info_t *info,
                              ompi_request_t **request, mca_coll_base_module_t *module)
{
    DFCCL_NEED(M, bcast_init, "MPIX_Bcast_init");
    return dfccl_bcast_any(buf, count, dtype, root, comm, info, request, M, DFCCL_PERSISTENT);
}
