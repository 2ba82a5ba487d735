/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Rounds of the synchronization model with unlimited resources, simulated by
 * leaping from one event that matters to the next instead of stepping every
 * event.  The result (deadlock, events, steps) is the one the step engine of
 * round.c gives for the same seed and round, event for event.
 *
 * 1. Most events are plain: a GPU that is not suspended invokes the front of
 *    its list, draws no skip and no synchronization.  Without a cap a plain
 *    invocation executes at once and adds no edge to the dependency graph,
 *    so nothing needs to be done for it at the time it happens.
 * 2. The events that are not plain happen at slots (step, GPU) that can be
 *    computed in advance ("moments"):
 *      - the next synchronization, sync_cd events ahead, and the next skip,
 *        disorder_cd events ahead (every event between two moments is a
 *        disorder trial: its GPU has more than one position left);
 *      - a GPU's last event, which draws no disorder trial and ends its list;
 *      - the event that completes the last collective a suspended GPU waits
 *        for: a member's invocation of it, which comes after a known number
 *        of that member's own events.
 *    Eligible GPUs (neither suspended nor finished) are counted in a Fenwick
 *    tree by id, which turns "k events ahead" into a slot and back.
 * 3. The round jumps to the earliest moment, counts the plain events in
 *    between off both countdowns, and runs that one event as round.c does.
 *    Moments are computed again after every event; whatever changed the
 *    schedule was itself a moment.
 * 4. A GPU's plain invocations are applied when its state is next looked at
 *    ("catching up"): it issued one event in each step since the last one
 *    applied, and each invoked its front.  Parts invoked out of order, ahead
 *    of the front, are marked; a part is invoked when it lies before the
 *    front or is marked.
 * 5. A collective is successful when every member has invoked it.  A
 *    synchronization collects the GPU's live collectives (invoked, not
 *    successful); only collectives at or after the smallest front of its
 *    group-mates can be live.  The GPU is suspended while any of them is
 *    live.  For each group-mate that has not invoked all of them, it keeps
 *    the highest position the mate still has to invoke: the mate invokes in
 *    the order of its list, so that one comes last, and it is released
 *    after the last of these invocations.
 * 6. The dependency graph reduces to suspended GPUs: u waits for m when m
 *    has not invoked a collective u waits for.  A cycle among them is a
 *    deadlock; only a new suspension can close one.
 */
#include "round.h"

#include <stdlib.h>
#include <string.h>

/* A slot is step * gpu_num + gpu; this one never comes. */
#define DFCCL_SIM_LEAP_NEVER INT64_MAX

enum {
    DFCCL_SIM_LEAP_ELIGIBLE  = 0,  /* issues an event in every step */
    DFCCL_SIM_LEAP_SUSPENDED = 1,
    DFCCL_SIM_LEAP_FINISHED  = 2   /* nothing left to invoke (or nothing at all) */
};

typedef struct dfccl_sim_leap_gpu {
    int64_t  next_step;  /* step of its first event not applied yet (eligible) */
    int64_t  memo_slot;  /* release slot predicted at stamp memo */
    int32_t  front;      /* first position not invoked */
    int32_t  left;       /* positions not invoked */
    int32_t  hi;         /* one past the last invoked position */
    int32_t  lo;         /* every collective before this position is successful */
    int32_t  status;     /* DFCCL_SIM_LEAP_* */
    int32_t  heap_at;    /* index in the last-event heap, -1 when not there */
    int32_t  npend;      /* suspended: live collectives it waits for */
    int32_t  nwait;      /* suspended: group-mates it waits for */
    uint32_t memo;       /* the stamp memo_slot was predicted at */
    uint32_t colour;     /* cycle search: 2 * epoch grey, + 1 black */
    int32_t  dfs_next;   /* cycle search: the next of its waits to follow */
} dfccl_sim_leap_gpu_t;

/* A suspended GPU waits for a group-mate to invoke its part at position pos
 * (and the lower positions it waits for, which come before). */
typedef struct dfccl_sim_leap_wait {
    int32_t gpu;
    int32_t pos;
} dfccl_sim_leap_wait_t;

struct dfccl_sim_leap {
    const dfccl_sim_world_t *world;
    int32_t                  gpu_num;
    dfccl_sim_leap_gpu_t    *gpu;        /* [gpu_num] */
    uint8_t                 *ahead;      /* [part_num] invoked ahead of its GPU's front */
    int32_t                 *fen;        /* [gpu_num + 1] Fenwick tree of eligible GPUs */
    int32_t                  fen_top;    /* largest power of two <= gpu_num */
    int32_t                  eligible;
    int64_t                 *heap_key;   /* [gpu_num] min-heap of last-event slots */
    int32_t                 *heap_gpu;
    int32_t                  heap_len;
    int32_t                 *susp;       /* [gpu_num] suspended GPUs */
    int32_t                  nsusp;
    int32_t                 *pend;       /* [real_parts] per GPU from pend_off */
    int32_t                 *pend_off;   /* [gpu_num] */
    int32_t                 *mate_off;   /* [gpu_num + 1] GPUs sharing a group */
    int32_t                 *mate;
    dfccl_sim_leap_wait_t   *wait;       /* per GPU from mate_off: one per mate */
    int32_t                 *wait_of;    /* [gpu_num] scratch: a mate's wait, or -1 */
    int32_t                 *front_coll; /* [gpu_num] scratch: the collective at a
                                            mate's front (INT32_MAX: none left) */
    int32_t                 *stack;      /* [gpu_num] cycle search */
    uint32_t                 stamp;      /* release predictions valid since the last
                                            synchronization or skip */
    uint32_t                 epoch;      /* cycle search colours */
    int64_t                  cur_step;   /* the next slot not processed yet */
    int32_t                  cur_gpu;
    int32_t                  unfinished;
};

/* ---- eligible GPUs: a Fenwick tree over ids ---------------------------- */

static inline void dfccl_sim_leap_fen_add(dfccl_sim_leap_t *leap, int32_t gpu, int32_t delta)
{
    for (int32_t i = gpu + 1; i <= leap->gpu_num; i += i & -i) {
        leap->fen[i] += delta;
    }
    leap->eligible += delta;
}

/* Eligible GPUs with an id below gpu. */
static inline int32_t dfccl_sim_leap_fen_below(const dfccl_sim_leap_t *leap, int32_t gpu)
{
    int32_t sum = 0;

    for (int32_t i = gpu; i > 0; i -= i & -i) {
        sum += leap->fen[i];
    }
    return sum;
}

/* The eligible GPU with rank eligible GPUs below it. */
static inline int32_t dfccl_sim_leap_fen_select(const dfccl_sim_leap_t *leap, int32_t rank)
{
    int32_t pos = 0;

    for (int32_t step = leap->fen_top; step > 0; step >>= 1) {
        if ((pos + step <= leap->gpu_num) && (leap->fen[pos + step] <= rank)) {
            pos  += step;
            rank -= leap->fen[pos];
        }
    }
    return pos;
}

/* ---- last events: an indexed min-heap of slots ------------------------- */

static inline void dfccl_sim_leap_heap_set(dfccl_sim_leap_t *leap, int32_t at, int64_t key,
                                           int32_t gpu)
{
    leap->heap_key[at]     = key;
    leap->heap_gpu[at]     = gpu;
    leap->gpu[gpu].heap_at = at;
}

static void dfccl_sim_leap_heap_down(dfccl_sim_leap_t *leap, int32_t at)
{
    int64_t key = leap->heap_key[at];
    int32_t gpu = leap->heap_gpu[at];
    int32_t child;

    for (;;) {
        child = 2 * at + 1;
        if (child >= leap->heap_len) {
            break;
        }
        if ((child + 1 < leap->heap_len) && (leap->heap_key[child + 1] < leap->heap_key[child])) {
            child++;
        }
        if (leap->heap_key[child] >= key) {
            break;
        }
        dfccl_sim_leap_heap_set(leap, at, leap->heap_key[child], leap->heap_gpu[child]);
        at = child;
    }
    dfccl_sim_leap_heap_set(leap, at, key, gpu);
}

/* Restore the heap after the key at this index changed either way. */
static void dfccl_sim_leap_heap_sift(dfccl_sim_leap_t *leap, int32_t at)
{
    int64_t key = leap->heap_key[at];
    int32_t gpu = leap->heap_gpu[at];
    int32_t parent;

    while (at > 0) {
        parent = (at - 1) / 2;
        if (leap->heap_key[parent] <= key) {
            break;
        }
        dfccl_sim_leap_heap_set(leap, at, leap->heap_key[parent], leap->heap_gpu[parent]);
        at = parent;
    }
    dfccl_sim_leap_heap_set(leap, at, key, gpu);
    dfccl_sim_leap_heap_down(leap, at);
}

static void dfccl_sim_leap_heap_remove(dfccl_sim_leap_t *leap, int32_t gpu)
{
    int32_t at = leap->gpu[gpu].heap_at;
    int32_t last;

    leap->gpu[gpu].heap_at = -1;
    last                   = --leap->heap_len;
    if (at == last) {
        return;
    }
    dfccl_sim_leap_heap_set(leap, at, leap->heap_key[last], leap->heap_gpu[last]);
    dfccl_sim_leap_heap_sift(leap, at);
}

/* The slot of an eligible GPU's last event, if nothing changes its course. */
static inline int64_t dfccl_sim_leap_last_slot(const dfccl_sim_leap_t *leap, int32_t gpu)
{
    const dfccl_sim_leap_gpu_t *gs = &leap->gpu[gpu];

    return (gs->next_step + gs->left - 1) * leap->gpu_num + gpu;
}

static void dfccl_sim_leap_heap_update(dfccl_sim_leap_t *leap, int32_t gpu)
{
    int32_t at = leap->gpu[gpu].heap_at;

    if (at < 0) {
        at = leap->heap_len++;
    }
    dfccl_sim_leap_heap_set(leap, at, dfccl_sim_leap_last_slot(leap, gpu), gpu);
    dfccl_sim_leap_heap_sift(leap, at);
}

/* ---- GPU state --------------------------------------------------------- */

static inline int32_t dfccl_sim_leap_coll_at(const dfccl_sim_leap_t *leap, int32_t gpu,
                                             int32_t pos)
{
    return leap->world->part_coll[(size_t)pos * (size_t)leap->gpu_num + (size_t)gpu];
}

/* Apply the plain invocations the GPU issued before the current slot. */
static inline void dfccl_sim_leap_catch_up(dfccl_sim_leap_t *leap, int32_t gpu)
{
    dfccl_sim_leap_gpu_t *gs = &leap->gpu[gpu];
    size_t stride            = (size_t)leap->gpu_num;
    int64_t n;

    if (gs->status != DFCCL_SIM_LEAP_ELIGIBLE) {
        return;
    }
    n = leap->cur_step - gs->next_step + (gpu < leap->cur_gpu);
    if (n <= 0) {
        return;
    }
    gs->next_step += n;
    gs->left      -= (int32_t)n;
    /* through the parts invoked ahead, one front at a time */
    for (; (n > 0) && (gs->front < gs->hi); n--) {
        gs->front++;
        while ((gs->front < gs->hi) && leap->ahead[(size_t)gs->front * stride + gpu]) {
            leap->ahead[(size_t)gs->front * stride + gpu] = 0;
            gs->front++;
        }
    }
    gs->front += (int32_t)n;
    if (gs->hi < gs->front) {
        gs->hi = gs->front;
    }
}

/* Whether the GPU has invoked the part (its own part id). */
static inline int dfccl_sim_leap_invoked(const dfccl_sim_leap_t *leap, int32_t gpu,
                                         int32_t part)
{
    return ((int64_t)part < (int64_t)leap->gpu[gpu].front * leap->gpu_num + gpu) ||
           leap->ahead[part];
}

/* ---- events ------------------------------------------------------------ */

/* Choose the position of the GPU's next invocation (as dfccl_sim_pick). */
static int32_t dfccl_sim_leap_pick(dfccl_sim_round_t *round, dfccl_sim_leap_t *leap,
                                   int32_t gpu)
{
    const dfccl_sim_leap_gpu_t *gs = &leap->gpu[gpu];
    size_t stride                  = (size_t)leap->gpu_num;
    int32_t pos                    = gs->front;
    int32_t k                      = gs->left;

    /* marks lie below hi only: most skips read none */
    for (; k > 1; k--) {
        if (dfccl_sim_disorder_take(round)) {
            break;
        }
        /* skip this position */
        do {
            pos++;
        } while ((pos < gs->hi) && leap->ahead[(size_t)pos * stride + gpu]);
    }
    return pos;
}

static void dfccl_sim_leap_invoke(dfccl_sim_leap_t *leap, int32_t gpu, int32_t pos)
{
    dfccl_sim_leap_gpu_t *gs = &leap->gpu[gpu];
    size_t stride            = (size_t)leap->gpu_num;

    gs->left--;
    if (pos >= gs->hi) {
        gs->hi = pos + 1;
    }
    if (pos != gs->front) {
        leap->ahead[(size_t)pos * stride + gpu] = 1;
        return;
    }
    gs->front++;
    while ((gs->front < gs->hi) && leap->ahead[(size_t)gs->front * stride + gpu]) {
        leap->ahead[(size_t)gs->front * stride + gpu] = 0;
        gs->front++;
    }
}

/*
 * If the collective, which gpu has invoked, is live, add it to the GPU's
 * pending list and raise, for each member that has not invoked it, the
 * position that member's wait needs; returns whether it is live.  A member
 * has invoked the collective if it lies before the collective at its front
 * (front_coll, filled by the caller for every group-mate), or if it is
 * marked ahead; the member's position is looked up only then.
 */
static int dfccl_sim_leap_gather(dfccl_sim_leap_t *leap, int32_t gpu, int32_t coll)
{
    const dfccl_sim_world_t *world = leap->world;
    dfccl_sim_leap_gpu_t *gs       = &leap->gpu[gpu];
    dfccl_sim_leap_wait_t *wait    = leap->wait + leap->mate_off[gpu];
    int32_t k                      = world->coll_group[coll];
    int32_t first                  = world->group_gpu_off[k];
    const dfccl_sim_leap_gpu_t *ms;
    int32_t j, m, w, part, pos, live = 0;

    for (j = first; j < world->group_gpu_off[k + 1]; j++) {
        m = world->group_gpus[j];
        if ((m == gpu) || (coll < leap->front_coll[m])) {
            continue;
        }
        ms   = &leap->gpu[m];
        part = world->coll_members[world->coll_part0[coll] + (j - first)].part;
        pos  = (int32_t)((part - m) / leap->gpu_num);
        if ((pos < ms->hi) && leap->ahead[part]) {
            continue;
        }
        live = 1;
        w    = leap->wait_of[m];
        if (w < 0) {
            w                = gs->nwait++;
            leap->wait_of[m] = w;
            wait[w].gpu      = m;
            wait[w].pos      = -1;
        }
        if (pos > wait[w].pos) {
            wait[w].pos = pos;
        }
    }
    if (live) {
        leap->pend[leap->pend_off[gpu] + gs->npend++] = coll;
    }
    return live;
}

/*
 * Collect the GPU's live collectives and its waits (see 5. above).  A
 * collective below every group-mate's front has been invoked by all of
 * them, and the list is sorted by collective, so the search walks down from
 * the front only while collectives can still be live, and never below lo.
 */
static void dfccl_sim_leap_collect(dfccl_sim_leap_t *leap, int32_t gpu)
{
    const dfccl_sim_world_t *world = leap->world;
    dfccl_sim_leap_gpu_t *gs       = &leap->gpu[gpu];
    size_t stride                  = (size_t)leap->gpu_num;
    int32_t bound = INT32_MAX, low, pos, m, coll;

    /* catch up first, so that the loads of the fronts' collectives overlap */
    for (int32_t i = leap->mate_off[gpu]; i < leap->mate_off[gpu + 1]; i++) {
        dfccl_sim_leap_catch_up(leap, leap->mate[i]);
    }
    for (int32_t i = leap->mate_off[gpu]; i < leap->mate_off[gpu + 1]; i++) {
        m    = leap->mate[i];
        coll = (leap->gpu[m].front < world->gpu_len[m]) ?
                       dfccl_sim_leap_coll_at(leap, m, leap->gpu[m].front) :
                       INT32_MAX;
        leap->front_coll[m] = coll;
        bound               = (coll < bound) ? coll : bound;
    }
    gs->npend = 0;
    gs->nwait = 0;
    low       = gs->front;
    for (pos = gs->front - 1; pos >= gs->lo; pos--) {
        coll = dfccl_sim_leap_coll_at(leap, gpu, pos);
        if (coll < bound) {
            break;
        }
        if (dfccl_sim_leap_gather(leap, gpu, coll)) {
            low = pos;
        }
    }
    gs->lo = low;  /* every collective below is successful, and stays so */
    for (pos = gs->front + 1; pos < gs->hi; pos++) {
        if (leap->ahead[(size_t)pos * stride + gpu]) {
            dfccl_sim_leap_gather(leap, gpu, dfccl_sim_leap_coll_at(leap, gpu, pos));
        }
    }
    for (int32_t w = 0; w < gs->nwait; w++) {
        leap->wait_of[leap->wait[leap->mate_off[gpu] + w].gpu] = -1;
    }
}

/*
 * Bring a suspended GPU's waits up to date; returns how many are left.  A
 * mate whose front passed the position has invoked every part the wait was
 * for.  A mate that invoked that position ahead of its front may still owe
 * lower ones: the wait is computed again from the pending list (rare).
 */
static int32_t dfccl_sim_leap_waits_update(dfccl_sim_leap_t *leap, int32_t gpu)
{
    const dfccl_sim_world_t *world = leap->world;
    dfccl_sim_leap_gpu_t *gs       = &leap->gpu[gpu];
    dfccl_sim_leap_wait_t *wait    = leap->wait + leap->mate_off[gpu];
    const int32_t *pend            = leap->pend + leap->pend_off[gpu];
    const dfccl_sim_member_t *member;
    int32_t w = 0, m, pos;

    while (w < gs->nwait) {
        m = wait[w].gpu;
        dfccl_sim_leap_catch_up(leap, m);
        if (wait[w].pos >= leap->gpu[m].front) {
            if (!leap->ahead[(size_t)wait[w].pos * (size_t)leap->gpu_num + m]) {
                w++;
                continue;
            }
            wait[w].pos = -1;
            for (int32_t i = 0; i < gs->npend; i++) {
                for (int32_t j = world->coll_part0[pend[i]]; j < world->coll_part0[pend[i] + 1];
                     j++) {
                    member = &world->coll_members[j];
                    if ((member->gpu != m) ||
                        dfccl_sim_leap_invoked(leap, m, member->part)) {
                        continue;
                    }
                    pos         = (int32_t)((member->part - m) / leap->gpu_num);
                    wait[w].pos = (pos > wait[w].pos) ? pos : wait[w].pos;
                }
            }
            if (wait[w].pos >= 0) {
                w++;
                continue;
            }
        }
        wait[w] = wait[--gs->nwait];  /* m owes nothing more */
    }
    return gs->nwait;
}

/* Depth-first search from a GPU just suspended; 1 if it meets a cycle. */
static int dfccl_sim_leap_cycle(dfccl_sim_leap_t *leap, int32_t root)
{
    dfccl_sim_leap_gpu_t *us;
    uint32_t grey, black;
    int32_t sp = 0, u, m;

    if (++leap->epoch >= 0x7fffffffu) {
        for (int32_t g = 0; g < leap->gpu_num; g++) {
            leap->gpu[g].colour = 0;
        }
        leap->epoch = 1;
    }
    grey  = 2 * leap->epoch;
    black = grey + 1;

    /* waits of other GPUs may be stale: mates invoked since, suspended or not */
    dfccl_sim_leap_waits_update(leap, root);
    leap->gpu[root].colour   = grey;
    leap->gpu[root].dfs_next = 0;
    leap->stack[sp++]        = root;
    while (sp > 0) {
        u  = leap->stack[sp - 1];
        us = &leap->gpu[u];
        /* u waits for a mate's invocation; only a suspended mate can be on a cycle */
        m = -1;
        while ((m < 0) && (us->dfs_next < us->nwait)) {
            m = leap->wait[leap->mate_off[u] + us->dfs_next++].gpu;
            if (leap->gpu[m].status != DFCCL_SIM_LEAP_SUSPENDED) {
                m = -1;
            }
        }
        if (m < 0) {
            us->colour = black;
            sp--;
            continue;
        }
        if (leap->gpu[m].colour == grey) {
            return 1;
        }
        if (leap->gpu[m].colour == black) {
            continue;
        }
        dfccl_sim_leap_waits_update(leap, m);
        leap->gpu[m].colour   = grey;
        leap->gpu[m].dfs_next = 0;
        leap->stack[sp++]     = m;
    }
    return 0;
}

/*
 * The slot of the event after which a suspended GPU is released: the last
 * of its waits to end, each mate invoking its front once per step from its
 * next event on (or from its own release).  DFCCL_SIM_LEAP_NEVER if a mate
 * never gets there.
 */
static int64_t dfccl_sim_leap_release_slot(dfccl_sim_leap_t *leap, int32_t gpu)
{
    dfccl_sim_leap_gpu_t *gs          = &leap->gpu[gpu];
    const dfccl_sim_leap_wait_t *wait = leap->wait + leap->mate_off[gpu];
    int64_t G                         = leap->gpu_num;
    int64_t release = -1, start, slot, r;
    dfccl_sim_leap_gpu_t *ms;
    int32_t p, d, m;

    if (gs->memo == leap->stamp) {
        return gs->memo_slot;
    }
    gs->memo      = leap->stamp;
    gs->memo_slot = DFCCL_SIM_LEAP_NEVER;  /* what a cycle would give */
    for (int32_t w = 0; w < gs->nwait; w++) {
        m  = wait[w].gpu;
        ms = &leap->gpu[m];
        dfccl_sim_leap_catch_up(leap, m);
        if (wait[w].pos < ms->front) {
            continue;  /* done since the waits were last brought up to date */
        }
        /* the mate reaches the position with its d-th invocation from now */
        d = wait[w].pos - ms->front + 1;
        for (p = ms->front + 1; (p < wait[w].pos) && (p < ms->hi); p++) {
            d -= leap->ahead[(size_t)p * (size_t)G + (size_t)m];
        }
        if (ms->status == DFCCL_SIM_LEAP_ELIGIBLE) {
            start = ms->next_step;
        } else {
            r = dfccl_sim_leap_release_slot(leap, m);
            if (r == DFCCL_SIM_LEAP_NEVER) {
                return DFCCL_SIM_LEAP_NEVER;
            }
            /* released after the event at slot r: m acts in that step if later */
            start = r / G + ((m > r % G) ? 0 : 1);
        }
        slot    = (start + d - 1) * G + m;
        release = (slot > release) ? slot : release;
    }
    gs->memo_slot = release;
    return release;
}

/* The slot of the event k events from the current slot. */
static int64_t dfccl_sim_leap_slot_at(const dfccl_sim_leap_t *leap, uint64_t k)
{
    uint64_t n = (uint64_t)leap->eligible;
    int32_t below, rest;
    uint64_t steps;

    if (n == 0) {
        return DFCCL_SIM_LEAP_NEVER;
    }
    below = dfccl_sim_leap_fen_below(leap, leap->cur_gpu);
    rest  = leap->eligible - below;
    if (k < (uint64_t)rest) {
        return leap->cur_step * leap->gpu_num +
               dfccl_sim_leap_fen_select(leap, below + (int32_t)k);
    }
    k    -= (uint64_t)rest;
    steps = k / n;
    if (steps >= (uint64_t)(INT64_MAX / leap->gpu_num - leap->cur_step - 2)) {
        return DFCCL_SIM_LEAP_NEVER;
    }
    return (leap->cur_step + 1 + (int64_t)steps) * leap->gpu_num +
           dfccl_sim_leap_fen_select(leap, (int32_t)(k % n));
}

/* The events from the current slot up to, not including, a later slot. */
static uint64_t dfccl_sim_leap_events_to(const dfccl_sim_leap_t *leap, int64_t slot)
{
    int64_t step  = slot / leap->gpu_num;
    int32_t gpu   = (int32_t)(slot % leap->gpu_num);
    int32_t below = dfccl_sim_leap_fen_below(leap, leap->cur_gpu);

    if (step == leap->cur_step) {
        return (uint64_t)(dfccl_sim_leap_fen_below(leap, gpu) - below);
    }
    return (uint64_t)(leap->eligible - below) +
           (uint64_t)(step - leap->cur_step - 1) * (uint64_t)leap->eligible +
           (uint64_t)dfccl_sim_leap_fen_below(leap, gpu);
}

static void dfccl_sim_leap_set_slot(dfccl_sim_leap_t *leap, int64_t slot)
{
    leap->cur_step = slot / leap->gpu_num;
    leap->cur_gpu  = (int32_t)(slot % leap->gpu_num);
}

/* Take an eligible GPU out of the schedule. */
static void dfccl_sim_leap_unschedule(dfccl_sim_leap_t *leap, int32_t gpu, int32_t status)
{
    leap->gpu[gpu].status = status;
    dfccl_sim_leap_fen_add(leap, gpu, -1);
    dfccl_sim_leap_heap_remove(leap, gpu);
}

/* Predictions made before a synchronization or a skip are void after it. */
static void dfccl_sim_leap_new_stamp(dfccl_sim_leap_t *leap)
{
    if (++leap->stamp == UINT32_MAX) {
        for (int32_t g = 0; g < leap->gpu_num; g++) {
            leap->gpu[g].memo = 0;
        }
        leap->stamp = 1;
    }
}

/*
 * Release the suspended GPUs that wait for nothing more after the event at
 * slot (step, by).  After a plain invocation only those whose predicted
 * release is this slot can be; after a skip any can.
 */
static void dfccl_sim_leap_release(dfccl_sim_leap_t *leap, int64_t step, int32_t by,
                                   int skipped)
{
    int64_t slot = step * leap->gpu_num + by;
    dfccl_sim_leap_gpu_t *gs;
    int32_t i = 0, h;

    while (i < leap->nsusp) {
        h  = leap->susp[i];
        gs = &leap->gpu[h];
        if ((!skipped && (gs->memo_slot != slot)) || (dfccl_sim_leap_waits_update(leap, h) > 0)) {
            if (gs->memo_slot <= slot) {
                dfccl_sim_leap_new_stamp(leap);  /* never a slot in the past */
            }
            i++;
            continue;
        }
        /* a GPU later in the step than the one that released it acts in it */
        gs->status    = DFCCL_SIM_LEAP_ELIGIBLE;
        gs->next_step = step + ((h > by) ? 0 : 1);
        dfccl_sim_leap_fen_add(leap, h, 1);
        dfccl_sim_leap_heap_update(leap, h);
        leap->susp[i] = leap->susp[--leap->nsusp];
    }
}

static void dfccl_sim_leap_reset(dfccl_sim_leap_t *leap)
{
    const dfccl_sim_world_t *world = leap->world;
    dfccl_sim_leap_gpu_t *gs;
    int32_t g, j, len;

    memset(leap->fen, 0, ((size_t)leap->gpu_num + 1) * sizeof(int32_t));
    leap->eligible = 0;
    leap->heap_len = 0;
    for (g = 0; g < leap->gpu_num; g++) {
        len            = world->gpu_len[g];
        gs             = &leap->gpu[g];
        gs->next_step  = 0;
        gs->front      = 0;
        gs->left       = len;
        gs->hi         = 0;
        gs->lo         = 0;
        gs->npend      = 0;
        gs->nwait      = 0;
        gs->heap_at    = -1;
        gs->status     = (len > 0) ? DFCCL_SIM_LEAP_ELIGIBLE : DFCCL_SIM_LEAP_FINISHED;
        if (len > 0) {
            leap->fen[g + 1] = 1;
            leap->eligible++;
            dfccl_sim_leap_heap_set(leap, leap->heap_len, dfccl_sim_leap_last_slot(leap, g),
                                    g);
            leap->heap_len++;
        }
    }
    for (g = 1; g <= leap->gpu_num; g++) {
        j = g + (g & -g);
        if (j <= leap->gpu_num) {
            leap->fen[j] += leap->fen[g];
        }
    }
    for (j = leap->heap_len / 2 - 1; j >= 0; j--) {
        dfccl_sim_leap_heap_down(leap, j);
    }
    leap->unfinished = leap->eligible;
    leap->nsusp      = 0;
    leap->cur_step   = 0;
    leap->cur_gpu    = 0;
}

/* Clear the marks a round left (they lie between a GPU's front and hi). */
static void dfccl_sim_leap_clear(dfccl_sim_leap_t *leap)
{
    const dfccl_sim_leap_gpu_t *gs;

    for (int32_t g = 0; g < leap->gpu_num; g++) {
        gs = &leap->gpu[g];
        for (int32_t p = gs->front + 1; p < gs->hi; p++) {
            leap->ahead[(size_t)p * (size_t)leap->gpu_num + g] = 0;
        }
    }
}

void dfccl_sim_leap_run(dfccl_sim_round_t *round, dfccl_sim_outcome_t *outcome)
{
    const dfccl_sim_world_t *world = round->world;
    dfccl_sim_leap_t *leap         = round->leap;
    int64_t next, slot, counted, step, last_step = 0;
    dfccl_sim_leap_gpu_t *gs;
    uint64_t plain, due;
    int32_t x, pos, skipped;

    dfccl_sim_leap_reset(leap);
    dfccl_sim_leap_new_stamp(leap);
    round->events = 0;
    while (leap->unfinished > 0) {
        /* the next moment; both countdowns count the events from here on */
        due     = (round->sync_cd < round->disorder_cd) ? round->sync_cd : round->disorder_cd;
        counted = dfccl_sim_leap_slot_at(leap, due);
        next    = counted;
        if ((leap->heap_len > 0) && (leap->heap_key[0] < next)) {
            next = leap->heap_key[0];
        }
        for (int32_t i = 0; i < leap->nsusp; i++) {
            slot = dfccl_sim_leap_release_slot(leap, leap->susp[i]);
            next = (slot < next) ? slot : next;
        }
        if (next == DFCCL_SIM_LEAP_NEVER) {
            /* nothing can move, and no cycle was found: a bug (see round.c) */
            outcome->deadlocked = 1;
            outcome->stalled    = 1;
            outcome->steps      = (uint64_t)last_step + 2;
            break;
        }

        /* the plain events before it */
        plain               = (next == counted) ? due : dfccl_sim_leap_events_to(leap, next);
        round->sync_cd     -= plain;
        round->disorder_cd -= plain;
        round->events      += plain;
        step                = next / leap->gpu_num;
        x                   = (int32_t)(next % leap->gpu_num);
        last_step           = step;
        dfccl_sim_leap_set_slot(leap, next);
        dfccl_sim_leap_catch_up(leap, x);
        gs            = &leap->gpu[x];
        gs->next_step = step + 1;
        dfccl_sim_leap_set_slot(leap, next + 1);

        /* the event itself, as round.c runs it */
        round->events++;
        if (round->sync_cd-- == 0) {
            round->sync_cd = dfccl_sim_rng_gap(&round->rng, world->sync_prob,
                                               round->log1m_sync);
            dfccl_sim_leap_collect(leap, x);
            dfccl_sim_leap_new_stamp(leap);
            if (gs->npend == 0) {
                dfccl_sim_leap_heap_update(leap, x);  /* one step later */
            } else {
                dfccl_sim_leap_unschedule(leap, x, DFCCL_SIM_LEAP_SUSPENDED);
                leap->susp[leap->nsusp++] = x;
                if (dfccl_sim_leap_cycle(leap, x)) {
                    outcome->deadlocked = 1;
                    outcome->steps      = (uint64_t)step + 1;
                    break;
                }
            }
            continue;  /* a synchronization releases nobody */
        }
        pos     = dfccl_sim_leap_pick(round, leap, x);
        skipped = (pos != gs->front);
        if (skipped) {
            dfccl_sim_leap_new_stamp(leap);
        }
        dfccl_sim_leap_invoke(leap, x, pos);
        if (gs->left == 0) {
            dfccl_sim_leap_unschedule(leap, x, DFCCL_SIM_LEAP_FINISHED);
            if (--leap->unfinished == 0) {
                outcome->steps = (uint64_t)step + 1;
                break;
            }
        }
        if (leap->nsusp > 0) {
            dfccl_sim_leap_release(leap, step, x, skipped);
        }
    }
    dfccl_sim_leap_clear(leap);
}

/* Each GPU's group-mates, without itself and without repeats. */
static dfccl_sim_status_t dfccl_sim_leap_mates(dfccl_sim_leap_t *leap)
{
    const dfccl_sim_world_t *world = leap->world;
    int32_t G                      = world->gpu_num;
    int32_t *groups_off = NULL, *groups = NULL, *seen = NULL, *fill = NULL;
    dfccl_sim_status_t status = DFCCL_SIM_ERR_NO_MEMORY;
    int32_t members = world->group_gpu_off[world->group_num];
    int64_t total   = 0;
    int32_t g, k, m, i, j, h;

    groups_off     = dfccl_sim_calloc((size_t)G + 1, sizeof(int32_t), "GPU groups");
    groups         = dfccl_sim_calloc((size_t)members, sizeof(int32_t), "GPU groups");
    fill           = dfccl_sim_calloc((size_t)G, sizeof(int32_t), "GPU groups");
    seen           = dfccl_sim_calloc((size_t)G, sizeof(int32_t), "GPU groups");
    leap->mate_off = dfccl_sim_calloc((size_t)G + 1, sizeof(int32_t), "group-mates");
    if ((groups_off == NULL) || (groups == NULL) || (fill == NULL) || (seen == NULL) ||
        (leap->mate_off == NULL)) {
        goto out_free;
    }
    /* the groups of each GPU */
    for (m = 0; m < members; m++) {
        groups_off[world->group_gpus[m] + 1]++;
    }
    for (g = 0; g < G; g++) {
        groups_off[g + 1] += groups_off[g];
    }
    for (k = 0; k < world->group_num; k++) {
        for (m = world->group_gpu_off[k]; m < world->group_gpu_off[k + 1]; m++) {
            g = world->group_gpus[m];
            groups[groups_off[g] + fill[g]++] = k;
        }
    }
    /* count, then fill, the distinct mates; seen[h] = g + 1 marks h for g */
    for (int pass = 0; pass < 2; pass++) {
        memset(seen, 0, (size_t)G * sizeof(int32_t));
        total = 0;
        for (g = 0; g < G; g++) {
            if (pass == 1) {
                leap->mate_off[g] = (int32_t)total;
            }
            for (i = groups_off[g]; i < groups_off[g + 1]; i++) {
                k = groups[i];
                for (j = world->group_gpu_off[k]; j < world->group_gpu_off[k + 1]; j++) {
                    h = world->group_gpus[j];
                    if ((h == g) || (seen[h] == g + 1)) {
                        continue;
                    }
                    seen[h] = g + 1;
                    if (pass == 1) {
                        leap->mate[total] = h;
                    }
                    total++;
                }
            }
        }
        if (pass == 0) {
            leap->mate = dfccl_sim_calloc((size_t)total, sizeof(int32_t), "group-mates");
            if (leap->mate == NULL) {
                goto out_free;
            }
        }
    }
    leap->mate_off[G] = (int32_t)total;
    status            = DFCCL_SIM_OK;

out_free:
    free(seen);
    free(fill);
    free(groups);
    free(groups_off);
    return status;
}

dfccl_sim_status_t dfccl_sim_leap_create(const dfccl_sim_world_t *world,
                                         dfccl_sim_leap_t **leap_p)
{
    dfccl_sim_leap_t *leap;
    size_t G = (size_t)world->gpu_num;

    leap = dfccl_sim_calloc(1, sizeof(*leap), "leap state");
    if (leap == NULL) {
        return DFCCL_SIM_ERR_NO_MEMORY;
    }
    leap->world    = world;
    leap->gpu_num  = world->gpu_num;
    leap->gpu      = dfccl_sim_calloc(G, sizeof(dfccl_sim_leap_gpu_t), "leap GPU states");
    leap->ahead    = dfccl_sim_calloc((size_t)world->part_num, 1, "leap part marks");
    leap->fen      = dfccl_sim_calloc(G + 1, sizeof(int32_t), "leap schedule");
    leap->heap_key = dfccl_sim_calloc(G, sizeof(int64_t), "leap schedule");
    leap->heap_gpu = dfccl_sim_calloc(G, sizeof(int32_t), "leap schedule");
    leap->susp     = dfccl_sim_calloc(G, sizeof(int32_t), "leap suspensions");
    leap->stack    = dfccl_sim_calloc(G, sizeof(int32_t), "leap search stack");
    leap->pend     = dfccl_sim_calloc((size_t)world->real_parts, sizeof(int32_t),
                                      "leap waiting lists");
    leap->pend_off = dfccl_sim_calloc(G, sizeof(int32_t), "leap waiting lists");
    leap->wait_of    = dfccl_sim_calloc(G, sizeof(int32_t), "leap waits");
    leap->front_coll = dfccl_sim_calloc(G, sizeof(int32_t), "leap fronts");
    if ((leap->wait_of == NULL) || (leap->front_coll == NULL) || (leap->gpu == NULL) || (leap->ahead == NULL) || (leap->fen == NULL) ||
        (leap->heap_key == NULL) || (leap->heap_gpu == NULL) || (leap->susp == NULL) ||
        (leap->stack == NULL) || (leap->pend == NULL) || (leap->pend_off == NULL) ||
        (dfccl_sim_leap_mates(leap) != DFCCL_SIM_OK)) {
        dfccl_sim_leap_destroy(leap);
        return DFCCL_SIM_ERR_NO_MEMORY;
    }
    leap->wait = dfccl_sim_calloc((size_t)leap->mate_off[G], sizeof(dfccl_sim_leap_wait_t),
                                  "leap waits");
    if (leap->wait == NULL) {
        dfccl_sim_leap_destroy(leap);
        return DFCCL_SIM_ERR_NO_MEMORY;
    }
    for (size_t g = 0; g < G; g++) {
        leap->wait_of[g] = -1;
        if (g > 0) {
            leap->pend_off[g] = leap->pend_off[g - 1] + world->gpu_len[g - 1];
        }
    }
    for (leap->fen_top = 1; (size_t)leap->fen_top * 2 <= G; leap->fen_top *= 2) {
    }
    *leap_p = leap;
    return DFCCL_SIM_OK;
}

void dfccl_sim_leap_destroy(dfccl_sim_leap_t *leap)
{
    if (leap == NULL) {
        return;
    }
    free(leap->gpu);
    free(leap->ahead);
    free(leap->fen);
    free(leap->heap_key);
    free(leap->heap_gpu);
    free(leap->susp);
    free(leap->stack);
    free(leap->pend);
    free(leap->pend_off);
    free(leap->mate_off);
    free(leap->mate);
    free(leap->wait);
    free(leap->wait_of);
    free(leap->front_coll);
    free(leap);
}
