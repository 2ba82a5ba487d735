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

static int dfccl_reg_enum(const char *name, const char *help,
                          const mca_base_var_enum_value_t *values, int *storage)
{
    mca_base_var_enum_t *en = NULL;
    char ename[64];
    int rc;

    snprintf(ename, sizeof(ename), "coll_dfccl_%s", name);
    rc = mca_base_var_enum_create(ename, values, &en);
    if (rc != OPAL_SUCCESS) {
        return rc;
    }
    rc = dfccl_reg(name, help, MCA_BASE_VAR_TYPE_INT, en, storage);
    OBJ_RELEASE(en);
    return rc;
}

/* dfccl_config_t fields of type uint32_t are registered through these. */
static unsigned int dfccl_spin_head, dfccl_spin_min, dfccl_spin_sticky, dfccl_spin_fresh,
    dfccl_spin_crowd;
static unsigned int dfccl_quit_us, dfccl_relaunch_us;
static int dfccl_wait_spin_us; /* -1: backend default */
static long dfccl_oneshot_bytes; /* -1: backend default */
static long dfccl_oneshot_gather_bytes; /* -1: backend default */
static long dfccl_twoshot_bytes; /* -1: backend default */
static long dfccl_pair_bytes;    /* -1: backend default */
static long dfccl_pair_ring_bytes; /* -1: backend default */
static long dfccl_pair_oneshot_bytes; /* -1: backend default */

static int dfccl_register(void)
{
    static const mca_base_var_enum_value_t backends[] = {
        {DFCCL_BACKEND_AUTO, "auto"}, {DFCCL_BACKEND_CUDA, "cuda"},
        {DFCCL_BACKEND_HOST, "host"}, {0, NULL}};
    static const mca_base_var_enum_value_t progress[] = {
        {DFCCL_PROGRESS_THREAD, "thread"}, {DFCCL_PROGRESS_EXPLICIT, "explicit"}, {0, NULL}};
    static const mca_base_var_enum_value_t transports[] = {
        {DFCCL_TRANSPORT_AUTO, "auto"}, {DFCCL_TRANSPORT_SHM, "shm"},
        {DFCCL_TRANSPORT_P2P, "p2p"}, {0, NULL}};
    static const mca_base_var_enum_value_t protos[] = {
        {DFCCL_PROTO_DEFAULT, "default"}, {DFCCL_PROTO_AUTO, "auto"},
        {DFCCL_PROTO_SIMPLE, "simple"}, {DFCCL_PROTO_LL, "ll"}, {0, NULL}};
    static const mca_base_var_enum_value_t arrivals[] = {
        {DFCCL_ARRIVALS_DEFAULT, "default"}, {DFCCL_ARRIVALS_OFF, "off"},
        {DFCCL_ARRIVALS_STUCK, "stuck"}, {DFCCL_ARRIVALS_ALWAYS, "always"}, {0, NULL}};
    mca_coll_dfccl_component_t *cm = &mca_coll_dfccl_component;
    dfccl_config_t *c              = &cm->cfg;

    /* Defaults come from dfccl itself, with DFCCL_* environment applied. */
    cm->cfg_ok = dfcclConfigInit(c) == DFCCL_OK;
    if (!cm->cfg_ok) {
        /* dfccl printed which variable and why */
        MCA_COLL_DFCCL_VERBOSE(1, "%s", "the component is off until the DFCCL_* variable is "
                               "fixed");
    }
    cm->backend       = c->backend;
    cm->progress      = c->progress;
    cm->transport     = c->transport;
    cm->proto         = c->proto;
    cm->arrivals      = c->arrivals;
    cm->verbose       = c->verbose;
    dfccl_spin_head   = c->spin_head;
    dfccl_spin_min    = c->spin_min;
    dfccl_spin_sticky = c->spin_sticky;
    dfccl_spin_fresh  = c->spin_fresh;
    dfccl_spin_crowd  = c->spin_crowd;
    dfccl_quit_us     = c->quit_us;
    dfccl_relaunch_us = c->relaunch_us;
    dfccl_wait_spin_us = c->wait_spin_us == UINT32_MAX ? -1 : (int)c->wait_spin_us;
    dfccl_oneshot_bytes = c->oneshot_bytes == SIZE_MAX ? -1 : (long)c->oneshot_bytes;
    dfccl_oneshot_gather_bytes =
        c->oneshot_gather_bytes == SIZE_MAX ? -1 : (long)c->oneshot_gather_bytes;
    dfccl_twoshot_bytes = c->twoshot_bytes == SIZE_MAX ? -1 : (long)c->twoshot_bytes;
    dfccl_pair_bytes = c->pair_bytes == SIZE_MAX ? -1 : (long)c->pair_bytes;
    dfccl_pair_ring_bytes = c->pair_ring_bytes == SIZE_MAX ? -1 : (long)c->pair_ring_bytes;
    dfccl_pair_oneshot_bytes =
        c->pair_oneshot_bytes == SIZE_MAX ? -1 : (long)c->pair_oneshot_bytes;

    dfccl_reg("priority", "Priority of the dfccl coll component; it must be above the "
              "components it falls back to (tuned is 30)", MCA_BASE_VAR_TYPE_INT, NULL,
              &cm->priority);
    dfccl_reg("verbose", "0: dfccl's errors and the hang watchdog only; 1: also a statistics "
              "line per rank at MPI_Finalize (collectives, preemptions, quits, fallbacks, of "
              "which staged through host memory) and where each rank's GPU and "
              "communicators were set up; 2: dfccl's own information (DFCCL_VERBOSE=1); 3: "
              "every call's route", MCA_BASE_VAR_TYPE_INT, NULL, &cm->verbose);
    dfccl_reg_enum("backend", "Where dfccl runs collectives: auto (CUDA when a GPU is "
                   "visible and dfccl was built with CUDA; otherwise dfccl is off and every "
                   "call takes the previous module), cuda (CUDA memory of every kind "
                   "goes to dfccl), host (host buffers go to dfccl's host backend: for tests "
                   "without a GPU) (DFCCL_BACKEND)", backends, &cm->backend);
    dfccl_reg_enum("progress", "Who runs dfccl completions: thread (a poller thread) or "
                   "explicit (opal_progress) (DFCCL_PROGRESS)", progress, &cm->progress);
    dfccl_reg_enum("transport", "Connector transport between ranks: auto, shm or p2p "
                   "(DFCCL_TRANSPORT)", transports, &cm->transport);
    dfccl_reg_enum("proto", "How connectors carry slices: auto (LL, data and flags "
                   "together, for slots of up to ll_bytes; simple otherwise), simple, ll, or "
                   "default (= auto); same on every rank (DFCCL_PROTO)", protos, &cm->proto);
    dfccl_reg("ll_bytes", "Largest connector slot that proto=auto carries in LL, 256 to "
              "65536, 0 = default (16 KiB); same on every rank (DFCCL_LL_BYTES)",
              MCA_BASE_VAR_TYPE_SIZE_T, NULL, &c->ll_max_bytes);
    dfccl_reg("ll_slots", "Most slots of an LL connector, 2 to 64, 0 = default (16): it "
              "gets as many as hold 64 KiB of data, and at least slots; same on every rank "
              "(DFCCL_LL_SLOTS)", MCA_BASE_VAR_TYPE_INT, NULL, &c->ll_slots);
    dfccl_reg("oneshot_bytes", "Allreduces of at most this many bytes on a communicator "
              "whose ranks all reach each other take one shot (every rank writes its input "
              "to every peer: one hop instead of the ring's 2(n-1)), 0 = never, up to 2 MiB, "
              "-1 = backend default (256 KiB on GPUs); same on every rank "
              "(DFCCL_ONESHOT_BYTES)", MCA_BASE_VAR_TYPE_LONG, NULL, &dfccl_oneshot_bytes);
    dfccl_reg("oneshot_channel_bytes", "Bytes per channel of a one-shot allreduce, allgather "
              "or reduce-scatter, up to 65536, 0 = backend default (8 KiB on GPUs); same on "
              "every rank (DFCCL_ONESHOT_CHANNEL_BYTES)", MCA_BASE_VAR_TYPE_SIZE_T, NULL,
              &c->oneshot_channel_bytes);
    dfccl_reg("oneshot_gather_bytes", "Allgathers and reduce-scatters whose per-rank share is "
              "at most this many bytes, on the communicators of oneshot_bytes, take one shot "
              "(every rank writes to every peer what it needs: one hop instead of the ring's "
              "n-1), 0 = never, up to 2 MiB, -1 = backend default (256 KiB on GPUs); same on "
              "every rank (DFCCL_ONESHOT_GATHER_BYTES)", MCA_BASE_VAR_TYPE_LONG, NULL,
              &dfccl_oneshot_gather_bytes);
    dfccl_reg("twoshot_bytes", "Allreduces above oneshot_bytes and of at most this many "
              "bytes, on the same communicators, take two shot (a reduce-scatter and an "
              "allgather of one hop each), 0 = never, up to 16 MiB, -1 = backend default "
              "(2 MiB on GPUs); same on every rank (DFCCL_TWOSHOT_BYTES)",
              MCA_BASE_VAR_TYPE_LONG, NULL, &dfccl_twoshot_bytes);
    dfccl_reg("twoshot_channel_bytes", "Bytes per channel of a two-shot allreduce, up to "
              "524288, 0 = backend default (32 KiB on GPUs); same on every rank "
              "(DFCCL_TWOSHOT_CHANNEL_BYTES)", MCA_BASE_VAR_TYPE_SIZE_T, NULL,
              &c->twoshot_channel_bytes);
    dfccl_reg("step_slices", "Slices a ring step is cut into to pipeline it (none below "
              "16 KiB, fewer than slots), 1 to 16, 0 = default (1 on GPUs); same on every "
              "rank (DFCCL_STEP_SLICES)",
              MCA_BASE_VAR_TYPE_INT, NULL, &c->step_slices);
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
    dfccl_reg("max_blocks", "Daemon blocks, the most channels of any collective, 0 = "
              "backend default (32 on GPUs) (DFCCL_MAX_BLOCKS)",
              MCA_BASE_VAR_TYPE_INT, NULL, &c->max_blocks);
    dfccl_reg("threads", "CUDA threads per daemon block (DFCCL_THREADS)",
              MCA_BASE_VAR_TYPE_INT, NULL, &c->threads_per_block);
    dfccl_reg("team_threads", "A one-shot collective runs on the first threads of each "
              "daemon block, one per 8 bytes of its channel in multiples of this many, when "
              "that is fewer than the block's; 0 = the whole block, -1 = backend default "
              "(128 on GPUs) (DFCCL_TEAM_THREADS)", MCA_BASE_VAR_TYPE_INT, NULL,
              &c->team_threads);
    dfccl_reg("channels", "Channels per collective, 0 = backend default (16 on GPUs, at "
              "most max_blocks); same on every rank (DFCCL_CHANNELS)", MCA_BASE_VAR_TYPE_INT,
              NULL, &c->max_channels);
    dfccl_reg("wide_bytes", "Allreduces, allgathers and reduce-scatters of at least this "
              "many bytes may use wide_channels channels instead of channels, 0 = never; "
              "same on every rank (DFCCL_WIDE_BYTES)", MCA_BASE_VAR_TYPE_SIZE_T, NULL,
              &c->wide_bytes);
    dfccl_reg("wide_channels", "Channels of the collectives of wide_bytes and up, 0 = "
              "backend default (20 on GPUs; between channels and max_blocks); same on every "
              "rank (DFCCL_WIDE_CHANNELS)", MCA_BASE_VAR_TYPE_INT, NULL, &c->wide_channels);
    dfccl_reg("pair_bytes", "On communicators of two ranks on two GPUs, allreduces of at "
              "least this many bytes use max_blocks channels, 0 = never, -1 = backend "
              "default (64 MiB on GPUs); same on every rank (DFCCL_PAIR_BYTES)",
              MCA_BASE_VAR_TYPE_LONG, NULL, &dfccl_pair_bytes);
    dfccl_reg("pair_ring_bytes", "On communicators of two ranks on two GPUs, ring "
              "reduce-scatters and allgathers of at most this many bytes (all ranks' data) "
              "take one channel, 0 = never, -1 = backend default (128 KiB on GPUs); same on "
              "every rank (DFCCL_PAIR_RING_BYTES)", MCA_BASE_VAR_TYPE_LONG, NULL,
              &dfccl_pair_ring_bytes);
    dfccl_reg("pair_oneshot_bytes", "On communicators of two ranks on two GPUs, one-shot "
              "collectives of at most this many bytes (allgather, reduce-scatter: per rank) "
              "take one channel, up to 65536, 0 = never, -1 = backend default (16 KiB on "
              "GPUs); same on every rank (DFCCL_PAIR_ONESHOT_BYTES)", MCA_BASE_VAR_TYPE_LONG,
              NULL, &dfccl_pair_oneshot_bytes);
    dfccl_reg("conn_budget", "Connector bytes that a communicator's registered collectives "
              "hold at full size; registrations past it get lean connectors (at most 16 "
              "channels of 2 slots of 32 KiB), 0 = no limit; same on every rank "
              "(DFCCL_CONN_BUDGET)", MCA_BASE_VAR_TYPE_SIZE_T, NULL, &c->conn_budget);
    dfccl_reg("channel_bytes", "Bytes per extra channel, 0 = backend default; same on "
              "every rank (DFCCL_CHANNEL_BYTES)", MCA_BASE_VAR_TYPE_SIZE_T, NULL,
              &c->min_channel_bytes);
    dfccl_reg("slot_bytes", "Connector slot size, 0 = backend default; same on every rank "
              "(DFCCL_SLOT_BYTES)", MCA_BASE_VAR_TYPE_SIZE_T, NULL, &c->slot_bytes);
    dfccl_reg("slots", "Slots per connector; same on every rank (DFCCL_SLOTS)",
              MCA_BASE_VAR_TYPE_INT, NULL, &c->nslots);
    dfccl_reg("spin_head", "Spin threshold of the collective at the head of the task queue, "
              "0 = backend default (DFCCL_SPIN_HEAD)", MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL,
              &dfccl_spin_head);
    dfccl_reg("spin_min", "Smallest initial spin threshold, 0 = backend default "
              "(DFCCL_SPIN_MIN)", MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL, &dfccl_spin_min);
    dfccl_reg("spin_sticky", "Spin threshold after a primitive made progress, 0 = backend "
              "default (DFCCL_SPIN_STICKY)", MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL,
              &dfccl_spin_sticky);
    dfccl_reg("spin_fresh", "Spin threshold of a collective's first run while collectives of "
              "its priority that have not run yet are queued behind it, 0 = default "
              "(DFCCL_SPIN_FRESH)", MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL, &dfccl_spin_fresh);
    dfccl_reg("spin_crowd", "Most polls a collective spins while other collectives are queued "
              "on its daemon block, 0 = backend default (DFCCL_SPIN_CROWD)",
              MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL, &dfccl_spin_crowd);
    dfccl_reg("quit_us", "Idle time in microseconds before a daemon block quits "
              "voluntarily, 0 = backend default (DFCCL_QUIT_US)",
              MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL, &dfccl_quit_us);
    dfccl_reg("relaunch_us", "Smallest gap in microseconds between relaunches of a stuck "
              "daemon, 0 = backend default (DFCCL_RELAUNCH_US)",
              MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL, &dfccl_relaunch_us);
    dfccl_reg("wait_spin_us", "While dfccl runs are in flight, MPI's progress loop polls "
              "dfccl's completion queue itself (> 0) instead of leaving it to the poller "
              "thread; dfcclWait spins this many microseconds before it sleeps; -1 = backend "
              "default (DFCCL_WAIT_SPIN_US)", MCA_BASE_VAR_TYPE_INT, NULL, &dfccl_wait_spin_us);
    dfccl_reg("max_colls", "Registered collectives per process (DFCCL_MAX_COLLS)",
              MCA_BASE_VAR_TYPE_INT, NULL, &c->max_colls);
    dfccl_reg("sq_entries", "Submission queue entries (DFCCL_SQ_ENTRIES)",
              MCA_BASE_VAR_TYPE_INT, NULL, &c->sq_entries);
    dfccl_reg("sq_window", "Submission queue entries the daemon's leader reads in one poll "
              "(1 to 16; a GPU reads at most 8), 0 = backend default (DFCCL_SQ_WINDOW)",
              MCA_BASE_VAR_TYPE_INT, NULL, &c->sq_window);
    dfccl_reg("timeout", "Seconds (fractions allowed) after which a collective fails with a "
              "timeout, also while its communicator waits for every rank's first dfccl call; "
              "0 = never (DFCCL_TIMEOUT)", MCA_BASE_VAR_TYPE_DOUBLE, NULL, &c->timeout_s);
    dfccl_reg("warn_s", "The hang watchdog: a collective (or a communicator's first dfccl "
              "call) that waits longer than this many seconds makes the rank print one line "
              "naming the ranks that joined and those that did not, again after twice, four "
              "times ... as long; it keeps waiting; 0 = off (DFCCL_WARN_S)",
              MCA_BASE_VAR_TYPE_DOUBLE, NULL, &c->warn_s);
    dfccl_reg("sigusr1", "1: SIGUSR1 makes the process print dfccl's state (every collective "
              "in flight, who joined it, where each rank waits) to stderr (DFCCL_SIGUSR1)",
              MCA_BASE_VAR_TYPE_INT, NULL, &c->sigusr1);
    dfccl_reg("priority_order", "1: the daemon's task queue runs higher-priority "
              "collectives first; 0: FIFO (DFCCL_PRIORITY)", MCA_BASE_VAR_TYPE_INT, NULL,
              &c->priority_order);
    dfccl_reg_enum("arrivals", "When a daemon block with several collectives queued first "
                   "runs those whose previous rank has sent data already: off, stuck (after "
                   "a pass in which one got stuck), always, or default (always) "
                   "(DFCCL_ARRIVALS)", arrivals, &cm->arrivals);
    dfccl_reg("net", "1: move connector data over the UCX net transport even between "
              "ranks on one host, for tests (DFCCL_NET; DFCCL_HOST_ID sets the host "
              "identity)", MCA_BASE_VAR_TYPE_INT, NULL, &c->net);
    return OMPI_SUCCESS;
}

static int dfccl_open(void)
{
    mca_coll_dfccl_component_t *cm = &mca_coll_dfccl_component;
    dfccl_config_t *c              = &cm->cfg;

    c->backend     = (dfccl_backend_t)cm->backend;
    c->progress    = (dfccl_progress_t)cm->progress;
    c->transport   = (dfccl_transport_t)cm->transport;
    c->proto       = (dfccl_proto_t)cm->proto;
    c->arrivals    = (dfccl_arrivals_t)cm->arrivals;
    /* dfccl prints each of its errors once (naming the communicator, its
     * group's name); the component adds only what dfccl cannot know */
    c->verbose     = cm->verbose >= 2 ? cm->verbose - 1 : 0;
    c->spin_head   = dfccl_spin_head;
    c->spin_min    = dfccl_spin_min;
    c->spin_sticky = dfccl_spin_sticky;
    c->spin_fresh  = dfccl_spin_fresh;
    c->spin_crowd  = dfccl_spin_crowd;
    c->quit_us     = dfccl_quit_us;
    c->relaunch_us = dfccl_relaunch_us;
    c->wait_spin_us = dfccl_wait_spin_us < 0 ? UINT32_MAX : (uint32_t)dfccl_wait_spin_us;
    c->oneshot_bytes = dfccl_oneshot_bytes < 0 ? SIZE_MAX : (size_t)dfccl_oneshot_bytes;
    c->oneshot_gather_bytes =
        dfccl_oneshot_gather_bytes < 0 ? SIZE_MAX : (size_t)dfccl_oneshot_gather_bytes;
    c->twoshot_bytes = dfccl_twoshot_bytes < 0 ? SIZE_MAX : (size_t)dfccl_twoshot_bytes;
    c->pair_bytes = dfccl_pair_bytes < 0 ? SIZE_MAX : (size_t)dfccl_pair_bytes;
    c->pair_ring_bytes =
        dfccl_pair_ring_bytes < 0 ? SIZE_MAX : (size_t)dfccl_pair_ring_bytes;
    c->pair_oneshot_bytes =
        dfccl_pair_oneshot_bytes < 0 ? SIZE_MAX : (size_t)dfccl_pair_oneshot_bytes;
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
