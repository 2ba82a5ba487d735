/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The dfccl-sim command: read a configuration, print it, run the rounds on
 * threads and print the deadlock ratio as the last line,
 * "deadlocks D of R rounds, ratio X".  --bench steps a few rounds in full and
 * reports events per second.
 */
#include "sim.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* --bench steps about this many events unless -r says otherwise */
#define DFCCL_SIM_BENCH_EVENTS 100000000.0

typedef struct dfccl_sim_options {
    const char *file;
    uint64_t    rounds;      /* 0: from the configuration */
    uint64_t    seed;
    int         have_seed;
    double      disorder_prob;  /* < 0: the configuration's */
    double      sync_prob;
    double      file_disorder_prob;
    double      file_sync_prob;
    int         threads;
    int         bench;
    int         full;
} dfccl_sim_options_t;

static void dfccl_sim_usage(FILE *out)
{
    fprintf(out,
            "usage: dfccl-sim -f config.json [-r rounds] [-j threads] [-s seed] [--full]\n"
            "                 [--disorder-prob P] [--sync-prob P]\n"
            "       dfccl-sim -f config.json --bench [-r rounds] [-j threads] [-s seed]\n"
            "\n"
            "Simulates GPUs invoking collectives and counts the rounds that deadlock.\n"
            "  -f, --file FILE     JSON configuration (see tools/sim/README.md)\n"
            "  -r, --rounds N      rounds to run (default: total_rounds of the file)\n"
            "  -j, --threads N     worker threads (default: online CPUs)\n"
            "  -s, --seed N        seed (default: fix_seed of the file, or a fresh one)\n"
            "      --disorder-prob P  use P instead of the file's disorder_prob\n"
            "      --sync-prob P   use P instead of the file's sync_prob\n"
            "      --full          step every round, also those that drew no disorder skip\n"
            "      --bench         step about 1e8 events' worth of rounds (or -r) in full\n"
            "                      and print events per second\n"
            "  -h, --help          this text\n");
}

static int dfccl_sim_parse_u64(const char *opt, const char *text, uint64_t min,
                               uint64_t *value_p)
{
    unsigned long long value;
    char *end;

    errno = 0;
    value = strtoull(text, &end, 0);
    if ((errno != 0) || (end == text) || (*end != '\0') || (text[0] == '-') ||
        (value < min)) {
        fprintf(stderr, "dfccl-sim: %s: expected an integer >= %" PRIu64 ", got '%s'\n", opt,
                min, text);
        return 0;
    }
    *value_p = value;
    return 1;
}

/* A probability in [0, 1], or [0, 1) when below_one. */
static int dfccl_sim_parse_prob(const char *opt, const char *text, int below_one,
                                double *value_p)
{
    double value;
    char *end;

    errno = 0;
    value = strtod(text, &end);
    if ((errno != 0) || (end == text) || (*end != '\0') || !isfinite(value) ||
        (value < 0.0) || (value > 1.0) || (below_one && (value >= 1.0))) {
        fprintf(stderr, "dfccl-sim: %s: expected a probability in [0, 1%s, got '%s'\n", opt,
                below_one ? ")" : "]", text);
        return 0;
    }
    *value_p = value;
    return 1;
}

static int dfccl_sim_parse_options(int argc, char **argv, dfccl_sim_options_t *opts)
{
    static const struct option longopts[] = {
        {"file", required_argument, NULL, 'f'},
        {"rounds", required_argument, NULL, 'r'},
        {"threads", required_argument, NULL, 'j'},
        {"seed", required_argument, NULL, 's'},
        {"bench", no_argument, NULL, 'B'},
        {"full", no_argument, NULL, 'F'},
        {"disorder-prob", required_argument, NULL, 'D'},
        {"sync-prob", required_argument, NULL, 'Y'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}
    };
    uint64_t value;
    int c;

    while ((c = getopt_long(argc, argv, "f:r:j:s:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'f':
            opts->file = optarg;
            break;
        case 'r':
            if (!dfccl_sim_parse_u64("-r", optarg, 1, &opts->rounds)) {
                return 0;
            }
            break;
        case 'j':
            if (!dfccl_sim_parse_u64("-j", optarg, 1, &value)) {
                return 0;
            }
            opts->threads = (value > 1024) ? 1024 : (int)value;
            break;
        case 's':
            if (!dfccl_sim_parse_u64("-s", optarg, 0, &opts->seed)) {
                return 0;
            }
            opts->have_seed = 1;
            break;
        case 'B':
            opts->bench = 1;
            break;
        case 'F':
            opts->full = 1;
            break;
        case 'D':
            if (!dfccl_sim_parse_prob("--disorder-prob", optarg, 0, &opts->disorder_prob)) {
                return 0;
            }
            break;
        case 'Y':
            if (!dfccl_sim_parse_prob("--sync-prob", optarg, 1, &opts->sync_prob)) {
                return 0;
            }
            break;
        case 'h':
            dfccl_sim_usage(stdout);
            exit(0);
        default:
            dfccl_sim_usage(stderr);
            return 0;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "dfccl-sim: unexpected argument '%s'\n", argv[optind]);
        dfccl_sim_usage(stderr);
        return 0;
    }
    if (opts->file == NULL) {
        fprintf(stderr, "dfccl-sim: no configuration given (-f config.json)\n");
        dfccl_sim_usage(stderr);
        return 0;
    }
    return 1;
}

static void dfccl_sim_print_config(const dfccl_sim_options_t *opts,
                                   const dfccl_sim_config_t *config,
                                   const dfccl_sim_world_t *world,
                                   const dfccl_sim_run_params_t *params)
{
    int32_t k, m;

    printf("configuration %s\n", opts->file);
    printf("  model                  %s\n", dfccl_sim_model_name(config->model));
    printf("  grouping_policy        %s\n", dfccl_sim_grouping_name(config->grouping));
    if (config->grouping == DFCCL_SIM_GROUPING_MEGATRON) {
        printf("  tp_group_size          %d\n", config->tp_group_size);
        printf("  dp_group_size          %d\n", config->dp_group_size);
        printf("  pp_group_size          %d\n", config->pp_group_size);
        printf("  coll_cnt_per_tp_group  %lld\n", (long long)config->coll_cnt_per_tp_group);
        printf("  coll_cnt_per_dp_group  %lld\n", (long long)config->coll_cnt_per_dp_group);
    } else {
        printf("  gpu_num                %d\n", config->gpu_num);
        printf("  group_num              %d\n", config->group_num);
        for (k = 0; k < config->group_num; k++) {
            printf("  group %-4d %5lld colls, GPUs", k,
                   (long long)config->coll_cnt_per_group[k]);
            for (m = config->group_gpu_off[k]; m < config->group_gpu_off[k + 1]; m++) {
                printf(" %d", config->group_gpus[m]);
            }
            printf("\n");
        }
    }
    printf("  disorder_prob          %g", config->disorder_prob);
    if (opts->disorder_prob >= 0.0) {
        printf(" (--disorder-prob; the file has %g)", opts->file_disorder_prob);
    }
    printf("\n");
    if (config->model == DFCCL_SIM_MODEL_SYNC) {
        printf("  sync_prob              %g", config->sync_prob);
        if (opts->sync_prob >= 0.0) {
            printf(" (--sync-prob; the file has %g)", opts->file_sync_prob);
        }
        printf("\n");
        if (world->limit == INT32_MAX) {
            printf("  resource_limit         unlimited\n");
        } else {
            printf("  resource_limit         %d\n", world->limit);
        }
    } else {
        printf("  sync_prob              %g (not used by the single-queue model)\n",
               config->sync_prob);
    }
    printf("  total_rounds           %lld\n", (long long)config->total_rounds);
    printf("  GPUs %d, groups %d, collectives %d, parts %d\n", world->gpu_num,
           world->group_num, world->coll_num, world->real_parts);
    printf("  rounds %" PRIu64 ", seed %" PRIu64 ", threads %d%s\n", params->rounds,
           params->seed, params->threads,
           (params->flags & DFCCL_SIM_RUN_FULL) ? ", every round stepped" : "");
    fflush(stdout);
}

static uint64_t dfccl_sim_fresh_seed(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return ((uint64_t)ts.tv_sec * 1000000007ULL) ^ (uint64_t)ts.tv_nsec ^
           ((uint64_t)getpid() << 32);
}

int main(int argc, char **argv)
{
    dfccl_sim_options_t opts       = {0};
    dfccl_sim_run_params_t params  = {0};
    dfccl_sim_run_result_t result  = {0};
    dfccl_sim_config_t *config;
    dfccl_sim_world_t *world;
    dfccl_sim_status_t status;
    dfccl_sim_msg_t msg = {{0}};
    long cpus;
    int ret = 1;

    opts.disorder_prob = -1.0;
    opts.sync_prob     = -1.0;
    if (!dfccl_sim_parse_options(argc, argv, &opts)) {
        return 2;
    }
    status = dfccl_sim_config_load(opts.file, &msg, &config);
    if (status != DFCCL_SIM_OK) {
        fprintf(stderr, "dfccl-sim: %s: %s\n", opts.file, msg.text);
        return 1;
    }
    opts.file_disorder_prob = config->disorder_prob;
    opts.file_sync_prob     = config->sync_prob;
    if (opts.disorder_prob >= 0.0) {
        config->disorder_prob = opts.disorder_prob;
    }
    if (opts.sync_prob >= 0.0) {
        config->sync_prob = opts.sync_prob;
    }
    status = dfccl_sim_world_create(config, &msg, &world);
    if (status != DFCCL_SIM_OK) {
        fprintf(stderr, "dfccl-sim: %s: %s\n", opts.file, msg.text);
        goto out_destroy_config;
    }

    cpus           = sysconf(_SC_NPROCESSORS_ONLN);
    params.threads = (opts.threads > 0) ? opts.threads : ((cpus > 0) ? (int)cpus : 1);
    if (opts.rounds > 0) {
        params.rounds = opts.rounds;
    } else if (opts.bench) {
        params.rounds = (uint64_t)(DFCCL_SIM_BENCH_EVENTS / (world->real_parts + 1.0));
        params.rounds = (params.rounds < 8) ? 8 : params.rounds;
    } else {
        params.rounds = (uint64_t)config->total_rounds;
    }
    if (opts.have_seed) {
        params.seed = opts.seed;
    } else if (config->fix_seed != 0) {
        params.seed = (uint64_t)config->fix_seed;
    } else {
        params.seed = dfccl_sim_fresh_seed();
    }
    params.flags    = (opts.full || opts.bench) ? DFCCL_SIM_RUN_FULL : 0;
    params.progress = isatty(STDERR_FILENO) ? DFCCL_SIM_PROGRESS_TERMINAL :
                                              DFCCL_SIM_PROGRESS_LOG;

    dfccl_sim_print_config(&opts, config, world, &params);
    status = dfccl_sim_run(world, &params, &result);
    if (status != DFCCL_SIM_OK) {
        fprintf(stderr, "dfccl-sim: the run failed: %s\n", dfccl_sim_status_string(status));
        goto out_destroy_world;
    }
    if (result.stalled > 0) {
        fprintf(stderr, "dfccl-sim: warning: %" PRIu64 " rounds stalled without a cycle in "
                "the dependency graph (counted as deadlocks); this is a simulator bug\n",
                result.stalled);
    }

    printf("stepped %" PRIu64 " of %" PRIu64 " rounds (the others drew no disorder skip), "
           "%" PRIu64 " events, %.2f s\n", result.stepped, result.rounds, result.events,
           result.seconds);
    if (opts.bench) {
        printf("bench: %" PRIu64 " events in %.3f s on %d threads: %.4g events/s\n",
               result.events, result.seconds, params.threads,
               (result.seconds > 0) ? (double)result.events / result.seconds : 0.0);
    }
    printf("deadlocks %" PRIu64 " of %" PRIu64 " rounds, ratio %g\n", result.deadlocks,
           result.rounds, (double)result.deadlocks / (double)result.rounds);
    ret = 0;

out_destroy_world:
    dfccl_sim_world_destroy(world);
out_destroy_config:
    dfccl_sim_config_destroy(config);
    return ret;
}
