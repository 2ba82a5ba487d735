/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The run engine: every entry point describes its call and ends in
 * mca_coll_dfccl_call, which routes it, runs it on dfccl or hands it to the
 * fallback, and completes MPI requests.
 *
 * Routing. A call runs on dfccl when its family has a plan for it (dfccl
 * has the collective, the type and op, and a nonzero count: the same on
 * every rank by MPI's rules) and this rank's buffers for it are memory
 * dfccl takes: CUDA memory of any kind on the cuda backend (a buffer the
 * daemon cannot read where it is, on another GPU or in host memory, goes
 * through a device temporary), host memory on the host backend. Otherwise
 * the previous module runs it, on host copies of its CUDA memory. The
 * decision must be the same on every rank, or one rank waits in dfccl for
 * peers that went to the previous module; everything it rests on is the
 * same everywhere by MPI's rules except the kind of buffer, so the
 * component assumes that every rank of a call passes CUDA memory, or every
 * rank host memory, as GPU programs do (docs/mpi.md). A communicator whose
 * dfccl group cannot be set up on some rank sends every call to the
 * previous module on every rank: the setup's outcome is the same everywhere.
 *
 * When the GPU is chosen. The process's dfccl context is created at the
 * first call that dfccl takes, on the GPU of its first device buffer
 * (coll_dfccl_bootstrap.c), so that programs may choose their GPU after
 * MPI_Init. A communicator's group is set up at its first such call, with
 * nonblocking exchanges; calls made meanwhile are queued and start, in call
 * order, when the setup ends, so a nonblocking call never waits and ranks
 * that start their communicators in different orders never wait for each
 * other (the exchange of a communicator is made in the same call, the
 * first one dfccl takes on it, on every rank). While a communicator has
 * queued calls, its calls for the previous module queue too, so that the
 * previous module sees them in the same order on every rank.
 *
 * Instances. Every rank must register a group's collectives in the same
 * order with the same arguments, and a registered collective can be in
 * flight only once. MPI orders the collective calls on a communicator
 * identically on every rank, so the k-th call with a given signature (kind,
 * count, type, op, root) is the same call everywhere: it uses instance
 * k mod K (K = coll_dfccl_instances), registered at its first use. If that
 * instance still runs an earlier call, the new run is chained behind it
 * and started from that run's completion: a nonblocking call never waits.
 * A persistent request runs as one such call per MPI_Start.
 *
 * Alltoallv. Each rank knows only its own counts, so the registration
 * holds none (the same on every rank): every run gives its call's counts
 * and displacements (dfcclRunAllToAllvCounts), and its instances are used
 * like any other signature's. Where dfccl refuses an alltoallv on a group
 * (DFCCL_ERR_UNSUPPORTED: the same on every rank), that call and the
 * communicator's later ones take the previous module.
 *
 * Completion. dfccl callbacks (the poller thread, or dfcclProgress in
 * explicit mode) only put the finished run on a list. The opal_progress
 * callback takes runs off it on an MPI thread, copies results out, starts
 * chained runs and completes the MPI request, so requests are only ever
 * completed the way the rest of Open MPI completes them.
 */
#include "coll_dfccl.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "opal/runtime/opal_progress.h"

/* ---- types, ops, layouts ------------------------------------------------------ */

int mca_coll_dfccl_map_type(struct ompi_datatype_t *dt, dfccl_datatype_t *t)
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

int mca_coll_dfccl_map_op(struct ompi_op_t *op, dfccl_op_t *o)
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

size_t mca_coll_dfccl_contig_bytes(struct ompi_datatype_t *dt, size_t count)
{
    ptrdiff_t lb, extent;
    size_t size;

    if (count == 0 || count > INT32_MAX ||
        !ompi_datatype_is_contiguous_memory_layout(dt, (int32_t)count)) {
        return 0;
    }
    ompi_datatype_get_true_extent(dt, &lb, &extent);
    ompi_datatype_type_size(dt, &size);
    return lb == 0 ? size * count : 0;
}

size_t mca_coll_dfccl_block_bytes(const mca_coll_dfccl_args_t *a, int send_n)
{
    const size_t n = (size_t)ompi_comm_size(a->comm);
    const int inplace = a->sbuf == MPI_IN_PLACE;
    const size_t rbytes =
        mca_coll_dfccl_contig_bytes(a->rdt, (size_t)(a->rcount > 0 ? a->rcount : 0));
    const size_t sbytes =
        inplace ? rbytes
                : mca_coll_dfccl_contig_bytes(a->sdt, (size_t)(a->scount > 0 ? a->scount : 0));

    if (rbytes == 0 || sbytes != rbytes ||
        mca_coll_dfccl_contig_bytes(a->rdt, (size_t)a->rcount * n) != rbytes * n ||
        (send_n && !inplace &&
         mca_coll_dfccl_contig_bytes(a->sdt, (size_t)a->scount * n) != sbytes * n)) {
        return 0;
    }
    return rbytes;
}

/* ---- requests ----------------------------------------------------------------- */

static void dfccl_req_construct(mca_coll_dfccl_req_t *req)
{
    size_t off = offsetof(mca_coll_dfccl_req_t, module);

    memset((char *)req + off, 0, sizeof(*req) - off);
}

OBJ_CLASS_INSTANCE(mca_coll_dfccl_req_t, ompi_coll_base_nbc_request_t, dfccl_req_construct,
                   NULL);

static void dfccl_req_release(mca_coll_dfccl_req_t *req)
{
    mca_coll_dfccl_stages_free(req);
    if (req->inner != NULL && req->inner != MPI_REQUEST_NULL) {
        ompi_request_free(&req->inner);
    }
    OMPI_REQUEST_FINI(&req->super.super);
    OBJ_RELEASE(req);
}

static int dfccl_req_free(ompi_request_t **rptr)
{
    mca_coll_dfccl_req_t *req      = (mca_coll_dfccl_req_t *)*rptr;
    mca_coll_dfccl_component_t *cm = &mca_coll_dfccl_component;
    int active;

    pthread_mutex_lock(&cm->lock);
    active = !req->completed && req->super.super.req_state == OMPI_REQUEST_ACTIVE &&
             !REQUEST_COMPLETE(&req->super.super);
    if (active) {
        req->freed = 1; /* released when it completes */
    }
    pthread_mutex_unlock(&cm->lock);
    if (!active) {
        dfccl_req_release(req);
    }
    *rptr = MPI_REQUEST_NULL;
    return OMPI_SUCCESS;
}

static int dfccl_req_cancel(ompi_request_t *request, int complete)
{
    return MPI_ERR_REQUEST; /* collectives cannot be cancelled */
}

static int dfccl_req_start(size_t count, ompi_request_t **requests);

mca_coll_dfccl_req_t *mca_coll_dfccl_req_new(mca_coll_dfccl_module_t *m,
                                             const mca_coll_dfccl_args_t *a)
{
    mca_coll_dfccl_req_t *req = OBJ_NEW(mca_coll_dfccl_req_t);
    int persistent            = a->form == MCA_COLL_DFCCL_PERSISTENT;

    if (req == NULL) {
        return NULL;
    }
    OMPI_REQUEST_INIT(&req->super.super, persistent);
    /* Open MPI 4.1 reports an error of a request of type COLL through
     * MPI_COMM_WORLD's handler, of type PML through its communicator's: a
     * nonblocking call's is typed PML so that MPI_Wait reports it as the
     * blocking call does. Only persistent requests must be COLL (MPI_Start
     * hands PML ones to the PML). */
    req->super.super.req_type             = persistent ? OMPI_REQUEST_COLL : OMPI_REQUEST_PML;
    req->super.super.req_free             = dfccl_req_free;
    req->super.super.req_cancel           = dfccl_req_cancel;
    req->super.super.req_mpi_object.comm  = a->comm;
    req->super.super.req_status.MPI_ERROR = MPI_SUCCESS;
    if (persistent) {
        req->super.super.req_start = dfccl_req_start;
    } else {
        req->super.super.req_state = OMPI_REQUEST_ACTIVE;
    }
    req->module = m;
    req->args   = *a;
    return req;
}

/* Complete a request on an MPI thread (or release it if the user freed it). */
void mca_coll_dfccl_req_finish(mca_coll_dfccl_req_t *req, int status)
{
    mca_coll_dfccl_component_t *cm = &mca_coll_dfccl_component;
    int freed;

    pthread_mutex_lock(&cm->lock);
    req->completed                        = 1;
    req->super.super.req_status.MPI_ERROR = status;
    freed                                 = req->freed;
    if (!freed) {
        ompi_request_complete(&req->super.super, true);
    }
    pthread_mutex_unlock(&cm->lock);
    if (freed) {
        dfccl_req_release(req);
    }
}

/* A blocking call's own request: wait, take its status, free it. */
static int dfccl_req_wait(mca_coll_dfccl_req_t *req)
{
    ompi_request_t *r = &req->super.super;
    int rc;

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

/* ---- the cache of registrations ------------------------------------------------- */

static unsigned dfccl_sig_hash(const mca_coll_dfccl_sig_t *s)
{
    uint64_t h = (uint64_t)s->kind * 0x9e3779b97f4a7c15ull;

    h ^= (uint64_t)s->count + 0x632be59bd9b4e019ull + (h << 6) + (h >> 2);
    h ^= (uint64_t)s->dtype * 31u + (uint64_t)s->op * 7u + (uint64_t)(s->root + 1) * 131u;
    return (unsigned)(h % MCA_COLL_DFCCL_HASH);
}

static int dfccl_sig_eq(const mca_coll_dfccl_sig_t *a, const mca_coll_dfccl_sig_t *b)
{
    return a->kind == b->kind && a->count == b->count && a->dtype == b->dtype &&
           a->op == b->op && a->root == b->root;
}

/* Called with the module lock held. */
static mca_coll_dfccl_entry_t *dfccl_entry_get(mca_coll_dfccl_module_t *m,
                                               const mca_coll_dfccl_sig_t *sig)
{
    unsigned h = dfccl_sig_hash(sig);
    int k      = mca_coll_dfccl_component.instances;
    mca_coll_dfccl_entry_t *e;

    for (e = m->hash[h]; e != NULL; e = e->next) {
        if (dfccl_sig_eq(&e->sig, sig)) {
            return e;
        }
    }
    e = calloc(1, sizeof(*e) + (size_t)k * sizeof(e->inst[0]));
    if (e == NULL) {
        return NULL;
    }
    e->sig   = *sig;
    e->ninst = k;
    for (int i = 0; i < k; i++) {
        e->inst[i].coll_id = -1;
    }
    e->next    = m->hash[h];
    m->hash[h] = e;
    return e;
}

/* Deregister an entry's instances and free it; 1 if some run was still on. */
static int dfccl_entry_free(mca_coll_dfccl_entry_t *e)
{
    int busy = 0;

    for (int i = 0; i < e->ninst; i++) {
        if (e->inst[i].coll_id >= 0 &&
            dfcclDeregister(e->inst[i].coll_id, mca_coll_dfccl_component.ctx) != DFCCL_OK) {
            busy = 1;
        }
        mca_coll_dfccl_tmp_free(e->inst[i].tmp[0]);
        mca_coll_dfccl_tmp_free(e->inst[i].tmp[1]);
    }
    free(e);
    return busy;
}

/* Deregister everything (module destruction). */
void mca_coll_dfccl_release_entries(mca_coll_dfccl_module_t *m)
{
    int busy = 0;

    for (int h = 0; h < MCA_COLL_DFCCL_HASH; h++) {
        mca_coll_dfccl_entry_t *e, *next;
        for (e = m->hash[h]; e != NULL; e = next) {
            next = e->next;
            busy |= dfccl_entry_free(e);
        }
        m->hash[h] = NULL;
    }
    if (m->group != NULL) {
        if (busy || dfcclGroupDestroy(m->group) != DFCCL_OK) {
            mca_coll_dfccl_warn("communicator %s freed while dfccl collectives were still "
                                "running on it; their memory is kept until MPI_Finalize. "
                                "Complete every request before MPI_Comm_free",
                                m->comm != NULL ? m->comm->c_name : "?");
        }
        m->group = NULL;
    }
}

static void *dfccl_inst_tmp(mca_coll_dfccl_inst_t *inst, int side, size_t bytes)
{
    if (inst->tmp_bytes[side] < bytes) {
        mca_coll_dfccl_tmp_free(inst->tmp[side]);
        inst->tmp[side]       = mca_coll_dfccl_tmp_alloc(bytes);
        inst->tmp_bytes[side] = inst->tmp[side] != NULL ? bytes : 0;
    }
    return inst->tmp[side];
}

/* ---- dfccl runs --------------------------------------------------------------------- */

/* FIFO lists of ops, linked through op->next: the completed ones (the
 * component's done list, under done_lock) and, per instance, those
 * waiting for it (under the module's lock). */
static void dfccl_op_push(mca_coll_dfccl_op_t **head, mca_coll_dfccl_op_t **tail,
                          mca_coll_dfccl_op_t *op)
{
    op->next = NULL;
    if (*tail != NULL) {
        (*tail)->next = op;
    } else {
        *head = op;
    }
    *tail = op;
}

static mca_coll_dfccl_op_t *dfccl_op_pop(mca_coll_dfccl_op_t **head, mca_coll_dfccl_op_t **tail)
{
    mca_coll_dfccl_op_t *op = *head;

    if (op != NULL) {
        *head = op->next;
        if (*head == NULL) {
            *tail = NULL;
        }
        op->next = NULL;
    }
    return op;
}

static void dfccl_done_cb(int coll_id, dfccl_status_t status, void *arg)
{
    mca_coll_dfccl_op_t *op        = arg;
    mca_coll_dfccl_component_t *cm = &mca_coll_dfccl_component;

    MCA_COLL_DFCCL_STAMP(MCA_COLL_DFCCL_T_CALLBACK);
    op->status = status;
    pthread_mutex_lock(&cm->done_lock);
    dfccl_op_push(&cm->done_head, &cm->done_tail, op);
    pthread_mutex_unlock(&cm->done_lock);
}

/* Why staging a buffer failed, for dfccl_run_failed on this thread. */
static __thread char dfccl_stage_err[160];

static dfccl_status_t dfccl_error_stage(size_t bytes)
{
    snprintf(dfccl_stage_err, sizeof(dfccl_stage_err), "cannot copy %zu bytes between the "
             "application's buffer and a temporary on dfccl's GPU", bytes);
    return DFCCL_ERR_CUDA;
}

/* dfccl printed its own errors (naming the communicator); what the
 * component found itself is printed here, and the MPI call's name at
 * coll_dfccl_verbose >= 1. */
static void dfccl_run_failed(mca_coll_dfccl_module_t *m, const mca_coll_dfccl_req_t *req,
                             const char *what, dfccl_status_t st)
{
    char name[MPI_MAX_OBJECT_NAME + 32];

    mca_coll_dfccl_comm_name(m->comm, name, sizeof(name));
    if (dfccl_stage_err[0] != '\0') {
        mca_coll_dfccl_warn("%s on communicator %s %s: %s", mca_coll_dfccl_coll_name(req->args.coll),
                            name, what, dfccl_stage_err);
        dfccl_stage_err[0] = '\0';
        return;
    }
    MCA_COLL_DFCCL_VERBOSE(1, "%s on communicator %s %s: %s",
                           mca_coll_dfccl_coll_name(req->args.coll), name, what,
                           dfcclGetErrorString(st));
}

/* Submit `op` on its (idle, registered) instance: temporaries filled, then
 * dfcclRun. Module lock held. */
static dfccl_status_t dfccl_op_submit(mca_coll_dfccl_module_t *m, mca_coll_dfccl_op_t *op)
{
    mca_coll_dfccl_req_t *req         = op->req;
    const mca_coll_dfccl_plan_t *plan = &req->route.plan;
    mca_coll_dfccl_inst_t *inst       = &op->entry->inst[op->inst];
    const void *s_dev                 = plan->s_user;
    void *r_dev                       = plan->r_user;
    dfccl_status_t st;

    if (op->r_stage) {
        r_dev = dfccl_inst_tmp(inst, 1, plan->r_bytes);
        if (r_dev == NULL || (plan->r_in && mca_coll_dfccl_copy(r_dev, plan->r_user,
                                                                plan->r_bytes) != OMPI_SUCCESS)) {
            return dfccl_error_stage(plan->r_bytes);
        }
    }
    if (plan->s_copy && plan->s_bytes > 0) {
        /* in place, but dfccl takes the input apart: from the receive
         * buffer as the application left it */
        void *t = dfccl_inst_tmp(inst, 0, plan->s_bytes);
        if (t == NULL || mca_coll_dfccl_copy(t, plan->r_user, plan->s_bytes) != OMPI_SUCCESS) {
            return dfccl_error_stage(plan->s_bytes);
        }
        s_dev = t;
    } else if (plan->s_user == NULL) {
        s_dev = (const char *)r_dev + plan->s_off;
    } else if (op->s_stage) {
        void *t = dfccl_inst_tmp(inst, 0, plan->s_bytes);
        if (t == NULL || mca_coll_dfccl_copy(t, plan->s_user, plan->s_bytes) != OMPI_SUCCESS) {
            return dfccl_error_stage(plan->s_bytes);
        }
        s_dev = t;
    }
    op->r_dev = r_dev;
    /* counted before the run starts: its completion may come first */
    __atomic_add_fetch(&mca_coll_dfccl_component.running, 1, __ATOMIC_RELAXED);
    if (plan->sig.kind == DFCCL_KIND_ALLTOALLV) {
        /* this call's counts, in bytes from the start of each side's span */
        const int n = ompi_comm_size(m->comm);
        size_t v[4 * MCA_COLL_DFCCL_A2AV_MAX_RANKS], len[2];
        ptrdiff_t lo[2];

        mca_coll_dfccl_alltoallv_layout(&req->args, v, &lo[0], &len[0], &lo[1], &len[1]);
        st = dfcclRunAllToAllvCounts(s_dev, v, v + n, r_dev, v + 2 * n, v + 3 * n,
                                     inst->coll_id, dfccl_done_cb, op,
                                     mca_coll_dfccl_component.ctx);
    } else {
        st = dfcclRun(s_dev, r_dev, inst->coll_id, dfccl_done_cb, op,
                      mca_coll_dfccl_component.ctx);
    }
    if (st != DFCCL_OK) {
        __atomic_sub_fetch(&mca_coll_dfccl_component.running, 1, __ATOMIC_RELAXED);
    }
    return st;
}

/* Register the instance at its first use (an alltoallv without counts:
 * each run gives its own). Module lock held. */
static dfccl_status_t dfccl_inst_register(mca_coll_dfccl_module_t *m,
                                          const mca_coll_dfccl_req_t *req,
                                          mca_coll_dfccl_inst_t *inst)
{
    const mca_coll_dfccl_sig_t *sig = &req->route.plan.sig;
    dfccl_coll_desc_t d = {sig->kind, sig->count, sig->dtype, sig->op, sig->root, 0,
                           DFCCL_ALGO_AUTO, 0, 0};
    dfccl_status_t st;

    if (inst->coll_id >= 0) {
        return DFCCL_OK;
    }
    if (sig->kind == DFCCL_KIND_ALLTOALLV) {
        /* asked first: a refusal is this module's to report (the previous
         * module takes the calls), not an error dfccl prints */
        st = dfcclGroupSupports(m->group, DFCCL_KIND_ALLTOALLV);
        if (st == DFCCL_OK) {
            st = dfcclRegisterAllToAllv(NULL, NULL, NULL, NULL, sig->dtype, m->group, 0,
                                        &inst->coll_id);
        }
    } else {
        st = dfcclRegister(&d, m->group, &inst->coll_id);
    }
    if (st != DFCCL_OK) {
        inst->coll_id = -1;
    }
    return st;
}

/* Start (or chain) the dfccl run of `req`, whose plan is set. */
static int dfccl_native_start(mca_coll_dfccl_module_t *m, mca_coll_dfccl_req_t *req)
{
    mca_coll_dfccl_component_t *cm = &mca_coll_dfccl_component;
    mca_coll_dfccl_op_t *op        = &req->op;
    mca_coll_dfccl_inst_t *inst;
    dfccl_status_t st;

    /* the buffers hold their data now, as MPI promises the call */
    if (cm->mode == MCA_COLL_DFCCL_MODE_CUDA &&
        (cm->sync_default_stream > 0 || (cm->sync_default_stream < 0 && op->settle))) {
        if (mca_coll_dfccl_settle_default_stream() != OMPI_SUCCESS) {
            return MPI_ERR_OTHER;
        }
        op->settle = 0; /* a persistent request's later starts need not */
    }
    MCA_COLL_DFCCL_STAMP(MCA_COLL_DFCCL_T_SETTLED);
    req->completed = 0;
    op->req        = req;
    op->next       = NULL;
    op->status     = DFCCL_OK;
    pthread_mutex_lock(&m->lock);
    if (op->entry == NULL) {
        op->entry = dfccl_entry_get(m, &req->route.plan.sig);
        if (op->entry == NULL) {
            pthread_mutex_unlock(&m->lock);
            return MPI_ERR_NO_MEM;
        }
    }
    op->inst = (int)(op->entry->calls++ % (uint64_t)op->entry->ninst);
    inst     = &op->entry->inst[op->inst];
    st       = dfccl_inst_register(m, req, inst);
    if (st == DFCCL_ERR_UNSUPPORTED) {
        /* dfccl has no such collective on this group: the same answer on
         * every rank, so this call and the later ones take the previous
         * module everywhere */
        char name[MPI_MAX_OBJECT_NAME + 32];
        int first = !(m->refused & (1u << req->route.plan.sig.kind));

        m->refused |= 1u << req->route.plan.sig.kind;
        pthread_mutex_unlock(&m->lock);
        if (first) {
            MCA_COLL_DFCCL_VERBOSE(1, "%s on communicator %s: dfccl has none on this group "
                                   "(%s); its calls take the previous module",
                                   mca_coll_dfccl_coll_name(req->args.coll),
                                   mca_coll_dfccl_comm_name(m->comm, name, sizeof(name)),
                                   dfcclGetLastErrorMessage());
        }
        req->native = 0;
        return mca_coll_dfccl_fallback(m, &req->args, req);
    }
    if (st != DFCCL_OK) {
        pthread_mutex_unlock(&m->lock);
        dfccl_run_failed(m, req, "could not be registered", st);
        return mca_coll_dfccl_mpi_error(st);
    }
    m->inflight++;
    if (inst->busy) {
        /* An earlier call of this signature still runs there: chain. */
        dfccl_op_push(&inst->wait_head, &inst->wait_tail, op);
        pthread_mutex_unlock(&m->lock);
        return OMPI_SUCCESS;
    }
    inst->busy = 1;
    st         = dfccl_op_submit(m, op);
    if (st != DFCCL_OK) {
        inst->busy = 0;
        m->inflight--;
        pthread_mutex_unlock(&m->lock);
        dfccl_run_failed(m, req, "failed to start", st);
        return mca_coll_dfccl_mpi_error(st);
    }
    pthread_mutex_unlock(&m->lock);
    MCA_COLL_DFCCL_STAMP(MCA_COLL_DFCCL_T_SUBMITTED);
    return OMPI_SUCCESS;
}

/* A run finished: copy out, start the next chained run, complete. */
static void dfccl_op_done(mca_coll_dfccl_op_t *op)
{
    mca_coll_dfccl_req_t *req         = op->req;
    mca_coll_dfccl_module_t *m        = req->module;
    const mca_coll_dfccl_plan_t *plan = &req->route.plan;
    mca_coll_dfccl_inst_t *inst       = &op->entry->inst[op->inst];
    mca_coll_dfccl_op_t *next;
    int rc = MPI_SUCCESS;

    MCA_COLL_DFCCL_STAMP(MCA_COLL_DFCCL_T_DONE);
    __atomic_sub_fetch(&mca_coll_dfccl_component.running, 1, __ATOMIC_RELAXED);
    if (op->status != DFCCL_OK) {
        /* dfccl found the error on its poller thread: its query hands the
         * message to this thread */
        dfcclQuery(inst->coll_id, mca_coll_dfccl_component.ctx);
        dfccl_run_failed(m, req, "failed", op->status);
        rc = mca_coll_dfccl_mpi_error(op->status);
    } else if (op->r_stage && plan->r_out &&
               mca_coll_dfccl_copy(plan->r_user, (char *)op->r_dev + plan->out_off,
                                   plan->out_bytes) != OMPI_SUCCESS) {
        rc = MPI_ERR_OTHER;
    }
    pthread_mutex_lock(&m->lock);
    m->inflight--;
    inst->busy = 0;
    while ((next = dfccl_op_pop(&inst->wait_head, &inst->wait_tail)) != NULL) {
        dfccl_status_t st;
        inst->busy = 1;
        st         = dfccl_op_submit(m, next);
        if (st == DFCCL_OK) {
            break;
        }
        inst->busy = 0;
        m->inflight--;
        pthread_mutex_unlock(&m->lock);
        dfccl_run_failed(m, next->req, "failed to start", st);
        mca_coll_dfccl_req_finish(next->req, mca_coll_dfccl_mpi_error(st));
        pthread_mutex_lock(&m->lock);
    }
    pthread_mutex_unlock(&m->lock);
    mca_coll_dfccl_req_finish(req, rc);
}

/* ---- routing ---------------------------------------------------------------------- */

static void dfccl_route(const mca_coll_dfccl_args_t *a, mca_coll_dfccl_plan_fn_t plan_fn,
                        mca_coll_dfccl_route_t *rt)
{
    mca_coll_dfccl_component_t *cm = &mca_coll_dfccl_component;

    memset(rt, 0, sizeof(*rt));
    rt->device = rt->s_gpu = rt->r_gpu = -1;
    if (plan_fn != NULL && plan_fn(a, &rt->plan)) {
        if (rt->plan.s_user != NULL) {
            rt->s_kind = mca_coll_dfccl_mem_query(rt->plan.s_user, &rt->s_gpu, &rt->settle);
        }
        if (rt->plan.r_user != NULL) {
            rt->r_kind = mca_coll_dfccl_mem_query(rt->plan.r_user, &rt->r_gpu, &rt->settle);
        }
        rt->cuda   = rt->s_kind != MCA_COLL_DFCCL_MEM_HOST ||
                     rt->r_kind != MCA_COLL_DFCCL_MEM_HOST;
        rt->device = rt->s_gpu >= 0 ? rt->s_gpu : rt->r_gpu;
        rt->native = cm->mode == MCA_COLL_DFCCL_MODE_CUDA ? rt->cuda : !rt->cuda;
    } else if (cm->gpus > 0) {
        mca_coll_dfccl_stage_t sp[2];
        int dev, settle = 0;

        mca_coll_dfccl_spans(a, sp);
        for (int i = 0; i < 2 && !rt->cuda; i++) {
            rt->cuda = sp[i].user != NULL &&
                       mca_coll_dfccl_mem_query(sp[i].user, &dev, &settle) !=
                           MCA_COLL_DFCCL_MEM_HOST;
        }
    }
    MCA_COLL_DFCCL_VERBOSE(3, "%s on communicator %s: %s%s", mca_coll_dfccl_coll_name(a->coll),
                           a->comm->c_name, rt->native ? "dfccl" : "previous module",
                           !rt->native && rt->cuda ? " (staged)" : "");
    MCA_COLL_DFCCL_STAMP(MCA_COLL_DFCCL_T_ROUTED);
}

/* A request takes its route; what it stages is known once the GPU is. */
static void dfccl_req_set_route(mca_coll_dfccl_req_t *req, const mca_coll_dfccl_route_t *rt)
{
    const mca_coll_dfccl_plan_t *p = &rt->plan;

    if (&req->route != rt) {
        req->route = *rt;
    }
    req->native     = rt->native;
    req->op.settle  = rt->settle;
    req->op.s_stage = p->s_user != NULL && !mca_coll_dfccl_mem_direct(rt->s_kind, rt->s_gpu);
    req->op.r_stage = p->r_user != NULL &&
                      (p->r_tmp || !mca_coll_dfccl_mem_direct(rt->r_kind, rt->r_gpu));
}

/* Run one call, or one start of a persistent request (req). */
static int dfccl_dispatch(mca_coll_dfccl_module_t *m, const mca_coll_dfccl_args_t *a,
                          mca_coll_dfccl_route_t *rt, mca_coll_dfccl_req_t *req,
                          ompi_request_t **request)
{
    int native = rt->native, now, rc;

    if (native) {
        if (m->setup == MCA_COLL_DFCCL_SETUP_FAILED ||
            (m->refused & (1u << rt->plan.sig.kind))) {
            native = 0;
        } else if (m->setup != MCA_COLL_DFCCL_SETUP_READY) {
            mca_coll_dfccl_bind(rt->device);
            pthread_mutex_lock(&m->lock);
            mca_coll_dfccl_setup_start(m);
            pthread_mutex_unlock(&m->lock);
            mca_coll_dfccl_setup_progress();
            native = m->setup != MCA_COLL_DFCCL_SETUP_FAILED;
        }
    }
    if (m->pend_head != NULL) {
        mca_coll_dfccl_setup_progress(); /* may end the setup and drain */
    }
    pthread_mutex_lock(&m->lock);
    now = m->pend_head == NULL && !m->draining &&
          (!native || m->setup == MCA_COLL_DFCCL_SETUP_READY);
    if (!now) {
        /* behind the setup: queued in call order */
        if (req == NULL) {
            req = mca_coll_dfccl_req_new(m, a);
            if (req == NULL) {
                pthread_mutex_unlock(&m->lock);
                return MPI_ERR_NO_MEM;
            }
        }
        dfccl_req_set_route(req, rt);
        req->native    = native;
        req->pend_next = NULL;
        if (m->pend_tail != NULL) {
            m->pend_tail->pend_next = req;
        } else {
            m->pend_head = req;
        }
        m->pend_tail = req;
        pthread_mutex_unlock(&m->lock);
        MCA_COLL_DFCCL_VERBOSE(3, "%s on communicator %s: queued behind its dfccl setup",
                               mca_coll_dfccl_coll_name(a->coll), a->comm->c_name);
        mca_coll_dfccl_setup_progress();
        if (a->form == MCA_COLL_DFCCL_BLOCKING) {
            return dfccl_req_wait(req);
        }
        if (request != NULL) {
            *request = &req->super.super;
        }
        return OMPI_SUCCESS;
    }
    pthread_mutex_unlock(&m->lock);

    if (!native && req == NULL && a->form == MCA_COLL_DFCCL_BLOCKING) {
        return mca_coll_dfccl_fallback(m, a, NULL);
    }
    if (!native && req == NULL && !rt->cuda) {
        /* host buffers, nothing queued: the previous module as it is */
        __atomic_fetch_add(&mca_coll_dfccl_component.fallbacks, 1, __ATOMIC_RELAXED);
        return mca_coll_dfccl_previous(m, a, a->form, a->sbuf, a->rbuf, request);
    }
    if (req == NULL) {
        req = mca_coll_dfccl_req_new(m, a);
        if (req == NULL) {
            return MPI_ERR_NO_MEM;
        }
        MCA_COLL_DFCCL_STAMP(MCA_COLL_DFCCL_T_REQ);
    }
    if (native) {
        dfccl_req_set_route(req, rt);
        rc = dfccl_native_start(m, req);
    } else {
        rc = mca_coll_dfccl_fallback(m, a, req);
    }
    if (a->form == MCA_COLL_DFCCL_BLOCKING) {
        if (rc != OMPI_SUCCESS) {
            ompi_request_t *r = &req->super.super;
            req->completed    = 1;
            ompi_request_free(&r);
            return rc;
        }
        return dfccl_req_wait(req);
    }
    /* A call that could not start completes with its error, which MPI_Wait
     * reports through the communicator's error handler, as it reports a
     * failure found later: the same place on every rank. */
    if (rc != OMPI_SUCCESS) {
        mca_coll_dfccl_req_finish(req, rc);
    }
    if (request != NULL) {
        *request = &req->super.super;
    }
    return OMPI_SUCCESS;
}

void mca_coll_dfccl_start_queued(mca_coll_dfccl_module_t *m, mca_coll_dfccl_req_t *req)
{
    int rc;

    if (req->native && m->setup == MCA_COLL_DFCCL_SETUP_READY) {
        rc = dfccl_native_start(m, req);
    } else if (req->native && m->setup_late) {
        char name[MPI_MAX_OBJECT_NAME + 32];
        mca_coll_dfccl_warn("%s on communicator %s failed: %s: %s",
                            mca_coll_dfccl_coll_name(req->args.coll),
                            mca_coll_dfccl_comm_name(m->comm, name, sizeof(name)),
                            dfcclGetErrorString(DFCCL_ERR_TIMEOUT), m->setup_why);
        rc = mca_coll_dfccl_mpi_error(DFCCL_ERR_TIMEOUT);
    } else {
        rc = mca_coll_dfccl_fallback(m, &req->args, req);
    }
    if (rc != OMPI_SUCCESS) {
        mca_coll_dfccl_req_finish(req, rc);
    }
}

/* MPI_Start of our persistent requests: one call each. */
static int dfccl_req_start(size_t count, ompi_request_t **requests)
{
    for (size_t i = 0; i < count; i++) {
        mca_coll_dfccl_req_t *req = (mca_coll_dfccl_req_t *)requests[i];
        int rc;

        req->completed                        = 0;
        req->super.super.req_state            = OMPI_REQUEST_ACTIVE;
        req->super.super.req_complete         = REQUEST_PENDING;
        req->super.super.req_status.MPI_ERROR = MPI_SUCCESS;
        rc = dfccl_dispatch(req->module, &req->args, &req->route, req, NULL);
        if (rc != OMPI_SUCCESS) {
            return rc;
        }
    }
    return OMPI_SUCCESS;
}

int mca_coll_dfccl_call(mca_coll_dfccl_module_t *m, const mca_coll_dfccl_args_t *a,
                        mca_coll_dfccl_plan_fn_t plan_fn, ompi_request_t **request)
{
    mca_coll_dfccl_component_t *cm = &mca_coll_dfccl_component;
    mca_coll_dfccl_req_t *req;
    mca_coll_dfccl_route_t rt;

    MCA_COLL_DFCCL_STAMP(MCA_COLL_DFCCL_T_ENTER);
    if (cm->mode == MCA_COLL_DFCCL_MODE_OFF) {
        __atomic_fetch_add(&cm->fallbacks, 1, __ATOMIC_RELAXED);
        return mca_coll_dfccl_previous(m, a, a->form, a->sbuf, a->rbuf, request);
    }
    /* One rank (MPI_COMM_SELF, a single-process run): host buffers are a
     * memcpy for the previous module, but device buffers would be staged
     * through the host both ways, so dfccl's one-rank group takes those. */
    dfccl_route(a, ompi_comm_size(a->comm) > 1 || cm->mode == MCA_COLL_DFCCL_MODE_CUDA ? plan_fn
                                                                                      : NULL,
                &rt);
    if (a->form != MCA_COLL_DFCCL_PERSISTENT) {
        return dfccl_dispatch(m, a, &rt, NULL, request);
    }
    /* Persistent: our request, which starts one call per MPI_Start, so
     * that its starts are ordered with the communicator's other calls. */
    if (!rt.native && !mca_coll_dfccl_has_previous(m, a->coll, MCA_COLL_DFCCL_NONBLOCKING)) {
        __atomic_fetch_add(&cm->fallbacks, 1, __ATOMIC_RELAXED);
        return mca_coll_dfccl_previous(m, a, a->form, a->sbuf, a->rbuf, request);
    }
    req = mca_coll_dfccl_req_new(m, a);
    if (req == NULL) {
        return MPI_ERR_NO_MEM;
    }
    dfccl_req_set_route(req, &rt);
    *request = &req->super.super;
    return OMPI_SUCCESS;
}

/* ---- progress ------------------------------------------------------------------------ */

void mca_coll_dfccl_progress_need(void)
{
    mca_coll_dfccl_component_t *cm = &mca_coll_dfccl_component;

    if (__atomic_load_n(&cm->progress_registered, __ATOMIC_ACQUIRE)) {
        return;
    }
    pthread_mutex_lock(&cm->lock);
    if (!cm->progress_registered) {
        opal_progress_register(mca_coll_dfccl_progress);
        __atomic_store_n(&cm->progress_registered, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&cm->lock);
}

int mca_coll_dfccl_progress(void)
{
    mca_coll_dfccl_component_t *cm = &mca_coll_dfccl_component;
    mca_coll_dfccl_op_t *op;
    int n = 0;

    /* Explicit progress, or runs in flight with wait spinning on: this MPI
     * thread polls dfccl's completion queue itself (it spins in opal_progress
     * anyway), which saves waiting for the poller thread to notice. */
    if (cm->ctx != NULL &&
        (cm->cfg.progress == DFCCL_PROGRESS_EXPLICIT ||
         (cm->cfg.wait_spin_us > 0 && __atomic_load_n(&cm->running, __ATOMIC_RELAXED) > 0))) {
        dfcclProgress(cm->ctx, NULL);
    }
    while (cm->done_head != NULL) {
        pthread_mutex_lock(&cm->done_lock);
        op = dfccl_op_pop(&cm->done_head, &cm->done_tail);
        pthread_mutex_unlock(&cm->done_lock);
        if (op == NULL) {
            break;
        }
        dfccl_op_done(op);
        n++;
    }
    if (cm->nsetup > 0) {
        n += mca_coll_dfccl_setup_progress();
    }
    n += mca_coll_dfccl_fallback_progress();
    if (n == 0 && cm->mode == MCA_COLL_DFCCL_MODE_HOST &&
        __atomic_load_n(&cm->running, __ATOMIC_RELAXED) > 0) {
        /* The host backend's daemon blocks are threads of this process: a
         * thread spinning here while they wait for a core (MPI spins
         * without yielding when it thinks it has a core per rank) would
         * hold it until the scheduler's time slice ends. */
        sched_yield();
    }
    return n;
}
