/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The Open MPI coll component "dfccl": shared declarations. The component
 * (coll_dfccl_component.c) holds the MCA variables and the process's dfccl
 * state; a module per communicator (coll_dfccl_module.c) keeps the previous
 * module's functions and the communicator's dfccl group, set up without
 * blocking by coll_dfccl_bootstrap.c; a call is described once
 * (mca_coll_dfccl_args_t) by the entry points of its family
 * (coll_dfccl_<family>.c) and routed by coll_dfccl_run.c: to dfccl, where
 * the family gives a plan (mca_coll_dfccl_plan_t), or to the previous
 * module through the one fallback helper (coll_dfccl_fallback.c), which
 * stages device buffers through host memory. coll_dfccl_mem.c asks CUDA
 * what a pointer is and copies.
 */
#ifndef MCA_COLL_DFCCL_H_
#define MCA_COLL_DFCCL_H_

#include "ompi_config.h"

#include <pthread.h>
#include <stdint.h>

#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/mca/coll/base/coll_base_util.h"
#include "ompi/mca/coll/coll.h"
#include "ompi/op/op.h"
#include "ompi/request/request.h"

#include "dfccl.h"

BEGIN_C_DECLS

/* Every MPI collective: the previous module's table and the router use it. */
typedef enum {
    MCA_COLL_DFCCL_ALLREDUCE = 0,
    MCA_COLL_DFCCL_REDUCE,
    MCA_COLL_DFCCL_REDUCE_LOCAL, /* blocking only */
    MCA_COLL_DFCCL_SCAN,
    MCA_COLL_DFCCL_EXSCAN,
    MCA_COLL_DFCCL_ALLGATHER,
    MCA_COLL_DFCCL_ALLGATHERV,
    MCA_COLL_DFCCL_GATHER,
    MCA_COLL_DFCCL_GATHERV,
    MCA_COLL_DFCCL_REDUCE_SCATTER_BLOCK,
    MCA_COLL_DFCCL_REDUCE_SCATTER,
    MCA_COLL_DFCCL_SCATTER,
    MCA_COLL_DFCCL_SCATTERV,
    MCA_COLL_DFCCL_BCAST,
    MCA_COLL_DFCCL_BARRIER,
    MCA_COLL_DFCCL_ALLTOALL,
    MCA_COLL_DFCCL_ALLTOALLV,
    MCA_COLL_DFCCL_ALLTOALLW,
    MCA_COLL_DFCCL_NEIGHBOR_ALLGATHER,
    MCA_COLL_DFCCL_NEIGHBOR_ALLGATHERV,
    MCA_COLL_DFCCL_NEIGHBOR_ALLTOALL,
    MCA_COLL_DFCCL_NEIGHBOR_ALLTOALLV,
    MCA_COLL_DFCCL_NEIGHBOR_ALLTOALLW,
    MCA_COLL_DFCCL_NCOLLS
} mca_coll_dfccl_coll_t;

typedef enum {
    MCA_COLL_DFCCL_BLOCKING = 0,
    MCA_COLL_DFCCL_NONBLOCKING, /* MPI_I* */
    MCA_COLL_DFCCL_PERSISTENT,  /* MPIX_*_init, then MPI_Start */
    MCA_COLL_DFCCL_NFORMS
} mca_coll_dfccl_form_t;

/* What `coll_dfccl_backend` and the machine give. */
typedef enum {
    MCA_COLL_DFCCL_MODE_OFF = 0, /* every call takes the previous module as it is */
    MCA_COLL_DFCCL_MODE_CUDA,    /* dfccl takes CUDA memory */
    MCA_COLL_DFCCL_MODE_HOST     /* dfccl takes host memory (host backend) */
} mca_coll_dfccl_mode_t;

/*
 * One MPI call, whatever the collective: the arguments as the application
 * gave them. Collectives of one buffer and count use rbuf/rcount/rdt (bcast)
 * or both sides alike (allreduce: scount == rcount, sdt == rdt). Arrays are
 * the application's, valid until the call completes (MPI's rule).
 */
typedef struct {
    mca_coll_dfccl_coll_t        coll;
    mca_coll_dfccl_form_t        form;
    const void                  *sbuf;
    void                        *rbuf;
    int                          scount, rcount;
    const int                   *scounts, *sdispls, *rcounts, *rdispls;
    const MPI_Aint              *sdispls_b, *rdispls_b; /* neighbor_alltoallw: bytes */
    struct ompi_datatype_t      *sdt, *rdt;
    struct ompi_datatype_t *const *sdts, *const *rdts; /* alltoallw */
    struct ompi_op_t            *op;
    int                          root;
    struct ompi_communicator_t  *comm;
    struct ompi_info_t          *info;
} mca_coll_dfccl_args_t;

typedef struct {
    mca_coll_base_component_2_0_0_t super;

    /* MCA variables */
    int    priority;
    int    verbose;
    int    instances;  /* registrations per signature and communicator */
    int    sync_default_stream; /* settle the legacy default stream before a
                                 * device collective starts: 1 always, 0 never,
                                 * -1 when a buffer's copies may be in flight */
    dfccl_config_t cfg; /* dfcclConfigInit defaults (env applied), then MCA values:
                         * every tunable of dfccl is an MCA variable */
    int    cfg_ok;     /* dfcclConfigInit succeeded */

    /* the process's dfccl state */
    pthread_mutex_t    lock;          /* binding, request life, the setup list */
    mca_coll_dfccl_mode_t mode;       /* decided at the first enable */
    int                mode_known;
    int                gpus;          /* GPUs visible (0 without CUDA) */
    int                bound;         /* the context was tried (atomic) */
    dfccl_rank_ctx_t   ctx;           /* NULL until bound, or if that failed */
    int                device;        /* the GPU it runs on (cuda mode) */
    int                progress_registered;
    int                used;          /* some communicator enabled the module */
    uint64_t           fallbacks;     /* calls handed to the previous module */
    uint64_t           staged;        /* of which with device buffers staged */

    /* communicators whose group setup is in flight (atomic count, list) */
    int                         nsetup;
    struct mca_coll_dfccl_module *setup_head;

    /* completions reported by dfccl callbacks (any thread), handled in
     * opal_progress on an MPI thread */
    pthread_mutex_t             done_lock;
    int                         running; /* runs handed to dfccl, not yet done (atomic) */
    struct mca_coll_dfccl_op   *done_head, *done_tail;
    /* fallbacks whose previous-module request is pending */
    struct mca_coll_dfccl_req  *inner_head;
} mca_coll_dfccl_component_t;

OMPI_MODULE_DECLSPEC extern mca_coll_dfccl_component_t mca_coll_dfccl_component;

/*
 * Stage times of blocking calls, a diagnostic build only (-DDFCCL_STAGE_TIMES,
 * as for the daemon's): a blocking call through dfccl stamps the clock as it
 * reaches each stage, and MPI_Finalize prints the average time from the
 * previous stamped stage to each, per rank.
 */
enum {
    MCA_COLL_DFCCL_T_ENTER = 0, /* the collective's entry */
    MCA_COLL_DFCCL_T_ROUTED,    /* memory kinds asked, path chosen */
    MCA_COLL_DFCCL_T_REQ,       /* request made */
    MCA_COLL_DFCCL_T_SETTLED,   /* CUDA's default stream waited for */
    MCA_COLL_DFCCL_T_SUBMITTED, /* dfcclRun returned */
    MCA_COLL_DFCCL_T_CALLBACK,  /* dfccl's completion callback ran */
    MCA_COLL_DFCCL_T_DONE,      /* the progress loop took the completion */
    MCA_COLL_DFCCL_T_WAITED,    /* the request's wait returned */
    MCA_COLL_DFCCL_T_FREED,     /* request freed: the call returns */
    MCA_COLL_DFCCL_NT
};
#ifdef DFCCL_STAGE_TIMES
void mca_coll_dfccl_stamp(int stage);
void mca_coll_dfccl_stamp_sum(void);
void mca_coll_dfccl_stamp_print(void);
#define MCA_COLL_DFCCL_STAMP(stage) mca_coll_dfccl_stamp(stage)
#else
#define MCA_COLL_DFCCL_STAMP(stage) ((void)0)
#endif

/* A registration signature: every rank derives the same one for a call. */
typedef struct {
    dfccl_coll_kind_t kind;
    size_t            count;
    dfccl_datatype_t  dtype;
    dfccl_op_t        op;
    int               root;
} mca_coll_dfccl_sig_t;

/*
 * How dfccl runs a call, from its family's plan function. dfccl reads
 * s_bytes at s_user (or, with s_user NULL, in place: at its receive buffer
 * plus s_off) and writes r_bytes at r_user (NULL: nothing, reduce off the
 * root). A buffer the daemon cannot read where it is (another GPU, host
 * memory) goes through a device temporary of the registration: copied in
 * before the run where it is input (s; r where r_in), and out after it
 * where r_out: out_bytes from out_off of the temporary to r_user. r_tmp:
 * the receive side is always a temporary (reduce_scatter with unequal
 * counts runs as an allreduce of every block). s_copy (with s_user NULL):
 * the input is the receive buffer, but dfccl needs it apart (all-to-all in
 * place): s_bytes of r_user are copied into the send temporary first.
 */
typedef struct {
    mca_coll_dfccl_sig_t sig;
    const void          *s_user;
    size_t               s_bytes, s_off;
    void                *r_user;
    size_t               r_bytes;
    int                  r_in, r_out, r_tmp, s_copy;
    size_t               out_off, out_bytes;
} mca_coll_dfccl_plan_t;

/* Where a call goes: dfccl's plan for it, and what its buffers are. */
typedef struct {
    int                   native; /* dfccl takes it (if its communicator's setup works) */
    int                   cuda;   /* some buffer of this rank is CUDA memory */
    int                   settle; /* a copy into a buffer may still be in flight */
    int                   device; /* the GPU of its first device buffer, -1 if none */
    int                   s_kind, s_gpu, r_kind, r_gpu; /* mca_coll_dfccl_mem_t, GPU */
    mca_coll_dfccl_plan_t plan;
} mca_coll_dfccl_route_t;

/* 1 and the plan if dfccl can run the call (type, op, count, layout). */
typedef int (*mca_coll_dfccl_plan_fn_t)(const mca_coll_dfccl_args_t *a,
                                        mca_coll_dfccl_plan_t *plan);

struct mca_coll_dfccl_op;

/* One registered dfccl collective; runs one op at a time, others queue. */
typedef struct {
    int                       coll_id; /* -1 until first used */
    int                       busy;
    struct mca_coll_dfccl_op *wait_head, *wait_tail;
    void                     *tmp[2];  /* device temporaries: send, receive side */
    size_t                    tmp_bytes[2];
} mca_coll_dfccl_inst_t;

typedef struct mca_coll_dfccl_entry {
    struct mca_coll_dfccl_entry *next;
    mca_coll_dfccl_sig_t         sig;
    uint64_t                     calls; /* the k-th call uses instance k mod K */
    int                          ninst;
    mca_coll_dfccl_inst_t        inst[];
} mca_coll_dfccl_entry_t;

#define MCA_COLL_DFCCL_HASH 64

/* The previous module's function for one collective in one form. */
typedef struct {
    void                   (*fn)(void);
    mca_coll_base_module_t  *module;
} mca_coll_dfccl_prev_t;

/* The communicator's dfccl group setup (coll_dfccl_bootstrap.c). */
enum {
    MCA_COLL_DFCCL_SETUP_NONE = 0, /* not needed yet */
    MCA_COLL_DFCCL_SETUP_RUNNING,  /* exchanges in flight */
    MCA_COLL_DFCCL_SETUP_READY,    /* the group exists on every rank */
    MCA_COLL_DFCCL_SETUP_FAILED    /* on some rank: calls take the previous module */
};

typedef struct mca_coll_dfccl_module {
    mca_coll_base_module_t      super;
    struct ompi_communicator_t *comm;
    pthread_mutex_t             lock;  /* cache, instances, queue, setup */
    mca_coll_dfccl_prev_t       prev[MCA_COLL_DFCCL_NCOLLS][MCA_COLL_DFCCL_NFORMS];

    /* setup: SETUP_* (read without the lock) and its exchanges */
    int                         setup;
    dfccl_group_boot_t          boot;
    char                       *boot_all;
    size_t                      boot_bytes;
    ompi_request_t            **boot_reqs;
    int                         boot_nreqs;
    struct mca_coll_dfccl_module *setup_next;
    double                      setup_t0;     /* when it started (MPI_Wtime's clock) */
    int                         setup_late;   /* ended past coll_dfccl_timeout */
    double                      setup_warn_at; /* next watchdog line, s after setup_t0 */
    char                       *setup_why;    /* why it failed, for the queued calls */
    dfccl_group_t               group;

    /* calls made while the setup ran, in call order; they start when it
     * ends so that every rank starts them in the same order */
    struct mca_coll_dfccl_req  *pend_head, *pend_tail;
    int                         draining;

    mca_coll_dfccl_entry_t     *hash[MCA_COLL_DFCCL_HASH];
    int                         inflight;
    /* alltoallv: coll_dfccl_instances registrations used in turn, each
     * registered again for every call (its counts are fixed at
     * registration; see coll_dfccl_run.c); NULL until the first */
    unsigned                    refused; /* 1 << kind: dfccl refused it on this group */
} mca_coll_dfccl_module_t;

OBJ_CLASS_DECLARATION(mca_coll_dfccl_module_t);

/*
 * One dfccl run, embedded in its request. The dfccl callback only queues it
 * on the component's done list; everything else (copies out, the next
 * chained run, completing the request) happens in opal_progress on an MPI
 * thread.
 */
typedef struct mca_coll_dfccl_op {
    struct mca_coll_dfccl_op  *next;
    mca_coll_dfccl_entry_t    *entry;
    int                        inst;
    int                        s_stage, r_stage; /* through the temporaries */
    void                      *r_dev;   /* what dfccl wrote */
    dfccl_status_t             status;
    int                        settle;  /* wait for CUDA's default stream first */
    struct mca_coll_dfccl_req *req;
} mca_coll_dfccl_op_t;

/* A host copy of a buffer for the previous module: [lo, hi) of the
 * application's pointer `user`. */
typedef struct {
    void     *user;
    char     *host;
    ptrdiff_t lo, hi;
    int       in, out;
} mca_coll_dfccl_stage_t;

typedef struct mca_coll_dfccl_req {
    ompi_coll_base_nbc_request_t super;
    mca_coll_dfccl_module_t     *module;
    mca_coll_dfccl_args_t        args;
    mca_coll_dfccl_route_t       route;    /* a persistent request's: taken at init */
    int                          native;   /* this run is dfccl's */
    mca_coll_dfccl_op_t          op;
    int                          freed;    /* MPI_Request_free while active */
    int                          completed;
    /* the previous module's request on host copies */
    ompi_request_t              *inner;
    struct mca_coll_dfccl_req   *inner_next;
    int                          nstages;
    mca_coll_dfccl_stage_t       stages[2];
    struct mca_coll_dfccl_req   *pend_next;
} mca_coll_dfccl_req_t;

OBJ_CLASS_DECLARATION(mca_coll_dfccl_req_t);

/* coll_dfccl_component.c */
#define MCA_COLL_DFCCL_VERBOSE(_lvl, ...)                                      \
    do {                                                                       \
        if (mca_coll_dfccl_component.verbose >= (_lvl)) {                      \
            mca_coll_dfccl_log(__VA_ARGS__);                                   \
        }                                                                      \
    } while (0)
void mca_coll_dfccl_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void mca_coll_dfccl_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The MPI error class of a dfccl status: one place, so that a failure gives
 * the same class wherever it is caught. */
int mca_coll_dfccl_mpi_error(dfccl_status_t st);
const char *mca_coll_dfccl_coll_name(mca_coll_dfccl_coll_t coll);

/* coll_dfccl_module.c */
int mca_coll_dfccl_init_query(bool enable_progress_threads, bool enable_mpi_threads);
mca_coll_base_module_t *mca_coll_dfccl_comm_query(struct ompi_communicator_t *comm,
                                                  int *priority);
void mca_coll_dfccl_finalize(void);
/* A printable name of the communicator: "name (cid N)". */
const char *mca_coll_dfccl_comm_name(struct ompi_communicator_t *comm, char *buf,
                                     size_t len);

/* coll_dfccl_bootstrap.c */
/* Create the process's context, on `device` (cuda; -1: the calling thread's
 * current device). Once: later calls return what the first one made. */
void mca_coll_dfccl_bind(int device);
/* Start the communicator's group setup if it has not started. Module lock. */
void mca_coll_dfccl_setup_start(mca_coll_dfccl_module_t *m);
/* Advance every setup in flight; ended ones start their queued calls. */
int mca_coll_dfccl_setup_progress(void);
/* Start the communicator's queued calls, in order. */
void mca_coll_dfccl_drain(mca_coll_dfccl_module_t *m);
/* Let the communicator's setup end (module destruction): bounded. */
void mca_coll_dfccl_setup_finish(mca_coll_dfccl_module_t *m);

/* coll_dfccl_mem.c */
typedef enum {
    MCA_COLL_DFCCL_MEM_HOST = 0, /* plain host memory, unknown to CUDA */
    MCA_COLL_DFCCL_MEM_DEVICE,   /* device memory (cudaMalloc, pools, VMM) */
    MCA_COLL_DFCCL_MEM_MANAGED,  /* cudaMallocManaged */
    MCA_COLL_DFCCL_MEM_PINNED    /* page-locked or registered host memory */
} mca_coll_dfccl_mem_t;
/* What `ptr` is, its GPU (device memory; else -1), and whether a
 * synchronous copy into it may still be in flight (*settle |= 1). */
mca_coll_dfccl_mem_t mca_coll_dfccl_mem_query(const void *ptr, int *device_p, int *settle);
/* Whether the daemon reads and writes it where it is. */
int mca_coll_dfccl_mem_direct(mca_coll_dfccl_mem_t kind, int device);
int mca_coll_dfccl_copy(void *dst, const void *src, size_t bytes);
int mca_coll_dfccl_settle_default_stream(void);
/* dfccl's kind of memory (device memory on its GPU, or host memory). */
void *mca_coll_dfccl_tmp_alloc(size_t bytes);
void mca_coll_dfccl_tmp_free(void *p);
int mca_coll_dfccl_current_device(void);

/* coll_dfccl_fallback.c */
/* Call the previous module for `a` in form `form` on buffers sbuf/rbuf (the
 * application's or host copies); *request for the nonblocking and
 * persistent forms. */
int mca_coll_dfccl_previous(mca_coll_dfccl_module_t *m, const mca_coll_dfccl_args_t *a,
                            mca_coll_dfccl_form_t form, const void *sbuf, void *rbuf,
                            ompi_request_t **request);
int mca_coll_dfccl_has_previous(mca_coll_dfccl_module_t *m, mca_coll_dfccl_coll_t coll,
                                mca_coll_dfccl_form_t form);
/* The send and receive regions of `a` on this rank; 0 for none. */
int mca_coll_dfccl_spans(const mca_coll_dfccl_args_t *a, mca_coll_dfccl_stage_t spans[2]);
/* The fallback of a call whose buffers are staged where they are CUDA
 * memory: blocking runs it; the other forms start it on `req`. */
int mca_coll_dfccl_fallback(mca_coll_dfccl_module_t *m, const mca_coll_dfccl_args_t *a,
                            mca_coll_dfccl_req_t *req);
void mca_coll_dfccl_stages_free(mca_coll_dfccl_req_t *req);
/* Fallbacks whose previous-module request completed: copy out, complete. */
int mca_coll_dfccl_fallback_progress(void);

/* coll_dfccl_run.c */
/* Route and run one call (every entry point ends here). */
int mca_coll_dfccl_call(mca_coll_dfccl_module_t *m, const mca_coll_dfccl_args_t *a,
                        mca_coll_dfccl_plan_fn_t plan, ompi_request_t **request);
/* Start a queued call now that its communicator's setup ended. */
void mca_coll_dfccl_start_queued(mca_coll_dfccl_module_t *m, mca_coll_dfccl_req_t *req);
int mca_coll_dfccl_progress(void);
/* Make sure opal_progress calls mca_coll_dfccl_progress. */
void mca_coll_dfccl_progress_need(void);
mca_coll_dfccl_req_t *mca_coll_dfccl_req_new(mca_coll_dfccl_module_t *m,
                                             const mca_coll_dfccl_args_t *a);
void mca_coll_dfccl_req_finish(mca_coll_dfccl_req_t *req, int status);
void mca_coll_dfccl_release_entries(mca_coll_dfccl_module_t *m);
/* the datatypes and ops dfccl has (0 when it has not) */
int mca_coll_dfccl_map_type(struct ompi_datatype_t *dt, dfccl_datatype_t *t);
int mca_coll_dfccl_map_op(struct ompi_op_t *op, dfccl_op_t *o);
/* bytes of `count` elements of a contiguous type at lb 0, or 0 */
size_t mca_coll_dfccl_contig_bytes(struct ompi_datatype_t *dt, size_t count);
/* A collective of a block per rank (allgather, alltoall): the bytes of one
 * block, equal on both sides (MPI_IN_PLACE: the receive side's) and
 * contiguous for all n blocks of the receive side (and of the send side
 * when `send_n`), or 0 when it cannot run as bytes */
size_t mca_coll_dfccl_block_bytes(const mca_coll_dfccl_args_t *a, int send_n);

/* The entry points, a file per family; `module` is ours. */
#define MCA_COLL_DFCCL_UNPAREN(...) __VA_ARGS__
#define MCA_COLL_DFCCL_DECLARE(_name, ...)                                                \
    int mca_coll_dfccl_##_name(__VA_ARGS__, struct ompi_communicator_t *comm,           \
                               mca_coll_base_module_t *module);                         \
    int mca_coll_dfccl_i##_name(__VA_ARGS__, struct ompi_communicator_t *comm,          \
                                ompi_request_t **request, mca_coll_base_module_t *module); \
    int mca_coll_dfccl_##_name##_init(__VA_ARGS__, struct ompi_communicator_t *comm,    \
                                      struct ompi_info_t *info, ompi_request_t **request, \
                                      mca_coll_base_module_t *module)

/* coll_dfccl_allreduce.c: allreduce, reduce, scan, exscan, reduce_local */
MCA_COLL_DFCCL_DECLARE(allreduce, const void *sbuf, void *rbuf, int count,
                       struct ompi_datatype_t *dt, struct ompi_op_t *op);
MCA_COLL_DFCCL_DECLARE(reduce, const void *sbuf, void *rbuf, int count,
                       struct ompi_datatype_t *dt, struct ompi_op_t *op, int root);
MCA_COLL_DFCCL_DECLARE(scan, const void *sbuf, void *rbuf, int count,
                       struct ompi_datatype_t *dt, struct ompi_op_t *op);
MCA_COLL_DFCCL_DECLARE(exscan, const void *sbuf, void *rbuf, int count,
                       struct ompi_datatype_t *dt, struct ompi_op_t *op);
int mca_coll_dfccl_reduce_local(const void *inbuf, void *inoutbuf, int count,
                                struct ompi_datatype_t *dt, struct ompi_op_t *op,
                                mca_coll_base_module_t *module);
/* coll_dfccl_allgather.c: allgather(v), gather(v) */
MCA_COLL_DFCCL_DECLARE(allgather, const void *sbuf, int scount, struct ompi_datatype_t *sdt,
                       void *rbuf, int rcount, struct ompi_datatype_t *rdt);
MCA_COLL_DFCCL_DECLARE(allgatherv, const void *sbuf, int scount, struct ompi_datatype_t *sdt,
                       void *rbuf, const int *rcounts, const int *displs,
                       struct ompi_datatype_t *rdt);
MCA_COLL_DFCCL_DECLARE(gather, const void *sbuf, int scount, struct ompi_datatype_t *sdt,
                       void *rbuf, int rcount, struct ompi_datatype_t *rdt, int root);
MCA_COLL_DFCCL_DECLARE(gatherv, const void *sbuf, int scount, struct ompi_datatype_t *sdt,
                       void *rbuf, const int *rcounts, const int *displs,
                       struct ompi_datatype_t *rdt, int root);
/* coll_dfccl_reduce_scatter.c: reduce_scatter(_block), scatter(v) */
MCA_COLL_DFCCL_DECLARE(reduce_scatter_block, const void *sbuf, void *rbuf, int rcount,
                       struct ompi_datatype_t *dt, struct ompi_op_t *op);
MCA_COLL_DFCCL_DECLARE(reduce_scatter, const void *sbuf, void *rbuf, const int *rcounts,
                       struct ompi_datatype_t *dt, struct ompi_op_t *op);
MCA_COLL_DFCCL_DECLARE(scatter, const void *sbuf, int scount, struct ompi_datatype_t *sdt,
                       void *rbuf, int rcount, struct ompi_datatype_t *rdt, int root);
MCA_COLL_DFCCL_DECLARE(scatterv, const void *sbuf, const int *scounts, const int *displs,
                       struct ompi_datatype_t *sdt, void *rbuf, int rcount,
                       struct ompi_datatype_t *rdt, int root);
/* coll_dfccl_bcast.c: bcast, barrier */
MCA_COLL_DFCCL_DECLARE(bcast, void *buf, int count, struct ompi_datatype_t *dt, int root);
int mca_coll_dfccl_barrier(struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_dfccl_ibarrier(struct ompi_communicator_t *comm, ompi_request_t **request,
                            mca_coll_base_module_t *module);
int mca_coll_dfccl_barrier_init(struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                ompi_request_t **request, mca_coll_base_module_t *module);
/* dfccl's alltoallv needs its mesh, which takes at most this many ranks
 * (dfcclRegisterAllToAllv in dfccl.h): larger communicators are not asked,
 * so that dfccl does not print its refusal on every rank of them. */
#define MCA_COLL_DFCCL_A2AV_MAX_RANKS 8
/* coll_dfccl_alltoall.c: an alltoallv's blocks in bytes, for dfccl: v
 * (4 * comm size entries, or NULL) gets sendcounts, sdispls, recvcounts,
 * rdispls, displacements from the start of each side's span, whose offset
 * from the application's pointer and length go to *s_lo, *s_len, *r_lo,
 * *r_len; 0 where a type is not contiguous. */
int mca_coll_dfccl_alltoallv_layout(const mca_coll_dfccl_args_t *a, size_t *v, ptrdiff_t *s_lo,
                                    size_t *s_len, ptrdiff_t *r_lo, size_t *r_len);
/* coll_dfccl_alltoall.c: alltoall(v, w) and */
MCA_COLL_DFCCL_DECLARE(alltoall, const void *sbuf, int scount, struct ompi_datatype_t *sdt,
                       void *rbuf, int rcount, struct ompi_datatype_t *rdt);
MCA_COLL_DFCCL_DECLARE(alltoallv, const void *sbuf, const int *scounts, const int *sdispls,
                       struct ompi_datatype_t *sdt, void *rbuf, const int *rcounts,
                       const int *rdispls, struct ompi_datatype_t *rdt);
MCA_COLL_DFCCL_DECLARE(alltoallw, const void *sbuf, const int *scounts, const int *sdispls,
                       struct ompi_datatype_t *const *sdts, void *rbuf, const int *rcounts,
                       const int *rdispls, struct ompi_datatype_t *const *rdts);
/* coll_dfccl_alltoall.c: the neighborhood collectives */
MCA_COLL_DFCCL_DECLARE(neighbor_allgather, const void *sbuf, int scount,
                       struct ompi_datatype_t *sdt, void *rbuf, int rcount,
                       struct ompi_datatype_t *rdt);
MCA_COLL_DFCCL_DECLARE(neighbor_allgatherv, const void *sbuf, int scount,
                       struct ompi_datatype_t *sdt, void *rbuf, const int *rcounts,
                       const int *displs, struct ompi_datatype_t *rdt);
MCA_COLL_DFCCL_DECLARE(neighbor_alltoall, const void *sbuf, int scount,
                       struct ompi_datatype_t *sdt, void *rbuf, int rcount,
                       struct ompi_datatype_t *rdt);
MCA_COLL_DFCCL_DECLARE(neighbor_alltoallv, const void *sbuf, const int *scounts,
                       const int *sdispls, struct ompi_datatype_t *sdt, void *rbuf,
                       const int *rcounts, const int *rdispls, struct ompi_datatype_t *rdt);
MCA_COLL_DFCCL_DECLARE(neighbor_alltoallw, const void *sbuf, const int *scounts,
                       const MPI_Aint *sdispls, struct ompi_datatype_t *const *sdts,
                       void *rbuf, const int *rcounts, const MPI_Aint *rdispls,
                       struct ompi_datatype_t *const *rdts);

/* Our module as the entry points get it. */
#define MCA_COLL_DFCCL_MODULE(_module) ((mca_coll_dfccl_module_t *)(_module))

/*
 * The three forms of one collective's entry point: `_params` are its own
 * parameters (in parentheses), the rest the designated initializers of its
 * mca_coll_dfccl_args_t; `_plan` is its family's plan, or NULL where only
 * the previous module runs it.
 */
#define MCA_COLL_DFCCL_ENTRY(_name, _coll, _plan, _params, ...)                                   int mca_coll_dfccl_##_name(MCA_COLL_DFCCL_UNPAREN _params,                                                              struct ompi_communicator_t *comm,                                                            mca_coll_base_module_t *module)                                   {                                                                                                 mca_coll_dfccl_args_t a = {                                                                       .coll = (_coll), .form = MCA_COLL_DFCCL_BLOCKING, .comm = comm, __VA_ARGS__};             return mca_coll_dfccl_call(MCA_COLL_DFCCL_MODULE(module), &a, (_plan), NULL);            }                                                                                             int mca_coll_dfccl_i##_name(MCA_COLL_DFCCL_UNPAREN _params,                                                              struct ompi_communicator_t *comm, ompi_request_t **request,                                  mca_coll_base_module_t *module)                                  {                                                                                                 mca_coll_dfccl_args_t a = {                                                                       .coll = (_coll), .form = MCA_COLL_DFCCL_NONBLOCKING, .comm = comm, __VA_ARGS__};          return mca_coll_dfccl_call(MCA_COLL_DFCCL_MODULE(module), &a, (_plan), request);         }                                                                                             int mca_coll_dfccl_##_name##_init(MCA_COLL_DFCCL_UNPAREN _params,                                                              struct ompi_communicator_t *comm,                                                            struct ompi_info_t *info, ompi_request_t **request,                                          mca_coll_base_module_t *module)                            {                                                                                                 mca_coll_dfccl_args_t a = {.coll = (_coll),                                                                              .form = MCA_COLL_DFCCL_PERSISTENT,                                                            .comm = comm,                                                                                 .info = info,                                                                                 __VA_ARGS__};                                                      return mca_coll_dfccl_call(MCA_COLL_DFCCL_MODULE(module), &a, (_plan), request);         }

END_C_DECLS

#endif /* MCA_COLL_DFCCL_H_ */
