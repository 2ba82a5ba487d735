/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dfccl-ctxbench: cost of one context switch of the daemon, on the host
 * build of the daemon source. Two collectives run on two virtual ranks in
 * one thread, with a spin threshold of zero and the ranks' turns chosen so
 * that every primitive that is not ready preempts its collective: the
 * dynamic context is saved, the other collective's loaded, and the first
 * one resumed later where it stopped. It reports the time per switch (the
 * stuck attempt, the save and the next load), and the time per primitive
 * when nothing is preempted, for comparison.
 *
 *   dfccl-ctxbench [rounds]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon.h"

#define SLOT 256
#define NSLOTS 8

typedef struct {
    dfccl_coll_static_t st;
    dfccl_chan_t        ch;
    dfccl_dyn_t         saved;
    char               *region;
    float              *buf;
} vrank_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void setup(vrank_t *v, int n, uint64_t count)
{
    size_t rb = sizeof(dfccl_conn_ctrl_t) + NSLOTS * SLOT;
    for (int r = 0; r < n; r++) {
        memset(&v[r], 0, sizeof(v[r]));
        v[r].st.kind = DFCCL_COLL_ALLREDUCE; v[r].st.dtype = DFCCL_K_FLOAT32;
        v[r].st.op = DFCCL_K_SUM; v[r].st.nranks = n; v[r].st.rank = r; v[r].st.ring_pos = r;
        v[r].st.nchannels = 1; v[r].st.count = count; v[r].st.slot_bytes = SLOT;
        v[r].st.nslots = NSLOTS; v[r].st.chunk_slices = 1; v[r].st.elem_size = 4;
        v[r].region = aligned_alloc(128, rb);
        memset(v[r].region, 0, rb);
        v[r].buf = calloc(count, sizeof(float));
    }
    for (int r = 0; r < n; r++) {
        v[r].ch.cnt = count;
        v[r].ch.recv_ctrl = (dfccl_conn_ctrl_t *)v[r].region;
        v[r].ch.recv_data = v[r].region + sizeof(dfccl_conn_ctrl_t);
        v[r].ch.send_ctrl = (dfccl_conn_ctrl_t *)v[(r + 1) % n].region;
        v[r].ch.send_data = v[(r + 1) % n].region + sizeof(dfccl_conn_ctrl_t);
    }
}

/* One activation of rank r: load, run until done or stuck, save. */
static int activate(vrank_t *v, uint32_t spin, uint64_t *prims)
{
    static const uint64_t zero = 0;
    dfccl_blk_ctl_t ctl;
    dfccl_exec_t x;
    int rc;

    x.st = &v->st; x.ch = &v->ch; x.dyn = v->saved;
    x.sendbuff = (const char *)v->buf; x.recvbuff = (char *)v->buf;
    x.ctl = &ctl; x.abort_flag = &zero; x.slice_elems = SLOT / 4;
    x.spin = spin; x.spin_sticky = spin; x.progressed = 0; x.handoffs = 0; x.dirty = 0;
    x.ll_scratch = NULL; /* SIMPLE only */
    x.nthreads = 1;      /* the host backend: one thread */
    x.chan     = 0;
    rc = dfccl_algo_run(&x);
    v->saved = x.dyn;
    *prims += x.progressed;
    if (rc == DFCCL_PRIM_DONE) {
        v->saved.loop = v->saved.step = v->saved.slice = v->saved.started = 0;
    }
    return rc;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 2000000;
    uint64_t count = 64 * 1024, prims = 0, switches = 0;
    vrank_t v[2];
    double t0, t_switch, t_run;
    int rc = DFCCL_PRIM_OK;

    setup(v, 2, count);
    /* Rank 0 sends its first chunk, then needs rank 1's data, which never
     * comes: from then on every activation is a switch in, one poll that
     * fails, and a switch out. */
    while (rc != DFCCL_PRIM_STUCK) {
        rc = activate(&v[0], 0, &prims);
    }
    t0 = now_s();
    for (long i = 0; i < n; i++) {
        switches += activate(&v[0], 0, &prims) == DFCCL_PRIM_STUCK;
    }
    t_switch = now_s() - t0;
    /* For scale: whole allreduces, both ranks taking turns, one preemption
     * whenever a rank runs ahead of the other. */
    setup(v, 2, count);
    prims = 0;
    t0    = now_s();
    for (int i = 0; i < 200; i++) {
        int done[2] = {0, 0};
        while (!done[0] || !done[1]) {
            for (int r = 0; r < 2; r++) {
                if (!done[r]) {
                    done[r] = activate(&v[r], 0, &prims) == DFCCL_PRIM_DONE;
                }
            }
        }
    }
    t_run = now_s() - t0;
    printf("dfccl-ctxbench (host build of the daemon)\n");
    printf("  context switch (load dynamic context, one failed poll, save): %.1f ns "
           "(%ld switches)\n", 1e9 * t_switch / (double)switches, (long)switches);
    printf("  primitive of %d bytes, preempted whenever its peer lags: %.1f ns "
           "(%llu primitives)\n", SLOT, 1e9 * t_run / (double)prims,
           (unsigned long long)prims);
    return switches == (uint64_t)n ? 0 : 1;
}
