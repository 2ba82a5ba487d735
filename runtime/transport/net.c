/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Net transport: ranks whose ring successor is on another host (or every
 * rank, with DFCCL_NET=1) send through a local staging region laid out like
 * a connector (ctrl + nslots slots); a proxy thread per rank context moves
 * each slot the daemon publishes there to the next rank with UCX, straight
 * into the matching slot of that rank's own receive connector, and carries
 * the receiver's `head` back as a credit. The daemon only ever touches local
 * memory, and the proxy keeps moving data while collectives are preempted.
 *
 * UCP's tag API is used because a tag can name the destination exactly
 * (group, registration index, channel, slot sequence), and ucp_tag_probe_nb
 * lets the receiver pick the destination slot before it receives: the data
 * lands in place with no extra copy and no memory registration exchange,
 * which RMA (ucp_put) would need per segment, while stream and active
 * messages would need a bounce buffer. A message for a collective the
 * receiver has not registered yet is probed out of UCX's queue (it stays
 * held by UCX, unreceived) and kept pending until the registration appears.
 *
 * The slots themselves (not the ctrl words, which the proxy polls) may be
 * in registered regions of the transport's own instead (DFCCL_NET_MEM): on
 * the GPU where UCX reaches CUDA memory, so that UCX moves them from and to
 * the GPU directly (dfccl_net_region_t).
 *
 * Every UCX call is made on the proxy thread except context/worker creation
 * and destruction (the worker runs in UCS_THREAD_MODE_SINGLE) and the
 * mapping of regions (a context call); application threads only add and
 * remove channel records under the net lock.
 */
#include "../dfccl_int.h"

#include <sched.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Host identity: DFCCL_HOST_ID, else hostname + kernel boot id. */
void dfccl_net_host_id(char *buf, size_t len)
{
    const char *env = getenv("DFCCL_HOST_ID");
    char host[64] = "", boot[64] = "";
    FILE *f;

    if (env != NULL && *env != '\0') {
        snprintf(buf, len, "%s", env);
        return;
    }
    gethostname(host, sizeof(host) - 1);
    f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f != NULL) {
        if (fgets(boot, sizeof(boot), f) == NULL) {
            boot[0] = '\0';
        }
        fclose(f);
        boot[strcspn(boot, "\n")] = '\0';
    }
    snprintf(buf, len, "%s/%s", host, boot);
}

uint64_t dfccl_net_deadline(const struct dfccl_rank_ctx *ctx)
{
    return ctx->cfg.timeout_s > 0 ? dfccl_time_ns() + (uint64_t)(ctx->cfg.timeout_s * 1e9) : 0;
}

#ifndef HAVE_UCX

dfccl_status_t dfccl_net_start(struct dfccl_rank_ctx *ctx)
{
    return dfccl_error(DFCCL_ERR_UNSUPPORTED, "net transport: this build of dfccl has no UCX; "
                       "install libucx-dev (pkg-config ucx) and reconfigure, or keep every "
                       "rank of the group on one host without DFCCL_NET=1");
}

dfccl_status_t dfccl_net_address(struct dfccl_rank_ctx *ctx, void *buf, size_t len)
{
    return DFCCL_ERR_UNSUPPORTED;
}

dfccl_status_t dfccl_net_group_connect(struct dfccl_group *g, const void *addrs, size_t stride,
                                       const char *hosts, size_t hstride, int wait)
{
    return DFCCL_ERR_UNSUPPORTED;
}

int dfccl_net_mem_own(const struct dfccl_rank_ctx *ctx, const dfccl_coll_static_t *st)
{
    return 0;
}

dfccl_status_t dfccl_net_chan_add(struct dfccl_group *g, int coll_id, int ch, int send,
                                  void *host_ctrl, const dfccl_coll_static_t *st,
                                  const uint64_t sig[8], char **data_p)
{
    return DFCCL_ERR_UNSUPPORTED;
}

dfccl_status_t dfccl_net_coll_remove(struct dfccl_rank_ctx *ctx, int coll_id,
                                     uint64_t deadline_ns)
{
    return DFCCL_OK;
}
void dfccl_net_fail_send(struct dfccl_group *g, const dfccl_dir_fail_t *f) {}
int dfccl_net_fail_recv(struct dfccl_rank_ctx *ctx, int *gid_p, dfccl_dir_fail_t *f)
{
    return 0;
}
void dfccl_net_stop(struct dfccl_rank_ctx *ctx) {}
void dfccl_net_group_left(struct dfccl_group *g) {}
int dfccl_net_neighbour_gone(struct dfccl_group *g, uint64_t reg, uint64_t run,
                             dfccl_status_t *status_p, char *msg, size_t len)
{
    return 0;
}
uint64_t dfccl_net_arrivals(struct dfccl_rank_ctx *ctx)
{
    return 0;
}
int dfccl_net_failed(struct dfccl_rank_ctx *ctx, int *coll_p, dfccl_status_t *status_p,
                     char *msg, size_t len)
{
    return 0;
}
int dfccl_net_peer_of(struct dfccl_rank_ctx *ctx, const void *slot, int rank, const char *host)
{
    return DFCCL_ERR_UNSUPPORTED;
}
void dfccl_net_watch(struct dfccl_rank_ctx *ctx, int pi, int on) {}
int dfccl_net_peer_dead(struct dfccl_rank_ctx *ctx, int pi, uint64_t silent_ns, char *why,
                        size_t len)
{
    return 0;
}
int dfccl_net_rank_left(struct dfccl_group *g, int rank)
{
    return 0;
}
void dfccl_net_peer_close(struct dfccl_rank_ctx *ctx, int pi) {}
dfccl_status_t dfccl_net_xchg_send(struct dfccl_rank_ctx *ctx, int pi, int gid, const void *buf,
                                   size_t len)
{
    return DFCCL_ERR_UNSUPPORTED;
}
long dfccl_net_xchg_take(struct dfccl_rank_ctx *ctx, int gid, const void *key, size_t keylen,
                         void *buf, size_t len)
{
    return -1;
}
int dfccl_net_xchg_waiting(struct dfccl_rank_ctx *ctx, int gid)
{
    return 0;
}
uint64_t dfccl_net_xchg_union(struct dfccl_rank_ctx *ctx, int gid, size_t off)
{
    return 0;
}
void dfccl_net_xchg_drop(struct dfccl_rank_ctx *ctx, int gid) {}

#else /* HAVE_UCX */

#include <ucp/api/ucp.h>
#include <uct/api/uct.h>

/* A UCX call failed: log the call text and UCX's reason once, return a
 * status. */
#define DFCCL_UCX(_call, _what)                                                \
    ({                                                                         \
        ucs_status_t _us  = (_call);                                           \
        dfccl_status_t _st = DFCCL_OK;                                         \
        if (_us != UCS_OK) {                                                   \
            _st = dfccl_error(DFCCL_ERR_TRANSPORT, "net transport (UCX): %s "   \
                              "failed: %s%s", #_call, ucs_status_string(_us),  \
                              (_what));                                        \
        }                                                                      \
        _st;                                                                   \
    })

/* Tag: type (2 bits) | group id of the destination (12) | registration
 * index (20) | channel (6: DFCCL_MAX_CHANNELS) | slot sequence (24). The
 * sequence is rebuilt from the receiver's position: at most nslots (<= 64)
 * are in flight. */
enum { DFCCL_NET_CONNECT = 0, DFCCL_NET_HELLO = 1, DFCCL_NET_DATA = 2, DFCCL_NET_CREDIT = 3 };
/* Sequences of CONNECT-type messages that carry something else than a
 * connection: a failure record (dfccl_dir_fail_t) of the destination
 * group, a group's goodbye (dfccl_net_group_left), and a context's last
 * message to a peer before its endpoints close (its worker address). */
#define DFCCL_NET_FAIL_SEQ 1
#define DFCCL_NET_LEFT_SEQ 2
#define DFCCL_NET_BYE_SEQ  3
/* A message of a fault exclusion (fault.c) to our group of the tag's id,
 * and a heartbeat (the sender's address hash) to a peer of a group that
 * excludes failed ranks. */
#define DFCCL_NET_XCHG_SEQ 4
#define DFCCL_NET_BEAT_SEQ 5
/* How often the control lane's proxy sends heartbeats to watched peers. */
#define DFCCL_NET_BEAT_EVERY_NS 100000000ull
/* A peer whose connection closed without its last message: how long the
 * proxy keeps taking what arrives before the peer is taken as gone (what
 * it sent last may come through another of UCX's connections). */
#define DFCCL_NET_GONE_NS 500000000ull
#define DFCCL_NET_CONNECT_S 120 /* connection wait without DFCCL_TIMEOUT */
#define DFCCL_NET_DEFAULT_TLS "tcp,sm,self"
#define DFCCL_NET_SEQ_BITS 24
#define DFCCL_NET_CH_MASK  63
#define DFCCL_NET_SEQ_MASK ((1ull << DFCCL_NET_SEQ_BITS) - 1)
#define DFCCL_NET_IDX_MASK ((1ull << 20) - 1)
_Static_assert(DFCCL_MAX_CHANNELS <= DFCCL_NET_CH_MASK + 1, "a tag names every channel");

/* A worker address as the 8 bytes of a goodbye (FNV-1a): short enough for
 * UCX to carry inline, where a whole address may go through a buffer of
 * the receiver's that the sender has to map, after the receiver may have
 * gone. */
static uint64_t dfccl_net_addr_hash(const void *addr, size_t len)
{
    const uint8_t *b = addr;
    uint64_t h       = 0xcbf29ce484222325ull;

    for (size_t i = 0; i < len; i++) {
        h = (h ^ b[i]) * 0x100000001b3ull;
    }
    return h;
}

static ucp_tag_t dfccl_net_tag(int type, int gid, uint64_t idx, int ch, uint64_t seq)
{
    return ((ucp_tag_t)type << 62) | ((ucp_tag_t)(gid & 0xfff) << 50) |
           ((idx & DFCCL_NET_IDX_MASK) << 30) |
           ((ucp_tag_t)(ch & DFCCL_NET_CH_MASK) << DFCCL_NET_SEQ_BITS) |
           (seq & DFCCL_NET_SEQ_MASK);
}

typedef struct dfccl_net_peer {
    uint8_t  addr[DFCCL_NET_ADDR_MAX];
    size_t   len;
    ucp_ep_h ep;
    int      failed;     /* nothing more goes to it */
    int      rank;       /* for messages: the first group's rank of this peer */
    char     host[64];
    struct dfccl_net *net;
    /* its connection closed or broke (UCS_OK: not); what it sent before
     * is still taken */
    ucs_status_t err;
    uint64_t     err_ns;
    int          bye;  /* its context's last message came: nothing follows */
    int          gone; /* the closing is final: every message it sent before
                        * has been taken (read by the health check) */
    /* in a lane after the first: the same process in lane 0, where its
     * goodbye comes */
    struct dfccl_net_peer *ctl;
    /* Fault exclusion (lane 0): groups that exclude failed ranks watch
     * this peer (a count): the proxy sends it heartbeats, and a transport
     * error on it closes it instead of failing the whole transport;
     * heard_ns is when its last heartbeat came (or the watch began). */
    int          watch;
    uint64_t     heard_ns;
    /* a rank of a group that excludes failed ranks (dfccl_net_peer_of):
     * an error on it closes it alone */
    int          excl;
} dfccl_net_peer_t;

/*
 * Slots in memory registered with UCX once (DFCCL_NET_MEM): the backend's
 * device memory, mapped with ucp_mem_map and handed to UCX with its type
 * and handle, so that a CUDA-enabled UCX moves it with cuda_ipc, cuda_copy
 * or GPUDirect RDMA, and the daemon writes and reads its slots in the
 * GPU's own memory. A region belongs to one channel at a time; when the
 * channel goes (UCX holds none of its requests any more) the region goes
 * back to the context's list for the next channel of its size. Regions
 * are freed only when the transport stops, after the proxies: no device
 * free runs beside the daemon, and a region UCX may still touch never goes.
 */
typedef struct dfccl_net_region {
    void                    *ptr;
    size_t                   bytes;
    ucp_mem_h                memh;
    int                      busy;
    struct dfccl_net_region *next;
} dfccl_net_region_t;

typedef struct dfccl_net_chan {
    int                send;    /* 1: our staging (to next); 0: our receive connector */
    int                coll_id;
    int                ch;
    uint64_t           idx;     /* registration index (sig[6]) */
    int                in_gid;  /* group id in tags we receive for it (ours) */
    int                out_gid; /* group id in tags we send for it (the peer's) */
    int                peer;
    dfccl_conn_ctrl_t *ctrl;    /* host address */
    char              *data;
    dfccl_net_region_t *region; /* where data is, if registered (else host memory) */
    uint32_t           nslots;
    uint32_t           slot_bytes;
    uint64_t           sig[8];
    int                closing;
    /* closing gave up waiting: never driven again (its memory may be
     * gone); kept only while UCX still holds requests of it */
    int                abandoned;
    int                broken;    /* its ctrl words made no sense: not driven */
    char               group[64];
    /* send side */
    int                hello;   /* 0 not sent, 1 posted, 2 done */
    void              *hello_req;
    uint64_t           sent, done, credit, head_pub;
    void              *sreq[64];
    int                sdone[64];
    /* receive side */
    int                hello_ok;
    uint64_t           tail, posted, credited, credit_out;
    void              *rreq[64];
    uint64_t           rgot[64];  /* seq + 1 of the slot's received message */
    void              *creq;
    struct dfccl_net_chan *next;
} dfccl_net_chan_t;

typedef struct dfccl_net_pend {
    ucp_tag_message_h      msg;
    ucp_tag_recv_info_t    info;
    struct dfccl_net_pend *next;
} dfccl_net_pend_t;

/* A failure record on its way to a peer, or received from one. */
typedef struct dfccl_net_frec {
    int                    peer;   /* out: to this peer */
    ucp_tag_t              tag;    /* out */
    void                  *req;    /* out: the posted send */
    int                    posted;
    int                    gid;    /* in: our group it is for */
    dfccl_dir_fail_t       rec;
    void                  *buf;    /* out: sent instead of rec (a goodbye) */
    size_t                 len;
    struct dfccl_net_frec *next;
} dfccl_net_frec_t;

/* A fault exclusion's message to our group `gid`, as received. */
typedef struct dfccl_net_xmsg {
    int                    gid;
    size_t                 len;
    struct dfccl_net_xmsg *next;
    uint8_t                data[];
} dfccl_net_xmsg_t;

/* A neighbour's goodbye to one of our groups (dfccl_net_group_left): the
 * runs it completed of registrations base .. base + n - 1. On the wire:
 * rank, base, n, then the n counts (uint64_t each). */
typedef struct dfccl_net_left {
    int                    gid;  /* our group's id */
    int                    rank; /* the neighbour's rank in it */
    uint64_t               base, n;
    struct dfccl_net_left *next;
    uint64_t               done[];
} dfccl_net_left_t;

struct dfccl_net {
    ucp_context_h     ucp;
    ucp_worker_h      worker;
    ucp_address_t    *addr;
    size_t            addr_len;
    pthread_t         proxy;
    int               proxy_started;
    int               stop;
    pthread_mutex_t   lock;
    pthread_cond_t    cond;     /* a channel was freed */
    int               cuda_mem; /* this UCX reaches CUDA memory (ucp_context_query) */
    struct dfccl_rank_ctx *ctx;
    /* the slots are in registered regions of mem_type (lane 0 keeps the
     * regions, under region_lock) */
    int               own_mem;
    ucs_memory_type_t mem_type;
    /* closed with requests UCX cannot end: its worker (and the UCX
     * context) are not destroyed */
    int               leak;
    pthread_mutex_t   region_lock;
    dfccl_net_region_t *regions;
    /* Lanes (DFCCL_NET_PROXIES): UCX workers of one UCX context, each with
     * a proxy thread, endpoints, channels and pending messages of its own.
     * lanes[0] is the context's first (ctx->net), which alone carries the
     * control messages (connections, failure records, goodbyes) and holds
     * the list; a group's channel ch goes through lane ch % net_lanes. */
    int               nlanes;
    struct dfccl_net *lanes[DFCCL_NET_MAX_LANES];
    dfccl_net_peer_t **peers; /* each allocated alone: UCX keeps its address */
    int               npeers;
    dfccl_net_chan_t *chans;
    dfccl_net_pend_t *pend;
    uint8_t           connected[4096]; /* a CONNECT arrived for this group id */
    /* data or credits that came from peers: news for a host whose daemon
     * quit stuck (dfccl_net_arrivals) */
    uint64_t          arrivals;
    /* failure records to send and received (dfccl_net_fail_send/recv) */
    dfccl_net_frec_t *fail_out, *fail_in;
    dfccl_net_left_t *left;
    /* fault exclusion messages received (dfccl_net_xchg_take), and the
     * last heartbeat round (lane 0) with the word it sends */
    struct dfccl_net_xmsg *xchg_in;
    uint64_t          beat_ns, beat_word;
    /* first failure, reported by the context's health check */
    int               failed;
    int               fail_coll;
    dfccl_status_t    fail_status;
    char              fail_msg[512];
};

static void dfccl_net_fail(struct dfccl_net *net, int coll, dfccl_status_t st, const char *fmt,
                           ...) __attribute__((format(printf, 4, 5)));

static void dfccl_net_fail(struct dfccl_net *net, int coll, dfccl_status_t st, const char *fmt,
                           ...)
{
    va_list ap;

    if (net->failed) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(net->fail_msg, sizeof(net->fail_msg), fmt, ap);
    va_end(ap);
    net->fail_coll   = coll;
    net->fail_status = st;
    __atomic_store_n(&net->failed, 1, __ATOMIC_RELEASE);
    /* reported (printed, last error) by the context's health check once a
     * collective is affected: a peer that exits after its last collective
     * must not print an error */
    dfccl_debug("%s", net->fail_msg);
}

uint64_t dfccl_net_arrivals(struct dfccl_rank_ctx *ctx)
{
    struct dfccl_net *net = __atomic_load_n(&ctx->net, __ATOMIC_ACQUIRE);
    uint64_t n            = 0;

    for (int k = 0; net != NULL && k < net->nlanes; k++) {
        n += __atomic_load_n(&net->lanes[k]->arrivals, __ATOMIC_ACQUIRE);
    }
    return n;
}

int dfccl_net_failed(struct dfccl_rank_ctx *ctx, int *coll_p, dfccl_status_t *status_p,
                     char *msg, size_t len)
{
    struct dfccl_net *net = ctx->net;

    for (int k = 0; net != NULL && k < net->nlanes; k++) {
        const struct dfccl_net *l = net->lanes[k];
        if (__atomic_load_n(&l->failed, __ATOMIC_ACQUIRE)) {
            *coll_p   = l->fail_coll;
            *status_p = l->fail_status;
            snprintf(msg, len, "%s", l->fail_msg);
            return 1;
        }
    }
    return 0;
}

static void dfccl_net_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    dfccl_net_peer_t *p = arg;

    /* Called from ucp_worker_progress, net lock held (or by the thread
     * that stops the transport). Nothing more goes to the peer; what it
     * sent before still comes in. Whether the collectives in flight can do
     * without it is the health check's question (dfccl_net_neighbour_gone),
     * once the proxy made the closing final: a peer that finished its part
     * and left is no failure. */
    if (p->err == UCS_OK) {
        p->err    = status;
        p->err_ns = dfccl_time_ns();
    }
    p->failed = 1;
    dfccl_debug("net: the connection to rank %d on host %s closed: %s", p->rank, p->host,
                ucs_status_string(status));
}

static int dfccl_net_peer_lost(struct dfccl_net *net, int pi, ucs_status_t status);

static ucp_ep_h dfccl_net_ep(struct dfccl_net *net, int pi)
{
    dfccl_net_peer_t *p = net->peers[pi];
    ucp_ep_params_t prm;
    char what[160];
    uint64_t t0;

    if (p->ep != NULL || p->failed) {
        return p->ep;
    }
    memset(&prm, 0, sizeof(prm));
    /* Error mode NONE: with UCP_ERR_HANDLING_MODE_PEER, UCX 1.13 on a loaded
     * machine (4 ranks on 2 cores) declared live peers dead ("Endpoint
     * timeout") in the middle of collectives. A peer that really dies is
     * found by DFCCL_TIMEOUT (and, on one host, by the dead-process check). */
    prm.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                     UCP_EP_PARAM_FIELD_ERR_HANDLER;
    prm.address         = (const ucp_address_t *)p->addr;
    prm.err_mode        = UCP_ERR_HANDLING_MODE_NONE;
    prm.err_handler.cb  = dfccl_net_ep_error;
    prm.err_handler.arg = p;
    p->net              = net;
    snprintf(what, sizeof(what), " (endpoint to rank %d on host %s)", p->rank, p->host);
    t0 = dfccl_time_ns();
    if (p->excl) {
        /* a failed rank of an excluding group is no error of the transport */
        ucs_status_t us = ucp_ep_create(net->worker, &prm, &p->ep);
        if (us != UCS_OK) {
            p->ep = NULL;
            dfccl_net_peer_lost(net, pi, us);
            return NULL;
        }
    } else if (DFCCL_UCX(ucp_ep_create(net->worker, &prm, &p->ep), what) != DFCCL_OK) {
        p->ep     = NULL;
        p->failed = 1;
        dfccl_net_fail(net, -1, DFCCL_ERR_TRANSPORT, "net transport (UCX): cannot connect to "
                       "rank %d on host %s; check that the hosts reach each other (UCX_TLS, "
                       "UCX_NET_DEVICES)", p->rank, p->host);
    } else {
        dfccl_debug("net: endpoint to rank %d on host %s in %.1f ms", p->rank, p->host,
                    (double)(dfccl_time_ns() - t0) / 1e6);
    }
    return p->ep;
}

/* Status of a request from *_nbx: 1 done (request freed), 0 in progress,
 * or a negative status (request freed). */
static int dfccl_net_req_test(void **req_p)
{
    ucs_status_t s;

    if (*req_p == NULL) {
        return 1;
    }
    s = ucp_request_check_status(*req_p);
    if (s == UCS_INPROGRESS) {
        return 0;
    }
    ucp_request_free(*req_p);
    *req_p = NULL;
    return s == UCS_OK ? 1 : DFCCL_ERR_TRANSPORT;
}

/*
 * Test every request a channel has posted (freeing those that are done):
 * nonzero while UCX still holds one, and so may still read or write the
 * channel's slots (or its credit word). Net lock held.
 */
static int dfccl_net_chan_busy(dfccl_net_chan_t *c)
{
    int busy = dfccl_net_req_test(&c->hello_req) == 0 || dfccl_net_req_test(&c->creq) == 0;

    for (int s = 0; s < 64; s++) {
        busy |= dfccl_net_req_test(&c->sreq[s]) == 0;
        busy |= dfccl_net_req_test(&c->rreq[s]) == 0;
    }
    return busy;
}

/* Free a channel record; UCX releases a request that is still in flight
 * when it is done with it. */
static void dfccl_net_chan_free(dfccl_net_chan_t *c)
{
    void **reqs[2 + 2 * 64];
    int n = 0;

    reqs[n++] = &c->hello_req;
    reqs[n++] = &c->creq;
    for (int s = 0; s < 64; s++) {
        reqs[n++] = &c->sreq[s];
        reqs[n++] = &c->rreq[s];
    }
    for (int i = 0; i < n; i++) {
        if (*reqs[i] != NULL) {
            ucp_request_free(*reqs[i]);
        }
    }
    if (c->region != NULL) {
        /* UCX is done with it, or no longer progresses (the transport stops) */
        __atomic_store_n(&c->region->busy, 0, __ATOMIC_RELEASE);
    }
    free(c);
}

/*
 * Every buffer the proxy hands to UCX says what memory it is: host memory
 * (staging, connectors in shm, its own variables), or a registered region
 * with its type and handle. Saying so spares UCX the detection of the
 * memory type, which with a CUDA-enabled UCX is a CUDA driver call on the
 * proxy thread, made while the daemon kernel runs on the same device, and
 * the handle spares it a registration cache lookup per message.
 */
static void dfccl_net_mem_param(ucp_request_param_t *prm, const dfccl_net_region_t *r,
                                ucs_memory_type_t type)
{
    memset(prm, 0, sizeof(*prm));
    prm->op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    prm->memory_type  = r != NULL ? type : UCS_MEMORY_TYPE_HOST;
    if (r != NULL) {
        prm->op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
        prm->memh = r->memh;
    }
}

/*
 * A transport error on a channel to peer `pi` of lane `net`: where a group
 * that excludes failed ranks watches that process, the peer alone is
 * closed (nothing more goes to it; the exclusion decides what it means),
 * and 1 is returned; else 0, and the caller fails the transport.
 */
static int dfccl_net_peer_lost(struct dfccl_net *net, int pi, ucs_status_t status)
{
    dfccl_net_peer_t *p = net->peers[pi], *c = p->ctl != NULL ? p->ctl : p;

    if (!c->excl) {
        return 0;
    }
    if (p->err == UCS_OK) {
        p->err    = status;
        p->err_ns = dfccl_time_ns();
    }
    p->failed = 1;
    dfccl_debug("net: rank %d on host %s is lost (%s); its groups exclude failed ranks", p->rank,
                p->host, ucs_status_string(status));
    return 1;
}

/* Post a tagged send; *req_p is NULL when it completed at once. */
static dfccl_status_t dfccl_net_send(struct dfccl_net *net, dfccl_net_chan_t *c, const void *buf,
                                     size_t len, const dfccl_net_region_t *reg, ucp_tag_t tag,
                                     void **req_p)
{
    ucp_request_param_t prm;
    ucs_status_ptr_t r;
    ucp_ep_h ep = dfccl_net_ep(net, c->peer);

    /* a peer whose connection closed is judged by the health check */
    if (ep == NULL || net->peers[c->peer]->failed) {
        return DFCCL_ERR_TRANSPORT;
    }
    dfccl_net_mem_param(&prm, reg, net->mem_type);
    r = ucp_tag_send_nbx(ep, buf, len, tag, &prm);
    if (UCS_PTR_IS_ERR(r) && dfccl_net_peer_lost(net, c->peer, UCS_PTR_STATUS(r))) {
        return DFCCL_ERR_TRANSPORT;
    }
    if (UCS_PTR_IS_ERR(r)) {
        dfccl_net_fail(net, c->coll_id, DFCCL_ERR_TRANSPORT, "net transport (UCX): "
                       "ucp_tag_send_nbx to rank %d on host %s failed: %s (collective %d on "
                       "group %s)", net->peers[c->peer]->rank, net->peers[c->peer]->host,
                       ucs_status_string(UCS_PTR_STATUS(r)), c->coll_id, c->group);
        return DFCCL_ERR_TRANSPORT;
    }
    *req_p = r;
    return DFCCL_OK;
}

static dfccl_status_t dfccl_net_recv(struct dfccl_net *net, void *buf, size_t len,
                                     const dfccl_net_region_t *reg, ucp_tag_message_h msg,
                                     void **req_p)
{
    ucp_request_param_t prm;
    ucs_status_ptr_t r;

    dfccl_net_mem_param(&prm, reg, net->mem_type);
    r = ucp_tag_msg_recv_nbx(net->worker, buf, len, msg, &prm);
    if (UCS_PTR_IS_ERR(r)) {
        dfccl_net_fail(net, -1, DFCCL_ERR_TRANSPORT, "net transport (UCX): "
                       "ucp_tag_msg_recv_nbx failed: %s", ucs_status_string(UCS_PTR_STATUS(r)));
        return DFCCL_ERR_TRANSPORT;
    }
    *req_p = r;
    return DFCCL_OK;
}

/* Receive a small message now (it has arrived: it was probed). */
static dfccl_status_t dfccl_net_recv_now(struct dfccl_net *net, void *buf, size_t len,
                                         ucp_tag_message_h msg)
{
    void *req = NULL;
    int rc;

    DFCCL_CHECK(dfccl_net_recv(net, buf, len, NULL, msg, &req));
    while ((rc = dfccl_net_req_test(&req)) == 0) {
        ucp_worker_progress(net->worker);
    }
    return rc == 1 ? DFCCL_OK : (dfccl_status_t)rc;
}

static dfccl_net_chan_t *dfccl_net_find(struct dfccl_net *net, int send, int gid, uint64_t idx,
                                        int ch)
{
    for (dfccl_net_chan_t *c = net->chans; c != NULL; c = c->next) {
        if (c->send == send && c->in_gid == gid && c->ch == ch && !c->closing &&
            (c->idx & DFCCL_NET_IDX_MASK) == idx) {
            return c;
        }
    }
    return NULL;
}

static void dfccl_net_describe(const uint64_t sig[8], char *buf, size_t len)
{
    snprintf(buf, len, "%s of %llu %s (op %s, root %d), %u channel(s), slot %u x %u",
             dfccl_coll_name((int)(sig[1] & 0xffff)), (unsigned long long)sig[2],
             dfccl_dtype_name((int)((sig[1] >> 16) & 0xffff)),
             dfccl_op_name((int)((sig[1] >> 32) & 0xffff)), (int)(uint32_t)sig[3],
             (unsigned)(uint32_t)sig[4], (unsigned)(uint32_t)sig[5],
             (unsigned)(sig[5] >> 32));
}

static void dfccl_net_drop(struct dfccl_net *net, ucp_tag_message_h msg,
                           const ucp_tag_recv_info_t *info);

/* Forget the goodbyes to our group `gid` (it is gone, or the id is new). */
static void dfccl_net_left_drop(struct dfccl_net *net, int gid)
{
    for (dfccl_net_left_t **pp = &net->left; *pp != NULL;) {
        dfccl_net_left_t *l = *pp;
        if (l->gid == gid) {
            *pp = l->next;
            free(l);
        } else {
            pp = &l->next;
        }
    }
}

/* Receive a goodbye to our group `gid` and keep it (the latest per rank). */
static int dfccl_net_take_left(struct dfccl_net *net, int gid, ucp_tag_message_h msg,
                               const ucp_tag_recv_info_t *info)
{
    uint64_t *w = info->length >= 3 * sizeof(uint64_t) ? malloc(info->length) : NULL;
    dfccl_net_left_t *l = NULL;
    uint64_t n;

    if (w == NULL) {
        dfccl_net_drop(net, msg, info);
        return 1;
    }
    if (dfccl_net_recv_now(net, w, info->length, msg) != DFCCL_OK) {
        free(w);
        return DFCCL_ERR_TRANSPORT;
    }
    n = w[2];
    if (n == (info->length - 3 * sizeof(uint64_t)) / sizeof(uint64_t)) {
        l = malloc(sizeof(*l) + n * sizeof(uint64_t));
    }
    if (l != NULL) {
        dfccl_net_left_t **pp = &net->left;
        l->gid  = gid;
        l->rank = (int)w[0];
        l->base = w[1];
        l->n    = n;
        memcpy(l->done, w + 3, n * sizeof(uint64_t));
        while (*pp != NULL && !((*pp)->gid == gid && (*pp)->rank == l->rank)) {
            pp = &(*pp)->next;
        }
        if (*pp != NULL) {
            dfccl_net_left_t *old = *pp;
            *pp                   = old->next;
            free(old);
        }
        l->next   = net->left;
        net->left = l;
        dfccl_debug("net: rank %d left our group %d after %llu registration(s)", l->rank, gid,
                    (unsigned long long)(l->base + l->n));
    }
    free(w);
    return 1;
}

/* Receive the 8-byte hash of a peer's worker address that a goodbye (bye)
 * or a heartbeat carries, and mark the peers it names: going, or heard
 * from now. */
static int dfccl_net_take_hash(struct dfccl_net *net, ucp_tag_message_h msg,
                               const ucp_tag_recv_info_t *info, int bye)
{
    uint64_t h = 0;

    if (info->length != sizeof(h)) {
        dfccl_net_drop(net, msg, info);
        return 1;
    }
    DFCCL_CHECK(dfccl_net_recv_now(net, &h, sizeof(h), msg));
    for (int i = 0; i < net->npeers; i++) {
        if (dfccl_net_addr_hash(net->peers[i]->addr, net->peers[i]->len) != h) {
            continue;
        }
        if (bye) {
            net->peers[i]->bye = 1;
        } else {
            __atomic_store_n(&net->peers[i]->heard_ns, dfccl_time_ns(), __ATOMIC_RELEASE);
        }
    }
    return 1;
}

/*
 * Handle one probed message: 1 when consumed, 0 when its collective is not
 * registered here yet (keep it pending), negative on failure.
 */
static int dfccl_net_handle(struct dfccl_net *net, ucp_tag_message_h msg,
                            const ucp_tag_recv_info_t *info)
{
    ucp_tag_t tag  = info->sender_tag;
    int type       = (int)(tag >> 62), gid = (int)((tag >> 50) & 0xfff);
    uint64_t idx   = (tag >> 30) & DFCCL_NET_IDX_MASK, seq = tag & DFCCL_NET_SEQ_MASK;
    int ch         = (int)((tag >> DFCCL_NET_SEQ_BITS) & DFCCL_NET_CH_MASK);
    dfccl_net_chan_t *c;
    uint64_t buf[8];

    if (type == DFCCL_NET_CONNECT && seq == DFCCL_NET_FAIL_SEQ) {
        dfccl_net_frec_t *f = calloc(1, sizeof(*f)), **tl = &net->fail_in;
        if (f == NULL) {
            return DFCCL_ERR_NO_MEMORY;
        }
        if (dfccl_net_recv_now(net, &f->rec, sizeof(f->rec), msg) != DFCCL_OK) {
            free(f);
            return DFCCL_ERR_TRANSPORT;
        }
        f->rec.msg[sizeof(f->rec.msg) - 1] = '\0';
        f->gid = gid;
        while (*tl != NULL) {
            tl = &(*tl)->next;
        }
        __atomic_store_n(tl, f, __ATOMIC_RELEASE); /* fail_in is peeked without the lock */
        __atomic_fetch_add(&net->arrivals, 1, __ATOMIC_RELEASE);
        return 1;
    }
    if (type == DFCCL_NET_CONNECT && seq == DFCCL_NET_XCHG_SEQ) {
        dfccl_net_xmsg_t *x = malloc(sizeof(*x) + (info->length > 0 ? info->length : 1));
        dfccl_net_xmsg_t **tl = &net->xchg_in;
        if (x == NULL) {
            dfccl_net_drop(net, msg, info);
            return 1;
        }
        if (dfccl_net_recv_now(net, x->data, info->length, msg) != DFCCL_OK) {
            free(x);
            return DFCCL_ERR_TRANSPORT;
        }
        x->gid  = gid;
        x->len  = info->length;
        x->next = NULL;
        while (*tl != NULL) {
            tl = &(*tl)->next;
        }
        *tl = x;
        __atomic_fetch_add(&net->arrivals, 1, __ATOMIC_RELEASE);
        return 1;
    }
    if (type == DFCCL_NET_CONNECT &&
        (seq == DFCCL_NET_BEAT_SEQ || seq == DFCCL_NET_BYE_SEQ)) {
        return dfccl_net_take_hash(net, msg, info, seq == DFCCL_NET_BYE_SEQ);
    }
    if (type == DFCCL_NET_CONNECT && seq == DFCCL_NET_LEFT_SEQ) {
        return dfccl_net_take_left(net, gid, msg, info);
    }
    if (type == DFCCL_NET_CONNECT) {
        uint64_t v = 0;
        DFCCL_CHECK(dfccl_net_recv_now(net, &v, sizeof(v), msg));
        net->connected[gid] = 1;
        return 1;
    }
    if (type == DFCCL_NET_CREDIT) {
        uint64_t v = 0;
        c          = dfccl_net_find(net, 1, gid, idx, ch);
        DFCCL_CHECK(dfccl_net_recv_now(net, &v, sizeof(v), msg));
        if (c != NULL && v > c->credit) {
            c->credit = v;
            __atomic_fetch_add(&net->arrivals, 1, __ATOMIC_RELEASE);
        }
        return 1; /* a credit for a deregistered collective is dropped */
    }
    c = dfccl_net_find(net, 0, gid, idx, ch);
    if (c == NULL) {
        return 0;
    }
    if (type == DFCCL_NET_HELLO) {
        char mine[160], theirs[160];
        memset(buf, 0, sizeof(buf));
        DFCCL_CHECK(dfccl_net_recv_now(net, buf, sizeof(buf), msg));
        dfccl_debug("net: hello for collective %d channel %d on group %s from rank %d: %s",
                    c->coll_id, c->ch, c->group, net->peers[c->peer]->rank,
                    memcmp(buf, c->sig, sizeof(buf)) == 0 ? "signatures match" : "mismatch");
        if (memcmp(buf, c->sig, sizeof(buf)) != 0) {
            dfccl_net_describe(c->sig, mine, sizeof(mine));
            dfccl_net_describe(buf, theirs, sizeof(theirs));
            dfccl_net_fail(net, c->coll_id, DFCCL_ERR_MISMATCH, "collective %d on group %s: "
                           "this rank registered %s but rank %d (host %s) registered %s at "
                           "the same position (registration #%llu); every rank must register "
                           "the group's collectives in the same order with the same arguments "
                           "(and the same DFCCL_CHANNELS, DFCCL_SLOT_BYTES, DFCCL_SLOTS)",
                           c->coll_id, c->group, mine, net->peers[c->peer]->rank,
                           net->peers[c->peer]->host, theirs, (unsigned long long)c->idx);
            return DFCCL_ERR_MISMATCH;
        }
        c->hello_ok = 1;
        return 1;
    }
    if (!c->hello_ok) {
        return 0; /* data overtook its hello (rendezvous): wait for it */
    }
    /* full sequence from the 25 bits: within nslots of our tail */
    seq = c->tail + ((seq - c->tail) & DFCCL_NET_SEQ_MASK);
    if (seq - c->tail >= c->nslots || info->length > c->slot_bytes) {
        dfccl_net_fail(net, c->coll_id, DFCCL_ERR_INTERNAL, "net transport: collective %d on "
                       "group %s: slot %llu of %zu bytes arrived outside the window (tail "
                       "%llu, %u slots of %u bytes)", c->coll_id, c->group,
                       (unsigned long long)seq, info->length, (unsigned long long)c->tail,
                       c->nslots, c->slot_bytes);
        return DFCCL_ERR_INTERNAL;
    }
    {
        uint32_t s = (uint32_t)(seq % c->nslots);
        DFCCL_CHECK(dfccl_net_recv(net, c->data + (size_t)s * c->slot_bytes, info->length,
                                   c->region, msg,
                                   &c->rreq[s]));
        /* seq + 1 once complete; 0 while the receive is posted */
        c->rgot[s] = c->rreq[s] == NULL ? seq + 1 : 0;
        if (seq + 1 > c->posted) {
            c->posted = seq + 1;
        }
    }
    return 1;
}

/* Drive one send channel; returns nonzero if anything moved. */
static int dfccl_net_drive_send(struct dfccl_net *net, dfccl_net_chan_t *c)
{
    int moved = 0;
    uint64_t tail, head;

    if (c->hello == 0) {
        if (dfccl_net_send(net, c, c->sig, sizeof(c->sig), NULL,
                           dfccl_net_tag(DFCCL_NET_HELLO, c->out_gid, c->idx, c->ch, 0),
                           &c->hello_req) != DFCCL_OK) {
            return 0;
        }
        c->hello = 1;
        moved    = 1;
        dfccl_debug("net: hello sent for collective %d channel %d on group %s to rank %d",
                    c->coll_id, c->ch, c->group, net->peers[c->peer]->rank);
    }
    if (c->hello == 1 && dfccl_net_req_test(&c->hello_req) != 0) {
        c->hello = 2;
    }
    tail = __atomic_load_n(&c->ctrl->tail, __ATOMIC_ACQUIRE);
    /* The daemon publishes a slot only once we freed it (head_pub), so at
     * most nslots sends are ever posted; a tail beyond that (or behind
     * what was sent) is not the daemon's, and is not followed: each send
     * would hold a UCX request and a slot's worth of its buffers. */
    if (tail < c->sent || tail - c->head_pub > c->nslots) {
        c->broken = 1;
        dfccl_net_fail(net, c->coll_id, DFCCL_ERR_INTERNAL, "net transport: collective %d "
                       "on group %s channel %d: the staging tail %llu is outside the window "
                       "(%llu sent, %llu freed, %u slots)", c->coll_id, c->group, c->ch,
                       (unsigned long long)tail, (unsigned long long)c->sent,
                       (unsigned long long)c->head_pub, c->nslots);
        return moved;
    }
    while (c->sent < tail) {
        uint32_t s = (uint32_t)(c->sent % c->nslots);
        if (dfccl_net_send(net, c, c->data + (size_t)s * c->slot_bytes, c->slot_bytes, c->region,
                           dfccl_net_tag(DFCCL_NET_DATA, c->out_gid, c->idx, c->ch, c->sent),
                           &c->sreq[s]) != DFCCL_OK) {
            return moved;
        }
        c->sdone[s] = 0;
        c->sent++;
        moved = 1;
    }
    while (c->done < c->sent) {
        uint32_t s = (uint32_t)(c->done % c->nslots);
        int rc     = dfccl_net_req_test(&c->sreq[s]);
        if (rc == 0) {
            break;
        }
        c->done++;
        moved = 1;
    }
    /* The staging slot is free once the receiver consumed it and UCX no
     * longer reads it. */
    head = c->credit < c->done ? c->credit : c->done;
    if (head > c->head_pub) {
        c->head_pub = head;
        __atomic_store_n(&c->ctrl->head, head, __ATOMIC_RELEASE);
        moved = 1;
    }
    return moved;
}

static int dfccl_net_drive_recv(struct dfccl_net *net, dfccl_net_chan_t *c)
{
    int moved = 0;
    uint64_t head;

    for (uint64_t q = c->tail; q < c->posted; q++) {
        uint32_t s = (uint32_t)(q % c->nslots);
        int rc     = c->rreq[s] != NULL ? dfccl_net_req_test(&c->rreq[s]) : 0;
        if (rc < 0) {
            /* never a slot of wrong data: the collective cannot complete */
            c->broken = 1;
            if (dfccl_net_peer_lost(net, c->peer, UCS_ERR_CONNECTION_RESET)) {
                return moved;
            }
            dfccl_net_fail(net, c->coll_id, DFCCL_ERR_TRANSPORT, "net transport (UCX): "
                           "collective %d on group %s: slot %llu from rank %d on host %s "
                           "could not be received; the peer may have exited or the network "
                           "dropped", c->coll_id, c->group, (unsigned long long)q,
                           net->peers[c->peer]->rank, net->peers[c->peer]->host);
            return moved;
        }
        if (rc > 0) {
            c->rgot[s] = q + 1;
        }
    }
    while (c->tail < c->posted && c->rgot[c->tail % c->nslots] == c->tail + 1) {
        c->tail++;
        moved = 1;
    }
    if (moved) {
        __atomic_store_n(&c->ctrl->tail, c->tail, __ATOMIC_RELEASE);
        __atomic_fetch_add(&net->arrivals, 1, __ATOMIC_RELEASE);
    }
    if (c->creq != NULL && dfccl_net_req_test(&c->creq) == 0) {
        return moved;
    }
    head = __atomic_load_n(&c->ctrl->head, __ATOMIC_ACQUIRE);
    if (head > c->credited) {
        c->credit_out = head;
        if (dfccl_net_send(net, c, &c->credit_out, sizeof(c->credit_out), NULL,
                           dfccl_net_tag(DFCCL_NET_CREDIT, c->out_gid, c->idx, c->ch, 0),
                           &c->creq) == DFCCL_OK) {
            c->credited = head;
            moved       = 1;
        }
    }
    return moved;
}

static int dfccl_net_flushed(dfccl_net_chan_t *c)
{
    if (c->send) {
        return c->hello != 1 && c->done == c->sent &&
               c->sent == __atomic_load_n(&c->ctrl->tail, __ATOMIC_ACQUIRE);
    }
    return c->creq == NULL && c->posted == c->tail;
}

/* Post a failure record or a goodbye once (its peer still there, and not
 * going: it said goodbye): 1 if it was posted now. */
static int dfccl_net_post_rec(struct dfccl_net *net, dfccl_net_frec_t *q)
{
    ucp_request_param_t prm;
    ucs_status_ptr_t r;
    ucp_ep_h ep;

    if (q->posted || net->peers[q->peer]->failed || net->peers[q->peer]->bye) {
        return 0;
    }
    ep = dfccl_net_ep(net, q->peer);
    dfccl_net_mem_param(&prm, NULL, UCS_MEMORY_TYPE_HOST);
    r = ep == NULL ? UCS_STATUS_PTR(UCS_ERR_UNREACHABLE)
        : q->buf != NULL ? ucp_tag_send_nbx(ep, q->buf, q->len, q->tag, &prm)
                         : ucp_tag_send_nbx(ep, &q->rec, sizeof(q->rec), q->tag, &prm);
    q->req    = UCS_PTR_IS_ERR(r) ? NULL : r;
    q->posted = 1;
    return 1;
}

static int dfccl_net_progress(struct dfccl_net *net)
{
    int moved = 0;
    dfccl_net_chan_t **pp;

    moved += (int)ucp_worker_progress(net->worker);
    /* pending messages first: they are older */
    for (dfccl_net_pend_t **qq = &net->pend; *qq != NULL;) {
        dfccl_net_pend_t *q = *qq;
        int rc              = dfccl_net_handle(net, q->msg, &q->info);
        if (rc != 0) {
            *qq = q->next;
            free(q);
            moved++;
        } else {
            qq = &q->next;
        }
    }
    for (;;) {
        ucp_tag_recv_info_t info;
        ucp_tag_message_h msg = ucp_tag_probe_nb(net->worker, 0, 0, 1, &info);
        int rc;
        if (msg == NULL) {
            break;
        }
        moved++;
        rc = dfccl_net_handle(net, msg, &info);
        if (rc == 0) {
            dfccl_net_pend_t *q = calloc(1, sizeof(*q)), **tl = &net->pend;
            if (q == NULL) {
                dfccl_net_fail(net, -1, DFCCL_ERR_NO_MEMORY, "net transport: out of memory");
                break;
            }
            q->msg  = msg;
            q->info = info;
            while (*tl != NULL) {
                tl = &(*tl)->next;
            }
            *tl = q;
        }
    }
    /* A closed connection is final once everything the peer sent before
     * it has been taken (all of it probed above): at its last message, or
     * after a grace period without one (it died, or that message comes
     * through another connection). */
    for (int i = 0; i < net->npeers; i++) {
        dfccl_net_peer_t *p = net->peers[i];
        if (p->err != UCS_OK && !p->gone &&
            (p->bye || dfccl_time_ns() - p->err_ns > DFCCL_NET_GONE_NS)) {
            __atomic_store_n(&p->gone, 1, __ATOMIC_RELEASE);
            dfccl_debug("net: rank %d on host %s is gone (%s)", p->rank, p->host,
                        p->bye ? "it said goodbye" : "no goodbye");
        }
    }
    /* heartbeats to the peers that groups excluding failed ranks watch
     * (lane 0 only: it alone holds the lanes); UCX frees each send */
    if (net->nlanes > 0 && dfccl_time_ns() - net->beat_ns > DFCCL_NET_BEAT_EVERY_NS) {
        net->beat_ns   = dfccl_time_ns();
        net->beat_word = dfccl_net_addr_hash(net->addr, net->addr_len);
        for (int i = 0; i < net->npeers; i++) {
            dfccl_net_peer_t *p = net->peers[i];
            ucp_request_param_t prm;
            ucs_status_ptr_t r;
            /* only where an endpoint is up already: making one to a dead
             * process can block the proxy for seconds ("Endpoint
             * timeout") */
            if (p->watch <= 0 || p->failed || p->bye || p->ep == NULL) {
                continue;
            }
            dfccl_net_mem_param(&prm, NULL, UCS_MEMORY_TYPE_HOST);
            r = ucp_tag_send_nbx(p->ep, &net->beat_word, sizeof(net->beat_word),
                                 dfccl_net_tag(DFCCL_NET_CONNECT, 0, 0, 0, DFCCL_NET_BEAT_SEQ),
                                 &prm);
            if (r != NULL && !UCS_PTR_IS_ERR(r)) {
                ucp_request_free(r);
            }
        }
    }
    /* failure records for peers: posted, then freed once sent (or given
     * up with the peer) */
    for (dfccl_net_frec_t **qq = &net->fail_out; *qq != NULL;) {
        dfccl_net_frec_t *q = *qq;
        int rc              = 1;
        moved += dfccl_net_post_rec(net, q);
        if (!net->peers[q->peer]->failed) {
            rc = dfccl_net_req_test(&q->req);
        }
        if (rc != 0) {
            *qq = q->next;
            free(q->buf);
            free(q);
        } else {
            qq = &q->next;
        }
    }
    for (pp = &net->chans; *pp != NULL;) {
        dfccl_net_chan_t *c = *pp;
        if (c->abandoned) {
            /* its connector or staging may be freed or reused: only its
             * requests are looked at, until UCX has none of them */
            if (!dfccl_net_chan_busy(c)) {
                *pp = c->next;
                dfccl_net_chan_free(c);
                continue;
            }
            pp = &c->next;
            continue;
        }
        /* a peer whose connection closed: what it sent is still taken,
         * and nothing goes to it (dfccl_net_send) */
        if (!c->broken) {
            moved += c->send ? dfccl_net_drive_send(net, c) : dfccl_net_drive_recv(net, c);
        }
        if (c->closing && (c->broken || dfccl_net_flushed(c) || net->peers[c->peer]->failed ||
                           net->stop)) {
            *pp = c->next;
            /* a send to a peer that is gone may never end (see
             * dfccl_net_lane_close) */
            net->leak |= dfccl_net_chan_busy(c);
            dfccl_net_chan_free(c);
            pthread_cond_broadcast(&net->cond);
            continue;
        }
        pp = &c->next;
    }
    return moved;
}

static void *dfccl_net_proxy_main(void *arg)
{
    struct dfccl_net *net = arg;
    const int spin        = net->ctx->backend == DFCCL_BACKEND_CUDA;
    unsigned idle         = 0;

    /* short naps: the default 50 us of timer slack would add more than a
     * small collective's hop takes */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    /* UCX's CUDA transports work in the calling thread's CUDA context */
    if (net->own_mem && net->mem_type == UCS_MEMORY_TYPE_CUDA &&
        net->ctx->be->bind_thread != NULL && net->ctx->be->bind_thread(net->ctx) != DFCCL_OK) {
        dfccl_net_fail(net, -1, DFCCL_ERR_TRANSPORT, "net transport: the proxy thread cannot "
                       "use device %d, where its slots are", net->ctx->device);
    }

    for (;;) {
        int moved, any;
        pthread_mutex_lock(&net->lock);
        if (net->stop) {
            pthread_mutex_unlock(&net->lock);
            break;
        }
        moved = dfccl_net_progress(net);
        any   = net->chans != NULL || net->pend != NULL;
        pthread_mutex_unlock(&net->lock);
        if (moved) {
            idle = 0;
        } else if (++idle < 64 || (spin && any &&
                                   __atomic_load_n(&net->ctx->inflight, __ATOMIC_RELAXED) > 0)) {
            /* On GPUs, while this rank has collectives in flight, the proxy
             * keeps looking, as the poller does: the daemon may publish a
             * slot, or a peer's may arrive, any moment, and a nap would
             * add its length to every hop. The host backend's daemon
             * threads need the cores. */
            sched_yield();
        } else {
            /* nothing moves: leave the core to the daemon and the peers */
            struct timespec ts = {0, any ? 20000 : 1000000};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

/* A lane's worker, its address and its proxy thread, on net->ucp. */
static dfccl_status_t dfccl_net_lane_open(struct dfccl_net *net)
{
    ucp_worker_params_t wprm;
    dfccl_status_t st;

    pthread_mutex_init(&net->lock, NULL);
    pthread_cond_init(&net->cond, NULL);
    memset(&wprm, 0, sizeof(wprm));
    wprm.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wprm.thread_mode = UCS_THREAD_MODE_SINGLE;
    st = DFCCL_UCX(ucp_worker_create(net->ucp, &wprm, &net->worker), "");
    if (st != DFCCL_OK) {
        goto err_lock;
    }
    st = DFCCL_UCX(ucp_worker_get_address(net->worker, &net->addr, &net->addr_len), "");
    if (st != DFCCL_OK) {
        goto err_worker;
    }
    if (net->addr_len + 2 * sizeof(uint64_t) > DFCCL_NET_ADDR_MAX) {
        st = dfccl_error(DFCCL_ERR_TRANSPORT, "net transport (UCX): the worker address is %zu "
                         "bytes, more than the %d the bootstrap exchanges; restrict UCX_TLS "
                         "(e.g. UCX_TLS=tcp,self,sm)", net->addr_len,
                         DFCCL_NET_ADDR_MAX - 2 * (int)sizeof(uint64_t));
        goto err_addr;
    }
    if (pthread_create(&net->proxy, NULL, dfccl_net_proxy_main, net) != 0) {
        st = dfccl_error(DFCCL_ERR_SYSTEM, "net transport: cannot start the proxy thread: %m");
        goto err_addr;
    }
    net->proxy_started = 1;
    return DFCCL_OK;

err_addr:
    ucp_worker_release_address(net->worker, net->addr);
err_worker:
    ucp_worker_destroy(net->worker);
err_lock:
    pthread_mutex_destroy(&net->lock);
    pthread_cond_destroy(&net->cond);
    return st;
}

/* A lane that has no endpoint yet: its proxy stopped, its worker gone. */
static void dfccl_net_lane_drop(struct dfccl_net *net)
{
    pthread_mutex_lock(&net->lock);
    net->stop = 1;
    pthread_mutex_unlock(&net->lock);
    pthread_join(net->proxy, NULL);
    ucp_worker_release_address(net->worker, net->addr);
    ucp_worker_destroy(net->worker);
    pthread_mutex_destroy(&net->lock);
    pthread_cond_destroy(&net->cond);
    free(net);
}

/* The bytes of the bootstrap slot that the first n lanes' addresses take. */
static size_t dfccl_net_slot_bytes(const struct dfccl_net *net, int n)
{
    size_t b = sizeof(uint64_t);

    for (int k = 0; k < n; k++) {
        b += sizeof(uint64_t) + net->lanes[k]->addr_len;
    }
    return b;
}

/* Whether this UCX has a component of this name (its modules loaded). */
static int dfccl_net_has_component(const char *name)
{
    uct_component_h *comps;
    unsigned n;
    int found = 0;

    if (uct_query_components(&comps, &n) != UCS_OK) {
        return 0;
    }
    for (unsigned i = 0; i < n && !found; i++) {
        uct_component_attr_t attr;
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
        found = uct_component_query(comps[i], &attr) == UCS_OK && strcmp(attr.name, name) == 0;
    }
    uct_release_component_list(comps);
    return found;
}

dfccl_status_t dfccl_net_start(struct dfccl_rank_ctx *ctx)
{
    /* slots on the GPU where UCX reaches them (DFCCL_NET_MEM) */
    const int want_dev = ctx->backend == DFCCL_BACKEND_CUDA &&
                         ctx->cfg.net_mem != DFCCL_NET_MEM_HOST;
    struct dfccl_net *net;
    ucp_config_t *config;
    ucp_params_t prm;
    dfccl_status_t st;

    if (ctx->net != NULL) {
        return DFCCL_OK;
    }
    net = calloc(1, sizeof(*net));
    if (net == NULL) {
        return dfccl_error(DFCCL_ERR_NO_MEMORY, "net transport: out of host memory");
    }
    /* UCX_* environment variables apply through ucp_config_read. Without
     * UCX_TLS, the transports are TCP, shared memory and loopback, which
     * work on any machine, rather than every transport UCX finds, and UCX's
     * CUDA transports where the slots are on the GPU. Set UCX_TLS to use
     * others (e.g. UCX_TLS=rc,sm,self,cuda_copy between InfiniBand hosts). */
    st = DFCCL_UCX(ucp_config_read(NULL, NULL, &config), "");
    if (st != DFCCL_OK) {
        goto err_free;
    }
    /* Every request says what memory it hands to UCX: without
     * UCX_MEMTYPE_CACHE, UCX keeps no cache of CUDA allocations, which it
     * would maintain from hooks on the application's CUDA calls. */
    if (getenv("UCX_MEMTYPE_CACHE") == NULL &&
        ucp_config_modify(config, "MEMTYPE_CACHE", "n") != UCS_OK) {
        dfccl_debug("net transport: this UCX has no MEMTYPE_CACHE setting");
    }
    if (getenv("UCX_TLS") == NULL) {
        char tls[96];
        /* UCX warns about a transport in UCX_TLS that it was built
         * without: its CUDA ones are named only where its components are */
        snprintf(tls, sizeof(tls), "%s%s%s", DFCCL_NET_DEFAULT_TLS,
                 want_dev && dfccl_net_has_component("cuda_cpy") ? ",cuda_copy" : "",
                 want_dev && dfccl_net_has_component("cuda_ipc") ? ",cuda_ipc" : "");
        st = DFCCL_UCX(ucp_config_modify(config, "TLS", tls), " (the default UCX_TLS)");
        if (st != DFCCL_OK) {
            ucp_config_release(config);
            goto err_free;
        }
        dfccl_debug("net transport: UCX_TLS=%s", tls);
    }
    memset(&prm, 0, sizeof(prm));
    prm.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    prm.features   = UCP_FEATURE_TAG;
    /* several proxies, or memory mapped from application threads, use the
     * context from more than one thread */
    prm.mt_workers_shared = ctx->cfg.net_proxies > 1 || ctx->cfg.net_mem != DFCCL_NET_MEM_HOST;
    st = DFCCL_UCX(ucp_init(&prm, config, &net->ucp), "; check UCX_TLS");
    ucp_config_release(config);
    if (st != DFCCL_OK) {
        goto err_free;
    }
    {
        ucp_context_attr_t attr;
        attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
        net->cuda_mem   = ucp_context_query(net->ucp, &attr) == UCS_OK &&
                        (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
    }
    net->ctx      = ctx;
    net->mem_type = want_dev ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
    net->own_mem  = ctx->cfg.net_mem != DFCCL_NET_MEM_HOST && (!want_dev || net->cuda_mem);
    if (want_dev && !net->cuda_mem && ctx->cfg.net_mem == DFCCL_NET_MEM_DEVICE) {
        st = dfccl_error(DFCCL_ERR_UNSUPPORTED, "net transport: DFCCL_NET_MEM=device, but this "
                         "UCX does not reach CUDA memory (no cuda_copy transport%s); use a UCX "
                         "built with CUDA (ucx_info -d lists cuda_copy), or DFCCL_NET_MEM=auto "
                         "to stage through host memory",
                         getenv("UCX_TLS") != NULL ? " in UCX_TLS, or none built" : " built");
        goto err_cleanup;
    }
    pthread_mutex_init(&net->region_lock, NULL);
    st = dfccl_net_lane_open(net);
    if (st != DFCCL_OK) {
        goto err_cleanup;
    }
    net->lanes[0] = net;
    net->nlanes   = 1;
    /* more lanes, as many as the setting asks and the bootstrap slot
     * holds; one that cannot be made leaves the others */
    while (net->nlanes < ctx->cfg.net_proxies) {
        struct dfccl_net *l = calloc(1, sizeof(*l));
        if (l == NULL) {
            break;
        }
        l->ucp      = net->ucp;
        l->cuda_mem = net->cuda_mem;
        l->ctx      = ctx;
        l->own_mem  = net->own_mem;
        l->mem_type = net->mem_type;
        if (dfccl_net_lane_open(l) != DFCCL_OK) {
            free(l);
            break;
        }
        net->lanes[net->nlanes] = l;
        if (dfccl_net_slot_bytes(net, net->nlanes + 1) > DFCCL_NET_ADDR_MAX) {
            net->lanes[net->nlanes] = NULL;
            dfccl_net_lane_drop(l);
            break;
        }
        net->nlanes++;
    }
    if (net->nlanes < ctx->cfg.net_proxies) {
        dfccl_info("net transport: %d of the %d proxies DFCCL_NET_PROXIES asks for (worker "
                   "addresses of %zu bytes; the bootstrap holds %d bytes of them a rank)",
                   net->nlanes, ctx->cfg.net_proxies, net->addr_len, DFCCL_NET_ADDR_MAX);
    }
    __atomic_store_n(&ctx->net, net, __ATOMIC_RELEASE);
    dfccl_info("net transport: UCX worker address %zu bytes, %d proxy thread(s) started",
               net->addr_len, net->nlanes);
    return DFCCL_OK;

err_cleanup:
    ucp_cleanup(net->ucp);
err_free:
    free(net);
    return st;
}

/*
 * Our lanes' worker addresses in a DFCCL_NET_ADDR_MAX slot: the number of
 * lanes, then each address's length and bytes.
 */
dfccl_status_t dfccl_net_address(struct dfccl_rank_ctx *ctx, void *buf, size_t len)
{
    const struct dfccl_net *net = ctx->net;
    uint64_t n                  = (uint64_t)net->nlanes;
    char *o                     = buf;

    memset(buf, 0, len);
    memcpy(o, &n, sizeof(n));
    o += sizeof(n);
    for (int k = 0; k < net->nlanes; k++) {
        uint64_t al = net->lanes[k]->addr_len;
        memcpy(o, &al, sizeof(al));
        memcpy(o + sizeof(al), net->lanes[k]->addr, al);
        o += sizeof(al) + al;
    }
    return DFCCL_OK;
}

/* Lane k's address in a rank's slot: its length (0 where the slot has no
 * lane k, or makes no sense), and *addr_p. */
static uint64_t dfccl_net_slot_lane(const void *slot, int k, const uint8_t **addr_p)
{
    const uint8_t *p = slot, *end = p + DFCCL_NET_ADDR_MAX;
    uint64_t n, al = 0;

    memcpy(&n, p, sizeof(n));
    p += sizeof(n);
    if (n > DFCCL_NET_MAX_LANES || (uint64_t)k >= n) {
        return 0;
    }
    for (int i = 0; i <= k; i++) {
        if (end - p < (ptrdiff_t)sizeof(al)) {
            return 0;
        }
        memcpy(&al, p, sizeof(al));
        p += sizeof(al);
        if (al == 0 || al > (uint64_t)(end - p)) {
            return 0;
        }
        *addr_p = p;
        p += al;
    }
    return al;
}

/* The lanes in a rank's slot (0: an empty slot). */
static int dfccl_net_slot_lanes(const void *slot)
{
    const uint8_t *a;
    int k = 0;

    while (k < DFCCL_NET_MAX_LANES && dfccl_net_slot_lane(slot, k, &a) != 0) {
        k++;
    }
    return k;
}

static int dfccl_net_peer_add(struct dfccl_net *net, const void *slot, int lane, int rank,
                              const char *host)
{
    const uint8_t *a = NULL;
    uint64_t n       = dfccl_net_slot_lane(slot, lane, &a);
    dfccl_net_peer_t **grown, *p;

    if (n == 0) {
        return dfccl_error(DFCCL_ERR_BOOTSTRAP, "net transport: rank %d on host %s sent no "
                           "worker address for proxy %d; is it running the net transport?",
                           rank, host, lane);
    }
    for (int i = 0; i < net->npeers; i++) {
        if (net->peers[i]->len == n && memcmp(net->peers[i]->addr, a, n) == 0) {
            return i;
        }
    }
    p     = calloc(1, sizeof(*p));
    grown = p != NULL ? realloc(net->peers, (size_t)(net->npeers + 1) * sizeof(*grown)) : NULL;
    if (grown == NULL) {
        free(p);
        return dfccl_error(DFCCL_ERR_NO_MEMORY, "net transport: out of host memory");
    }
    net->peers = grown;
    memcpy(p->addr, a, n);
    p->len  = n;
    p->rank = rank;
    snprintf(p->host, sizeof(p->host), "%s", host);
    grown[net->npeers] = p;
    return net->npeers++;
}

/*
 * The UCX transports of an endpoint's lanes ("posix/memory cma/memory"),
 * from ucp_ep_print_info's "lane[i]: <rsc>:<tl>/<dev>.<n> ..." lines.
 */
static void dfccl_net_ep_lanes(ucp_ep_h ep, char *buf, size_t len)
{
    char *text = NULL, *line, *save = NULL;
    size_t tlen = 0, o = 0;
    FILE *f = open_memstream(&text, &tlen);

    buf[0] = '\0';
    if (f == NULL) {
        return;
    }
    ucp_ep_print_info(ep, f);
    fclose(f);
    for (line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        char tl[64];
        const char *at = strstr(line, "lane[");
        if (at == NULL || (at = strchr(at, ':')) == NULL ||
            sscanf(at + 1, " %*d:%63s", tl) != 1) {
            continue;
        }
        tl[strcspn(tl, ".")] = '\0';
        if (strstr(buf, tl) == NULL && o + strlen(tl) + 2 < len) {
            o += (size_t)snprintf(buf + o, len - o, "%s%s", o > 0 ? " " : "", tl);
        }
    }
    free(text);
}

/* Say which path the data to our next rank takes (DFCCL_VERBOSE >= 1):
 * UCX's transports, and where the data is staged. Net lock not held. */
static void dfccl_net_say_path(struct dfccl_group *g, struct dfccl_net *net, const char *host)
{
    char lanes[256], staged[256] = "";

    pthread_mutex_lock(&net->lock);
    if (g->net_lane_next[0] >= 0 && net->peers[g->net_lane_next[0]]->ep != NULL) {
        dfccl_net_ep_lanes(net->peers[g->net_lane_next[0]]->ep, lanes, sizeof(lanes));
    } else {
        snprintf(lanes, sizeof(lanes), "none yet");
    }
    pthread_mutex_unlock(&net->lock);
    if (net->own_mem && net->mem_type == UCS_MEMORY_TYPE_CUDA) {
        const struct dfccl_rank_ctx *ctx = g->ctx;
        char from[96] = "";
        if (ctx->cfg.net_mem != DFCCL_NET_MEM_DEVICE && ctx->cfg.net_mem_bytes > 0) {
            snprintf(from, sizeof(from), " for collectives of %zu bytes and more (smaller: "
                     "staged)", ctx->cfg.net_mem_bytes);
        }
        snprintf(staged, sizeof(staged), ", from the GPU's memory%s: the daemon writes its "
                 "slots there and UCX moves them (registered once, memory type cuda)", from);
    } else if (g->ctx->backend == DFCCL_BACKEND_CUDA) {
        snprintf(staged, sizeof(staged), ", staged through pinned host memory: the daemon writes "
                 "its slots there and the proxy hands them to UCX (this UCX %s CUDA memory%s)",
                 net->cuda_mem ? "also reaches" : "does not reach",
                 net->cuda_mem ? "; DFCCL_NET_MEM=host" : "");
    } else if (net->own_mem) {
        snprintf(staged, sizeof(staged), ", its slots in host memory registered with UCX once");
    }
    dfccl_info("net: group %s: rank %d sends to rank %d (host %s) through UCX (%s) on %d "
               "proxy thread(s)%s", g->name, g->rank, g->ring_next, host,
               lanes[0] != '\0' ? lanes : "transports not reported", g->net_lanes, staged);
}

/*
 * Record the next and previous ranks' workers and connect: each rank sends a
 * CONNECT message to its next rank over the net and waits until the one from
 * its previous rank has arrived, within DFCCL_TIMEOUT (120 s without it).
 * UCX's connection setup (endpoint, wireup) is paid here, where the group's
 * bootstrap is synchronous anyway, not in its first collective, and a
 * connection that cannot be made fails the group's creation with the peer's
 * name instead of timing out a collective.
 */
dfccl_status_t dfccl_net_group_connect(struct dfccl_group *g, const void *addrs, size_t stride,
                                       const char *hosts, size_t hstride, int wait)
{
    struct dfccl_net *net = g->ctx->net;
    int nx = g->ring_next, pv = g->ring_prev;
    const char *nxhost = hosts + (size_t)nx * hstride;
    static const uint64_t word = 0x6466636e6e6563ull; /* the message: read by UCX only */
    uint64_t t0 = dfccl_time_ns();
    double wait_s;
    void *req = NULL;
    int rc, sent = 1, got = 0;

    wait_s = g->ctx->cfg.timeout_s > 0 ? g->ctx->cfg.timeout_s : DFCCL_NET_CONNECT_S;
    /* the lanes every rank of the group has (ranks whose edges are all
     * local sent an empty slot) */
    g->net_lanes = net->nlanes;
    for (int r = 0; r < g->nranks; r++) {
        int k = dfccl_net_slot_lanes((const char *)addrs + (size_t)r * stride);
        if (k > 0 && k < g->net_lanes) {
            g->net_lanes = k;
        }
    }
    /* the two neighbours in every lane: lane 0's, which carries the
     * connection, last, with its lock kept */
    rc = 0;
    for (int k = g->net_lanes - 1; k >= 0; k--) {
        struct dfccl_net *l = net->lanes[k];
        pthread_mutex_lock(&l->lock);
        if (k == 0) {
            /* goodbyes to an earlier group of this id are not this one's */
            dfccl_net_left_drop(net, g->id & 0xfff);
        }
        g->net_lane_next[k] = -1;
        g->net_lane_prev[k] = -1;
        if (rc >= 0 && g->next_net) {
            rc = dfccl_net_peer_add(l, (const char *)addrs + (size_t)nx * stride, k, nx, nxhost);
            if (rc >= 0) {
                g->net_lane_next[k] = rc;
                if (k > 0) {
                    (void)dfccl_net_ep(l, rc); /* its wireup starts now */
                }
            }
        }
        if (rc >= 0 && g->prev_net) {
            rc = dfccl_net_peer_add(l, (const char *)addrs + (size_t)pv * stride, k, pv,
                                    hosts + (size_t)pv * hstride);
            if (rc >= 0) {
                g->net_lane_prev[k] = rc;
                if (k == 0) {
                    /* lane 0 sends goodbyes and failure records to the
                     * previous rank too: its endpoint is made now, while
                     * that rank is surely there, rather than at the
                     * group's end, when UCX may find its memory gone */
                    (void)dfccl_net_ep(l, rc);
                }
            }
        }
        if (k > 0) {
            pthread_mutex_unlock(&l->lock);
        }
    }
    for (int k = 1; rc >= 0 && k < g->net_lanes; k++) {
        /* the lanes' peers that are the same processes; their other lanes
         * are set up by now, and their proxies only read it */
        struct dfccl_net *l = net->lanes[k];
        pthread_mutex_lock(&l->lock);
        if (g->net_lane_next[k] >= 0 && g->net_lane_next[0] >= 0) {
            l->peers[g->net_lane_next[k]]->ctl = net->peers[g->net_lane_next[0]];
        }
        if (g->net_lane_prev[k] >= 0 && g->net_lane_prev[0] >= 0) {
            l->peers[g->net_lane_prev[k]]->ctl = net->peers[g->net_lane_prev[0]];
        }
        pthread_mutex_unlock(&l->lock);
    }
    if (rc >= 0 && g->next_net) {
        ucp_ep_h ep = dfccl_net_ep(net, g->net_lane_next[0]);
        ucp_request_param_t prm;
        ucs_status_ptr_t r = UCS_STATUS_PTR(UCS_ERR_UNREACHABLE);

        dfccl_net_mem_param(&prm, NULL, UCS_MEMORY_TYPE_HOST);
        if (ep != NULL) {
            r = ucp_tag_send_nbx(ep, &word, sizeof(word),
                                 dfccl_net_tag(DFCCL_NET_CONNECT, g->net_next_gid, 0, 0, 0),
                                 &prm);
        }
        if (UCS_PTR_IS_ERR(r)) {
            rc = dfccl_error(DFCCL_ERR_TRANSPORT, "dfcclGroupCreate(%s): net transport (UCX): "
                             "cannot send to rank %d on host %s: %s; check that the hosts "
                             "reach each other (UCX_TLS, UCX_NET_DEVICES)", g->name, nx,
                             nxhost, ucs_status_string(UCS_PTR_STATUS(r)));
        } else {
            req  = r;
            sent = 0;
        }
    }
    if (!wait && req != NULL) {
        ucp_request_free(req); /* UCX releases it when it is done */
        req  = NULL;
        sent = 1;
    }
    pthread_mutex_unlock(&net->lock);
    if (rc < 0) {
        return (dfccl_status_t)rc;
    }
    /* the proxy progresses the worker; without `wait` the connection is
     * made in the background, and a peer that cannot be reached is found
     * by the group's first collective (DFCCL_TIMEOUT) */
    for (; wait;) {
        struct timespec ts = {0, 50000};
        int late;
        pthread_mutex_lock(&net->lock);
        if (!sent) {
            rc   = dfccl_net_req_test(&req);
            sent = rc != 0;
        }
        got  = !g->prev_net || net->connected[g->id & 0xfff];
        late = (!sent || !got) && (double)(dfccl_time_ns() - t0) > wait_s * 1e9;
        if (late && req != NULL) {
            ucp_request_free(req); /* UCX releases it when it is done */
            req = NULL;
        }
        pthread_mutex_unlock(&net->lock);
        if (rc < 0) {
            return dfccl_error(DFCCL_ERR_TRANSPORT, "dfcclGroupCreate(%s): net transport "
                               "(UCX): the connection to rank %d on host %s failed; check "
                               "that the hosts reach each other (UCX_TLS, UCX_NET_DEVICES)",
                               g->name, nx, nxhost);
        }
        if (late) {
            return dfccl_error(DFCCL_ERR_TIMEOUT, "dfcclGroupCreate(%s): net transport (UCX): "
                               "%s within %g s; check that every rank creates the group "
                               "and that the hosts reach each other (UCX_TLS, "
                               "UCX_NET_DEVICES), or raise DFCCL_TIMEOUT", g->name,
                               !sent ? "the connection to the next rank was not made"
                                     : "nothing arrived from the previous rank",
                               wait_s);
        }
        if (sent && got) {
            break;
        }
        nanosleep(&ts, NULL);
    }
    dfccl_debug("net: group %s connected (next rank %d: %s, previous rank %d: %s) in %.1f ms",
                g->name, nx, g->next_net ? "net" : "local", pv, g->prev_net ? "net" : "local",
                (double)(dfccl_time_ns() - t0) / 1e6);
    if (g->next_net && dfccl_log_level >= 1) {
        dfccl_net_say_path(g, net, nxhost);
    }
    return DFCCL_OK;
}

int dfccl_net_mem_own(const struct dfccl_rank_ctx *ctx, const dfccl_coll_static_t *st)
{
    const struct dfccl_net *net = __atomic_load_n(&ctx->net, __ATOMIC_ACQUIRE);

    if (net == NULL || !net->own_mem) {
        return 0;
    }
    /* host memory, mapped once, for every size; GPU memory for the large */
    return net->mem_type != UCS_MEMORY_TYPE_CUDA || ctx->cfg.net_mem == DFCCL_NET_MEM_DEVICE ||
           st->count * (uint64_t)st->elem_size >= ctx->cfg.net_mem_bytes;
}

/* A region of `bytes` for a channel's slots: a free one of that size from
 * the context's list, or a new one, allocated and mapped. */
static dfccl_status_t dfccl_net_region_get(struct dfccl_net *net, size_t bytes,
                                           dfccl_net_region_t **region_p)
{
    struct dfccl_rank_ctx *ctx = net->ctx;
    ucp_mem_map_params_t mp;
    dfccl_net_region_t *r;
    dfccl_status_t st;

    pthread_mutex_lock(&net->region_lock);
    for (r = net->regions; r != NULL; r = r->next) {
        if (r->bytes == bytes && !__atomic_load_n(&r->busy, __ATOMIC_ACQUIRE)) {
            r->busy = 1;
            pthread_mutex_unlock(&net->region_lock);
            *region_p = r;
            return DFCCL_OK;
        }
    }
    r = calloc(1, sizeof(*r));
    if (r == NULL) {
        st = dfccl_error(DFCCL_ERR_NO_MEMORY, "net transport: out of host memory");
        goto err_unlock;
    }
    st = ctx->be->dev_alloc(ctx, bytes, &r->ptr);
    if (st != DFCCL_OK) {
        goto err_free;
    }
    memset(&mp, 0, sizeof(mp));
    mp.field_mask  = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                     UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
    mp.address     = r->ptr;
    mp.length      = bytes;
    mp.memory_type = net->mem_type;
    st = DFCCL_UCX(ucp_mem_map(net->ucp, &mp, &r->memh), " (the slots of a net channel; "
                   "DFCCL_NET_MEM=host stages them through host memory instead)");
    if (st != DFCCL_OK) {
        goto err_dev;
    }
    r->bytes     = bytes;
    r->busy      = 1;
    r->next      = net->regions;
    net->regions = r;
    pthread_mutex_unlock(&net->region_lock);
    *region_p = r;
    return DFCCL_OK;

err_dev:
    ctx->be->dev_free(ctx, r->ptr);
err_free:
    free(r);
err_unlock:
    pthread_mutex_unlock(&net->region_lock);
    return st;
}

dfccl_status_t dfccl_net_chan_add(struct dfccl_group *g, int coll_id, int ch, int send,
                                  void *host_ctrl, const dfccl_coll_static_t *st,
                                  const uint64_t sig[8], char **data_p)
{
    const int lane        = g->net_lanes > 1 ? ch % g->net_lanes : 0;
    struct dfccl_net *net = g->ctx->net->lanes[lane];
    dfccl_net_chan_t *c   = calloc(1, sizeof(*c));

    *data_p = NULL;
    if (c == NULL) {
        return dfccl_error(DFCCL_ERR_NO_MEMORY, "net transport: out of host memory");
    }
    c->data = (char *)host_ctrl + sizeof(dfccl_conn_ctrl_t);
    if (dfccl_net_mem_own(g->ctx, st)) {
        dfccl_status_t rc = dfccl_net_region_get(g->ctx->net,
                                                 (size_t)st->nslots * st->slot_bytes, &c->region);
        if (rc != DFCCL_OK) {
            free(c);
            return rc;
        }
        c->data = c->region->ptr;
        *data_p = c->data;
    }
    c->send       = send;
    c->coll_id    = coll_id;
    c->ch         = ch;
    c->idx        = sig[6];
    c->in_gid     = g->id;
    c->out_gid    = send ? g->net_next_gid : g->net_prev_gid;
    c->peer       = send ? g->net_lane_next[lane] : g->net_lane_prev[lane];
    c->ctrl       = host_ctrl;
    c->nslots     = st->nslots;
    c->slot_bytes = st->slot_bytes;
    memcpy(c->sig, sig, sizeof(c->sig));
    snprintf(c->group, sizeof(c->group), "%s", g->name);
    pthread_mutex_lock(&net->lock);
    c->next    = net->chans;
    net->chans = c;
    pthread_mutex_unlock(&net->lock);
    return DFCCL_OK;
}

/*
 * Remove the channels of collective `coll_id` before its memory is freed:
 * the proxy first sends what the daemon published (the sender completes a
 * collective before the data has left) and waits for its credits to go.
 * Past the deadline, the channels are abandoned and DFCCL_ERR_TIMEOUT
 * says that their memory must stay. Where no flush is waited for (an
 * aborted context, a stopping proxy), no channel may outlive this call
 * with a pointer into that memory: a channel with nothing in UCX goes
 * now, and one with a request still there is abandoned, with
 * DFCCL_ERR_ABORTED (its memory must stay too). Abandoned channels from
 * an earlier registration under the same id are not this one's.
 */
static dfccl_status_t dfccl_net_lane_remove(struct dfccl_rank_ctx *ctx, struct dfccl_net *net,
                                            int coll_id, uint64_t deadline_ns)
{
    uint64_t start    = dfccl_time_ns(), warned = 0;
    dfccl_status_t st = DFCCL_OK;

    pthread_mutex_lock(&net->lock);
    for (dfccl_net_chan_t *c = net->chans; c != NULL; c = c->next) {
        if (c->coll_id == coll_id && !c->abandoned) {
            c->closing = 1;
        }
    }
    for (;;) {
        int left = 0;
        struct timespec ts;
        for (dfccl_net_chan_t *c = net->chans; c != NULL; c = c->next) {
            left += c->coll_id == coll_id && c->closing && !c->abandoned;
        }
        if (left == 0) {
            break;
        }
        if (net->stop || !net->proxy_started ||
            __atomic_load_n(&ctx->aborted, __ATOMIC_ACQUIRE)) {
            /* an aborted context flushes nothing more */
            for (dfccl_net_chan_t **pp = &net->chans; *pp != NULL;) {
                dfccl_net_chan_t *c = *pp;
                if (c->coll_id != coll_id || !c->closing || c->abandoned) {
                    pp = &c->next;
                } else if (dfccl_net_chan_busy(c)) {
                    c->abandoned = 1;
                    st           = DFCCL_ERR_ABORTED;
                    pp           = &c->next;
                } else {
                    *pp = c->next;
                    dfccl_net_chan_free(c);
                }
            }
            break;
        }
        if (deadline_ns != 0 && dfccl_time_ns() > deadline_ns) {
            for (dfccl_net_chan_t *c = net->chans; c != NULL; c = c->next) {
                if (c->coll_id == coll_id && c->closing) {
                    c->abandoned = 1;
                }
            }
            st = DFCCL_ERR_TIMEOUT;
            break;
        }
        if (dfccl_time_ns() - start > 10000000000ull * (warned + 1)) {
            warned++;
            dfccl_info("net transport: collective %d waits for %d channel(s) to flush to the "
                       "next rank", coll_id, left);
        }
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 1000000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&net->cond, &net->lock, &ts);
    }
    pthread_mutex_unlock(&net->lock);
    return st;
}

dfccl_status_t dfccl_net_coll_remove(struct dfccl_rank_ctx *ctx, int coll_id,
                                     uint64_t deadline_ns)
{
    struct dfccl_net *net = ctx->net;
    dfccl_status_t st     = DFCCL_OK;

    for (int k = 0; net != NULL && k < net->nlanes; k++) {
        dfccl_status_t lst = dfccl_net_lane_remove(ctx, net->lanes[k], coll_id, deadline_ns);
        /* the first failure; a timeout (the memory must stay) over all */
        if (st == DFCCL_OK || lst == DFCCL_ERR_TIMEOUT) {
            st = lst;
        }
    }
    return st;
}

static void dfccl_net_drop(struct dfccl_net *net, ucp_tag_message_h msg,
                           const ucp_tag_recv_info_t *info)
{
    void *buf = malloc(info->length > 0 ? info->length : 1);

    if (buf != NULL) {
        dfccl_net_recv_now(net, buf, info->length, msg);
        free(buf);
    }
}

/* Queue a message of CONNECT sequence `seq` for each of g's net
 * neighbours, which the proxy sends: the failure record `f`, or a copy of
 * `buf` (`len` bytes). */
static void dfccl_net_queue_edges(struct dfccl_group *g, uint64_t seq, const dfccl_dir_fail_t *f,
                                  const void *buf, size_t len)
{
    struct dfccl_net *net = g->ctx->net;
    const int edges[2][3] = {{g->next_net, g->net_lane_next[0], g->net_next_gid},
                             {g->prev_net, g->net_lane_prev[0], g->net_prev_gid}};

    pthread_mutex_lock(&net->lock);
    for (int e = 0; e < 2; e++) {
        dfccl_net_frec_t *q, **tl = &net->fail_out;
        /* a two-rank ring reaches the same peer both ways: once is enough */
        if (!edges[e][0] || edges[e][1] < 0 || (e == 1 && edges[0][0] &&
                                                edges[0][1] == edges[1][1])) {
            continue;
        }
        q = calloc(1, sizeof(*q));
        if (q != NULL && buf != NULL && (q->buf = malloc(len)) == NULL) {
            free(q);
            q = NULL;
        }
        if (q == NULL) {
            break;
        }
        q->peer = edges[e][1];
        q->tag  = dfccl_net_tag(DFCCL_NET_CONNECT, edges[e][2], 0, 0, seq);
        if (buf != NULL) {
            memcpy(q->buf, buf, len);
            q->len = len;
        } else {
            q->rec = *f;
        }
        while (*tl != NULL) {
            tl = &(*tl)->next;
        }
        *tl = q;
    }
    pthread_mutex_unlock(&net->lock);
}

void dfccl_net_fail_send(struct dfccl_group *g, const dfccl_dir_fail_t *f)
{
    if (g->ctx->net != NULL) {
        dfccl_net_queue_edges(g, DFCCL_NET_FAIL_SEQ, f, NULL, 0);
    }
}

int dfccl_net_fail_recv(struct dfccl_rank_ctx *ctx, int *gid_p, dfccl_dir_fail_t *f)
{
    struct dfccl_net *net = __atomic_load_n(&ctx->net, __ATOMIC_ACQUIRE);
    dfccl_net_frec_t *q;

    if (net == NULL || __atomic_load_n(&net->fail_in, __ATOMIC_RELAXED) == NULL) {
        return 0;
    }
    pthread_mutex_lock(&net->lock);
    q = net->fail_in;
    if (q != NULL) {
        net->fail_in = q->next;
    }
    pthread_mutex_unlock(&net->lock);
    if (q == NULL) {
        return 0;
    }
    *gid_p = q->gid;
    *f     = q->rec;
    free(q);
    return 1;
}

void dfccl_net_group_left(struct dfccl_group *g)
{
    struct dfccl_net *net = g->ctx->net;
    const dfccl_dir_t *d  = g->pool.dir;
    uint64_t nreg, base, n, *w;
    size_t len;

    if (net == NULL || (!g->next_net && !g->prev_net)) {
        return;
    }
    pthread_mutex_lock(&net->lock);
    dfccl_net_left_drop(net, g->id & 0xfff);
    pthread_mutex_unlock(&net->lock);
    if (d == NULL) {
        return;
    }
    nreg = __atomic_load_n(&d->nreg, __ATOMIC_ACQUIRE);
    base = nreg > DFCCL_DIR_RUNS ? nreg - DFCCL_DIR_RUNS : 0;
    n    = nreg - base;
    len  = (3 + n) * sizeof(uint64_t);
    w    = malloc(len);
    if (w == NULL) {
        return;
    }
    w[0] = (uint64_t)g->rank;
    w[1] = base;
    w[2] = n;
    for (uint64_t i = 0; i < n; i++) {
        dfccl_dir_reg_t r;
        /* a registration never published was never run */
        w[3 + i] = dfccl_dir_read_reg(d, base + i, &r) ? r.done : 0;
    }
    dfccl_net_queue_edges(g, DFCCL_NET_LEFT_SEQ, NULL, w, len);
    free(w);
}

int dfccl_net_neighbour_gone(struct dfccl_group *g, uint64_t reg, uint64_t run,
                             dfccl_status_t *status_p, char *msg, size_t len)
{
    struct dfccl_net *net = __atomic_load_n(&g->ctx->net, __ATOMIC_ACQUIRE);
    const int edges[2][3] = {{g->next_net, g->net_lane_next[0], g->ring_next},
                             {g->prev_net, g->net_lane_prev[0], g->ring_prev}};

    if (net == NULL) {
        return 0;
    }
    for (int e = 0; e < 2; e++) {
        const dfccl_net_left_t *l;
        dfccl_net_peer_t *p;
        uint64_t done = 0;
        ucs_status_t err;
        char host[64];
        int have = 0;

        if (!edges[e][0] || edges[e][1] < 0) {
            continue;
        }
        pthread_mutex_lock(&net->lock);
        p = edges[e][1] < net->npeers ? net->peers[edges[e][1]] : NULL;
        if (p == NULL || !__atomic_load_n(&p->gone, __ATOMIC_ACQUIRE)) {
            pthread_mutex_unlock(&net->lock);
            continue;
        }
        for (l = net->left; l != NULL; l = l->next) {
            if (l->gid == (g->id & 0xfff) && l->rank == edges[e][2]) {
                have = 1;
                /* older than the record reaches: long finished */
                done = reg < l->base ? UINT64_MAX : reg - l->base < l->n ? l->done[reg - l->base]
                                                                          : 0;
                break;
            }
        }
        err = p->err;
        snprintf(host, sizeof(host), "%s", p->host);
        pthread_mutex_unlock(&net->lock);
        if (have && done >= run) {
            continue; /* it finished this run before it left */
        }
        if (have) {
            *status_p = DFCCL_ERR_ABORTED;
            snprintf(msg, len, "rank %d (host %s) destroyed the group after %llu run(s) of "
                     "this collective, before run %llu, and its connection closed",
                     edges[e][2], host, (unsigned long long)done, (unsigned long long)run);
        } else {
            *status_p = DFCCL_ERR_TRANSPORT;
            snprintf(msg, len, "the net connection to rank %d on host %s failed (%s) before "
                     "that rank finished it; the peer may have exited or the network dropped",
                     edges[e][2], host, ucs_status_string(err));
        }
        return 1;
    }
    return 0;
}

/* ---- fault exclusion: peers watched, and the survivors' messages -------- */

int dfccl_net_peer_of(struct dfccl_rank_ctx *ctx, const void *slot, int rank, const char *host)
{
    struct dfccl_net *net = ctx->net;
    int pi;

    if (net == NULL) {
        return DFCCL_ERR_UNSUPPORTED;
    }
    pthread_mutex_lock(&net->lock);
    pi = dfccl_net_peer_add(net, slot, 0, rank, host);
    if (pi >= 0) {
        net->peers[pi]->excl = 1;
    }
    pthread_mutex_unlock(&net->lock);
    return pi;
}

void dfccl_net_watch(struct dfccl_rank_ctx *ctx, int pi, int on)
{
    struct dfccl_net *net = ctx->net;
    dfccl_net_peer_t *p;

    if (net == NULL || pi < 0) {
        return;
    }
    pthread_mutex_lock(&net->lock);
    p = net->peers[pi];
    if (on && p->watch++ == 0) {
        p->heard_ns = dfccl_time_ns(); /* silence counts from now */
    } else if (!on && p->watch > 0) {
        p->watch--;
    }
    pthread_mutex_unlock(&net->lock);
}

int dfccl_net_peer_dead(struct dfccl_rank_ctx *ctx, int pi, uint64_t silent_ns, char *why,
                        size_t len)
{
    struct dfccl_net *net = ctx->net;
    dfccl_net_peer_t *p;
    uint64_t heard, now = dfccl_time_ns();
    int dead = 0;

    if (net == NULL || pi < 0) {
        return 0;
    }
    pthread_mutex_lock(&net->lock);
    p     = net->peers[pi];
    heard = __atomic_load_n(&p->heard_ns, __ATOMIC_ACQUIRE);
    if (__atomic_load_n(&p->gone, __ATOMIC_ACQUIRE)) {
        dead = 1;
        snprintf(why, len, "its net connection closed (%s)", ucs_status_string(p->err));
    } else if (silent_ns > 0 && p->watch > 0 && now > heard && now - heard > silent_ns) {
        dead = 1;
        snprintf(why, len, "nothing came from its net proxy for %.1f s (DFCCL_TIMEOUT)",
                 (double)(now - heard) / 1e9);
    }
    pthread_mutex_unlock(&net->lock);
    return dead;
}

int dfccl_net_rank_left(struct dfccl_group *g, int rank)
{
    struct dfccl_net *net = g->ctx->net;
    int left              = 0;

    if (net == NULL) {
        return 0;
    }
    pthread_mutex_lock(&net->lock);
    for (const dfccl_net_left_t *l = net->left; l != NULL && !left; l = l->next) {
        left = l->gid == (g->id & 0xfff) && l->rank == rank;
    }
    pthread_mutex_unlock(&net->lock);
    return left;
}

void dfccl_net_peer_close(struct dfccl_rank_ctx *ctx, int pi)
{
    struct dfccl_net *net = ctx->net;
    dfccl_net_peer_t *p0;

    if (net == NULL || pi < 0) {
        return;
    }
    pthread_mutex_lock(&net->lock);
    p0         = net->peers[pi];
    p0->failed = 1;
    pthread_mutex_unlock(&net->lock);
    /* the same process in the other lanes: its channels close unflushed */
    for (int k = 1; k < net->nlanes; k++) {
        struct dfccl_net *l = net->lanes[k];
        pthread_mutex_lock(&l->lock);
        for (int i = 0; i < l->npeers; i++) {
            if (l->peers[i]->ctl == p0) {
                l->peers[i]->failed = 1;
            }
        }
        pthread_mutex_unlock(&l->lock);
    }
}

dfccl_status_t dfccl_net_xchg_send(struct dfccl_rank_ctx *ctx, int pi, int gid, const void *buf,
                                   size_t len)
{
    struct dfccl_net *net = ctx->net;
    dfccl_net_frec_t *q, **tl;

    if (net == NULL || pi < 0) {
        return dfccl_error(DFCCL_ERR_INTERNAL, "fault exclusion: no net peer to send to");
    }
    q = calloc(1, sizeof(*q));
    if (q == NULL || (q->buf = malloc(len > 0 ? len : 1)) == NULL) {
        free(q);
        return dfccl_error(DFCCL_ERR_NO_MEMORY, "fault exclusion: out of host memory");
    }
    memcpy(q->buf, buf, len);
    q->len  = len;
    q->peer = pi;
    q->tag  = dfccl_net_tag(DFCCL_NET_CONNECT, gid, 0, 0, DFCCL_NET_XCHG_SEQ);
    pthread_mutex_lock(&net->lock);
    for (tl = &net->fail_out; *tl != NULL; tl = &(*tl)->next) {
    }
    *tl = q;
    pthread_mutex_unlock(&net->lock);
    return DFCCL_OK;
}

long dfccl_net_xchg_take(struct dfccl_rank_ctx *ctx, int gid, const void *key, size_t keylen,
                         void *buf, size_t len)
{
    struct dfccl_net *net = ctx->net;
    dfccl_net_xmsg_t *x = NULL;
    long got            = -1;

    if (net == NULL) {
        return -1;
    }
    pthread_mutex_lock(&net->lock);
    for (dfccl_net_xmsg_t **pp = &net->xchg_in; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->gid == (gid & 0xfff) && (*pp)->len >= keylen &&
            memcmp((*pp)->data, key, keylen) == 0) {
            x   = *pp;
            *pp = x->next;
            break;
        }
    }
    pthread_mutex_unlock(&net->lock);
    if (x != NULL) {
        memcpy(buf, x->data, x->len < len ? x->len : len);
        got = (long)x->len;
        free(x);
    }
    return got;
}

uint64_t dfccl_net_xchg_union(struct dfccl_rank_ctx *ctx, int gid, size_t off)
{
    struct dfccl_net *net = ctx->net;
    uint64_t u            = 0, w;

    if (net == NULL) {
        return 0;
    }
    pthread_mutex_lock(&net->lock);
    for (const dfccl_net_xmsg_t *x = net->xchg_in; x != NULL; x = x->next) {
        if (x->gid == (gid & 0xfff) && x->len >= off + sizeof(w)) {
            memcpy(&w, x->data + off, sizeof(w));
            u |= w;
        }
    }
    pthread_mutex_unlock(&net->lock);
    return u;
}

int dfccl_net_xchg_waiting(struct dfccl_rank_ctx *ctx, int gid)
{
    struct dfccl_net *net = __atomic_load_n(&ctx->net, __ATOMIC_ACQUIRE);
    int any               = 0;

    if (net == NULL || __atomic_load_n(&net->xchg_in, __ATOMIC_RELAXED) == NULL) {
        return 0;
    }
    pthread_mutex_lock(&net->lock);
    for (const dfccl_net_xmsg_t *x = net->xchg_in; x != NULL && !any; x = x->next) {
        any = x->gid == (gid & 0xfff);
    }
    pthread_mutex_unlock(&net->lock);
    return any;
}

void dfccl_net_xchg_drop(struct dfccl_rank_ctx *ctx, int gid)
{
    struct dfccl_net *net = ctx->net;

    if (net == NULL) {
        return;
    }
    pthread_mutex_lock(&net->lock);
    for (dfccl_net_xmsg_t **pp = &net->xchg_in; *pp != NULL;) {
        dfccl_net_xmsg_t *x = *pp;
        if (x->gid == (gid & 0xfff)) {
            *pp = x->next;
            free(x);
        } else {
            pp = &x->next;
        }
    }
    pthread_mutex_unlock(&net->lock);
}

/* A peer that has gone or said goodbye (in lane 0, for the same process). */
static int dfccl_net_peer_going(const dfccl_net_peer_t *p)
{
    const dfccl_net_peer_t *c = p->ctl != NULL ? p->ctl : p;

    return p->failed || c->failed || c->bye;
}

/* Close a lane whose proxy has stopped: this thread drives its worker
 * now. Lane 0 (the control lane) first sends what it still has for the
 * peers and says goodbye. */
static void dfccl_net_lane_close(struct dfccl_net *net, int control)
{
    uint64_t t0, bye;

    /* failure records and goodbyes: those the proxy has not posted yet
     * (the group may have gone just before) are posted now, and those in
     * flight go out (a peer may wait on them), for a bounded time */
    for (dfccl_net_frec_t *q = net->fail_out; q != NULL; q = q->next) {
        dfccl_net_post_rec(net, q);
    }
    t0 = dfccl_time_ns();
    while (net->fail_out != NULL) {
        dfccl_net_frec_t *q = net->fail_out;
        if (q->req != NULL && ucp_request_check_status(q->req) == UCS_INPROGRESS &&
            dfccl_time_ns() - t0 < 2000000000ull) {
            ucp_worker_progress(net->worker);
            continue;
        }
        if (q->req != NULL) {
            if (ucp_request_check_status(q->req) == UCS_INPROGRESS) {
                ucp_request_cancel(net->worker, q->req);
                while (ucp_request_check_status(q->req) == UCS_INPROGRESS) {
                    ucp_worker_progress(net->worker);
                }
            }
            ucp_request_free(q->req);
        }
        net->fail_out = q->next;
        free(q->buf);
        free(q);
    }
    while (net->fail_in != NULL) {
        dfccl_net_frec_t *q = net->fail_in;
        net->fail_in        = q->next;
        free(q);
    }
    /* The last message to each peer: nothing of ours follows it, so a
     * peer that sees our connection close after it knows at once that it
     * has all we sent (the close flushes it; UCX frees the request). */
    bye = dfccl_net_addr_hash(net->addr, net->addr_len);
    for (int i = 0; i < net->npeers && control; i++) {
        ucp_request_param_t prm;
        ucs_status_ptr_t r;
        /* a peer that said goodbye is going: nothing of ours matters to it */
        if (net->peers[i]->ep == NULL || net->peers[i]->failed || net->peers[i]->bye) {
            continue;
        }
        dfccl_net_mem_param(&prm, NULL, UCS_MEMORY_TYPE_HOST);
        r = ucp_tag_send_nbx(net->peers[i]->ep, &bye, sizeof(bye),
                             dfccl_net_tag(DFCCL_NET_CONNECT, 0, 0, 0, DFCCL_NET_BYE_SEQ), &prm);
        if (r != NULL && !UCS_PTR_IS_ERR(r)) {
            ucp_request_free(r);
        }
    }
    for (int i = 0; i < net->npeers; i++) {
        ucp_request_param_t prm;
        ucs_status_ptr_t r;
        if (net->peers[i]->ep == NULL) {
            continue;
        }
        memset(&prm, 0, sizeof(prm));
        prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        /* flush what is in flight (the peer may still wait for it), but do
         * not wait on a peer that has gone, or is going (it said goodbye),
         * nor from an aborted context, which flushes nothing more: a forced
         * close also ends the sends still in flight (a rendezvous that a
         * dead peer will never read), which would otherwise hold their
         * memory registrations past the UCX context's end */
        prm.flags = dfccl_net_peer_going(net->peers[i]) ||
                            __atomic_load_n(&net->ctx->aborted, __ATOMIC_ACQUIRE)
                        ? UCP_EP_CLOSE_FLAG_FORCE
                        : 0;
        r         = ucp_ep_close_nbx(net->peers[i]->ep, &prm);
        t0        = dfccl_time_ns();
        while (r != NULL && !UCS_PTR_IS_ERR(r) && ucp_request_check_status(r) == UCS_INPROGRESS &&
               dfccl_time_ns() - t0 < 2000000000ull) {
            ucp_worker_progress(net->worker);
        }
        if (r != NULL && !UCS_PTR_IS_ERR(r)) {
            if (ucp_request_check_status(r) == UCS_INPROGRESS) {
                ucp_request_cancel(net->worker, r);
                while (ucp_request_check_status(r) == UCS_INPROGRESS) {
                    ucp_worker_progress(net->worker);
                }
            }
            ucp_request_free(r);
        }
    }
    /* Sends that a dead peer never took (a rendezvous waits for its
     * reader: an aborted context's, or a survivor's to a rank it excluded)
     * stay in UCX, which cannot end them without peer error handling, nor
     * destroy a worker or context that holds them (UCX's own checks fail,
     * or abort the process). Such a worker and its UCX context are left as
     * they are: nothing progresses them any more. Channels that flushed
     * hold no request, so an orderly end destroys everything. */
    for (dfccl_net_chan_t *c = net->chans; c != NULL; c = c->next) {
        net->leak |= dfccl_net_chan_busy(c);
    }
    /* the channels go after their endpoints: a request still in flight
     * (an abandoned channel's) may read the channel's credit word */
    while (net->chans != NULL) {
        dfccl_net_chan_t *c = net->chans;
        net->chans          = c->next;
        dfccl_net_chan_free(c);
    }
    /* Messages nobody will take any more (the last credits of collectives
     * the peers finished, data of collectives never registered here) are
     * received and dropped, so the worker goes without leftovers. */
    while (net->pend != NULL) {
        dfccl_net_pend_t *q = net->pend;
        net->pend           = q->next;
        dfccl_net_drop(net, q->msg, &q->info);
        free(q);
    }
    for (;;) {
        ucp_tag_recv_info_t info;
        ucp_tag_message_h msg;
        ucp_worker_progress(net->worker);
        msg = ucp_tag_probe_nb(net->worker, 0, 0, 1, &info);
        if (msg == NULL) {
            break;
        }
        dfccl_net_drop(net, msg, &info);
    }
    for (int i = 0; i < net->npeers; i++) {
        free(net->peers[i]);
    }
    free(net->peers);
    while (net->left != NULL) {
        dfccl_net_left_t *l = net->left;
        net->left           = l->next;
        free(l);
    }
    while (net->xchg_in != NULL) {
        dfccl_net_xmsg_t *x = net->xchg_in;
        net->xchg_in        = x->next;
        free(x);
    }
    if (!net->leak) {
        ucp_worker_release_address(net->worker, net->addr);
        ucp_worker_destroy(net->worker);
    }
    pthread_mutex_destroy(&net->lock);
    pthread_cond_destroy(&net->cond);
}

/* Flush every channel, stop the proxies, close endpoints, free UCX. */
void dfccl_net_stop(struct dfccl_rank_ctx *ctx)
{
    struct dfccl_net *net = ctx->net;
    ucp_context_h ucp;
    int leak = 0;

    if (net == NULL) {
        return;
    }
    for (int id = 0; id < ctx->cfg.max_colls; id++) {
        int has = 0;
        for (int k = 0; k < net->nlanes; k++) {
            struct dfccl_net *l = net->lanes[k];
            pthread_mutex_lock(&l->lock);
            for (dfccl_net_chan_t *c = l->chans; c != NULL; c = c->next) {
                has |= c->coll_id == id && !c->abandoned;
            }
            pthread_mutex_unlock(&l->lock);
        }
        if (has) {
            dfccl_net_coll_remove(ctx, id, dfccl_net_deadline(ctx));
        }
    }
    for (int k = 0; k < net->nlanes; k++) {
        struct dfccl_net *l = net->lanes[k];
        pthread_mutex_lock(&l->lock);
        l->stop = 1;
        pthread_mutex_unlock(&l->lock);
        if (l->proxy_started) {
            pthread_join(l->proxy, NULL);
        }
    }
    /* the data lanes, then the control lane, whose goodbye comes last */
    for (int k = net->nlanes - 1; k >= 1; k--) {
        dfccl_net_lane_close(net->lanes[k], 0);
        leak |= net->lanes[k]->leak;
        free(net->lanes[k]);
    }
    dfccl_net_lane_close(net, 1);
    leak |= net->leak;
    /* every channel is gone, and the daemon with them; a region that a
     * request left in UCX may name stays mapped and allocated */
    while (net->regions != NULL) {
        dfccl_net_region_t *r = net->regions;
        net->regions          = r->next;
        if (!leak) {
            ucp_mem_unmap(net->ucp, r->memh);
            ctx->be->dev_free(ctx, r->ptr);
        }
        free(r);
    }
    pthread_mutex_destroy(&net->region_lock);
    ucp = net->ucp;
    free(net);
    ctx->net = NULL;
    if (leak) {
        dfccl_debug("net transport: UCX still holds sends to a peer that is gone; its context "
                    "is left as it is");
        return;
    }
    ucp_cleanup(ucp);
}

#endif /* HAVE_UCX */
