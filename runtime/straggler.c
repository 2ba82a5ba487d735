/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Straggler tolerance (DFCCL_COLL_STRAGGLER, docs/stragglers.md): what the
 * ranks of a group share to agree on which of them are late for a run of
 * a straggler-tolerant allreduce, how long the early ones wait (AdapCC's
 * ski-rental rule), and the identity element that a late rank's runtime
 * contributes when it relays phase 1 for it. The runs themselves (phase 1
 * on the partner registration, phase 2 on the user's) are coll.c's.
 *
 * The agreement: every rank publishes in its own directory how many runs
 * of each registration it has started (dfccl_dir_t.runs, written by
 * dfcclRun*). One word per registration slot and parity of the run, in
 * rank 0's directory, holds the decision for a run: the run (24 bits),
 * which registration of the slot it is (8 bits), a "decided" bit and the
 * late ranks (31 bits). With avg, a rank that has started run k and finds
 * everyone started writes "none late"; one that has waited its wait
 * writes the ranks that have not started. Both write with a compare-and-swap from a word that is not
 * this run's decision, so the first write wins and every rank reads the
 * same set. Every op but avg takes the optimistic protocol: a rank that
 * arrives sets its bit in the undecided word ("committed": its data goes
 * into the run at once), the last to commit decides "none late", and a
 * rank whose wait ends decides the uncommitted ranks late.
 */
#include "dfccl_int.h"

#include <string.h>

#define DFCCL_STRAG_DECIDED (1ull << 31)
#define DFCCL_STRAG_MASK    0x7fffffffull
#define DFCCL_STRAG_MAX     31

const char *dfccl_strag_unfit(const struct dfccl_group *g)
{
    if (g->nranks > DFCCL_STRAG_MAX) {
        return "it supports groups of at most 31 ranks";
    }
    for (int r = 0; r < g->nranks; r++) {
        if (!g->same_host[r] || dfccl_pool_dir_of((struct dfccl_group *)g, r) == NULL) {
            return "it needs every rank of the group on one host (the ranks agree on the "
                   "late ones through shared memory)";
        }
    }
    return NULL;
}

int dfccl_strag_want(dfccl_coll_desc_t *d, const struct dfccl_group *g)
{
    const dfccl_config_t *cfg = g != NULL ? &g->ctx->cfg : NULL;

    if (cfg != NULL && !(d->flags & DFCCL_COLL_STRAGGLER) &&
        cfg->straggler == DFCCL_STRAGGLER_ALLREDUCE && d->kind == DFCCL_KIND_ALLREDUCE &&
        (unsigned)d->op < DFCCL_OP_COUNT && d->count > 0 && g->nranks > 1 &&
        dfccl_strag_unfit(g) == NULL) {
        d->flags |= DFCCL_COLL_STRAGGLER;
    }
    if (cfg != NULL && (d->flags & DFCCL_COLL_STRAGGLER) && d->straggler_wait_us == 0) {
        d->straggler_wait_us = cfg->straggler_wait_us;
    }
    return (d->flags & DFCCL_COLL_STRAGGLER) != 0;
}

/* One element of op's identity in dtype, at p. */
static void dfccl_strag_identity_one(int op, int dtype, void *p)
{
    /* min: the largest value, max: the smallest (infinities for floats) */
    const int big = op == DFCCL_MIN, one = op == DFCCL_PROD;

    if (op != DFCCL_MIN && op != DFCCL_MAX && !one) {
        memset(p, 0, dfccl_dtype_bytes(dtype)); /* sum, avg */
        return;
    }
    switch (dtype) {
    case DFCCL_INT8:    *(int8_t *)p = one ? 1 : big ? INT8_MAX : INT8_MIN; break;
    case DFCCL_UINT8:   *(uint8_t *)p = one ? 1 : big ? UINT8_MAX : 0; break;
    case DFCCL_INT32:   *(int32_t *)p = one ? 1 : big ? INT32_MAX : INT32_MIN; break;
    case DFCCL_UINT32:  *(uint32_t *)p = one ? 1 : big ? UINT32_MAX : 0; break;
    case DFCCL_INT64:   *(int64_t *)p = one ? 1 : big ? INT64_MAX : INT64_MIN; break;
    case DFCCL_UINT64:  *(uint64_t *)p = one ? 1 : big ? UINT64_MAX : 0; break;
    case DFCCL_FLOAT16: *(uint16_t *)p = one ? 0x3c00 : big ? 0x7c00 : 0xfc00; break;
    case DFCCL_BFLOAT16: *(uint16_t *)p = one ? 0x3f80 : big ? 0x7f80 : 0xff80; break;
    case DFCCL_FLOAT32: *(float *)p = one ? 1.0f : big ? __builtin_inff() : -__builtin_inff(); break;
    default:            *(double *)p = one ? 1.0 : big ? __builtin_inf() : -__builtin_inf(); break;
    }
}

void dfccl_strag_identity(int op, int dtype, size_t count, void *buf)
{
    const size_t esz = dfccl_dtype_bytes(dtype);

    dfccl_strag_identity_one(op, dtype, buf);
    for (size_t i = 1; i < count; i++) {
        memcpy((char *)buf + i * esz, buf, esz);
    }
}

uint32_t dfccl_strag_wait_us(const dfccl_config_t *cfg, const struct dfccl_group *g,
                             const struct dfccl_algo *a, size_t count, int dtype, int nch)
{
    /*
     * Ski rental: waiting for the late ranks is renting (it costs the time
     * waited), starting without them is buying (it costs phase 1 and
     * phase 2, where one run would have done). The break-even rule, the
     * best deterministic one (2-competitive), rents until the rent paid
     * equals the price, then buys: wait at most the model's time of the
     * two phases.
     */
    double us = 2.0 * dfccl_algo_predict_us(cfg, g, a, DFCCL_COLL_ALLREDUCE, count, dtype, nch);

    if (!(us >= 1.0)) {
        us = 1.0;
    }
    return us > 1e9 ? 1000000000u : (uint32_t)us;
}

/* The decision word of run `run` of registration reg, in rank 0's
 * directory: one per parity of the run, since a rank may start run k + 1
 * (optimistic: as soon as its run k completed) while another still reads
 * run k's decision, never k + 2 (that needs every rank's part of k + 1,
 * which each gives after it read k's). */
static uint64_t *dfccl_strag_word(struct dfccl_group *g, uint64_t reg, uint64_t run)
{
    dfccl_dir_t *d = (dfccl_dir_t *)dfccl_pool_dir_of(g, 0);

    return d != NULL ? &d->strag[reg % DFCCL_DIR_RUNS][run & 1] : NULL;
}

/* The word's tag for run `run` of registration reg: decided, no rank. */
static uint64_t dfccl_strag_tag(uint64_t reg, uint64_t run)
{
    return ((run & 0xffffffull) << 40) | (((reg / DFCCL_DIR_RUNS) & 0xffull) << 32) |
           DFCCL_STRAG_DECIDED;
}

void dfccl_strag_registered(struct dfccl_group *g, uint64_t reg)
{
    if (g->pool.dir != NULL) {
        /* before the registration is published (dfccl_dir_publish_reg):
         * a reader that sees it sees this rank's count of its runs */
        __atomic_store_n(&g->pool.dir->runs[reg % DFCCL_DIR_RUNS], 0, __ATOMIC_RELEASE);
    }
}

/* Ranks that have started run `run` of registration reg (a bit each). */
static uint64_t dfccl_strag_arrived(struct dfccl_group *g, uint64_t reg, uint64_t run)
{
    uint64_t m = 0;

    for (int r = 0; r < g->nranks; r++) {
        const dfccl_dir_t *d = dfccl_pool_dir_of(g, r);
        const uint64_t slot  = reg % DFCCL_DIR_RUNS;

        if (d != NULL && __atomic_load_n(&d->regs[slot].reg, __ATOMIC_ACQUIRE) == reg + 1 &&
            __atomic_load_n(&d->runs[slot], __ATOMIC_ACQUIRE) >= run) {
            m |= 1ull << r;
        }
    }
    return m;
}

/* One step of the optimistic protocol on run `run`'s word: add this
 * rank's bit (commit), or decide that the ranks without one are late
 * (expire); a word decided already is the answer (dfccl_strag_commit). */
static int64_t dfccl_strag_mark(struct dfccl_group *g, uint64_t reg, uint64_t run, int expire)
{
    uint64_t *w = dfccl_strag_word(g, reg, run);
    const uint64_t tag = dfccl_strag_tag(reg, run), utag = tag & ~DFCCL_STRAG_DECIDED;
    const uint64_t all = (1ull << g->nranks) - 1, me = 1ull << g->rank;

    if (w == NULL) {
        return -1;
    }
    for (;;) {
        uint64_t cur = __atomic_load_n(w, __ATOMIC_ACQUIRE), mask, want;

        if ((cur & ~DFCCL_STRAG_MASK) == tag) {
            return (int64_t)(cur & DFCCL_STRAG_MASK); /* decided before us */
        }
        /* our bit is there after a commit (set it anyway: never late) */
        mask = ((cur & ~DFCCL_STRAG_MASK) == utag ? cur & DFCCL_STRAG_MASK : 0) | me;
        want = expire ? tag | (all & ~mask) : mask == all ? tag : utag | mask;
        if (__atomic_compare_exchange_n(w, &cur, want, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            return expire ? (int64_t)(all & ~mask) : mask == all ? 0 : -1;
        }
    }
}

int64_t dfccl_strag_commit(struct dfccl_group *g, uint64_t reg, uint64_t run)
{
    return dfccl_strag_mark(g, reg, run, 0);
}

int64_t dfccl_strag_expire(struct dfccl_group *g, uint64_t reg, uint64_t run)
{
    return dfccl_strag_mark(g, reg, run, 1);
}

void dfccl_strag_est_put(struct dfccl_group *g, uint64_t reg, double us)
{
    dfccl_dir_t *d = (dfccl_dir_t *)dfccl_pool_dir_of(g, 0);
    const uint64_t v = us < 1.0 ? 1 : us > 1e15 ? (1ull << 50) : (uint64_t)us;

    if (d != NULL) {
        __atomic_store_n(&d->strag_est[reg % DFCCL_DIR_RUNS],
                         (((reg / DFCCL_DIR_RUNS) & 0xffull) << 56) | v, __ATOMIC_RELAXED);
    }
}

double dfccl_strag_est_get(struct dfccl_group *g, uint64_t reg)
{
    const dfccl_dir_t *d = dfccl_pool_dir_of(g, 0);
    uint64_t v;

    if (d == NULL) {
        return 0.0;
    }
    v = __atomic_load_n(&d->strag_est[reg % DFCCL_DIR_RUNS], __ATOMIC_RELAXED);
    return (v >> 56) == ((reg / DFCCL_DIR_RUNS) & 0xffull) ? (double)(v & ((1ull << 56) - 1))
                                                           : 0.0;
}

int dfccl_strag_started(struct dfccl_group *g, uint64_t reg, uint64_t run)
{
    return dfccl_strag_arrived(g, reg, run) != 0;
}

int64_t dfccl_strag_decide(struct dfccl_group *g, uint64_t reg, uint64_t run, int decide,
                           uint64_t waited_ns, uint64_t wait_ns)
{
    uint64_t *w = dfccl_strag_word(g, reg, run);
    const uint64_t tag = dfccl_strag_tag(reg, run), all = (1ull << g->nranks) - 1;

    if (w == NULL) {
        return -1;
    }
    for (;;) {
        uint64_t cur = __atomic_load_n(w, __ATOMIC_ACQUIRE), arrived, want;

        if ((cur & ~DFCCL_STRAG_MASK) == tag) {
            return (int64_t)(cur & DFCCL_STRAG_MASK);
        }
        if (!decide) {
            return -1;
        }
        arrived = dfccl_strag_arrived(g, reg, run);
        if (arrived == all) {
            want = tag;
        } else if (waited_ns >= wait_ns) {
            want = tag | (all & ~arrived);
        } else {
            return -1;
        }
        /* fails only when another rank wrote first: read its decision */
        __atomic_compare_exchange_n(w, &cur, want, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    }
}
