/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Correctness matrix of the five collectives in real separate processes:
 * every collective x datatype x op, at 2, 3 and 4 ranks (or those of
 * DFCCL_TEST_RANKS, as every multi-rank test here), in place and out of
 * place, with 0 and 1 element, counts not divisible by the rank count or the
 * chunk size, and >= 1 MiB. Integer results must equal a host reference
 * exactly; floating results must be within a relative tolerance (1e-2 for
 * float16/bfloat16, 1e-5 float32, 1e-12 float64), with inputs chosen so that
 * sums and products are exact in every type except where avg divides.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mp.h"
#include "suite.h"
#include "daemon_types.h"
#include "reduce.h"
#include "unit_util.h"

static const int dtypes[] = {DFCCL_INT8,    DFCCL_UINT8,    DFCCL_INT32,   DFCCL_UINT32,
                             DFCCL_INT64,   DFCCL_UINT64,   DFCCL_FLOAT16, DFCCL_BFLOAT16,
                             DFCCL_FLOAT32, DFCCL_FLOAT64};
#define NDTYPES ((int)(sizeof(dtypes) / sizeof(dtypes[0])))

static const char *dfccl_coll_name_for_test(int kind)
{
    static const char *names[] = {"allreduce", "allgather", "reduce-scatter", "reduce",
                                  "broadcast", "all-to-all"};
    return names[kind];
}

static size_t esize(int t)
{
    return dfccl_dtype_size(t);
}

static int is_float(int t)
{
    return t >= DFCCL_FLOAT16;
}

/* Input element i of rank r, as a double (exact in every type). */
static double input(int op, int r, uint64_t i)
{
    if (op == DFCCL_PROD) {
        return (double)(1 + ((i + (uint64_t)r) % 3 == 0)); /* 1 or 2 */
    }
    return (double)((int)((i * 7 + (uint64_t)r * 3) % 13) - 4); /* -4 .. 8 */
}

static void store(int t, void *buf, uint64_t i, double v)
{
    switch (t) {
    case DFCCL_INT8:     ((int8_t *)buf)[i] = (int8_t)v; break;
    case DFCCL_UINT8:    ((uint8_t *)buf)[i] = (uint8_t)(int)v; break;
    case DFCCL_INT32:    ((int32_t *)buf)[i] = (int32_t)v; break;
    case DFCCL_UINT32:   ((uint32_t *)buf)[i] = (uint32_t)(int32_t)v; break;
    case DFCCL_INT64:    ((int64_t *)buf)[i] = (int64_t)v; break;
    case DFCCL_UINT64:   ((uint64_t *)buf)[i] = (uint64_t)(int64_t)v; break;
    case DFCCL_FLOAT16:  ((uint16_t *)buf)[i] = dfccl_float_to_half((float)v); break;
    case DFCCL_BFLOAT16: ((uint16_t *)buf)[i] = dfccl_float_to_bf16((float)v); break;
    case DFCCL_FLOAT32:  ((float *)buf)[i] = (float)v; break;
    default:             ((double *)buf)[i] = v; break;
    }
}

/* Reference reduction of element i over n ranks, wrapped to the type. */
static void reference(int t, int op, int n, uint64_t i, void *out, uint64_t oi)
{
    if (is_float(t)) {
        double acc = input(op, 0, i);
        for (int r = 1; r < n; r++) {
            double v = input(op, r, i);
            acc = op == DFCCL_PROD ? acc * v : op == DFCCL_MIN ? fmin(acc, v) :
                  op == DFCCL_MAX ? fmax(acc, v) : acc + v;
        }
        if (op == DFCCL_AVG) {
            acc /= n;
        }
        store(t, out, oi, acc);
        return;
    }
    /* integers: combine in the element type itself, wrapping */
    {
        char a[8], b[8];
        store(t, a, 0, input(op, 0, i));
        for (int r = 1; r < n; r++) {
            store(t, b, 0, input(op, r, i));
            dfccl_reduce_copy(t, op, a, b, a, NULL, 1, 0);
        }
        memcpy((char *)out + oi * esize(t), a, esize(t));
    }
}

static double as_double(int t, const void *buf, uint64_t i)
{
    switch (t) {
    case DFCCL_FLOAT16:  return dfccl_half_to_float(((const uint16_t *)buf)[i]);
    case DFCCL_BFLOAT16: return dfccl_bf16_to_float(((const uint16_t *)buf)[i]);
    case DFCCL_FLOAT32:  return ((const float *)buf)[i];
    default:             return ((const double *)buf)[i];
    }
}

static int same(int t, const void *got, const void *exp, uint64_t i)
{
    double g, e, tol;

    if (!is_float(t)) {
        return memcmp((const char *)got + i * esize(t), (const char *)exp + i * esize(t),
                      esize(t)) == 0;
    }
    g   = as_double(t, got, i);
    e   = as_double(t, exp, i);
    tol = t == DFCCL_FLOAT64 ? 1e-12 : t == DFCCL_FLOAT32 ? 1e-5 : 1e-2;
    return fabs(g - e) <= tol * fabs(e) + tol;
}

typedef struct {
    int kind;
    int size_class;      /* -1: all */
    const char *oneshot; /* DFCCL_ONESHOT_BYTES and DFCCL_ONESHOT_GATHER_BYTES, or
                          * NULL for the backend's defaults */
    const char *chbytes; /* DFCCL_ONESHOT_CHANNEL_BYTES, or NULL: default */
    const char *twoshot; /* DFCCL_TWOSHOT_BYTES, or NULL: default */
    const char *tsbytes; /* DFCCL_TWOSHOT_CHANNEL_BYTES, or NULL: default */
    const char *blocks;  /* DFCCL_MAX_BLOCKS and DFCCL_CHANNELS, or NULL: default */
    int want[3];         /* cases that must run on the ring, one and two shot:
                          * at least this many (0: any number), or -1: none */
    const char *team;    /* DFCCL_TEAM_THREADS, or NULL: default */
} matrix_arg_t;

/* What dfcclGetCollInfo must name as each case's algorithm, where a
 * program that includes this file sets it (NULL: anything). */
static const char *run_case_algo;

/* Runs one case (an alltoall out of place only); *algo_p: 0 ring, 1 one
 * shot, 2 two shot (from the stats of the registered collective). */
static int run_case(dfccl_rank_ctx_t ctx, dfccl_group_t g, int rank, int n, int kind, int t,
                    int op, uint64_t count, int inplace, int *algo_p)
{
    dfccl_stats_t stats;
    const int root = (int)(count % (uint64_t)n);
    uint64_t sendn = count, recvn = count, i;
    size_t es = esize(t);
    char *hs, *hr, *he, *ds, *dr;
    dfccl_status_t st;
    int id, bad = 0;

    if (kind == DFCCL_COLL_ALLGATHER) {
        recvn = count * (uint64_t)n;
    } else if (kind == DFCCL_COLL_REDUCESCATTER) {
        sendn = count * (uint64_t)n;
    } else if (kind == DFCCL_COLL_ALLTOALL) {
        sendn = recvn = count * (uint64_t)n; /* out of place only */
    }
    switch (kind) {
    case DFCCL_COLL_ALLREDUCE:     st = dfcclRegisterAllReduce(count, t, op, g, 0, &id); break;
    case DFCCL_COLL_ALLGATHER:     st = dfcclRegisterAllGather(count, t, g, 0, &id); break;
    case DFCCL_COLL_REDUCESCATTER: st = dfcclRegisterReduceScatter(count, t, op, g, 0, &id); break;
    case DFCCL_COLL_REDUCE:        st = dfcclRegisterReduce(count, t, op, root, g, 0, &id); break;
    case DFCCL_COLL_ALLTOALL:      st = dfcclRegisterAllToAll(count, t, g, 0, &id); break;
    default:                       st = dfcclRegisterBroadcast(count, t, root, g, 0, &id); break;
    }
    DFCCL_TEST_CHECK(st == DFCCL_OK, "register %s: %s", dfccl_coll_name_for_test(kind),
                     dfcclGetErrorString(st));
    DFCCL_TEST_CHECK(dfcclGetStats(ctx, &stats) == DFCCL_OK, "stats");
    DFCCL_TEST_CHECK(stats.registered == 1 && stats.oneshot + stats.twoshot <= 1,
                     "one collective registered, on one algorithm (%d registered, "
                     "%d one shot, %d two shot)", stats.registered,
                     stats.oneshot, stats.twoshot);
    *algo_p = stats.oneshot ? 1 : stats.twoshot ? 2 : 0;
    if (run_case_algo != NULL) {
        dfccl_coll_info_t info;
        DFCCL_TEST_CHECK(dfcclGetCollInfo(id, ctx, &info) == DFCCL_OK &&
                             strcmp(info.algo, run_case_algo) == 0,
                         "%s of %llu type %d op %d ran on %s, not %s",
                         dfccl_coll_name_for_test(kind), (unsigned long long)count, t, op,
                         info.algo, run_case_algo);
    }

    hs = calloc(sendn + 1, es);
    hr = calloc(recvn + 1, es);
    he = calloc(recvn + 1, es);
    for (i = 0; i < sendn; i++) {
        uint64_t gi = kind == DFCCL_COLL_ALLGATHER ? (uint64_t)rank * count + i : i;
        store(t, hs, i, kind == DFCCL_COLL_BROADCAST || kind == DFCCL_COLL_ALLTOALL
                            ? input(DFCCL_SUM, rank, i)
                            : input(op, rank, gi));
    }
    /* expected */
    for (i = 0; i < recvn; i++) {
        switch (kind) {
        case DFCCL_COLL_ALLREDUCE:
            reference(t, op, n, i, he, i);
            break;
        case DFCCL_COLL_REDUCE:
            if (rank == root) {
                reference(t, op, n, i, he, i);
            }
            break;
        case DFCCL_COLL_REDUCESCATTER:
            reference(t, op, n, (uint64_t)rank * count + i, he, i);
            break;
        case DFCCL_COLL_ALLGATHER:
            store(t, he, i, input(op, (int)(i / (count ? count : 1)), i));
            break;
        case DFCCL_COLL_ALLTOALL: /* block q came from rank q's block for us */
            store(t, he, i, input(DFCCL_SUM, (int)(i / (count ? count : 1)),
                                  (uint64_t)rank * count + i % (count ? count : 1)));
            break;
        default:
            store(t, he, i, input(DFCCL_SUM, root, i));
        }
    }

    dr = dfccl_test_malloc(ctx, (recvn > sendn ? recvn : sendn) * es + es);
    if (inplace) {
        /* in place: the input sits where the output goes */
        if (kind == DFCCL_COLL_ALLGATHER) {
            ds = dr + (size_t)rank * count * es;
        } else {
            ds = dr;
        }
        dfccl_test_put(ctx, ds, hs, sendn * es);
    } else {
        ds = dfccl_test_malloc(ctx, sendn * es + es);
        dfccl_test_put(ctx, ds, hs, sendn * es);
    }
    switch (kind) {
    case DFCCL_COLL_ALLREDUCE:     st = dfcclRunAllReduce(ds, dr, id, NULL, NULL, ctx); break;
    case DFCCL_COLL_ALLGATHER:     st = dfcclRunAllGather(ds, dr, id, NULL, NULL, ctx); break;
    case DFCCL_COLL_REDUCESCATTER: st = dfcclRunReduceScatter(ds, dr, id, NULL, NULL, ctx); break;
    case DFCCL_COLL_REDUCE:        st = dfcclRunReduce(ds, dr, id, NULL, NULL, ctx); break;
    case DFCCL_COLL_ALLTOALL:      st = dfcclRunAllToAll(ds, dr, id, NULL, NULL, ctx); break;
    default:                       st = dfcclRunBroadcast(ds, dr, id, NULL, NULL, ctx); break;
    }
    DFCCL_TEST_CHECK(st == DFCCL_OK, "run: %s", dfcclGetErrorString(st));
    st = dfcclWait(id, dfccl_test_wait_ms(60000), ctx);
    DFCCL_TEST_CHECK(st == DFCCL_OK, "wait: %s", dfcclGetErrorString(st));
    dfccl_test_get(ctx, hr, dr, recvn * es);
    if (kind != DFCCL_COLL_REDUCE || rank == root) {
        for (i = 0; i < recvn && bad < 3; i++) {
            if (!same(t, hr, he, i)) {
                fprintf(stderr, "rank %d/%d %s type %d op %d count %llu %s: [%llu] wrong\n",
                        rank, n, dfccl_coll_name_for_test(kind), t, op,
                        (unsigned long long)count, inplace ? "in place" : "out of place",
                        (unsigned long long)i);
                bad++;
            }
        }
    }
    if (!inplace) {
        dfccl_test_free(ctx, ds);
    }
    dfccl_test_free(ctx, dr);
    free(hs);
    free(hr);
    free(he);
    DFCCL_TEST_CHECK(dfcclDeregister(id, ctx) == DFCCL_OK, "deregister");
    return bad;
}

static int matrix_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    const matrix_arg_t *a = varg;
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    int kind = a->kind, failures = 0, cases = 0, on[3] = {0, 0, 0};
    static const char *const algo_names[3] = {"ring", "one shot", "two shot"};

    dfccl_test_setenv("DFCCL_TWOSHOT_BYTES", a->twoshot);
    dfccl_test_setenv("DFCCL_TWOSHOT_CHANNEL_BYTES", a->tsbytes);
    dfccl_test_setenv("DFCCL_MAX_BLOCKS", a->blocks);
    dfccl_test_setenv("DFCCL_CHANNELS", a->blocks);
    dfccl_test_setenv("DFCCL_ONESHOT_BYTES", a->oneshot);
    dfccl_test_setenv("DFCCL_ONESHOT_GATHER_BYTES", a->oneshot);
    dfccl_test_setenv("DFCCL_ONESHOT_CHANNEL_BYTES", a->chbytes);
    dfccl_test_setenv("DFCCL_TEAM_THREADS", a->team);
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    for (int ti = 0; ti < NDTYPES; ti++) {
        int t = dtypes[ti];
        int has_op = kind == DFCCL_COLL_ALLREDUCE || kind == DFCCL_COLL_REDUCESCATTER ||
                     kind == DFCCL_COLL_REDUCE;
        for (int op = 0; op < (has_op ? DFCCL_OP_COUNT : 1); op++) {
            if (op == DFCCL_AVG && !is_float(t)) {
                continue;
            }
            for (int sc = 0; sc < 4; sc++) {
                /* 0, 1, odd (not divisible by ranks or chunks), >= 1 MiB */
                uint64_t big    = ((1u << 20) + esize(t) - 1) / esize(t) + 3;
                uint64_t counts[4] = {0, 1, 12347, big};
                if (kind == DFCCL_COLL_ALLGATHER || kind == DFCCL_COLL_REDUCESCATTER) {
                    counts[3] = big / (uint64_t)n + 1;
                }
                if (a->size_class >= 0 && sc != a->size_class) {
                    continue;
                }
                /* the big size only for a few op/type pairs, to bound time */
                if (sc == 3 && op != DFCCL_SUM && op != DFCCL_AVG && t != DFCCL_INT8) {
                    continue;
                }
                for (int inplace = 0; inplace < 2; inplace++) {
                    int algo = 0;
                    failures += run_case(ctx, g, rank, n, kind, t, op, counts[sc], inplace,
                                         &algo);
                    on[algo]++;
                    cases++;
                }
            }
        }
    }
    DFCCL_TEST_CHECK(dfcclGroupDestroy(g) == DFCCL_OK, "group destroy");
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    for (int k = 0; k < 3; k++) {
        if ((a->want[k] < 0 && on[k] != 0) || (a->want[k] > 0 && on[k] < a->want[k])) {
            fprintf(stderr, "rank %d: %d cases ran on %s, expected %s%d\n", rank, on[k],
                    algo_names[k], a->want[k] < 0 ? "" : "at least ",
                    a->want[k] < 0 ? 0 : a->want[k]);
            failures++;
        }
    }
    if (rank == 0) {
        printf("%s on %d ranks%s%s%s%s%s%s%s%s%s%s: %d cases (ring %d, one shot %d, two shot "
               "%d), %d failures\n",
               dfccl_coll_name_for_test(kind), n,
               a->oneshot == NULL             ? ""
               : kind == DFCCL_COLL_ALLREDUCE ? ", DFCCL_ONESHOT_BYTES="
                                              : ", DFCCL_ONESHOT_GATHER_BYTES=",
               a->oneshot != NULL ? a->oneshot : "",
               a->chbytes != NULL ? ", DFCCL_ONESHOT_CHANNEL_BYTES=" : "",
               a->chbytes != NULL ? a->chbytes : "",
               a->twoshot != NULL ? ", DFCCL_TWOSHOT_BYTES=" : "",
               a->twoshot != NULL ? a->twoshot : "",
               a->tsbytes != NULL ? ", DFCCL_TWOSHOT_CHANNEL_BYTES=" : "",
               a->tsbytes != NULL ? a->tsbytes : "",
               a->team != NULL ? ", DFCCL_TEAM_THREADS=" : "", a->team != NULL ? a->team : "",
               cases, on[0], on[1], on[2], failures);
    }
    return failures;
}

/* Runs fn on each of the rank counts `def` (ended by 0), `quick` (in quick
 * mode, where not NULL) or DFCCL_TEST_RANKS (unit_rank_counts, from 2 to
 * `most`): the test fails at the first count that fails. A test that
 * checks which algorithm ran takes up to COLL_SHOTS ranks, the largest
 * group one and two shot run on. */
#define COLL_ANY   DFCCL_TEST_MAX_RANKS
#define COLL_SHOTS DFCCL_ONESHOT_MAX_RANKS
static void coll_run_ranks(const int *def, const int *quick, int most, double timeout_s,
                           dfccl_test_rank_fn_t fn, void *arg)
{
    int ns[UNIT_RANK_COUNTS_MAX];
    int k = unit_rank_counts(def, quick, 2, most, ns);

    for (int i = 0; i < k; i++) {
        ck_assert_msg(dfccl_test_mp_run(ns[i], timeout_s, fn, arg) == 0, "failed on %d ranks",
                      ns[i]);
    }
}

static void run_matrix(int kind)
{
    matrix_arg_t a = {kind, -1, NULL, NULL, NULL, NULL, NULL, {0, 0, 0}, NULL};

    /* quick mode (DFCCL_TEST_QUICK, used by make distcheck): 3 ranks only */
    coll_run_ranks((const int[]){2, 3, 4, 0}, (const int[]){3, 0}, COLL_ANY, 300, matrix_body,
                   &a);
}

START_TEST(test_allreduce) { run_matrix(DFCCL_COLL_ALLREDUCE); }
END_TEST

/*
 * DFCCL_ALGO forces an algorithm where it can run the collective, and the
 * default takes the rest: for each setting, a list of collectives and the
 * algorithm each must take (dfcclGetCollInfo says which), every result
 * checked. On the host backend one shot takes allreduces up to 16 KiB and
 * two shot none by default.
 */
typedef struct {
    int         kind;
    uint64_t    count; /* floats */
    const char *algo;  /* what dfcclGetCollInfo must say */
} forced_case_t;

typedef struct {
    const char          *algo; /* DFCCL_ALGO */
    const forced_case_t *cases;
    int                  ncases;
} forced_arg_t;

/* Run registered collective `id` of `fc` on float inputs and check it:
 * allreduce: the sum of 1 + rank + i over ranks; allgather: rank r's block
 * is r + i; broadcast: the root's i. 1 on a wrong element. */
static int forced_run(dfccl_rank_ctx_t ctx, int id, const forced_case_t *fc, int rank, int n)
{
    const size_t cnt = (size_t)fc->count, out = fc->kind == DFCCL_COLL_ALLGATHER ? cnt * n : cnt;
    const int root   = (int)(fc->count % (uint64_t)n);
    float *hs = malloc(cnt * sizeof(float)), *hr = malloc(out * sizeof(float));
    void *ds = dfccl_test_malloc(ctx, cnt * sizeof(float));
    void *dr = dfccl_test_malloc(ctx, out * sizeof(float));
    int bad = 0;

    for (size_t i = 0; i < cnt; i++) {
        hs[i] = (float)(1 + rank + (int)(i % 1000));
    }
    dfccl_test_put(ctx, ds, hs, cnt * sizeof(float));
    if (fc->kind == DFCCL_COLL_BROADCAST) {
        dfccl_test_put(ctx, dr, hs, cnt * sizeof(float));
    }
    DFCCL_TEST_CHECK(dfcclRun(fc->kind == DFCCL_COLL_BROADCAST ? dr : ds, dr, id, NULL, NULL,
                              ctx) == DFCCL_OK, "run: %s", dfcclGetLastErrorMessage());
    DFCCL_TEST_CHECK(dfcclWait(id, dfccl_test_wait_ms(60000), ctx) == DFCCL_OK, "wait: %s",
                     dfcclGetLastErrorMessage());
    dfccl_test_get(ctx, hr, dr, out * sizeof(float));
    for (size_t i = 0; i < out && !bad; i++) {
        float want;
        if (fc->kind == DFCCL_COLL_ALLREDUCE) {
            want = (float)(n * (1 + (int)(i % 1000)) + n * (n - 1) / 2);
        } else if (fc->kind == DFCCL_COLL_ALLGATHER) {
            want = (float)(1 + (int)(i / cnt) + (int)((i % cnt) % 1000));
        } else {
            want = (float)(1 + root + (int)(i % 1000));
        }
        if (hr[i] != want) {
            fprintf(stderr, "rank %d: %s of %zu floats: element %zu is %g, expected %g\n", rank,
                    dfccl_coll_name_for_test(fc->kind), cnt, i, (double)hr[i], (double)want);
            bad = 1;
        }
    }
    dfccl_test_free(ctx, ds);
    dfccl_test_free(ctx, dr);
    free(hs);
    free(hr);
    return bad;
}

static int forced_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    const forced_arg_t *a = varg;
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    int failures = 0;

    dfccl_test_setenv("DFCCL_ALGO", a->algo);
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    for (int i = 0; i < a->ncases; i++) {
        const forced_case_t *fc = &a->cases[i];
        dfccl_coll_desc_t d = {(dfccl_coll_kind_t)fc->kind, (size_t)fc->count, DFCCL_FLOAT32,
                               DFCCL_SUM, (int)(fc->count % (uint64_t)n), 0, DFCCL_ALGO_AUTO, 0, 0};
        dfccl_coll_info_t info;
        int id;

        DFCCL_TEST_CHECK(dfcclRegister(&d, g, &id) == DFCCL_OK, "register: %s",
                         dfcclGetLastErrorMessage());
        DFCCL_TEST_CHECK(dfcclGetCollInfo(id, ctx, &info) == DFCCL_OK, "info: %s",
                         dfcclGetLastErrorMessage());
        if (strcmp(info.algo, fc->algo) != 0) {
            fprintf(stderr, "rank %d: DFCCL_ALGO=%s: %s of %llu floats took %s, expected %s\n",
                    rank, a->algo, dfccl_coll_name_for_test(fc->kind),
                    (unsigned long long)fc->count, info.algo, fc->algo);
            failures++;
        }
        failures += forced_run(ctx, id, fc, rank, n);
        DFCCL_TEST_CHECK(dfcclDeregister(id, ctx) == DFCCL_OK, "deregister");
    }
    DFCCL_TEST_CHECK(dfcclGroupDestroy(g) == DFCCL_OK, "group destroy");
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    if (rank == 0) {
        printf("DFCCL_ALGO=%s on %d ranks: %d collectives, %d failures\n", a->algo, n,
               a->ncases, failures);
    }
    return failures;
}

START_TEST(test_algo_forced)
{
    const int ar = DFCCL_COLL_ALLREDUCE, ag = DFCCL_COLL_ALLGATHER;
    const int bc = DFCCL_COLL_BROADCAST;
    static const forced_case_t ring[] = {{ar, 16, "ring"}, {ag, 16, "ring"}, {bc, 16, "ring"}};
    /* 32 KiB allreduce: one shot only because it is forced; 1 MiB: no
     * channel fits an LL slot, so the default (the ring) runs it */
    static const forced_case_t one[] = {
        {ar, 8192, "oneshot"}, {ag, 2048, "oneshot"}, {ar, 1048576, "ring"}, {bc, 100, "ring"}};
    /* two shot takes allreduces only: an allgather falls back to the default */
    static const forced_case_t two[] = {
        {ar, 16384, "twoshot"}, {ar, 10, "twoshot"}, {ag, 10, "oneshot"}};
    forced_arg_t args[] = {{"ring", ring, 3}, {"oneshot", one, 4}, {"twoshot", two, 3}};

    for (int i = 0; i < 3; i++) {
        coll_run_ranks((const int[]){2, 3, 0}, NULL, COLL_SHOTS, 300, forced_body, &args[i]);
    }
}
END_TEST

/* Allreduce on every algorithm whatever the backend's default, each run
 * checking which algorithm its cases took: the ring for every size; one
 * shot for every size up to 64 KiB (count 1, and 12347 elements of up to 4
 * bytes), on 3 ranks; one shot on several channels of at least 8 KiB each
 * (12347 elements of 1 to 8 bytes: 2 to 13 channels, as many as the backend
 * has, each at most 64 KiB), on 3 and 4 ranks; two shot for every size on
 * channels of at least 4 KiB, on 2, 3 and 4 ranks (on 4 with 6 channels,
 * so that the 1 MiB cases fit too); and one shot up to 64 KiB with two
 * shot above it, on 3 ranks; and one shot on channels of at least 2 KiB
 * run by teams of 32 threads per block (DFCCL_TEAM_THREADS: a channel of
 * 12347 elements of 1 to 4 bytes holds 222 to 392 LL lines, so 224 to 416
 * of the CUDA backend's 512 threads run it; count 1 runs on one warp), on
 * 2 and 3 ranks. */
START_TEST(test_allreduce_algos)
{
    const int k = DFCCL_COLL_ALLREDUCE;
    matrix_arg_t ring = {k, -1, "0", NULL, "0", NULL, NULL, {1, -1, -1}, NULL};
    matrix_arg_t one  = {k, -1, "65536", NULL, "0", NULL, NULL, {0, 1, -1}, NULL};
    matrix_arg_t wide = {k, -1, "2097152", "8192", "0", NULL, NULL, {0, 1, -1}, NULL};
    matrix_arg_t two  = {k, -1, "0", NULL, "16777216", "4096", NULL, {0, -1, 1}, NULL};
    matrix_arg_t two6 = {k, -1, "0", NULL, "16777216", "4096", "6", {0, -1, 1}, NULL};
    matrix_arg_t both = {k, -1, "65536", NULL, "16777216", NULL, NULL, {0, 1, 1}, NULL};
    matrix_arg_t team = {k, -1, "2097152", "2048", "0", NULL, NULL, {0, 1, -1}, "32"};

    coll_run_ranks((const int[]){3, 0}, NULL, COLL_SHOTS, 300, matrix_body, &ring);
    coll_run_ranks((const int[]){3, 0}, NULL, COLL_SHOTS, 300, matrix_body, &one);
    coll_run_ranks((const int[]){3, 4, 0}, NULL, COLL_SHOTS, 300, matrix_body, &wide);
    coll_run_ranks((const int[]){2, 3, 0}, NULL, COLL_SHOTS, 300, matrix_body, &two);
    coll_run_ranks((const int[]){4, 0}, NULL, COLL_SHOTS, 300, matrix_body, &two6);
    coll_run_ranks((const int[]){3, 0}, NULL, COLL_SHOTS, 300, matrix_body, &both);
    coll_run_ranks((const int[]){2, 3, 0}, NULL, COLL_SHOTS, 300, matrix_body, &team);
}
END_TEST
typedef struct {
    int kind;
    uint64_t bytes; /* allgather, reduce-scatter: of all ranks (ring) or per rank (one shot) */
    int want_pair;  /* channels on 2 ranks on two devices */
    int want_other; /* on more ranks, or on one device */
} pair_case_t;

typedef struct {
    const pair_case_t *cases;
    size_t ncases;
    const char *const *env; /* name, value, ..., NULL */
    int algo;               /* what every case must run on: 0 ring, 1 one shot */
} pair_spec_t;

/* Allreduces from DFCCL_PAIR_BYTES up take DFCCL_MAX_BLOCKS channels on
 * two ranks only (on two GPUs with the CUDA backend), reduce-scatters and
 * allgathers up to DFCCL_PAIR_RING_BYTES one channel there, other
 * collectives and smaller allreduces DFCCL_CHANNELS (here a channel per 64
 * KiB, at most 2). */
static const pair_case_t pair_ring_cases[] = {
    {DFCCL_COLL_ALLGATHER, 128u << 10, 1, 2},
    {DFCCL_COLL_REDUCESCATTER, 256u << 10, 1, 2},
    {DFCCL_COLL_ALLREDUCE, 256u << 10, 2, 2},
    {DFCCL_COLL_ALLGATHER, 4u << 20, 2, 2},
    {DFCCL_COLL_REDUCESCATTER, 4u << 20, 2, 2},
    {DFCCL_COLL_ALLREDUCE, 4u << 20, 4, 2},
};
static const char *const pair_ring_env[] = {
    "DFCCL_MAX_BLOCKS", "4", "DFCCL_CHANNELS", "2", "DFCCL_CHANNEL_BYTES", "65536",
    "DFCCL_WIDE_BYTES", "0", "DFCCL_PAIR_BYTES", "1048576",
    "DFCCL_PAIR_RING_BYTES", "263168", /* 257 KiB: the counts add 12 B */
    "DFCCL_ONESHOT_BYTES", "0", "DFCCL_ONESHOT_GATHER_BYTES", "0", "DFCCL_TWOSHOT_BYTES", "0",
    NULL};

/* One-shot collectives up to DFCCL_PAIR_ONESHOT_BYTES (here 16 KiB) take
 * one channel on two ranks only, larger ones and those on more ranks a
 * channel per DFCCL_ONESHOT_CHANNEL_BYTES (here 8 KiB, at most 4). */
static const pair_case_t pair_shot_cases[] = {
    {DFCCL_COLL_ALLREDUCE, 16u << 10, 1, 2},
    {DFCCL_COLL_ALLGATHER, 16u << 10, 1, 2},
    {DFCCL_COLL_REDUCESCATTER, 16u << 10, 1, 2},
    {DFCCL_COLL_REDUCESCATTER, 32u << 10, 4, 4},
};
static const char *const pair_shot_env[] = {
    "DFCCL_MAX_BLOCKS", "4", "DFCCL_CHANNELS", "4", "DFCCL_ONESHOT_BYTES", "65536",
    "DFCCL_ONESHOT_GATHER_BYTES", "65536", "DFCCL_ONESHOT_CHANNEL_BYTES", "8192",
    "DFCCL_PAIR_ONESHOT_BYTES", "16384", NULL};

/* The cases of a pair_spec_t in turn, each result checked as in the
 * matrix, and its algorithm and channels. The channels are read from the
 * daemon's grid after the run: it grows to the most channels of a
 * registered collective, but a daemon that keeps running keeps its grid,
 * so the cases go from the fewest channels to the most, and the grid after
 * each is its channels. */
static int pair_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    const pair_spec_t *spec = varg;
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    dfccl_stats_t stats;
    int failures = 0, two;

    for (const char *const *e = spec->env; *e != NULL; e += 2) {
        setenv(e[0], e[1], 1);
    }
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    two = n == 2 && dfccl_test_two_devices(); /* after the setup chose the GPU */
    for (size_t i = 0; i < spec->ncases; i++) {
        const pair_case_t *pc = &spec->cases[i];
        uint64_t count = pc->bytes / esize(DFCCL_FLOAT32);
        int algo = 0, want = two ? pc->want_pair : pc->want_other;

        if (spec->algo == 0) {
            count += 3;
            if (pc->kind != DFCCL_COLL_ALLREDUCE) {
                count /= (uint64_t)n;
            }
        }
        failures += run_case(ctx, g, rank, n, pc->kind, DFCCL_FLOAT32, DFCCL_SUM, count, 0,
                             &algo);
        DFCCL_TEST_CHECK(dfcclGetStats(ctx, &stats) == DFCCL_OK, "stats");
        if (algo != spec->algo || stats.blocks != want) {
            fprintf(stderr, "rank %d of %d: %s of %llu bytes ran on algorithm %d with %d "
                    "channel(s), expected %d with %d\n", rank, n,
                    dfccl_coll_name_for_test(pc->kind), (unsigned long long)pc->bytes, algo,
                    stats.blocks, spec->algo, want);
            failures++;
        }
    }
    DFCCL_TEST_CHECK(dfcclGroupDestroy(g) == DFCCL_OK, "group destroy");
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    return failures;
}

START_TEST(test_pair_channels)
{
    const pair_spec_t ring = {pair_ring_cases, sizeof(pair_ring_cases) / sizeof(pair_case_t),
                              pair_ring_env, 0};
    const pair_spec_t shot = {pair_shot_cases, sizeof(pair_shot_cases) / sizeof(pair_case_t),
                              pair_shot_env, 1};

    coll_run_ranks((const int[]){2, 3, 0}, NULL, COLL_SHOTS, 120, pair_body, (void *)&ring);
    coll_run_ranks((const int[]){2, 3, 0}, NULL, COLL_SHOTS, 120, pair_body, (void *)&shot);
}
END_TEST

START_TEST(test_allgather) { run_matrix(DFCCL_COLL_ALLGATHER); }
END_TEST
START_TEST(test_reducescatter) { run_matrix(DFCCL_COLL_REDUCESCATTER); }
END_TEST

/* Allgather and reduce-scatter on the ring and in one shot whatever the
 * backend's default, each run checking which algorithm its cases took: the
 * ring for every size, on 3 ranks; one shot for per-rank shares up to 64
 * KiB (count 1, and 12347 elements of up to 4 bytes), on 2 and 3 ranks;
 * one shot on several channels of at least 8 KiB each (every share up to
 * 2 MiB that fits the backend's channels at 64 KiB each), on 4 ranks; and
 * one shot on channels of at least 2 KiB run by teams of 32 threads per
 * block, on 2 ranks. Never two shot. */
static void run_shot_kinds(int kind)
{
    matrix_arg_t ring = {kind, -1, "0", NULL, NULL, NULL, NULL, {1, -1, -1}, NULL};
    matrix_arg_t one  = {kind, -1, "65536", NULL, NULL, NULL, NULL, {0, 1, -1}, NULL};
    matrix_arg_t wide = {kind, -1, "2097152", "8192", NULL, NULL, NULL, {0, 1, -1}, NULL};
    matrix_arg_t team = {kind, -1, "2097152", "2048", NULL, NULL, NULL, {0, 1, -1}, "32"};

    coll_run_ranks((const int[]){3, 0}, NULL, COLL_SHOTS, 300, matrix_body, &ring);
    coll_run_ranks((const int[]){2, 3, 0}, NULL, COLL_SHOTS, 300, matrix_body, &one);
    coll_run_ranks((const int[]){4, 0}, NULL, COLL_SHOTS, 300, matrix_body, &wide);
    coll_run_ranks((const int[]){2, 0}, NULL, COLL_SHOTS, 300, matrix_body, &team);
}

START_TEST(test_allgather_algos) { run_shot_kinds(DFCCL_COLL_ALLGATHER); }
END_TEST
START_TEST(test_reducescatter_algos) { run_shot_kinds(DFCCL_COLL_REDUCESCATTER); }
END_TEST
START_TEST(test_reduce) { run_matrix(DFCCL_COLL_REDUCE); }
END_TEST
START_TEST(test_broadcast) { run_matrix(DFCCL_COLL_BROADCAST); }
END_TEST

/*
 * A collective registered and deregistered without a run, then another
 * registered and run, many times, the ranks at their own pace: a rank that
 * still resolves its peers' connectors of the first finds them freed or
 * reused by the second, which is no mismatch. Every algorithm that writes
 * to its peers' regions (the ring, one shot, the tree) and the mesh.
 */
static int reregister_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    static const struct {
        int         kind;
        size_t      count;
        const char *algo;
    } cases[] = {{DFCCL_COLL_ALLREDUCE, 100000, "ring"}, {DFCCL_COLL_ALLREDUCE, 100, "oneshot"},
                 {DFCCL_COLL_ALLREDUCE, 5000, "tree"}, {DFCCL_COLL_ALLTOALL, 3000, "mesh"}};
    int failures = 0;

    (void)varg;
    for (int k = 0; k < (int)(sizeof(cases) / sizeof(cases[0])); k++) {
        dfccl_rank_ctx_t ctx;
        dfccl_group_t g;

        setenv("DFCCL_ALGO", cases[k].algo, 1);
        dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
        run_case_algo = cases[k].algo;
        for (int it = 0; it < 8; it++) {
            int id, got = 0;
            DFCCL_TEST_CHECK((cases[k].kind == DFCCL_COLL_ALLTOALL
                                  ? dfcclRegisterAllToAll(cases[k].count, DFCCL_FLOAT32, g, 0,
                                                          &id)
                                  : dfcclRegisterAllReduce(cases[k].count, DFCCL_FLOAT32,
                                                           DFCCL_SUM, g, 0, &id)) == DFCCL_OK,
                             "register: %s", dfcclGetLastErrorMessage());
            /* the ranks leave the first at different times */
            usleep(((unsigned)(rank * 7 + it * 3) % 5) * 400u);
            DFCCL_TEST_CHECK(dfcclDeregister(id, ctx) == DFCCL_OK, "deregister: %s",
                             dfcclGetLastErrorMessage());
            failures += run_case(ctx, g, rank, n, cases[k].kind, DFCCL_FLOAT32, DFCCL_SUM,
                                 cases[k].count, 0, &got);
        }
        run_case_algo = NULL;
        DFCCL_TEST_CHECK(dfcclGroupDestroy(g) == DFCCL_OK, "group destroy");
        DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    }
    unsetenv("DFCCL_ALGO");
    return failures;
}

START_TEST(test_reregister)
{
    coll_run_ranks((const int[]){3, 4, 0}, NULL, COLL_SHOTS, 300, reregister_body, NULL);
}
END_TEST

/* A single rank group: every collective is a local copy. */
START_TEST(test_single_rank)
{
    for (int kind = 0; kind < DFCCL_COLL_ALLTOALL; kind++) {
        matrix_arg_t a = {kind, 2, NULL, NULL, NULL, NULL, NULL, {0, 0, 0}, NULL};
        ck_assert_int_eq(dfccl_test_mp_run(1, 120, matrix_body, &a), 0);
    }
}
END_TEST

int main(void)
{
    Suite *s  = suite_create("collectives");
    TCase *tc = dfccl_test_case(s, "matrix", 1000);

    tcase_add_test(tc, test_allreduce);
    tcase_add_test(tc, test_allreduce_algos);
    tcase_add_test(tc, test_algo_forced);
    tcase_add_test(tc, test_pair_channels);
    tcase_add_test(tc, test_allgather);
    tcase_add_test(tc, test_reducescatter);
    tcase_add_test(tc, test_allgather_algos);
    tcase_add_test(tc, test_reducescatter_algos);
    tcase_add_test(tc, test_reduce);
    tcase_add_test(tc, test_broadcast);
    tcase_add_test(tc, test_single_rank);
    tcase_add_test(dfccl_test_case(s, "reregister", 600), test_reregister);
    return dfccl_test_run(s, CK_NORMAL);
}
