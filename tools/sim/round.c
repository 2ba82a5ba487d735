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
 *    once every part that was executing when it began is done.
 * 5. After each event the dependency graph is searched for a cycle, starting
 *    only from the nodes the event gave new edges; the graph had no cycle
 *    before, so any new cycle passes through one of them.  The round ends at
 *    the first cycle (a deadlock) or when every collective is successful.
 *
 * Random trials are drawn as gaps (rng.h), one countdown for disorder trials
 * and one for synchronization trials.  A round without any disorder skip
 * keeps the consistent order and cannot deadlock, so unless
 * DFCCL_SIM_RUN_FULL is given, a round whose first gap covers all its trials
 * is counted as successful without being stepped.
 */
#include "round.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

dfccl_sim_status_t dfccl_sim_round_create(const dfccl_sim_world_t *world,
                                          dfccl_sim_round_t **round_p)
{
    dfccl_sim_round_t *round;
    size_t node_num;

    round = dfccl_sim_calloc(1, sizeof(*round), "round");
    if (round == NULL) {
        return DFCCL_SIM_ERR_NO_MEMORY;
    }
    node_num        = (size_t)world->part_num + 2 * (size_t)world->gpu_num;
    round->world    = world;
    round->finite   = (world->limit != INT32_MAX);
    round->node_num = (int32_t)node_num;
    round->state    = dfccl_sim_calloc((size_t)world->part_num, 1, "part states");
    round->coll_exec = dfccl_sim_calloc((size_t)world->coll_num, sizeof(uint16_t),
                                        "collective states");
    round->gpu      = dfccl_sim_calloc((size_t)world->gpu_num, sizeof(dfccl_sim_gpu_t),
                                       "GPU states");
    round->active   = dfccl_sim_calloc((size_t)world->gpu_num, sizeof(int32_t), "GPU list");
    round->done     = dfccl_sim_calloc((size_t)world->coll_num, sizeof(int32_t),
                                       "completion stack");
    round->roots    = dfccl_sim_calloc(node_num, sizeof(int32_t), "graph roots");
    round->mark     = dfccl_sim_calloc(node_num, sizeof(uint32_t), "graph marks");
    round->stack    = dfccl_sim_calloc(node_num, sizeof(dfccl_sim_frame_t), "graph stack");
    if ((round->state == NULL) || (round->coll_exec == NULL) || (round->gpu == NULL) ||
        (round->active == NULL) || (round->done == NULL) || (round->roots == NULL) ||
        (round->mark == NULL) || (round->stack == NULL)) {
        goto err_destroy;
    }
    if (round->finite) {
        round->wq    = dfccl_sim_calloc((size_t)world->part_num, sizeof(int32_t),
                                        "waiting queues");
        round->slots = dfccl_sim_calloc((size_t)world->gpu_num * (size_t)world->limit,
                                        sizeof(int32_t), "execution slots");
        if ((round->wq == NULL) || (round->slots == NULL)) {
            goto err_destroy;
        }
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
    free(round->coll_exec);
    free(round->gpu);
    free(round->active);
    free(round->wq);
    free(round->slots);
    free(round->done);
    free(round->roots);
    free(round->mark);
    free(round->stack);
    free(round);
}

void dfccl_sim_round_reset(dfccl_sim_round_t *round)
{
    const dfccl_sim_world_t *world = round->world;
    dfccl_sim_gpu_t *gs;
    int32_t g;

    memset(round->state, 0, (size_t)world->part_num);
    memset(round->coll_exec, 0, (size_t)world->coll_num * sizeof(uint16_t));
    round->nactive = 0;
    for (g = 0; g < world->gpu_num; g++) {
        gs = &round->gpu[g];
        memset(gs, 0, sizeof(*gs));
        gs->left = world->gpu_part0[g + 1] - world->gpu_part0[g];
        if (gs->left > 0) {
            round->active[round->nactive++] = g;
        }
    }
    round->colls_left = world->coll_num;
    round->events     = 0;
    round->nroots     = 0;
}

static inline void dfccl_sim_slot_add(dfccl_sim_round_t *round, int32_t gpu, int32_t part)
{
    dfccl_sim_gpu_t *gs = &round->gpu[gpu];

    if (round->finite) {
        round->slots[(size_t)gpu * (size_t)round->world->limit + (size_t)gs->exec_cnt] = part;
    }
    gs->exec_cnt++;
}

static inline void dfccl_sim_slot_remove(dfccl_sim_round_t *round, int32_t gpu, int32_t part)
{
    dfccl_sim_gpu_t *gs = &round->gpu[gpu];
    int32_t *slots, i;

    gs->exec_cnt--;
    if (round->finite) {
        slots = round->slots + (size_t)gpu * (size_t)round->world->limit;
        for (i = 0; slots[i] != part; i++) {
        }
        slots[i] = slots[gs->exec_cnt];
    }
}

/*
 * Collective c became successful: mark its parts done, free their slots,
 * start waiting parts, end suspensions; repeat for collectives that complete
 * in turn.
 */
static void dfccl_sim_coll_complete(dfccl_sim_round_t *round, int32_t coll)
{
    const dfccl_sim_world_t *world = round->world;
    int32_t *done = round->done;
    int32_t sp = 0, c, i, end, q, h, w, cw;
    dfccl_sim_gpu_t *gs;
    unsigned st;

    done[sp++] = coll;
    while (sp > 0) {
        c = done[--sp];
        round->colls_left--;
        end = world->coll_part0[c + 1];
        for (i = world->coll_part0[c]; i < end; i++) {
            q               = world->coll_parts[i];
            h               = world->part_gpu[q];
            gs              = &round->gpu[h];
            st              = round->state[q];
            round->state[q] = DFCCL_SIM_PART_DONE;
            dfccl_sim_slot_remove(round, h, q);
            if ((st & DFCCL_SIM_ST_SYNC) && (--gs->pending == 0)) {
                gs->suspended = 0;
            }
            if ((gs->wq_head == gs->wq_tail) || (gs->exec_cnt >= world->limit)) {
                continue;
            }
            /* the freed slot goes to the oldest waiting part */
            w               = round->wq[world->gpu_part0[h] + gs->wq_head++];
            round->state[w] = DFCCL_SIM_PART_EXECUTING;
            dfccl_sim_slot_add(round, h, w);
            if (gs->wq_head != gs->wq_tail) {
                /* parts still waiting on h now also wait for w */
                round->roots[round->nroots++] = w;
            }
            cw = world->part_coll[w];
            if (++round->coll_exec[cw] == dfccl_sim_world_coll_size(world, cw)) {
                done[sp++] = cw;
            }
        }
    }
}

/* GPU gpu invokes the part at position pos of its list. */
static inline void dfccl_sim_invoke_at(dfccl_sim_round_t *round, int32_t gpu, int32_t pos)
{
    const dfccl_sim_world_t *world = round->world;
    dfccl_sim_gpu_t *gs            = &round->gpu[gpu];
    int32_t base                   = world->gpu_part0[gpu];
    int32_t part                   = base + pos;
    int32_t coll                   = world->part_coll[part];
    int32_t n, i, end;

    round->events++;
    gs->left--;
    round->state[part] = DFCCL_SIM_PART_INVOKED;
    if (pos >= gs->hi) {
        gs->hi = pos + 1;
    }
    if (pos == gs->front) {
        n = world->gpu_part0[gpu + 1] - base;
        do {
            gs->front++;
        } while ((gs->front < n) && (round->state[base + gs->front] != DFCCL_SIM_PART_UNINVOKED));
    }

    if ((gs->wq_head == gs->wq_tail) && (gs->exec_cnt < world->limit)) {
        /* Nothing waits on this GPU, so nothing depends on the new part yet
         * and it cannot close a cycle by itself. */
        round->state[part] = DFCCL_SIM_PART_EXECUTING;
        dfccl_sim_slot_add(round, gpu, part);
        if (++round->coll_exec[coll] == dfccl_sim_world_coll_size(world, coll)) {
            dfccl_sim_coll_complete(round, coll);
        }
        return;
    }

    round->wq[base + gs->wq_tail++] = part;
    /* New edges: each member executing coll now waits for this GPU's slots. */
    end = world->coll_part0[coll + 1];
    for (i = world->coll_part0[coll]; i < end; i++) {
        if ((round->state[world->coll_parts[i]] & DFCCL_SIM_ST_MASK) ==
            DFCCL_SIM_PART_EXECUTING) {
            round->roots[round->nroots++] = dfccl_sim_node_r(round, gpu);
            break;
        }
    }
}

/* GPU gpu synchronizes. */
static void dfccl_sim_sync(dfccl_sim_round_t *round, int32_t gpu)
{
    const dfccl_sim_world_t *world = round->world;
    dfccl_sim_gpu_t *gs            = &round->gpu[gpu];
    int32_t base                   = world->gpu_part0[gpu];
    int32_t pos, i;
    const int32_t *slots;

    round->events++;
    if (gs->exec_cnt == 0) {
        return;  /* nothing executing: the suspension ends at once */
    }
    if (round->finite) {
        slots = round->slots + (size_t)gpu * (size_t)world->limit;
        for (i = 0; i < gs->exec_cnt; i++) {
            round->state[slots[i]] |= DFCCL_SIM_ST_SYNC;
        }
    } else {
        while ((gs->lo < gs->hi) && (round->state[base + gs->lo] == DFCCL_SIM_PART_DONE)) {
            gs->lo++;
        }
        for (pos = gs->lo; pos < gs->hi; pos++) {
            if (round->state[base + pos] == DFCCL_SIM_PART_EXECUTING) {
                round->state[base + pos] |= DFCCL_SIM_ST_SYNC;
            }
        }
    }
    gs->pending   = gs->exec_cnt;
    gs->suspended = 1;
    round->roots[round->nroots++] = dfccl_sim_node_z(round, gpu);
}

/* Choose the position of the GPU's next invocation. */
static inline int32_t dfccl_sim_pick(dfccl_sim_round_t *round, int32_t gpu)
{
    const uint8_t *state = round->state + round->world->gpu_part0[gpu];
    dfccl_sim_gpu_t *gs  = &round->gpu[gpu];
    int32_t pos          = gs->front;
    int32_t k            = gs->left;

    for (; k > 1; k--) {
        if (round->disorder_cd > 0) {
            round->disorder_cd--;
            break;
        }
        /* skip this position */
        round->disorder_cd = dfccl_sim_rng_gap(&round->rng, round->world->disorder_prob,
                                               round->log1m_disorder);
        do {
            pos++;
        } while (state[pos] != DFCCL_SIM_PART_UNINVOKED);
    }
    return pos;
}

/* Step until the round ends. */
static void dfccl_sim_round_steps(dfccl_sim_round_t *round, dfccl_sim_outcome_t *outcome)
{
    const dfccl_sim_world_t *world = round->world;
    int sync_model                 = (world->model == DFCCL_SIM_MODEL_SYNC);
    int32_t i, w, g, issued;

    while (round->colls_left > 0) {
        outcome->steps++;
        issued = 0;
        w      = 0;
        for (i = 0; i < round->nactive; i++) {
            g = round->active[i];
            if (round->gpu[g].suspended) {
                round->active[w++] = g;
                continue;
            }
            issued = 1;
            if (sync_model && (round->sync_cd-- == 0)) {
                round->sync_cd = dfccl_sim_rng_gap(&round->rng, world->sync_prob,
                                                   round->log1m_sync);
                dfccl_sim_sync(round, g);
            } else {
                dfccl_sim_invoke_at(round, g, dfccl_sim_pick(round, g));
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
    dfccl_sim_round_reset(round);
    outcome.stepped = 1;
    dfccl_sim_round_steps(round, &outcome);
    outcome.events = round->events;
    *outcome_p     = outcome;
}

static dfccl_sim_status_t dfccl_sim_round_check_gpu(const dfccl_sim_round_t *round, int32_t gpu)
{
    if ((gpu < 0) || (gpu >= round->world->gpu_num) || round->gpu[gpu].suspended ||
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
    for (p = world->gpu_part0[gpu]; p < world->gpu_part0[gpu + 1]; p++) {
        if (world->part_coll[p] == coll) {
            return p - world->gpu_part0[gpu];
        }
    }
    return -1;
}

dfccl_sim_status_t dfccl_sim_round_invoke(dfccl_sim_round_t *round, int32_t gpu, int32_t coll,
                                          int *deadlock_p)
{
    int32_t pos = dfccl_sim_round_find(round, gpu, coll);

    if ((pos < 0) || (dfccl_sim_round_check_gpu(round, gpu) != DFCCL_SIM_OK) ||
        (round->state[round->world->gpu_part0[gpu] + pos] != DFCCL_SIM_PART_UNINVOKED)) {
        return DFCCL_SIM_ERR_BAD_EVENT;
    }
    dfccl_sim_invoke_at(round, gpu, pos);
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

    if (pos < 0) {
        return DFCCL_SIM_PART_UNINVOKED;
    }
    return (dfccl_sim_part_state_t)(round->state[round->world->gpu_part0[gpu] + pos] &
                                    DFCCL_SIM_ST_MASK);
}

int dfccl_sim_round_part_in_sync(const dfccl_sim_round_t *round, int32_t gpu, int32_t coll)
{
    int32_t pos = dfccl_sim_round_find(round, gpu, coll);

    return (pos >= 0) &&
           (round->state[round->world->gpu_part0[gpu] + pos] & DFCCL_SIM_ST_SYNC);
}

int dfccl_sim_round_suspended(const dfccl_sim_round_t *round, int32_t gpu)
{
    return round->gpu[gpu].suspended;
}

int dfccl_sim_round_complete(const dfccl_sim_round_t *round)
{
    return round->colls_left == 0;
}

int dfccl_sim_round_cycle_anywhere(dfccl_sim_round_t *round)
{
    return dfccl_sim_cycle_find_all(round);
}
