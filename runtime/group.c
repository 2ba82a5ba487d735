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
} dfccl_boot_info_t;

#define DFCCL_BELL_BYTES 4096

/* Our bell page (best effort: without it, peers wait out their backoff). */
static void dfccl_group_bell_create(struct dfccl_group *g, char *name, size_t len)
{
    char n[64];

    name[0] = '\0';
    if (!g->ctx->cfg.peer_bells) {
        return;
    }
    dfccl_shm_name(n, sizeof(n), "bell-%llx-g%d", (unsigned long long)g->ctx->uid, g->id);
    if (dfccl_shm_create(&g->bell_seg, n, DFCCL_BELL_BYTES) != DFCCL_OK) {
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
        if (i == g->rank || !g->same_host[i] || all[i].bell[0] == '\0') {
            continue;
        }
        if (dfccl_shm_attach(&g->peer_bells[i], all[i].bell, DFCCL_BELL_BYTES) != DFCCL_OK) {
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

/* Everything a group holds (the group itself included). */
void dfccl_group_free(struct dfccl_group *g)
{
    dfccl_pool_destroy(g);
    for (int i = 0; g->peer_bells != NULL && i < g->nranks; i++) {
        dfccl_shm_release(&g->peer_bells[i]);
    }
    free(g->peer_bells);
    dfccl_shm_release(&g->bell_seg);
    free(g->pids);
    free(g->same_host);
    free(g);
}

/*
 * Transport of each ring edge: shm/p2p between ranks of one host, net
 * (UCX) between hosts or everywhere when any rank forces it. Every rank
 * computes the same answer from the allgathered host ids and flags. With
 * net on any edge, the UCX worker addresses go through a second allgather.
 */
static dfccl_status_t dfccl_group_pick_net(struct dfccl_group *g, const dfccl_boot_info_t *all,
                                           const dfccl_boot_info_t *me)
{
    int n = g->nranks, force = 0, nx = (g->rank + 1) % n, pv = (g->rank + n - 1) % n;
    uint8_t *addrs = NULL;
    char *hosts;
    dfccl_status_t st, started = DFCCL_OK;

    for (int i = 0; i < n; i++) {
        force |= all[i].net;
        g->same_host[i] = strcmp(all[i].host_id, me->host_id) == 0;
        if (strcmp(all[i].host_id, all[(i + 1) % n].host_id) != 0) {
            g->net = 1;
        }
    }
    g->net |= force;
    g->next_net     = force || !g->same_host[nx];
    g->prev_net     = force || !g->same_host[pv];
    g->net_next_gid = all[nx].gid;
    g->net_prev_gid = all[pv].gid;
    if (!g->net) {
        return DFCCL_OK;
    }
    if (!g->next_net && !g->prev_net) {
        /* our edges are local, but the allgather is collective */
        st = DFCCL_OK;
    } else {
        /* On failure this rank still takes part in the allgather, with an
         * empty address, so that its neighbours fail too instead of waiting. */
        started = dfccl_net_start(g->ctx);
        if (started != DFCCL_OK) {
            char why[512];
            snprintf(why, sizeof(why), "%s", dfcclGetLastErrorMessage());
            started = dfccl_error(started, "dfcclGroupCreate(%s): rank %d (host %s) needs the "
                                  "net transport to reach rank %d (host %s) or rank %d (host "
                                  "%s) and cannot start it: %s", g->name, g->rank, me->host,
                                  nx, all[nx].host, pv, all[pv].host, why);
        }
    }
    addrs = calloc((size_t)n + 1, DFCCL_NET_ADDR_MAX);
    hosts = calloc((size_t)n, sizeof(me->host));
    if (addrs == NULL || hosts == NULL) {
        free(addrs);
        free(hosts);
        return dfccl_error(DFCCL_ERR_NO_MEMORY, "dfcclGroupCreate: out of host memory");
    }
    if (g->ctx->net != NULL && started == DFCCL_OK) {
        dfccl_net_address(g->ctx, addrs + (size_t)n * DFCCL_NET_ADDR_MAX, DFCCL_NET_ADDR_MAX);
    }
    if (g->allgather(addrs + (size_t)n * DFCCL_NET_ADDR_MAX, addrs, DFCCL_NET_ADDR_MAX,
                     g->allgather_arg) != 0) {
        st = dfccl_error(DFCCL_ERR_BOOTSTRAP, "dfcclGroupCreate(%s): the out-of-band "
                         "allgather of net addresses failed", g->name);
    } else if (started != DFCCL_OK) {
        st = started;
    } else if (g->next_net || g->prev_net) {
        for (int i = 0; i < n; i++) {
            memcpy(hosts + (size_t)i * sizeof(me->host), all[i].host, sizeof(me->host));
        }
        st = dfccl_net_group_connect(g, addrs, DFCCL_NET_ADDR_MAX, hosts, sizeof(me->host));
    }
    free(addrs);
    free(hosts);
    return st;
}

dfccl_status_t dfcclGroupCreate(dfccl_rank_ctx_t ctx, int nranks, int rank,
                                dfccl_oob_allgather_fn_t allgather, void *allgather_arg,
                                const char *name, dfccl_group_t *group_p)
{
    struct dfccl_group *g;
    dfccl_boot_info_t me, *all = NULL;
    dfccl_status_t st = DFCCL_OK;

    if (ctx == NULL || group_p == NULL || allgather == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclGroupCreate: ctx, allgather and "
                           "group_p must not be NULL");
    }
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclGroupCreate: rank %d of %d ranks is "
                           "out of range; pass 0 <= rank < nranks", rank, nranks);
    }
    g = calloc(1, sizeof(*g));
    all = calloc((size_t)nranks, sizeof(*all));
    if (g == NULL || all == NULL) {
        st = dfccl_error(DFCCL_ERR_NO_MEMORY, "dfcclGroupCreate: out of host memory");
        goto err;
    }
    g->ctx           = ctx;
    g->nranks        = nranks;
    g->rank          = rank;
    g->allgather     = allgather;
    g->allgather_arg = allgather_arg;
    snprintf(g->name, sizeof(g->name), "%s", name != NULL ? name : "unnamed");

    pthread_mutex_lock(&ctx->lock);
    g->id = ctx->next_group_id++;
    pthread_mutex_unlock(&ctx->lock);

    memset(&me, 0, sizeof(me));
    if (nranks > 1) {
        st = dfccl_pool_init(g, me.dir, sizeof(me.dir));
        if (st != DFCCL_OK) {
            goto err;
        }
        dfccl_group_bell_create(g, me.bell, sizeof(me.bell));
    }
    me.magic   = DFCCL_BOOT_MAGIC;
    me.nranks  = nranks;
    me.rank    = rank;
    me.backend = ctx->backend;
    me.pid     = (int32_t)getpid();
    me.device  = ctx->device;
    gethostname(me.host, sizeof(me.host) - 1);
    dfccl_net_host_id(me.host_id, sizeof(me.host_id));
    me.gid = g->id;
    me.net = ctx->cfg.net != 0;
    if (allgather(&me, all, sizeof(me), allgather_arg) != 0) {
        st = dfccl_error(DFCCL_ERR_BOOTSTRAP, "dfcclGroupCreate(%s): the out-of-band "
                         "allgather failed", g->name);
        goto err;
    }
    for (int i = 0; i < nranks; i++) {
        if (all[i].magic != DFCCL_BOOT_MAGIC || all[i].nranks != nranks || all[i].rank != i) {
            st = dfccl_error(DFCCL_ERR_BOOTSTRAP, "dfcclGroupCreate(%s): rank %d reports "
                             "rank %d of %d ranks, this rank expected rank %d of %d; every "
                             "member must pass the same nranks and a distinct rank, and the "
                             "allgather must return blocks in rank order", g->name, i,
                             all[i].rank, all[i].nranks, i, nranks);
            goto err;
        }
        if (all[i].backend != me.backend) {
            st = dfccl_error(DFCCL_ERR_MISMATCH, "dfcclGroupCreate(%s): rank %d runs the %s "
                             "backend and rank %d the %s backend; use the same DFCCL_BACKEND "
                             "on every rank", g->name, rank,
                             me.backend == DFCCL_BACKEND_HOST ? "host" : "cuda", i,
                             all[i].backend == DFCCL_BACKEND_HOST ? "host" : "cuda");
            goto err;
        }
    }
    g->pids      = calloc((size_t)nranks, sizeof(int));
    g->same_host = calloc((size_t)nranks, sizeof(int));
    if (g->pids == NULL || g->same_host == NULL) {
        st = dfccl_error(DFCCL_ERR_NO_MEMORY, "dfcclGroupCreate: out of host memory");
        goto err;
    }
    for (int i = 0; i < nranks; i++) {
        g->pids[i] = all[i].pid;
    }
    if (nranks > 1) {
        const dfccl_boot_info_t *pv = &all[(rank + nranks - 1) % nranks];
        int barrier = 0, *bar = all != NULL ? (int *)all : NULL;

        st = dfccl_group_pick_net(g, all, &me);
        if (st != DFCCL_OK) {
            goto err;
        }
        (void)pv;
#ifdef HAVE_CUDART
        /* Our segments are written by the previous rank, or by our proxy
         * (net): then they must be host memory. */
        if (g->prev_net) {
            /* shm segments, registered with the GPU (host_register) */
        } else if (ctx->backend == DFCCL_BACKEND_CUDA &&
                   ctx->cfg.transport != DFCCL_TRANSPORT_SHM &&
                   dfccl_p2p_reachable(ctx, pv->device)) {
            g->pool.transport = DFCCL_TRANSPORT_P2P;
        } else if (ctx->cfg.transport == DFCCL_TRANSPORT_P2P) {
            st = dfccl_error(DFCCL_ERR_UNSUPPORTED, "dfcclGroupCreate(%s): DFCCL_TRANSPORT=p2p "
                             "but device %d cannot reach device %d of rank %d; use auto or "
                             "shm", g->name, ctx->device, pv->device,
                             (rank + nranks - 1) % nranks);
            goto err;
        }
#endif
        /* Can this rank write into every peer's connectors (one host, no
         * net, and on GPUs p2p to every peer's device, with our own
         * segments in device memory)? The group may take algorithms that
         * do (dfccl_group.all_local) only if every rank can. */
        barrier = !g->net;
        for (int i = 0; i < nranks && barrier; i++) {
            barrier = g->same_host[i];
#ifdef HAVE_CUDART
            if (barrier && ctx->backend == DFCCL_BACKEND_CUDA) {
                barrier = g->pool.transport == DFCCL_TRANSPORT_P2P &&
                          (i == rank || dfccl_p2p_reachable(ctx, all[i].device));
            }
#endif
        }
        st = dfccl_pool_connect(g, all[0].dir, sizeof(all[0]));
        if (st != DFCCL_OK) {
            goto err;
        }
        dfccl_group_bell_attach(g, all);
        /* Everyone attached its neighbour's directory and its local peers'
         * bells: the names can go. (The same allgather tells who can write
         * to every peer.) */
        if (allgather(&barrier, bar, sizeof(barrier), allgather_arg) != 0) {
            st = dfccl_error(DFCCL_ERR_BOOTSTRAP, "dfcclGroupCreate(%s): the out-of-band "
                             "allgather failed", g->name);
            goto err;
        }
        g->all_local = 1;
        for (int i = 0; i < nranks; i++) {
            g->all_local = g->all_local && bar[i];
        }
        /* both ranks know both devices (the boot allgather) */
        g->pair = nranks == 2 && g->all_local &&
                  (ctx->backend == DFCCL_BACKEND_HOST || all[0].device != all[1].device);
        g->pool.attachers = g->all_local ? nranks - 1 : 1;
        dfccl_pool_unlink_dir(g);
        dfccl_shm_unlink(&g->bell_seg);
    }
    free(all);
    pthread_mutex_lock(&ctx->lock);
    g->next     = ctx->groups;
    ctx->groups = g;
    pthread_mutex_unlock(&ctx->lock);
    *group_p = g;
    return DFCCL_OK;

err:
    free(all);
    if (g != NULL) {
        dfccl_group_free(g);
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
