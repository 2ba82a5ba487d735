/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The Open MPI coll component "dfccl": shared declarations of the component
 * (MCA variables, the process's dfccl rank context, the completion queue
 * drained by opal_progress), the per-communicator module (the previous
 * module's functions it falls back to, the dfccl group, the cache of
 * registered collectives) and the request type of nonblocking and persistent
 * calls. How a call is routed is described in coll_dfccl_colls.c; how the
 * group is bootstrapped and instances are chosen in coll_dfccl_module.c.
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

/* Collectives the component runs on dfccl. */
typedef enum {
    MCA_COLL_DFCCL_ALLREDUCE = 0,
    MCA_COLL_DFCCL_ALLGATHER,
    MCA_COLL_DFCCL_REDUCE_SCATTER, /* dfccl's: equal counts */
    MCA_COLL_DFCCL_REDUCE,
    MCA_COLL_DFCCL_BCAST,
    MCA_COLL_DFCCL_KIND_COUNT
} mca_coll_dfccl_kind_t;

/* What `coll_dfccl_backend` selected (dfccl's own enum plus "off"). */
typedef enum {
    MCA_COLL_DFCCL_MODE_OFF = 0, /* no context: every call takes the previous module */
    MCA_COLL_DFCCL_MODE_CUDA,    /* dfccl takes device (and managed) buffers */
    MCA_COLL_DFCCL_MODE_HOST     /* dfccl takes host buffers (host backend) */
} mca_coll_dfccl_mode_t;

typedef struct {
    mca_coll_base_component_2_0_0_t super;

    /* MCA variables */
    int    priority;
    int    verbose;
    int    backend;    /* dfccl_backend_t */
    int    progress;   /* dfccl_progress_t */
    int    transport;  /* dfccl_transport_t */
    int    proto;      /* dfccl_proto_t */
    int    arrivals;   /* dfccl_arrivals_t */
    int    instances;  /* registrations per signature and communicator */
    int    sync_default_stream; /* settle the legacy default stream before a
                                 * device collective starts: 1 always, 0 never,
                                 * -1 when a buffer's copies may be in flight */
    dfccl_config_t cfg; /* dfcclConfigInit defaults (env applied), then MCA values */
    int    cfg_ok;     /* dfcclConfigInit succeeded */

    /* the process's dfccl state, created at the first enable */
    pthread_mutex_t    lock;          /* ctx creation, stats, request life */
    int                ctx_tried;
    dfccl_rank_ctx_t   ctx;
    mca_coll_dfccl_mode_t mode;
    int                progress_registered;
    int                world_rank;
    int                used;          /* some communicator enabled the module */
    uint64_t           fallbacks;     /* calls handed to the previous module */
    uint64_t           ctx_collectives; /* dfccl stats saved before destroy */

    /* completions reported by dfccl callbacks (any thread), handled in
     * opal_progress on an MPI thread */
    pthread_mutex_t             done_lock;
    int                         running; /* runs handed to dfccl, not yet done (atomic) */
    struct mca_coll_dfccl_op   *done_head, *done_tail;
    /* staged fallbacks whose previous-module request is pending */
    struct mca_coll_dfccl_req  *staged_head;
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
    MCA_COLL_DFCCL_T_SUBMITTED, /* dfcclRun* returned */
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
    int               kind;
    size_t            count;
    dfccl_datatype_t  dtype;
    dfccl_op_t        op;
    int               root;
} mca_coll_dfccl_sig_t;

struct mca_coll_dfccl_op;

/* One registered dfccl collective; runs one op at a time, others queue. */
typedef struct {
    int                       coll_id; /* -1 until first used */
    int                       busy;
    struct mca_coll_dfccl_op *wait_head, *wait_tail;
    void                     *tmp;     /* reduce_scatter with unequal counts */
    size_t                    tmp_bytes;
} mca_coll_dfccl_inst_t;

typedef struct mca_coll_dfccl_entry {
    struct mca_coll_dfccl_entry *next;
    mca_coll_dfccl_sig_t         sig;
    uint64_t                     calls; /* the k-th call uses instance k mod K */
    int                          ninst;
    mca_coll_dfccl_inst_t        inst[];
} mca_coll_dfccl_entry_t;

#define MCA_COLL_DFCCL_HASH 64

typedef struct {
    mca_coll_base_module_t super;
    struct ompi_communicator_t *comm;
    dfccl_group_t    group;   /* NULL: every call takes the previous module */
    pthread_mutex_t  lock;    /* cache, instances, registration */
    mca_coll_dfccl_entry_t *hash[MCA_COLL_DFCCL_HASH];
    int              inflight;

    /* the previous module's functions, retained */
    mca_coll_base_module_allreduce_fn_t  previous_allreduce;
    mca_coll_base_module_t              *previous_allreduce_module;
    mca_coll_base_module_allgather_fn_t  previous_allgather;
    mca_coll_base_module_t              *previous_allgather_module;
    mca_coll_base_module_reduce_scatter_block_fn_t previous_reduce_scatter_block;
    mca_coll_base_module_t              *previous_reduce_scatter_block_module;
    mca_coll_base_module_reduce_scatter_fn_t previous_reduce_scatter;
    mca_coll_base_module_t              *previous_reduce_scatter_module;
    mca_coll_base_module_reduce_fn_t     previous_reduce;
    mca_coll_base_module_t              *previous_reduce_module;
    mca_coll_base_module_bcast_fn_t      previous_bcast;
    mca_coll_base_module_t              *previous_bcast_module;

    mca_coll_base_module_iallreduce_fn_t  previous_iallreduce;
    mca_coll_base_module_t               *previous_iallreduce_module;
    mca_coll_base_module_iallgather_fn_t  previous_iallgather;
    mca_coll_base_module_t               *previous_iallgather_module;
    mca_coll_base_module_ireduce_scatter_block_fn_t previous_ireduce_scatter_block;
    mca_coll_base_module_t               *previous_ireduce_scatter_block_module;
    mca_coll_base_module_ireduce_scatter_fn_t previous_ireduce_scatter;
    mca_coll_base_module_t               *previous_ireduce_scatter_module;
    mca_coll_base_module_ireduce_fn_t     previous_ireduce;
    mca_coll_base_module_t               *previous_ireduce_module;
    mca_coll_base_module_ibcast_fn_t      previous_ibcast;
    mca_coll_base_module_t               *previous_ibcast_module;

    mca_coll_base_module_allreduce_init_fn_t  previous_allreduce_init;
    mca_coll_base_module_t                   *previous_allreduce_init_module;
    mca_coll_base_module_allgather_init_fn_t  previous_allgather_init;
    mca_coll_base_module_t                   *previous_allgather_init_module;
    mca_coll_base_module_reduce_scatter_block_init_fn_t previous_reduce_scatter_block_init;
    mca_coll_base_module_t                   *previous_reduce_scatter_block_init_module;
    mca_coll_base_module_reduce_scatter_init_fn_t previous_reduce_scatter_init;
    mca_coll_base_module_t                   *previous_reduce_scatter_init_module;
    mca_coll_base_module_reduce_init_fn_t     previous_reduce_init;
    mca_coll_base_module_t                   *previous_reduce_init_module;
    mca_coll_base_module_bcast_init_fn_t      previous_bcast_init;
    mca_coll_base_module_t                   *previous_bcast_init_module;
} mca_coll_dfccl_module_t;

OBJ_CLASS_DECLARATION(mca_coll_dfccl_module_t);

/*
 * One run of a registered collective, embedded in its request. The dfccl
 * callback only queues it on the component's done list; everything else
 * (request completion, the next chained run, copying out) happens in
 * opal_progress on an MPI thread.
 */
typedef struct mca_coll_dfccl_op {
    struct mca_coll_dfccl_op  *next;
    mca_coll_dfccl_module_t   *module;
    mca_coll_dfccl_entry_t    *entry;
    int                        inst;
    const void                *sbuf;
    void                      *rbuf;     /* what dfccl writes */
    size_t                     tmp_bytes; /* >0: rbuf is the instance's temporary */
    void                      *copy_dst;  /* then my block of it is copied here */
    size_t                     copy_off, copy_bytes;
    dfccl_status_t             status;
    int                        settle;   /* wait for CUDA's default stream first */
    struct mca_coll_dfccl_req *req;
} mca_coll_dfccl_op_t;

/* A host copy of a device buffer for the previous module. */
typedef struct {
    void   *dev;   /* the user's buffer (lb included) */
    char   *host;  /* malloc'ed span */
    size_t  bytes; /* span */
    ptrdiff_t gap; /* true lb */
    int     down, up;
} mca_coll_dfccl_stage_t;

#define MCA_COLL_DFCCL_MAX_STAGES 2

typedef struct mca_coll_dfccl_req {
    ompi_coll_base_nbc_request_t super;
    mca_coll_dfccl_op_t          op;
    int                          freed;     /* MPI_Request_free while active */
    int                          completed;
    /* staged fallback: the previous module's request on host copies */
    ompi_request_t              *inner;
    struct mca_coll_dfccl_req   *staged_next;
    int                          nstages;
    mca_coll_dfccl_stage_t       stages[MCA_COLL_DFCCL_MAX_STAGES];
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

/* coll_dfccl_module.c */
int mca_coll_dfccl_init_query(bool enable_progress_threads, bool enable_mpi_threads);
mca_coll_base_module_t *mca_coll_dfccl_comm_query(struct ompi_communicator_t *comm,
                                                  int *priority);
int mca_coll_dfccl_progress(void);
void mca_coll_dfccl_finalize(void);
/* Start (or chain) the run in req->op; sig identifies the registration. */
int mca_coll_dfccl_op_start(mca_coll_dfccl_module_t *m, const mca_coll_dfccl_sig_t *sig,
                            mca_coll_dfccl_req_t *req);
mca_coll_dfccl_entry_t *mca_coll_dfccl_entry_get(mca_coll_dfccl_module_t *m,
                                                 const mca_coll_dfccl_sig_t *sig);
/* The instance's temporary buffer of at least `bytes` (dfccl memory kind). */
void *mca_coll_dfccl_inst_tmp(mca_coll_dfccl_module_t *m, mca_coll_dfccl_inst_t *inst,
                              size_t bytes);
/* Memory of the kind dfccl takes: copies, allocation, detection. */
int mca_coll_dfccl_is_device(const void *ptr);
/* Whether ptr is device (or managed) memory. Device memory gets CUDA's
 * SYNC_MEMOPS attribute; *settle is set when a synchronous copy into the
 * buffer may still be in flight (the attribute was missing or cannot be
 * set, or the memory is managed). */
int mca_coll_dfccl_device_buf(const void *ptr, int *settle);
int mca_coll_dfccl_copy(void *dst, const void *src, size_t bytes);
int mca_coll_dfccl_settle_default_stream(void);
mca_coll_dfccl_req_t *mca_coll_dfccl_req_new(struct ompi_communicator_t *comm,
                                             bool persistent);
void mca_coll_dfccl_req_finish(mca_coll_dfccl_req_t *req, int status);
void mca_coll_dfccl_staged_track(mca_coll_dfccl_req_t *req);

/* coll_dfccl_colls.c: the MPI entry points */
int mca_coll_dfccl_allreduce(const void *sbuf, void *rbuf, int count,
                             struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                             struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_dfccl_iallreduce(const void *sbuf, void *rbuf, int count,
                              struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                              struct ompi_communicator_t *comm, ompi_request_t **request,
                              mca_coll_base_module_t *module);
int mca_coll_dfccl_allreduce_init(const void *sbuf, void *rbuf, int count,
                                  struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                  struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                  ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_dfccl_allgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                             void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                             struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_dfccl_iallgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                              void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                              struct ompi_communicator_t *comm, ompi_request_t **request,
                              mca_coll_base_module_t *module);
int mca_coll_dfccl_allgather_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                                  void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                                  struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                  ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_dfccl_reduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                        struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                        struct ompi_communicator_t *comm,
                                        mca_coll_base_module_t *module);
int mca_coll_dfccl_ireduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                         struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                         struct ompi_communicator_t *comm,
                                         ompi_request_t **request,
                                         mca_coll_base_module_t *module);
int mca_coll_dfccl_reduce_scatter_block_init(const void *sbuf, void *rbuf, int rcount,
                                             struct ompi_datatype_t *dtype,
                                             struct ompi_op_t *op,
                                             struct ompi_communicator_t *comm,
                                             struct ompi_info_t *info,
                                             ompi_request_t **request,
                                             mca_coll_base_module_t *module);
int mca_coll_dfccl_reduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                                  struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                  struct ompi_communicator_t *comm,
                                  mca_coll_base_module_t *module);
int mca_coll_dfccl_ireduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                                   struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                   struct ompi_communicator_t *comm, ompi_request_t **request,
                                   mca_coll_base_module_t *module);
int mca_coll_dfccl_reduce_scatter_init(const void *sbuf, void *rbuf, const int *rcounts,
                                       struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                       struct ompi_communicator_t *comm,
                                       struct ompi_info_t *info, ompi_request_t **request,
                                       mca_coll_base_module_t *module);
int mca_coll_dfccl_reduce(const void *sbuf, void *rbuf, int count,
                          struct ompi_datatype_t *dtype, struct ompi_op_t *op, int root,
                          struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_dfccl_ireduce(const void *sbuf, void *rbuf, int count,
                           struct ompi_datatype_t *dtype, struct ompi_op_t *op, int root,
                           struct ompi_communicator_t *comm, ompi_request_t **request,
                           mca_coll_base_module_t *module);
int mca_coll_dfccl_reduce_init(const void *sbuf, void *rbuf, int count,
                               struct ompi_datatype_t *dtype, struct ompi_op_t *op, int root,
                               struct ompi_communicator_t *comm, struct ompi_info_t *info,
                               ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_dfccl_bcast(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                         struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_dfccl_ibcast(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                          struct ompi_communicator_t *comm, ompi_request_t **request,
                          mca_coll_base_module_t *module);
int mca_coll_dfccl_bcast_init(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                              struct ompi_communicator_t *comm, struct ompi_info_t *info,
                              ompi_request_t **request, mca_coll_base_module_t *module);

END_C_DECLS

#endif /* MCA_COLL_DFCCL_H_ */
