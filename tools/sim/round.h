/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private layout of a simulated round, shared by the state machine (round.c)
 * and the dependency-graph search (cycle.c).  All arrays are allocated once
 * per thread and reused round after round; nothing is allocated per event.
 *
 * The dependency graph is never stored.  Its edges are read off the state:
 *   E(p)  an executing part p = (c, g): to R(h) for each member h where c is
 *         invoked but waits, and to Z(h) for each member h that is suspended
 *         and has not invoked c yet (it cannot until its suspension ends);
 *   R(h)  "the executing parts of h", which a waiting part on h depends on:
 *         to every executing part of h;
 *   Z(h)  "the synchronization of h", which the parts h has not invoked yet
 *         depend on: to every part that was executing on h when it
 *         synchronized and is not done.
 * R(h) and Z(h) stand for the part-to-part edges of the model (invoked part
 * -> executing parts of its GPU) without listing them once per waiting part;
 * a cycle exists in one graph exactly when it exists in the other.
 */
#ifndef DFCCL_SIM_ROUND_H_
#define DFCCL_SIM_ROUND_H_

#include "rng.h"
#include "sim.h"

/*
 * A part's state byte: dfccl_sim_part_state_t without DONE, plus a flag.  An
 * executing part is done exactly when its collective is (coll_wait = 0), so
 * completing a collective writes no part state: it touches only its group's
 * GPU list and the GPUs' counters.
 */
#define DFCCL_SIM_ST_MASK 3u  /* UNINVOKED, INVOKED or EXECUTING */
#define DFCCL_SIM_ST_SYNC 4u  /* executing when its GPU synchronized (capped model) */

/* Per-GPU state: 32 bytes, so that two share no cache line. */
typedef struct __attribute__((aligned(32))) dfccl_sim_gpu {
    int32_t front;     /* first position not invoked yet */
    int32_t left;      /* positions not invoked yet */
    int32_t pending;   /* parts of the synchronization not done; > 0: suspended */
    int32_t exec_cnt;  /* executing parts, not done */
    int32_t hi;        /* one past the last invoked position */
    int32_t lo;        /* every part before this position is done */
    int32_t wq_head;   /* waiting parts: wq[wq_off + wq_head .. wq_off + wq_tail - 1] */
    int32_t wq_tail;
} dfccl_sim_gpu_t;

typedef struct dfccl_sim_entry {
    int32_t part;
    int32_t coll;
} dfccl_sim_entry_t;

typedef struct dfccl_sim_frame {
    int32_t node;
    int32_t it;
} dfccl_sim_frame_t;

/* The state of leap.c, which runs unlimited synchronization rounds. */
typedef struct dfccl_sim_leap dfccl_sim_leap_t;

struct dfccl_sim_round {
    const dfccl_sim_world_t *world;
    int32_t                  finite;       /* world->limit caps execution */
    uint8_t                 *state;        /* [part_num] */
    uint16_t                *coll_wait;    /* [coll_num] members not executing yet */
    dfccl_sim_gpu_t         *gpu;          /* [gpu_num] */
    int32_t                 *active;       /* GPUs with parts left, in id order */
    int32_t                  nactive;
    /* With a cap: a queue of waiting parts per GPU (GPU-major, as long as its
     * list), and its executing parts in limit slots per GPU; entries carry
     * their collective so that queue and slot work reads no part arrays. */
    dfccl_sim_entry_t       *wq;           /* [real_parts] */
    int32_t                 *wq_off;       /* [gpu_num] */
    dfccl_sim_entry_t       *slots;        /* [gpu_num * limit] */
    int32_t                 *done;         /* [coll_num] completion work stack */
    int64_t                  colls_left;
    uint64_t                 events;
    /* cycle search */
    int32_t                 *roots;        /* nodes touched by the current event */
    int32_t                  nroots;
    uint32_t                *mark;         /* [node_num] 2 * epoch (+1 when finished) */
    uint32_t                 epoch;
    dfccl_sim_frame_t       *stack;        /* [node_num] */
    int32_t                  node_num;
    /* randomness */
    dfccl_sim_rng_t          rng;
    uint64_t                 disorder_cd;  /* disorder trials left before a skip */
    uint64_t                 sync_cd;      /* events left before a synchronization */
    double                   log1m_disorder;
    double                   log1m_sync;
    /* the synchronization model without a cap leaps between moments */
    dfccl_sim_leap_t        *leap;
};

/* An executing part that is not done yet. */
static inline int dfccl_sim_part_live(const dfccl_sim_round_t *round, int32_t part)
{
    return ((round->state[part] & DFCCL_SIM_ST_MASK) == DFCCL_SIM_PART_EXECUTING) &&
           (round->coll_wait[round->world->part_coll[part]] != 0);
}

/*
 * Move lo past the done parts at the start of the GPU's list.  Called where
 * the live parts are scanned (rarely), so the hot path never looks back.
 */
static inline void dfccl_sim_lo_advance(dfccl_sim_round_t *round, int32_t gpu)
{
    dfccl_sim_gpu_t *gs = &round->gpu[gpu];
    int32_t part;

    while (gs->lo < gs->hi) {
        part = gs->lo * round->world->gpu_num + gpu;
        if (((round->state[part] & DFCCL_SIM_ST_MASK) != DFCCL_SIM_PART_EXECUTING) ||
            (round->coll_wait[round->world->part_coll[part]] != 0)) {
            break;
        }
        gs->lo++;
    }
}

/*
 * One disorder trial at a position that may be skipped, as both engines pick
 * a GPU's next invocation: 1 if the position is taken (the countdown runs
 * down), 0 if it is skipped (the next gap is drawn).
 */
static inline int dfccl_sim_disorder_take(dfccl_sim_round_t *round)
{
    if (round->disorder_cd > 0) {
        round->disorder_cd--;
        return 1;
    }
    round->disorder_cd = dfccl_sim_rng_gap(&round->rng, round->world->disorder_prob,
                                           round->log1m_disorder);
    return 0;
}

/* Graph node ids: parts, then R(h), then Z(h). */
static inline int32_t dfccl_sim_node_r(const dfccl_sim_round_t *round, int32_t gpu)
{
    return round->world->part_num + gpu;
}

static inline int32_t dfccl_sim_node_z(const dfccl_sim_round_t *round, int32_t gpu)
{
    return round->world->part_num + round->world->gpu_num + gpu;
}

/* Look for a cycle through the roots of the last event; clears the roots. */
int dfccl_sim_cycle_find(dfccl_sim_round_t *round);

/* Look for a cycle anywhere, from every node (slow; for checks). */
int dfccl_sim_cycle_find_all(dfccl_sim_round_t *round);

dfccl_sim_status_t dfccl_sim_leap_create(const dfccl_sim_world_t *world,
                                         dfccl_sim_leap_t **leap_p);
void dfccl_sim_leap_destroy(dfccl_sim_leap_t *leap);

/* Run the round from its start (countdowns drawn), as the step engine would. */
void dfccl_sim_leap_run(dfccl_sim_round_t *round, dfccl_sim_outcome_t *outcome);

#endif
