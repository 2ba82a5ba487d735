/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Bad input through the public API: each case gets a clear error status
 * and message, nothing is corrupted (a correct collective still runs right
 * afterwards) and nothing crashes.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mp.h"
#include "suite.h"
#include "unit_util.h"

static int run_and_check(dfccl_rank_ctx_t ctx, int id, int n)
{
    int32_t h[64], *d = dfccl_test_malloc(ctx, sizeof(h));

    for (int i = 0; i < 64; i++) {
        h[i] = i;
    }
    dfccl_test_put(ctx, d, h, sizeof(h));
    DFCCL_TEST_CHECK(dfcclRunAllReduce(d, d, id, NULL, NULL, ctx) == DFCCL_OK, "run");
    DFCCL_TEST_CHECK(dfcclWait(id, dfccl_test_wait_ms(30000), ctx) == DFCCL_OK, "wait");
    dfccl_test_get(ctx, h, d, sizeof(h));
    for (int i = 0; i < 64; i++) {
        DFCCL_TEST_CHECK(h[i] == i * n, "[%d] = %d after bad input", i, h[i]);
    }
    dfccl_test_free(ctx, d);
    return 0;
}

static int bad_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    int id, big, other;
    int32_t *d;

    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(64, DFCCL_INT32, DFCCL_SUM, g, 0, &id) == DFCCL_OK,
                     "register");
    d = dfccl_test_malloc(ctx, 64 * sizeof(int32_t));

    /* an unknown id */
    EXPECT(dfcclRunAllReduce(d, d, 12345, NULL, NULL, ctx), DFCCL_ERR_NOT_FOUND,
           "not registered");
    EXPECT(dfcclRunAllReduce(d, d, -1, NULL, NULL, ctx), DFCCL_ERR_NOT_FOUND, "not registered");
    EXPECT(dfcclQuery(777, ctx), DFCCL_ERR_NOT_FOUND, "not registered");
    EXPECT(dfcclDeregister(777, ctx), DFCCL_ERR_NOT_FOUND, "not registered");
    /* the wrong run call for the id */
    EXPECT(dfcclRunAllGather(d, d, id, NULL, NULL, ctx), DFCCL_ERR_INVALID_ARG,
           "dfcclRunAllReduce");
    /* a count that overflows */
    EXPECT(dfcclRegisterAllReduce(SIZE_MAX / 2, DFCCL_FLOAT64, DFCCL_SUM, g, 0, &other),
           DFCCL_ERR_INVALID_ARG, "overflows");
    EXPECT(dfcclRegisterAllGather(SIZE_MAX / 4, DFCCL_INT32, g, 0, &other),
           DFCCL_ERR_INVALID_ARG, "overflows");
    /* NULL buffers with a nonzero count */
    EXPECT(dfcclRunAllReduce(NULL, d, id, NULL, NULL, ctx), DFCCL_ERR_INVALID_ARG, "send buffer");
    EXPECT(dfcclRunAllReduce(d, NULL, id, NULL, NULL, ctx), DFCCL_ERR_INVALID_ARG,
           "receive buffer");
    /* unsupported type or op */
    EXPECT(dfcclRegisterAllReduce(64, (dfccl_datatype_t)99, DFCCL_SUM, g, 0, &other),
           DFCCL_ERR_UNSUPPORTED, "datatype 99");
    EXPECT(dfcclRegisterAllReduce(64, DFCCL_INT32, (dfccl_op_t)42, g, 0, &other),
           DFCCL_ERR_UNSUPPORTED, "op 42");
    EXPECT(dfcclRegisterAllReduce(64, DFCCL_INT32, DFCCL_AVG, g, 0, &other),
           DFCCL_ERR_UNSUPPORTED, "avg is supported only for floating types");
    EXPECT(dfcclRegisterReduce(64, DFCCL_INT32, DFCCL_SUM, n + 3, g, 0, &other),
           DFCCL_ERR_INVALID_ARG, "root");
    /* NULL handles */
    EXPECT(dfcclRegisterAllReduce(64, DFCCL_INT32, DFCCL_SUM, NULL, 0, &other),
           DFCCL_ERR_INVALID_ARG, "must not be NULL");
    EXPECT(dfcclRunAllReduce(d, d, id, NULL, NULL, NULL), DFCCL_ERR_INVALID_ARG, "ctx is NULL");
    EXPECT(dfcclGroupCreate(ctx, 2, 5, dfccl_test_oob_allgather, oob, "bad", &g),
           DFCCL_ERR_INVALID_ARG, "out of range");

    /* running an id that is still in flight: only rank 0 runs first, so the
     * collective cannot complete until the others join */
    dfccl_test_barrier(oob);
    if (rank == 0) {
        DFCCL_TEST_CHECK(dfcclRunAllReduce(d, d, id, NULL, NULL, ctx) == DFCCL_OK, "run");
        EXPECT(dfcclRunAllReduce(d, d, id, NULL, NULL, ctx), DFCCL_ERR_BUSY, "still in flight");
        EXPECT(dfcclDeregister(id, ctx), DFCCL_ERR_BUSY, "in flight");
        /* destroying with collectives outstanding */
        EXPECT(dfcclDestroy(ctx), DFCCL_ERR_BUSY, "still in flight");
        EXPECT(dfcclGroupDestroy(g), DFCCL_ERR_BUSY, "still registered");
        DFCCL_TEST_CHECK(dfcclQuery(id, ctx) == DFCCL_INPROGRESS, "query");
    }
    dfccl_test_barrier(oob);
    if (rank != 0) {
        DFCCL_TEST_CHECK(dfcclRunAllReduce(d, d, id, NULL, NULL, ctx) == DFCCL_OK, "run");
    }
    DFCCL_TEST_CHECK(dfcclWait(id, dfccl_test_wait_ms(30000), ctx) == DFCCL_OK, "wait");

    /* nothing corrupted: the collective still runs right */
    if (run_and_check(ctx, id, n)) {
        return 1;
    }
    /* a mismatch between ranks is reported, naming both sides */
    DFCCL_TEST_CHECK(dfcclRegisterAllReduce(rank == 0 ? 100 : 200, DFCCL_INT32, DFCCL_SUM, g, 0,
                                            &big) == DFCCL_OK, "register");
    if (rank == n - 1) {
        /* the last rank sends to rank 0, whose registration differs */
        dfccl_status_t st =
            unit_run_wait(dfcclRunAllReduce(d, d, big, NULL, NULL, ctx), big, 30000, ctx);
        DFCCL_TEST_CHECK(st == DFCCL_ERR_MISMATCH, "mismatch not detected: %s",
                         dfcclGetErrorString(st));
        DFCCL_TEST_CHECK(strstr(dfcclGetLastErrorMessage(), "same order") != NULL, "message: %s",
                         dfcclGetLastErrorMessage());
    }
    return unit_rank_end(ctx, d);
}

START_TEST(test_bad_input)
{
    ck_assert_int_eq(dfccl_test_mp_run(2, 60, bad_body, NULL), 0);
    ck_assert_int_eq(dfccl_test_mp_run(3, 60, bad_body, NULL), 0);
}
END_TEST

/* dfcclConfigInit refuses `var`=`value`, naming the variable; then `var`
 * is unset again. */
static void expect_bad_env(const char *var, const char *value)
{
    dfccl_config_t c;

    setenv(var, value, 1);
    ck_assert_int_eq(dfcclConfigInit(&c), DFCCL_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(dfcclGetLastErrorMessage(), var));
    unsetenv(var);
}

/* dfcclInit refuses `c`, with a message naming `needle` (field = value). */
static void expect_bad_field(const dfccl_config_t *c, const char *needle)
{
    dfccl_rank_ctx_t ctx;

    ck_assert_int_eq(dfcclInit(c, &ctx), DFCCL_ERR_INVALID_ARG);
    ck_assert_msg(strstr(dfcclGetLastErrorMessage(), needle) != NULL,
                  "message lacks \"%s\": %s", needle, dfcclGetLastErrorMessage());
}

/* In test_bad_config: `c` is `good` with `field` set to `value`, which
 * dfcclInit refuses with a message naming `needle`. */
#define EXPECT_BAD_FIELD(field, value, needle) \
    do {                                       \
        c       = good;                        \
        c.field = (value);                     \
        expect_bad_field(&c, (needle));        \
    } while (0)

START_TEST(test_bad_config)
{
    dfccl_config_t c, good;
    dfccl_rank_ctx_t ctx;

    expect_bad_env("DFCCL_SLOTS", "abc");
    expect_bad_env("DFCCL_BACKEND", "tpu");
    setenv("DFCCL_BACKEND", "host", 1);
    ck_assert_int_eq(dfcclConfigInit(&c), DFCCL_OK);
    expect_bad_env("DFCCL_STEP_SLICES", "17");
    expect_bad_env("DFCCL_LL_SLOTS", "65");
    expect_bad_env("DFCCL_LL_SLOTS", "1");
    expect_bad_env("DFCCL_LL_BYTES", "100");
    expect_bad_env("DFCCL_SQ_WINDOW", "17");
    expect_bad_env("DFCCL_ONESHOT_BYTES", "3000000");
    expect_bad_env("DFCCL_ONESHOT_CHANNEL_BYTES", "70000");
    expect_bad_env("DFCCL_ONESHOT_GATHER_BYTES", "3000000");
    expect_bad_env("DFCCL_PAIR_ONESHOT_BYTES", "70000");
    expect_bad_env("DFCCL_TWOSHOT_BYTES", "20000000");
    expect_bad_env("DFCCL_TWOSHOT_CHANNEL_BYTES", "600000");
    expect_bad_env("DFCCL_ARRIVALS", "sometimes");
    expect_bad_env("DFCCL_TEAM_THREADS", "1025");
    expect_bad_env("DFCCL_SLOT_BYTES", "-1");
    expect_bad_env("DFCCL_SPIN_HEAD", "4294967296");
    expect_bad_env("DFCCL_VERBOSE", "loud");
    expect_bad_env("DFCCL_VERBOSE", "3");
    expect_bad_env("DFCCL_WARN_S", "-5");
    expect_bad_env("DFCCL_SIGUSR1", "2");
    /* issue 55, item 6: a timeout is a number of seconds >= 0, fractions
     * allowed; -1, words and NaN are refused, not taken as "none" */
    expect_bad_env("DFCCL_TIMEOUT", "-1");
    expect_bad_env("DFCCL_TIMEOUT", "nan");
    expect_bad_env("DFCCL_TIMEOUT", "inf");
    expect_bad_env("DFCCL_TIMEOUT", "10s");
    setenv("DFCCL_TIMEOUT", "0.5", 1);
    ck_assert_int_eq(dfcclConfigInit(&c), DFCCL_OK);
    ck_assert(c.timeout_s == 0.5);
    unsetenv("DFCCL_TIMEOUT");
    setenv("DFCCL_WARN_S", "2.5", 1);
    ck_assert_int_eq(dfcclConfigInit(&c), DFCCL_OK);
    ck_assert(c.warn_s == 2.5);
    unsetenv("DFCCL_WARN_S");
    ck_assert_int_eq(dfcclConfigInit(&good), DFCCL_OK);
    ck_assert(good.warn_s == 60);

    /* issue 55, item 2: every field is checked by dfcclInit, enums too, and
     * the message names the field and its value */
    EXPECT_BAD_FIELD(step_slices, 17, "step_slices = 17");
    EXPECT_BAD_FIELD(ll_slots, -1, "ll_slots = -1");
    EXPECT_BAD_FIELD(arrivals, (dfccl_arrivals_t)7, "arrivals = 7");
    EXPECT_BAD_FIELD(team_threads, 2048, "team_threads = 2048");
    EXPECT_BAD_FIELD(progress, (dfccl_progress_t)9, "progress = 9");
    EXPECT_BAD_FIELD(backend, (dfccl_backend_t)9, "backend = 9");
    EXPECT_BAD_FIELD(transport, (dfccl_transport_t)9, "transport = 9");
    EXPECT_BAD_FIELD(proto, (dfccl_proto_t)9, "proto = 9");
    EXPECT_BAD_FIELD(timeout_s, -1, "timeout_s = -1");
    EXPECT_BAD_FIELD(timeout_s, 0.0 / 0.0, "timeout_s = ");
    EXPECT_BAD_FIELD(timeout_s, 1.0 / 0.0, "timeout_s = inf");
    EXPECT_BAD_FIELD(warn_s, -2, "warn_s = -2");
    EXPECT_BAD_FIELD(nslots, 1, "nslots = 1");
    EXPECT_BAD_FIELD(max_blocks, 65, "max_blocks = 65");
    EXPECT_BAD_FIELD(max_colls, 0, "max_colls = 0");
    EXPECT_BAD_FIELD(sq_entries, 1, "sq_entries = 1");
    EXPECT_BAD_FIELD(slot_bytes, (size_t)1 << 30, "slot_bytes = 1073741824");
    EXPECT_BAD_FIELD(ll_max_bytes, 100, "ll_max_bytes = 100");
    EXPECT_BAD_FIELD(oneshot_bytes, (size_t)4 << 20, "oneshot_bytes");
    EXPECT_BAD_FIELD(verbose, 7, "verbose = 7");
    EXPECT_BAD_FIELD(net, 2, "net = 2");
    EXPECT_BAD_FIELD(peer_bells, -1, "peer_bells = -1");
    EXPECT_BAD_FIELD(priority_order, 5, "priority_order = 5");
    EXPECT_BAD_FIELD(sigusr1, 3, "sigusr1 = 3");
    ck_assert_int_eq(dfcclInit(&c, NULL), DFCCL_ERR_INVALID_ARG);
    ck_assert_int_eq(dfcclDestroy(NULL), DFCCL_ERR_INVALID_ARG);
    ck_assert_str_eq(dfcclGetErrorString((dfccl_status_t)-999), "unknown status");
    /* issue 55, item 9: the CUDA backend asked for where no GPU is visible
     * says so (where a GPU is visible, it starts) */
    c = good; c.backend = DFCCL_BACKEND_CUDA;
    if (dfcclInit(&c, &ctx) == DFCCL_OK) {
        ck_assert_int_eq(dfcclDestroy(ctx), DFCCL_OK);
    } else {
        const char *m = dfcclGetLastErrorMessage();
        ck_assert_msg((strstr(m, "no GPU or CUDA driver is visible") != NULL ||
                       strstr(m, "without") != NULL) && strstr(m, "insufficient") == NULL,
                      "DFCCL_BACKEND=cuda without a GPU: %s", m);
    }
    /* the defaults themselves are valid */
    ck_assert_int_eq(dfcclInit(&good, &ctx), DFCCL_OK);
    ck_assert_int_eq(dfcclDestroy(ctx), DFCCL_OK);
}
END_TEST

int main(void)
{
    Suite *s  = suite_create("bad input");
    TCase *tc = dfccl_test_case(s, "api", 300);

    tcase_add_test(tc, test_bad_input);
    tcase_add_test(tc, test_bad_config);
    return dfccl_test_run(s, CK_NORMAL);
}
