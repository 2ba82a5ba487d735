/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The component object Open MPI loads from mca_coll_dfccl.so, and its MCA
 * variables. Every dfccl tunable (dfccl_config_t) is one MCA variable here:
 * its default is what dfcclConfigInit returns, so the DFCCL_* environment
 * variables keep working, and an MCA value (--mca coll_dfccl_x or
 * OMPI_MCA_coll_dfccl_x) overrides both. `ompi_info --param coll dfccl
 * --level 9` lists them all. At close (MPI_Finalize) the component prints
 * its statistics line when coll_dfccl_verbose >= 1 and destroys the dfccl
 * rank context.
 */
#include "coll_dfccl.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "opal/mca/base/mca_base_var.h"
#include "opal/util/output.h"
#include "ompi/mca/coll/base/base.h"

static int dfccl_register(void);
static int dfccl_open(void);
static int dfccl_close(void);

mca_coll_dfccl_component_t mca_coll_dfccl_component = {
    .super = {
        .collm_version = {
            MCA_COLL_BASE_VERSION_2_0_0,
            .mca_component_name = "dfccl",
            MCA_BASE_MAKE_VERSION(component, DFCCL_VERSION_MAJOR, DFCCL_VERSION_MINOR,
                                  DFCCL_VERSION_PATCH),
            .mca_open_component = dfccl_open,
            .mca_close_component = dfccl_close,
            .mca_register_component_params = dfccl_register,
        },
        .collm_data = {
            MCA_BASE_METADATA_PARAM_NONE
        },
        .collm_init_query = mca_coll_dfccl_init_query,
        .collm_comm_query = mca_coll_dfccl_comm_query,
    },
    .priority  = 40,
    .verbose   = 0,
    .instances = 2,
    .sync_default_stream = -1,
    .device    = -1,
    .lock      = PTHREAD_MUTEX_INITIALIZER,
    .done_lock = PTHREAD_MUTEX_INITIALIZER,
};

static const char *const dfccl_coll_names[MCA_COLL_DFCCL_NCOLLS] = {
    [MCA_COLL_DFCCL_ALLREDUCE] = "MPI_Allreduce",
    [MCA_COLL_DFCCL_REDUCE] = "MPI_Reduce",
    [MCA_COLL_DFCCL_REDUCE_LOCAL] = "MPI_Reduce_local",
    [MCA_COLL_DFCCL_SCAN] = "MPI_Scan",
    [MCA_COLL_DFCCL_EXSCAN] = "MPI_Exscan",
    [MCA_COLL_DFCCL_ALLGATHER] = "MPI_Allgather",
    [MCA_COLL_DFCCL_ALLGATHERV] = "MPI_Allgatherv",
    [MCA_COLL_DFCCL_GATHER] = "MPI_Gather",
    [MCA_COLL_DFCCL_GATHERV] = "MPI_Gatherv",
    [MCA_COLL_DFCCL_REDUCE_SCATTER_BLOCK] = "MPI_Reduce_scatter_block",
    [MCA_COLL_DFCCL_REDUCE_SCATTER] = "MPI_Reduce_scatter",
    [MCA_COLL_DFCCL_SCATTER] = "MPI_Scatter",
    [MCA_COLL_DFCCL_SCATTERV] = "MPI_Scatterv",
    [MCA_COLL_DFCCL_BCAST] = "MPI_Bcast",
    [MCA_COLL_DFCCL_BARRIER] = "MPI_Barrier",
    [MCA_COLL_DFCCL_ALLTOALL] = "MPI_Alltoall",
    [MCA_COLL_DFCCL_ALLTOALLV] = "MPI_Alltoallv",
    [MCA_COLL_DFCCL_ALLTOALLW] = "MPI_Alltoallw",
    [MCA_COLL_DFCCL_NEIGHBOR_ALLGATHER] = "MPI_Neighbor_allgather",
    [MCA_COLL_DFCCL_NEIGHBOR_ALLGATHERV] = "MPI_Neighbor_allgatherv",
    [MCA_COLL_DFCCL_NEIGHBOR_ALLTOALL] = "MPI_Neighbor_alltoall",
    [MCA_COLL_DFCCL_NEIGHBOR_ALLTOALLV] = "MPI_Neighbor_alltoallv",
    [MCA_COLL_DFCCL_NEIGHBOR_ALLTOALLW] = "MPI_Neighbor_alltoallw",
};

const char *mca_coll_dfccl_coll_name(mca_coll_dfccl_coll_t coll)
{
    return (unsigned)coll < MCA_COLL_DFCCL_NCOLLS ? dfccl_coll_names[coll] : "?";
}

int mca_coll_dfccl_mpi_error(dfccl_status_t st)
{
    switch (st) {
    case DFCCL_OK:
    case DFCCL_INPROGRESS:
        return MPI_SUCCESS;
    case DFCCL_ERR_INVALID_ARG:
    case DFCCL_ERR_MISMATCH: /* ranks called it with different arguments */
        return MPI_ERR_ARG;
    case DFCCL_ERR_NO_MEMORY:
        return MPI_ERR_NO_MEM;
    case DFCCL_ERR_UNSUPPORTED:
        return MPI_ERR_UNSUPPORTED_OPERATION;
    case DFCCL_ERR_INTERNAL:
        return MPI_ERR_INTERN;
    default: /* timeout, a peer gone, CUDA, transport, abort */
        return MPI_ERR_OTHER;
    }
}

void mca_coll_dfccl_log(const char *fmt, ...)
{
    char buf[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    fprintf(stderr, "coll_dfccl: %s\n", buf);
}

/* Messages users must see whatever the verbosity. */
void mca_coll_dfccl_warn(const char *fmt, ...)
{
    char buf[768];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    fprintf(stderr, "coll_dfccl: warning: %s\n", buf);
}

static int dfccl_reg(const char *name, const char *help, mca_base_var_type_t type,
                     mca_base_var_enum_t *en, void *storage)
{
    return mca_base_component_var_register(&mca_coll_dfccl_component.super.collm_version,
                                           name, help, type, en, 0, 0, OPAL_INFO_LVL_9,
                                           MCA_BASE_VAR_SCOPE_READONLY, storage);
}

/*
 * dfccl's tunables, one MCA variable each (coll_dfccl_<mca>), from its
 * table (dfcclGetTunables): defaults from dfcclConfigInit, so the DFCCL_*
 * environment variables keep working and an MCA value overrides them. A
 * field whose "backend default" is the largest value of its type is shown
 * as -1 (that is what a user types).
 */
#define DFCCL_MAX_TUNABLES 96

typedef union {
    int          i;
    unsigned int u;
    size_t       z;
    long         l;
    double       d;
} dfccl_shadow_t;

static dfccl_shadow_t dfccl_shadow[DFCCL_MAX_TUNABLES];

static int dfccl_tunable_as_long(const dfccl_tunable_t *t)
{
    return (t->type == DFCCL_TUNABLE_U32 && t->init == UINT32_MAX) ||
           (t->type == DFCCL_TUNABLE_SIZE && t->init == SIZE_MAX);
}

static int dfccl_register_tunable(const dfccl_tunable_t *t, dfccl_shadow_t *v,
                                  const dfccl_config_t *c)
{
    const char *p = (const char *)c + t->offset;
    mca_base_var_type_t type;
    mca_base_var_enum_t *en = NULL;
    char help[1536], name[64];
    int len, rc;

    len = snprintf(help, sizeof(help), "%s (%s; default %s%s; valid: %s%s)", t->doc, t->env,
                   t->def_doc, strstr(t->def_doc, " / ") != NULL ? " on host / cuda" : "",
                   t->valid, dfccl_tunable_as_long(t) ? "; -1 = the backend default" : "");
    /* the README's markup does not belong in ompi_info */
    for (int i = 0, j = 0; i <= len && i < (int)sizeof(help); i++) {
        if (help[i] != '`') {
            help[j++] = help[i];
        }
    }
    switch (t->type) {
    case DFCCL_TUNABLE_ENUM: {
        mca_base_var_enum_value_t values[16];
        int n = 0;
        for (; t->names[n] != NULL && n < 15; n++) {
            values[n].value  = n;
            values[n].string = t->names[n];
        }
        values[n].value  = 0;
        values[n].string = NULL;
        snprintf(name, sizeof(name), "coll_dfccl_%s", t->mca);
        rc = mca_base_var_enum_create(name, values, &en);
        if (rc != OPAL_SUCCESS) {
            return rc;
        }
        type = MCA_BASE_VAR_TYPE_INT;
        v->i = *(const int *)(const void *)p;
        break;
    }
    case DFCCL_TUNABLE_INT:
        type = MCA_BASE_VAR_TYPE_INT;
        v->i = *(const int *)(const void *)p;
        break;
    case DFCCL_TUNABLE_U32:
    case DFCCL_TUNABLE_SIZE: {
        uint64_t x = t->type == DFCCL_TUNABLE_U32 ? *(const uint32_t *)(const void *)p
                                                  : *(const size_t *)(const void *)p;
        if (dfccl_tunable_as_long(t)) {
            /* t->init is the type's largest value */
            type = MCA_BASE_VAR_TYPE_LONG;
            v->l = x == t->init ? -1 : (long)x;
        } else if (t->type == DFCCL_TUNABLE_U32) {
            type = MCA_BASE_VAR_TYPE_UNSIGNED_INT;
            v->u = (unsigned int)x;
        } else {
            type = MCA_BASE_VAR_TYPE_SIZE_T;
            v->z = (size_t)x;
        }
        break;
    }
    case DFCCL_TUNABLE_SECONDS:
        type = MCA_BASE_VAR_TYPE_DOUBLE;
        v->d = *(const double *)(const void *)p;
        break;
    default:
        return OPAL_SUCCESS;
    }
    rc = dfccl_reg(t->mca, help, type, en, v);
    if (en != NULL) {
        OBJ_RELEASE(en);
    }
    return rc < 0 ? rc : OPAL_SUCCESS;
}

/* The MCA value back into the configuration. */
static void dfccl_apply_tunable(const dfccl_tunable_t *t, const dfccl_shadow_t *v,
                                dfccl_config_t *c)
{
    char *p = (char *)c + t->offset;

    switch (t->type) {
    case DFCCL_TUNABLE_ENUM:
    case DFCCL_TUNABLE_INT:
        *(int *)(void *)p = v->i;
        break;
    case DFCCL_TUNABLE_U32:
        *(uint32_t *)(void *)p = dfccl_tunable_as_long(t) ? (v->l < 0 ? UINT32_MAX : (uint32_t)v->l)
                                                          : (uint32_t)v->u;
        break;
    case DFCCL_TUNABLE_SIZE:
        *(size_t *)(void *)p = dfccl_tunable_as_long(t) ? (v->l < 0 ? SIZE_MAX : (size_t)v->l)
                                                        : v->z;
        break;
    case DFCCL_TUNABLE_SECONDS:
        *(double *)(void *)p = v->d;
        break;
    default:
        break;
    }
}

static int dfccl_register(void)
{
    mca_coll_dfccl_component_t *cm = &mca_coll_dfccl_component;
    dfccl_config_t *c              = &cm->cfg;
    const dfccl_tunable_t *t;
    int n;

    /* Defaults come from dfccl itself, with DFCCL_* environment applied. */
    cm->cfg_ok = dfcclConfigInit(c) == DFCCL_OK;
    if (!cm->cfg_ok) {
        /* dfccl printed which variable and why */
        MCA_COLL_DFCCL_VERBOSE(1, "%s", "the component is off until the DFCCL_* variable is "
                               "fixed");
    }
    cm->verbose = c->verbose;

    dfccl_reg("priority", "Priority of the dfccl coll component; it must be above the "
              "components it falls back to (tuned is 30)", MCA_BASE_VAR_TYPE_INT, NULL,
              &cm->priority);
    dfccl_reg("verbose", "0: dfccl's errors and the hang watchdog only; 1: also a statistics "
              "line per rank at MPI_Finalize (collectives, preemptions, quits, fallbacks, of "
              "which staged through host memory) and where each rank's GPU and "
              "communicators were set up; 2: dfccl's own information (DFCCL_VERBOSE=1); 3: "
              "every call's route", MCA_BASE_VAR_TYPE_INT, NULL, &cm->verbose);
    dfccl_reg("instances", "Registrations per collective signature and communicator: the "
              "k-th call with one signature runs on instance k mod this, so up to this "
              "many identical nonblocking collectives run at once; later ones are chained",
              MCA_BASE_VAR_TYPE_INT, NULL, &cm->instances);
    dfccl_reg("sync_default_stream", "Before a collective on device buffers starts, wait "
              "for the work queued on CUDA's legacy default stream (dfccl's daemon reads "
              "buffers on its own stream, unordered with the caller's). -1 (default): only "
              "when a synchronous copy into a buffer may still be in flight: device buffers "
              "get CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, which makes cudaMemcpy and cudaMemset "
              "into them complete on return, and a call waits when it is the first on a "
              "buffer or the attribute cannot be set (managed memory); 1: every call (also "
              "covers kernels on the legacy stream left unsynchronized, at about 1.5 us a "
              "call); 0: never. Kernels and asynchronous copies on any stream must be "
              "synchronized by the application before the MPI call, as with any CUDA-aware "
              "MPI", MCA_BASE_VAR_TYPE_INT, NULL, &cm->sync_default_stream);
    t = dfcclGetTunables(&n);
    for (int i = 0; i < n && i < DFCCL_MAX_TUNABLES; i++) {
        if (t[i].mca != NULL && t[i].type != DFCCL_TUNABLE_ENV) {
            dfccl_register_tunable(&t[i], &dfccl_shadow[i], c);
        }
    }
    return OMPI_SUCCESS;
}

static int dfccl_open(void)
{
    mca_coll_dfccl_component_t *cm = &mca_coll_dfccl_component;
    dfccl_config_t *c              = &cm->cfg;
    const dfccl_tunable_t *t;
    int n;

    t = dfcclGetTunables(&n);
    for (int i = 0; i < n && i < DFCCL_MAX_TUNABLES; i++) {
        if (t[i].mca != NULL && t[i].type != DFCCL_TUNABLE_ENV) {
            dfccl_apply_tunable(&t[i], &dfccl_shadow[i], c);
        }
    }
    /* dfccl prints each of its errors once (naming the communicator, its
     * group's name); the component adds only what dfccl cannot know */
    c->verbose = cm->verbose >= 2 ? cm->verbose - 1 : 0;
    if (cm->cfg_ok && dfcclConfigCheck(c) != DFCCL_OK) {
        /* the same rule as a DFCCL_* variable out of range: off, one line */
        mca_coll_dfccl_warn("an MCA variable coll_dfccl_* (or its DFCCL_* environment "
                            "variable) is not valid, so the component is off: %s",
                            dfcclGetLastErrorMessage());
        cm->cfg_ok = 0;
    }
    if (cm->instances < 1) {
        mca_coll_dfccl_warn("coll_dfccl_instances=%d is below 1; using 1", cm->instances);
        cm->instances = 1;
    }
    return OMPI_SUCCESS;
}

static int dfccl_close(void)
{
    mca_coll_dfccl_finalize();
    return OMPI_SUCCESS;
}
