/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the daemon's reduction loops (kernels/reduce.h) on the host
 * build: 16-bit float conversions and every type x op against a reference.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reduce.h"
#include "suite.h"

START_TEST(test_half_known_values)
{
    ck_assert_uint_eq(dfccl_float_to_half(1.0f), 0x3c00);
    ck_assert_uint_eq(dfccl_float_to_half(-2.0f), 0xc000);
    ck_assert_uint_eq(dfccl_float_to_half(65504.0f), 0x7bff);
    ck_assert_uint_eq(dfccl_float_to_half(65520.0f), 0x7c00);     /* rounds to inf */
    ck_assert_uint_eq(dfccl_float_to_half(5.960464477539063e-08f), 0x0001); /* min subnormal */
    ck_assert_uint_eq(dfccl_float_to_half(1.0009765625f), 0x3c01);
    ck_assert_uint_eq(dfccl_float_to_half(1.00048828125f), 0x3c00); /* tie to even */
    ck_assert(dfccl_half_to_float(0x3555) > 0.333f && dfccl_half_to_float(0x3555) < 0.334f);
    ck_assert(isnan(dfccl_half_to_float(dfccl_float_to_half(NAN))));
}
END_TEST

START_TEST(test_half_roundtrip_all)
{
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = dfccl_half_to_float((uint16_t)h);
        if (isnan(f)) {
            continue;
        }
        ck_assert_msg(dfccl_float_to_half(f) == h, "half 0x%04x -> %g -> 0x%04x", h, f,
                      dfccl_float_to_half(f));
    }
}
END_TEST

START_TEST(test_bf16_values)
{
    ck_assert_uint_eq(dfccl_float_to_bf16(1.0f), 0x3f80);
    ck_assert_uint_eq(dfccl_float_to_bf16(-3.0f), 0xc040);
    ck_assert(dfccl_bf16_to_float(0x3f80) == 1.0f);
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = dfccl_bf16_to_float((uint16_t)h);
        if (!isnan(f)) {
            ck_assert_uint_eq(dfccl_float_to_bf16(f), h);
        }
    }
    /* 1 + 2^-8 is a tie between 1 and 1 + 2^-7: to even (1). */
    ck_assert_uint_eq(dfccl_float_to_bf16(1.00390625f), 0x3f80);
}
END_TEST

/* Reference for one element, computed in double / wrapping integers. */
static double ref_op(int op, double a, double b)
{
    switch (op) {
    case DFCCL_K_SUM: case DFCCL_K_AVG: return a + b;
    case DFCCL_K_PROD: return a * b;
    case DFCCL_K_MIN: return a < b ? a : b;
    default: return a > b ? a : b;
    }
}

START_TEST(test_reduce_every_type_op)
{
    enum { N = 1000 };
    static const int types[] = {DFCCL_K_INT8, DFCCL_K_UINT8, DFCCL_K_INT32, DFCCL_K_UINT32,
                                DFCCL_K_INT64, DFCCL_K_UINT64, DFCCL_K_FLOAT16,
                                DFCCL_K_BFLOAT16, DFCCL_K_FLOAT32, DFCCL_K_FLOAT64};
    char a[N * 8], b[N * 8], d0[N * 8], d1[N * 8];

    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        int ty = types[t];
        int is_float = ty >= DFCCL_K_FLOAT16;
        for (int op = 0; op <= DFCCL_K_AVG; op++) {
            if (op == DFCCL_K_AVG && !is_float) {
                continue;
            }
            for (int i = 0; i < N; i++) {
                double va = (i % 11) - 5, vb = (i % 7) - 2;
                switch (ty) {
                case DFCCL_K_INT8: ((int8_t *)a)[i] = (int8_t)va; ((int8_t *)b)[i] = (int8_t)vb; break;
                case DFCCL_K_UINT8: ((uint8_t *)a)[i] = (uint8_t)(i % 200); ((uint8_t *)b)[i] = (uint8_t)(i % 100); break;
                case DFCCL_K_INT32: ((int32_t *)a)[i] = (int32_t)va * 1000003; ((int32_t *)b)[i] = (int32_t)vb * 7919; break;
                case DFCCL_K_UINT32: ((uint32_t *)a)[i] = 4000000000u + (uint32_t)i; ((uint32_t *)b)[i] = (uint32_t)i * 3u; break;
                case DFCCL_K_INT64: ((int64_t *)a)[i] = (int64_t)va << 40; ((int64_t *)b)[i] = (int64_t)vb << 30; break;
                case DFCCL_K_UINT64: ((uint64_t *)a)[i] = ~0ull - (uint64_t)i; ((uint64_t *)b)[i] = (uint64_t)i << 20; break;
                case DFCCL_K_FLOAT16: ((uint16_t *)a)[i] = dfccl_float_to_half((float)va); ((uint16_t *)b)[i] = dfccl_float_to_half((float)vb); break;
                case DFCCL_K_BFLOAT16: ((uint16_t *)a)[i] = dfccl_float_to_bf16((float)va); ((uint16_t *)b)[i] = dfccl_float_to_bf16((float)vb); break;
                case DFCCL_K_FLOAT32: ((float *)a)[i] = (float)va * 0.5f; ((float *)b)[i] = (float)vb * 0.25f; break;
                default: ((double *)a)[i] = va * 0.5; ((double *)b)[i] = vb * 0.25; break;
                }
            }
            memset(d0, 0, sizeof(d0));
            memset(d1, 0, sizeof(d1));
            dfccl_reduce_copy(ty, op, a, b, d0, d1, N, op == DFCCL_K_AVG ? 2 : 0);
            ck_assert_int_eq(memcmp(d0, d1, N * dfccl_dtype_size(ty)), 0);
            for (int i = 0; i < N; i++) {
#define CASE_INT(K, T, U)                                                                  \
    case K: {                                                                              \
        T x = ((T *)a)[i], y = ((T *)b)[i], e, g = ((T *)d0)[i];                            \
        e = op == DFCCL_K_SUM ? (T)((U)x + (U)y) : op == DFCCL_K_PROD ? (T)((U)x * (U)y) :  \
            op == DFCCL_K_MIN ? (x < y ? x : y) : (x > y ? x : y);                          \
        ck_assert_msg(g == e, "type %d op %d i %d", ty, op, i);                             \
        break;                                                                             \
    }
                switch (ty) {
                CASE_INT(DFCCL_K_INT8, int8_t, uint8_t)
                CASE_INT(DFCCL_K_UINT8, uint8_t, uint8_t)
                CASE_INT(DFCCL_K_INT32, int32_t, uint32_t)
                CASE_INT(DFCCL_K_UINT32, uint32_t, uint32_t)
                CASE_INT(DFCCL_K_INT64, int64_t, uint64_t)
                CASE_INT(DFCCL_K_UINT64, uint64_t, uint64_t)
                default: {
                    double x, y, g, e;
                    if (ty == DFCCL_K_FLOAT16) {
                        x = dfccl_half_to_float(((uint16_t *)a)[i]);
                        y = dfccl_half_to_float(((uint16_t *)b)[i]);
                        g = dfccl_half_to_float(((uint16_t *)d0)[i]);
                    } else if (ty == DFCCL_K_BFLOAT16) {
                        x = dfccl_bf16_to_float(((uint16_t *)a)[i]);
                        y = dfccl_bf16_to_float(((uint16_t *)b)[i]);
                        g = dfccl_bf16_to_float(((uint16_t *)d0)[i]);
                    } else if (ty == DFCCL_K_FLOAT32) {
                        x = ((float *)a)[i]; y = ((float *)b)[i]; g = ((float *)d0)[i];
                    } else {
                        x = ((double *)a)[i]; y = ((double *)b)[i]; g = ((double *)d0)[i];
                    }
                    e = ref_op(op, x, y);
                    if (op == DFCCL_K_AVG) {
                        e /= 2;
                    }
                    ck_assert_msg(fabs(g - e) <= 1e-2 * fabs(e) + 1e-6,
                                  "type %d op %d i %d: %g vs %g", ty, op, i, g, e);
                }
                }
#undef CASE_INT
            }
        }
    }
}
END_TEST

START_TEST(test_copy_two_destinations)
{
    char src[777], d0[777], d1[777];
    for (int i = 0; i < 777; i++) {
        src[i] = (char)(i * 7);
    }
    dfccl_reduce_copy(DFCCL_K_INT8, DFCCL_K_SUM, src, NULL, d0, d1, 777, 0);
    ck_assert_int_eq(memcmp(src, d0, 777), 0);
    ck_assert_int_eq(memcmp(src, d1, 777), 0);
}
END_TEST

int main(void)
{
    Suite *s   = suite_create("reduce");
    TCase *tc  = dfccl_test_case(s, "core", 0);

    tcase_add_test(tc, test_half_known_values);
    tcase_add_test(tc, test_half_roundtrip_all);
    tcase_add_test(tc, test_bf16_values);
    tcase_add_test(tc, test_reduce_every_type_op);
    tcase_add_test(tc, test_copy_two_destinations);
    return dfccl_test_run(s, CK_NORMAL);
}
