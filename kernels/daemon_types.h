/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Data shared by the host runtime and the daemon: queue entries, static and
 * dynamic collective contexts, connector control words and the daemon's
 * argument block. Plain C structs with fixed-width fields, so that nvcc and
 * the host compiler lay them out identically.
 *
 * Memory placement (CUDA backend; the host backend uses ordinary memory):
 *  - SQ, CQ rings and per-block statistics: pinned host memory mapped into
 *    the GPU. Each word has exactly one writer; no CPU-GPU atomics.
 *  - static contexts, channels, dynamic contexts, task lists and the SQE
 *    log: device memory.
 *  - connectors: device memory of the receiver (p2p) or shared host memory.
 */
#ifndef DFCCL_KERNELS_DAEMON_TYPES_H_
#define DFCCL_KERNELS_DAEMON_TYPES_H_

#include <stdint.h>

/* The most daemon blocks, and so channels of one collective: MSCCL programs
 * with up to 64 thread blocks a rank, and wide all-to-alls, take them all. */
#define DFCCL_MAX_CHANNELS 64
#define DFCCL_CACHELINE    128
/* Largest slice (data bytes) the LL protocol can carry (DFCCL_LL_BYTES
 * picks the limit below it), and its line: 8 bytes of data and two copies
 * of a 4-byte flag (see dfccl_proto_t in dfccl.h). */
#define DFCCL_LL_MAX_BYTES 65536
#define DFCCL_LL_LINE      16
/* dfccl_coll_static_t.proto: the protocol a collective was registered with */
enum { DFCCL_K_PROTO_SIMPLE = 1, DFCCL_K_PROTO_LL = 2 };

/* Algorithm of a collective: the ring, or (allreduce, allgather and
 * reduce-scatter of small messages on a group whose ranks all reach each
 * other) one shot: every rank writes what each peer needs of its input
 * into a connector of its own at that peer and reduces (places) the n
 * inputs in rank order; or (allreduce of mid sizes, same groups) two shot
 * on the same connectors: a reduce-scatter and an allgather of one hop
 * each. */
enum {
    DFCCL_K_ALGO_RING    = 0,
    DFCCL_K_ALGO_ONESHOT = 1,
    DFCCL_K_ALGO_TWOSHOT = 2,
    DFCCL_K_ALGO_MESH    = 3, /* alltoall: a connector per pair, each rank writes
                               * into its own connector at every peer */
    DFCCL_K_ALGO_MSCCL   = 4, /* an MSCCL program: the mesh's connectors, a
                               * thread block per channel */
    DFCCL_K_ALGO_TREE    = 5, /* allreduce: two binary trees on the mesh's
                               * connectors, half of the data each */
    DFCCL_K_ALGO_CTREE   = 6  /* allreduce: one tree, its reduction and
                               * broadcast overlapped chunk by chunk */
};

/* Rank r's neighbours in tree `tree` (0 or 1) of the tree algorithms
 * (kernels/algo/tree.h), which both sides need: *parent (-1: the root),
 * kid[0] and kid[1] (-1: none). A tree is a heap over positions (position
 * i's parent is (i - 1) / 2, its children 2i + 1 and 2i + 2); rank r sits
 * at position r in tree 0 and at n - 1 - r in tree 1, so that the leaves
 * of one tree are inner nodes of the other. */
#ifdef __CUDACC__
#define DFCCL_F_SHARED static __host__ __device__ inline
#else
#define DFCCL_F_SHARED static inline
#endif
/* Height of such a heap of n positions (the tree of n ranks). */
DFCCL_F_SHARED int dfccl_tree_height(int n)
{
    int h = 0;

    while ((2 << h) - 1 < n) {
        h++;
    }
    return h;
}

DFCCL_F_SHARED void dfccl_tree_shape(int n, int r, int tree, int *parent, int kid[2])
{
    const int pos = tree == 0 ? r : n - 1 - r;

    for (int k = 0; k < 2; k++) {
        const int c = 2 * pos + 1 + k;
        kid[k] = c < n ? (tree == 0 ? c : n - 1 - c) : -1;
    }
    *parent = pos == 0 ? -1 : tree == 0 ? (pos - 1) / 2 : n - 1 - (pos - 1) / 2;
}

/* MSCCL programs (kernels/algo/msccl.h): the step types, in the order of
 * runtime/msccl.h's dfccl_msccl_type_t, and the buffers */
enum {
    DFCCL_K_MS_SEND = 0, /* s */
    DFCCL_K_MS_RECV,     /* r */
    DFCCL_K_MS_RCS,      /* recv, copy, send */
    DFCCL_K_MS_RRS,      /* recv, reduce, send */
    DFCCL_K_MS_RRC,      /* recv, reduce, copy */
    DFCCL_K_MS_RRCS,     /* recv, reduce, copy, send */
    DFCCL_K_MS_COPY,     /* cpy */
    DFCCL_K_MS_REDUCE,   /* re: dst = dst (op) src */
    DFCCL_K_MS_NOP
};
enum { DFCCL_K_MS_IN = 0, DFCCL_K_MS_OUT, DFCCL_K_MS_SCRATCH };

typedef struct {
    uint8_t type;   /* DFCCL_K_MS_* */
    uint8_t srcbuf; /* DFCCL_K_MS_IN, _OUT, _SCRATCH */
    uint8_t dstbuf;
    uint8_t hasdep; /* another thread block waits for it: publish its end */
    int32_t srcoff; /* chunks */
    int32_t dstoff;
    int32_t cnt;
    int32_t depid;  /* thread block waited for first, or -1 */
    int32_t deps;   /* its step */
} dfccl_ms_step_t;

/*
 * A thread block of an MSCCL program on this rank, run by the channel of its
 * index (device memory, written at registration). Every chunk has
 * chunk_elems elements; a loop moves one slot's worth of each chunk. A
 * thread block counts its progress in done[tb]: per run, 1 + loops x steps
 * events (the input copied, then each step), cumulative over runs, and
 * publishes the count where a step of another thread block waits for it.
 *
 * In memory it is followed by the channel its primitives run on
 * (DFCCL_MS_VIEW: the channel of its index, with its own send and receive
 * connectors, those of channel `chan`'s regions, written once the peers'
 * regions are known), then by its steps (DFCCL_MS_STEPS): a run finds all
 * three from the one pointer, without waiting for a read in between.
 */
typedef struct {
    uint64_t               chunk_elems;
    char                  *scratch;      /* buffer s */
    uint64_t              *done;         /* per thread block of this rank */
    const int32_t         *nsteps_of;    /* per thread block of this rank */
    int32_t                ntbs;
    int32_t                inplace_only; /* out of place: the input is copied
                                          * into the output first */
    int32_t                in_chunks;    /* chunks of buffer i */
    int32_t                tb;
    int32_t                chan;         /* its connectors: channel chan's regions */
    int32_t                send;         /* peers, or -1 */
    int32_t                recv;
    int32_t                nsteps;
} dfccl_ms_tb_t;

#define DFCCL_MS_VIEW(tb)  ((const struct dfccl_chan *)(const void *)((tb) + 1))
#define DFCCL_MS_STEPS(tb) ((const dfccl_ms_step_t *)(const void *)(DFCCL_MS_VIEW(tb) + 1))
/* A run asks for this many bytes from its thread block on (kernels/algo/
 * msccl.h), which the allocation holds however few steps the last has. */
#define DFCCL_MS_PREFETCH_BYTES 512u
/* Bytes of a thread block of nsteps steps with its channel and steps. */
#define DFCCL_MS_TB_BYTES(nsteps)                                                                \
    ((sizeof(dfccl_ms_tb_t) + sizeof(struct dfccl_chan) +                                       \
      (uint64_t)(nsteps) * sizeof(dfccl_ms_step_t) + 15) & ~(uint64_t)15)

/* The most ranks of a one-shot or mesh collective (dfccl_chan_t.peer). */
#define DFCCL_ONESHOT_MAX_RANKS 8
/* Largest one-shot allreduce (allgather, reduce-scatter: per-rank share):
 * each channel's share is one LL slot, on at most 32 channels; above that
 * size two-shot and the ring move less data. */
#define DFCCL_LL_MAX_CHANNELS   32
#define DFCCL_ONESHOT_MAX_BYTES ((uint64_t)DFCCL_LL_MAX_CHANNELS * DFCCL_LL_MAX_BYTES)
/* Largest two-shot allreduce: each rank's part of a channel's share is at
 * most DFCCL_LL_MAX_BYTES (a slot holds two parts and two flags). */
#define DFCCL_TWOSHOT_MAX_BYTES                                                                  \
    ((uint64_t)DFCCL_LL_MAX_CHANNELS * DFCCL_ONESHOT_MAX_RANKS * DFCCL_LL_MAX_BYTES)
#define DFCCL_TWOSHOT_MAX_CHANNEL_BYTES ((uint64_t)DFCCL_ONESHOT_MAX_RANKS * DFCCL_LL_MAX_BYTES)
/* Elements of each part of a two-shot channel's share of cnt elements on n
 * ranks (esz bytes each, at most 16): a whole number of 16 bytes, so that
 * parts start aligned. The daemon cuts shares and the host lays out slots
 * with it. */
#define DFCCL_TWOSHOT_PART_ELEMS(cnt, n, esz)                                                    \
    ((((cnt) + (n) - 1) / (n) + 16 / (esz) - 1) / (16 / (esz)) * (16 / (esz)))

/* When the scheduler looks for collectives whose data has arrived
 * (dfccl_arrivals_t, resolved). */
enum { DFCCL_K_ARRIVALS_OFF = 0, DFCCL_K_ARRIVALS_STUCK = 1, DFCCL_K_ARRIVALS_ALWAYS = 2 };

/* Collective kinds. */
enum {
    DFCCL_COLL_ALLREDUCE = 0,
    DFCCL_COLL_ALLGATHER,
    DFCCL_COLL_REDUCESCATTER,
    DFCCL_COLL_REDUCE,
    DFCCL_COLL_BROADCAST,
    DFCCL_COLL_ALLTOALL,
    DFCCL_COLL_ALLTOALLV,
    DFCCL_COLL_KIND_COUNT
};

/* SQE kinds. */
enum {
    DFCCL_SQE_RUN  = 1,
    DFCCL_SQE_EXIT = 2,
    DFCCL_SQE_RESIZE = 3, /* quit, if this launch has fewer blocks than
                           * nchannels: the host relaunches a larger grid */
    DFCCL_SQE_REMAP  = 4  /* quit, if this launch's epoch is at most
                           * sendbuff: it started before device memory that
                           * later entries use was mapped */
};

/* Submission queue entry, decoded (dfccl_daemon_sqw_decode). */
typedef struct {
    uint64_t seq;
    int32_t  kind;
    int32_t  coll_id;
    uint64_t sendbuff;
    uint64_t recvbuff;
    uint32_t nchannels; /* blocks taking part: a block that reads this entry
                         * late must not ask the (possibly re-registered) id */
    int32_t  priority;
    uint32_t ctx_new;   /* the host wrote the collective's contexts in device
                         * memory since its previous entry (DFCCL_SQW_CTX_NEW) */
} dfccl_sqe_t;

/*
 * The same entry as the host writes it into the submission ring (mapped
 * host memory, read by block 0 across PCIe): eight 8-byte words, each with
 * 4 bytes of the entry in its low half and the low 32 bits of the entry's
 * ring position + 1 in its high half. A word is written and read whole, so
 * the leader takes an entry with one read of its 64 bytes: no sequence
 * word to acquire before the fields (one PCIe round trip, not two), and the
 * host's stores need no order among themselves. Block 0 copies the lines
 * it takes, as they are, into a log in device memory (same positions),
 * which the other blocks read the same way.
 */
enum {
    DFCCL_SQW_KIND = 0,
    DFCCL_SQW_COLL,
    DFCCL_SQW_SEND_LO,
    DFCCL_SQW_SEND_HI,
    DFCCL_SQW_RECV_LO,
    DFCCL_SQW_RECV_HI,
    DFCCL_SQW_NCHANNELS,
    DFCCL_SQW_PRIORITY,
    DFCCL_SQW_WORDS
};

typedef struct {
    uint64_t w[DFCCL_SQW_WORDS];
} dfccl_sqw_t;

/* 16-byte parts of a line, the unit in which the daemon reads and writes
 * it (dfccl_ld_sqw_part). */
#define DFCCL_SQW_PARTS (DFCCL_SQW_WORDS / 2)

/*
 * A bit of the kind word's low 16: the host wrote this collective's
 * contexts (static context, channels, dynamic contexts) in device memory
 * since its previous entry: it was registered, or its peers' connectors
 * were found. A block that sees such an entry fences (acquire) before it
 * reads anything of the collective, so that no line of its L1 cache holds
 * what was there before. Other entries need no fence: the contexts are
 * unchanged since the block's last fence, and everything else that a
 * collective reads and others write (user buffers, connectors, peers'
 * flags) is read past L1 (dfccl_ld_word, LL and SIMPLE loads, relaxed
 * loads). A fence costs more than a read of L2, and it would be on the way
 * of every collective on every block.
 */
#define DFCCL_SQW_CTX_NEW 0x8000u

/* The kind word's high 16 bits: how many entries after this one the host
 * wrote together with it (before it; see dfccl_ctx_drain_pending). The
 * leader takes them in the same pass. */
#define DFCCL_SQW_FOLLOW_SHIFT 16
#define DFCCL_SQW_FOLLOW_MAX   0xffffu

/* Most SQ entries the leader reads in one poll (DFCCL_SQ_WINDOW), one lane
 * of its warp each. */
#define DFCCL_SQ_WINDOW_MAX 16

/* Log lines each of the other blocks reads in one poll, one lane each (at
 * most DFCCL_SQ_WINDOW_MAX). */
#define DFCCL_LOG_WINDOW 8

/*
 * Entries the leader reads in the first poll of a pass while its block has
 * nothing queued: the poll that a single call waits for, and the one that
 * finds the first collectives of a burst. Reading one entry leaves the
 * second collective of a burst to the next round trip, so ranks that post
 * a burst in different orders each start alone on their own first one;
 * every entry more makes every idle poll, and so every single call, a
 * little longer. Two catch the second collective of most bursts.
 */
#define DFCCL_SQ_IDLE_LINES 2

/* Submission ring control: written by block 0 only, read by the host. */
typedef struct {
    uint64_t head;     /* consumed entries */
    char     pad0[DFCCL_CACHELINE - sizeof(uint64_t)];
    /* launch epoch of a daemon whose block 0 is quitting (see
     * dfccl_daemon_block): until it says so, a new entry is sure to be
     * taken by the running daemon, and the host need not ask the driver */
    uint64_t quitting;
    char     pad1[DFCCL_CACHELINE - sizeof(uint64_t)];
} dfccl_sq_ctrl_t;

/*
 * Completion queue: one ring per daemon block, each with a single producer
 * (its block) and a single consumer (the poller). A slot holds
 * ((position + 1) << 32) | coll_id, published with one release store.
 */
typedef struct {
    uint64_t head; /* consumed entries; written by the poller only */
    char     pad0[DFCCL_CACHELINE - sizeof(uint64_t)];
} dfccl_cq_ctrl_t;

/*
 * Stage times, a diagnostic build only (-DDFCCL_STAGE_TIMES for the host
 * compiler and nvcc alike): thread 0 of each block stamps the clock as a
 * collective passes each stage; each completion adds the time from the
 * previous stamp to every stamped stage, and dfcclDestroy prints the
 * averages. Stages: the task taken from the SQ or log; it starts; credit;
 * step 0 sent; its data arrived; reduced; step 1 sent; arrived; copied out
 * (two shot); done on this block; its CQE posted.
 */
#define DFCCL_NSTAGES 11
enum {
    DFCCL_STAGE_TAKEN = 0,
    DFCCL_STAGE_START,
    DFCCL_STAGE_CREDIT,
    DFCCL_STAGE_SENT0,
    DFCCL_STAGE_ARRIVED0,
    DFCCL_STAGE_REDUCED,
    DFCCL_STAGE_SENT1,
    DFCCL_STAGE_ARRIVED1,
    DFCCL_STAGE_COPIED,
    DFCCL_STAGE_DONE,
    DFCCL_STAGE_CQE
};

/* Per-block counters, written by their block only, read by the host. */
typedef struct {
    uint64_t preemptions;
    uint64_t quits;
    uint64_t context_loads;
    uint64_t exited;  /* 1 after the exit SQE was processed */
    uint64_t error;   /* first daemon-side error code (negative), 0 if none */
    uint64_t error_coll;
    uint64_t pad[2];
#ifdef DFCCL_STAGE_TIMES
    uint64_t stage_n;                  /* completions summed */
    uint64_t stage_ns[DFCCL_NSTAGES];  /* ns spent reaching each stage */
    uint64_t idle_passes;              /* scheduler passes with nothing queued */
    uint64_t idle_pass_ns;             /* their time, summed */
    uint64_t idle_seg_ns[3];           /* of which: to the poll's return, to the
                                        * barrier after it, the rest */
#endif
} dfccl_block_stats_t;

/*
 * Connector control words, at the start of every connector region, which is
 * owned by the receiving rank: `tail` counts slots the sender has filled
 * (written only by the sender), `head` counts slots the receiver has
 * consumed (written only by the receiver). `sig` identifies the collective
 * the receiver registered there, so a sender can check it is the same one.
 * The slot data follows.
 */
typedef struct {
    uint64_t tail;
    char     pad0[DFCCL_CACHELINE - sizeof(uint64_t)];
    uint64_t head;
    char     pad1[DFCCL_CACHELINE - sizeof(uint64_t)];
    uint64_t sig[8]; /* receiver's registration: [0] valid marker, [1..7] fields */
    char     pad2[DFCCL_CACHELINE - 8 * sizeof(uint64_t)];
} dfccl_conn_ctrl_t;

/* The mesh's layout (mesh, MSCCL programs, trees): a channel's region holds
 * its control words, then a connector per other rank, in rank order, each
 * its control words and nslots slots (twice as large in LL). Where in
 * rank `owner`'s region the connector of sender q starts. */
#define DFCCL_MESH_CONN_BYTES(nslots, slot_bytes, ll)                                            \
    (sizeof(dfccl_conn_ctrl_t) + (uint64_t)(nslots) * (uint64_t)(slot_bytes) * ((ll) ? 2u : 1u))
#define DFCCL_MESH_CONN_AT(owner, q, nslots, slot_bytes, ll)                                     \
    (sizeof(dfccl_conn_ctrl_t) + (uint64_t)((q) < (owner) ? (q) : (q) - 1) *                    \
                                     DFCCL_MESH_CONN_BYTES(nslots, slot_bytes, ll))

/* One channel of a registered collective: its part of the data and its ring. */
typedef struct dfccl_chan {
    uint64_t           off;       /* first element of this channel's range */
    uint64_t           cnt;       /* elements in this channel's range */
    dfccl_conn_ctrl_t *recv_ctrl; /* own connector (prev -> me) */
    char              *recv_data;
    dfccl_conn_ctrl_t *send_ctrl; /* next rank's connector (me -> next) */
    char              *send_data;
    /* one and two shot: every rank's connector region of this collective
     * (ours too), which holds a ring of slots per sender after the control
     * words; rank q writes into ring q of every peer */
    char              *peer[DFCCL_ONESHOT_MAX_RANKS];
    /* alltoall on the mesh: nranks entries of DFCCL_PAIR_WORDS words, what
     * this channel carries of each pair (device memory) */
    const uint64_t    *pairs;
    /* an MSCCL program: the thread block this channel runs (NULL: none) */
    const dfccl_ms_tb_t *msccl;
    /* its word in dfccl_daemon_args_t.progress (NULL: none) */
    uint64_t          *progress;
} dfccl_chan_t;

/* An entry of dfccl_chan_t.pairs, for peer q, in elements: where in the
 * send buffer the channel's part of our data for q starts and how long it
 * is, and where in the receive buffer its part of q's data for us goes and
 * how long that is. Then the sequences of the pair's connectors (to q,
 * from q) at the start of run RUN0: from there each run advances them by
 * the pair's slices, until an alltoallv's counts change at a run
 * (dfcclRunAllToAllvCounts) and the host writes the entry again. */
enum {
    DFCCL_PAIR_SRC = 0,
    DFCCL_PAIR_SCNT,
    DFCCL_PAIR_DST,
    DFCCL_PAIR_RCNT,
    DFCCL_PAIR_SBASE,
    DFCCL_PAIR_RBASE,
    DFCCL_PAIR_RUN0,
    DFCCL_PAIR_WORDS
};

/* Static context: constant while the collective is registered. */
typedef struct {
    int32_t  kind;
    int32_t  dtype;
    int32_t  op;
    int32_t  nranks;
    int32_t  rank;
    int32_t  root;
    int32_t  nchannels;
    int32_t  priority;
    int32_t  ring_pos;    /* this rank's position in the group's ring */
    int32_t  ring_root;   /* the root's (reduce, broadcast) */
    uint64_t count;       /* allreduce/reduce/bcast: count; allgather/rs: per rank;
                           * alltoall: per pair; alltoallv: 0 (see chans' pairs) */
    uint32_t slot_bytes;
    uint32_t nslots;
    uint32_t chunk_slices; /* slices per ring chunk */
    uint32_t elem_size;
    uint32_t proto;        /* DFCCL_K_PROTO_LL, or anything else: SIMPLE */
    uint32_t recv_poll;    /* 1: the receive connectors sit in memory the block
                            * reads cheaply (this GPU's, or the host's on the
                            * host backend), so the scheduler may look at them
                            * to find collectives whose data has arrived */
    uint32_t algo;         /* DFCCL_K_ALGO_* */
    uint32_t team;         /* threads that run it, the first of the block (whole
                            * warps); 0 or the block size or more: all of them */
    uint32_t probe;        /* DFCCL_K_PROBE_*: the link profile's probe on the ring's
                            * connectors (dfccl_ring_probe); 0: a collective */
    uint64_t registered;  /* registration epoch; 0 when the id is free */
    uint64_t cancelled;   /* 1: the host gave its run up (a rank of its group is
                           * excluded): a block that finds it stuck drops it and
                           * posts a CQE marked DFCCL_K_CQE_CANCEL */
    /* the rank at each position of the ring, in memory the daemon reads;
     * NULL: the ring is rank order (ring_pos == rank) */
    const int32_t *ring_ranks;
} dfccl_coll_static_t;

/* dfccl_coll_static_t.probe: a probe (runtime/profile.c), and whether this
 * rank sends its input to the next position of the ring and receives the
 * previous position's (the links of the class being measured). */
enum { DFCCL_K_PROBE_RECV = 1u, DFCCL_K_PROBE_SEND = 2u, DFCCL_K_PROBE_ON = 4u };

/* A CQE's id bit for a run a block dropped (dfccl_coll_static_t.cancelled). */
#define DFCCL_K_CQE_CANCEL 0x80000000u

/*
 * Dynamic context of one (collective, block): where the collective stands.
 * Saved to device memory on preemption and restored when it is scheduled
 * again. send_seq/recv_seq continue across runs, so connectors never reset.
 */
typedef struct {
    uint32_t loop;
    uint32_t step;
    uint32_t slice;
    uint32_t started; /* nonzero once this run moved any data */
    uint64_t send_seq;
    uint64_t recv_seq;
    /* last values read of the peer's head and of our tail: both only grow,
     * so a cached value is a safe lower bound, and the connector words are
     * read again only when the cached ones say "wait" (a peer's head sits
     * across NVLink; reading it for every slice would cost a round trip) */
    uint64_t head_cache;
    uint64_t tail_cache;
    /* runs completed: a mesh alltoall's connector of each pair advances by
     * that pair's slices per run (DFCCL_PAIR_RUN0) */
    uint64_t calls;
    /* an MSCCL run's start: 1 once its share of the input was copied, 2
     * once every thread block's was */
    uint32_t phase;
    /* runs of this channel completed since registration, of every
     * algorithm (dfccl_daemon_run_team): the run in flight is runs + 1,
     * the tag of its progress word */
    uint32_t runs;
} dfccl_dyn_t;

/*
 * Partial completion: a progress word per (collective, channel) in mapped
 * host memory (plain memory on the host backend), written by the daemon
 * only. The high DFCCL_K_PROG_RUN_BITS bits are the run it describes (the
 * channel's runs, mod 2^24, from 1), the low DFCCL_K_PROG_ELEMS_BITS the
 * elements of the channel's range, from its start, that are final in the
 * receive buffer; all ones: the whole range. An algorithm that finalizes
 * its range in order publishes as it goes (dfccl_prog_publish); the
 * scheduler publishes the whole range with every completion. dfccl.h
 * gives consumers the same layout (DFCCL_PROGRESS_*).
 */
#define DFCCL_K_PROG_RUN_BITS   24
#define DFCCL_K_PROG_ELEMS_BITS 40
#define DFCCL_K_PROG_ALL        ((1ull << DFCCL_K_PROG_ELEMS_BITS) - 1)
#define DFCCL_K_PROG_WORD(run, elems)                                                           \
    ((((uint64_t)(run) & ((1ull << DFCCL_K_PROG_RUN_BITS) - 1)) << DFCCL_K_PROG_ELEMS_BITS) |    \
     ((uint64_t)(elems) & DFCCL_K_PROG_ALL))

/* A collective in a block's task queue. */
typedef struct {
    int32_t  coll_id;
    int32_t  priority;
    uint32_t arrival;  /* order of arrival, for FIFO and stable priority order */
    uint16_t sticky;   /* 1 once a primitive succeeded in this run */
    uint16_t fresh;    /* 1 until its first run */
    uint64_t sendbuff;
    uint64_t recvbuff;
} dfccl_task_t;

/* Everything the daemon needs, passed by value at launch. */
typedef struct {
    /* queues (mapped host memory) */
    dfccl_sqw_t         *sq;
    dfccl_sq_ctrl_t     *sq_ctrl;
    uint64_t            *cq;        /* nblocks rings of cq_entries */
    dfccl_cq_ctrl_t     *cq_ctrl;   /* nblocks */
    dfccl_block_stats_t *stats;     /* nblocks */
    uint64_t            *abort_flag;
    /* daemon state (device memory) */
    uint64_t            *abort_dev; /* block 0's copy of *abort_flag, for the others */
    uint64_t            *cancels;   /* runs the host gave up that some block may still
                                     * hold (dfccl_coll_static_t.cancelled): 0, and
                                     * no block looks for them */
    dfccl_sqw_t         *log;       /* fan-out of SQ lines, log_entries */
    uint64_t            *quit_epoch; /* launch_epoch once block 0 has quit */
    uint64_t            *log_head;  /* nblocks, consumed log entries */
    uint64_t            *sq_next;   /* block 0's next SQ position */
    uint64_t            *cq_tail;   /* nblocks, produced CQEs */
    uint32_t            *task_count; /* nblocks */
    uint32_t            *arrivals;  /* nblocks */
    dfccl_task_t        *tasks;     /* nblocks x max_colls */
    const dfccl_coll_static_t *colls;
    const dfccl_chan_t  *chans;     /* max_colls x max_blocks */
    dfccl_dyn_t         *dyn;       /* max_colls x max_blocks */
    char                *ll_scratch; /* nblocks x DFCCL_LL_MAX_BYTES: LL slices */
    uint64_t            *progress;  /* max_colls x max_blocks progress words
                                     * (mapped host memory) */
    /* configuration */
    uint32_t sq_entries;
    uint32_t sq_window;      /* SQ entries the leader reads per poll */
    uint32_t log_entries;
    uint32_t cq_entries;
    uint32_t max_colls;
    uint32_t max_blocks;
    uint32_t nblocks;        /* blocks of this launch */
    uint32_t spin_head;
    uint32_t spin_min;
    uint32_t spin_sticky;
    uint32_t spin_fresh;     /* first run while fresh ones of its priority follow */
    uint32_t spin_crowd;     /* most spins while other collectives are queued */
    uint32_t priority_order;
    uint32_t look_arrived;   /* DFCCL_K_ARRIVALS_*: when the scheduler looks for
                              * collectives whose data has arrived */
    uint64_t quit_ns;
    uint64_t launch_epoch;   /* launches so far, this one included */
} dfccl_daemon_args_t;

#endif /* DFCCL_KERNELS_DAEMON_TYPES_H_ */
