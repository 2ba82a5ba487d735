/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The net (UCX) transport on one machine, in real separate processes: with
 * DFCCL_NET=1 (every edge of the ring through UCX and the proxies), a
 * reduced correctness matrix (every collective, a few types and ops, sizes
 * 0, 1, odd and >= 1 MiB, in and out of place, 2 and 4 ranks), the disorder
 * and synchronization scenarios, and a registration mismatch reported over
 * the net; then with DFCCL_HOST_ID making ranks 0,1 one host and 2,3
 * another (only the edges 1->2 and 3->0 are net), the matrix and disorder,
 * and on two such hosts of one rank each, a late peer heard through the net.
 * Built as test_net_ns (NET_NS_ONLY), two hosts of one rank each are two
 * network namespaces joined by a veth pair that the test makes itself, and
 * UCX may use TCP only, so both edges of the ring cross a real (virtual)
 * link: the matrix, disorder and synchronization. It skips (exit 77) where
 * namespaces cannot be made (not root, no iproute2, no CAP_NET_ADMIN and
 * CAP_SYS_ADMIN). The bodies of the shm tests are reused: test_coll.c and
 * test_deadlock.c are included with their main renamed, so every transport
 * runs the same checks.
 */
#include "config.h"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mount.h>
#include <time.h>
#include <unistd.h>

#include "reuse_cases.h"

#include "unit_util.h"

/* Net everywhere, or two "hosts" of two ranks each (set in the rank), or
 * the two hosts in two network namespaces, or two hosts that hold every
 * other rank (a job placed round-robin). */
typedef enum { NET_FORCED, NET_TWO_HOSTS, NET_NETNS, NET_INTERLEAVED } net_mode_t;

static const char *const net_mode_names[] = {"forced", "two hosts", "two netns",
                                             "interleaved hosts"};

/* the namespaces and their veth ends: made by netns_setup (test_net_ns) */
static char netns_name[2][32], netns_dev[2][16];

static void net_env(int rank, int n, net_mode_t mode)
{
    /* every net test runs under a timeout that must not fire (the tests of
     * failures set their own): 120 s on an idle machine, and as much
     * longer as a loaded one may take (it bounds a hang, as the harness
     * does) */
    char tmo[32];

    snprintf(tmo, sizeof(tmo), "%.0f", 120 * dfccl_test_scale_max());
    setenv("DFCCL_TIMEOUT", tmo, 0);
    if (mode == NET_FORCED) {
        setenv("DFCCL_NET", "1", 1);
        unsetenv("DFCCL_HOST_ID");
        return;
    }
    unsetenv("DFCCL_NET");
    if (mode == NET_INTERLEAVED) {
        setenv("DFCCL_HOST_ID", rank % 2 == 0 ? "dfccl-test-host-a" : "dfccl-test-host-b", 1);
        return;
    }
    /* the first half of the ranks on host a, the rest on host b */
    setenv("DFCCL_HOST_ID", rank < n / 2 ? "dfccl-test-host-a" : "dfccl-test-host-b", 1);
    if (mode == NET_NETNS) {
        int h = rank < n / 2 ? 0 : 1, fd;
        char path[96];
        snprintf(path, sizeof(path), "/var/run/netns/%s", netns_name[h]);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
            fprintf(stderr, "rank %d: cannot enter network namespace %s: %s\n", rank,
                    netns_name[h], strerror(errno));
            exit(1);
        }
        close(fd);
        /* What `ip netns exec` does: a private /sys of the new namespace,
         * where UCX looks for network devices (/dev/shm stays shared) */
        if (unshare(CLONE_NEWNS) != 0 || mount("", "/", NULL, MS_SLAVE | MS_REC, NULL) != 0 ||
            umount2("/sys", MNT_DETACH) != 0 || mount(netns_name[h], "/sys", "sysfs", 0,
                                                     NULL) != 0) {
            fprintf(stderr, "rank %d: cannot mount /sys of network namespace %s: %s\n", rank,
                    netns_name[h], strerror(errno));
            exit(1);
        }
        /* TCP over the veth: shared memory would bypass the link */
        setenv("UCX_TLS", "tcp,self", 1);
        setenv("UCX_NET_DEVICES", netns_dev[h], 1);
    }
}

typedef struct {
    net_mode_t mode;
    int        kind;
} net_matrix_arg_t;

/*
 * The ring's order: rank order where each host's ranks are consecutive;
 * with every other rank on the other host, host a's ranks then host b's
 * (0, 2, ..., 1, 3, ...), so that the ring crosses between them twice,
 * not at every edge.
 */
static int net_check_ring(dfccl_group_t g, int rank, int n, net_mode_t mode)
{
    int order[8], want, bad = 0;

    DFCCL_TEST_CHECK(n <= 8 && dfcclGroupRingOrder(g, order) == DFCCL_OK, "ring order");
    for (int p = 0; p < n; p++) {
        want = mode != NET_INTERLEAVED ? p : p < (n + 1) / 2 ? 2 * p : 2 * (p - (n + 1) / 2) + 1;
        if (order[p] != want) {
            fprintf(stderr, "rank %d (%s): position %d of the ring holds rank %d, not %d\n",
                    rank, net_mode_names[mode], p, order[p], want);
            bad = 1;
        }
    }
    return bad;
}

static int net_matrix_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    const net_matrix_arg_t *a = varg;
    static const int types[]  = {DFCCL_INT8, DFCCL_INT32, DFCCL_FLOAT16, DFCCL_FLOAT32,
                                 DFCCL_FLOAT64};
    int kind = a->kind, failures = 0, cases = 0;
    int has_op = kind == DFCCL_COLL_ALLREDUCE || kind == DFCCL_COLL_REDUCESCATTER ||
                 kind == DFCCL_COLL_REDUCE;
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;

    net_env(rank, n, a->mode);
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    failures += net_check_ring(g, rank, n, a->mode);
    for (int ti = 0; ti < (int)(sizeof(types) / sizeof(types[0])); ti++) {
        int t = types[ti];
        for (int op = 0; op < (has_op ? DFCCL_OP_COUNT : 1); op++) {
            uint64_t big = ((1u << 20) + esize(t) - 1) / esize(t) + 3;
            uint64_t counts[4] = {0, 1, 12347, big};
            if ((op == DFCCL_AVG && !is_float(t)) || (op == DFCCL_PROD && t != DFCCL_INT32) ||
                (op == DFCCL_MIN && t != DFCCL_FLOAT32)) {
                continue;
            }
            if (kind == DFCCL_COLL_ALLGATHER || kind == DFCCL_COLL_REDUCESCATTER ||
                kind == DFCCL_COLL_ALLTOALL) {
                counts[3] = big / (uint64_t)n + 1;
            }
            for (int sc = 0; sc < 4; sc++) {
                if (sc == 3 && op != DFCCL_SUM && t != DFCCL_INT8) {
                    continue;
                }
                /* all-to-all: out of place only */
                for (int inplace = 0; inplace < (kind == DFCCL_COLL_ALLTOALL ? 1 : 2);
                     inplace++) {
                    int algo = 0;
                    failures += run_case(ctx, g, rank, n, kind, t, op, counts[sc], inplace,
                                         &algo);
                    /* one and two shot need every rank reachable directly */
                    if (algo != 0) {
                        fprintf(stderr, "rank %d: a case on a net group took algorithm %d, "
                                "not the ring\n", rank, algo);
                        failures++;
                    }
                    cases++;
                }
            }
        }
    }
    DFCCL_TEST_CHECK(dfcclGroupDestroy(g) == DFCCL_OK, "group destroy");
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    if (rank == 0) {
        printf("net (%s) %s on %d ranks: %d cases, %d failures\n",
               net_mode_names[a->mode], dfccl_coll_name_for_test(kind),
               n, cases, failures);
    }
    return failures;
}

/*
 * More channels than 32 on the forced net: a message's tag names its
 * channel, and every one of them must reach its own connector. An
 * allreduce and an allgather on 40 channels, checked, with their channel
 * count read back. With proxies (varg: DFCCL_NET_PROXIES of even and of
 * odd ranks), the channels spread over as many lanes as every rank has.
 */
static int net_wide_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    const int *proxies = varg;
    const size_t count = 40 * 1024;
    dfccl_coll_info_t info;
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    int failures = 0, id, algo = 0;
    char np[16];

    net_env(rank, n, NET_FORCED);
    snprintf(np, sizeof(np), "%d", proxies != NULL ? proxies[rank % 2] : 1);
    setenv("DFCCL_NET_PROXIES", np, 1);
    setenv("DFCCL_MAX_BLOCKS", "40", 1);
    setenv("DFCCL_CHANNELS", "40", 1);
    setenv("DFCCL_CHANNEL_BYTES", "1024", 1);
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(count, DFCCL_FLOAT32, DFCCL_SUM, g, 0, &id) ==
                     DFCCL_OK, "register");
    DFCCL_TEST_CHECK(dfcclGetCollInfo(id, ctx, &info) == DFCCL_OK, "coll info");
    if (info.nchannels != 40) {
        fprintf(stderr, "rank %d: the allreduce has %d channels, not 40\n", rank,
                info.nchannels);
        failures++;
    }
    DFCCL_TEST_CHECK(dfcclDeregister(id, ctx) == DFCCL_OK, "deregister");
    failures += run_case(ctx, g, rank, n, DFCCL_COLL_ALLREDUCE, DFCCL_FLOAT32, DFCCL_SUM, count,
                         0, &algo);
    failures += run_case(ctx, g, rank, n, DFCCL_COLL_ALLGATHER, DFCCL_INT32, DFCCL_SUM,
                         count / (size_t)n, 0, &algo);
    DFCCL_TEST_CHECK(dfcclGroupDestroy(g) == DFCCL_OK, "group destroy");
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    if (rank == 0) {
        printf("net (forced) on 40 channels, %d ranks, proxies %s: %d failures\n", n,
               proxies != NULL ? np : "1", failures);
    }
    return failures;
}

START_TEST(test_net_wide) { ck_assert_int_eq(dfccl_test_mp_run(2, 300, net_wide_body, NULL), 0); }
END_TEST

/* proxies: 3 on even ranks and 2 on odd ones (the group takes 2), then 4 */
START_TEST(test_net_proxies)
{
    int mixed[2] = {3, 2}, four[2] = {4, 4};
    ck_assert_int_eq(dfccl_test_mp_run(4, 300, net_wide_body, mixed), 0);
    ck_assert_int_eq(dfccl_test_mp_run(2, 300, net_wide_body, four), 0);
}
END_TEST

/*
 * Where a channel's slots are (DFCCL_NET_MEM; varg: the setting of even
 * and of odd ranks): in registered regions of the transport's own, or in
 * staged host memory, on either side of an edge. Registrations come and
 * go in three slot sizes (each run registers its collective and
 * deregisters it), so later channels take regions that earlier ones gave
 * back, and every run is checked; then the disorder scenario keeps many
 * channels' regions in use at once.
 */
static int net_mem_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    const char *const *mem = varg;
    static const char *const slots[3] = {"65536", "4096", "65536"};
    disorder_arg_t d = {.iters = 10, .counts = {1, 100, 1000, 4096, 10000, 33333, 65536, 100000},
                        .groups = 1};
    int failures = 0, algo = 0;

    net_env(rank, n, NET_FORCED);
    setenv("DFCCL_NET_MEM", mem[rank % 2], 1);
    for (int round = 0; round < 3; round++) {
        dfccl_rank_ctx_t ctx;
        dfccl_group_t g;

        setenv("DFCCL_SLOT_BYTES", slots[round], 1);
        dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
        for (int k = 0; k < 4; k++) {
            failures += run_case(ctx, g, rank, n, DFCCL_COLL_ALLREDUCE, DFCCL_FLOAT32, DFCCL_SUM,
                                 k % 2 == 0 ? 70000 : 3000, k == 3, &algo);
            failures += run_case(ctx, g, rank, n, DFCCL_COLL_ALLGATHER, DFCCL_INT32, DFCCL_SUM,
                                 5000, 0, &algo);
        }
        DFCCL_TEST_CHECK(dfcclGroupDestroy(g) == DFCCL_OK, "group destroy");
        DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    }
    unsetenv("DFCCL_SLOT_BYTES");
    failures += disorder_body(rank, n, oob, &d);
    if (rank == 0) {
        printf("net (forced) with DFCCL_NET_MEM %s and %s on %d ranks: %d failures\n", mem[0],
               mem[1], n, failures);
    }
    return failures;
}

/* registered slots on both sides, staged on both, and each against the
 * other (the pairs of a 4-rank ring alternate). `device` where the caller
 * asks for it (the GPU lane, with a UCX that reaches CUDA memory), or on
 * the host backend, where it is host memory: elsewhere a UCX without CUDA
 * refuses it. */
START_TEST(test_net_mem)
{
    const char *env = getenv("DFCCL_NET_MEM"), *be = getenv("DFCCL_BACKEND");
    /* the tests' contexts are on the host backend unless DFCCL_BACKEND says */
    const int dev = (env != NULL && strcmp(env, "device") == 0) || be == NULL ||
                    strcmp(be, "host") == 0;
    const char *own[2]                 = {"auto", dev ? "device" : "auto"};
    static const char *const staged[2] = {"host", "host"}, *mixed[2] = {"auto", "host"};
    ck_assert_int_eq(dfccl_test_mp_run(2, 300, net_mem_body, (void *)own), 0);
    ck_assert_int_eq(dfccl_test_mp_run(2, 300, net_mem_body, (void *)staged), 0);
    ck_assert_int_eq(dfccl_test_mp_run(4, 300, net_mem_body, (void *)mixed), 0);
}
END_TEST

/* quick mode (DFCCL_TEST_QUICK, used by make distcheck): 2 ranks on the
 * forced net, allreduce only between two hosts; make check runs it all */
static int net_quick(void)
{
    return getenv("DFCCL_TEST_QUICK") != NULL;
}

static void net_matrix(net_mode_t mode, int n)
{
    if (net_quick() && mode == NET_FORCED && n > 2) {
        printf("net (%s) matrix on %d ranks: skipped in quick mode\n", net_mode_names[mode], n);
        return;
    }
    for (int kind = 0; kind < DFCCL_COLL_ALLTOALL; kind++) {
        if (net_quick() && mode == NET_TWO_HOSTS && kind != DFCCL_COLL_ALLREDUCE) {
            continue;
        }
        net_matrix_arg_t a = {mode, kind};
        int rc             = dfccl_test_mp_run(n, 300, net_matrix_body, &a);
        ck_assert_msg(rc == 0, "net %s on %d ranks failed", dfccl_coll_name_for_test(kind), n);
    }
}

START_TEST(test_net_matrix_2) { net_matrix(NET_FORCED, 2); }
END_TEST
START_TEST(test_net_matrix_4) { net_matrix(NET_FORCED, 4); }
END_TEST
START_TEST(test_net_two_hosts_matrix) { net_matrix(NET_TWO_HOSTS, 4); }
END_TEST
START_TEST(test_net_interleaved_matrix)
{
    net_matrix(NET_INTERLEAVED, 4);
    /* all-to-all around a ring that is not in rank order */
    if (!net_quick()) {
        net_matrix_arg_t a = {NET_INTERLEAVED, DFCCL_COLL_ALLTOALL};
        ck_assert_int_eq(dfccl_test_mp_run(4, 300, net_matrix_body, &a), 0);
    }
}
END_TEST

typedef struct {
    net_mode_t     mode;
    disorder_arg_t d;
} net_disorder_arg_t;

static int net_disorder_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    net_disorder_arg_t *a = varg;

    net_env(rank, n, a->mode);
    return disorder_body(rank, n, oob, &a->d);
}

/* the disorder scenario of 8 sizes on one group, on n ranks */
static void net_disorder(net_mode_t mode, int n)
{
    net_disorder_arg_t a = {.mode = mode,
                            .d = {.iters = 50,
                                  .counts = {1, 100, 1000, 4096, 10000, 33333, 65536, 100000},
                                  .groups = 1}};
    ck_assert_int_eq(dfccl_test_mp_run(n, 300, net_disorder_body, &a), 0);
}

START_TEST(test_net_disorder)
{
    net_disorder(NET_FORCED, 2);
    if (!net_quick()) {
        net_disorder(NET_FORCED, 4);
    }
}
END_TEST

START_TEST(test_net_disorder_groups_explicit)
{
    net_disorder_arg_t a = {.mode = NET_FORCED,
                            .d = {.iters = 20,
                                  .counts = {65536, 65536, 65536, 65536, 131072, 1024, 7, 65536},
                                  .groups = NCOLL, .explicit = 1}};
    ck_assert_int_eq(dfccl_test_mp_run(3, 300, net_disorder_body, &a), 0);
}
END_TEST

START_TEST(test_net_two_hosts_disorder) { net_disorder(NET_TWO_HOSTS, 4); }
END_TEST
START_TEST(test_net_interleaved_disorder) { net_disorder(NET_INTERLEAVED, 4); }
END_TEST

static int net_sync_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    net_env(rank, n, *(const net_mode_t *)arg);
    return sync_body(rank, n, oob, NULL);
}

/* A late rank on another host: the early rank's daemon, quit stuck, is
 * relaunched when the late rank's first slot reaches its proxy (there is
 * no shared bell between hosts). */
static int net_bell_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    net_env(rank, n, NET_TWO_HOSTS);
    return bell_body(rank, n, oob, arg);
}

START_TEST(test_net_two_hosts_late_peer)
{
    int on = 1;
    ck_assert_int_eq(dfccl_test_mp_run(2, 60, net_bell_body, &on), 0);
}
END_TEST

START_TEST(test_net_synchronize)
{
    net_mode_t mode = NET_FORCED;
    ck_assert_int_eq(dfccl_test_mp_run(2, 120, net_sync_body, &mode), 0);
    ck_assert_int_eq(dfccl_test_mp_run(4, 120, net_sync_body, &mode), 0);
}
END_TEST

/* Rank 1 registers a different count: rank 1 (which receives from rank 0
 * over the net) reports the mismatch instead of reading wrong data. */
static int net_mismatch_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    float *d;
    int id;
    dfccl_status_t st;

    net_env(rank, n, NET_FORCED);
    setenv("DFCCL_TIMEOUT", "20", 1);
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(rank == 1 ? 1000 : 1001, DFCCL_FLOAT32, DFCCL_SUM,
                                            g, 0, &id) == DFCCL_OK, "register");
    d = dfccl_test_malloc(ctx, 1001 * sizeof(float));
    DFCCL_TEST_CHECK(dfcclRunAllReduce(d, d, id, NULL, NULL, ctx) == DFCCL_OK, "run");
    st = dfcclWait(id, dfccl_test_wait_ms(60000), ctx);
    /* neither rank exits before both have their answer: an exited peer is
     * reported as such, and could come first */
    dfccl_test_barrier(oob);
    if (rank == 1) {
        DFCCL_TEST_CHECK(st == DFCCL_ERR_MISMATCH, "got %s", dfcclGetErrorString(st));
        DFCCL_TEST_CHECK(strstr(dfcclGetLastErrorMessage(), "registered") != NULL, "message %s",
                         dfcclGetLastErrorMessage());
        printf("net mismatch reported: %s\n", dfcclGetLastErrorMessage());
    } else {
        DFCCL_TEST_CHECK(st != DFCCL_OK, "the mismatched allreduce completed");
    }
    return 0; /* the aborted context is not destroyed: the harness ends it */
}

START_TEST(test_net_mismatch)
{
    ck_assert_int_eq(dfccl_test_mp_run(2, 120, net_mismatch_body, NULL), 0);
}
END_TEST

/*
 * A mismatch between two hosts (issue 55, item 1): ranks 0 and 1 on host a,
 * 2 and 3 on host b; rank 0 registers an allgather that the others do not,
 * then all run the same allreduce. Rank 0 finds the mismatch (rank 3's
 * hello, over the net), and ranks 2 and 3 read no directory of host a: the
 * record reaches them through the net transport. Every rank must get
 * DFCCL_ERR_MISMATCH, long before the timeout.
 */
static int net_mismatch_hosts_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    float *d;
    double secs;
    dfccl_status_t st;

    (void)arg;
    net_env(rank, n, NET_TWO_HOSTS);
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    if (unit_mismatch_run(rank, oob, ctx, g, &d, &st, &secs)) {
        return 1;
    }
    /* nobody leaves before all have their answer */
    dfccl_test_barrier(oob);
    DFCCL_TEST_CHECK(st == DFCCL_ERR_MISMATCH, "rank %d: %s (%s)", rank,
                     dfcclGetErrorString(st), dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(secs < 20 * dfccl_test_scale(), "rank %d: failed after %.1f s", rank, secs);
    if (rank >= 2) {
        DFCCL_TEST_CHECK(strstr(dfcclGetLastErrorMessage(), "rank 0 found") != NULL,
                         "rank %d, on the other host: %s", rank, dfcclGetLastErrorMessage());
    }
    if (rank == 2) {
        printf("net mismatch between hosts, rank 2: %s\n", dfcclGetLastErrorMessage());
    }
    return 0; /* aborted contexts are not destroyed: the harness ends them */
}

START_TEST(test_net_mismatch_hosts)
{
    ck_assert_int_eq(dfccl_test_mp_run(4, 120, net_mismatch_hosts_body, NULL), 0);
}
END_TEST

/* dfcclDeregister, timed and reported under `what`; its status in *st_p.
 * Returns the seconds it took. */
static double net_deregister_timed(int id, dfccl_rank_ctx_t ctx, const char *what,
                                   dfccl_status_t *st_p)
{
    const double t0 = unit_now_s();
    double secs;

    *st_p = dfcclDeregister(id, ctx);
    secs  = unit_now_s() - t0;
    printf("%s: dfcclDeregister returned %s after %.1f s%s%s\n", what,
           dfcclGetErrorString(*st_p), secs, *st_p != DFCCL_OK ? ": " : "",
           *st_p != DFCCL_OK ? dfcclGetLastErrorMessage() : "");
    fflush(stdout);
    return secs;
}

/*
 * The start of both dead-peer tests: every rank completes one broadcast of
 * `count` floats from rank 0 (in place in *d), then rank 1 dies.
 */
static int net_broadcast_then_die(int rank, int n, dfccl_test_oob_t *oob, size_t count,
                                  dfccl_rank_ctx_t *ctx, dfccl_group_t *g, int *id, float **d)
{
    dfccl_test_setup(rank, n, oob, NULL, ctx, g);
    DFCCL_TEST_CHECK(dfcclRegisterBroadcast(count, DFCCL_FLOAT32, 0, *g, 0, id) == DFCCL_OK,
                     "register");
    *d = dfccl_test_malloc(*ctx, count * sizeof(float));
    DFCCL_TEST_CHECK(dfcclRunBroadcast(*d, *d, *id, NULL, NULL, *ctx) == DFCCL_OK, "run");
    DFCCL_TEST_CHECK(dfcclWait(*id, dfccl_test_wait_ms(60000), *ctx) == DFCCL_OK,
                     "the first broadcast failed");
    dfccl_test_barrier(oob);
    if (rank == 1) {
        kill(getpid(), SIGKILL);
    }
    return 0;
}

/*
 * The next rank dies between two broadcasts of its root. The root's second
 * broadcast completes locally, but its data may never leave the proxy:
 * dfcclDeregister then waits for the flush without the context lock and
 * gives up after DFCCL_TIMEOUT, and dfcclDestroy returns too. (Whether UCX
 * reports the dead peer first depends on the transport it picked.)
 */
static int net_dead_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    const size_t count = 16;
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    dfccl_status_t st;
    float *d;
    double t0, secs;
    int id;

    net_env(rank, n, NET_FORCED);
    setenv("DFCCL_TIMEOUT", "3", 1);
    DFCCL_TEST_CHECK(net_broadcast_then_die(rank, n, oob, count, &ctx, &g, &id, &d) == 0,
                     "the first broadcast");
    usleep(200000);
    st = unit_run_wait(dfcclRunBroadcast(d, d, id, NULL, NULL, ctx), id, 20000, ctx);
    printf("net dead peer: the root's broadcast after rank 1 died: %s\n",
           dfcclGetErrorString(st));
    secs = net_deregister_timed(id, ctx, "net dead peer", &st);
    /* DFCCL_TIMEOUT is 3 s: 15 s is generous, scaled */
    DFCCL_TEST_CHECK(secs < 15.0 * dfccl_test_scale(), "dfcclDeregister took %.1f s "
                     "(DFCCL_TIMEOUT is 3 s)", secs);
    DFCCL_TEST_CHECK(st == DFCCL_OK || st == DFCCL_ERR_TIMEOUT || st == DFCCL_ERR_BUSY,
                     "dfcclDeregister returned %s", dfcclGetErrorString(st));
    if (st == DFCCL_ERR_BUSY) {
        return 0; /* still in flight (aborted context): the harness ends it */
    }
    t0   = unit_now_s();
    st   = dfcclDestroy(ctx);
    secs = unit_now_s() - t0;
    printf("net dead peer: dfcclDestroy returned %s after %.1f s\n", dfcclGetErrorString(st),
           secs);
    DFCCL_TEST_CHECK(secs < 15.0 * dfccl_test_scale(), "dfcclDestroy took %.1f s", secs);
    return 0;
}

START_TEST(test_net_dead_peer)
{
    ck_assert_int_eq(dfccl_test_mp_run_killed(2, 60, net_dead_body, NULL, 1), 0);
}
END_TEST

/* Wait until process `pid` has exited (gone, or a zombie nobody reaped
 * yet): 1, or 0 after `ms` milliseconds. */
static int net_wait_exit(pid_t pid, int ms)
{
    const double t0 = unit_now_s();
    char path[64], buf[256];

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    while (unit_now_s() - t0 < ms / 1000.0) {
        FILE *f = fopen(path, "r");
        char *rp;
        if (f == NULL) {
            return 1;
        }
        rp = fgets(buf, sizeof(buf), f) != NULL ? strrchr(buf, ')') : NULL;
        fclose(f);
        if (rp != NULL && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X')) {
            return 1;
        }
        usleep(10000);
    }
    return 0;
}

/*
 * Three ranks, ring 0 -> 1 -> 2 -> 0: ranks 0 and 2 on host a, rank 1 on
 * host b, so both of rank 1's edges are net (TCP, where its exit closes
 * the connection and UCX reports it). Rank 1, the root of a broadcast,
 * finishes runs 2 and 3 and leaves in order (deregisters, destroys its
 * group and context, exits) before the others start them: rank 0 starts
 * at once and waits for rank 2, which starts 300 ms later. The data rank 1
 * sent still completes both runs on both: a peer that finished its part
 * and left is no failure. A fourth run, which rank 1 never made, fails
 * promptly on both without DFCCL_TIMEOUT, naming rank 1.
 */
static int net_left_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    const size_t count = 1000;
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    dfccl_status_t st;
    float *d, *h = malloc(count * sizeof(float));
    int id, pids[3], me = (int)getpid();
    double t0, secs;

    (void)arg;
    net_env(rank, n, NET_TWO_HOSTS);
    setenv("DFCCL_HOST_ID", rank == 1 ? "dfccl-test-host-b" : "dfccl-test-host-a", 1);
    unsetenv("DFCCL_TIMEOUT");
    setenv("UCX_TLS", "tcp,self", 1);
    DFCCL_TEST_CHECK(h != NULL && dfccl_test_oob_allgather(&me, pids, sizeof(int), oob) == 0,
                     "pids");
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    DFCCL_TEST_CHECK(dfcclRegisterBroadcast(count, DFCCL_FLOAT32, 1, g, 0, &id) == DFCCL_OK,
                     "register");
    d = dfccl_test_malloc(ctx, count * sizeof(float));
    /* one run together: the connections and the channels are up */
    DFCCL_TEST_CHECK(unit_run_wait(dfcclRunBroadcast(d, d, id, NULL, NULL, ctx), id, 60000,
                                   ctx) == DFCCL_OK, "the first broadcast");
    dfccl_test_barrier(oob);
    if (rank == 1) {
        for (int run = 2; run <= 3; run++) {
            for (size_t i = 0; i < count; i++) {
                h[i] = (float)(run * 1000 + (int)i);
            }
            dfccl_test_put(ctx, d, h, count * sizeof(float));
            DFCCL_TEST_CHECK(unit_run_wait(dfcclRunBroadcast(d, d, id, NULL, NULL, ctx), id,
                                           60000, ctx) == DFCCL_OK, "root run %d", run);
        }
        DFCCL_TEST_CHECK(dfcclDeregister(id, ctx) == DFCCL_OK, "deregister");
        DFCCL_TEST_CHECK(dfcclGroupDestroy(g) == DFCCL_OK, "group destroy");
        dfccl_test_free(ctx, d);
        DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
        free(h);
        return 0;
    }
    DFCCL_TEST_CHECK(net_wait_exit(pids[1], dfccl_test_wait_ms(60000)), "rank 1 did not exit");
    if (rank == 2) {
        /* rank 0's run waits for this one meanwhile, in flight while its
         * UCX sees rank 1's connection close */
        usleep(300000);
    }
    for (int run = 2; run <= 3; run++) {
        st = unit_run_wait(dfcclRunBroadcast(d, d, id, NULL, NULL, ctx), id, 60000, ctx);
        DFCCL_TEST_CHECK(st == DFCCL_OK, "run %d, whose root finished it and left: %s (%s)", run,
                         dfcclGetErrorString(st), dfcclGetLastErrorMessage());
        dfccl_test_get(ctx, h, d, count * sizeof(float));
        for (size_t i = 0; i < count; i++) {
            DFCCL_TEST_CHECK(h[i] == (float)(run * 1000 + (int)i), "run %d: element %zu is %g",
                             run, i, (double)h[i]);
        }
    }
    t0   = unit_now_s();
    st   = unit_run_wait(dfcclRunBroadcast(d, d, id, NULL, NULL, ctx), id, 60000, ctx);
    secs = unit_now_s() - t0;
    printf("net peer left, rank %d: a run it never made: %s after %.1f s: %s\n", rank,
           dfcclGetErrorString(st), secs, dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(st == DFCCL_ERR_ABORTED, "a run the departed root never made returned %s",
                     dfcclGetErrorString(st));
    DFCCL_TEST_CHECK(strstr(dfcclGetLastErrorMessage(), "rank 1 ") != NULL,
                     "the error does not name rank 1: %s", dfcclGetLastErrorMessage());
    /* found by the health check within a second; 15 s is generous, scaled */
    DFCCL_TEST_CHECK(secs < 15.0 * dfccl_test_scale(), "the failure took %.1f s", secs);
    /* the context is aborted: the calls only end it */
    (void)dfcclDeregister(id, ctx);
    dfccl_test_free(ctx, d);
    (void)dfcclDestroy(ctx);
    free(h);
    return 0;
}

START_TEST(test_net_peer_left)
{
    ck_assert_int_eq(dfccl_test_mp_run(3, 120, net_left_body, NULL), 0);
}
END_TEST

/* Resident memory of this process, in KiB (0 if unknown). */
static long net_rss_kib(void)
{
    char line[128];
    long kib = 0;
    FILE *f  = fopen("/proc/self/status", "r");

    if (f == NULL) {
        return 0;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "VmRSS: %ld", &kib) == 1) {
            break;
        }
    }
    fclose(f);
    return kib;
}

/*
 * The next rank dies, and the root's next broadcast needs more slots than
 * the connector has: it cannot complete, and the context is aborted (the
 * dead process, or DFCCL_TIMEOUT). dfcclDeregister then frees the
 * collective's staging at once, unless the proxy still has requests in
 * UCX for it (DFCCL_ERR_ABORTED: it stays until dfcclDestroy). The proxy
 * must never look at that memory again: it once read the freed staging's
 * `tail` (a free-list pointer to malloc) and posted sends up to it, until
 * the kernel killed the process for its memory. Its memory must not grow
 * while the test watches, and dfcclDestroy returns in bounded time.
 */
static int net_dead_aborted_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    const size_t count = 16384; /* 64 KiB: 16 slots of 4 KiB, 4 in the connector */
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    dfccl_status_t st;
    float *d;
    double t0, secs;
    long rss0, rss = 0;
    int id;

    (void)arg;
    net_env(rank, n, NET_FORCED);
    setenv("DFCCL_TIMEOUT", "3", 1);
    setenv("DFCCL_SLOT_BYTES", "4096", 1);
    setenv("DFCCL_SLOTS", "4", 1);
    setenv("DFCCL_CHANNELS", "1", 1);
    DFCCL_TEST_CHECK(net_broadcast_then_die(rank, n, oob, count, &ctx, &g, &id, &d) == 0,
                     "the first broadcast");
    st = unit_run_wait(dfcclRunBroadcast(d, d, id, NULL, NULL, ctx), id, 60000, ctx);
    printf("net dead peer, aborted: the root's broadcast after rank 1 died: %s\n",
           dfcclGetErrorString(st));
    fflush(stdout);
    DFCCL_TEST_CHECK(st == DFCCL_ERR_ABORTED || st == DFCCL_ERR_TIMEOUT,
                     "the root's broadcast to a dead rank returned %s",
                     dfcclGetErrorString(st));
    secs = net_deregister_timed(id, ctx, "net dead peer, aborted", &st);
    DFCCL_TEST_CHECK(secs < 15.0 * dfccl_test_scale(), "dfcclDeregister took %.1f s", secs);
    DFCCL_TEST_CHECK(st == DFCCL_OK || st == DFCCL_ERR_ABORTED,
                     "dfcclDeregister on the aborted context returned %s",
                     dfcclGetErrorString(st));
    /* the proxy keeps running: its memory must stay put (a runaway grew by
     * gigabytes a second; a slow machine only sees less of one) */
    rss0 = net_rss_kib();
    t0   = unit_now_s();
    while (unit_now_s() - t0 < dfccl_test_wait_ms(1000) / 1000.0) {
        rss = net_rss_kib();
        if (rss - rss0 > 64 * 1024) {
            break;
        }
        usleep(20000);
    }
    printf("net dead peer, aborted: resident memory %ld KiB, then %ld KiB\n", rss0, rss);
    DFCCL_TEST_CHECK(rss - rss0 <= 64 * 1024, "the memory of rank 0 grew from %ld to %ld KiB "
                     "after dfcclDeregister", rss0, rss);
    t0   = unit_now_s();
    st   = dfcclDestroy(ctx);
    secs = unit_now_s() - t0;
    printf("net dead peer, aborted: dfcclDestroy returned %s after %.1f s\n",
           dfcclGetErrorString(st), secs);
    DFCCL_TEST_CHECK(secs < 15.0 * dfccl_test_scale(), "dfcclDestroy took %.1f s", secs);
    return 0;
}

START_TEST(test_net_dead_peer_aborted)
{
    ck_assert_int_eq(dfccl_test_mp_run_killed(2, 60, net_dead_aborted_body, NULL, 1), 0);
}
END_TEST

/* one rank in each namespace: both edges of the ring cross the link */
START_TEST(test_net_netns_matrix) { net_matrix(NET_NETNS, 2); }
END_TEST

START_TEST(test_net_netns_disorder) { net_disorder(NET_NETNS, 2); }
END_TEST

START_TEST(test_net_netns_synchronize)
{
    net_mode_t mode = NET_NETNS;
    ck_assert_int_eq(dfccl_test_mp_run(2, 120, net_sync_body, &mode), 0);
}
END_TEST

/* system() of a formatted command; 0 when it exited 0 */
static int netns_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int netns_sh(const char *fmt, ...)
{
    char cmd[512];
    va_list ap;
    int rc;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    rc = system(cmd);
    return rc == 0 ? 0 : -1;
}

static void netns_teardown(void)
{
    for (int h = 0; h < 2; h++) {
        if (netns_name[h][0] != '\0') {
            netns_sh("ip netns del %s >/dev/null 2>&1", netns_name[h]);
        }
    }
}

/* Two namespaces joined by a veth pair, 10.231.0.1 and .2; NULL, or why
 * they cannot be made here. */
static const char *netns_setup(void)
{
    int pid = (int)getpid();

    if (geteuid() != 0) {
        return "not root";
    }
    if (netns_sh("command -v ip >/dev/null 2>&1") != 0) {
        return "no ip command (install iproute2)";
    }
    for (int h = 0; h < 2; h++) {
        snprintf(netns_name[h], sizeof(netns_name[h]), "dfccl-%c-%d", 'a' + h, pid);
        snprintf(netns_dev[h], sizeof(netns_dev[h]), "dfv%c%d", 'a' + h, pid % 10000000);
        if (netns_sh("ip netns add %s 2>/dev/null", netns_name[h]) != 0) {
            netns_name[h][0] = '\0';
            netns_teardown();
            return "ip netns add failed (needs CAP_SYS_ADMIN and CAP_NET_ADMIN)";
        }
    }
    if (netns_sh("ip link add %s netns %s type veth peer name %s netns %s 2>/dev/null",
                 netns_dev[0], netns_name[0], netns_dev[1], netns_name[1]) != 0) {
        netns_teardown();
        return "ip link add ... type veth failed (no veth support)";
    }
    for (int h = 0; h < 2; h++) {
        if (netns_sh("ip -n %s addr add 10.231.0.%d/24 dev %s && ip -n %s link set %s up && "
                     "ip -n %s link set lo up", netns_name[h], h + 1, netns_dev[h],
                     netns_name[h], netns_dev[h], netns_name[h]) != 0) {
            netns_teardown();
            return "configuring the veth pair failed";
        }
    }
    /* UCX takes only links that are running: wait for the carrier (5 s on
     * an idle machine, scaled: a skip must not come from a busy one) */
    for (int tries = 0, most = (int)(100 * dfccl_test_scale());; tries++) {
        if (netns_sh("ip -n %s link show %s | grep -q 'state UP' && "
                     "ip -n %s link show %s | grep -q 'state UP'", netns_name[0], netns_dev[0],
                     netns_name[1], netns_dev[1]) == 0) {
            break;
        }
        if (tries >= most) {
            netns_teardown();
            return "the veth pair did not come up in time";
        }
        usleep(50000);
    }
    return NULL;
}

#ifdef NET_NS_ONLY
int main(void)
{
    Suite *s  = suite_create("net_ns");
    TCase *tc = dfccl_test_case(s, "netns", 1000);
    const char *why;
    int failed;

#ifndef HAVE_UCX
    printf("the net transport is not built (no UCX): skipped\n");
    return 77;
#endif
    why = netns_setup();
    if (why != NULL) {
        printf("network namespaces cannot be made here (%s): skipped\n", why);
        return 77;
    }
    printf("network namespaces %s (%s, 10.231.0.1) and %s (%s, 10.231.0.2); UCX_TLS=tcp,self\n",
           netns_name[0], netns_dev[0], netns_name[1], netns_dev[1]);
    tcase_add_test(tc, test_net_netns_matrix);
    tcase_add_test(tc, test_net_netns_disorder);
    tcase_add_test(tc, test_net_netns_synchronize);
    failed = dfccl_test_run(s, CK_NORMAL);
    netns_teardown();
    return failed;
}
#else
int main(void)
{
    /* cases, for CK_RUN_CASE: forced (matrix, disorder, synchronization),
     * failure (mismatch, dead peer), two_hosts (DFCCL_HOST_ID) */
    Suite *s = suite_create("net");
    TCase *forced, *fail, *hosts;

#ifndef HAVE_UCX
    printf("the net transport is not built (no UCX): skipped\n");
    return 77;
#endif
    forced = dfccl_test_case(s, "forced", 1000);
    fail   = dfccl_test_case(s, "failure", 300);
    hosts  = dfccl_test_case(s, "two_hosts", 1000);
    tcase_add_test(forced, test_net_matrix_2);
    tcase_add_test(forced, test_net_matrix_4);
    tcase_add_test(forced, test_net_disorder);
    tcase_add_test(forced, test_net_disorder_groups_explicit);
    tcase_add_test(forced, test_net_synchronize);
    tcase_add_test(forced, test_net_wide);
    tcase_add_test(forced, test_net_proxies);
    tcase_add_test(forced, test_net_mem);
    tcase_add_test(fail, test_net_mismatch);
    tcase_add_test(fail, test_net_dead_peer);
    tcase_add_test(fail, test_net_dead_peer_aborted);
    tcase_add_test(fail, test_net_peer_left);
    tcase_add_test(fail, test_net_mismatch_hosts);
    tcase_add_test(hosts, test_net_two_hosts_matrix);
    tcase_add_test(hosts, test_net_two_hosts_disorder);
    tcase_add_test(hosts, test_net_two_hosts_late_peer);
    tcase_add_test(hosts, test_net_interleaved_matrix);
    tcase_add_test(hosts, test_net_interleaved_disorder);
    return dfccl_test_run(s, CK_NORMAL);
}
#endif
