/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Groups of ranks (the paper's device sets) and their bootstrap through the
 * user's out-of-band allgather: every member learns every other member's
 * backend, host, device and connector directory, and checks that all agree
 * on the group size. This is the only communication dfccl asks for:
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
    char     dir[48];  /* name of this rank's connector directory */
} dfccl_boot_info_t;

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
    }
    me.magic   = DFCCL_BOOT_MAGIC;
    me.nranks  = nranks;
    me.rank    = rank;
    me.backend = ctx->backend;
    me.pid     = (int32_t)getpid();
    me.device  = ctx->device;
    gethostname(me.host, sizeof(me.host) - 1);
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
    g->pids = calloc((size_t)nranks, sizeof(int));
    if (g->pids == NULL) {
        st = dfccl_error(DFCCL_ERR_NO_MEMORY, "dfcclGroupCreate: out of host memory");
        goto err;
    }
    for (int i = 0; i < nranks; i++) {
        g->pids[i] = all[i].pid;
    }
    if (nranks > 1) {
        const dfccl_boot_info_t *nx = &all[(rank + 1) % nranks];
        const dfccl_boot_info_t *pv = &all[(rank + nranks - 1) % nranks];
        int barrier = 0, *bar = all != NULL ? (int *)all : NULL;

        g->next_device    = nx->device;
        g->next_same_host = strcmp(nx->host, me.host) == 0;
        /* Our segments are written by the previous rank. */
        if (strcmp(pv->host, me.host) != 0) {
            st = dfccl_error(DFCCL_ERR_UNSUPPORTED, "dfcclGroupCreate(%s): rank %d is on host "
                             "%s and rank %d on %s; groups across hosts need the net "
                             "transport, which this build does not provide", g->name,
                             (rank + nranks - 1) % nranks, pv->host, rank, me.host);
            goto err;
        }
#ifdef HAVE_CUDART
        if (ctx->backend == DFCCL_BACKEND_CUDA && ctx->cfg.transport != DFCCL_TRANSPORT_SHM &&
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
        st = dfccl_pool_connect(g, all[0].dir, sizeof(all[0]));
        if (st != DFCCL_OK) {
            goto err;
        }
        /* Everyone attached its neighbour's directory: the names can go. */
        if (allgather(&barrier, bar, sizeof(barrier), allgather_arg) != 0) {
            st = dfccl_error(DFCCL_ERR_BOOTSTRAP, "dfcclGroupCreate(%s): the out-of-band "
                             "allgather failed", g->name);
            goto err;
        }
        dfccl_pool_unlink_dir(g);
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
        dfccl_pool_destroy(g);
        free(g->pids);
    }
    free(g);
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
    dfccl_pool_destroy(g);
    free(g->pids);
    free(g);
    return DFCCL_OK;
}
