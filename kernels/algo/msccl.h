/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MSCCL programs, run as primitive calls like the built-in algorithms: the
 * channel of index t runs thread block t of this rank's part of the
 * program (runtime/algo/msccl.c wrote it, dfccl_ms_tb_t). Its connectors
 * are the mesh's (alltoall.h): channel c's region at each rank holds a
 * connector per sender, and a thread block of channel c sends into its own
 * connector at its send peer and receives from its receive peer's
 * connector here. MSCCL allows one thread block per peer and channel each
 * way, so every connector has one writer and one reader, whose sequences
 * (dyn.send_seq, dyn.recv_seq) pair up run after run.
 *
 * The thread block's primitives run on its view of the channel
 * (DFCCL_MS_VIEW), which the host wrote with its connectors; the view and
 * the steps follow the thread block in memory, and a run asks for their
 * first lines at once.
 *
 * Every chunk has the same number of elements; the program runs once per
 * loop, each loop on the next slot's worth of every chunk. A step moves its
 * cnt chunks as cnt primitives. Where a step waits for a step of another
 * thread block (depid, deps), it reads that block's count of completed
 * events (done[]), which the block publishes after a step another waits
 * for. An out-of-place run of a program written for in place first copies
 * the input into the output, each thread block a share, and starts only
 * once every share is there.
 *
 * Preemption: dyn.loop, dyn.step and dyn.slice (the chunk within the
 * step) say where a run resumes, dyn.phase how far its start got. A
 * primitive that is STUCK has moved nothing; a dependency that is not met
 * returns STUCK before the step starts.
 */
#ifndef DFCCL_KERNELS_ALGO_MSCCL_H_
#define DFCCL_KERNELS_ALGO_MSCCL_H_

#include "alltoall.h"

/* Lines of a thread block (with its channel and steps) a run asks for
 * at its start. */
#define DFCCL_MS_PREFETCH_LINES (DFCCL_MS_PREFETCH_BYTES / 128u)

/* Wait, at most x->spin polls, until *p reaches `target`; 0 if it did not
 * (the threads running the program return STUCK). The counters stay on
 * this GPU and order only what its thread blocks do to its memory: data
 * from other ranks comes through connectors, which order it themselves, so
 * GPU scope is enough. */
DFCCL_F_DEVICE int dfccl_ms_wait(dfccl_exec_t *x, const uint64_t *p, uint64_t target)
{
    if (DFCCL_TID == 0) {
        uint32_t ok = 0;
        for (uint32_t i = 0;; i++) {
            if (dfccl_ld_acquire_gpu(p) >= target) {
                ok = 1;
                break;
            }
            if (i >= x->spin || (((i & 63) == 63) && dfccl_ld_relaxed(x->abort_flag))) {
                break;
            }
            dfccl_pause();
        }
        x->ctl->ready = ok;
    }
    dfccl_team_sync(x->nthreads);
    if (!x->ctl->ready) {
        dfccl_team_sync(x->nthreads); /* everyone read `ready` before it changes */
        return 0;
    }
    dfccl_team_sync(x->nthreads);
    return 1;
}

/* Publish `v` (this thread block's events done) once every thread's
 * writes are in: a block that acquires it sees them. */
DFCCL_F_DEVICE void dfccl_ms_publish(dfccl_exec_t *x, uint64_t *p, uint64_t v)
{
    dfccl_team_sync(x->nthreads);
    if (DFCCL_TID == 0) {
        dfccl_st_release_gpu(p, v);
    }
    x->dirty = 1;
}

/* A local copy, or reduction into dst (re), of n elements: no connector,
 * never STUCK. A team (a small LL program) takes it a word a thread, the
 * whole block through its movers. */
DFCCL_F_DEVICE void dfccl_ms_local(dfccl_exec_t *x, int reduce, const char *src, char *dst,
                                   uint64_t n)
{
    const dfccl_coll_static_t *st = x->st;

    if (x->nthreads < (uint32_t)DFCCL_NTHREADS) {
        const uint64_t bytes = n * st->elem_size, words = DFCCL_DIV_UP(bytes, 8);

        for (uint64_t i = (uint64_t)DFCCL_TID; i < words; i += x->nthreads) {
            const uint64_t v = dfccl_ll_get(src, i, bytes);
            dfccl_ll_put(dst, i, bytes,
                         reduce ? dfccl_red_word(st->dtype, st->op, 0,
                                                 dfccl_ll_get(dst, i, bytes), v)
                                : v);
        }
    } else if (DFCCL_TID < DFCCL_NMOVERS) {
        dfccl_reduce_copy(st->dtype, st->op, reduce ? dst : src, reduce ? src : NULL, dst, NULL,
                          n, 0);
    }
    dfccl_team_sync(x->nthreads);
    dfccl_prim_moved(x);
}

/* The run's buffers i, o, s, and what an out-of-place run of a program for
 * in place copies first (*copy_from, into *copy_to, *copy_n elements). */
DFCCL_F_DEVICE void dfccl_ms_buffers(const dfccl_exec_t *x, const dfccl_ms_tb_t *tb, char *b[3],
                                     const char **copy_from, char **copy_to, uint64_t *copy_n)
{
    const dfccl_coll_static_t *st = x->st;
    const uint64_t esz = st->elem_size, nin = (uint64_t)tb->in_chunks * tb->chunk_elems;
    char *in = (char *)(uintptr_t)x->sendbuff;
    char *out = x->recvbuff;
    /* allgather: our input's place in the output; reduce-scatter: our
     * output's in the input (their in-place forms) */
    char *mine = st->kind == DFCCL_COLL_ALLGATHER ? out + (uint64_t)st->rank * nin * esz : out;

    *copy_n = 0;
    b[DFCCL_K_MS_IN]      = in;
    b[DFCCL_K_MS_OUT]     = out;
    b[DFCCL_K_MS_SCRATCH] = tb->scratch;
    if (st->kind == DFCCL_COLL_REDUCESCATTER) {
        return; /* the program serves both forms */
    }
    if (in == mine) {
        b[DFCCL_K_MS_IN] = mine;
    } else if (tb->inplace_only) {
        *copy_from       = in;
        *copy_to         = mine;
        *copy_n          = nin;
        b[DFCCL_K_MS_IN] = mine;
    }
}

/* One chunk of a step (the step's chunk c) in loop `loop`: a primitive. */
DFCCL_F_DEVICE int dfccl_ms_chunk(dfccl_exec_t *x, const dfccl_ms_tb_t *tb,
                                  const dfccl_ms_step_t *s, char *const b[3], uint64_t loop,
                                  uint32_t c)
{
    const uint64_t esz = x->st->elem_size, ce = tb->chunk_elems;
    const uint64_t o = loop * x->slice_elems, n = DFCCL_MIN(x->slice_elems, ce - o);
    char *src = b[s->srcbuf] + (((uint64_t)s->srcoff + c) * ce + o) * esz;
    char *dst = b[s->dstbuf] + (((uint64_t)s->dstoff + c) * ce + o) * esz;

    switch (s->type) {
    case DFCCL_K_MS_SEND: return dfccl_prim(x, DFCCL_P_SEND, src, NULL, n);
    case DFCCL_K_MS_RECV: return dfccl_prim(x, DFCCL_P_RECV | DFCCL_P_COPY, NULL, dst, n);
    case DFCCL_K_MS_RCS:
        return dfccl_prim(x, DFCCL_P_RECV | DFCCL_P_COPY | DFCCL_P_SEND, NULL, dst, n);
    case DFCCL_K_MS_RRS:
        return dfccl_prim(x, DFCCL_P_RECV | DFCCL_P_REDUCE | DFCCL_P_SEND, src, NULL, n);
    case DFCCL_K_MS_RRC:
        return dfccl_prim(x, DFCCL_P_RECV | DFCCL_P_REDUCE | DFCCL_P_COPY, src, dst, n);
    case DFCCL_K_MS_RRCS:
        return dfccl_prim(x, DFCCL_P_RECV | DFCCL_P_REDUCE | DFCCL_P_COPY | DFCCL_P_SEND, src,
                          dst, n);
    case DFCCL_K_MS_COPY:
    case DFCCL_K_MS_REDUCE:
        dfccl_ms_local(x, s->type == DFCCL_K_MS_REDUCE, src, dst, n);
        return DFCCL_PRIM_OK;
    default: return DFCCL_PRIM_OK; /* nop */
    }
}

DFCCL_F_DEVICE int dfccl_msccl_run(dfccl_exec_t *x)
{
    const dfccl_chan_t *home = x->ch;
    const dfccl_ms_tb_t *tb  = home->msccl;
    const uint64_t esz = x->st->elem_size, L = x->slice_elems;
    uint64_t nloops, base, copy_n;
    const char *copy_from = NULL;
    char *copy_to = NULL, *b[3];
    int rc;

    if (tb == NULL) {
        return DFCCL_PRIM_DONE; /* no thread block of this rank on this channel */
    }
    /* the thread block, its channel and its first steps, and the rest of
     * the collective's constants: one wait for all of them, not one each */
    if (DFCCL_TID < DFCCL_MS_PREFETCH_LINES) {
        dfccl_prefetch_l1((const char *)tb + (uint64_t)DFCCL_TID * 128u);
    } else if (DFCCL_TID < DFCCL_MS_PREFETCH_LINES + 2) { /* its first and last line */
        dfccl_prefetch_l1((const char *)x->st + (DFCCL_TID - DFCCL_MS_PREFETCH_LINES) *
                                                    (sizeof(*x->st) - 1));
    }
    nloops = DFCCL_DIV_UP(tb->chunk_elems, L);
    base   = x->dyn.calls * (1 + nloops * (uint64_t)tb->nsteps);
    dfccl_ms_buffers(x, tb, b, &copy_from, &copy_to, &copy_n);
    if (x->dyn.phase < 2 && copy_n > 0) {
        if (x->dyn.phase == 0) {
            const uint64_t lo = copy_n * (uint64_t)tb->tb / (uint64_t)tb->ntbs;
            const uint64_t hi = copy_n * (uint64_t)(tb->tb + 1) / (uint64_t)tb->ntbs;
            for (uint64_t o = lo; o < hi; o += L) {
                dfccl_ms_local(x, 0, copy_from + o * esz, copy_to + o * esz,
                               DFCCL_MIN(L, hi - o));
            }
            dfccl_ms_publish(x, &tb->done[tb->tb], base + 1);
            x->dyn.phase = 1;
        }
        for (int t = 0; t < tb->ntbs; t++) {
            const uint64_t e = 1 + nloops * (uint64_t)tb->nsteps_of[t];
            if (!dfccl_ms_wait(x, &tb->done[t], x->dyn.calls * e + 1)) {
                return DFCCL_PRIM_STUCK;
            }
        }
    }
    x->dyn.phase = 2;
    x->ch        = DFCCL_MS_VIEW(tb);
    DFCCL_STAMP(x->ctl, DFCCL_STAGE_CREDIT); /* a diagnostic build: the start done */
    for (; x->dyn.loop < nloops; x->dyn.loop++, x->dyn.step = 0) {
        for (; x->dyn.step < (uint32_t)tb->nsteps; x->dyn.step++, x->dyn.slice = 0) {
            const dfccl_ms_step_t *s = &DFCCL_MS_STEPS(tb)[x->dyn.step];

            if (x->dyn.slice == 0 && s->depid >= 0) {
                const uint64_t e = 1 + nloops * (uint64_t)tb->nsteps_of[s->depid];
                const uint64_t want = x->dyn.calls * e + 2 +
                                      (uint64_t)x->dyn.loop * (uint64_t)tb->nsteps_of[s->depid] +
                                      (uint64_t)s->deps;
                if (!dfccl_ms_wait(x, &tb->done[s->depid], want)) {
                    x->ch = home;
                    return DFCCL_PRIM_STUCK;
                }
            }
            for (; s->type != DFCCL_K_MS_NOP && x->dyn.slice < (uint32_t)s->cnt; x->dyn.slice++) {
                rc = dfccl_ms_chunk(x, tb, s, b, x->dyn.loop, x->dyn.slice);
                if (rc != DFCCL_PRIM_OK) {
                    x->ch = home;
                    return rc;
                }
            }
            /* a diagnostic build's stages: step k of the first loop done
             * (a receiving step's lines arrived at ARRIVED0, dfccl_prim_ll) */
            DFCCL_STAMP(x->ctl, x->dyn.step == 0 ? DFCCL_STAGE_SENT0
                                                 : DFCCL_STAGE_REDUCED +
                                                       DFCCL_MIN(x->dyn.step - 1, 3u));
            if (s->hasdep) {
                dfccl_ms_publish(x, &tb->done[tb->tb],
                                 base + 2 + (uint64_t)x->dyn.loop * (uint64_t)tb->nsteps +
                                     x->dyn.step);
            }
        }
    }
    x->ch = home;
    x->dyn.calls++;
    x->dyn.phase = 0;
    return DFCCL_PRIM_DONE;
}

#endif /* DFCCL_KERNELS_ALGO_MSCCL_H_ */
