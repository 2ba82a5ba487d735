/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Groups of ranks (the paper's device sets) and their bootstrap through the
 * user's out-of-band allgather: every member learns every other member's
 * backend, host, device and connector directory, and checks that all agree
 * on the group size, and the UCX worker addresses where an edge of the ring
 * crosses hosts (net transport). This is the only communication dfccl asks for:
 * registering collectives afterwards is local.
 */
#include "dfccl_int.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DFCCL_BOOT_MAGIC 0x6466636c424f4f54ull /* "dfclBOOT" */

typedef struct {
    uint64_t magic;
    int32_t  nranks;
    int32_t  rank;
    int32_t  backend;
    int32_t  pid;
    int32_t  device;
    int32_t  pad;
    char     host[64];
    char     dir[64];  /* name of this rank's connector directory */
    char     host_id[DFCCL_HOST_ID_MAX]; /* hostname/boot id, or DFCCL_HOST_ID */
    int32_t  gid;      /* this rank's group id: the tag of net messages to it */
    int32_t  net;      /* DFCCL_NET=1 on this rank: net on every edge */
    char     bell[64]; /* name of this rank's bell page, "" if it has none */
    int32_t  status;   /* DFCCL_OK, or why this rank cannot take part */
    int32_t  pad2;
    unsigned char uuid[16]; /* its GPU's UUID (zeros on the host backend) */
} dfccl_boot_info_t;

#define DFCCL_BELL_BYTES 4096

/* Our bell page (best effort: without it, peers wait out their backoff). */
static void dfccl_group_bell_create(struct dfccl_group *g, char *name, size_t len)
{
    char n[64];
    dfccl_status_t st;

    name[0] = '\0';
    if (!g->ctx->cfg.peer_bells) {
        return;
    }
    dfccl_shm_name(n, sizeof(n), "bell-%llx-g%d", (unsigned long long)g->ctx->uid, g->id);
    dfccl_error_quiet(1); /* best effort: said below, as information */
    st = dfccl_shm_create(&g->bell_seg, n, DFCCL_BELL_BYTES);
    dfccl_error_quiet(0);
    if (st != DFCCL_OK) {
        dfccl_info("group %s: no submission bell (%s): a stuck daemon is relaunched on its "
                   "backoff only", g->name, dfcclGetLastErrorMessage());
        memset(&g->bell_seg, 0, sizeof(g->bell_seg));
        return;
    }
    snprintf(name, len, "%s", n);
}

/* Map the bells of the group's other ranks on this host. */
static void dfccl_group_bell_attach(struct dfccl_group *g, const dfccl_boot_info_t *all)
{
    g->peer_bells = calloc((size_t)g->nranks, sizeof(*g->peer_bells));
    for (int i = 0; g->peer_bells != NULL && i < g->nranks; i++) {
        dfccl_status_t st;

        if (i == g->rank || !g->same_host[i] || all[i].bell[0] == '\0') {
            continue;
        }
        dfccl_error_quiet(1); /* best effort: said below, as information */
        st = dfccl_shm_attach(&g->peer_bells[i], all[i].bell, DFCCL_BELL_BYTES);
        dfccl_error_quiet(0);
        if (st != DFCCL_OK) {
            dfccl_info("group %s: rank %d's submission bell is not mapped (%s)", g->name, i,
                       dfcclGetLastErrorMessage());
            memset(&g->peer_bells[i], 0, sizeof(g->peer_bells[i]));
        }
    }
}

void dfccl_group_ring(struct dfccl_group *g)
{
    if (g->bell_seg.base != NULL) {
        __atomic_fetch_add((uint64_t *)g->bell_seg.base, 1, __ATOMIC_RELEASE);
    }
}

uint64_t dfccl_group_peer_bells(struct dfccl_rank_ctx *ctx)
{
    uint64_t sum;

    if (!ctx->cfg.peer_bells) {
        return 0;
    }
    sum = dfccl_net_arrivals(ctx);
    for (const struct dfccl_group *g = ctx->groups; g != NULL; g = g->next) {
        for (int i = 0; g->peer_bells != NULL && i < g->nranks; i++) {
            if (g->peer_bells[i].base != NULL) {
                sum += __atomic_load_n((const uint64_t *)g->peer_bells[i].base,
                                       __ATOMIC_ACQUIRE);
            }
        }
    }
    return sum;
}

/* Has the owner of `d` finished run `run` of registration `reg`? A slot
 * taken by a later registration says nothing: then it is taken as done, so
 * that no collective fails on a guess. */
static int dfccl_group_peer_done(const dfccl_dir_t *d, uint64_t reg, uint64_t run)
{
    dfccl_dir_reg_t r;

    if (__atomic_load_n(&d->nreg, __ATOMIC_ACQUIRE) <= reg) {
        return 0; /* it never registered it */
    }
    return !dfccl_dir_read_reg(d, reg, &r) || r.done >= run;
}

int dfccl_group_rank_done(struct dfccl_group *g, int r, const dfccl_coll_t *c)
{
    const dfccl_dir_t *d = dfccl_pool_dir_of(g, r);

    return d != NULL && dfccl_group_peer_done(d, c->sig[6], c->runs);
}

int dfccl_group_rank_left(struct dfccl_group *g, int r)
{
    const dfccl_dir_t *d = dfccl_pool_dir_of(g, r);

    return d != NULL && __atomic_load_n(&d->closed, __ATOMIC_ACQUIRE) != 0;
}

int dfccl_group_failed_run(struct dfccl_group *g, const dfccl_coll_t *c, int from_only,
                           dfccl_status_t *status_p, char *msg, size_t len)
{
    const uint64_t reg = c->sig[6], run = c->runs;
    char label[192] = "";

    for (int r = 0; r < g->nranks; r++) {
        const dfccl_dir_t *d = dfccl_pool_dir_of(g, r);
        dfccl_dir_fail_t f;
        const char *why = NULL;
        int who         = r;
        uint64_t nf;

        if (d == NULL) {
            continue; /* another host's: its records come through the net */
        }
        /* a mismatch this rank found at its own registration is reported
         * there directly; found by another rank, it holds for ours too */
        if (dfccl_dir_read_note(d, DFCCL_FAIL_FROM, &f) &&
            (f.reg < reg || (f.origin != g->rank && f.reg <= reg))) {
            why = "mismatch";
            who = (int)f.origin;
        }
        if (why == NULL && from_only) {
            continue;
        }
        /* a failed run of another rank (in our own directory: relayed from
         * another host) */
        nf = __atomic_load_n(&d->nfails, __ATOMIC_ACQUIRE);
        for (uint64_t i = nf > DFCCL_DIR_FAILS ? nf - DFCCL_DIR_FAILS : 0;
             why == NULL && i < nf; i++) {
            if (dfccl_dir_read_fail(d, i, &f) && f.origin != g->rank && f.reg == reg &&
                f.run == run) {
                why = "run";
                who = (int)f.origin;
            }
        }
        if (why == NULL && r != g->rank && dfccl_dir_read_note(d, DFCCL_FAIL_ALL, &f) &&
            !dfccl_group_peer_done(d, reg, run)) {
            why = "aborted";
        }
        if (why == NULL && r != g->rank && __atomic_load_n(&d->closed, __ATOMIC_ACQUIRE) &&
            !dfccl_group_peer_done(d, reg, run)) {
            why      = "closed";
            f.status = DFCCL_ERR_ABORTED;
        }
        if (why == NULL) {
            continue;
        }
        *status_p = (dfccl_status_t)f.status;
        if (msg == NULL) {
            return who;
        }
        dfccl_coll_label(g->ctx, (int)(c - g->ctx->colls), label, sizeof(label));
        if (why[0] == 'm') {
            char by[32] = "this rank";
            if (who != g->rank) {
                snprintf(by, sizeof(by), "rank %d", who);
            }
            snprintf(msg, len, "%s cannot run: %s found that the ranks registered different "
                     "collectives at registration #%llu of the group, so this one, registered "
                     "as #%llu, pairs with the wrong collective: %s", label, by,
                     (unsigned long long)f.reg, (unsigned long long)reg, f.msg);
        } else if (why[0] == 'r') {
            snprintf(msg, len, "%s failed on rank %d, so it cannot complete here: %s", label,
                     who, f.msg);
        } else if (why[0] == 'a') {
            snprintf(msg, len, "%s cannot complete: rank %d can no longer take part in it, its "
                     "rank context was aborted: %s", label, who, f.msg);
        } else {
            snprintf(msg, len, "%s cannot complete: rank %d (process %d) destroyed the group "
                     "or its rank context before it finished run %llu of this collective; "
                     "every rank must run the group's collectives before destroying it", label,
                     who, g->pids[who], (unsigned long long)run);
        }
        return who;
    }
    return -1;
}

/* Everything a group holds (the group itself included). */
void dfccl_group_free(struct dfccl_group *g)
{
    /* before the pool: the goodbye is read from our directory */
    dfccl_net_group_left(g);
    dfccl_pool_destroy(g);
    for (int i = 0; g->peer_bells != NULL && i < g->nranks; i++) {
        dfccl_shm_release(&g->peer_bells[i]);
    }
    free(g->peer_bells);
    dfccl_shm_release(&g->bell_seg);
    if (g->ring_dev != NULL) {
        g->ctx->be->dev_free(g->ctx, g->ring_dev);
    }
    free(g->ring_rank);
    free(g->pids);
    free(g->same_host);
    free(g->orig_rank);
    for (int r = 0; g->fault_peer != NULL && r < g->nranks; r++) {
        if ((g->fault_watch >> r) & 1) {
            dfccl_net_watch(g->ctx, g->fault_peer[r], 0);
        }
    }
    if (g->fault_slots != NULL) {
        dfccl_net_xchg_drop(g->ctx, g->id);
    }
    free(g->fault_slots);
    free(g->fault_hosts);
    free(g->fault_gids);
    free(g->fault_peer);
    free(g);
}

/*
 * Group creation as a sequence of exchanges (dfccl_group_boot_t), so that a
 * caller that cannot block, the MPI component inside a nonblocking
 * collective, can drive the allgathers itself. Every exchange has the same
 * size on every rank, and every rank takes part in every exchange even after
 * a failure of its own: a failed rank says so in its block instead of
 * leaving, so that every rank ends with the same outcome and none waits for
 * a peer that gave up.
 *
 *   1. the boot information (with this rank's status): every rank learns
 *      every member's backend, host, device and connector directory;
 *   2. only where some edge of the ring crosses hosts (or net is forced):
 *      the UCX worker addresses;
 *   3. one word per rank: -1 if its setup failed, else whether it can write
 *      into every peer's connectors. After it every rank has attached what
 *      it needs, so the shared-memory names can go.
 */
enum {
    DFCCL_BOOT_INFO = 0, /* exchange 1 is out */
    DFCCL_BOOT_NET,      /* exchange 2 is out */
    DFCCL_BOOT_FINAL,    /* exchange 3 is out */
    DFCCL_BOOT_DONE
};

struct dfccl_group_boot {
    struct dfccl_group *g;     /* NULL if this rank could not even start */
    int                 nranks, rank;
    int                 phase;
    dfccl_status_t      err;   /* this rank's own failure, carried to its peers */
    char                errmsg[512];
    char                name[64];
    dfccl_boot_info_t   me;
    dfccl_boot_info_t  *all;   /* exchange 1's result */
    uint8_t            *addr;  /* our net address slot (exchange 2) */
    int32_t             word;  /* exchange 3 */
    /* every rank of the group is in this setup at once (dfcclGroupCreate,
     * whose allgathers block): the net connection may be awaited; not
     * where a caller drives the steps between other work, and a rank may
     * be in another group's setup (the MPI component) */
    int                 together;
    /* every rank sends its net addresses (dfccl_group_boot_want_net) */
    int                 want_net;
};

void dfccl_group_boot_want_net(dfccl_group_boot_t b)
{
    b->want_net = 1;
}

/* Remember this rank's first failure (its message is the thread's last). */
static void dfccl_boot_fail(dfccl_group_boot_t b, dfccl_status_t st)
{
    if (b->err == DFCCL_OK) {
        b->err = st;
        snprintf(b->errmsg, sizeof(b->errmsg), "%s", dfcclGetLastErrorMessage());
    }
}

/*
 * The ring's order (dfccl_group.ring_*): the hosts in the order of their
 * lowest rank, each host's ranks in rank order. A job that places ranks
 * round-robin over its hosts would otherwise cross between hosts at every
 * edge; this way it crosses once per host. Rank order, and no table, where
 * every host's ranks are consecutive. Same on every rank (host ids from
 * exchange 1).
 */
static dfccl_status_t dfccl_group_ring_order(struct dfccl_group *g, const dfccl_boot_info_t *all)
{
    const int n = g->nranks;
    int32_t *order;
    uint8_t *placed;
    int k = 0, same = 1;

    order  = calloc((size_t)n, sizeof(*order));
    placed = calloc((size_t)n, 1);
    if (order == NULL || placed == NULL) {
        free(order);
        free(placed);
        return dfccl_error(DFCCL_ERR_NO_MEMORY, "dfcclGroupCreate(%s): out of host memory",
                           g->name);
    }
    for (int h = 0; h < n; h++) {
        if (placed[h]) {
            continue;
        }
        for (int r = h; r < n; r++) {
            if (!placed[r] && strcmp(all[r].host_id, all[h].host_id) == 0) {
                placed[r]  = 1;
                order[k++] = r;
            }
        }
    }
    free(placed);
    for (int p = 0; p < n; p++) {
        same = same && order[p] == p;
        if (order[p] == g->rank) {
            g->ring_pos = p;
        }
    }
    g->ring_next = order[(g->ring_pos + 1) % n];
    g->ring_prev = order[(g->ring_pos + n - 1) % n];
    if (same) {
        free(order);
    } else {
        g->ring_rank = order;
    }
    return DFCCL_OK;
}

/* A rank's position in g's ring. */
int dfccl_group_ring_pos(const struct dfccl_group *g, int rank)
{
    if (g->ring_rank == NULL) {
        return rank;
    }
    for (int p = 0; p < g->nranks; p++) {
        if (g->ring_rank[p] == rank) {
            return p;
        }
    }
    return -1;
}

dfccl_status_t dfcclGroupRingOrder(dfccl_group_t g, int *ranks)
{
    if (g == NULL || ranks == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclGroupRingOrder: %s must not be NULL",
                           g == NULL ? "group" : "ranks");
    }
    for (int p = 0; p < g->nranks; p++) {
        ranks[p] = g->ring_rank != NULL ? g->ring_rank[p] : p;
    }
    return DFCCL_OK;
}

/*
 * Transport of each ring edge: shm/p2p between ranks of one host, net
 * (UCX) between hosts or everywhere when any rank forces it. Every rank
 * computes the same answer from the allgathered host ids and flags.
 */
static void dfccl_group_pick_net(struct dfccl_group *g, const dfccl_boot_info_t *all,
                                 const dfccl_boot_info_t *me)
{
    int n = g->nranks, force = 0, nx = g->ring_next, pv = g->ring_prev;

    for (int i = 0; i < n; i++) {
        force |= all[i].net;
        g->same_host[i] = strcmp(all[i].host_id, me->host_id) == 0;
        if (strcmp(all[i].host_id, all[0].host_id) != 0) {
            g->net = 1;
        }
    }
    g->net |= force;
    g->ring_net_edges = 0;
    for (int p = 0; p < n; p++) {
        const int a = g->ring_rank != NULL ? g->ring_rank[p] : p;
        const int z = g->ring_rank != NULL ? g->ring_rank[(p + 1) % n] : (p + 1) % n;

        g->ring_net_edges += force || strcmp(all[a].host_id, all[z].host_id) != 0;
    }
    g->next_net     = force || !g->same_host[nx];
    g->prev_net     = force || !g->same_host[pv];
    g->net_next_gid = all[nx].gid;
    g->net_prev_gid = all[pv].gid;
}

/* Exchange 2's block: our worker address, or an empty one where our edges
 * are local or the transport cannot start (our neighbours then fail too). */
static void dfccl_boot_net_address(dfccl_group_boot_t b)
{
    struct dfccl_group *g = b->g;
    int nx = g->ring_next, pv = g->ring_prev;
    dfccl_status_t st;

    /* Groups that may exclude failed ranks need every rank's addresses:
     * the survivors reach each other directly when they agree and build
     * their group (fault.c) */
    if (b->err != DFCCL_OK ||
        (!g->next_net && !g->prev_net &&
         !(b->want_net || g->ctx->cfg.fault_policy == DFCCL_FAULT_EXCLUDE))) {
        return;
    }
    st = dfccl_net_start(g->ctx);
    if (st != DFCCL_OK) {
        char why[512];
        snprintf(why, sizeof(why), "%s", dfcclGetLastErrorMessage());
        dfccl_boot_fail(b, dfccl_error(st, "dfcclGroupCreate(%s): rank %d (host %s) needs the "
                                       "net transport to reach rank %d (host %s) or rank %d "
                                       "(host %s) and cannot start it: %s", g->name, g->rank,
                                       b->me.host, nx, b->all[nx].host, pv, b->all[pv].host,
                                       why));
        return;
    }
    dfccl_net_address(g->ctx, b->addr, DFCCL_NET_ADDR_MAX);
}

/* Keep every rank's net addresses, host name and group id in the group
 * where every rank sent its addresses (fault exclusion across hosts). */
static void dfccl_boot_keep_slots(dfccl_group_boot_t b, const uint8_t *addrs)
{
    struct dfccl_group *g = b->g;
    const int n           = g->nranks;

    for (int i = 0; i < n; i++) {
        uint64_t lanes;
        memcpy(&lanes, addrs + (size_t)i * DFCCL_NET_ADDR_MAX, sizeof(lanes));
        if (lanes == 0) {
            return;
        }
    }
    g->fault_slots = malloc((size_t)n * DFCCL_NET_ADDR_MAX);
    g->fault_hosts = calloc((size_t)n, 64);
    g->fault_gids  = calloc((size_t)n, sizeof(int));
    if (g->fault_slots == NULL || g->fault_hosts == NULL || g->fault_gids == NULL) {
        free(g->fault_slots);
        free(g->fault_hosts);
        free(g->fault_gids);
        g->fault_slots = NULL;
        g->fault_hosts = NULL;
        g->fault_gids  = NULL;
        return; /* the group cannot exclude: said when it is asked to */
    }
    memcpy(g->fault_slots, addrs, (size_t)n * DFCCL_NET_ADDR_MAX);
    for (int i = 0; i < n; i++) {
        snprintf(g->fault_hosts + (size_t)i * 64, 64, "%s", b->all[i].host);
        g->fault_gids[i] = b->all[i].gid;
    }
}

static void dfccl_boot_net_connect(dfccl_group_boot_t b, const uint8_t *addrs)
{
    struct dfccl_group *g = b->g;
    size_t hl             = sizeof(b->me.host);
    char *hosts;
    dfccl_status_t st;

    if (b->err != DFCCL_OK) {
        return;
    }
    dfccl_boot_keep_slots(b, addrs);
    if (!g->next_net && !g->prev_net) {
        return;
    }
    hosts = calloc((size_t)g->nranks, hl);
    if (hosts == NULL) {
        dfccl_boot_fail(b, dfccl_error(DFCCL_ERR_NO_MEMORY, "dfcclGroupCreate: out of host "
                                       "memory"));
        return;
    }
    for (int i = 0; i < g->nranks; i++) {
        memcpy(hosts + (size_t)i * hl, b->all[i].host, hl);
    }
    st = dfccl_net_group_connect(g, addrs, DFCCL_NET_ADDR_MAX, hosts, hl, b->together);
    free(hosts);
    if (st != DFCCL_OK) {
        dfccl_boot_fail(b, st);
    }
}

/* After the exchanges that tell where the peers are: choose our segments'
 * transport, attach the neighbours' directories and the local peers' bells,
 * and say in exchange 3 whether we can write into every peer's connectors
 * (one host, no net, and on GPUs p2p to every peer's device, with our own
 * segments in device memory): the group takes the algorithms that do
 * (dfccl_group.all_local) only if every rank can. */
static void dfccl_boot_attach(dfccl_group_boot_t b)
{
    struct dfccl_group *g       = b->g;
    struct dfccl_rank_ctx *ctx  = g->ctx;
    int n = g->nranks, rank = g->rank, local;
    const dfccl_boot_info_t *pv = &b->all[g->ring_prev];
    dfccl_status_t st;

    b->word = -1;
    if (b->err != DFCCL_OK) {
        return;
    }
    (void)pv; /* both read only where CUDA is built */
    (void)rank;
    if (g->ring_rank != NULL) {
        /* the ring kernels' table of positions */
        const size_t bytes = (size_t)n * sizeof(*g->ring_rank);
        st = ctx->be->dev_alloc(ctx, bytes, &g->ring_dev);
        if (st == DFCCL_OK) {
            st = ctx->be->memcpy_h2d(ctx, g->ring_dev, g->ring_rank, bytes);
        }
        if (st != DFCCL_OK) {
            dfccl_boot_fail(b, st);
            return;
        }
    }
#ifdef HAVE_CUDART
    /* Our segments are written by the previous rank, or by our proxy
     * (net): then they must be host memory (shm, registered with the GPU). */
    if (!g->prev_net && ctx->backend == DFCCL_BACKEND_CUDA &&
        ctx->cfg.transport != DFCCL_TRANSPORT_SHM &&
        dfccl_p2p_reachable(ctx, pv->device, pv->uuid)) {
        g->pool.transport = DFCCL_TRANSPORT_P2P;
    } else if (!g->prev_net && ctx->cfg.transport == DFCCL_TRANSPORT_P2P) {
        dfccl_boot_fail(b, dfccl_error(DFCCL_ERR_UNSUPPORTED, "dfcclGroupCreate(%s): "
                                       "DFCCL_TRANSPORT=p2p but device %d cannot reach device "
                                       "%d of rank %d; use auto or shm", g->name, ctx->device,
                                       pv->device, g->ring_prev));
        return;
    }
#endif
    local = !g->net;
    for (int i = 0; i < n && local; i++) {
        local = g->same_host[i];
#ifdef HAVE_CUDART
        if (local && ctx->backend == DFCCL_BACKEND_CUDA) {
            local = g->pool.transport == DFCCL_TRANSPORT_P2P &&
                    (i == rank || dfccl_p2p_reachable(ctx, b->all[i].device, b->all[i].uuid));
        }
#endif
    }
    st = dfccl_pool_connect(g, b->all[0].dir, sizeof(b->all[0]));
    if (st != DFCCL_OK) {
        dfccl_boot_fail(b, st);
        return;
    }
    dfccl_group_bell_attach(g, b->all);
    b->word = local;
}

/* Exchange 1's result: every member's boot information. */
static void dfccl_boot_info_check(dfccl_group_boot_t b, const dfccl_boot_info_t *all)
{
    struct dfccl_group *g = b->g;
    int n = b->nranks;

    for (int i = 0; i < n && b->err == DFCCL_OK; i++) {
        if (all[i].magic != DFCCL_BOOT_MAGIC || all[i].nranks != n || all[i].rank != i) {
            dfccl_boot_fail(b, dfccl_error(DFCCL_ERR_BOOTSTRAP, "dfcclGroupCreate(%s): rank %d "
                                           "reports rank %d of %d ranks, this rank expected "
                                           "rank %d of %d; every member must pass the same "
                                           "nranks and a distinct rank, and the allgather "
                                           "must return blocks in rank order", b->name, i,
                                           all[i].rank, all[i].nranks, i, n));
        } else if (all[i].backend != b->me.backend && g != NULL) {
            dfccl_boot_fail(b, dfccl_error(DFCCL_ERR_MISMATCH, "dfcclGroupCreate(%s): rank %d "
                                           "runs the %s backend and rank %d the %s backend; "
                                           "use the same DFCCL_BACKEND on every rank", b->name,
                                           b->rank,
                                           b->me.backend == DFCCL_BACKEND_HOST ? "host"
                                                                               : "cuda",
                                           i, all[i].backend == DFCCL_BACKEND_HOST ? "host"
                                                                                   : "cuda"));
        }
    }
    for (int i = 0; i < n && b->err == DFCCL_OK; i++) {
        if (all[i].status != DFCCL_OK) {
            b->err = (dfccl_status_t)all[i].status;
            snprintf(b->errmsg, sizeof(b->errmsg), "dfcclGroupCreate(%s): rank %d of the "
                     "group (host %s) could not take part: %s; its own message says why",
                     b->name, i, all[i].host, dfcclGetErrorString(b->err));
        }
    }
    if (b->err != DFCCL_OK || g == NULL) {
        return;
    }
    for (int i = 0; i < n; i++) {
        g->pids[i] = all[i].pid;
    }
    if (n > 1) {
        dfccl_status_t st = dfccl_group_ring_order(g, all);
        if (st != DFCCL_OK) {
            dfccl_boot_fail(b, st);
            return;
        }
        dfccl_group_pick_net(g, all, &b->me);
    }
}

dfccl_status_t dfcclGroupBootStart(dfccl_rank_ctx_t ctx, int nranks, int rank,
                                   const char *name, dfccl_group_boot_t *boot_p)
{
    struct dfccl_group_boot *b;
    struct dfccl_group *g = NULL;
    dfccl_status_t st;

    if (boot_p == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclGroupBootStart: boot_p must not be "
                           "NULL");
    }
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclGroupCreate: rank %d of %d ranks is "
                           "out of range; pass 0 <= rank < nranks", rank, nranks);
    }
    b = calloc(1, sizeof(*b));
    if (b == NULL) {
        return dfccl_error(DFCCL_ERR_NO_MEMORY, "dfcclGroupCreate: out of host memory");
    }
    b->nranks = nranks;
    b->rank   = rank;
    snprintf(b->name, sizeof(b->name), "%s", name != NULL ? name : "unnamed");
    b->all  = calloc((size_t)nranks, sizeof(*b->all));
    b->addr = calloc(1, DFCCL_NET_ADDR_MAX);
    if (b->all == NULL || b->addr == NULL) {
        free(b->all);
        free(b->addr);
        free(b);
        return dfccl_error(DFCCL_ERR_NO_MEMORY, "dfcclGroupCreate: out of host memory");
    }
    b->me.magic  = DFCCL_BOOT_MAGIC;
    b->me.nranks = nranks;
    b->me.rank   = rank;
    b->me.pid    = (int32_t)getpid();
    gethostname(b->me.host, sizeof(b->me.host) - 1);
    if (ctx == NULL) {
        /* This rank has no context (its setup failed and said why): it still
         * takes part, so that its peers fail with it instead of waiting. */
        b->err = DFCCL_ERR_BOOTSTRAP;
        snprintf(b->errmsg, sizeof(b->errmsg), "dfcclGroupCreate(%s): this rank has no "
                 "dfccl context", b->name);
        goto out;
    }
    g = calloc(1, sizeof(*g));
    if (g != NULL) {
        g->pids          = calloc((size_t)nranks, sizeof(int));
        g->same_host     = calloc((size_t)nranks, sizeof(int));
        /* not connected (dfccl_net_group_connect) */
        for (int k = 0; k < DFCCL_NET_MAX_LANES; k++) {
            g->net_lane_next[k] = -1;
            g->net_lane_prev[k] = -1;
        }
    }
    if (g == NULL || g->pids == NULL || g->same_host == NULL) {
        if (g != NULL) {
            free(g->pids);
            free(g->same_host);
            free(g);
        }
        g = NULL;
        dfccl_boot_fail(b, dfccl_error(DFCCL_ERR_NO_MEMORY, "dfcclGroupCreate: out of host "
                                       "memory"));
        goto out;
    }
    b->g      = g;
    g->ctx    = ctx;
    g->nranks = nranks;
    g->rank   = rank;
    g->ring_pos  = rank;
    g->ring_next = (rank + 1) % nranks;
    g->ring_prev = (rank + nranks - 1) % nranks;
    snprintf(g->name, sizeof(g->name), "%s", b->name);
    pthread_mutex_lock(&ctx->lock);
    g->id = ctx->next_group_id++;
    pthread_mutex_unlock(&ctx->lock);
    if (nranks > 1) {
        st = dfccl_pool_init(g, b->me.dir, sizeof(b->me.dir));
        if (st != DFCCL_OK) {
            dfccl_boot_fail(b, st);
        } else {
            dfccl_group_bell_create(g, b->me.bell, sizeof(b->me.bell));
        }
    }
    b->me.backend = ctx->backend;
    b->me.device  = ctx->device;
    memcpy(b->me.uuid, ctx->device_uuid, sizeof(b->me.uuid));
    dfccl_net_host_id(b->me.host_id, sizeof(b->me.host_id));
    b->me.gid = g->id;
    b->me.net = ctx->cfg.net != 0;
out:
    b->me.status = b->err;
    b->phase     = DFCCL_BOOT_INFO;
    *boot_p      = b;
    return DFCCL_OK;
}

dfccl_status_t dfcclGroupBootExchange(dfccl_group_boot_t b, const void **send_p,
                                      size_t *bytes_p)
{
    if (b == NULL || send_p == NULL || bytes_p == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclGroupBootExchange: boot, send_p and "
                           "bytes_p must not be NULL");
    }
    switch (b->phase) {
    case DFCCL_BOOT_INFO:
        *send_p  = &b->me;
        *bytes_p = sizeof(b->me);
        return DFCCL_OK;
    case DFCCL_BOOT_NET:
        *send_p  = b->addr;
        *bytes_p = DFCCL_NET_ADDR_MAX;
        return DFCCL_OK;
    case DFCCL_BOOT_FINAL:
        *send_p  = &b->word;
        *bytes_p = sizeof(b->word);
        return DFCCL_OK;
    }
    return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclGroupBootExchange: the group is set up "
                       "already");
}

/*
 * The ring's view of g's links, which the algorithms' estimates read
 * (alpha_us, beta_gbps): where every edge of the ring is of one class,
 * that class's values; where the ring mixes classes (e ≥ 1 of its n edges
 * net, the others within a host), a hop's mean latency over its edges
 *
 *     alpha = (e alpha_net + (n - e) alpha_local) / n
 *
 * (a chain of hops around the ring crosses the classes in about that
 * proportion) and the least bandwidth of the classes, since every rank
 * sends at once and the ring moves no faster than its slowest edge.
 * Algorithms that run within one host only run on groups of one class.
 */
void dfccl_group_link_set(struct dfccl_group *g, int link, double alpha_us, double beta_gbps)
{
    const int net = DFCCL_LINK_NET, local = g->local_link;

    g->link_alpha_us[link]  = alpha_us;
    g->link_beta_gbps[link] = beta_gbps;
    if (g->links != ((1u << net) | (1u << local)) || g->nranks < 2) {
        g->alpha_us  = g->link_alpha_us[g->link];
        g->beta_gbps = g->link_beta_gbps[g->link];
        return;
    }
    g->alpha_us = ((double)g->ring_net_edges * g->link_alpha_us[net] +
                   (double)(g->nranks - g->ring_net_edges) * g->link_alpha_us[local]) /
                  (double)g->nranks;
    g->beta_gbps = g->link_beta_gbps[net] < g->link_beta_gbps[local] ? g->link_beta_gbps[net]
                                                                     : g->link_beta_gbps[local];
}

/*
 * The classes of link g's ranks talk over, from what every rank knows
 * alike (all_local, net, the backend), and the values the cost estimates
 * use until they are measured (dfcclGroupProfile; DFCCL_PROFILE=off keeps
 * them):
 *
 *   - p2p: NVLink on H200s, a hop about 1 us (a CPU-GPU round trip through
 *     mapped memory is 3.2 us, DESIGN.md), a copy kernel 365 GB/s: 300;
 *   - shm between GPUs without p2p: pinned host memory over PCIe, 2 us and
 *     20 GB/s; on the host backend a memcpy between threads, 1 us and 10
 *     GB/s;
 *   - net: UCX between hosts, 5 us and 12 GB/s (a 100 Gb/s NIC);
 *   - a collective's fixed cost (submission, a pass of the daemon, its
 *     completion on the host): the 10 us of a warm 8-byte allreduce on two
 *     H200s less its two hops (DESIGN.md), and 10 us on the host backend.
 *
 * A group within a host whose GPUs do not all reach each other may cross
 * shared memory somewhere on its ring: it is counted as shm, and so are
 * the edges within a host of a group that spans hosts (all_local is 0
 * there). A group whose every edge is net (one rank a host, or DFCCL_NET
 * forced) has no local class.
 */
static void dfccl_group_links_nominal(struct dfccl_group *g)
{
    const int host  = g->ctx->backend == DFCCL_BACKEND_HOST;
    const int local = !host && g->all_local ? DFCCL_LINK_P2P : DFCCL_LINK_SHM;

    g->local_link     = local;
    g->measured_links = 0;
    g->links          = g->ring_net_edges < g->nranks ? 1u << local : 0;
    g->link           = local;
    g->coll_us        = host ? 10.0 : 8.0;
    if (g->net) {
        g->links |= 1u << DFCCL_LINK_NET;
        g->link = DFCCL_LINK_NET;
    }
    dfccl_group_link_set(g, DFCCL_LINK_P2P, 1.0, 300.0);
    dfccl_group_link_set(g, DFCCL_LINK_SHM, host ? 1.0 : 2.0, host ? 10.0 : 20.0);
    dfccl_group_link_set(g, DFCCL_LINK_NET, 5.0, 12.0);
}

/* The end: the group on success, the same error on every rank otherwise. */
static dfccl_status_t dfccl_boot_finish(dfccl_group_boot_t b, const int32_t *words,
                                        dfccl_group_t *group_p)
{
    struct dfccl_group *g = b->g;
    int n = b->nranks, bad = -1;

    b->phase = DFCCL_BOOT_DONE;
    for (int i = 0; words != NULL && i < n && bad < 0; i++) {
        if (words[i] < 0) {
            bad = i;
        }
    }
    if (b->err == DFCCL_OK && bad >= 0) {
        b->err = DFCCL_ERR_BOOTSTRAP;
        snprintf(b->errmsg, sizeof(b->errmsg), "dfcclGroupCreate(%s): rank %d of the group "
                 "(host %s) failed to set it up; its own message says why", b->name, bad,
                 b->all[bad].host);
    }
    if (b->err != DFCCL_OK) {
        if (g != NULL) {
            dfccl_group_free(g);
            b->g = NULL;
        }
        /* a failure of this rank's was printed where it happened; another
         * rank's is printed by that rank: here it is only the result */
        dfccl_set_last_error(b->errmsg);
        return b->err;
    }
    if (n > 1) {
        g->all_local = 1;
        for (int i = 0; i < n; i++) {
            g->all_local = g->all_local && words[i] > 0;
        }
        dfccl_group_links_nominal(g);
        /* both ranks know both GPUs (exchange 1), by UUID: ordinals of
         * processes with different CUDA_VISIBLE_DEVICES do not compare */
        g->pair = n == 2 && g->all_local &&
                  (g->ctx->backend == DFCCL_BACKEND_HOST ||
                   memcmp(b->all[0].uuid, b->all[1].uuid, sizeof(b->all[0].uuid)) != 0);
        g->pool.attachers = g->all_local ? n - 1 : 1;
        dfccl_pool_unlink_dir(g);
        dfccl_shm_unlink(&g->bell_seg);
    }
    pthread_mutex_lock(&g->ctx->lock);
    g->next         = g->ctx->groups;
    g->ctx->groups  = g;
    pthread_mutex_unlock(&g->ctx->lock);
    if (g->ctx->group_born != NULL) {
        g->ctx->group_born(g);
    }
    b->g     = NULL;
    *group_p = g;
    return DFCCL_OK;
}

dfccl_status_t dfcclGroupBootStep(dfccl_group_boot_t b, const void *recvbuf,
                                  dfccl_group_t *group_p)
{
    if (b == NULL || recvbuf == NULL || group_p == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclGroupBootStep: boot, recvbuf and "
                           "group_p must not be NULL");
    }
    switch (b->phase) {
    case DFCCL_BOOT_INFO:
        memcpy(b->all, recvbuf, (size_t)b->nranks * sizeof(*b->all));
        dfccl_boot_info_check(b, b->all);
        if (b->err != DFCCL_OK || b->nranks == 1) {
            /* Every rank saw the same blocks: a failure here is seen by all
             * of them, and all stop after this exchange. */
            return dfccl_boot_finish(b, NULL, group_p);
        }
        if (b->g->net) {
            dfccl_boot_net_address(b);
            b->phase = DFCCL_BOOT_NET;
            return DFCCL_INPROGRESS;
        }
        dfccl_boot_attach(b);
        b->phase = DFCCL_BOOT_FINAL;
        return DFCCL_INPROGRESS;
    case DFCCL_BOOT_NET:
        dfccl_boot_net_connect(b, recvbuf);
        dfccl_boot_attach(b);
        b->phase = DFCCL_BOOT_FINAL;
        return DFCCL_INPROGRESS;
    case DFCCL_BOOT_FINAL:
        return dfccl_boot_finish(b, recvbuf, group_p);
    }
    return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclGroupBootStep: the group is set up "
                       "already");
}

void dfcclGroupBootFree(dfccl_group_boot_t b)
{
    if (b == NULL) {
        return;
    }
    if (b->g != NULL) {
        dfccl_group_free(b->g);
    }
    free(b->all);
    free(b->addr);
    free(b);
}

dfccl_status_t dfcclGroupCreate(dfccl_rank_ctx_t ctx, int nranks, int rank,
                                dfccl_oob_allgather_fn_t allgather, void *allgather_arg,
                                const char *name, dfccl_group_t *group_p)
{
    dfccl_group_boot_t b;
    dfccl_group_t g = NULL;
    dfccl_status_t st;
    void *all = NULL;

    if (ctx == NULL || group_p == NULL || allgather == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclGroupCreate: ctx, allgather and "
                           "group_p must not be NULL");
    }
    st = dfcclGroupBootStart(ctx, nranks, rank, name, &b);
    if (st != DFCCL_OK) {
        return st;
    }
    b->together = 1;
    do {
        const void *send;
        size_t bytes;
        void *grown;

        dfcclGroupBootExchange(b, &send, &bytes);
        grown = realloc(all, (size_t)nranks * bytes);
        if (grown == NULL) {
            /* Leaving here leaves the peers waiting: only out of memory. */
            st = dfccl_error(DFCCL_ERR_NO_MEMORY, "dfcclGroupCreate: out of host memory");
            break;
        }
        all = grown;
        if (allgather(send, all, bytes, allgather_arg) != 0) {
            st = dfccl_error(DFCCL_ERR_BOOTSTRAP, "dfcclGroupCreate(%s): the out-of-band "
                             "allgather failed", name != NULL ? name : "unnamed");
            break;
        }
        st = dfcclGroupBootStep(b, all, &g);
    } while (st == DFCCL_INPROGRESS);
    free(all);
    dfcclGroupBootFree(b);
    /* Every rank is here at once, as in an exchange: the links can be
     * measured now. (dfcclGroupBootStep leaves it to its caller, whose
     * ranks may be setting up other groups in between.) The measurement
     * runs collectives on the group: where they fail, so would the
     * group's own, and the creation fails. */
    if (st == DFCCL_OK && nranks > 1 && ctx->group_profile != NULL &&
        (ctx->cfg.profile == DFCCL_PROFILE_CREATE ||
         (ctx->cfg.profile == DFCCL_PROFILE_AUTO && ctx->cfg.tuner == DFCCL_TUNER_MODEL))) {
        st = ctx->group_profile(g);
        if (st != DFCCL_OK) {
            dfcclGroupDestroy(g);
        }
    }
    if (st == DFCCL_OK) {
        *group_p = g;
    }
    return st;
}

dfccl_status_t dfcclGroupDestroy(dfccl_group_t g)
{
    struct dfccl_rank_ctx *ctx;
    struct dfccl_group **pp;

    if (g == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclGroupDestroy: group is NULL");
    }
    ctx = g->ctx;
    (void)dfccl_ctx_device_lost(ctx);
    if (ctx->group_retire != NULL) {
        DFCCL_CHECK(ctx->group_retire(g)); /* DFCCL_PROFILE_EVERY's collectives */
    }
    pthread_mutex_lock(&ctx->lock);
    if (g->ncolls > 0) {
        int n = g->ncolls;
        pthread_mutex_unlock(&ctx->lock);
        return dfccl_error(DFCCL_ERR_BUSY, "dfcclGroupDestroy(%s): %d collective(s) are still "
                           "registered on this group; dfcclDeregister them first", g->name, n);
    }
    for (pp = &ctx->groups; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == g) {
            *pp = g->next;
            break;
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    dfccl_group_free(g);
    return DFCCL_OK;
}
