/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every tunable of the library in one place: its default, its environment
 * variable and its documentation (also listed in README.md). The Open MPI
 * component maps one MCA variable onto each.
 */
#include "dfccl_int.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const char *const dfccl_cfg_backends[]   = {"auto", "cuda", "host", NULL};
static const char *const dfccl_cfg_progress[]   = {"thread", "explicit", NULL};
static const char *const dfccl_cfg_transports[] = {"auto", "shm", "p2p", NULL};
static const char *const dfccl_cfg_protos[]     = {"default", "auto", "simple", "ll", NULL};
static const char *const dfccl_cfg_arrivals[]   = {"default", "off", "stuck", "always", NULL};
static const char *const dfccl_cfg_algos[]      = {"auto", "ring", "oneshot", "twoshot",
                                                   "mesh", "msccl", "tree", "ctree", NULL};
static const char *const dfccl_cfg_tuners[]     = {"static", "model", NULL};
static const char *const dfccl_cfg_profiles[]   = {"auto", "create", "off", NULL};
static const char *const dfccl_cfg_stragglers[] = {"off", "allreduce", NULL};
static const char *const dfccl_cfg_faults[]     = {"abort", "exclude", NULL};
static const char *const dfccl_cfg_net_mems[]   = {"auto", "host", "device", NULL};

/*
 * One row: field, environment variable, MCA name, type; the valid values
 * [lo, hi] or `unset` (has_unset); dfcclConfigInit's value; what that value
 * becomes at dfcclInit on the host and CUDA backends (KEEP: it stays,
 * BLOCKS: the context's max_blocks); enum names; the valid values, the
 * meaning and the defaults in words (README.md's configuration table is
 * these three columns, and a test holds them equal).
 */
#define DFCCL_TUNABLE(_f, _env, _mca, _type, _lo, _hi, _has_unset, _unset, _init, _host,      \
                      _cuda, _names, _valid, _doc, _def_doc)                                  \
    {.env = _env, .field = #_f, .mca = _mca, .type = _type,                                   \
     .offset = offsetof(dfccl_config_t, _f), .lo = _lo, .hi = _hi, .has_unset = _has_unset,  \
     .unset = _unset, .init = (uint64_t)(_init), .def_host = (uint64_t)(_host),              \
     .def_cuda = (uint64_t)(_cuda), .names = _names, .valid = _valid, .doc = _doc,           \
     .def_doc = _def_doc}

/* Upper bounds that only keep arithmetic on sizes from overflowing. */
#define DFCCL_CF_BIG (1ull << 50)

/* Defaults are applied in this order: max_blocks before what derives from it. */
static const dfccl_tunable_t dfccl_cfg_fields[] = {
    DFCCL_TUNABLE(backend, "DFCCL_BACKEND", "backend", DFCCL_TUNABLE_ENUM,
                  0, 2, 0, 0,
                  DFCCL_BACKEND_AUTO, DFCCL_TUNABLE_KEEP, DFCCL_TUNABLE_KEEP, dfccl_cfg_backends,
                  "auto, cuda or host",
                  "`auto`, `cuda` or `host`",
                  "auto"),
    DFCCL_TUNABLE(progress, "DFCCL_PROGRESS", "progress", DFCCL_TUNABLE_ENUM,
                  0, 1, 0, 0,
                  DFCCL_PROGRESS_THREAD, DFCCL_TUNABLE_KEEP, DFCCL_TUNABLE_KEEP, dfccl_cfg_progress,
                  "thread or explicit",
                  "`thread` (poller runs callbacks) or `explicit` (`dfcclProgress`)",
                  "thread"),
    DFCCL_TUNABLE(transport, "DFCCL_TRANSPORT", "transport", DFCCL_TUNABLE_ENUM,
                  0, 2, 0, 0,
                  DFCCL_TRANSPORT_AUTO, DFCCL_TUNABLE_KEEP, DFCCL_TUNABLE_KEEP, dfccl_cfg_transports,
                  "auto, shm or p2p",
                  "`auto`, `shm` or `p2p` (CUDA IPC) between GPUs",
                  "auto"),
    DFCCL_TUNABLE(proto, "DFCCL_PROTO", "proto", DFCCL_TUNABLE_ENUM,
                  0, 3, 0, 0,
                  DFCCL_PROTO_DEFAULT, DFCCL_PROTO_AUTO, DFCCL_PROTO_AUTO, dfccl_cfg_protos,
                  "default, auto, simple or ll",
                  "how connectors carry slices: `simple` (data, then a released counter), `ll` (8 "
                  "bytes of data with two flags in each 16-byte line: no fence, twice the bytes), "
                  "`auto` (LL for slots of up to `DFCCL_LL_BYTES`, on groups without net edges)",
                  "auto"),
    DFCCL_TUNABLE(algo, "DFCCL_ALGO", "algo", DFCCL_TUNABLE_ENUM,
                  0, 7, 0, 0,
                  DFCCL_ALGO_AUTO, DFCCL_TUNABLE_KEEP, DFCCL_TUNABLE_KEEP, dfccl_cfg_algos,
                  "auto, ring, oneshot, twoshot, mesh, msccl, tree or ctree",
                  "the algorithm every collective takes where it can (`ring`, `oneshot`, "
                  "`twoshot`, `mesh` for all-to-alls, `msccl` for a program of "
                  "`DFCCL_MSCCL_XML_FILES`, `tree` and `ctree` for allreduces; as `NCCL_ALGO`); "
                  "a collective it cannot run takes "
                  "the default, with one warning per group; `auto`: the default policy (a "
                  "matching MSCCL program, then `DFCCL_TUNER`); same on every rank",
                  "auto"),
    DFCCL_TUNABLE(tuner, "DFCCL_TUNER", "tuner", DFCCL_TUNABLE_ENUM,
                  0, 1, 0, 0,
                  DFCCL_TUNER_STATIC, DFCCL_TUNABLE_KEEP, DFCCL_TUNABLE_KEEP, dfccl_cfg_tuners,
                  "static or model",
                  "how `DFCCL_ALGO=auto` chooses, after a matching MSCCL program: `static`, the "
                  "size thresholds below (`DFCCL_ONESHOT_BYTES`, `DFCCL_TWOSHOT_BYTES`, ...); "
                  "`model`, the algorithm whose alpha-beta time on the group's measured links "
                  "(`DFCCL_PROFILE`) is least among those that can run the collective (see "
                  "`DFCCL_TUNER_MARGIN`); `dfccl-bench --algos` shows both; same on every rank",
                  "static"),
    DFCCL_TUNABLE(tuner_margin, "DFCCL_TUNER_MARGIN", "tuner_margin", DFCCL_TUNABLE_INT,
                  0, 1000, 0, 0,
                  10, DFCCL_TUNABLE_KEEP, DFCCL_TUNABLE_KEEP, NULL,
                  "0 to 1000 (percent)",
                  "`DFCCL_TUNER=model` leaves the static thresholds' choice only for an "
                  "algorithm predicted faster by more than this many percent of its time (the "
                  "model's error on the host backend is some 20 %; `dfccl-bench --algos` prints "
                  "it); 0: the least predicted always; same on every rank",
                  "10"),
    DFCCL_TUNABLE(model_slice_ns, "DFCCL_MODEL_SLICE_NS", "model_slice_ns", DFCCL_TUNABLE_U32,
                  0, 100000000, 0, 0,
                  0, 2000, 2000, NULL,
                  "0 (backend default) to 10^8",
                  "the model's cost of every slice a channel moves past the first of each hop "
                  "(a barrier and, in SIMPLE, a release that waits for the stores: about 2 us on "
                  "H200s); for calibration from `dfccl-bench --algos`; same on every rank",
                  "2000 / 2000"),
    DFCCL_TUNABLE(model_block_mbps, "DFCCL_MODEL_BLOCK_MBPS", "model_block_mbps",
                  DFCCL_TUNABLE_U32,
                  0, UINT32_MAX, 0, 0,
                  0, 4000, 20000, NULL,
                  "0 (backend default) to 2^32 - 1",
                  "the model's bandwidth of one channel, MB/s: a collective on k channels moves "
                  "its bytes at the least of k times this and the link's measured beta (a block "
                  "moves about 20 GB/s on H200s, a host thread a few GB/s); for calibration from "
                  "`dfccl-bench --algos`; same on every rank",
                  "4000 / 20000"),
    DFCCL_TUNABLE(profile, "DFCCL_PROFILE", "profile", DFCCL_TUNABLE_ENUM,
                  0, 2, 0, 0,
                  DFCCL_PROFILE_AUTO, DFCCL_TUNABLE_KEEP, DFCCL_TUNABLE_KEEP,
                  dfccl_cfg_profiles,
                  "auto, create or off",
                  "`create`: `dfcclGroupCreate` measures the group's links (alpha and beta of "
                  "each class of link its ring has, and a collective's fixed cost, agreed by every "
                  "rank) before it returns; `off`: the group starts from the backend's nominal values; "
                  "`auto`: `create` where `DFCCL_TUNER` is `model`, else `off`; "
                  "`dfcclGroupProfile` measures again on request either way; same on every rank",
                  "auto"),
    DFCCL_TUNABLE(profile_every, "DFCCL_PROFILE_EVERY", "profile_every", DFCCL_TUNABLE_U32,
                  0, UINT32_MAX, 0, 0,
                  0, DFCCL_TUNABLE_KEEP, DFCCL_TUNABLE_KEEP, NULL,
                  "0 (never) to 2^32 - 1",
                  "measure a group's links again (as `DFCCL_PROFILE`) each time this many more "
                  "of its collectives have completed on a rank, with the lowest priority; the "
                  "values agreed by every rank take effect at the same registration on every "
                  "rank, for later registrations only (docs/tuning.md); it keeps a few "
                  "collectives registered on each group (2 MiB of data on the host, 64 MiB on "
                  "GPUs, and their connectors); not on groups that exclude failed ranks; same on "
                  "every rank",
                  "0"),
    DFCCL_TUNABLE(ll_max_bytes, "DFCCL_LL_BYTES", "ll_bytes", DFCCL_TUNABLE_SIZE,
                  256, DFCCL_LL_MAX_BYTES, 1, 0,
                  0, 16 << 10, 16 << 10, NULL,
                  "0 (default, 16 KiB) or 256 to 65536",
                  "largest slot that `auto` carries in LL (256 B to 64 KiB)",
                  "16 KiB"),
    DFCCL_TUNABLE(oneshot_bytes, "DFCCL_ONESHOT_BYTES", "oneshot_bytes", DFCCL_TUNABLE_SIZE,
                  0, DFCCL_ONESHOT_MAX_BYTES, 1, SIZE_MAX,
                  SIZE_MAX, 16 << 10, 256 << 10, NULL,
                  "0 (never) to 2 MiB, or SIZE_MAX (backend default)",
                  "allreduces of at most this many bytes on a group whose ranks all reach each "
                  "other (one host, no net; p2p to every GPU) take the one-shot algorithm: every "
                  "rank writes its input to every peer and reduces the n inputs in rank order, "
                  "one hop instead of the ring's 2(n-1); 0: never; up to 2 MiB, on as many "
                  "channels as `DFCCL_ONESHOT_CHANNEL_BYTES` gives (each share at most 64 KiB); "
                  "same on every rank",
                  "16 KiB / 256 KiB"),
    DFCCL_TUNABLE(oneshot_channel_bytes, "DFCCL_ONESHOT_CHANNEL_BYTES", "oneshot_channel_bytes", DFCCL_TUNABLE_SIZE,
                  0, DFCCL_LL_MAX_BYTES, 0, 0,
                  0, DFCCL_LL_MAX_BYTES, 8 << 10, NULL,
                  "0 (backend default) to 65536",
                  "bytes per channel of a one-shot allreduce, allgather or reduce-scatter (up to "
                  "64 KiB); same on every rank",
                  "64 KiB / 8 KiB"),
    DFCCL_TUNABLE(oneshot_gather_bytes, "DFCCL_ONESHOT_GATHER_BYTES", "oneshot_gather_bytes", DFCCL_TUNABLE_SIZE,
                  0, DFCCL_ONESHOT_MAX_BYTES, 1, SIZE_MAX,
                  SIZE_MAX, 16 << 10, 256 << 10, NULL,
                  "0 (never) to 2 MiB, or SIZE_MAX (backend default)",
                  "allgathers, reduce-scatters and alltoalls whose per-rank (alltoall: per-pair) "
                  "share is at most this many bytes, on the groups of `DFCCL_ONESHOT_BYTES`, take "
                  "one shot: every rank writes to every peer what it needs of its input, one hop "
                  "instead of the ring's n-1; 0: never; up to 2 MiB; same on every rank",
                  "16 KiB / 256 KiB"),
    DFCCL_TUNABLE(twoshot_bytes, "DFCCL_TWOSHOT_BYTES", "twoshot_bytes", DFCCL_TUNABLE_SIZE,
                  0, DFCCL_TWOSHOT_MAX_BYTES, 1, SIZE_MAX,
                  SIZE_MAX, 0, 2 << 20, NULL,
                  "0 (never) to 16 MiB, or SIZE_MAX (backend default)",
                  "allreduces larger than `DFCCL_ONESHOT_BYTES` and of at most this many bytes, "
                  "on the same groups, take the two-shot algorithm: a reduce-scatter and an "
                  "allgather of one hop each, written straight into the peers' connectors (up to "
                  "16 MiB; 0: never); same on every rank",
                  "0 / 2 MiB"),
    DFCCL_TUNABLE(twoshot_channel_bytes, "DFCCL_TWOSHOT_CHANNEL_BYTES", "twoshot_channel_bytes", DFCCL_TUNABLE_SIZE,
                  0, DFCCL_TWOSHOT_MAX_CHANNEL_BYTES, 0, 0,
                  0, DFCCL_TWOSHOT_MAX_CHANNEL_BYTES, 32 << 10, NULL,
                  "0 (backend default) to 512 KiB",
                  "bytes per channel of a two-shot allreduce (up to 512 KiB; each rank's part of "
                  "a channel at most 64 KiB, else the ring); same on every rank",
                  "512 KiB / 32 KiB"),
    DFCCL_TUNABLE(ll_slots, "DFCCL_LL_SLOTS", "ll_slots", DFCCL_TUNABLE_INT,
                  2, 64, 1, 0,
                  0, 16, 16, NULL,
                  "0 (default, 16) or 2 to 64",
                  "most slots of an LL connector: it gets as many as hold 64 KiB of data, at "
                  "least `DFCCL_SLOTS` (2 to 64)",
                  "16"),
    DFCCL_TUNABLE(step_slices, "DFCCL_STEP_SLICES", "step_slices", DFCCL_TUNABLE_INT,
                  0, 16, 0, 0,
                  0, 4, 1, NULL,
                  "0 (backend default) or 1 to 16",
                  "slices a ring step is cut into to pipeline it, none below 16 KiB and fewer "
                  "than `DFCCL_SLOTS` (1 to 16); same on every rank",
                  "4 / 1"),
    DFCCL_TUNABLE(max_blocks, "DFCCL_MAX_BLOCKS", "max_blocks", DFCCL_TUNABLE_INT,
                  0, DFCCL_MAX_CHANNELS, 0, 0,
                  0, 2, 64, NULL,
                  "0 (backend default) or 1 to 64",
                  "the most daemon blocks (threads on host), and the channels of allreduces from "
                  "`DFCCL_PAIR_BYTES` up on two ranks, of alltoalls from `DFCCL_MESH_WIDE_BYTES` "
                  "and of trees from `DFCCL_TREE_WIDE_BYTES`; a launch has as many blocks as the "
                  "registered collective with the most channels",
                  "2 / 64"),
    DFCCL_TUNABLE(threads_per_block, "DFCCL_THREADS", "threads", DFCCL_TUNABLE_INT,
                  32, 1024, 0, 0,
                  512, DFCCL_TUNABLE_KEEP, DFCCL_TUNABLE_KEEP, NULL,
                  "32 to 1024",
                  "CUDA threads per daemon block; from 128 up the last warp publishes each SIMPLE "
                  "slice while the others move the next",
                  "512"),
    DFCCL_TUNABLE(team_threads, "DFCCL_TEAM_THREADS", "team_threads", DFCCL_TUNABLE_INT,
                  -1, 1024, 0, 0,
                  -1, 0, 128, NULL,
                  "-1 (backend default), 0 (the whole block) or 1 to 1024",
                  "a one-shot collective or LL MSCCL program runs on the first threads of each "
                  "daemon block only, one per LL line (8 bytes) of what a primitive moves rounded "
                  "up to a multiple of this (whole warps), when that is fewer than "
                  "`DFCCL_THREADS`; the other threads wait; 0: always the whole block",
                  "0 / 128"),
    DFCCL_TUNABLE(max_channels, "DFCCL_CHANNELS", "channels", DFCCL_TUNABLE_INT,
                  0, DFCCL_MAX_CHANNELS, 0, 0,
                  0, DFCCL_TUNABLE_BLOCKS, 16, NULL,
                  "0 (backend default) or 1 to 64",
                  "channels per collective (≤ blocks)",
                  "= blocks / 16"),
    DFCCL_TUNABLE(wide_bytes, "DFCCL_WIDE_BYTES", "wide_bytes", DFCCL_TUNABLE_SIZE,
                  0, DFCCL_CF_BIG, 0, 0,
                  (uint64_t)256 << 20, DFCCL_TUNABLE_KEEP, DFCCL_TUNABLE_KEEP, NULL,
                  "0 (never) to 2^50",
                  "allreduces, allgathers and reduce-scatters of at least this many bytes may use "
                  "`DFCCL_WIDE_CHANNELS` channels; 0: never",
                  "256 MiB"),
    DFCCL_TUNABLE(wide_channels, "DFCCL_WIDE_CHANNELS", "wide_channels", DFCCL_TUNABLE_INT,
                  0, DFCCL_MAX_CHANNELS, 0, 0,
                  0, DFCCL_TUNABLE_BLOCKS, 20, NULL,
                  "0 (backend default) or 1 to 64",
                  "channels of those collectives (at least `DFCCL_CHANNELS`, at most "
                  "`DFCCL_MAX_BLOCKS`)",
                  "= blocks / 20"),
    DFCCL_TUNABLE(mesh_wide_bytes, "DFCCL_MESH_WIDE_BYTES", "mesh_wide_bytes", DFCCL_TUNABLE_SIZE,
                  0, DFCCL_CF_BIG, 1, SIZE_MAX,
                  SIZE_MAX, 0, (uint64_t)2 << 20, NULL,
                  "0 (never) to 2^50, or SIZE_MAX (backend default)",
                  "alltoalls on the mesh of at least this many bytes (a rank's data for its peers) "
                  "use `DFCCL_MAX_BLOCKS` channels; 0: never",
                  "never / 2 MiB"),
    DFCCL_TUNABLE(tree_wide_bytes, "DFCCL_TREE_WIDE_BYTES", "tree_wide_bytes", DFCCL_TUNABLE_SIZE,
                  0, DFCCL_CF_BIG, 1, SIZE_MAX,
                  SIZE_MAX, 0, (uint64_t)16 << 20, NULL,
                  "0 (never) to 2^50, or SIZE_MAX (backend default)",
                  "tree and ctree allreduces of at least this many bytes use `DFCCL_MAX_BLOCKS` "
                  "channels; 0: never",
                  "never / 16 MiB"),
    DFCCL_TUNABLE(pair_bytes, "DFCCL_PAIR_BYTES", "pair_bytes", DFCCL_TUNABLE_SIZE,
                  0, DFCCL_CF_BIG, 1, SIZE_MAX,
                  SIZE_MAX, 0, (uint64_t)64 << 20, NULL,
                  "0 (never) to 2^50, or SIZE_MAX (backend default)",
                  "on groups of two ranks that write to each other, on two GPUs, allreduces of at "
                  "least this many bytes use `DFCCL_MAX_BLOCKS` channels; 0: never",
                  "never / 64 MiB"),
    DFCCL_TUNABLE(pair_ring_bytes, "DFCCL_PAIR_RING_BYTES", "pair_ring_bytes", DFCCL_TUNABLE_SIZE,
                  0, DFCCL_CF_BIG, 1, SIZE_MAX,
                  SIZE_MAX, 0, 128 << 10, NULL,
                  "0 (never) to 2^50, or SIZE_MAX (backend default)",
                  "on the same groups, ring reduce-scatters and allgathers of at most this many "
                  "bytes (all ranks' data) take one channel; 0: never",
                  "never / 128 KiB"),
    DFCCL_TUNABLE(pair_oneshot_bytes, "DFCCL_PAIR_ONESHOT_BYTES", "pair_oneshot_bytes", DFCCL_TUNABLE_SIZE,
                  0, DFCCL_LL_MAX_BYTES, 1, SIZE_MAX,
                  SIZE_MAX, 0, 16 << 10, NULL,
                  "0 (never) to 65536, or SIZE_MAX (backend default)",
                  "on the same groups, one-shot collectives of at most this many bytes "
                  "(allgather, reduce-scatter: per rank) take one channel, up to 64 KiB; 0: never",
                  "never / 16 KiB"),
    DFCCL_TUNABLE(conn_budget, "DFCCL_CONN_BUDGET", "conn_budget", DFCCL_TUNABLE_SIZE,
                  0, DFCCL_CF_BIG, 0, 0,
                  (uint64_t)768 << 20, DFCCL_TUNABLE_KEEP, DFCCL_TUNABLE_KEEP, NULL,
                  "0 (no limit) to 2^50",
                  "connector bytes a group's registered collectives hold at full size; a "
                  "registration that would pass it gets lean connectors (at most 16 channels of 2 "
                  "slots of 32 KiB: 1 MiB or less, and slower) and a warning; 0: no limit",
                  "768 MiB"),
    DFCCL_TUNABLE(min_channel_bytes, "DFCCL_CHANNEL_BYTES", "channel_bytes", DFCCL_TUNABLE_SIZE,
                  0, 1ull << 40, 0, 0,
                  0, 256 << 10, 32 << 10, NULL,
                  "0 (backend default) to 2^40",
                  "bytes per additional channel",
                  "256 KiB / 32 KiB"),
    DFCCL_TUNABLE(slot_bytes, "DFCCL_SLOT_BYTES", "slot_bytes", DFCCL_TUNABLE_SIZE,
                  0, 64u << 20, 0, 0,
                  0, 64 << 10, 1 << 20, NULL,
                  "0 (backend default) to 64 MiB",
                  "connector slot size (smaller for small collectives)",
                  "64 KiB / 1 MiB"),
    DFCCL_TUNABLE(nslots, "DFCCL_SLOTS", "slots", DFCCL_TUNABLE_INT,
                  2, 64, 0, 0,
                  4, DFCCL_TUNABLE_KEEP, DFCCL_TUNABLE_KEEP, NULL,
                  "2 to 64",
                  "slots per connector, and the least a two-shot sender's ring has (with k, a "
                  "sender reads its peers' heads once every k - 1 back-to-back calls)",
                  "4"),
    DFCCL_TUNABLE(spin_head, "DFCCL_SPIN_HEAD", "spin_head", DFCCL_TUNABLE_U32,
                  0, UINT32_MAX, 0, 0,
                  0, 50, 50, NULL,
                  "0 (backend default) to 2^32 - 1",
                  "initial spin threshold at the head of the task queue (halved per position)",
                  "50 / 50"),
    DFCCL_TUNABLE(spin_min, "DFCCL_SPIN_MIN", "spin_min", DFCCL_TUNABLE_U32,
                  0, UINT32_MAX, 0, 0,
                  0, 10, 10, NULL,
                  "0 (backend default) to 2^32 - 1",
                  "smallest initial threshold",
                  "10 / 10"),
    DFCCL_TUNABLE(spin_sticky, "DFCCL_SPIN_STICKY", "spin_sticky", DFCCL_TUNABLE_U32,
                  0, UINT32_MAX, 0, 0,
                  0, 200, 50, NULL,
                  "0 (backend default) to 2^32 - 1",
                  "threshold once a collective has progressed (halved per queue position too)",
                  "200 / 50"),
    DFCCL_TUNABLE(spin_crowd, "DFCCL_SPIN_CROWD", "spin_crowd", DFCCL_TUNABLE_U32,
                  0, UINT32_MAX, 0, 0,
                  0, UINT32_MAX, 10, NULL,
                  "0 (backend default) to 2^32 - 1",
                  "most polls a collective spins while other collectives are queued on its block "
                  "(a lone one spins its full threshold); 0: backend default (none on the host)",
                  "none / 10"),
    DFCCL_TUNABLE(spin_fresh, "DFCCL_SPIN_FRESH", "spin_fresh", DFCCL_TUNABLE_U32,
                  0, UINT32_MAX, 0, 0,
                  0, 1, 1, NULL,
                  "0 (default, 1) to 2^32 - 1",
                  "threshold of a collective's first run while collectives of its priority that "
                  "have not run yet are queued behind it: it sends what it can without waiting "
                  "and gives way, so that every queued collective has sent its first data before "
                  "a block waits on one",
                  "1 / 1"),
    DFCCL_TUNABLE(quit_us, "DFCCL_QUIT_US", "quit_us", DFCCL_TUNABLE_U32,
                  0, UINT32_MAX, 0, 0,
                  0, 10000, 1000, NULL,
                  "0 (backend default) to 2^32 - 1",
                  "idle or stuck time before a voluntary quit",
                  "10000 / 1000"),
    DFCCL_TUNABLE(relaunch_us, "DFCCL_RELAUNCH_US", "relaunch_us", DFCCL_TUNABLE_U32,
                  0, UINT32_MAX, 0, 0,
                  0, 200, 100, NULL,
                  "0 (backend default) to 2^32 - 1",
                  "least gap before relaunching a stuck daemon; the gap doubles with each "
                  "relaunch that finds nothing new, up to 128 times",
                  "200 / 100"),
    DFCCL_TUNABLE(peer_bells, "DFCCL_PEER_BELLS", "peer_bells", DFCCL_TUNABLE_INT,
                  0, 1, 0, 0,
                  1, DFCCL_TUNABLE_KEEP, DFCCL_TUNABLE_KEEP, NULL,
                  "0 or 1",
                  "1: a stuck daemon is relaunched (after `DFCCL_RELAUNCH_US`) as soon as a rank "
                  "of one of its groups on the same host submits, or data or credits from a peer "
                  "on another host reach the net proxy, instead of at the end of its doubled gap; "
                  "0: on the gap only",
                  "1"),
    DFCCL_TUNABLE(wait_spin_us, "DFCCL_WAIT_SPIN_US", "wait_spin_us", DFCCL_TUNABLE_U32,
                  0, UINT32_MAX, 0, 0,
                  UINT32_MAX, 0, 2000, NULL,
                  "0 to 2^32 - 2, or 2^32 - 1 (backend default)",
                  "`dfcclWait` (and MPI's progress loop) polls the completion queue itself this "
                  "long before it sleeps",
                  "0 / 2000"),
    DFCCL_TUNABLE(max_colls, "DFCCL_MAX_COLLS", "max_colls", DFCCL_TUNABLE_INT,
                  1, 1 << 20, 0, 0,
                  4096, DFCCL_TUNABLE_KEEP, DFCCL_TUNABLE_KEEP, NULL,
                  "1 to 1048576",
                  "registered collectives per context",
                  "4096"),
    DFCCL_TUNABLE(sq_entries, "DFCCL_SQ_ENTRIES", "sq_entries", DFCCL_TUNABLE_INT,
                  2, 1 << 20, 0, 0,
                  1024, DFCCL_TUNABLE_KEEP, DFCCL_TUNABLE_KEEP, NULL,
                  "2 to 1048576",
                  "submission queue entries (more are queued on the host)",
                  "1024"),
    DFCCL_TUNABLE(sq_window, "DFCCL_SQ_WINDOW", "sq_window", DFCCL_TUNABLE_INT,
                  0, DFCCL_SQ_WINDOW_MAX, 0, 0,
                  0, 1, 8, NULL,
                  "0 (backend default) or 1 to 16",
                  "submission queue entries the daemon's leader reads in one poll, four lanes of "
                  "its warp each (1 to 16; a GPU reads at most 8)",
                  "1 / 8"),
    DFCCL_TUNABLE(priority_order, "DFCCL_PRIORITY", "priority_order", DFCCL_TUNABLE_INT,
                  0, 1, 0, 0,
                  1, DFCCL_TUNABLE_KEEP, DFCCL_TUNABLE_KEEP, NULL,
                  "0 or 1",
                  "1: order the task queue by priority, 0: FIFO",
                  "1"),
    DFCCL_TUNABLE(arrivals, "DFCCL_ARRIVALS", "arrivals", DFCCL_TUNABLE_ENUM,
                  0, 3, 0, 0,
                  DFCCL_ARRIVALS_DEFAULT, DFCCL_ARRIVALS_ALWAYS, DFCCL_ARRIVALS_ALWAYS, dfccl_cfg_arrivals,
                  "default, off, stuck or always",
                  "when a daemon block with several collectives queued first runs those whose "
                  "previous rank has sent data already: `off`, `stuck` (after a pass in which one "
                  "got stuck), `always`",
                  "always / always"),
    DFCCL_TUNABLE(timeout_s, "DFCCL_TIMEOUT", "timeout", DFCCL_TUNABLE_SECONDS,
                  0, 1u << 30, 0, 0,
                  0, DFCCL_TUNABLE_KEEP, DFCCL_TUNABLE_KEEP, NULL,
                  "0 (no timeout) or a number of seconds up to 2^30, fractions allowed",
                  "per-collective timeout in seconds (fractions allowed; a negative or "
                  "non-numeric value is refused), 0 = none: past it the context aborts, the "
                  "collective fails with `DFCCL_ERR_TIMEOUT` and a message naming who joined, who "
                  "did not, who does not respond and where each rank waits",
                  "0"),
    DFCCL_TUNABLE(warn_s, "DFCCL_WARN_S", "warn_s", DFCCL_TUNABLE_SECONDS,
                  0, 1u << 30, 0, 0,
                  60, DFCCL_TUNABLE_KEEP, DFCCL_TUNABLE_KEEP, NULL,
                  "0 (no watchdog) or a number of seconds up to 2^30, fractions allowed",
                  "the hang watchdog: a collective in flight longer than this many seconds makes "
                  "each rank print one line naming it, its group and the rank's place, who joined "
                  "and who did not, and where the ranks that joined wait (primitive and the peer "
                  "waited for); the line repeats after twice, four times ... the time, and the "
                  "collective keeps waiting; 0: off",
                  "60"),
    DFCCL_TUNABLE(sigusr1, "DFCCL_SIGUSR1", "sigusr1", DFCCL_TUNABLE_INT,
                  0, 1, 0, 0,
                  0, DFCCL_TUNABLE_KEEP, DFCCL_TUNABLE_KEEP, NULL,
                  "0 or 1",
                  "1: SIGUSR1 makes every context print the same report for each collective in "
                  "flight (`dfcclDumpState`); the handler only sets a flag that the poller reads",
                  "0"),
    DFCCL_TUNABLE(straggler, "DFCCL_STRAGGLER", "straggler", DFCCL_TUNABLE_ENUM,
                  0, 1, 0, 0,
                  DFCCL_STRAGGLER_OFF, DFCCL_TUNABLE_KEEP, DFCCL_TUNABLE_KEEP,
                  dfccl_cfg_stragglers,
                  "off or allreduce",
                  "`allreduce`: every allreduce is registered straggler-tolerant "
                  "(`DFCCL_COLL_STRAGGLER`, docs/stragglers.md) where it can be (every rank on "
                  "one host, at most 31 ranks), an ordinary one elsewhere; `off`: only those "
                  "registered with the flag; same on every rank",
                  "off"),
    DFCCL_TUNABLE(straggler_wait_us, "DFCCL_STRAGGLER_WAIT_US", "straggler_wait_us",
                  DFCCL_TUNABLE_U32,
                  0, UINT32_MAX, 0, 0,
                  0, DFCCL_TUNABLE_KEEP, DFCCL_TUNABLE_KEEP, NULL,
                  "0 (the ski-rental rule) to 2^32 - 1",
                  "how long the ranks that have started a run of a straggler-tolerant allreduce "
                  "wait for the others, in microseconds, where its registration gives no wait "
                  "(`straggler_wait_us` 0); 0: twice a run's time, from the model and then from "
                  "measured runs (AdapCC's ski-rental rule)",
                  "0"),
    DFCCL_TUNABLE(fault_policy, "DFCCL_FAULT_POLICY", "fault_policy", DFCCL_TUNABLE_ENUM,
                  0, 1, 0, 0,
                  DFCCL_FAULT_ABORT, DFCCL_TUNABLE_KEEP, DFCCL_TUNABLE_KEEP, dfccl_cfg_faults,
                  "abort or exclude",
                  "what a new group does when one of its ranks dies: `abort` the rank context, "
                  "or `exclude` the dead rank and go on with the survivors (docs/reliability.md; "
                  "across hosts too, where it makes every rank of a group with net edges start "
                  "the net transport; a group that cannot, one of over 63 ranks, keeps `abort` "
                  "with an info line); `dfcclGroupSetFaultPolicy` overrides it per group; same "
                  "on every rank",
                  "abort"),
    DFCCL_TUNABLE(verbose, "DFCCL_VERBOSE", NULL, DFCCL_TUNABLE_INT,
                  -1, 2, 0, 0,
                  0, DFCCL_TUNABLE_KEEP, DFCCL_TUNABLE_KEEP, NULL,
                  "-1 (silent), 0 (errors), 1 (info) or 2 (debug)",
                  "-1 silent, 0 errors (each printed once per rank) and watchdog reports, 1 info, "
                  "2 debug",
                  "0"),
    DFCCL_TUNABLE(net, "DFCCL_NET", "net", DFCCL_TUNABLE_INT,
                  0, 1, 0, 0,
                  0, DFCCL_TUNABLE_KEEP, DFCCL_TUNABLE_KEEP, NULL,
                  "0 or 1",
                  "1: the net (UCX) transport between every pair of ranks, even on one host "
                  "(testing); any rank setting it forces it on the whole group",
                  "0"),
    DFCCL_TUNABLE(net_proxies, "DFCCL_NET_PROXIES", "net_proxies", DFCCL_TUNABLE_INT,
                  1, DFCCL_NET_MAX_LANES, 0, 0,
                  1, DFCCL_TUNABLE_KEEP, DFCCL_TUNABLE_KEEP, NULL,
                  "1 to 8",
                  "proxy threads of the net (UCX) transport per rank, each with a UCX worker and "
                  "connections of its own; a collective's channels spread over them (as many as "
                  "every rank of the group has), so that UCX moves several channels at once",
                  "1"),
    DFCCL_TUNABLE(net_mem, "DFCCL_NET_MEM", "net_mem", DFCCL_TUNABLE_ENUM,
                  0, 2, 0, 0,
                  DFCCL_NET_MEM_AUTO, DFCCL_TUNABLE_KEEP, DFCCL_TUNABLE_KEEP, dfccl_cfg_net_mems,
                  "auto, host or device",
                  "where the net (UCX) transport keeps the slots it moves: `auto`, in memory "
                  "registered with UCX once, on the GPU where this UCX reaches CUDA memory "
                  "(cuda_copy, cuda_ipc, GPUDirect RDMA) and staged through pinned host memory "
                  "where it does not; `host`, always staged; `device`, on the GPU or the "
                  "transport fails to start (docs/multihost.md)",
                  "auto"),
    DFCCL_TUNABLE(net_mem_bytes, "DFCCL_NET_MEM_BYTES", "net_mem_bytes", DFCCL_TUNABLE_SIZE,
                  0, DFCCL_CF_BIG, 0, 0,
                  (uint64_t)1 << 20, DFCCL_TUNABLE_KEEP, DFCCL_TUNABLE_KEEP, NULL,
                  "0 to 2^50",
                  "with `DFCCL_NET_MEM=auto` on GPUs, the collectives of at least this many bytes "
                  "keep their net slots on the GPU, and smaller ones stage them: UCX moves each "
                  "slot from or to GPU memory with a CUDA copy of its own, which costs more than "
                  "a small slot's staging; 0: every collective",
                  "1 MiB"),
    {.env = "DFCCL_HOST_ID", .type = DFCCL_TUNABLE_ENV,
     .valid = "any string",
     .doc = "host identity (a string; env only) replacing hostname + boot id, so that one "
            "machine can act as several hosts",
     .def_doc = "hostname/boot id"},
};

_Static_assert(sizeof(dfccl_backend_t) == sizeof(int) && sizeof(dfccl_progress_t) == sizeof(int) &&
                   sizeof(dfccl_algo_choice_t) == sizeof(int) &&
                   sizeof(dfccl_transport_t) == sizeof(int) &&
                   sizeof(dfccl_proto_t) == sizeof(int) && sizeof(dfccl_arrivals_t) == sizeof(int) &&
                   sizeof(dfccl_tuner_t) == sizeof(int) &&
                   sizeof(dfccl_profile_mode_t) == sizeof(int) &&
                   sizeof(dfccl_straggler_mode_t) == sizeof(int) &&
                   sizeof(dfccl_net_mem_t) == sizeof(int),
               "the configuration's enums are read and written as int");

#define DFCCL_CFG_NFIELDS (sizeof(dfccl_cfg_fields) / sizeof(dfccl_cfg_fields[0]))

typedef dfccl_tunable_t dfccl_cfg_field_t;

const dfccl_tunable_t *dfcclGetTunables(int *count_p)
{
    if (count_p != NULL) {
        *count_p = (int)DFCCL_CFG_NFIELDS;
    }
    return dfccl_cfg_fields;
}

/* The field's value, as a signed integer (ints, enums: the compiler
 * stores these enums as int) or an unsigned one. */
static int64_t dfccl_cfg_get_i(const dfccl_config_t *c, const dfccl_cfg_field_t *f)
{
    return *(const int *)(const void *)((const char *)c + f->offset);
}

static uint64_t dfccl_cfg_get_u(const dfccl_config_t *c, const dfccl_cfg_field_t *f)
{
    const char *p = (const char *)c + f->offset;

    return f->type == DFCCL_TUNABLE_U32 ? *(const uint32_t *)(const void *)p
                                   : (uint64_t) * (const size_t *)(const void *)p;
}

/* Whether `f` of `c` holds a valid value. */
static int dfccl_cfg_valid(const dfccl_config_t *c, const dfccl_cfg_field_t *f)
{
    if (f->type == DFCCL_TUNABLE_SECONDS) {
        double v = *(const double *)(const void *)((const char *)c + f->offset);
        return isfinite(v) && v >= 0 && v <= (double)f->hi;
    }
    if (f->type == DFCCL_TUNABLE_INT || f->type == DFCCL_TUNABLE_ENUM) {
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
    if (f->type == DFCCL_TUNABLE_SECONDS) {
        snprintf(buf, len, "%g", *(const double *)(const void *)((const char *)c + f->offset));
    } else if (f->type == DFCCL_TUNABLE_INT || f->type == DFCCL_TUNABLE_ENUM) {
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

        if (f->type == DFCCL_TUNABLE_ENV || dfccl_cfg_valid(c, f)) {
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

/* Scale *v by a size suffix: K, M or G, as Open MPI's MCA variables take
 * them, or T (powers of 1024, either case); 0 for another letter or an
 * overflow. */
static int dfccl_cfg_size_suffix(char suffix, unsigned long long *v)
{
    const char *units = "KMGT", *u = strchr(units, toupper((unsigned char)suffix));
    const unsigned shift = u != NULL && suffix != '\0' ? 10u * (unsigned)(u - units + 1) : 0;

    if (shift == 0 || *v > (ULLONG_MAX >> shift)) {
        return 0;
    }
    *v <<= shift;
    return 1;
}

/* Read `f`'s environment variable, if set, into `c`. A value that is not
 * a number (a name, for enums) of the field's range is refused, naming the
 * variable, the value and the range. */
static dfccl_status_t dfccl_cfg_env(dfccl_config_t *c, const dfccl_cfg_field_t *f)
{
    const char *s = getenv(f->env);
    char *p = (char *)c + f->offset, *end = NULL;
    dfccl_config_t probe = *c;
    char *q = (char *)&probe + f->offset;
    int ok = 1;

    if (s == NULL || *s == '\0') {
        return DFCCL_OK;
    }
    errno = 0;
    if (f->type == DFCCL_TUNABLE_ENUM) {
        ok = 0;
        for (int i = 0; f->names[i] != NULL; i++) {
            if (strcmp(s, f->names[i]) == 0) {
                *(int *)(void *)q = i;
                ok = 1;
            }
        }
    } else if (f->type == DFCCL_TUNABLE_SECONDS) {
        double v = strtod(s, &end);
        *(double *)(void *)q = v;
        ok = end != s && *end == '\0' && errno == 0;
    } else if (f->type == DFCCL_TUNABLE_INT) {
        long long v = strtoll(s, &end, 0);
        ok = end != s && *end == '\0' && errno == 0 && v >= INT32_MIN && v <= INT32_MAX;
        *(int *)(void *)q = (int)v;
    } else {
        unsigned long long v = strtoull(s, &end, 0);
        /* strtoull takes "-1" as its largest value: a sign is not a size */
        ok = end != s && errno == 0 && strchr(s, '-') == NULL;
        if (ok && f->type == DFCCL_TUNABLE_SIZE && *end != '\0' && end[1] == '\0') {
            ok = dfccl_cfg_size_suffix(*end, &v);
            end++;
        }
        ok = ok && *end == '\0';
        if (f->type == DFCCL_TUNABLE_U32) {
            ok = ok && v <= UINT32_MAX;
            *(uint32_t *)(void *)q = (uint32_t)v;
        } else {
            *(size_t *)(void *)q = (size_t)v;
        }
    }
    if (!ok || !dfccl_cfg_valid(&probe, f)) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "environment variable %s=\"%s\" is not "
                           "valid: it takes %s%s (configuration field %s); fix or unset it",
                           f->env, s, f->valid,
                           f->type == DFCCL_TUNABLE_SIZE
                               ? " bytes, with an optional K, M, G or T suffix (powers of 1024)"
                               : "",
                           f->field);
    }
    memcpy(p, q, f->type == DFCCL_TUNABLE_SECONDS ? sizeof(double)
                 : f->type == DFCCL_TUNABLE_SIZE  ? sizeof(size_t)
                 : f->type == DFCCL_TUNABLE_U32   ? sizeof(uint32_t)
                                             : sizeof(int));
    return DFCCL_OK;
}

/* Store `v` (an integer of the field's type; SECONDS: whole seconds) in `f`. */
static void dfccl_cfg_set(dfccl_config_t *c, const dfccl_cfg_field_t *f, uint64_t v)
{
    char *p = (char *)c + f->offset;

    switch (f->type) {
    case DFCCL_TUNABLE_INT:
    case DFCCL_TUNABLE_ENUM:
        *(int *)(void *)p = (int)(int64_t)v;
        break;
    case DFCCL_TUNABLE_U32:
        *(uint32_t *)(void *)p = (uint32_t)v;
        break;
    case DFCCL_TUNABLE_SIZE:
        *(size_t *)(void *)p = (size_t)v;
        break;
    case DFCCL_TUNABLE_SECONDS:
        *(double *)(void *)p = (double)v;
        break;
    default:
        break;
    }
}

/* Whether `f` of `c` still holds dfcclConfigInit's value. */
static int dfccl_cfg_is_init(const dfccl_config_t *c, const dfccl_cfg_field_t *f)
{
    if (f->type == DFCCL_TUNABLE_INT || f->type == DFCCL_TUNABLE_ENUM) {
        return dfccl_cfg_get_i(c, f) == (int64_t)f->init;
    }
    if (f->type == DFCCL_TUNABLE_U32) {
        return dfccl_cfg_get_u(c, f) == (uint32_t)f->init;
    }
    return f->type == DFCCL_TUNABLE_SIZE && dfccl_cfg_get_u(c, f) == f->init;
}

dfccl_status_t dfcclConfigInit(dfccl_config_t *c)
{
    if (c == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclConfigInit: config is NULL");
    }
    memset(c, 0, sizeof(*c));
    for (size_t i = 0; i < DFCCL_CFG_NFIELDS; i++) {
        if (dfccl_cfg_fields[i].type != DFCCL_TUNABLE_ENV) {
            dfccl_cfg_set(c, &dfccl_cfg_fields[i], dfccl_cfg_fields[i].init);
        }
    }
    /* DFCCL_HOST_ID (a string: the host identity, for tests) is read where
     * it is used, by dfccl_net_host_id in transport/net.c */
    for (size_t i = 0; i < DFCCL_CFG_NFIELDS; i++) {
        if (dfccl_cfg_fields[i].type != DFCCL_TUNABLE_ENV) {
            DFCCL_CHECK(dfccl_cfg_env(c, &dfccl_cfg_fields[i]));
        }
    }
    return DFCCL_OK;
}

void dfccl_config_defaults(dfccl_config_t *c, int host)
{
    for (size_t i = 0; i < DFCCL_CFG_NFIELDS; i++) {
        const dfccl_cfg_field_t *f = &dfccl_cfg_fields[i];
        uint64_t def               = host ? f->def_host : f->def_cuda;

        if (f->type == DFCCL_TUNABLE_ENV || def == DFCCL_TUNABLE_KEEP || !dfccl_cfg_is_init(c, f)) {
            continue;
        }
        dfccl_cfg_set(c, f, def == DFCCL_TUNABLE_BLOCKS ? (uint64_t)c->max_blocks : def);
    }
    /* what one setting implies for another */
    if (c->max_channels > c->max_blocks) {
        c->max_channels = c->max_blocks;
    }
    if (c->wide_channels < c->max_channels) {
        c->wide_channels = c->max_channels;
    }
    if (c->wide_channels > c->max_blocks) {
        c->wide_channels = c->max_blocks;
    }
    c->team_threads = (c->team_threads + 31) / 32 * 32;
    c->ll_max_bytes &= ~(size_t)255;
    c->slot_bytes &= ~(size_t)15;
    if (c->slot_bytes < 256) {
        c->slot_bytes = 256;
    }
}
