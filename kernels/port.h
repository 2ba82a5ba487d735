/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Portability layer of the daemon source. The same daemon code builds with
 * nvcc for GPUs (__CUDACC__) and with the host C compiler for the host
 * backend, where a daemon block is one CPU thread. Everything that differs
 * between the two (qualifiers, memory ordering, thread indices, timers,
 * pausing in spin loops) is behind the macros and inline functions here.
 */
#ifndef DFCCL_KERNELS_PORT_H_
#define DFCCL_KERNELS_PORT_H_

#include <stddef.h>
#include <stdint.h>

#include "daemon_types.h"

#if defined(__CUDACC__)

#define DFCCL_F_DEVICE   static __device__ __forceinline__
#define DFCCL_F_NOINLINE static __device__ __noinline__
#define DFCCL_SHARED     __shared__
#define DFCCL_TID        ((int)threadIdx.x)
#define DFCCL_PRAGMA_UNROLL _Pragma("unroll")
#define DFCCL_NTHREADS   ((int)blockDim.x)

/*
 * A release fence: it waits until this thread's earlier accesses are
 * performed at its scope, as fence.acq_rel does, but leaves L1 alone (an
 * acq_rel fence also invalidates the SM's L1, so that the block's next
 * loads of its contexts went to L2). fence.release needs sm_90 and PTX ISA
 * 8.6 (CUDA 12.8); earlier, acq_rel.
 */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 &&                                          \
    (__CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 8))
#define DFCCL_FENCE_RELEASE_GPU "fence.release.gpu;"
#define DFCCL_FENCE_RELEASE_SYS "fence.release.sys;"
#else
#define DFCCL_FENCE_RELEASE_GPU "fence.acq_rel.gpu;"
#define DFCCL_FENCE_RELEASE_SYS "fence.acq_rel.sys;"
#endif

DFCCL_F_DEVICE uint64_t dfccl_ld_acquire_sys(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

DFCCL_F_DEVICE void dfccl_st_release_sys(uint64_t *p, uint64_t v)
{
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

DFCCL_F_DEVICE void dfccl_st_relaxed_sys(uint64_t *p, uint64_t v)
{
    asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/*
 * Publish a connector's head: the reads of the slots before it are done.
 * On GPUs every load of a slot has returned its value before the barrier
 * that precedes this store (the value was stored elsewhere or voted on),
 * so no fence is needed: a plain system-scope store. (A release would wait
 * for this block's outstanding stores to a peer too, which costs a round
 * trip across NVLink.)
 */
DFCCL_F_DEVICE void dfccl_st_consumed(uint64_t *p, uint64_t v)
{
    dfccl_st_relaxed_sys(p, v);
}

/* An 8-byte word of a user buffer, 8-byte aligned (the callers check),
 * and a byte of one: from L2, past this SM's L1, which may hold what the
 * buffer held at an earlier call (no fence is taken between calls: see
 * DFCCL_SQW_CTX_NEW). */
DFCCL_F_DEVICE uint64_t dfccl_ld_word(const char *p)
{
    return (uint64_t)__ldcg((const unsigned long long *)(const void *)p);
}

DFCCL_F_DEVICE uint8_t dfccl_ld_byte(const char *p)
{
    return (uint8_t)__ldcg((const unsigned char *)(const void *)p);
}

DFCCL_F_DEVICE void dfccl_st_word(char *p, uint64_t v)
{
    *(uint64_t *)(void *)p = v;
}

DFCCL_F_DEVICE uint64_t dfccl_ld_acquire_gpu(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

DFCCL_F_DEVICE void dfccl_st_release_gpu(uint64_t *p, uint64_t v)
{
    asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* Relaxed load at system scope: each poll reads memory anew. (Not a
 * volatile load: of mapped host memory, a volatile load does not overlap
 * the loads issued with it, while relaxed ones stay in flight together.) */
DFCCL_F_DEVICE uint64_t dfccl_ld_relaxed(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

/*
 * An SQ or log line (dfccl_sqw_t, 64-byte aligned) is read and written in
 * parts of 16 bytes, DFCCL_SQW_LANE_PARTS parts by each lane of a group
 * (dfccl_daemon_fetch_sq): on GPUs one part a lane, so that four lanes
 * read a line with one load instruction of the warp. Reads of host memory
 * by one warp do not overlap as they seem to: a lane's loads follow one
 * another, so a lane that read its line in four 16-byte loads paid several
 * round trips across PCIe where four lanes reading a part each pay one.
 * Each 8-byte word arrives whole.
 */
#define DFCCL_SQW_LANE_PARTS 1

/* Part `part` of the line at w (two words), relaxed at system scope. */
DFCCL_F_DEVICE void dfccl_ld_sqw_part(const uint64_t *w, uint32_t part, uint64_t *out)
{
    asm volatile("ld.relaxed.sys.global.v2.u64 {%0, %1}, [%2];"
                 : "=l"(out[0]), "=l"(out[1])
                 : "l"(w + 2 * part)
                 : "memory");
}

/* The whole line, one lane alone (block 0's quit handshake). */
DFCCL_F_DEVICE void dfccl_ld_sqw(const uint64_t *w, uint64_t *out)
{
    for (uint32_t p = 0; p < DFCCL_SQW_PARTS; p++) {
        dfccl_ld_sqw_part(w, p, out + 2 * p);
    }
}

/* Part `part` of a line into block 0's log in device memory, a relaxed
 * 16-byte store at device scope, each word whole. For an entry with
 * DFCCL_SQW_CTX_NEW the caller fenced (dfccl_fence_entry, an acq_rel
 * fence) after the load that found it and before this store, which makes
 * it a release; the readers fence again. */
DFCCL_F_DEVICE void dfccl_st_logw_part(uint64_t *w, uint32_t part, const uint64_t *in)
{
    asm volatile("st.relaxed.gpu.global.v2.u64 [%0], {%1, %2};" ::"l"(w + 2 * part), "l"(in[0]),
                 "l"(in[1])
                 : "memory");
}

/* After relaxed loads that saw a new entry: later loads of this thread
 * (a collective's contexts, written before the entry) miss no update. */
DFCCL_F_DEVICE void dfccl_fence_acquire_gpu(void)
{
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
}

/* After the relaxed loads that found an SQ entry or a log line: with
 * DFCCL_SQW_CTX_NEW, the collective's contexts are read after them. */
DFCCL_F_DEVICE void dfccl_fence_entry(uint32_t ctx_new)
{
    if (ctx_new) {
        dfccl_fence_acquire_gpu();
    }
}

/* A block's consumed log position, which block 0 reads before it writes
 * over a line: the loads of the lines before it have returned their values
 * (decoded and voted on), so a plain store at device scope. A release
 * waited for the block's earlier stores, on the way to its next
 * collective. */
DFCCL_F_DEVICE void dfccl_st_log_head(uint64_t *p, uint64_t v)
{
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* After relaxed loads at system scope (words peers on other GPUs release):
 * they act as acquires, so several of them can be in flight together where
 * acquire loads would each wait for the one before. */
DFCCL_F_DEVICE void dfccl_fence_acquire_sys(void)
{
    asm volatile("fence.acq_rel.sys;" ::: "memory");
}

/* Before relaxed stores at system scope to several peers: with it they act
 * as releases, where release stores one after the other would each wait
 * for the one before to reach its peer. */
DFCCL_F_DEVICE void dfccl_fence_release_sys(void)
{
    asm volatile(DFCCL_FENCE_RELEASE_SYS ::: "memory");
}

/* Sequentially consistent fence at system scope: the GPU's half of a
 * store-then-load handshake with the host. */
DFCCL_F_DEVICE void dfccl_fence_sc_sys(void)
{
    asm volatile("fence.sc.sys;" ::: "memory");
}

/*
 * Store a completion word for the host, after this thread's (and, through
 * the barrier before it, its block's) data writes. The release is at GPU
 * scope: the data a completion announces lives in this GPU's memory and is
 * read after it only by work the host starts afterwards (kernels, copies,
 * peers through P2P), all of which read through this GPU's L2; the host
 * itself reads nothing but the word. A system-scope release would wait for
 * every outstanding store of the thread to reach the host, microseconds on
 * the way of every collective. A release fence, not acq_rel: the block's
 * L1 keeps the contexts that its next collective reads (see
 * DFCCL_FENCE_RELEASE_GPU).
 */
DFCCL_F_DEVICE void dfccl_st_to_host(uint64_t *p, uint64_t v)
{
    asm volatile(DFCCL_FENCE_RELEASE_GPU "\n\t"
                 "st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* Two such words after one fence (a collective's progress and its CQE),
 * in no order between them: a second fence would wait for the first
 * word's store across PCIe. */
DFCCL_F_DEVICE void dfccl_st_to_host2(uint64_t *p, uint64_t v, uint64_t *q, uint64_t w)
{
    asm volatile(DFCCL_FENCE_RELEASE_GPU "\n\t"
                 "st.relaxed.sys.global.u64 [%0], %1;\n\t"
                 "st.relaxed.sys.global.u64 [%2], %3;" ::"l"(p), "l"(v), "l"(q), "l"(w)
                 : "memory");
}

DFCCL_F_DEVICE uint64_t dfccl_now_ns(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* Bring the line at p into this SM's L1 without waiting for it: reads
 * that follow find it there instead of each waiting its own turn. */
DFCCL_F_DEVICE void dfccl_prefetch_l1(const void *p)
{
    asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
}

DFCCL_F_DEVICE void dfccl_pause(void)
{
    __nanosleep(64);
}

/* Between two polls of the SQ by an idle leader: on GPUs none, the read of
 * host memory is the wait (about a microsecond). */
DFCCL_F_DEVICE void dfccl_spin_pause(void)
{
}

DFCCL_F_DEVICE void dfccl_block_sync(void)
{
    __syncthreads();
}

/*
 * Threads of a block that move the data of a SIMPLE primitive. In blocks of
 * at least 128 threads the last warp moves nothing: it publishes each slice
 * (a system-scope release, which waits until the block's stores have
 * reached the peer, microseconds across NVLink) while the others already
 * move the next one.
 */
#define DFCCL_NMOVERS (DFCCL_NTHREADS >= 128 ? DFCCL_NTHREADS - 32 : DFCCL_NTHREADS)

/* Named barriers besides __syncthreads' barrier 0. */
enum {
    DFCCL_BAR_MOVERS  = 1, /* the movers of a block */
    DFCCL_BAR_HANDOFF = 2, /* movers and the publishing warp: a slice is written */
    DFCCL_BAR_TEAM    = 3  /* the first warps of a block, running a small collective */
};

/* Barrier `id` of `count` threads (whole warps). Like __syncthreads, it
 * orders the memory accesses of the threads that take part. Not the
 * .aligned form: only some warps of the block take it, and thread 0 comes
 * to it from a branch of its own. */
DFCCL_F_DEVICE void dfccl_bar_named(uint32_t id, uint32_t count)
{
    asm volatile("barrier.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}

/*
 * Loads of the data a primitive moves bypass L1 (cached in L2 only): each
 * byte is read once, so L1 would hold nothing worth keeping.
 */
#define DFCCL_LDV(p) __ldcg(p)
#define DFCCL_LD1(T, p, i) (*(const volatile T *)&(p)[i])

/* A 16-byte vector of data as two 8-byte words (lo first in memory). */
typedef struct { uint64_t lo, hi; } dfccl_vec_t;
DFCCL_F_DEVICE dfccl_vec_t dfccl_vld(const void *p)
{
    const uint4 v = __ldcg((const uint4 *)p);
    dfccl_vec_t r;
    r.lo = (uint64_t)v.x | ((uint64_t)v.y << 32);
    r.hi = (uint64_t)v.z | ((uint64_t)v.w << 32);
    return r;
}
DFCCL_F_DEVICE void dfccl_vst(void *p, dfccl_vec_t v)
{
    *(uint4 *)p = make_uint4((uint32_t)v.lo, (uint32_t)(v.lo >> 32), (uint32_t)v.hi,
                             (uint32_t)(v.hi >> 32));
}

/* Barrier that also returns whether `pred` held on every thread. */
DFCCL_F_DEVICE int dfccl_block_all(int pred)
{
    return __syncthreads_and(pred);
}

/* The same for the first `n` threads of the block (whole warps; all of
 * them when n is the block size), which run a collective alone. */
DFCCL_F_DEVICE void dfccl_team_sync(uint32_t n)
{
    if (n >= (uint32_t)DFCCL_NTHREADS) {
        dfccl_block_sync();
    } else {
        dfccl_bar_named(DFCCL_BAR_TEAM, n);
    }
}

DFCCL_F_DEVICE int dfccl_team_all(int pred, uint32_t n)
{
    int all;

    if (n >= (uint32_t)DFCCL_NTHREADS) {
        return dfccl_block_all(pred);
    }
    asm volatile("{\n\t.reg .pred p, q;\n\t"
                 "setp.ne.s32 q, %1, 0;\n\t"
                 "barrier.red.and.pred p, %2, %3, q;\n\t"
                 "selp.s32 %0, 1, 0, p;\n\t}"
                 : "=r"(all)
                 : "r"(pred), "r"((uint32_t)DFCCL_BAR_TEAM), "r"(n)
                 : "memory");
    return all;
}

/* Lanes of a warp, and what warp 0 does together (the leader's SQ reads):
 * all 32 lanes take part, from a branch that the whole warp takes. */
#define DFCCL_WARP 32

DFCCL_F_DEVICE void dfccl_warp_sync(void)
{
    __syncwarp();
}

/* Bit i set: `pred` held on lane i. */
DFCCL_F_DEVICE uint32_t dfccl_warp_ballot(int pred)
{
    return __ballot_sync(0xffffffffu, pred);
}

/* The lowest bit set in `mask`, or `none` if there is none. */
DFCCL_F_DEVICE uint32_t dfccl_lowest_bit(uint32_t mask, uint32_t none)
{
    return mask != 0 ? (uint32_t)(__ffs((int)mask) - 1) : none;
}

/* Set bits in a block-shared word (threads of one block, between barriers). */
DFCCL_F_DEVICE void dfccl_shared_or(uint32_t *p, uint32_t v)
{
    atomicOr(p, v);
}

/*
 * LL lines: 16 bytes {data0, flag, data1, flag}, written with one 16-byte
 * volatile store and read with one 16-byte volatile load. Each 8-byte half
 * (4 bytes of data and its flag) arrives whole, so a reader that sees both
 * flags sees both halves of the data: no fence on either side.
 */
DFCCL_F_DEVICE void dfccl_ll_store(char *line, uint32_t d0, uint32_t d1, uint32_t flag)
{
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(line), "r"(d0),
                 "r"(flag), "r"(d1), "r"(flag)
                 : "memory");
}

/* Load a line; nonzero when both its flags are `flag` (*d0 and *d1 then hold
 * its data). */
DFCCL_F_DEVICE int dfccl_ll_load(const char *line, uint32_t flag, uint32_t *d0, uint32_t *d1)
{
    uint32_t a, f0, b, f1;
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(a), "=r"(f0), "=r"(b), "=r"(f1)
                 : "l"(line)
                 : "memory");
    *d0 = a;
    *d1 = b;
    return f0 == flag && f1 == flag;
}

#else /* host backend */

#include <sched.h>
#include <string.h>
#include <time.h>

#define DFCCL_F_DEVICE   static inline
#define DFCCL_F_NOINLINE static
#define DFCCL_SHARED
#define DFCCL_TID        0
#define DFCCL_PRAGMA_UNROLL
#define DFCCL_NTHREADS   1

DFCCL_F_DEVICE uint64_t dfccl_ld_acquire_sys(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

DFCCL_F_DEVICE void dfccl_st_release_sys(uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

#define dfccl_ld_acquire_gpu dfccl_ld_acquire_sys
#define dfccl_st_release_gpu dfccl_st_release_sys

DFCCL_F_DEVICE void dfccl_st_relaxed_sys(uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELAXED);
}

/* On the host the reads of a slot are plain loads: a release orders them. */
DFCCL_F_DEVICE void dfccl_st_consumed(uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

DFCCL_F_DEVICE uint64_t dfccl_ld_word(const char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

DFCCL_F_DEVICE uint8_t dfccl_ld_byte(const char *p)
{
    return (uint8_t)*p;
}

DFCCL_F_DEVICE void dfccl_st_word(char *p, uint64_t v)
{
    memcpy(p, &v, sizeof(v));
}

DFCCL_F_DEVICE uint64_t dfccl_ld_relaxed(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* A host block reads and writes a line whole (DFCCL_SQW_LANE_PARTS parts
 * from `part`, which is 0). */
#define DFCCL_SQW_LANE_PARTS DFCCL_SQW_PARTS

DFCCL_F_DEVICE void dfccl_ld_sqw_part(const uint64_t *w, uint32_t part, uint64_t *out)
{
    for (uint32_t i = 0; i < 2 * DFCCL_SQW_LANE_PARTS; i++) {
        out[i] = __atomic_load_n(&w[2 * part + i], __ATOMIC_RELAXED);
    }
}

DFCCL_F_DEVICE void dfccl_ld_sqw(const uint64_t *w, uint64_t *out)
{
    dfccl_ld_sqw_part(w, 0, out);
}

/* The host's acquire fence does not order later stores: release here. */
DFCCL_F_DEVICE void dfccl_st_logw_part(uint64_t *w, uint32_t part, const uint64_t *in)
{
    __atomic_thread_fence(__ATOMIC_RELEASE);
    for (uint32_t i = 0; i < 2 * DFCCL_SQW_LANE_PARTS; i++) {
        __atomic_store_n(&w[2 * part + i], in[i], __ATOMIC_RELAXED);
    }
}

DFCCL_F_DEVICE void dfccl_fence_acquire_gpu(void)
{
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
}

DFCCL_F_DEVICE void dfccl_fence_acquire_sys(void)
{
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
}

/* On the host, after every entry: the fence costs nothing on x86, and the
 * loads of the contexts are then ordered in C11's terms too. */
DFCCL_F_DEVICE void dfccl_fence_entry(uint32_t ctx_new)
{
    (void)ctx_new;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
}

/* The host's blocks read the log with plain loads: a release orders them. */
DFCCL_F_DEVICE void dfccl_st_log_head(uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

DFCCL_F_DEVICE void dfccl_fence_release_sys(void)
{
    __atomic_thread_fence(__ATOMIC_RELEASE);
}

DFCCL_F_DEVICE void dfccl_fence_sc_sys(void)
{
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

DFCCL_F_DEVICE void dfccl_st_to_host(uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

DFCCL_F_DEVICE void dfccl_st_to_host2(uint64_t *p, uint64_t v, uint64_t *q, uint64_t w)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
    __atomic_store_n(q, w, __ATOMIC_RELEASE);
}

DFCCL_F_DEVICE uint64_t dfccl_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Host blocks share few cores with other ranks: a pause always gives the CPU
 * away. A yield that comes back late means the core is oversubscribed (more
 * runnable threads than cores, other jobs beside the ranks). A thread that
 * only yields then stays runnable and takes a scheduler slice per poll from
 * the threads that have work, so for a while it sleeps instead: it leaves
 * the run queue, and a wakeup after sleeping preempts a thread that never
 * sleeps. On a core of its own, a yield returns at once and polls stay
 * sub-microsecond.
 */
#define DFCCL_HOST_LATE_YIELD_NS 50000ull    /* far above a yield with nobody waiting */
#define DFCCL_HOST_SLEEPY_NS     10000000ull /* how long one late yield keeps sleeps on */
#define DFCCL_HOST_NAP_NS        20000L /* shorter naps act as yields do */

static __thread uint64_t dfccl_host_sleepy_until;

DFCCL_F_DEVICE void dfccl_prefetch_l1(const void *p)
{
    (void)p;
}

DFCCL_F_DEVICE void dfccl_pause(void)
{
    struct timespec ts = {0, DFCCL_HOST_NAP_NS};
    uint64_t t0        = dfccl_now_ns();

    if (t0 < dfccl_host_sleepy_until) {
        nanosleep(&ts, NULL);
        return;
    }
    sched_yield();
    if (dfccl_now_ns() - t0 > DFCCL_HOST_LATE_YIELD_NS) {
        dfccl_host_sleepy_until = t0 + DFCCL_HOST_SLEEPY_NS;
    }
}

DFCCL_F_DEVICE void dfccl_spin_pause(void)
{
    dfccl_pause();
}

DFCCL_F_DEVICE void dfccl_block_sync(void)
{
}

/* One thread per block: it moves the data and publishes it. */
#define DFCCL_NMOVERS 1

enum {
    DFCCL_BAR_MOVERS  = 1,
    DFCCL_BAR_HANDOFF = 2,
    DFCCL_BAR_TEAM    = 3
};

DFCCL_F_DEVICE void dfccl_bar_named(uint32_t id, uint32_t count)
{
    (void)id;
    (void)count;
}

#define DFCCL_LDV(p) (*(p))
#define DFCCL_LD1(T, p, i) ((p)[i])

typedef struct { uint64_t lo, hi; } dfccl_vec_t;
DFCCL_F_DEVICE dfccl_vec_t dfccl_vld(const void *p)
{
    dfccl_vec_t r;
    memcpy(&r, p, sizeof(r));
    return r;
}
DFCCL_F_DEVICE void dfccl_vst(void *p, dfccl_vec_t v)
{
    memcpy(p, &v, sizeof(v));
}

DFCCL_F_DEVICE int dfccl_block_all(int pred)
{
    return pred;
}

DFCCL_F_DEVICE void dfccl_team_sync(uint32_t n)
{
    (void)n;
}

DFCCL_F_DEVICE int dfccl_team_all(int pred, uint32_t n)
{
    (void)n;
    return pred;
}

#define DFCCL_WARP 1

DFCCL_F_DEVICE void dfccl_warp_sync(void)
{
}

DFCCL_F_DEVICE uint32_t dfccl_warp_ballot(int pred)
{
    return pred ? 1u : 0u;
}

DFCCL_F_DEVICE uint32_t dfccl_lowest_bit(uint32_t mask, uint32_t none)
{
    return mask != 0 ? (uint32_t)__builtin_ctz(mask) : none;
}

DFCCL_F_DEVICE void dfccl_shared_or(uint32_t *p, uint32_t v)
{
    *p |= v;
}

/* LL lines on the host: each half {data, flag} is one 8-byte atomic word. */
DFCCL_F_DEVICE void dfccl_ll_store(char *line, uint32_t d0, uint32_t d1, uint32_t flag)
{
    uint64_t *w = (uint64_t *)(void *)line;
    __atomic_store_n(&w[0], (uint64_t)d0 | ((uint64_t)flag << 32), __ATOMIC_RELAXED);
    __atomic_store_n(&w[1], (uint64_t)d1 | ((uint64_t)flag << 32), __ATOMIC_RELAXED);
}

DFCCL_F_DEVICE int dfccl_ll_load(const char *line, uint32_t flag, uint32_t *d0, uint32_t *d1)
{
    const uint64_t *w = (const uint64_t *)(const void *)line;
    uint64_t a = __atomic_load_n(&w[0], __ATOMIC_RELAXED);
    uint64_t b = __atomic_load_n(&w[1], __ATOMIC_RELAXED);
    *d0 = (uint32_t)a;
    *d1 = (uint32_t)b;
    return (uint32_t)(a >> 32) == flag && (uint32_t)(b >> 32) == flag;
}

#endif

#define DFCCL_MIN(a, b) ((a) < (b) ? (a) : (b))
#define DFCCL_MAX(a, b) ((a) > (b) ? (a) : (b))
#define DFCCL_DIV_UP(a, b) (((a) + (b) - 1) / (b))

#endif /* DFCCL_KERNELS_PORT_H_ */
