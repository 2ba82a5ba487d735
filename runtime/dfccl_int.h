/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal declarations of the host runtime: the rank context, groups,
 * registered collectives, backends and transports, and the logging and
 * error-reporting helpers every file uses.
 */
#ifndef DFCCL_RUNTIME_INT_H_
#define DFCCL_RUNTIME_INT_H_

#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "dfccl.h"
#include "../kernels/daemon_types.h"

/* ---- logging and errors ------------------------------------------------- */

extern int dfccl_log_level;

void dfccl_log_msg(int level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Record a user-facing error (what happened, what to do) for
 * dfcclGetLastErrorMessage, print it when verbose, and return `status`. */
dfccl_status_t dfccl_error(dfccl_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Set the calling thread's last error message without printing it. */
void dfccl_set_last_error(const char *msg);

/* Print an error line (DFCCL_VERBOSE >= 0), unless the process printed the
 * same one last. */
void dfccl_print_error(const char *msg);

/* While on (calls nest), dfccl_error on this thread records its message
 * without printing it: for errors that a caller reports in its own words
 * or drops (a look that is tried again later). */
void dfccl_error_quiet(int on);

#define dfccl_info(...)  dfccl_log_msg(1, __FILE__, __LINE__, __VA_ARGS__)
#define dfccl_debug(...) dfccl_log_msg(2, __FILE__, __LINE__, __VA_ARGS__)

/* A system call failed: log the call text and errno once, return a status. */
#define DFCCL_SYSCALL(_call)                                                   \
    ({                                                                         \
        dfccl_status_t _st = DFCCL_OK;                                         \
        if ((_call) < 0) {                                                     \
            _st = dfccl_error(DFCCL_ERR_SYSTEM, "%s failed: %m", #_call);      \
        }                                                                      \
        _st;                                                                   \
    })

#define DFCCL_CHECK(_expr)                                                     \
    do {                                                                       \
        dfccl_status_t _st = (_expr);                                          \
        if (_st != DFCCL_OK) {                                                 \
            return _st;                                                        \
        }                                                                      \
    } while (0)

/* config.c: every field of `c` in its documented range, else
 * DFCCL_ERR_INVALID_ARG with a message naming the field, its value, the
 * valid values and its environment variable (`fn`: the API call). */
dfccl_status_t dfccl_config_check(const dfccl_config_t *c, const char *fn);
/* The backend defaults of the fields still at dfcclConfigInit's values, and
 * what one field implies for another. */
void dfccl_config_defaults(dfccl_config_t *c, int host);

uint64_t dfccl_time_ns(void);
/* An application thread that polled within this window is polling still:
 * the poller thread stands back (see dfccl_poller_main). */
#define DFCCL_APP_POLL_NS 100000ull

/* A moment's pause in a polling loop, without a system call. */
static inline void dfccl_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

/* Nanoseconds from `then` to `now`, 0 when `then` is later: times read by
 * different threads need not be ordered. */
static inline uint64_t dfccl_since(uint64_t now, uint64_t then)
{
    return now > then ? now - then : 0;
}
const char *dfccl_dtype_name(int dtype);
const char *dfccl_op_name(int op);
const char *dfccl_coll_name(int kind);
size_t dfccl_dtype_bytes(int dtype);

/* ---- backends ----------------------------------------------------------- */

struct dfccl_rank_ctx;

typedef struct {
    const char *name;
    dfccl_status_t (*init)(struct dfccl_rank_ctx *ctx);
    void (*fini)(struct dfccl_rank_ctx *ctx);
    /* zeroed device memory for daemon state */
    dfccl_status_t (*dev_alloc)(struct dfccl_rank_ctx *ctx, size_t bytes, void **ptr_p);
    void (*dev_free)(struct dfccl_rank_ctx *ctx, void *ptr);
    /* zeroed host memory the daemon can access (pinned + mapped on CUDA) */
    dfccl_status_t (*host_alloc)(struct dfccl_rank_ctx *ctx, size_t bytes, void **ptr_p);
    void (*host_free)(struct dfccl_rank_ctx *ctx, void *ptr);
    /* device pointer of host_alloc'ed memory */
    void *(*host_dev_ptr)(struct dfccl_rank_ctx *ctx, void *host_ptr);
    dfccl_status_t (*memcpy_h2d)(struct dfccl_rank_ctx *ctx, void *dst, const void *src,
                                 size_t bytes);
    dfccl_status_t (*memcpy_d2h)(struct dfccl_rank_ctx *ctx, void *dst, const void *src,
                                 size_t bytes);
    /* zero device memory (complete on return) */
    dfccl_status_t (*dev_zero)(struct dfccl_rank_ctx *ctx, void *ptr, size_t bytes);
    /* launch the daemon (it must not be running) */
    dfccl_status_t (*launch)(struct dfccl_rank_ctx *ctx);
    /* 1 while any daemon block runs; reaps finished launches */
    int (*running)(struct dfccl_rank_ctx *ctx);
    /* block until no daemon block runs */
    dfccl_status_t (*wait_idle)(struct dfccl_rank_ctx *ctx);
    /* the device synchronization users see (dfcclSynchronize) */
    dfccl_status_t (*synchronize)(struct dfccl_rank_ctx *ctx);
    /* nonzero if `ptr` is memory the daemon can use as a user buffer */
    int (*buffer_ok)(struct dfccl_rank_ctx *ctx, const void *ptr);
    /* make host memory (a shm segment) accessible to the daemon; NULL when
     * the daemon can use host pointers as they are */
    dfccl_status_t (*host_register)(struct dfccl_rank_ctx *ctx, void *ptr, size_t bytes,
                                    void **dev_p);
    void (*host_unregister)(struct dfccl_rank_ctx *ctx, void *ptr);
    /* make the context's device current on the calling thread (a helper
     * thread whose libraries touch device memory); NULL: nothing to do */
    dfccl_status_t (*bind_thread)(struct dfccl_rank_ctx *ctx);
    /* 1 if the device was reset under the context (cudaDeviceReset): the
     * memory and streams of the backend are gone; NULL: cannot happen */
    int (*lost)(struct dfccl_rank_ctx *ctx);
} dfccl_backend_ops_t;

extern const dfccl_backend_ops_t dfccl_backend_host;
#ifdef HAVE_CUDART
extern const dfccl_backend_ops_t dfccl_backend_cuda;
int dfccl_cuda_device_count(void);
/* DFCCL_OK if a GPU is visible, else an error saying why not */
dfccl_status_t dfccl_cuda_check_visible(const char *fn);
#endif

/* ---- transports: connector memory --------------------------------------- */

/* Where a connector region lives, as exchanged at registration. */
typedef struct {
    uint32_t transport; /* DFCCL_TRANSPORT_SHM or _P2P */
    uint32_t seg;       /* segment index in the owner's pool */
    uint64_t off;       /* offset in the segment */
    uint64_t seg_bytes;
    char     name[64];  /* shm: segment name */
    uint8_t  ipc[64];   /* p2p: cudaIpcMemHandle_t */
} dfccl_conn_desc_t;

typedef struct dfccl_seg {
    void    *base;      /* local (or peer-mapped) address */
    void    *dev_base;  /* address the daemon uses */
    size_t   bytes;
    size_t   used;
    int      linked;    /* shm name still present */
    int      owner;     /* 1: our segment; 0: a peer's mapping */
    int      rank;      /* a mapping: the rank whose segment it is */
    uint32_t index;
    uint32_t transport;
    char     name[64];
    uint8_t  ipc[64];
} dfccl_seg_t;

/*
 * Directory of a rank's segments in one group, in shared memory (up to
 * DFCCL_DIR_MAX_SEGS segments per rank and group, 168 bytes each): the owner
 * publishes each segment's descriptor (ready = 1, release), its ring
 * predecessor reads it to attach and then sets `attached`, after which the
 * owner unlinks the segment's name.
 */
#define DFCCL_DIR_MAX_SEGS 1024
#define DFCCL_DIR_MAGIC    0x6466636c44495231ull

typedef struct {
    uint64_t          ready;
    uint64_t          attached;
    dfccl_conn_desc_t desc;
} dfccl_dir_entry_t;

#define DFCCL_DIR_RUNS  1024
#define DFCCL_DIR_XBYTES 1024 /* a bootstrap exchange's bytes per rank, at most */
#define DFCCL_DIR_FAILS 8

/*
 * A registration as its owner publishes it, at slot (registration index %
 * DFCCL_DIR_RUNS) of its directory: what a peer's report of a hang or a
 * failure says about this rank. `reg` (index + 1) tells whose slot it is;
 * a reader checks it before and after reading the rest. The `where` words
 * say where the owner's latest run of it waits, refreshed by the owner's
 * health check while it is in flight for a while (seqlock: odd while
 * written).
 */
typedef struct {
    uint64_t reg;
    uint64_t done;       /* runs completed on the owner (any status) */
    uint64_t sig[8];     /* its signature (dfccl_coll_make_sig) */
    uint64_t where_seq;
    uint64_t where_run;  /* the run `where` describes; 0: none */
    uint64_t where_ns;   /* when it was read (CLOCK_MONOTONIC, one clock per host) */
    uint32_t where_flags; /* DFCCL_P_* of the primitive it is at; 0: unknown */
    int32_t  where_peer; /* the rank it waits for; -1: none or unknown */
    uint32_t where_wait; /* DFCCL_WAIT_* */
    uint32_t where_ch;   /* the channel described (the least advanced) */
    uint32_t where_loop, where_step;
} dfccl_dir_reg_t;

/* What a rank of a group waits for in a collective (dfccl_dir_reg_t). */
enum {
    DFCCL_WAIT_UNKNOWN = 0,
    DFCCL_WAIT_RECV,    /* data from the previous rank */
    DFCCL_WAIT_SEND,    /* a free slot at the next rank */
    DFCCL_WAIT_SHOT,    /* the peers' data (one or two shot) */
    DFCCL_WAIT_READY,   /* nothing: its connectors are ready, the daemon has
                         * not run it again yet */
    DFCCL_WAIT_START    /* its daemon has not started it */
};

/*
 * A failure the owner publishes so that the group's other ranks fail the
 * same collective instead of waiting for this rank (seqlock: `seq` is
 * 2i + 1 while record i is written, 2i + 2 once it is complete). Runs
 * that failed go into a ring of records; a mismatch and an abort are kept
 * in a record each (the first one), so that no burst of failures can push
 * them out.
 */
enum {
    DFCCL_FAIL_RUN = 1, /* run `run` of registration `reg` failed here */
    DFCCL_FAIL_FROM,    /* a registration mismatch at `reg`: every collective
                         * registered from there on pairs with the wrong one */
    DFCCL_FAIL_ALL      /* this rank's context aborted: it takes part in nothing
                         * of the group that it has not finished */
};

typedef struct {
    uint64_t seq;
    uint64_t kind;
    uint64_t reg;
    uint64_t run;
    int64_t  status;
    int64_t  origin; /* the rank that failed: the owner, or a rank on another
                      * host whose record came through the net transport */
    uint64_t pad[2];
    char     msg[960];
} dfccl_dir_fail_t;

typedef struct {
    uint64_t          magic;
    uint64_t          nreg;    /* registrations done by the owner (release) */
    uint64_t          pid;
    uint64_t          beat_ns; /* the owner's last health check (CLOCK_MONOTONIC) */
    uint64_t          closed;  /* 1 once the owner destroyed the group */
    uint64_t          nfails;  /* failure records published (release) */
    uint64_t          pad[10];
    dfccl_dir_entry_t e[DFCCL_DIR_MAX_SEGS];
    /* runs started by the owner, per registration (index nreg % RUNS): tells
     * a rank that times out which peers have joined the collective */
    uint64_t          runs[DFCCL_DIR_RUNS];
    dfccl_dir_reg_t   regs[DFCCL_DIR_RUNS];
    dfccl_dir_fail_t  fails[DFCCL_DIR_FAILS];
    dfccl_dir_fail_t  mismatch; /* DFCCL_FAIL_FROM, the first (seq 2 once set) */
    dfccl_dir_fail_t  aborted;  /* DFCCL_FAIL_ALL, the first (seq 2 once set) */
    /* Fault exclusion (fault.c), in groups with DFCCL_FAULT_EXCLUDE. In rank
     * 0's directory (which the survivors keep mapped even when rank 0 is the
     * one that died): the ranks excluded, a bit each, with bit 63 set; the
     * first survivor to set it decides, the others adopt it. In every
     * directory: the survivors' exchanges that build the group of the
     * survivors, `xseq` the latest one published in xbuf[xseq % 2]. */
    uint64_t          excluded;
    uint64_t          xseq;
    uint8_t           xbuf[2][DFCCL_DIR_XBYTES];
    /* straggler tolerance (straggler.c), read in rank 0's directory only:
     * per registration slot and parity of the run, the late ranks of a
     * run, written once per run by compare-and-swap, so that every rank
     * reads the same set */
    uint64_t          strag[DFCCL_DIR_RUNS][2];
    /* and the latest measured time of a run, microseconds (8 bits of the
     * registration index above the slot, 56 of time) */
    uint64_t          strag_est[DFCCL_DIR_RUNS];
} dfccl_dir_t;

/*
 * A group's connector pool: our segments (receive connectors of our
 * collectives) and mappings of the next rank's segments (where we send).
 * Registration allocates in the same order with the same sizes on every
 * rank, so a collective's connector sits at the same (segment, offset) in
 * every rank's pool: a sender finds its peer's connector without asking.
 */
typedef struct {
    uint32_t seg;
    uint64_t off;
    size_t   bytes;
} dfccl_pool_hole_t;

typedef struct {
    dfccl_seg_t *own;
    int          nown;
    dfccl_pool_hole_t *free;  /* sorted by (seg, off), coalesced */
    int          nfree;
    dfccl_seg_t *mapped;
    int          nmapped;
    uint32_t     transport;   /* of our segments */
    size_t       seg_bytes;   /* default segment size */
    dfccl_seg_t  dir_seg;     /* our directory */
    dfccl_dir_t *dir;
    dfccl_dir_t *peer_dir;     /* the next rank's directory */
    dfccl_seg_t *dirs;         /* every rank's directory (ours included) */
    int          ndirs;
    int          attachers;    /* ranks that map each of our segments before its
                                * name may go: the previous one, or every other
                                * one in groups whose collectives may write to
                                * every peer (dfccl_group_t.all_local) */
    int         *eager;        /* per rank: its directory entries attached in order
                                * by dfccl_pool_reap */
} dfccl_pool_t;

dfccl_status_t dfccl_pool_init(struct dfccl_group *g, char *dir_name, size_t len);
/* Attach every rank's directory; names[i] is rank i's (NAME_LEN apart). */
dfccl_status_t dfccl_pool_connect(struct dfccl_group *g, const char *names, size_t stride);
/* (attaches only the directories of ranks with g->same_host set) */
void dfccl_pool_unlink_dir(struct dfccl_group *g);
const dfccl_dir_t *dfccl_pool_dir_of(struct dfccl_group *g, int rank);
dfccl_status_t dfccl_pool_alloc(struct dfccl_group *g, size_t bytes, void **host_p,
                                void **dev_p, uint32_t *seg_p, uint64_t *off_p);
/* Find the next rank's region at (seg, off): 1 and pointers when it is
 * published, 0 when not yet, or a negative status. */
int dfccl_pool_resolve_rank(struct dfccl_group *g, int rank, uint32_t seg, uint64_t off,
                            void **host_p, void **dev_p);
int dfccl_pool_resolve(struct dfccl_group *g, uint32_t seg, uint64_t off, void **host_p,
                       void **dev_p);
/* Unlink our segments once every rank that writes into them has attached
 * them, and attach the new segments of the ranks that write into ours
 * (see dfccl_pool_t.attachers). ctx->lock held. */
void dfccl_pool_reap(struct dfccl_group *g);
/* Directory records (ctx->lock held for the writers): a registration, a
 * run completed, where a run waits, a failure, the group closed. */
void dfccl_dir_publish_reg(struct dfccl_group *g, const uint64_t sig[8]);
void dfccl_dir_publish_done(struct dfccl_group *g, uint64_t reg, uint64_t run);
void dfccl_dir_publish_where(struct dfccl_group *g, uint64_t reg, const dfccl_dir_reg_t *w);
void dfccl_dir_publish_fail(struct dfccl_group *g, int kind, uint64_t reg, uint64_t run,
                            dfccl_status_t status, const char *msg);
/* A record of another rank (f->origin), relayed from another host. */
void dfccl_dir_publish_relayed(struct dfccl_group *g, const dfccl_dir_fail_t *f);
/* Rank r's registration `reg` as published (0 if the slot holds another
 * one or none), and its where words (where_run 0 if none). */
int dfccl_dir_read_reg(const dfccl_dir_t *d, uint64_t reg, dfccl_dir_reg_t *out);
/* Failure record i (0-based) of d's ring: 1 and *out, or 0 when it was
 * overwritten or is being written. */
int dfccl_dir_read_fail(const dfccl_dir_t *d, uint64_t i, dfccl_dir_fail_t *out);
/* d's DFCCL_FAIL_FROM or DFCCL_FAIL_ALL record: 1 and *out once set. */
int dfccl_dir_read_note(const dfccl_dir_t *d, int kind, dfccl_dir_fail_t *out);
void dfccl_pool_unlink_dead(struct dfccl_group *g, int rank);
dfccl_status_t dfccl_pool_free(struct dfccl_group *g, uint32_t seg, uint64_t off, size_t bytes);
void dfccl_pool_destroy(struct dfccl_group *g);

dfccl_status_t dfccl_shm_create(dfccl_seg_t *seg, const char *name, size_t bytes);
dfccl_status_t dfccl_shm_attach(dfccl_seg_t *seg, const char *name, size_t bytes);
void dfccl_shm_unlink(dfccl_seg_t *seg);
void dfccl_shm_release(dfccl_seg_t *seg);
/* Name of a new segment: /dfccl-<pid>-<pid namespace>-<tag> (tag: printf). */
void dfccl_shm_name(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Unlink the segments left by dead processes of this pid namespace;
 * returns how many. */
int dfccl_shm_sweep(void);

#ifdef HAVE_CUDART
/* transport/p2p.c: device-memory segments shared through CUDA IPC. create
 * allocates and zeroes `bytes` of device memory and fills seg->ipc; attach
 * opens a peer's segment from its descriptor. */
dfccl_status_t dfccl_p2p_create(struct dfccl_rank_ctx *ctx, dfccl_seg_t *seg, size_t bytes);
dfccl_status_t dfccl_p2p_attach(struct dfccl_rank_ctx *ctx, dfccl_seg_t *seg,
                                const dfccl_conn_desc_t *desc);
void dfccl_p2p_release(struct dfccl_rank_ctx *ctx, dfccl_seg_t *seg);
/* 1 if this process's device can write into a peer's device: its ordinal
 * in the peer's process and its UUID (zeros: unknown, the ordinal is
 * taken as ours) */
int dfccl_p2p_reachable(struct dfccl_rank_ctx *ctx, int peer_device,
                        const unsigned char peer_uuid[16]);
#endif

/* transport/net.c: the net (UCX) transport and its proxy thread */
#define DFCCL_NET_ADDR_MAX 1024 /* bootstrap slot of a rank's worker addresses */
#define DFCCL_NET_MAX_LANES 8   /* DFCCL_NET_PROXIES at most */
#define DFCCL_HOST_ID_MAX  128
struct dfccl_net;
void dfccl_net_host_id(char *buf, size_t len);
/* create the UCX worker and start the proxy (once per rank context) */
dfccl_status_t dfccl_net_start(struct dfccl_rank_ctx *ctx);
/* our worker address in a DFCCL_NET_ADDR_MAX bootstrap slot */
dfccl_status_t dfccl_net_address(struct dfccl_rank_ctx *ctx, void *buf, size_t len);
/* record the next/previous ranks' workers (slots `stride` apart, host ids
 * `hstride` apart, in rank order) and connect; with `wait`, until the
 * previous rank's connection has arrived */
dfccl_status_t dfccl_net_group_connect(struct dfccl_group *g, const void *addrs, size_t stride,
                                       const char *hosts, size_t hstride, int wait);
/* nonzero when the transport keeps the slots of a collective's channels
 * in registered memory of its own (DFCCL_NET_MEM, DFCCL_NET_MEM_BYTES): a
 * channel's host region is then only its ctrl words, and
 * dfccl_net_chan_add says where its slots are */
int dfccl_net_mem_own(const struct dfccl_rank_ctx *ctx, const dfccl_coll_static_t *st);
/* a channel of a registered collective: send = our staging region to the
 * next rank, else our receive connector fed by the previous rank. host_ctrl
 * holds the ctrl words, and the slots after them unless the transport keeps
 * them: then *data_p is their address for the daemon (else NULL). */
dfccl_status_t dfccl_net_chan_add(struct dfccl_group *g, int coll_id, int ch, int send,
                                  void *host_ctrl, const dfccl_coll_static_t *st,
                                  const uint64_t sig[8], char **data_p);
/* flush and forget the channels of a collective (before freeing them) */
/* When a flush gives up: DFCCL_TIMEOUT from now, or 0 (never) if unset. */
uint64_t dfccl_net_deadline(const struct dfccl_rank_ctx *ctx);
/* Flush and drop the net channels of a collective. Waits (without the
 * context lock) until the proxy shipped what the daemon published, the
 * context aborts or `deadline_ns` (0: none) passes; then the channels are
 * abandoned and DFCCL_ERR_TIMEOUT returned (their memory must stay). */
dfccl_status_t dfccl_net_coll_remove(struct dfccl_rank_ctx *ctx, int coll_id,
                                     uint64_t deadline_ns);
void dfccl_net_stop(struct dfccl_rank_ctx *ctx);
/* slots and credits received from peers so far (0 without net) */
uint64_t dfccl_net_arrivals(struct dfccl_rank_ctx *ctx);
/* 1 (and the collective, status, message) once the transport failed */
int dfccl_net_failed(struct dfccl_rank_ctx *ctx, int *coll_p, dfccl_status_t *status_p,
                     char *msg, size_t len);
/* Failure records (dfccl_dir_fail_t) between hosts: queue `f` for the
 * group's net neighbours (the proxy sends it); take one received, for our
 * group of id *gid_p: 1, or 0 when none is waiting. */
void dfccl_net_fail_send(struct dfccl_group *g, const dfccl_dir_fail_t *f);
int dfccl_net_fail_recv(struct dfccl_rank_ctx *ctx, int *gid_p, dfccl_dir_fail_t *f);
/* A group with net edges is destroyed: tell the net neighbours how many
 * runs of each registration this rank completed (from its directory), so
 * that once its connection closes they know what it finished. Called
 * before the pool goes. */
void dfccl_net_group_left(struct dfccl_group *g);
/* Can run `run` of registration `reg` of g still complete, as far as g's
 * net neighbours go? 0 if so; 1, with the status and the reason, when a
 * neighbour's connection closed and it had not finished that run before it
 * left (or said nothing: it died). */
int dfccl_net_neighbour_gone(struct dfccl_group *g, uint64_t reg, uint64_t run,
                             dfccl_status_t *status_p, char *msg, size_t len);
/*
 * Fault exclusion across hosts (fault.c). The lane-0 peer of the process
 * whose bootstrap slot is `slot` (added if new; a negative status if it
 * cannot be). A group that excludes failed ranks watches peers (`on`
 * 1/0, counted): the proxy sends them heartbeats, and a transport error on
 * one closes that peer instead of failing the whole transport. Whether a
 * watched peer is dead: its connection closed for good, or (silent_ns >
 * 0) no heartbeat came for that long; 1 with the reason in `why`. Whether
 * g's net neighbour `rank` destroyed the group before it went (its
 * goodbye). Close a peer on every lane: nothing more goes to it, and
 * channels to it close without a flush.
 */
int dfccl_net_peer_of(struct dfccl_rank_ctx *ctx, const void *slot, int rank, const char *host);
void dfccl_net_watch(struct dfccl_rank_ctx *ctx, int pi, int on);
int dfccl_net_peer_dead(struct dfccl_rank_ctx *ctx, int pi, uint64_t silent_ns, char *why,
                        size_t len);
int dfccl_net_rank_left(struct dfccl_group *g, int rank);
void dfccl_net_peer_close(struct dfccl_rank_ctx *ctx, int pi);
/* The survivors' messages (lane 0): send `len` bytes to peer pi's group
 * `gid`; take the first message received for our group `gid` whose first
 * `keylen` bytes are `key`: its length (up to `len` bytes copied into
 * buf), -1 if none; whether any waits for `gid`; drop those for `gid`. */
dfccl_status_t dfccl_net_xchg_send(struct dfccl_rank_ctx *ctx, int pi, int gid, const void *buf,
                                   size_t len);
long dfccl_net_xchg_take(struct dfccl_rank_ctx *ctx, int gid, const void *key, size_t keylen,
                         void *buf, size_t len);
int dfccl_net_xchg_waiting(struct dfccl_rank_ctx *ctx, int gid);
/* the OR of the 8 bytes at `off` of every message waiting for `gid` */
uint64_t dfccl_net_xchg_union(struct dfccl_rank_ctx *ctx, int gid, size_t off);
void dfccl_net_xchg_drop(struct dfccl_rank_ctx *ctx, int gid);

/* ---- groups and collectives --------------------------------------------- */

struct dfccl_group {
    struct dfccl_rank_ctx   *ctx;
    int                      nranks;
    int                      rank;
    int                      id;
    char                     name[64];
    dfccl_pool_t             pool;
    uint64_t                 nreg;   /* registrations so far, same on all ranks */
    int                      ncolls; /* registered collectives on this group */
    size_t                   conn_bytes; /* their receive connectors (pool), same on all
                                          * ranks: what DFCCL_CONN_BUDGET bounds */
    int                      lean_warned; /* a registration went lean: said once */
    int                      algo_warned; /* DFCCL_ALGO could not be followed: said once */
    /* The link model of the cost estimates, per class of link
     * (dfccl_link_t): a hop's latency and a link's bandwidth (GB/s), and
     * the fixed cost of a collective; nominal values (group.c) until
     * profile.c measures them, the same on every rank. `links`: a bit per
     * class the ring's edges are of; `link`: the slowest of them. alpha_us
     * and beta_gbps are what the algorithms' estimates read: the ring's
     * view of its links (dfccl_group_link_set): a class's values where
     * the group has one, else the mean hop latency over the ring's edges
     * and the least bandwidth of its classes. */
    double                   link_alpha_us[DFCCL_LINK_COUNT];
    double                   link_beta_gbps[DFCCL_LINK_COUNT];
    double                   coll_us;
    uint32_t                 links;
    int                      link;
    double                   alpha_us, beta_gbps;
    /* the classes whose values a profile has measured (the others are
     * nominal); the class of the ring's edges within a host; how many of
     * the ring's n edges are net (every one where the net is forced):
     * same on every rank */
    uint32_t                 measured_links;
    int                      local_link;
    int                      ring_net_edges;
    /* how many times measured values took effect in the model
     * (dfccl_profile_info_t.generation), and the refreshes of
     * DFCCL_PROFILE_EVERY (profile.c; NULL: none) */
    uint64_t                 model_gen;
    struct dfccl_refresh    *refresh;
    int                     *pids;   /* every member's process id */
    int                     *same_host; /* per rank: 1 if on our host (pids, shm) */
    /* The ring: the hosts in the order of their lowest rank, each host's
     * ranks in rank order, so that it crosses between hosts once per host
     * whatever the placement of ranks (rank order where each host's ranks
     * are consecutive). ring_pos is our position, ring_next and ring_prev
     * the ranks we send to and receive from; ring_rank[p] the rank at
     * position p and ring_dev the same where the daemon reads it (both
     * NULL where the ring is rank order). Same on every rank. */
    int                      ring_pos, ring_next, ring_prev;
    int32_t                 *ring_rank;
    void                    *ring_dev;
    int                      net;      /* some edge of the ring is net: staging everywhere */
    int                      next_net; /* we send to ring_next through net */
    int                      prev_net; /* we receive from ring_prev through net */
    int                      pair;     /* two all_local ranks, on two GPUs (any two on
                                        * the host backend): same on both ranks */
    int                      all_local; /* every rank can write into every peer's
                                         * connectors (same host, no net, p2p to
                                         * every device on GPUs): same on all ranks */
    int                      net_next_gid, net_prev_gid; /* their group ids (tags) */
    /* the net transport's lanes this group's channels spread over (channel
     * ch on lane ch % net_lanes, at both ends: the least any rank of the
     * group offers), and the two neighbours' peer indices in each lane (-1:
     * not connected); lane 0's carry the group's control messages */
    int                      net_lanes;
    int                      net_lane_next[DFCCL_NET_MAX_LANES];
    int                      net_lane_prev[DFCCL_NET_MAX_LANES];
    /* Submission bells: this rank counts its dfcclRun* calls on the group
     * in a shared page that the group's other ranks on this host map. A
     * host whose daemon quit, stuck, relaunches it when a peer's count
     * moved (what it waits for may have come) instead of waiting out its
     * backoff; peers on other hosts are heard through the net proxy's
     * arrivals. */
    dfccl_seg_t              bell_seg;   /* ours; base NULL if it could not be made */
    dfccl_seg_t             *peer_bells; /* per rank; base NULL: not mapped */
    /* Failure records relayed between hosts (dfccl_ctx_relay): the last
     * ones sent to our net neighbours and received from them, as keys */
    uint64_t                 relay_sent[64], relay_got[64];
    uint32_t                 nrelay_sent, nrelay_got;
    /* Fault exclusion (fault.c): the policy (dfccl_fault_policy_t), where an
     * exclusion stands (DFCCL_GFAULT_*), and the ranks of the group as it
     * was created: orig_rank[r] is rank r's there (NULL: the same), and
     * excl_mask a bit per rank excluded from it so far. */
    int                      fault_policy;
    int                      fault_state;
    int                      orig_nranks;
    int                     *orig_rank;
    uint64_t                 excl_mask;
    uint64_t                 excl_pending; /* the exclusion under way: ranks of now */
    /* Across hosts (groups with net edges): every rank's bootstrap slot of
     * worker addresses (DFCCL_NET_ADDR_MAX apart), host name (64 apart)
     * and group id, kept where every rank sent its addresses (NULL
     * otherwise: such a group cannot exclude); and, while the policy is
     * exclude, each rank's lane-0 net peer (-1: none) and which of them
     * this rank watches (its ring neighbours on other hosts). */
    uint8_t                 *fault_slots;
    char                    *fault_hosts;
    int                     *fault_gids;
    int                     *fault_peer;
    uint64_t                 fault_watch;
    struct dfccl_group      *next;
};

enum {
    DFCCL_COLL_FREE = 0,
    DFCCL_COLL_IDLE,     /* registered, not running */
    DFCCL_COLL_INFLIGHT, /* submitted, CQE not seen yet */
    DFCCL_COLL_CLOSING,  /* being deregistered: its net channels flush */
    DFCCL_COLL_COMPLETING, /* CQE seen, its callback runs: it may be run again, and
                            * waits and queries see it in progress until the
                            * callback has returned */
};

typedef struct {
    int                 state;
    dfccl_status_t      status;     /* of the last completed run */
    int                 resolved;   /* send connectors found */
    int                 deferred;   /* run waiting for resolution */
    int                 ctx_new;    /* its contexts were written in device memory
                                     * since its last SQE: the next one says so */
    const void         *pend_send;
    void               *pend_recv;
    /* the buffers of the last run, which passed the backend's check (a
     * driver call per buffer on GPUs): a run on the same ones does not ask
     * again (a buffer freed and allocated again at the same address is
     * not checked again) */
    const void         *ok_send;
    const void         *ok_recv;
    uint64_t            sig[8];     /* registration signature */
    char               *errmsg;     /* message of the last run's error */
    dfccl_chan_t       *chans;      /* host copy, nchannels */
    void               *pairs;      /* mesh: every channel's dfccl_chan_t.pairs (device) */
    uint64_t           *pairs_host; /* and its host copy */
    size_t              span_send;  /* alltoall(v): bytes of sendbuff and recvbuff */
    size_t              span_recv;  /* that the run reads and writes */
    uint32_t           *conn_seg;   /* where the connectors are, per channel */
    uint64_t           *conn_off;
    void              **stage;      /* net: our staging regions (mapped host
                                     * memory), per channel; NULL where none */
    struct dfccl_group *group;
    dfccl_callback_t    callback;
    void               *callback_arg;
    uint64_t            start_ns;
    uint64_t            runs;
    uint64_t            prog_runs;  /* runs submitted to the daemon: the tag of
                                     * the progress words of the latest one */
    int                 fail_remote; /* the run in flight failed because a peer's did:
                                      * not published again */
    uint64_t            warn_run;    /* the run the watchdog's next report is for */
    uint64_t            warn_next_ns; /* its next report, in ns after start_ns */
    size_t              bytes;      /* memory held for this collective */
    size_t              region;     /* bytes of each channel's connector region */
    size_t              pool_bytes; /* of the group's pool (conn_bytes) */
    /* an MSCCL program (algo/msccl.c): this rank's thread blocks and
     * counters, and its scratch buffer (device memory); "msccl:<name>" */
    const struct dfccl_msccl_prog *ms_prog;
    void               *ms_dev;
    void               *ms_scratch;
    char                ms_name[160];
    /* Fault exclusion (fault.c): DFCCL_CFAULT_* of its run in flight, and
     * whether a block dropped its part of it (a cancelled CQE) */
    int                 fault;
    int                 fault_cut;
    dfccl_coll_static_t st;         /* host copy of the static context */
    /* Straggler tolerance (DFCCL_COLL_STRAGGLER, docs/stragglers.md). The
     * user's collective (strag) runs a run in one phase, or as phase 2
     * after phase 1 on its partner (strag_internal), registered right
     * after it; strag_peer links each to the other. */
    int                 strag;
    int                 strag_internal;
    int                 strag_peer;
    int                 strag_phase;    /* DFCCL_STRAG_* of the run in flight */
    uint32_t            strag_late;     /* its late ranks (a bit per rank) */
    uint32_t            strag_wait_us;
    uint64_t            strag_relay_run; /* the latest run we relayed phase 1 of */
    uint64_t            strag_splits;   /* runs that took two phases */
    int                 strag_wait_fixed; /* the registration gave the wait */
    int                 strag_opt;      /* optimistic: phase 1 (or the whole run) on the
                                         * partner at once (every op but avg) */
    double              strag_model_us; /* the model's wait */
    double              strag_est_us;   /* measured time of a run (EWMA), 0: none yet */
    uint64_t            strag_go_ns;    /* a run submitted with every rank there: when */
    dfccl_callback_t    strag_user_cb;  /* the run's callback and its argument */
    void               *strag_user_arg;
    void               *strag_ident;    /* count elements of the op's identity */
    void               *strag_scratch;  /* a relay's phase-1 output */
} dfccl_coll_t;

/* Where an exclusion stands in a group (dfccl_group.fault_state). */
enum {
    DFCCL_GFAULT_NONE = 0,
    DFCCL_GFAULT_FOUND,  /* a rank is gone: its collectives are to be given up */
    DFCCL_GFAULT_CANCEL, /* given up: waiting for the daemon to drop them */
    DFCCL_GFAULT_SHRINK  /* a thread builds the group of the survivors */
};

/* Where a collective's run stands in an exclusion (dfccl_coll_t.fault). */
enum {
    DFCCL_CFAULT_NONE = 0,
    DFCCL_CFAULT_CANCEL, /* given up: its blocks drop it or complete it */
    DFCCL_CFAULT_HELD    /* dropped, or never submitted: runs again on the survivors */
};

/* Where a straggler-tolerant run stands (dfccl_coll_t.strag_phase). */
enum {
    DFCCL_STRAG_NONE = 0,
    DFCCL_STRAG_WAIT, /* waits for the others, or for the decision */
    DFCCL_STRAG_ONE,  /* nobody was late: one phase */
    DFCCL_STRAG_P1,   /* an early rank's phase 1 runs */
    DFCCL_STRAG_P2    /* phase 2 runs */
};

struct dfccl_pending {
    dfccl_sqe_t           sqe;
    struct dfccl_pending *next;
};

/* ---- the rank context --------------------------------------------------- */

struct dfccl_rank_ctx {
    dfccl_config_t             cfg;
    const dfccl_backend_ops_t *be;
    dfccl_backend_t            backend;
    int                        device;
    /* the GPU's UUID (CUDA backend; zeros elsewhere): ordinals name
     * different GPUs in processes whose CUDA_VISIBLE_DEVICES differ */
    unsigned char              device_uuid[16];
    /* set by dfccl_ctx_device_lost: the backend's ops do nothing since */
    int                        device_lost;
    void                      *be_priv;
    uint64_t                   uid;

    /* daemon memory: host-side pointers and the launch arguments */
    dfccl_daemon_args_t  args;        /* device pointers, for launches */
    dfccl_sqw_t         *sq;          /* host view of args.sq */
    dfccl_sq_ctrl_t     *sq_ctrl;
    uint64_t            *cq;
    dfccl_cq_ctrl_t     *cq_ctrl;
    dfccl_block_stats_t *stats;
    uint64_t            *abort_flag;
    uint64_t            *progress;    /* host view of args.progress */
    size_t               dev_bytes;

    /* submission side, under `lock` */
    pthread_mutex_t       lock;
    pthread_cond_t        cond;       /* completions, daemon state changes */
    uint64_t              sq_tail;
    uint64_t              launched_tail; /* sq_tail at the last launch */
    uint64_t              last_launch_ns;
    uint64_t              running_seen_ns; /* last time a stuck check found it running */
    uint32_t              stuck_relaunches; /* in a row, with nothing new */
    uint64_t              bells_at_launch;  /* dfccl_group_peer_bells then */
    uint64_t              peer_relaunches;  /* launches a peer's bell brought forward */
    struct dfccl_pending *pend_head, *pend_tail;
    uint64_t              npending;
    int                   batch_depth; /* dfcclBatchStart nesting */
    uint64_t              ndeferred;  /* runs waiting for their peer's connectors */
    int                   nstrag;     /* straggler-tolerant collectives registered */
    int                   strag_watch; /* a peer started a run of one that we have not:
                                        * the poller polls often (a relay may be due) */
    uint64_t              strag_splits, strag_relays; /* dfccl_stats_t's */
    uint64_t              inflight;
    uint64_t              submitted;
    uint64_t              launches;
    uint64_t              resize_epoch; /* launch asked to quit (RESIZE: a larger grid;
                                         * REMAP: memory mapped since it started) */
    uint64_t              map_epoch;    /* latest launch that may have started
                                         * before a device mapping made since */
    int                   sync_pending;
    int                   exit_posted;
    int                   aborted;
    uint64_t              last_check_ns;  /* timeouts and peers, rate-limited */
    uint64_t              last_done_ns;   /* last completion seen */
    uint64_t              where_ns;       /* last publication of where collectives wait */
    uint32_t              sigusr1_seen;   /* SIGUSR1s answered (DFCCL_SIGUSR1) */
    int                   launched_ever;

    /* completion side */
    pthread_mutex_t  cq_lock;
    uint64_t        *cq_head;          /* nblocks, poller's positions */
    /* Every block of a collective posts a CQE for its channel, and the
     * collective completes with the last of them: CQEs seen of its run in
     * flight, and how many its SQE asked for (its nchannels, written when
     * the SQE is, read by the poller) */
    uint32_t        *cqe_seen;         /* max_colls, under cq_lock */
    uint32_t        *cqe_need;         /* max_colls, relaxed atomics */
    uint64_t         completed;        /* collectives completed, under cq_lock */
    uint64_t         kick_gen;         /* bumped by every kick (seq_cst) */
    uint32_t         cond_waiters;     /* threads in a wait on cond (seq_cst) */
    uint64_t         app_poll_ns;      /* last poll by an application thread */

    /* collectives */
    dfccl_coll_t        *colls;
    int                  nregistered;
    void               **orphans;  /* staging of abandoned net channels */
    int                  norphans;
    struct dfccl_group  *groups;
    int                  next_group_id;

    /* net transport (UCX), NULL until a group needs it */
    struct dfccl_net    *net;

    /* poller */
    pthread_t poller;
    int       poller_started;
    int       poller_stop;

    /* Calls into the files above the queues, set by dfcclInit, so that
     * queue.c and health.c never call them by name: a collective's
     * registration after its completion (coll.c), runs waiting for a
     * peer's registration (coll.c; returns how many it completed with an
     * error), and the kick of the host backend's daemon threads. */
    void (*coll_release)(struct dfccl_rank_ctx *ctx, int id);
    int (*coll_resolve)(struct dfccl_rank_ctx *ctx);
    void (*kick)(struct dfccl_rank_ctx *ctx);
    /* And the measurement of a new group's links (profile.c), which
     * dfcclGroupCreate makes with DFCCL_PROFILE=create: it runs
     * collectives, which sit above the groups. */
    dfccl_status_t (*group_profile)(struct dfccl_group *g);
    /* Fault exclusion (fault.c): groups with an exclusion under way, the
     * step that moves them on (called by the progress loop, no lock held),
     * and per collective id, 1 while an exclusion rebuilds it (queries say
     * in progress, runs are refused), 2 when the next run is the
     * exclusion's own (it clears the mark). */
    int       nfaults;
    uint64_t  ncancels; /* args.cancels' value: runs given up, not all dropped yet */
    void    (*fault_progress)(struct dfccl_rank_ctx *ctx);
    /* whether an excluding group has a failure to exclude (fault.c's
     * dfccl_fault_found, called by the health check) */
    int     (*fault_found)(struct dfccl_group *g);
    uint8_t  *fault_held;
    /* A group just set up (group.c calls it, no lock held): its policy
     * from DFCCL_FAULT_POLICY (fault.c). */
    void    (*group_born)(struct dfccl_group *g);
    /* DFCCL_PROFILE_EVERY (profile.c): a collective of g completed, its
     * callback run (queue.c calls it before the collective may run or go
     * again, no lock held); a registration on g is about to choose its
     * layout (coll.c; an error fails the registration); g is to be
     * destroyed (group.c, before anything else). */
    void           (*group_done)(struct dfccl_group *g, int id, dfccl_status_t status);
    dfccl_status_t (*group_register)(struct dfccl_group *g);
    dfccl_status_t (*group_retire)(struct dfccl_group *g);
};

/*
 * Whether the device was reset under the context (cudaDeviceReset before
 * MPI_Finalize, say): every CUDA allocation and stream of it is gone, the
 * daemon with them. Asked where the context is taken apart, which then
 * frees only what is the process's own: nothing waits for a daemon that
 * cannot answer, and no CUDA call is made on what the reset freed.
 */
static inline int dfccl_ctx_device_lost(struct dfccl_rank_ctx *ctx)
{
    if (!ctx->device_lost && ctx->be->lost != NULL && ctx->be->lost(ctx)) {
        ctx->device_lost = 1;
        dfccl_info("device %d was reset while dfccl used it (cudaDeviceReset before "
                   "dfcclDestroy or MPI_Finalize): its GPU memory is gone; dfccl frees its "
                   "host memory only", ctx->device);
    }
    return ctx->device_lost;
}

/* group.c */
void dfccl_group_free(struct dfccl_group *g);
/* Give g's links of class `link` these values (alpha_us and beta_gbps
 * follow: the ring's view of every class's). */
void dfccl_group_link_set(struct dfccl_group *g, int link, double alpha_us, double beta_gbps);
/* news from peers (ctx->lock held): the bells of every group's same-host
 * peers, plus the slots and credits the net proxy received */
uint64_t dfccl_group_peer_bells(struct dfccl_rank_ctx *ctx);
/* count a dfcclRun* on the group */
void dfccl_group_ring(struct dfccl_group *g);
/*
 * Has a rank of the group failed the current run of collective `c`, so
 * that it cannot complete here? From what the ranks of this host publish
 * in their directories: a registration mismatch at or before c's
 * registration, a failure of this run, an aborted context or a destroyed
 * group that had not finished it. `from_only`: mismatches only. Returns
 * that rank, with the status to fail with and (msg may be NULL) a message
 * naming it and its reason; -1 if none. ctx->lock held.
 */
int dfccl_group_failed_run(struct dfccl_group *g, const dfccl_coll_t *c, int from_only,
                           dfccl_status_t *status_p, char *msg, size_t len);
/* 1 if rank r (on this host) has finished its part of c's current run: it
 * may leave, what it sent stays in our connectors. ctx->lock held. */
int dfccl_group_rank_done(struct dfccl_group *g, int r, const dfccl_coll_t *c);
/* 1 if rank r (on this host) has destroyed the group: its net sends were
 * flushed by then (dfcclDeregister, dfcclDestroy), so what it sent over
 * the net edge is on its way to us even after it exits. */
int dfccl_group_rank_left(struct dfccl_group *g, int r);
/* The next group this boot sets up sends its net addresses from every
 * rank (fault.c's groups of survivors, which exclude in their turn). */
void dfccl_group_boot_want_net(dfccl_group_boot_t b);
/* rank's position in g's ring (dfccl_group.ring_pos), -1 if none */
int dfccl_group_ring_pos(const struct dfccl_group *g, int rank);

/* profile.c: measure each class of link of g's ring and its collectives'
 * fixed cost, agree on them with the other ranks and keep them in g (the
 * context's group_profile). Collective: every rank of g, none of g's
 * collectives running. */
dfccl_status_t dfccl_profile_group(struct dfccl_group *g);
/* profile.c, DFCCL_PROFILE_EVERY: the hooks of the context (group_done,
 * group_register, group_retire); and for dfcclDestroy, every group's
 * refreshes run to their end (before it checks for collectives in flight)
 * and then their memory released (after the daemon exited). */
void dfccl_refresh_done(struct dfccl_group *g, int id, dfccl_status_t status);
dfccl_status_t dfccl_refresh_register(struct dfccl_group *g);
dfccl_status_t dfccl_refresh_retire(struct dfccl_group *g);
void dfccl_refresh_settle(struct dfccl_rank_ctx *ctx);
void dfccl_refresh_release(struct dfccl_rank_ctx *ctx);

/* log.c: what messages call things */
/* "collective 3 (allreduce of 1000 float32) on group world (rank 1 of 4)" */
void dfccl_coll_label(struct dfccl_rank_ctx *ctx, int id, char *buf, size_t len);
/* A registration signature in words. */
void dfccl_coll_describe_sig(const uint64_t sig[8], char *buf, size_t len);

/* queue.c */
dfccl_status_t dfccl_ctx_submit(struct dfccl_rank_ctx *ctx, int kind, int coll_id,
                                const void *sendbuff, void *recvbuff);
void dfccl_ctx_kick(struct dfccl_rank_ctx *ctx);
/* wait on ctx->cond until `deadline` (CLOCK_REALTIME) unless kicked since
 * kick_gen read `gen` */
void dfccl_ctx_wait_kick(struct dfccl_rank_ctx *ctx, uint64_t gen, const struct timespec *deadline);
/* a collective's end: its callback, then coll_release (no lock held) */
void dfccl_ctx_complete(struct dfccl_rank_ctx *ctx, int id, dfccl_status_t status);
/* submit what waited on the host, and launch the daemon if it should run
 * (ctx->lock held) */
void dfccl_ctx_drain_pending(struct dfccl_rank_ctx *ctx);
dfccl_status_t dfccl_ctx_maybe_launch(struct dfccl_rank_ctx *ctx, int force);
/* With nothing in flight, ask a running daemon whose grid is wider than
 * the registered collectives need to quit now, so that the next launch is
 * as narrow as they are (DFCCL_MAX_BLOCKS) instead of holding its blocks
 * until it idles out (after the wide collectives of a group's profile).
 * ctx->lock held. */
void dfccl_ctx_narrow(struct dfccl_rank_ctx *ctx);

/* health.c */
/* poll the completion queues, resolve deferred runs, check health, drain
 * and launch: the number of collectives completed */
int dfccl_ctx_progress(struct dfccl_rank_ctx *ctx);
/* complete a collective that never reached the daemon, with an error */
void dfccl_ctx_fail(struct dfccl_rank_ctx *ctx, int id, dfccl_status_t status);
/* stop the daemon and fail every collective in flight (`culprit` and its
 * `status` first) */
void dfccl_ctx_abort(struct dfccl_rank_ctx *ctx, int culprit, dfccl_status_t status,
                     const char *why);
/* DFCCL_SIGUSR1: the handler, once per process; ctx counts from now on */
dfccl_status_t dfccl_sigusr1_install(struct dfccl_rank_ctx *ctx);

/* fault.c: has g (DFCCL_FAULT_EXCLUDE) a rank that this rank finds dead,
 * or a message of another survivor's exclusion? ctx->lock held
 * (ctx->fault_found) */
int dfccl_fault_found(struct dfccl_group *g);
/* fault.c: the progress of the exclusions under way (ctx->fault_progress) */
void dfccl_fault_progress(struct dfccl_rank_ctx *ctx);
/* fault.c: a new group takes DFCCL_FAULT_POLICY where it can, else keeps
 * DFCCL_FAULT_ABORT with an info line (ctx->group_born) */
void dfccl_fault_group_born(struct dfccl_group *g);

/* coll.c */
/* >= 0: the id the calling thread's next registration takes (it must be
 * free); fault.c registers a group's collectives again under their ids */
extern __thread int dfccl_coll_want_id;
/* nonzero: the calling thread's next registrations are the link profile's
 * probes (dfccl_coll_static_t.probe, DFCCL_K_PROBE_*; profile.c), on the
 * ring's connectors */
extern __thread uint32_t dfccl_coll_probe;
/* nonzero: the deadline of the net flush of the calling thread's next
 * dfcclDeregister calls (fault.c: what a given-up run published may never
 * be taken, and its memory then stays) */
extern __thread uint64_t dfccl_coll_flush_ns;
int dfccl_coll_resolve_deferred(struct dfccl_rank_ctx *ctx);
/* v: alltoallv's sendcounts, sdispls, recvcounts and rdispls, else NULL;
 * want: a dfccl_algo_choice_t for this collective (AUTO: DFCCL_ALGO's) */
dfccl_status_t dfccl_coll_register(dfccl_group_t group, int kind, size_t count, int dtype,
                                   int op, int root, int priority, const size_t *const *v,
                                   int want, int *coll_id_p);
void dfccl_coll_release(struct dfccl_rank_ctx *ctx, int id);
/* Let the relays of straggler-tolerant collectives (phase 1 that this
 * rank's runtime runs for a late run) complete: they need no call of the
 * application, which may destroy the context right after its last run. */
void dfccl_coll_strag_settle(struct dfccl_rank_ctx *ctx);

struct dfccl_algo;
/* straggler.c: the parts of straggler tolerance that read and write the
 * group's directories. Why not: NULL if g can run straggler-tolerant
 * collectives, else the reason in words. */
const char *dfccl_strag_unfit(const struct dfccl_group *g);
/* Whether registration *d on g takes the straggler-tolerant path: its
 * DFCCL_COLL_STRAGGLER, or DFCCL_STRAGGLER=allreduce for an allreduce that
 * g and its op can take (which sets the flag in *d); a wait of 0 becomes
 * DFCCL_STRAGGLER_WAIT_US. */
int dfccl_strag_want(dfccl_coll_desc_t *d, const struct dfccl_group *g);
/* count elements of op's identity (sum, prod, min, max; avg: 0) in buf */
void dfccl_strag_identity(int op, int dtype, size_t count, void *buf);
/* The ski-rental wait in microseconds: the model's time of phase 1 and
 * phase 2, each a run of `a` on nch channels. */
uint32_t dfccl_strag_wait_us(const dfccl_config_t *cfg, const struct dfccl_group *g,
                             const struct dfccl_algo *a, size_t count, int dtype, int nch);
/* Forget any decision left in registration reg's slot by an earlier
 * registration, as seen by this rank: its own runs word. ctx->lock held. */
void dfccl_strag_registered(struct dfccl_group *g, uint64_t reg);
/* The optimistic protocol (every op but avg): this rank commits its data
 * to run `run` (its bit in the word, undecided); the last to commit
 * decides "none late" (returns 0); -1: committed, undecided; > 0: the
 * run was decided before we could commit, with these late ranks (we are
 * one). expire: our wait is over: the ranks not committed are late
 * (returns the decision, whoever made it). */
int64_t dfccl_strag_commit(struct dfccl_group *g, uint64_t reg, uint64_t run);
int64_t dfccl_strag_expire(struct dfccl_group *g, uint64_t reg, uint64_t run);
/* The group's latest measured run time of registration reg (us; 0: none). */
void dfccl_strag_est_put(struct dfccl_group *g, uint64_t reg, double us);
double dfccl_strag_est_get(struct dfccl_group *g, uint64_t reg);
/* 1 if some rank of g has started run `run` of registration reg. */
int dfccl_strag_started(struct dfccl_group *g, uint64_t reg, uint64_t run);
/* The late ranks of run `run` of registration reg: >= 0 once decided.
 * With `decide` (this rank has started the run, `waited_ns` ago), decide
 * it when everybody has started it (none late) or when waited_ns reached
 * wait_ns (those that have not); -1 while undecided. */
int64_t dfccl_strag_decide(struct dfccl_group *g, uint64_t reg, uint64_t run, int decide,
                           uint64_t waited_ns, uint64_t wait_ns);

/* ---- algorithms (runtime/algo/) ------------------------------------------ */

/* Data bytes an LL connector's slots hold together (dfccl_algo_ll_slots):
 * 16 slots of up to 4 KiB, 4 of 16 KiB, as many bytes as 4 slots of the
 * largest LL slot by default. */
#define DFCCL_LL_RING_BYTES (64u << 10)

/*
 * An algorithm: a host module here and a device program in kernels/ (the
 * daemon runs the program named by `id`). plan: whether it can run `kind`
 * of `count` elements of `dtype` on `g`, and on how many channels; layout:
 * its connectors for `nch` channels (fills st's layout fields; returns a
 * channel's region bytes); cost_us: its time for `bytes` (a rank's share
 * for allgather and reduce-scatter) in alpha-beta terms, from the group's
 * link model; partial (NULL: none): the bytes by which the final part of
 * a channel's range grows from its start, for a collective of `st` whose
 * device program finalizes its output in order and says so as it goes
 * (dfccl_prog_publish), or 0 where it completes as a whole
 * (dfcclQueryRange). Same answers on every rank.
 */
typedef struct dfccl_algo {
    const char *name;   /* DFCCL_ALGO's value */
    uint32_t    id;     /* DFCCL_K_ALGO_* */
    const char *cannot; /* what it cannot run, in words */
    int (*plan)(const dfccl_config_t *cfg, const struct dfccl_group *g, int kind, size_t count,
                int dtype, int *nch_p);
    size_t (*layout)(const dfccl_config_t *cfg, const struct dfccl_group *g, int nch,
                     dfccl_coll_static_t *st);
    double (*cost_us)(const struct dfccl_group *g, int kind, size_t bytes);
    size_t (*partial)(const dfccl_coll_static_t *st);
} dfccl_algo_t;

/* An algorithm's descriptor, from its functions dfccl_NAME_plan, _layout and
 * _cost_us (and, for DFCCL_ALGO_DEFINE_PARTIAL, _partial). */
#define DFCCL_ALGO_DESCRIBE(NAME, ID, CANNOT, PARTIAL)                                        \
    const dfccl_algo_t dfccl_algo_##NAME = {.name    = #NAME,                                  \
                                            .id      = (ID),                                   \
                                            .cannot  = (CANNOT),                               \
                                            .plan    = dfccl_##NAME##_plan,                    \
                                            .layout  = dfccl_##NAME##_layout,                  \
                                            .cost_us = dfccl_##NAME##_cost_us,                 \
                                            .partial = (PARTIAL)}
#define DFCCL_ALGO_DEFINE(NAME, ID, CANNOT) DFCCL_ALGO_DESCRIBE(NAME, ID, CANNOT, NULL)
#define DFCCL_ALGO_DEFINE_PARTIAL(NAME, ID, CANNOT)                                           \
    DFCCL_ALGO_DESCRIBE(NAME, ID, CANNOT, dfccl_##NAME##_partial)

/* The α-β time of `hops` steps in sequence that move `bytes` over a link. */
static inline double dfccl_algo_alpha_beta(const struct dfccl_group *g, double hops, double bytes)
{
    return hops * g->alpha_us + bytes / (g->beta_gbps * 1e3);
}

extern const dfccl_algo_t dfccl_algo_ring, dfccl_algo_oneshot, dfccl_algo_twoshot,
    dfccl_algo_mesh, dfccl_algo_msccl, dfccl_algo_tree, dfccl_algo_ctree;

/* algo/algo.c */
/* The algorithm of a collective: DFCCL_ALGO's if it can, else the default
 * policy (DFCCL_TUNER: the configuration's thresholds, or the model's
 * fastest); *nch_p its channels. */
const dfccl_algo_t *dfccl_algo_select(const dfccl_config_t *cfg, struct dfccl_group *g,
                                      int kind, size_t count, int dtype, int op, int *nch_p);
/* The model's microseconds for `a` running `kind` of `count` elements of
 * `dtype` on g over `nch` channels (its plan's): the group's fixed cost of a
 * collective plus the module's alpha-beta estimate, its bytes twice where
 * its layout takes LL, at most DFCCL_MODEL_BLOCK_MBPS a channel, and
 * DFCCL_MODEL_SLICE_NS for each slice past one a hop. Same on every
 * rank. */
double dfccl_algo_predict_us(const dfccl_config_t *cfg, const struct dfccl_group *g,
                             const dfccl_algo_t *a, int kind, size_t count, int dtype, int nch);
const dfccl_algo_t *dfccl_algo_by_id(uint32_t id);

/* algo/common.c */
uint32_t dfccl_algo_ll_slots(const dfccl_config_t *cfg, uint32_t slot_bytes, size_t least);
/* The mesh's layout (mesh, MSCCL programs, trees): a channel's region holds a
 * connector per other rank of `slot`-byte slots, SIMPLE or LL (slots capped at
 * DFCCL_LL_BYTES); fills st's layout and returns a region's bytes. */
size_t dfccl_algo_sender_conns(const dfccl_config_t *cfg, dfccl_coll_static_t *st, int nch,
                               uint32_t slot, int ll);
/* The same with slots of `slot` bytes, doubled while below `want` and
 * `most`, and LL where DFCCL_PROTO says so or (auto) where a slot holds at
 * most DFCCL_LL_BYTES (the mesh, trees). */
size_t dfccl_algo_sender_slots(const dfccl_config_t *cfg, dfccl_coll_static_t *st, int nch,
                               uint32_t slot, double want, uint32_t most);
/* The largest slot of a region's connectors: `least`, doubled while the
 * region's connectors (one per rank) stay within twice DFCCL_SLOT_BYTES,
 * and never above it: 512 KiB on 2 ranks, 256 KiB on 4, 128 KiB from 8
 * with the GPU defaults. */
uint32_t dfccl_algo_region_slot(const dfccl_config_t *cfg, const struct dfccl_group *g,
                                uint32_t least);
/* every rank writes into every peer's connectors, in LL (one and two shot) */
int dfccl_algo_all_local(const dfccl_config_t *cfg, const struct dfccl_group *g);
/* algo/tree.c: whether this rank sends to rank q on channel ch of a tree
 * collective (q is its parent or a child there) */
int dfccl_tree_sends_to(const dfccl_coll_static_t *st, int ch, int q);
/* threads of a block that run an LL channel of `bytes` a primitive (one
 * shot, MSCCL programs); 0: all */
uint32_t dfccl_algo_team(const dfccl_config_t *cfg, uint64_t bytes);

/* algo/msccl.c: an MSCCL program's thread blocks in device memory, for
 * collective c (registered with that algorithm) on g; their channels, with
 * their connectors, once the peers' regions are found (c->chans holds
 * them); released with dfccl_msccl_release; whether a thread block of ours
 * sends to rank q on channel ch (the peers' regions to find) */
dfccl_status_t dfccl_msccl_setup(struct dfccl_rank_ctx *ctx, struct dfccl_group *g,
                                 dfccl_coll_t *c);
dfccl_status_t dfccl_msccl_resolve(struct dfccl_rank_ctx *ctx, dfccl_coll_t *c);
void dfccl_msccl_release(struct dfccl_rank_ctx *ctx, dfccl_coll_t *c);
int dfccl_msccl_sends_to(const dfccl_coll_t *c, int ch, int q);


/* algo/ring.c */
/* A channel per `per` bytes, at most `most` and one per element, at least one. */
int dfccl_nchannels_for(size_t bytes, size_t per, size_t most, size_t count);
int dfccl_ring_nchannels(const dfccl_config_t *cfg, int kind, size_t count, int dtype,
                         int nranks, int pair);
void dfccl_ring_partition(int kind, size_t count, int nchannels, int ch, uint64_t *off_p,
                          uint64_t *cnt_p);
/* What a primitive does (dfccl_dir_reg_t.where_flags), as kernels/prims.h
 * fuses it. */
enum {
    DFCCL_WHERE_RECV   = 1u << 0,
    DFCCL_WHERE_SEND   = 1u << 1,
    DFCCL_WHERE_REDUCE = 1u << 2,
    DFCCL_WHERE_COPY   = 1u << 3
};
uint32_t dfccl_ring_step_prim(const dfccl_coll_static_t *st, uint32_t step);
void dfccl_prim_name(uint32_t flags, char *buf, size_t len);

#endif /* DFCCL_RUNTIME_INT_H_ */
