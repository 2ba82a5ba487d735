/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for dfccl-sim's configuration parser
 * (dfccl_sim_config_parse in tools/sim/config.c): the input, as text, is
 * parsed; a parse either fails with one of the simulator's statuses and a
 * message, or gives a configuration whose fields are within the documented
 * ranges (GPU ids below gpu_num, group offsets rising, counts >= 0). A
 * small enough configuration is then built into a world and one round is
 * simulated on it, so that what the parser accepts is also what the rest of
 * the simulator can take (only when built with FUZZ_SIM_WORLD=1, as
 * scripts/fuzz.sh does by default; make check fuzzes the parser alone).
 * Build and run it with scripts/fuzz.sh.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define FZ_MAX_PARTS 20000 /* build and simulate only configurations this small */

#ifndef FUZZ_SIM_WORLD
#define FUZZ_SIM_WORLD 0
#endif

#define FZ_NAME "fuzz_sim_config"
#include "fuzz_assert.h"

/* Collective parts of a configuration, saturating at FZ_MAX_PARTS + 1. */
static int64_t fz_parts(const dfccl_sim_config_t *c)
{
    int64_t parts = 0;

    if (c->grouping == DFCCL_SIM_GROUPING_MEGATRON) {
        int64_t gpus = (int64_t)c->tp_group_size * c->dp_group_size * c->pp_group_size;
        if (gpus > FZ_MAX_PARTS || c->coll_cnt_per_tp_group > FZ_MAX_PARTS ||
            c->coll_cnt_per_dp_group > FZ_MAX_PARTS) {
            return FZ_MAX_PARTS + 1;
        }
        parts = gpus * (c->coll_cnt_per_tp_group + c->coll_cnt_per_dp_group);
    } else {
        for (int32_t g = 0; g < c->group_num && parts <= FZ_MAX_PARTS; g++) {
            int64_t size = c->group_gpu_off[g + 1] - c->group_gpu_off[g];
            if (c->coll_cnt_per_group[g] > FZ_MAX_PARTS) {
                return FZ_MAX_PARTS + 1;
            }
            parts += size * c->coll_cnt_per_group[g];
        }
        if (c->gpu_num > FZ_MAX_PARTS) {
            return FZ_MAX_PARTS + 1;
        }
    }
    return parts;
}

static void fz_check_config(const dfccl_sim_config_t *c)
{
    FZ_ASSERT(c->total_rounds >= 1, "total_rounds %lld", (long long)c->total_rounds);
    FZ_ASSERT(c->disorder_prob >= 0.0 && c->disorder_prob <= 1.0, "disorder_prob %g",
              c->disorder_prob);
    FZ_ASSERT(c->sync_prob >= 0.0 && c->sync_prob < 1.0, "sync_prob %g", c->sync_prob);
    FZ_ASSERT(c->resource_limit != 0, "resource_limit 0 accepted");
    if (c->grouping == DFCCL_SIM_GROUPING_MEGATRON) {
        FZ_ASSERT(c->tp_group_size >= 1 && c->dp_group_size >= 1 && c->pp_group_size >= 1,
                  "group sizes %d %d %d", c->tp_group_size, c->dp_group_size,
                  c->pp_group_size);
        FZ_ASSERT(c->coll_cnt_per_tp_group >= 0 && c->coll_cnt_per_dp_group >= 0,
                  "negative collective count");
        return;
    }
    FZ_ASSERT(c->grouping == DFCCL_SIM_GROUPING_ARBITRARY, "grouping %d", (int)c->grouping);
    FZ_ASSERT(c->gpu_num >= 1 && c->group_num >= 1, "gpu_num %d group_num %d", c->gpu_num,
              c->group_num);
    FZ_ASSERT(c->group_gpu_off[0] == 0, "first offset %d", c->group_gpu_off[0]);
    for (int32_t g = 0; g < c->group_num; g++) {
        FZ_ASSERT(c->group_gpu_off[g + 1] > c->group_gpu_off[g], "group %d is empty", g);
        FZ_ASSERT(c->coll_cnt_per_group[g] >= 0, "group %d: count %lld", g,
                  (long long)c->coll_cnt_per_group[g]);
        for (int32_t i = c->group_gpu_off[g]; i < c->group_gpu_off[g + 1]; i++) {
            FZ_ASSERT(c->group_gpus[i] >= 0 && c->group_gpus[i] < c->gpu_num,
                      "group %d lists GPU %d of %d", g, c->group_gpus[i], c->gpu_num);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    dfccl_sim_msg_t msg;
    dfccl_sim_config_t *config = NULL;
    dfccl_sim_world_t *world   = NULL;
    dfccl_sim_round_t *round   = NULL;
    dfccl_sim_outcome_t outcome;
    dfccl_sim_status_t st;

    if (text == NULL) {
        return 0;
    }
    memcpy(text, data, size);
    text[size] = '\0';
    memset(&msg, 0, sizeof(msg));
    st = dfccl_sim_config_parse(text, &msg, &config);
    free(text);
    if (st != DFCCL_SIM_OK) {
        FZ_ASSERT(st < 0 && st >= DFCCL_SIM_ERR_SYSTEM, "status %d", (int)st);
        FZ_ASSERT(msg.text[0] != '\0', "%s without a message", dfccl_sim_status_string(st));
        FZ_ASSERT(memchr(msg.text, '\0', sizeof(msg.text)) != NULL, "message not terminated");
        return 0;
    }
    FZ_ASSERT(config != NULL, "success without a configuration");
    fz_check_config(config);
    if (FUZZ_SIM_WORLD && fz_parts(config) <= FZ_MAX_PARTS) {
        st = dfccl_sim_world_create(config, &msg, &world);
        if (st == DFCCL_SIM_OK) {
            FZ_ASSERT(world->real_parts <= world->part_num, "parts %d of %d", world->real_parts,
                      world->part_num);
            if (dfccl_sim_round_create(world, &round) == DFCCL_SIM_OK) {
                dfccl_sim_round_run(round, 12345, 0, DFCCL_SIM_RUN_FULL, &outcome);
                FZ_ASSERT(!outcome.stalled, "a round stalled without a deadlock");
                dfccl_sim_round_destroy(round);
            }
            dfccl_sim_world_destroy(world);
        } else {
            FZ_ASSERT(msg.text[0] != '\0', "world: %s without a message",
                      dfccl_sim_status_string(st));
        }
    }
    dfccl_sim_config_destroy(config);
    return 0;
}
