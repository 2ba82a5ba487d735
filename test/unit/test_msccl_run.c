/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MSCCL programs run by the daemon (DFCCL_MSCCL_XML_FILES). The programs
 * are written by tools/msccl/msccl_gen.py (python3) into a temporary
 * directory, for 2 to 8 ranks (quick mode, DFCCL_TEST_QUICK: 2 and 3):
 *
 *   - ring allreduce (one and two rings, Simple and LL) and all-pairs
 *     allreduce through scratch, with DFCCL_ALGO=msccl: every type (one
 *     ring on 2 ranks; the others int8 and float32), every operation (AVG is no MSCCL operation: it takes the default, with one
 *     warning), counts that are multiples of the program's chunks (0 too),
 *     in place and out of place; dfcclGetCollInfo must name the program
 *     for every case but AVG;
 *   - the two-step alltoall (4 and 8 ranks, pairs), every type;
 *   - ring all-gathers (two rings) and reduce-scatters (two rings, and one
 *     LL ring on 3 ranks), every type up to 4 ranks, in place and out of
 *     place, the reduce-scatters with SUM, MAX and AVG;
 *   - preempted at every primitive (spin thresholds of 1, 256-byte slots:
 *     many loops; 2 and 3 ranks; the allreduces, an all-gather and a
 *     reduce-scatter) with results checked and preemptions counted;
 *   - without DFCCL_ALGO, in disorder with built-in allgathers and
 *     reduce-scatters (test_deadlock's scenario): a program that matches a
 *     size goes first.
 *
 * Skipped (77) when this build has no libxml2 or python3 is missing.
 * test_coll.c and test_deadlock.c are included with their main renamed.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reuse_cases.h"

static char ms_dir[64];

/* Write program `name` for `n` ranks with msccl_gen.py's `command` and
 * `opts` into ms_dir; its path in *path. 0 on success. */
static int ms_gen(const char *command, int n, const char *name, const char *opts, char *path,
                  size_t len)
{
    const char *src = getenv("DFCCL_SRCDIR");
    char cmd[1024];

    snprintf(path, len, "%s/%s.xml", ms_dir, name);
    snprintf(cmd, sizeof(cmd), "python3 '%s/tools/msccl/msccl_gen.py' %s --ranks %d --name %s %s "
             "-o '%s'", src != NULL ? src : DFCCL_TOP_SRCDIR, command, n, name, opts, path);
    if (system(cmd) != 0) {
        fprintf(stderr, "cannot write %s: %s\n", path, cmd);
        return -1;
    }
    return 0;
}

static int ms_quick(void)
{
    return getenv("DFCCL_TEST_QUICK") != NULL;
}

typedef struct {
    const char *file;
    const char *algo;   /* what dfcclGetCollInfo must say */
    uint64_t    chunks; /* counts are multiples of this */
    int         preempt; /* spin thresholds of 1 and small slots */
    int         all_types; /* every type and operation of a reduction (else int8 and
                            * float32; SUM, MAX and AVG) */
    int         kind;      /* the collective */
    char        blocks[16]; /* DFCCL_MAX_BLOCKS: the program's thread blocks */
} ms_arg_t;

static void ms_preempt_env(void);

/* A program's thread blocks need a block each: the host backend's default
 * is 2, which the rings fit. */
static void ms_env(const ms_arg_t *a)
{
    setenv("DFCCL_MSCCL_XML_FILES", a->file, 1);
    setenv("DFCCL_ALGO", "msccl", 1);
    setenv("DFCCL_MAX_BLOCKS", a->blocks, 1);
    if (a->preempt) {
        ms_preempt_env();
    }
}

static void ms_preempt_env(void)
{
    setenv("DFCCL_SPIN_HEAD", "1", 1);
    setenv("DFCCL_SPIN_MIN", "1", 1);
    setenv("DFCCL_SPIN_STICKY", "1", 1);
    setenv("DFCCL_SLOT_BYTES", "256", 1);
}

/* Collectives of a->kind on the program: every type (on more than 4
 * ranks, and for reductions unless a->all_types: int8 and float32), every
 * operation of the reductions (a few unless a->all_types), counts that are multiples of the program's
 * chunks, in place and out of place (alltoall: out of place only, which is
 * all dfccl takes). */
static int ms_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    const ms_arg_t *a = varg;
    const uint64_t counts[] = {0, a->chunks, a->chunks * 37, a->chunks * 4099};
    const int reduces = a->kind == DFCCL_COLL_ALLREDUCE || a->kind == DFCCL_COLL_REDUCESCATTER;
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    int failures = 0, cases = 0;
    unsigned long long pre;

    ms_env(a);
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    for (int ti = 0; ti < NDTYPES; ti++) {
        const int t = dtypes[ti];
        const int few = reduces && !a->all_types;
        for (int op = 0; op < (reduces ? DFCCL_OP_COUNT : 1); op++) {
            if ((op == DFCCL_AVG && !is_float(t)) || (op == DFCCL_PROD && t != DFCCL_INT32) ||
                ((few || n > 4) && t != DFCCL_FLOAT32 && t != DFCCL_INT8) ||
                (few && op != DFCCL_SUM && op != DFCCL_MAX && op != DFCCL_AVG)) {
                continue;
            }
            for (int k = 0; k < (int)(sizeof(counts) / sizeof(counts[0])); k++) {
                if (k == 3 && (op != DFCCL_SUM || (t != DFCCL_FLOAT32 && t != DFCCL_INT8))) {
                    continue; /* the large count: a few cases */
                }
                for (int inplace = 0; inplace < (a->kind == DFCCL_COLL_ALLTOALL ? 1 : 2);
                     inplace++) {
                    int algo = 0;
                    run_case_algo = op == DFCCL_AVG ? NULL : a->algo;
                    failures += run_case(ctx, g, rank, n, a->kind, t, op, counts[k], inplace,
                                         &algo);
                    cases++;
                }
            }
        }
    }
    run_case_algo = NULL;
    if (unit_rank_end_counted(oob, ctx, g, &pre) != 0) {
        return 1;
    }
    if (rank == 0) {
        printf("%s on %d ranks%s: %d %s cases, %d failures, %llu preemptions\n", a->algo, n,
               a->preempt ? " (preempted at every primitive)" : "", cases,
               dfccl_coll_name_for_test(a->kind), failures, pre);
    }
    DFCCL_TEST_CHECK(!a->preempt || pre > 0, "no preemption with spin thresholds of 1");
    return failures;
}

/* One program for every rank count of the run: 2, 3, 4 and 8 ranks (quick
 * mode: 2 and 3); the two-step alltoall needs two groups of two ranks or
 * more: 4 and 8 (quick mode: 4). */
static void ms_run(const char *command, const char *opts, const char *tag, uint64_t chunks_per_rank,
                   uint64_t chunks_fixed, int kind, int preempt)
{
    const int alltoall = kind == DFCCL_COLL_ALLTOALL;
    static const int all[] = {2, 3, 4, 8, 0}, quick[] = {2, 3, 0}, three[] = {3, 0};
    static const int a2a_all[] = {4, 8, 0}, a2a_quick[] = {4, 0};
    const int *ranks = alltoall ? (ms_quick() ? a2a_quick : a2a_all) : (ms_quick() ? quick : all);
    const char *ins     = strstr(opts, "--instances ");
    const int instances = ins != NULL ? atoi(ins + strlen("--instances ")) : 1;

    /* preempted at every primitive, every block of every rank spins on 2
     * cores: 2 and 3 ranks */
    if (preempt) {
        ranks = quick;
    }
    /* LL's second program, and a program with more thread blocks than
     * DFCCL_MAX_BLOCKS's default of 32 on GPUs: one rank count */
    if (strstr(opts, "LL") != NULL || instances > 16) {
        ranks = three;
    }

    for (; *ranks != 0; ranks++) {
        const int n = *ranks;
        char name[64], path[256], algo[80], o[256];
        ms_arg_t a;

        snprintf(name, sizeof(name), "%s%d", tag, n);
        /* the two-step alltoall's local groups: pairs */
        snprintf(o, sizeof(o), "%s%s", opts, alltoall ? " --local 2" : "");
        ck_assert_int_eq(ms_gen(command, n, name, o, path, sizeof(path)), 0);
        snprintf(algo, sizeof(algo), "msccl:%s", name);
        a.file    = path;
        a.algo    = algo;
        a.chunks  = chunks_fixed + chunks_per_rank * (uint64_t)n;
        a.preempt = preempt;
        a.kind    = kind;
        /* all-pairs: n - 1 thread blocks an instance; rings: one an instance;
         * the two-step alltoall: n / 2 + 1 */
        snprintf(a.blocks, sizeof(a.blocks), "%d",
                 strncmp(command, "allpairs", 8) == 0 ? (n - 1) * instances : n < 4 ? 2 : n);
        if (strncmp(command, "allpairs", 8) == 0 && n > 4) {
            continue; /* 7 thread blocks on each of 8 ranks: too many threads for CI */
        }
        /* every type once: the one-ring program on 2 ranks */
        a.all_types = !preempt && kind == DFCCL_COLL_ALLREDUCE && n == 2 &&
                      strcmp(tag, "ring") == 0;
        {
            const double t0 = unit_now_s();
            ck_assert_int_eq(dfccl_test_mp_run(n, 300, ms_body, &a), 0);
            printf("  (%s on %d ranks: %.1f s)\n", name, n, unit_now_s() - t0);
            fflush(stdout);
        }
    }
}

/* The programs run, each with its msccl_gen.py command and options, its
 * tag (the program's name, before the rank count), the chunks of its
 * counts (per rank, and fixed), the collective, and whether it is
 * preempted at every primitive. */
static const struct {
    const char *command, *opts, *tag;
    uint64_t    per_rank, fixed;
    int         kind, preempt;
} ms_programs[] = {
    {"ring-allreduce", "--inplace --outofplace", "ring", 1, 0, DFCCL_COLL_ALLREDUCE, 0},
    /* two rings, LL, in place only: an out-of-place run copies first */
    {"ring-allreduce", "--instances 2 --proto LL --inplace", "ringll", 2, 0, DFCCL_COLL_ALLREDUCE,
     0},
    {"allpairs-allreduce", "--max-bytes none --inplace --outofplace", "allpairs", 1, 0,
     DFCCL_COLL_ALLREDUCE, 0},
    /* every rank's whole input to every peer, two instances */
    {"allpairs-allreduce", "--phases 1 --instances 2 --max-bytes none --inplace --outofplace",
     "allpairs1k2_", 0, 2, DFCCL_COLL_ALLREDUCE, 0},
    /* 40 thread blocks a rank on 3 ranks, on 20 channels */
    {"allpairs-allreduce", "--phases 1 --instances 20 --max-bytes none --inplace --outofplace",
     "allpairs1k20_", 0, 20, DFCCL_COLL_ALLREDUCE, 0},
    {"two-step-alltoall", "--inplace --outofplace", "a2a", 0, 1, DFCCL_COLL_ALLTOALL, 0},
    /* counts: a rank's input (all-gather) or output (reduce-scatter), a
     * multiple of the instances */
    {"ring-allgather", "--instances 2 --inplace --outofplace", "ag", 0, 2, DFCCL_COLL_ALLGATHER,
     0},
    {"ring-reduce-scatter", "--instances 2 --inplace --outofplace", "rs", 0, 2,
     DFCCL_COLL_REDUCESCATTER, 0},
    {"ring-reduce-scatter", "--proto LL --inplace --outofplace", "rsll", 0, 1,
     DFCCL_COLL_REDUCESCATTER, 0},
    {"ring-allreduce", "--instances 2 --inplace --outofplace", "ringp", 2, 0,
     DFCCL_COLL_ALLREDUCE, 1},
    {"allpairs-allreduce", "--max-bytes none --inplace --outofplace", "allpairsp", 1, 0,
     DFCCL_COLL_ALLREDUCE, 1},
    {"ring-allgather", "--inplace --outofplace", "agp", 0, 1, DFCCL_COLL_ALLGATHER, 1},
    {"ring-reduce-scatter", "--inplace --outofplace", "rsp", 0, 1, DFCCL_COLL_REDUCESCATTER, 1},
};

START_TEST(test_ms_program)
{
    ms_run(ms_programs[_i].command, ms_programs[_i].opts, ms_programs[_i].tag,
           ms_programs[_i].per_rank, ms_programs[_i].fixed, ms_programs[_i].kind,
           ms_programs[_i].preempt);
}
END_TEST

/* Without DFCCL_ALGO: the ring program takes the allreduces (its sizes
 * are multiples of its chunks), in disorder with built-in allgathers and
 * reduce-scatters, on one group and on a group per collective. */
typedef struct {
    char           file[256];
    disorder_arg_t a;
} ms_disorder_t;

static int ms_disorder_body(int rank, int n, dfccl_test_oob_t *oob, void *varg)
{
    ms_disorder_t *d = varg;

    setenv("DFCCL_MSCCL_XML_FILES", d->file, 1);
    unsetenv("DFCCL_ALGO");
    return disorder_body(rank, n, oob, &d->a);
}

START_TEST(test_ms_disorder)
{
    static const int kinds[NCOLL] = {DFCCL_COLL_ALLREDUCE,     DFCCL_COLL_ALLGATHER,
                                     DFCCL_COLL_ALLREDUCE,     DFCCL_COLL_REDUCESCATTER,
                                     DFCCL_COLL_ALLREDUCE,     DFCCL_COLL_ALLREDUCE,
                                     DFCCL_COLL_ALLGATHER,     DFCCL_COLL_ALLREDUCE};
    const int n = 4;
    char path[256];
    ms_disorder_t blk;

    ck_assert_int_eq(ms_gen("ring-allreduce", n, "ringd4", "--instances 2 --inplace --outofplace",
                            path, sizeof(path)), 0);
    for (int groups = 1; groups <= NCOLL; groups += NCOLL - 1) {
        memset(&blk, 0, sizeof(blk));
        snprintf(blk.file, sizeof(blk.file), "%s", path);
        blk.a.iters  = ms_quick() ? 3 : 6;
        blk.a.groups = groups;
        blk.a.kinds  = kinds;
        /* allreduces: multiples of the program's 8 chunks */
        blk.a.counts[0] = 8;
        blk.a.counts[1] = 100;
        blk.a.counts[2] = 8 * 125;
        blk.a.counts[3] = 1000;
        blk.a.counts[4] = 8 * 4096;
        blk.a.counts[5] = 8 * 12500;
        blk.a.counts[6] = 333;
        blk.a.counts[7] = 8 * 3;
        {
            const double t0 = unit_now_s();
            ck_assert_int_eq(dfccl_test_mp_run(n, 300, ms_disorder_body, &blk), 0);
            printf("  (disorder on %d group(s): %.1f s)\n", groups, unit_now_s() - t0);
            fflush(stdout);
        }
    }
}
END_TEST

int main(void)
{
    Suite *s     = suite_create("msccl_run");
    TCase *tc    = dfccl_test_case(s, "msccl_run", 1000);
    int failed;

#ifndef HAVE_LIBXML2
    printf("MSCCL programs are not built (no libxml2): skipped\n");
    return 77;
#endif
    if (system("python3 -c pass") != 0) {
        printf("python3 writes the programs of this test and is missing: skipped\n");
        return 77;
    }
    snprintf(ms_dir, sizeof(ms_dir), "/tmp/dfccl-msccl-XXXXXX");
    if (mkdtemp(ms_dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    tcase_add_loop_test(tc, test_ms_program, 0,
                        (int)(sizeof(ms_programs) / sizeof(ms_programs[0])));
    tcase_add_test(tc, test_ms_disorder);
    failed = dfccl_test_run(s, CK_NORMAL);
    {
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", ms_dir);
        if (system(cmd) != 0) {
            fprintf(stderr, "cannot remove %s\n", ms_dir);
        }
    }
    return failed;
}
