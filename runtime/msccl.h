/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MSCCL algorithm programs: the XML files that microsoft/msccl-tools
 * writes and the MSCCL executor reads, loaded into a checked program.
 *
 * A program names a collective and the number of ranks (GPUs) it is for.
 * Each rank's buffers (input i, output o, scratch s) are cut into chunks;
 * each rank runs thread blocks, each a list of steps that send to one peer,
 * receive from one peer, and copy or reduce chunks locally, on one channel.
 * A step may first wait for a step of another thread block of its rank
 * (depid, deps). Sends and receives between two ranks on a channel pair in
 * order.
 *
 * The loader is self-contained (libxml2 and libc only), so that tests and
 * the fuzz target can take it alone. It returns 0, or -1 with a message
 * "FILE:LINE: what is wrong" in `err`.
 */
#ifndef DFCCL_RUNTIME_MSCCL_H_
#define DFCCL_RUNTIME_MSCCL_H_

#include <stddef.h>
#include <stdint.h>

/* Bounds of what a program may hold: beyond them a file is refused. */
#define DFCCL_MSCCL_MAX_RANKS    1024
#define DFCCL_MSCCL_MAX_CHANNELS 32
#define DFCCL_MSCCL_MAX_TBS      1024    /* per rank */
#define DFCCL_MSCCL_MAX_STEPS    65536   /* per thread block */
#define DFCCL_MSCCL_MAX_CHUNKS   (1 << 24) /* per buffer */
#define DFCCL_MSCCL_MAX_FILE     (64u << 20)

typedef enum {
    DFCCL_MSCCL_SEND = 0,              /* s */
    DFCCL_MSCCL_RECV,                  /* r */
    DFCCL_MSCCL_RECV_COPY_SEND,        /* rcs */
    DFCCL_MSCCL_RECV_REDUCE_SEND,      /* rrs */
    DFCCL_MSCCL_RECV_REDUCE_COPY,      /* rrc */
    DFCCL_MSCCL_RECV_REDUCE_COPY_SEND, /* rrcs */
    DFCCL_MSCCL_COPY,                  /* cpy */
    DFCCL_MSCCL_REDUCE,                /* re */
    DFCCL_MSCCL_NOP,                   /* nop */
    DFCCL_MSCCL_NTYPES
} dfccl_msccl_type_t;

typedef enum { DFCCL_MSCCL_BUF_IN = 0, DFCCL_MSCCL_BUF_OUT, DFCCL_MSCCL_BUF_SCRATCH } dfccl_msccl_buf_t;

typedef enum { DFCCL_MSCCL_SIMPLE = 0, DFCCL_MSCCL_LL, DFCCL_MSCCL_LL128 } dfccl_msccl_proto_t;

/* The collectives MSCCL files name; dfccl runs the first four. */
typedef enum {
    DFCCL_MSCCL_COLL_ALLREDUCE = 0,
    DFCCL_MSCCL_COLL_ALLGATHER,
    DFCCL_MSCCL_COLL_REDUCESCATTER,
    DFCCL_MSCCL_COLL_ALLTOALL,
    DFCCL_MSCCL_COLL_REDUCE,
    DFCCL_MSCCL_COLL_BROADCAST,
    DFCCL_MSCCL_COLL_GATHER,
    DFCCL_MSCCL_COLL_SCATTER,
    DFCCL_MSCCL_COLL_ALLTOALLV,
    DFCCL_MSCCL_COLL_SEND,
    DFCCL_MSCCL_COLL_RECV,
    DFCCL_MSCCL_COLL_CUSTOM, /* older MSCCL: a pattern of its own (AllToNext) */
    DFCCL_MSCCL_NCOLLS
} dfccl_msccl_coll_t;

typedef struct {
    uint8_t type;   /* dfccl_msccl_type_t */
    uint8_t srcbuf; /* dfccl_msccl_buf_t */
    uint8_t dstbuf;
    uint8_t hasdep; /* another thread block waits for this step */
    int32_t srcoff; /* in chunks */
    int32_t dstoff;
    int32_t cnt;    /* chunks */
    int32_t depid;  /* thread block of this rank to wait for, or -1 */
    int32_t deps;   /* its step to wait for, or -1 */
    int32_t line;   /* in the file */
} dfccl_msccl_step_t;

typedef struct {
    int32_t             send; /* peer rank, or -1 */
    int32_t             recv;
    int32_t             chan; /* -1 in older files for a block that neither sends nor
                               * receives */
    int32_t             nsteps;
    int32_t             line;
    dfccl_msccl_step_t *steps;
} dfccl_msccl_tb_t;

typedef struct {
    int32_t           chunks[3]; /* i_chunks, o_chunks, s_chunks */
    int32_t           ntbs;
    int32_t           line;
    dfccl_msccl_tb_t *tbs; /* by id */
} dfccl_msccl_gpu_t;

typedef struct dfccl_msccl_prog {
    char               file[256];
    char               name[128];
    int32_t            coll;  /* dfccl_msccl_coll_t */
    int32_t            proto; /* dfccl_msccl_proto_t */
    int32_t            nchannels;
    int32_t            nchunksperloop;
    int32_t            ngpus;
    int32_t            inplace;
    int32_t            outofplace;
    uint64_t           min_bytes;
    uint64_t           max_bytes; /* UINT64_MAX: no bound (maxBytes 0 or none) */
    dfccl_msccl_gpu_t *gpus;      /* by id */
} dfccl_msccl_prog_t;

/* Parse `len` bytes of XML text, named `file` in messages. */
int dfccl_msccl_parse(const char *file, const char *text, size_t len, dfccl_msccl_prog_t **prog_p,
                      char *err, size_t errlen);
/* Read and parse the file at `path`. */
int dfccl_msccl_load(const char *path, dfccl_msccl_prog_t **prog_p, char *err, size_t errlen);
void dfccl_msccl_free(dfccl_msccl_prog_t *p);

/* Names, as the files write them. */
const char *dfccl_msccl_coll_name(int coll);
const char *dfccl_msccl_type_name(int type);

#endif /* DFCCL_RUNTIME_MSCCL_H_ */
