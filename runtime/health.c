/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The health of a context and its groups, and the progress loop that
 * drives it: completions from the queues, runs waiting for a peer's
 * registration (through the context's coll_resolve hook), failures (a
 * rank's own, and those its peers publish in their directories or the net
 * proxy relays), the timeout, the hang watchdog and its reports (who
 * joined a collective and where each rank waits), SIGUSR1 and
 * dfcclDumpState, dead peers and aborts.
 */
#include "dfccl_int.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Completion of one collective seen in a CQ ring: mark it and run its
 * callback (outside every lock). While the callback runs the collective is
 * COMPLETING: a thread that the callback woke (an MPI request completed)
 * may run it again at once; dfcclWait and dfcclQuery report it finished
 * only after the callback has returned. */
void dfccl_ctx_fail(struct dfccl_rank_ctx *ctx, int id, dfccl_status_t status)
{
    dfccl_ctx_complete(ctx, id, status);
}

static void dfccl_ctx_relay(struct dfccl_rank_ctx *ctx);

/*
 * Abort the context: the daemon's blocks return at their next poll, every
 * collective in flight completes with an error (`culprit` with `status`,
 * and after a mismatch its group's later registrations too; the others
 * with DFCCL_ERR_ABORTED) carrying `msg`, and nothing runs any more; the
 * context can still be destroyed.
 */
void dfccl_ctx_abort(struct dfccl_rank_ctx *ctx, int culprit, dfccl_status_t status,
                            const char *msg)
{
    int n = 0, *ids;
    dfccl_status_t *sts;
    const struct dfccl_group *mm_group = NULL;
    uint64_t mm_from = 0;

    pthread_mutex_lock(&ctx->lock);
    if (ctx->aborted) {
        pthread_mutex_unlock(&ctx->lock);
        return;
    }
    ctx->aborted = 1;
    __atomic_store_n(ctx->abort_flag, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&ctx->lock);
    ctx->be->wait_idle(ctx); /* every block has seen the flag */

    ids = malloc((size_t)ctx->cfg.max_colls * sizeof(int));
    sts = malloc((size_t)ctx->cfg.max_colls * sizeof(*sts));
    if (sts == NULL) {
        free(ids);
        ids = NULL;
    }
    pthread_mutex_lock(&ctx->lock);
    /* A mismatch shifts every later registration of its group: those fail
     * as mismatched too, on whichever path (this rank's, a peer's, the net
     * transport's) reported it first, even when the culprit itself never
     * ran. */
    if (status == DFCCL_ERR_MISMATCH && culprit >= 0 && culprit < ctx->cfg.max_colls &&
        ctx->colls[culprit].state != DFCCL_COLL_FREE) {
        mm_group = ctx->colls[culprit].group;
        mm_from  = ctx->colls[culprit].sig[6];
    }
    while (ctx->pend_head != NULL) {
        struct dfccl_pending *p = ctx->pend_head;
        ctx->pend_head          = p->next;
        free(p);
    }
    ctx->pend_tail = NULL;
    ctx->npending  = 0;
    for (int id = 0; ids != NULL && id < ctx->cfg.max_colls; id++) {
        dfccl_coll_t *c = &ctx->colls[id];
        if (c->state != DFCCL_COLL_INFLIGHT) {
            continue;
        }
        if (c->deferred) {
            c->deferred = 0;
            ctx->ndeferred--;
        }
        free(c->errmsg);
        c->errmsg = strdup(msg);
        sts[n]    = id == culprit || (c->group == mm_group && c->sig[6] >= mm_from)
                        ? status
                        : DFCCL_ERR_ABORTED;
        ids[n++]  = id;
    }
    pthread_mutex_unlock(&ctx->lock);
    dfccl_set_last_error(msg);
    for (int i = 0; i < n; i++) {
        dfccl_ctx_complete(ctx, ids[i], sts[i]);
    }
    free(sts);
    free(ids);
    /* after the runs' own records, so that a burst of them cannot hide it:
     * every group's other ranks fail what this rank has not finished */
    pthread_mutex_lock(&ctx->lock);
    for (struct dfccl_group *g = ctx->groups; g != NULL; g = g->next) {
        dfccl_dir_publish_fail(g, DFCCL_FAIL_ALL, 0, 0, status, msg);
    }
    /* the runs' failures go to the net neighbours now: the application
     * may destroy the context before another health check runs, and the
     * ranks of other hosts would then wait for their timeout */
    dfccl_ctx_relay(ctx);
    pthread_mutex_unlock(&ctx->lock);
}

/* ---- reports: who joined a collective, and where the ranks wait --------- */

/* A collective in flight this long is reported where it waits (to peers,
 * through the group's directory), at most this often per context. */
#define DFCCL_WHERE_AFTER_NS 200000000ull
#define DFCCL_WHERE_EVERY_NS 200000000ull
/* A peer whose health check has not run for this long is "not
 * responding": it runs every 10 ms while its poller or an application
 * thread polls. */
#define DFCCL_STALE_NS 1000000000ull

/* Text appended to a fixed buffer, cut short (with "...") when full. */
typedef struct {
    char  *buf;
    size_t len, o;
} dfccl_text_t;

static void dfccl_text_add(dfccl_text_t *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void dfccl_text_add(dfccl_text_t *t, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (t->o + 4 >= t->len) {
        return;
    }
    va_start(ap, fmt);
    n = vsnprintf(t->buf + t->o, t->len - t->o, fmt, ap);
    va_end(ap);
    if (n < 0 || t->o + (size_t)n >= t->len) {
        t->o = t->len - 4;
        snprintf(t->buf + t->o, 4, "...");
        t->o = t->len;
        return;
    }
    t->o += (size_t)n;
}

/* A list item: ", " before all but the first. */
#define DFCCL_TEXT_ITEM(t, ...)                                                \
    do {                                                                       \
        if ((t)->o > 0) {                                                      \
            dfccl_text_add((t), ", ");                                         \
        }                                                                      \
        dfccl_text_add((t), __VA_ARGS__);                                      \
    } while (0)

/* The state letter of process `pid` (/proc/<pid>/stat: R, S, D, T for
 * stopped, t for stopped by a tracer, Z...), 0 if it cannot be read. */
static char dfccl_proc_state(int pid)
{
    char path[64], line[512], *p;
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    n = fread(line, 1, sizeof(line) - 1, f);
    fclose(f);
    line[n] = '\0';
    p = strrchr(line, ')'); /* the command name may hold anything */
    return p != NULL && p[1] == ' ' ? p[2] : 0;
}

/* Read `bytes` of daemon-visible memory (device memory on GPUs). */
static int dfccl_ctx_peek(struct dfccl_rank_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    int ok;

    dfccl_error_quiet(1);
    ok = src != NULL && ctx->be->memcpy_d2h(ctx, dst, src, bytes) == DFCCL_OK;
    dfccl_error_quiet(0);
    return ok;
}

/*
 * Where collective `id` (in flight) stands on this rank, in the words of
 * dfccl_dir_reg_t: the least advanced channel that has started (else the
 * first), its loop and step, the primitive the ring runs there, and what
 * that primitive waits for, read from its connectors. ctx->lock held.
 */
static void dfccl_coll_where(struct dfccl_rank_ctx *ctx, int id, uint64_t now,
                             dfccl_dir_reg_t *w)
{
    const dfccl_coll_t *c         = &ctx->colls[id];
    const dfccl_coll_static_t *st = &c->st;
    const int nch = st->nchannels;
    dfccl_dyn_t dyn[DFCCL_MAX_CHANNELS];
    const dfccl_chan_t *ch;
    int best = -1;

    memset(w, 0, sizeof(*w));
    w->where_run  = c->runs;
    w->where_ns   = now;
    w->where_peer = -1;
    if (c->deferred) {
        w->where_wait = DFCCL_WAIT_START;
        w->where_peer = c->group->ring_next; /* its registration is awaited */
        return;
    }
    if (nch < 1 || nch > DFCCL_MAX_CHANNELS ||
        !dfccl_ctx_peek(ctx, dyn, &ctx->args.dyn[(size_t)id * ctx->cfg.max_blocks],
                        (size_t)nch * sizeof(dfccl_dyn_t))) {
        return;
    }
    for (int k = 0; k < nch; k++) {
        if (c->chans[k].cnt == 0 || !dyn[k].started) {
            continue;
        }
        if (best < 0 || dyn[k].loop < dyn[best].loop ||
            (dyn[k].loop == dyn[best].loop && dyn[k].step < dyn[best].step)) {
            best = k;
        }
    }
    if (best < 0) {
        best = 0;
        while (best + 1 < nch && c->chans[best].cnt == 0) {
            best++;
        }
    }
    ch = &c->chans[best];
    w->where_ch   = (uint32_t)best;
    w->where_loop = dyn[best].loop;
    w->where_step = dyn[best].step;
    if (st->algo != DFCCL_K_ALGO_RING) {
        w->where_wait = DFCCL_WAIT_SHOT;
        return;
    }
    w->where_flags = dfccl_ring_step_prim(st, dyn[best].step);
    if ((w->where_flags & DFCCL_WHERE_RECV) && ch->recv_ctrl != NULL) {
        int ready = 0;
        if (st->proto == DFCCL_K_PROTO_LL) {
            uint32_t line[4];
            const char *at = ch->recv_data +
                             (dyn[best].recv_seq % st->nslots) * 2ull * st->slot_bytes;
            const uint32_t flag = (uint32_t)(dyn[best].recv_seq + 1);
            ready = dfccl_ctx_peek(ctx, line, at, sizeof(line)) && line[1] == flag &&
                    line[3] == flag;
        } else {
            uint64_t tail = 0;
            ready = dfccl_ctx_peek(ctx, &tail, &ch->recv_ctrl->tail, sizeof(tail)) &&
                    tail > dyn[best].recv_seq;
        }
        if (!ready) {
            w->where_wait = DFCCL_WAIT_RECV;
            w->where_peer = c->group->ring_prev;
            return;
        }
    }
    if ((w->where_flags & DFCCL_WHERE_SEND) && ch->send_ctrl != NULL) {
        uint64_t head = 0;
        if (dfccl_ctx_peek(ctx, &head, &ch->send_ctrl->head, sizeof(head)) &&
            dyn[best].send_seq - head >= st->nslots) {
            w->where_wait = DFCCL_WAIT_SEND;
            w->where_peer = c->group->ring_next;
            return;
        }
    }
    w->where_wait = DFCCL_WAIT_READY;
}

/* dfccl_dir_reg_t's where words in words. */
static void dfccl_where_text(const dfccl_coll_t *c, const dfccl_dir_reg_t *w, dfccl_text_t *t)
{
    char prim[48];

    dfccl_prim_name(w->where_flags, prim, sizeof(prim));
    switch (w->where_wait) {
    case DFCCL_WAIT_START:
        dfccl_text_add(t, "waits for rank %d to register it", w->where_peer);
        return;
    case DFCCL_WAIT_SHOT:
        if (c->st.algo == DFCCL_K_ALGO_ONESHOT || c->st.algo == DFCCL_K_ALGO_TWOSHOT) {
            dfccl_text_add(t, "in its %s (channel %u) waits for the peers' data",
                           c->st.algo == DFCCL_K_ALGO_TWOSHOT ? "two-shot steps"
                                                              : "one-shot exchange",
                           w->where_ch);
        } else {
            dfccl_text_add(t, "in its %s steps (step %u, channel %u) waits for the peers' data",
                           dfccl_algo_by_id(c->st.algo)->name, w->where_step, w->where_ch);
        }
        return;
    case DFCCL_WAIT_UNKNOWN:
        dfccl_text_add(t, "position unknown");
        return;
    }
    dfccl_text_add(t, "at %s (step %u, loop %u, channel %u) ", prim, w->where_step,
                   w->where_loop, w->where_ch);
    if (w->where_wait == DFCCL_WAIT_RECV) {
        dfccl_text_add(t, "waits for data from rank %d", w->where_peer);
    } else if (w->where_wait == DFCCL_WAIT_SEND) {
        dfccl_text_add(t, "waits for rank %d to free a connector slot", w->where_peer);
    } else {
        dfccl_text_add(t, "is ready and waits for its daemon to run it");
    }
}

/*
 * The state of collective `id` (in flight) across its group, from what
 * every rank of this host publishes: which ranks joined this run and which
 * did not (and why: not registered yet, another collective registered in
 * its place, an earlier run), which of those that joined do not respond
 * (stopped, exited, no progress), and where each waits. One line into
 * `buf`. ctx->lock held.
 */
static void dfccl_coll_report(struct dfccl_rank_ctx *ctx, int id, uint64_t now, char *buf,
                              size_t len)
{
    const dfccl_coll_t *c = &ctx->colls[id];
    struct dfccl_group *g = c->group;
    const uint64_t reg = c->sig[6], run = c->runs;
    char yes_b[256], no_b[1024], dead_b[512], far_b[128], done_b[128], where_b[1536];
    dfccl_text_t yes = {yes_b, sizeof(yes_b), 0}, no = {no_b, sizeof(no_b), 0},
                 dead = {dead_b, sizeof(dead_b), 0}, far = {far_b, sizeof(far_b), 0},
                 done = {done_b, sizeof(done_b), 0}, where = {where_b, sizeof(where_b), 0},
                 out = {buf, len, 0};

    yes_b[0] = no_b[0] = dead_b[0] = far_b[0] = done_b[0] = where_b[0] = '\0';
    for (int r = 0; r < g->nranks; r++) {
        const dfccl_dir_t *d = dfccl_pool_dir_of(g, r);
        dfccl_dir_reg_t rr;
        uint64_t nreg, runs;
        int have;
        char state;

        if (r == g->rank) {
            dfccl_dir_reg_t w;
            DFCCL_TEXT_ITEM(&yes, "%d", r);
            dfccl_coll_where(ctx, id, now, &w);
            dfccl_text_add(&where, "%srank %d (this rank) ", where.o ? "; " : "", r);
            dfccl_where_text(c, &w, &where);
            continue;
        }
        if (d == NULL) {
            DFCCL_TEXT_ITEM(&far, "%d", r);
            continue;
        }
        nreg = __atomic_load_n(&d->nreg, __ATOMIC_ACQUIRE);
        if (nreg <= reg) {
            DFCCL_TEXT_ITEM(&no, "%d (registered %llu collective(s) on the group; this is #%llu)",
                            r, (unsigned long long)nreg, (unsigned long long)reg + 1);
            continue;
        }
        have = dfccl_dir_read_reg(d, reg, &rr);
        if (have && memcmp(rr.sig, c->sig, sizeof(rr.sig)) != 0) {
            char other[192];
            dfccl_coll_describe_sig(rr.sig, other, sizeof(other));
            DFCCL_TEXT_ITEM(&no, "%d (registered another collective at this position: %s)", r,
                            other);
            continue;
        }
        runs = __atomic_load_n(&d->runs[reg % DFCCL_DIR_RUNS], __ATOMIC_ACQUIRE);
        if (runs < run) {
            if (runs + 1 == run) {
                DFCCL_TEXT_ITEM(&no, "%d (has not started run %llu)", r,
                                (unsigned long long)run);
            } else {
                DFCCL_TEXT_ITEM(&no, "%d (has run it %llu time(s); this is run %llu)", r,
                                (unsigned long long)runs, (unsigned long long)run);
            }
            continue;
        }
        DFCCL_TEXT_ITEM(&yes, "%d", r);
        if (have && rr.done >= run) {
            DFCCL_TEXT_ITEM(&done, "%d", r);
            continue;
        }
        state = dfccl_proc_state(g->pids[r]);
        if (kill(g->pids[r], 0) != 0 && errno == ESRCH) {
            DFCCL_TEXT_ITEM(&dead, "%d (process %d has exited)", r, g->pids[r]);
        } else if (state == 'T' || state == 't') {
            DFCCL_TEXT_ITEM(&dead, "%d (process %d is stopped, by SIGSTOP or a debugger)", r,
                            g->pids[r]);
        } else if (dfccl_since(now, __atomic_load_n(&d->beat_ns, __ATOMIC_ACQUIRE)) >
                   DFCCL_STALE_NS) {
            DFCCL_TEXT_ITEM(&dead, "%d (process %d: its dfccl progress has not run for %.1f s)",
                            r, g->pids[r],
                            (double)dfccl_since(now, d->beat_ns) / 1e9);
        }
        dfccl_text_add(&where, "%srank %d ", where.o ? "; " : "", r);
        if (have && rr.where_run == run) {
            dfccl_where_text(c, &rr, &where);
            dfccl_text_add(&where, " (%.1f s ago)",
                           (double)dfccl_since(now, rr.where_ns) / 1e9);
        } else {
            dfccl_text_add(&where, "has not reported where it waits yet");
        }
    }
    dfccl_text_add(&out, "ranks joined: %s; ranks not joined: %s", yes.o ? yes_b : "none",
                   no.o ? no_b : "none");
    if (dead.o > 0) {
        dfccl_text_add(&out, "; joined but not responding: %s", dead_b);
    }
    if (far.o > 0) {
        dfccl_text_add(&out, "; on other hosts (not visible from here): %s", far_b);
    }
    if (done.o > 0) {
        dfccl_text_add(&out, "; finished their part: %s", done_b);
    }
    dfccl_text_add(&out, "; where: %s", where_b);
}

/* The report of every collective in flight, a line each, into `out`. */
static void dfccl_ctx_dump(struct dfccl_rank_ctx *ctx, FILE *out)
{
    const size_t len = 4096;
    char *line = malloc(len), label[192];
    uint64_t now = dfccl_time_ns();
    int any = 0;

    if (line == NULL) {
        return;
    }
    pthread_mutex_lock(&ctx->lock);
    for (int id = 0; id < ctx->cfg.max_colls; id++) {
        const dfccl_coll_t *c = &ctx->colls[id];
        if (c->state != DFCCL_COLL_INFLIGHT) {
            continue;
        }
        dfccl_coll_label(ctx, id, label, sizeof(label));
        dfccl_coll_report(ctx, id, now, line, len);
        fprintf(out, "dfccl[%d]: state: %s, run %llu, in flight for %.1f s: %s\n",
                (int)getpid(), label, (unsigned long long)c->runs,
                (double)dfccl_since(now, c->start_ns) / 1e9, line);
        any = 1;
    }
    if (!any) {
        fprintf(out, "dfccl[%d]: state: no collective in flight (%d registered, %llu "
                "completed)%s\n", (int)getpid(), ctx->nregistered,
                (unsigned long long)ctx->completed, ctx->aborted ? "; the context is aborted" :
                                                                   "");
    }
    pthread_mutex_unlock(&ctx->lock);
    fflush(out);
    free(line);
}

dfccl_status_t dfcclDumpState(dfccl_rank_ctx_t ctx, FILE *out)
{
    if (ctx == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclDumpState: ctx is NULL");
    }
    dfccl_ctx_dump(ctx, out != NULL ? out : stderr);
    return DFCCL_OK;
}

/* SIGUSR1s received (DFCCL_SIGUSR1): the handler only counts them; each
 * context's health check prints its state when the count moved. */
static volatile sig_atomic_t dfccl_sigusr1_count;

static void dfccl_sigusr1_handler(int sig)
{
    (void)sig;
    dfccl_sigusr1_count++;
}

/* Install the handler once per process, keeping SA_RESTART semantics for
 * the application's system calls; `ctx` reports the signals from now on. */
dfccl_status_t dfccl_sigusr1_install(struct dfccl_rank_ctx *ctx)
{
    static int installed;
    struct sigaction sa;

    ctx->sigusr1_seen = (uint32_t)dfccl_sigusr1_count;
    if (__atomic_exchange_n(&installed, 1, __ATOMIC_ACQ_REL)) {
        return DFCCL_OK;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = dfccl_sigusr1_handler;
    sa.sa_flags   = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, NULL) != 0) {
        __atomic_store_n(&installed, 0, __ATOMIC_RELEASE);
        return dfccl_error(DFCCL_ERR_SYSTEM, "dfcclInit: DFCCL_SIGUSR1=1 but the SIGUSR1 "
                           "handler cannot be installed: %m");
    }
    return DFCCL_OK;
}

/* A watchdog line waiting to be printed outside the lock. */
typedef struct {
    char *text[16];
    int   n;
} dfccl_lines_t;

/* The hang watchdog (DFCCL_WARN_S): collective `id` has been in flight
 * past its next report time: one line naming it and its group, who joined
 * and where they wait; the next report comes after twice the time. The
 * collective keeps waiting. ctx->lock held. */
static void dfccl_ctx_watchdog(struct dfccl_rank_ctx *ctx, int id, uint64_t now,
                               dfccl_lines_t *lines)
{
    dfccl_coll_t *c = &ctx->colls[id];
    const size_t len = 4096;
    uint64_t waited;
    char label[192], *line;

    if (c->warn_run != c->runs) {
        c->warn_run     = c->runs;
        c->warn_next_ns = (uint64_t)(ctx->cfg.warn_s * 1e9);
    }
    waited = dfccl_since(now, c->start_ns);
    if (waited < c->warn_next_ns || lines->n == 16 || (line = malloc(len)) == NULL) {
        return;
    }
    c->warn_next_ns *= 2;
    dfccl_coll_label(ctx, id, label, sizeof(label));
    snprintf(line, len, "dfccl[%d]: watchdog: %s, run %llu, has waited %.1f s: ", (int)getpid(),
             label, (unsigned long long)c->runs, (double)waited / 1e9);
    dfccl_coll_report(ctx, id, now, line + strlen(line), len - strlen(line));
    if (strlen(line) + 160 < len) {
        snprintf(line + strlen(line), len - strlen(line), "; still waiting, next report after "
                 "%.0f s (DFCCL_WARN_S=%g; DFCCL_TIMEOUT makes a wait an error)",
                 (double)c->warn_next_ns / 1e9, ctx->cfg.warn_s);
    }
    lines->text[lines->n++] = line;
}

/* A failure record as a key for the relay's sets. */
static uint64_t dfccl_relay_key(const dfccl_dir_fail_t *f)
{
    return ((uint64_t)(f->origin + 1) << 52) ^ (f->kind << 48) ^ (f->reg << 24) ^ f->run;
}

static int dfccl_relay_has(const uint64_t *set, uint32_t n, uint64_t key)
{
    for (uint32_t i = 0; i < (n < 64 ? n : 64); i++) {
        if (set[i] == key) {
            return 1;
        }
    }
    return 0;
}

/* Send `f` to the group's net neighbours, once. */
static void dfccl_relay_send(struct dfccl_group *g, const dfccl_dir_fail_t *f)
{
    uint64_t key = dfccl_relay_key(f);

    if ((f->kind != DFCCL_FAIL_RUN && f->kind != DFCCL_FAIL_FROM) ||
        dfccl_relay_has(g->relay_sent, g->nrelay_sent, key)) {
        return;
    }
    g->relay_sent[g->nrelay_sent++ % 64] = key;
    dfccl_net_fail_send(g, f);
}

/*
 * Failures between hosts: the records that this host's ranks of a group
 * publish (a failed run, a mismatch) go to the group's net neighbours, and
 * what they send is published here as relayed (under its origin), where
 * this host's ranks read it and send it on, so that a record goes around
 * the ring once. An aborted context or a destroyed group stays on its
 * host: whether its rank had finished a run cannot be read from another.
 * ctx->lock held.
 */
static void dfccl_ctx_relay(struct dfccl_rank_ctx *ctx)
{
    dfccl_dir_fail_t f;
    int gid;

    if (__atomic_load_n(&ctx->net, __ATOMIC_ACQUIRE) == NULL) {
        return;
    }
    while (dfccl_net_fail_recv(ctx, &gid, &f)) {
        for (struct dfccl_group *g = ctx->groups; g != NULL; g = g->next) {
            uint64_t key = dfccl_relay_key(&f);
            /* what we sent, we knew already */
            if (g->id != gid || g->pool.dir == NULL || f.origin == g->rank ||
                dfccl_relay_has(g->relay_got, g->nrelay_got, key) ||
                dfccl_relay_has(g->relay_sent, g->nrelay_sent, key)) {
                continue;
            }
            g->relay_got[g->nrelay_got++ % 64] = key;
            dfccl_dir_publish_relayed(g, &f);
        }
    }
    for (struct dfccl_group *g = ctx->groups; g != NULL; g = g->next) {
        if (!g->next_net && !g->prev_net) {
            continue;
        }
        for (int r = 0; r < g->nranks; r++) {
            const dfccl_dir_t *d = dfccl_pool_dir_of(g, r);
            uint64_t nf;
            if (d == NULL) {
                continue;
            }
            if (dfccl_dir_read_note(d, DFCCL_FAIL_FROM, &f)) {
                dfccl_relay_send(g, &f);
            }
            nf = __atomic_load_n(&d->nfails, __ATOMIC_ACQUIRE);
            for (uint64_t i = nf > DFCCL_DIR_FAILS ? nf - DFCCL_DIR_FAILS : 0; i < nf; i++) {
                if (dfccl_dir_read_fail(d, i, &f)) {
                    dfccl_relay_send(g, &f);
                }
            }
        }
    }
}

/* Publish where this rank's long-running collectives wait, for the reports
 * of their other ranks. ctx->lock held. */
static void dfccl_ctx_publish_where(struct dfccl_rank_ctx *ctx, uint64_t now)
{
    if (dfccl_since(now, ctx->where_ns) < DFCCL_WHERE_EVERY_NS) {
        return;
    }
    ctx->where_ns = now;
    for (int id = 0; id < ctx->cfg.max_colls; id++) {
        dfccl_coll_t *c = &ctx->colls[id];
        dfccl_dir_reg_t w;
        if (c->state != DFCCL_COLL_INFLIGHT || c->group->pool.dir == NULL ||
            dfccl_since(now, c->start_ns) < DFCCL_WHERE_AFTER_NS) {
            continue;
        }
        dfccl_coll_where(ctx, id, now, &w);
        dfccl_dir_publish_where(c->group, c->sig[6], &w);
    }
}

/*
 * Groups with DFCCL_FAULT_EXCLUDE: a rank on this host whose process has
 * exited without destroying the group, a net neighbour found dead, or an
 * exclusion that another survivor has decided already (rank 0's
 * directory) or started (a message over the net), starts an exclusion
 * (fault.c), whether or not a collective is in flight: the survivors wait
 * for each other to build the group of the survivors. ctx->lock held.
 */
static int dfccl_ctx_check_exclude_group(struct dfccl_rank_ctx *ctx, struct dfccl_group *g);

static void dfccl_ctx_check_exclude(struct dfccl_rank_ctx *ctx)
{
    /* Until a pass finds nothing new: a death seen by the proxy or the
     * process table after one group was looked at, and before a later
     * one, would otherwise start the later group alone, and the
     * survivors, which take their groups in list order, would wait for
     * each other in different groups' exclusions. */
    for (int again = 1; again;) {
        again = 0;
        for (struct dfccl_group *g = ctx->groups; g != NULL; g = g->next) {
            if (dfccl_ctx_check_exclude_group(ctx, g)) {
                again = 1;
            }
        }
    }
}

/* One group of dfccl_ctx_check_exclude: 1 if it starts an exclusion. */
static int dfccl_ctx_check_exclude_group(struct dfccl_rank_ctx *ctx, struct dfccl_group *g)
{
    const dfccl_dir_t *d0;
    int found = 0;

    if (g->fault_policy != DFCCL_FAULT_EXCLUDE || g->fault_state != DFCCL_GFAULT_NONE ||
        g->pool.dir == NULL || ctx->aborted) {
        return 0;
    }
    /* rank 0's word decides on one host; across hosts, another
     * survivor's message starts one (dfccl_fault_found) */
    d0    = g->net ? NULL : dfccl_pool_dir_of(g, 0);
    found = (d0 != NULL && __atomic_load_n(&d0->excluded, __ATOMIC_ACQUIRE) != 0) ||
            ctx->fault_found(g);
    if (found) {
        g->fault_state = DFCCL_GFAULT_FOUND;
        __atomic_add_fetch(&ctx->nfaults, 1, __ATOMIC_RELAXED);
    }
    return found;
}

/*
 * Every 10 ms: tell peers this rank is alive, unlink and attach segments,
 * and, while collectives are in flight, publish where they wait and check
 * them. A collective that a peer failed (a mismatch, its own failure, its
 * context aborted or its group destroyed before it finished) fails here
 * too, with the peer's reason: alone while it has not reached the daemon,
 * else by aborting the context. One past the timeout (DFCCL_TIMEOUT), or
 * a peer process that has exited while nothing completes, aborts the
 * context with a message that names the collective, its group, and who
 * has and has not joined it. One past the watchdog's time (DFCCL_WARN_S)
 * is reported and keeps waiting. SIGUSR1 (DFCCL_SIGUSR1) prints the state.
 */
static void dfccl_ctx_check_health(struct dfccl_rank_ctx *ctx)
{
    uint64_t now = dfccl_time_ns(), limit = (uint64_t)(ctx->cfg.timeout_s * 1e9);
    uint64_t warn = (uint64_t)(ctx->cfg.warn_s * 1e9);
    char msg[4096], label[192];
    int culprit = -1, alone[16], nalone = 0, dump = 0;
    dfccl_status_t status = DFCCL_OK, alone_st[16];
    dfccl_lines_t lines;

    if (dfccl_since(now, ctx->last_check_ns) < 10000000ull) {
        return;
    }
    ctx->last_check_ns = now;
    lines.n = 0;
    pthread_mutex_lock(&ctx->lock);
    /* Now, not before the lock: a collective started by another thread
     * while we waited for it is younger than a time read before. */
    now = dfccl_time_ns();
    for (struct dfccl_group *g = ctx->groups; g != NULL; g = g->next) {
        if (g->pool.dir != NULL) {
            __atomic_store_n(&g->pool.dir->beat_ns, now, __ATOMIC_RELEASE);
        }
        /* unlink our segments that their writers have attached by now */
        dfccl_pool_reap(g);
    }
    /* a mismatch the net transport found holds for the group's later
     * collectives too: said like one found here */
    {
        int nc;
        dfccl_status_t ns;
        if (dfccl_net_failed(ctx, &nc, &ns, msg, sizeof(msg)) && ns == DFCCL_ERR_MISMATCH &&
            nc >= 0 && nc < ctx->cfg.max_colls && ctx->colls[nc].state != DFCCL_COLL_FREE) {
            dfccl_dir_publish_fail(ctx->colls[nc].group, DFCCL_FAIL_FROM,
                                   ctx->colls[nc].sig[6], 0, ns, msg);
        }
    }
    dfccl_ctx_relay(ctx);
    if (ctx->cfg.sigusr1 && ctx->sigusr1_seen != (uint32_t)dfccl_sigusr1_count) {
        ctx->sigusr1_seen = (uint32_t)dfccl_sigusr1_count;
        dump              = 1;
    }
    dfccl_ctx_check_exclude(ctx);
    if (ctx->aborted || ctx->inflight == 0) {
        pthread_mutex_unlock(&ctx->lock);
        if (dump) {
            dfccl_ctx_dump(ctx, stderr);
        }
        return;
    }
    dfccl_ctx_publish_where(ctx, now);
    for (int id = 0; id < ctx->cfg.max_colls && culprit < 0; id++) {
        dfccl_coll_t *c = &ctx->colls[id];
        struct dfccl_group *g = c->group;
        int r;
        if (c->state != DFCCL_COLL_INFLIGHT || g->fault_state != DFCCL_GFAULT_NONE) {
            continue; /* an exclusion takes care of it */
        }
        if (nalone < 16 && dfccl_group_failed_run(g, c, 0, &status, msg, sizeof(msg)) >= 0) {
            c->fail_remote = 1;
            if (c->deferred) {
                /* the daemon never saw it: it fails alone */
                c->deferred = 0;
                ctx->ndeferred--;
                free(c->errmsg);
                c->errmsg        = strdup(msg);
                alone_st[nalone] = status;
                alone[nalone++]  = id;
                continue;
            }
            culprit = id;
            break;
        }
        if (limit > 0 && dfccl_since(now, c->start_ns) > limit) {
            size_t o;
            dfccl_coll_label(ctx, id, label, sizeof(label));
            snprintf(msg, sizeof(msg), "%s did not complete within %g s: ", label,
                     ctx->cfg.timeout_s);
            o = strlen(msg);
            dfccl_coll_report(ctx, id, now, msg + o, sizeof(msg) - o);
            o = strlen(msg);
            snprintf(msg + o, sizeof(msg) - o, ". A rank may have stopped, or the program runs "
                     "collectives that never meet on every rank; raise DFCCL_TIMEOUT if it is "
                     "only slow");
            culprit = id;
            status  = DFCCL_ERR_TIMEOUT;
            break;
        }
        /* a dead peer: nothing can complete once what it sent is used up,
         * unless it finished its part of this run before it left: without
         * net edges what it sent is in our connectors already; with them,
         * once it destroyed the group its sends had left it (a peer that
         * finished and exited while our proxy still receives its last
         * slices is not a failure) */
        for (r = 0; r < g->nranks && g->fault_policy != DFCCL_FAULT_EXCLUDE &&
                    dfccl_since(now, ctx->last_done_ns) > 500000000ull;
             r++) {
            /* a process id means something only on our host */
            if (r != g->rank && g->same_host[r] && kill(g->pids[r], 0) != 0 &&
                errno == ESRCH &&
                (!dfccl_group_rank_done(g, r, c) || (g->net && !dfccl_group_rank_left(g, r)))) {
                dfccl_pool_unlink_dead(g, r);
                dfccl_coll_label(ctx, id, label, sizeof(label));
                snprintf(msg, sizeof(msg), "%s cannot complete: rank %d (process %d) has "
                         "exited. The rank context is aborted; destroy it and end the job",
                         label, r, g->pids[r]);
                culprit = id;
                status  = DFCCL_ERR_ABORTED;
                break;
            }
        }
        /* a net neighbour whose connection closed: no failure if it
         * finished this run before it left */
        /* (an excluding group's is found by the next check: an exclusion) */
        if (culprit < 0 && (g->next_net || g->prev_net) &&
            g->fault_policy != DFCCL_FAULT_EXCLUDE) {
            char why[512];
            if (dfccl_net_neighbour_gone(g, c->sig[6], c->runs, &status, why, sizeof(why))) {
                dfccl_coll_label(ctx, id, label, sizeof(label));
                snprintf(msg, sizeof(msg), "%s cannot complete: %s. The rank context is "
                         "aborted; destroy it and end the job", label, why);
                culprit = id;
                break;
            }
        }
        if (culprit < 0 && warn > 0) {
            dfccl_ctx_watchdog(ctx, id, now, &lines);
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    for (int i = 0; i < lines.n; i++) {
        if (dfccl_log_level >= 0) {
            fprintf(stderr, "%s\n", lines.text[i]);
        }
        free(lines.text[i]);
    }
    if (dump) {
        dfccl_ctx_dump(ctx, stderr);
    }
    for (int i = 0; i < nalone; i++) {
        if (dfccl_log_level >= 0) {
            dfccl_print_error(ctx->colls[alone[i]].errmsg != NULL ? ctx->colls[alone[i]].errmsg
                                                                  : "");
        }
        dfccl_ctx_fail(ctx, alone[i], alone_st[i]);
    }
    if (culprit < 0 && dfccl_net_failed(ctx, &culprit, &status, msg, sizeof(msg))) {
        /* the net transport failed (peer gone, signature mismatch): no
         * collective of the context can rely on it any more */
        dfccl_error(status, "%s", msg);
        dfccl_ctx_abort(ctx, culprit, status, msg);
        return;
    }
    if (culprit >= 0) {
        dfccl_error(status, "%s", msg);
        dfccl_ctx_abort(ctx, culprit, status, msg);
    }
}

/* Poll every CQ ring once, run callbacks, feed the SQ, relaunch the
 * daemon if needed. Returns the number of completions. */
int dfccl_ctx_progress(struct dfccl_rank_ctx *ctx)
{
    const uint32_t cap = ctx->args.cq_entries;
    int ids_static[64], nids = 0, total = 0;

    pthread_mutex_lock(&ctx->cq_lock);
    for (uint32_t b = 0; b < ctx->args.max_blocks; b++) {
        uint64_t *ring = ctx->cq + (uint64_t)b * cap;
        uint64_t h     = ctx->cq_head[b];
        for (;;) {
            uint64_t v = __atomic_load_n(&ring[h % cap], __ATOMIC_ACQUIRE);
            int id     = (int)((uint32_t)v & ~DFCCL_K_CQE_CANCEL);
            if ((uint32_t)(v >> 32) != (uint32_t)(h + 1) || nids == 64) {
                break;
            }
            h++;
            if (id < 0 || id >= ctx->cfg.max_colls) {
                continue;
            }
            if ((uint32_t)v & DFCCL_K_CQE_CANCEL) {
                ctx->colls[id].fault_cut = 1; /* a block dropped its part */
            }
            /* the last of its blocks' CQEs completes the collective */
            if (++ctx->cqe_seen[id] >= __atomic_load_n(&ctx->cqe_need[id], __ATOMIC_RELAXED)) {
                ctx->cqe_seen[id] = 0;
                ctx->completed++;
                ids_static[nids++] = id;
            }
        }
        if (h != ctx->cq_head[b]) {
            ctx->cq_head[b] = h;
            __atomic_store_n(&ctx->cq_ctrl[b].head, h, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&ctx->cq_lock);

    if (nids > 0) {
        pthread_mutex_lock(&ctx->lock);
        ctx->stuck_relaunches = 0;
        ctx->last_done_ns     = dfccl_time_ns();
        pthread_mutex_unlock(&ctx->lock);
    }
    for (int i = 0; i < nids; i++) {
        dfccl_coll_t *c = &ctx->colls[ids_static[i]];
        if (__atomic_load_n(&ctx->nfaults, __ATOMIC_RELAXED) > 0) {
            /* a run given up by an exclusion: dropped by a block, it is
             * held for the survivors; completed by all, it stands */
            int held;
            pthread_mutex_lock(&ctx->lock);
            held = c->fault == DFCCL_CFAULT_CANCEL && c->fault_cut;
            if (c->fault == DFCCL_CFAULT_CANCEL) {
                c->fault = held ? DFCCL_CFAULT_HELD : DFCCL_CFAULT_NONE;
                /* no block holds it any more */
                ctx->ncancels--;
                ctx->be->memcpy_h2d(ctx, ctx->args.cancels, &ctx->ncancels,
                                    sizeof(ctx->ncancels));
            }
            pthread_mutex_unlock(&ctx->lock);
            if (held) {
                continue;
            }
        }
        dfccl_ctx_complete(ctx, ids_static[i], DFCCL_OK);
        total++;
    }
    if (__atomic_load_n(&ctx->nfaults, __ATOMIC_RELAXED) > 0) {
        ctx->fault_progress(ctx);
    }

    if (ctx->ndeferred > 0 || ctx->nstrag > 0) {
        total += ctx->coll_resolve(ctx);
    }
    dfccl_ctx_check_health(ctx);
    pthread_mutex_lock(&ctx->lock);
    dfccl_ctx_drain_pending(ctx);
    dfccl_ctx_maybe_launch(ctx, 0);
    pthread_mutex_unlock(&ctx->lock);
    return total;
}
