/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Building the world of a configuration: its groups (the Megatron 3D layout
 * or the free list), the collectives of each group, the global intended order
 * and, from it, every GPU's intended list of parts.
 *
 * The global order is a round-robin over the groups by group id, taking each
 * group's next collective in turn and skipping exhausted groups; collectives
 * are numbered in that order.  A GPU's intended order is that order
 * restricted to its own groups (its collectives by rising id), so any two
 * GPUs meet their shared collectives in the same order.  Parts are numbered
 * position-major (see sim.h), so that GPUs advancing in step touch
 * neighbouring memory.
 */
#include "sim.h"

#include <stdint.h>
#include <stdlib.h>

/* The groups of a configuration, before collectives are laid out. */
typedef struct dfccl_sim_groups {
    int32_t  gpu_num;
    int32_t  group_num;
    int32_t *gpu_off;        /* [group_num + 1] */
    int32_t *gpus;
    int64_t *coll_cnt;       /* [group_num] */
} dfccl_sim_groups_t;

static void dfccl_sim_groups_free(dfccl_sim_groups_t *groups)
{
    free(groups->gpu_off);
    free(groups->gpus);
    free(groups->coll_cnt);
}

/*
 * Megatron: in each pipeline stage, dp tensor-parallel groups of tp
 * consecutive GPUs, then tp data-parallel groups, the k-th taking the k-th GPU
 * of every tensor-parallel group of the stage.  Group ids run stage by stage,
 * tensor-parallel groups first.
 */
static dfccl_sim_status_t dfccl_sim_groups_megatron(const dfccl_sim_config_t *config,
                                                    dfccl_sim_groups_t *groups)
{
    int32_t tp = config->tp_group_size;
    int32_t dp = config->dp_group_size;
    int32_t pp = config->pp_group_size;
    int32_t stage, j, k, group = 0, n = 0, base;

    groups->gpu_num   = tp * dp * pp;
    groups->group_num = (tp + dp) * pp;
    groups->gpu_off   = dfccl_sim_calloc((size_t)groups->group_num + 1, sizeof(int32_t),
                                         "group offsets");
    groups->gpus      = dfccl_sim_calloc((size_t)groups->gpu_num * 2, sizeof(int32_t),
                                         "group members");
    groups->coll_cnt  = dfccl_sim_calloc((size_t)groups->group_num, sizeof(int64_t),
                                         "collective counts");
    if ((groups->gpu_off == NULL) || (groups->gpus == NULL) || (groups->coll_cnt == NULL)) {
        return DFCCL_SIM_ERR_NO_MEMORY;
    }

    for (stage = 0; stage < pp; stage++) {
        base = stage * tp * dp;
        for (j = 0; j < dp; j++) {
            groups->gpu_off[group]  = n;
            groups->coll_cnt[group] = config->coll_cnt_per_tp_group;
            for (k = 0; k < tp; k++) {
                groups->gpus[n++] = base + j * tp + k;
            }
            group++;
        }
        for (k = 0; k < tp; k++) {
            groups->gpu_off[group]  = n;
            groups->coll_cnt[group] = config->coll_cnt_per_dp_group;
            for (j = 0; j < dp; j++) {
                groups->gpus[n++] = base + j * tp + k;
            }
            group++;
        }
    }
    groups->gpu_off[group] = n;
    return DFCCL_SIM_OK;
}

static dfccl_sim_status_t dfccl_sim_groups_arbitrary(const dfccl_sim_config_t *config,
                                                     dfccl_sim_groups_t *groups)
{
    int32_t members = config->group_gpu_off[config->group_num];

    groups->gpu_num   = config->gpu_num;
    groups->group_num = config->group_num;
    groups->gpu_off   = dfccl_sim_calloc((size_t)groups->group_num + 1, sizeof(int32_t),
                                         "group offsets");
    groups->gpus      = dfccl_sim_calloc((size_t)members, sizeof(int32_t), "group members");
    groups->coll_cnt  = dfccl_sim_calloc((size_t)groups->group_num, sizeof(int64_t),
                                         "collective counts");
    if ((groups->gpu_off == NULL) || (groups->gpus == NULL) || (groups->coll_cnt == NULL)) {
        return DFCCL_SIM_ERR_NO_MEMORY;
    }
    for (int32_t i = 0; i <= groups->group_num; i++) {
        groups->gpu_off[i] = config->group_gpu_off[i];
    }
    for (int32_t i = 0; i < members; i++) {
        groups->gpus[i] = config->group_gpus[i];
    }
    for (int32_t i = 0; i < groups->group_num; i++) {
        groups->coll_cnt[i] = config->coll_cnt_per_group[i];
    }
    return DFCCL_SIM_OK;
}

void dfccl_sim_world_destroy(dfccl_sim_world_t *world)
{
    if (world == NULL) {
        return;
    }
    free(world->group_gpu_off);
    free(world->group_gpus);
    free(world->group_coll_cnt);
    free(world->coll_group);
    free(world->coll_index);
    free(world->coll_size);
    free(world->coll_part0);
    free(world->coll_members);
    free(world->gpu_len);
    free(world->part_coll);
    free(world);
}

int32_t dfccl_sim_world_coll_id(const dfccl_sim_world_t *world, int32_t group, int64_t index)
{
    int32_t c;

    for (c = 0; c < world->coll_num; c++) {
        if ((world->coll_group[c] == group) && (world->coll_index[c] == index)) {
            return c;
        }
    }
    return -1;
}

/* Number the collectives in the global round-robin order. */
static void dfccl_sim_world_number(dfccl_sim_world_t *world, int32_t *alive)
{
    const int64_t *cnt = world->group_coll_cnt;
    int32_t nalive = 0, keep, r, i, k, c = 0, parts = 0;

    for (k = 0; k < world->group_num; k++) {
        if (cnt[k] > 0) {
            alive[nalive++] = k;
        }
    }
    for (r = 0; nalive > 0; r++) {
        keep = 0;
        for (i = 0; i < nalive; i++) {
            k                    = alive[i];
            world->coll_group[c] = k;
            world->coll_index[c] = r;
            world->coll_part0[c] = parts;
            world->coll_size[c]  = (uint16_t)(world->group_gpu_off[k + 1] -
                                              world->group_gpu_off[k]);
            parts               += world->coll_size[c];
            c++;
            if (r + 1 < cnt[k]) {
                alive[keep++] = k;
            }
        }
        nalive = keep;
    }
    world->coll_part0[c] = parts;
}

/* Give every GPU its collectives by rising id, each at the GPU's next position. */
static void dfccl_sim_world_lists(dfccl_sim_world_t *world, int32_t *cursor)
{
    int32_t c, k, m, g, part;
    dfccl_sim_member_t *member;

    for (c = 0; c < world->coll_num; c++) {
        k      = world->coll_group[c];
        member = world->coll_members + world->coll_part0[c];
        for (m = world->group_gpu_off[k]; m < world->group_gpu_off[k + 1]; m++, member++) {
            g                      = world->group_gpus[m];
            part                   = dfccl_sim_world_part(world, g, cursor[g]++);
            world->part_coll[part] = c;
            member->part           = part;
            member->gpu            = g;
        }
    }
}

dfccl_sim_status_t dfccl_sim_world_create(const dfccl_sim_config_t *config,
                                          dfccl_sim_msg_t *msg,
                                          dfccl_sim_world_t **world_p)
{
    dfccl_sim_groups_t groups = {0};
    dfccl_sim_world_t *world;
    dfccl_sim_status_t status;
    int64_t colls = 0, parts = 0, max_len = 0, space;
    int64_t *gpu_len = NULL;
    int32_t *alive = NULL, *cursor = NULL;
    int32_t k, g, size;

    status = (config->grouping == DFCCL_SIM_GROUPING_MEGATRON) ?
                     dfccl_sim_groups_megatron(config, &groups) :
                     dfccl_sim_groups_arbitrary(config, &groups);
    if (status != DFCCL_SIM_OK) {
        dfccl_sim_msg_set(msg, "out of memory building the groups");
        goto out_free_groups;
    }

    gpu_len = dfccl_sim_calloc((size_t)groups.gpu_num, sizeof(int64_t), "list lengths");
    if (gpu_len == NULL) {
        dfccl_sim_msg_set(msg, "out of memory building the groups");
        status = DFCCL_SIM_ERR_NO_MEMORY;
        goto out_free_groups;
    }
    for (k = 0; k < groups.group_num; k++) {
        size   = groups.gpu_off[k + 1] - groups.gpu_off[k];
        colls += groups.coll_cnt[k];
        parts += groups.coll_cnt[k] * size;
        for (int32_t m = groups.gpu_off[k]; m < groups.gpu_off[k + 1]; m++) {
            gpu_len[groups.gpus[m]] += groups.coll_cnt[k];
            if (gpu_len[groups.gpus[m]] > max_len) {
                max_len = gpu_len[groups.gpus[m]];
            }
        }
        if ((colls >= INT32_MAX) || (parts >= INT32_MAX)) {
            break;
        }
    }
    /* part ids and graph node ids (part space + 2 per GPU) must fit in int32_t */
    space = max_len * groups.gpu_num;
    if ((colls >= INT32_MAX) || (parts >= INT32_MAX) ||
        (space >= INT32_MAX - 2 * (int64_t)groups.gpu_num - 1)) {
        dfccl_sim_msg_set(msg, "too large: %d GPUs with lists of up to %lld collectives need "
                          "more than 2^31 part slots; use fewer collectives or GPUs",
                          groups.gpu_num, (long long)max_len);
        status = DFCCL_SIM_ERR_TOO_LARGE;
        goto out_free_len;
    }

    world = dfccl_sim_calloc(1, sizeof(*world), "world");
    if (world == NULL) {
        dfccl_sim_msg_set(msg, "out of memory building the world");
        status = DFCCL_SIM_ERR_NO_MEMORY;
        goto out_free_len;
    }
    world->model          = config->model;
    world->disorder_prob  = config->disorder_prob;
    world->sync_prob      = (config->model == DFCCL_SIM_MODEL_SYNC) ? config->sync_prob : 0.0;
    world->gpu_num        = groups.gpu_num;
    world->group_num      = groups.group_num;
    world->coll_num       = (int32_t)colls;
    world->real_parts     = (int32_t)parts;
    world->part_num       = (int32_t)space;
    world->max_len        = (int32_t)max_len;
    /* the world owns the group arrays from here on */
    world->group_gpu_off  = groups.gpu_off;
    world->group_gpus     = groups.gpus;
    world->group_coll_cnt = groups.coll_cnt;
    groups.gpu_off        = NULL;
    groups.gpus           = NULL;
    groups.coll_cnt       = NULL;

    world->coll_group   = dfccl_sim_calloc((size_t)colls, sizeof(int32_t), "collectives");
    world->coll_index   = dfccl_sim_calloc((size_t)colls, sizeof(int32_t), "collectives");
    world->coll_size    = dfccl_sim_calloc((size_t)colls, sizeof(uint16_t), "collectives");
    world->coll_part0   = dfccl_sim_calloc((size_t)colls + 1, sizeof(int32_t), "collectives");
    world->coll_members = dfccl_sim_calloc((size_t)parts, sizeof(dfccl_sim_member_t),
                                           "collective members");
    world->gpu_len      = dfccl_sim_calloc((size_t)world->gpu_num, sizeof(int32_t),
                                           "GPU lists");
    world->part_coll    = dfccl_sim_calloc((size_t)space, sizeof(int32_t), "GPU lists");
    alive               = dfccl_sim_calloc((size_t)world->group_num, sizeof(int32_t), "groups");
    cursor              = dfccl_sim_calloc((size_t)world->gpu_num, sizeof(int32_t), "cursors");
    if ((world->coll_group == NULL) || (world->coll_index == NULL) ||
        (world->coll_size == NULL) || (world->coll_part0 == NULL) ||
        (world->coll_members == NULL) || (world->gpu_len == NULL) ||
        (world->part_coll == NULL) || (alive == NULL) || (cursor == NULL)) {
        dfccl_sim_msg_set(msg, "out of memory building the world (%lld parts)",
                          (long long)parts);
        status = DFCCL_SIM_ERR_NO_MEMORY;
        goto out_destroy_world;
    }

    for (k = 0; k < world->group_num; k++) {
        size = world->group_gpu_off[k + 1] - world->group_gpu_off[k];
        if (size > world->max_group_size) {
            world->max_group_size = size;
        }
    }
    for (g = 0; g < world->gpu_num; g++) {
        world->gpu_len[g] = (int32_t)gpu_len[g];
        if (gpu_len[g] > 0) {
            world->trial_budget += gpu_len[g] - 1;
        }
    }
    for (int64_t p = 0; p < space; p++) {
        world->part_coll[p] = -1;  /* a hole until a list fills it */
    }
    dfccl_sim_world_number(world, alive);
    dfccl_sim_world_lists(world, cursor);

    /* A cap a GPU can never reach is no cap; the single queue is a cap of one. */
    if (config->model == DFCCL_SIM_MODEL_SINGLE) {
        world->limit = 1;
    } else if ((config->resource_limit < 0) || (config->resource_limit >= max_len)) {
        world->limit = INT32_MAX;
    } else {
        world->limit = (int32_t)config->resource_limit;
    }

    free(cursor);
    free(alive);
    free(gpu_len);
    *world_p = world;
    return DFCCL_SIM_OK;

out_destroy_world:
    free(cursor);
    free(alive);
    dfccl_sim_world_destroy(world);
out_free_len:
    free(gpu_len);
out_free_groups:
    dfccl_sim_groups_free(&groups);
    return status;
}
