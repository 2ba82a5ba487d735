/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A group's links in the alpha-beta model, measured at its creation
 * (DFCCL_PROFILE=create, through the context's group_profile hook), on
 * request (dfcclGroupProfile) and every DFCCL_PROFILE_EVERY collectives
 * (the refreshes, below), the fastest of a few calls counting:
 *
 *   1. on the ring, forced, on the group itself: a hop's latency and a
 *      collective's fixed cost. An allreduce of 8 bytes takes 2 (n - 1)
 *      hops, an allgather of 4 bytes a rank n - 1, both after the same
 *      fixed cost c of a collective: alpha = (T_ar - T_ag) / (n - 1), c =
 *      T_ag - (n - 1) alpha;
 *   2. bandwidth, AdapCC's way: k calls of S / k bytes one after the other
 *      against one call of S. Each call pays a fixed cost f and its bytes
 *      over the link, so T_k = k f + B / beta, T_1 = f + B / beta, f = (T_k
 *      - T_1) / (k - 1), and beta follows from T_1.
 *
 * A group whose ring has links of one class (every group within a host,
 * and a group of one rank a host) times 2 on ring allreduces (B = 2 (n -
 * 1) / n S), and 1's alpha and beta are that class's. A group whose ring
 * mixes classes (ranks on several hosts, some of them together: net edges
 * between hosts, p2p or shm within them) would measure only the slowest
 * class that way, so there each class present is measured on its own,
 * with the probe (kernels/algo/ring.h, dfccl_ring_probe): a collective on
 * the ring's connectors in which each rank sends its buffer to the next
 * rank and receives the previous rank's only over the ring's edges of that
 * class, so no rank waits on another class of link:
 *
 *   - a probe over no edge at all: the fixed cost c of a collective;
 *   - per class L: a probe of 8 bytes, alpha_L = T - c, and AdapCC's pair
 *     of probes (B = S, each link carries the buffer once) for beta_L;
 *     where the pair's f says nothing (T_k - T_1 within the noise, as on
 *     the host backend's shared memory, or past T_1 on a loaded machine),
 *     the 8-byte probe's T stands for f.
 *
 * Each rank measures the edges it receives over (a rank on none of class
 * L says nothing for L). A measurement that says
 * nothing (noise above the signal) keeps the group's value. Every rank
 * then takes the worst of the ranks' answers (the largest alpha and c and
 * the smallest beta, through a MAX allreduce on the group), so that the
 * estimates, and every choice made from them, are the same on every rank.
 * How the ring's estimates combine the classes: dfccl_group_link_set. On
 * the host backend it all takes a few milliseconds.
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

/* The agreement's doubles: the ring's alpha (us), a byte's time over its
 * slowest link (us) and a collective's fixed cost (us); the registration
 * from which a refresh's values apply; then each class's alpha and a
 * byte's time over it (0: not measured by this rank). */
enum { DFCCL_PV_ALPHA = 0, DFCCL_PV_BYTE, DFCCL_PV_COLL, DFCCL_PV_AT, DFCCL_PV_LINKS };
#define DFCCL_PROFILE_WORDS (DFCCL_PV_LINKS + 2 * DFCCL_LINK_COUNT)

/* What a measurement of a profile times: see the header. */
enum {
    DFCCL_PM_RING = 0, /* ring allreduces, S / k against S */
    DFCCL_PM_AR,       /* ring allreduce of 8 bytes */
    DFCCL_PM_AG,       /* ring allgather of 4 bytes a rank */
    DFCCL_PM_EMPTY,    /* a probe over no edge */
    DFCCL_PM_SPLIT,    /* probes over class `link`, S / k against S */
    DFCCL_PM_TINY      /* a probe of 8 bytes over class `link` */
};

/* One measurement of a profile, and its times. */
typedef struct {
    int      what;  /* DFCCL_PM_* */
    int      link;  /* DFCCL_PM_SPLIT and _TINY: the class */
    double   t_k, t_1; /* the pairs' fastest k calls and large call; the
                        * others' fastest call in t_1 */
    double   sum;   /* the refreshes: the round's k calls so far */
} dfccl_pm_t;

/* A profile's measurements at most: three on the ring, the empty probe and
 * two a class. */
#define DFCCL_PM_MAX (4 + 2 * DFCCL_LINK_COUNT)

static double dfccl_profile_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* On a thread that registers the profile's own collectives: the
 * registration hook (dfccl_refresh_register) lets them through. */
static __thread int dfccl_profile_inside;

/* Whether g's ring mixes classes of link: then each is measured with
 * probes. Same on every rank. */
static int dfccl_profile_mixed(const struct dfccl_group *g)
{
    return __builtin_popcount(g->links) > 1;
}

/* g's measurements in order (the same on every rank), into pm; their
 * count. */
static int dfccl_profile_plan(const struct dfccl_group *g, dfccl_pm_t *pm)
{
    int n = 0;

    memset(pm, 0, DFCCL_PM_MAX * sizeof(*pm));
    if (!dfccl_profile_mixed(g)) {
        pm[n++].what = DFCCL_PM_RING;
        pm[n++].what = DFCCL_PM_AR;
        pm[n++].what = DFCCL_PM_AG;
    } else {
        pm[n++].what = DFCCL_PM_EMPTY;
        for (int l = 0; l < DFCCL_LINK_COUNT; l++) {
            if (g->links & (1u << l)) {
                pm[n].what   = DFCCL_PM_SPLIT;
                pm[n++].link = l;
                pm[n].what   = DFCCL_PM_TINY;
                pm[n++].link = l;
            }
        }
    }
    for (int i = 0; i < n; i++) {
        pm[i].t_k = pm[i].t_1 = INFINITY;
    }
    return n;
}

static int dfccl_pm_split(const dfccl_pm_t *m)
{
    return m->what == DFCCL_PM_RING || m->what == DFCCL_PM_SPLIT;
}

/* This rank's probe bits for measurement m: the edges of m's class it
 * sends and receives over; 0 where m is not a probe. */
static uint32_t dfccl_pm_probe(const struct dfccl_group *g, const dfccl_pm_t *m)
{
    const int out = g->next_net ? DFCCL_LINK_NET : g->local_link;
    const int in  = g->prev_net ? DFCCL_LINK_NET : g->local_link;
    uint32_t bits = DFCCL_K_PROBE_ON;

    if (m->what < DFCCL_PM_EMPTY) {
        return 0;
    }
    if (m->what != DFCCL_PM_EMPTY) {
        bits |= (out == m->link ? DFCCL_K_PROBE_SEND : 0u) |
                (in == m->link ? DFCCL_K_PROBE_RECV : 0u);
    }
    return bits;
}

/* The collective of measurement m (split: its large call of `big` bytes,
 * or with `small` its k calls' S / k): a ring allreduce or allgather of
 * float32, or a probe, registered as a broadcast it runs in place. */
static void dfccl_pm_desc(const dfccl_pm_t *m, size_t big, int small, dfccl_coll_desc_t *d,
                          int priority)
{
    const size_t n1 = big / sizeof(float);

    memset(d, 0, sizeof(*d));
    d->kind     = m->what == DFCCL_PM_AG ? DFCCL_KIND_ALLGATHER
                  : m->what < DFCCL_PM_EMPTY ? DFCCL_KIND_ALLREDUCE
                                             : DFCCL_KIND_BROADCAST;
    d->count    = dfccl_pm_split(m) ? (small ? n1 / DFCCL_PROFILE_SPLIT : n1)
                  : m->what == DFCCL_PM_AG ? 1
                                           : 2;
    d->type     = DFCCL_FLOAT32;
    d->op       = DFCCL_SUM;
    d->priority = priority;
    d->algo     = DFCCL_ALGO_RING;
}

/* Register the ring collective *d on g as it is, whatever DFCCL_STRAGGLER
 * says: the profile times plain runs; `probe`: dfccl_coll_static_t's. */
static dfccl_status_t dfccl_profile_register(dfccl_group_t g, const dfccl_coll_desc_t *d,
                                             uint32_t probe, int *id_p)
{
    dfccl_status_t st;

    dfccl_profile_inside++;
    dfccl_coll_probe = probe;
    st = dfccl_coll_register(g, (int)d->kind, d->count, (int)d->type, (int)d->op, 0, d->priority,
                             NULL, DFCCL_ALGO_RING, id_p);
    dfccl_coll_probe = 0;
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

/* Alpha and a byte's time from the times of AdapCC's pair (B bytes over a
 * link) and of a small call against a call without the hop (`base`): each
 * 0 where it says nothing. `small_f`: where the pair's fixed cost f says
 * nothing (its times' difference within the noise, or past the large
 * call's time on a loaded machine), the small call's time stands for f (a
 * probe's: its fixed cost and a hop). */
static void dfccl_profile_fit(double t_k, double t_1, double b, double t_small, double base,
                              int small_f, double *alpha_p, double *per_b_p)
{
    const double f     = (t_k - t_1) / (DFCCL_PROFILE_SPLIT - 1);
    const double alpha = t_small - base;
    double per_b       = (t_1 - f) / b;

    if (!(isfinite(per_b) && isfinite(f) && f > 0 && per_b > 0)) {
        per_b = small_f && isfinite(t_small) ? (t_1 - t_small) / b : 0;
    }
    *alpha_p = isfinite(alpha) && alpha > 0 ? alpha : 0;
    *per_b_p = isfinite(per_b) && per_b > 0 ? per_b : 0;
}

/* The model's values from the times measured on this rank (v: see
 * DFCCL_PV_*); a measurement that says nothing keeps the group's value
 * (the ring's) or says 0 (a class's). */
static void dfccl_profile_values(const struct dfccl_group *g, size_t big, const dfccl_pm_t *pm,
                                 int npm, double v[DFCCL_PROFILE_WORDS])
{
    const double n = g->nranks;
    double t_k = NAN, t_1 = NAN, t_ar = NAN, t_ag = NAN, t_e = NAN, a, b;

    memset(v, 0, DFCCL_PROFILE_WORDS * sizeof(double));
    for (int i = 0; i < npm; i++) {
        switch (pm[i].what) {
        case DFCCL_PM_RING:  t_k = pm[i].t_k, t_1 = pm[i].t_1; break;
        case DFCCL_PM_AR:    t_ar = pm[i].t_1; break;
        case DFCCL_PM_AG:    t_ag = pm[i].t_1; break;
        case DFCCL_PM_EMPTY: t_e = pm[i].t_1; break;
        }
    }
    /* the ring, where it has one class: its hops and bytes, and the rest
     * of a small allgather; a probe over no edge where it has several */
    dfccl_profile_fit(t_k, t_1, 2.0 * (n - 1) / n * (double)big, t_ar, t_ag, 0, &a, &b);
    a /= n - 1;
    v[DFCCL_PV_ALPHA] = a > 0 ? a : g->alpha_us;
    v[DFCCL_PV_BYTE]  = b > 0 ? b : 1.0 / (g->beta_gbps * 1e3);
    v[DFCCL_PV_COLL]  = dfccl_profile_mixed(g) ? t_e : t_ag - (n - 1) * v[DFCCL_PV_ALPHA];
    v[DFCCL_PV_COLL]  = isfinite(v[DFCCL_PV_COLL]) && v[DFCCL_PV_COLL] > 0 ? v[DFCCL_PV_COLL] : 0;
    /* each class: its probes, on the ranks that receive over it */
    for (int i = 0; i + 1 < npm; i++) {
        const uint32_t bits = dfccl_pm_probe(g, &pm[i]);

        if (pm[i].what != DFCCL_PM_SPLIT || !(bits & DFCCL_K_PROBE_RECV)) {
            continue;
        }
        dfccl_profile_fit(pm[i].t_k, pm[i].t_1, (double)big, pm[i + 1].t_1, t_e, 1, &a, &b);
        v[DFCCL_PV_LINKS + 2 * pm[i].link]     = a;
        v[DFCCL_PV_LINKS + 2 * pm[i].link + 1] = b;
    }
}

static const char *const dfccl_link_names[DFCCL_LINK_COUNT] = {"p2p", "shm", "net"};

/* The agreed values v (dfccl_profile_values') into g's model: the ring's
 * class, or each class that was measured; and the fixed cost. */
static void dfccl_profile_apply(struct dfccl_group *g, const double *v, const char *what)
{
    char line[256];
    int len = 0;

    if (!dfccl_profile_mixed(g)) {
        dfccl_group_link_set(g, g->link, v[DFCCL_PV_ALPHA], 1.0 / (v[DFCCL_PV_BYTE] * 1e3));
        g->measured_links |= 1u << g->link;
    }
    for (int l = 0; l < DFCCL_LINK_COUNT && dfccl_profile_mixed(g); l++) {
        const double a = v[DFCCL_PV_LINKS + 2 * l], b = v[DFCCL_PV_LINKS + 2 * l + 1];

        if (!(g->links & (1u << l)) || (a <= 0 && b <= 0)) {
            continue;
        }
        dfccl_group_link_set(g, l, a > 0 ? a : g->link_alpha_us[l],
                             b > 0 ? 1.0 / (b * 1e3) : g->link_beta_gbps[l]);
        g->measured_links |= 1u << l;
    }
    g->coll_us = v[DFCCL_PV_COLL];
    g->model_gen++;
    for (int l = 0; l < DFCCL_LINK_COUNT; l++) {
        if ((g->links & (1u << l)) && len < (int)sizeof(line)) {
            len += snprintf(line + len, sizeof(line) - (size_t)len, ", %s alpha %.3g us beta "
                            "%.3g GB/s%s", dfccl_link_names[l], g->link_alpha_us[l],
                            g->link_beta_gbps[l],
                            g->measured_links & (1u << l) ? "" : " (nominal)");
        }
    }
    dfccl_info("group %s: links %s%s; the ring's alpha %.3g us, beta %.3g GB/s, a collective "
               "%.3g us (generation %llu)", g->name, what, line, g->alpha_us, g->beta_gbps,
               g->coll_us, (unsigned long long)g->model_gen);
}

/* One call of registered collective `id` (an allreduce, an allgather or a
 * probe, in place on `buf`) and its wait: its microseconds in *us_p. */
static dfccl_status_t dfccl_profile_call(dfccl_group_t g, int kind, int id, void *buf,
                                         size_t share, double *us_p)
{
    dfccl_rank_ctx_t ctx = g->ctx;
    const double t0      = dfccl_profile_now_us();
    dfccl_status_t st;

    if (kind == DFCCL_KIND_ALLGATHER) {
        st = dfcclRunAllGather((char *)buf + (size_t)g->rank * share, buf, id, NULL, NULL,
                               ctx);
    } else if (kind == DFCCL_KIND_BROADCAST) {
        st = dfcclRunBroadcast(buf, buf, id, NULL, NULL, ctx);
    } else {
        st = dfcclRunAllReduce(buf, buf, id, NULL, NULL, ctx);
    }
    if (st == DFCCL_OK) {
        st = dfcclWait(id, -1, ctx);
    }
    *us_p = dfccl_profile_now_us() - t0;
    return st;
}

/* The fastest of `calls` calls (after the warmup) of measurement m's
 * collective on `buf`, in m->t_1. */
static dfccl_status_t dfccl_profile_best(dfccl_group_t g, dfccl_pm_t *m, void *buf)
{
    dfccl_coll_desc_t d;
    dfccl_status_t st, dst;
    int id;

    dfccl_pm_desc(m, 0, 0, &d, 0);
    DFCCL_CHECK(dfccl_profile_register(g, &d, dfccl_pm_probe(g, m), &id));
    st = DFCCL_OK;
    for (int i = 0; i < DFCCL_PROFILE_WARMUP + DFCCL_PROFILE_CALLS && st == DFCCL_OK; i++) {
        double us;

        st = dfccl_profile_call(g, (int)d.kind, id, buf, d.count * sizeof(float), &us);
        if (i >= DFCCL_PROFILE_WARMUP && us < m->t_1) {
            m->t_1 = us;
        }
    }
    dst = dfcclDeregister(id, g->ctx);
    return st != DFCCL_OK ? st : dst;
}

/* AdapCC's pair of measurement m: the fastest round of DFCCL_PROFILE_SPLIT
 * calls of big / SPLIT bytes in a row (m->t_k), and the fastest call of
 * `big` bytes (m->t_1). */
static dfccl_status_t dfccl_profile_split(dfccl_group_t g, dfccl_pm_t *m, void *buf, size_t big)
{
    const uint32_t probe = dfccl_pm_probe(g, m);
    dfccl_coll_desc_t d;
    double us;
    dfccl_status_t st, dst;
    int idk, id1;

    dfccl_pm_desc(m, big, 1, &d, 0);
    DFCCL_CHECK(dfccl_profile_register(g, &d, probe, &idk));
    dfccl_pm_desc(m, big, 0, &d, 0);
    st = dfccl_profile_register(g, &d, probe, &id1);
    if (st != DFCCL_OK) {
        dfcclDeregister(idk, g->ctx);
        return st;
    }
    /* a call of each to warm them, then the rounds */
    for (int r = -1; r < DFCCL_PROFILE_ROUNDS && st == DFCCL_OK; r++) {
        double sum = 0;

        for (int i = 0; i < DFCCL_PROFILE_SPLIT && st == DFCCL_OK; i++) {
            st = dfccl_profile_call(g, (int)d.kind, idk, buf, 0, &us);
            sum += us;
        }
        if (st == DFCCL_OK) {
            st = dfccl_profile_call(g, (int)d.kind, id1, buf, 0, &us);
        }
        if (r >= 0 && st == DFCCL_OK) {
            m->t_k = sum < m->t_k ? sum : m->t_k;
            m->t_1 = us < m->t_1 ? us : m->t_1;
        }
    }
    dst = dfcclDeregister(idk, g->ctx);
    if (dst == DFCCL_OK) {
        dst = dfcclDeregister(id1, g->ctx);
    }
    return st != DFCCL_OK ? st : dst;
}

/* The worst of every rank's `v` (DFCCL_PROFILE_WORDS doubles, through
 * `buf`), in v. */
static dfccl_status_t dfccl_profile_agree(dfccl_group_t g, void *buf, double *v)
{
    dfccl_coll_desc_t d  = {DFCCL_KIND_ALLREDUCE, DFCCL_PROFILE_WORDS, DFCCL_FLOAT64, DFCCL_MAX,
                            0, 0, DFCCL_ALGO_RING, 0, 0};
    dfccl_rank_ctx_t ctx = g->ctx;
    dfccl_status_t st, dst;
    double us;
    int id;

    DFCCL_CHECK(ctx->be->memcpy_h2d(ctx, buf, v, DFCCL_PROFILE_WORDS * sizeof(double)));
    DFCCL_CHECK(dfccl_profile_register(g, &d, 0, &id));
    st  = dfccl_profile_call(g, DFCCL_KIND_ALLREDUCE, id, buf, 0, &us);
    dst = dfcclDeregister(id, ctx);
    if (st == DFCCL_OK) {
        st = dst;
    }
    if (st == DFCCL_OK) {
        st = ctx->be->memcpy_d2h(ctx, v, buf, DFCCL_PROFILE_WORDS * sizeof(double));
    }
    return st;
}

dfccl_status_t dfccl_profile_group(struct dfccl_group *g)
{
    dfccl_rank_ctx_t ctx = g->ctx;
    const size_t big     = dfccl_profile_big(ctx);
    const double t0      = dfccl_profile_now_us();
    double v[DFCCL_PROFILE_WORDS];
    dfccl_pm_t pm[DFCCL_PM_MAX];
    void *buf = NULL, *word = NULL;
    dfccl_status_t st;
    int npm;

    if (g->nranks < 2) {
        return DFCCL_OK;
    }
    npm = dfccl_profile_plan(g, pm);
    /* A rank that cannot have the large buffer says so before anything
     * waits for it (through a buffer of a few bytes), and no rank
     * measures: the group keeps its values. */
    memset(v, 0, sizeof(v));
    st = ctx->be->dev_alloc(ctx, sizeof(v), &word);
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
    for (int i = 0; i < npm && st == DFCCL_OK; i++) {
        st = dfccl_pm_split(&pm[i]) ? dfccl_profile_split(g, &pm[i], buf, big)
                                    : dfccl_profile_best(g, &pm[i], buf);
        dfccl_debug("group %s: profile measurement %d (class %d) t_k %.1f t_1 %.1f us, at "
                    "%.1f ms", g->name, pm[i].what, pm[i].link, pm[i].t_k, pm[i].t_1,
                    (dfccl_profile_now_us() - t0) / 1e3);
    }
    if (st == DFCCL_OK) {
        dfccl_profile_values(g, big, pm, npm, v);
        st = dfccl_profile_agree(g, word, v);
    }
    if (st == DFCCL_OK) {
        dfccl_profile_apply(g, v, "measured");
        dfccl_debug("group %s: the profile took %.1f ms", g->name,
                    (dfccl_profile_now_us() - t0) / 1e3);
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

/* the refreshes' collectives at most: two a measurement, and the
 * agreement's */
#define DFCCL_RF_NCOLL (2 * DFCCL_PM_MAX + 1)
/* where a group's refresh stands */
enum { DFCCL_RF_IDLE = 0, DFCCL_RF_MEASURE, DFCCL_RF_AGREE, DFCCL_RF_FAILED };

/* The calls of a refresh, in order: those of each measurement of
 * dfccl_profile_plan, as at creation: a pair's rounds (a warm one first),
 * or the calls of which the fastest counts (after the warmup); then the
 * agreement. */
#define DFCCL_RF_SPLIT_CALLS ((DFCCL_PROFILE_ROUNDS + 1) * (DFCCL_PROFILE_SPLIT + 1))
#define DFCCL_RF_BEST_CALLS  (DFCCL_PROFILE_WARMUP + DFCCL_PROFILE_CALLS)

typedef struct {
    double   v[DFCCL_PROFILE_WORDS];
    uint64_t at; /* the registration (g->nreg) from which they apply */
} dfccl_rf_pending_t;

/* A group's refreshes; every field under ctx->lock. */
struct dfccl_refresh {
    dfccl_pm_t          pm[DFCCL_PM_MAX]; /* the measurements and their times */
    int                 npm;
    int                 ids[DFCCL_RF_NCOLL]; /* each measurement's (a pair's: its k
                                              * calls' then its large one), the
                                              * agreement's last */
    int                 nids;
    int                 calls; /* the measurements' calls, all of them */
    void               *buf;   /* the large buffer */
    void               *word;  /* the agreement's doubles */
    uint64_t            done;  /* collectives of the group completed (counted) */
    uint64_t            started, finished;
    int                 state; /* DFCCL_RF_* */
    int                 step;  /* the call in flight */
    int                 held;  /* dfcclGroupProfile runs: nothing is counted */
    uint64_t            t0_ns;
    uint64_t            seen;  /* one past the last registration let through */
    dfccl_rf_pending_t *pend;  /* agreed, not in effect yet, oldest first */
    int                 npend, cap;
};

/* Where call `step` of a refresh is: its measurement (*m_p), the call's
 * index within it (*i_p) and its collective's index in rf->ids; -1 for
 * the agreement. */
static int dfccl_rf_where(const struct dfccl_refresh *rf, int step, int *m_p, int *i_p)
{
    int id = 0;

    for (int m = 0; m < rf->npm; m++) {
        const int split = dfccl_pm_split(&rf->pm[m]);
        const int calls = split ? DFCCL_RF_SPLIT_CALLS : DFCCL_RF_BEST_CALLS;

        if (step < calls) {
            *m_p = m;
            *i_p = step;
            return id + (split && step % (DFCCL_PROFILE_SPLIT + 1) == DFCCL_PROFILE_SPLIT);
        }
        step -= calls;
        id += split ? 2 : 1;
    }
    *m_p = *i_p = -1;
    return -1;
}

static void dfccl_rf_callback(int id, dfccl_status_t status, void *arg);

static int dfccl_rf_owns(const struct dfccl_refresh *rf, int id)
{
    for (int i = 0; i < rf->nids; i++) {
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
    for (int m = 0; m < rf->npm; m++) {
        rf->pm[m].t_k = rf->pm[m].t_1 = INFINITY;
    }
    return 1;
}

/* Submit the call of rf->step (no lock held); a failure ends the refreshes
 * of the group on this rank. */
static void dfccl_rf_submit(struct dfccl_group *g)
{
    struct dfccl_refresh *rf = g->refresh;
    dfccl_rank_ctx_t ctx     = g->ctx;
    dfccl_status_t st;
    int step, which, m, i, what;

    pthread_mutex_lock(&ctx->lock);
    step      = rf->step;
    rf->t0_ns = dfccl_time_ns();
    which     = dfccl_rf_where(rf, step, &m, &i);
    what      = m >= 0 ? rf->pm[m].what : -1;
    pthread_mutex_unlock(&ctx->lock);
    if (m < 0) {
        st = dfcclRunAllReduce(rf->word, rf->word, rf->ids[rf->nids - 1], dfccl_rf_callback, g,
                               ctx);
    } else if (what == DFCCL_PM_AG) {
        st = dfcclRunAllGather((char *)rf->buf + (size_t)g->rank * sizeof(float), rf->buf,
                               rf->ids[which], dfccl_rf_callback, g, ctx);
    } else if (what >= DFCCL_PM_EMPTY) {
        st = dfcclRunBroadcast(rf->buf, rf->buf, rf->ids[which], dfccl_rf_callback, g, ctx);
    } else {
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
    int m, i;
    dfccl_pm_t *pm;

    dfccl_rf_where(rf, step, &m, &i);
    if (m < 0) {
        return;
    }
    pm = &rf->pm[m];
    if (dfccl_pm_split(pm)) {
        const int round = i / (DFCCL_PROFILE_SPLIT + 1) - 1;
        const int call  = i % (DFCCL_PROFILE_SPLIT + 1);

        if (call < DFCCL_PROFILE_SPLIT) {
            pm->sum = call == 0 ? us : pm->sum + us;
        } else if (round >= 0) {
            pm->t_k = pm->sum < pm->t_k ? pm->sum : pm->t_k;
            pm->t_1 = us < pm->t_1 ? us : pm->t_1;
        }
    } else if (i >= DFCCL_PROFILE_WARMUP && us < pm->t_1) {
        pm->t_1 = us;
    }
}

/* Each call's completion: the next call, the agreement, or its values. */
static void dfccl_rf_callback(int id, dfccl_status_t status, void *arg)
{
    struct dfccl_group *g    = arg;
    struct dfccl_refresh *rf = g->refresh;
    dfccl_rank_ctx_t ctx     = g->ctx;
    const double us          = (double)dfccl_since(dfccl_time_ns(), rf->t0_ns) / 1e3;
    double v[DFCCL_PROFILE_WORDS];
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
            rf->pend[rf->npend++].at = (uint64_t)v[DFCCL_PV_AT];
            rf->finished++;
            rf->state = DFCCL_RF_IDLE;
            dfccl_debug("group %s: refresh %llu agreed, from registration %llu on", g->name,
                        (unsigned long long)rf->finished, (unsigned long long)v[DFCCL_PV_AT]);
            next = dfccl_rf_due(g);
        } else {
            rf->state = DFCCL_RF_FAILED;
        }
    } else {
        dfccl_rf_record(rf, rf->step, us);
        if (++rf->step == rf->calls) {
            /* the agreement: the values, and the registrations this rank
             * has made or has under way (a registration let through by
             * dfccl_refresh_register that has not counted yet) */
            for (int m = 0; m < rf->npm; m++) {
                dfccl_debug("group %s: refresh %llu measurement %d (class %d) t_k %.1f t_1 "
                            "%.1f us", g->name, (unsigned long long)rf->started,
                            rf->pm[m].what, rf->pm[m].link, rf->pm[m].t_k, rf->pm[m].t_1);
            }
            dfccl_profile_values(g, dfccl_profile_big(ctx), rf->pm, rf->npm, v);
            v[DFCCL_PV_AT] = (double)(g->nreg > rf->seen ? g->nreg : rf->seen);
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

/* The refreshes' collectives and memory on g, in registration order (the
 * same on every rank: the plan's, the agreement's last), with the lowest
 * priority. */
static dfccl_status_t dfccl_rf_create(struct dfccl_group *g)
{
    dfccl_rank_ctx_t ctx     = g->ctx;
    const size_t big         = dfccl_profile_big(ctx);
    const dfccl_coll_desc_t word = {DFCCL_KIND_ALLREDUCE, DFCCL_PROFILE_WORDS, DFCCL_FLOAT64,
                                    DFCCL_MAX, 0, INT32_MIN, DFCCL_ALGO_RING, 0, 0};
    struct dfccl_refresh *rf = calloc(1, sizeof(*rf));
    dfccl_status_t st        = rf != NULL ? DFCCL_OK : DFCCL_ERR_NO_MEMORY;
    dfccl_coll_desc_t d;

    if (st != DFCCL_OK) {
        return dfccl_error(st, "group %s: out of host memory", g->name);
    }
    rf->npm = dfccl_profile_plan(g, rf->pm);
    for (int m = 0; m < rf->npm && st == DFCCL_OK; m++) {
        const uint32_t probe = dfccl_pm_probe(g, &rf->pm[m]);
        const int split      = dfccl_pm_split(&rf->pm[m]);

        rf->calls += split ? DFCCL_RF_SPLIT_CALLS : DFCCL_RF_BEST_CALLS;
        for (int large = !split; large < 2 && st == DFCCL_OK; large++) {
            dfccl_pm_desc(&rf->pm[m], big, !large, &d, INT32_MIN);
            st = dfccl_profile_register(g, &d, probe, &rf->ids[rf->nids]);
            rf->nids += st == DFCCL_OK;
        }
    }
    if (st == DFCCL_OK) {
        st = dfccl_profile_register(g, &word, 0, &rf->ids[rf->nids]);
        rf->nids += st == DFCCL_OK;
    }
    if (st == DFCCL_OK) {
        st = ctx->be->dev_alloc(ctx, big, &rf->buf);
    }
    if (st == DFCCL_OK) {
        st = ctx->be->dev_alloc(ctx, DFCCL_PROFILE_WORDS * sizeof(double), &rf->word);
    }
    if (st != DFCCL_OK) {
        const char *msg = dfcclGetLastErrorMessage();
        char why[512];

        snprintf(why, sizeof(why), "%s", msg);
        while (rf->nids-- > 0) {
            dfcclDeregister(rf->ids[rf->nids], ctx);
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
    int ids[DFCCL_RF_NCOLL], nids;

    pthread_mutex_lock(&ctx->lock);
    rf = g->refresh;
    if (rf == NULL || g->ncolls > rf->nids) {
        pthread_mutex_unlock(&ctx->lock);
        return DFCCL_OK; /* dfcclGroupDestroy says what is still registered */
    }
    st = dfccl_rf_finish(g, "dfcclGroupDestroy");
    memcpy(ids, rf->ids, sizeof(ids));
    nids = rf->nids;
    pthread_mutex_unlock(&ctx->lock);
    for (int i = 0; i < nids && st == DFCCL_OK; i++) {
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
    info.generation     = g->model_gen;
    info.measured_links = g->measured_links;
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
