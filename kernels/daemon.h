/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The daemon: the scheduler loop that every daemon block runs (Algorithm 1
 * of the DFCCL paper). Block 0 is the leader: it takes SQEs from the host's
 * submission ring into its own task queue and, when the grid has other
 * blocks, into a log in device memory, from which each of them pulls them
 * into its task queue. Each block then walks its task queue from
 * the head, giving the collective at position i an initial spin threshold
 * that shrinks with i and grows to the sticky threshold once one of its
 * primitives succeeds. A collective that runs out of spins is preempted:
 * its dynamic context is saved (if it moved) and the next one is loaded.
 * When a block completes its part of a collective it writes a CQE into its
 * own CQ ring; the host completes the collective with the last of them.
 * Block 0 quits voluntarily when, for quit_ns, it has received no SQE and
 * none of its collectives progressed; the other blocks quit after it, once
 * idle or stuck themselves. The host relaunches the daemon.
 *
 * Control decisions are taken by thread 0 and shared through block-shared
 * memory, so the same code runs with one thread (host backend) or many.
 */
#ifndef DFCCL_KERNELS_DAEMON_H_
#define DFCCL_KERNELS_DAEMON_H_

#include "algo.h"

/* Least time between two reads of the abort flag in host memory by a block
 * other than 0 (only once block 0 has quit: before, they read its copy). */
#define DFCCL_ABORT_CHECK_NS 20000ull

/*
 * Block 0 reads the abort flag (host memory) with one SQ poll in this many,
 * so at least every few microseconds. A second read of host memory in
 * every poll, though issued with the SQ read, makes the poll about a
 * microsecond longer.
 */
#define DFCCL_ABORT_POLLS 8u

/*
 * A block with nothing queued polls (block 0 the SQ, the others the log)
 * again and again, warp 0 alone, until it finds an entry, reads the abort
 * flag set, or this long has passed (at most an eighth of quit_ns); only
 * then does the pass go on to its barrier and its quit bookkeeping. A pass
 * is a poll with barriers, a pause and bookkeeping around it, so with one
 * poll a pass an entry waited for the rest of the pass before the next poll
 * began.
 */
#define DFCCL_IDLE_SPIN_NS 16000ull

/*
 * Idle time toward a voluntary quit is summed over the scheduler's passes,
 * each pass adding the time since the previous one but at most a quarter
 * of quit_ns, and nothing if the clock went back. PTX does not promise that
 * %globaltimer is monotonic, and `now - last` of a clock that stepped back
 * wraps around to a huge value: a daemon serving a tight loop of
 * collectives would quit between two of them.
 */
DFCCL_F_DEVICE uint64_t dfccl_daemon_idle_step(uint64_t now, uint64_t prev, uint64_t quit_ns)
{
    uint64_t cap = quit_ns / 4;

    if (now <= prev) {
        return 0;
    }
    return now - prev < cap ? now - prev : cap;
}

enum {
    DFCCL_DAEMON_QUIT  = 1, /* voluntary quit: relaunch when there is work */
    DFCCL_DAEMON_EXIT  = 2, /* exit SQE processed: final */
    DFCCL_DAEMON_ABORT = 3
};

/*
 * Scheduler state of a block that lives on chip while the daemon runs
 * (shared memory, thread 0 only) and is written back where the host or the
 * next launch reads it. The counters are stored across PCIe, never read
 * there: a read-modify-write of mapped memory costs a round trip.
 */
typedef struct {
    dfccl_block_stats_t stats;    /* this block's a->stats */
    uint64_t            cq_tail;  /* CQEs posted by this block */
    uint64_t            sq_next;  /* block 0: next SQ position */
    uint64_t            min_head; /* block 0: slowest block's log head, cached */
    uint64_t            log_head; /* other blocks: next log position */
    /* The scheduler loop's own state, here rather than in thread 0's
     * registers: across the calls of a pass the compiler kept it in local
     * memory, which the collectives' copies of their contexts evict from
     * L1. The polls leave their answers here too (lane 0 is thread 0). */
    uint64_t            last_pass;   /* clock at the end of the last pass */
    uint64_t            last_abort;  /* clock at the last read of the flag (b != 0) */
    uint64_t            idle_ns;     /* idle time toward a voluntary quit */
    uint64_t            poll_abort;  /* the abort word the last poll read, or 0 */
    uint64_t            poll_epoch;  /* other blocks: block 0's quit epoch, read with it */
    uint32_t            fetches;     /* block 0: SQ reads, for DFCCL_ABORT_POLLS */
#ifdef DFCCL_STAGE_TIMES
    uint64_t            t_polled;    /* this pass: the poll returned */
    uint64_t            t_synced;    /* this pass: the barrier after it */
#endif
    uint32_t            arrivals; /* tasks taken, for their arrival order */
} dfccl_blk_state_t;

#define DFCCL_COUNT(a, b, ls, field)                                           \
    dfccl_st_relaxed_sys(&(a)->stats[b].field, ++(ls)->stats.field)

/* Insert into the task queue: FIFO, or by priority (stable) if enabled. */
DFCCL_F_DEVICE void dfccl_daemon_task_insert(const dfccl_daemon_args_t *a, dfccl_task_t *tasks,
                                             uint32_t *ntasks, const dfccl_task_t *t)
{
    uint32_t i = *ntasks;

    if (a->priority_order) {
        while (i > 0 && tasks[i - 1].priority < t->priority) {
            tasks[i] = tasks[i - 1];
            i--;
        }
    }
    tasks[i] = *t;
    (*ntasks)++;
}

DFCCL_F_DEVICE void dfccl_daemon_task_remove(dfccl_task_t *tasks, uint32_t *ntasks, uint32_t pos)
{
    for (uint32_t i = pos + 1; i < *ntasks; i++) {
        tasks[i - 1] = tasks[i];
    }
    (*ntasks)--;
}

/* Take one SQE into block b's task queue (or its control flags). Thread 0. */
DFCCL_F_DEVICE void dfccl_daemon_take(const dfccl_daemon_args_t *a, uint32_t b,
                                      const dfccl_sqe_t *e, dfccl_task_t *tasks,
                                      dfccl_blk_ctl_t *ctl, dfccl_blk_state_t *ls)
{
    if (e->kind == DFCCL_SQE_EXIT) {
        ctl->exiting = 1;
    } else if (e->kind == DFCCL_SQE_RESIZE) {
        /* a stale request (this grid is large enough) is ignored */
        if (e->nchannels > a->nblocks) {
            ctl->resize = 1;
        }
    } else if (e->kind == DFCCL_SQE_REMAP) {
        if (a->launch_epoch <= e->sendbuff) {
            ctl->resize = 1; /* quits the same way */
        }
    } else if (e->kind == DFCCL_SQE_RUN && (uint32_t)e->coll_id < a->max_colls) {
        dfccl_task_t task;
        if (b >= e->nchannels || ctl->ntasks >= a->max_colls) {
            return;
        }
        task.coll_id  = e->coll_id;
        task.priority = e->priority;
        task.arrival  = ls->arrivals++;
        a->arrivals[b] = ls->arrivals; /* for the next launch */
        task.sticky   = 0;
        task.fresh    = 1;
        task.sendbuff = e->sendbuff;
        task.recvbuff = e->recvbuff;
        dfccl_daemon_task_insert(a, tasks, &ctl->ntasks, &task);
        DFCCL_STAMP(ctl, DFCCL_STAGE_TAKEN);
    }
}

/* When the back-to-back polls of a block with nothing queued stop
 * (DFCCL_IDLE_SPIN_NS). Lane 0. */
DFCCL_F_DEVICE uint64_t dfccl_daemon_spin_end(const dfccl_daemon_args_t *a)
{
    return dfccl_now_ns() + DFCCL_MIN(DFCCL_IDLE_SPIN_NS, a->quit_ns / 8);
}

/* Lanes that read one SQ or log line together (dfccl_ld_sqw_part), words
 * a lane holds, and lines a warp reads in one poll: 4, 2 and 8 on GPUs; 1,
 * 8 and 1 on the host backend. */
#define DFCCL_SQW_ENTRY_LANES (DFCCL_SQW_PARTS / DFCCL_SQW_LANE_PARTS)
#define DFCCL_SQW_LANE_WORDS  (2 * DFCCL_SQW_LANE_PARTS)
#define DFCCL_SQW_POLL_MAX    (DFCCL_WARP / DFCCL_SQW_ENTRY_LANES)

/*
 * The words of parts [part, part + DFCCL_SQW_LANE_PARTS) of the SQ line at
 * position pos, as one lane read them (w): whether they all carry the
 * position's flag, and if so their fields into *e, each lane writing only
 * those of its words (the kind word's lane: *span, 1 + the number of
 * entries written together after it).
 */
DFCCL_F_DEVICE int dfccl_daemon_sqw_decode_part(const uint64_t *w, uint32_t part, uint64_t pos,
                                                dfccl_sqe_t *e, uint32_t *span)
{
    const uint32_t flag = (uint32_t)(pos + 1);
    uint32_t diff       = 0;

    /* every word compared before one branch */
    for (int i = 0; i < DFCCL_SQW_LANE_WORDS; i++) {
        diff |= (uint32_t)(w[i] >> 32) ^ flag;
    }
    if (diff != 0) {
        return 0;
    }
    for (int i = 0; i < DFCCL_SQW_LANE_WORDS; i += 2) {
        const uint32_t lo = (uint32_t)w[i], hi = (uint32_t)w[i + 1];

        switch (2 * part + (uint32_t)i) { /* the first word of the pair */
        case DFCCL_SQW_KIND:
            e->seq     = pos + 1;
            e->kind    = (int32_t)(lo & (DFCCL_SQW_CTX_NEW - 1u));
            e->ctx_new = (lo & DFCCL_SQW_CTX_NEW) != 0;
            e->coll_id = (int32_t)hi; /* DFCCL_SQW_COLL */
            *span      = 1 + (lo >> DFCCL_SQW_FOLLOW_SHIFT);
            break;
        case DFCCL_SQW_SEND_LO:
            e->sendbuff = (uint64_t)lo | ((uint64_t)hi << 32);
            break;
        case DFCCL_SQW_RECV_LO:
            e->recvbuff = (uint64_t)lo | ((uint64_t)hi << 32);
            break;
        default: /* DFCCL_SQW_NCHANNELS, DFCCL_SQW_PRIORITY */
            e->nchannels = lo;
            e->priority  = (int32_t)hi;
            break;
        }
    }
    return 1;
}

/* A whole line read by one lane: 1 + the entries written together after
 * it if every word carries the position's flag (*e decoded), else 0. */
DFCCL_F_DEVICE uint32_t dfccl_daemon_sqw_decode(const uint64_t *w, uint64_t pos, dfccl_sqe_t *e)
{
    uint32_t span = 0;

    for (uint32_t p = 0; p < DFCCL_SQW_PARTS; p += DFCCL_SQW_LANE_PARTS) {
        if (!dfccl_daemon_sqw_decode_part(w + 2 * p, p, pos, e, &span)) {
            return 0;
        }
    }
    return span;
}

/*
 * Leader (block 0, the lanes of warp 0): take published SQEs, while the
 * log has room, into its own task queue and, for the other blocks, into
 * the device log. Each poll is one round trip across PCIe: the lanes read
 * the entries from pos on, DFCCL_SQW_ENTRY_LANES lanes an entry
 * (dfccl_ld_sqw_part), for the first a->sq_window entries (at most
 * DFCCL_SQW_POLL_MAX; DFCCL_SQ_IDLE_LINES while a block with nothing
 * queued has found nothing; 1 on the host backend), lane 0 the abort flag
 * with them (in one such poll of DFCCL_ABORT_POLLS), and lane 0 takes the
 * entries found in order (the lanes' copies in ctl->sqe). One lane alone
 * would pay a round trip per entry, and a host posting a burst (a round of
 * collectives, one per microsecond) would find the leader reading one
 * entry per round trip. The host writes the first entry of a batch
 * last and says in it how many follow, so the leader takes a batch whole
 * (entries of the batch that were read early are read again). A poll that
 * finds fewer entries than it read ends the pass (the next entry was not
 * there), except that a block with nothing queued that found nothing polls
 * again, back to back, for up to DFCCL_IDLE_SPIN_NS. After a lone
 * collective it does not ask the SQ again before the collective starts
 * (entries published later are taken in the next pass);
 * with other collectives queued it reads on while it finds entries, so
 * that the scheduler sees all of them at once. ls->min_head caches the
 * slowest block's log position: positions only grow, so the blocks' heads
 * are read again only when the cached one says the log is full. Returns
 * the entries taken (lane 0); ls->poll_abort is the abort flag (lane 0),
 * if this call read it, else 0. Not inlined: in the
 * scheduler loop its registers made the kernel spill more.
 */
DFCCL_F_NOINLINE uint32_t dfccl_daemon_fetch_sq(const dfccl_daemon_args_t *a, dfccl_task_t *tasks,
                                              dfccl_blk_ctl_t *ctl, dfccl_blk_state_t *ls)
{
    const uint32_t lane   = (uint32_t)DFCCL_TID; /* below DFCCL_WARP */
    const uint32_t ent    = lane / DFCCL_SQW_ENTRY_LANES; /* this lane's entry of a poll */
    const uint32_t part   = lane % DFCCL_SQW_ENTRY_LANES * DFCCL_SQW_LANE_PARTS;
    const uint32_t most   = DFCCL_MIN((uint32_t)DFCCL_SQW_POLL_MAX, (uint32_t)DFCCL_SQ_WINDOW_MAX);
    const uint32_t window = DFCCL_MAX(DFCCL_MIN(a->sq_window, most), 1u);
    const uint64_t first  = ls->sq_next;
    const int idle        = ctl->ntasks == 0;
    uint64_t pos = first, batch_end = first, min_head; /* batch_end: lane 0's */
    uint64_t spin_end = 0;                             /* lane 0's */

    if (lane == 0) {
        ls->poll_abort = 0;
        if (idle) {
            spin_end = dfccl_daemon_spin_end(a);
        }
        if (pos - ls->min_head >= a->log_entries) {
            uint64_t head = pos; /* block 0 reads no log: its own head is pos */
            for (uint32_t b = 1; b < a->nblocks; b++) {
                head = DFCCL_MIN(head, dfccl_ld_acquire_gpu(&a->log_head[b]));
            }
            ls->min_head = head;
        }
    }
    dfccl_warp_sync();
    min_head = ls->min_head;
    while (pos - min_head < a->log_entries) {
        /* the lines of this poll, within the log's room: the window, or
         * DFCCL_SQ_IDLE_LINES while a block with nothing queued has found
         * nothing (the polls a single call waits for) */
        const int waiting = idle && pos == first;
        const uint32_t n  = (uint32_t)DFCCL_MIN(
            (uint64_t)(waiting ? DFCCL_MIN(window, DFCCL_SQ_IDLE_LINES) : window),
            a->log_entries - (pos - min_head));
        uint64_t w[DFCCL_SQW_LANE_WORDS], abort = 0;
        uint32_t ok = 0, found;
        const int read_abort = lane == 0 && pos == first && ls->fetches++ % DFCCL_ABORT_POLLS == 0;

        if (read_abort) {
            abort = dfccl_ld_relaxed(a->abort_flag);
        }
        if (ent < n) {
            dfccl_ld_sqw_part(a->sq[(pos + ent) % a->sq_entries].w, part, w);
        }
        if (read_abort) {
            ls->poll_abort = abort;
        }
        if (ent < n) {
            ok = dfccl_daemon_sqw_decode_part(w, part, pos + ent, &ctl->sqe[ent],
                                              &ctl->span[ent]);
        }
        /* the entries found before the first one a part of which was not
         * there */
        found = dfccl_lowest_bit(dfccl_warp_ballot(ent < n && !ok),
                                 n * DFCCL_SQW_ENTRY_LANES) /
                DFCCL_SQW_ENTRY_LANES;
        dfccl_warp_sync(); /* every lane's fields in ctl->sqe */
        if (ent < found) {
            /* an entry whose contexts the host wrote anew: they are read
             * after it (by every thread, after barriers) */
            dfccl_fence_entry(ctl->sqe[ent].ctx_new);
            if (a->nblocks > 1) {
                /* the line into the log as read, after this lane's fence */
                dfccl_st_logw_part(a->log[(pos + ent) % a->log_entries].w, part, w);
            }
        }
        if (lane == 0) {
            int go;

            for (uint32_t i = 0; i < found; i++) {
                batch_end = DFCCL_MAX(batch_end, pos + i + ctl->span[i]);
                dfccl_daemon_take(a, 0, &ctl->sqe[i], tasks, ctl, ls);
            }
            if (pos + found < batch_end) {
                go = 1; /* in a batch, so written: a line was read early */
            } else if (found < n) {
                /* the next entry was not there: an idle block polls on */
                go = waiting && found == 0 && ls->poll_abort == 0 &&
                     dfccl_now_ns() < spin_end;
                if (go) {
                    dfccl_spin_pause();
                }
            } else {
                go = ctl->ntasks > 1; /* a lone collective: start it */
            }
            ctl->sq_go = (uint32_t)go;
        }
        dfccl_warp_sync();
        pos += found;
        if (!ctl->sq_go) {
            break;
        }
    }
    if (lane == 0 && pos != first) {
        ls->sq_next      = pos;
        *a->sq_next      = pos;
        a->task_count[0] = ctl->ntasks;
        /* the entries were read (their values are in the log): the host
         * may reuse their slots; no fence on the way of a new collective */
        dfccl_st_consumed(&a->sq_ctrl->head, pos);
    }
    return (uint32_t)(pos - first);
}

/* Whether the SQ holds an entry at the leader's position (block 0's quit
 * handshake; loads after the caller's fence). */
DFCCL_F_DEVICE int dfccl_daemon_sq_pending(const dfccl_daemon_args_t *a,
                                           const dfccl_blk_state_t *ls)
{
    uint64_t w[DFCCL_SQW_WORDS];
    dfccl_sqe_t e;

    dfccl_ld_sqw(a->sq[ls->sq_next % a->sq_entries].w, w);
    return dfccl_daemon_sqw_decode(w, ls->sq_next, &e) != 0;
}

/*
 * Other blocks (the lanes of warp 0): take the entries block 0 has logged
 * since this block's head into its task queue. The log holds the SQ's
 * lines as the host wrote them, each word carrying its position, so a poll
 * is one read: the lanes read the lines from head on, DFCCL_SQW_ENTRY_LANES
 * lanes a line as in dfccl_daemon_fetch_sq, lane 0 the abort copy and
 * the quit epoch with the first lines, all in flight together, and the
 * entries found before the first line that is not there yet are taken in
 * order (lane 0); a poll that found all its lines is followed by another,
 * and so is an empty one while the block has nothing queued (a pause
 * between them, for up to DFCCL_IDLE_SPIN_NS, until block 0 sets the abort
 * copy or quits).
 * (A tail word read before the lines, and a head, an arrival counter and
 * flags read after it one at a time, made an idle block's pass four reads
 * of device memory long.) Returns the entries taken; ls->poll_abort and
 * ls->poll_epoch are the words read (lane 0).
 */
DFCCL_F_NOINLINE uint32_t dfccl_daemon_pull_log(const dfccl_daemon_args_t *a, uint32_t b,
                                              dfccl_task_t *tasks, dfccl_blk_ctl_t *ctl,
                                              dfccl_blk_state_t *ls)
{
    const uint32_t lane = (uint32_t)DFCCL_TID; /* below DFCCL_WARP */
    const uint32_t ent  = lane / DFCCL_SQW_ENTRY_LANES; /* this lane's line of a poll */
    const uint32_t part = lane % DFCCL_SQW_ENTRY_LANES * DFCCL_SQW_LANE_PARTS;
    const uint32_t n    = DFCCL_MIN(
        DFCCL_MIN((uint32_t)DFCCL_SQW_POLL_MAX, (uint32_t)DFCCL_LOG_WINDOW), a->log_entries);
    const uint64_t first = ls->log_head;
    const int idle       = ctl->ntasks == 0;
    uint64_t h = first, abort = 0, epoch = 0, spin_end = 0;
    uint32_t found;

    if (lane == 0 && idle) {
        spin_end = dfccl_daemon_spin_end(a);
    }
    for (;;) {
        uint64_t w[DFCCL_SQW_LANE_WORDS];
        uint32_t ok = 0;

        if (ent < n) {
            dfccl_ld_sqw_part(a->log[(h + ent) % a->log_entries].w, part, w);
        }
        if (lane == 0 && h == first) {
            abort = dfccl_ld_relaxed(a->abort_dev);
            epoch = dfccl_ld_relaxed(a->quit_epoch);
        }
        if (ent < n) {
            ok = dfccl_daemon_sqw_decode_part(w, part, h + ent, &ctl->sqe[ent], &ctl->span[ent]);
        }
        found = dfccl_lowest_bit(dfccl_warp_ballot(ent < n && !ok), n * DFCCL_SQW_ENTRY_LANES) /
                DFCCL_SQW_ENTRY_LANES;
        dfccl_warp_sync(); /* every lane's fields in ctl->sqe */
        if (ent < found) {
            dfccl_fence_entry(ctl->sqe[ent].ctx_new); /* as in dfccl_daemon_fetch_sq */
        }
        if (lane == 0) {
            for (uint32_t i = 0; i < found; i++) {
                dfccl_daemon_take(a, b, &ctl->sqe[i], tasks, ctl, ls);
            }
            /* all found: read on; none while idle: poll on, unless block 0
             * set the abort copy or quit (this block follows it) */
            ctl->sq_go = found == n ||
                         (idle && h == first && found == 0 && abort == 0 &&
                          epoch != a->launch_epoch && dfccl_now_ns() < spin_end);
            if (ctl->sq_go && found == 0) {
                dfccl_pause();
            }
        }
        dfccl_warp_sync(); /* ctl->sqe taken, sq_go written before the next poll */
        h += found;
        if (!ctl->sq_go) {
            break;
        }
    }
    if (lane == 0) {
        if (h != first) {
            ls->log_head     = h;
            a->task_count[b] = ctl->ntasks;
            dfccl_st_log_head(&a->log_head[b], h);
        }
        ls->poll_abort = abort;
        ls->poll_epoch = epoch;
    }
    return (uint32_t)(h - first);
}

/*
 * This block is done with its channel of a collective: write a CQE into its
 * ring. Every block of the collective posts one, and the host completes
 * the collective with the last (dfccl_ctx_progress). Its data writes,
 * ordered before thread 0 by the barrier that ended the last primitive,
 * are released by the CQE's store (dfccl_st_to_host), and so is the
 * channel's progress word, which now says the whole range for the run just
 * completed (dfccl_prog_publish; a consumer polling the word need not see
 * the CQE). A completion counter
 * in device memory, whose last block posted one CQE, put a fence, an
 * atomic and another fence on the way of every collective of several
 * channels. Thread 0.
 */
DFCCL_F_DEVICE void dfccl_daemon_post_cqe(const dfccl_daemon_args_t *a, uint32_t b,
                                          dfccl_blk_state_t *ls, const dfccl_blk_ctl_t *ctl,
                                          int coll_id)
{
    const uint64_t slot = (uint64_t)coll_id * a->max_blocks + b;
    uint64_t pos   = ls->cq_tail;
    uint64_t *ring = a->cq + (uint64_t)b * a->cq_entries;

    /* The ring holds more entries than there are collective ids, a block
     * posts one CQE per run of an id, and the host runs an id again only
     * after it has taken all of them: the ring cannot be full, so the
     * host's head (across PCIe) is never read here. */
    ls->cq_tail   = pos + 1;
    a->cq_tail[b] = pos + 1; /* for the next launch */
    /* the CQE last: nothing queues behind it on its way to the host;
     * done_runs counts the run just completed (dfccl_daemon_run_team: its
     * saved context would be read back from device memory) */
    dfccl_st_to_host2(&a->progress[slot], DFCCL_K_PROG_WORD(ctl->done_runs, DFCCL_K_PROG_ALL),
                      &ring[pos % a->cq_entries], ((pos + 1) << 32) | (uint32_t)coll_id);
}

/*
 * Drop the queued collectives whose run the host gave up
 * (dfccl_coll_static_t.cancelled): each leaves the task queue with a CQE
 * marked DFCCL_K_CQE_CANCEL, so that the host counts this block's part as
 * ended without taking its result. Only after a pass in which a collective
 * got stuck (a given-up run waits for a rank that is gone), and only while
 * the host has runs given up that some block may hold (a->cancels, one
 * read of device memory): nothing is looked at otherwise. Their contexts
 * are never loaded again (the host deregisters them). Thread 0.
 */
DFCCL_F_DEVICE void dfccl_daemon_drop_cancelled(const dfccl_daemon_args_t *a, uint32_t b,
                                                dfccl_task_t *tasks, dfccl_blk_ctl_t *ctl,
                                                dfccl_blk_state_t *ls)
{
    for (uint32_t pos = 0; pos < ctl->ntasks;) {
        const int id = tasks[pos].coll_id;
        uint64_t *ring, at;

        if (!dfccl_ld_relaxed(&a->colls[id].cancelled)) {
            pos++;
            continue;
        }
        dfccl_daemon_task_remove(tasks, &ctl->ntasks, pos);
        a->task_count[b] = ctl->ntasks;
        ring             = a->cq + (uint64_t)b * a->cq_entries;
        at               = ls->cq_tail;
        ls->cq_tail      = at + 1;
        a->cq_tail[b]    = at + 1;
        dfccl_st_to_host2(&a->progress[(uint64_t)id * a->max_blocks + b], 0,
                          &ring[at % a->cq_entries],
                          ((at + 1) << 32) | ((uint32_t)id | DFCCL_K_CQE_CANCEL));
    }
}

/* The threads running a collective (the first `team` of the block): one
 * activation of it (dfccl_daemon_run_task). */
DFCCL_F_DEVICE int dfccl_daemon_run_team(const dfccl_daemon_args_t *a, uint32_t b,
                                         dfccl_task_t *task, uint32_t pos,
                                         dfccl_blk_ctl_t *ctl, dfccl_blk_state_t *ls,
                                         const dfccl_coll_static_t *st, uint32_t team,
                                         uint32_t *progressed_p)
{
    const uint64_t slot = (uint64_t)task->coll_id * a->max_blocks + b;
    dfccl_exec_t x;
    int rc;

    x.st          = st;
    x.ch          = &a->chans[slot];
    x.dyn         = a->dyn[slot]; /* load the dynamic context */
    x.sendbuff    = (const char *)(uintptr_t)task->sendbuff;
    x.recvbuff    = (char *)(uintptr_t)task->recvbuff;
    x.ctl         = ctl;
    /* block 0 polls the flag in host memory; the others its copy */
    x.abort_flag  = b == 0 ? a->abort_flag : a->abort_dev;
    x.slice_elems = x.st->slot_bytes / x.st->elem_size;
    x.ll_scratch  = a->ll_scratch + (uint64_t)b * DFCCL_LL_MAX_BYTES;
    x.progressed  = 0;
    x.handoffs    = 0;
    x.dirty       = 0;
    x.nthreads    = team;
    x.chan        = b;
    /* Thresholds halve with the queue position, sticky ones too: the head
     * waits longest; deep in a long queue every collective gets only a
     * short look, so walking 1000 stuck collectives stays cheap. */
    x.spin_sticky = DFCCL_MAX(pos < 32 ? (a->spin_sticky >> pos) : 0, a->spin_min);
    x.spin        = DFCCL_MAX(pos < 32 ? (a->spin_head >> pos) : 0, a->spin_min);
    if (task->sticky) {
        x.spin = x.spin_sticky;
    }
    /* with others queued, a wait here holds them up */
    if (ctl->ntasks > 1) {
        x.spin        = DFCCL_MIN(x.spin, a->spin_crowd);
        x.spin_sticky = DFCCL_MIN(x.spin_sticky, a->spin_crowd);
    }
    /* Its first run, with collectives of its priority that have not run
     * yet queued behind it (new ones join the tail of their priority, so
     * the next one is such if it has the same priority): it sends what it
     * can without waiting and gives way. Every queued collective thus
     * sends its first data before the block waits on any of them, and
     * ranks that queued the same collectives in different orders find one
     * another's data when they come back, instead of each spinning on its
     * own head while the peers spin on theirs. */
    if (task->fresh && pos + 1 < ctl->ntasks &&
        (!a->priority_order || task[1].priority == task->priority)) {
        x.spin = x.spin_sticky = DFCCL_MIN(x.spin, a->spin_fresh);
    }
    if (DFCCL_TID == 0 && x.dyn.started) {
        DFCCL_COUNT(a, b, ls, context_loads);
    }
    DFCCL_STAMP(ctl, DFCCL_STAGE_START);

    rc = dfccl_algo_run(&x);

    if (rc == DFCCL_PRIM_DONE) {
        x.dyn.loop = x.dyn.step = x.dyn.slice = x.dyn.started = 0;
        x.dyn.runs++;
    }
    if (DFCCL_TID == 0) {
        task->fresh    = 0;
        ctl->done_runs = x.dyn.runs;
        if (x.progressed || rc == DFCCL_PRIM_DONE) {
            a->dyn[slot] = x.dyn; /* lazy save: only a context that moved */
            task->sticky = 1;
        } else if (x.dirty) {
            a->dyn[slot] = x.dyn; /* it sent, but nothing arrived: not sticky */
        }
        if (rc == DFCCL_PRIM_STUCK) {
            DFCCL_COUNT(a, b, ls, preemptions);
        }
    }
    if (DFCCL_TID == 0 && team < (uint32_t)DFCCL_NTHREADS) {
        ctl->task_rc    = (uint32_t)rc;
        ctl->task_moved = x.progressed;
    }
    *progressed_p = x.progressed;
    return rc;
}

/*
 * Threads that run collective `st`: the first st->team of the block for a
 * one-shot collective or an LL MSCCL program that asks for fewer than all
 * of them (only their code takes the team's barriers), else all of them.
 */
DFCCL_F_DEVICE uint32_t dfccl_daemon_team(const dfccl_coll_static_t *st)
{
    const uint32_t team = (st->team + 31u) & ~31u; /* whole warps */
    const int teams     = st->algo == DFCCL_K_ALGO_ONESHOT ||
                      (st->algo == DFCCL_K_ALGO_MSCCL && st->proto == DFCCL_K_PROTO_LL);

    return !teams || team == 0 || team >= (uint32_t)DFCCL_NTHREADS
               ? (uint32_t)DFCCL_NTHREADS
               : team;
}

/*
 * Run the task at queue position `pos` until it completes or gets stuck.
 * Returns DFCCL_PRIM_DONE or DFCCL_PRIM_STUCK; *progressed_p is set when any
 * primitive succeeded. A small collective (st->team) runs on the block's
 * first warps only: the others wait at the closing barrier instead of
 * loading its contexts into their own copies (each thread's copy lives in
 * local memory, so the more warps fill one, the later a small collective
 * starts).
 */
DFCCL_F_DEVICE int dfccl_daemon_run_task(const dfccl_daemon_args_t *a, uint32_t b,
                                         dfccl_task_t *task, uint32_t pos,
                                         dfccl_blk_ctl_t *ctl, dfccl_blk_state_t *ls,
                                         uint32_t *progressed_p)
{
    const dfccl_coll_static_t *st = &a->colls[task->coll_id];
    const uint32_t team           = dfccl_daemon_team(st);
    int rc                        = DFCCL_PRIM_STUCK;
    uint32_t progressed           = 0;

    if ((uint32_t)DFCCL_TID < team) {
        rc = dfccl_daemon_run_team(a, b, task, pos, ctl, ls, st, team, &progressed);
    }
    dfccl_block_sync();
    if (team < (uint32_t)DFCCL_NTHREADS) {
        rc         = (int)ctl->task_rc;
        progressed = ctl->task_moved;
        dfccl_block_sync(); /* everyone read them before they change */
    }
    *progressed_p = progressed;
    return rc;
}

/* A completion's stage times into the block's sums (DFCCL_STAGE_TIMES);
 * the stamps start over. Thread 0. */
DFCCL_F_DEVICE void dfccl_daemon_stage_sum(const dfccl_daemon_args_t *a, uint32_t b,
                                           dfccl_blk_ctl_t *ctl, dfccl_blk_state_t *ls)
{
#ifdef DFCCL_STAGE_TIMES
    uint64_t prev = ctl->stamp[DFCCL_STAGE_TAKEN];

    for (int i = 1; i < DFCCL_NSTAGES; i++) {
        if (ctl->stamp[i] != 0 && prev != 0 && ctl->stamp[i] >= prev) {
            ls->stats.stage_ns[i] += ctl->stamp[i] - prev;
            dfccl_st_relaxed_sys(&a->stats[b].stage_ns[i], ls->stats.stage_ns[i]);
        }
        if (ctl->stamp[i] != 0) {
            prev = ctl->stamp[i];
        }
    }
    dfccl_st_relaxed_sys(&a->stats[b].stage_n, ++ls->stats.stage_n);
    dfccl_stage_clear(ctl);
#else
    (void)a;
    (void)b;
    (void)ctl;
    (void)ls;
#endif
}

/* A pass that found nothing queued and moved nothing: its time into the
 * block's sums (DFCCL_STAGE_TIMES), stored every 1024 passes so that the
 * stores across PCIe do not lengthen the passes they time. Its poll
 * segment holds all of an idle block's polls (DFCCL_IDLE_SPIN_NS), so it
 * is up to that long. Thread 0. */
DFCCL_F_DEVICE void dfccl_daemon_idle_pass(const dfccl_daemon_args_t *a, uint32_t b,
                                           dfccl_blk_state_t *ls, uint64_t now, uint64_t ns)
{
#ifdef DFCCL_STAGE_TIMES
    const uint64_t t0 = ls->last_pass;

    ls->stats.idle_pass_ns += ns;
    if (ns != 0 && t0 <= ls->t_polled && ls->t_polled <= ls->t_synced && ls->t_synced <= now) {
        ls->stats.idle_seg_ns[0] += ls->t_polled - t0;
        ls->stats.idle_seg_ns[1] += ls->t_synced - ls->t_polled;
        ls->stats.idle_seg_ns[2] += now - ls->t_synced;
    }
    if ((++ls->stats.idle_passes & 1023u) == 0) {
        for (int i = 0; i < 3; i++) {
            dfccl_st_relaxed_sys(&a->stats[b].idle_seg_ns[i], ls->stats.idle_seg_ns[i]);
        }
        dfccl_st_relaxed_sys(&a->stats[b].idle_pass_ns, ls->stats.idle_pass_ns);
        dfccl_st_relaxed_sys(&a->stats[b].idle_passes, ls->stats.idle_passes);
    }
#else
    (void)a;
    (void)b;
    (void)ls;
    (void)now;
    (void)ns;
#endif
}

/*
 * Has the previous rank (one and two shot: every peer) sent this block data
 * of `task` that it has not received yet? Then the collective runs on
 * upstream and running it here makes progress at once. One look at the
 * receive connector: the SIMPLE tail, or the flags of the first line of the
 * next LL slot (per peer in one and two shot). A hint only
 * (nothing is consumed); 0 for connectors that are costly to read (host
 * memory seen from a GPU) or absent.
 */
DFCCL_F_DEVICE int dfccl_daemon_arrived(const dfccl_daemon_args_t *a, uint32_t b,
                                        const dfccl_task_t *task)
{
    const uint64_t slot           = (uint64_t)task->coll_id * a->max_blocks + b;
    const dfccl_coll_static_t *st = &a->colls[task->coll_id];
    const dfccl_chan_t *ch        = &a->chans[slot];
    const uint64_t seq            = a->dyn[slot].recv_seq;
    uint32_t d0, d1;

    if (!st->recv_poll || (int32_t)b >= st->nchannels || ch->recv_ctrl == NULL) {
        return 0;
    }
    if (st->algo != DFCCL_K_ALGO_RING) {
        /* one or two shot: every peer's ring of slots in our region; the
         * flags of its slot's first LL line, or its flag of the step the
         * collective waits in (dfccl_twoshot_allreduce). The collective
         * waits for all of them, so the hint asks for all of them: then it
         * completes (one shot) or moves (two shot) when it runs. */
        const uint64_t flag_at = 2 * DFCCL_TWOSHOT_PART_ELEMS(ch->cnt, (uint64_t)st->nranks,
                                                              (uint64_t)st->elem_size) *
                                     st->elem_size +
                                 (a->dyn[slot].step != 0 ? DFCCL_CACHELINE : 0);
        int all = 1;

        if (st->algo != DFCCL_K_ALGO_ONESHOT) {
            return dfccl_shot_least(st->nranks, st->rank, NULL,
                                    ch->recv_data + (seq % st->nslots) * st->slot_bytes,
                                    (uint64_t)st->nslots * st->slot_bytes, flag_at) > seq;
        }
        for (int q = 0; q < st->nranks && all; q++) {
            const uint64_t idx = (uint64_t)q * st->nslots + seq % st->nslots; /* its slot */

            if (q != st->rank) {
                all = dfccl_ll_load(ch->recv_data + idx * 2ull * st->slot_bytes,
                                    (uint32_t)(seq + 1), &d0, &d1);
            }
        }
        return all;
    }
    if (st->proto == DFCCL_K_PROTO_LL) {
        return dfccl_ll_load(ch->recv_data + (seq % st->nslots) * 2ull * st->slot_bytes,
                             (uint32_t)(seq + 1), &d0, &d1);
    }
    return dfccl_ld_relaxed(&ch->recv_ctrl->tail) > seq;
}

/*
 * Which of the first 32 queued tasks have data waiting (dfccl_daemon_arrived),
 * among those of the head's priority when the queue is kept in priority
 * order (DFCCL_PRIORITY): the threads look at one task each, so
 * the block pays about one read of device memory. Every thread returns the
 * same mask.
 */
DFCCL_F_DEVICE uint32_t dfccl_daemon_arrivals(const dfccl_daemon_args_t *a, uint32_t b,
                                              const dfccl_task_t *tasks, dfccl_blk_ctl_t *ctl)
{
    const uint32_t n = DFCCL_MIN(ctl->ntasks, 32u);
    uint32_t mask;

    if (DFCCL_TID == 0) {
        ctl->arrived = 0;
    }
    dfccl_block_sync();
    for (uint32_t p = (uint32_t)DFCCL_TID; p < n; p += (uint32_t)DFCCL_NTHREADS) {
        if ((!a->priority_order || tasks[p].priority == tasks[0].priority) &&
            dfccl_daemon_arrived(a, b, &tasks[p])) {
            dfccl_shared_or(&ctl->arrived, 1u << p);
        }
    }
    dfccl_block_sync();
    mask = ctl->arrived;
    dfccl_block_sync(); /* everyone read it before thread 0 clears it again */
    return mask;
}

/* The scheduler loop of one daemon block. Returns a DFCCL_DAEMON_* code. */
DFCCL_F_DEVICE int dfccl_daemon_block(const dfccl_daemon_args_t *a, uint32_t b)
{
    DFCCL_SHARED dfccl_blk_ctl_t ctl_s;
    DFCCL_SHARED dfccl_blk_state_t ls_s;
    dfccl_blk_ctl_t *ctl   = &ctl_s;
    dfccl_blk_state_t *ls  = &ls_s;
    dfccl_task_t *tasks    = a->tasks + (uint64_t)b * a->max_colls;
    int stuck = 0; /* a collective got stuck in the last pass (same in every thread) */

    if (DFCCL_TID == 0) {
        ctl->ntasks  = a->task_count[b];
        ctl->exiting = 0;
        ctl->quit    = 0;
        ctl->resize  = 0;
        dfccl_stage_clear(ctl);
        ls->stats    = a->stats[b];
        ls->cq_tail  = a->cq_tail[b];
        ls->sq_next  = *a->sq_next;
        ls->min_head = 0;
        ls->log_head = a->log_head[b];
        ls->arrivals = a->arrivals[b];
        ls->last_pass  = dfccl_now_ns();
        ls->last_abort = ls->last_pass;
        ls->idle_ns    = 0;
        ls->poll_abort = 0;
        ls->poll_epoch = 0;
        ls->fetches    = 0;
    }
    dfccl_block_sync();

    for (;;) {
        uint32_t active = 0;
        int rc;

        if (DFCCL_TID < DFCCL_WARP) {
            const uint32_t got = b == 0 ? dfccl_daemon_fetch_sq(a, tasks, ctl, ls)
                                        : dfccl_daemon_pull_log(a, b, tasks, ctl, ls);
            if (DFCCL_TID == 0) {
                ctl->active = got;
#ifdef DFCCL_STAGE_TIMES
                ls->t_polled = dfccl_now_ns();
#endif
            }
        }
        if (DFCCL_TID == 0) {
            uint64_t abort = ls->poll_abort;

            /* The abort flag sits in host memory. Block 0 reads it with
             * one SQ poll in DFCCL_ABORT_POLLS (in flight together) and
             * copies it into device memory, where the other blocks read it
             * with every poll of the log: reads of host memory by the
             * other blocks delayed the leader's polls. Once block 0 has
             * quit, they read the flag itself every few microseconds. */
            if (b == 0) {
                if (abort) {
                    dfccl_st_release_gpu(a->abort_dev, abort);
                }
            } else if (!abort && ls->poll_epoch == a->launch_epoch) {
                const uint64_t now = dfccl_now_ns();

                if (now < ls->last_abort || now - ls->last_abort > DFCCL_ABORT_CHECK_NS) {
                    ls->last_abort = now;
                    abort = dfccl_ld_relaxed(a->abort_flag);
                }
            }
            ctl->rc = abort ? DFCCL_DAEMON_ABORT : 0;
            if (ctl->rc == 0 && ctl->exiting && ctl->ntasks == 0) {
                ctl->rc = DFCCL_DAEMON_EXIT;
            }
        }
        dfccl_block_sync();
#ifdef DFCCL_STAGE_TIMES
        if (DFCCL_TID == 0) {
            ls->t_synced = dfccl_now_ns();
        }
#endif
        /* Every control word read by all threads is written by thread 0
         * before a barrier and rewritten only after the next one, so that
         * all threads take the same branches. */
        active = ctl->active;
        rc     = (int)ctl->rc;
        if (rc != 0) {
            if (DFCCL_TID == 0 && rc == DFCCL_DAEMON_EXIT) {
                dfccl_st_relaxed_sys(&a->stats[b].exited, 1);
            }
            dfccl_block_sync();
            return rc;
        }

        /* Walk the task queue from the head, in two rounds when several
         * collectives are queued (DFCCL_ARRIVALS: after a pass in which one
         * got stuck, or in every pass): first those whose previous rank (in
         * one and two shot: every peer) has sent data already (they run
         * upstream, so they progress at once; in queue order, and only
         * among the head's priority), all of them even as some complete,
         * then, if none completed, the rest. Ranks that queued the same
         * collectives in different orders thus meet on one another's
         * instead of each spinning on its own head. */
        {
            const int look = ctl->ntasks > 1 &&
                             (a->look_arrived == DFCCL_K_ARRIVALS_ALWAYS ||
                              (a->look_arrived == DFCCL_K_ARRIVALS_STUCK && stuck));
            uint32_t arrived = look ? dfccl_daemon_arrivals(a, b, tasks, ctl) : 0;
            int done = 0;

            stuck = 0;
            for (int round = arrived ? 0 : 1; round < 2 && !done; round++) {
                for (uint32_t pos = 0; pos < ctl->ntasks; pos++) {
                    const int hinted = pos < 32 && ((arrived >> pos) & 1u);
                    uint32_t progressed = 0;
                    int trc;

                    if (hinted != (round == 0)) {
                        continue;
                    }
                    trc = dfccl_daemon_run_task(a, b, &tasks[pos], pos, ctl, ls, &progressed);
                    if (progressed) {
                        active = 1;
                    }
                    if (trc == DFCCL_PRIM_STUCK) {
                        stuck = 1;
                    }
                    if (trc == DFCCL_PRIM_DONE) {
                        active = 1;
                        if (DFCCL_TID == 0) {
                            int id = tasks[pos].coll_id;
                            DFCCL_STAMP(ctl, DFCCL_STAGE_DONE);
                            dfccl_daemon_task_remove(tasks, &ctl->ntasks, pos);
                            a->task_count[b] = ctl->ntasks;
                            dfccl_daemon_post_cqe(a, b, ls, ctl, id);
                            DFCCL_STAMP(ctl, DFCCL_STAGE_CQE);
                            dfccl_daemon_stage_sum(a, b, ctl, ls);
                        }
                        dfccl_block_sync();
                        done = 1;
                        if (round == 0) {
                            /* the other hinted ones are likely to complete
                             * too: run them before the SQ is read again
                             * (a round trip across PCIe per pass). The
                             * removal moved the later tasks up by one. */
                            arrived = (arrived & ((1u << pos) - 1u)) |
                                      (uint32_t)(((uint64_t)arrived >> (pos + 1)) << pos);
                            pos--; /* unsigned: wraps to the same position next */
                            continue;
                        }
                        break; /* rescan from the head: new SQEs, priorities */
                    }
                }
            }
        }

        /* The quit decision reads a clock: thread 0 takes it for the block
         * (threads' clocks may differ). */
        if (DFCCL_TID == 0) {
            uint64_t now  = dfccl_now_ns();
            uint64_t step = dfccl_daemon_idle_step(now, ls->last_pass, a->quit_ns);

            if (stuck && dfccl_ld_relaxed(a->cancels) != 0) {
                dfccl_daemon_drop_cancelled(a, b, tasks, ctl, ls);
            }
            if (!active && ctl->ntasks == 0) {
                dfccl_daemon_idle_pass(a, b, ls, now, step);
            }
            ls->idle_ns   = active ? 0 : ls->idle_ns + step;
            ls->last_pass = now;
            /* Block 0 quits when it received no SQE and nothing of its own
             * moved for quit_ns; the other blocks follow it (once idle or
             * stuck themselves), never go first: a block that quit alone
             * would leave its channel of the next collectives unserved
             * until the whole daemon is relaunched. */
            ctl->quit = !active && ls->idle_ns > a->quit_ns;
            if (b != 0 && ctl->quit) {
                ctl->quit = dfccl_ld_acquire_gpu(a->quit_epoch) == a->launch_epoch;
            }
            /* the host needs a larger grid, or a launch that has seen
             * memory mapped since this one started: every block reads the
             * request from the log and quits at the end of its pass
             * (contexts of preempted collectives are saved already) */
            if (ctl->resize) {
                ctl->quit = 1;
            }
            /* Block 0 first says it is quitting, then looks at the SQ once
             * more: the host publishes an entry, then reads that word (each
             * side with a fence between its store and its load), so either
             * the host sees the word and makes sure a daemon runs, or block
             * 0 sees the entry and stays. */
            if (b == 0 && ctl->quit) {
                dfccl_st_relaxed_sys(&a->sq_ctrl->quitting, a->launch_epoch);
                dfccl_fence_sc_sys();
                if (!ctl->resize && dfccl_daemon_sq_pending(a, ls)) {
                    dfccl_st_relaxed_sys(&a->sq_ctrl->quitting, 0);
                    ctl->quit = 0;
                    ls->idle_ns = 0;
                } else {
                    dfccl_st_release_gpu(a->quit_epoch, a->launch_epoch);
                }
            }
            if (ctl->quit) {
                /* Voluntary quit. Everything lives in device memory already:
                 * task queue, dynamic contexts (saved at preemption), log and
                 * CQ positions. */
                a->task_count[b] = ctl->ntasks;
                DFCCL_COUNT(a, b, ls, quits);
            } else if (!active) {
                dfccl_pause();
            }
        }
        dfccl_block_sync();
        if (ctl->quit) {
            return DFCCL_DAEMON_QUIT;
        }
    }
}

#endif /* DFCCL_KERNELS_DAEMON_H_ */
