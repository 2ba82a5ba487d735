/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reduction and copy loops of the daemon for every supported datatype and
 * op. dfccl_reduce_copy() computes out = a (op) b elementwise (or out = a when
 * b is NULL) and writes out to one or two destinations, with the movers of
 * the calling block (threads below DFCCL_NMOVERS, the only ones that call
 * it) sharing the elements. Signed integers wrap like two's
 * complement (computed in the unsigned type); float16 and bfloat16 are
 * computed in float32 and rounded to nearest even on every store.
 */
#ifndef DFCCL_KERNELS_REDUCE_H_
#define DFCCL_KERNELS_REDUCE_H_

#include "port.h"

/* Values of dfccl_datatype_t / dfccl_op_t (include/dfccl.h). */
enum {
    DFCCL_K_INT8 = 0, DFCCL_K_UINT8, DFCCL_K_INT32, DFCCL_K_UINT32, DFCCL_K_INT64,
    DFCCL_K_UINT64, DFCCL_K_FLOAT16, DFCCL_K_BFLOAT16, DFCCL_K_FLOAT32, DFCCL_K_FLOAT64
};
enum { DFCCL_K_SUM = 0, DFCCL_K_PROD, DFCCL_K_MIN, DFCCL_K_MAX, DFCCL_K_AVG };

DFCCL_F_DEVICE float dfccl_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp  = (h >> 10) & 0x1fu;
    uint32_t man  = h & 0x3ffu;
    uint32_t bits;
    union { uint32_t u; float f; } v;

    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13); /* inf / nan */
    } else if (exp != 0) {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;
    } else {
        /* subnormal: normalize */
        int e = -1;
        do {
            e++;
            man <<= 1;
        } while ((man & 0x400u) == 0);
        bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
    }
    v.u = bits;
    return v.f;
}

DFCCL_F_DEVICE uint16_t dfccl_float_to_half(float f)
{
    union { float f; uint32_t u; } v;
    uint32_t x, sign, exp, man;

    v.f  = f;
    x    = v.u;
    sign = (x >> 16) & 0x8000u;
    exp  = (x >> 23) & 0xffu;
    man  = x & 0x7fffffu;

    if (exp == 0xff) { /* inf or nan (keep nan quiet and nonzero) */
        return (uint16_t)(sign | 0x7c00u | (man ? (0x200u | (man >> 13)) : 0));
    }
    if (exp > 142) { /* overflow to inf */
        return (uint16_t)(sign | 0x7c00u);
    }
    if (exp >= 113) { /* normal half */
        uint32_t h   = ((exp - 112) << 10) | (man >> 13);
        uint32_t rem = man & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) {
            h++; /* may carry into the exponent, which is correct */
        }
        return (uint16_t)(sign | h);
    }
    if (exp >= 102) { /* subnormal half */
        uint32_t m     = man | 0x800000u;
        uint32_t shift = 126 - exp; /* 14..24 */
        uint32_t h     = m >> shift;
        uint32_t rem   = m & ((1u << shift) - 1);
        uint32_t half  = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1u))) {
            h++;
        }
        return (uint16_t)(sign | h);
    }
    return (uint16_t)sign; /* underflow to zero */
}

DFCCL_F_DEVICE float dfccl_bf16_to_float(uint16_t h)
{
    union { uint32_t u; float f; } v;
    v.u = (uint32_t)h << 16;
    return v.f;
}

DFCCL_F_DEVICE uint16_t dfccl_float_to_bf16(float f)
{
    union { float f; uint32_t u; } v;
    v.f = f;
    if ((v.u & 0x7f800000u) == 0x7f800000u && (v.u & 0x7fffffu)) {
        return (uint16_t)((v.u >> 16) | 0x40u); /* quiet nan */
    }
    return (uint16_t)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
}

/* Size in bytes of a datatype, 0 if unknown. */
DFCCL_F_DEVICE uint32_t dfccl_dtype_size(int dtype)
{
    switch (dtype) {
    case DFCCL_K_INT8: case DFCCL_K_UINT8: return 1;
    case DFCCL_K_FLOAT16: case DFCCL_K_BFLOAT16: return 2;
    case DFCCL_K_INT32: case DFCCL_K_UINT32: case DFCCL_K_FLOAT32: return 4;
    case DFCCL_K_INT64: case DFCCL_K_UINT64: case DFCCL_K_FLOAT64: return 8;
    default: return 0;
    }
}

#if defined(__CUDACC__)
/* Each reduction loop is its own function on GPUs: inlined into the daemon
 * all together they overflow its registers. */
#define DFCCL_F_RED DFCCL_F_NOINLINE
/*
 * GPU fast path: when every pointer is 16-byte aligned, each thread
 * combines whole 16-byte vectors, DFCCL_VEC_UNROLL of them in flight, so
 * that loads and (remote) stores are wide; the scalar loop below finishes
 * the tail. BODY computes v_ from x_ and y_, of type T.
 */
/* Vectors in flight per thread: enough loads outstanding to cover memory
 * latency while the stores (often to a peer across NVLink) drain. */
#ifndef DFCCL_VEC_UNROLL
#define DFCCL_VEC_UNROLL 4
#endif
/* Combine the vectors A and B (loaded already) with BODY and store the
 * result at vector index J of the destinations. */
#define DFCCL_VEC_STORE(T, BODY, A, B, J)                                     \
    do {                                                                      \
        union { uint4 v; T e[16 / sizeof(T)]; } x1_, y1_;                     \
        x1_.v = (A);                                                          \
        y1_.v = (B);                                                          \
        _Pragma("unroll") for (uint64_t k_ = 0; k_ < per_; k_++) {            \
            T x_ = x1_.e[k_], y_ = y1_.e[k_], v_;                             \
            BODY;                                                             \
            x1_.e[k_] = v_;                                                   \
        }                                                                     \
        v0_[J] = x1_.v;                                                       \
        if (v1_ != NULL) {                                                    \
            v1_[J] = x1_.v;                                                   \
        }                                                                     \
    } while (0)
#define DFCCL_VEC_LOOP(T, BODY)                                               \
    do {                                                                      \
        const uint64_t per_ = 16 / sizeof(T);                                 \
        if ((((uintptr_t)pa | (uintptr_t)pb | (uintptr_t)pd0 |                \
              (uintptr_t)pd1) & 15) == 0) {                                   \
            const uint4 *va_ = (const uint4 *)pa, *vb_ = (const uint4 *)pb;   \
            uint4 *v0_ = (uint4 *)pd0, *v1_ = (uint4 *)pd1;                   \
            const uint64_t nv_ = n / per_;                                    \
            const uint64_t st_ = (uint64_t)DFCCL_NMOVERS;                     \
            uint64_t j_ = (uint64_t)DFCCL_TID;                                \
            /* rounds: all loads of a round in flight at once; in the last   \
             * one a thread past the end loads the last vectors again and    \
             * stores nothing */                                             \
            for (; j_ < nv_; j_ += st_ * DFCCL_VEC_UNROLL) {                  \
                uint4 a_[DFCCL_VEC_UNROLL], b_[DFCCL_VEC_UNROLL];             \
                _Pragma("unroll") for (int u_ = 0; u_ < DFCCL_VEC_UNROLL; u_++) { \
                    const uint64_t k_ = DFCCL_MIN(j_ + u_ * st_, nv_ - 1);    \
                    a_[u_] = DFCCL_LDV(&va_[k_]);                             \
                    b_[u_] = DFCCL_LDV(&vb_[k_]);                             \
                }                                                             \
                _Pragma("unroll") for (int u_ = 0; u_ < DFCCL_VEC_UNROLL; u_++) { \
                    if (j_ + u_ * st_ < nv_) {                                \
                        DFCCL_VEC_STORE(T, BODY, a_[u_], b_[u_], j_ + u_ * st_); \
                    }                                                         \
                }                                                             \
            }                                                                 \
            done_ = nv_ * per_;                                               \
        }                                                                     \
    } while (0)
#else
#define DFCCL_F_RED DFCCL_F_DEVICE
#define DFCCL_VEC_LOOP(T, BODY) do { } while (0)
#endif

#define DFCCL_RED_LOOP(T, EXPR)                                               \
    do {                                                                      \
        uint64_t done_ = 0;                                                   \
        DFCCL_VEC_LOOP(T, v_ = (EXPR));                                       \
        for (uint64_t i_ = done_ + (uint64_t)DFCCL_TID; i_ < n;               \
             i_ += (uint64_t)DFCCL_NMOVERS) {                                 \
            T x_ = DFCCL_LD1(T, pa, i_), y_ = DFCCL_LD1(T, pb, i_), v_;       \
            v_ = (EXPR);                                                      \
            pd0[i_] = v_;                                                     \
            if (pd1 != NULL) {                                                \
                pd1[i_] = v_;                                                 \
            }                                                                 \
        }                                                                     \
    } while (0)

/* The ops of an integer type T, U its unsigned twin (for wrapping
 * arithmetic): LOOP(T, EXPR) for the `op` in scope, EXPR computed from x_
 * and y_. Every integer loop (here and in algo/twoshot.h) takes its ops from
 * this one table. */
#define DFCCL_RED_INT_OPS(LOOP, T, U)                                         \
    switch (op) {                                                             \
    case DFCCL_K_SUM:  LOOP(T, (T)((U)x_ + (U)y_)); break;                    \
    case DFCCL_K_PROD: LOOP(T, (T)((U)x_ * (U)y_)); break;                    \
    case DFCCL_K_MIN:  LOOP(T, x_ < y_ ? x_ : y_); break;                     \
    case DFCCL_K_MAX:  LOOP(T, x_ > y_ ? x_ : y_); break;                     \
    default: break;                                                           \
    }

/* Integer types: T the type, U its unsigned twin. */
#define DFCCL_DEFINE_RED_INT(NAME, T, U)                                      \
    DFCCL_F_RED void dfccl_red_##NAME(int op, const void *a, const void *b,   \
                                         void *d0, void *d1, uint64_t n)      \
    {                                                                         \
        const T *pa = (const T *)a, *pb = (const T *)b;                       \
        T *pd0 = (T *)d0, *pd1 = (T *)d1;                                     \
        DFCCL_RED_INT_OPS(DFCCL_RED_LOOP, T, U)                               \
    }

/* The integer types, as X(NAME, T, U), U the unsigned twin of T: every
 * family of integer loops (here and in algo/twoshot.h) is defined from this one
 * list. */
#define DFCCL_INT_TYPES(X)                                                    \
    X(i8, int8_t, uint8_t)                                                    \
    X(u8, uint8_t, uint8_t)                                                   \
    X(i32, int32_t, uint32_t)                                                 \
    X(u32, uint32_t, uint32_t)                                                \
    X(i64, int64_t, uint64_t)                                                 \
    X(u64, uint64_t, uint64_t)

DFCCL_INT_TYPES(DFCCL_DEFINE_RED_INT)

/* Native floating types. `div` > 0 divides the result (final step of AVG). */
#define DFCCL_DEFINE_RED_FLOAT(NAME, T)                                       \
    DFCCL_F_RED void dfccl_red_##NAME(int op, const void *a, const void *b,   \
                                         void *d0, void *d1, uint64_t n,      \
                                         uint32_t div)                        \
    {                                                                         \
        const T *pa = (const T *)a, *pb = (const T *)b;                       \
        T *pd0 = (T *)d0, *pd1 = (T *)d1;                                     \
        switch (op) {                                                         \
        case DFCCL_K_SUM:  DFCCL_RED_LOOP(T, x_ + y_); break;                 \
        case DFCCL_K_PROD: DFCCL_RED_LOOP(T, x_ * y_); break;                 \
        case DFCCL_K_MIN:  DFCCL_RED_LOOP(T, x_ < y_ ? x_ : y_); break;       \
        case DFCCL_K_MAX:  DFCCL_RED_LOOP(T, x_ > y_ ? x_ : y_); break;       \
        case DFCCL_K_AVG:                                                     \
            if (div > 1) {                                                    \
                DFCCL_RED_LOOP(T, (x_ + y_) / (T)div);                        \
            } else {                                                          \
                DFCCL_RED_LOOP(T, x_ + y_);                                   \
            }                                                                 \
            break;                                                            \
        default: break;                                                       \
        }                                                                     \
    }

DFCCL_DEFINE_RED_FLOAT(f32, float)
DFCCL_DEFINE_RED_FLOAT(f64, double)

/* One float32 reduction step of a 16-bit type. */
DFCCL_F_DEVICE float dfccl_red_f32_op(int op, uint32_t div, float x, float y)
{
    switch (op) {
    case DFCCL_K_SUM:  return x + y;
    case DFCCL_K_PROD: return x * y;
    case DFCCL_K_MIN:  return x < y ? x : y;
    case DFCCL_K_MAX:  return x > y ? x : y;
    default:           return div > 1 ? (x + y) / (float)div : x + y;
    }
}

/* 16-bit floating types, computed in float32. */
#define DFCCL_DEFINE_RED_HALF(NAME, TO_F, FROM_F)                             \
    DFCCL_F_RED void dfccl_red_##NAME(int op, const void *a, const void *b,   \
                                         void *d0, void *d1, uint64_t n,      \
                                         uint32_t div)                        \
    {                                                                         \
        const uint16_t *pa = (const uint16_t *)a, *pb = (const uint16_t *)b;  \
        uint16_t *pd0 = (uint16_t *)d0, *pd1 = (uint16_t *)d1;                \
        uint64_t done_ = 0;                                                   \
        DFCCL_VEC_LOOP(uint16_t, v_ = FROM_F(dfccl_red_f32_op(op, div, TO_F(x_), TO_F(y_)))); \
        for (uint64_t i_ = done_ + (uint64_t)DFCCL_TID; i_ < n;               \
             i_ += (uint64_t)DFCCL_NMOVERS) {                                 \
            float v_ = dfccl_red_f32_op(op, div, TO_F(DFCCL_LD1(uint16_t, pa, i_)), \
                                         TO_F(DFCCL_LD1(uint16_t, pb, i_)));  \
            uint16_t h_ = FROM_F(v_);                                         \
            pd0[i_] = h_;                                                     \
            if (pd1 != NULL) {                                                \
                pd1[i_] = h_;                                                 \
            }                                                                 \
        }                                                                     \
    }

DFCCL_DEFINE_RED_HALF(f16, dfccl_half_to_float, dfccl_float_to_half)
DFCCL_DEFINE_RED_HALF(bf16, dfccl_bf16_to_float, dfccl_float_to_bf16)

/*
 * One 8-byte word of the LL protocol: a (op) b for each element the word
 * holds (8 / size of the type), one thread, with the same arithmetic as the
 * loops above. The bytes past the end of a partial word are combined too
 * and never stored.
 */
DFCCL_F_DEVICE uint64_t dfccl_red_word(int dtype, int op, uint32_t div, uint64_t a, uint64_t b)
{
    union {
        uint64_t u;
        int8_t   i8[8];
        uint8_t  u8[8];
        int32_t  i32[2];
        uint32_t u32[2];
        int64_t  i64[1];
        uint64_t u64[1];
        uint16_t h[4];
        float    f[2];
        double   d[1];
    } x, y;
#define DFCCL_WORD_INT(F, T, U, N)                                            \
    for (int k_ = 0; k_ < (N); k_++) {                                        \
        T x_ = x.F[k_], y_ = y.F[k_];                                         \
        switch (op) {                                                         \
        case DFCCL_K_SUM:  x.F[k_] = (T)((U)x_ + (U)y_); break;               \
        case DFCCL_K_PROD: x.F[k_] = (T)((U)x_ * (U)y_); break;               \
        case DFCCL_K_MIN:  x.F[k_] = x_ < y_ ? x_ : y_; break;                \
        case DFCCL_K_MAX:  x.F[k_] = x_ > y_ ? x_ : y_; break;                \
        default: break;                                                       \
        }                                                                     \
    }
#define DFCCL_WORD_FLOAT(F, T, N)                                             \
    for (int k_ = 0; k_ < (N); k_++) {                                        \
        T x_ = x.F[k_], y_ = y.F[k_];                                         \
        switch (op) {                                                         \
        case DFCCL_K_SUM:  x.F[k_] = x_ + y_; break;                          \
        case DFCCL_K_PROD: x.F[k_] = x_ * y_; break;                          \
        case DFCCL_K_MIN:  x.F[k_] = x_ < y_ ? x_ : y_; break;                \
        case DFCCL_K_MAX:  x.F[k_] = x_ > y_ ? x_ : y_; break;                \
        case DFCCL_K_AVG:  x.F[k_] = div > 1 ? (x_ + y_) / (T)div : x_ + y_; break; \
        default: break;                                                       \
        }                                                                     \
    }
    x.u = a;
    y.u = b;
    switch (dtype) {
    case DFCCL_K_INT8:   DFCCL_WORD_INT(i8, int8_t, uint8_t, 8) break;
    case DFCCL_K_UINT8:  DFCCL_WORD_INT(u8, uint8_t, uint8_t, 8) break;
    case DFCCL_K_INT32:  DFCCL_WORD_INT(i32, int32_t, uint32_t, 2) break;
    case DFCCL_K_UINT32: DFCCL_WORD_INT(u32, uint32_t, uint32_t, 2) break;
    case DFCCL_K_INT64:  DFCCL_WORD_INT(i64, int64_t, uint64_t, 1) break;
    case DFCCL_K_UINT64: DFCCL_WORD_INT(u64, uint64_t, uint64_t, 1) break;
    case DFCCL_K_FLOAT32: DFCCL_WORD_FLOAT(f, float, 2) break;
    case DFCCL_K_FLOAT64: DFCCL_WORD_FLOAT(d, double, 1) break;
    case DFCCL_K_FLOAT16:
        for (int k = 0; k < 4; k++) {
            x.h[k] = dfccl_float_to_half(dfccl_red_f32_op(op, div, dfccl_half_to_float(x.h[k]),
                                                          dfccl_half_to_float(y.h[k])));
        }
        break;
    case DFCCL_K_BFLOAT16:
        for (int k = 0; k < 4; k++) {
            x.h[k] = dfccl_float_to_bf16(dfccl_red_f32_op(op, div, dfccl_bf16_to_float(x.h[k]),
                                                          dfccl_bf16_to_float(y.h[k])));
        }
        break;
    default: break;
    }
#undef DFCCL_WORD_INT
#undef DFCCL_WORD_FLOAT
    return x.u;
}

/* Copy `bytes` from src to one or two destinations, shared by the `nt`
 * threads of a team in which this thread is number `tid` (the movers of
 * the block, or a part of them). */
#ifndef DFCCL_COPY_UNROLL
#define DFCCL_COPY_UNROLL 8
#endif
DFCCL_F_DEVICE void dfccl_copy_team(const void *src, void *d0, void *d1, uint64_t bytes,
                                    uint64_t tid, uint64_t nt)
{
#if defined(__CUDACC__)
    const char *s = (const char *)src;
    char *p0 = (char *)d0, *p1 = (char *)d1;
    uint64_t nvec = 0;
    if ((((uintptr_t)s | (uintptr_t)p0 | (uintptr_t)p1) & 15) == 0) {
        const uint4 *vs = (const uint4 *)s;
        uint4 *v0 = (uint4 *)p0, *v1 = (uint4 *)p1;
        const uint64_t big = nt * DFCCL_COPY_UNROLL;
        uint64_t i = tid;
        nvec = bytes / 16;
        /* rounds of DFCCL_COPY_UNROLL vectors per thread, every load of a
         * round in flight before its first store; in the last round a thread
         * past the end loads the last vector again and stores nothing, so
         * that a copy of a few KiB waits for memory once, not per vector */
        for (; i < nvec; i += big) {
            uint4 v[DFCCL_COPY_UNROLL];
#pragma unroll
            for (int u = 0; u < DFCCL_COPY_UNROLL; u++) {
                v[u] = DFCCL_LDV(&vs[DFCCL_MIN(i + u * nt, nvec - 1)]);
            }
#pragma unroll
            for (int u = 0; u < DFCCL_COPY_UNROLL; u++) {
                if (i + u * nt < nvec) {
                    v0[i + u * nt] = v[u];
                    if (v1 != NULL) {
                        v1[i + u * nt] = v[u];
                    }
                }
            }
        }
    }
    for (uint64_t i = nvec * 16 + tid; i < bytes; i += nt) {
        char v = DFCCL_LD1(char, s, i);
        p0[i] = v;
        if (p1 != NULL) {
            p1[i] = v;
        }
    }
#else
    (void)tid;
    (void)nt;
    if (d0 != src) {
        memmove(d0, src, bytes);
    }
    if (d1 != NULL && d1 != src) {
        memcpy(d1, src, bytes);
    }
#endif
}

/* Copy `bytes` from src to one or two destinations (block-cooperative). */
DFCCL_F_DEVICE void dfccl_copy(const void *src, void *d0, void *d1, uint64_t bytes)
{
    dfccl_copy_team(src, d0, d1, bytes, (uint64_t)DFCCL_TID, (uint64_t)DFCCL_NMOVERS);
}

/*
 * out = a (op) b, or out = a when b is NULL; written to d0 and, when not
 * NULL, d1. `div` > 1 on the final step of an AVG divides by the group size.
 */
DFCCL_F_DEVICE void dfccl_reduce_copy(int dtype, int op, const void *a, const void *b,
                                      void *d0, void *d1, uint64_t n, uint32_t div)
{
    if (b == NULL) {
        dfccl_copy(a, d0, d1, n * dfccl_dtype_size(dtype));
        return;
    }
    switch (dtype) {
    case DFCCL_K_INT8:     dfccl_red_i8(op, a, b, d0, d1, n); break;
    case DFCCL_K_UINT8:    dfccl_red_u8(op, a, b, d0, d1, n); break;
    case DFCCL_K_INT32:    dfccl_red_i32(op, a, b, d0, d1, n); break;
    case DFCCL_K_UINT32:   dfccl_red_u32(op, a, b, d0, d1, n); break;
    case DFCCL_K_INT64:    dfccl_red_i64(op, a, b, d0, d1, n); break;
    case DFCCL_K_UINT64:   dfccl_red_u64(op, a, b, d0, d1, n); break;
    case DFCCL_K_FLOAT16:  dfccl_red_f16(op, a, b, d0, d1, n, div); break;
    case DFCCL_K_BFLOAT16: dfccl_red_bf16(op, a, b, d0, d1, n, div); break;
    case DFCCL_K_FLOAT32:  dfccl_red_f32(op, a, b, d0, d1, n, div); break;
    case DFCCL_K_FLOAT64:  dfccl_red_f64(op, a, b, d0, d1, n, div); break;
    default: break;
    }
}

#endif /* DFCCL_KERNELS_REDUCE_H_ */
