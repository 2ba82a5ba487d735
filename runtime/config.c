/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every tunable of the library in one place: its default, its environment
 * variable and its documentation (also listed in README.md). The Open MPI
 * component maps one MCA variable onto each.
 */
#include "dfccl_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static dfccl_status_t dfccl_env_u64(const char *var, uint64_t min, uint64_t max, uint64_t *val)
{
    const char *s = getenv(var);
    char *end;
    unsigned long long v;

    if (s == NULL || *s == '\0') {
        return DFCCL_OK;
    }
    errno = 0;
    v     = strtoull(s, &end, 0);
    if (errno != 0 || *end != '\0' || v < min || v > max) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG,
                           "environment variable %s=\"%s\" is not an integer in [%llu, %llu]; "
                           "unset it or fix its value", var, s, (unsigned long long)min,
                           (unsigned long long)max);
    }
    *val = v;
    return DFCCL_OK;
}

#define DFCCL_ENV_INT(_var, _field, _min, _max)                                \
    do {                                                                       \
        uint64_t _v = (uint64_t)(_field);                                      \
        DFCCL_CHECK(dfccl_env_u64(_var, _min, _max, &_v));                     \
        (_field) = _v;                                                         \
    } while (0)

static dfccl_status_t dfccl_env_choice(const char *var, const char *const *names, int n,
                                       int *val)
{
    const char *s = getenv(var);

    if (s == NULL || *s == '\0') {
        return DFCCL_OK;
    }
    for (int i = 0; i < n; i++) {
        if (strcmp(s, names[i]) == 0) {
            *val = i;
            return DFCCL_OK;
        }
    }
    {
        char list[128];
        size_t o = 0;
        list[0] = '\0';
        for (int i = 0; i < n && o < sizeof(list); i++) {
            o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", i ? "|" : "", names[i]);
        }
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "environment variable %s=\"%s\" is not one "
                           "of the accepted values (%s); fix or unset it", var, s, list);
    }
}

dfccl_status_t dfcclConfigInit(dfccl_config_t *c)
{
    static const char *const backends[]   = {"auto", "cuda", "host"};
    static const char *const progress[]   = {"thread", "explicit"};
    static const char *const transports[] = {"auto", "shm", "p2p"};
    static const char *const protos[]     = {"default", "auto", "simple", "ll"};
    static const char *const arrivals[]   = {"default", "off", "stuck", "always"};
    int choice;
    uint64_t v;

    if (c == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclConfigInit: config is NULL");
    }
    memset(c, 0, sizeof(*c));
    c->backend           = DFCCL_BACKEND_AUTO;
    c->progress          = DFCCL_PROGRESS_THREAD;
    c->transport         = DFCCL_TRANSPORT_AUTO;
    c->proto             = DFCCL_PROTO_DEFAULT; /* auto on both backends */
    c->max_blocks        = 0;     /* 0: backend default (host 2, cuda 20) */
    c->threads_per_block = 512;
    c->team_threads      = -1;    /* backend default (host 0, cuda 128) */
    c->max_channels      = 0;     /* 0: backend default (host max_blocks, cuda 16) */
    c->wide_bytes        = (size_t)256 << 20; /* no effect while max_channels = max_blocks */
    c->wide_channels     = 0;     /* 0: backend default (host max_blocks, cuda 20) */
    c->pair_bytes        = SIZE_MAX; /* backend default (host never, cuda 64 MiB) */
    c->pair_ring_bytes   = SIZE_MAX; /* backend default (host never, cuda 128 KiB) */
    c->pair_oneshot_bytes = SIZE_MAX; /* backend default (host never, cuda 16 KiB) */
    c->conn_budget       = (size_t)768 << 20;
    c->min_channel_bytes = 0;     /* 0: backend default (host 256 KiB, cuda 32 KiB) */
    c->slot_bytes        = 0;     /* 0: backend default (host 64 KiB, cuda 1 MiB) */
    /* 4 slots: with one slice per ring step a sender runs at most a step
     * or two ahead of its receiver, and on 4 H200s 4 slots ran allreduce
     * from 4 MiB to 1 GiB at the speed of 8 with half the connector memory
     * (docs/performance.md, "Memory and SMs") */
    c->nslots            = 4;
    c->ll_max_bytes      = 0;     /* 0: backend default (16 KiB) */
    c->ll_slots          = 0;     /* 0: default (16) */
    c->oneshot_bytes     = SIZE_MAX; /* backend default (host 16 KiB, cuda 256 KiB) */
    c->oneshot_channel_bytes = 0;  /* 0: backend default (host 64 KiB, cuda 8 KiB) */
    c->oneshot_gather_bytes = SIZE_MAX; /* backend default (host 16 KiB, cuda 256 KiB) */
    c->twoshot_bytes     = SIZE_MAX; /* backend default */
    c->twoshot_channel_bytes = 0;  /* 0: backend default */
    c->step_slices       = 0;     /* 0: backend default (host 4, cuda 1) */
    c->spin_head         = 0;     /* 0: backend defaults */
    c->spin_min          = 0;
    c->spin_sticky       = 0;
    c->spin_fresh        = 0;     /* 0: default (1) */
    c->spin_crowd        = 0;     /* 0: backend default */
    c->quit_us           = 0;
    c->relaunch_us       = 0;
    c->peer_bells        = 1;
    c->wait_spin_us      = UINT32_MAX; /* backend default (host 0, cuda 2000) */
    c->max_colls         = 4096;
    c->sq_entries        = 1024;
    c->sq_window         = 0;     /* 0: backend default (cuda 8) */
    c->timeout_s         = 0;
    c->priority_order    = 1;
    c->arrivals          = DFCCL_ARRIVALS_DEFAULT; /* always */
    c->verbose           = 0;
    c->net               = 0;     /* 1: net between ranks on one host too */

    choice = (int)c->backend;
    DFCCL_CHECK(dfccl_env_choice("DFCCL_BACKEND", backends, 3, &choice));
    c->backend = (dfccl_backend_t)choice;
    choice     = (int)c->progress;
    DFCCL_CHECK(dfccl_env_choice("DFCCL_PROGRESS", progress, 2, &choice));
    c->progress = (dfccl_progress_t)choice;
    choice      = (int)c->transport;
    DFCCL_CHECK(dfccl_env_choice("DFCCL_TRANSPORT", transports, 3, &choice));
    c->transport = (dfccl_transport_t)choice;
    choice       = (int)c->proto;
    DFCCL_CHECK(dfccl_env_choice("DFCCL_PROTO", protos, 4, &choice));
    c->proto = (dfccl_proto_t)choice;
    choice   = (int)c->arrivals;
    DFCCL_CHECK(dfccl_env_choice("DFCCL_ARRIVALS", arrivals, 4, &choice));
    c->arrivals = (dfccl_arrivals_t)choice;

    DFCCL_ENV_INT("DFCCL_MAX_BLOCKS", c->max_blocks, 0, DFCCL_MAX_CHANNELS);
    DFCCL_ENV_INT("DFCCL_THREADS", c->threads_per_block, 32, 1024);
    DFCCL_ENV_INT("DFCCL_TEAM_THREADS", c->team_threads, 0, 1024);
    DFCCL_ENV_INT("DFCCL_CHANNELS", c->max_channels, 0, DFCCL_MAX_CHANNELS);
    DFCCL_ENV_INT("DFCCL_WIDE_BYTES", c->wide_bytes, 0, 1ull << 50);
    DFCCL_ENV_INT("DFCCL_WIDE_CHANNELS", c->wide_channels, 0, DFCCL_MAX_CHANNELS);
    DFCCL_ENV_INT("DFCCL_PAIR_BYTES", c->pair_bytes, 0, 1ull << 50);
    DFCCL_ENV_INT("DFCCL_PAIR_RING_BYTES", c->pair_ring_bytes, 0, 1ull << 50);
    DFCCL_ENV_INT("DFCCL_PAIR_ONESHOT_BYTES", c->pair_oneshot_bytes, 0, DFCCL_LL_MAX_BYTES);
    DFCCL_ENV_INT("DFCCL_CONN_BUDGET", c->conn_budget, 0, 1ull << 50);
    DFCCL_ENV_INT("DFCCL_CHANNEL_BYTES", c->min_channel_bytes, 0, 1ull << 40);
    DFCCL_ENV_INT("DFCCL_SLOT_BYTES", c->slot_bytes, 0, 64u << 20);
    DFCCL_ENV_INT("DFCCL_SLOTS", c->nslots, 2, 64);
    DFCCL_ENV_INT("DFCCL_LL_BYTES", c->ll_max_bytes, 0, 64u << 10);
    DFCCL_ENV_INT("DFCCL_LL_SLOTS", c->ll_slots, 0, 64);
    DFCCL_ENV_INT("DFCCL_ONESHOT_BYTES", c->oneshot_bytes, 0, DFCCL_ONESHOT_MAX_BYTES);
    DFCCL_ENV_INT("DFCCL_ONESHOT_CHANNEL_BYTES", c->oneshot_channel_bytes, 0,
                  DFCCL_LL_MAX_BYTES);
    DFCCL_ENV_INT("DFCCL_ONESHOT_GATHER_BYTES", c->oneshot_gather_bytes, 0,
                  DFCCL_ONESHOT_MAX_BYTES);
    DFCCL_ENV_INT("DFCCL_TWOSHOT_BYTES", c->twoshot_bytes, 0, DFCCL_TWOSHOT_MAX_BYTES);
    DFCCL_ENV_INT("DFCCL_TWOSHOT_CHANNEL_BYTES", c->twoshot_channel_bytes, 0,
                  DFCCL_TWOSHOT_MAX_CHANNEL_BYTES);
    DFCCL_ENV_INT("DFCCL_STEP_SLICES", c->step_slices, 0, 16);
    DFCCL_ENV_INT("DFCCL_SPIN_HEAD", c->spin_head, 0, UINT32_MAX);
    DFCCL_ENV_INT("DFCCL_SPIN_MIN", c->spin_min, 0, UINT32_MAX);
    DFCCL_ENV_INT("DFCCL_SPIN_STICKY", c->spin_sticky, 0, UINT32_MAX);
    DFCCL_ENV_INT("DFCCL_SPIN_FRESH", c->spin_fresh, 0, UINT32_MAX);
    DFCCL_ENV_INT("DFCCL_SPIN_CROWD", c->spin_crowd, 0, UINT32_MAX);
    DFCCL_ENV_INT("DFCCL_QUIT_US", c->quit_us, 0, UINT32_MAX);
    DFCCL_ENV_INT("DFCCL_RELAUNCH_US", c->relaunch_us, 0, UINT32_MAX);
    DFCCL_ENV_INT("DFCCL_PEER_BELLS", c->peer_bells, 0, 1);
    DFCCL_ENV_INT("DFCCL_WAIT_SPIN_US", c->wait_spin_us, 0, UINT32_MAX - 1);
    DFCCL_ENV_INT("DFCCL_MAX_COLLS", c->max_colls, 1, 1 << 20);
    DFCCL_ENV_INT("DFCCL_SQ_ENTRIES", c->sq_entries, 2, 1 << 20);
    DFCCL_ENV_INT("DFCCL_SQ_WINDOW", c->sq_window, 0, DFCCL_SQ_WINDOW_MAX);
    DFCCL_ENV_INT("DFCCL_PRIORITY", c->priority_order, 0, 1);
    DFCCL_ENV_INT("DFCCL_NET", c->net, 0, 1);
    /* DFCCL_HOST_ID (a string: the host identity, for tests) is read where
     * it is used, by dfccl_net_host_id in transport/net.c */
    v = 0;
    DFCCL_CHECK(dfccl_env_u64("DFCCL_TIMEOUT", 0, 1u << 30, &v));
    if (getenv("DFCCL_TIMEOUT") != NULL) {
        c->timeout_s = (double)v;
    }
    {
        const char *s = getenv("DFCCL_VERBOSE");
        if (s != NULL && *s != '\0') {
            c->verbose = atoi(s);
        }
    }
    return DFCCL_OK;
}
