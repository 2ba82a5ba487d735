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
 * On one host the dead-process check and the directories are what the
 * survivors agree through. A group with net (UCX) edges, whose ranks all
 * sent their worker addresses at its bootstrap, does the same over the
 * net transport's control lane instead:
 *
 *   - detection: a rank of this host whose process exited, a ring
 *     neighbour on another host whose connection closed or whose proxy
 *     sent no heartbeat within DFCCL_TIMEOUT, or a message of an
 *     exclusion from another survivor;
 *   - agreement, in rounds (after step 2, so that what each completed is
 *     final): each survivor sends its set of dead ranks, and the runs it
 *     completed of each registration, to every rank of the group, and
 *     waits for the set of every rank not in its own (or for that rank to
 *     be found dead). The union is the next round's set; a round in which
 *     every set received equals this rank's decides it. A survivor that
 *     decided has seen every other survivor send the same set, so they
 *     all decide it in that round too, unless a rank dies during the
 *     rounds: then the steps no longer match and the context aborts, as a
 *     second failure during an exclusion does on one host. A rank that
 *     finds itself in a set received is excluded: its context aborts;
 *   - the bootstrap's exchanges of step 3 go to every survivor directly.
 */
#include "dfccl_int.h"

#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Static_assert(DFCCL_DIR_XBYTES >= DFCCL_NET_ADDR_MAX, "a bootstrap exchange fits a slot");

#define DFCCL_FAULT_MARK (1ull << 63)

/* Does g reach its ranks through the net transport when it excludes? */
static int dfccl_fault_net(const struct dfccl_group *g)
{
    return g->net && g->fault_slots != NULL;
}

/* Why g cannot exclude failed ranks, in words; NULL if it can. */
static const char *dfccl_fault_unfit(const struct dfccl_group *g)
{
    if (g->nranks < 2 || g->pool.dir == NULL) {
        return "one rank";
    }
    if (g->net && g->fault_slots == NULL) {
        return "net (UCX) edges and ranks that did not start the net transport (their ring "
               "edges are all on their host; DFCCL_FAULT_POLICY=exclude set on every rank "
               "before the group is created starts it on all of them)";
    }
    return g->nranks > 63 ? "more than 63 ranks" : NULL;
}

/* Across hosts: every other rank's net peer, and a watch on the ring
 * neighbours on other hosts (ctx->lock held). */
static dfccl_status_t dfccl_fault_arm(struct dfccl_group *g)
{
    const int n = g->nranks;

    if (!dfccl_fault_net(g) || g->fault_peer != NULL) {
        return DFCCL_OK;
    }
    g->fault_peer = malloc((size_t)n * sizeof(int));
    if (g->fault_peer == NULL) {
        return DFCCL_ERR_NO_MEMORY;
    }
    for (int r = 0; r < n; r++) {
        g->fault_peer[r] = -1;
        if (r == g->rank) {
            continue;
        }
        g->fault_peer[r] = dfccl_net_peer_of(g->ctx, g->fault_slots + (size_t)r *
                                             DFCCL_NET_ADDR_MAX, r, g->fault_hosts +
                                             (size_t)r * 64);
        if (g->fault_peer[r] < 0) {
            dfccl_status_t st = (dfccl_status_t)g->fault_peer[r];
            free(g->fault_peer);
            g->fault_peer = NULL;
            return st;
        }
    }
    for (int r = 0; r < n; r++) {
        if (r != g->rank && !g->same_host[r] && (r == g->ring_next || r == g->ring_prev) &&
            !((g->fault_watch >> r) & 1)) {
            g->fault_watch |= 1ull << r;
            dfccl_net_watch(g->ctx, g->fault_peer[r], 1);
        }
    }
    return DFCCL_OK;
}

/*
 * The ranks of g this rank finds dead by itself: a process of this host
 * that exited without destroying the group, and (across hosts) a watched
 * peer whose connection closed or whose heartbeats stopped for
 * DFCCL_TIMEOUT, unless it destroyed the group before it went. `only`:
 * the ranks to look at. The first reason into `why` (may be NULL).
 */
static uint64_t dfccl_fault_observe(struct dfccl_group *g, uint64_t only, char *why, size_t len)
{
    /* half DFCCL_TIMEOUT: found before a collective waiting for it times out */
    const uint64_t silent = (uint64_t)(g->ctx->cfg.timeout_s * 0.5e9);
    uint64_t dead         = 0;
    char w[160];

    for (int r = 0; r < g->nranks && r < 64; r++) {
        if (r == g->rank || !((only >> r) & 1)) {
            continue;
        }
        if (g->same_host[r]) {
            if (kill(g->pids[r], 0) != 0 && errno == ESRCH && !dfccl_group_rank_left(g, r)) {
                dead |= 1ull << r;
                snprintf(w, sizeof(w), "its process (%d) has exited", g->pids[r]);
            }
        } else if (g->fault_peer != NULL && dfccl_net_peer_dead(g->ctx, g->fault_peer[r],
                                                                silent, w, sizeof(w)) &&
                   !dfccl_net_rank_left(g, r)) {
            dead |= 1ull << r;
        }
        if (((dead >> r) & 1) && why != NULL && why[0] == '\0') {
            snprintf(why, len, "rank %d (host %s): %s", r,
                     g->fault_hosts != NULL ? g->fault_hosts + (size_t)r * 64 : "this host", w);
        }
    }
    return dead;
}

int dfccl_fault_found(struct dfccl_group *g)
{
    if (dfccl_fault_net(g) && dfccl_net_xchg_waiting(g->ctx, g->id)) {
        return 1; /* another survivor has started one */
    }
    return dfccl_fault_observe(g, ~0ull, NULL, 0) != 0;
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
    if (why == NULL && policy == DFCCL_FAULT_EXCLUDE && dfccl_fault_arm(g) != DFCCL_OK) {
        why   = "out of host memory, or no net peer";
        *st_p = DFCCL_ERR_NO_MEMORY;
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
                           "exclusion needs at least 2 and at most 63 ranks, and, across "
                           "hosts, the net transport on every rank; this group has %s; the "
                           "group keeps the default, DFCCL_FAULT_ABORT", g->name, why);
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
    int                 net;  /* through the net transport (dfccl_fault_net) */
    uint32_t            seq;  /* net: messages this rank sent each survivor so far */
} dfccl_fault_xchg_t;

/* ---- the survivors' exchanges, through the net transport ---------------- */

#define DFCCL_FAULT_MAGIC 0x64664658u /* "dfFX" */

enum { DFCCL_FAULT_AGREE = 1, DFCCL_FAULT_BOOT };

/* A message between survivors: its key (magic, seq, from) first. AGREE
 * carries the sender's set of dead ranks and `bytes` of (registration,
 * runs completed) pairs; BOOT `bytes` of a bootstrap exchange. */
typedef struct {
    uint32_t magic;
    uint32_t seq;
    int32_t  from; /* the sender's rank in the group */
    uint32_t kind;
    uint64_t dead;
    uint64_t bytes;
} dfccl_fault_msg_t;

/* Send message `m` (and its bytes after it) to every rank of `to`. */
static dfccl_status_t dfccl_fault_net_send(dfccl_fault_xchg_t *x, const dfccl_fault_msg_t *m,
                                           uint64_t to)
{
    struct dfccl_group *g = x->g;

    for (int r = 0; r < g->nranks; r++) {
        if (r != g->rank && ((to >> r) & 1)) {
            DFCCL_CHECK(dfccl_net_xchg_send(g->ctx, g->fault_peer[r], g->fault_gids[r], m,
                                            sizeof(*m) + m->bytes));
        }
    }
    return DFCCL_OK;
}

/*
 * Wait for message `seq` of rank r into m (`len` bytes at most): DFCCL_OK;
 * DFCCL_ERR_NOT_FOUND when r is found dead first and `dead_ok` (the
 * agreement goes on without it); an error when it is found dead
 * otherwise, when its message is of another kind (the survivors no longer
 * take the same steps), or past the deadline.
 */
static dfccl_status_t dfccl_fault_net_wait(dfccl_fault_xchg_t *x, int r, uint32_t kind,
                                           dfccl_fault_msg_t *m, size_t len, int dead_ok)
{
    struct dfccl_group *g = x->g;
    const dfccl_fault_msg_t key = {DFCCL_FAULT_MAGIC, x->seq, r, 0, 0, 0};
    char why[256];

    for (uint32_t n = 0;; n++) {
        long got = dfccl_net_xchg_take(g->ctx, g->id, &key, 12, m, len);
        if (got >= (long)sizeof(*m) && m->kind == kind && m->bytes <= len - sizeof(*m) &&
            (size_t)got == sizeof(*m) + m->bytes) {
            return DFCCL_OK;
        }
        if (got >= 0) {
            return dfccl_error(DFCCL_ERR_ABORTED, "group %s: rank %d took another step of the "
                               "exclusion than this rank (message %u); a rank failed while the "
                               "survivors agreed on the failed ones, which is not survived",
                               g->name, r, x->seq);
        }
        if ((n & 255u) != 255u) {
            sched_yield();
            continue;
        }
        why[0] = '\0';
        if (dfccl_fault_observe(g, 1ull << r, why, sizeof(why)) != 0) {
            if (dead_ok) {
                return DFCCL_ERR_NOT_FOUND;
            }
            return dfccl_error(DFCCL_ERR_ABORTED, "group %s: %s while the survivors of rank(s) "
                               "excluded before built their group; a second failure during "
                               "an exclusion is not survived", g->name, why);
        }
        if (x->deadline_ns != 0 && dfccl_time_ns() > x->deadline_ns) {
            return dfccl_error(DFCCL_ERR_TIMEOUT, "group %s: rank %d (host %s) did not join "
                               "the exclusion of the failed rank(s) within %g s "
                               "(DFCCL_TIMEOUT); its dfccl progress may not run (explicit "
                               "progress mode and no dfcclProgress or dfcclWait calls)",
                               g->name, r, g->fault_hosts + (size_t)r * 64,
                               g->ctx->cfg.timeout_s);
        }
        usleep(100);
    }
}

/* An allgather of `bytes` among the survivors, in survivor order, over
 * the net transport. */
static dfccl_status_t dfccl_fault_net_allgather(dfccl_fault_xchg_t *x, const void *send,
                                                void *all, size_t bytes)
{
    dfccl_fault_msg_t *m = malloc(sizeof(*m) + bytes);
    uint64_t to          = 0;
    dfccl_status_t st    = DFCCL_OK;

    if (m == NULL) {
        return dfccl_error(DFCCL_ERR_NO_MEMORY, "fault exclusion: out of host memory");
    }
    for (int i = 0; i < x->ns; i++) {
        to |= 1ull << x->surv[i];
    }
    memset(m, 0, sizeof(*m));
    m->magic = DFCCL_FAULT_MAGIC;
    m->seq   = ++x->seq;
    m->from  = x->g->rank;
    m->kind  = DFCCL_FAULT_BOOT;
    m->bytes = bytes;
    memcpy(m + 1, send, bytes);
    st = dfccl_fault_net_send(x, m, to);
    for (int i = 0; i < x->ns && st == DFCCL_OK; i++) {
        if (x->surv[i] == x->g->rank) {
            memcpy((char *)all + (size_t)i * bytes, send, bytes);
            continue;
        }
        st = dfccl_fault_net_wait(x, x->surv[i], DFCCL_FAULT_BOOT, m, sizeof(*m) + bytes, 0);
        if (st == DFCCL_OK && m->bytes != bytes) {
            st = dfccl_error(DFCCL_ERR_INTERNAL, "fault exclusion: rank %d sent %llu bytes of "
                             "an exchange of %zu", x->surv[i], (unsigned long long)m->bytes,
                             bytes);
        }
        if (st == DFCCL_OK) {
            memcpy((char *)all + (size_t)i * bytes, m + 1, bytes);
        }
    }
    free(m);
    return st;
}

/* The runs of a registration that rank r completed (agreement). */
typedef struct {
    uint64_t reg, done;
} dfccl_fault_done_t;

/*
 * Agree with the other survivors on the dead ranks of g (see the top of
 * the file): *dead_p holds this rank's set on entry and the decision on
 * return; done (nranks * nd entries) what each survivor completed of the
 * group's registrations, ours (`mine`, nd) included.
 */
static dfccl_status_t dfccl_fault_agree(dfccl_fault_xchg_t *x, uint64_t *dead_p,
                                        const dfccl_fault_done_t *mine, int nd,
                                        dfccl_fault_done_t *done)
{
    struct dfccl_group *g = x->g;
    const int n           = g->nranks;
    const uint64_t everyone = (n == 64 ? ~0ull : (1ull << n) - 1) & ~(1ull << g->rank);
    const size_t bytes    = (size_t)nd * sizeof(*mine);
    dfccl_fault_msg_t *m  = malloc(sizeof(*m) + bytes), *in = malloc(sizeof(*m) + bytes);
    uint64_t set = *dead_p, watched = 0;
    dfccl_status_t st = DFCCL_OK;

    if (m == NULL || in == NULL) {
        free(m);
        free(in);
        return dfccl_error(DFCCL_ERR_NO_MEMORY, "fault exclusion: out of host memory");
    }
    /* what the messages already here say is dead (the AGREE sets of the
     * survivors that started first) */
    set |= dfccl_net_xchg_union(g->ctx, g->id, offsetof(dfccl_fault_msg_t, dead)) &
           everyone;
    /* every other rank on another host is watched while the rounds last,
     * so that one that died unseen (a host of which no rank is left) is
     * found: its heartbeats stop once its connection is up */
    for (int r = 0; r < n; r++) {
        if (r != g->rank && !g->same_host[r] && !((set >> r) & 1)) {
            dfccl_net_watch(g->ctx, g->fault_peer[r], 1);
            watched |= 1ull << r;
        }
    }
    memcpy(done + (size_t)g->rank * nd, mine, bytes);
    for (int round = 0; st == DFCCL_OK; round++) {
        uint64_t next = set;
        int same      = 1;

        if (round > 2 * n + 2) {
            st = dfccl_error(DFCCL_ERR_ABORTED, "group %s: the survivors did not agree on the "
                             "failed ranks in %d rounds", g->name, round);
            break;
        }
        memset(m, 0, sizeof(*m));
        m->magic = DFCCL_FAULT_MAGIC;
        m->seq   = ++x->seq;
        m->from  = g->rank;
        m->kind  = DFCCL_FAULT_AGREE;
        m->dead  = set;
        m->bytes = bytes;
        memcpy(m + 1, mine, bytes);
        /* to every rank not in the set: a connection to a dead process
         * can block the proxy for seconds while UCX tries to make it */
        st = dfccl_fault_net_send(x, m, everyone & ~set);
        for (int r = 0; r < n && st == DFCCL_OK; r++) {
            if (r == g->rank || ((set >> r) & 1)) {
                continue;
            }
            st = dfccl_fault_net_wait(x, r, DFCCL_FAULT_AGREE, in, sizeof(*in) + bytes, 1);
            if (st == DFCCL_ERR_NOT_FOUND) {
                st = DFCCL_OK;
                next |= 1ull << r;
                same = 0;
                continue;
            }
            if (st != DFCCL_OK) {
                break;
            }
            if ((in->dead >> g->rank) & 1) {
                st = dfccl_error(DFCCL_ERR_ABORTED, "group %s: rank %d (host %s) and the "
                                 "other survivors excluded this rank, which they took for "
                                 "failed (it did not respond within DFCCL_TIMEOUT, or its "
                                 "connection closed); it can take no further part in the group",
                                 g->name, r, g->fault_hosts + (size_t)r * 64);
                break;
            }
            if (in->bytes != bytes) {
                st = dfccl_error(DFCCL_ERR_INTERNAL, "fault exclusion: rank %d has %llu bytes "
                                 "of registrations, this rank %zu", r,
                                 (unsigned long long)in->bytes, bytes);
                break;
            }
            memcpy(done + (size_t)r * nd, in + 1, bytes);
            next |= in->dead;
            same = same && in->dead == set;
        }
        if (st != DFCCL_OK) {
            break;
        }
        dfccl_debug("fault: group %s: round %d of the agreement: %#llx, next %#llx%s", g->name,
                    round, (unsigned long long)set, (unsigned long long)next,
                    same ? ", the same everywhere" : "");
        if (same && next == set) {
            break; /* every survivor sent this set: decided */
        }
        set = next;
    }
    for (int r = 0; r < n; r++) {
        if ((watched >> r) & 1) {
            dfccl_net_watch(g->ctx, g->fault_peer[r], 0);
        }
    }
    free(m);
    free(in);
    if (st == DFCCL_OK) {
        *dead_p = set;
    }
    return st;
}

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
    if (x->net) {
        dfccl_group_boot_want_net(b); /* it excludes in its turn */
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
        st = x->net ? dfccl_fault_net_allgather(x, send, all, bytes)
                    : dfccl_fault_allgather(x, send, all, bytes);
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

static int dfccl_fault_done_cmp(const void *a, const void *b)
{
    const dfccl_fault_done_t *x = a, *y = b;

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
/* The line each survivor prints when the dead are decided. */
static void dfccl_fault_say(struct dfccl_group *g, uint64_t dead)
{
    const int many = __builtin_popcountll(dead) > 1;
    char list[256];
    size_t o = 0;

    list[0] = '\0';
    for (int r = 0; r < g->nranks; r++) {
        if ((dead >> r) & 1) {
            o += (size_t)snprintf(list + o, o < sizeof(list) ? sizeof(list) - o : 0, "%s%d",
                                  o ? ", " : "", g->orig_rank != NULL ? g->orig_rank[r] : r);
            dfccl_pool_unlink_dead(g, r);
        }
    }
    if (dfccl_log_level >= 0) {
        fprintf(stderr, "dfccl[%d]: group %s: rank%s %s (of the group as created) %s %s; "
                "the group goes on without %s (DFCCL_FAULT_EXCLUDE), its collectives over the "
                "survivors\n", (int)getpid(), g->name, many ? "s" : "", list[0] ? list : "?",
                many ? "have" : "has", dfccl_fault_net(g) ? "failed" : "exited",
                many ? "them" : "it");
    }
}

static uint64_t dfccl_fault_cancel(struct dfccl_rank_ctx *ctx, struct dfccl_group *g)
{
    dfccl_dir_t *d0 = (dfccl_dir_t *)dfccl_pool_dir_of(g, 0);
    uint64_t dead = 0, word = 0;

    if (dfccl_fault_net(g)) {
        /* this rank's view; the survivors agree once their runs let go */
        dead = dfccl_fault_observe(g, ~0ull, NULL, 0);
    } else {
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
        dfccl_fault_say(g, dead);
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

/* Did a survivor (not us) complete run `run` of registration `reg` of g?
 * Across hosts from what the survivors said in the agreement (`done`, nd
 * a rank), else from their directories. */
static int dfccl_fault_done_elsewhere(struct dfccl_group *g, uint64_t dead, uint64_t reg,
                                      uint64_t run, const dfccl_fault_done_t *done, int nd,
                                      int *who_p)
{
    for (int r = 0; r < g->nranks; r++) {
        dfccl_dir_reg_t rr;
        if (r == g->rank || ((dead >> r) & 1)) {
            continue;
        }
        if (done != NULL) {
            for (int i = 0; i < nd; i++) {
                const dfccl_fault_done_t *e = &done[(size_t)r * nd + i];
                if (e->reg == reg && e->done >= run) {
                    *who_p = r;
                    return 1;
                }
            }
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
    int *surv, ns = 0, newrank = -1, nf = 0, *orig = NULL, nd = 0;
    dfccl_fault_coll_t *fc;
    dfccl_fault_xchg_t x;
    dfccl_fault_done_t *mine = NULL, *done = NULL;
    struct dfccl_group *ng = NULL, tmp, *gn, *ngn;
    dfccl_status_t st;

    surv = malloc((size_t)n * sizeof(int));
    fc   = malloc((size_t)ctx->cfg.max_colls * sizeof(*fc));
    orig = malloc((size_t)n * sizeof(int));
    if (surv == NULL || fc == NULL || orig == NULL) {
        st = dfccl_error(DFCCL_ERR_NO_MEMORY, "fault exclusion: out of host memory");
        goto out;
    }
    memset(&x, 0, sizeof(x));
    x.g   = g;
    x.net = dfccl_fault_net(g);
    if (ctx->cfg.timeout_s > 0) {
        x.deadline_ns = dfccl_time_ns() + (uint64_t)(ctx->cfg.timeout_s * 1e9);
    }
    if (x.net) {
        /* across hosts: agree on the dead first, with what each rank
         * completed of every registration of the group (final: every run
         * has let go), which the directories tell on one host */
        pthread_mutex_lock(&ctx->lock);
        mine = malloc((size_t)(g->ncolls > 0 ? g->ncolls : 1) * sizeof(*mine));
        done = calloc((size_t)n * (size_t)(g->ncolls > 0 ? g->ncolls : 1), sizeof(*done));
        for (int id = 0; mine != NULL && done != NULL && id < ctx->cfg.max_colls; id++) {
            const dfccl_coll_t *c = &ctx->colls[id];
            dfccl_dir_reg_t rr;
            if (c->state == DFCCL_COLL_FREE || c->group != g || nd == g->ncolls) {
                continue;
            }
            mine[nd].reg  = c->sig[6];
            mine[nd].done = dfccl_dir_read_reg(g->pool.dir, c->sig[6], &rr) ? rr.done : 0;
            nd++;
        }
        pthread_mutex_unlock(&ctx->lock);
        if (mine == NULL || done == NULL) {
            st = dfccl_error(DFCCL_ERR_NO_MEMORY, "fault exclusion: out of host memory");
            goto out;
        }
        qsort(mine, (size_t)nd, sizeof(*mine), dfccl_fault_done_cmp);
        dead |= dfccl_fault_observe(g, ~0ull, NULL, 0);
        st = dfccl_fault_agree(&x, &dead, mine, nd, done);
        if (st != DFCCL_OK) {
            goto out;
        }
        /* nothing more goes to the dead, and channels to them close
         * without waiting for a flush */
        for (int r = 0; r < n; r++) {
            if ((dead >> r) & 1) {
                dfccl_net_peer_close(ctx, g->fault_peer[r]);
            }
        }
        dfccl_fault_say(g, dead);
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
    x.surv = surv;
    x.ns   = ns;
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
        if (dfccl_fault_done_elsewhere(g, dead, f->reg, f->run, done, nd, &who)) {
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
    /* what a run given up published to a survivor may never be taken (it
     * deregistered first): its net flush is not waited for long, and its
     * memory stays with the transport where it is not done */
    dfccl_coll_flush_ns = x.net ? dfccl_time_ns() + 1000000000ull : 0;
    for (int i = 0; i < nf; i++) {
        dfccl_error_quiet(1);
        dfcclDeregister(fc[i].id, ctx);
        dfccl_error_quiet(0);
    }
    dfccl_coll_flush_ns = 0;

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
    /* the survivors' group watches its own neighbours */
    if (dfccl_fault_arm(g) != DFCCL_OK && dfccl_log_level >= 0) {
        fprintf(stderr, "dfccl[%d]: group %s: the survivors' group watches no net peer (out "
                "of host memory); a later failure across hosts is found by DFCCL_TIMEOUT only\n",
                (int)getpid(), g->name);
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
    free(done);
    free(mine);
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
            dfccl_debug("fault: group %s: an exclusion starts (ranks seen dead: %#llx)", g->name,
                        (unsigned long long)g->excl_pending);
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
    dfccl_debug("fault: group %s: its runs have let go; the survivors' group is built",
                g->name);
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
