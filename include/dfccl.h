/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dfccl: deadlock-free collective communication.
 *
 * The public API. A rank context owns one persistent daemon (a CUDA kernel on
 * the caller's current device, or a set of CPU threads on the host backend)
 * that runs every collective of the process. Collectives are registered once
 * on a group of ranks and then run any number of times; completion is
 * reported through a callback, dfcclQuery or dfcclWait. Collectives may be
 * started in any order on different ranks, and the device may be
 * synchronized between them: the daemon preempts whatever is stuck.
 *
 * Thread-safety: every call may be made from any thread, unless its comment
 * says otherwise. Callbacks run on the poller thread (progress mode
 * DFCCL_PROGRESS_THREAD) or inside dfcclProgress/dfcclWait (mode
 * DFCCL_PROGRESS_EXPLICIT); a callback may call dfcclRun* and dfcclQuery but
 * must not call dfcclWait, dfcclDestroy or any registration call.
 */
#ifndef DFCCL_H_
#define DFCCL_H_

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define DFCCL_API __attribute__((visibility("default")))
#else
#define DFCCL_API
#endif

#define DFCCL_VERSION_MAJOR 0
#define DFCCL_VERSION_MINOR 1
#define DFCCL_VERSION_PATCH 0

/* Status of every call: DFCCL_OK, DFCCL_INPROGRESS, or a negative error. */
typedef enum {
    DFCCL_OK               = 0,
    DFCCL_INPROGRESS       = 1,  /* dfcclQuery: the collective is in flight */
    DFCCL_ERR_INVALID_ARG  = -1, /* bad argument; the message says which */
    DFCCL_ERR_NO_MEMORY    = -2, /* host or device memory exhausted */
    DFCCL_ERR_UNSUPPORTED  = -3, /* type, op, algorithm or backend not supported */
    DFCCL_ERR_NOT_FOUND    = -4, /* unknown collective id or group */
    DFCCL_ERR_BUSY         = -5, /* collective in flight / context has work outstanding */
    DFCCL_ERR_TIMEOUT      = -6, /* a wait or a collective ran past its timeout */
    DFCCL_ERR_SYSTEM       = -7, /* an operating-system call failed */
    DFCCL_ERR_CUDA         = -8, /* a CUDA runtime call failed */
    DFCCL_ERR_BOOTSTRAP    = -9, /* the out-of-band allgather failed */
    DFCCL_ERR_MISMATCH     = -10, /* ranks registered different collectives */
    DFCCL_ERR_ABORTED      = -11, /* the rank context was aborted */
    DFCCL_ERR_TRANSPORT    = -12, /* a connector transport failed */
    DFCCL_ERR_INTERNAL     = -13  /* a bug in dfccl: please report it */
} dfccl_status_t;

typedef enum {
    DFCCL_INT8 = 0,
    DFCCL_UINT8,
    DFCCL_INT32,
    DFCCL_UINT32,
    DFCCL_INT64,
    DFCCL_UINT64,
    DFCCL_FLOAT16,  /* IEEE binary16 */
    DFCCL_BFLOAT16, /* bfloat16 */
    DFCCL_FLOAT32,
    DFCCL_FLOAT64,
    DFCCL_DATATYPE_COUNT
} dfccl_datatype_t;

typedef enum {
    DFCCL_SUM = 0,
    DFCCL_PROD,
    DFCCL_MIN,
    DFCCL_MAX,
    DFCCL_AVG, /* floating types only: the sum divided by the group size */
    DFCCL_OP_COUNT
} dfccl_op_t;

typedef enum {
    DFCCL_BACKEND_AUTO = 0, /* CUDA if a GPU is visible and built in, else host */
    DFCCL_BACKEND_CUDA,
    DFCCL_BACKEND_HOST
} dfccl_backend_t;

typedef enum {
    DFCCL_PROGRESS_THREAD = 0, /* a poller thread runs callbacks */
    DFCCL_PROGRESS_EXPLICIT    /* callbacks run in dfcclProgress/dfcclWait */
} dfccl_progress_t;

typedef enum {
    DFCCL_TRANSPORT_AUTO = 0, /* p2p between GPUs that can, else shm */
    DFCCL_TRANSPORT_SHM,
    DFCCL_TRANSPORT_P2P
} dfccl_transport_t;

/*
 * How a connector carries a slice. SIMPLE: the data, then a system-scope
 * release of a counter that the receiver polls (one fence per slice, any
 * size). LL ("low latency"): every 8 bytes of data travel in a 16-byte line
 * together with two copies of a flag, so the receiver polls the data itself
 * and the sender needs no fence; it moves twice the bytes, in slices of up
 * to ll_max_bytes. AUTO: LL for collectives whose slots hold at most
 * ll_max_bytes, on groups without net (UCX) edges; SIMPLE otherwise.
 * DEFAULT: AUTO.
 */
typedef enum {
    DFCCL_PROTO_DEFAULT = 0,
    DFCCL_PROTO_AUTO,
    DFCCL_PROTO_SIMPLE,
    DFCCL_PROTO_LL
} dfccl_proto_t;

/*
 * Whether a daemon block with several collectives queued first looks at
 * their receive connectors and runs those whose previous rank has sent data
 * already, before the rest in queue order: ranks that queued collectives in
 * different orders then meet on one another's sooner. OFF: queue order only.
 * STUCK: in a pass that follows one where a collective got stuck. ALWAYS: in
 * every pass. The look costs the block about one read of device memory; it
 * is made only where the connectors are in the block's own memory (p2p on
 * GPUs, the host backend). DEFAULT: ALWAYS.
 */
typedef enum {
    DFCCL_ARRIVALS_DEFAULT = 0,
    DFCCL_ARRIVALS_OFF,
    DFCCL_ARRIVALS_STUCK,
    DFCCL_ARRIVALS_ALWAYS
} dfccl_arrivals_t;

/* DFCCL_ALGO: the algorithm every collective should take, where it can (as
 * NCCL_ALGO); AUTO: the default policy. */
typedef enum {
    DFCCL_ALGO_AUTO = 0,
    DFCCL_ALGO_RING,
    DFCCL_ALGO_ONESHOT,
    DFCCL_ALGO_TWOSHOT,
    DFCCL_ALGO_MESH,  /* all-to-alls only */
    DFCCL_ALGO_MSCCL, /* a program of DFCCL_MSCCL_XML_FILES */
    DFCCL_ALGO_TREE,  /* allreduces: two binary trees */
    DFCCL_ALGO_CTREE  /* allreduces: one tree, reduction and broadcast overlapped */
} dfccl_algo_choice_t;

/*
 * DFCCL_TUNER: how DFCCL_ALGO=auto chooses. STATIC: the measured size
 * thresholds (DFCCL_ONESHOT_BYTES, DFCCL_TWOSHOT_BYTES, ...). MODEL: every
 * algorithm that can run the collective is asked for its alpha-beta time on
 * the group's profiled links, and the fastest runs it, unless the static
 * thresholds' choice is predicted within DFCCL_TUNER_MARGIN percent of it
 * (then that one runs). Both put an MSCCL program of DFCCL_MSCCL_XML_FILES
 * for that size first, and both choose from inputs that are the same on
 * every rank.
 */
typedef enum {
    DFCCL_TUNER_STATIC = 0,
    DFCCL_TUNER_MODEL
} dfccl_tuner_t;

/*
 * DFCCL_PROFILE: CREATE: dfcclGroupCreate measures the group's links
 * (dfcclGroupProfile) before it returns; OFF: the group starts from the
 * backend's nominal values, which dfcclGroupProfile may replace later;
 * AUTO: CREATE where the tuner is DFCCL_TUNER_MODEL (whose choices the
 * values decide), else OFF.
 */
typedef enum {
    DFCCL_PROFILE_AUTO = 0,
    DFCCL_PROFILE_CREATE,
    DFCCL_PROFILE_OFF
} dfccl_profile_mode_t;

/*
 * DFCCL_STRAGGLER: OFF: only registrations with DFCCL_COLL_STRAGGLER are
 * straggler-tolerant; ALLREDUCE: dfcclRegister (and
 * dfcclRegisterAllReduce) gives the flag to every allreduce where the
 * group can take it (docs/stragglers.md).
 */
/*
 * Where the net (UCX) transport keeps the slots it moves (DFCCL_NET_MEM):
 * AUTO: in memory registered with UCX once, on the GPU where this UCX
 * reaches CUDA memory, else staged through pinned host memory; HOST:
 * always staged; DEVICE: on the GPU, and a rank whose UCX cannot reach
 * CUDA memory fails to start the transport.
 */
typedef enum {
    DFCCL_NET_MEM_AUTO = 0,
    DFCCL_NET_MEM_HOST,
    DFCCL_NET_MEM_DEVICE
} dfccl_net_mem_t;

typedef enum {
    DFCCL_STRAGGLER_OFF = 0,
    DFCCL_STRAGGLER_ALLREDUCE
} dfccl_straggler_mode_t;

/* The classes of links a group's ranks talk over, each with its own alpha
 * and beta: NVLink (CUDA IPC), shared memory (the host backend, GPUs
 * without p2p) and the network (UCX). */
typedef enum {
    DFCCL_LINK_P2P = 0,
    DFCCL_LINK_SHM,
    DFCCL_LINK_NET,
    DFCCL_LINK_COUNT
} dfccl_link_t;

/*
 * Tunables. dfcclConfigInit fills the defaults and then applies the
 * environment variable beside each field (read once per call); dfcclInit
 * checks every field (dfcclConfigCheck) and gives the fields still at
 * dfcclConfigInit's values their backend's defaults. What each does, its
 * valid values and its defaults are in one table: dfcclGetTunables, and the
 * README's configuration table, which is made from it. Every rank of a
 * group must use the same values for the fields marked [group];
 * registration checks this and fails with DFCCL_ERR_MISMATCH.
 */
typedef struct {
    dfccl_backend_t   backend;       /* DFCCL_BACKEND */
    dfccl_progress_t  progress;      /* DFCCL_PROGRESS */
    dfccl_transport_t transport;     /* DFCCL_TRANSPORT */
    int               max_blocks;    /* DFCCL_MAX_BLOCKS */
    int               threads_per_block; /* DFCCL_THREADS */
    int               team_threads;  /* DFCCL_TEAM_THREADS */
    int               max_channels;  /* DFCCL_CHANNELS [group] */
    size_t            wide_bytes;    /* DFCCL_WIDE_BYTES [group] */
    int               wide_channels; /* DFCCL_WIDE_CHANNELS [group] */
    size_t            mesh_wide_bytes; /* DFCCL_MESH_WIDE_BYTES [group] */
    size_t            tree_wide_bytes; /* DFCCL_TREE_WIDE_BYTES [group] */
    size_t            pair_bytes;    /* DFCCL_PAIR_BYTES [group] */
    size_t            pair_ring_bytes; /* DFCCL_PAIR_RING_BYTES [group] */
    size_t            pair_oneshot_bytes; /* DFCCL_PAIR_ONESHOT_BYTES [group] */
    size_t            min_channel_bytes; /* DFCCL_CHANNEL_BYTES [group] */
    size_t            slot_bytes;    /* DFCCL_SLOT_BYTES [group] */
    int               nslots;        /* DFCCL_SLOTS [group] */
    dfccl_proto_t     proto;         /* DFCCL_PROTO [group] */
    size_t            ll_max_bytes;  /* DFCCL_LL_BYTES [group] */
    size_t            oneshot_bytes; /* DFCCL_ONESHOT_BYTES [group] */
    size_t            oneshot_channel_bytes; /* DFCCL_ONESHOT_CHANNEL_BYTES [group] */
    size_t            oneshot_gather_bytes; /* DFCCL_ONESHOT_GATHER_BYTES [group] */
    size_t            twoshot_bytes; /* DFCCL_TWOSHOT_BYTES [group] */
    size_t            twoshot_channel_bytes; /* DFCCL_TWOSHOT_CHANNEL_BYTES [group] */
    int               ll_slots;      /* DFCCL_LL_SLOTS [group] */
    size_t            conn_budget;   /* DFCCL_CONN_BUDGET [group] */
    int               step_slices;   /* DFCCL_STEP_SLICES [group] */
    uint32_t          spin_head;     /* DFCCL_SPIN_HEAD */
    uint32_t          spin_min;      /* DFCCL_SPIN_MIN */
    uint32_t          spin_sticky;   /* DFCCL_SPIN_STICKY */
    uint32_t          spin_fresh;    /* DFCCL_SPIN_FRESH */
    uint32_t          spin_crowd;    /* DFCCL_SPIN_CROWD */
    uint32_t          quit_us;       /* DFCCL_QUIT_US */
    uint32_t          relaunch_us;   /* DFCCL_RELAUNCH_US */
    int               peer_bells;    /* DFCCL_PEER_BELLS */
    uint32_t          wait_spin_us;  /* DFCCL_WAIT_SPIN_US */
    int               max_colls;     /* DFCCL_MAX_COLLS */
    int               sq_entries;    /* DFCCL_SQ_ENTRIES */
    int               sq_window;     /* DFCCL_SQ_WINDOW */
    double            timeout_s;     /* DFCCL_TIMEOUT */
    int               priority_order; /* DFCCL_PRIORITY */
    dfccl_arrivals_t  arrivals;      /* DFCCL_ARRIVALS */
    int               verbose;       /* DFCCL_VERBOSE */
    int               net;           /* DFCCL_NET */
    int               net_proxies;   /* DFCCL_NET_PROXIES */
    double            warn_s;        /* DFCCL_WARN_S */
    int               sigusr1;       /* DFCCL_SIGUSR1 */
    dfccl_algo_choice_t algo;        /* DFCCL_ALGO [group] */
    dfccl_tuner_t     tuner;         /* DFCCL_TUNER [group] */
    int               tuner_margin;  /* DFCCL_TUNER_MARGIN [group] */
    uint32_t          model_slice_ns; /* DFCCL_MODEL_SLICE_NS [group] */
    uint32_t          model_block_mbps; /* DFCCL_MODEL_BLOCK_MBPS [group] */
    dfccl_profile_mode_t profile;    /* DFCCL_PROFILE [group] */
    uint32_t          profile_every; /* DFCCL_PROFILE_EVERY [group] */
    dfccl_straggler_mode_t straggler; /* DFCCL_STRAGGLER [group] */
    uint32_t          straggler_wait_us; /* DFCCL_STRAGGLER_WAIT_US */
    int               fault_policy;  /* DFCCL_FAULT_POLICY [group] (dfccl_fault_policy_t) */
    dfccl_net_mem_t   net_mem;       /* DFCCL_NET_MEM */
    size_t            net_mem_bytes; /* DFCCL_NET_MEM_BYTES */
} dfccl_config_t;

typedef struct dfccl_rank_ctx *dfccl_rank_ctx_t;
typedef struct dfccl_group    *dfccl_group_t;
typedef struct dfccl_group_boot *dfccl_group_boot_t;

/*
 * The tunables: every field of dfccl_config_t, its environment variable and
 * (in the MPI component) its MCA variable coll_dfccl_<mca>, in one table
 * (dfcclGetTunables). README.md's configuration table is its env, doc and
 * def_doc columns.
 */
typedef enum {
    DFCCL_TUNABLE_INT = 0, /* int */
    DFCCL_TUNABLE_U32,     /* uint32_t */
    DFCCL_TUNABLE_SIZE,    /* size_t */
    DFCCL_TUNABLE_SECONDS, /* double, finite, >= 0 */
    DFCCL_TUNABLE_ENUM,    /* an enum stored as int, set by name in the environment */
    DFCCL_TUNABLE_ENV      /* an environment variable only (no field, no MCA variable) */
} dfccl_tunable_type_t;

/* def_host/def_cuda: the value stays dfcclConfigInit's; or: the max_blocks
 * the context ends up with */
#define DFCCL_TUNABLE_KEEP   UINT64_MAX
#define DFCCL_TUNABLE_BLOCKS (UINT64_MAX - 1)

typedef struct {
    const char          *env;       /* DFCCL_SPIN_HEAD */
    const char          *field;     /* spin_head */
    const char          *mca;       /* the component's coll_dfccl_<mca>; NULL: none */
    dfccl_tunable_type_t type;
    size_t               offset;    /* of the field in dfccl_config_t */
    int64_t              lo;        /* valid: lo to hi, */
    uint64_t             hi;
    int                  has_unset; /* or `unset`, where has_unset */
    uint64_t             unset;
    uint64_t             init;      /* dfcclConfigInit's value (SECONDS: whole seconds) */
    uint64_t             def_host;  /* what `init` becomes at dfcclInit, per backend */
    uint64_t             def_cuda;
    const char *const   *names;     /* ENUM: the names of 0, 1, ..., NULL-terminated */
    const char          *valid;     /* the valid values in words */
    const char          *doc;       /* what it does */
    const char          *def_doc;   /* the defaults in words: "host / cuda", or one value */
} dfccl_tunable_t;

/* The table, in the order the README lists it. [out] count_p: its rows. */
DFCCL_API const dfccl_tunable_t *dfcclGetTunables(int *count_p);

/* The collectives, for dfcclRegister. */
typedef enum {
    DFCCL_KIND_ALLREDUCE = 0,
    DFCCL_KIND_ALLGATHER,
    DFCCL_KIND_REDUCESCATTER,
    DFCCL_KIND_REDUCE,
    DFCCL_KIND_BROADCAST,
    DFCCL_KIND_ALLTOALL,  /* count: elements to each rank (and from each) */
    DFCCL_KIND_ALLTOALLV, /* takes counts per rank: dfcclRegisterAllToAllv only */
    DFCCL_KIND_COUNT
} dfccl_coll_kind_t;

/*
 * A collective to register. count is in elements: allgather's is each
 * rank's contribution, reduce-scatter's the count each rank receives. op is
 * read for reductions only, root for reduce and broadcast only.
 */
typedef struct {
    dfccl_coll_kind_t kind;
    size_t            count;
    dfccl_datatype_t  type;
    dfccl_op_t        op;
    int               root;
    int               priority; /* higher runs first (DFCCL_PRIORITY=1) */
    /* the algorithm of this collective, where it can take it (as DFCCL_ALGO,
     * which it overrides; same on every rank); DFCCL_ALGO_AUTO (0): the
     * configuration's */
    dfccl_algo_choice_t algo;
    uint32_t          flags;    /* DFCCL_COLL_*, or 0 (same on every rank) */
    /* DFCCL_COLL_STRAGGLER: how long, in microseconds, the ranks that have
     * started a run wait for the others before they start without them;
     * 0: the configuration's DFCCL_STRAGGLER_WAIT_US, whose default, 0, is
     * AdapCC's ski-rental rule (the model's time of the two phases) */
    uint32_t          straggler_wait_us;
} dfccl_coll_desc_t;

/*
 * DFCCL_COLL_STRAGGLER: a straggler-tolerant allreduce (docs/stragglers.md).
 * The ranks that have started a run wait a bounded time for the others
 * (straggler_wait_us, or the ski-rental rule); ranks still absent then are
 * late for that run: their runtime relays phase 1 for them (it contributes
 * the op's identity), and when a late rank's application runs it, phase 2
 * folds the late ranks' data into phase 1's result. Every rank's result is
 * the full reduction when its run completes (callback, dfcclWait); only
 * the early ranks' time to start is bounded. Allreduce with sum, prod, min,
 * max or avg only, on a group whose ranks share one host (at most 31
 * ranks), registered the same way on every rank. It takes a second
 * registration of the same size (phase 1's connectors) and two buffers of
 * the collective's size (the op's identity, and a relay's output).
 * DFCCL_STRAGGLER=allreduce gives the flag to every allreduce registered
 * without it, where the group and the op can take it (elsewhere they
 * register as ordinary allreduces, without an error).
 */
#define DFCCL_COLL_STRAGGLER 0x1u

/*
 * Completion callback. Runs once per dfcclRun* call, with the collective id,
 * its final status (DFCCL_OK, or an error such as DFCCL_ERR_TIMEOUT) and the
 * user argument given to dfcclRun*.
 */
typedef void (*dfccl_callback_t)(int coll_id, dfccl_status_t status, void *arg);

/*
 * Out-of-band allgather used to bootstrap a group: every rank contributes
 * `bytes` bytes from `sendbuf`; `recvbuf` receives nranks * bytes, in rank
 * order. Returns 0 on success. It is called only from inside
 * dfcclGroupCreate, collectively on all ranks of the group.
 */
typedef int (*dfccl_oob_allgather_fn_t)(const void *sendbuf, void *recvbuf,
                                        size_t bytes, void *arg);

typedef struct {
    uint64_t collectives;   /* collectives completed by the daemon */
    uint64_t preemptions;   /* primitives that ran out of spins (per block) */
    uint64_t quits;         /* voluntary quits of daemon blocks */
    uint64_t launches;      /* daemon launches */
    uint64_t context_loads; /* dynamic contexts restored after a preemption */
    uint64_t submitted;     /* dfcclRun* calls accepted */
    size_t   device_bytes;  /* device (or host-backend) memory held by the context */
    size_t   connector_bytes; /* of which connector buffers */
    int      registered;    /* collectives currently registered */
    int      blocks;        /* daemon blocks (grid) of the last launch: the most
                             * channels of a registered collective, at most
                             * max_blocks; the SMs it holds while it runs */
    int      running;       /* 1 while the daemon runs */
    uint64_t peer_relaunches; /* launches of a stuck daemon brought forward
                               * because a rank of one of its groups on this
                               * host submitted, or the net proxy received
                               * from a peer, since the last launch */
    int      oneshot;       /* registered collectives that run one shot */
    int      twoshot;       /* registered collectives that run two shot (the
                             * others run on the ring) */
    uint64_t straggler_splits; /* runs of straggler-tolerant collectives that
                                * took two phases because a rank was late */
    uint64_t straggler_relays; /* of which this rank was late: its runtime
                                * relayed phase 1 before its application ran */
} dfccl_stats_t;

/* Text for a status. Never NULL. Thread-safe. */
DFCCL_API const char *dfcclGetErrorString(dfccl_status_t status);

/* Text for the last error of the calling thread: what failed and what to do. */
DFCCL_API const char *dfcclGetLastErrorMessage(void);

/* Fill `config` with defaults overridden by DFCCL_* environment variables. */
DFCCL_API dfccl_status_t dfcclConfigInit(dfccl_config_t *config);

/*
 * Check every field of `config` against its range, as dfcclInit does, but
 * print nothing: DFCCL_ERR_INVALID_ARG, and dfcclGetLastErrorMessage
 * names the first field that is not valid and what it takes. For callers
 * that fill a configuration from their own settings (the MPI component's
 * MCA variables) and report errors themselves.
 */
DFCCL_API dfccl_status_t dfcclConfigCheck(const dfccl_config_t *config);

/*
 * Create a rank context on the caller's current CUDA device (cudaGetDevice),
 * or on the host backend. `config` may be NULL (dfcclConfigInit defaults).
 * [out] ctx_p: set only on success; the caller owns it and frees it with
 * dfcclDestroy. The daemon starts at the first dfcclRun*.
 */
DFCCL_API dfccl_status_t dfcclInit(const dfccl_config_t *config, dfccl_rank_ctx_t *ctx_p);

/*
 * Create a group of `nranks` ranks (the paper's device set), in which this
 * process is `rank`. Collective over the group: every member calls it with
 * the same nranks. `name` (may be NULL, copied) names the group in messages,
 * e.g. the MPI communicator's name. The allgather is called only inside
 * this function (two or three times); nothing else in dfccl communicates
 * out of band. With DFCCL_PROFILE=create (the default) and more than one
 * rank it then measures the group's links (dfcclGroupProfile) with a few
 * collectives on the group: a few milliseconds more.
 * [out] group_p: owned by the caller, freed by dfcclGroupDestroy.
 */
DFCCL_API dfccl_status_t dfcclGroupCreate(dfccl_rank_ctx_t ctx, int nranks, int rank,
                                          dfccl_oob_allgather_fn_t allgather,
                                          void *allgather_arg, const char *name,
                                          dfccl_group_t *group_p);

/*
 * dfcclGroupCreate for callers that cannot block in an allgather (a
 * nonblocking MPI collective, an event loop): the caller runs the
 * exchanges itself, with any transport, at its own pace.
 *
 *   dfcclGroupBootStart(ctx, nranks, rank, name, &boot);
 *   do {
 *       dfcclGroupBootExchange(boot, &send, &bytes);
 *       ... allgather `bytes` bytes from `send` of every rank into `all`,
 *           rank order ...
 *       st = dfcclGroupBootStep(boot, all, &group);
 *   } while (st == DFCCL_INPROGRESS);
 *   dfcclGroupBootFree(boot);
 *
 * There are one to three exchanges; every rank is told the same number and
 * the same sizes, and ends with the same outcome: the group everywhere, or
 * an error everywhere (a rank's own failure travels in its blocks). `ctx`
 * may be NULL on a rank whose context could not be created: it takes part
 * so that its peers fail with it instead of waiting for it. `send` stays
 * valid until the next step. The boot object is freed by
 * dfcclGroupBootFree, whatever the outcome.
 */
DFCCL_API dfccl_status_t dfcclGroupBootStart(dfccl_rank_ctx_t ctx, int nranks, int rank,
                                             const char *name, dfccl_group_boot_t *boot_p);
DFCCL_API dfccl_status_t dfcclGroupBootExchange(dfccl_group_boot_t boot, const void **send_p,
                                                size_t *bytes_p);
/* DFCCL_INPROGRESS: another exchange follows; DFCCL_OK: *group_p is set. */
DFCCL_API dfccl_status_t dfcclGroupBootStep(dfccl_group_boot_t boot, const void *recvbuf,
                                            dfccl_group_t *group_p);
DFCCL_API void dfcclGroupBootFree(dfccl_group_boot_t boot);

/*
 * What a group does when one of its ranks dies (docs/reliability.md, "Fault
 * exclusion"). ABORT, the default: the rank context aborts and every
 * collective in flight fails, the error naming the dead rank. EXCLUDE: the
 * survivors give up the group's runs in flight, agree on the ranks that are
 * gone, build a group of the survivors (rank order kept) under the same
 * handle, register the group's collectives on it under the same ids, and run
 * again the runs that were in flight; they complete with DFCCL_OK, and every
 * collective of the group runs on the survivors from then on (its rank and
 * size are theirs: an allgather's output holds the survivors' blocks). Other
 * groups go on undisturbed.
 */
typedef enum {
    DFCCL_FAULT_ABORT = 0,
    DFCCL_FAULT_EXCLUDE
} dfccl_fault_policy_t;

/*
 * Set the group's fault policy. Collective in effect: every rank of the
 * group sets the same one, before it runs any of the group's collectives.
 * EXCLUDE needs 2 to 63 ranks and, on a group with net (UCX) edges, the
 * net transport on every rank of it (a rank whose ring edges are all on
 * its host starts it only where DFCCL_FAULT_POLICY=exclude was set before
 * the group was created): otherwise it fails with DFCCL_ERR_UNSUPPORTED
 * and the policy stays ABORT. A group starts with
 * the policy of DFCCL_FAULT_POLICY (default abort); where that is exclude
 * and the group cannot exclude, it keeps ABORT and says so in an info
 * line (DFCCL_VERBOSE=1), without an error.
 */
DFCCL_API dfccl_status_t dfcclGroupSetFaultPolicy(dfccl_group_t group,
                                                  dfccl_fault_policy_t policy);

/*
 * The ranks excluded from the group so far, as ranks of the group as it
 * was created, in increasing order: *nexcluded_p of them into `ranks`
 * (which holds the group's size as created; may be NULL to count only).
 * 0 until a rank is excluded. Local.
 */
DFCCL_API dfccl_status_t dfcclGroupExcluded(dfccl_group_t group, int *ranks, int *nexcluded_p);

/*
 * Destroy a group. Fails with DFCCL_ERR_BUSY while any of its collectives
 * is registered. Local: needs no other rank.
 */
DFCCL_API dfccl_status_t dfcclGroupDestroy(dfccl_group_t group);

/*
 * Measure the group's links in the alpha-beta model: alpha, the latency of
 * a step, in microseconds, and beta, a link's bandwidth, in GB/s, of each
 * class of link (dfccl_link_t) its ring has, and a collective's fixed
 * cost; *alpha_us and *beta_gbps are then dfcclGroupModel's. Timed on every
 * rank (a few milliseconds): k calls of S / k bytes against one of S
 * (AdapCC's way), small ring allreduces against small allgathers, and on
 * a group whose ring mixes classes (several hosts, some with several
 * ranks) probes over the ring's edges of one class at a time. Every rank
 * takes the worst of the ranks' answers, so the results are the same on
 * all of them (docs/tuning.md). The algorithms'
 * cost estimates (DFCCL_TUNER=model, dfcclPredict) and ctree's chunk count
 * use them for later registrations. dfcclGroupCreate measures them itself
 * (DFCCL_PROFILE=create); groups set up through dfcclGroupBootStep, whose
 * ranks may be setting up other groups meanwhile, and DFCCL_PROFILE=off
 * start from the backend's nominal values until this is called.
 * Collective: every rank of the group calls it, with no collective of the
 * group running. Either output may be NULL. With DFCCL_PROFILE_EVERY, the
 * refreshes due on this rank run to their end first (their values are
 * then dropped: this call's replace them at once), so every rank must have
 * completed the same collectives of the group by then.
 */
DFCCL_API dfccl_status_t dfcclGroupProfile(dfccl_group_t group, double *alpha_us,
                                           double *beta_gbps);
/*
 * Where a group's link model stands (DFCCL_PROFILE_EVERY: a refresh every
 * N collectives, docs/tuning.md). Local.
 */
typedef struct {
    /* how many times measured values have taken effect in the group's model
     * (dfcclGroupModel, dfcclGroupLinkModel, the tuner): the profile at
     * creation or on request, and each refresh, at the registration from
     * which it applies; 0: the nominal values. The same on every rank at
     * the same place of the group's sequence of registrations. */
    uint64_t generation;
    uint64_t refreshes;   /* refreshes this rank has completed */
    uint64_t pending;     /* of those, the ones whose values take effect at a
                           * later registration on the group */
    uint64_t collectives; /* the group's collectives completed on this rank,
                           * as DFCCL_PROFILE_EVERY counts them (0 without it) */
    uint32_t measured_links; /* a bit (1 << dfccl_link_t) per class of link whose
                              * values (dfcclGroupLinkModel) a profile measured;
                              * the group's other classes are nominal. The same
                              * on every rank, as generation. */
} dfccl_profile_info_t;

/* [out] info_p. */
DFCCL_API dfccl_status_t dfcclGroupProfileInfo(dfccl_group_t group,
                                               dfccl_profile_info_t *info_p);

/* The group's current alpha and beta (dfcclGroupProfile's, or the nominal
 * ones) as its ring sees them: its class's where its ring has one class of
 * link; where it mixes classes, a hop's latency averaged over the ring's
 * edges and the least bandwidth of its classes (dfcclGroupLinkModel gives
 * each class's). 0 and 0 for a group of one rank, which has no links.
 * Local. */
DFCCL_API dfccl_status_t dfcclGroupModel(dfccl_group_t group, double *alpha_us,
                                         double *beta_gbps);
/*
 * The same for one class of link (dfccl_link_t), and the fixed cost of a
 * collective on the group (submission, completion, the daemon's pass),
 * which every algorithm pays once: DFCCL_ERR_UNSUPPORTED, not printed,
 * where the group has no link of that class. Any output may be NULL.
 * Local; the same on every rank.
 */
DFCCL_API dfccl_status_t dfcclGroupLinkModel(dfccl_group_t group, dfccl_link_t link,
                                             double *alpha_us, double *beta_gbps,
                                             double *coll_us);

/*
 * The model's time for a collective on `group`: for desc->algo
 * DFCCL_ALGO_AUTO, the algorithm dfcclRegister would take (DFCCL_ALGO, then
 * `tuner`'s policy: a dfccl_tuner_t, or -1 for the configuration's
 * DFCCL_TUNER) in *algo_p and its predicted microseconds per call; for a
 * named algorithm, that one's, or DFCCL_ERR_UNSUPPORTED (not printed) where
 * it cannot run the collective. desc->count as dfcclRegister reads it (an
 * alltoall's: per pair). What dfccl-bench --algos prints beside the
 * measured times. Local; the same on every rank. Either output may be NULL.
 */
DFCCL_API dfccl_status_t dfcclPredict(dfccl_group_t group, const dfccl_coll_desc_t *desc,
                                      int tuner, dfccl_algo_choice_t *algo_p, double *us_p);

/*
 * Whether `group` can run collectives of `kind` (dfccl_coll_kind_t):
 * DFCCL_OK, or DFCCL_ERR_UNSUPPORTED with the reason in
 * dfcclGetLastErrorMessage(), not printed, for a caller that has another
 * way (the MPI component's previous module). Local; the same answer on
 * every rank. Today only alltoallv is refused, on groups that are not one
 * mesh (dfcclRegisterAllToAllv).
 */
DFCCL_API dfccl_status_t dfcclGroupSupports(dfccl_group_t group, int kind);

/*
 * The order of the group's ring: ranks[p] is the rank at position p (the
 * caller passes nranks entries). The ring takes the hosts in the order of
 * their lowest rank and each host's ranks in rank order, so it crosses
 * between hosts once per host however the job placed its ranks; where every
 * host's ranks are consecutive, it is rank order. The same on every rank.
 */
DFCCL_API dfccl_status_t dfcclGroupRingOrder(dfccl_group_t group, int *ranks);

/*
 * Register a collective on `group`. Local: it needs no other rank, so it can
 * be called at any time, e.g. at the first use of a collective. Every rank
 * must register the group's collectives in the same order with the same
 * count, type, op and root (that is how ranks pair them up); a difference is
 * reported as DFCCL_ERR_MISMATCH, naming both sides, when the collective
 * runs: on every rank of the group that shares a host with the rank that
 * finds it, promptly, with that rank's diagnosis. The group's collectives
 * registered from the mismatched one on pair with the wrong ones, so they
 * all fail the same way; those registered before it still run. A
 * registration that one rank makes in addition to the same arguments as
 * the next one cannot be told apart from it: the ranks then wait, and the
 * watchdog (DFCCL_WARN_S) says which rank has not registered as far.
 * Calls on one group must not race with each other. Higher `priority`
 * runs first when the context orders by priority (DFCCL_PRIORITY=1, the
 * default). [out] coll_id_p: the id to run it with, unique in the context.
 * Counts are in elements: allgather's count is each rank's contribution,
 * reduce-scatter's the count each rank receives.
 */
DFCCL_API dfccl_status_t dfcclRegisterAllReduce(size_t count, dfccl_datatype_t type,
                                                dfccl_op_t op, dfccl_group_t group,
                                                int priority, int *coll_id_p);
DFCCL_API dfccl_status_t dfcclRegisterAllGather(size_t sendcount, dfccl_datatype_t type,
                                                dfccl_group_t group, int priority,
                                                int *coll_id_p);
DFCCL_API dfccl_status_t dfcclRegisterReduceScatter(size_t recvcount, dfccl_datatype_t type,
                                                    dfccl_op_t op, dfccl_group_t group,
                                                    int priority, int *coll_id_p);
DFCCL_API dfccl_status_t dfcclRegisterReduce(size_t count, dfccl_datatype_t type,
                                             dfccl_op_t op, int root, dfccl_group_t group,
                                             int priority, int *coll_id_p);
DFCCL_API dfccl_status_t dfcclRegisterBroadcast(size_t count, dfccl_datatype_t type,
                                                int root, dfccl_group_t group,
                                                int priority, int *coll_id_p);

/*
 * All-to-all: rank r's block q (`count` elements at sendbuff + q * count)
 * goes to rank q, where it lands at recvbuff + r * count. Every rank
 * registers the same count. Buffers must not overlap (an in-place
 * all-to-all copies its input aside first).
 */
DFCCL_API dfccl_status_t dfcclRegisterAllToAll(size_t count, dfccl_datatype_t type,
                                               dfccl_group_t group, int priority,
                                               int *coll_id_p);
/*
 * All-to-all with a count per rank (MPI_Alltoallv): sendcounts[q] elements
 * from sendbuff + sdispls[q] go to rank q, and recvcounts[q] elements from
 * rank q land at recvbuff + rdispls[q] (displacements in elements). Rank
 * r's sendcounts[q] must equal rank q's recvcounts[r]. The arrays hold the
 * group's nranks entries each and are copied. They are the counts of
 * every dfcclRunAllToAllv; dfcclRunAllToAllvCounts gives others for one
 * run and those that follow it. All four NULL: every count 0 until a run
 * gives counts (register once, give the counts at each run, as
 * MPI_Alltoallv does). Each rank gives only
 * its own counts, so the layout (channels, slots) comes from the
 * configuration, not from the sizes; it needs a group whose ranks all
 * write into each other's connectors (one host, at most 8 ranks, no net
 * edge), and fails with DFCCL_ERR_UNSUPPORTED on others.
 */
DFCCL_API dfccl_status_t dfcclRegisterAllToAllv(const size_t *sendcounts, const size_t *sdispls,
                                                const size_t *recvcounts, const size_t *rdispls,
                                                dfccl_datatype_t type, dfccl_group_t group,
                                                int priority, int *coll_id_p);

/* Any collective, described by `desc` (the named functions above are
 * shorthands for it; alltoallv takes counts, which only
 * dfcclRegisterAllToAllv can give). */
DFCCL_API dfccl_status_t dfcclRegister(const dfccl_coll_desc_t *desc, dfccl_group_t group,
                                       int *coll_id_p);

/* What a registered collective runs: its algorithm (DFCCL_ALGO's names:
 * "ring", "oneshot", "twoshot"; "mesh" for all-to-alls whose ranks write
 * into each other's connectors; "msccl:NAME" for an MSCCL program, valid
 * until the collective is deregistered), channels and protocol ("simple",
 * "ll"). */
typedef struct {
    const char *algo;
    int         nchannels;
    const char *proto;
    int         excluded; /* ranks excluded from its group (dfcclGroupExcluded) */
    int         straggler;     /* 1: registered with DFCCL_COLL_STRAGGLER */
    uint32_t    straggler_wait_us; /* its wait, as the rule or the caller set it */
    uint64_t    split_runs;    /* its runs that took two phases on this rank */
} dfccl_coll_info_t;

/* [out] info_p. Local. */
DFCCL_API dfccl_status_t dfcclGetCollInfo(int coll_id, dfccl_rank_ctx_t ctx,
                                          dfccl_coll_info_t *info_p);

/*
 * Release a registered collective's memory. Local. Fails with DFCCL_ERR_BUSY
 * while it is in flight on this rank.
 */
DFCCL_API dfccl_status_t dfcclDeregister(int coll_id, dfccl_rank_ctx_t ctx);

/*
 * Start a registered collective. Returns at once; the callback (may be NULL)
 * runs when it completes. Buffers are device memory on the CUDA backend and
 * host memory on the host backend; the caller keeps them valid and untouched
 * until completion. sendbuff == recvbuff (or, for allgather, sendbuff at
 * recvbuff + rank * count) runs in place. Running an id that is still in
 * flight returns DFCCL_ERR_BUSY.
 *
 * On the CUDA backend the daemon reads sendbuff at any time after the call,
 * on its own stream, which is not ordered with the caller's streams: every
 * GPU write to sendbuff must be complete before the call (synchronize the
 * stream that wrote it; note that cudaMemcpy from pageable host memory may
 * return before its data lands, so wait for the default stream after it).
 * Likewise, results are in recvbuff when the collective completes, and
 * nothing in any stream waits for that by itself.
 */
DFCCL_API dfccl_status_t dfcclRunAllReduce(const void *sendbuff, void *recvbuff, int coll_id,
                                           dfccl_callback_t callback, void *callback_args,
                                           dfccl_rank_ctx_t ctx);
DFCCL_API dfccl_status_t dfcclRunAllGather(const void *sendbuff, void *recvbuff, int coll_id,
                                           dfccl_callback_t callback, void *callback_args,
                                           dfccl_rank_ctx_t ctx);
DFCCL_API dfccl_status_t dfcclRunReduceScatter(const void *sendbuff, void *recvbuff,
                                               int coll_id, dfccl_callback_t callback,
                                               void *callback_args, dfccl_rank_ctx_t ctx);
DFCCL_API dfccl_status_t dfcclRunReduce(const void *sendbuff, void *recvbuff, int coll_id,
                                        dfccl_callback_t callback, void *callback_args,
                                        dfccl_rank_ctx_t ctx);
DFCCL_API dfccl_status_t dfcclRunBroadcast(const void *sendbuff, void *recvbuff, int coll_id,
                                           dfccl_callback_t callback, void *callback_args,
                                           dfccl_rank_ctx_t ctx);
DFCCL_API dfccl_status_t dfcclRunAllToAll(const void *sendbuff, void *recvbuff, int coll_id,
                                          dfccl_callback_t callback, void *callback_args,
                                          dfccl_rank_ctx_t ctx);
DFCCL_API dfccl_status_t dfcclRunAllToAllv(const void *sendbuff, void *recvbuff, int coll_id,
                                           dfccl_callback_t callback, void *callback_args,
                                           dfccl_rank_ctx_t ctx);
/*
 * An alltoallv with counts and displacements for this run (as
 * dfcclRegisterAllToAllv takes them, checked the same way); they stay the
 * alltoallv's counts for later dfcclRunAllToAllv calls. Each rank gives
 * its own, and rank r's sendcounts[q] must equal rank q's recvcounts[r] in
 * this run. Counts that differ from the previous run's cost a copy of the
 * channels' table to the device (a few hundred bytes per rank) before the
 * run is submitted.
 */
DFCCL_API dfccl_status_t dfcclRunAllToAllvCounts(const void *sendbuff, const size_t *sendcounts,
                                                 const size_t *sdispls, void *recvbuff,
                                                 const size_t *recvcounts,
                                                 const size_t *rdispls, int coll_id,
                                                 dfccl_callback_t callback,
                                                 void *callback_args, dfccl_rank_ctx_t ctx);

/* Run any registered collective (the named functions above check in
 * addition that coll_id was registered as their kind). */
DFCCL_API dfccl_status_t dfcclRun(const void *sendbuff, void *recvbuff, int coll_id,
                                  dfccl_callback_t callback, void *callback_args,
                                  dfccl_rank_ctx_t ctx);

/*
 * Batch submissions: dfcclRun* calls between dfcclBatchStart and
 * dfcclBatchEnd reach the daemon together at dfcclBatchEnd, so it schedules
 * them as one set (with priority ordering, the highest first). Batches
 * nest. Runs that wait for a peer's registration are not held back.
 */
DFCCL_API dfccl_status_t dfcclBatchStart(dfccl_rank_ctx_t ctx);
DFCCL_API dfccl_status_t dfcclBatchEnd(dfccl_rank_ctx_t ctx);

/*
 * DFCCL_INPROGRESS while `coll_id` is in flight (or its callback has not run
 * yet), DFCCL_OK once done, or the error it completed with. Never blocks.
 */
DFCCL_API dfccl_status_t dfcclQuery(int coll_id, dfccl_rank_ctx_t ctx);

/*
 * Partial completion (the C-Cube paper's gradient queuing): which bytes of
 * a run's receive buffer are final on this rank while the run goes on, so
 * that a consumer can start on them early (an optimizer step on the
 * leading layers of a gradient buffer, say). MPI cannot express this: a
 * collective completes as a whole there, and the nearest is an
 * MPI_Iallreduce per part, each a collective of its own.
 *
 * Allreduces on the ring, `tree` and `ctree` finalize the part of the
 * buffer that each channel carries (a contiguous range, channel 0 first)
 * from its start: the ring a loop of nranks steps at a time, the trees a
 * chunk (a slot) at a time. The daemon says so in a progress word per
 * channel, written only after the bytes it claims are final in the
 * receive buffer, and only ever forward within a run; each word carries
 * the run it describes, so that a consumer of a run never takes an
 * earlier run's progress for its own. Other algorithms (one shot, two
 * shot, MSCCL programs, the mesh) and collectives other than allreduce
 * complete as a whole: their answer is "whole only", nothing until the
 * run is complete, then everything. There is no callback per chunk: it
 * would cost the poller a pass per chunk; poll dfcclQueryRange, or the
 * words on the device.
 */

/*
 * [out] bytes_ready_p: how many bytes of the receive buffer, from byte
 * `offset` on, the latest run of `coll_id` has finalized on this rank
 * (offset 0: the final prefix). Returns DFCCL_INPROGRESS while the run is
 * in flight (bytes_ready_p may still be short of the end: the run is not
 * complete until dfcclQuery says so), DFCCL_OK once it has completed
 * (everything from offset on; 0 if it never ran), or the error it failed
 * with. Never blocks the daemon: it reads the words, which only the daemon
 * writes. An offset past the receive buffer is DFCCL_ERR_INVALID_ARG.
 */
DFCCL_API dfccl_status_t dfcclQueryRange(int coll_id, size_t offset, dfccl_rank_ctx_t ctx,
                                         size_t *bytes_ready_p);

/* Layout of a progress word: the run (mod 2^24, from 1) in the high 24
 * bits, in the low 40 the elements of the channel's range final from its
 * start; all ones: the whole range. */
#define DFCCL_PROGRESS_RUN_BITS   24
#define DFCCL_PROGRESS_ELEMS_BITS 40
#define DFCCL_PROGRESS_ALL        ((1ull << DFCCL_PROGRESS_ELEMS_BITS) - 1)
#define DFCCL_PARTIAL_MAX_CHANNELS 64

/* What a consumer of partial completion needs (dfcclGetProgress). */
typedef struct {
    /* 1: the collective completes as a whole (see above): every word
     * reaches DFCCL_PROGRESS_ALL for the run at its end, none earlier */
    int                      whole_only;
    int                      nchannels;
    /* the run the words of the latest dfcclRun* of the collective carry
     * (mod 2^24); the next run's is one more */
    uint64_t                 run;
    size_t                   elem_size;
    size_t                   total_bytes;  /* of the receive buffer on this rank */
    size_t                   granularity;  /* bytes a channel's final part grows by
                                            * (a ring loop, a tree chunk); 0: whole only */
    size_t                   chan_off[DFCCL_PARTIAL_MAX_CHANNELS];   /* bytes */
    size_t                   chan_bytes[DFCCL_PARTIAL_MAX_CHANNELS];
    /* nchannels words, in memory the daemon writes: mapped host memory
     * on the CUDA backend (this is its device address, for kernels),
     * plain memory on the host backend */
    const volatile uint64_t *words;
} dfccl_partial_t;

/*
 * [out] partial_p: the words of `coll_id` and how to read them. Local.
 * Take it after dfcclRun* (its `run` is that run's), and read the words
 * with dfcclPartialReady (from a kernel on the CUDA backend: poll it, it
 * acquires what it reports). The words stay valid until the collective is
 * deregistered.
 */
DFCCL_API dfccl_status_t dfcclGetProgress(int coll_id, dfccl_rank_ctx_t ctx,
                                          dfccl_partial_t *partial_p);

#if defined(__CUDACC__)
#define DFCCL_PARTIAL_FN static inline __host__ __device__
#else
#define DFCCL_PARTIAL_FN static inline
#endif

/*
 * Bytes of run p->run's receive buffer final from `offset` on, as `words`
 * (p->words on the device) say; after it returns, the bytes it counts may
 * be read (it orders the reads after its loads of the words).
 */
DFCCL_PARTIAL_FN size_t dfcclPartialReady(const dfccl_partial_t *p,
                                          const volatile uint64_t *words, size_t offset)
{
    const uint64_t run = p->run & ((1ull << DFCCL_PROGRESS_RUN_BITS) - 1);
    size_t end = offset; /* final from offset to here */
    int all = 1, more = 1;

    for (int ch = 0; ch < p->nchannels; ch++) {
        const uint64_t w = words[ch];
        const uint64_t e = (w >> DFCCL_PROGRESS_ELEMS_BITS) == run ? (w & DFCCL_PROGRESS_ALL) : 0;
        const size_t beg = p->chan_off[ch], stop = beg + p->chan_bytes[ch];
        const int whole  = e == DFCCL_PROGRESS_ALL || e * p->elem_size >= p->chan_bytes[ch];
        const size_t done = whole ? stop : beg + e * p->elem_size;

        all = all && e == DFCCL_PROGRESS_ALL;
        if (!more || stop <= offset) {
            continue;
        }
        if (done > end) {
            end = done;
        }
        more = done == stop; /* the next channel's range follows this one's */
    }
#if defined(__CUDA_ARCH__)
    __threadfence();
#elif defined(__GNUC__)
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
#endif
    if (p->whole_only) {
        return all && offset < p->total_bytes ? p->total_bytes - offset : 0;
    }
    return end - offset;
}

/*
 * Block until `coll_id` has completed and its callback has run, driving
 * progress in explicit mode. timeout_ms < 0 waits without limit, as long as
 * the daemon can make progress; the context's timeout still applies.
 * Returns the collective's status, or DFCCL_ERR_TIMEOUT. When another rank
 * of the group (on this host) failed the same run of the collective, it
 * fails here too, with that rank's status and a message naming it and its
 * reason: a registration mismatch, its own failure (a timeout, a dead
 * peer), its aborted context or its destroyed group. A run that had
 * reached the daemon can only fail by aborting the context.
 */
DFCCL_API dfccl_status_t dfcclWait(int coll_id, int timeout_ms, dfccl_rank_ctx_t ctx);

/*
 * Run the callbacks of completed collectives and relaunch the daemon if it
 * quit with work left. Needed only in DFCCL_PROGRESS_EXPLICIT mode.
 * [out] ncompleted_p (may be NULL): callbacks run by this call.
 */
DFCCL_API dfccl_status_t dfcclProgress(dfccl_rank_ctx_t ctx, int *ncompleted_p);

/*
 * Synchronize the device: cudaDeviceSynchronize on the CUDA backend; on the
 * host backend, wait until no daemon block runs, with the same semantics
 * (the daemon quits voluntarily when it is idle or stuck).
 */
DFCCL_API dfccl_status_t dfcclSynchronize(dfccl_rank_ctx_t ctx);

/*
 * Abort the context: the daemon stops at once, every collective in flight
 * completes with DFCCL_ERR_ABORTED, and further runs fail; only
 * dfcclDestroy remains. dfccl aborts by itself when a collective runs past
 * DFCCL_TIMEOUT (it completes with DFCCL_ERR_TIMEOUT, and the message names
 * the collective, its group, which ranks have and have not joined it, which
 * of those that joined do not respond, and where each waits), when a peer
 * process of a collective in flight has exited, or when a rank of the group
 * failed a collective that has reached this rank's daemon (dfcclWait). The
 * group's other ranks on this host then fail what this rank has not
 * finished, instead of waiting for it.
 */
DFCCL_API dfccl_status_t dfcclAbort(dfccl_rank_ctx_t ctx);

/*
 * Print the state of every collective in flight on the context to `out`
 * (stderr when NULL): for each, its group and this rank's position, how
 * long it has waited, which ranks have joined it and which have not, and
 * where the ranks that joined wait (primitive, step, and the peer it waits
 * for). The hang watchdog (DFCCL_WARN_S) and SIGUSR1 (DFCCL_SIGUSR1) print
 * the same report. Reads shared state only: any thread, any time.
 */
DFCCL_API dfccl_status_t dfcclDumpState(dfccl_rank_ctx_t ctx, FILE *out);

/* Counters of the context. [out] stats_p. */
DFCCL_API dfccl_status_t dfcclGetStats(dfccl_rank_ctx_t ctx, dfccl_stats_t *stats_p);

/* The backend the context runs on (never DFCCL_BACKEND_AUTO). */
DFCCL_API dfccl_backend_t dfcclGetBackend(dfccl_rank_ctx_t ctx);

/*
 * Destroy the context: posts the exit SQE, joins the daemon and the poller
 * and frees everything. Fails with DFCCL_ERR_BUSY, changing nothing, while
 * any collective is in flight; wait for them first. Groups must be destroyed
 * before (or are destroyed with) the context.
 */
DFCCL_API dfccl_status_t dfcclDestroy(dfccl_rank_ctx_t ctx);

#ifdef __cplusplus
}
#endif

#endif /* DFCCL_H_ */
