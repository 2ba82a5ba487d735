/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Connector pool of a group. Each registered collective takes its receive
 * connectors (one region per channel) from the group's segments, so
 * collectives never share connectors and may run in any order.
 *
 * Registration needs no communication: every rank registers a group's
 * collectives in the same order with the same sizes, so the bump allocator
 * puts a collective's connector at the same (segment, offset) on every rank.
 * Regions of deregistered collectives go to a free list kept sorted by
 * address and coalesced, and allocation is first fit: the result depends
 * only on which collectives are free, not on the order they were freed, so
 * placement stays identical on every rank. A rank publishes each new
 * segment in its directory (shared memory, mapped
 * by its ring predecessor at group creation); the predecessor attaches the
 * segment when it first needs it, marks it attached, and the owner then
 * unlinks the segment's name. Segments are shm (host memory, registered
 * with the GPU on the CUDA backend) or device memory shared through CUDA IPC
 * (p2p).
 */
#include "../dfccl_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define DFCCL_POOL_ALIGN 4096ul

/* A segment was mapped into the device's address space (ctx->lock held):
 * runs are handed only to a daemon launched after this (see
 * dfccl_ctx_drain_pending). */
static void dfccl_seg_mapped(struct dfccl_rank_ctx *ctx, const dfccl_seg_t *seg)
{
    if (seg->transport == DFCCL_TRANSPORT_P2P || ctx->be->host_register != NULL) {
        ctx->map_epoch = ctx->launches;
    }
}

static dfccl_status_t dfccl_seg_create(struct dfccl_group *g, dfccl_seg_t *seg, uint32_t index,
                                       size_t bytes)
{
    struct dfccl_rank_ctx *ctx = g->ctx;
    char name[64];

    memset(seg, 0, sizeof(*seg));
#ifdef HAVE_CUDART
    if (g->pool.transport == DFCCL_TRANSPORT_P2P) {
        DFCCL_CHECK(dfccl_p2p_create(ctx, seg, bytes));
        seg->owner     = 1;
        seg->index     = index;
        seg->transport = DFCCL_TRANSPORT_P2P;
        dfccl_seg_mapped(ctx, seg);
        return DFCCL_OK;
    }
#endif
    dfccl_shm_name(name, sizeof(name), "%x-g%d-s%u", (unsigned)(ctx->uid & 0xffffffffu),
                   g->id, index);
    DFCCL_CHECK(dfccl_shm_create(seg, name, bytes));
    if (ctx->be->host_register != NULL) {
        dfccl_status_t st = ctx->be->host_register(ctx, seg->base, bytes, &seg->dev_base);
        if (st != DFCCL_OK) {
            dfccl_shm_release(seg);
            return st;
        }
    }
    seg->index     = index;
    seg->transport = DFCCL_TRANSPORT_SHM;
    dfccl_seg_mapped(ctx, seg);
    return DFCCL_OK;
}

static dfccl_status_t dfccl_seg_attach(struct dfccl_group *g, dfccl_seg_t *seg,
                                       const dfccl_conn_desc_t *desc)
{
    struct dfccl_rank_ctx *ctx = g->ctx;

#ifdef HAVE_CUDART
    if (desc->transport == DFCCL_TRANSPORT_P2P) {
        DFCCL_CHECK(dfccl_p2p_attach(ctx, seg, desc));
        seg->index     = desc->seg;
        seg->transport = DFCCL_TRANSPORT_P2P;
        dfccl_seg_mapped(ctx, seg);
        return DFCCL_OK;
    }
#endif
    if (desc->transport != DFCCL_TRANSPORT_SHM) {
        return dfccl_error(DFCCL_ERR_TRANSPORT, "group %s: the next rank's connectors use "
                           "transport %u, which this build does not support; build every "
                           "rank with the same options", g->name, desc->transport);
    }
    DFCCL_CHECK(dfccl_shm_attach(seg, desc->name, desc->seg_bytes));
    if (ctx->be->host_register != NULL) {
        dfccl_status_t st = ctx->be->host_register(ctx, seg->base, seg->bytes, &seg->dev_base);
        if (st != DFCCL_OK) {
            dfccl_shm_release(seg);
            return st;
        }
    }
    seg->index     = desc->seg;
    seg->transport = DFCCL_TRANSPORT_SHM;
    dfccl_seg_mapped(ctx, seg);
    return DFCCL_OK;
}

static void dfccl_seg_release(struct dfccl_group *g, dfccl_seg_t *seg)
{
#ifdef HAVE_CUDART
    if (seg->transport == DFCCL_TRANSPORT_P2P) {
        dfccl_p2p_release(g->ctx, seg);
        return;
    }
#endif
    if (g->ctx->be->host_unregister != NULL && seg->base != NULL) {
        g->ctx->be->host_unregister(g->ctx, seg->base);
    }
    dfccl_shm_release(seg);
}

dfccl_status_t dfccl_pool_init(struct dfccl_group *g, char *dir_name, size_t len)
{
    dfccl_pool_t *pool = &g->pool;

    memset(pool, 0, sizeof(*pool));
    pool->transport = DFCCL_TRANSPORT_SHM;
    pool->seg_bytes = g->ctx->backend == DFCCL_BACKEND_HOST ? (8ul << 20) : (64ul << 20);
    dfccl_shm_name(dir_name, len, "%x-g%d-dir", (unsigned)(g->ctx->uid & 0xffffffffu), g->id);
    DFCCL_CHECK(dfccl_shm_create(&pool->dir_seg, dir_name, sizeof(dfccl_dir_t)));
    pool->dir        = pool->dir_seg.base;
    pool->dir->magic = DFCCL_DIR_MAGIC;
    pool->dir->pid   = (uint64_t)getpid();
    return DFCCL_OK;
}

dfccl_status_t dfccl_pool_connect(struct dfccl_group *g, const char *names, size_t stride)
{
    dfccl_pool_t *pool = &g->pool;

    pool->dirs = calloc((size_t)g->nranks, sizeof(*pool->dirs));
    if (pool->dirs == NULL) {
        return dfccl_error(DFCCL_ERR_NO_MEMORY, "group %s: out of memory", g->name);
    }
    for (int r = 0; r < g->nranks; r++) {
        const char *name = names + (size_t)r * stride;
        if (r == g->rank || !g->same_host[r]) {
            continue; /* ours is pool->dir; another host's cannot be mapped */
        }
        DFCCL_CHECK(dfccl_shm_attach(&pool->dirs[r], name, sizeof(dfccl_dir_t)));
        pool->ndirs = r + 1;
        if (((dfccl_dir_t *)pool->dirs[r].base)->magic != DFCCL_DIR_MAGIC) {
            return dfccl_error(DFCCL_ERR_BOOTSTRAP, "group %s: rank %d's directory %s is not "
                               "a dfccl directory", g->name, r, name);
        }
    }
    pool->ndirs    = g->nranks;
    pool->peer_dir = pool->dirs[(g->rank + 1) % g->nranks].base; /* NULL: other host */
    return DFCCL_OK;
}

/* Rank r's directory (ours included), or NULL. */
const dfccl_dir_t *dfccl_pool_dir_of(struct dfccl_group *g, int r)
{
    if (r == g->rank) {
        return g->pool.dir;
    }
    return r < g->pool.ndirs ? g->pool.dirs[r].base : NULL;
}

void dfccl_pool_unlink_dir(struct dfccl_group *g)
{
    dfccl_shm_unlink(&g->pool.dir_seg);
}

dfccl_status_t dfccl_pool_alloc(struct dfccl_group *g, size_t bytes, void **host_p,
                                void **dev_p, uint32_t *seg_p, uint64_t *off_p)
{
    dfccl_pool_t *pool = &g->pool;
    size_t need        = (bytes + DFCCL_POOL_ALIGN - 1) & ~(DFCCL_POOL_ALIGN - 1);
    dfccl_seg_t *seg   = NULL, *grown;
    dfccl_dir_entry_t *e;

    /* First fit over the free list, then over the segments' tails: the
     * same choice on every rank. */
    for (int i = 0; i < pool->nfree; i++) {
        dfccl_pool_hole_t *h = &pool->free[i];
        if (h->bytes >= need) {
            dfccl_seg_t *fs = &pool->own[h->seg];
            *seg_p  = h->seg;
            *off_p  = h->off;
            *host_p = fs->base != NULL ? (char *)fs->base + h->off : NULL;
            *dev_p  = (char *)fs->dev_base + h->off;
            h->off += need;
            h->bytes -= need;
            if (h->bytes == 0) {
                memmove(h, h + 1, (size_t)(pool->nfree - i - 1) * sizeof(*h));
                pool->nfree--;
            }
            return DFCCL_OK;
        }
    }
    for (int i = 0; i < pool->nown; i++) {
        if (pool->own[i].bytes - pool->own[i].used >= need) {
            seg = &pool->own[i];
            break;
        }
    }
    if (seg == NULL) {
        size_t sz = need > pool->seg_bytes ? need : pool->seg_bytes;
        if (pool->nown >= DFCCL_DIR_MAX_SEGS) {
            return dfccl_error(DFCCL_ERR_NO_MEMORY, "group %s: connector pool full (%d "
                               "segments); deregister collectives or create another group",
                               g->name, pool->nown);
        }
        grown = realloc(pool->own, (size_t)(pool->nown + 1) * sizeof(*grown));
        if (grown == NULL) {
            return dfccl_error(DFCCL_ERR_NO_MEMORY, "connector pool: out of memory");
        }
        pool->own = grown;
        seg       = &pool->own[pool->nown];
        DFCCL_CHECK(dfccl_seg_create(g, seg, (uint32_t)pool->nown, sz));
        if (g->prev_net) {
            dfccl_shm_unlink(seg); /* fed through net: nobody attaches it */
        }
        /* publish it for the ring predecessor */
        e = &pool->dir->e[pool->nown];
        memset(&e->desc, 0, sizeof(e->desc));
        e->desc.transport = seg->transport;
        e->desc.seg       = seg->index;
        e->desc.seg_bytes = seg->bytes;
        memcpy(e->desc.name, seg->name, sizeof(e->desc.name));
        memcpy(e->desc.ipc, seg->ipc, sizeof(e->desc.ipc));
        __atomic_store_n(&e->ready, 1, __ATOMIC_RELEASE);
        pool->nown++;
    }
    *seg_p  = seg->index;
    *off_p  = seg->used;
    *host_p = seg->base != NULL ? (char *)seg->base + seg->used : NULL;
    *dev_p  = (char *)seg->dev_base + seg->used;
    seg->used += need;
    return DFCCL_OK;
}

dfccl_status_t dfccl_pool_free(struct dfccl_group *g, uint32_t segi, uint64_t off,
                               size_t bytes)
{
    dfccl_pool_t *pool = &g->pool;
    size_t need        = (bytes + DFCCL_POOL_ALIGN - 1) & ~(DFCCL_POOL_ALIGN - 1);
    dfccl_pool_hole_t *grown;
    int i;

    grown = realloc(pool->free, (size_t)(pool->nfree + 1) * sizeof(*grown));
    if (grown == NULL) {
        return dfccl_error(DFCCL_ERR_NO_MEMORY, "connector pool: out of memory");
    }
    pool->free = grown;
    for (i = 0; i < pool->nfree; i++) {
        if (pool->free[i].seg > segi || (pool->free[i].seg == segi && pool->free[i].off > off)) {
            break;
        }
    }
    memmove(&pool->free[i + 1], &pool->free[i], (size_t)(pool->nfree - i) * sizeof(*grown));
    pool->free[i].seg   = segi;
    pool->free[i].off   = off;
    pool->free[i].bytes = need;
    pool->nfree++;
    /* coalesce with the following and the preceding hole */
    if (i + 1 < pool->nfree && pool->free[i + 1].seg == segi &&
        pool->free[i].off + pool->free[i].bytes == pool->free[i + 1].off) {
        pool->free[i].bytes += pool->free[i + 1].bytes;
        memmove(&pool->free[i + 1], &pool->free[i + 2],
                (size_t)(pool->nfree - i - 2) * sizeof(*grown));
        pool->nfree--;
    }
    if (i > 0 && pool->free[i - 1].seg == segi &&
        pool->free[i - 1].off + pool->free[i - 1].bytes == pool->free[i].off) {
        pool->free[i - 1].bytes += pool->free[i].bytes;
        memmove(&pool->free[i], &pool->free[i + 1], (size_t)(pool->nfree - i - 1) * sizeof(*grown));
        pool->nfree--;
    }
    return DFCCL_OK;
}

int dfccl_pool_resolve_rank(struct dfccl_group *g, int rank, uint32_t segi, uint64_t off,
                            void **host_p, void **dev_p)
{
    dfccl_pool_t *pool = &g->pool;
    dfccl_seg_t *seg   = NULL, *grown;
    dfccl_dir_t *dir   = rank == (g->rank + 1) % g->nranks ? pool->peer_dir
                         : rank != g->rank && rank < pool->ndirs ? pool->dirs[rank].base
                                                                 : NULL;
    dfccl_dir_entry_t *e;
    dfccl_status_t st;

    for (int i = 0; i < pool->nmapped; i++) {
        if (pool->mapped[i].index == segi && pool->mapped[i].rank == rank) {
            seg = &pool->mapped[i];
            break;
        }
    }
    if (seg == NULL) {
        if (segi >= DFCCL_DIR_MAX_SEGS || dir == NULL) {
            return dfccl_error(DFCCL_ERR_INTERNAL, "group %s: no segment %u of rank %d",
                               g->name, segi, rank);
        }
        e = &dir->e[segi];
        if (!__atomic_load_n(&e->ready, __ATOMIC_ACQUIRE)) {
            return 0; /* that rank has not registered this far yet */
        }
        grown = realloc(pool->mapped, (size_t)(pool->nmapped + 1) * sizeof(*grown));
        if (grown == NULL) {
            return dfccl_error(DFCCL_ERR_NO_MEMORY, "connector pool: out of memory");
        }
        pool->mapped = grown;
        seg          = &pool->mapped[pool->nmapped];
        st           = dfccl_seg_attach(g, seg, &e->desc);
        if (st != DFCCL_OK) {
            return st;
        }
        seg->rank = rank;
        pool->nmapped++;
        __atomic_fetch_add(&e->attached, 1, __ATOMIC_ACQ_REL);
    }
    if (off >= seg->bytes) {
        return dfccl_error(DFCCL_ERR_MISMATCH, "group %s: rank %d's segment %u is smaller "
                           "than this rank's: ranks registered different collectives",
                           g->name, rank, segi);
    }
    *host_p = seg->base != NULL ? (char *)seg->base + off : NULL;
    *dev_p  = (char *)seg->dev_base + off;
    return 1;
}

int dfccl_pool_resolve(struct dfccl_group *g, uint32_t segi, uint64_t off, void **host_p,
                       void **dev_p)
{
    return dfccl_pool_resolve_rank(g, (g->rank + 1) % g->nranks, segi, off, host_p, dev_p);
}

/* Rank r died: unlink the shm segments it published and nobody attached
 * yet, so that nothing of it stays in /dev/shm. */
void dfccl_pool_unlink_dead(struct dfccl_group *g, int r)
{
    const dfccl_dir_t *d = dfccl_pool_dir_of(g, r);

    for (int i = 0; d != NULL && r != g->rank && i < DFCCL_DIR_MAX_SEGS; i++) {
        if (!__atomic_load_n(&d->e[i].ready, __ATOMIC_ACQUIRE)) {
            break;
        }
        if (d->e[i].desc.transport == DFCCL_TRANSPORT_SHM && d->e[i].desc.name[0] == '/') {
            shm_unlink(d->e[i].desc.name); /* may be gone already: fine */
        }
    }
}

void dfccl_pool_reap(struct dfccl_group *g)
{
    dfccl_pool_t *pool = &g->pool;

    for (int i = 0; i < pool->nown; i++) {
        if (pool->own[i].linked && __atomic_load_n(&pool->dir->e[i].attached, __ATOMIC_ACQUIRE) >=
                                      (uint64_t)(pool->attachers > 0 ? pool->attachers : 1)) {
            dfccl_shm_unlink(&pool->own[i]);
        }
    }
}

void dfccl_pool_destroy(struct dfccl_group *g)
{
    dfccl_pool_t *pool = &g->pool;

    for (int i = 0; i < pool->nmapped; i++) {
        dfccl_seg_release(g, &pool->mapped[i]);
    }
    for (int i = 0; i < pool->nown; i++) {
        dfccl_seg_release(g, &pool->own[i]);
    }
    for (int r = 0; pool->dirs != NULL && r < pool->ndirs; r++) {
        if (pool->dirs[r].base != NULL) {
            dfccl_shm_release(&pool->dirs[r]);
        }
    }
    free(pool->dirs);
    if (pool->dir != NULL) {
        dfccl_shm_release(&pool->dir_seg);
    }
    free(pool->mapped);
    free(pool->own);
    free(pool->free);
    memset(pool, 0, sizeof(*pool));
}
