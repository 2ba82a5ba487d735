/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The state machine of one simulated round (paper section 2.4.1).
 *
 * 1. The round advances in steps; in each step the GPUs are visited in id
 *    order and each one that is neither suspended nor finished issues one
 *    event.
 * 2. In the synchronization model the event is a synchronization with
 *    probability sync_prob; otherwise it is the GPU's next invocation, chosen
 *    by walking its remaining intended list from the front and skipping a
 *    position with probability disorder_prob (never the last one left).
 * 3. An invoked part executes at once when its GPU has a free execution slot
 *    and nothing waits before it; otherwise it waits in its GPU's queue.  The
 *    single-queue model is one slot per GPU; the synchronization model has
 *    unlimited slots unless resource_limit caps them.
 * 4. A collective is successful once it executes on every member GPU; its
 *    parts free their slots, waiting parts move up, and a suspension ends
 *    once every part that was executing when it began is done.  (A part
 *    keeps the state "executing"; it is done when its collective is.)
 * 5. After each event the dependency graph is searched for a cycle, starting
 *    only from the nodes the event gave new edges; the graph had no cycle
 *    before, so any new cycle passes through one of them.  The round ends at
 *    the first cycle (a deadlock) or when every collective is successful.
 *
 * Random trials are drawn as gaps (rng.h), one countdown for disorder trials
 * and one for synchronization trials.  A round without any disorder skip
 * keeps the consistent order and cannot deadlock, so unless
 * DFCCL_SIM_RUN_FULL is given, a round whose first gap covers all its trials
 * is counted as successful without being stepped.  Rounds of the
 * synchronization model without a cap go to leap.c (unless synchronizations
 * and skips are frequent), which gives the same outcome without issuing the
 * plain events one by one.
 */
#include "round.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/*
 * Leaping costs a little for every synchronization and skip and for every
 * GPU suspended meanwhile; stepping costs a little for every event.  Above
 * about one synchronization or skip in a hundred events, free groupings
 * (where many GPUs wait at once) step faster.
 */
#define DFCCL_SIM_LEAP_MAX_RATE 0.01

dfccl_sim_status_t dfccl_sim_round_create(const dfccl_sim_world_t *world,
                                          dfccl_sim_round_t **round_p)
{
    dfccl_sim_round_t *round;
    size_t node_num;

    round = dfccl_sim_calloc(1, sizeof(*round), "round");
    if (round == NULL) {
        return DFCCL_SIM_ERR_NO_MEMORY;
    }
    node_num         = (size_t)world->part_num + 2 * (size_t)world->gpu_num;
    round->world     = world;
    round->finite    = (world->limit != INT32_MAX);
    round->node_num  = (int32_t)node_num;
    round->state     = dfccl_sim_calloc((size_t)world->part_num, 1, "part states");
    round->coll_wait = dfccl_sim_calloc((size_t)world->coll_num, sizeof(uint16_t),
                                        "collective states");
    round->gpu       = dfccl_sim_calloc((size_t)world->gpu_num, sizeof(dfccl_sim_gpu_t),
                                        "GPU states");
    round->active    = dfccl_sim_calloc((size_t)world->gpu_num, sizeof(int32_t), "GPU list");
    round->done      = dfccl_sim_calloc((size_t)world->coll_num, sizeof(int32_t),
                                        "completion stack");
    round->roots     = dfccl_sim_calloc(node_num, sizeof(int32_t), "graph roots");
    round->mark      = dfccl_sim_calloc(node_num, sizeof(uint32_t), "graph marks");
    round->stack     = dfccl_sim_calloc(node_num, sizeof(dfccl_sim_frame_t), "graph stack");
    if ((round->state == NULL) || (round->coll_wait == NULL) || (round->gpu == NULL) ||
        (round->active == NULL) || (round->done == NULL) || (round->roots == NULL) ||
        (round->mark == NULL) || (round->stack == NULL)) {
        goto err_destroy;
    }
    if (round->finite) {
        round->wq     = dfccl_sim_calloc((size_t)world->real_parts, sizeof(dfccl_sim_entry_t),
                                         "waiting queues");
        round->wq_off = dfccl_sim_calloc((size_t)world->gpu_num, sizeof(int32_t),
                                         "waiting queues");
        round->slots  = dfccl_sim_calloc((size_t)world->gpu_num * (size_t)world->limit,
                                         sizeof(dfccl_sim_entry_t), "execution slots");
        if ((round->wq == NULL) || (round->wq_off == NULL) || (round->slots == NULL)) {
            goto err_destroy;
        }
        for (int32_t g = 1; g < world->gpu_num; g++) {
            round->wq_off[g] = round->wq_off[g - 1] + world->gpu_len[g - 1];
        }
    }
    if ((world->model == DFCCL_SIM_MODEL_SYNC) && !round->finite &&
        (dfccl_sim_leap_create(world, &round->leap) != DFCCL_SIM_OK)) {
        goto err_destroy;
    }
    round->log1m_disorder = log1p(-world->disorder_prob);
    round->log1m_sync     = log1p(-world->sync_prob);
    dfccl_sim_round_reset(round);
    *round_p = round;
    return DFCCL_SIM_OK;

err_destroy:
    dfccl_sim_round_destroy(round);
    return DFCCL_SIM_ERR_NO_MEMORY;
}

void dfccl_sim_round_destroy(dfccl_sim_round_t *round)
{
    if (round == NULL) {
        return;
    }
    free(round->state);
    free(round->coll_wait);
    free(round->gpu);
    free(round->active);
    free(round->wq);
    free(round->wq_off);
    free(round->slots);
    free(round->done);
    free(round->roots);
    free(round->mark);
    free(round->stack);
    dfccl_sim_leap_destroy(round->leap);
    free(round);
}

void dfccl_sim_round_reset(dfccl_sim_round_t *round)
{
    const dfccl_sim_world_t *world = round->world;
    dfccl_sim_gpu_t *gs;
    int32_t g;

    memset(round->state, 0, (size_t)world->part_num);
    memcpy(round->coll_wait, world->coll_size, (size_t)world->coll_num * sizeof(uint16_t));
    round->nactive = 0;
    for (g = 0; g < world->gpu_num; g++) {
        gs = &round->gpu[g];
        memset(gs, 0, sizeof(*gs));
        gs->left = world->gpu_len[g];
        if (gs->left > 0) {
            round->active[round->nactive++] = g;
        }
    }
    round->colls_left = world->coll_num;
    round->events     = 0;
    round->nroots     = 0;
}

/*
 * The hot functions take the model as constant arguments (finite: execution
 * slots are capped; sync: the synchronization model) and are always inlined,
 * so that dfccl_sim_round_steps compiles into one specialised loop per model.
 */
#define DFCCL_SIM_HOT static inline __attribute__((always_inline))

DFCCL_SIM_HOT void dfccl_sim_slot_add(dfccl_sim_round_t *round, int finite, int32_t gpu,
                                      int32_t part, int32_t coll)
{
    dfccl_sim_gpu_t *gs = &round->gpu[gpu];
    dfccl_sim_entry_t *slot;

    if (finite) {
        slot = &round->slots[(size_t)gpu * (size_t)round->world->limit + (size_t)gs->exec_cnt];
        slot->part = part;
        slot->coll = coll;
    }
    gs->exec_cnt++;
}

/* The part of coll on gpu is done. */
DFCCL_SIM_HOT void dfccl_sim_slot_remove(dfccl_sim_round_t *round, int finite, int32_t gpu,
                                         int32_t coll)
{
    dfccl_sim_gpu_t *gs = &round->gpu[gpu];
    dfccl_sim_entry_t *slots;
    int32_t i;

    if ((--gs->exec_cnt == 0) && (gs->wq_head == gs->wq_tail)) {
        /* everything this GPU invoked is done, and every position before
         * front is invoked */
        gs->lo = gs->front;
    }
    if (finite) {
        slots = round->slots + (size_t)gpu * (size_t)round->world->limit;
        for (i = 0; slots[i].coll != coll; i++) {
        }
        slots[i] = slots[gs->exec_cnt];
    }
}

/* The member-th part of coll is done on a suspended GPU: count it off. */
static void dfccl_sim_sync_release(dfccl_sim_round_t *round, int32_t coll, int32_t member,
                                   int32_t gpu)
{
    const dfccl_sim_world_t *world = round->world;
    int32_t part = world->coll_members[world->coll_part0[coll] + member].part;

    if (round->state[part] & DFCCL_SIM_ST_SYNC) {
        round->gpu[gpu].pending--;
    }
}

/*
 * Collective coll became successful: free its members' slots, start waiting
 * parts, count off suspensions; repeat for collectives that complete in turn.
 */
DFCCL_SIM_HOT void dfccl_sim_coll_complete(dfccl_sim_round_t *round, int finite, int32_t coll)
{
    const dfccl_sim_world_t *world = round->world;
    int32_t *done                  = round->done;
    int32_t sp = 0, c, k, m0, m, h;
    dfccl_sim_entry_t w;
    dfccl_sim_gpu_t *gs;

    done[sp++] = coll;
    while (sp > 0) {
        c = done[--sp];
        round->colls_left--;
        k  = world->coll_group[c];
        m0 = world->group_gpu_off[k];
        for (m = m0; m < world->group_gpu_off[k + 1]; m++) {
            h  = world->group_gpus[m];
            gs = &round->gpu[h];
            dfccl_sim_slot_remove(round, finite, h, c);
            if (gs->pending > 0) {
                if (finite) {
                    dfccl_sim_sync_release(round, c, m - m0, h);
                } else {
                    /* nothing starts on a suspended GPU without a cap: every
                     * live part belongs to its synchronization */
                    gs->pending--;
                }
            }
            if (!finite || (gs->wq_head == gs->wq_tail) || (gs->exec_cnt >= world->limit)) {
                continue;
            }
            /* the freed slot goes to the oldest waiting part */
            w                    = round->wq[round->wq_off[h] + gs->wq_head++];
            round->state[w.part] = DFCCL_SIM_PART_EXECUTING;
            dfccl_sim_slot_add(round, finite, h, w.part, w.coll);
            if (gs->wq_head != gs->wq_tail) {
                /* parts still waiting on h now also wait for w */
                round->roots[round->nroots++] = w.part;
            }
            if (--round->coll_wait[w.coll] == 0) {
                done[sp++] = w.coll;
            }
        }
    }
}

/* GPU gpu invokes the part at position pos of its list. */
DFCCL_SIM_HOT void dfccl_sim_invoke_at(dfccl_sim_round_t *round, int finite, int32_t gpu,
                                       int32_t pos)
{
    const dfccl_sim_world_t *world = round->world;
    dfccl_sim_gpu_t *gs            = &round->gpu[gpu];
    uint8_t *state                 = round->state + gpu;
    size_t stride                  = (size_t)world->gpu_num;
    int32_t part                   = dfccl_sim_world_part(world, gpu, pos);
    int32_t coll                   = world->part_coll[part];
    dfccl_sim_entry_t *entry;

    round->events++;
    gs->left--;
    state[pos * stride] = DFCCL_SIM_PART_INVOKED;
    if (pos >= gs->hi) {
        gs->hi = pos + 1;
    }
    if (pos == gs->front) {
        do {
            gs->front++;
        } while ((gs->front < gs->hi) &&
                 (state[gs->front * stride] != DFCCL_SIM_PART_UNINVOKED));
    }

    if (!finite || ((gs->wq_head == gs->wq_tail) && (gs->exec_cnt < world->limit))) {
        /* Nothing waits on this GPU, so nothing depends on the new part yet
         * and it cannot close a cycle by itself. */
        state[pos * stride] = DFCCL_SIM_PART_EXECUTING;
        dfccl_sim_slot_add(round, finite, gpu, part, coll);
        if (--round->coll_wait[coll] == 0) {
            dfccl_sim_coll_complete(round, finite, coll);
        }
        return;
    }

    entry       = &round->wq[round->wq_off[gpu] + gs->wq_tail++];
    entry->part = part;
    entry->coll = coll;
    /* New edges: the members executing coll now wait for this GPU's slots.
     * Some member executes it exactly when not all of them still wait (none
     * is done: this part is not executing). */
    if (round->coll_wait[coll] != world->coll_size[coll]) {
        round->roots[round->nroots++] = dfccl_sim_node_r(round, gpu);
    }
}

/* GPU gpu synchronizes. */
static void dfccl_sim_sync(dfccl_sim_round_t *round, int32_t gpu)
{
    const dfccl_sim_world_t *world = round->world;
    dfccl_sim_gpu_t *gs            = &round->gpu[gpu];
    const dfccl_sim_entry_t *slots;
    int32_t i;

    round->events++;
    if (gs->exec_cnt == 0) {
        return;  /* nothing executing: the suspension ends at once */
    }
    if (round->finite) {
        /* parts waiting now may start during the suspension: mark the set */
        slots = round->slots + (size_t)gpu * (size_t)world->limit;
        for (i = 0; i < gs->exec_cnt; i++) {
            round->state[slots[i].part] |= DFCCL_SIM_ST_SYNC;
        }
    }
    /* Without a cap, nothing starts on the GPU while it is suspended, so its
     * live parts are exactly the synchronization's set: no marking needed. */
    gs->pending = gs->exec_cnt;
    round->roots[round->nroots++] = dfccl_sim_node_z(round, gpu);
}

/* Choose the position of the GPU's next invocation. */
DFCCL_SIM_HOT int32_t dfccl_sim_pick(dfccl_sim_round_t *round, int32_t gpu)
{
    const uint8_t *state = round->state + gpu;
    size_t stride        = (size_t)round->world->gpu_num;
    dfccl_sim_gpu_t *gs  = &round->gpu[gpu];
    int32_t pos          = gs->front;
    int32_t k            = gs->left;

    if ((k > 1) && (round->disorder_cd > 0)) {
        round->disorder_cd--;  /* the common case: take the front */
        return pos;
    }
    for (; k > 1; k--) {
        if (dfccl_sim_disorder_take(round)) {
            break;
        }
        /* skip this position */
        do {
            pos++;
        } while (state[pos * stride] != DFCCL_SIM_PART_UNINVOKED);
    }
    return pos;
}

/* Step until the round ends. */
DFCCL_SIM_HOT void dfccl_sim_round_steps_model(dfccl_sim_round_t *round, int sync_model,
                                               int finite, dfccl_sim_outcome_t *outcome)
{
    const dfccl_sim_world_t *world = round->world;
    int32_t i, w, g, issued;

    while (round->colls_left > 0) {
        outcome->steps++;
        issued = 0;
        w      = 0;
        for (i = 0; i < round->nactive; i++) {
            g = round->active[i];
            if (sync_model && (round->gpu[g].pending > 0)) {
                round->active[w++] = g;  /* suspended */
                continue;
            }
            issued = 1;
            if (sync_model && (round->sync_cd-- == 0)) {
                round->sync_cd = dfccl_sim_rng_gap(&round->rng, world->sync_prob,
                                                   round->log1m_sync);
                dfccl_sim_sync(round, g);
            } else {
                dfccl_sim_invoke_at(round, finite, g, dfccl_sim_pick(round, g));
            }
            if ((round->nroots > 0) && dfccl_sim_cycle_find(round)) {
                outcome->deadlocked = 1;
                return;
            }
            if (round->gpu[g].left > 0) {
                round->active[w++] = g;
            }
        }
        round->nactive = w;
        if (!issued) {
            /* Cannot happen when the graph is searched right: every stall has
             * a cycle.  Count it as a deadlock and report it. */
            outcome->deadlocked = 1;
            outcome->stalled    = 1;
            return;
        }
    }
}

static void dfccl_sim_round_steps(dfccl_sim_round_t *round, dfccl_sim_outcome_t *outcome)
{
    if (round->world->model == DFCCL_SIM_MODEL_SINGLE) {
        dfccl_sim_round_steps_model(round, 0, 1, outcome);
    } else if (round->finite) {
        dfccl_sim_round_steps_model(round, 1, 1, outcome);
    } else {
        dfccl_sim_round_steps_model(round, 1, 0, outcome);
    }
}

void dfccl_sim_round_run(dfccl_sim_round_t *round, uint64_t seed, uint64_t index,
                         unsigned flags, dfccl_sim_outcome_t *outcome_p)
{
    const dfccl_sim_world_t *world = round->world;
    dfccl_sim_outcome_t outcome    = {0};

    dfccl_sim_rng_seed(&round->rng, seed, index);
    round->disorder_cd = dfccl_sim_rng_gap(&round->rng, world->disorder_prob,
                                           round->log1m_disorder);
    if (!(flags & DFCCL_SIM_RUN_FULL) && (round->disorder_cd >= (uint64_t)world->trial_budget)) {
        *outcome_p = outcome;  /* no skip: the consistent order cannot deadlock */
        return;
    }
    round->sync_cd = (world->model == DFCCL_SIM_MODEL_SYNC) ?
                             dfccl_sim_rng_gap(&round->rng, world->sync_prob,
                                               round->log1m_sync) :
                             DFCCL_SIM_GAP_NEVER;
    outcome.stepped = 1;
    if ((round->leap != NULL) && !(flags & DFCCL_SIM_RUN_STEPWISE) &&
        ((flags & DFCCL_SIM_RUN_LEAP) ||
         (world->disorder_prob + world->sync_prob <= DFCCL_SIM_LEAP_MAX_RATE))) {
        dfccl_sim_leap_run(round, &outcome);
    } else {
        dfccl_sim_round_reset(round);
        dfccl_sim_round_steps(round, &outcome);
    }
    outcome.events = round->events;
    *outcome_p     = outcome;
}

static dfccl_sim_status_t dfccl_sim_round_check_gpu(const dfccl_sim_round_t *round, int32_t gpu)
{
    if ((gpu < 0) || (gpu >= round->world->gpu_num) || (round->gpu[gpu].pending > 0) ||
        (round->gpu[gpu].left == 0)) {
        return DFCCL_SIM_ERR_BAD_EVENT;
    }
    return DFCCL_SIM_OK;
}

/* The position of coll in the list of gpu, or -1. */
static int32_t dfccl_sim_round_find(const dfccl_sim_round_t *round, int32_t gpu, int32_t coll)
{
    const dfccl_sim_world_t *world = round->world;
    int32_t p;

    if ((gpu < 0) || (gpu >= world->gpu_num) || (coll < 0) || (coll >= world->coll_num)) {
        return -1;
    }
    for (p = 0; p < world->gpu_len[gpu]; p++) {
        if (world->part_coll[dfccl_sim_world_part(world, gpu, p)] == coll) {
            return p;
        }
    }
    return -1;
}

dfccl_sim_status_t dfccl_sim_round_invoke(dfccl_sim_round_t *round, int32_t gpu, int32_t coll,
                                          int *deadlock_p)
{
    int32_t pos = dfccl_sim_round_find(round, gpu, coll);

    if ((pos < 0) || (dfccl_sim_round_check_gpu(round, gpu) != DFCCL_SIM_OK) ||
        (round->state[dfccl_sim_world_part(round->world, gpu, pos)] !=
         DFCCL_SIM_PART_UNINVOKED)) {
        return DFCCL_SIM_ERR_BAD_EVENT;
    }
    dfccl_sim_invoke_at(round, round->finite, gpu, pos);
    *deadlock_p = (round->nroots > 0) && dfccl_sim_cycle_find(round);
    return DFCCL_SIM_OK;
}

dfccl_sim_status_t dfccl_sim_round_sync(dfccl_sim_round_t *round, int32_t gpu, int *deadlock_p)
{
    if ((round->world->model != DFCCL_SIM_MODEL_SYNC) ||
        (dfccl_sim_round_check_gpu(round, gpu) != DFCCL_SIM_OK)) {
        return DFCCL_SIM_ERR_BAD_EVENT;
    }
    dfccl_sim_sync(round, gpu);
    *deadlock_p = (round->nroots > 0) && dfccl_sim_cycle_find(round);
    return DFCCL_SIM_OK;
}

dfccl_sim_part_state_t dfccl_sim_round_part_state(const dfccl_sim_round_t *round,
                                                  int32_t gpu, int32_t coll)
{
    int32_t pos = dfccl_sim_round_find(round, gpu, coll);
    unsigned st;

    if (pos < 0) {
        return DFCCL_SIM_PART_UNINVOKED;
    }
    st = round->state[dfccl_sim_world_part(round->world, gpu, pos)] & DFCCL_SIM_ST_MASK;
    if ((st == DFCCL_SIM_PART_EXECUTING) && (round->coll_wait[coll] == 0)) {
        return DFCCL_SIM_PART_DONE;
    }
    return (dfccl_sim_part_state_t)st;
}

int dfccl_sim_round_part_in_sync(const dfccl_sim_round_t *round, int32_t gpu, int32_t coll)
{
    int32_t pos = dfccl_sim_round_find(round, gpu, coll);
    int32_t part;

    if (pos < 0) {
        return 0;
    }
    part = dfccl_sim_world_part(round->world, gpu, pos);
    if (!round->finite) {
        return (round->gpu[gpu].pending > 0) && dfccl_sim_part_live(round, part);
    }
    return (round->state[part] & DFCCL_SIM_ST_SYNC) && dfccl_sim_part_live(round, part);
}

int dfccl_sim_round_suspended(const dfccl_sim_round_t *round, int32_t gpu)
{
    return round->gpu[gpu].pending > 0;
}

int dfccl_sim_round_complete(const dfccl_sim_round_t *round)
{
    return round->colls_left == 0;
}

int dfccl_sim_round_cycle_anywhere(dfccl_sim_round_t *round)
{
    return dfccl_sim_cycle_find_all(round);
}
