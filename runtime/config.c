/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every tunable of the library in one place: its default, its environment
 * variable and its documentation (also listed in README.md). The Open MPI
 * component maps one MCA variable onto each.
 */
#include "dfccl_int.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* How a field is stored, for the table below. */
enum {
    DFCCL_CF_INT = 0, /* int */
    DFCCL_CF_U32,     /* uint32_t */
    DFCCL_CF_SIZE,    /* size_t */
    DFCCL_CF_SECONDS, /* double, finite */
    DFCCL_CF_ENUM     /* an enum, stored as int, set by name in the environment */
};

/*
 * One field of dfccl_config_t: its environment variable, where it is, and
 * the values it may take: [lo, hi], or `unset` (what dfcclConfigInit
 * leaves for "backend default") when has_unset. `valid` says the same in
 * words for messages. Enum names are in value order.
 */
typedef struct {
    const char         *field;
    const char         *env;
    size_t              off;
    int                 type;
    int64_t             lo;
    uint64_t            hi;
    int                 has_unset;
    uint64_t            unset;
    const char         *valid;
    const char *const  *names;
} dfccl_cfg_field_t;

static const char *const dfccl_cfg_backends[]   = {"auto", "cuda", "host", NULL};
static const char *const dfccl_cfg_progress[]   = {"thread", "explicit", NULL};
static const char *const dfccl_cfg_transports[] = {"auto", "shm", "p2p", NULL};
static const char *const dfccl_cfg_protos[]     = {"default", "auto", "simple", "ll", NULL};
static const char *const dfccl_cfg_arrivals[]   = {"default", "off", "stuck", "always", NULL};

#define DFCCL_CF(_f, _env, _type, _lo, _hi, _has_unset, _unset, _valid, _names)               \
    {#_f, _env, offsetof(dfccl_config_t, _f), _type, _lo, _hi, _has_unset, _unset, _valid, _names}

/* Upper bounds that only keep arithmetic on sizes from overflowing. */
#define DFCCL_CF_BIG (1ull << 50)

static const dfccl_cfg_field_t dfccl_cfg_fields[] = {
    DFCCL_CF(backend, "DFCCL_BACKEND", DFCCL_CF_ENUM, 0, 2, 0, 0, "auto, cuda or host",
             dfccl_cfg_backends),
    DFCCL_CF(progress, "DFCCL_PROGRESS", DFCCL_CF_ENUM, 0, 1, 0, 0, "thread or explicit",
             dfccl_cfg_progress),
    DFCCL_CF(transport, "DFCCL_TRANSPORT", DFCCL_CF_ENUM, 0, 2, 0, 0, "auto, shm or p2p",
             dfccl_cfg_transports),
    DFCCL_CF(max_blocks, "DFCCL_MAX_BLOCKS", DFCCL_CF_INT, 0, DFCCL_MAX_CHANNELS, 0, 0,
             "0 (backend default) or 1 to 32", NULL),
    DFCCL_CF(threads_per_block, "DFCCL_THREADS", DFCCL_CF_INT, 32, 1024, 0, 0, "32 to 1024",
             NULL),
    DFCCL_CF(team_threads, "DFCCL_TEAM_THREADS", DFCCL_CF_INT, -1, 1024, 0, 0,
             "-1 (backend default), 0 (the whole block) or 1 to 1024", NULL),
    DFCCL_CF(max_channels, "DFCCL_CHANNELS", DFCCL_CF_INT, 0, DFCCL_MAX_CHANNELS, 0, 0,
             "0 (backend default) or 1 to 32", NULL),
    DFCCL_CF(wide_bytes, "DFCCL_WIDE_BYTES", DFCCL_CF_SIZE, 0, DFCCL_CF_BIG, 0, 0,
             "0 (never) to 2^50", NULL),
    DFCCL_CF(wide_channels, "DFCCL_WIDE_CHANNELS", DFCCL_CF_INT, 0, DFCCL_MAX_CHANNELS, 0, 0,
             "0 (backend default) or 1 to 32", NULL),
    DFCCL_CF(pair_bytes, "DFCCL_PAIR_BYTES", DFCCL_CF_SIZE, 0, DFCCL_CF_BIG, 1, SIZE_MAX,
             "0 (never) to 2^50, or SIZE_MAX (backend default)", NULL),
    DFCCL_CF(pair_ring_bytes, "DFCCL_PAIR_RING_BYTES", DFCCL_CF_SIZE, 0, DFCCL_CF_BIG, 1,
             SIZE_MAX, "0 (never) to 2^50, or SIZE_MAX (backend default)", NULL),
    DFCCL_CF(pair_oneshot_bytes, "DFCCL_PAIR_ONESHOT_BYTES", DFCCL_CF_SIZE, 0,
             DFCCL_LL_MAX_BYTES, 1, SIZE_MAX,
             "0 (never) to 65536, or SIZE_MAX (backend default)", NULL),
    DFCCL_CF(min_channel_bytes, "DFCCL_CHANNEL_BYTES", DFCCL_CF_SIZE, 0, 1ull << 40, 0, 0,
             "0 (backend default) to 2^40", NULL),
    DFCCL_CF(slot_bytes, "DFCCL_SLOT_BYTES", DFCCL_CF_SIZE, 0, 64u << 20, 0, 0,
             "0 (backend default) to 64 MiB", NULL),
    DFCCL_CF(nslots, "DFCCL_SLOTS", DFCCL_CF_INT, 2, 64, 0, 0, "2 to 64", NULL),
    DFCCL_CF(proto, "DFCCL_PROTO", DFCCL_CF_ENUM, 0, 3, 0, 0, "default, auto, simple or ll",
             dfccl_cfg_protos),
    DFCCL_CF(ll_max_bytes, "DFCCL_LL_BYTES", DFCCL_CF_SIZE, 256, DFCCL_LL_MAX_BYTES, 1, 0,
             "0 (default, 16 KiB) or 256 to 65536", NULL),
    DFCCL_CF(oneshot_bytes, "DFCCL_ONESHOT_BYTES", DFCCL_CF_SIZE, 0, DFCCL_ONESHOT_MAX_BYTES,
             1, SIZE_MAX, "0 (never) to 2 MiB, or SIZE_MAX (backend default)", NULL),
    DFCCL_CF(oneshot_channel_bytes, "DFCCL_ONESHOT_CHANNEL_BYTES", DFCCL_CF_SIZE, 0,
             DFCCL_LL_MAX_BYTES, 0, 0, "0 (backend default) to 65536", NULL),
    DFCCL_CF(oneshot_gather_bytes, "DFCCL_ONESHOT_GATHER_BYTES", DFCCL_CF_SIZE, 0,
             DFCCL_ONESHOT_MAX_BYTES, 1, SIZE_MAX,
             "0 (never) to 2 MiB, or SIZE_MAX (backend default)", NULL),
    DFCCL_CF(twoshot_bytes, "DFCCL_TWOSHOT_BYTES", DFCCL_CF_SIZE, 0, DFCCL_TWOSHOT_MAX_BYTES,
             1, SIZE_MAX, "0 (never) to 16 MiB, or SIZE_MAX (backend default)", NULL),
    DFCCL_CF(twoshot_channel_bytes, "DFCCL_TWOSHOT_CHANNEL_BYTES", DFCCL_CF_SIZE, 0,
             DFCCL_TWOSHOT_MAX_CHANNEL_BYTES, 0, 0, "0 (backend default) to 512 KiB", NULL),
    DFCCL_CF(ll_slots, "DFCCL_LL_SLOTS", DFCCL_CF_INT, 2, 64, 1, 0,
             "0 (default, 16) or 2 to 64", NULL),
    DFCCL_CF(conn_budget, "DFCCL_CONN_BUDGET", DFCCL_CF_SIZE, 0, DFCCL_CF_BIG, 0, 0,
             "0 (no limit) to 2^50", NULL),
    DFCCL_CF(step_slices, "DFCCL_STEP_SLICES", DFCCL_CF_INT, 0, 16, 0, 0,
             "0 (backend default) or 1 to 16", NULL),
    DFCCL_CF(spin_head, "DFCCL_SPIN_HEAD", DFCCL_CF_U32, 0, UINT32_MAX, 0, 0,
             "0 (backend default) to 2^32 - 1", NULL),
    DFCCL_CF(spin_min, "DFCCL_SPIN_MIN", DFCCL_CF_U32, 0, UINT32_MAX, 0, 0,
             "0 (backend default) to 2^32 - 1", NULL),
    DFCCL_CF(spin_sticky, "DFCCL_SPIN_STICKY", DFCCL_CF_U32, 0, UINT32_MAX, 0, 0,
             "0 (backend default) to 2^32 - 1", NULL),
    DFCCL_CF(spin_fresh, "DFCCL_SPIN_FRESH", DFCCL_CF_U32, 0, UINT32_MAX, 0, 0,
             "0 (default, 1) to 2^32 - 1", NULL),
    DFCCL_CF(spin_crowd, "DFCCL_SPIN_CROWD", DFCCL_CF_U32, 0, UINT32_MAX, 0, 0,
             "0 (backend default) to 2^32 - 1", NULL),
    DFCCL_CF(quit_us, "DFCCL_QUIT_US", DFCCL_CF_U32, 0, UINT32_MAX, 0, 0,
             "0 (backend default) to 2^32 - 1", NULL),
    DFCCL_CF(relaunch_us, "DFCCL_RELAUNCH_US", DFCCL_CF_U32, 0, UINT32_MAX, 0, 0,
             "0 (backend default) to 2^32 - 1", NULL),
    DFCCL_CF(peer_bells, "DFCCL_PEER_BELLS", DFCCL_CF_INT, 0, 1, 0, 0, "0 or 1", NULL),
    DFCCL_CF(wait_spin_us, "DFCCL_WAIT_SPIN_US", DFCCL_CF_U32, 0, UINT32_MAX, 0, 0,
             "0 to 2^32 - 2, or 2^32 - 1 (backend default)", NULL),
    DFCCL_CF(max_colls, "DFCCL_MAX_COLLS", DFCCL_CF_INT, 1, 1 << 20, 0, 0, "1 to 1048576",
             NULL),
    DFCCL_CF(sq_entries, "DFCCL_SQ_ENTRIES", DFCCL_CF_INT, 2, 1 << 20, 0, 0, "2 to 1048576",
             NULL),
    DFCCL_CF(sq_window, "DFCCL_SQ_WINDOW", DFCCL_CF_INT, 0, DFCCL_SQ_WINDOW_MAX, 0, 0,
             "0 (backend default) or 1 to 16", NULL),
    DFCCL_CF(timeout_s, "DFCCL_TIMEOUT", DFCCL_CF_SECONDS, 0, 1u << 30, 0, 0,
             "0 (no timeout) or a number of seconds up to 2^30, fractions allowed", NULL),
    DFCCL_CF(priority_order, "DFCCL_PRIORITY", DFCCL_CF_INT, 0, 1, 0, 0, "0 or 1", NULL),
    DFCCL_CF(arrivals, "DFCCL_ARRIVALS", DFCCL_CF_ENUM, 0, 3, 0, 0,
             "default, off, stuck or always", dfccl_cfg_arrivals),
    DFCCL_CF(verbose, "DFCCL_VERBOSE", DFCCL_CF_INT, -1, 2, 0, 0,
             "-1 (silent), 0 (errors), 1 (info) or 2 (debug)", NULL),
    DFCCL_CF(net, "DFCCL_NET", DFCCL_CF_INT, 0, 1, 0, 0, "0 or 1", NULL),
    DFCCL_CF(warn_s, "DFCCL_WARN_S", DFCCL_CF_SECONDS, 0, 1u << 30, 0, 0,
             "0 (no watchdog) or a number of seconds up to 2^30, fractions allowed", NULL),
    DFCCL_CF(sigusr1, "DFCCL_SIGUSR1", DFCCL_CF_INT, 0, 1, 0, 0, "0 or 1", NULL),
};

_Static_assert(sizeof(dfccl_backend_t) == sizeof(int) && sizeof(dfccl_progress_t) == sizeof(int) &&
                   sizeof(dfccl_transport_t) == sizeof(int) &&
                   sizeof(dfccl_proto_t) == sizeof(int) && sizeof(dfccl_arrivals_t) == sizeof(int),
               "the configuration's enums are read and written as int");

#define DFCCL_CFG_NFIELDS (sizeof(dfccl_cfg_fields) / sizeof(dfccl_cfg_fields[0]))

/* The field's value, as a signed integer (ints, enums: the compiler
 * stores these enums as int) or an unsigned one. */
static int64_t dfccl_cfg_get_i(const dfccl_config_t *c, const dfccl_cfg_field_t *f)
{
    return *(const int *)(const void *)((const char *)c + f->off);
}

static uint64_t dfccl_cfg_get_u(const dfccl_config_t *c, const dfccl_cfg_field_t *f)
{
    const char *p = (const char *)c + f->off;

    return f->type == DFCCL_CF_U32 ? *(const uint32_t *)(const void *)p
                                   : (uint64_t) * (const size_t *)(const void *)p;
}

/* Whether `f` of `c` holds a valid value. */
static int dfccl_cfg_valid(const dfccl_config_t *c, const dfccl_cfg_field_t *f)
{
    if (f->type == DFCCL_CF_SECONDS) {
        double v = *(const double *)(const void *)((const char *)c + f->off);
        return isfinite(v) && v >= 0 && v <= (double)f->hi;
    }
    if (f->type == DFCCL_CF_INT || f->type == DFCCL_CF_ENUM) {
        int64_t v = dfccl_cfg_get_i(c, f);
        return (v >= f->lo && v <= (int64_t)f->hi) || (f->has_unset && v == (int64_t)f->unset);
    }
    {
        uint64_t v = dfccl_cfg_get_u(c, f);
        return (v >= (uint64_t)f->lo && v <= f->hi) || (f->has_unset && v == f->unset);
    }
}

/* The value of `f` in `c`, as text. */
static void dfccl_cfg_format(const dfccl_config_t *c, const dfccl_cfg_field_t *f, char *buf,
                             size_t len)
{
    if (f->type == DFCCL_CF_SECONDS) {
        snprintf(buf, len, "%g", *(const double *)(const void *)((const char *)c + f->off));
    } else if (f->type == DFCCL_CF_INT || f->type == DFCCL_CF_ENUM) {
        snprintf(buf, len, "%lld", (long long)dfccl_cfg_get_i(c, f));
    } else {
        snprintf(buf, len, "%llu", (unsigned long long)dfccl_cfg_get_u(c, f));
    }
}

dfccl_status_t dfccl_config_check(const dfccl_config_t *c, const char *fn)
{
    for (size_t i = 0; i < DFCCL_CFG_NFIELDS; i++) {
        const dfccl_cfg_field_t *f = &dfccl_cfg_fields[i];
        char val[48];

        if (dfccl_cfg_valid(c, f)) {
            continue;
        }
        dfccl_cfg_format(c, f, val, sizeof(val));
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "%s: configuration field %s = %s is not "
                           "valid: it takes %s (%s); start from dfcclConfigInit() and change "
                           "only valid values", fn, f->field, val, f->valid, f->env);
    }
    return DFCCL_OK;
}

dfccl_status_t dfcclConfigCheck(const dfccl_config_t *config)
{
    dfccl_status_t st;

    if (config == NULL) {
        dfccl_set_last_error("dfcclConfigCheck: config is NULL");
        return DFCCL_ERR_INVALID_ARG;
    }
    /* the caller reports it, in its own words */
    dfccl_error_quiet(1);
    st = dfccl_config_check(config, "dfcclConfigCheck");
    dfccl_error_quiet(0);
    return st;
}

/* Read `f`'s environment variable, if set, into `c`. A value that is not
 * a number (a name, for enums) of the field's range is refused, naming the
 * variable, the value and the range. */
static dfccl_status_t dfccl_cfg_env(dfccl_config_t *c, const dfccl_cfg_field_t *f)
{
    const char *s = getenv(f->env);
    char *p = (char *)c + f->off, *end = NULL;
    dfccl_config_t probe = *c;
    char *q = (char *)&probe + f->off;
    int ok = 1;

    if (s == NULL || *s == '\0') {
        return DFCCL_OK;
    }
    errno = 0;
    if (f->type == DFCCL_CF_ENUM) {
        ok = 0;
        for (int i = 0; f->names[i] != NULL; i++) {
            if (strcmp(s, f->names[i]) == 0) {
                *(int *)(void *)q = i;
                ok = 1;
            }
        }
    } else if (f->type == DFCCL_CF_SECONDS) {
        double v = strtod(s, &end);
        *(double *)(void *)q = v;
        ok = end != s && *end == '\0' && errno == 0;
    } else if (f->type == DFCCL_CF_INT) {
        long long v = strtoll(s, &end, 0);
        ok = end != s && *end == '\0' && errno == 0 && v >= INT32_MIN && v <= INT32_MAX;
        *(int *)(void *)q = (int)v;
    } else {
        unsigned long long v = strtoull(s, &end, 0);
        /* strtoull takes "-1" as its largest value: a sign is not a size */
        ok = end != s && *end == '\0' && errno == 0 && strchr(s, '-') == NULL;
        if (f->type == DFCCL_CF_U32) {
            ok = ok && v <= UINT32_MAX;
            *(uint32_t *)(void *)q = (uint32_t)v;
        } else {
            *(size_t *)(void *)q = (size_t)v;
        }
    }
    if (!ok || !dfccl_cfg_valid(&probe, f)) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "environment variable %s=\"%s\" is not "
                           "valid: it takes %s (configuration field %s); fix or unset it",
                           f->env, s, f->valid, f->field);
    }
    memcpy(p, q, f->type == DFCCL_CF_SECONDS ? sizeof(double)
                 : f->type == DFCCL_CF_SIZE  ? sizeof(size_t)
                 : f->type == DFCCL_CF_U32   ? sizeof(uint32_t)
                                             : sizeof(int));
    return DFCCL_OK;
}

dfccl_status_t dfcclConfigInit(dfccl_config_t *c)
{
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
    c->warn_s            = 60;    /* the hang watchdog's first report */
    c->sigusr1           = 0;

    /* DFCCL_HOST_ID (a string: the host identity, for tests) is read where
     * it is used, by dfccl_net_host_id in transport/net.c */
    for (size_t i = 0; i < DFCCL_CFG_NFIELDS; i++) {
        DFCCL_CHECK(dfccl_cfg_env(c, &dfccl_cfg_fields[i]));
    }
    return DFCCL_OK;
}
