/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fault exclusion (dfcclGroupSetFaultPolicy, DFCCL_FAULT_EXCLUDE): when a
 * rank of such a group dies, the survivors go on without it instead of
 * aborting their contexts. The health check finds the dead process (or an
 * exclusion another survivor has decided) and marks the group; from the
 * progress loop this file then
 *
 *   1. agrees on the ranks that are gone: the first survivor to swap its
 *      set into the word of rank 0's directory decides, the others adopt it;
 *   2. gives up the group's runs in flight: their static contexts say
 *      `cancelled`, and each daemon block that finds one stuck drops it
 *      with a CQE that says so (a run that all its blocks complete stands,
 *      and completes as usual); runs not submitted yet are held;
 *   3. waits until the daemon has let go of every one of them, then builds
 *      the group of the survivors through the group's directories (an
 *      allgather of the bootstrap's exchanges, since the survivors all map
 *      them), with the ranks in their old order;
 *   4. deregisters the group's collectives, swaps the new group into the
 *      user's handle, registers the collectives again in registration
 *      order under the same ids, and runs the held runs again from their
 *      inputs. A held run that another survivor completed before the death
 *      was seen, or that ran in place (its input may be overwritten), or
 *      whose root is gone, fails with DFCCL_ERR_ABORTED instead.
 *
 * Only groups whose ranks share one host: the dead-process check and the
 * directories are what the survivors agree through.
 */
#include "dfccl_int.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Static_assert(DFCCL_DIR_XBYTES >= DFCCL_NET_ADDR_MAX, "a bootstrap exchange fits a slot");

#define DFCCL_FAULT_MARK (1ull << 63)

/* Why g cannot exclude failed ranks, in words; NULL if it can. */
static const char *dfccl_fault_unfit(const struct dfccl_group *g)
{
    for (int r = 0; r < g->nranks; r++) {
        if (!g->same_host[r]) {
            return "a rank on another host";
        }
    }
    if (g->net || g->pool.dir == NULL) {
        return g->nranks > 1 ? "net (UCX) edges" : "one rank";
    }
    return g->nranks > 63 ? "more than 63 ranks" : NULL;
}

/* Set g's policy (valid); EXCLUDE where g cannot take it: the reason. */
static const char *dfccl_fault_set(struct dfccl_group *g, dfccl_fault_policy_t policy,
                                   dfccl_status_t *st_p)
{
    struct dfccl_rank_ctx *ctx = g->ctx;
    const char *why            = NULL;

    *st_p = DFCCL_OK;
    pthread_mutex_lock(&ctx->lock);
    if (policy == DFCCL_FAULT_EXCLUDE) {
        why = dfccl_fault_unfit(g);
        if (why == NULL && ctx->fault_held == NULL) {
            ctx->fault_held = calloc((size_t)ctx->cfg.max_colls, 1);
            if (ctx->fault_held == NULL) {
                why   = "out of host memory";
                *st_p = DFCCL_ERR_NO_MEMORY;
            }
        } else if (why != NULL) {
            *st_p = DFCCL_ERR_UNSUPPORTED;
        }
    }
    if (why == NULL) {
        g->fault_policy = policy;
    }
    pthread_mutex_unlock(&ctx->lock);
    return why;
}

dfccl_status_t dfcclGroupSetFaultPolicy(dfccl_group_t g, dfccl_fault_policy_t policy)
{
    dfccl_status_t st;
    const char *why;

    if (g == NULL || (policy != DFCCL_FAULT_ABORT && policy != DFCCL_FAULT_EXCLUDE)) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclGroupSetFaultPolicy: group must not be "
                           "NULL and policy DFCCL_FAULT_ABORT or DFCCL_FAULT_EXCLUDE");
    }
    why = dfccl_fault_set(g, policy, &st);
    if (st == DFCCL_ERR_NO_MEMORY) {
        return dfccl_error(st, "dfcclGroupSetFaultPolicy: out of host memory");
    }
    if (why != NULL) {
        return dfccl_error(DFCCL_ERR_UNSUPPORTED, "dfcclGroupSetFaultPolicy(%s): fault "
                           "exclusion needs every rank of the group on this host (no net "
                           "edge) and at most 63 ranks, and this group has %s; the group "
                           "keeps the default, DFCCL_FAULT_ABORT", g->name, why);
    }
    return DFCCL_OK;
}

void dfccl_fault_group_born(struct dfccl_group *g)
{
    dfccl_status_t st;
    const char *why;

    if (g->ctx->cfg.fault_policy != DFCCL_FAULT_EXCLUDE || g->nranks < 2) {
        return;
    }
    why = dfccl_fault_set(g, DFCCL_FAULT_EXCLUDE, &st);
    if (why != NULL) {
        dfccl_info("group %s: DFCCL_FAULT_POLICY=exclude does not apply to it (it has %s): "
                   "it aborts when a rank dies", g->name, why);
    }
}

dfccl_status_t dfcclGroupExcluded(dfccl_group_t g, int *ranks, int *nexcluded_p)
{
    int n = 0;

    if (g == NULL || nexcluded_p == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclGroupExcluded: group and nexcluded_p "
                           "must not be NULL");
    }
    pthread_mutex_lock(&g->ctx->lock);
    for (int r = 0; r < 64; r++) {
        if ((g->excl_mask >> r) & 1) {
            if (ranks != NULL) {
                ranks[n] = r;
            }
            n++;
        }
    }
    pthread_mutex_unlock(&g->ctx->lock);
    *nexcluded_p = n;
    return DFCCL_OK;
}

/* ---- the survivors' exchanges, through the directories ------------------ */

typedef struct {
    struct dfccl_group *g;
    const int          *surv; /* the survivors, old ranks in order */
    int                 ns;
    uint64_t            k;    /* exchanges so far */
    uint64_t            deadline_ns; /* 0: none */
} dfccl_fault_xchg_t;

/* Wait until survivor i's directory says `seq` or more; an error when its
 * process is gone or the deadline passed. */
static dfccl_status_t dfccl_fault_wait_seq(dfccl_fault_xchg_t *x, int i, uint64_t seq)
{
    struct dfccl_group *g = x->g;
    const int r           = x->surv[i];
    const dfccl_dir_t *d  = dfccl_pool_dir_of(g, r);

    for (uint32_t n = 0; __atomic_load_n(&d->xseq, __ATOMIC_ACQUIRE) < seq; n++) {
        if ((n & 1023u) == 1023u) {
            if (r != g->rank && kill(g->pids[r], 0) != 0 && errno == ESRCH) {
                return dfccl_error(DFCCL_ERR_ABORTED, "group %s: rank %d (process %d) died "
                                   "while the survivors of rank(s) excluded before built "
                                   "their group; a second failure during an exclusion is not "
                                   "survived", g->name, r, g->pids[r]);
            }
            if (x->deadline_ns != 0 && dfccl_time_ns() > x->deadline_ns) {
                return dfccl_error(DFCCL_ERR_TIMEOUT, "group %s: rank %d did not join the "
                                   "exclusion of the failed rank(s) within %g s "
                                   "(DFCCL_TIMEOUT); its dfccl progress may not run (explicit "
                                   "progress mode and no dfcclProgress or dfcclWait calls)",
                                   g->name, r, g->ctx->cfg.timeout_s);
            }
            usleep(100);
        } else {
            sched_yield();
        }
    }
    return DFCCL_OK;
}

/* An allgather of `bytes` among the survivors, in survivor order. */
static dfccl_status_t dfccl_fault_allgather(dfccl_fault_xchg_t *x, const void *send, void *all,
                                            size_t bytes)
{
    dfccl_dir_t *me = x->g->pool.dir;
    const uint64_t k = ++x->k;
    dfccl_status_t st;

    /* xbuf[k % 2] held exchange k - 2: everyone has read it once they
     * have published k - 1 */
    for (int i = 0; i < x->ns; i++) {
        DFCCL_CHECK(dfccl_fault_wait_seq(x, i, k - 1));
    }
    memcpy(me->xbuf[k % 2], send, bytes);
    __atomic_store_n(&me->xseq, k, __ATOMIC_RELEASE);
    for (int i = 0; i < x->ns; i++) {
        st = dfccl_fault_wait_seq(x, i, k);
        if (st != DFCCL_OK) {
            return st;
        }
        memcpy((char *)all + (size_t)i * bytes,
               dfccl_pool_dir_of(x->g, x->surv[i])->xbuf[k % 2], bytes);
    }
    return DFCCL_OK;
}

/* The group of the survivors, through their directories. */
static dfccl_status_t dfccl_fault_boot(dfccl_fault_xchg_t *x, int newrank,
                                       struct dfccl_group **g_p)
{
    dfccl_group_boot_t b;
    dfccl_status_t st;
    void *all;

    all = malloc((size_t)x->ns * DFCCL_DIR_XBYTES);
    if (all == NULL) {
        return dfccl_error(DFCCL_ERR_NO_MEMORY, "fault exclusion: out of host memory");
    }
    st = dfcclGroupBootStart(x->g->ctx, x->ns, newrank, x->g->name, &b);
    if (st != DFCCL_OK) {
        free(all);
        return st;
    }
    do {
        const void *send;
        size_t bytes;

        dfcclGroupBootExchange(b, &send, &bytes);
        if (bytes > DFCCL_DIR_XBYTES) {
            st = dfccl_error(DFCCL_ERR_INTERNAL, "fault exclusion: an exchange of %zu bytes",
                             bytes);
            break;
        }
        st = dfccl_fault_allgather(x, send, all, bytes);
        if (st != DFCCL_OK) {
            break;
        }
        st = dfcclGroupBootStep(b, all, g_p);
    } while (st == DFCCL_INPROGRESS);
    dfcclGroupBootFree(b);
    free(all);
    return st;
}

/* ---- the exclusion ------------------------------------------------------ */

/* A collective of the group, as it is registered again. */
typedef struct {
    int              id;
    int              kind, dtype, op, root, priority;
    size_t           count;
    uint64_t         reg;   /* its registration on the old group */
    uint64_t         run;   /* the run held, 0: none */
    const void      *send;
    void            *recv;
    dfccl_callback_t cb;
    void            *arg;
    int              fail;  /* the held run fails: why, in `why` */
    int              again; /* registered again on the survivors */
    char             why[384];
} dfccl_fault_coll_t;

static int dfccl_fault_coll_cmp(const void *a, const void *b)
{
    const dfccl_fault_coll_t *x = a, *y = b;

    return x->reg < y->reg ? -1 : x->reg > y->reg;
}

/* Bytes of a collective's send and receive buffers on a rank of n. */
static void dfccl_fault_spans(const dfccl_fault_coll_t *f, int n, size_t *s_p, size_t *r_p)
{
    const size_t e = dfccl_dtype_bytes(f->dtype) * f->count;

    *s_p = *r_p = e;
    if (f->kind == DFCCL_COLL_ALLGATHER) {
        *r_p = e * (size_t)n;
    } else if (f->kind == DFCCL_COLL_REDUCESCATTER) {
        *s_p = e * (size_t)n;
    } else if (f->kind == DFCCL_COLL_ALLTOALL) {
        *s_p = *r_p = e * (size_t)n;
    }
}

/*
 * Step 1 and 2 for group g (ctx->lock held): agree on the dead, give up
 * the runs in flight. Returns the excluded ranks (bits of g's ranks).
 */
static uint64_t dfccl_fault_cancel(struct dfccl_rank_ctx *ctx, struct dfccl_group *g)
{
    dfccl_dir_t *d0 = (dfccl_dir_t *)dfccl_pool_dir_of(g, 0);
    uint64_t dead = 0, word = 0;
    char list[256];
    size_t o = 0;

    for (int r = 0; r < g->nranks; r++) {
        if (r != g->rank && kill(g->pids[r], 0) != 0 && errno == ESRCH &&
            !dfccl_group_rank_left(g, r)) {
            dead |= 1ull << r;
        }
    }
    if (!__atomic_compare_exchange_n(&d0->excluded, &word, dead | DFCCL_FAULT_MARK, 0,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        dead = word & ~DFCCL_FAULT_MARK; /* another survivor decided */
    }
    list[0] = '\0';
    for (int r = 0; r < g->nranks; r++) {
        if ((dead >> r) & 1) {
            o += (size_t)snprintf(list + o, o < sizeof(list) ? sizeof(list) - o : 0, "%s%d",
                                  o ? ", " : "", g->orig_rank != NULL ? g->orig_rank[r] : r);
            dfccl_pool_unlink_dead(g, r);
        }
    }
    for (int id = 0; id < ctx->cfg.max_colls; id++) {
        dfccl_coll_t *c = &ctx->colls[id];
        const uint64_t one = 1;

        if (c->state != DFCCL_COLL_INFLIGHT || c->group != g || c->fault != DFCCL_CFAULT_NONE) {
            continue;
        }
        if (c->deferred) {
            c->deferred = 0;
            ctx->ndeferred--;
            c->fault = DFCCL_CFAULT_HELD;
            continue;
        }
        c->fault     = DFCCL_CFAULT_CANCEL;
        c->fault_cut = 0;
        ctx->be->memcpy_h2d(ctx, (void *)&ctx->args.colls[id].cancelled, &one, sizeof(one));
        ctx->ncancels++;
    }
    /* after the words it counts: a block that reads it nonzero looks */
    ctx->be->memcpy_h2d(ctx, ctx->args.cancels, &ctx->ncancels, sizeof(ctx->ncancels));
    if (dfccl_log_level >= 0) {
        const int many = __builtin_popcountll(dead) > 1;
        fprintf(stderr, "dfccl[%d]: group %s: rank%s %s (of the group as created) %s exited; "
                "the group goes on without %s (DFCCL_FAULT_EXCLUDE), its collectives over the "
                "survivors\n", (int)getpid(), g->name, many ? "s" : "", list[0] ? list : "?",
                many ? "have" : "has", many ? "them" : "it");
    }
    dfccl_ctx_maybe_launch(ctx, 1);
    return dead;
}

/* Has every collective of g let go of the daemon? ctx->lock held. */
static int dfccl_fault_quiet(struct dfccl_rank_ctx *ctx, struct dfccl_group *g)
{
    for (int id = 0; id < ctx->cfg.max_colls; id++) {
        const dfccl_coll_t *c = &ctx->colls[id];
        if (c->state == DFCCL_COLL_FREE || c->group != g) {
            continue;
        }
        if (c->state == DFCCL_COLL_COMPLETING || c->state == DFCCL_COLL_CLOSING ||
            (c->state == DFCCL_COLL_INFLIGHT && c->fault != DFCCL_CFAULT_HELD)) {
            return 0;
        }
    }
    return 1;
}

/* Did a survivor (not us) complete run `run` of registration `reg` of g? */
static int dfccl_fault_done_elsewhere(struct dfccl_group *g, uint64_t dead, uint64_t reg,
                                      uint64_t run, int *who_p)
{
    for (int r = 0; r < g->nranks; r++) {
        dfccl_dir_reg_t rr;
        if (r == g->rank || ((dead >> r) & 1)) {
            continue;
        }
        if (dfccl_dir_read_reg(dfccl_pool_dir_of(g, r), reg, &rr) && rr.done >= run) {
            *who_p = r;
            return 1;
        }
    }
    return 0;
}

/* Steps 3 and 4 for group g, whose runs have all let go (no lock held). */
static dfccl_status_t dfccl_fault_shrink(struct dfccl_rank_ctx *ctx, struct dfccl_group *g,
                                         uint64_t dead)
{
    const int n = g->nranks;
    int *surv, ns = 0, newrank = -1, nf = 0, *orig = NULL;
    dfccl_fault_coll_t *fc;
    dfccl_fault_xchg_t x;
    struct dfccl_group *ng = NULL, tmp, *gn, *ngn;
    dfccl_status_t st;

    surv = malloc((size_t)n * sizeof(int));
    fc   = malloc((size_t)ctx->cfg.max_colls * sizeof(*fc));
    orig = malloc((size_t)n * sizeof(int));
    if (surv == NULL || fc == NULL || orig == NULL) {
        st = dfccl_error(DFCCL_ERR_NO_MEMORY, "fault exclusion: out of host memory");
        goto out;
    }
    for (int r = 0; r < n; r++) {
        if (!((dead >> r) & 1)) {
            if (r == g->rank) {
                newrank = ns;
            }
            orig[ns]   = g->orig_rank != NULL ? g->orig_rank[r] : r;
            surv[ns++] = r;
        }
    }
    if (newrank < 0) {
        st = dfccl_error(DFCCL_ERR_INTERNAL, "fault exclusion: this rank is among the excluded");
        goto out;
    }

    /* 3. the group of the survivors; after its first exchange every
     * survivor has let go of its runs, so what each completed is final */
    memset(&x, 0, sizeof(x));
    x.g    = g;
    x.surv = surv;
    x.ns   = ns;
    if (ctx->cfg.timeout_s > 0) {
        x.deadline_ns = dfccl_time_ns() + (uint64_t)(ctx->cfg.timeout_s * 1e9);
    }
    st = dfccl_fault_boot(&x, newrank, &ng);
    if (st != DFCCL_OK) {
        goto out;
    }

    /* 4. what the group registered and held, in registration order */
    pthread_mutex_lock(&ctx->lock);
    for (int id = 0; id < ctx->cfg.max_colls; id++) {
        dfccl_coll_t *c = &ctx->colls[id];
        dfccl_fault_coll_t *f;
        size_t sb, rb;
        int who;

        if (c->state == DFCCL_COLL_FREE || c->group != g) {
            continue;
        }
        f = &fc[nf++];
        memset(f, 0, sizeof(*f));
        f->id       = id;
        f->kind     = (int)c->st.kind;
        f->dtype    = (int)c->st.dtype;
        f->op       = (int)c->st.op;
        f->root     = (int)c->st.root;
        f->priority = (int)c->st.priority;
        f->count    = (size_t)c->st.count;
        f->reg      = c->sig[6];
        ctx->fault_held[id] = 1;
        if (c->state != DFCCL_COLL_INFLIGHT) {
            continue;
        }
        f->run  = c->runs;
        f->send = c->pend_send;
        f->recv = c->pend_recv;
        f->cb   = c->callback;
        f->arg  = c->callback_arg;
        dfccl_fault_spans(f, n, &sb, &rb);
        if (dfccl_fault_done_elsewhere(g, dead, f->reg, f->run, &who)) {
            f->fail = 1;
            snprintf(f->why, sizeof(f->why), "rank %d completed this run before the failure "
                     "was seen, with the failed rank's data, which this rank cannot get any "
                     "more", g->orig_rank != NULL ? g->orig_rank[who] : who);
        } else if ((f->kind == DFCCL_COLL_REDUCE || f->kind == DFCCL_COLL_BROADCAST) &&
                   ((dead >> f->root) & 1)) {
            f->fail = 1;
            snprintf(f->why, sizeof(f->why), "its root, rank %d, is gone", f->root);
        } else if (f->kind != DFCCL_COLL_BROADCAST && f->send != NULL && f->recv != NULL &&
                   (const char *)f->send < (const char *)f->recv + rb &&
                   (const char *)f->recv < (const char *)f->send + sb) {
            f->fail = 1;
            snprintf(f->why, sizeof(f->why), "it ran in place, and its input may be "
                     "overwritten already; run collectives of fault-excluding groups out of "
                     "place to have them run again");
        }
        /* let go of the old registration */
        c->state = DFCCL_COLL_IDLE;
        c->fault = DFCCL_CFAULT_NONE;
        ctx->inflight--;
    }
    pthread_mutex_unlock(&ctx->lock);
    qsort(fc, (size_t)nf, sizeof(*fc), dfccl_fault_coll_cmp);
    for (int i = 0; i < nf; i++) {
        dfccl_error_quiet(1);
        dfcclDeregister(fc[i].id, ctx);
        dfccl_error_quiet(0);
    }

    /* the user's handle becomes the survivors' group; the old one goes */
    pthread_mutex_lock(&ctx->lock);
    gn  = g->next;
    ngn = ng->next;
    tmp = *g;
    *g  = *ng;
    *ng = tmp;
    g->next  = gn;
    ng->next = ngn;
    g->fault_policy = DFCCL_FAULT_EXCLUDE;
    g->fault_state  = DFCCL_GFAULT_NONE; /* runs from here on go to the survivors */
    /* the refreshes' collectives are registered again under their ids
     * (none runs on an excluding group); the model is the new group's */
    g->refresh      = ng->refresh;
    ng->refresh     = NULL;
    g->model_gen    = ng->model_gen + 1;
    g->orig_nranks  = ng->orig_nranks != 0 ? ng->orig_nranks : n;
    g->orig_rank    = orig;
    orig            = NULL;
    g->excl_mask    = ng->excl_mask;
    for (int r = 0; r < n; r++) {
        if ((dead >> r) & 1) {
            g->excl_mask |= 1ull << (ng->orig_rank != NULL ? ng->orig_rank[r] : r);
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    dfcclGroupDestroy(ng);

    /* the same collectives, same ids, same order on every survivor; then
     * their runs (a callback may run another of them: all are registered
     * by then) */
    for (int i = 0; i < nf; i++) {
        dfccl_fault_coll_t *f = &fc[i];
        int id = -1, root = f->root;

        for (int r = 0; r < f->root; r++) {
            root -= (int)((dead >> r) & 1);
        }
        if ((f->kind == DFCCL_COLL_REDUCE || f->kind == DFCCL_COLL_BROADCAST) &&
            ((dead >> f->root) & 1)) {
            snprintf(f->why, sizeof(f->why), "its root is gone");
        } else if (f->kind == DFCCL_COLL_ALLTOALLV) {
            snprintf(f->why, sizeof(f->why), "an alltoallv's counts name the ranks of the "
                     "group before the exclusion: register it again");
        } else {
            dfccl_coll_want_id = f->id;
            st = dfccl_coll_register(g, f->kind, f->count, f->dtype, f->op, root, f->priority,
                                     NULL, DFCCL_ALGO_AUTO, &id);
            dfccl_coll_want_id = -1;
            if (st != DFCCL_OK || id != f->id) {
                snprintf(f->why, sizeof(f->why), "%s", dfcclGetLastErrorMessage());
            } else {
                f->again = 1;
            }
        }
    }
    for (int i = 0; i < nf; i++) {
        dfccl_fault_coll_t *f = &fc[i];

        pthread_mutex_lock(&ctx->lock);
        if (!f->again) {
            /* it cannot run on the survivors: its id is free now */
            ctx->fault_held[f->id] = 0;
            pthread_mutex_unlock(&ctx->lock);
            if (dfccl_log_level >= 0) {
                fprintf(stderr, "dfccl[%d]: group %s: collective %d (%s) is not registered "
                        "again on the survivors: %s\n", (int)getpid(), g->name, f->id,
                        dfccl_coll_name(f->kind), f->why);
            }
            if (f->run != 0 && f->cb != NULL) {
                f->cb(f->id, DFCCL_ERR_ABORTED, f->arg);
            }
            continue;
        }
        if (f->run == 0) {
            ctx->fault_held[f->id] = 0;
            pthread_mutex_unlock(&ctx->lock);
        } else if (f->fail) {
            dfccl_coll_t *c = &ctx->colls[f->id];
            char msg[640];
            char label[192];

            dfccl_coll_label(ctx, f->id, label, sizeof(label));
            snprintf(msg, sizeof(msg), "%s: the run in flight when rank(s) were excluded "
                     "cannot run again on the survivors: %s", label, f->why);
            ctx->fault_held[f->id] = 0;
            c->state        = DFCCL_COLL_INFLIGHT;
            c->callback     = f->cb;
            c->callback_arg = f->arg;
            c->fail_remote  = 1;
            c->errmsg       = strdup(msg);
            ctx->inflight++;
            pthread_mutex_unlock(&ctx->lock);
            dfccl_print_error(msg);
            dfccl_ctx_complete(ctx, f->id, DFCCL_ERR_ABORTED);
        } else {
            ctx->fault_held[f->id] = 2; /* the next run is this one */
            pthread_mutex_unlock(&ctx->lock);
            st = dfcclRun(f->send, f->recv, f->id, f->cb, f->arg, ctx);
            if (st != DFCCL_OK) {
                pthread_mutex_lock(&ctx->lock);
                ctx->fault_held[f->id] = 0;
                pthread_mutex_unlock(&ctx->lock);
                if (f->cb != NULL) {
                    f->cb(f->id, st, f->arg);
                }
            }
        }
    }
    st = DFCCL_OK;
out:
    free(orig);
    free(fc);
    free(surv);
    return st;
}

void dfccl_fault_progress(struct dfccl_rank_ctx *ctx)
{
    struct dfccl_group *g;
    uint64_t dead = 0;
    dfccl_status_t st;
    char msg[1024];

    pthread_mutex_lock(&ctx->lock);
    for (g = ctx->groups; g != NULL; g = g->next) {
        if (g->fault_state == DFCCL_GFAULT_FOUND) {
            g->excl_pending = dfccl_fault_cancel(ctx, g);
            g->fault_state  = DFCCL_GFAULT_CANCEL;
        }
    }
    /* One group at a time, the first of the context's list (the same on
     * every survivor when the groups were created in the same order): a
     * survivor that waited for its peers in one group's exchanges while
     * they waited in another's would wait for ever. */
    for (g = ctx->groups; g != NULL && g->fault_state == DFCCL_GFAULT_NONE; g = g->next) {
    }
    if (g == NULL || g->fault_state != DFCCL_GFAULT_CANCEL || ctx->aborted ||
        !dfccl_fault_quiet(ctx, g)) {
        pthread_mutex_unlock(&ctx->lock);
        return;
    }
    g->fault_state = DFCCL_GFAULT_SHRINK; /* this thread builds it */
    dead           = g->excl_pending;
    pthread_mutex_unlock(&ctx->lock);
    st = dfccl_fault_shrink(ctx, g, dead);
    pthread_mutex_lock(&ctx->lock);
    if (g->fault_state == DFCCL_GFAULT_SHRINK) {
        g->fault_state = DFCCL_GFAULT_NONE; /* it failed before the swap */
    }
    __atomic_sub_fetch(&ctx->nfaults, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&ctx->lock);
    dfccl_ctx_kick(ctx);
    if (st != DFCCL_OK) {
        snprintf(msg, sizeof(msg), "group %s: the survivors could not exclude the failed "
                 "rank(s): %s. The rank context is aborted; destroy it and end the job",
                 g->name, dfcclGetLastErrorMessage());
        dfccl_error(st, "%s", msg);
        dfccl_ctx_abort(ctx, -1, DFCCL_ERR_ABORTED, msg);
    }
}
