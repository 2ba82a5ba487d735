/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The algorithms as modules, and the one function that chooses among them.
 * Each module (ring.c, oneshot.c, twoshot.c, mesh.c, msccl.c, tree.c) says whether it can run a
 * collective on a group and on how many channels, lays out its connectors,
 * and estimates its time in alpha-beta terms. The choice:
 *
 *   1. DFCCL_ALGO names a module: it runs the collective if it can; if it
 *      cannot, the default runs it and a warning says so, once per group;
 *   2. otherwise the default policy: an MSCCL program of
 *      DFCCL_MSCCL_XML_FILES that serves the collective at its size; then
 *      the measured thresholds, one shot for
 *      the smallest allreduces, allgathers and reduce-scatters on groups
 *      whose ranks all write to each other, two shot for allreduces up to
 *      DFCCL_TWOSHOT_BYTES, one shot for alltoalls of up to
 *      DFCCL_ONESHOT_GATHER_BYTES a pair and the mesh for larger ones and
 *      for alltoallv on such groups, and the ring for everything else.
 *
 * Every input is the same on every rank (registration arguments, the
 * group's shape, [group] settings), so every rank chooses the same.
 */
#include "../dfccl_int.h"

#include <string.h>

static const dfccl_algo_t *const dfccl_algos[] = {&dfccl_algo_ring,    &dfccl_algo_oneshot,
                                                  &dfccl_algo_twoshot, &dfccl_algo_mesh,
                                                  &dfccl_algo_msccl,   &dfccl_algo_tree,
                                                  &dfccl_algo_ctree};

const dfccl_algo_t *dfccl_algo_by_id(uint32_t id)
{
    for (size_t i = 0; i < sizeof(dfccl_algos) / sizeof(dfccl_algos[0]); i++) {
        if (dfccl_algos[i]->id == id) {
            return dfccl_algos[i];
        }
    }
    return &dfccl_algo_ring;
}

/* The default policy: the thresholds of the configuration. */
static const dfccl_algo_t *dfccl_algo_default(const dfccl_config_t *cfg,
                                              const struct dfccl_group *g, int kind,
                                              size_t count, int dtype, int op, int *nch_p)
{
    const size_t bytes = count * dfccl_dtype_bytes(dtype);
    const size_t one = kind == DFCCL_COLL_ALLREDUCE ? cfg->oneshot_bytes : cfg->oneshot_gather_bytes;

    /* a program the user gave for this size goes first */
    if (op != DFCCL_AVG && dfccl_algo_msccl.plan(cfg, g, kind, count, dtype, nch_p)) {
        return &dfccl_algo_msccl;
    }

    if (kind == DFCCL_COLL_ALLTOALL && bytes <= cfg->oneshot_gather_bytes &&
        dfccl_algo_oneshot.plan(cfg, g, kind, count, dtype, nch_p)) {
        return &dfccl_algo_oneshot;
    }
    if (dfccl_algo_mesh.plan(cfg, g, kind, count, dtype, nch_p)) {
        return &dfccl_algo_mesh;
    }
    if (bytes <= one && dfccl_algo_oneshot.plan(cfg, g, kind, count, dtype, nch_p)) {
        return &dfccl_algo_oneshot;
    }
    if (bytes > one && bytes <= cfg->twoshot_bytes &&
        dfccl_algo_twoshot.plan(cfg, g, kind, count, dtype, nch_p)) {
        return &dfccl_algo_twoshot;
    }
    dfccl_algo_ring.plan(cfg, g, kind, count, dtype, nch_p);
    return &dfccl_algo_ring;
}

const dfccl_algo_t *dfccl_algo_select(const dfccl_config_t *cfg, struct dfccl_group *g,
                                      int kind, size_t count, int dtype, int op, int *nch_p)
{
    const dfccl_algo_t *forced = NULL, *a;

    if (cfg->algo != DFCCL_ALGO_AUTO) {
        forced = dfccl_algo_by_id((uint32_t)cfg->algo - 1);
        /* an MSCCL program only sums (and the like): AVG divides too */
        if ((forced != &dfccl_algo_msccl || op != DFCCL_AVG) &&
            forced->plan(cfg, g, kind, count, dtype, nch_p)) {
            return forced;
        }
    }
    a = dfccl_algo_default(cfg, g, kind, count, dtype, op, nch_p);
    if (forced != NULL && !g->algo_warned) {
        g->algo_warned = 1;
        dfccl_log_msg(0, __FILE__, __LINE__,
                      "group %s: %s, asked for (DFCCL_ALGO or dfcclRegister), cannot run the "
                      "%s of %zu %s (%s); %s runs it, and the group's other collectives that %s "
                      "cannot run, without another word",
                      g->name, forced->name, dfccl_coll_name(kind), count,
                      dfccl_dtype_name(dtype), forced->cannot, a->name, forced->name);
    }
    return a;
}
