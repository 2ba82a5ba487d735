/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Binding to a GPU, and setting up a communicator's dfccl group, both
 * without blocking.
 *
 * Binding. The process's dfccl context (its daemon) is created at the
 * first call that dfccl takes, on the GPU that holds that call's first
 * device buffer (the calling thread's current GPU for managed and
 * page-locked memory), not at MPI_Init: mpi4py initializes MPI when it is
 * imported, and HPC codes choose their GPU from the node-local rank after
 * MPI_Init. The calling thread's current device is left as it was. Buffers
 * on any other GPU are staged through temporaries on this one
 * (coll_dfccl_run.c), so a process that uses two GPUs gets correct results,
 * with copies for the second.
 *
 * Setup. A communicator's group is set up at the first call that dfccl
 * takes on it: dfcclGroupBoot* gives one to three exchanges, each an
 * allgather that this file posts as point-to-point messages (a send to and
 * a receive from every other rank) and that opal_progress completes; the
 * calls made meanwhile wait in the communicator's queue. The first call
 * dfccl takes on a communicator is the same call on every rank (MPI orders
 * a communicator's collectives, and routing depends only on what is the
 * same everywhere), so no rank waits for an exchange that a peer would make
 * only inside a different collective, whatever order ranks start their
 * communicators in. A rank whose context could not be created still takes
 * part, so that every rank learns the same outcome: a group everywhere, or
 * the previous module everywhere.
 */
#include "coll_dfccl.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "opal/runtime/opal_progress.h"
#include "ompi/mca/coll/base/coll_tags.h"
#include "ompi/mca/pml/pml.h"

#ifdef DFCCL_HAVE_CUDART
#include <cuda_runtime_api.h>
#endif

/* A tag no other component uses; the exchanges of one communicator follow
 * each other, and MPI keeps messages of one sender and tag in order. */
#define DFCCL_SETUP_TAG (MCA_COLL_BASE_TAG_HCOLL_END + 1)

/* the setup list: its own lock, taken after a module's and never before */
static pthread_mutex_t dfccl_setup_lock = PTHREAD_MUTEX_INITIALIZER;

void mca_coll_dfccl_bind(int device)
{
    mca_coll_dfccl_component_t *cm = &mca_coll_dfccl_component;
    dfccl_config_t cfg;
    dfccl_status_t st;

    if (__atomic_load_n(&cm->bound, __ATOMIC_ACQUIRE)) {
        return;
    }
    pthread_mutex_lock(&cm->lock);
    if (cm->bound) {
        pthread_mutex_unlock(&cm->lock);
        return;
    }
    cfg         = cm->cfg;
    cfg.backend = cm->mode == MCA_COLL_DFCCL_MODE_CUDA ? DFCCL_BACKEND_CUDA : DFCCL_BACKEND_HOST;
#ifdef DFCCL_HAVE_CUDART
    if (cm->mode == MCA_COLL_DFCCL_MODE_CUDA) {
        int prev = mca_coll_dfccl_current_device();

        cm->device = device >= 0 ? device : prev;
        if (cm->device != prev && cudaSetDevice(cm->device) != cudaSuccess) {
            cudaGetLastError();
        }
        st = dfcclInit(&cfg, &cm->ctx);
        if (cm->device != prev) {
            cudaSetDevice(prev);
        }
    } else
#endif
    {
        (void)device;
        st = dfcclInit(&cfg, &cm->ctx);
    }
    if (st != DFCCL_OK) {
        /* dfccl said why; every communicator's setup now fails on all ranks */
        cm->ctx = NULL;
        MCA_COLL_DFCCL_VERBOSE(1, "rank %d: dfccl could not start (%s); collectives take the "
                               "other coll components",
                               ompi_comm_rank(&ompi_mpi_comm_world.comm),
                               dfcclGetErrorString(st));
    } else if (cm->mode == MCA_COLL_DFCCL_MODE_CUDA) {
        MCA_COLL_DFCCL_VERBOSE(1, "rank %d: dfccl started on GPU %d",
                               ompi_comm_rank(&ompi_mpi_comm_world.comm), cm->device);
    } else {
        MCA_COLL_DFCCL_VERBOSE(1, "rank %d: dfccl started on the host backend",
                               ompi_comm_rank(&ompi_mpi_comm_world.comm));
    }
    __atomic_store_n(&cm->bound, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&cm->lock);
    mca_coll_dfccl_progress_need();
}

/* ---- the exchanges ------------------------------------------------------------ */

static void dfccl_setup_free_reqs(mca_coll_dfccl_module_t *m)
{
    for (int i = 0; i < m->boot_nreqs; i++) {
        if (m->boot_reqs[i] != MPI_REQUEST_NULL) {
            ompi_request_free(&m->boot_reqs[i]);
        }
    }
    free(m->boot_reqs);
    m->boot_reqs  = NULL;
    m->boot_nreqs = 0;
}

/* Post the current exchange: our block to every other rank, theirs from
 * every other rank, into boot_all in rank order. */
static int dfccl_setup_post(mca_coll_dfccl_module_t *m)
{
    struct ompi_communicator_t *comm = m->comm;
    int n = ompi_comm_size(comm), me = ompi_comm_rank(comm), rc = OMPI_SUCCESS;
    const void *send;
    size_t bytes;
    char *all;

    if (dfcclGroupBootExchange(m->boot, &send, &bytes) != DFCCL_OK) {
        return OMPI_ERROR;
    }
    all = realloc(m->boot_all, (size_t)n * bytes);
    m->boot_reqs = calloc((size_t)(2 * n), sizeof(*m->boot_reqs));
    if (all == NULL || m->boot_reqs == NULL) {
        m->boot_all = all != NULL ? all : m->boot_all;
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    m->boot_all   = all;
    m->boot_bytes = bytes;
    memcpy(all + (size_t)me * bytes, send, bytes);
    for (int k = 1; k < n && rc == OMPI_SUCCESS; k++) {
        int from = (me - k + n) % n, to = (me + k) % n;

        rc = MCA_PML_CALL(irecv(all + (size_t)from * bytes, bytes, MPI_BYTE, from,
                                DFCCL_SETUP_TAG, comm, &m->boot_reqs[m->boot_nreqs]));
        if (rc == OMPI_SUCCESS) {
            m->boot_nreqs++;
            rc = MCA_PML_CALL(isend(send, bytes, MPI_BYTE, to, DFCCL_SETUP_TAG,
                                    MCA_PML_BASE_SEND_STANDARD, comm,
                                    &m->boot_reqs[m->boot_nreqs]));
            if (rc == OMPI_SUCCESS) {
                m->boot_nreqs++;
            }
        }
    }
    return rc;
}

static double dfccl_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* why: the component's own reason (printed), or NULL where dfccl printed it */
static void dfccl_setup_end(mca_coll_dfccl_module_t *m, int ready, const char *why)
{
    char name[MPI_MAX_OBJECT_NAME + 32];

    dfcclGroupBootFree(m->boot);
    m->boot = NULL;
    free(m->boot_all);
    m->boot_all = NULL;
    __atomic_store_n(&m->setup, ready ? MCA_COLL_DFCCL_SETUP_READY : MCA_COLL_DFCCL_SETUP_FAILED,
                     __ATOMIC_RELEASE);
    mca_coll_dfccl_comm_name(m->comm, name, sizeof(name));
    if (ready) {
        MCA_COLL_DFCCL_VERBOSE(2, "communicator %s: dfccl group of %d ranks", name,
                               ompi_comm_size(m->comm));
    } else if (m->setup_late) {
        /* the calls that waited for it fail with this message */
        m->setup_why = strdup(why);
    } else if (why != NULL) {
        mca_coll_dfccl_warn("communicator %s: dfccl could not set up its group (%s); its "
                            "collectives take the other coll components", name, why);
    } else {
        MCA_COLL_DFCCL_VERBOSE(1, "communicator %s: its collectives take the other coll "
                               "components", name);
    }
}

/*
 * A setup waits for every rank to make the communicator's first call that
 * dfccl takes. A rank that never makes it (an incorrect program, a rank
 * gone) would leave the others waiting: past coll_dfccl_timeout the setup
 * ends, and the calls that waited for it fail with a message naming the
 * ranks that did not join. The receives still posted are cancelled.
 */
static int dfccl_setup_late(mca_coll_dfccl_module_t *m)
{
    const dfccl_config_t *cfg = &mca_coll_dfccl_component.cfg;
    double waited = dfccl_now() - m->setup_t0;
    int late = cfg->timeout_s > 0 && waited >= cfg->timeout_s;
    int warn = cfg->warn_s > 0 && waited >= m->setup_warn_at;
    int len, n = ompi_comm_size(m->comm), me = ompi_comm_rank(m->comm), missing = 0;
    char who[256], name[MPI_MAX_OBJECT_NAME + 32], why[512];

    if (!late && !warn) {
        return 0;
    }
    len = 0;
    /* requests alternate receive (from me - k), send (to me + k) */
    for (int i = 0; i < m->boot_nreqs; i += 2) {
        int from = (me - (i / 2 + 1) + n) % n;
        if (!REQUEST_COMPLETE(m->boot_reqs[i]) && len < (int)sizeof(who) - 16) {
            len += snprintf(who + len, sizeof(who) - (size_t)len, "%s%d", missing++ ? "," : "",
                            from);
        }
    }
    if (missing == 0) {
        return 0; /* every exchange has arrived: the setup is not waiting on a rank */
    }
    if (!late) {
        /* slow is not failed: say who is missing, then wait twice as long */
        mca_coll_dfccl_warn("communicator %s: rank %d of %d has waited %.0f s for rank%s %s "
                            "to make the communicator's first call that dfccl runs (every "
                            "rank must call the same collectives on it); still waiting",
                            mca_coll_dfccl_comm_name(m->comm, name, sizeof(name)), me, n,
                            waited, missing > 1 ? "s" : "", who);
        m->setup_warn_at = 2 * (m->setup_warn_at > 0 ? m->setup_warn_at : cfg->warn_s);
        return 0;
    }
    snprintf(why, sizeof(why), "rank%s %s did not join within %g s (coll_dfccl_timeout): "
             "they never made this call, or are gone", missing > 1 ? "s" : "", who,
             cfg->timeout_s);
    for (int i = 0; i < m->boot_nreqs; i++) {
        if (!REQUEST_COMPLETE(m->boot_reqs[i])) {
            ompi_request_cancel(m->boot_reqs[i]);
        }
    }
    dfccl_setup_free_reqs(m);
    m->setup_late = 1;
    dfccl_setup_end(m, 0, why);
    return 1;
}

/* One step of the setup when its exchange completed. Module lock held.
 * Returns 1 when the setup ended. */
static int dfccl_setup_advance(mca_coll_dfccl_module_t *m)
{
    dfccl_group_t group = NULL;
    dfccl_status_t st;
    int rc = MPI_SUCCESS;

    if (m->setup != MCA_COLL_DFCCL_SETUP_RUNNING) {
        return 0;
    }
    for (int i = 0; i < m->boot_nreqs; i++) {
        if (!REQUEST_COMPLETE(m->boot_reqs[i])) {
            return dfccl_setup_late(m);
        }
        if (m->boot_reqs[i]->req_status.MPI_ERROR != MPI_SUCCESS) {
            rc = m->boot_reqs[i]->req_status.MPI_ERROR;
        }
    }
    dfccl_setup_free_reqs(m);
    if (rc != MPI_SUCCESS) {
        dfccl_setup_end(m, 0, "an exchange between its ranks failed");
        return 1;
    }
    st = dfcclGroupBootStep(m->boot, m->boot_all, &group);
    if (st == DFCCL_INPROGRESS) {
        if (dfccl_setup_post(m) != OMPI_SUCCESS) {
            dfccl_setup_free_reqs(m);
            dfccl_setup_end(m, 0, "posting an exchange failed");
            return 1;
        }
        return 0;
    }
    if (st == DFCCL_OK) {
        m->group = group;
    }
    dfccl_setup_end(m, st == DFCCL_OK, NULL);
    return 1;
}

void mca_coll_dfccl_setup_start(mca_coll_dfccl_module_t *m)
{
    mca_coll_dfccl_component_t *cm = &mca_coll_dfccl_component;
    struct ompi_communicator_t *comm = m->comm;
    char name[MPI_MAX_OBJECT_NAME + 32];
    dfccl_status_t st;

    if (m->setup != MCA_COLL_DFCCL_SETUP_NONE) {
        return;
    }
    mca_coll_dfccl_comm_name(comm, name, sizeof(name));
    st = dfcclGroupBootStart(cm->ctx, ompi_comm_size(comm), ompi_comm_rank(comm), name,
                             &m->boot);
    if (st != DFCCL_OK) {
        /* only out of host memory: the job is going down */
        m->boot = NULL;
        dfccl_setup_end(m, 0, NULL);
        return;
    }
    m->setup         = MCA_COLL_DFCCL_SETUP_RUNNING;
    m->setup_t0      = dfccl_now();
    m->setup_warn_at = cm->cfg.warn_s;
    if (dfccl_setup_post(m) != OMPI_SUCCESS) {
        dfccl_setup_free_reqs(m);
        dfccl_setup_end(m, 0, "posting an exchange failed");
        return;
    }
    pthread_mutex_lock(&dfccl_setup_lock);
    m->setup_next  = cm->setup_head;
    cm->setup_head = m;
    __atomic_add_fetch(&cm->nsetup, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&dfccl_setup_lock);
    mca_coll_dfccl_progress_need();
}

/* Start the queued calls of a communicator whose setup ended, in order;
 * one thread at a time. */
void mca_coll_dfccl_drain(mca_coll_dfccl_module_t *m)
{
    mca_coll_dfccl_req_t *req;

    pthread_mutex_lock(&m->lock);
    if (m->draining || m->setup == MCA_COLL_DFCCL_SETUP_RUNNING) {
        pthread_mutex_unlock(&m->lock);
        return;
    }
    m->draining = 1;
    while ((req = m->pend_head) != NULL) {
        m->pend_head = req->pend_next;
        if (m->pend_head == NULL) {
            m->pend_tail = NULL;
        }
        pthread_mutex_unlock(&m->lock);
        mca_coll_dfccl_start_queued(m, req);
        pthread_mutex_lock(&m->lock);
    }
    m->draining = 0;
    pthread_mutex_unlock(&m->lock);
}

int mca_coll_dfccl_setup_progress(void)
{
    mca_coll_dfccl_component_t *cm = &mca_coll_dfccl_component;
    mca_coll_dfccl_module_t *ended[16], **pp, *m;
    int nended = 0, n = 0;

    if (__atomic_load_n(&cm->nsetup, __ATOMIC_ACQUIRE) > 0 &&
        pthread_mutex_trylock(&dfccl_setup_lock) == 0) {
        for (pp = &cm->setup_head; (m = *pp) != NULL;) {
            int done = 0;
            if (nended < 16 && pthread_mutex_trylock(&m->lock) == 0) {
                done = dfccl_setup_advance(m);
                pthread_mutex_unlock(&m->lock);
            }
            if (done) {
                *pp = m->setup_next;
                __atomic_sub_fetch(&cm->nsetup, 1, __ATOMIC_RELEASE);
                ended[nended++] = m;
            } else {
                pp = &m->setup_next;
            }
        }
        pthread_mutex_unlock(&dfccl_setup_lock);
    }
    for (int i = 0; i < nended; i++) {
        mca_coll_dfccl_drain(ended[i]);
        n++;
    }
    return n;
}

void mca_coll_dfccl_setup_finish(mca_coll_dfccl_module_t *m)
{
    struct timespec t0, t;

    /* A setup is started by a call every rank makes, and the queued calls
     * complete only after it: by the time the communicator is freed (every
     * request completed) it has ended. This bounds what is left if not. */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (__atomic_load_n(&m->setup, __ATOMIC_ACQUIRE) == MCA_COLL_DFCCL_SETUP_RUNNING) {
        opal_progress();
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > 30) {
            break;
        }
    }
    pthread_mutex_lock(&dfccl_setup_lock);
    for (mca_coll_dfccl_module_t **pp = &mca_coll_dfccl_component.setup_head; *pp != NULL;
         pp = &(*pp)->setup_next) {
        if (*pp == m) {
            *pp = m->setup_next;
            __atomic_sub_fetch(&mca_coll_dfccl_component.nsetup, 1, __ATOMIC_RELEASE);
            break;
        }
    }
    pthread_mutex_unlock(&dfccl_setup_lock);
    if (m->setup == MCA_COLL_DFCCL_SETUP_RUNNING) {
        for (int i = 0; i < m->boot_nreqs; i++) {
            if (!REQUEST_COMPLETE(m->boot_reqs[i])) {
                ompi_request_cancel(m->boot_reqs[i]);
            }
        }
        dfccl_setup_free_reqs(m);
        dfcclGroupBootFree(m->boot);
        m->boot = NULL;
        free(m->boot_all);
        m->boot_all = NULL;
        m->setup    = MCA_COLL_DFCCL_SETUP_FAILED;
    }
}
