/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal interface of the deadlock simulator dfccl-sim (paper section 2.4).
 * A configuration (JSON) describes GPUs, groups and their collective lists; a
 * world is the read-only topology built from it (parts, intended orders); a
 * round holds the mutable state of one simulated round and drives it step by
 * step, testing the dependency graph for a cycle after every invocation and
 * synchronization; the runner spreads rounds over threads.  The functions are
 * kept in a convenience library so that the unit tests can build scenarios by
 * hand.
 */
#ifndef DFCCL_SIM_H_
#define DFCCL_SIM_H_

#include <stddef.h>
#include <stdint.h>

/* One status type for the whole tool: 0 is success, errors are negative. */
typedef enum dfccl_sim_status {
    DFCCL_SIM_OK                = 0,
    DFCCL_SIM_ERR_NO_MEMORY     = -1,
    DFCCL_SIM_ERR_IO            = -2,
    DFCCL_SIM_ERR_PARSE         = -3,  /* not JSON */
    DFCCL_SIM_ERR_INVALID_PARAM = -4,  /* a key or argument has a bad value */
    DFCCL_SIM_ERR_TOO_LARGE     = -5,  /* the configuration exceeds the limits */
    DFCCL_SIM_ERR_BAD_EVENT     = -6,  /* a hand-driven event is not allowed now */
    DFCCL_SIM_ERR_SYSTEM        = -7   /* a system call failed */
} dfccl_sim_status_t;

const char *dfccl_sim_status_string(dfccl_sim_status_t status);

/* A message for the user, filled where an error is found. */
typedef struct dfccl_sim_msg {
    char text[320];
} dfccl_sim_msg_t;

void dfccl_sim_msg_set(dfccl_sim_msg_t *msg, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

typedef enum dfccl_sim_model {
    DFCCL_SIM_MODEL_SINGLE,       /* "Single": one queue per GPU */
    DFCCL_SIM_MODEL_SYNC          /* "StreamWithSync": streams and synchronization */
} dfccl_sim_model_t;

typedef enum dfccl_sim_grouping {
    DFCCL_SIM_GROUPING_MEGATRON,  /* "Megatron": 3D (TP, DP, PP) */
    DFCCL_SIM_GROUPING_ARBITRARY  /* "Arbitrary": free grouping */
} dfccl_sim_grouping_t;

/* The parsed configuration file. */
typedef struct dfccl_sim_config {
    int64_t              total_rounds;
    int64_t              fix_seed;       /* 0: a fresh seed per run, else the seed */
    double               disorder_prob;
    double               sync_prob;
    int64_t              resource_limit; /* < 0: unlimited */
    dfccl_sim_model_t    model;
    dfccl_sim_grouping_t grouping;
    /* Megatron */
    int32_t              tp_group_size;
    int32_t              dp_group_size;
    int32_t              pp_group_size;
    int64_t              coll_cnt_per_tp_group;
    int64_t              coll_cnt_per_dp_group;
    /* Arbitrary */
    int32_t              gpu_num;
    int32_t              group_num;
    int32_t             *group_gpu_off;  /* [group_num + 1] into group_gpus */
    int32_t             *group_gpus;
    int64_t             *coll_cnt_per_group; /* [group_num] */
} dfccl_sim_config_t;

/* Parse JSON text (or a file); on error msg says what is wrong and names the key.
 * Unknown keys are ignored. */
dfccl_sim_status_t dfccl_sim_config_parse(const char *text, dfccl_sim_msg_t *msg,
                                          dfccl_sim_config_t **config_p);
dfccl_sim_status_t dfccl_sim_config_load(const char *path, dfccl_sim_msg_t *msg,
                                         dfccl_sim_config_t **config_p);
void dfccl_sim_config_destroy(dfccl_sim_config_t *config);
const char *dfccl_sim_model_name(dfccl_sim_model_t model);
const char *dfccl_sim_grouping_name(dfccl_sim_grouping_t grouping);

/*
 * The topology of a configuration.  Collectives are numbered in the global
 * intended order, so a GPU's intended list is its collectives by rising id.
 * A part is one collective on one GPU; part ids are position-major: the part
 * at position pos of GPU g's list is pos * gpu_num + g.  Every GPU that is not
 * suspended moves one position per step, so the GPUs of a step touch
 * neighbouring memory.  Positions at or past a GPU's list length are holes
 * (part_coll is -1).  coll_members lists each collective's parts, contiguous
 * per collective, in the member order of its group.
 */
typedef struct dfccl_sim_member {
    int32_t part;
    int32_t gpu;
} dfccl_sim_member_t;

typedef struct dfccl_sim_world {
    dfccl_sim_model_t   model;
    double              disorder_prob;
    double              sync_prob;
    int32_t             limit;         /* executing parts per GPU; INT32_MAX: no cap */
    int32_t             gpu_num;
    int32_t             group_num;
    int32_t             coll_num;
    int32_t             real_parts;    /* parts that exist (no holes) */
    int32_t             part_num;      /* gpu_num * max_len: the part id space */
    int32_t             max_len;       /* longest GPU list */
    int32_t             max_group_size;
    int32_t            *group_gpu_off; /* [group_num + 1] */
    int32_t            *group_gpus;
    int64_t            *group_coll_cnt; /* [group_num] */
    int32_t            *coll_group;    /* [coll_num] */
    int32_t            *coll_index;    /* [coll_num] index in its group's list */
    uint16_t           *coll_size;     /* [coll_num] member GPUs */
    int32_t            *coll_part0;    /* [coll_num + 1] into coll_members */
    dfccl_sim_member_t *coll_members;  /* [real_parts] */
    int32_t            *gpu_len;       /* [gpu_num] intended list lengths */
    int32_t            *part_coll;     /* [part_num] */
    /* Disorder trials a round draws when it never skips: one per pick that is
     * not the last collective of its GPU. */
    int64_t             trial_budget;
} dfccl_sim_world_t;

dfccl_sim_status_t dfccl_sim_world_create(const dfccl_sim_config_t *config,
                                          dfccl_sim_msg_t *msg,
                                          dfccl_sim_world_t **world_p);
void dfccl_sim_world_destroy(dfccl_sim_world_t *world);

/* The id of the index-th collective of a group, or -1. */
int32_t dfccl_sim_world_coll_id(const dfccl_sim_world_t *world, int32_t group, int64_t index);

static inline int32_t dfccl_sim_world_part(const dfccl_sim_world_t *world, int32_t gpu,
                                           int32_t pos)
{
    return pos * world->gpu_num + gpu;
}

/* State of one part. */
typedef enum dfccl_sim_part_state {
    DFCCL_SIM_PART_UNINVOKED = 0,
    DFCCL_SIM_PART_INVOKED   = 1,  /* invoked, waiting to execute */
    DFCCL_SIM_PART_EXECUTING = 2,
    DFCCL_SIM_PART_DONE      = 3   /* the collective is successful */
} dfccl_sim_part_state_t;

typedef struct dfccl_sim_round dfccl_sim_round_t;

typedef struct dfccl_sim_outcome {
    int      deadlocked;  /* a cycle was found */
    int      stepped;     /* 0: the round drew no disorder skip and was not stepped */
    int      stalled;     /* nothing could move and no cycle was found (a bug) */
    uint64_t events;      /* invocations and synchronizations issued */
    uint64_t steps;
} dfccl_sim_outcome_t;

/*
 * Flags for dfccl_sim_round_run.  Rounds of the synchronization model
 * without a cap can be run event by event or by leaping between the events
 * that matter; both give the same outcome, and by default the one that is
 * faster at the configuration's probabilities runs.
 */
enum {
    DFCCL_SIM_RUN_FULL     = 1,  /* step rounds that drew no disorder skip too */
    DFCCL_SIM_RUN_STEPWISE = 2,  /* issue every event one by one */
    DFCCL_SIM_RUN_LEAP     = 4   /* leap whatever the probabilities (where the
                                    model allows it) */
};

dfccl_sim_status_t dfccl_sim_round_create(const dfccl_sim_world_t *world,
                                          dfccl_sim_round_t **round_p);
void dfccl_sim_round_destroy(dfccl_sim_round_t *round);

/* Simulate round number index of the run with this seed, from start to end. */
void dfccl_sim_round_run(dfccl_sim_round_t *round, uint64_t seed, uint64_t index,
                         unsigned flags, dfccl_sim_outcome_t *outcome_p);

/*
 * Hand-driven rounds, for tests: reset, then issue events one by one.  Each
 * event reports whether the dependency graph now holds a cycle.  An event on a
 * suspended or finished GPU, a collective outside the GPU's groups, or one
 * invoked twice gives DFCCL_SIM_ERR_BAD_EVENT.
 */
void dfccl_sim_round_reset(dfccl_sim_round_t *round);
dfccl_sim_status_t dfccl_sim_round_invoke(dfccl_sim_round_t *round, int32_t gpu, int32_t coll,
                                          int *deadlock_p);
dfccl_sim_status_t dfccl_sim_round_sync(dfccl_sim_round_t *round, int32_t gpu,
                                        int *deadlock_p);
dfccl_sim_part_state_t dfccl_sim_round_part_state(const dfccl_sim_round_t *round,
                                                  int32_t gpu, int32_t coll);
/* Whether the part was executing when its GPU last synchronized, not done yet. */
int dfccl_sim_round_part_in_sync(const dfccl_sim_round_t *round, int32_t gpu, int32_t coll);
int dfccl_sim_round_suspended(const dfccl_sim_round_t *round, int32_t gpu);
int dfccl_sim_round_complete(const dfccl_sim_round_t *round);
/* Search the whole graph for a cycle, not only around the last event (slow). */
int dfccl_sim_round_cycle_anywhere(dfccl_sim_round_t *round);

/* Progress reports on stderr while rounds run. */
enum {
    DFCCL_SIM_PROGRESS_OFF      = 0,
    DFCCL_SIM_PROGRESS_TERMINAL = 1,  /* one line, rewritten in place */
    DFCCL_SIM_PROGRESS_LOG      = 2   /* a line every 10 s, with the time left */
};

/* The runner: rounds spread over threads. */
typedef struct dfccl_sim_run_params {
    uint64_t rounds;
    uint64_t seed;
    int      threads;
    unsigned flags;        /* DFCCL_SIM_RUN_* */
    int      progress;     /* DFCCL_SIM_PROGRESS_* */
} dfccl_sim_run_params_t;

typedef struct dfccl_sim_run_result {
    uint64_t rounds;
    uint64_t deadlocks;
    uint64_t stepped;      /* rounds actually stepped */
    uint64_t stalled;
    uint64_t events;       /* events of the stepped rounds */
    double   seconds;
} dfccl_sim_run_result_t;

dfccl_sim_status_t dfccl_sim_run(const dfccl_sim_world_t *world,
                                 const dfccl_sim_run_params_t *params,
                                 dfccl_sim_run_result_t *result_p);

/* Allocation that logs what it could not get; returns NULL then. */
void *dfccl_sim_calloc(size_t count, size_t size, const char *what);

#endif
