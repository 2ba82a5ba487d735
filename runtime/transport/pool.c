/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Connector pool of a group. Each registered collective takes its connector
 * regions (one per channel, owned by the receiving rank) from the group's
 * segments, so collectives never share connectors and may run in any order.
 * Segments are created on demand; a peer's segment is mapped once and
 * cached.
 */
#include "../dfccl_int.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DFCCL_POOL_SEG_BYTES (8ul << 20)
#define DFCCL_POOL_ALIGN     4096ul

dfccl_status_t dfccl_pool_alloc(struct dfccl_group *g, size_t bytes, void **local_p,
                                void **dev_p, dfccl_conn_desc_t *desc_p)
{
    dfccl_pool_t *pool = &g->pool;
    dfccl_seg_t *seg   = NULL, *grown;
    size_t need        = (bytes + DFCCL_POOL_ALIGN - 1) & ~(DFCCL_POOL_ALIGN - 1);
    char name[48];

    for (int i = 0; i < pool->nown; i++) {
        if (pool->own[i].bytes - pool->own[i].used >= need) {
            seg = &pool->own[i];
            break;
        }
    }
    if (seg == NULL) {
        size_t sz = need > DFCCL_POOL_SEG_BYTES ? need : DFCCL_POOL_SEG_BYTES;
        grown     = realloc(pool->own, (pool->nown + 1) * sizeof(*grown));
        if (grown == NULL) {
            return dfccl_error(DFCCL_ERR_NO_MEMORY, "connector pool: out of memory");
        }
        pool->own = grown;
        seg       = &pool->own[pool->nown];
        snprintf(name, sizeof(name), "/dfccl-%d-%llx-g%d-s%d", (int)getpid(),
                 (unsigned long long)(g->ctx->uid & 0xffffffffull), g->id, pool->nown);
        DFCCL_CHECK(dfccl_shm_create(seg, name, sz));
        seg->index     = (uint32_t)pool->nown;
        seg->transport = DFCCL_TRANSPORT_SHM;
        pool->nown++;
    }
    memset(desc_p, 0, sizeof(*desc_p));
    desc_p->transport = seg->transport;
    desc_p->seg       = seg->index;
    desc_p->off       = seg->used;
    desc_p->seg_bytes = seg->bytes;
    memcpy(desc_p->name, seg->name, sizeof(desc_p->name));
    memset((char *)seg->base + seg->used, 0, need);
    *local_p = (char *)seg->base + seg->used;
    *dev_p   = (char *)seg->dev_base + seg->used;
    seg->used += need;
    return DFCCL_OK;
}

dfccl_status_t dfccl_pool_map(struct dfccl_group *g, int peer, const dfccl_conn_desc_t *desc,
                              void **dev_p)
{
    dfccl_pool_t *pool = &g->pool;
    dfccl_seg_t *seg   = NULL, *grown;

    for (int i = 0; i < pool->nmapped; i++) {
        if (pool->mapped[i].peer == peer && pool->mapped[i].index == desc->seg) {
            seg = &pool->mapped[i];
            break;
        }
    }
    if (seg == NULL) {
        grown = realloc(pool->mapped, (pool->nmapped + 1) * sizeof(*grown));
        if (grown == NULL) {
            return dfccl_error(DFCCL_ERR_NO_MEMORY, "connector pool: out of memory");
        }
        pool->mapped = grown;
        seg          = &pool->mapped[pool->nmapped];
        DFCCL_CHECK(dfccl_shm_attach(seg, desc->name, desc->seg_bytes));
        seg->peer      = peer;
        seg->index     = desc->seg;
        seg->transport = desc->transport;
        pool->nmapped++;
    }
    *dev_p = (char *)seg->dev_base + desc->off;
    return DFCCL_OK;
}

void dfccl_pool_unlink_all(struct dfccl_group *g)
{
    for (int i = 0; i < g->pool.nown; i++) {
        dfccl_shm_unlink(&g->pool.own[i]);
    }
}

void dfccl_pool_destroy(struct dfccl_group *g)
{
    for (int i = 0; i < g->pool.nmapped; i++) {
        dfccl_shm_release(&g->pool.mapped[i]);
    }
    for (int i = 0; i < g->pool.nown; i++) {
        dfccl_shm_release(&g->pool.own[i]);
    }
    free(g->pool.mapped);
    free(g->pool.own);
    memset(&g->pool, 0, sizeof(g->pool));
}
