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
 *      DFCCL_MSCCL_XML_FILES that serves the collective at its size (the
 *      user asked for it); then, by DFCCL_TUNER,
 *      - static: the measured thresholds, one shot for the smallest
 *        allreduces, allgathers and reduce-scatters on groups whose ranks
 *        all write to each other, two shot for allreduces up to
 *        DFCCL_TWOSHOT_BYTES, one shot for alltoalls of up to
 *        DFCCL_ONESHOT_GATHER_BYTES a pair and the mesh for larger ones
 *        and for alltoallv on such groups, and the ring for everything
 *        else;
 *      - model: every other module whose plan takes the collective, each
 *        asked for its time (dfccl_algo_predict_us), the least winning
 *        (ties: the earlier in dfccl_algos, the ring first), unless the
 *        static choice is predicted within DFCCL_TUNER_MARGIN percent of
 *        it. Its channels, slots and protocol are that module's plan and
 *        layout for the size.
 *
 * Every input is the same on every rank (registration arguments, the
 * group's shape, [group] settings, the group's agreed link model), so
 * every rank chooses the same.
 */
#include "../dfccl_int.h"

#include <math.h>
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

/* DFCCL_TUNER=static: the thresholds of the configuration. */
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

/* The bytes a module's cost_us takes: the buffer (allreduce, reduce,
 * broadcast), a rank's share (allgather, reduce-scatter), or all a rank
 * sends (alltoall: its count is per pair). */
static double dfccl_algo_cost_bytes(const struct dfccl_group *g, int kind, size_t count,
                                    int dtype)
{
    double bytes = (double)count * (double)dfccl_dtype_bytes(dtype);

    if (kind == DFCCL_COLL_ALLTOALL || kind == DFCCL_COLL_ALLTOALLV) {
        bytes *= g->nranks;
    }
    return bytes;
}

/* A module's estimate on a link of `alpha_us` and `beta_gbps` instead of
 * g's: at (1, infinite) its hops, at (0, 1 byte per us) the bytes it moves
 * over a link. */
static double dfccl_algo_probe(const struct dfccl_group *g, const dfccl_algo_t *a, int kind,
                               double bytes, double alpha_us, double beta_gbps)
{
    struct dfccl_group p = *g;

    p.alpha_us  = alpha_us;
    p.beta_gbps = beta_gbps;
    return a->cost_us(&p, kind, (size_t)bytes);
}

/*
 * The module's hops h and bytes b over a link (its cost_us, probed), on
 * its plan's k channels and its layout's slots of s bytes:
 *
 *     T = c + h alpha + (n_s - h)+ sigma + b' / min(beta, k beta_ch)
 *
 * c the group's fixed cost of a collective; b' = b, or 2b where the
 * layout carries LL (8 bytes of data in a 16-byte line); n_s = ceil(b /
 * (k s)), the slices a channel moves one after the other, each past the
 * first of a hop paying sigma (DFCCL_MODEL_SLICE_NS: a barrier, and in
 * SIMPLE a release that waits for the stores; alpha, measured on small
 * collectives, holds one slice a hop); beta_ch a channel's bandwidth
 * (DFCCL_MODEL_BLOCK_MBPS: one block copies only so fast). MSCCL
 * programs: c plus their estimate.
 */
double dfccl_algo_predict_us(const dfccl_config_t *cfg, const struct dfccl_group *g,
                             const dfccl_algo_t *a, int kind, size_t count, int dtype, int nch)
{
    const double bytes = dfccl_algo_cost_bytes(g, kind, count, dtype);
    double hops, moved, slices, bw, us;
    dfccl_coll_static_t st;

    if (g->nranks < 2 || a == &dfccl_algo_msccl) {
        return g->coll_us + a->cost_us(g, kind, (size_t)bytes);
    }
    memset(&st, 0, sizeof(st));
    st.kind      = (uint32_t)kind;
    st.dtype     = (uint32_t)dtype;
    st.count     = count;
    st.nranks    = (uint32_t)g->nranks;
    st.rank      = (uint32_t)g->rank;
    st.elem_size = (uint32_t)dfccl_dtype_bytes(dtype);
    a->layout(cfg, g, nch, &st);
    hops   = dfccl_algo_probe(g, a, kind, bytes, 1.0, 1e300);
    moved  = dfccl_algo_probe(g, a, kind, bytes, 0.0, 1e-3);
    slices = ceil(moved / nch / (st.slot_bytes > 0 ? st.slot_bytes : 1));
    bw     = (double)cfg->model_block_mbps * 1e-3 * nch; /* GB/s */
    bw     = bw < g->beta_gbps ? bw : g->beta_gbps;
    us     = hops * g->alpha_us + moved * (st.proto == DFCCL_K_PROTO_LL ? 2.0 : 1.0) / (bw * 1e3);
    if (slices > hops) {
        us += (slices - hops) * cfg->model_slice_ns * 1e-3;
    }
    return g->coll_us + us;
}

/* DFCCL_TUNER=model: the least predicted time among the modules that can
 * run the collective (an MSCCL program of the user's first), unless the
 * static thresholds' choice is predicted within DFCCL_TUNER_MARGIN percent
 * of it: the model's error is larger than many of the differences it
 * sees, and the thresholds were measured. */
static const dfccl_algo_t *dfccl_algo_model(const dfccl_config_t *cfg,
                                            const struct dfccl_group *g, int kind,
                                            size_t count, int dtype, int op, int *nch_p)
{
    const dfccl_algo_t *best = NULL, *fixed;
    double best_us           = 0;
    int best_nch             = 1, fixed_nch = 1;

    fixed = dfccl_algo_default(cfg, g, kind, count, dtype, op, &fixed_nch);
    if (fixed == &dfccl_algo_msccl) {
        *nch_p = fixed_nch;
        return fixed;
    }
    for (size_t i = 0; i < sizeof(dfccl_algos) / sizeof(dfccl_algos[0]); i++) {
        const dfccl_algo_t *a = dfccl_algos[i];
        double us;
        int nch = 1;

        if (a == &dfccl_algo_msccl || !a->plan(cfg, g, kind, count, dtype, &nch)) {
            continue;
        }
        us = dfccl_algo_predict_us(cfg, g, a, kind, count, dtype, nch);
        if (best == NULL || us < best_us) {
            best     = a;
            best_us  = us;
            best_nch = nch;
        }
    }
    if (best == NULL || (best != fixed &&
                         dfccl_algo_predict_us(cfg, g, fixed, kind, count, dtype, fixed_nch) <=
                             best_us * (1.0 + cfg->tuner_margin / 100.0))) {
        *nch_p = fixed_nch; /* (alltoallv off the mesh: registration refuses it) */
        return fixed;
    }
    *nch_p = best_nch;
    return best;
}

/* The default policy of DFCCL_TUNER. */
static const dfccl_algo_t *dfccl_algo_auto(const dfccl_config_t *cfg,
                                           const struct dfccl_group *g, int kind, size_t count,
                                           int dtype, int op, int *nch_p)
{
    return cfg->tuner == DFCCL_TUNER_MODEL
               ? dfccl_algo_model(cfg, g, kind, count, dtype, op, nch_p)
               : dfccl_algo_default(cfg, g, kind, count, dtype, op, nch_p);
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
    a = dfccl_algo_auto(cfg, g, kind, count, dtype, op, nch_p);
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

dfccl_status_t dfcclPredict(dfccl_group_t g, const dfccl_coll_desc_t *d, int tuner,
                            dfccl_algo_choice_t *algo_p, double *us_p)
{
    dfccl_config_t cfg;
    const dfccl_algo_t *a;
    int nch = 1, kind;

    if (g == NULL || d == NULL || (unsigned)d->kind >= (unsigned)DFCCL_KIND_COUNT ||
        (unsigned)d->type >= (unsigned)DFCCL_DATATYPE_COUNT ||
        (unsigned)d->algo > (unsigned)DFCCL_ALGO_CTREE || tuner < -1 ||
        tuner > DFCCL_TUNER_MODEL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclPredict: group or desc is NULL, or "
                           "desc's kind, type or algorithm, or the tuner %d, is out of range",
                           tuner);
    }
    cfg = g->ctx->cfg;
    if (tuner >= 0) {
        cfg.tuner = (dfccl_tuner_t)tuner;
    }
    kind = (int)d->kind;
    if (d->algo == DFCCL_ALGO_AUTO) {
        a = dfccl_algo_select(&cfg, g, kind, d->count, (int)d->type, (int)d->op, &nch);
    } else {
        a = dfccl_algo_by_id((uint32_t)d->algo - 1);
        if ((a == &dfccl_algo_msccl && d->op == DFCCL_AVG) ||
            !a->plan(&cfg, g, kind, d->count, (int)d->type, &nch)) {
            dfccl_set_last_error("dfcclPredict: the algorithm cannot run this collective");
            return DFCCL_ERR_UNSUPPORTED;
        }
    }
    if (algo_p != NULL) {
        *algo_p = (dfccl_algo_choice_t)(a->id + 1);
    }
    if (us_p != NULL) {
        *us_p = dfccl_algo_predict_us(&cfg, g, a, kind, d->count, (int)d->type, nch);
    }
    return DFCCL_OK;
}
