/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every MPI collective that test_coll does not cover, under mpirun:
 * alltoall and alltoallv (dfccl's; uneven and zero counts, five alltoallvs
 * in flight at once, negative displacements), and, through the components
 * below dfccl, alltoallw, allgatherv, gather, gatherv, scatter, scatterv, scan, exscan,
 * barrier, MPI_Reduce_local, and neighbor_allgather(v) and
 * neighbor_alltoall(v,w) on a cartesian and on a distributed-graph
 * communicator. Each is run blocking, nonblocking and persistent
 * (MPIX_*_init, started twice with new data), in place where MPI allows it,
 * on MPI_INT, MPI_DOUBLE and a derived type with gaps (two ints of four:
 * whatever a receive leaves in the gaps must stay there), and every element
 * of every receive buffer is checked, as is every byte between blocks
 * (displacements leave holes). A last part has native and staged
 * collectives in flight together on two communicators, started in a
 * different order on even and odd ranks.
 *
 * With --device (a CUDA build) the buffers are device memory on the GPU
 * chosen after MPI_Init from the node-local rank: the component runs them
 * on dfccl or stages them through host memory around the components below
 * it. Without it they
 * are host memory (the host backend in CI). A failure names the collective,
 * form, type, count and rank; the exit status is 0 only if every check
 * passed on every rank.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "test_util.h"

#define MAX_RANKS 16     /* val() keeps ranks and block tags below 16 */
#define HOLE 0xa5        /* every byte of a receive buffer that no block covers */
#define JUNK 77777777    /* the gaps of a derived-type element in a send buffer */
#define PLACEHOLDER (-5) /* what an in-place buffer holds where a block arrives */

typedef enum { T_INT, T_DOUBLE, T_VEC, NTYPES } tkind_t;

typedef struct {
    tkind_t      kind;
    const char  *name;
    MPI_Datatype dt;
    size_t       extent; /* bytes per element */
} dtype_t;

static dtype_t types[NTYPES];
static int rank, size, checks, hole_int;

/* One call being checked: what a failure message names. */
typedef struct {
    const char    *coll;
    const char    *tname;
    int            form, ip, round, bad;
    size_t         k;
    MPI_Request    req;
} run_t;

static run_t run_new(const char *coll, const char *tname, size_t k, int form, int ip)
{
    run_t c = {coll, tname, form, ip, 0, 0, k, MPI_REQUEST_NULL};
    return c;
}

static void fail(run_t *c, const char *fmt, ...)
{
    char what[160];
    va_list ap;

    c->bad = 1;
    snprintf(what, sizeof(what), "%s %s%s %s count %zu%s", c->coll, form_names[c->form],
             c->ip ? " in-place" : "", c->tname, c->k, c->round ? " (second start)" : "");
    va_start(ap, fmt);
    test_vfail(what, fmt, ap);
    va_end(ap);
}

static void call_rc(run_t *c, int rc)
{
    char s[MPI_MAX_ERROR_STRING];

    checks++;
    if (rc != MPI_SUCCESS) {
        fail(c, "the call returned an error: %s", test_errstr(rc, s));
    }
}

/*
 * Run a collective in the run's form: the blocking call; the nonblocking
 * call and MPI_Wait; or (persistent) the init call on the first round only,
 * then MPI_Start and MPI_Wait on every round. The nonblocking and init
 * calls write c->req.
 */
#define COLL(_c, _blocking, _nonblocking, _persistent)                                 \
    do {                                                                               \
        int _rc;                                                                       \
        if ((_c)->form == BLOCKING) {                                                  \
            _rc = (_blocking);                                                         \
        } else if ((_c)->form == NONBLOCKING) {                                        \
            _rc = (_nonblocking);                                                      \
            if (_rc == MPI_SUCCESS) {                                                  \
                _rc = MPI_Wait(&(_c)->req, MPI_STATUS_IGNORE);                         \
            }                                                                          \
        } else {                                                                       \
            _rc = MPI_SUCCESS;                                                         \
            if ((_c)->req == MPI_REQUEST_NULL) {                                       \
                _rc = (_persistent);                                                   \
            }                                                                          \
            if (_rc == MPI_SUCCESS) {                                                  \
                _rc = MPI_Start(&(_c)->req);                                           \
            }                                                                          \
            if (_rc == MPI_SUCCESS) {                                                  \
                _rc = MPI_Wait(&(_c)->req, MPI_STATUS_IGNORE);                         \
            }                                                                          \
        }                                                                              \
        call_rc((_c), _rc);                                                            \
    } while (0)

/* persistent runs start twice, with new data the second time */
#define ROUNDS(_c) for ((_c)->round = 0; (_c)->round < ((_c)->form == PERSISTENT ? 2 : 1); \
                        (_c)->round++)

static void run_end(run_t *c)
{
    if (c->req != MPI_REQUEST_NULL) {
        MPI_Request_free(&c->req);
    }
}

/* ---- buffers: a host image, and what the collective gets -------------- */

typedef struct {
    char  *h;     /* host image: filled and checked here */
    void  *d;     /* the buffer passed to MPI: device memory with --device */
    size_t bytes;
} buf_t;

static void buf_init(buf_t *b, size_t bytes)
{
    b->bytes = bytes < 64 ? 64 : bytes;
    b->h     = malloc(b->bytes);
    if (b->h == NULL) {
        fprintf(stderr, "rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(b->h, HOLE, b->bytes);
    b->d = test_device ? test_buf_new(b->bytes) : b->h;
}

/* the host image into the buffer, complete before the MPI call */
static void buf_push(buf_t *b)
{
    if (b->d != b->h) {
        test_put(b->d, b->h, b->bytes);
    }
}

static void buf_pull(buf_t *b)
{
    if (b->d != b->h) {
        test_get(b->h, b->d, b->bytes);
    }
}

static void buf_fini(buf_t *b)
{
    if (b->d != b->h) {
        test_buf_free(b->d);
    }
    free(b->h);
}

/* ---- elements ----------------------------------------------------------- */

/* Element i of the block that rank src sends with tag blk (its destination
 * or block index) in round `round`: distinct for every (round, src, blk, i)
 * below 16 ranks, 16 tags and 2^20 elements, and exact in every type. */
static long val(int round, int src, int blk, size_t i)
{
    return ((long)(round * MAX_RANKS + src) * MAX_RANKS + blk) * (1L << 20) + (long)i;
}

/* A scan's input: small enough that 16 ranks' sums fit in an int. */
static long sval(int round, int src, size_t i)
{
    return (long)(round * MAX_RANKS + src) * 4096 + (long)(i % 4096);
}

/* Write element e as v; a derived element's gaps get JUNK. */
static void el_put(const dtype_t *t, void *buf, size_t e, long v)
{
    switch (t->kind) {
    case T_INT:
        ((int *)buf)[e] = (int)v;
        break;
    case T_DOUBLE:
        ((double *)buf)[e] = (double)v + 0.5;
        break;
    default: {
        int *p = (int *)buf + 4 * e;
        p[0]   = (int)v;
        p[1]   = JUNK;
        p[2]   = (int)(-v - 1);
        p[3]   = JUNK;
        break;
    }
    }
}

/* Element e is v; the gaps of a derived element hold what was there
 * before the call: JUNK in place (the buffer was written with el_put),
 * HOLE bytes otherwise. */
static int el_is(const dtype_t *t, const void *buf, size_t e, long v, int ip)
{
    switch (t->kind) {
    case T_INT:
        return ((const int *)buf)[e] == (int)v;
    case T_DOUBLE:
        return ((const double *)buf)[e] == (double)v + 0.5;
    default: {
        const int *p = (const int *)buf + 4 * e;
        int gap      = ip ? JUNK : hole_int;
        return p[0] == (int)v && p[2] == (int)(-v - 1) && p[1] == gap && p[3] == gap;
    }
    }
}

static void el_str(const dtype_t *t, const void *buf, size_t e, char *out, size_t len)
{
    switch (t->kind) {
    case T_INT:
        snprintf(out, len, "%d", ((const int *)buf)[e]);
        break;
    case T_DOUBLE:
        snprintf(out, len, "%.1f", ((const double *)buf)[e]);
        break;
    default: {
        const int *p = (const int *)buf + 4 * e;
        snprintf(out, len, "{%d, %d} (gaps %d, %d)", p[0], p[2], p[1], p[3]);
        break;
    }
    }
}

/* A value as an element of t, for messages. */
static void want_str(const dtype_t *t, long v, char *out, size_t len)
{
    switch (t->kind) {
    case T_INT:
        snprintf(out, len, "%ld", v);
        break;
    case T_DOUBLE:
        snprintf(out, len, "%.1f", (double)v + 0.5);
        break;
    default:
        snprintf(out, len, "{%ld, %ld}", v, -v - 1);
        break;
    }
}

/* The `count` elements of type t at byte `off` of a host image are
 * val(round, src, blk, i); their bytes are marked in `covered`. */
static void expect_block(run_t *c, const char *img, char *covered, size_t off, const dtype_t *t,
                         int count, int src, int blk, const char *what)
{
    char got[96], want[64];

    for (int i = 0; i < count && !c->bad; i++) {
        long v = val(c->round, src, blk, i);
        if (!el_is(t, img + off, i, v, c->ip)) {
            el_str(t, img + off, i, got, sizeof(got));
            want_str(t, v, want, sizeof(want));
            fail(c, "%s %d: element %d is %s, expected %s", what, src, i, got, want);
        }
    }
    if (covered != NULL) {
        memset(covered + off, 1, (size_t)count * t->extent);
    }
}

/* Every byte that no block covers still holds HOLE. */
static void expect_holes(run_t *c, const char *img, const char *covered, size_t bytes)
{
    for (size_t b = 0; b < bytes && !c->bad; b++) {
        if (!covered[b] && (unsigned char)img[b] != HOLE) {
            fail(c, "byte %zu, outside every block, was overwritten", b);
        }
    }
}

static char *covered_new(const buf_t *b)
{
    char *cv = calloc(b->bytes, 1);
    if (cv == NULL) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return cv;
}

/* Counts: uneven between pairs, a third of them zero. cnt_sym is the same
 * both ways (in-place alltoallv/w needs it). */
static int cnt(int src, int dst, size_t k)
{
    if (src < 0 || dst < 0) {
        return (int)k; /* to or from MPI_PROC_NULL: nothing moves */
    }
    return (int)(((src + 2 * dst) % 3) * k);
}

static int cnt_sym(int a, int b, size_t k)
{
    return (int)(((a + b) % 3) * k);
}

/* a rank's share in the v-collectives with one count per rank */
static int cnt_of(int r, size_t k)
{
    if (r < 0) {
        return (int)k;
    }
    return (int)(((r + 1) % 3) * k);
}

/* the type of the pair's data in the w-collectives (same both ways) */
static const dtype_t *type_of(int a, int b)
{
    if (a < 0 || b < 0) {
        return &types[T_INT];
    }
    return &types[(a + b) % NTYPES];
}

/*
 * Displacements (in elements) for n blocks of cnt[] elements: laid out in
 * reverse order, with a one-element hole before and after each block, so
 * that a wrong displacement or a write past a block shows. Returns the
 * elements the buffer needs.
 */
static size_t layout(int n, const int *counts, int *displs)
{
    size_t at = 1;

    for (int p = n - 1; p >= 0; p--) {
        displs[p] = (int)at;
        at += (size_t)counts[p] + 1;
    }
    return at;
}

/* The same in bytes for blocks of different types, each block aligned to
 * 8 bytes, with 16 bytes of hole after each. */
static size_t layout_bytes(int n, const int *counts, const dtype_t *const *ts, MPI_Aint *displs)
{
    size_t at = 16;

    for (int p = n - 1; p >= 0; p--) {
        at        = (at + 7) & ~(size_t)7;
        displs[p] = (MPI_Aint)at;
        at += (size_t)counts[p] * ts[p]->extent + 16;
    }
    return at;
}

/* ---- the calls that move blocks: one description, one runner ------------ */

/* How the blocks of a buffer lie: back to back (the plain collectives),
 * layout() (the v-collectives: displacements in elements) or
 * layout_bytes() (the w-collectives: a type per block, displacements in
 * bytes). */
enum { PACKED, HOLES, BYTES };

/*
 * The blocks of one buffer of a call: block j is count[j] elements of
 * type t[j] at byte off[j] (disp[j] for MPI: in elements, or bytes for the
 * w-collectives), element i being val(round, src[j], blk[j], i). src[j] < 0
 * (MPI_PROC_NULL) means no data: nothing to check, and in what a rank
 * writes before a call, placeholders.
 */
typedef struct {
    int            n;
    int            count[MAX_RANKS], disp[MAX_RANKS], src[MAX_RANKS], blk[MAX_RANKS];
    MPI_Aint       off[MAX_RANKS];
    const dtype_t *t[MAX_RANKS];
    MPI_Datatype   dt[MAX_RANKS];
    size_t         bytes;
} side_t;

static void side_add(side_t *sd, int count, const dtype_t *t, int src, int blk)
{
    sd->count[sd->n] = count;
    sd->t[sd->n]     = t;
    sd->dt[sd->n]    = t->dt;
    sd->src[sd->n]   = src;
    sd->blk[sd->n]   = blk;
    sd->n++;
}

static void side_layout(side_t *sd, int how)
{
    size_t at = 0, extent = sd->n > 0 ? sd->t[0]->extent : 0;

    if (how == BYTES) {
        sd->bytes = layout_bytes(sd->n, sd->count, sd->t, sd->off);
        for (int j = 0; j < sd->n; j++) {
            sd->disp[j] = (int)sd->off[j];
        }
        return;
    }
    if (how == HOLES) {
        at = layout(sd->n, sd->count, sd->disp);
    } else {
        for (int j = 0; j < sd->n; j++) {
            sd->disp[j] = (int)at;
            at += (size_t)sd->count[j];
        }
    }
    for (int j = 0; j < sd->n; j++) {
        sd->off[j] = (MPI_Aint)((size_t)sd->disp[j] * extent);
    }
    sd->bytes = at * extent;
}

/* The blocks of sd for round `round` into a host image. */
static void side_write(const side_t *sd, char *img, int round)
{
    for (int j = 0; j < sd->n; j++) {
        for (int i = 0; i < sd->count[j]; i++) {
            el_put(sd->t[j], img + sd->off[j], i,
                   sd->src[j] >= 0 ? val(round, sd->src[j], sd->blk[j], i) : PLACEHOLDER);
        }
    }
}

enum { CHECK_RECV, CHECK_SEND, CHECK_NONE };

typedef struct xfer xfer_t;
struct xfer {
    run_t          c;
    MPI_Comm       comm;
    int            root;
    const dtype_t *t;     /* the type of every block; NULL for the w-collectives */
    side_t         snd;   /* what MPI gets as the send ... */
    side_t         rcv;   /* ... and the receive buffer */
    side_t         put;   /* what this rank writes before each call, */
    int            put_r; /* into the receive buffer (in place) or the send buffer */
    int            reset_s, junk_s; /* the send buffer to HOLE bytes, or -99s, first */
    int            check; /* CHECK_RECV: rcv; CHECK_SEND: snd, in the send buffer */
    const char    *what;  /* a block, in messages */
    void (*call)(xfer_t *x);
    const void    *forms; /* the forms call uses, if it takes a table */
    int            ip_recv; /* in place is the receive argument (scatter) */
    buf_t          s, r;
    const void    *sb;    /* what MPI gets: s.d, r.d, or MPI_IN_PLACE */
    void          *rb;
};

static void xfer_init(xfer_t *x, const char *coll, const dtype_t *t, size_t k, int form, int ip)
{
    memset(x, 0, sizeof(*x));
    x->c    = run_new(coll, t != NULL ? t->name : "mixed types", k, form, ip);
    x->comm = MPI_COMM_WORLD;
    x->t    = t;
    x->what = "block from rank";
}

/* Every round: write the blocks, run the call, check every block that
 * arrived and every byte between them. */
static void xfer_run(xfer_t *x)
{
    const side_t *chk = x->check == CHECK_SEND ? &x->snd : &x->rcv;
    buf_t *cb         = x->check == CHECK_SEND ? &x->s : &x->r;
    char *cv;

    buf_init(&x->s, x->snd.bytes);
    buf_init(&x->r, x->rcv.bytes);
    cv = covered_new(cb);
    ROUNDS(&x->c)
    {
        memset(x->r.h, HOLE, x->r.bytes);
        if (x->reset_s) {
            memset(x->s.h, HOLE, x->s.bytes);
        }
        for (size_t e = 0; x->junk_s && e < x->snd.bytes / x->t->extent; e++) {
            el_put(x->t, x->s.h, e, -99); /* the holes of the send buffer: never sent */
        }
        side_write(&x->put, x->put_r ? x->r.h : x->s.h, x->c.round);
        buf_push(&x->s);
        buf_push(&x->r);
        x->sb = x->c.ip && !x->ip_recv ? MPI_IN_PLACE : x->s.d;
        x->rb = x->c.ip && x->ip_recv ? MPI_IN_PLACE : x->r.d;
        x->call(x);
        buf_pull(cb);
        if (x->check == CHECK_NONE) {
            continue;
        }
        memset(cv, 0, cb->bytes);
        for (int j = 0; j < chk->n; j++) {
            if (chk->src[j] >= 0) {
                expect_block(&x->c, cb->h, cv, (size_t)chk->off[j], chk->t[j], chk->count[j],
                             chk->src[j], chk->blk[j], x->what);
            }
        }
        expect_holes(&x->c, cb->h, cv, cb->bytes);
    }
    run_end(&x->c);
    free(cv);
    buf_fini(&x->s);
    buf_fini(&x->r);
}

/*
 * The calls, in x->c's form, on x->sb and x->rb. Collectives that take the
 * same arguments share one caller, given a table of their three forms
 * (blocking, nonblocking, persistent init).
 */
#define FORMS(_name, ...)                                                                  \
    typedef struct {                                                                       \
        int (*b)(__VA_ARGS__);                                                             \
        int (*nb)(__VA_ARGS__, MPI_Request *);                                             \
        int (*p)(__VA_ARGS__, MPI_Info, MPI_Request *);                                    \
    } _name

/* k elements to and from every peer */
FORMS(plain_t, const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);
static const plain_t alltoall = {MPI_Alltoall, MPI_Ialltoall, MPIX_Alltoall_init};
static const plain_t nbr_allgather = {MPI_Neighbor_allgather, MPI_Ineighbor_allgather,
                                      MPIX_Neighbor_allgather_init};
static const plain_t nbr_alltoall = {MPI_Neighbor_alltoall, MPI_Ineighbor_alltoall,
                                     MPIX_Neighbor_alltoall_init};

static void call_plain(xfer_t *x)
{
    const plain_t *f = x->forms;
    MPI_Datatype t   = x->t->dt;
    int k            = (int)x->c.k;
    COLL(&x->c, f->b(x->sb, k, t, x->rb, k, t, x->comm),
         f->nb(x->sb, k, t, x->rb, k, t, x->comm, &x->c.req),
         f->p(x->sb, k, t, x->rb, k, t, x->comm, MPI_INFO_NULL, &x->c.req));
}

/* a count and displacement per peer both ways */
FORMS(v_t, const void *, const int *, const int *, MPI_Datatype, void *, const int *,
      const int *, MPI_Datatype, MPI_Comm);
static const v_t alltoallv     = {MPI_Alltoallv, MPI_Ialltoallv, MPIX_Alltoallv_init};
static const v_t nbr_alltoallv = {MPI_Neighbor_alltoallv, MPI_Ineighbor_alltoallv,
                                  MPIX_Neighbor_alltoallv_init};

static void call_v(xfer_t *x)
{
    const v_t *f    = x->forms;
    const side_t *s = &x->snd, *r = &x->rcv;
    MPI_Datatype t  = x->t->dt;
    COLL(&x->c, f->b(x->sb, s->count, s->disp, t, x->rb, r->count, r->disp, t, x->comm),
         f->nb(x->sb, s->count, s->disp, t, x->rb, r->count, r->disp, t, x->comm, &x->c.req),
         f->p(x->sb, s->count, s->disp, t, x->rb, r->count, r->disp, t, x->comm, MPI_INFO_NULL,
              &x->c.req));
}

/* this rank's block to every peer, a count and displacement per peer back */
FORMS(gatherv_t, const void *, int, MPI_Datatype, void *, const int *, const int *,
      MPI_Datatype, MPI_Comm);
static const gatherv_t allgatherv     = {MPI_Allgatherv, MPI_Iallgatherv, MPIX_Allgatherv_init};
static const gatherv_t nbr_allgatherv = {MPI_Neighbor_allgatherv, MPI_Ineighbor_allgatherv,
                                         MPIX_Neighbor_allgatherv_init};

static void call_gatherv_all(xfer_t *x)
{
    const gatherv_t *f = x->forms;
    const side_t *r    = &x->rcv;
    MPI_Datatype t     = x->t->dt;
    int mine           = x->snd.count[0];
    COLL(&x->c, f->b(x->sb, mine, t, x->rb, r->count, r->disp, t, x->comm),
         f->nb(x->sb, mine, t, x->rb, r->count, r->disp, t, x->comm, &x->c.req),
         f->p(x->sb, mine, t, x->rb, r->count, r->disp, t, x->comm, MPI_INFO_NULL, &x->c.req));
}

/* k elements to or from the root */
FORMS(rooted_t, const void *, int, MPI_Datatype, void *, int, MPI_Datatype, int, MPI_Comm);
static const rooted_t gather  = {MPI_Gather, MPI_Igather, MPIX_Gather_init};
static const rooted_t scatter = {MPI_Scatter, MPI_Iscatter, MPIX_Scatter_init};

static void call_rooted(xfer_t *x)
{
    const rooted_t *f = x->forms;
    MPI_Datatype t    = x->t->dt;
    int k             = (int)x->c.k;
    COLL(&x->c, f->b(x->sb, k, t, x->rb, k, t, x->root, x->comm),
         f->nb(x->sb, k, t, x->rb, k, t, x->root, x->comm, &x->c.req),
         f->p(x->sb, k, t, x->rb, k, t, x->root, x->comm, MPI_INFO_NULL, &x->c.req));
}

static void call_gatherv(xfer_t *x)
{
    const side_t *r = &x->rcv;
    MPI_Datatype t  = x->t->dt;
    int mine        = x->snd.count[0];
    COLL(&x->c, MPI_Gatherv(x->sb, mine, t, x->rb, r->count, r->disp, t, x->root, x->comm),
         MPI_Igatherv(x->sb, mine, t, x->rb, r->count, r->disp, t, x->root, x->comm,
                      &x->c.req),
         MPIX_Gatherv_init(x->sb, mine, t, x->rb, r->count, r->disp, t, x->root, x->comm,
                           MPI_INFO_NULL, &x->c.req));
}

static void call_scatterv(xfer_t *x)
{
    const side_t *s = &x->snd;
    MPI_Datatype t  = x->t->dt;
    int mine        = x->rcv.count[0];
    COLL(&x->c, MPI_Scatterv(x->sb, s->count, s->disp, t, x->rb, mine, t, x->root, x->comm),
         MPI_Iscatterv(x->sb, s->count, s->disp, t, x->rb, mine, t, x->root, x->comm,
                       &x->c.req),
         MPIX_Scatterv_init(x->sb, s->count, s->disp, t, x->rb, mine, t, x->root, x->comm,
                            MPI_INFO_NULL, &x->c.req));
}

/* the w-collectives: displacements in bytes, int or MPI_Aint */
static void call_alltoallw(xfer_t *x)
{
    const side_t *s = &x->snd, *r = &x->rcv;
    COLL(&x->c,
         MPI_Alltoallw(x->sb, s->count, s->disp, s->dt, x->rb, r->count, r->disp, r->dt, x->comm),
         MPI_Ialltoallw(x->sb, s->count, s->disp, s->dt, x->rb, r->count, r->disp, r->dt,
                        x->comm, &x->c.req),
         MPIX_Alltoallw_init(x->sb, s->count, s->disp, s->dt, x->rb, r->count, r->disp, r->dt,
                             x->comm, MPI_INFO_NULL, &x->c.req));
}

static void call_nbr_alltoallw(xfer_t *x)
{
    const side_t *s = &x->snd, *r = &x->rcv;
    COLL(&x->c,
         MPI_Neighbor_alltoallw(x->sb, s->count, s->off, s->dt, x->rb, r->count, r->off, r->dt,
                                x->comm),
         MPI_Ineighbor_alltoallw(x->sb, s->count, s->off, s->dt, x->rb, r->count, r->off,
                                 r->dt, x->comm, &x->c.req),
         MPIX_Neighbor_alltoallw_init(x->sb, s->count, s->off, s->dt, x->rb, r->count, r->off,
                                      r->dt, x->comm, MPI_INFO_NULL, &x->c.req));
}

/* ---- alltoall(v,w), allgatherv, gather(v), scatter(v) ------------------- */

/* alltoall (how PACKED), alltoallv (HOLES: uneven counts, a third of them
 * zero) and alltoallw (BYTES, t NULL: each pair's block of its own type).
 * In place the counts and types are the same both ways, so the blocks a
 * rank sends lie where the ones it receives will. */
static void t_alltoall(const dtype_t *t, size_t k, int form, int ip, int how)
{
    static const char *const names[] = {"alltoall", "alltoallv", "alltoallw"};
    static void (*const calls[])(xfer_t *) = {call_plain, call_v, call_alltoallw};
    static const void *const forms[]       = {&alltoall, &alltoallv, NULL};
    xfer_t x;

    xfer_init(&x, names[how], t, k, form, ip);
    for (int p = 0; p < size; p++) {
        int sc = how == PACKED ? (int)k : ip ? cnt_sym(rank, p, k) : cnt(rank, p, k);
        int rc = how == PACKED ? (int)k : ip ? cnt_sym(p, rank, k) : cnt(p, rank, k);
        side_add(&x.snd, sc, how == BYTES ? type_of(rank, p) : t, rank, p);
        side_add(&x.rcv, rc, how == BYTES ? type_of(p, rank) : t, p, rank);
    }
    side_layout(&x.snd, how);
    side_layout(&x.rcv, how);
    x.put    = x.snd;
    x.put_r  = ip;
    x.junk_s = how == HOLES;
    x.call   = calls[how];
    x.forms  = forms[how];
    xfer_run(&x);
}

/* gather (v = 0: k elements from every rank) and gatherv (v = 1) to root,
 * or with root -1 allgatherv (v = 1) */
static void t_gather(const dtype_t *t, size_t k, int form, int ip, int root, int v)
{
    int all = root < 0, tag = all ? 0 : root;
    xfer_t x;

    xfer_init(&x, all ? "allgatherv" : v ? "gatherv" : "gather", t, k, form,
              ip && (all || rank == root));
    x.root = root;
    for (int p = 0; p < size; p++) {
        side_add(&x.rcv, v ? cnt_of(p, k) : (int)k, t, p, tag);
    }
    side_add(&x.snd, x.rcv.count[rank], t, rank, tag);
    side_layout(&x.snd, PACKED);
    side_layout(&x.rcv, v ? HOLES : PACKED);
    x.put   = x.c.ip ? x.rcv : x.snd;
    x.put_r = x.c.ip;
    for (int p = 0; x.c.ip && p < size; p++) {
        if (p != rank) { /* the others' blocks arrive over placeholders */
            x.put.src[p] = -1;
        }
    }
    x.check = all || rank == root ? CHECK_RECV : CHECK_NONE;
    x.call  = all ? call_gatherv_all : v ? call_gatherv : call_rooted;
    x.forms = all ? (const void *)&allgatherv : &gather;
    xfer_run(&x);
}

/* scatter (v = 0) and scatterv (v = 1) from root */
static void t_scatter(const dtype_t *t, size_t k, int form, int ip, int root, int v)
{
    xfer_t x;

    xfer_init(&x, v ? "scatterv" : "scatter", t, k, form, ip && rank == root);
    x.root = root;
    for (int p = 0; p < size; p++) {
        side_add(&x.snd, v ? cnt_of(p, k) : (int)k, t, root, p);
    }
    side_add(&x.rcv, x.snd.count[rank], t, root, rank);
    side_layout(&x.snd, v ? HOLES : PACKED);
    side_layout(&x.rcv, PACKED);
    if (rank == root) {
        x.put = x.snd;
    }
    x.reset_s = 1;
    /* in place, the root's own block stays where it was, the rest untouched */
    x.check = x.c.ip ? CHECK_SEND : CHECK_RECV;
    x.what  = x.c.ip ? "the root's block for rank" : "block from root";
    x.call    = v ? call_scatterv : call_rooted;
    x.forms   = &scatter;
    x.ip_recv = 1;
    xfer_run(&x);
}

/* ---- scan, exscan, reduce_local ----------------------------------------- */

static const char *const op_names[] = {"sum", "max"};

static double num(const dtype_t *t, long v)
{
    return t->kind == T_DOUBLE ? (double)v + 0.5 : (double)v;
}

static double get_num(const dtype_t *t, const void *buf, size_t e)
{
    return t->kind == T_DOUBLE ? ((const double *)buf)[e] : ((const int *)buf)[e];
}

static void t_scan(const dtype_t *t, int op, size_t k, int form, int ip, int ex)
{
    char name[32];
    MPI_Op mop = op ? MPI_MAX : MPI_SUM;
    buf_t s, r;

    snprintf(name, sizeof(name), "%s %s", ex ? "exscan" : "scan", op_names[op]);
    run_t c = run_new(name, t->name, k, form, ip);
    buf_init(&s, k * t->extent);
    buf_init(&r, k * t->extent);
    ROUNDS(&c)
    {
        for (size_t i = 0; i < k; i++) {
            el_put(t, ip ? r.h : s.h, i, sval(c.round, rank, i));
            if (!ip) {
                el_put(t, r.h, i, PLACEHOLDER);
            }
        }
        buf_push(&s);
        buf_push(&r);
        const void *sb = ip ? MPI_IN_PLACE : s.d;
        int kk = (int)k;
        if (ex) {
            COLL(&c, MPI_Exscan(sb, r.d, kk, t->dt, mop, MPI_COMM_WORLD),
                 MPI_Iexscan(sb, r.d, kk, t->dt, mop, MPI_COMM_WORLD, &c.req),
                 MPIX_Exscan_init(sb, r.d, kk, t->dt, mop, MPI_COMM_WORLD, MPI_INFO_NULL,
                                  &c.req));
        } else {
            COLL(&c, MPI_Scan(sb, r.d, kk, t->dt, mop, MPI_COMM_WORLD),
                 MPI_Iscan(sb, r.d, kk, t->dt, mop, MPI_COMM_WORLD, &c.req),
                 MPIX_Scan_init(sb, r.d, kk, t->dt, mop, MPI_COMM_WORLD, MPI_INFO_NULL,
                                &c.req));
        }
        buf_pull(&r);
        /* exscan leaves rank 0's result undefined */
        for (size_t i = 0; i < k && !c.bad && !(ex && rank == 0); i++) {
            int last    = ex ? rank - 1 : rank;
            double want = num(t, sval(c.round, 0, i));
            for (int p = 1; p <= last; p++) {
                double x = num(t, sval(c.round, p, i));
                want     = op ? (x > want ? x : want) : want + x;
            }
            if (get_num(t, r.h, i) != want) {
                fail(&c, "element %zu is %.1f, expected %.1f", i, get_num(t, r.h, i), want);
            }
        }
    }
    run_end(&c);
    buf_fini(&s);
    buf_fini(&r);
}

/* inoutbuf[i] = 2 * inbuf[i] + inoutbuf[i]: shows which argument is which */
static void twice_plus(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    for (int i = 0; i < *len; i++) {
        ((int *)inout)[i] += 2 * ((const int *)in)[i];
    }
    (void)dt;
}

static void t_reduce_local(const dtype_t *t, int op, size_t k)
{
    static const char *const names[] = {"reduce_local sum", "reduce_local max",
                                        "reduce_local user op"};
    run_t c = run_new(names[op], t->name, k, BLOCKING, 0);
    MPI_Op uop = MPI_OP_NULL, mop = op == 0 ? MPI_SUM : MPI_MAX;
    buf_t in, io;

    if (op == 2) {
        MPI_Op_create(twice_plus, 0, &uop);
        mop = uop;
    }
    buf_init(&in, k * t->extent);
    buf_init(&io, k * t->extent);
    for (size_t i = 0; i < k; i++) {
        /* the larger value alternates between the two buffers */
        el_put(t, in.h, i, sval(0, 1 + (int)(i % 2), i));
        el_put(t, io.h, i, sval(0, 2 - (int)(i % 2), i));
    }
    buf_push(&in);
    buf_push(&io);
    call_rc(&c, MPI_Reduce_local(in.d, io.d, (int)k, t->dt, mop));
    buf_pull(&io);
    buf_pull(&in);
    for (size_t i = 0; i < k && !c.bad; i++) {
        double a = num(t, sval(0, 1 + (int)(i % 2), i)), b = num(t, sval(0, 2 - (int)(i % 2), i));
        double want = op == 0 ? a + b : op == 1 ? (a > b ? a : b) : 2 * a + b;
        if (get_num(t, io.h, i) != want) {
            fail(&c, "element %zu is %.1f, expected %.1f", i, get_num(t, io.h, i), want);
        }
        if (get_num(t, in.h, i) != a) {
            fail(&c, "the input buffer changed at element %zu", i);
        }
    }
    if (op == 2) {
        MPI_Op_free(&uop);
    }
    buf_fini(&in);
    buf_fini(&io);
}

static void t_barrier(int form)
{
    run_t c = run_new("barrier", "-", 0, form, 0);

    ROUNDS(&c)
    {
        COLL(&c, MPI_Barrier(MPI_COMM_WORLD), MPI_Ibarrier(MPI_COMM_WORLD, &c.req),
             MPIX_Barrier_init(MPI_COMM_WORLD, MPI_INFO_NULL, &c.req));
    }
    run_end(&c);
}

/* ---- neighbor collectives ----------------------------------------------- */

#define MAX_NBRS 8

typedef struct {
    const char *name;
    MPI_Comm    comm;
    int         indeg, outdeg;
    int         srcs[MAX_NBRS], dsts[MAX_NBRS];
    int         sblk[MAX_NBRS]; /* for in-neighbor j: its index of this rank's block */
} topo_t;

/* A 2-d cartesian grid (MPI_Dims_create), periodic in the dimensions of
 * at least 3 ranks (so that no rank is both neighbors of another in one
 * dimension), with MPI_PROC_NULL neighbors at the other edges. */
static void topo_cart(topo_t *tp)
{
    int dims[2] = {0, 0}, periods[2];

    MPI_Dims_create(size, 2, dims);
    periods[0] = dims[0] >= 3;
    periods[1] = dims[1] >= 3;
    tp->name = "cartesian";
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &tp->comm);
    MPI_Comm_set_errhandler(tp->comm, MPI_ERRORS_RETURN);
    tp->indeg = tp->outdeg = 4;
    for (int d = 0; d < 2; d++) {
        int lo, hi;
        MPI_Cart_shift(tp->comm, d, 1, &lo, &hi);
        tp->srcs[2 * d] = tp->dsts[2 * d] = lo;
        tp->srcs[2 * d + 1] = tp->dsts[2 * d + 1] = hi;
        /* the lower neighbor sent its upper block, the upper its lower */
        tp->sblk[2 * d]     = 2 * d + 1;
        tp->sblk[2 * d + 1] = 2 * d;
    }
}

/* A directed ring with chords: rank r sends to r+1 and r+2, receives from
 * r-1 and r-2 (r+1 only on two ranks). */
static void topo_graph(topo_t *tp)
{
    int w[MAX_NBRS];

    tp->name   = "dist-graph";
    tp->outdeg = tp->indeg = size > 2 ? 2 : 1;
    for (int j = 0; j < tp->outdeg; j++) {
        tp->dsts[j] = (rank + j + 1) % size;
        tp->srcs[j] = (rank - j - 1 + 2 * size) % size;
        tp->sblk[j] = j; /* rank r-j-1 has this rank as its j-th destination */
        w[j]        = 1;
    }
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, tp->indeg, tp->srcs, w, tp->outdeg,
                                   tp->dsts, w, MPI_INFO_NULL, 0, &tp->comm);
    MPI_Comm_set_errhandler(tp->comm, MPI_ERRORS_RETURN);
}

static void xfer_nbr(xfer_t *x, const char *coll, const topo_t *tp, const dtype_t *t, size_t k,
                     int form)
{
    static char name[64];

    snprintf(name, sizeof(name), "%s (%s)", coll, tp->name);
    xfer_init(x, name, t, k, form, 0);
    x->comm = tp->comm;
    x->what = "block from neighbor";
}

static void t_nbr_allgather(const topo_t *tp, const dtype_t *t, size_t k, int form, int v)
{
    xfer_t x;

    xfer_nbr(&x, v ? "neighbor_allgatherv" : "neighbor_allgather", tp, t, k, form);
    side_add(&x.snd, v ? cnt_of(rank, k) : (int)k, t, rank, 0);
    for (int j = 0; j < tp->indeg; j++) {
        side_add(&x.rcv, v ? cnt_of(tp->srcs[j], k) : (int)k, t, tp->srcs[j], 0);
    }
    side_layout(&x.snd, PACKED);
    side_layout(&x.rcv, v ? HOLES : PACKED);
    x.put   = x.snd;
    x.call  = v ? call_gatherv_all : call_plain;
    x.forms = v ? (const void *)&nbr_allgatherv : &nbr_allgather;
    xfer_run(&x);
}

/* neighbor_alltoall (how PACKED), neighbor_alltoallv (HOLES) and
 * neighbor_alltoallw (BYTES, t NULL) */
static void t_nbr_alltoall(const topo_t *tp, const dtype_t *t, size_t k, int form, int how)
{
    static const char *const names[] = {"neighbor_alltoall", "neighbor_alltoallv",
                                        "neighbor_alltoallw"};
    static void (*const calls[])(xfer_t *) = {call_plain, call_v, call_nbr_alltoallw};
    static const void *const forms[]       = {&nbr_alltoall, &nbr_alltoallv, NULL};
    xfer_t x;

    xfer_nbr(&x, names[how], tp, t, k, form);
    for (int j = 0; j < tp->outdeg; j++) {
        int d = tp->dsts[j];
        side_add(&x.snd, how == PACKED ? (int)k : cnt(rank, d, k),
                 how == BYTES ? type_of(rank, d) : t, rank, j);
    }
    for (int j = 0; j < tp->indeg; j++) {
        int src = tp->srcs[j];
        side_add(&x.rcv, how == PACKED ? (int)k : cnt(src, rank, k),
                 how == BYTES ? type_of(src, rank) : t, src, tp->sblk[j]);
    }
    side_layout(&x.snd, how);
    side_layout(&x.rcv, how);
    x.put   = x.snd;
    x.call  = calls[how];
    x.forms = forms[how];
    xfer_run(&x);
}

/* ---- native and staged collectives in flight together ------------------- */

/*
 * On communicator A an allreduce (dfccl's own) then an alltoall (staged);
 * on B an allgatherv (staged), an allreduce and a barrier. Every rank
 * starts each communicator's collectives in the same order, as MPI
 * requires, but even ranks start A's first and odd ranks B's, then one
 * MPI_Waitall.
 */
static void t_mixed(MPI_Comm a, MPI_Comm b, size_t k)
{
    run_t c = run_new("allreduce+alltoall | allgatherv+allreduce+barrier", "int", k,
                      NONBLOCKING, 0);
    const dtype_t *t = &types[T_INT];
    int *gc = malloc(size * sizeof(int)), *gd = malloc(size * sizeof(int));
    int mine = cnt_of(rank, k), kk = (int)k;
    MPI_Request reqs[5];
    buf_t ar1, ta_s, ta_r, ag_s, ag_r, ar2;
    size_t gn;
    char *cv;

    for (int p = 0; p < size; p++) {
        gc[p] = cnt_of(p, k);
    }
    gn = layout(size, gc, gd);
    buf_init(&ar1, k * sizeof(int));
    buf_init(&ar2, k * sizeof(int));
    buf_init(&ta_s, k * size * sizeof(int));
    buf_init(&ta_r, k * size * sizeof(int));
    buf_init(&ag_s, (size_t)mine * sizeof(int));
    buf_init(&ag_r, gn * sizeof(int));
    for (size_t i = 0; i < k; i++) {
        ((int *)ar1.h)[i] = (int)sval(0, rank, i);
        ((int *)ar2.h)[i] = (int)sval(1, rank, i);
    }
    for (int d = 0; d < size; d++) {
        for (size_t i = 0; i < k; i++) {
            el_put(t, ta_s.h, d * k + i, val(0, rank, d, i));
        }
    }
    for (int i = 0; i < mine; i++) {
        el_put(t, ag_s.h, i, val(0, rank, 0, i));
    }
    buf_push(&ar1);
    buf_push(&ar2);
    buf_push(&ta_s);
    buf_push(&ta_r);
    buf_push(&ag_s);
    buf_push(&ag_r);
    for (int half = 0; half < 2; half++) {
        if ((half == 0) == (rank % 2 == 0)) {
            call_rc(&c, MPI_Iallreduce(MPI_IN_PLACE, ar1.d, kk, MPI_INT, MPI_SUM, a, &reqs[0]));
            call_rc(&c, MPI_Ialltoall(ta_s.d, kk, MPI_INT, ta_r.d, kk, MPI_INT, a, &reqs[1]));
        } else {
            call_rc(&c, MPI_Iallgatherv(ag_s.d, mine, MPI_INT, ag_r.d, gc, gd, MPI_INT, b,
                                        &reqs[2]));
            call_rc(&c, MPI_Iallreduce(MPI_IN_PLACE, ar2.d, kk, MPI_INT, MPI_MAX, b, &reqs[3]));
            call_rc(&c, MPI_Ibarrier(b, &reqs[4]));
        }
    }
    call_rc(&c, MPI_Waitall(5, reqs, MPI_STATUSES_IGNORE));
    buf_pull(&ar1);
    buf_pull(&ar2);
    buf_pull(&ta_r);
    buf_pull(&ag_r);
    for (size_t i = 0; i < k && !c.bad; i++) {
        long sum = 0, max = 0;
        for (int p = 0; p < size; p++) {
            sum += sval(0, p, i);
            max = sval(1, p, i) > max ? sval(1, p, i) : max;
        }
        if (((int *)ar1.h)[i] != sum || ((int *)ar2.h)[i] != max) {
            fail(&c, "allreduce element %zu is %d and %d, expected %ld and %ld", i,
                 ((int *)ar1.h)[i], ((int *)ar2.h)[i], sum, max);
        }
    }
    for (int src = 0; src < size; src++) {
        expect_block(&c, ta_r.h, NULL, src * k * sizeof(int), t, kk, src, rank,
                     "alltoall block from rank");
    }
    cv = covered_new(&ag_r);
    for (int src = 0; src < size; src++) {
        expect_block(&c, ag_r.h, cv, (size_t)gd[src] * sizeof(int), t, gc[src], src, 0,
                     "allgatherv block from rank");
    }
    expect_holes(&c, ag_r.h, cv, ag_r.bytes);
    free(cv);
    buf_fini(&ar1);
    buf_fini(&ar2);
    buf_fini(&ta_s);
    buf_fini(&ta_r);
    buf_fini(&ag_s);
    buf_fini(&ag_r);
    free(gc);
    free(gd);
}

/*
 * Alltoallvs in flight together on one communicator, more than dfccl's
 * registrations per signature, with an allreduce among them: call j's
 * counts change only between ranks other than 0 (rank 0 sees the same
 * counts every time), and the receive displacements are taken from the
 * middle of the buffer, so that some are negative.
 */
#define BURST 5
static int cnt_burst(int src, int dst, int j, size_t k)
{
    return (int)(((src + 2 * dst + (src > 0 && dst > 0 ? j : 0)) % 3) * k);
}

static void t_alltoallv_burst(MPI_Comm a, size_t k)
{
    run_t c = run_new("alltoallv x5 + allreduce in flight", "int", k, NONBLOCKING, 0);
    const dtype_t *t = &types[T_INT];
    int sc[BURST][MAX_RANKS], sd[BURST][MAX_RANKS], rc[BURST][MAX_RANKS], rd[BURST][MAX_RANKS];
    int rdm[BURST][MAX_RANKS]; /* MPI reads them until the call completes */
    size_t rn[BURST];
    MPI_Request reqs[BURST + 1];
    buf_t s[BURST], r[BURST], ar;
    char *cv;

    buf_init(&ar, k * sizeof(int));
    for (size_t i = 0; i < k; i++) {
        ((int *)ar.h)[i] = (int)sval(0, rank, i);
    }
    buf_push(&ar);
    for (int j = 0; j < BURST; j++) {
        size_t sn;
        for (int p = 0; p < size; p++) {
            sc[j][p] = cnt_burst(rank, p, j, k);
            rc[j][p] = cnt_burst(p, rank, j, k);
        }
        sn    = layout(size, sc[j], sd[j]);
        rn[j] = layout(size, rc[j], rd[j]);
        buf_init(&s[j], sn * sizeof(int));
        buf_init(&r[j], rn[j] * sizeof(int));
        for (int d = 0; d < size; d++) {
            for (int i = 0; i < sc[j][d]; i++) {
                el_put(t, s[j].h, (size_t)sd[j][d] + i, val(j, rank, d, i));
            }
        }
        buf_push(&s[j]);
        buf_push(&r[j]);
    }
    for (int j = 0; j < BURST; j++) {
        int mid = (int)(rn[j] / 2);
        for (int p = 0; p < size; p++) {
            rdm[j][p] = rd[j][p] - mid;
        }
        call_rc(&c, MPI_Ialltoallv(s[j].d, sc[j], sd[j], MPI_INT,
                                   (char *)r[j].d + (size_t)mid * sizeof(int), rc[j], rdm[j],
                                   MPI_INT, a, &reqs[j]));
        if (j == 2) {
            call_rc(&c, MPI_Iallreduce(MPI_IN_PLACE, ar.d, (int)k, MPI_INT, MPI_SUM, a,
                                       &reqs[BURST]));
        }
    }
    call_rc(&c, MPI_Waitall(BURST + 1, reqs, MPI_STATUSES_IGNORE));
    buf_pull(&ar);
    for (size_t i = 0; i < k && !c.bad; i++) {
        long sum = 0;
        for (int p = 0; p < size; p++) {
            sum += sval(0, p, i);
        }
        if (((int *)ar.h)[i] != sum) {
            fail(&c, "allreduce element %zu is %d, expected %ld", i, ((int *)ar.h)[i], sum);
        }
    }
    for (int j = 0; j < BURST; j++) {
        buf_pull(&r[j]);
        cv = covered_new(&r[j]);
        c.round = j;
        for (int src = 0; src < size; src++) {
            expect_block(&c, r[j].h, cv, (size_t)rd[j][src] * sizeof(int), t, rc[j][src], src,
                         rank, "block from rank");
        }
        expect_holes(&c, r[j].h, cv, r[j].bytes);
        free(cv);
        buf_fini(&s[j]);
        buf_fini(&r[j]);
    }
    buf_fini(&ar);
}

/* ---- main ---------------------------------------------------------------- */

static void types_init(void)
{
    MPI_Datatype vec;

    memset(&hole_int, HOLE, sizeof(hole_int));
    types[T_INT]    = (dtype_t){T_INT, "int", MPI_INT, sizeof(int)};
    types[T_DOUBLE] = (dtype_t){T_DOUBLE, "double", MPI_DOUBLE, sizeof(double)};
    /* ints 0 and 2 of every 4: a vector resized to tile */
    MPI_Type_vector(2, 1, 2, MPI_INT, &vec);
    MPI_Type_create_resized(vec, 0, 4 * sizeof(int), &types[T_VEC].dt);
    MPI_Type_commit(&types[T_VEC].dt);
    MPI_Type_free(&vec);
    types[T_VEC].kind   = T_VEC;
    types[T_VEC].name   = "2 ints of 4 (derived)";
    types[T_VEC].extent = 4 * sizeof(int);
}

/*
 * Open MPI 4.1's own nonblocking and persistent in-place alltoallv and
 * alltoallw (coll/libnbc) deliver wrong data once a pair's message passes
 * the shared-memory eager limit (4 KiB): 4 ranks, host buffers, no dfccl.
 * Those forms run in place at the small counts only (main's loop).
 */
int main(int argc, char **argv)
{
    size_t counts[] = {1, 37, 2000};
    int ncounts = 3, quick = 0, rc;
    topo_t topos[2];
    MPI_Comm ca, cb;
    const test_flag_t flags[] = {{"--quick", &quick}, {NULL, NULL}};

    if ((rc = test_args(argc, argv, "test_allcolls", flags)) >= 0 ||
        (rc = test_init(&argc, &argv, "test_allcolls", 0, &rank, &size)) != 0) {
        return rc;
    }
    if (quick) {
        ncounts = 2;
    }
    if (size > MAX_RANKS) {
        if (rank == 0) {
            fprintf(stderr, "test_allcolls: at most %d ranks\n", MAX_RANKS);
        }
        MPI_Finalize();
        return 77;
    }
    /* errors come back as return codes, so that a failure names its call */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    types_init();
    topo_cart(&topos[0]);
    topo_graph(&topos[1]);
    MPI_Comm_dup(MPI_COMM_WORLD, &ca);
    MPI_Comm_dup(MPI_COMM_WORLD, &cb);

    for (int form = 0; form < NFORMS; form++) {
        for (int ci = 0; ci < ncounts; ci++) {
            size_t k = counts[ci];
            int root = (int)((form + ci) % size);
            for (int ip = 0; ip < 2; ip++) {
                for (int ti = 0; ti < NTYPES; ti++) {
                    const dtype_t *t = &types[ti];
                    t_alltoall(t, k, form, ip, PACKED);
                    if (!(ip && form != BLOCKING && k > 37)) {
                        t_alltoall(t, k, form, ip, HOLES);
                    }
                    t_gather(t, k, form, ip, -1, 1); /* allgatherv */
                    t_gather(t, k, form, ip, root, 0);
                    t_gather(t, k, form, ip, size - 1 - root, 1);
                    t_scatter(t, k, form, ip, root, 0);
                    t_scatter(t, k, form, ip, size - 1 - root, 1);
                    if (t->kind != T_VEC) {
                        for (int op = 0; op < 2; op++) {
                            t_scan(t, op, k, form, ip, 0);
                            t_scan(t, op, k, form, ip, 1);
                        }
                    }
                }
                if (!(ip && form != BLOCKING && k > 37)) {
                    t_alltoall(NULL, k, form, ip, BYTES);
                }
            }
            for (int tp = 0; tp < 2; tp++) {
                for (int ti = 0; ti < NTYPES; ti++) {
                    t_nbr_allgather(&topos[tp], &types[ti], k, form, 0);
                    t_nbr_allgather(&topos[tp], &types[ti], k, form, 1);
                    t_nbr_alltoall(&topos[tp], &types[ti], k, form, PACKED);
                    t_nbr_alltoall(&topos[tp], &types[ti], k, form, HOLES);
                }
                t_nbr_alltoall(&topos[tp], NULL, k, form, BYTES);
            }
            if (form == BLOCKING) {
                for (int ti = 0; ti < T_VEC; ti++) {
                    t_reduce_local(&types[ti], 0, k);
                    t_reduce_local(&types[ti], 1, k);
                }
                t_reduce_local(&types[T_INT], 2, k);
            }
        }
        t_barrier(form);
    }
    for (int ci = 0; ci < ncounts; ci++) {
        t_mixed(ca, cb, counts[ci]);
        t_alltoallv_burst(ca, counts[ci]);
    }

    MPI_Comm_free(&ca);
    MPI_Comm_free(&cb);
    MPI_Comm_free(&topos[0].comm);
    MPI_Comm_free(&topos[1].comm);
    MPI_Type_free(&types[T_VEC].dt);
    return test_finish(test_failures, "test_allcolls: %d ranks, %s buffers, %d calls on rank 0",
                       size, test_device ? "device" : "host", checks);
}
