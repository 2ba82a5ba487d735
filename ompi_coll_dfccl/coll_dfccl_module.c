/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The per-communicator module: selection, the previous module's functions,
 * destruction, and the process's dfccl state at MPI_Finalize.
 *
 * `enable` does no communication and creates nothing on the GPU: it keeps,
 * for every collective and form, the function that the modules below dfccl
 * installed, and decides once per process what dfccl may take (the
 * backend). The communicator's dfccl group is set up at its first call
 * that dfccl takes (coll_dfccl_bootstrap.c), so that the program may choose
 * its GPU after MPI_Init. A collective that no module below provides is not
 * taken either: MPI then reports it as it would without dfccl.
 */
#include "coll_dfccl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef DFCCL_STAGE_TIMES
#include <time.h>   /* clock_gettime: the diagnostic stage times */
#include <unistd.h> /* getpid */
#endif

#include "opal/mca/base/mca_base_var.h"
#include "opal/runtime/opal_progress.h"
#include "ompi/mca/coll/base/base.h"

#ifdef DFCCL_HAVE_CUDART
#include <cuda_runtime_api.h>
#endif

/* Where a collective's function of one form lives: in the communicator's
 * table (the previous module's, with its module) and in ours. */
typedef struct {
    size_t comm_fn, comm_module, module_fn;
    void (*ours)(void);
} dfccl_slot_t;

#define DFCCL_SLOT(_api, _ours)                                                            \
    {                                                                                      \
        offsetof(mca_coll_base_comm_coll_t, coll_##_api),                                  \
            offsetof(mca_coll_base_comm_coll_t, coll_##_api##_module),                     \
            offsetof(mca_coll_base_module_t, coll_##_api), (void (*)(void))(_ours)         \
    }
#define DFCCL_SLOTS(_api)                                                                  \
    {                                                                                      \
        DFCCL_SLOT(_api, mca_coll_dfccl_##_api), DFCCL_SLOT(i##_api, mca_coll_dfccl_i##_api), \
            DFCCL_SLOT(_api##_init, mca_coll_dfccl_##_api##_init)                          \
    }

static const dfccl_slot_t dfccl_slots[MCA_COLL_DFCCL_NCOLLS][MCA_COLL_DFCCL_NFORMS] = {
    [MCA_COLL_DFCCL_ALLREDUCE]            = DFCCL_SLOTS(allreduce),
    [MCA_COLL_DFCCL_REDUCE]               = DFCCL_SLOTS(reduce),
    [MCA_COLL_DFCCL_REDUCE_LOCAL]         = {DFCCL_SLOT(reduce_local,
                                                        mca_coll_dfccl_reduce_local)},
    [MCA_COLL_DFCCL_SCAN]                 = DFCCL_SLOTS(scan),
    [MCA_COLL_DFCCL_EXSCAN]               = DFCCL_SLOTS(exscan),
    [MCA_COLL_DFCCL_ALLGATHER]            = DFCCL_SLOTS(allgather),
    [MCA_COLL_DFCCL_ALLGATHERV]           = DFCCL_SLOTS(allgatherv),
    [MCA_COLL_DFCCL_GATHER]               = DFCCL_SLOTS(gather),
    [MCA_COLL_DFCCL_GATHERV]              = DFCCL_SLOTS(gatherv),
    [MCA_COLL_DFCCL_REDUCE_SCATTER_BLOCK] = DFCCL_SLOTS(reduce_scatter_block),
    [MCA_COLL_DFCCL_REDUCE_SCATTER]       = DFCCL_SLOTS(reduce_scatter),
    [MCA_COLL_DFCCL_SCATTER]              = DFCCL_SLOTS(scatter),
    [MCA_COLL_DFCCL_SCATTERV]             = DFCCL_SLOTS(scatterv),
    [MCA_COLL_DFCCL_BCAST]                = DFCCL_SLOTS(bcast),
    [MCA_COLL_DFCCL_BARRIER]              = DFCCL_SLOTS(barrier),
    [MCA_COLL_DFCCL_ALLTOALL]             = DFCCL_SLOTS(alltoall),
    [MCA_COLL_DFCCL_ALLTOALLV]            = DFCCL_SLOTS(alltoallv),
    [MCA_COLL_DFCCL_ALLTOALLW]            = DFCCL_SLOTS(alltoallw),
    [MCA_COLL_DFCCL_NEIGHBOR_ALLGATHER]   = DFCCL_SLOTS(neighbor_allgather),
    [MCA_COLL_DFCCL_NEIGHBOR_ALLGATHERV]  = DFCCL_SLOTS(neighbor_allgatherv),
    [MCA_COLL_DFCCL_NEIGHBOR_ALLTOALL]    = DFCCL_SLOTS(neighbor_alltoall),
    [MCA_COLL_DFCCL_NEIGHBOR_ALLTOALLV]   = DFCCL_SLOTS(neighbor_alltoallv),
    [MCA_COLL_DFCCL_NEIGHBOR_ALLTOALLW]   = DFCCL_SLOTS(neighbor_alltoallw),
};

typedef void (*dfccl_fn_t)(void);
#define DFCCL_AT(_base, _off, _type) (*(_type *)((char *)(_base) + (_off)))

const char *mca_coll_dfccl_comm_name(struct ompi_communicator_t *comm, char *buf, size_t len)
{
    snprintf(buf, len, "%s (cid %u)", comm->c_name[0] != '\0' ? comm->c_name : "unnamed",
             ompi_comm_get_cid(comm));
    return buf;
}

/* ---- what dfccl may take in this process ------------------------------------------- */

static void dfccl_mode_init(void)
{
    mca_coll_dfccl_component_t *cm = &mca_coll_dfccl_component;

    pthread_mutex_lock(&cm->lock);
    if (cm->mode_known) {
        pthread_mutex_unlock(&cm->lock);
        return;
    }
    cm->gpus = 0;
#ifdef DFCCL_HAVE_CUDART
    /* the driver only: no context is created on any GPU */
    if (cudaGetDeviceCount(&cm->gpus) != cudaSuccess) {
        cudaGetLastError();
        cm->gpus = 0;
    }
#endif
    cm->mode = MCA_COLL_DFCCL_MODE_OFF;
    if (!cm->cfg_ok) {
        /* the configuration's message was printed at registration */
    } else if (cm->cfg.backend == DFCCL_BACKEND_HOST) {
        cm->mode = MCA_COLL_DFCCL_MODE_HOST;
    } else if (cm->gpus > 0) {
        cm->mode = MCA_COLL_DFCCL_MODE_CUDA;
    } else if (cm->cfg.backend == DFCCL_BACKEND_CUDA) {
        mca_coll_dfccl_warn("coll_dfccl_backend is cuda, but no GPU is visible (no device, "
                            "no driver, or CUDA_VISIBLE_DEVICES hides them): every collective "
                            "takes the other coll components");
    } else {
        MCA_COLL_DFCCL_VERBOSE(1, "%s", "no GPU visible: dfccl is off and every collective "
                               "takes the other coll components (coll_dfccl_backend=host runs "
                               "host buffers on dfccl)");
    }
    cm->mode_known = 1;
    pthread_mutex_unlock(&cm->lock);
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
                "fallbacks %llu staged %llu\n", ompi_comm_rank(&ompi_mpi_comm_world.comm),
                (unsigned long long)stats.collectives, (unsigned long long)stats.preemptions,
                (unsigned long long)stats.quits, (unsigned long long)cm->fallbacks,
                (unsigned long long)cm->staged);
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
    cm->bound      = 0;
    cm->used       = 0;
    cm->mode_known = 0;
}

/* ---- module: selection, enable, destruction ------------------------------------------ */

static void dfccl_module_construct(mca_coll_dfccl_module_t *m)
{
    size_t off = offsetof(mca_coll_dfccl_module_t, comm);

    memset((char *)m + off, 0, sizeof(*m) - off);
    pthread_mutex_init(&m->lock, NULL);
}

static void dfccl_module_destruct(mca_coll_dfccl_module_t *m)
{
    mca_coll_dfccl_setup_finish(m);
    /* Runs left by a communicator freed with requests pending: drive them. */
    for (int spins = 0; m->inflight > 0 && spins < 10000000; spins++) {
        opal_progress();
    }
    mca_coll_dfccl_release_entries(m);
    free(m->setup_why);
    for (int c = 0; c < MCA_COLL_DFCCL_NCOLLS; c++) {
        for (int f = 0; f < MCA_COLL_DFCCL_NFORMS; f++) {
            if (m->prev[c][f].module != NULL) {
                OBJ_RELEASE(m->prev[c][f].module);
                m->prev[c][f].module = NULL;
            }
        }
    }
    pthread_mutex_destroy(&m->lock);
}

OBJ_CLASS_INSTANCE(mca_coll_dfccl_module_t, mca_coll_base_module_t, dfccl_module_construct,
                   dfccl_module_destruct);

int mca_coll_dfccl_init_query(bool enable_progress_threads, bool enable_mpi_threads)
{
    return OMPI_SUCCESS;
}

static int dfccl_module_enable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm)
{
    mca_coll_dfccl_module_t *m = MCA_COLL_DFCCL_MODULE(module);

    m->comm = comm;
    for (int c = 0; c < MCA_COLL_DFCCL_NCOLLS; c++) {
        for (int f = 0; f < MCA_COLL_DFCCL_NFORMS; f++) {
            const dfccl_slot_t *s = &dfccl_slots[c][f];
            void (*fn)(void);
            mca_coll_base_module_t *prev;

            if (s->ours == NULL) {
                continue;
            }
            /* what the modules below installed; none: we take none either */
            fn   = DFCCL_AT(comm->c_coll, s->comm_fn, dfccl_fn_t);
            prev = DFCCL_AT(comm->c_coll, s->comm_module, mca_coll_base_module_t *);
            if (fn == NULL || prev == NULL) {
                DFCCL_AT(module, s->module_fn, dfccl_fn_t) = NULL;
                continue;
            }
            m->prev[c][f].fn     = fn;
            m->prev[c][f].module = prev;
            OBJ_RETAIN(prev);
        }
    }
    dfccl_mode_init();
    mca_coll_dfccl_component.used = 1;
    return OMPI_SUCCESS;
}

/* coll/self's priority: on one-process communicators it takes every
 * collective (MPI_Reduce_local too, through MPI_COMM_SELF) on host memory. */
static int dfccl_self_priority(void)
{
    const int *value = NULL;
    int idx          = mca_base_var_find("ompi", "coll", "self", "priority");

    if (idx < 0 || mca_base_var_get_value(idx, &value, NULL, NULL) != OPAL_SUCCESS ||
        value == NULL) {
        return 75;
    }
    return *value;
}

mca_coll_base_module_t *mca_coll_dfccl_comm_query(struct ompi_communicator_t *comm,
                                                  int *priority)
{
    mca_coll_dfccl_component_t *cm = &mca_coll_dfccl_component;
    mca_coll_dfccl_module_t *m;

    *priority = 0;
    if (OMPI_COMM_IS_INTER(comm) || cm->priority < 0) {
        return NULL;
    }
    m = OBJ_NEW(mca_coll_dfccl_module_t);
    if (m == NULL) {
        return NULL;
    }
    *priority = cm->priority;
    if (ompi_comm_size(comm) == 1 && *priority <= dfccl_self_priority()) {
        /* above coll/self, so that device buffers are staged for it */
        *priority = dfccl_self_priority() + 1;
    }
    m->super.coll_module_enable = dfccl_module_enable;
    for (int c = 0; c < MCA_COLL_DFCCL_NCOLLS; c++) {
        for (int f = 0; f < MCA_COLL_DFCCL_NFORMS; f++) {
            const dfccl_slot_t *s = &dfccl_slots[c][f];
            if (s->ours != NULL) {
                DFCCL_AT(&m->super, s->module_fn, dfccl_fn_t) = s->ours;
            }
        }
    }
    return &m->super;
}
