/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * All-to-all and alltoallv in separate processes: 2 to 8 ranks, every
 * datatype, counts of 0, 1, uneven and over 1 MiB, alltoallv with uneven
 * and zero counts and gaps between blocks, on the mesh (the default where
 * ranks write to each other), on the ring (DFCCL_ALGO=ring) and over the
 * net transport (DFCCL_NET=1), in a different order on every rank among
 * allreduces, and the errors of bad arguments. Every byte of every
 * receive buffer is checked, the bytes between blocks too (untouched).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mp.h"
#include "suite.h"
#include "daemon_types.h"
#include "reduce.h"
#include "unit_util.h"

#define MAXR 8

static const int dtypes[] = {DFCCL_INT8,    DFCCL_UINT8,    DFCCL_INT32,   DFCCL_UINT32,
                             DFCCL_INT64,   DFCCL_UINT64,   DFCCL_FLOAT16, DFCCL_BFLOAT16,
                             DFCCL_FLOAT32, DFCCL_FLOAT64};
#define NDTYPES ((int)(sizeof(dtypes) / sizeof(dtypes[0])))

/* In quick mode (DFCCL_TEST_QUICK, used by make distcheck), without
 * DFCCL_TEST_RANKS: 3 ranks only. */
static const int quick_ranks[] = {3, 0};

/* The rank counts a test runs (unit_rank_counts): `def`, those of
 * DFCCL_TEST_RANKS, or 3 in quick mode; at most MAXR. */
static int rank_counts(const int *def, int *ns)
{
    return unit_rank_counts(def, quick_ranks, 1, MAXR, ns);
}

/* Byte b of element i of what rank r sends rank q. */
static unsigned char pattern(int r, int q, size_t i, size_t b)
{
    return (unsigned char)(r * 37 + q * 11 + i * 7 + b * 3 + 1);
}

/* An all-to-all's layout: counts and displacements in elements of every
 * rank (both directions), so each rank can check what it received. */
typedef struct {
    int    n;
    size_t sc[MAXR][MAXR], sd[MAXR][MAXR]; /* [r][q]: r's send block for q */
    size_t rc[MAXR][MAXR], rd[MAXR][MAXR]; /* [r][q]: r's receive block from q */
    size_t sspan[MAXR], rspan[MAXR];       /* elements each buffer spans */
} layout_t;

/* Uniform (v = 0): `count` per pair, blocks packed. v: uneven counts,
 * none for some pairs, a gap of 3 elements after every send block and the
 * receive blocks in reverse rank order. */
static void make_layout(layout_t *l, int n, size_t count, int v)
{
    memset(l, 0, sizeof(*l));
    l->n = n;
    for (int r = 0; r < n; r++) {
        for (int q = 0; q < n; q++) {
            size_t c = count;
            if (v) {
                c = count == 0 || (r * 5 + q * 3 + (int)(count % 4)) % 4 == 0
                        ? 0 : count + (size_t)(r * 3 + q);
            }
            l->sc[r][q] = c;
            l->rc[q][r] = c;
        }
    }
    for (int r = 0; r < n; r++) {
        for (int k = 0; k < n; k++) {
            const int q = v ? n - 1 - k : k;
            l->sd[r][k] = l->sspan[r];
            l->sspan[r] += l->sc[r][k] + (v ? 3 : 0);
            l->rd[r][q] = l->rspan[r];
            l->rspan[r] += l->rc[r][q];
        }
    }
}

/* Register the all-to-all of `l` for this rank. */
static dfccl_status_t reg(const layout_t *l, int v, int rank, int t, dfccl_group_t g, int *id)
{
    if (!v) {
        return dfcclRegisterAllToAll(l->sc[rank][0], t, g, 0, id);
    }
    return dfcclRegisterAllToAllv(l->sc[rank], l->sd[rank], l->rc[rank], l->rd[rank], t, g, 0,
                                  id);
}

typedef struct {
    char *hs, *hr, *ds, *dr;
    size_t es, sbytes, rbytes;
} bufs_t;

/* Buffers of this rank, the send one filled, the receive one all 0xee. */
static void bufs_make(dfccl_rank_ctx_t ctx, const layout_t *l, int rank, int t, bufs_t *b)
{
    b->es     = dfccl_dtype_size(t);
    b->sbytes = l->sspan[rank] * b->es + 1;
    b->rbytes = l->rspan[rank] * b->es + 1;
    b->hs     = malloc(b->sbytes);
    b->hr     = malloc(b->rbytes);
    memset(b->hs, 0x55, b->sbytes);
    for (int q = 0; q < l->n; q++) {
        for (size_t i = 0; i < l->sc[rank][q]; i++) {
            for (size_t k = 0; k < b->es; k++) {
                b->hs[(l->sd[rank][q] + i) * b->es + k] = (char)pattern(rank, q, i, k);
            }
        }
    }
    memset(b->hr, 0xee, b->rbytes);
    b->ds = dfccl_test_malloc(ctx, b->sbytes);
    b->dr = dfccl_test_malloc(ctx, b->rbytes);
    dfccl_test_put(ctx, b->ds, b->hs, b->sbytes);
    dfccl_test_put(ctx, b->dr, b->hr, b->rbytes);
}

/* 0 when every received element is what its sender sent and every other
 * byte of the receive buffer is untouched; else 1, with a message. */
static int bufs_check(dfccl_rank_ctx_t ctx, const layout_t *l, int rank, bufs_t *b,
                      const char *what)
{
    char *want = malloc(b->rbytes);

    memset(want, 0xee, b->rbytes);
    for (int q = 0; q < l->n; q++) {
        for (size_t i = 0; i < l->rc[rank][q]; i++) {
            for (size_t k = 0; k < b->es; k++) {
                want[(l->rd[rank][q] + i) * b->es + k] = (char)pattern(q, rank, i, k);
            }
        }
    }
    dfccl_test_get(ctx, b->hr, b->dr, b->rbytes);
    for (size_t i = 0; i < b->rbytes; i++) {
        if (want[i] != b->hr[i]) {
            fprintf(stderr, "rank %d: %s: byte %zu of the receive buffer is 0x%02x, expected "
                    "0x%02x\n", rank, what, i, (unsigned char)b->hr[i], (unsigned char)want[i]);
            free(want);
            return 1;
        }
    }
    free(want);
    return 0;
}

static void bufs_free(dfccl_rank_ctx_t ctx, bufs_t *b)
{
    dfccl_test_free(ctx, b->ds);
    dfccl_test_free(ctx, b->dr);
    free(b->hs);
    free(b->hr);
}

/* One all-to-all, run twice (the second run reuses the connectors from
 * where the first left them); 1 on a wrong byte. `algo`: what
 * dfcclGetCollInfo must say, or NULL. */
static int run_one(dfccl_rank_ctx_t ctx, dfccl_group_t g, int rank, int n, int t, size_t count,
                   int v, const char *algo)
{
    layout_t l;
    bufs_t b;
    dfccl_coll_info_t info;
    char what[128];
    int id, bad = 0;

    make_layout(&l, n, count, v);
    snprintf(what, sizeof(what), "%s of %zu x type %d on %d ranks", v ? "alltoallv" : "alltoall",
             count, t, n);
    DFCCL_TEST_CHECK(reg(&l, v, rank, t, g, &id) == DFCCL_OK, "register %s: %s", what,
                     dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(dfcclGetCollInfo(id, ctx, &info) == DFCCL_OK, "info");
    if (algo != NULL && strstr(algo, info.algo) == NULL) {
        fprintf(stderr, "rank %d: %s took %s, expected %s\n", rank, what, info.algo, algo);
        bad = 1;
    }
    bufs_make(ctx, &l, rank, t, &b);
    for (int run = 0; run < 2 && !bad; run++) {
        dfccl_status_t st = v ? dfcclRunAllToAllv(b.ds, b.dr, id, NULL, NULL, ctx)
                              : dfcclRunAllToAll(b.ds, b.dr, id, NULL, NULL, ctx);
        DFCCL_TEST_CHECK(st == DFCCL_OK, "run %s: %s", what, dfcclGetLastErrorMessage());
        DFCCL_TEST_CHECK(dfcclWait(id, dfccl_test_wait_ms(120000), ctx) == DFCCL_OK,
                         "wait %s: %s", what, dfcclGetLastErrorMessage());
        bad = bufs_check(ctx, &l, rank, &b, what);
        memset(b.hr, 0xee, b.rbytes);
        dfccl_test_put(ctx, b.dr, b.hr, b.rbytes);
    }
    bufs_free(ctx, &b);
    DFCCL_TEST_CHECK(dfcclDeregister(id, ctx) == DFCCL_OK, "deregister");
    return bad;
}

/* dfcclGroupSupports(g, alltoallv), which must print nothing (-1 if it
 * did). */
static int stderr_quiet_supports(dfccl_group_t g)
{
    char path[] = "/tmp/dfccl_supports_XXXXXX";
    int fd = mkstemp(path), saved, rc;
    off_t len;

    if (fd < 0) {
        return -1;
    }
    fflush(stderr);
    saved = dup(2);
    dup2(fd, 2);
    rc = dfcclGroupSupports(g, DFCCL_KIND_ALLTOALLV);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    len = lseek(fd, 0, SEEK_END);
    close(fd);
    unlink(path);
    if (len != 0) {
        fprintf(stderr, "dfcclGroupSupports printed %lld bytes\n", (long long)len);
        return -1;
    }
    return rc;
}

typedef struct {
    const char *algo;  /* DFCCL_ALGO, or NULL */
    const char *net;   /* DFCCL_NET, or NULL */
    const char *want;  /* what the uniform ones may run on (n > 1), space-separated */
    int         types; /* every datatype (1) or int32 and float64 only */
} matrix_arg_t;

static int matrix_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    static const size_t counts[] = {0, 1, 17, 1000};
    const matrix_arg_t *a = varg;
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    int failures = 0, cases = 0;

    dfccl_test_setenv("DFCCL_ALGO", a->algo);
    if (a->net != NULL) {
        dfccl_test_setenv("DFCCL_NET", a->net);
        unsetenv("DFCCL_HOST_ID");
    }
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    for (int ti = 0; ti < NDTYPES; ti++) {
        const int t = dtypes[ti];
        if (!a->types && t != DFCCL_INT32 && t != DFCCL_FLOAT64) {
            continue;
        }
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
            failures += run_one(ctx, g, rank, n, t, counts[c], 0, n > 1 ? a->want : NULL);
            cases++;
            if (a->net == NULL) {
                failures += run_one(ctx, g, rank, n, t, counts[c], 1, "mesh");
                cases++;
            }
        }
    }
    if (a->net == NULL) {
        DFCCL_TEST_CHECK(stderr_quiet_supports(g) == DFCCL_OK,
                         "dfcclGroupSupports(alltoallv) on a mesh: %s", dfcclGetLastErrorMessage());
    }
    /* over 1 MiB a pair: many slices, on several channels */
    failures += run_one(ctx, g, rank, n, DFCCL_FLOAT32, 300000, 0, n > 1 ? a->want : NULL);
    if (a->net == NULL) {
        failures += run_one(ctx, g, rank, n, DFCCL_INT8, 1100000, 1, "mesh");
    } else {
        /* alltoallv needs the mesh: refused on a net group, with a reason;
         * asked first, without an error line */
        layout_t l;
        int id;
        DFCCL_TEST_CHECK(stderr_quiet_supports(g) == DFCCL_ERR_UNSUPPORTED,
                         "dfcclGroupSupports(alltoallv) on a net group");
        DFCCL_TEST_CHECK(strstr(dfcclGetLastErrorMessage(), "dfcclRegisterAllToAll") != NULL,
                         "the answer gives the reason: %s", dfcclGetLastErrorMessage());
        make_layout(&l, n, 5, 1);
        DFCCL_TEST_CHECK(reg(&l, 1, rank, DFCCL_INT32, g, &id) == DFCCL_ERR_UNSUPPORTED,
                         "alltoallv on a net group must be refused");
        DFCCL_TEST_CHECK(strstr(dfcclGetLastErrorMessage(), "dfcclRegisterAllToAll") != NULL,
                         "the refusal names the way out: %s", dfcclGetLastErrorMessage());
    }
    DFCCL_TEST_CHECK(dfcclGroupDestroy(g) == DFCCL_OK, "group destroy");
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    if (rank == 0) {
        printf("alltoall (DFCCL_ALGO=%s%s) on %d ranks: %d cases, %d failures\n",
               a->algo ? a->algo : "auto", a->net ? ", DFCCL_NET=1" : "", n, cases, failures);
    }
    return failures;
}

START_TEST(test_alltoall_mesh)
{
    static const int def[] = {2, 3, 4, 5, 6, 7, 8, 1, 0};
    matrix_arg_t a = {NULL, NULL, "mesh oneshot", 1};
    int ns[UNIT_RANK_COUNTS_MAX], k = rank_counts(def, ns);
    for (int i = 0; i < k; i++) {
        ck_assert_int_eq(dfccl_test_mp_run(ns[i], 600, matrix_body, &a), 0);
    }
}
END_TEST

/*
 * Counts given at run time (dfcclRunAllToAllvCounts), different at almost
 * every run: all zero, a peer that gets data for the first time, the same
 * counts twice (the table stays), many slices per pair, then
 * dfcclRunAllToAllv, which keeps the last counts. Registered with counts
 * (varg 1) or with none (varg 0). Every byte is checked at every run.
 */
static int runtime_counts_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    static const size_t seq[] = {0, 5, 5, 40000, 37, 0, 6};
    const int nseq = (int)(sizeof(seq) / sizeof(seq[0]));
    const int with = *(const int *)varg;
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    int id, failures = 0;
    layout_t l;
    char what[96];

    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    make_layout(&l, n, 17, 1);
    if (with) {
        DFCCL_TEST_CHECK(reg(&l, 1, rank, DFCCL_INT32, g, &id) == DFCCL_OK, "register: %s",
                         dfcclGetLastErrorMessage());
    } else {
        DFCCL_TEST_CHECK(dfcclRegisterAllToAllv(NULL, NULL, NULL, NULL, DFCCL_INT32, g, 0,
                                                &id) == DFCCL_OK,
                         "register without counts: %s", dfcclGetLastErrorMessage());
    }
    for (int run = -1; run <= nseq; run++) {
        /* -1: the registered counts (none: all 0); nseq: the last again */
        const int counts = run >= 0 && run < nseq;
        bufs_t b;
        dfccl_status_t st;

        if (run == -1 && !with) {
            make_layout(&l, n, 0, 1);
        } else if (counts) {
            make_layout(&l, n, seq[run], 1);
        }
        snprintf(what, sizeof(what), "alltoallv run %d of counts %zu (%s) on %d ranks", run,
                 counts ? seq[run] : (size_t)0, counts ? "at the run" : "kept", n);
        bufs_make(ctx, &l, rank, DFCCL_INT32, &b);
        st = counts ? dfcclRunAllToAllvCounts(b.ds, l.sc[rank], l.sd[rank], b.dr, l.rc[rank],
                                              l.rd[rank], id, NULL, NULL, ctx)
                    : dfcclRunAllToAllv(b.ds, b.dr, id, NULL, NULL, ctx);
        DFCCL_TEST_CHECK(st == DFCCL_OK, "%s: %s", what, dfcclGetLastErrorMessage());
        DFCCL_TEST_CHECK(dfcclWait(id, dfccl_test_wait_ms(120000), ctx) == DFCCL_OK,
                         "wait %s: %s", what, dfcclGetLastErrorMessage());
        failures += bufs_check(ctx, &l, rank, &b, what);
        bufs_free(ctx, &b);
    }
    DFCCL_TEST_CHECK(dfcclDeregister(id, ctx) == DFCCL_OK, "deregister");
    DFCCL_TEST_CHECK(dfcclGroupDestroy(g) == DFCCL_OK, "group destroy");
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    if (rank == 0) {
        printf("alltoallv with counts at run time (registered %s) on %d ranks: %d failures\n",
               with ? "with counts" : "without", n, failures);
    }
    return failures;
}

START_TEST(test_alltoallv_runtime_counts)
{
    static const int def[] = {2, 3, 4, 8, 0};
    int ns[UNIT_RANK_COUNTS_MAX], k = rank_counts(def, ns);
    for (int i = 0; i < k; i++) {
        for (int with = 0; with < 2; with++) {
            ck_assert_int_eq(dfccl_test_mp_run(ns[i], 300, runtime_counts_body, &with), 0);
        }
    }
}
END_TEST

/*
 * From DFCCL_MESH_WIDE_BYTES up, an alltoall on the mesh takes
 * DFCCL_MAX_BLOCKS channels, below it DFCCL_CHANNELS; both deliver every
 * byte. (On GPUs the defaults make large alltoalls wide; here the
 * settings make a small one so.)
 */
static int wide_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    /* a rank's data for its peers: 4000 (n - 1) bytes, then 1.2 (n - 1) MB */
    static const size_t counts[] = {1000, 300000};
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    int failures = 0;

    (void)varg;
    setenv("DFCCL_MAX_BLOCKS", "4", 1);
    setenv("DFCCL_CHANNELS", "1", 1);
    setenv("DFCCL_CHANNEL_BYTES", "4096", 1);
    setenv("DFCCL_MESH_WIDE_BYTES", "65536", 1);
    setenv("DFCCL_ONESHOT_GATHER_BYTES", "0", 1); /* the small one too on the mesh */
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    for (int c = 0; c < 2; c++) {
        layout_t l;
        bufs_t b;
        dfccl_coll_info_t info;
        int id;

        make_layout(&l, n, counts[c], 0);
        DFCCL_TEST_CHECK(reg(&l, 0, rank, DFCCL_FLOAT32, g, &id) == DFCCL_OK, "register: %s",
                         dfcclGetLastErrorMessage());
        DFCCL_TEST_CHECK(dfcclGetCollInfo(id, ctx, &info) == DFCCL_OK, "info");
        DFCCL_TEST_CHECK(strcmp(info.algo, "mesh") == 0 && info.nchannels == (c == 0 ? 1 : 4),
                         "alltoall of %zu float32 on %d ranks: %s on %d channels, expected the "
                         "mesh on %d", counts[c], n, info.algo, info.nchannels, c == 0 ? 1 : 4);
        bufs_make(ctx, &l, rank, DFCCL_FLOAT32, &b);
        DFCCL_TEST_CHECK(dfcclRunAllToAll(b.ds, b.dr, id, NULL, NULL, ctx) == DFCCL_OK, "run: %s",
                         dfcclGetLastErrorMessage());
        DFCCL_TEST_CHECK(dfcclWait(id, dfccl_test_wait_ms(120000), ctx) == DFCCL_OK, "wait: %s",
                         dfcclGetLastErrorMessage());
        failures += bufs_check(ctx, &l, rank, &b, "wide alltoall");
        bufs_free(ctx, &b);
        DFCCL_TEST_CHECK(dfcclDeregister(id, ctx) == DFCCL_OK, "deregister");
    }
    DFCCL_TEST_CHECK(dfcclGroupDestroy(g) == DFCCL_OK, "group destroy");
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    return failures;
}

START_TEST(test_alltoall_wide)
{
    ck_assert_int_eq(dfccl_test_mp_run(2, 300, wide_body, NULL), 0);
    ck_assert_int_eq(dfccl_test_mp_run(4, 300, wide_body, NULL), 0);
}
END_TEST

START_TEST(test_alltoall_ring)
{
    matrix_arg_t a = {"ring", NULL, "ring", 0};
    static const int def[] = {2, 3, 5, 8, 0};
    int ns[UNIT_RANK_COUNTS_MAX], k = rank_counts(def, ns);
    for (int i = 0; i < k; i++) {
        ck_assert_int_eq(dfccl_test_mp_run(ns[i], 600, matrix_body, &a), 0);
    }
}
END_TEST

START_TEST(test_alltoall_net)
{
    matrix_arg_t a = {NULL, "1", "ring", 0};
    ck_assert_int_eq(dfccl_test_mp_run(2, 600, matrix_body, &a), 0);
    ck_assert_int_eq(dfccl_test_mp_run(4, 600, matrix_body, &a), 0);
}
END_TEST

/*
 * Disorder: an alltoall, an alltoallv and two allreduces, started in a
 * different order on every rank (a rotation by rank, reversed on odd
 * ranks), all in flight together, for several rounds; every result
 * checked. Ranks that wait for their first collective in turn would hang.
 */
static int disorder_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    enum { NC = 4, ROUNDS = 20 };
    const size_t arn = 5000;
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    layout_t l[2];
    bufs_t b[2];
    int id[NC], failures = 0;
    float *ars[2], *arr[2], *h = malloc(arn * sizeof(float));

    (void)varg;
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    make_layout(&l[0], n, 3000, 0);
    make_layout(&l[1], n, 700, 1);
    for (int i = 0; i < 2; i++) {
        DFCCL_TEST_CHECK(reg(&l[i], i, rank, DFCCL_INT32, g, &id[i]) == DFCCL_OK,
                         "register: %s", dfcclGetLastErrorMessage());
        bufs_make(ctx, &l[i], rank, DFCCL_INT32, &b[i]);
        DFCCL_TEST_CHECK(dfcclRegisterAllReduce(arn, DFCCL_FLOAT32, DFCCL_SUM, g, 0,
                                                &id[2 + i]) == DFCCL_OK,
                         "register allreduce: %s", dfcclGetLastErrorMessage());
        ars[i] = dfccl_test_malloc(ctx, arn * sizeof(float));
        arr[i] = dfccl_test_malloc(ctx, arn * sizeof(float));
        for (size_t k = 0; k < arn; k++) {
            h[k] = (float)(rank + 1 + (int)(k % 100) * (i + 1));
        }
        dfccl_test_put(ctx, ars[i], h, arn * sizeof(float));
    }
    for (int round = 0; round < ROUNDS && failures == 0; round++) {
        for (int k = 0; k < NC; k++) {
            const int j = rank % 2 ? (NC - 1 - (k + rank) % NC) : (k + rank) % NC;
            dfccl_status_t st;
            if (j == 0) {
                st = dfcclRunAllToAll(b[0].ds, b[0].dr, id[0], NULL, NULL, ctx);
            } else if (j == 1) {
                st = dfcclRunAllToAllv(b[1].ds, b[1].dr, id[1], NULL, NULL, ctx);
            } else {
                st = dfcclRunAllReduce(ars[j - 2], arr[j - 2], id[j], NULL, NULL, ctx);
            }
            DFCCL_TEST_CHECK(st == DFCCL_OK, "run %d: %s", j, dfcclGetLastErrorMessage());
        }
        for (int k = 0; k < NC; k++) {
            DFCCL_TEST_CHECK(dfcclWait(id[k], dfccl_test_wait_ms(120000), ctx) == DFCCL_OK,
                             "wait %d in round %d: %s", k, round, dfcclGetLastErrorMessage());
        }
        for (int i = 0; i < 2; i++) {
            failures += bufs_check(ctx, &l[i], rank, &b[i], i ? "alltoallv" : "alltoall");
            memset(b[i].hr, 0xee, b[i].rbytes);
            dfccl_test_put(ctx, b[i].dr, b[i].hr, b[i].rbytes);
            dfccl_test_get(ctx, h, arr[i], arn * sizeof(float));
            for (size_t k = 0; k < arn; k++) {
                const float want = (float)(n * (n + 1) / 2 + n * (int)(k % 100) * (i + 1));
                if (h[k] != want) {
                    fprintf(stderr, "rank %d: allreduce %d in round %d: [%zu] = %g, expected "
                            "%g\n", rank, i, round, k, (double)h[k], (double)want);
                    failures++;
                    break;
                }
            }
        }
    }
    for (int i = 0; i < 2; i++) {
        bufs_free(ctx, &b[i]);
        dfccl_test_free(ctx, ars[i]);
        dfccl_test_free(ctx, arr[i]);
    }
    for (int k = 0; k < NC; k++) {
        DFCCL_TEST_CHECK(dfcclDeregister(id[k], ctx) == DFCCL_OK, "deregister");
    }
    free(h);
    DFCCL_TEST_CHECK(dfcclGroupDestroy(g) == DFCCL_OK, "group destroy");
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    return failures;
}

START_TEST(test_alltoall_disorder)
{
    static const int def[] = {2, 3, 4, 8, 0};
    int ns[UNIT_RANK_COUNTS_MAX], k = rank_counts(def, ns);
    for (int i = 0; i < k; i++) {
        ck_assert_int_eq(dfccl_test_mp_run(ns[i], 600, disorder_body, NULL), 0);
    }
}
END_TEST

/* Bad arguments: one clear error each, naming the call and the way out. */
static int badinput_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    dfccl_coll_desc_t d = {DFCCL_KIND_ALLTOALLV, 4, DFCCL_INT32, DFCCL_SUM, 0, 0, DFCCL_ALGO_AUTO, 0, 0};
    size_t c[MAXR], z[MAXR];
    char *buf;
    int id, ar;

    (void)varg;
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    for (int q = 0; q < n; q++) {
        c[q] = 4;
        z[q] = (size_t)q * 4;
    }
    DFCCL_TEST_CHECK(dfcclRegister(&d, g, &id) == DFCCL_ERR_INVALID_ARG &&
                         strstr(dfcclGetLastErrorMessage(), "dfcclRegisterAllToAllv") != NULL,
                     "dfcclRegister of an alltoallv: %s", dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(dfcclRegisterAllToAllv(c, NULL, c, z, DFCCL_INT32, g, 0, &id) ==
                             DFCCL_ERR_INVALID_ARG &&
                         strstr(dfcclGetLastErrorMessage(), "sdispls") != NULL,
                     "NULL sdispls: %s", dfcclGetLastErrorMessage());
    c[rank] = 5; /* our own block: 5 out, 4 in */
    DFCCL_TEST_CHECK(dfcclRegisterAllToAllv(c, z, (size_t[MAXR]){4, 4, 4, 4, 4, 4, 4, 4}, z,
                                            DFCCL_INT32, g, 0, &id) == DFCCL_ERR_INVALID_ARG &&
                         strstr(dfcclGetLastErrorMessage(), "recvcounts") != NULL,
                     "own counts differ: %s", dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(dfcclRegisterAllToAll(4, DFCCL_INT32, g, 0, &id) == DFCCL_OK, "register");
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(4, DFCCL_INT32, DFCCL_SUM, g, 0, &ar) == DFCCL_OK,
                     "register allreduce");
    buf = dfccl_test_malloc(ctx, (size_t)n * 4 * 4 * 2);
    DFCCL_TEST_CHECK(dfcclRunAllToAll(buf, buf + 4, id, NULL, NULL, ctx) ==
                             DFCCL_ERR_INVALID_ARG &&
                         strstr(dfcclGetLastErrorMessage(), "overlap") != NULL,
                     "overlapping buffers: %s", dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(dfcclRunAllToAll(buf, buf + n * 16, ar, NULL, NULL, ctx) ==
                             DFCCL_ERR_INVALID_ARG &&
                         strstr(dfcclGetLastErrorMessage(), "dfcclRunAllReduce") != NULL,
                     "an allreduce run as an alltoall: %s", dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(dfcclRunAllToAll(buf, buf + n * 16, id, NULL, NULL, ctx) == DFCCL_OK,
                     "run: %s", dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(dfcclWait(id, dfccl_test_wait_ms(60000), ctx) == DFCCL_OK, "wait");
    dfccl_test_free(ctx, buf);
    DFCCL_TEST_CHECK(dfcclDeregister(id, ctx) == DFCCL_OK, "deregister");
    DFCCL_TEST_CHECK(dfcclDeregister(ar, ctx) == DFCCL_OK, "deregister");
    DFCCL_TEST_CHECK(dfcclGroupDestroy(g) == DFCCL_OK, "group destroy");
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    return 0;
}

START_TEST(test_alltoall_badinput)
{
    ck_assert_int_eq(dfccl_test_mp_run(2, 120, badinput_body, NULL), 0);
}
END_TEST

int main(void)
{
    Suite *s  = suite_create("alltoall");
    TCase *tc = dfccl_test_case(s, "alltoall", 3000);

    tcase_add_test(tc, test_alltoall_badinput);
    tcase_add_test(tc, test_alltoall_mesh);
    tcase_add_test(tc, test_alltoall_ring);
    tcase_add_test(tc, test_alltoall_wide);
    tcase_add_test(tc, test_alltoallv_runtime_counts);
    tcase_add_test(tc, test_alltoall_net);
    tcase_add_test(tc, test_alltoall_disorder);
    return dfccl_test_run(s, CK_NORMAL);
}
