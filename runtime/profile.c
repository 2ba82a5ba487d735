/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A group's links in the alpha-beta model, measured at its creation
 * (DFCCL_PROFILE=create, through the context's group_profile hook) and on
 * request (dfcclGroupProfile). Everything is timed on the ring, forced, on
 * the group itself, the fastest of a few calls counting:
 *
 *   1. bandwidth, AdapCC's way: k allreduces of S / k bytes one after the
 *      other against one allreduce of S. Each call pays a fixed cost f
 *      (the collective's own, and its 2 (n - 1) hops) and its bytes over
 *      the link, 2 (n - 1) / n of the data:
 *
 *          T_k = k f + 2 (n - 1) / n * S / beta,   T_1 = f + 2 (n - 1) / n * S / beta
 *
 *      so f = (T_k - T_1) / (k - 1), and beta follows from T_1;
 *   2. a hop's latency: an allreduce of 8 bytes takes 2 (n - 1) hops, an
 *      allgather of 4 bytes a rank n - 1, both after the same fixed cost c
 *      of a collective: alpha = (T_ar - T_ag) / (n - 1), c = T_ag - (n - 1)
 *      alpha.
 *
 * The ring waits for its slowest link, so what is measured is the group's
 * slowest class of link (dfccl_group_t.link: the net where the group has
 * net edges); the other classes keep their nominal values. A measurement
 * that says nothing (noise above the signal) keeps the group's value.
 * Every rank then takes the worst of the ranks' answers (the largest alpha
 * and c and the smallest beta, through a MAX allreduce on the group), so
 * that the estimates, and every choice made from them, are the same on
 * every rank. On the host backend it all takes a few milliseconds.
 */
#include "dfccl_int.h"

#include <math.h>
#include <string.h>
#include <time.h>

/* Calls of each small collective: untimed, then timed (the fastest
 * counts: a host thread's wake-up or a peer's late start only adds). */
#define DFCCL_PROFILE_WARMUP 2
#define DFCCL_PROFILE_CALLS  10
/* AdapCC's k, and the rounds of k small calls against one large one */
#define DFCCL_PROFILE_SPLIT  4
#define DFCCL_PROFILE_ROUNDS 3

static double dfccl_profile_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Register the ring collective *d on g as it is, whatever DFCCL_STRAGGLER
 * says: the profile times plain runs. */
static dfccl_status_t dfccl_profile_register(dfccl_group_t g, const dfccl_coll_desc_t *d,
                                             int *id_p)
{
    return dfccl_coll_register(g, (int)d->kind, d->count, (int)d->type, (int)d->op, 0, 0, NULL,
                               DFCCL_ALGO_RING, id_p);
}

/* One call of registered collective `id` (an allreduce or an allgather in
 * place on `buf`) and its wait: its microseconds in *us_p. */
static dfccl_status_t dfccl_profile_call(dfccl_group_t g, int kind, int id, void *buf,
                                         size_t share, double *us_p)
{
    dfccl_rank_ctx_t ctx = g->ctx;
    const double t0      = dfccl_profile_now_us();
    dfccl_status_t st;

    if (kind == DFCCL_KIND_ALLGATHER) {
        st = dfcclRunAllGather((char *)buf + (size_t)g->rank * share, buf, id, NULL, NULL,
                               ctx);
    } else {
        st = dfcclRunAllReduce(buf, buf, id, NULL, NULL, ctx);
    }
    if (st == DFCCL_OK) {
        st = dfcclWait(id, -1, ctx);
    }
    *us_p = dfccl_profile_now_us() - t0;
    return st;
}

/* The fastest of `calls` calls (after the warmup) of a ring collective of
 * `kind` (allreduce or allgather, in place) of `count` float32 on `buf`. */
static dfccl_status_t dfccl_profile_best(dfccl_group_t g, int kind, size_t count, void *buf,
                                         double *us_p)
{
    dfccl_coll_desc_t d = {(dfccl_coll_kind_t)kind, count, DFCCL_FLOAT32, DFCCL_SUM,
                           0, 0, DFCCL_ALGO_RING, 0, 0};
    dfccl_status_t st, dst;
    double best = INFINITY;
    int id;

    DFCCL_CHECK(dfccl_profile_register(g, &d, &id));
    st = DFCCL_OK;
    for (int i = 0; i < DFCCL_PROFILE_WARMUP + DFCCL_PROFILE_CALLS && st == DFCCL_OK; i++) {
        double us;

        st = dfccl_profile_call(g, kind, id, buf, count * sizeof(float), &us);
        if (i >= DFCCL_PROFILE_WARMUP && us < best) {
            best = us;
        }
    }
    dst   = dfcclDeregister(id, g->ctx);
    *us_p = best;
    return st != DFCCL_OK ? st : dst;
}

/* AdapCC's pair: the fastest round of DFCCL_PROFILE_SPLIT allreduces of
 * big / SPLIT bytes in a row (*tk_p), and the fastest allreduce of `big`
 * bytes (*t1_p). */
static dfccl_status_t dfccl_profile_split(dfccl_group_t g, void *buf, size_t big,
                                          double *tk_p, double *t1_p)
{
    const size_t n1     = big / sizeof(float);
    const size_t nk     = n1 / DFCCL_PROFILE_SPLIT;
    dfccl_coll_desc_t d = {DFCCL_KIND_ALLREDUCE, nk, DFCCL_FLOAT32, DFCCL_SUM,
                           0, 0, DFCCL_ALGO_RING, 0, 0};
    double tk = INFINITY, t1 = INFINITY, us;
    dfccl_status_t st, dst;
    int idk, id1;

    DFCCL_CHECK(dfccl_profile_register(g, &d, &idk));
    d.count = n1;
    st      = dfccl_profile_register(g, &d, &id1);
    if (st != DFCCL_OK) {
        dfcclDeregister(idk, g->ctx);
        return st;
    }
    /* a call of each to warm them, then the rounds */
    for (int r = -1; r < DFCCL_PROFILE_ROUNDS && st == DFCCL_OK; r++) {
        double sum = 0;

        for (int i = 0; i < DFCCL_PROFILE_SPLIT && st == DFCCL_OK; i++) {
            st = dfccl_profile_call(g, DFCCL_KIND_ALLREDUCE, idk, buf, 0, &us);
            sum += us;
        }
        if (st == DFCCL_OK) {
            st = dfccl_profile_call(g, DFCCL_KIND_ALLREDUCE, id1, buf, 0, &us);
        }
        if (r >= 0 && st == DFCCL_OK) {
            tk = sum < tk ? sum : tk;
            t1 = us < t1 ? us : t1;
        }
    }
    dst = dfcclDeregister(idk, g->ctx);
    if (dst == DFCCL_OK) {
        dst = dfcclDeregister(id1, g->ctx);
    }
    *tk_p = tk;
    *t1_p = t1;
    return st != DFCCL_OK ? st : dst;
}

/* The worst of every rank's `v` (three doubles, through `buf`), in v. */
static dfccl_status_t dfccl_profile_agree(dfccl_group_t g, void *buf, double v[3])
{
    dfccl_coll_desc_t d  = {DFCCL_KIND_ALLREDUCE, 3, DFCCL_FLOAT64, DFCCL_MAX,
                            0, 0, DFCCL_ALGO_RING, 0, 0};
    dfccl_rank_ctx_t ctx = g->ctx;
    dfccl_status_t st, dst;
    double us;
    int id;

    DFCCL_CHECK(ctx->be->memcpy_h2d(ctx, buf, v, 3 * sizeof(double)));
    DFCCL_CHECK(dfccl_profile_register(g, &d, &id));
    st  = dfccl_profile_call(g, DFCCL_KIND_ALLREDUCE, id, buf, 0, &us);
    dst = dfcclDeregister(id, ctx);
    if (st == DFCCL_OK) {
        st = dst;
    }
    if (st == DFCCL_OK) {
        st = ctx->be->memcpy_d2h(ctx, v, buf, 3 * sizeof(double));
    }
    return st;
}

dfccl_status_t dfccl_profile_group(struct dfccl_group *g)
{
    dfccl_rank_ctx_t ctx = g->ctx;
    const double n       = g->nranks;
    /* a large buffer, whose bytes take several times a call's fixed cost:
     * some hundreds of microseconds on H200s, a few milliseconds on the
     * host backend (whose calls cost 100 us or more) */
    const size_t big     = ctx->backend == DFCCL_BACKEND_HOST ? (size_t)2 << 20
                                                              : (size_t)64 << 20;
    double t_ar = 0, t_ag = 0, t_k = 0, t_1 = 0, v[3] = {0, 0, 0};
    void *buf = NULL, *word = NULL;
    dfccl_status_t st;

    if (g->nranks < 2) {
        return DFCCL_OK;
    }
    /* A rank that cannot have the large buffer says so before anything
     * waits for it (through a buffer of a few bytes), and no rank
     * measures: the group keeps its values. */
    st = ctx->be->dev_alloc(ctx, 3 * sizeof(double), &word);
    if (st == DFCCL_OK) {
        dfccl_error_quiet(1);
        v[0] = ctx->be->dev_alloc(ctx, big, &buf) == DFCCL_OK ? 0 : 1;
        dfccl_error_quiet(0);
        st = dfccl_profile_agree(g, word, v);
    }
    if (st == DFCCL_OK && v[0] != 0) {
        dfccl_info("group %s: a rank has no %zu bytes to measure the links with; the group "
                   "keeps alpha %.3g us, beta %.3g GB/s", g->name, big, g->alpha_us,
                   g->beta_gbps);
        goto out;
    }
    if (st == DFCCL_OK) {
        st = dfccl_profile_split(g, buf, big, &t_k, &t_1);
    }
    if (st == DFCCL_OK) {
        st = dfccl_profile_best(g, DFCCL_KIND_ALLREDUCE, 2, buf, &t_ar);
    }
    if (st == DFCCL_OK) {
        st = dfccl_profile_best(g, DFCCL_KIND_ALLGATHER, 1, buf, &t_ag);
    }
    dfccl_debug("group %s: profile t_k %.1f t_1 %.1f t_ar %.1f t_ag %.1f us", g->name, t_k, t_1,
                t_ar, t_ag);
    if (st == DFCCL_OK) {
        const double f     = (t_k - t_1) / (DFCCL_PROFILE_SPLIT - 1);
        const double per_b = (t_1 - f) / (2.0 * (n - 1) / n * (double)big);
        const double alpha = (t_ar - t_ag) / (n - 1);

        v[0] = isfinite(alpha) && alpha > 0 ? alpha : g->alpha_us;
        v[1] = isfinite(per_b) && f > 0 && per_b > 0 ? per_b : 1.0 / (g->beta_gbps * 1e3);
        v[2] = t_ag - (n - 1) * v[0];
        v[2] = isfinite(v[2]) && v[2] > 0 ? v[2] : 0;
        st   = dfccl_profile_agree(g, word, v);
    }
    if (st == DFCCL_OK) {
        dfccl_group_link_set(g, g->link, v[0], 1.0 / (v[1] * 1e3));
        g->coll_us = v[2];
        dfccl_info("group %s: links measured, alpha %.3g us, beta %.3g GB/s, a collective "
                   "%.3g us", g->name, g->alpha_us, g->beta_gbps, g->coll_us);
    }
out:
    if (buf != NULL) {
        ctx->be->dev_free(ctx, buf);
    }
    if (word != NULL) {
        ctx->be->dev_free(ctx, word);
    }
    /* the profile's large collectives widened the daemon: the group's own
     * start from a launch as wide as they need */
    pthread_mutex_lock(&ctx->lock);
    dfccl_ctx_narrow(ctx);
    pthread_mutex_unlock(&ctx->lock);
    if (st != DFCCL_OK) {
        return dfccl_error(st, "measuring the links of group %s: %s; the group keeps its "
                           "estimates (alpha %.3g us, beta %.3g GB/s)", g->name,
                           dfcclGetLastErrorMessage(), g->alpha_us, g->beta_gbps);
    }
    return DFCCL_OK;
}

dfccl_status_t dfcclGroupProfile(dfccl_group_t g, double *alpha_us_p, double *beta_gbps_p)
{
    if (g == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclGroupProfile: group is NULL");
    }
    DFCCL_CHECK(dfccl_profile_group(g));
    return dfcclGroupModel(g, alpha_us_p, beta_gbps_p);
}

dfccl_status_t dfcclGroupModel(dfccl_group_t g, double *alpha_us_p, double *beta_gbps_p)
{
    if (g == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclGroupModel: group is NULL");
    }
    if (alpha_us_p != NULL) {
        *alpha_us_p = g->alpha_us;
    }
    if (beta_gbps_p != NULL) {
        *beta_gbps_p = g->beta_gbps;
    }
    return DFCCL_OK;
}

dfccl_status_t dfcclGroupLinkModel(dfccl_group_t g, dfccl_link_t link, double *alpha_us_p,
                                   double *beta_gbps_p, double *coll_us_p)
{
    if (g == NULL || (int)link < 0 || link >= DFCCL_LINK_COUNT) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclGroupLinkModel: group is NULL or "
                           "link %d is not a dfccl_link_t", (int)link);
    }
    if (!(g->links & (1u << link))) {
        dfccl_set_last_error("dfcclGroupLinkModel: the group has no link of that class");
        return DFCCL_ERR_UNSUPPORTED;
    }
    if (alpha_us_p != NULL) {
        *alpha_us_p = g->link_alpha_us[link];
    }
    if (beta_gbps_p != NULL) {
        *beta_gbps_p = g->link_beta_gbps[link];
    }
    if (coll_us_p != NULL) {
        *coll_us_p = g->coll_us;
    }
    return DFCCL_OK;
}
