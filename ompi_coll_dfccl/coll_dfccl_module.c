/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The per-communicator module: selection, bootstrap of the communicator's
 * dfccl group, the cache of registered collectives, the run engine (start,
 * chain, complete) and the process-wide dfccl rank context.
 *
 * Bootstrap, and why it cannot deadlock. dfcclGroupCreate is the only dfccl
 * call that communicates: it runs two allgathers over the communicator. If
 * it ran at the first collective call on a communicator, a program that
 * starts nonblocking collectives on several communicators in a different
 * order on each rank would hang: rank A blocks in communicator X's
 * bootstrap allgather while rank B blocks in Y's. So the group is created
 * in `enable`, which Open MPI calls while the communicator itself is being
 * created. Communicator creation is collective and every rank creates its
 * communicators in the same order (MPI requires it), so those allgathers
 * always pair up.
 * (The allgather is our own point-to-point ring that spins on opal_progress;
 * see dfccl_p2p_allgather for why a blocking module call cannot be used.)
 * A group costs two small allgathers and a shared-memory directory; what is
 * expensive (connector memory, device state) comes with registration, and
 * registration is local, so it stays lazy: it happens at the first call of
 * each signature. The dfccl rank context is created at the first enable
 * (MPI_COMM_WORLD, inside MPI_Init); its daemon starts at the first run.
 * Two further 4-byte allreduces in enable make every rank agree on whether
 * the group exists, so a failure on one rank turns dfccl off for that
 * communicator on all ranks instead of leaving one rank waiting for peers
 * that fell back.
 *
 * Instances. Every rank must register a group's collectives in the same
 * order with the same arguments, and a registered collective can be in
 * flight only once. MPI orders the collective calls on a communicator
 * identically on every rank, so the k-th call with a given signature (kind,
 * count, type, op, root) is the same call everywhere: it uses instance
 * k mod K (K = coll_dfccl_instances), registered at its first use. If that
 * instance is still running an earlier call, the new run is queued behind
 * it and started from that run's completion: a nonblocking call never
 * waits.
 *
 * Completion. dfccl callbacks (the poller thread, or dfcclProgress in
 * explicit mode) only put the finished run on a list. The opal_progress
 * callback takes runs off it on an MPI thread, starts chained runs, copies
 * results out where needed and completes the MPI request, so requests are
 * only ever completed the way the rest of Open MPI completes them.
 */
#include "coll_dfccl.h"

#include <stdlib.h>
#include <string.h>
#ifdef DFCCL_STAGE_TIMES
#include <time.h>   /* clock_gettime: the diagnostic stage times */
#include <unistd.h> /* getpid */
#endif

#include "opal/runtime/opal_progress.h"
#include "ompi/mca/coll/base/base.h"
#include "ompi/mca/pml/pml.h"
#include "ompi/mca/coll/base/coll_tags.h"

#ifdef DFCCL_HAVE_CUDART
#include <cuda.h> /* the driver's types only: its functions come through libcudart */
#include <cuda_runtime_api.h>
#endif

/* ---- memory kinds ----------------------------------------------------- */

#ifdef DFCCL_HAVE_CUDART
/* Two driver functions reached through the runtime's entry points (dfccl
 * links libcudart, never libcuda): a pointer's attributes in one call, and
 * setting one. NULL where the runtime or driver cannot give them. */
typedef CUresult (*dfccl_ptr_attrs_fn)(unsigned int, CUpointer_attribute *, void **,
                                       CUdeviceptr);
typedef CUresult (*dfccl_ptr_set_fn)(const void *, CUpointer_attribute, CUdeviceptr);
static dfccl_ptr_attrs_fn dfccl_ptr_attrs;
static dfccl_ptr_set_fn dfccl_ptr_set;
static pthread_once_t dfccl_ptr_once = PTHREAD_ONCE_INIT;

static void *dfccl_driver_fn(const char *name)
{
    void *fn = NULL;
#if CUDART_VERSION >= 12050
    enum cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q) !=
            cudaSuccess || q != cudaDriverEntryPointSuccess) {
        fn = NULL;
    }
#elif CUDART_VERSION >= 12000
    enum cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
        fn = NULL;
    }
#elif CUDART_VERSION >= 11030
    if (cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault) != cudaSuccess) {
        fn = NULL;
    }
#else
    (void)name;
#endif
    cudaGetLastError();
    return fn;
}

static void dfccl_ptr_init(void)
{
    dfccl_ptr_attrs = (dfccl_ptr_attrs_fn)dfccl_driver_fn("cuPointerGetAttributes");
    dfccl_ptr_set   = (dfccl_ptr_set_fn)dfccl_driver_fn("cuPointerSetAttribute");
    if (dfccl_ptr_attrs == NULL || dfccl_ptr_set == NULL) {
        dfccl_ptr_attrs = NULL;
        MCA_COLL_DFCCL_VERBOSE(1, "%s", "CUDA gives no cuPointerGetAttributes or "
                               "cuPointerSetAttribute: every collective on device buffers "
                               "waits for CUDA's default stream first");
    }
}
#endif

int mca_coll_dfccl_device_buf(const void *ptr, int *settle)
{
#ifdef DFCCL_HAVE_CUDART
    CUpointer_attribute at[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                 CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                 CU_POINTER_ATTRIBUTE_SYNC_MEMOPS};
    /* zeroed 8 bytes each: the driver writes an unsigned int or a bool */
    uint64_t type = 0, managed = 0, sync = 0;
    void *data[3] = {&type, &managed, &sync};
    unsigned int one = 1;

    if (ptr == NULL || ptr == MPI_IN_PLACE) {
        return 0;
    }
    pthread_once(&dfccl_ptr_once, dfccl_ptr_init);
    if (dfccl_ptr_attrs == NULL ||
        dfccl_ptr_attrs(3, at, data, (CUdeviceptr)(uintptr_t)ptr) != CUDA_SUCCESS) {
        int dev = mca_coll_dfccl_is_device(ptr);
        *settle |= dev;
        return dev;
    }
    if (managed) {
        *settle = 1; /* its copies may migrate pages; no attribute for that */
        return 1;
    }
    if ((CUmemorytype)type != CU_MEMORYTYPE_DEVICE) {
        return 0; /* host memory, pinned or not, or not CUDA's */
    }
    if (!sync) {
        /* First seen (or a new allocation at the address): from now on a
         * synchronous copy or memset into it is complete when it returns.
         * One issued before may still be in flight: this call waits for
         * the default stream, and so does every call if the attribute
         * does not take. */
        *settle = 1;
        if (dfccl_ptr_set(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                          (CUdeviceptr)(uintptr_t)ptr) != CUDA_SUCCESS) {
            MCA_COLL_DFCCL_VERBOSE(2, "buffer %p: CU_POINTER_ATTRIBUTE_SYNC_MEMOPS not set; "
                                   "calls on it wait for CUDA's default stream", ptr);
        }
    }
    return 1;
#else
    (void)ptr;
    (void)settle;
    return 0;
#endif
}

int mca_coll_dfccl_is_device(const void *ptr)
{
#ifdef DFCCL_HAVE_CUDART
    struct cudaPointerAttributes attr;

    if (ptr == NULL || ptr == MPI_IN_PLACE) {
        return 0;
    }
    if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
        cudaGetLastError(); /* no device, or not a CUDA pointer: host */
        return 0;
    }
    return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
#else
    (void)ptr;
    return 0;
#endif
}

/*
 * Wait for the work queued on CUDA's legacy default stream: a cudaMemcpy
 * from pageable host memory (or between device buffers) into memory without
 * CU_POINTER_ATTRIBUTE_SYNC_MEMOPS may return before its data has landed,
 * and the daemon, on its own non-blocking stream, is not ordered after it.
 * dfccl's daemon never runs on that stream, so this never waits for a
 * collective. About 1.5 us even when the stream is idle.
 */
int mca_coll_dfccl_settle_default_stream(void)
{
#ifdef DFCCL_HAVE_CUDART
    cudaError_t e = cudaStreamSynchronize(cudaStreamLegacy);
    if (e != cudaSuccess) {
        mca_coll_dfccl_warn("waiting for CUDA's default stream failed: %s",
                            cudaGetErrorString(e));
        return OMPI_ERROR;
    }
#endif
    return OMPI_SUCCESS;
}

/* Copy between any two buffers (host or device); complete on return. */
int mca_coll_dfccl_copy(void *dst, const void *src, size_t bytes)
{
    if (bytes == 0 || dst == src) {
        return OMPI_SUCCESS;
    }
#ifdef DFCCL_HAVE_CUDART
    if (mca_coll_dfccl_is_device(dst) || mca_coll_dfccl_is_device(src)) {
        if (cudaMemcpy(dst, src, bytes, cudaMemcpyDefault) != cudaSuccess) {
            mca_coll_dfccl_warn("cudaMemcpy of %zu bytes failed: %s", bytes,
                                cudaGetErrorString(cudaGetLastError()));
            return OMPI_ERROR;
        }
        /* the copy is on the legacy stream and may not have landed yet */
        return mca_coll_dfccl_settle_default_stream();
    }
#endif
    memcpy(dst, src, bytes);
    return OMPI_SUCCESS;
}

static void *dfccl_mem_alloc(size_t bytes)
{
    void *p = NULL;

#ifdef DFCCL_HAVE_CUDART
    if (mca_coll_dfccl_component.mode == MCA_COLL_DFCCL_MODE_CUDA) {
        return cudaMalloc(&p, bytes) == cudaSuccess ? p : NULL;
    }
#endif
    p = malloc(bytes);
    return p;
}

static void dfccl_mem_free(void *p)
{
    if (p == NULL) {
        return;
    }
#ifdef DFCCL_HAVE_CUDART
    if (mca_coll_dfccl_component.mode == MCA_COLL_DFCCL_MODE_CUDA) {
        cudaFree(p);
        return;
    }
#endif
    free(p);
}

/* ---- the rank context ---------------------------------------------------- */

/* Create the process's dfccl context on the first enable. 1 if usable. */
static int dfccl_ctx_get(void)
{
    mca_coll_dfccl_component_t *cm = &mca_coll_dfccl_component;
    dfccl_config_t cfg;
    dfccl_status_t st;

    pthread_mutex_lock(&cm->lock);
    if (cm->ctx_tried) {
        pthread_mutex_unlock(&cm->lock);
        return cm->ctx != NULL;
    }
    cm->ctx_tried = 1;
    cm->mode      = MCA_COLL_DFCCL_MODE_OFF;
    cfg           = cm->cfg;
    if (!cm->cfg_ok) {
        goto out;
    }
    if (cfg.backend == DFCCL_BACKEND_AUTO) {
#ifdef DFCCL_HAVE_CUDART
        int ndev = 0;
        if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
            cudaGetLastError();
            MCA_COLL_DFCCL_VERBOSE(1, "no GPU visible: dfccl is off, every collective "
                                   "takes the previous module (use coll_dfccl_backend=host "
                                   "to run host buffers on dfccl)");
            goto out;
        }
        cfg.backend = DFCCL_BACKEND_CUDA;
#else
        MCA_COLL_DFCCL_VERBOSE(1, "built without CUDA: dfccl is off, every collective takes "
                               "the previous module (use coll_dfccl_backend=host to run "
                               "host buffers on dfccl)");
        goto out;
#endif
    }
    st = dfcclInit(&cfg, &cm->ctx);
    if (st != DFCCL_OK) {
        cm->ctx = NULL;
        mca_coll_dfccl_warn("could not start dfccl (%s: %s); collectives fall back to the "
                            "other coll components. Fix the cause, or set "
                            "coll_dfccl_backend=auto|host, or leave dfccl out with --mca "
                            "coll ^dfccl", dfcclGetErrorString(st), dfcclGetLastErrorMessage());
        goto out;
    }
    cm->mode = dfcclGetBackend(cm->ctx) == DFCCL_BACKEND_CUDA ? MCA_COLL_DFCCL_MODE_CUDA
                                                              : MCA_COLL_DFCCL_MODE_HOST;
    opal_progress_register(mca_coll_dfccl_progress);
    cm->progress_registered = 1;
    MCA_COLL_DFCCL_VERBOSE(1, "dfccl started on the %s backend",
                           cm->mode == MCA_COLL_DFCCL_MODE_CUDA ? "cuda" : "host");
out:
    pthread_mutex_unlock(&cm->lock);
    return cm->ctx != NULL;
}

#ifdef DFCCL_STAGE_TIMES
/* Diagnostic stage times (coll_dfccl.h). One blocking call runs at a time
 * per process in the benchmarks they are for; the callback's stamp comes
 * from whichever thread polls dfccl's completion queue. */
static uint64_t dfccl_t_stamp[MCA_COLL_DFCCL_NT], dfccl_t_sum[MCA_COLL_DFCCL_NT], dfccl_t_n;

static uint64_t dfccl_t_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void mca_coll_dfccl_stamp(int stage)
{
    if (stage == MCA_COLL_DFCCL_T_ENTER) {
        memset(dfccl_t_stamp, 0, sizeof(dfccl_t_stamp));
    }
    if (dfccl_t_stamp[stage] == 0) {
        __atomic_store_n(&dfccl_t_stamp[stage], dfccl_t_now(), __ATOMIC_RELEASE);
    }
}

void mca_coll_dfccl_stamp_sum(void)
{
    uint64_t prev = __atomic_load_n(&dfccl_t_stamp[0], __ATOMIC_ACQUIRE);

    for (int i = 1; i < MCA_COLL_DFCCL_NT; i++) {
        uint64_t t = __atomic_load_n(&dfccl_t_stamp[i], __ATOMIC_ACQUIRE);
        if (t != 0 && prev != 0 && t >= prev) {
            dfccl_t_sum[i] += t - prev;
        }
        if (t != 0) {
            prev = t;
        }
    }
    dfccl_t_n++;
    memset(dfccl_t_stamp, 0, sizeof(dfccl_t_stamp));
}

void mca_coll_dfccl_stamp_print(void)
{
    static const char *const names[MCA_COLL_DFCCL_NT] = {
        "enter", "routed", "request", "settled", "submitted", "callback", "done", "waited",
        "freed"};
    char line[512];
    int len = 0;

    if (dfccl_t_n == 0) {
        return;
    }
    for (int i = 1; i < MCA_COLL_DFCCL_NT; i++) {
        len += snprintf(line + len, sizeof(line) - (size_t)len, " %s %.2f", names[i],
                        (double)dfccl_t_sum[i] / (double)dfccl_t_n / 1e3);
    }
    fprintf(stderr, "dfccl component stages (us per blocking call), pid %d, %llu calls:%s\n",
            (int)getpid(), (unsigned long long)dfccl_t_n, line);
}
#endif

void mca_coll_dfccl_finalize(void)
{
    mca_coll_dfccl_component_t *cm = &mca_coll_dfccl_component;
    dfccl_stats_t stats;

    memset(&stats, 0, sizeof(stats));
    if (cm->ctx != NULL) {
        dfcclGetStats(cm->ctx, &stats);
    }
    if (cm->used && cm->verbose >= 1) {
        fprintf(stderr, "dfccl: rank %d: collectives %llu preemptions %llu quits %llu "
                "fallbacks %llu\n", cm->world_rank, (unsigned long long)stats.collectives,
                (unsigned long long)stats.preemptions, (unsigned long long)stats.quits,
                (unsigned long long)cm->fallbacks);
        fflush(stderr);
    }
#ifdef DFCCL_STAGE_TIMES
    mca_coll_dfccl_stamp_print();
#endif
    if (cm->progress_registered) {
        opal_progress_unregister(mca_coll_dfccl_progress);
        cm->progress_registered = 0;
    }
    if (cm->ctx != NULL) {
        dfccl_status_t st = dfcclDestroy(cm->ctx);
        if (st != DFCCL_OK) {
            mca_coll_dfccl_warn("dfcclDestroy at MPI_Finalize: %s (%s); some collective was "
                                "still running: complete every request before MPI_Finalize",
                                dfcclGetErrorString(st), dfcclGetLastErrorMessage());
        }
        cm->ctx = NULL;
    }
    cm->ctx_tried = 0;
    cm->used      = 0;
}

/* ---- requests -------------------------------------------------------------- */

static void dfccl_req_construct(mca_coll_dfccl_req_t *req)
{
    req->freed     = 0;
    req->completed = 0;
    req->inner     = NULL;
    req->nstages   = 0;
    memset(&req->op, 0, sizeof(req->op));
}

OBJ_CLASS_INSTANCE(mca_coll_dfccl_req_t, ompi_coll_base_nbc_request_t, dfccl_req_construct,
                   NULL);

static void dfccl_req_release(mca_coll_dfccl_req_t *req)
{
    for (int i = 0; i < req->nstages; i++) {
        free(req->stages[i].host);
    }
    req->nstages = 0;
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

mca_coll_dfccl_req_t *mca_coll_dfccl_req_new(struct ompi_communicator_t *comm,
                                             bool persistent)
{
    mca_coll_dfccl_req_t *req = OBJ_NEW(mca_coll_dfccl_req_t);

    if (req == NULL) {
        return NULL;
    }
    OMPI_REQUEST_INIT(&req->super.super, persistent);
    req->super.super.req_type           = OMPI_REQUEST_COLL;
    req->super.super.req_free           = dfccl_req_free;
    req->super.super.req_cancel         = dfccl_req_cancel;
    req->super.super.req_mpi_object.comm = comm;
    req->super.super.req_status.MPI_ERROR = MPI_SUCCESS;
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

void mca_coll_dfccl_staged_track(mca_coll_dfccl_req_t *req)
{
    mca_coll_dfccl_component_t *cm = &mca_coll_dfccl_component;

    pthread_mutex_lock(&cm->done_lock);
    req->staged_next = cm->staged_head;
    cm->staged_head  = req;
    pthread_mutex_unlock(&cm->done_lock);
}

/* ---- the cache of registrations --------------------------------------------- */

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
mca_coll_dfccl_entry_t *mca_coll_dfccl_entry_get(mca_coll_dfccl_module_t *m,
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

void *mca_coll_dfccl_inst_tmp(mca_coll_dfccl_module_t *m, mca_coll_dfccl_inst_t *inst,
                              size_t bytes)
{
    if (inst->tmp_bytes < bytes) {
        dfccl_mem_free(inst->tmp);
        inst->tmp       = dfccl_mem_alloc(bytes);
        inst->tmp_bytes = inst->tmp != NULL ? bytes : 0;
    }
    return inst->tmp;
}

static dfccl_status_t dfccl_register(mca_coll_dfccl_module_t *m,
                                     const mca_coll_dfccl_sig_t *s, int *id_p)
{
    switch (s->kind) {
    case MCA_COLL_DFCCL_ALLREDUCE:
        return dfcclRegisterAllReduce(s->count, s->dtype, s->op, m->group, 0, id_p);
    case MCA_COLL_DFCCL_ALLGATHER:
        return dfcclRegisterAllGather(s->count, s->dtype, m->group, 0, id_p);
    case MCA_COLL_DFCCL_REDUCE_SCATTER:
        return dfcclRegisterReduceScatter(s->count, s->dtype, s->op, m->group, 0, id_p);
    case MCA_COLL_DFCCL_REDUCE:
        return dfcclRegisterReduce(s->count, s->dtype, s->op, s->root, m->group, 0, id_p);
    case MCA_COLL_DFCCL_BCAST:
        return dfcclRegisterBroadcast(s->count, s->dtype, s->root, m->group, 0, id_p);
    }
    return DFCCL_ERR_INVALID_ARG;
}

static void dfccl_done_cb(int coll_id, dfccl_status_t status, void *arg)
{
    mca_coll_dfccl_op_t *op        = arg;
    mca_coll_dfccl_component_t *cm = &mca_coll_dfccl_component;

    MCA_COLL_DFCCL_STAMP(MCA_COLL_DFCCL_T_CALLBACK);
    op->status = status;
    op->next   = NULL;
    pthread_mutex_lock(&cm->done_lock);
    if (cm->done_tail != NULL) {
        cm->done_tail->next = op;
    } else {
        cm->done_head = op;
    }
    cm->done_tail = op;
    pthread_mutex_unlock(&cm->done_lock);
}

/* Submit `op` on its (idle, registered) instance. Module lock held. */
static dfccl_status_t dfccl_op_submit(mca_coll_dfccl_module_t *m, mca_coll_dfccl_op_t *op)
{
    int id = op->entry->inst[op->inst].coll_id;
    dfccl_rank_ctx_t ctx = mca_coll_dfccl_component.ctx;
    dfccl_status_t st;

    /* counted before the run starts: its completion may come first */
    __atomic_add_fetch(&mca_coll_dfccl_component.running, 1, __ATOMIC_RELAXED);
    switch (op->entry->sig.kind) {
    case MCA_COLL_DFCCL_ALLREDUCE:
        st = dfcclRunAllReduce(op->sbuf, op->rbuf, id, dfccl_done_cb, op, ctx);
        break;
    case MCA_COLL_DFCCL_ALLGATHER:
        st = dfcclRunAllGather(op->sbuf, op->rbuf, id, dfccl_done_cb, op, ctx);
        break;
    case MCA_COLL_DFCCL_REDUCE_SCATTER:
        st = dfcclRunReduceScatter(op->sbuf, op->rbuf, id, dfccl_done_cb, op, ctx);
        break;
    case MCA_COLL_DFCCL_REDUCE:
        st = dfcclRunReduce(op->sbuf, op->rbuf, id, dfccl_done_cb, op, ctx);
        break;
    case MCA_COLL_DFCCL_BCAST:
        st = dfcclRunBroadcast(op->sbuf, op->rbuf, id, dfccl_done_cb, op, ctx);
        break;
    default:
        st = DFCCL_ERR_INVALID_ARG;
        break;
    }
    if (st != DFCCL_OK) {
        __atomic_sub_fetch(&mca_coll_dfccl_component.running, 1, __ATOMIC_RELAXED);
    }
    return st;
}

static void dfccl_run_failed(mca_coll_dfccl_module_t *m, mca_coll_dfccl_op_t *op,
                             dfccl_status_t st)
{
    mca_coll_dfccl_warn("collective on communicator %s (cid %u) failed to start: %s (%s)",
                        m->comm->c_name, ompi_comm_get_cid(m->comm), dfcclGetErrorString(st),
                        dfcclGetLastErrorMessage());
}

int mca_coll_dfccl_op_start(mca_coll_dfccl_module_t *m, const mca_coll_dfccl_sig_t *sig,
                            mca_coll_dfccl_req_t *req)
{
    mca_coll_dfccl_op_t *op = &req->op;
    mca_coll_dfccl_inst_t *inst;
    dfccl_status_t st = DFCCL_OK;

    /* the buffers hold their data now, as MPI promises the call */
    if (mca_coll_dfccl_component.mode == MCA_COLL_DFCCL_MODE_CUDA &&
        (mca_coll_dfccl_component.sync_default_stream > 0 ||
         (mca_coll_dfccl_component.sync_default_stream < 0 && op->settle))) {
        if (mca_coll_dfccl_settle_default_stream() != OMPI_SUCCESS) {
            return OMPI_ERROR;
        }
        op->settle = 0; /* a persistent request's later starts need not */
    }
    MCA_COLL_DFCCL_STAMP(MCA_COLL_DFCCL_T_SETTLED);
    req->completed = 0;
    op->module     = m;
    op->req        = req;
    op->next       = NULL;
    pthread_mutex_lock(&m->lock);
    if (op->entry == NULL) {
        op->entry = mca_coll_dfccl_entry_get(m, sig);
        if (op->entry == NULL) {
            pthread_mutex_unlock(&m->lock);
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
    }
    op->inst = (int)(op->entry->calls++ % (uint64_t)op->entry->ninst);
    inst     = &op->entry->inst[op->inst];
    if (inst->coll_id < 0) {
        st = dfccl_register(m, &op->entry->sig, &inst->coll_id);
        if (st != DFCCL_OK) {
            inst->coll_id = -1;
            pthread_mutex_unlock(&m->lock);
            mca_coll_dfccl_warn("registering a collective on communicator %s failed: %s (%s)",
                                m->comm->c_name, dfcclGetErrorString(st),
                                dfcclGetLastErrorMessage());
            return OMPI_ERROR;
        }
    }
    if (op->tmp_bytes > 0) {
        op->rbuf = mca_coll_dfccl_inst_tmp(m, inst, op->tmp_bytes);
        if (op->rbuf == NULL) {
            pthread_mutex_unlock(&m->lock);
            mca_coll_dfccl_warn("out of memory for a %zu-byte temporary buffer on "
                                "communicator %s", op->tmp_bytes, m->comm->c_name);
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
    }
    m->inflight++;
    if (inst->busy) {
        /* An earlier call of this signature still runs there: chain. */
        if (inst->wait_tail != NULL) {
            inst->wait_tail->next = op;
        } else {
            inst->wait_head = op;
        }
        inst->wait_tail = op;
        pthread_mutex_unlock(&m->lock);
        return OMPI_SUCCESS;
    }
    inst->busy = 1;
    st         = dfccl_op_submit(m, op);
    if (st != DFCCL_OK) {
        inst->busy = 0;
        m->inflight--;
        pthread_mutex_unlock(&m->lock);
        dfccl_run_failed(m, op, st);
        return OMPI_ERROR;
    }
    pthread_mutex_unlock(&m->lock);
    MCA_COLL_DFCCL_STAMP(MCA_COLL_DFCCL_T_SUBMITTED);
    return OMPI_SUCCESS;
}

/* A run finished: copy out, start the next chained run, complete. */
static void dfccl_op_done(mca_coll_dfccl_op_t *op)
{
    mca_coll_dfccl_module_t *m  = op->module;
    mca_coll_dfccl_inst_t *inst = &op->entry->inst[op->inst];
    mca_coll_dfccl_op_t *next;
    int rc = op->status == DFCCL_OK ? MPI_SUCCESS : MPI_ERR_INTERN;

    MCA_COLL_DFCCL_STAMP(MCA_COLL_DFCCL_T_DONE);
    __atomic_sub_fetch(&mca_coll_dfccl_component.running, 1, __ATOMIC_RELAXED);

    if (op->status != DFCCL_OK) {
        /* dfccl found the error on its poller thread: its query hands the
         * message to this thread */
        dfcclQuery(inst->coll_id, mca_coll_dfccl_component.ctx);
        mca_coll_dfccl_warn("collective on communicator %s (cid %u) failed: %s (%s)",
                            m->comm->c_name, ompi_comm_get_cid(m->comm),
                            dfcclGetErrorString(op->status), dfcclGetLastErrorMessage());
    } else if (op->copy_bytes > 0) {
        if (mca_coll_dfccl_copy(op->copy_dst, (char *)op->rbuf + op->copy_off,
                                op->copy_bytes) != OMPI_SUCCESS) {
            rc = MPI_ERR_INTERN;
        }
    }
    pthread_mutex_lock(&m->lock);
    m->inflight--;
    inst->busy = 0;
    while ((next = inst->wait_head) != NULL) {
        dfccl_status_t st;
        inst->wait_head = next->next;
        if (inst->wait_head == NULL) {
            inst->wait_tail = NULL;
        }
        next->next = NULL;
        inst->busy = 1;
        st         = dfccl_op_submit(m, next);
        if (st == DFCCL_OK) {
            break;
        }
        inst->busy = 0;
        m->inflight--;
        dfccl_run_failed(m, next, st);
        pthread_mutex_unlock(&m->lock);
        mca_coll_dfccl_req_finish(next->req, MPI_ERR_INTERN);
        pthread_mutex_lock(&m->lock);
    }
    pthread_mutex_unlock(&m->lock);
    mca_coll_dfccl_req_finish(op->req, rc);
}

static int dfccl_staged_poll(void)
{
    mca_coll_dfccl_component_t *cm = &mca_coll_dfccl_component;
    mca_coll_dfccl_req_t *done = NULL, **pp, *r;
    int n = 0;

    if (cm->staged_head == NULL) {
        return 0;
    }
    pthread_mutex_lock(&cm->done_lock);
    for (pp = &cm->staged_head; (r = *pp) != NULL;) {
        if (REQUEST_COMPLETE(r->inner)) {
            *pp            = r->staged_next;
            r->staged_next = done;
            done           = r;
        } else {
            pp = &r->staged_next;
        }
    }
    pthread_mutex_unlock(&cm->done_lock);
    while ((r = done) != NULL) {
        int rc = r->inner->req_status.MPI_ERROR;
        done   = r->staged_next;
        if (r->inner->req_persistent) {
            r->inner->req_state = OMPI_REQUEST_INACTIVE;
        } else {
            ompi_request_free(&r->inner);
            r->inner = NULL;
        }
        for (int i = 0; i < r->nstages; i++) {
            mca_coll_dfccl_stage_t *s = &r->stages[i];
            if (s->up && mca_coll_dfccl_copy((char *)s->dev + s->gap, s->host, s->bytes) !=
                             OMPI_SUCCESS) {
                rc = MPI_ERR_INTERN;
            }
        }
        if (!r->super.super.req_persistent) {
            for (int i = 0; i < r->nstages; i++) {
                free(r->stages[i].host);
            }
            r->nstages = 0;
        }
        mca_coll_dfccl_req_finish(r, rc);
        n++;
    }
    return n;
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
        op = cm->done_head;
        if (op != NULL) {
            cm->done_head = op->next;
            if (cm->done_head == NULL) {
                cm->done_tail = NULL;
            }
        }
        pthread_mutex_unlock(&cm->done_lock);
        if (op == NULL) {
            break;
        }
        dfccl_op_done(op);
        n++;
    }
    return n + dfccl_staged_poll();
}

/* ---- module: selection, enable, destruction -------------------------------- */

static void dfccl_module_construct(mca_coll_dfccl_module_t *m)
{
    size_t off = offsetof(mca_coll_dfccl_module_t, comm);

    memset((char *)m + off, 0, sizeof(*m) - off);
    pthread_mutex_init(&m->lock, NULL);
}

#define DFCCL_RELEASE_PREV(_api)                                               \
    do {                                                                       \
        if (m->previous_##_api##_module != NULL) {                             \
            OBJ_RELEASE(m->previous_##_api##_module);                          \
            m->previous_##_api##_module = NULL;                                \
        }                                                                      \
    } while (0)

static void dfccl_module_destruct(mca_coll_dfccl_module_t *m)
{
    int busy = 0;

    /* Runs left by a communicator freed with requests pending: drive them. */
    for (int spins = 0; m->inflight > 0 && spins < 10000000; spins++) {
        opal_progress();
    }
    for (int h = 0; h < MCA_COLL_DFCCL_HASH; h++) {
        mca_coll_dfccl_entry_t *e, *next;
        for (e = m->hash[h]; e != NULL; e = next) {
            next = e->next;
            for (int i = 0; i < e->ninst; i++) {
                if (e->inst[i].coll_id >= 0 &&
                    dfcclDeregister(e->inst[i].coll_id, mca_coll_dfccl_component.ctx) !=
                        DFCCL_OK) {
                    busy = 1;
                }
                dfccl_mem_free(e->inst[i].tmp);
            }
            free(e);
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
    DFCCL_RELEASE_PREV(allreduce);
    DFCCL_RELEASE_PREV(allgather);
    DFCCL_RELEASE_PREV(reduce_scatter_block);
    DFCCL_RELEASE_PREV(reduce_scatter);
    DFCCL_RELEASE_PREV(reduce);
    DFCCL_RELEASE_PREV(bcast);
    DFCCL_RELEASE_PREV(iallreduce);
    DFCCL_RELEASE_PREV(iallgather);
    DFCCL_RELEASE_PREV(ireduce_scatter_block);
    DFCCL_RELEASE_PREV(ireduce_scatter);
    DFCCL_RELEASE_PREV(ireduce);
    DFCCL_RELEASE_PREV(ibcast);
    DFCCL_RELEASE_PREV(allreduce_init);
    DFCCL_RELEASE_PREV(allgather_init);
    DFCCL_RELEASE_PREV(reduce_scatter_block_init);
    DFCCL_RELEASE_PREV(reduce_scatter_init);
    DFCCL_RELEASE_PREV(reduce_init);
    DFCCL_RELEASE_PREV(bcast_init);
    pthread_mutex_destroy(&m->lock);
}

OBJ_CLASS_INSTANCE(mca_coll_dfccl_module_t, mca_coll_base_module_t, dfccl_module_construct,
                   dfccl_module_destruct);

int mca_coll_dfccl_init_query(bool enable_progress_threads, bool enable_mpi_threads)
{
    return OMPI_SUCCESS;
}

/* Keep what the lower-priority modules installed; a missing one is NULL
 * (the call then fails only if dfccl cannot take it either). */
#define DFCCL_SAVE_PREV(_api)                                                  \
    do {                                                                       \
        m->previous_##_api            = comm->c_coll->coll_##_api;             \
        m->previous_##_api##_module   = comm->c_coll->coll_##_api##_module;    \
        if (m->previous_##_api == NULL || m->previous_##_api##_module == NULL) { \
            m->previous_##_api          = NULL;                                \
            m->previous_##_api##_module = NULL;                                \
        } else {                                                               \
            OBJ_RETAIN(m->previous_##_api##_module);                           \
        }                                                                      \
    } while (0)

/*
 * dfccl's out-of-band allgather, over the communicator being created: a
 * ring of point-to-point messages that spins on opal_progress. Not the
 * previous module's blocking allgather: in Open MPI 4.1 `enable` can run
 * inside opal_progress (communicator activation completes as a nonblocking
 * request), and under MPI_THREAD_MULTIPLE a blocking wait there sleeps
 * until a progress owner that is this very thread wakes it: it never does.
 * (coll/ucc bootstraps the same way for the same reason.) The tag is one
 * no other component uses; messages of successive calls pair in order.
 */
#define DFCCL_BOOTSTRAP_TAG (MCA_COLL_BASE_TAG_HCOLL_END + 1)

static int dfccl_p2p_allgather(const void *sendbuf, void *recvbuf, size_t bytes,
                               struct ompi_communicator_t *comm)
{
    int n = ompi_comm_size(comm), r = ompi_comm_rank(comm);
    int right = (r + 1) % n, left = (r + n - 1) % n, rc;
    char *out = recvbuf;

    memcpy(out + (size_t)r * bytes, sendbuf, bytes);
    for (int step = 0; step < n - 1; step++) {
        int sblk = (r - step + n) % n, rblk = (r - step - 1 + n) % n;
        ompi_request_t *reqs[2];

        rc = MCA_PML_CALL(irecv(out + (size_t)rblk * bytes, bytes, MPI_BYTE, left,
                                DFCCL_BOOTSTRAP_TAG, comm, &reqs[0]));
        if (rc != OMPI_SUCCESS) {
            return rc;
        }
        rc = MCA_PML_CALL(isend(out + (size_t)sblk * bytes, bytes, MPI_BYTE, right,
                                DFCCL_BOOTSTRAP_TAG, MCA_PML_BASE_SEND_STANDARD, comm,
                                &reqs[1]));
        if (rc != OMPI_SUCCESS) {
            return rc;
        }
        while (!REQUEST_COMPLETE(reqs[0]) || !REQUEST_COMPLETE(reqs[1])) {
            opal_progress();
        }
        rc = reqs[0]->req_status.MPI_ERROR != MPI_SUCCESS ? reqs[0]->req_status.MPI_ERROR
                                                          : reqs[1]->req_status.MPI_ERROR;
        ompi_request_free(&reqs[0]);
        ompi_request_free(&reqs[1]);
        if (rc != MPI_SUCCESS) {
            return rc;
        }
    }
    return OMPI_SUCCESS;
}

static int dfccl_oob_allgather(const void *sendbuf, void *recvbuf, size_t bytes, void *arg)
{
    mca_coll_dfccl_module_t *m = arg;

    return dfccl_p2p_allgather(sendbuf, recvbuf, bytes, m->comm) == OMPI_SUCCESS ? 0 : -1;
}

/* 1 on every rank if `ok` is nonzero on every rank. */
static int dfccl_agree(mca_coll_dfccl_module_t *m, int ok)
{
    int n = ompi_comm_size(m->comm), all = 1;
    int *oks = malloc((size_t)n * sizeof(int));

    if (oks == NULL || dfccl_p2p_allgather(&ok, oks, sizeof(int), m->comm) != OMPI_SUCCESS) {
        free(oks);
        return 0; /* MPI itself failed: the job is going down anyway */
    }
    for (int i = 0; i < n; i++) {
        all &= oks[i] != 0;
    }
    free(oks);
    return all;
}

static int dfccl_module_enable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm)
{
    mca_coll_dfccl_module_t *m     = (mca_coll_dfccl_module_t *)module;
    mca_coll_dfccl_component_t *cm = &mca_coll_dfccl_component;
    char name[MPI_MAX_OBJECT_NAME + 32];
    dfccl_status_t st;
    int ok;

    m->comm = comm;
    DFCCL_SAVE_PREV(allreduce);
    DFCCL_SAVE_PREV(allgather);
    DFCCL_SAVE_PREV(reduce_scatter_block);
    DFCCL_SAVE_PREV(reduce_scatter);
    DFCCL_SAVE_PREV(reduce);
    DFCCL_SAVE_PREV(bcast);
    DFCCL_SAVE_PREV(iallreduce);
    DFCCL_SAVE_PREV(iallgather);
    DFCCL_SAVE_PREV(ireduce_scatter_block);
    DFCCL_SAVE_PREV(ireduce_scatter);
    DFCCL_SAVE_PREV(ireduce);
    DFCCL_SAVE_PREV(ibcast);
    DFCCL_SAVE_PREV(allreduce_init);
    DFCCL_SAVE_PREV(allgather_init);
    DFCCL_SAVE_PREV(reduce_scatter_block_init);
    DFCCL_SAVE_PREV(reduce_scatter_init);
    DFCCL_SAVE_PREV(reduce_init);
    DFCCL_SAVE_PREV(bcast_init);
    if (m->previous_allgather == NULL || m->previous_allreduce == NULL ||
        m->previous_bcast == NULL || m->previous_reduce == NULL) {
        mca_coll_dfccl_warn("communicator %s has no blocking allgather/allreduce/bcast/reduce "
                            "below dfccl; add basic or tuned to --mca coll", comm->c_name);
        return OMPI_ERROR;
    }
    if (comm == &ompi_mpi_comm_world.comm) {
        cm->world_rank = ompi_comm_rank(comm);
    } else if (cm->world_rank < 0) {
        cm->world_rank = ompi_comm_rank(&ompi_mpi_comm_world.comm);
    }
    cm->used = 1;
#ifndef DFCCL_HAVE_CUDART
    if (cm->backend == DFCCL_BACKEND_AUTO) {
        /* auto without CUDA: off on every rank alike, nothing to agree on */
        dfccl_ctx_get();
        return OMPI_SUCCESS;
    }
#endif

    /* Agree that every rank has a context before the group allgathers. */
    ok = dfccl_ctx_get();
    if (!dfccl_agree(m, ok)) {
        if (ok) {
            MCA_COLL_DFCCL_VERBOSE(1, "communicator %s: dfccl is off on some rank; collectives "
                                   "take the previous module", comm->c_name);
        }
        return OMPI_SUCCESS;
    }
    snprintf(name, sizeof(name), "%s(cid %u)", comm->c_name[0] ? comm->c_name : "comm",
             ompi_comm_get_cid(comm));
    st = dfcclGroupCreate(cm->ctx, ompi_comm_size(comm), ompi_comm_rank(comm),
                          dfccl_oob_allgather, m, name, &m->group);
    if (st != DFCCL_OK) {
        m->group = NULL;
        mca_coll_dfccl_warn("could not create the dfccl group of communicator %s: %s (%s); "
                            "its collectives take the other coll components", name,
                            dfcclGetErrorString(st), dfcclGetLastErrorMessage());
    }
    if (!dfccl_agree(m, m->group != NULL)) {
        if (m->group != NULL) {
            dfcclGroupDestroy(m->group);
            m->group = NULL;
        }
        return OMPI_SUCCESS;
    }
    MCA_COLL_DFCCL_VERBOSE(2, "communicator %s: dfccl group of %d ranks", name,
                           ompi_comm_size(comm));
    return OMPI_SUCCESS;
}

mca_coll_base_module_t *mca_coll_dfccl_comm_query(struct ompi_communicator_t *comm,
                                                  int *priority)
{
    mca_coll_dfccl_component_t *cm = &mca_coll_dfccl_component;
    mca_coll_dfccl_module_t *m;

    *priority = 0;
    if (OMPI_COMM_IS_INTER(comm) || ompi_comm_size(comm) < 2 || cm->priority < 0) {
        return NULL;
    }
    m = OBJ_NEW(mca_coll_dfccl_module_t);
    if (m == NULL) {
        return NULL;
    }
    *priority                      = cm->priority;
    m->super.coll_module_enable    = dfccl_module_enable;
    m->super.coll_allreduce        = mca_coll_dfccl_allreduce;
    m->super.coll_iallreduce       = mca_coll_dfccl_iallreduce;
    m->super.coll_allreduce_init   = mca_coll_dfccl_allreduce_init;
    m->super.coll_allgather        = mca_coll_dfccl_allgather;
    m->super.coll_iallgather       = mca_coll_dfccl_iallgather;
    m->super.coll_allgather_init   = mca_coll_dfccl_allgather_init;
    m->super.coll_reduce_scatter_block      = mca_coll_dfccl_reduce_scatter_block;
    m->super.coll_ireduce_scatter_block     = mca_coll_dfccl_ireduce_scatter_block;
    m->super.coll_reduce_scatter_block_init = mca_coll_dfccl_reduce_scatter_block_init;
    m->super.coll_reduce_scatter      = mca_coll_dfccl_reduce_scatter;
    m->super.coll_ireduce_scatter     = mca_coll_dfccl_ireduce_scatter;
    m->super.coll_reduce_scatter_init = mca_coll_dfccl_reduce_scatter_init;
    m->super.coll_reduce           = mca_coll_dfccl_reduce;
    m->super.coll_ireduce          = mca_coll_dfccl_ireduce;
    m->super.coll_reduce_init      = mca_coll_dfccl_reduce_init;
    m->super.coll_bcast            = mca_coll_dfccl_bcast;
    m->super.coll_ibcast           = mca_coll_dfccl_ibcast;
    m->super.coll_bcast_init       = mca_coll_dfccl_bcast_init;
    return &m->super;
}
