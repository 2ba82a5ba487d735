/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dfccl-bench: nccl-tests-style bandwidth tables for dfccl collectives.
 *
 *   mpirun -np N dfccl-bench [-c allreduce] [-t float] [-o sum] [-b 8] [-e 1G]
 *                            [-f 2] [-w 5] [-n 20] [-r root]
 *                            [--compare nccl[,nccl-sym][,nccl-graph] | nccl-best]
 *
 * One line per size: size (bytes), count (elements), type, op, time (us per
 * call, the slowest rank's mean), algbw = size / time and busbw = algbw times
 * nccl-tests' factor (allreduce 2(n-1)/n, allgather, reduce-scatter and
 * all-to-all (n-1)/n, broadcast and reduce 1), and #wrong, the elements
 * that differ from the expected result after one more checked call. As in
 * nccl-tests, allgather's and reduce-scatter's size is the whole gathered
 * buffer, and all-to-all's the bytes each rank sends in all (its own block
 * included): size / (n * element size) elements to each rank.
 *
 * alltoallv sends uneven blocks, the same in every run and known on every
 * rank: with c the all-to-all's count per pair and k = (i + j) mod n, rank
 * i sends rank j c + (2k - (n - 1)) * c / (2n) elements (integer division,
 * toward zero), from about c / 2 to 3c / 2; the terms of k and n - 1 - k
 * cancel, so every rank sends and receives n * c elements in all, and its
 * size, algbw and busbw are those bytes. The blocks lie packed in rank
 * order. dfccl registers the counts with dfcclRegisterAllToAllv; NCCL
 * runs both as a ncclSend and a ncclRecv per peer (its own rank too) in
 * one ncclGroupStart/ncclGroupEnd.
 *
 * Each call is dfcclRun* followed by dfcclWait, so a time includes the
 * completion's trip to the host, like an NCCL call followed by
 * cudaStreamSynchronize. With --compare nccl (built when configure finds
 * NCCL), NCCL runs the same collective on the same buffers in the same
 * process (NVLink multicast off), and the table adds NCCL's columns and the
 * ratio of NCCL's time to dfccl's (above 1: dfccl is faster). --compare
 * takes a comma-separated list of NCCL's variants, each timed and checked
 * alike: nccl (that plain call), nccl-sym (the call on buffers of its own
 * from ncclMemAlloc, registered once as symmetric windows, where NCCL 2.27.3
 * and later run symmetric kernels), nccl-graph (the call captured once per
 * size in a CUDA graph, and each timed call a cudaGraphLaunch then the
 * synchronize), and nccl-best for all three. With any variant but nccl
 * alone, NCCL's columns are those of the fastest variant at the size (the
 * ratio is against it; #wrong adds up all of theirs), then its name and
 * each variant's time. A variant that cannot run says so on one line and
 * shows '-'.
 *
 * --disorder N times rounds of N collectives per size posted in one order on
 * every rank against rounds in a random order per rank (what deadlocks a
 * stream-ordered library), each collective of the size (-e bounds each
 * one; without -e, the default limit divided by N); --registered N reports the device memory held
 * by N registered collectives (allreduces unless -c says) and the SMs the
 * daemon holds, active and idle;
 * --algos runs each size on every algorithm that can take it, one by one
 * (dfcclRegister's algorithm), and prints the model's time for each
 * (dfcclPredict) beside the measured one, which algorithm DFCCL_TUNER and
 * the static thresholds pick, and which was fastest: the table that
 * calibrates the model and checks the tuner;
 * --stats adds, after each size, the median, 99th percentile and slowest
 * of the timed calls (with --disorder, of the ordered and of the shuffled
 * rounds) and the daemon's launches, quits, preemptions and context loads
 * during them.
 *
 * The backend is DFCCL_BACKEND (default: CUDA when a GPU is visible). On
 * GPUs, rank i of a host uses device i % ndev. Ranks are MPI processes
 * (MPI_Allgather bootstraps the group); built without MPI it runs one rank.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_args.h"
#include "bench_model.h"
#include "bench_plot.h"
#include "dfccl.h"
#include "reduce.h"

#ifdef DFCCL_BENCH_MPI
#include <mpi.h>
#endif
#ifdef HAVE_CUDART
#include <cuda_runtime_api.h>
#endif
#if defined(HAVE_NCCL) && defined(DFCCL_BENCH_MPI)
#define DFCCL_BENCH_NCCL 1
#include <nccl.h>
/* nccl-sym: symmetric windows came with NCCL 2.27.3 */
#if defined(NCCL_VERSION) && defined(NCCL_VERSION_CODE)
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 3)
#define DFCCL_BENCH_NCCL_SYM 1
#endif
#endif
#endif

/* --compare's NCCL variants, in the order they run and their columns lie */
enum { BENCH_NCCL_PLAIN, BENCH_NCCL_SYM, BENCH_NCCL_GRAPH, BENCH_NCCL_NVARIANTS };
#define BENCH_NCCL_BIT(_v) (1 << (_v))
#define BENCH_NCCL_ALL     (BENCH_NCCL_BIT(BENCH_NCCL_NVARIANTS) - 1)
static const char *const nccl_variant_names[] = {"nccl", "nccl-sym", "nccl-graph"};

typedef struct {
    int    coll;    /* dfccl_coll_kind_t: allreduce, allgather, reducescatter, reduce,
                     * broadcast, alltoall, alltoallv (coll_names) */
    int    dtype;
    int    op;
    int    root;
    size_t min_bytes, max_bytes;
    double factor;
    int    warmup, iters;
    int    check;
    int    nccl;    /* --compare: the NCCL variants to run (BENCH_NCCL_BIT each), 0: none */
    int    cold_us; /* > 0: idle this long before every timed call */
    int    late_us; /* > 0: the last rank idles this long before every timed call */
    int    straggler; /* --straggler: allreduces registered with DFCCL_COLL_STRAGGLER */
    int    straggler_wait_us; /* --straggler-wait US: their wait (0: the ski-rental rule) */
    int    barrier; /* --barrier: an MPI_Barrier before every timed call, untimed */
    int    disorder;   /* --disorder N: N collectives per round, in order and shuffled */
    int    registered; /* --registered N: memory and SMs with N registered collectives */
    const char *plot; /* --plot FILE.svg, rank 0 writes it */
    int    stats;     /* --stats: call percentiles and daemon counters per size */
    int    algos;     /* --algos: every algorithm per size, predicted and measured */
} bench_opts_t;

typedef struct {
    int              rank, nranks;
    dfccl_rank_ctx_t ctx;
    dfccl_group_t    group;
    int              on_gpu;
    void            *sbuf, *rbuf;  /* max_bytes each; rbuf: --disorder's N outputs */
    void            *host;         /* staging for fill and check */
    int              ids[1024];    /* registered collectives */
    int              nids;
    bench_plot_t    *plot;         /* rank 0 with --plot */
    double           slowest;      /* --stats: this rank's slowest timed call (us) */
    double          *calls;        /* --stats: this rank's timed calls (us), iters */
    int              ncalls;
    /* all-to-alls: elements to (scnt) and from (rcnt) each rank and where
     * they lie in sbuf and rbuf (elements), for the size being run */
    size_t          *scnt, *sdsp, *rcnt, *rdsp;
#ifdef DFCCL_BENCH_NCCL
    ncclComm_t       comm;
    cudaStream_t     stream;
    int              nccl_off;     /* the variants that cannot run (BENCH_NCCL_BIT each) */
    void            *sym_sbuf, *sym_rbuf; /* nccl-sym's buffers, sym_bytes each */
    size_t           sym_bytes;
    int              sym_windows;  /* every rank registered both as windows */
#ifdef DFCCL_BENCH_NCCL_SYM
    ncclWindow_t     sym_swin, sym_rwin;
#endif
    cudaGraph_t      graph;        /* nccl-graph: the size's call, captured */
    cudaGraphExec_t  graph_exec;
#endif
} bench_t;

static const char *const coll_names[] = {"allreduce", "allgather", "reducescatter", "reduce",
                                         "broadcast", "alltoall", "alltoallv"};
#define BENCH_NCOLLS ((int)(sizeof(coll_names) / sizeof(coll_names[0])))

static int bench_is_a2a(const bench_opts_t *o)
{
    return o->coll == DFCCL_KIND_ALLTOALL || o->coll == DFCCL_KIND_ALLTOALLV;
}

/* Whether -o means anything to the collective (the redop column). */
static int bench_has_op(const bench_opts_t *o)
{
    return o->coll == DFCCL_KIND_ALLREDUCE || o->coll == DFCCL_KIND_REDUCESCATTER ||
           o->coll == DFCCL_KIND_REDUCE;
}

static const char *const type_names[] = {"int8", "uint8", "int32", "uint32", "int64",
                                         "uint64", "half", "bfloat16", "float", "double"};
static const char *const op_names[]   = {"sum", "prod", "min", "max", "avg"};

static void bench_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void bench_die(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "dfccl-bench: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
#ifdef DFCCL_BENCH_MPI
    MPI_Abort(MPI_COMM_WORLD, 1);
#endif
    exit(1);
}

static double bench_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* This process's rank, for the errors that every rank finds alike. */
static int bench_rank;

/*
 * A mistake in the command line: every rank finds it, so rank 0 alone says
 * so and every rank leaves normally (MPI_Abort would add a report per
 * rank).
 */
static void bench_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void bench_usage_error(const char *fmt, ...)
{
    va_list ap;

    if (bench_rank == 0) {
        fprintf(stderr, "dfccl-bench: ");
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, "; see --help\n");
    }
#ifdef DFCCL_BENCH_MPI
    MPI_Finalize();
#endif
    exit(2);
}

static int bench_pick(const char *s, const char *const *names, int n, const char *what,
                      const char *opt)
{
    char list[256];
    size_t o = 0;

    for (int i = 0; i < n; i++) {
        if (strcmp(s, names[i]) == 0) {
            return i;
        }
    }
    if (strcmp(what, "type") == 0) {
        if (strcmp(s, "float32") == 0) return DFCCL_FLOAT32;
        if (strcmp(s, "float16") == 0) return DFCCL_FLOAT16;
        if (strcmp(s, "float64") == 0) return DFCCL_FLOAT64;
        if (strcmp(s, "bf16") == 0) return DFCCL_BFLOAT16;
    }
    if (strcmp(what, "collective") == 0 && strcmp(s, "bcast") == 0) {
        return 4;
    }
    list[0] = '\0';
    for (int i = 0; i < n && o < sizeof(list); i++) {
        o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", i ? ", " : "", names[i]);
    }
    bench_usage_error("%s: unknown %s '%s'; the %ss are %s", opt, what, s, what, list);
    return -1;
}

/* --compare's comma-separated list: a mask of the variants it names
 * (BENCH_NCCL_BIT each; nccl-best: all), or a usage error naming them. */
static int bench_parse_compare(const char *list)
{
    const char *p = list;
    int mask = 0;

    for (;;) {
        const size_t len = strcspn(p, ",");
        int v;

        for (v = 0; v < BENCH_NCCL_NVARIANTS; v++) {
            if (strlen(nccl_variant_names[v]) == len &&
                strncmp(p, nccl_variant_names[v], len) == 0) {
                mask |= BENCH_NCCL_BIT(v);
                break;
            }
        }
        if (v == BENCH_NCCL_NVARIANTS) {
            if (len != strlen("nccl-best") || strncmp(p, "nccl-best", len) != 0) {
                bench_usage_error("--compare: unknown variant '%.*s' in '%s'; the variants are "
                                  "nccl, nccl-sym, nccl-graph and nccl-best (all three), "
                                  "comma-separated", (int)len, p, list);
            }
            mask |= BENCH_NCCL_ALL;
        }
        if (p[len] == '\0') {
            return mask;
        }
        p += len + 1;
    }
}

/* An integer option in [lo, hi], or a usage error naming the option. */
static int bench_int(const char *s, const char *opt, long lo, long hi)
{
    long v = 0;

    if (bench_args_int(s, lo, hi, &v) != 0) {
        bench_usage_error("%s takes an integer from %ld to %ld, not '%s'", opt, lo, hi, s);
    }
    return (int)v;
}

/* A size (bench_args_size), or a usage error naming the option. */
static size_t bench_parse_size(const char *s, const char *opt)
{
    size_t v = 0;

    if (bench_args_size(s, &v) != 0) {
        bench_usage_error("%s takes a size in bytes from 1 up to 1T, with an optional K, M or G "
                          "suffix (8, 64K, 1M, 1G), not '%s'", opt, s);
    }
    return v;
}

/* ---- bootstrap ---------------------------------------------------------- */

static int bench_allgather(const void *sendbuf, void *recvbuf, size_t bytes, void *arg)
{
#ifdef DFCCL_BENCH_MPI
    return MPI_Allgather(sendbuf, (int)bytes, MPI_BYTE, recvbuf, (int)bytes, MPI_BYTE,
                         MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
#else
    memcpy(recvbuf, sendbuf, bytes);
    return 0;
#endif
}

static double bench_max(double v)
{
#ifdef DFCCL_BENCH_MPI
    double m;
    MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
#else
    return v;
#endif
}

static long bench_sum(long v)
{
#ifdef DFCCL_BENCH_MPI
    long s;
    MPI_Allreduce(&v, &s, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    return s;
#else
    return v;
#endif
}

static void bench_barrier(void)
{
#ifdef DFCCL_BENCH_MPI
    MPI_Barrier(MPI_COMM_WORLD);
#endif
}

/* ---- memory ------------------------------------------------------------- */

/* `bytes` of device (or host) memory for `what`, zeroed; dies naming it. */
static void *bench_alloc_for(bench_t *b, size_t bytes, const char *what)
{
    void *p = NULL;

#ifdef HAVE_CUDART
    if (b->on_gpu) {
        if (cudaMalloc(&p, bytes) != cudaSuccess) {
            bench_die("cudaMalloc of %s failed", what);
        }
        cudaMemset(p, 0, bytes);
        return p;
    }
#endif
    if (posix_memalign(&p, 4096, bytes) != 0) {
        bench_die("cannot allocate %s", what);
    }
    memset(p, 0, bytes);
    return p;
}

static void *bench_alloc(bench_t *b, size_t bytes)
{
    return bench_alloc_for(b, bytes, "the benchmark buffers");
}

static void bench_free(bench_t *b, void *p)
{
#ifdef HAVE_CUDART
    if (b->on_gpu) {
        cudaFree(p);
        return;
    }
#endif
    free(p);
}

static void bench_copy(bench_t *b, void *dst, const void *src, size_t bytes)
{
#ifdef HAVE_CUDART
    if (b->on_gpu) {
        /* complete on return: a cudaMemcpy from pageable memory may return
         * before its data lands, and the daemon is not ordered after it */
        if (cudaMemcpy(dst, src, bytes, cudaMemcpyDefault) != cudaSuccess ||
            cudaStreamSynchronize(cudaStreamLegacy) != cudaSuccess) {
            bench_die("cudaMemcpy failed");
        }
        return;
    }
#endif
    memcpy(dst, src, bytes);
}

/* Poison a result buffer before a checked call. */
static void bench_clear(bench_t *b, void *p, size_t bytes)
{
#ifdef HAVE_CUDART
    if (b->on_gpu) {
        cudaMemset(p, 0xa5, bytes);
        cudaDeviceSynchronize();
        return;
    }
#endif
    memset(p, 0xa5, bytes);
}

/* ---- data and checking -------------------------------------------------- */

/* Input element i of rank r: small integers, exact in every type and op
 * (prod uses 1 and 2 only). */
static double bench_value(const bench_opts_t *o, int r, size_t i)
{
    if (o->op == DFCCL_PROD) {
        return (double)(1 + ((i + (size_t)r) % 5 == 0));
    }
    return (double)(1 + (i * 3 + (size_t)r * 5) % 11);
}

static void bench_store(int dtype, void *p, size_t i, double v)
{
    switch (dtype) {
    case DFCCL_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
    case DFCCL_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case DFCCL_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
    case DFCCL_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case DFCCL_INT64: ((int64_t *)p)[i] = (int64_t)v; break;
    case DFCCL_UINT64: ((uint64_t *)p)[i] = (uint64_t)v; break;
    case DFCCL_FLOAT16: ((uint16_t *)p)[i] = dfccl_float_to_half((float)v); break;
    case DFCCL_BFLOAT16: ((uint16_t *)p)[i] = dfccl_float_to_bf16((float)v); break;
    case DFCCL_FLOAT32: ((float *)p)[i] = (float)v; break;
    default: ((double *)p)[i] = v; break;
    }
}

static double bench_load(int dtype, const void *p, size_t i)
{
    switch (dtype) {
    case DFCCL_INT8: return ((const int8_t *)p)[i];
    case DFCCL_UINT8: return ((const uint8_t *)p)[i];
    case DFCCL_INT32: return ((const int32_t *)p)[i];
    case DFCCL_UINT32: return ((const uint32_t *)p)[i];
    case DFCCL_INT64: return (double)((const int64_t *)p)[i];
    case DFCCL_UINT64: return (double)((const uint64_t *)p)[i];
    case DFCCL_FLOAT16: return dfccl_half_to_float(((const uint16_t *)p)[i]);
    case DFCCL_BFLOAT16: return dfccl_bf16_to_float(((const uint16_t *)p)[i]);
    case DFCCL_FLOAT32: return ((const float *)p)[i];
    default: return ((const double *)p)[i];
    }
}

/* Expected reduction of element i over all ranks, stored and reloaded in
 * the type (so integer wrap-around and rounding match). */
static double bench_expect_red(const bench_opts_t *o, int nranks, size_t i)
{
    double acc = bench_value(o, 0, i), tmp[1];

    for (int r = 1; r < nranks; r++) {
        double v = bench_value(o, r, i);
        switch (o->op) {
        case DFCCL_PROD: acc *= v; break;
        case DFCCL_MIN: acc = v < acc ? v : acc; break;
        case DFCCL_MAX: acc = v > acc ? v : acc; break;
        default: acc += v; break;
        }
    }
    if (o->op == DFCCL_AVG) {
        acc /= nranks;
    }
    bench_store(o->dtype, tmp, 0, acc);
    return bench_load(o->dtype, tmp, 0);
}

/* Input element i of rank r, stored and reloaded in the type. */
static double bench_expect_one(const bench_opts_t *o, int r, size_t i)
{
    double tmp[1];

    bench_store(o->dtype, tmp, 0, bench_value(o, r, i));
    return bench_load(o->dtype, tmp, 0);
}

static int bench_close(int dtype, double got, double want)
{
    double tol = dtype == DFCCL_FLOAT16 ? 1e-3 : dtype == DFCCL_BFLOAT16 ? 1e-2 : 1e-6;
    return fabs(got - want) <= tol * fabs(want) + 1e-12;
}

/* ---- all-to-all --------------------------------------------------------- */

/* Element e of the block rank `from` sends rank `to`, small enough for
 * int8: the block of another sender for us, or that of our sender for
 * another rank, differs from it in every element (7 and 31 are invertible
 * mod 113). */
static double bench_a2a_value(int from, int to, size_t e)
{
    return (double)(1 + (e + (size_t)from * 7 + (size_t)to * 31) % 113);
}

/* The elements rank i sends rank j when the all-to-all's count per pair is
 * c: c, or alltoallv's uneven count (the header comment says which). */
static size_t bench_pair_count(const bench_opts_t *o, int n, int i, int j, size_t c)
{
    long long k = (i + j) % n;

    if (o->coll != DFCCL_KIND_ALLTOALLV) {
        return c;
    }
    /* |(2k - (n - 1)) / (2n)| < 1/2: never below c / 2 */
    return (size_t)((long long)c + (2 * k - (n - 1)) * (long long)c / (2LL * n));
}

/* This rank's counts and displacements for count c per pair, blocks packed
 * in rank order; returns the elements it sends (n * c, as it receives). */
static size_t bench_a2a_layout(bench_t *b, const bench_opts_t *o, size_t c)
{
    size_t sent = 0, got = 0;

    for (int q = 0; q < b->nranks; q++) {
        b->scnt[q] = bench_pair_count(o, b->nranks, b->rank, q, c);
        b->rcnt[q] = bench_pair_count(o, b->nranks, q, b->rank, c);
        b->sdsp[q] = sent;
        b->rdsp[q] = got;
        sent += b->scnt[q];
        got += b->rcnt[q];
    }
    if (sent != c * (size_t)b->nranks || got != sent) {
        bench_die("alltoallv's counts do not add up to n times the count per pair");
    }
    return sent;
}

/* Element counts of a size: `count` as printed (whole buffer; all-to-all:
 * all that a rank sends), and the per-call count dfccl registers (all-to-all:
 * per pair). */
static void bench_counts(const bench_opts_t *o, int nranks, size_t bytes, size_t *count_p,
                         size_t *reg_p, size_t *in_p, size_t *out_p)
{
    size_t esz   = dfccl_dtype_size(o->dtype);
    size_t count = bytes / esz, per;

    if (bench_is_a2a(o)) { /* n blocks out, n in (alltoallv's add up the same) */
        per    = count / (size_t)nranks;
        count  = per * (size_t)nranks;
        *reg_p = per;
        *in_p = *out_p = count;
    } else if (o->coll == 1 || o->coll == 2) { /* allgather, reducescatter */
        per   = count / (size_t)nranks;
        count = per * (size_t)nranks;
        *reg_p = per;
        *in_p  = o->coll == 1 ? per : count;
        *out_p = o->coll == 1 ? count : per;
    } else {
        *reg_p = *in_p = *out_p = count;
    }
    *count_p = count;
}

static void bench_fill(bench_t *b, const bench_opts_t *o, size_t in)
{
    size_t esz = dfccl_dtype_size(o->dtype);

    if (bench_is_a2a(o)) { /* the layout of the size being run */
        for (int q = 0; q < b->nranks; q++) {
            for (size_t e = 0; e < b->scnt[q]; e++) {
                bench_store(o->dtype, b->host, b->sdsp[q] + e, bench_a2a_value(b->rank, q, e));
            }
        }
        bench_copy(b, b->sbuf, b->host, in * esz);
        return;
    }
    for (size_t i = 0; i < in; i++) {
        /* allgather: this rank's block of the gathered vector */
        size_t gi = o->coll == 1 ? (size_t)b->rank * in + i : i;
        bench_store(o->dtype, b->host, i, bench_value(o, b->rank, gi));
    }
    bench_copy(b, b->sbuf, b->host, in * esz);
}

static long bench_check(bench_t *b, const bench_opts_t *o, size_t reg, size_t out)
{
    size_t esz = dfccl_dtype_size(o->dtype);
    long wrong = 0;

    if (o->coll == 3 && b->rank != o->root) { /* reduce: only the root has a result */
        return 0;
    }
    bench_copy(b, b->host, b->rbuf, out * esz);
    if (bench_is_a2a(o)) { /* every element of every block received */
        double tmp[1];
        for (int q = 0; q < b->nranks; q++) {
            for (size_t e = 0; e < b->rcnt[q]; e++) {
                bench_store(o->dtype, tmp, 0, bench_a2a_value(q, b->rank, e));
                wrong += !bench_close(o->dtype, bench_load(o->dtype, b->host, b->rdsp[q] + e),
                                      bench_load(o->dtype, tmp, 0));
            }
        }
        return wrong;
    }
    for (size_t i = 0; i < out; i++) {
        double want, got = bench_load(o->dtype, b->host, i);
        switch (o->coll) {
        case 1: want = bench_expect_one(o, (int)(i / reg), i); break;
        case 2: want = bench_expect_red(o, b->nranks, (size_t)b->rank * reg + i); break;
        case 4: want = bench_expect_one(o, o->root, i); break;
        default: want = bench_expect_red(o, b->nranks, i); break;
        }
        wrong += !bench_close(o->dtype, got, want);
    }
    return wrong;
}

/* ---- running ------------------------------------------------------------ */

static void bench_dfccl_post(bench_t *b, const bench_opts_t *o, int id, const void *in,
                             void *out)
{
    dfccl_status_t st;

    switch (o->coll) {
    case 0: st = dfcclRunAllReduce(in, out, id, NULL, NULL, b->ctx); break;
    case 1: st = dfcclRunAllGather(in, out, id, NULL, NULL, b->ctx); break;
    case 2: st = dfcclRunReduceScatter(in, out, id, NULL, NULL, b->ctx); break;
    case 3: st = dfcclRunReduce(in, out, id, NULL, NULL, b->ctx); break;
    case 5: st = dfcclRunAllToAll(in, out, id, NULL, NULL, b->ctx); break;
    case 6: st = dfcclRunAllToAllv(in, out, id, NULL, NULL, b->ctx); break;
    default: st = dfcclRunBroadcast(in, out, id, NULL, NULL, b->ctx); break;
    }
    if (st != DFCCL_OK) {
        bench_die("dfccl collective failed: %s", dfcclGetLastErrorMessage());
    }
}

static void bench_dfccl_wait(bench_t *b, int id)
{
    if (dfcclWait(id, 120000, b->ctx) != DFCCL_OK) {
        bench_die("dfccl collective failed: %s", dfcclGetLastErrorMessage());
    }
}

static void bench_dfccl_run(bench_t *b, const bench_opts_t *o, int id)
{
    bench_dfccl_post(b, o, id, b->sbuf, b->rbuf);
    bench_dfccl_wait(b, id);
}

static int bench_dfccl_register(bench_t *b, const bench_opts_t *o, size_t reg)
{
    dfccl_status_t st;
    int id = -1;

    switch (o->coll) {
    case 0:
        if (o->straggler) {
            dfccl_coll_desc_t d;

            memset(&d, 0, sizeof(d));
            d.kind              = DFCCL_KIND_ALLREDUCE;
            d.count             = reg;
            d.type              = (dfccl_datatype_t)o->dtype;
            d.op                = (dfccl_op_t)o->op;
            d.flags             = DFCCL_COLL_STRAGGLER;
            d.straggler_wait_us = (uint32_t)o->straggler_wait_us;
            st = dfcclRegister(&d, b->group, &id);
            break;
        }
        st = dfcclRegisterAllReduce(reg, o->dtype, o->op, b->group, 0, &id);
        break;
    case 1: st = dfcclRegisterAllGather(reg, o->dtype, b->group, 0, &id); break;
    case 2: st = dfcclRegisterReduceScatter(reg, o->dtype, o->op, b->group, 0, &id); break;
    case 3: st = dfcclRegisterReduce(reg, o->dtype, o->op, o->root, b->group, 0, &id); break;
    case 5: st = dfcclRegisterAllToAll(reg, o->dtype, b->group, 0, &id); break;
    case 6: /* the counts of bench_a2a_layout, set for this size */
        st = dfcclRegisterAllToAllv(b->scnt, b->sdsp, b->rcnt, b->rdsp, o->dtype, b->group, 0,
                                    &id);
        break;
    default: st = dfcclRegisterBroadcast(reg, o->dtype, o->root, b->group, 0, &id); break;
    }
    if (st != DFCCL_OK) {
        bench_die("registration failed: %s", dfcclGetLastErrorMessage());
    }
    return id;
}

#ifdef DFCCL_BENCH_NCCL
static const ncclDataType_t nccl_types[] = {ncclInt8, ncclUint8, ncclInt32, ncclUint32,
                                            ncclInt64, ncclUint64, ncclFloat16, ncclBfloat16,
                                            ncclFloat32, ncclFloat64};
static const ncclRedOp_t nccl_ops[] = {ncclSum, ncclProd, ncclMin, ncclMax, ncclAvg};

/* An all-to-all on NCCL: to and from every rank (this one too) a ncclSend
 * of our block for it and a ncclRecv of its block for us, with the counts
 * and displacements of bench_a2a_layout, fused into one launch by the
 * group. */
static ncclResult_t bench_nccl_alltoall(bench_t *b, ncclDataType_t t, size_t esz)
{
    ncclResult_t r = ncclGroupStart(), end;

    for (int q = 0; q < b->nranks && r == ncclSuccess; q++) {
        r = ncclSend((const char *)b->sbuf + b->sdsp[q] * esz, b->scnt[q], t, q, b->comm,
                     b->stream);
        if (r == ncclSuccess) {
            r = ncclRecv((char *)b->rbuf + b->rdsp[q] * esz, b->rcnt[q], t, q, b->comm,
                         b->stream);
        }
    }
    end = ncclGroupEnd(); /* always, to close the group */
    return r != ncclSuccess ? r : end;
}

/* What a failed collective of o->coll was called, for its message. */
static const char *const nccl_call_names[] = {"ncclAllReduce",     "ncclAllGather",
                                              "ncclReduceScatter", "ncclReduce",
                                              "ncclBroadcast",     "ncclSend/ncclRecv group",
                                              "ncclSend/ncclRecv group"};

/* A CUDA or NCCL call of the comparison that failed, named as written:
 * fatal ends the run, else it is said and the caller goes on (teardown). */
static void bench_call_failed(const char *call, const char *err, int fatal)
{
    if (fatal) {
        bench_die("%s failed: %s", call, err);
    }
    fprintf(stderr, "dfccl-bench: %s failed: %s\n", call, err);
}

#define BENCH_CUDA(_call, _fatal)                                              \
    do {                                                                       \
        cudaError_t _e = (_call);                                              \
        if (_e != cudaSuccess) {                                               \
            bench_call_failed(#_call, cudaGetErrorString(_e), (_fatal));       \
        }                                                                      \
    } while (0)

#define BENCH_NCCL(_call, _fatal)                                              \
    do {                                                                       \
        ncclResult_t _r = (_call);                                             \
        if (_r != ncclSuccess) {                                               \
            bench_call_failed(#_call, ncclGetErrorString(_r), (_fatal));       \
        }                                                                      \
    } while (0)

/* The collective on b->sbuf and b->rbuf, enqueued on the stream. */
static ncclResult_t bench_nccl_post(bench_t *b, const bench_opts_t *o, size_t reg)
{
    ncclDataType_t t = nccl_types[o->dtype];
    ncclRedOp_t op   = nccl_ops[o->op];

    switch (o->coll) {
    case 0: return ncclAllReduce(b->sbuf, b->rbuf, reg, t, op, b->comm, b->stream);
    case 1: return ncclAllGather(b->sbuf, b->rbuf, reg, t, b->comm, b->stream);
    case 2: return ncclReduceScatter(b->sbuf, b->rbuf, reg, t, op, b->comm, b->stream);
    case 3: return ncclReduce(b->sbuf, b->rbuf, reg, t, op, o->root, b->comm, b->stream);
    case 5: case 6: return bench_nccl_alltoall(b, t, dfccl_dtype_size(o->dtype));
    default: return ncclBroadcast(b->sbuf, b->rbuf, reg, t, o->root, b->comm, b->stream);
    }
}

/* One call of variant v, timed as dfccl's run and wait are: the collective
 * (nccl-graph: a launch of the size's graph), then the stream synchronized. */
static void bench_nccl_run(bench_t *b, const bench_opts_t *o, int v, size_t reg)
{
    if (v == BENCH_NCCL_GRAPH) {
        BENCH_CUDA(cudaGraphLaunch(b->graph_exec, b->stream), 1);
    } else {
        ncclResult_t r = bench_nccl_post(b, o, reg);

        if (r != ncclSuccess) {
            bench_die("%s (--compare %s) failed: %s", nccl_call_names[o->coll],
                      nccl_variant_names[v], ncclGetErrorString(r));
        }
    }
    BENCH_CUDA(cudaStreamSynchronize(b->stream), 1);
}

/*
 * Whether variant v can run on every rank: `why` is this rank's reason it
 * cannot, or empty. If any rank cannot, rank 0 says so in one line, with
 * the first such rank's reason, and the variant is off from here on (its
 * column shows -). `where` (may be empty) says from which size.
 */
static int bench_nccl_agree(bench_t *b, int v, const char *where, const char *why)
{
    int mine = why[0] != '\0' ? b->rank : b->nranks, first;
    char msg[256];

    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first == b->nranks) {
        return 1;
    }
    snprintf(msg, sizeof(msg), "%s", why);
    MPI_Bcast(msg, (int)sizeof(msg), MPI_CHAR, first, MPI_COMM_WORLD);
    if (b->rank == 0) {
        printf("# --compare %s cannot run%s on rank %d: %s; its column shows -\n",
               nccl_variant_names[v], where, first, msg);
        fflush(stdout);
    }
    b->nccl_off |= BENCH_NCCL_BIT(v);
    return 0;
}

/* nccl-graph: the size's collective (an all-to-all's whole group) captured
 * on the stream and instantiated, before its timed calls. On failure, why
 * gets this rank's reason and nothing is kept. */
static void bench_graph_capture(bench_t *b, const bench_opts_t *o, size_t reg, char *why,
                                size_t len)
{
    cudaError_t e;
    ncclResult_t r;

    /* thread-local: dfccl's own threads go on using CUDA meanwhile */
    e = cudaStreamBeginCapture(b->stream, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) {
        snprintf(why, len, "cudaStreamBeginCapture failed: %s", cudaGetErrorString(e));
        return;
    }
    r = bench_nccl_post(b, o, reg);
    e = cudaStreamEndCapture(b->stream, &b->graph); /* always, to end the capture */
    if (r != ncclSuccess) {
        snprintf(why, len, "%s failed while captured: %s", nccl_call_names[o->coll],
                 ncclGetErrorString(r));
    } else if (e != cudaSuccess) {
        snprintf(why, len, "cudaStreamEndCapture failed: %s", cudaGetErrorString(e));
    } else if ((e = cudaGraphInstantiateWithFlags(&b->graph_exec, b->graph, 0)) !=
               cudaSuccess) {
        b->graph_exec = NULL;
        snprintf(why, len, "cudaGraphInstantiateWithFlags failed: %s", cudaGetErrorString(e));
    } else {
        return;
    }
    if (b->graph != NULL) {
        BENCH_CUDA(cudaGraphDestroy(b->graph), 0);
        b->graph = NULL;
    }
}

/* nccl-graph: the size's graph, once its calls are done. */
static void bench_graph_free(bench_t *b)
{
    if (b->graph_exec != NULL) {
        BENCH_CUDA(cudaGraphExecDestroy(b->graph_exec), 1);
        b->graph_exec = NULL;
    }
    if (b->graph != NULL) {
        BENCH_CUDA(cudaGraphDestroy(b->graph), 1);
        b->graph = NULL;
    }
}

/*
 * nccl-sym's buffers: a send and a receive buffer of `bytes` (-e, rounded
 * up to a page) from ncclMemAlloc, each registered as a symmetric window.
 * Registration is collective: the ranks first agree that each has its
 * memory, then that each has both windows. If any cannot, the variant is
 * off; windows some ranks did get go with the communicator.
 */
static void bench_sym_setup(bench_t *b, size_t bytes)
{
    char why[256] = "";
#ifdef DFCCL_BENCH_NCCL_SYM
    int ver = 0;
    ncclResult_t r;

    b->sym_bytes = (bytes + 4095) & ~(size_t)4095; /* NCCL_WIN_REQUIRED_ALIGNMENT in 2.28 */
    if ((r = ncclGetVersion(&ver)) != ncclSuccess) {
        snprintf(why, sizeof(why), "ncclGetVersion failed: %s", ncclGetErrorString(r));
    } else if (ver < NCCL_VERSION(2, 27, 3)) {
        snprintf(why, sizeof(why), "the NCCL library loaded is %d.%d.%d, and symmetric "
                 "windows need 2.27.3 or later", ver / 10000, ver / 100 % 100, ver % 100);
    } else if ((r = ncclMemAlloc(&b->sym_sbuf, b->sym_bytes)) != ncclSuccess ||
               (r = ncclMemAlloc(&b->sym_rbuf, b->sym_bytes)) != ncclSuccess) {
        snprintf(why, sizeof(why), "ncclMemAlloc of %zu bytes failed: %s", b->sym_bytes,
                 ncclGetErrorString(r));
    }
    if (!bench_nccl_agree(b, BENCH_NCCL_SYM, "", why)) {
        return;
    }
    r = ncclCommWindowRegister(b->comm, b->sym_sbuf, b->sym_bytes, &b->sym_swin,
                               NCCL_WIN_COLL_SYMMETRIC);
    if (r == ncclSuccess) {
        r = ncclCommWindowRegister(b->comm, b->sym_rbuf, b->sym_bytes, &b->sym_rwin,
                                   NCCL_WIN_COLL_SYMMETRIC);
    }
    if (r != ncclSuccess) {
        snprintf(why, sizeof(why), "ncclCommWindowRegister failed: %s (NCCL_DEBUG=WARN says "
                 "why)", ncclGetErrorString(r));
    } else if (b->sym_swin == NULL || b->sym_rwin == NULL) {
        snprintf(why, sizeof(why), "ncclCommWindowRegister gave no window: NCCL cannot make "
                 "symmetric windows on these GPUs (NCCL_DEBUG=INFO says why)");
    }
    b->sym_windows = bench_nccl_agree(b, BENCH_NCCL_SYM, "", why);
#else
    (void)bytes;
    snprintf(why, sizeof(why), "dfccl-bench was built with NCCL %d.%d, and symmetric windows "
             "need 2.27.3 or later", NCCL_MAJOR, NCCL_MINOR);
    bench_nccl_agree(b, BENCH_NCCL_SYM, "", why);
#endif
}

/* NCCL's side of the teardown: windows (on every rank, as they were
 * registered), the communicator, then nccl-sym's memory and the stream. A
 * failure is said and the rest goes on. */
static void bench_nccl_finish(bench_t *b)
{
#ifdef DFCCL_BENCH_NCCL_SYM
    if (b->sym_windows) {
        BENCH_NCCL(ncclCommWindowDeregister(b->comm, b->sym_swin), 0);
        BENCH_NCCL(ncclCommWindowDeregister(b->comm, b->sym_rwin), 0);
    }
#endif
    BENCH_NCCL(ncclCommDestroy(b->comm), 0);
#ifdef DFCCL_BENCH_NCCL_SYM
    if (b->sym_sbuf != NULL) {
        BENCH_NCCL(ncclMemFree(b->sym_sbuf), 0);
    }
    if (b->sym_rbuf != NULL) {
        BENCH_NCCL(ncclMemFree(b->sym_rbuf), 0);
    }
#endif
    BENCH_CUDA(cudaStreamDestroy(b->stream), 0);
}
#endif

/* One call whose time, with --stats, counts towards (_b)->slowest and is
 * kept for the percentiles. */
#define BENCH_CALL(_b, _o, _call)                                              \
    do {                                                                       \
        double _c0 = (_o)->stats ? bench_now_us() : 0.0;                       \
        _call;                                                                 \
        if ((_o)->stats) {                                                     \
            double _d = bench_now_us() - _c0;                                  \
            (_b)->slowest = _d > (_b)->slowest ? _d : (_b)->slowest;           \
            if ((_b)->ncalls < (_o)->iters) {                                  \
                (_b)->calls[(_b)->ncalls++] = _d;                              \
            }                                                                  \
        }                                                                      \
    } while (0)

static int bench_cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, c = *(const double *)y;

    return a < c ? -1 : a > c;
}

/* With --stats, the daemon's counters into *s (s may be NULL). */
static void bench_mark(bench_t *b, const bench_opts_t *o, dfccl_stats_t *s)
{
    if (o->stats && s != NULL) {
        dfcclGetStats(b->ctx, s);
    }
}

/* Mean time per call (us) of the slowest rank; fn runs one call. With
 * --stats each timed call is also timed alone (two clock reads more), and
 * _s_p[0] and _s_p[1] (unless _s_p is NULL) get the daemon's counters
 * around the timed calls: the warm-up calls are left out, the first of
 * which waits for every rank to arrive (a rank still filling its buffers
 * keeps its peers' daemons stuck, quitting and being relaunched). */
#define BENCH_TIME(_b, _o, _call, _t_p, _s_p)                                  \
    do {                                                                       \
        double _t0;                                                            \
        for (int _i = 0; _i < (_o)->warmup; _i++) {                            \
            _call;                                                             \
        }                                                                      \
        (_b)->slowest = 0.0;                                                   \
        (_b)->ncalls  = 0;                                                     \
        bench_barrier();                                                       \
        bench_mark(_b, _o, (_s_p));                                            \
        if ((_o)->cold_us > 0 || (_o)->late_us > 0 || (_o)->barrier) {         \
            /* each call after an idle gap (the daemon has quit), with the \
             * last rank late (the others wait for it), or right after a   \
             * barrier (as OSU times a call) */                               \
            double _sum = 0;                                                   \
            for (int _i = 0; _i < (_o)->iters; _i++) {                         \
                bench_barrier();                                               \
                if ((_o)->cold_us > 0) {                                       \
                    usleep((useconds_t)(_o)->cold_us);                         \
                }                                                              \
                if ((_o)->late_us > 0 && (_b)->rank == (_b)->nranks - 1) {     \
                    usleep((useconds_t)(_o)->late_us);                         \
                }                                                              \
                _t0 = bench_now_us();                                          \
                BENCH_CALL(_b, _o, _call);                                     \
                _sum += bench_now_us() - _t0;                                  \
            }                                                                  \
            bench_mark(_b, _o, (_s_p) != NULL ? (_s_p) + 1 : NULL);            \
            *(_t_p) = bench_max(_sum / (_o)->iters);                           \
            break;                                                             \
        }                                                                      \
        _t0 = bench_now_us();                                                  \
        for (int _i = 0; _i < (_o)->iters; _i++) {                             \
            BENCH_CALL(_b, _o, _call);                                         \
        }                                                                      \
        _t0 = bench_now_us() - _t0;                                            \
        bench_mark(_b, _o, (_s_p) != NULL ? (_s_p) + 1 : NULL);                \
        *(_t_p) = bench_max(_t0 / (_o)->iters);                                \
    } while (0)

/* --stats: one library's timed calls, us: this rank's median and 99th
 * percentile (nearest rank) and slowest, each then the largest over the
 * ranks. */
typedef struct {
    double p50, p99, slowest;
} bench_calls_t;

static bench_calls_t bench_calls(bench_t *b)
{
    bench_calls_t c = {0.0, 0.0, 0.0};

    if (b->ncalls > 0) {
        qsort(b->calls, (size_t)b->ncalls, sizeof(double), bench_cmp_double);
        c.p50 = b->calls[(b->ncalls - 1) / 2];
        c.p99 = b->calls[(size_t)((b->ncalls - 1) * 0.99 + 0.5)];
    }
    c.p50     = bench_max(c.p50);
    c.p99     = bench_max(c.p99);
    c.slowest = bench_max(b->slowest);
    return c;
}

/* A size of the sweep that runs nothing (fewer elements than ranks, where
 * each rank's part is whole elements) says so, rather than leaving a gap. */
static void bench_skip_note(const bench_t *b, const bench_opts_t *o, size_t bytes)
{
    if (b->rank == 0) {
        printf("# %zu bytes: skipped: less than one %s element per rank on %d ranks\n", bytes,
               type_names[o->dtype], b->nranks);
    }
}

/*
 * --stats: after a size's row, a comment line with the median, 99th
 * percentile and slowest of the timed calls (each the slowest rank's;
 * with --compare, those of NCCL's variant cn_name too: the fastest one)
 * and what the daemon did
 * during the timed calls (the most on any rank): launches, and of them
 * those of a stuck daemon that news from a peer brought forward; voluntary
 * quits of blocks, preemptions and context loads. A call much
 * slower than the mean with launches or quits beside it waited for a
 * relaunch; with preemptions, for a peer.
 */
static void bench_print_stats(bench_t *b, const char *what, const dfccl_stats_t *s0,
                              const dfccl_stats_t *s1, const bench_calls_t *c,
                              const bench_calls_t *cn, const char *cn_name)
{
    double launches = bench_max((double)(s1->launches - s0->launches));
    double bells    = bench_max((double)(s1->peer_relaunches - s0->peer_relaunches));
    double quits    = bench_max((double)(s1->quits - s0->quits));
    double preempt  = bench_max((double)(s1->preemptions - s0->preemptions));
    double loads    = bench_max((double)(s1->context_loads - s0->context_loads));

    if (b->rank == 0) {
        printf("#   %s: median %.1f us, p99 %.1f us, slowest %.1f us", what, c->p50, c->p99,
               c->slowest);
        if (cn != NULL) {
            printf(" (%s %.1f, %.1f, %.1f)", cn_name, cn->p50, cn->p99, cn->slowest);
        }
        printf("; daemon, most on a rank: %.0f launches (%.0f on a peer's bell), %.0f quits, "
               "%.0f preemptions, %.0f context loads\n", launches, bells, quits, preempt, loads);
    }
}

static double bench_busbw_factor(const bench_opts_t *o, int n)
{
    switch (o->coll) {
    case 0: return 2.0 * (n - 1) / n;
    case 1: case 2: case 5: case 6: return (double)(n - 1) / n;
    default: return 1.0;
    }
}

#ifdef DFCCL_BENCH_NCCL
/* Whether the table has more than plain NCCL's columns: any variant but
 * nccl alone. */
static int bench_nccl_multi(const bench_opts_t *o)
{
    return o->nccl != BENCH_NCCL_BIT(BENCH_NCCL_PLAIN);
}

/* Short names of the variants for the table's columns, and what each is. */
static const char *const nccl_variant_cols[] = {"nccl", "sym", "graph"};
static const char *const nccl_variant_what[] = {
    "nccl: on the bench's buffers", "sym (nccl-sym): on ncclMemAlloc buffers in symmetric windows",
    "graph (nccl-graph): launched from a CUDA graph captured once per size"};

/* Rank 0, above the column names of a table with several variants: what
 * its NCCL columns hold. */
static void bench_nccl_legend(const bench_opts_t *o)
{
    printf("# NCCL's variants, each call followed by cudaStreamSynchronize:\n");
    for (int v = 0; v < BENCH_NCCL_NVARIANTS; v++) {
        if (o->nccl & BENCH_NCCL_BIT(v)) {
            printf("#   %s\n", nccl_variant_what[v]);
        }
    }
    printf("# best time, algbw, busbw: the fastest variant's at the size; best/dfccl: its time "
           "over dfccl's\n# #wrong: all variants' wrong elements (a line after the row splits "
           "them when any)\n");
}

/* One size's NCCL variants: time (us; < 0: it did not run), wrong elements
 * and, with --stats, the calls; best: the fastest that ran, or -1. */
typedef struct {
    double        t[BENCH_NCCL_NVARIANTS];
    long          wrong[BENCH_NCCL_NVARIANTS];
    bench_calls_t calls[BENCH_NCCL_NVARIANTS];
    int           best;
} bench_nccl_res_t;

/*
 * Variant v at one size (`size` bytes, as the row prints it), timed and
 * checked as dfccl is. nccl-sym runs on its own buffers, which it puts in
 * b->sbuf and b->rbuf meanwhile (bench_fill, bench_check and
 * bench_nccl_post take them from there); nccl-graph captures the size's
 * call first. Returns 0, or -1 if the variant could not run (said, and
 * off from here).
 */
static int bench_nccl_variant(bench_t *b, const bench_opts_t *o, int v, size_t size,
                              size_t reg, size_t in, size_t out, bench_nccl_res_t *res)
{
    void *const sbuf = b->sbuf, *const rbuf = b->rbuf;
    const size_t esz = dfccl_dtype_size(o->dtype);
    char why[256] = "", where[48];
    long wrong = 0;
    double t;

    if (v == BENCH_NCCL_SYM) {
        b->sbuf = b->sym_sbuf;
        b->rbuf = b->sym_rbuf;
    }
    bench_fill(b, o, in);
    if (v == BENCH_NCCL_GRAPH) {
        bench_graph_capture(b, o, reg, why, sizeof(why));
        snprintf(where, sizeof(where), " from %zu bytes", size);
        if (!bench_nccl_agree(b, v, where, why)) {
            bench_graph_free(b);
            return -1;
        }
    }
    BENCH_TIME(b, o, bench_nccl_run(b, o, v, reg), &t, NULL);
    if (o->stats) {
        res->calls[v] = bench_calls(b);
    }
    if (o->check) {
        bench_clear(b, b->rbuf, out * esz);
        bench_fill(b, o, in);
        bench_nccl_run(b, o, v, reg);
        wrong = bench_sum(bench_check(b, o, reg, out));
    }
    bench_graph_free(b);
    b->sbuf       = sbuf;
    b->rbuf       = rbuf;
    res->t[v]     = t;
    res->wrong[v] = wrong;
    return 0;
}

/* Every variant asked for that can still run, one after the other. */
static void bench_nccl_size(bench_t *b, const bench_opts_t *o, size_t size, size_t reg,
                            size_t in, size_t out, bench_nccl_res_t *res)
{
    res->best = -1;
    for (int v = 0; v < BENCH_NCCL_NVARIANTS; v++) {
        res->t[v]     = -1.0;
        res->wrong[v] = 0;
        if (!(o->nccl & BENCH_NCCL_BIT(v)) || (b->nccl_off & BENCH_NCCL_BIT(v)) ||
            bench_nccl_variant(b, o, v, size, reg, in, out, res) != 0) {
            continue;
        }
        if (res->best < 0 || res->t[v] < res->t[res->best]) {
            res->best = v;
        }
    }
}

/* The wrong elements of all the variants of a size. */
static long bench_nccl_wrong(const bench_nccl_res_t *res)
{
    long wrong = 0;

    for (int v = 0; v < BENCH_NCCL_NVARIANTS; v++) {
        wrong += res->wrong[v];
    }
    return wrong;
}

/*
 * Rank 0's NCCL columns of a row: the fastest variant's time, algbw,
 * busbw, every variant's wrong elements together and the ratio of its time
 * to dfccl's t (plain NCCL alone: only these, as they always were); with
 * more variants, the fastest one's name and each one's time ('-': it did
 * not run).
 */
static void bench_nccl_print(const bench_opts_t *o, const bench_nccl_res_t *res, double t,
                             double gb, double f)
{
    if (res->best >= 0) {
        const double tn = res->t[res->best];
        printf("  %10.1f %8.2f %8.2f %7ld %7.2f", tn, gb / tn, gb / tn * f,
               bench_nccl_wrong(res), tn / t);
    } else {
        printf("  %10s %8s %8s %7s %7s", "-", "-", "-", "-", "-");
    }
    if (!bench_nccl_multi(o)) {
        return;
    }
    printf("  %-5s", res->best >= 0 ? nccl_variant_cols[res->best] : "-");
    for (int v = 0; v < BENCH_NCCL_NVARIANTS; v++) {
        if (!(o->nccl & BENCH_NCCL_BIT(v))) {
            continue;
        }
        if (res->t[v] >= 0) {
            printf(" %8.1f", res->t[v]);
        } else {
            printf(" %8s", "-");
        }
    }
}

/* Rank 0, after a row whose NCCL variants got wrong elements: how many
 * each (the row has only their sum). */
static void bench_nccl_print_wrong(const bench_opts_t *o, size_t size,
                                   const bench_nccl_res_t *res)
{
    if (bench_nccl_wrong(res) == 0 || !bench_nccl_multi(o)) {
        return;
    }
    printf("#   %zu bytes: wrong elements:", size);
    for (int v = 0, n = 0; v < BENCH_NCCL_NVARIANTS; v++) {
        if (res->t[v] >= 0) {
            printf("%s %s %ld", n++ ? "," : "", nccl_variant_names[v], res->wrong[v]);
        }
    }
    printf("\n");
}
#endif

static void bench_size(bench_t *b, const bench_opts_t *o, size_t bytes)
{
    size_t count, reg, in, out, esz = dfccl_dtype_size(o->dtype);
    double t, tn = -1.0, f = bench_busbw_factor(o, b->nranks), gb; /* tn: NCCL's best time */
    bench_calls_t calls = {0, 0, 0};
    const bench_calls_t *cn = NULL; /* NCCL's best variant's, once timed */
    const char *cn_name = "NCCL";
#ifdef DFCCL_BENCH_NCCL
    bench_nccl_res_t res;
#endif
    dfccl_stats_t s[2];
    long wrong = 0;
    int id;

    bench_counts(o, b->nranks, bytes, &count, &reg, &in, &out);
    if (reg == 0) {
        bench_skip_note(b, o, bytes);
        return;
    }
    if (bench_is_a2a(o)) { /* the elements this rank sends */
        count = bench_a2a_layout(b, o, reg);
    }
    gb = (double)(count * esz) / 1e3; /* bytes / us = GB/s after / 1e3 */
    id = bench_dfccl_register(b, o, reg);
    bench_fill(b, o, in);
    BENCH_TIME(b, o, bench_dfccl_run(b, o, id), &t, s);
    if (o->stats) {
        calls = bench_calls(b);
    }
    if (o->check) {
        bench_clear(b, b->rbuf, out * esz);
        bench_fill(b, o, in);
        bench_dfccl_run(b, o, id);
        wrong = bench_sum(bench_check(b, o, reg, out));
    }
    /* Kept registered until the end: connector memory is not reused while
     * a peer may still be finishing its last call. */
    b->ids[b->nids++] = id;
#ifdef DFCCL_BENCH_NCCL
    if (o->nccl) {
        /* before the row is printed: a variant that cannot run says so */
        bench_nccl_size(b, o, count * esz, reg, in, out, &res);
        if (res.best >= 0) {
            tn = res.t[res.best];
            if (o->stats) {
                cn      = &res.calls[res.best];
                cn_name = bench_nccl_multi(o) ? nccl_variant_names[res.best] : "NCCL";
            }
        }
    }
#endif
    if (b->rank == 0) {
        dfccl_coll_info_t info;

        printf("%12zu %12zu %8s %6s %10.1f %8.2f %8.2f %7ld", count * esz, count,
               type_names[o->dtype], bench_has_op(o) ? op_names[o->op] : "none", t, gb / t,
               gb / t * f, wrong);
#ifdef DFCCL_BENCH_NCCL
        if (o->nccl) {
            bench_nccl_print(o, &res, t, gb, f);
        }
#endif
        /* the algorithm that ran (NCCL tells only with NCCL_DEBUG=INFO) */
        if (dfcclGetCollInfo(id, b->ctx, &info) == DFCCL_OK) {
            printf("  %s/%d/%s", info.algo, info.nchannels, info.proto);
            if (info.straggler) {
                printf(" wait %u us, %llu split", info.straggler_wait_us,
                       (unsigned long long)info.split_runs);
            }
        }
        printf("\n");
#ifdef DFCCL_BENCH_NCCL
        if (o->nccl) {
            bench_nccl_print_wrong(o, count * esz, &res);
        }
#endif
    }
    if (o->stats) {
        bench_print_stats(b, "calls", &s[0], &s[1], &calls, cn, cn_name);
    }
    if (b->rank == 0) {
        fflush(stdout);
    }
    if (b->plot != NULL) {
        bench_plot_add(b->plot, (double)(count * esz), t, gb / t * f, tn,
                       tn > 0 ? gb / tn * f : -1.0);
    }
}

/* ---- --algos: every algorithm that can run a size, predicted and measured */

/* dfccl_algo_choice_t's names (DFCCL_ALGO's values) */
static const char *const algo_names[] = {"auto", "ring",  "oneshot", "twoshot",
                                         "mesh", "msccl", "tree",    "ctree"};
#define BENCH_NALGOS ((int)(sizeof(algo_names) / sizeof(algo_names[0])))

/* What --algos sums over the sizes: the model's relative errors, and the
 * measured time of the tuner's and of the static thresholds' picks against
 * the best measured one. */
typedef struct {
    double err_sum, err_worst;
    int    nerr;
    double pick_worst, static_worst; /* largest pick / best */
    int    pick_slower;              /* sizes where the pick took longer than static's */
    int    sizes;
} bench_algos_t;

/* One size: a row per algorithm that can run it (registered with that
 * algorithm through dfcclRegister), then a line saying which the tuner
 * (DFCCL_TUNER) and the static thresholds pick and which was fastest. */
static void bench_algos_size(bench_t *b, const bench_opts_t *o, size_t bytes, bench_algos_t *acc)
{
    const size_t esz    = dfccl_dtype_size(o->dtype);
    dfccl_coll_desc_t d = {(dfccl_coll_kind_t)o->coll, 0, (dfccl_datatype_t)o->dtype,
                           (dfccl_op_t)o->op, o->root, 0, DFCCL_ALGO_AUTO, 0, 0};
    dfccl_algo_choice_t pick = DFCCL_ALGO_AUTO, spick = DFCCL_ALGO_AUTO;
    double meas[BENCH_NALGOS], pred[BENCH_NALGOS];
    size_t count, reg, in, out;
    int best = -1;

    bench_counts(o, b->nranks, bytes, &count, &reg, &in, &out);
    if (reg == 0) {
        return;
    }
    if (bench_is_a2a(o)) {
        count = bench_a2a_layout(b, o, reg);
    }
    d.count = reg;
    if (dfcclPredict(b->group, &d, -1, &pick, NULL) != DFCCL_OK ||
        dfcclPredict(b->group, &d, DFCCL_TUNER_STATIC, &spick, NULL) != DFCCL_OK) {
        bench_die("dfcclPredict: %s", dfcclGetLastErrorMessage());
    }
    for (int a = 1; a < BENCH_NALGOS; a++) {
        dfccl_coll_info_t info;
        char marks[32];
        long wrong = 0;
        double t, err;
        int id;

        meas[a] = -1.0;
        d.algo  = (dfccl_algo_choice_t)a;
        /* the same answer on every rank: all run the same algorithms */
        if (dfcclPredict(b->group, &d, -1, NULL, &pred[a]) != DFCCL_OK) {
            continue;
        }
        if (dfcclRegister(&d, b->group, &id) != DFCCL_OK) {
            bench_die("registration failed: %s", dfcclGetLastErrorMessage());
        }
        bench_fill(b, o, in);
        BENCH_TIME(b, o, bench_dfccl_run(b, o, id), &t, NULL);
        if (o->check) {
            bench_clear(b, b->rbuf, out * esz);
            bench_fill(b, o, in);
            bench_dfccl_run(b, o, id);
            wrong = bench_sum(bench_check(b, o, reg, out));
        }
        if (dfcclGetCollInfo(id, b->ctx, &info) != DFCCL_OK) {
            info.algo = "?";
            info.nchannels = 0;
            info.proto = "?";
        }
        /* every rank has finished its calls: its connectors may go */
        bench_barrier();
        dfcclDeregister(id, b->ctx);
        meas[a] = t;
        if (best < 0 || t < meas[best]) {
            best = a;
        }
        err = (pred[a] - t) / t;
        acc->err_sum += fabs(err);
        acc->nerr++;
        acc->err_worst = fabs(err) > acc->err_worst ? fabs(err) : acc->err_worst;
        snprintf(marks, sizeof(marks), "%s%s", a == (int)pick ? "pick" : "",
                 a == (int)spick ? (a == (int)pick ? ",static" : "static") : "");
        if (b->rank == 0) {
            printf("%12zu %12zu %8s %10.1f %10.1f %+7.0f%% %7ld  %-12s %s/%d/%s\n",
                   count * esz, count, algo_names[a], pred[a], t, 100.0 * err, wrong,
                   marks[0] != '\0' ? marks : "-", info.algo, info.nchannels, info.proto);
        }
    }
    if (best > 0 && meas[pick] > 0 && meas[spick] > 0) {
        const double rp = meas[pick] / meas[best], rs = meas[spick] / meas[best];

        acc->pick_worst   = rp > acc->pick_worst ? rp : acc->pick_worst;
        acc->static_worst = rs > acc->static_worst ? rs : acc->static_worst;
        acc->pick_slower += meas[pick] > meas[spick];
        acc->sizes++;
        if (b->rank == 0) {
            printf("# %zu bytes: pick %s, static %s, fastest %s; pick / fastest %.2f, "
                   "static / fastest %.2f\n", count * esz, algo_names[pick],
                   algo_names[spick], algo_names[best], rp, rs);
        }
    }
    if (b->rank == 0) {
        fflush(stdout);
    }
}

/* ---- --disorder: N collectives per round, in one order and shuffled ----- */

/* The room of one collective's output in rbuf: each starts 256-aligned. */
static size_t bench_disorder_stride(size_t out_bytes)
{
    return (out_bytes + 255) & ~(size_t)255;
}

/* One round: post the N collectives in `order`, then wait for them in the
 * same order. Each writes its own part of rbuf; all read sbuf. */
static void bench_round(bench_t *b, const bench_opts_t *o, const int *ids, const int *order,
                        size_t stride)
{
    for (int i = 0; i < o->disorder; i++) {
        int k = order[i];
        bench_dfccl_post(b, o, ids[k], b->sbuf, (char *)b->rbuf + (size_t)k * stride);
    }
    for (int i = 0; i < o->disorder; i++) {
        bench_dfccl_wait(b, ids[order[i]]);
    }
}

/* A permutation of 0..n-1 that differs between ranks and rounds. */
static void bench_shuffle(int *order, int n, unsigned *seed)
{
    for (int i = 0; i < n; i++) {
        order[i] = i;
    }
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(rand_r(seed) % (unsigned)(i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

/* The time of a round with every rank posting the same N collectives in the
 * same order, against a round where every rank posts them in its own random
 * order (which deadlocks a stream-ordered library). The ratio is the
 * shuffled rounds' throughput over the ordered ones'. */
static void bench_disorder_size(bench_t *b, const bench_opts_t *o, size_t bytes)
{
    size_t count, reg, in, out, esz = dfccl_dtype_size(o->dtype), stride;
    double t_ord, t_shuf, f = bench_busbw_factor(o, b->nranks), gb;
    int ids[64], order[64], n = o->disorder;
    unsigned seed = 0x9e3779b9u * (unsigned)(b->rank + 1);
    long wrong = 0;
    dfccl_stats_t so[2], ss[2];
    bench_calls_t c_ord = {0, 0, 0}, c_shuf = {0, 0, 0};

    bench_counts(o, b->nranks, bytes, &count, &reg, &in, &out);
    stride = bench_disorder_stride(out * esz);
    if (reg == 0) {
        bench_skip_note(b, o, bytes);
        return;
    }
    if (bench_is_a2a(o)) { /* every collective of the round has this layout */
        count = bench_a2a_layout(b, o, reg);
    }
    gb = (double)(count * esz) / 1e3;
    for (int k = 0; k < n; k++) {
        ids[k] = bench_dfccl_register(b, o, reg);
        order[k] = k;
    }
    bench_fill(b, o, in);
    BENCH_TIME(b, o, bench_round(b, o, ids, order, stride), &t_ord, so);
    if (o->stats) {
        c_ord = bench_calls(b);
    }
    BENCH_TIME(b, o, (bench_shuffle(order, n, &seed), bench_round(b, o, ids, order, stride)),
               &t_shuf, ss);
    if (o->stats) {
        c_shuf = bench_calls(b);
    }
    if (o->check) {
        void *rbuf = b->rbuf;
        bench_clear(b, b->rbuf, stride * (size_t)n);
        bench_shuffle(order, n, &seed);
        bench_round(b, o, ids, order, stride);
        for (int k = 0; k < n; k++) {
            b->rbuf = (char *)rbuf + (size_t)k * stride;
            wrong += bench_check(b, o, reg, out);
        }
        b->rbuf = rbuf;
        wrong = bench_sum(wrong);
    }
    /* once every rank is done with them: connector memory is not reused
     * while a peer may still be finishing its last call (and the sweep's
     * sizes need not share the bench's list of registered collectives) */
    bench_barrier();
    for (int k = 0; k < n; k++) {
        dfcclDeregister(ids[k], b->ctx);
    }
    if (b->rank == 0) {
        printf("%12zu %4d %12.1f %8.2f %12.1f %8.2f %7ld %8.3f\n", count * esz, n, t_ord,
               gb * n / t_ord * f, t_shuf, gb * n / t_shuf * f, wrong, t_ord / t_shuf);
    }
    if (o->stats) {
        bench_print_stats(b, "ordered rounds", &so[0], &so[1], &c_ord, NULL, NULL);
        bench_print_stats(b, "shuffled rounds", &ss[0], &ss[1], &c_shuf, NULL, NULL);
    }
    if (b->rank == 0) {
        fflush(stdout);
    }
}

/* ---- --registered: memory and SMs with many registered collectives ----- */

static size_t bench_device_used(bench_t *b)
{
#ifdef HAVE_CUDART
    size_t free_b = 0, total_b = 0;
    if (b->on_gpu && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
        return total_b - free_b;
    }
#endif
    (void)b;
    return 0;
}

static int bench_sm_count(bench_t *b)
{
    int sms = 0;
#ifdef HAVE_CUDART
    int dev = 0;
    if (b->on_gpu && cudaGetDevice(&dev) == cudaSuccess) {
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    }
#endif
    (void)b;
    return sms;
}

/* Registers N collectives of -c (allreduce unless it says) of sizes
 * min_bytes, 4 min_bytes, ... (up to max_bytes, then from min_bytes again;
 * sizes too small for a whole element per rank, where the collective needs
 * one, left out), runs each once (the first of each size checked), and
 * reports the memory they hold, the daemon's blocks while it runs and
 * after it has quit. Memory is the device's used bytes
 * (cudaMemGetInfo, one GPU per rank) and dfccl's own count, the largest
 * over ranks. */
static int bench_registered(bench_t *b, bench_opts_t *o)
{
    int n = o->registered, nsizes = 0, *ids;
    size_t used0, used1, used2, bytes, count, first = 0;
    size_t reg[64], in[64], out[64]; /* per size: registered, input, output counts */
    dfccl_stats_t s0, s2, s3;
    long wrong = 0;
    double t0, t_reg, t_run;

    ids = calloc((size_t)n, sizeof(*ids));
    if (ids == NULL) {
        bench_die("out of host memory");
    }
    for (bytes = o->min_bytes; bytes <= o->max_bytes && nsizes < 64; bytes *= 4) {
        bench_counts(o, b->nranks, bytes, &count, &reg[nsizes], &in[nsizes], &out[nsizes]);
        if (reg[nsizes] > 0) {
            first = nsizes == 0 ? bytes : first;
            nsizes++;
        }
    }
    if (nsizes == 0) {
        char hi[32];
        bench_usage_error("--registered -c %s: -e/--maxbytes (%s) is less than an element for "
                          "each of the %d ranks", coll_names[o->coll],
                          bench_args_size_text(o->max_bytes, hi, sizeof(hi)), b->nranks);
    }
    bench_barrier();
    used0 = bench_device_used(b);
    dfcclGetStats(b->ctx, &s0);
    t0 = bench_now_us();
    for (int k = 0; k < n; k++) {
        if (o->coll == DFCCL_KIND_ALLTOALLV) { /* registration copies the counts */
            bench_a2a_layout(b, o, reg[k % nsizes]);
        }
        ids[k] = bench_dfccl_register(b, o, reg[k % nsizes]);
    }
    t_reg = bench_max(bench_now_us() - t0);
    bench_barrier();
    used1 = bench_device_used(b);
    t0 = bench_now_us();
    for (int k = 0; k < n; k++) {
        if (k < nsizes) {
            if (bench_is_a2a(o)) {
                bench_a2a_layout(b, o, reg[k]);
            }
            bench_fill(b, o, in[k]);
            bench_clear(b, b->rbuf, out[k] * dfccl_dtype_size(o->dtype));
        }
        bench_dfccl_run(b, o, ids[k]);
        if (k < nsizes) {
            wrong += bench_check(b, o, reg[k], out[k]);
        }
    }
    t_run = bench_max(bench_now_us() - t0);
    dfcclGetStats(b->ctx, &s2); /* right after the last completion */
    used2 = bench_device_used(b);
    bench_barrier();
    usleep(200000); /* far longer than DFCCL_QUIT_US: the daemon quits */
    dfcclGetStats(b->ctx, &s3);
    wrong = bench_sum(wrong);
    {
        double mib = 1048576.0;
        double reg_dev  = bench_max((double)(used1 - used0) / mib);
        double run_dev  = bench_max((double)(used2 - used0) / mib);
        double own      = bench_max((double)(s2.device_bytes - s0.device_bytes) / mib);
        double conn     = bench_max((double)(s2.connector_bytes - s0.connector_bytes) / mib);
        double blocks   = bench_max((double)s2.blocks);
        double idle_run = bench_max((double)s3.running);
        if (b->rank == 0) {
            printf("# registered: %d %ss (%s, %d sizes from %zu B by 4x), %d rank(s), "
                   "backend %s\n", n, coll_names[o->coll], type_names[o->dtype], nsizes,
                   first, b->nranks, b->on_gpu ? "cuda" : "host");
            printf("registered %d (now %d in the context) in %.1f ms; ran each once in %.1f ms; "
                   "#wrong %ld (the first of each size checked)\n", n, s2.registered,
                   t_reg / 1e3, t_run / 1e3, wrong);
            if (b->on_gpu) {
                printf("device memory per GPU, largest rank: %.1f MiB after registering, "
                       "%.1f MiB after running (cudaMemGetInfo); dfccl's count %.1f MiB, "
                       "of which connectors %.1f MiB\n", reg_dev, run_dev, own, conn);
                printf("daemon blocks while active: %.0f of %d SMs (one block per channel of "
                       "the widest collective); after %d us idle: running %.0f, blocks held "
                       "%.0f\n", blocks, bench_sm_count(b), 200000, idle_run,
                       idle_run > 0 ? blocks : 0.0);
            } else {
                printf("host memory held by dfccl, largest rank: %.1f KiB, of which "
                       "connectors %.1f KiB\n", own * 1024.0, conn * 1024.0);
                printf("daemon threads while active: %.0f; after %d us idle: running %.0f\n",
                       blocks, 200000, idle_run);
            }
            fflush(stdout);
        }
    }
    bench_barrier();
    for (int k = 0; k < n; k++) {
        dfcclDeregister(ids[k], b->ctx);
    }
    free(ids);
    return wrong != 0;
}

/* Everything main set up, in reverse: NCCL (bench_nccl_finish), the
 * registered collectives (once every rank is done with them), the group, the
 * context, the buffers, MPI. */
static void bench_finish(bench_t *b, const bench_opts_t *o)
{
#ifdef DFCCL_BENCH_NCCL
    if (o->nccl) {
        bench_nccl_finish(b);
    }
#endif
    (void)o;
    bench_barrier();
    for (int i = 0; i < b->nids; i++) {
        dfcclDeregister(b->ids[i], b->ctx);
    }
    dfcclGroupDestroy(b->group);
    dfcclDestroy(b->ctx);
    bench_free(b, b->sbuf);
    bench_free(b, b->rbuf);
    free(b->host);
    free(b->calls);
    free(b->scnt);
#ifdef DFCCL_BENCH_MPI
    MPI_Finalize();
#endif
}

static void bench_usage(void)
{
    printf("usage: [mpirun -np N] dfccl-bench [options]\n"
           "  -c, --coll NAME      allreduce|allgather|reducescatter|reduce|broadcast|\n"
           "                       alltoall|alltoallv (allreduce)\n"
           "  -t, --type NAME      int8|uint8|int32|uint32|int64|uint64|half|bfloat16|float|"
           "double (float)\n"
           "  -o, --op NAME        sum|prod|min|max|avg (sum)\n"
           "  -b, --minbytes SIZE  smallest size, K/M/G suffixes (8)\n"
           "  -e, --maxbytes SIZE  largest size (1G on GPUs, 16M on the host backend)\n"
           "  -f, --stepfactor F   size multiplier (2)\n"
           "  -w, --warmup N       untimed calls per size (5)\n"
           "  -n, --iters N        timed calls per size (20)\n"
           "  -r, --root N         root of reduce and broadcast (0)\n"
           "  -k, --check 0|1      count wrong elements after the timing (1)\n"
           "      --compare LIST   run NCCL too (its algorithm from NCCL_ALGO, e.g. Tree\n"
           "                       or Ring; dfccl's from DFCCL_ALGO); LIST, comma-separated:\n"
           "                       nccl: the same call on the same buffers; nccl-sym: on\n"
           "                       ncclMemAlloc buffers in symmetric windows (NCCL 2.27.3+);\n"
           "                       nccl-graph: launched from a CUDA graph of the call;\n"
           "                       nccl-best: all three. Beyond nccl alone, the table adds\n"
           "                       each one's time and compares dfccl with the fastest\n"
           "      --cold US        idle US microseconds before every timed call (longer\n"
           "                       than DFCCL_QUIT_US: the daemon has quit, and each call\n"
           "                       includes its relaunch); times are per call\n"
           "      --late US        the last rank idles US microseconds before every timed\n"
           "                       call, the others call at once and wait for it: the\n"
           "                       times (the slowest rank's) include the wait\n"
           "      --straggler      register the allreduces straggler-tolerant\n"
           "                       (DFCCL_COLL_STRAGGLER): with --late, the others start\n"
           "                       without the late rank after a bounded wait, and it\n"
           "                       joins in a second phase (docs/stragglers.md)\n"
           "      --straggler-wait US  their wait for the others (default: the\n"
           "                       ski-rental rule)\n"
           "      --barrier        an MPI_Barrier before every timed call, outside its\n"
           "                       time, as the OSU benchmarks time a call: the calls\n"
           "                       do not follow one another back to back\n"
           "      --plot FILE.svg  draw busbw and time against size (dfccl, and NCCL with\n"
           "                       --compare: its fastest variant) into FILE.svg\n"
           "      --disorder N     rounds of N collectives of each size, posted in the same\n"
           "                       order on every rank, then in a random order per rank\n"
           "                       and round; prints both and the throughput ratio; -e\n"
           "                       bounds each collective (default: the usual limit / N)\n"
           "      --registered N   register N collectives of -c (sizes -b, 4x, ... up to\n"
           "                       -e), run each once, print the device memory they hold\n"
           "                       and the daemon's blocks while active and after it quit\n"
           "      --model          print the alpha-beta model's time of the ring, the\n"
           "                       trees and ctree for 8 to 1024 GPUs in hosts of 8, and\n"
           "                       run nothing\n"
           "      --algos          per size, every algorithm that can run it, forced one by\n"
           "                       one: the model's time (dfcclPredict), the measured\n"
           "                       time and the model's error; which DFCCL_TUNER and the\n"
           "                       static thresholds pick, and which was fastest\n"
           "      --stats          after each size, the median, 99th percentile and slowest\n"
           "                       of the timed calls (or --disorder rounds) and what the\n"
           "                       daemon did (launches, quits, preemptions, context loads)\n"
           "alltoall, alltoallv: a size is the bytes each rank sends in all (its own block\n"
           "  too), size / (n * element size) elements to each rank; algbw = size / time,\n"
           "  busbw = algbw * (n-1)/n (as nccl-tests). alltoallv: with c that count per\n"
           "  pair and k = (i + j) mod n, rank i sends rank j c + (2k - (n-1)) * c / (2n)\n"
           "  elements (about c/2 to 3c/2; every rank sends and receives n * c in all),\n"
           "  registered once per size with dfcclRegisterAllToAllv. NCCL runs both as a\n"
           "  ncclSend and a ncclRecv per rank in one ncclGroupStart/ncclGroupEnd.\n");
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"coll", 1, NULL, 'c'},     {"type", 1, NULL, 't'},       {"op", 1, NULL, 'o'},
        {"minbytes", 1, NULL, 'b'}, {"maxbytes", 1, NULL, 'e'},   {"stepfactor", 1, NULL, 'f'},
        {"warmup", 1, NULL, 'w'},   {"iters", 1, NULL, 'n'},      {"root", 1, NULL, 'r'},
        {"check", 1, NULL, 'k'},    {"compare", 1, NULL, 'C'},    {"help", 0, NULL, 'h'},
        {"cold", 1, NULL, 'Q'},     {"plot", 1, NULL, 'P'},       {"disorder", 1, NULL, 'D'},
        {"registered", 1, NULL, 'G'}, {"stats", 0, NULL, 'S'},       {"late", 1, NULL, 'L'},
        {"barrier", 0, NULL, 'B'},  {"model", 0, NULL, 'M'},       {"algos", 0, NULL, 'A'},
        {"straggler", 0, NULL, 'T'}, {"straggler-wait", 1, NULL, 'W'},
        {NULL, 0, NULL, 0}};
    bench_opts_t o = {.coll = 0, .dtype = DFCCL_FLOAT32, .op = DFCCL_SUM, .min_bytes = 8,
                      .factor = 2.0, .warmup = 5, .iters = 20, .check = 1};
    bench_t b;
    dfccl_config_t cfg;
    dfccl_stats_t stats;
    bench_algos_t acc;
    size_t bytes;
    int c, max_set = 0;

    memset(&b, 0, sizeof(b));
    memset(&acc, 0, sizeof(acc));
#ifdef DFCCL_BENCH_MPI
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &b.nranks);
#else
    b.nranks = 1;
#endif
    bench_rank = b.rank;
    opterr     = 0; /* its complaints come from bench_usage_error, once */
    while ((c = getopt_long(argc, argv, "c:t:o:b:e:f:w:n:r:k:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'c':
            o.coll = bench_pick(optarg, coll_names, BENCH_NCOLLS, "collective", "-c/--coll");
            break;
        case 't': o.dtype = bench_pick(optarg, type_names, 10, "type", "-t/--type"); break;
        case 'o': o.op = bench_pick(optarg, op_names, 5, "op", "-o/--op"); break;
        case 'b': o.min_bytes = bench_parse_size(optarg, "-b/--minbytes"); break;
        case 'e':
            o.max_bytes = bench_parse_size(optarg, "-e/--maxbytes");
            max_set     = 1;
            break;
        case 'f':
            if (bench_args_factor(optarg, &o.factor) != 0) {
                bench_usage_error("-f/--stepfactor takes a number above 1 (up to 1024), not "
                                  "'%s'", optarg);
            }
            break;
        case 'w': o.warmup = bench_int(optarg, "-w/--warmup", 0, 1000000); break;
        case 'n': o.iters = bench_int(optarg, "-n/--iters", 1, 10000000); break;
        case 'r': o.root = bench_int(optarg, "-r/--root", 0, b.nranks - 1); break;
        case 'k': o.check = bench_int(optarg, "-k/--check", 0, 1); break;
        case 'Q': o.cold_us = bench_int(optarg, "--cold", 0, 100000000); break;
        case 'L': o.late_us = bench_int(optarg, "--late", 0, 100000000); break;
        case 'T': o.straggler = 1; break;
        case 'W':
            o.straggler_wait_us = bench_int(optarg, "--straggler-wait", 0, 100000000);
            o.straggler         = 1;
            break;
        case 'P': o.plot = optarg; break;
        case 'D': o.disorder = bench_int(optarg, "--disorder", 0, 64); break;
        case 'G': o.registered = bench_int(optarg, "--registered", 0, 100000); break;
        case 'S': o.stats = 1; break;
        case 'B': o.barrier = 1; break;
        case 'A': o.algos = 1; break;
        case 'M':
            /* a table of the model, and nothing run */
            if (b.rank == 0) {
                bench_model_print(stdout);
            }
#ifdef DFCCL_BENCH_MPI
            MPI_Finalize();
#endif
            return 0;
        case 'C':
            o.nccl |= bench_parse_compare(optarg);
#ifndef DFCCL_BENCH_NCCL
            bench_usage_error("--compare %s: dfccl-bench was built without NCCL or MPI",
                              optarg);
#endif
            break;
        default:
            if (c == 'h') {
                if (b.rank == 0) {
                    bench_usage();
                }
#ifdef DFCCL_BENCH_MPI
                MPI_Finalize();
#endif
                return 0;
            }
            if (optopt != 0 && strchr("ctobefwnrk", optopt) != NULL) {
                bench_usage_error("option -%c needs a value", optopt);
            } else if (optopt != 0) {
                bench_usage_error("unknown option -%c", optopt);
            }
            bench_usage_error("unknown option, or one without its value: '%s'",
                              argv[optind - 1]);
        }
    }
    if (optind < argc) {
        bench_usage_error("unexpected argument '%s'", argv[optind]);
    }
    if (max_set && o.min_bytes > o.max_bytes) {
        char lo[32], hi[32];
        bench_usage_error("-b/--minbytes (%s) is larger than -e/--maxbytes (%s): no size "
                          "to run", bench_args_size_text(o.min_bytes, lo, sizeof(lo)),
                          bench_args_size_text(o.max_bytes, hi, sizeof(hi)));
    }
    if ((o.disorder > 0 && (o.nccl || o.cold_us > 0 || o.late_us > 0 || o.plot != NULL)) ||
        (o.registered > 0 && (o.disorder > 0 || o.nccl || o.plot != NULL)) ||
        (o.algos && (o.disorder > 0 || o.registered > 0 || o.nccl || o.plot != NULL ||
                     o.stats))) {
        bench_usage_error("--disorder, --registered and --algos run alone (no --compare, "
                          "--plot or --stats with them, nor --cold or --late with --disorder)");
    }
    if (o.straggler && (o.coll != 0 || o.algos || o.nccl)) {
        bench_usage_error("--straggler is for allreduces (-c allreduce) of dfccl only, "
                          "without --algos or --compare");
    }
    if (o.algos && o.coll == 6) {
        bench_usage_error("--algos runs what dfcclRegister takes: not alltoallv (only the "
                          "mesh runs it)");
    }
    /* NCCL's NVLink multicast can take shared GPUs out of service. */
    setenv("NCCL_NVLS_ENABLE", "0", 1);

    if (dfcclConfigInit(&cfg) != DFCCL_OK) {
        bench_die("dfcclConfigInit: %s", dfcclGetLastErrorMessage());
    }
#ifdef HAVE_CUDART
    {
        int ndev = 0, local = b.rank;
#ifdef DFCCL_BENCH_MPI
        MPI_Comm node;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
        MPI_Comm_rank(node, &local);
        MPI_Comm_free(&node);
#endif
        if (cfg.backend != DFCCL_BACKEND_HOST && cudaGetDeviceCount(&ndev) == cudaSuccess &&
            ndev > 0) {
            cudaSetDevice(local % ndev);
        }
    }
#endif
    if (dfcclInit(&cfg, &b.ctx) != DFCCL_OK) {
        bench_die("dfcclInit: %s", dfcclGetLastErrorMessage());
    }
    b.on_gpu = dfcclGetBackend(b.ctx) == DFCCL_BACKEND_CUDA;
    if (o.nccl && !b.on_gpu) {
        bench_die("--compare needs the CUDA backend (a GPU, and DFCCL_BACKEND unset, auto or "
                  "cuda)");
    }
    if (!max_set) {
        /* --disorder: a round's N outputs together take the usual limit */
        o.max_bytes = (b.on_gpu ? (1ul << 30) : (16ul << 20)) /
                      (size_t)(o.disorder > 0 ? o.disorder : 1);
        if (o.min_bytes > o.max_bytes) {
            char lo[32], hi[32];
            bench_usage_error("-b/--minbytes (%s) is larger than the default -e/--maxbytes "
                              "(%s on this backend, with --disorder divided by N): no size "
                              "to run",
                              bench_args_size_text(o.min_bytes, lo, sizeof(lo)),
                              bench_args_size_text(o.max_bytes, hi, sizeof(hi)));
        }
    }
    if (dfcclGroupCreate(b.ctx, b.nranks, b.rank, bench_allgather, NULL, "bench", &b.group) !=
        DFCCL_OK) {
        bench_die("dfcclGroupCreate: %s", dfcclGetLastErrorMessage());
    }
    b.sbuf = bench_alloc(&b, o.max_bytes);
    if (o.disorder > 0) {
        /* every collective of a round up to -e, each with its own output */
        const size_t stride = bench_disorder_stride(o.max_bytes);
        char what[96], sz[32];

        snprintf(what, sizeof(what), "--disorder %d's outputs (%d x -e/--maxbytes %s: lower -e)",
                 o.disorder, o.disorder, bench_args_size_text(o.max_bytes, sz, sizeof(sz)));
        if (stride < o.max_bytes || stride > SIZE_MAX / (size_t)o.disorder) {
            bench_die("cannot allocate %s", what);
        }
        b.rbuf = bench_alloc_for(&b, stride * (size_t)o.disorder, what);
    } else {
        b.rbuf = bench_alloc(&b, o.max_bytes);
    }
    b.host  = malloc(o.max_bytes);
    b.calls = malloc((size_t)o.iters * sizeof(double));
    b.scnt  = calloc(4 * (size_t)b.nranks, sizeof(size_t));
    if (b.host == NULL || b.calls == NULL || b.scnt == NULL) {
        bench_die("out of host memory");
    }
    b.sdsp = b.scnt + b.nranks;
    b.rcnt = b.sdsp + b.nranks;
    b.rdsp = b.rcnt + b.nranks;
#ifdef DFCCL_BENCH_NCCL
    if (o.nccl) {
        ncclUniqueId uid;
        if (b.rank == 0) {
            BENCH_NCCL(ncclGetUniqueId(&uid), 1);
        }
        MPI_Bcast(&uid, sizeof(uid), MPI_BYTE, 0, MPI_COMM_WORLD);
        BENCH_NCCL(ncclCommInitRank(&b.comm, b.nranks, uid, b.rank), 1);
        BENCH_CUDA(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking), 1);
    }
#endif

    if (o.registered > 0) {
        int bad = bench_registered(&b, &o);
        bench_finish(&b, &o);
        return bad;
    }
    if (o.algos && b.rank == 0) {
        static const char *const link_names[DFCCL_LINK_COUNT] = {"p2p", "shm", "net"};
        dfccl_profile_info_t pinfo;
        double a = 0, bw = 0, c = 0;
        dfcclGroupModel(b.group, &a, &bw);
        memset(&pinfo, 0, sizeof(pinfo));
        dfcclGroupProfileInfo(b.group, &pinfo);
        printf("# dfccl-bench --algos: %s, %s, %s, %d rank(s), backend %s, warmup %d, "
               "iterations %d, tuner %s\n", coll_names[o.coll], type_names[o.dtype],
               op_names[o.op], b.nranks, b.on_gpu ? "cuda" : "host", o.warmup, o.iters,
               cfg.tuner == DFCCL_TUNER_MODEL ? "model" : "static");
        for (int l = 0; l < DFCCL_LINK_COUNT; l++) {
            double la = 0, lb = 0;

            if (dfcclGroupLinkModel(b.group, (dfccl_link_t)l, &la, &lb, &c) == DFCCL_OK) {
                printf("# link class %s: alpha %.3g us, beta %.3g GB/s (%s)\n", link_names[l],
                       la, lb, (pinfo.measured_links >> l) & 1 ? "measured" : "nominal");
            }
        }
        printf("# the group's model: the ring's alpha %.3g us, beta %.3g GB/s (its classes' "
               "mean hop, slowest class), a collective %.3g us, generation %llu\n", a, bw, c,
               (unsigned long long)pinfo.generation);
        printf("# a row per algorithm that can run the size; predicted: dfcclPredict; "
               "measured: mean us per call (run + wait), slowest rank; error: (predicted - "
               "measured) / measured; pick: DFCCL_TUNER's choice, static: the thresholds'\n");
        printf("#%11s %12s %8s %10s %10s %8s %7s  %-12s %s\n", "size", "count", "algo",
               "predicted", "measured", "error", "#wrong", "choice", "ran");
    } else if (o.disorder > 0 && b.rank == 0) {
        printf("# dfccl-bench --disorder %d: %s, %s, %s, %d rank(s), backend %s, warmup %d, "
               "rounds %d\n", o.disorder, coll_names[o.coll], type_names[o.dtype],
               op_names[o.op], b.nranks, b.on_gpu ? "cuda" : "host", o.warmup, o.iters);
        printf("# a round posts %d collectives of `size` each, then waits for all; ordered: "
               "the same order on every rank; shuffled: a new random order per rank and "
               "round\n", o.disorder);
        printf("# time: us per round, slowest rank; busbw: the round's aggregate; ratio: "
               "shuffled throughput / ordered\n");
        printf("#%11s %4s %12s %8s %12s %8s %7s %8s\n", "size", "n", "ordered", "busbw",
               "shuffled", "busbw", "#wrong", "ratio");
    } else if (b.rank == 0) {
        printf("# dfccl-bench: %s, %s, %s, %d rank(s), backend %s, warmup %d, iterations %d\n",
               coll_names[o.coll], type_names[o.dtype], op_names[o.op], b.nranks,
               b.on_gpu ? "cuda" : "host", o.warmup, o.iters);
        printf("# time: mean us per call (run + wait), slowest rank; bandwidths in GB/s\n");
        if (o.cold_us > 0) {
            printf("# cold: every timed call follows %d us of idling\n", o.cold_us);
        }
        if (o.late_us > 0) {
            printf("# late: rank %d idles %d us before every timed call, the others wait for "
                   "it (included)\n", b.nranks - 1, o.late_us);
        }
        if (o.straggler) {
            printf("# straggler-tolerant allreduces (DFCCL_COLL_STRAGGLER), wait %s\n",
                   o.straggler_wait_us > 0 ? "from --straggler-wait" : "by the ski-rental rule");
        }
#ifdef DFCCL_BENCH_NCCL
        if (o.nccl && bench_nccl_multi(&o)) {
            bench_nccl_legend(&o);
        }
#endif
        printf("#%11s %12s %8s %6s %10s %8s %8s %7s", "size", "count", "type", "redop",
               "time", "algbw", "busbw", "#wrong");
#ifdef DFCCL_BENCH_NCCL
        if (o.nccl && bench_nccl_multi(&o)) {
            printf("  %10s %8s %8s %7s %7s  %-5s", "best time", "algbw", "busbw", "#wrong",
                   "best/dfccl", "best");
            for (int v = 0; v < BENCH_NCCL_NVARIANTS; v++) {
                if (o.nccl & BENCH_NCCL_BIT(v)) {
                    printf(" %8s", nccl_variant_cols[v]);
                }
            }
        } else if (o.nccl) {
            printf("  %10s %8s %8s %7s %7s", "nccl time", "algbw", "busbw", "#wrong",
                   "nccl/dfccl");
        }
#endif
        printf("  algo/channels/proto\n");
    }
#ifdef DFCCL_BENCH_NCCL
    if (o.nccl & BENCH_NCCL_BIT(BENCH_NCCL_SYM)) {
        /* after the header, where a line says if it cannot run */
        bench_sym_setup(&b, o.max_bytes);
    }
#endif
    if (o.plot != NULL && b.rank == 0) {
        char title[160];
        snprintf(title, sizeof(title), "%s, %s, %s, %d rank(s), %s backend%s",
                 coll_names[o.coll], type_names[o.dtype],
                 bench_has_op(&o) ? op_names[o.op] : "no op", b.nranks,
                 b.on_gpu ? "cuda" : "host",
                 o.nccl & ~BENCH_NCCL_BIT(BENCH_NCCL_PLAIN) ? "; NCCL: its fastest variant" : "");
        b.plot = bench_plot_new(title);
        if (b.plot == NULL) {
            bench_die("--plot: out of memory");
        }
    }
    for (bytes = o.min_bytes; bytes <= o.max_bytes && b.nids + 64 <= 1024;) {
        size_t next = (size_t)((double)bytes * o.factor);
        if (o.algos) {
            bench_algos_size(&b, &o, bytes, &acc);
        } else if (o.disorder > 0) {
            bench_disorder_size(&b, &o, bytes);
        } else {
            bench_size(&b, &o, bytes);
        }
        bytes = next > bytes ? next : bytes + 1;
    }
    if (bytes <= o.max_bytes && b.rank == 0) {
        printf("# the sweep stopped before %zu bytes: %d collectives are registered, the most "
               "this bench keeps; raise -b or -f for the larger sizes\n", bytes, b.nids);
    }
    if (o.algos && b.rank == 0 && acc.nerr > 0) {
        printf("# model error over %d runs: mean %.0f%%, worst %.0f%%\n", acc.nerr,
               100.0 * acc.err_sum / acc.nerr, 100.0 * acc.err_worst);
        printf("# over %d sizes: pick / fastest at most %.2f, static / fastest at most %.2f; "
               "the pick slower than static's at %d\n", acc.sizes, acc.pick_worst,
               acc.static_worst, acc.pick_slower);
    }
    if (b.plot != NULL) {
        if (bench_plot_write(b.plot, o.plot) != 0) {
            fprintf(stderr, "dfccl-bench: cannot write the plot %s: %s\n", o.plot,
                    strerror(errno));
        }
        bench_plot_free(b.plot);
    }
    dfcclGetStats(b.ctx, &stats);
    if (o.straggler) {
        const double splits = bench_max((double)stats.straggler_splits);
        const double relays = bench_max((double)stats.straggler_relays);

        if (b.rank == 0) {
            printf("# straggler: up to %.0f runs on a rank took two phases, up to %.0f were "
                   "relayed for a late rank\n", splits, relays);
        }
    }
    if (b.rank == 0) {
        printf("# rank 0 daemon: %llu launches, %llu voluntary quits, %llu preemptions\n",
               (unsigned long long)stats.launches, (unsigned long long)stats.quits,
               (unsigned long long)stats.preemptions);
    }
    bench_finish(&b, &o);
    return 0;
}
