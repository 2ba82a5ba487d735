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
 * segment in its directory (shared memory, mapped by the group's ranks on
 * its host at group creation); the ranks that write into it (its ring
 * predecessor, or every peer in groups whose collectives may write to
 * every peer) attach it at their next health check, mark it attached, and
 * the owner then unlinks the segment's name. Segments are shm (host memory,
 * registered with the GPU on the CUDA backend) or device memory shared
 * through CUDA IPC (p2p). The directory also carries what the group's
 * other ranks need to fail with this one or to report where it waits
 * (dfccl_dir_t).
 */
#include "../dfccl_int.h"

#include <errno.h>
#include <signal.h>
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
    pool->peer_dir = pool->dirs[g->ring_next].base; /* NULL: other host */
    pool->eager    = calloc((size_t)g->nranks, sizeof(*pool->eager));
    if (pool->eager == NULL) {
        return dfccl_error(DFCCL_ERR_NO_MEMORY, "group %s: out of memory", g->name);
    }
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

/* Mapping rank r's segment failed with `st` (its message is the thread's
 * last error): say why in the user's terms. Its name goes when r destroys
 * the group or its context, or exits; the directory we keep mapped says
 * which, and whether the process lives. */
static dfccl_status_t dfccl_pool_attach_failed(struct dfccl_group *g, const dfccl_dir_t *dir,
                                               int r, dfccl_status_t st)
{
    int pid   = g->pids[r];
    int alive = !(kill(pid, 0) != 0 && errno == ESRCH);
    char why[512];

    snprintf(why, sizeof(why), "%s", dfcclGetLastErrorMessage());
    if (__atomic_load_n(&dir->closed, __ATOMIC_ACQUIRE)) {
        return dfccl_error(DFCCL_ERR_ABORTED, "group %s: cannot map the connectors of rank %d "
                           "(process %d): that rank destroyed the group or its rank context "
                           "before this rank got to them%s; it may have finished, or failed "
                           "(its own message says why). Every rank must run the group's "
                           "collectives before destroying it (%s)", g->name, r, pid,
                           alive ? " (the process is alive)" : " and has exited since", why);
    }
    if (!alive) {
        return dfccl_error(DFCCL_ERR_ABORTED, "group %s: cannot map the connectors of rank %d: "
                           "its process %d has exited (%s)", g->name, r, pid, why);
    }
    return dfccl_error(st, "group %s: cannot map the connectors of rank %d (process %d, "
                       "alive): %s", g->name, r, pid, why);
}

int dfccl_pool_resolve_rank(struct dfccl_group *g, int rank, uint32_t segi, uint64_t off,
                            void **host_p, void **dev_p)
{
    dfccl_pool_t *pool = &g->pool;
    dfccl_seg_t *seg   = NULL, *grown;
    dfccl_dir_t *dir   = rank == g->ring_next ? pool->peer_dir
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
        dfccl_error_quiet(1);
        st = dfccl_seg_attach(g, seg, &e->desc);
        dfccl_error_quiet(0);
        if (st != DFCCL_OK) {
            return dfccl_pool_attach_failed(g, dir, rank, st);
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
    return dfccl_pool_resolve_rank(g, g->ring_next, segi, off, host_p, dev_p);
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

/*
 * Map the shm segments that rank r published since the last call, as the
 * first run that writes into them would: then the owner may unlink their
 * names at once (dfccl_pool_reap), instead of keeping them until a run of
 * every collective that lives in them has come here. A segment that cannot
 * be mapped now is tried again by the run that needs it, which reports why.
 */
static void dfccl_pool_attach_new(struct dfccl_group *g, int r)
{
    dfccl_pool_t *pool = &g->pool;
    const dfccl_dir_t *d = dfccl_pool_dir_of(g, r);

    while (d != NULL && pool->eager != NULL && pool->eager[r] < DFCCL_DIR_MAX_SEGS &&
           __atomic_load_n(&d->e[pool->eager[r]].ready, __ATOMIC_ACQUIRE)) {
        uint32_t segi = (uint32_t)pool->eager[r];
        void *host, *dev;

        int rc = 1;

        if (d->e[segi].desc.transport == DFCCL_TRANSPORT_SHM) {
            dfccl_error_quiet(1);
            rc = dfccl_pool_resolve_rank(g, r, segi, 0, &host, &dev);
            dfccl_error_quiet(0);
        }
        if (rc < 0) {
            return;
        }
        pool->eager[r]++;
    }
}

void dfccl_pool_reap(struct dfccl_group *g)
{
    dfccl_pool_t *pool = &g->pool;
    int n = g->nranks, next = g->ring_next;

    if (n > 1 && pool->dir != NULL) {
        /* the ranks whose segments we write into: the next one, and in
         * groups whose collectives may write to every peer, all of them */
        for (int r = 0; r < n; r++) {
            int writes = r == next ? !g->next_net : pool->attachers > 1;
            if (r != g->rank && g->same_host[r] && writes) {
                dfccl_pool_attach_new(g, r);
            }
        }
    }
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
    free(pool->eager);
    if (pool->dir != NULL) {
        /* peers that still map the directory learn that this rank is gone
         * from the group, rather than finding its segments' names gone */
        __atomic_store_n(&pool->dir->closed, 1, __ATOMIC_RELEASE);
        dfccl_shm_release(&pool->dir_seg);
    }
    free(pool->mapped);
    free(pool->own);
    free(pool->free);
    memset(pool, 0, sizeof(*pool));
}

/*
 * Directory records: a rank publishes what its peers need to fail with it
 * or to say where it is; they read them from the mapping of its directory
 * they keep, which stays valid after the owner unmapped it or exited.
 */
void dfccl_dir_publish_reg(struct dfccl_group *g, const uint64_t sig[8])
{
    dfccl_dir_reg_t *r;

    if (g->pool.dir == NULL) {
        return;
    }
    r = &g->pool.dir->regs[sig[6] % DFCCL_DIR_RUNS];
    __atomic_store_n(&r->reg, 0, __ATOMIC_RELEASE);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&r->done, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&r->where_run, 0, __ATOMIC_RELAXED);
    for (int i = 0; i < 8; i++) {
        __atomic_store_n(&r->sig[i], sig[i], __ATOMIC_RELAXED);
    }
    __atomic_store_n(&r->reg, sig[6] + 1, __ATOMIC_RELEASE);
}

void dfccl_dir_publish_done(struct dfccl_group *g, uint64_t reg, uint64_t run)
{
    if (g->pool.dir != NULL && g->pool.dir->regs[reg % DFCCL_DIR_RUNS].reg == reg + 1) {
        __atomic_store_n(&g->pool.dir->regs[reg % DFCCL_DIR_RUNS].done, run, __ATOMIC_RELEASE);
    }
}

void dfccl_dir_publish_where(struct dfccl_group *g, uint64_t reg, const dfccl_dir_reg_t *w)
{
    dfccl_dir_reg_t *r;
    uint64_t seq;

    if (g->pool.dir == NULL || g->pool.dir->regs[reg % DFCCL_DIR_RUNS].reg != reg + 1) {
        return;
    }
    r   = &g->pool.dir->regs[reg % DFCCL_DIR_RUNS];
    seq = __atomic_load_n(&r->where_seq, __ATOMIC_RELAXED);
    __atomic_store_n(&r->where_seq, seq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&r->where_run, w->where_run, __ATOMIC_RELAXED);
    __atomic_store_n(&r->where_ns, w->where_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&r->where_flags, w->where_flags, __ATOMIC_RELAXED);
    __atomic_store_n(&r->where_peer, w->where_peer, __ATOMIC_RELAXED);
    __atomic_store_n(&r->where_wait, w->where_wait, __ATOMIC_RELAXED);
    __atomic_store_n(&r->where_ch, w->where_ch, __ATOMIC_RELAXED);
    __atomic_store_n(&r->where_loop, w->where_loop, __ATOMIC_RELAXED);
    __atomic_store_n(&r->where_step, w->where_step, __ATOMIC_RELAXED);
    __atomic_store_n(&r->where_seq, seq + 2, __ATOMIC_RELEASE);
}

/* Write record `f` as number i of its kind (seqlock). */
static void dfccl_dir_write_fail(dfccl_dir_fail_t *f, uint64_t i, int kind, uint64_t reg,
                                 uint64_t run, dfccl_status_t status, int origin,
                                 const char *msg)
{
    __atomic_store_n(&f->seq, 2 * i + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&f->kind, (uint64_t)kind, __ATOMIC_RELAXED);
    __atomic_store_n(&f->reg, reg, __ATOMIC_RELAXED);
    __atomic_store_n(&f->run, run, __ATOMIC_RELAXED);
    __atomic_store_n(&f->status, (int64_t)status, __ATOMIC_RELAXED);
    __atomic_store_n(&f->origin, (int64_t)origin, __ATOMIC_RELAXED);
    for (size_t k = 0; k < sizeof(f->msg); k++) {
        char ch = msg != NULL && k + 1 < sizeof(f->msg) ? msg[k] : '\0';
        __atomic_store_n(&f->msg[k], ch, __ATOMIC_RELAXED);
        if (ch == '\0') {
            break;
        }
    }
    __atomic_store_n(&f->seq, 2 * i + 2, __ATOMIC_RELEASE);
}

static void dfccl_dir_publish(struct dfccl_group *g, int kind, uint64_t reg, uint64_t run,
                              dfccl_status_t status, int origin, const char *msg)
{
    dfccl_dir_t *d = g->pool.dir;
    uint64_t i;

    if (d == NULL) {
        return;
    }
    if (kind != DFCCL_FAIL_RUN) {
        dfccl_dir_fail_t *f = kind == DFCCL_FAIL_FROM ? &d->mismatch : &d->aborted;
        if (__atomic_load_n(&f->seq, __ATOMIC_RELAXED) == 0) {
            dfccl_dir_write_fail(f, 0, kind, reg, run, status, origin, msg);
        }
        return;
    }
    i = __atomic_load_n(&d->nfails, __ATOMIC_RELAXED);
    dfccl_dir_write_fail(&d->fails[i % DFCCL_DIR_FAILS], i, kind, reg, run, status, origin,
                         msg);
    __atomic_store_n(&d->nfails, i + 1, __ATOMIC_RELEASE);
}

void dfccl_dir_publish_fail(struct dfccl_group *g, int kind, uint64_t reg, uint64_t run,
                            dfccl_status_t status, const char *msg)
{
    dfccl_dir_publish(g, kind, reg, run, status, g->rank, msg);
}

void dfccl_dir_publish_relayed(struct dfccl_group *g, const dfccl_dir_fail_t *f)
{
    dfccl_dir_publish(g, (int)f->kind, f->reg, f->run, (dfccl_status_t)f->status,
                      (int)f->origin, f->msg);
}

/* Read record `f`, number i of its kind: 1 and *out, or 0 (seqlock). */
static int dfccl_dir_copy_fail(const dfccl_dir_fail_t *f, uint64_t i, dfccl_dir_fail_t *out)
{
    if (__atomic_load_n(&f->seq, __ATOMIC_ACQUIRE) != 2 * i + 2) {
        return 0;
    }
    out->kind   = __atomic_load_n(&f->kind, __ATOMIC_RELAXED);
    out->reg    = __atomic_load_n(&f->reg, __ATOMIC_RELAXED);
    out->run    = __atomic_load_n(&f->run, __ATOMIC_RELAXED);
    out->status = __atomic_load_n(&f->status, __ATOMIC_RELAXED);
    out->origin = __atomic_load_n(&f->origin, __ATOMIC_RELAXED);
    for (size_t k = 0; k < sizeof(out->msg); k++) {
        out->msg[k] = __atomic_load_n(&f->msg[k], __ATOMIC_RELAXED);
    }
    out->msg[sizeof(out->msg) - 1] = '\0';
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n(&f->seq, __ATOMIC_RELAXED) == 2 * i + 2;
}

int dfccl_dir_read_fail(const dfccl_dir_t *d, uint64_t i, dfccl_dir_fail_t *out)
{
    return dfccl_dir_copy_fail(&d->fails[i % DFCCL_DIR_FAILS], i, out);
}

int dfccl_dir_read_note(const dfccl_dir_t *d, int kind, dfccl_dir_fail_t *out)
{
    return dfccl_dir_copy_fail(kind == DFCCL_FAIL_FROM ? &d->mismatch : &d->aborted, 0, out);
}

int dfccl_dir_read_reg(const dfccl_dir_t *d, uint64_t reg, dfccl_dir_reg_t *out)
{
    const dfccl_dir_reg_t *r = &d->regs[reg % DFCCL_DIR_RUNS];

    memset(out, 0, sizeof(*out));
    if (__atomic_load_n(&r->reg, __ATOMIC_ACQUIRE) != reg + 1) {
        return 0;
    }
    out->reg  = reg + 1;
    out->done = __atomic_load_n(&r->done, __ATOMIC_ACQUIRE);
    for (int i = 0; i < 8; i++) {
        out->sig[i] = __atomic_load_n(&r->sig[i], __ATOMIC_RELAXED);
    }
    for (int tries = 0; tries < 16; tries++) {
        uint64_t s0 = __atomic_load_n(&r->where_seq, __ATOMIC_ACQUIRE);
        if (s0 & 1) {
            continue;
        }
        out->where_run   = __atomic_load_n(&r->where_run, __ATOMIC_RELAXED);
        out->where_ns    = __atomic_load_n(&r->where_ns, __ATOMIC_RELAXED);
        out->where_flags = __atomic_load_n(&r->where_flags, __ATOMIC_RELAXED);
        out->where_peer  = __atomic_load_n(&r->where_peer, __ATOMIC_RELAXED);
        out->where_wait  = __atomic_load_n(&r->where_wait, __ATOMIC_RELAXED);
        out->where_ch    = __atomic_load_n(&r->where_ch, __ATOMIC_RELAXED);
        out->where_loop  = __atomic_load_n(&r->where_loop, __ATOMIC_RELAXED);
        out->where_step  = __atomic_load_n(&r->where_step, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&r->where_seq, __ATOMIC_RELAXED) == s0) {
            break;
        }
        out->where_run = 0;
    }
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    /* the slot was taken by a later registration while we read */
    return __atomic_load_n(&r->reg, __ATOMIC_RELAXED) == reg + 1;
}

