/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A group's links in the alpha-beta model, measured at its creation
 * (DFCCL_PROFILE=create, through the context's group_profile hook), on
 * request (dfcclGroupProfile) and every DFCCL_PROFILE_EVERY collectives
 * (the refreshes, below). Everything is timed on the ring, forced, on
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
#include <sched.h>
#include <stdlib.h>
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

/* On a thread that registers the profile's own collectives: the
 * registration hook (dfccl_refresh_register) lets them through. */
static __thread int dfccl_profile_inside;

/* Register the ring collective *d on g as it is, whatever DFCCL_STRAGGLER
 * says: the profile times plain runs. */
static dfccl_status_t dfccl_profile_register(dfccl_group_t g, const dfccl_coll_desc_t *d,
                                             int *id_p)
{
    dfccl_status_t st;

    dfccl_profile_inside++;
    st = dfccl_coll_register(g, (int)d->kind, d->count, (int)d->type, (int)d->op, 0, d->priority,
                             NULL, DFCCL_ALGO_RING, id_p);
    dfccl_profile_inside--;
    return st;
}

/* The large buffer of the bandwidth measurement, whose bytes take several
 * times a call's fixed cost: some hundreds of microseconds on H200s, a few
 * milliseconds on the host backend (whose calls cost 100 us or more). */
static size_t dfccl_profile_big(const struct dfccl_rank_ctx *ctx)
{
    return ctx->backend == DFCCL_BACKEND_HOST ? (size_t)2 << 20 : (size_t)64 << 20;
}

/* The model's values from the times measured on this rank: v[0] alpha
 * (us), v[1] a byte's time over the link (us), v[2] a collective's fixed
 * cost (us); a measurement that says nothing keeps the group's value. */
static void dfccl_profile_values(const struct dfccl_group *g, size_t big, double t_k,
                                 double t_1, double t_ar, double t_ag, double v[3])
{
    const double n     = g->nranks;
    const double f     = (t_k - t_1) / (DFCCL_PROFILE_SPLIT - 1);
    const double per_b = (t_1 - f) / (2.0 * (n - 1) / n * (double)big);
    const double alpha = (t_ar - t_ag) / (n - 1);

    v[0] = isfinite(alpha) && alpha > 0 ? alpha : g->alpha_us;
    v[1] = isfinite(per_b) && f > 0 && per_b > 0 ? per_b : 1.0 / (g->beta_gbps * 1e3);
    v[2] = t_ag - (n - 1) * v[0];
    v[2] = isfinite(v[2]) && v[2] > 0 ? v[2] : 0;
}

/* The agreed values v (dfccl_profile_values') into g's model. */
static void dfccl_profile_apply(struct dfccl_group *g, const double v[3], const char *what)
{
    dfccl_group_link_set(g, g->link, v[0], 1.0 / (v[1] * 1e3));
    g->coll_us = v[2];
    g->model_gen++;
    dfccl_info("group %s: links %s, alpha %.3g us, beta %.3g GB/s, a collective %.3g us "
               "(generation %llu)", g->name, what, g->alpha_us, g->beta_gbps, g->coll_us,
               (unsigned long long)g->model_gen);
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
    const size_t big     = dfccl_profile_big(ctx);
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
        dfccl_profile_values(g, big, t_k, t_1, t_ar, t_ag, v);
        st = dfccl_profile_agree(g, word, v);
    }
    if (st == DFCCL_OK) {
        dfccl_profile_apply(g, v, "measured");
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

/* ---- refreshes: DFCCL_PROFILE_EVERY ---------------------------------------
 *
 * Every N collectives of a group completed on a rank (N = DFCCL_PROFILE_EVERY),
 * that rank's runtime measures the links again with the calls above, now
 * driven by their completions (each call's callback starts the next) instead
 * of a waiting thread, so that no application thread blocks for it:
 *
 *   - refresh k starts on a rank at the completion of its k N-th collective
 *     of the group (counted after its callback, in dfccl_ctx_complete): on
 *     every rank, whatever the order its collectives ran in, so that every
 *     rank that has completed as many starts as many refreshes. Its calls
 *     run on collectives registered once, at the group's first
 *     registration (the same place of every rank's sequence of
 *     registrations), with the lowest priority: the daemon takes the
 *     application's collectives first, and a run of theirs submitted
 *     meanwhile is never held back.
 *   - The values are agreed as at creation (the worst of every rank's, a MAX
 *     allreduce), together with the place in the group's sequence of
 *     registrations from which they apply: the largest of the ranks'
 *     counts of registrations made or under way when they enter the
 *     agreement. A registration on the group waits while this rank's
 *     agreement is in flight (it needs no application call of any rank: once
 *     this rank's last measurement completed, every rank's runtime is in the
 *     refresh), and applies the values whose place it has reached. So a
 *     registration is planned with the same model on every rank, and the
 *     plans of collectives registered before never change.
 *   - dfcclGroupDestroy, dfcclDestroy and dfcclGroupProfile first run the
 *     refreshes due on this rank to their end.
 */

enum { DFCCL_RF_SPLITK = 0, DFCCL_RF_SPLIT1, DFCCL_RF_AR, DFCCL_RF_AG, DFCCL_RF_WORD,
       DFCCL_RF_NCOLL };
/* where a group's refresh stands */
enum { DFCCL_RF_IDLE = 0, DFCCL_RF_MEASURE, DFCCL_RF_AGREE, DFCCL_RF_FAILED };

/* The calls of a refresh, in order: dfccl_profile_split's rounds (a warm
 * one first), then dfccl_profile_best's allreduces and allgathers. */
#define DFCCL_RF_SPLIT_CALLS ((DFCCL_PROFILE_ROUNDS + 1) * (DFCCL_PROFILE_SPLIT + 1))
#define DFCCL_RF_BEST_CALLS  (DFCCL_PROFILE_WARMUP + DFCCL_PROFILE_CALLS)
#define DFCCL_RF_CALLS       (DFCCL_RF_SPLIT_CALLS + 2 * DFCCL_RF_BEST_CALLS)

typedef struct {
    double   v[3];
    uint64_t at; /* the registration (g->nreg) from which they apply */
} dfccl_rf_pending_t;

/* A group's refreshes; every field under ctx->lock. */
struct dfccl_refresh {
    int                 ids[DFCCL_RF_NCOLL];
    void               *buf;   /* the large buffer */
    void               *word;  /* the agreement's four doubles */
    uint64_t            done;  /* collectives of the group completed (counted) */
    uint64_t            started, finished;
    int                 state; /* DFCCL_RF_* */
    int                 step;  /* the call in flight */
    int                 held;  /* dfcclGroupProfile runs: nothing is counted */
    uint64_t            t0_ns;
    double              sum, t_k, t_1, t_ar, t_ag;
    uint64_t            seen;  /* one past the last registration let through */
    dfccl_rf_pending_t *pend;  /* agreed, not in effect yet, oldest first */
    int                 npend, cap;
};

static void dfccl_rf_callback(int id, dfccl_status_t status, void *arg);

static int dfccl_rf_owns(const struct dfccl_refresh *rf, int id)
{
    for (int i = 0; i < DFCCL_RF_NCOLL; i++) {
        if (rf->ids[i] == id) {
            return 1;
        }
    }
    return 0;
}

/* Start refresh `started` + 1 where it is due (ctx->lock held): 1 if the
 * caller is to submit its first call. */
static int dfccl_rf_due(struct dfccl_group *g)
{
    struct dfccl_refresh *rf = g->refresh;
    const uint64_t every     = g->ctx->cfg.profile_every;

    if (rf->state != DFCCL_RF_IDLE || rf->held || g->ctx->aborted ||
        g->fault_policy != DFCCL_FAULT_ABORT || rf->done < (rf->started + 1) * every) {
        return 0;
    }
    rf->started++;
    rf->state = DFCCL_RF_MEASURE;
    rf->step  = 0;
    rf->t_k = rf->t_1 = rf->t_ar = rf->t_ag = INFINITY;
    return 1;
}

/* Submit the call of rf->step (no lock held); a failure ends the refreshes
 * of the group on this rank. */
static void dfccl_rf_submit(struct dfccl_group *g)
{
    struct dfccl_refresh *rf = g->refresh;
    dfccl_rank_ctx_t ctx     = g->ctx;
    dfccl_status_t st;
    int step, which;

    pthread_mutex_lock(&ctx->lock);
    step      = rf->step;
    rf->t0_ns = dfccl_time_ns();
    pthread_mutex_unlock(&ctx->lock);
    if (step == DFCCL_RF_CALLS) {
        st = dfcclRunAllReduce(rf->word, rf->word, rf->ids[DFCCL_RF_WORD], dfccl_rf_callback, g,
                               ctx);
    } else if (step >= DFCCL_RF_SPLIT_CALLS + DFCCL_RF_BEST_CALLS) {
        st = dfcclRunAllGather((char *)rf->buf + (size_t)g->rank * sizeof(float), rf->buf,
                               rf->ids[DFCCL_RF_AG], dfccl_rf_callback, g, ctx);
    } else {
        which = step >= DFCCL_RF_SPLIT_CALLS                           ? DFCCL_RF_AR
                : step % (DFCCL_PROFILE_SPLIT + 1) < DFCCL_PROFILE_SPLIT ? DFCCL_RF_SPLITK
                                                                          : DFCCL_RF_SPLIT1;
        st = dfcclRunAllReduce(rf->buf, rf->buf, rf->ids[which], dfccl_rf_callback, g, ctx);
    }
    if (st != DFCCL_OK) {
        dfccl_error(st, "group %s: the refresh of its link model (DFCCL_PROFILE_EVERY) could "
                    "not go on: %s; the group keeps its model", g->name,
                    dfcclGetLastErrorMessage());
        pthread_mutex_lock(&ctx->lock);
        rf->state = DFCCL_RF_FAILED;
        pthread_mutex_unlock(&ctx->lock);
        dfccl_ctx_kick(ctx);
    }
}

/* The time `us` of call `step` into the refresh's measurements. */
static void dfccl_rf_record(struct dfccl_refresh *rf, int step, double us)
{
    if (step < DFCCL_RF_SPLIT_CALLS) {
        const int round = step / (DFCCL_PROFILE_SPLIT + 1) - 1;
        const int call  = step % (DFCCL_PROFILE_SPLIT + 1);

        if (call < DFCCL_PROFILE_SPLIT) {
            rf->sum = call == 0 ? us : rf->sum + us;
        } else if (round >= 0) {
            rf->t_k = rf->sum < rf->t_k ? rf->sum : rf->t_k;
            rf->t_1 = us < rf->t_1 ? us : rf->t_1;
        }
    } else {
        const int i = (step - DFCCL_RF_SPLIT_CALLS) % DFCCL_RF_BEST_CALLS;
        double *best = step < DFCCL_RF_SPLIT_CALLS + DFCCL_RF_BEST_CALLS ? &rf->t_ar : &rf->t_ag;

        if (i >= DFCCL_PROFILE_WARMUP && us < *best) {
            *best = us;
        }
    }
}

/* Each call's completion: the next call, the agreement, or its values. */
static void dfccl_rf_callback(int id, dfccl_status_t status, void *arg)
{
    struct dfccl_group *g    = arg;
    struct dfccl_refresh *rf = g->refresh;
    dfccl_rank_ctx_t ctx     = g->ctx;
    const double us          = (double)dfccl_since(dfccl_time_ns(), rf->t0_ns) / 1e3;
    double v[4];
    int next = 0, agree = 0;

    (void)id;
    pthread_mutex_lock(&ctx->lock);
    if (status != DFCCL_OK) {
        rf->state = DFCCL_RF_FAILED; /* the context aborts, or has aborted */
    } else if (rf->state == DFCCL_RF_AGREE) {
        pthread_mutex_unlock(&ctx->lock);
        status = ctx->be->memcpy_d2h(ctx, v, rf->word, sizeof(v));
        pthread_mutex_lock(&ctx->lock);
        if (status == DFCCL_OK && rf->npend == rf->cap) {
            void *p = realloc(rf->pend, (size_t)(2 * rf->cap + 2) * sizeof(*rf->pend));
            status  = p != NULL ? DFCCL_OK : DFCCL_ERR_NO_MEMORY;
            if (p != NULL) {
                rf->pend = p;
                rf->cap  = 2 * rf->cap + 2;
            }
        }
        if (status == DFCCL_OK) {
            memcpy(rf->pend[rf->npend].v, v, sizeof(rf->pend[0].v));
            rf->pend[rf->npend++].at = (uint64_t)v[3];
            rf->finished++;
            rf->state = DFCCL_RF_IDLE;
            dfccl_debug("group %s: refresh %llu agreed, from registration %llu on", g->name,
                        (unsigned long long)rf->finished, (unsigned long long)v[3]);
            next = dfccl_rf_due(g);
        } else {
            rf->state = DFCCL_RF_FAILED;
        }
    } else {
        dfccl_rf_record(rf, rf->step, us);
        if (++rf->step == DFCCL_RF_CALLS) {
            /* the agreement: the values, and the registrations this rank
             * has made or has under way (a registration let through by
             * dfccl_refresh_register that has not counted yet) */
            dfccl_debug("group %s: refresh %llu t_k %.1f t_1 %.1f t_ar %.1f t_ag %.1f us",
                        g->name, (unsigned long long)rf->started, rf->t_k, rf->t_1, rf->t_ar,
                        rf->t_ag);
            dfccl_profile_values(g, dfccl_profile_big(ctx), rf->t_k, rf->t_1, rf->t_ar,
                                 rf->t_ag, v);
            v[3]      = (double)(g->nreg > rf->seen ? g->nreg : rf->seen);
            rf->state = DFCCL_RF_AGREE;
            agree     = 1;
        }
        next = 1;
    }
    pthread_mutex_unlock(&ctx->lock);
    if (agree) {
        status = ctx->be->memcpy_h2d(ctx, rf->word, v, sizeof(v));
        if (status != DFCCL_OK) {
            pthread_mutex_lock(&ctx->lock);
            rf->state = DFCCL_RF_FAILED;
            pthread_mutex_unlock(&ctx->lock);
            next = 0;
        }
    }
    if (next) {
        dfccl_rf_submit(g);
    } else {
        dfccl_ctx_kick(ctx); /* a registration or a destroy may wait */
    }
}

void dfccl_refresh_done(struct dfccl_group *g, int id, dfccl_status_t status)
{
    dfccl_rank_ctx_t ctx = g->ctx;
    int start = 0;

    /* set before any collective of the group could run, cleared after the
     * last: without refreshes, a completion takes no lock here */
    if (__atomic_load_n(&g->refresh, __ATOMIC_ACQUIRE) == NULL) {
        return;
    }
    pthread_mutex_lock(&ctx->lock);
    if (g->refresh != NULL && status == DFCCL_OK && !g->refresh->held &&
        !ctx->colls[id].strag_internal && !dfccl_rf_owns(g->refresh, id)) {
        g->refresh->done++;
        start = dfccl_rf_due(g);
    }
    pthread_mutex_unlock(&ctx->lock);
    if (start) {
        dfccl_rf_submit(g);
    }
}

/* Wait (ctx->lock held, released meanwhile) while `busy` says so of g's
 * refresh, driving progress; DFCCL_ERR_TIMEOUT past DFCCL_TIMEOUT. */
static dfccl_status_t dfccl_rf_wait(struct dfccl_group *g, int (*busy)(struct dfccl_group *g),
                                    const char *fn)
{
    dfccl_rank_ctx_t ctx    = g->ctx;
    const uint64_t deadline = dfccl_time_ns() + (uint64_t)(ctx->cfg.timeout_s * 1e9);

    while (busy(g) && !ctx->aborted) {
        if (ctx->cfg.timeout_s > 0 && dfccl_time_ns() > deadline) {
            return dfccl_error(DFCCL_ERR_TIMEOUT, "%s on group %s: the refresh of its link "
                               "model (DFCCL_PROFILE_EVERY) did not end within DFCCL_TIMEOUT "
                               "(%g s): a rank of the group has not completed as many of its "
                               "collectives", fn, g->name, ctx->cfg.timeout_s);
        }
        pthread_mutex_unlock(&ctx->lock);
        if (dfccl_ctx_progress(ctx) == 0) {
            sched_yield();
        }
        pthread_mutex_lock(&ctx->lock);
    }
    return DFCCL_OK;
}

static int dfccl_rf_agreeing(struct dfccl_group *g)
{
    return g->refresh->state == DFCCL_RF_AGREE;
}

/* A refresh runs, or one is due that this call starts. ctx->lock held. */
static int dfccl_rf_unfinished(struct dfccl_group *g)
{
    if (dfccl_rf_due(g)) {
        pthread_mutex_unlock(&g->ctx->lock);
        dfccl_rf_submit(g);
        pthread_mutex_lock(&g->ctx->lock);
    }
    return g->refresh->state == DFCCL_RF_MEASURE || g->refresh->state == DFCCL_RF_AGREE;
}

/* Run the refreshes due on g to their end (ctx->lock held, released
 * meanwhile). */
static dfccl_status_t dfccl_rf_finish(struct dfccl_group *g, const char *fn)
{
    return g->refresh != NULL ? dfccl_rf_wait(g, dfccl_rf_unfinished, fn) : DFCCL_OK;
}

/* The refreshes' collectives and memory on g, in registration order. */
static dfccl_status_t dfccl_rf_create(struct dfccl_group *g)
{
    dfccl_rank_ctx_t ctx = g->ctx;
    const size_t big     = dfccl_profile_big(ctx), nk = big / sizeof(float);
    const dfccl_coll_desc_t d[DFCCL_RF_NCOLL] = {
        {DFCCL_KIND_ALLREDUCE, nk / DFCCL_PROFILE_SPLIT, DFCCL_FLOAT32, DFCCL_SUM, 0, INT32_MIN,
         DFCCL_ALGO_RING, 0, 0},
        {DFCCL_KIND_ALLREDUCE, nk, DFCCL_FLOAT32, DFCCL_SUM, 0, INT32_MIN, DFCCL_ALGO_RING, 0, 0},
        {DFCCL_KIND_ALLREDUCE, 2, DFCCL_FLOAT32, DFCCL_SUM, 0, INT32_MIN, DFCCL_ALGO_RING, 0, 0},
        {DFCCL_KIND_ALLGATHER, 1, DFCCL_FLOAT32, DFCCL_SUM, 0, INT32_MIN, DFCCL_ALGO_RING, 0, 0},
        {DFCCL_KIND_ALLREDUCE, 4, DFCCL_FLOAT64, DFCCL_MAX, 0, INT32_MIN, DFCCL_ALGO_RING, 0, 0}};
    struct dfccl_refresh *rf = calloc(1, sizeof(*rf));
    dfccl_status_t st        = rf != NULL ? DFCCL_OK : DFCCL_ERR_NO_MEMORY;
    int n = 0;

    if (st != DFCCL_OK) {
        return dfccl_error(st, "group %s: out of host memory", g->name);
    }
    for (; n < DFCCL_RF_NCOLL && st == DFCCL_OK; n++) {
        st = dfccl_profile_register(g, &d[n], &rf->ids[n]);
    }
    n -= st != DFCCL_OK;
    if (st == DFCCL_OK) {
        st = ctx->be->dev_alloc(ctx, big, &rf->buf);
    }
    if (st == DFCCL_OK) {
        st = ctx->be->dev_alloc(ctx, 4 * sizeof(double), &rf->word);
    }
    if (st != DFCCL_OK) {
        const char *msg = dfcclGetLastErrorMessage();
        char why[512];

        snprintf(why, sizeof(why), "%s", msg);
        while (n-- > 0) {
            dfcclDeregister(rf->ids[n], ctx);
        }
        if (rf->buf != NULL) {
            ctx->be->dev_free(ctx, rf->buf);
        }
        free(rf);
        return dfccl_error(st, "group %s: setting up the refreshes of its link model "
                           "(DFCCL_PROFILE_EVERY=%u) failed: %s", g->name,
                           ctx->cfg.profile_every, why);
    }
    pthread_mutex_lock(&ctx->lock);
    __atomic_store_n(&g->refresh, rf, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&ctx->lock);
    return DFCCL_OK;
}

dfccl_status_t dfccl_refresh_register(struct dfccl_group *g)
{
    dfccl_rank_ctx_t ctx = g->ctx;
    struct dfccl_refresh *rf;
    dfccl_status_t st;

    if (dfccl_profile_inside || dfccl_coll_want_id >= 0 || ctx->cfg.profile_every == 0 ||
        g->nranks < 2 || (g->refresh == NULL && g->fault_policy != DFCCL_FAULT_ABORT)) {
        return DFCCL_OK; /* the profile's own, an exclusion's, or no refreshes */
    }
    if (g->refresh == NULL) {
        DFCCL_CHECK(dfccl_rf_create(g)); /* the group's first registration */
    }
    pthread_mutex_lock(&ctx->lock);
    rf = g->refresh;
    st = dfccl_rf_wait(g, dfccl_rf_agreeing, "a registration");
    while (st == DFCCL_OK && rf->npend > 0 && rf->pend[0].at <= g->nreg) {
        dfccl_profile_apply(g, rf->pend[0].v, "measured again");
        memmove(rf->pend, rf->pend + 1, (size_t)--rf->npend * sizeof(*rf->pend));
    }
    rf->seen = g->nreg + 1;
    pthread_mutex_unlock(&ctx->lock);
    return st;
}

/* Free g's refreshes (ctx->lock held); their collectives stay. */
static void dfccl_rf_free(struct dfccl_group *g)
{
    struct dfccl_refresh *rf = g->refresh;

    g->ctx->be->dev_free(g->ctx, rf->buf);
    g->ctx->be->dev_free(g->ctx, rf->word);
    free(rf->pend);
    free(rf);
    __atomic_store_n(&g->refresh, NULL, __ATOMIC_RELEASE);
}

dfccl_status_t dfccl_refresh_retire(struct dfccl_group *g)
{
    dfccl_rank_ctx_t ctx = g->ctx;
    struct dfccl_refresh *rf;
    dfccl_status_t st;
    int ids[DFCCL_RF_NCOLL];

    pthread_mutex_lock(&ctx->lock);
    rf = g->refresh;
    if (rf == NULL || g->ncolls > DFCCL_RF_NCOLL) {
        pthread_mutex_unlock(&ctx->lock);
        return DFCCL_OK; /* dfcclGroupDestroy says what is still registered */
    }
    st = dfccl_rf_finish(g, "dfcclGroupDestroy");
    memcpy(ids, rf->ids, sizeof(ids));
    pthread_mutex_unlock(&ctx->lock);
    for (int i = 0; i < DFCCL_RF_NCOLL && st == DFCCL_OK; i++) {
        st = dfcclDeregister(ids[i], ctx);
    }
    if (st == DFCCL_OK) {
        pthread_mutex_lock(&ctx->lock);
        dfccl_rf_free(g);
        pthread_mutex_unlock(&ctx->lock);
    }
    return st;
}

void dfccl_refresh_settle(struct dfccl_rank_ctx *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    for (struct dfccl_group *g = ctx->groups; g != NULL; g = g->next) {
        dfccl_error_quiet(1);
        dfccl_rf_finish(g, "dfcclDestroy"); /* past its timeout, destroy says it is busy */
        dfccl_error_quiet(0);
    }
    pthread_mutex_unlock(&ctx->lock);
}

void dfccl_refresh_release(struct dfccl_rank_ctx *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    for (struct dfccl_group *g = ctx->groups; g != NULL; g = g->next) {
        if (g->refresh != NULL) {
            dfccl_rf_free(g);
        }
    }
    pthread_mutex_unlock(&ctx->lock);
}

dfccl_status_t dfcclGroupProfileInfo(dfccl_group_t g, dfccl_profile_info_t *info_p)
{
    dfccl_profile_info_t info;

    if (g == NULL || info_p == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclGroupProfileInfo: group and info_p "
                           "must not be NULL");
    }
    memset(&info, 0, sizeof(info));
    pthread_mutex_lock(&g->ctx->lock);
    info.generation = g->model_gen;
    if (g->refresh != NULL) {
        info.refreshes   = g->refresh->finished;
        info.pending     = (uint64_t)g->refresh->npend;
        info.collectives = g->refresh->done;
    }
    pthread_mutex_unlock(&g->ctx->lock);
    *info_p = info;
    return DFCCL_OK;
}

dfccl_status_t dfcclGroupProfile(dfccl_group_t g, double *alpha_us_p, double *beta_gbps_p)
{
    dfccl_status_t st;

    if (g == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclGroupProfile: group is NULL");
    }
    /* the refreshes due first, on every rank; their values give way to
     * this measurement's, on every rank at this same place */
    pthread_mutex_lock(&g->ctx->lock);
    st = dfccl_rf_finish(g, "dfcclGroupProfile");
    if (st == DFCCL_OK && g->refresh != NULL) {
        g->refresh->npend = 0;
        g->refresh->held  = 1;
    }
    pthread_mutex_unlock(&g->ctx->lock);
    if (st == DFCCL_OK) {
        st = dfccl_profile_group(g);
    }
    pthread_mutex_lock(&g->ctx->lock);
    if (g->refresh != NULL) {
        g->refresh->held = 0;
    }
    pthread_mutex_unlock(&g->ctx->lock);
    return st != DFCCL_OK ? st : dfcclGroupModel(g, alpha_us_p, beta_gbps_p);
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
