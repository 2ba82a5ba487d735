/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the daemon's scheduling pieces on the host build: task queue
 * order (FIFO and priority), the control entries of the SQ (exit, resize,
 * remap), the idle time toward a voluntary quit, and
 * exact preemption: every collective (all-to-alls on the ring and on the
 * mesh, alltoallv with uneven and zero counts) is run
 * on n virtual ranks in one process with a spin threshold of zero, switched
 * out at every primitive that is not ready, its dynamic context saved,
 * scribbled over and restored, in a random interleaving, and must still
 * produce exactly the right result.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "suite.h"

static dfccl_task_t mk_task(int id, int prio)
{
    dfccl_task_t t;
    memset(&t, 0, sizeof(t));
    t.coll_id  = id;
    t.priority = prio;
    return t;
}

START_TEST(test_task_queue_fifo)
{
    dfccl_daemon_args_t a;
    dfccl_task_t q[8], t;
    uint32_t n = 0;

    memset(&a, 0, sizeof(a));
    a.priority_order = 0;
    for (int i = 0; i < 5; i++) {
        t = mk_task(i, 5 - i);
        dfccl_daemon_task_insert(&a, q, &n, &t);
    }
    ck_assert_uint_eq(n, 5);
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(q[i].coll_id, i);
    }
    dfccl_daemon_task_remove(q, &n, 1);
    ck_assert_uint_eq(n, 4);
    ck_assert_int_eq(q[1].coll_id, 2);
    ck_assert_int_eq(q[3].coll_id, 4);
}
END_TEST

START_TEST(test_task_queue_priority)
{
    dfccl_daemon_args_t a;
    dfccl_task_t q[8], t;
    uint32_t n = 0;
    int prios[] = {1, 5, 1, 9, 5, 0};
    int expect[] = {3, 1, 4, 0, 2, 5}; /* by priority, then arrival */

    memset(&a, 0, sizeof(a));
    a.priority_order = 1;
    for (int i = 0; i < 6; i++) {
        t = mk_task(i, prios[i]);
        dfccl_daemon_task_insert(&a, q, &n, &t);
    }
    for (int i = 0; i < 6; i++) {
        ck_assert_int_eq(q[i].coll_id, expect[i]);
    }
}
END_TEST

/* The control entries: EXIT, RESIZE (only when this grid is smaller than
 * the entry asks) and REMAP (only when this launch is not newer than the
 * one named in the entry: a stale request is ignored). */
START_TEST(test_take_control)
{
    dfccl_daemon_args_t a;
    dfccl_blk_ctl_t ctl;
    dfccl_blk_state_t ls;
    dfccl_task_t q[4];
    dfccl_sqe_t e;

    memset(&a, 0, sizeof(a));
    memset(&ls, 0, sizeof(ls));
    a.nblocks      = 4;
    a.launch_epoch = 7;
    a.max_colls    = 4;
    memset(&e, 0, sizeof(e));
    e.coll_id = -1;
    struct {
        int kind;
        uint32_t nchannels;
        uint64_t sendbuff;
        int resize, exiting;
    } cases[] = {
        {DFCCL_SQE_RESIZE, 8, 0, 1, 0}, {DFCCL_SQE_RESIZE, 4, 0, 0, 0},
        {DFCCL_SQE_REMAP, 0, 7, 1, 0},  {DFCCL_SQE_REMAP, 0, 9, 1, 0},
        {DFCCL_SQE_REMAP, 0, 6, 0, 0},  {DFCCL_SQE_EXIT, 0, 0, 0, 1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        memset(&ctl, 0, sizeof(ctl));
        e.kind      = cases[i].kind;
        e.nchannels = cases[i].nchannels;
        e.sendbuff  = cases[i].sendbuff;
        dfccl_daemon_take(&a, 0, &e, q, &ctl, &ls);
        ck_assert_msg(ctl.resize == (uint32_t)cases[i].resize && ctl.ntasks == 0,
                      "case %zu: kind %d, nchannels %u, sendbuff %llu: resize %u", i,
                      cases[i].kind, cases[i].nchannels,
                      (unsigned long long)cases[i].sendbuff, ctl.resize);
        ck_assert_int_eq(ctl.exiting != 0, cases[i].exiting);
    }
}
END_TEST

/* Lines of the SQ format (dfccl_sqw_t) at `pos`: `flag_pos` + 1 in every
 * word's high half, one word optionally left with an older position. */
static void put_line(dfccl_sqw_t *log, uint32_t nlog, uint64_t pos, uint64_t flag_pos,
                     int coll_id, uint32_t nchannels, int stale_word)
{
    uint32_t v[DFCCL_SQW_WORDS] = {0};

    v[DFCCL_SQW_KIND]      = DFCCL_SQE_RUN;
    v[DFCCL_SQW_COLL]      = (uint32_t)coll_id;
    v[DFCCL_SQW_SEND_LO]   = 0x1000u + (uint32_t)coll_id;
    v[DFCCL_SQW_SEND_HI]   = 0x7fu;
    v[DFCCL_SQW_RECV_LO]   = 0x2000u + (uint32_t)coll_id;
    v[DFCCL_SQW_NCHANNELS] = nchannels;
    for (int i = 0; i < DFCCL_SQW_WORDS; i++) {
        uint64_t f = i == stale_word ? flag_pos - nlog : flag_pos;
        log[pos % nlog].w[i] = ((f + 1) << 32) | v[i];
    }
}

/* A block other than 0 pulls logged lines: in order, up to the first line
 * not (wholly) written yet, whose word carries an older position; lines
 * for fewer channels than its index are consumed but not queued; its head
 * and arrival order go on where they were, through the log's wrap. */
START_TEST(test_pull_log)
{
    enum { NLOG = 4, B = 2 };
    dfccl_sqw_t log[NLOG];
    uint64_t log_head[4] = {0}, abort_dev = 0, quit_epoch = 3;
    uint32_t task_count[4] = {0}, arrivals[4] = {0};
    dfccl_daemon_args_t a;
    dfccl_blk_ctl_t ctl;
    dfccl_blk_state_t ls;
    dfccl_task_t q[16];
    uint32_t got;

    memset(&a, 0, sizeof(a));
    memset(&ctl, 0, sizeof(ctl));
    memset(&ls, 0, sizeof(ls));
    ls.poll_abort = 9;
    ls.poll_epoch = 9;
    memset(log, 0, sizeof(log));
    a.log = log; a.log_entries = NLOG; a.log_head = log_head; a.task_count = task_count;
    a.arrivals = arrivals; a.abort_dev = &abort_dev; a.quit_epoch = &quit_epoch;
    a.nblocks = 4; a.max_colls = 16;

    /* nothing logged: no entry, the words read all the same */
    ck_assert_uint_eq(dfccl_daemon_pull_log(&a, B, q, &ctl, &ls), 0);
    ck_assert_uint_eq(ls.poll_abort, 0);
    ck_assert_uint_eq(ls.poll_epoch, 3);
    /* positions 0 and 1 whole, 2 with one stale word: two taken */
    put_line(log, NLOG, 0, 0, 5, 4, -1);
    put_line(log, NLOG, 1, 1, 6, 4, -1);
    put_line(log, NLOG, 2, 2, 7, 4, DFCCL_SQW_RECV_HI);
    got = dfccl_daemon_pull_log(&a, B, q, &ctl, &ls);
    ck_assert_uint_eq(got, 2);
    ck_assert_uint_eq(ctl.ntasks, 2);
    ck_assert_int_eq(q[0].coll_id, 5);
    ck_assert_int_eq(q[1].coll_id, 6);
    ck_assert_uint_eq(q[1].sendbuff, 0x7f00001006ull);
    ck_assert_uint_eq(q[1].recvbuff, 0x2006u);
    ck_assert_uint_eq(q[1].arrival, 1);
    ck_assert_uint_eq(log_head[B], 2);
    ck_assert_uint_eq(task_count[B], 2);
    ck_assert_uint_eq(arrivals[B], 2);
    /* the line completed; 3 for 2 channels (not block 2's); 4 wraps to
     * slot 0, 5 not yet there (slot 1 still holds position 1) */
    abort_dev = 1;
    put_line(log, NLOG, 2, 2, 7, 4, -1);
    put_line(log, NLOG, 3, 3, 8, 2, -1);
    put_line(log, NLOG, 4, 4, 9, 4, -1);
    got = dfccl_daemon_pull_log(&a, B, q, &ctl, &ls);
    ck_assert_uint_eq(ls.poll_abort, 1);
    ck_assert_uint_eq(got, 3);
    ck_assert_uint_eq(ctl.ntasks, 4);
    ck_assert_int_eq(q[2].coll_id, 7);
    ck_assert_int_eq(q[3].coll_id, 9);
    ck_assert_uint_eq(q[3].arrival, 3);
    ck_assert_uint_eq(log_head[B], 5);
    ck_assert_uint_eq(ls.log_head, 5);
    ck_assert_uint_eq(dfccl_daemon_pull_log(&a, B, q, &ctl, &ls), 0);
    ck_assert_uint_eq(log_head[B], 5);
}
END_TEST

/* The idle time a scheduler pass adds toward a voluntary quit: the time
 * since the previous pass, nothing when the clock stepped back, at most a
 * quarter of quit_ns when it leapt forward. Summed over the passes of a
 * clock that steps back once, a millisecond of quit_ns is not reached in
 * 10 microseconds of real idling. */
START_TEST(test_idle_step)
{
    const uint64_t quit_ns = 1000000;
    uint64_t idle = 0, prev = 5000000, now;

    ck_assert_uint_eq(dfccl_daemon_idle_step(5002000, 5000000, quit_ns), 2000);
    ck_assert_uint_eq(dfccl_daemon_idle_step(5000000, 5000000, quit_ns), 0);
    ck_assert_uint_eq(dfccl_daemon_idle_step(4999999, 5000000, quit_ns), 0);
    ck_assert_uint_eq(dfccl_daemon_idle_step(9000000, 5000000, quit_ns), quit_ns / 4);
    for (int i = 0; i < 10; i++) {
        now = i == 5 ? prev - 3000 : prev + 1000; /* one step back by 3 us */
        idle += dfccl_daemon_idle_step(now, prev, quit_ns);
        prev = now;
    }
    ck_assert_uint_eq(idle, 9000);
    ck_assert(idle < quit_ns);
    /* a leap of the clock by 10 ms counts a quarter of quit_ns: four
     * leaps in a row do not exceed quit_ns (no quit), a fifth does */
    idle = 0;
    for (int i = 0; i < 4; i++) {
        idle += dfccl_daemon_idle_step(prev + 10000000, prev, quit_ns);
        prev += 10000000;
    }
    ck_assert_uint_eq(idle, quit_ns);
    idle += dfccl_daemon_idle_step(prev + 10000000, prev, quit_ns);
    ck_assert(idle > quit_ns);
}
END_TEST

/* ---- preemption at every primitive ------------------------------------- */

typedef struct {
    int kind, nranks, root;
    uint64_t count;
    uint32_t slot_bytes;
    uint32_t proto; /* DFCCL_K_PROTO_SIMPLE or _LL */
    int layout;     /* LAYOUT_* */
    uint32_t slices; /* slices per ring step (DFCCL_STEP_SLICES) */
    uint32_t algo;   /* DFCCL_K_ALGO_RING or _MESH (all-to-alls) */
} case_t;

/* Elements rank i sends rank j in an alltoallv of nominal count c:
 * uneven, and none for some pairs (and for all when c is 0). */
static uint64_t a2av_count(uint64_t c, int i, int j)
{
    return c == 0 || (i * 7 + j * 3 + (int)(c % 5)) % 5 == 0 ? 0 : c + (uint64_t)(i + 2 * j);
}

/* An all-to-all's blocks on rank r (sends: to each q; else receives:
 * from each q), in elements: counts and displacements, the send blocks
 * one element apart, the receive blocks in reverse rank order; returns
 * the elements the buffer spans. */
static uint64_t a2a_blocks(const case_t *cs, int r, int recv, uint64_t *cnt, uint64_t *displ)
{
    const int n = cs->nranks;
    uint64_t at = 0;

    for (int k = 0; k < n; k++) {
        const int q = recv && cs->kind == DFCCL_COLL_ALLTOALLV ? n - 1 - k : k;
        cnt[q] = cs->kind == DFCCL_COLL_ALLTOALL ? cs->count
                 : recv ? a2av_count(cs->count, q, r) : a2av_count(cs->count, r, q);
        displ[q] = at;
        at += cnt[q] + (cs->kind == DFCCL_COLL_ALLTOALLV && !recv ? 1 : 0);
    }
    return at;
}

/* Where the buffers of a case are: apart; in place (the send buffer is the
 * rank's part of the receive buffer, or the receive buffer itself); apart
 * and 4 bytes past an 8-byte boundary, so LL moves no whole aligned word. */
enum { LAYOUT_APART = 0, LAYOUT_INPLACE, LAYOUT_MISALIGNED, LAYOUT_COUNT };

static int run_virtual_ranks(const case_t *cs, unsigned seed, uint64_t *preempts_p)
{
    enum { NS = 4 };
    const int n = cs->nranks;
    const uint64_t cnt = cs->count;
    const int a2a = cs->kind == DFCCL_COLL_ALLTOALL || cs->kind == DFCCL_COLL_ALLTOALLV;
    const int mesh = cs->algo == DFCCL_K_ALGO_MESH;
    uint64_t scnt[8][8], sdis[8][8], rcnt[8][8], rdis[8][8], sendn = 0, recvn = 0;
    uint64_t pairs[8][8 * DFCCL_PAIR_WORDS] = {{0}};
    dfccl_coll_static_t st[8];
    dfccl_chan_t ch[8];
    dfccl_dyn_t saved[8];
    char *region[8];
    int32_t *send[8], *recv[8], *mem[8], *mem2[8];
    int done[8] = {0}, ndone = 0;
    uint64_t zero = 0, iters = 0;
    dfccl_blk_ctl_t ctl;
    const int ll  = cs->proto == DFCCL_K_PROTO_LL;
    size_t rbytes = sizeof(dfccl_conn_ctrl_t) + NS * (size_t)cs->slot_bytes * (ll ? 2 : 1);
    static char scratch[DFCCL_LL_MAX_BYTES] __attribute__((aligned(16)));

    if (mesh) { /* a connector per other rank after the region's own words (one
                 * rank: one that nothing uses, where a line may be dropped) */
        rbytes = sizeof(dfccl_conn_ctrl_t) + (size_t)(n > 1 ? n - 1 : 1) * rbytes;
    }
    for (int r = 0; r < n; r++) {
        uint64_t s = cs->kind == DFCCL_COLL_REDUCESCATTER ? cnt * n : cnt;
        uint64_t v = cs->kind == DFCCL_COLL_ALLGATHER ? cnt * n : cnt;
        if (a2a) {
            s = a2a_blocks(cs, r, 0, scnt[r], sdis[r]);
            v = a2a_blocks(cs, r, 1, rcnt[r], rdis[r]);
        }
        sendn = s > sendn ? s : sendn;
        recvn = v > recvn ? v : recvn;
    }
    srand(seed);
    for (int r = 0; r < n; r++) {
        memset(&st[r], 0, sizeof(st[r]));
        st[r].kind = cs->kind; st[r].dtype = DFCCL_K_INT32; st[r].op = DFCCL_K_SUM;
        st[r].nranks = n; st[r].rank = r; st[r].root = cs->root; st[r].nchannels = 1;
        st[r].ring_pos = r; st[r].ring_root = cs->root;
        st[r].count = cnt; st[r].slot_bytes = cs->slot_bytes; st[r].nslots = NS;
        st[r].chunk_slices = cs->slices; st[r].elem_size = 4; st[r].proto = cs->proto;
        st[r].algo = cs->algo;
        if (cs->kind == DFCCL_COLL_ALLTOALLV) {
            st[r].count = 0;
        }
        region[r] = calloc(1, rbytes);
        mem[r]    = calloc(sendn + recvn + 2, 4);
        mem2[r]   = calloc(recvn + 2, 4);
        if (cs->layout == LAYOUT_INPLACE) {
            /* allgather: own block of the output; reduce-scatter: the output
             * is own block of the input; the others: the same buffer */
            recv[r] = mem[r];
            send[r] = cs->kind == DFCCL_COLL_ALLGATHER ? mem[r] + (uint64_t)r * cnt : mem[r];
            if (cs->kind == DFCCL_COLL_REDUCESCATTER) {
                recv[r] = mem[r] + (uint64_t)r * cnt;
            }
        } else {
            int o   = cs->layout == LAYOUT_MISALIGNED ? 1 : 0;
            send[r] = mem[r] + o;
            recv[r] = mem2[r] + o;
        }
        for (uint64_t i = 0; i < sendn; i++) {
            send[r][i] = (int32_t)(r * 1000 + (int)(i % 997));
        }
        memset(&saved[r], 0, sizeof(saved[r]));
    }
    for (int r = 0; r < n; r++) {
        memset(&ch[r], 0, sizeof(ch[r]));
        ch[r].off = 0; ch[r].cnt = cnt;
        ch[r].recv_ctrl = (dfccl_conn_ctrl_t *)region[r];
        ch[r].recv_data = region[r] + sizeof(dfccl_conn_ctrl_t);
        ch[r].send_ctrl = (dfccl_conn_ctrl_t *)region[(r + 1) % n];
        ch[r].send_data = region[(r + 1) % n] + sizeof(dfccl_conn_ctrl_t);
        for (int q = 0; mesh && q < n; q++) {
            uint64_t *e = &pairs[r][q * DFCCL_PAIR_WORDS];
            ch[r].peer[q]      = region[q];
            e[DFCCL_PAIR_SRC]  = sdis[r][q];
            e[DFCCL_PAIR_SCNT] = scnt[r][q];
            e[DFCCL_PAIR_DST]  = rdis[r][q];
            e[DFCCL_PAIR_RCNT] = rcnt[r][q];
        }
        ch[r].pairs = pairs[r];
    }
    while (ndone < n && iters < 10000000) {
        int r = rand() % n;
        dfccl_exec_t x;
        int rc;
        iters++;
        if (done[r]) {
            continue;
        }
        x.st = &st[r]; x.ch = &ch[r]; x.dyn = saved[r];
        x.sendbuff = (const char *)send[r]; x.recvbuff = (char *)recv[r];
        x.ctl = &ctl; x.abort_flag = &zero;
        x.slice_elems = cs->slot_bytes / 4; x.spin = 0; x.spin_sticky = (uint32_t)(rand() % 3);
        x.ll_scratch = scratch;
        x.progressed = 0;
        x.handoffs   = 0;
        x.dirty      = 0;
        x.nthreads   = 1; /* the host backend: one thread a block */
        x.chan       = 0;
        if (ll && rand() % 2) {
            /* a line of the next slot to receive has not arrived yet: the
             * ranks here run one at a time, so without this every slot
             * would arrive whole, and a primitive would never see part of
             * its slot (as threads of a GPU block do) */
            /* the mesh: a line of any sender's connector */
            char *data = mesh && n > 1
                             ? region[r] + 2 * sizeof(dfccl_conn_ctrl_t) +
                                   (uint64_t)(rand() % (n - 1)) *
                                       ((rbytes - sizeof(dfccl_conn_ctrl_t)) / (uint64_t)(n - 1))
                             : ch[r].recv_data;
            char *line = data + (x.dyn.recv_seq % NS) * 2u * cs->slot_bytes +
                         (uint64_t)(rand() % (int)(cs->slot_bytes / 8)) * DFCCL_LL_LINE;
            char keep[DFCCL_LL_LINE];
            memcpy(keep, line, sizeof(keep));
            memset(line, 0, sizeof(keep));
            rc = dfccl_algo_run(&x);
            memcpy(line, keep, sizeof(keep));
        } else {
            rc = dfccl_algo_run(&x);
        }
        if (rc == DFCCL_PRIM_STUCK) {
            (*preempts_p)++;
        }
        saved[r] = x.dyn; /* save; the active slot is reused by the next one */
        if (rc == DFCCL_PRIM_DONE) {
            done[r] = 1;
            ndone++;
        }
    }
    if (ndone < n) {
        return -1;
    }
    for (int r = 0; r < n && a2a; r++) {
        for (int q = 0; q < n; q++) {
            for (uint64_t t = 0; t < rcnt[r][q]; t++) {
                const uint64_t from = sdis[q][r] + t; /* in q's send buffer */
                const int32_t e     = (int32_t)(q * 1000 + (int)(from % 997));
                if (recv[r][rdis[r][q] + t] != e) {
                    fprintf(stderr, "%s %s n %d count %llu: rank %d's element %llu from "
                            "rank %d is %d, expected %d\n",
                            cs->kind == DFCCL_COLL_ALLTOALL ? "alltoall" : "alltoallv",
                            mesh ? "mesh" : "ring", n, (unsigned long long)cnt, r,
                            (unsigned long long)t, q, recv[r][rdis[r][q] + t], e);
                    return -2;
                }
            }
        }
    }
    for (int r = 0; r < n && !a2a; r++) {
        for (uint64_t i = 0; i < recvn; i++) {
            int64_t e = 0;
            switch (cs->kind) {
            case DFCCL_COLL_ALLREDUCE:
                for (int q = 0; q < n; q++) e += q * 1000 + (int)(i % 997);
                break;
            case DFCCL_COLL_REDUCE:
                if (r != cs->root) { e = recv[r][i]; break; } /* not written */
                for (int q = 0; q < n; q++) e += q * 1000 + (int)(i % 997);
                break;
            case DFCCL_COLL_BROADCAST:
                e = cs->root * 1000 + (int)(i % 997);
                break;
            case DFCCL_COLL_ALLGATHER:
                e = (int64_t)(i / cnt) * 1000 + (int)((i % cnt) % 997);
                break;
            default: /* reduce-scatter: block r */
                for (int q = 0; q < n; q++) e += q * 1000 + (int)((r * cnt + i) % 997);
                break;
            }
            if (recv[r][i] != (int32_t)e) {
                fprintf(stderr, "kind %d n %d count %llu: rank %d [%llu] = %d, expected %lld\n",
                        cs->kind, n, (unsigned long long)cnt, r, (unsigned long long)i,
                        recv[r][i], (long long)e);
                return -2;
            }
        }
    }
    for (int r = 0; r < n; r++) {
        free(region[r]);
        free(mem[r]);
        free(mem2[r]);
    }
    return 0;
}

START_TEST(test_preempt_every_primitive)
{
    static const uint64_t counts[] = {0, 1, 17, 1000, 4099};
    static const uint32_t protos[] = {DFCCL_K_PROTO_SIMPLE, DFCCL_K_PROTO_LL};
    uint64_t preempts[2] = {0, 0};
    int ncases = 0;

    /* both protocols: SIMPLE, and LL (slices of 256 bytes: 32 lines each,
     * a slot of 512 bytes; on the host, one thread polls every line); every
     * buffer layout (an LL primitive that reduces in place must not write
     * its result before it is sure to commit); a ring step of one slice (the
     * GPU default) and of two */
    for (int v = 0; v < 4; v++) {
        const int p       = v / 2;
        const uint32_t sl = 1 + (uint32_t)(v % 2);
        for (int lay = 0; lay < LAYOUT_COUNT; lay++) {
            for (int kind = 0; kind < DFCCL_COLL_KIND_COUNT; kind++) {
                const int a2a = kind == DFCCL_COLL_ALLTOALL || kind == DFCCL_COLL_ALLTOALLV;
                /* all-to-alls run on separate buffers only */
                for (uint32_t algo = 0; algo < 2 && !(a2a && lay == LAYOUT_INPLACE); algo++) {
                    /* the mesh: all-to-alls; the ring: all but alltoallv */
                    const uint32_t al = algo ? DFCCL_K_ALGO_MESH : DFCCL_K_ALGO_RING;
                    if ((algo && !a2a) || (!algo && kind == DFCCL_COLL_ALLTOALLV)) {
                        continue;
                    }
                    for (int n = 1; n <= 4; n++) {
                        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
                            case_t cs = {kind, n, n - 1, counts[c], 256, protos[p], lay, sl, al};
                            int rc    = run_virtual_ranks(
                                &cs,
                                (unsigned)(sl * 100000 + p * 10000 + lay * 1000 + kind * 100 +
                                           n * 10 + (int)c + (int)algo * 7),
                                &preempts[p]);
                            ck_assert_msg(rc == 0,
                                          "proto %u slices %u layout %d kind %d algo %u nranks "
                                          "%d count %llu: rc %d", protos[p], sl, lay, kind, al, n,
                                          (unsigned long long)counts[c], rc);
                            ncases++;
                        }
                    }
                }
            }
        }
    }
    /* 5 kinds x 3 layouts, alltoall on two algorithms and alltoallv on
     * one x 2 layouts; x 4 rank counts x 5 counts x 4 variants */
    ck_assert_int_eq(ncases, (5 * 3 + 3 * 2) * 4 * 5 * 4);
    ck_assert_msg(preempts[0] > 1000 && preempts[1] > 1000,
                  "only %llu (SIMPLE) and %llu (LL) preemptions",
                  (unsigned long long)preempts[0], (unsigned long long)preempts[1]);
}
END_TEST

int main(void)
{
    Suite *s  = suite_create("sched");
    /* one process, no waits: a few seconds on an idle machine; generous
     * for a loaded one */
    TCase *tc = dfccl_test_case(s, "core", 600);

    tcase_add_test(tc, test_task_queue_fifo);
    tcase_add_test(tc, test_task_queue_priority);
    tcase_add_test(tc, test_take_control);
    tcase_add_test(tc, test_pull_log);
    tcase_add_test(tc, test_idle_step);
    tcase_add_test(tc, test_preempt_every_primitive);
    return dfccl_test_run(s, CK_NORMAL);
}
