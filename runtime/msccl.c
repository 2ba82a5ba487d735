/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The MSCCL XML loader (msccl.h): libxml2 reads the file; the checks here
 * are those a program must pass to run at all, each refused with the file,
 * the line and the rule:
 *
 *   - the attributes that MSCCL requires are there, and are integers in
 *     range where they are numbers;
 *   - one <gpu> per rank 0..ngpus-1, thread blocks numbered 0..n-1 without
 *     gaps, steps numbered 0, 1, ... in order;
 *   - every chunk a step touches lies within its buffer;
 *   - a step that sends has a send peer, one that receives a receive peer;
 *     on one rank and channel, one thread block at most sends to a peer,
 *     and one at most receives from it;
 *   - a dependency names a step of another thread block of the same rank,
 *     and that step says it is depended on (hasdep), or its waiter would
 *     never be told;
 *   - what a rank sends to a peer on a channel matches, in number and
 *     chunk counts, what the peer receives from it there;
 *   - the program completes: run with every thread block in order, each
 *     waiting only for its receives and dependencies, every step runs (a
 *     cycle of waits is refused, naming where each block is stuck).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#include "msccl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_LIBXML2
#include <libxml/parser.h>
#include <libxml/tree.h>
#endif

static const char *const dfccl_msccl_colls[DFCCL_MSCCL_NCOLLS] = {
    "allreduce", "allgather", "reducescatter", "alltoall", "reduce",  "broadcast",
    "gather",    "scatter",   "alltoallv",     "send",     "recv",   "custom"};
static const char *const dfccl_msccl_types[DFCCL_MSCCL_NTYPES] = {
    "s", "r", "rcs", "rrs", "rrc", "rrcs", "cpy", "re", "nop"};
static const char *const dfccl_msccl_protos[] = {"Simple", "LL", "LL128"};
static const char dfccl_msccl_bufs[] = {'i', 'o', 's'};

const char *dfccl_msccl_coll_name(int coll)
{
    return coll >= 0 && coll < DFCCL_MSCCL_NCOLLS ? dfccl_msccl_colls[coll] : "?";
}

const char *dfccl_msccl_type_name(int type)
{
    return type >= 0 && type < DFCCL_MSCCL_NTYPES ? dfccl_msccl_types[type] : "?";
}

/* What a step type does: sends, receives, reads src, writes dst. */
enum { DFCCL_M_SEND = 1, DFCCL_M_RECV = 2, DFCCL_M_SRC = 4, DFCCL_M_DST = 8 };
static const uint8_t dfccl_msccl_does[DFCCL_MSCCL_NTYPES] = {
    [DFCCL_MSCCL_SEND]                  = DFCCL_M_SEND | DFCCL_M_SRC,
    [DFCCL_MSCCL_RECV]                  = DFCCL_M_RECV | DFCCL_M_DST,
    [DFCCL_MSCCL_RECV_COPY_SEND]        = DFCCL_M_RECV | DFCCL_M_SEND | DFCCL_M_DST,
    [DFCCL_MSCCL_RECV_REDUCE_SEND]      = DFCCL_M_RECV | DFCCL_M_SEND | DFCCL_M_SRC,
    [DFCCL_MSCCL_RECV_REDUCE_COPY]      = DFCCL_M_RECV | DFCCL_M_SRC | DFCCL_M_DST,
    [DFCCL_MSCCL_RECV_REDUCE_COPY_SEND] = DFCCL_M_RECV | DFCCL_M_SEND | DFCCL_M_SRC | DFCCL_M_DST,
    [DFCCL_MSCCL_COPY]                  = DFCCL_M_SRC | DFCCL_M_DST,
    [DFCCL_MSCCL_REDUCE]                = DFCCL_M_SRC | DFCCL_M_DST,
    [DFCCL_MSCCL_NOP]                   = 0,
};

static int dfccl_msccl_fail(char *err, size_t len, const char *file, long line, const char *fmt,
                            ...) __attribute__((format(printf, 5, 6)));

static int dfccl_msccl_fail(char *err, size_t len, const char *file, long line, const char *fmt,
                            ...)
{
    va_list ap;
    int o;

    if (err == NULL || len == 0) {
        return -1;
    }
    o = line > 0 ? snprintf(err, len, "%s:%ld: ", file, line) : snprintf(err, len, "%s: ", file);
    if (o >= 0 && (size_t)o < len) {
        va_start(ap, fmt);
        vsnprintf(err + o, len - (size_t)o, fmt, ap);
        va_end(ap);
    }
    return -1;
}

void dfccl_msccl_free(dfccl_msccl_prog_t *p)
{
    if (p == NULL) {
        return;
    }
    for (int g = 0; p->gpus != NULL && g < p->ngpus; g++) {
        for (int t = 0; p->gpus[g].tbs != NULL && t < p->gpus[g].ntbs; t++) {
            free(p->gpus[g].tbs[t].steps);
        }
        free(p->gpus[g].tbs);
    }
    free(p->gpus);
    free(p);
}

int dfccl_msccl_load(const char *path, dfccl_msccl_prog_t **prog_p, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    char *text;
    long size;
    int rc;

    *prog_p = NULL;
    if (f == NULL) {
        return dfccl_msccl_fail(err, errlen, path, 0, "cannot open the MSCCL algorithm file: %s",
                                strerror(errno));
    }
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return dfccl_msccl_fail(err, errlen, path, 0, "cannot read the file: %s",
                                strerror(errno));
    }
    if ((unsigned long)size > DFCCL_MSCCL_MAX_FILE) {
        fclose(f);
        return dfccl_msccl_fail(err, errlen, path, 0, "the file has %ld bytes, more than the "
                                "%u an MSCCL program may have", size, DFCCL_MSCCL_MAX_FILE);
    }
    text = malloc((size_t)size + 1);
    if (text == NULL || fread(text, 1, (size_t)size, f) != (size_t)size) {
        free(text);
        fclose(f);
        return dfccl_msccl_fail(err, errlen, path, 0, "cannot read the file");
    }
    fclose(f);
    rc = dfccl_msccl_parse(path, text, (size_t)size, prog_p, err, errlen);
    free(text);
    return rc;
}

#ifndef HAVE_LIBXML2

int dfccl_msccl_parse(const char *file, const char *text, size_t len, dfccl_msccl_prog_t **prog_p,
                      char *err, size_t errlen)
{
    (void)text;
    (void)len;
    *prog_p = NULL;
    return dfccl_msccl_fail(err, errlen, file, 0, "MSCCL programs need libxml2, which this "
                            "build of dfccl was configured without (install libxml2-dev and "
                            "configure again)");
}

#else /* HAVE_LIBXML2 */

/* The parse state: where messages go. */
typedef struct {
    const char *file;
    char       *err;
    size_t      errlen;
} dfccl_mx_t;

#define DFCCL_MX_FAIL(_mx, _line, ...) dfccl_msccl_fail((_mx)->err, (_mx)->errlen, (_mx)->file, (_line), __VA_ARGS__)

/* Attribute `name` of node n as a string (free with xmlFree), or NULL. */
static char *dfccl_mx_str(xmlNodePtr n, const char *name)
{
    return (char *)xmlGetProp(n, (const xmlChar *)name);
}

/*
 * Integer attribute `name` in [lo, hi] into *v. Absent: *v = def when
 * `optional`, else an error. Whitespace around the number is taken, as
 * hand-written files have it; anything else is not.
 */
static int dfccl_mx_int(dfccl_mx_t *mx, xmlNodePtr n, const char *name, int optional,
                        long long def, long long lo, long long hi, long long *v)
{
    char *s = dfccl_mx_str(n, name), *end;
    const char *elem = (const char *)n->name;
    long long x;
    int rc = 0;

    if (s == NULL) {
        if (optional) {
            *v = def;
            return 0;
        }
        return DFCCL_MX_FAIL(mx, xmlGetLineNo(n), "<%s> has no attribute %s, which MSCCL "
                             "requires", elem, name);
    }
    errno = 0;
    x     = strtoll(s, &end, 10);
    while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r') {
        end++;
    }
    if (end == s || *end != '\0' || errno == ERANGE) {
        rc = DFCCL_MX_FAIL(mx, xmlGetLineNo(n), "<%s %s=\"%s\">: not an integer", elem, name,
                           s);
    } else if (x < lo || x > hi) {
        rc = DFCCL_MX_FAIL(mx, xmlGetLineNo(n), "<%s %s=\"%s\">: must be from %lld to %lld",
                           elem, name, s, lo, hi);
    } else {
        *v = x;
    }
    xmlFree(s);
    return rc;
}

/* String attribute `name` that must be one of names[0..n-1]: its index. */
static int dfccl_mx_enum(dfccl_mx_t *mx, xmlNodePtr node, const char *name,
                         const char *const *names, int n, int optional, int def, int *v)
{
    char *s = dfccl_mx_str(node, name);
    char list[256] = "";

    if (s == NULL) {
        if (optional) {
            *v = def;
            return 0;
        }
        return DFCCL_MX_FAIL(mx, xmlGetLineNo(node), "<%s> has no attribute %s, which MSCCL "
                             "requires", (const char *)node->name, name);
    }
    for (int i = 0; i < n; i++) {
        if (strcmp(s, names[i]) == 0) {
            xmlFree(s);
            *v = i;
            return 0;
        }
    }
    for (int i = 0; i < n; i++) {
        size_t o = strlen(list);
        snprintf(list + o, sizeof(list) - o, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ",
                 names[i]);
    }
    DFCCL_MX_FAIL(mx, xmlGetLineNo(node), "<%s %s=\"%s\">: must be %s",
                  (const char *)node->name, name, s, list);
    xmlFree(s);
    return -1;
}

/* A buffer attribute: i, o or s. */
static int dfccl_mx_buf(dfccl_mx_t *mx, xmlNodePtr n, const char *name, uint8_t *v)
{
    static const char *const names[] = {"i", "o", "s"};
    int b;

    if (dfccl_mx_enum(mx, n, name, names, 3, 0, 0, &b) != 0) {
        return -1;
    }
    *v = (uint8_t)b;
    return 0;
}

static int dfccl_mx_is(xmlNodePtr n, const char *name)
{
    return n->type == XML_ELEMENT_NODE && strcmp((const char *)n->name, name) == 0;
}

/* Children of n that are <name> elements; any other element is refused
 * (text and comments are not). */
static int dfccl_mx_children(dfccl_mx_t *mx, xmlNodePtr n, const char *name, long max, int *count)
{
    long k = 0;

    for (xmlNodePtr c = n->children; c != NULL; c = c->next) {
        if (c->type != XML_ELEMENT_NODE) {
            continue;
        }
        if (!dfccl_mx_is(c, name)) {
            return DFCCL_MX_FAIL(mx, xmlGetLineNo(c), "<%s> inside <%s>: only <%s> elements may "
                                 "be there", (const char *)c->name, (const char *)n->name, name);
        }
        if (++k > max) {
            return DFCCL_MX_FAIL(mx, xmlGetLineNo(c), "<%s> holds more than %ld <%s> elements",
                                 (const char *)n->name, max, name);
        }
    }
    *count = (int)k;
    return 0;
}

static int dfccl_mx_step(dfccl_mx_t *mx, const dfccl_msccl_prog_t *p, const dfccl_msccl_gpu_t *gpu,
                         int gid, int tid, const dfccl_msccl_tb_t *tb, int index, xmlNodePtr n,
                         dfccl_msccl_step_t *st)
{
    long long s, v;
    int type;
    const long line = xmlGetLineNo(n);

    st->line = (int32_t)line;
    if (dfccl_mx_int(mx, n, "s", 0, 0, 0, DFCCL_MSCCL_MAX_STEPS - 1, &s) != 0) {
        return -1;
    }
    if (s != index) {
        return DFCCL_MX_FAIL(mx, line, "step s=\"%lld\" of thread block %d on gpu %d: steps are "
                             "numbered 0, 1, 2, ... in order, and this is step %d", s, tid, gid,
                             index);
    }
    {
        /* some executors' residual add reads two more buffers that their
         * own API passes in: no call of MPI or dfccl has them */
        char *t = dfccl_mx_str(n, "type");
        int ra  = t != NULL && (strcmp(t, "ra") == 0 || strcmp(t, "res") == 0);

        if (ra) {
            DFCCL_MX_FAIL(mx, line, "<step type=\"%s\">: a residual add, which takes its two "
                          "operands from an executor's own compute API; dfccl runs programs "
                          "of s, r, rcs, rrs, rrc, rrcs, cpy, re and nop steps", t);
        }
        if (t != NULL) {
            xmlFree(t);
        }
        if (ra) {
            return -1;
        }
    }
    if (dfccl_mx_enum(mx, n, "type", dfccl_msccl_types, DFCCL_MSCCL_NTYPES, 0, 0, &type) != 0 ||
        dfccl_mx_buf(mx, n, "srcbuf", &st->srcbuf) != 0 ||
        dfccl_mx_buf(mx, n, "dstbuf", &st->dstbuf) != 0) {
        return -1;
    }
    st->type = (uint8_t)type;
    if (dfccl_mx_int(mx, n, "srcoff", 0, 0, -1, DFCCL_MSCCL_MAX_CHUNKS, &v) != 0) {
        return -1;
    }
    st->srcoff = (int32_t)v;
    if (dfccl_mx_int(mx, n, "dstoff", 0, 0, -1, DFCCL_MSCCL_MAX_CHUNKS, &v) != 0) {
        return -1;
    }
    st->dstoff = (int32_t)v;
    if (dfccl_mx_int(mx, n, "cnt", 0, 0, 0, DFCCL_MSCCL_MAX_CHUNKS, &v) != 0) {
        return -1;
    }
    st->cnt = (int32_t)v;
    if (dfccl_mx_int(mx, n, "depid", 1, -1, -1, DFCCL_MSCCL_MAX_TBS - 1, &v) != 0) {
        return -1;
    }
    st->depid = (int32_t)v;
    if (dfccl_mx_int(mx, n, "deps", 1, -1, -1, DFCCL_MSCCL_MAX_STEPS - 1, &v) != 0) {
        return -1;
    }
    st->deps = (int32_t)v;
    if (dfccl_mx_int(mx, n, "hasdep", 1, 0, 0, 1, &v) != 0) {
        return -1;
    }
    st->hasdep = (uint8_t)v;
    if ((st->depid < 0) != (st->deps < 0)) {
        return DFCCL_MX_FAIL(mx, line, "step %d of thread block %d on gpu %d: depid=\"%d\" and "
                             "deps=\"%d\": a dependency names both a thread block and its step, "
                             "or neither is -1", index, tid, gid, st->depid, st->deps);
    }
    if (st->depid == tid) {
        return DFCCL_MX_FAIL(mx, line, "step %d of thread block %d on gpu %d depends on its own "
                             "thread block (depid=\"%d\"); its steps run in order already",
                             index, tid, gid, st->depid);
    }
    {
        const uint8_t does = dfccl_msccl_does[st->type];
        if (type != DFCCL_MSCCL_NOP && st->cnt < 1) {
            return DFCCL_MX_FAIL(mx, line, "step %d (%s) of thread block %d on gpu %d moves "
                                 "cnt=\"%d\" chunks; it must move at least 1", index,
                                 dfccl_msccl_types[type], tid, gid, st->cnt);
        }
        if ((does & DFCCL_M_SEND) && tb->send < 0) {
            return DFCCL_MX_FAIL(mx, line, "step %d (%s) of thread block %d on gpu %d sends, "
                                 "but the thread block has no send peer (send=\"-1\")", index,
                                 dfccl_msccl_types[type], tid, gid);
        }
        if ((does & DFCCL_M_RECV) && tb->recv < 0) {
            return DFCCL_MX_FAIL(mx, line, "step %d (%s) of thread block %d on gpu %d receives, "
                                 "but the thread block has no receive peer (recv=\"-1\")", index,
                                 dfccl_msccl_types[type], tid, gid);
        }
        for (int side = 0; side < 2; side++) {
            const int used = side == 0 ? (does & DFCCL_M_SRC) : (does & DFCCL_M_DST);
            const int buf  = side == 0 ? st->srcbuf : st->dstbuf;
            const int off  = side == 0 ? st->srcoff : st->dstoff;
            if (used && (off < 0 || (long long)off + st->cnt > gpu->chunks[buf])) {
                return DFCCL_MX_FAIL(mx, line, "step %d (%s) of thread block %d on gpu %d: "
                                     "chunks %d to %d of buffer %c (%s), which has %d chunks "
                                     "(%c_chunks)", index, dfccl_msccl_types[type], tid, gid,
                                     off, off + st->cnt - 1, dfccl_msccl_bufs[buf],
                                     side == 0 ? "srcbuf" : "dstbuf", gpu->chunks[buf],
                                     dfccl_msccl_bufs[buf]);
            }
        }
    }
    (void)p;
    return 0;
}

static int dfccl_mx_tb(dfccl_mx_t *mx, const dfccl_msccl_prog_t *p, dfccl_msccl_gpu_t *gpu,
                       int gid, xmlNodePtr n, int *tid_p)
{
    long long id, v;
    dfccl_msccl_tb_t tb;
    const long line = xmlGetLineNo(n);
    int nsteps, k = 0;

    memset(&tb, 0, sizeof(tb));
    tb.line = (int32_t)line;
    if (dfccl_mx_int(mx, n, "id", 0, 0, 0, gpu->ntbs - 1, &id) != 0) {
        return -1;
    }
    if (gpu->tbs[id].line != 0) {
        return DFCCL_MX_FAIL(mx, line, "thread block id=\"%lld\" of gpu %d again (first on line "
                             "%d)", id, gid, gpu->tbs[id].line);
    }
    if (dfccl_mx_int(mx, n, "send", 0, 0, -1, p->ngpus - 1, &v) != 0) {
        return -1;
    }
    tb.send = (int32_t)v;
    if (dfccl_mx_int(mx, n, "recv", 0, 0, -1, p->ngpus - 1, &v) != 0) {
        return -1;
    }
    tb.recv = (int32_t)v;
    if (dfccl_mx_int(mx, n, "chan", 1, 0, -1, p->nchannels - 1, &v) != 0) {
        return -1;
    }
    tb.chan = (int32_t)v;
    if (tb.chan < 0 && (tb.send >= 0 || tb.recv >= 0)) {
        return DFCCL_MX_FAIL(mx, line, "thread block %lld of gpu %d has chan=\"-1\" but a peer; "
                             "only a block that neither sends nor receives may have no channel",
                             id, gid);
    }
    if (tb.send == gid || tb.recv == gid) {
        return DFCCL_MX_FAIL(mx, line, "thread block %lld of gpu %d %s itself; local moves are "
                             "cpy and re steps", id, gid,
                             tb.send == gid ? "sends to" : "receives from");
    }
    if (dfccl_mx_children(mx, n, "step", DFCCL_MSCCL_MAX_STEPS, &nsteps) != 0) {
        return -1;
    }
    tb.nsteps = nsteps;
    tb.steps  = calloc(nsteps > 0 ? (size_t)nsteps : 1, sizeof(*tb.steps));
    if (tb.steps == NULL) {
        return DFCCL_MX_FAIL(mx, line, "out of memory");
    }
    gpu->tbs[id] = tb; /* owned by the program from here */
    for (xmlNodePtr c = n->children; c != NULL; c = c->next) {
        if (!dfccl_mx_is(c, "step")) {
            continue;
        }
        if (dfccl_mx_step(mx, p, gpu, gid, (int)id, &gpu->tbs[id], k, c,
                          &gpu->tbs[id].steps[k]) != 0) {
            return -1;
        }
        k++;
    }
    *tid_p = (int)id;
    return 0;
}

static int dfccl_mx_gpu(dfccl_mx_t *mx, dfccl_msccl_prog_t *p, xmlNodePtr n)
{
    static const char *const names[3] = {"i_chunks", "o_chunks", "s_chunks"};
    long long id, v;
    dfccl_msccl_gpu_t *gpu;
    const long line = xmlGetLineNo(n);
    int ntbs;

    if (dfccl_mx_int(mx, n, "id", 0, 0, 0, p->ngpus - 1, &id) != 0) {
        return -1;
    }
    gpu = &p->gpus[id];
    if (gpu->line != 0) {
        return DFCCL_MX_FAIL(mx, line, "gpu id=\"%lld\" again (first on line %d)", id,
                             gpu->line);
    }
    gpu->line = (int32_t)line;
    for (int b = 0; b < 3; b++) {
        if (dfccl_mx_int(mx, n, names[b], b == 2, 0, 0, DFCCL_MSCCL_MAX_CHUNKS, &v) != 0) {
            return -1;
        }
        gpu->chunks[b] = (int32_t)v;
    }
    if (dfccl_mx_children(mx, n, "tb", DFCCL_MSCCL_MAX_TBS, &ntbs) != 0) {
        return -1;
    }
    gpu->ntbs = ntbs;
    gpu->tbs  = calloc(ntbs > 0 ? (size_t)ntbs : 1, sizeof(*gpu->tbs));
    if (gpu->tbs == NULL) {
        return DFCCL_MX_FAIL(mx, line, "out of memory");
    }
    for (xmlNodePtr c = n->children; c != NULL; c = c->next) {
        int tid;
        if (dfccl_mx_is(c, "tb") && dfccl_mx_tb(mx, p, gpu, (int)id, c, &tid) != 0) {
            return -1;
        }
    }
    /* one sender to a peer per channel, one receiver from it */
    for (int a = 0; a < ntbs; a++) {
        for (int b = a + 1; b < ntbs; b++) {
            const dfccl_msccl_tb_t *x = &gpu->tbs[a], *y = &gpu->tbs[b];
            if (x->chan != y->chan) {
                continue;
            }
            if (x->send >= 0 && x->send == y->send) {
                return DFCCL_MX_FAIL(mx, y->line, "thread blocks %d and %d of gpu %lld both send "
                                     "to gpu %d on channel %d; a channel holds one connection "
                                     "to a peer each way", a, b, id, x->send, x->chan);
            }
            if (x->recv >= 0 && x->recv == y->recv) {
                return DFCCL_MX_FAIL(mx, y->line, "thread blocks %d and %d of gpu %lld both "
                                     "receive from gpu %d on channel %d; a channel holds one "
                                     "connection to a peer each way", a, b, id, x->recv,
                                     x->chan);
            }
        }
    }
    return 0;
}

/* The thread block of gpu g that sends to (send = 1) or receives from
 * peer q on channel c, or -1. */
static int dfccl_mx_conn(const dfccl_msccl_gpu_t *gpu, int q, int c, int send)
{
    for (int t = 0; t < gpu->ntbs; t++) {
        if (gpu->tbs[t].chan == c && (send ? gpu->tbs[t].send : gpu->tbs[t].recv) == q) {
            return t;
        }
    }
    return -1;
}

/* Dependencies name existing steps that say they are depended on. */
static int dfccl_mx_check_deps(dfccl_mx_t *mx, const dfccl_msccl_prog_t *p)
{
    for (int g = 0; g < p->ngpus; g++) {
        const dfccl_msccl_gpu_t *gpu = &p->gpus[g];
        for (int t = 0; t < gpu->ntbs; t++) {
            for (int s = 0; s < gpu->tbs[t].nsteps; s++) {
                const dfccl_msccl_step_t *st = &gpu->tbs[t].steps[s];
                const dfccl_msccl_tb_t *on;
                if (st->depid < 0) {
                    continue;
                }
                if (st->depid >= gpu->ntbs) {
                    return DFCCL_MX_FAIL(mx, st->line, "step %d of thread block %d on gpu %d "
                                         "depends on thread block %d, which gpu %d does not "
                                         "have (%d thread blocks)", s, t, g, st->depid, g,
                                         gpu->ntbs);
                }
                on = &gpu->tbs[st->depid];
                if (st->deps >= on->nsteps) {
                    return DFCCL_MX_FAIL(mx, st->line, "step %d of thread block %d on gpu %d "
                                         "depends on step %d of thread block %d, which has %d "
                                         "steps", s, t, g, st->deps, st->depid, on->nsteps);
                }
                if (!on->steps[st->deps].hasdep) {
                    return DFCCL_MX_FAIL(mx, on->steps[st->deps].line, "step %d of thread block "
                                         "%d on gpu %d has hasdep=\"0\", but step %d of thread "
                                         "block %d (line %d) waits for it: it must say "
                                         "hasdep=\"1\" to signal its waiter", st->deps,
                                         st->depid, g, s, t, st->line);
                }
            }
        }
    }
    return 0;
}

/* What a rank sends a peer on a channel is what the peer receives. */
static int dfccl_mx_check_pairs(dfccl_mx_t *mx, const dfccl_msccl_prog_t *p)
{
    for (int g = 0; g < p->ngpus; g++) {
        for (int t = 0; t < p->gpus[g].ntbs; t++) {
            const dfccl_msccl_tb_t *tb = &p->gpus[g].tbs[t];
            const dfccl_msccl_tb_t *rb;
            int rt, i = 0, j = 0;

            if (tb->send < 0) {
                continue;
            }
            rt = dfccl_mx_conn(&p->gpus[tb->send], g, tb->chan, 0);
            rb = rt >= 0 ? &p->gpus[tb->send].tbs[rt] : NULL;
            for (;;) {
                while (i < tb->nsteps && !(dfccl_msccl_does[tb->steps[i].type] & DFCCL_M_SEND)) {
                    i++;
                }
                while (rb != NULL && j < rb->nsteps &&
                       !(dfccl_msccl_does[rb->steps[j].type] & DFCCL_M_RECV)) {
                    j++;
                }
                if (i == tb->nsteps && (rb == NULL || j == rb->nsteps)) {
                    break;
                }
                if (i == tb->nsteps) {
                    return DFCCL_MX_FAIL(mx, rb->steps[j].line, "step %d of thread block %d on gpu "
                                         "%d receives from gpu %d on channel %d, which sends "
                                         "nothing more there", j, rt, tb->send, g, tb->chan);
                }
                if (rb == NULL || j == rb->nsteps) {
                    return DFCCL_MX_FAIL(mx, tb->steps[i].line, "step %d of thread block %d on "
                                         "gpu %d sends to gpu %d on channel %d, which %s", i, t, g,
                                         tb->send, tb->chan,
                                         rb == NULL ? "has no thread block receiving from it there"
                                                    : "receives nothing more there");
                }
                if (tb->steps[i].cnt != rb->steps[j].cnt) {
                    return DFCCL_MX_FAIL(mx, tb->steps[i].line, "step %d of thread block %d on gpu "
                                         "%d sends %d chunks to gpu %d on channel %d, whose "
                                         "matching receive (step %d of thread block %d, line %d) "
                                         "takes %d", i, t, g, tb->steps[i].cnt, tb->send,
                                         tb->chan, j, rt, rb->steps[j].line, rb->steps[j].cnt);
                }
                i++;
                j++;
            }
        }
    }
    /* a receiving block whose peer has no sending block on the channel */
    for (int g = 0; g < p->ngpus; g++) {
        for (int t = 0; t < p->gpus[g].ntbs; t++) {
            const dfccl_msccl_tb_t *tb = &p->gpus[g].tbs[t];
            if (tb->recv < 0 || dfccl_mx_conn(&p->gpus[tb->recv], g, tb->chan, 1) >= 0) {
                continue;
            }
            for (int s = 0; s < tb->nsteps; s++) {
                if (dfccl_msccl_does[tb->steps[s].type] & DFCCL_M_RECV) {
                    return DFCCL_MX_FAIL(mx, tb->steps[s].line, "step %d of thread block %d on "
                                         "gpu %d receives from gpu %d on channel %d, which has "
                                         "no thread block sending to it there", s, t, g,
                                         tb->recv, tb->chan);
                }
            }
        }
    }
    return 0;
}

/*
 * Run the program's order of steps (no data): each thread block takes its
 * next step once its dependency ran and, for a receive, once the matching
 * send ran. Sends do not wait (MSCCL's connectors hold at least a step).
 * All steps must run.
 */
static int dfccl_mx_check_runs(dfccl_mx_t *mx, const dfccl_msccl_prog_t *p)
{
    size_t nall = 0, k = 0;
    int32_t **pos = calloc((size_t)p->ngpus, sizeof(*pos));
    int32_t **sent, **got; /* per gpu, per tb: sends made, receives done */
    int rc = 0, progress = 1;

    sent = calloc((size_t)p->ngpus, sizeof(*sent));
    got  = calloc((size_t)p->ngpus, sizeof(*got));
    if (pos == NULL || sent == NULL || got == NULL) {
        rc = DFCCL_MX_FAIL(mx, 0, "out of memory");
        goto out;
    }
    for (int g = 0; g < p->ngpus; g++) {
        const int n = p->gpus[g].ntbs > 0 ? p->gpus[g].ntbs : 1;
        pos[g]  = calloc((size_t)n, sizeof(**pos));
        sent[g] = calloc((size_t)n, sizeof(**sent));
        got[g]  = calloc((size_t)n, sizeof(**got));
        if (pos[g] == NULL || sent[g] == NULL || got[g] == NULL) {
            rc = DFCCL_MX_FAIL(mx, 0, "out of memory");
            goto out;
        }
        for (int t = 0; t < p->gpus[g].ntbs; t++) {
            nall += (size_t)p->gpus[g].tbs[t].nsteps;
        }
    }
    while (k < nall && progress) {
        progress = 0;
        for (int g = 0; g < p->ngpus; g++) {
            for (int t = 0; t < p->gpus[g].ntbs; t++) {
                const dfccl_msccl_tb_t *tb = &p->gpus[g].tbs[t];
                while (pos[g][t] < tb->nsteps) {
                    const dfccl_msccl_step_t *st = &tb->steps[pos[g][t]];
                    const uint8_t does           = dfccl_msccl_does[st->type];
                    if (st->depid >= 0 && pos[g][st->depid] <= st->deps) {
                        break;
                    }
                    if (does & DFCCL_M_RECV) {
                        int st_ = dfccl_mx_conn(&p->gpus[tb->recv], g, tb->chan, 1);
                        if (st_ < 0 || sent[tb->recv][st_] <= got[g][t]) {
                            break;
                        }
                        got[g][t]++;
                    }
                    if (does & DFCCL_M_SEND) {
                        sent[g][t]++;
                    }
                    pos[g][t]++;
                    k++;
                    progress = 1;
                }
            }
        }
    }
    if (k < nall) {
        char where[512] = "";
        int shown = 0;
        for (int g = 0; g < p->ngpus && shown < 4; g++) {
            for (int t = 0; t < p->gpus[g].ntbs && shown < 4; t++) {
                const dfccl_msccl_tb_t *tb = &p->gpus[g].tbs[t];
                size_t o = strlen(where);
                if (pos[g][t] >= tb->nsteps) {
                    continue;
                }
                const dfccl_msccl_step_t *st = &tb->steps[pos[g][t]];
                if (st->depid >= 0 && pos[g][st->depid] <= st->deps) {
                    snprintf(where + o, sizeof(where) - o, "%sgpu %d tb %d step %d (line %d) "
                             "waits for tb %d step %d", shown ? "; " : "", g, t, pos[g][t],
                             st->line, st->depid, st->deps);
                } else {
                    snprintf(where + o, sizeof(where) - o, "%sgpu %d tb %d step %d (line %d) "
                             "waits to receive from gpu %d", shown ? "; " : "", g, t, pos[g][t],
                             st->line, tb->recv);
                }
                shown++;
            }
        }
        rc = DFCCL_MX_FAIL(mx, 0, "the program never completes: %zu of its %zu steps can "
                           "run, then every thread block left waits: %s", k, nall, where);
    }
out:
    for (int g = 0; g < p->ngpus; g++) {
        if (pos != NULL) {
            free(pos[g]);
        }
        if (sent != NULL) {
            free(sent[g]);
        }
        if (got != NULL) {
            free(got[g]);
        }
    }
    free(pos);
    free(sent);
    free(got);
    return rc;
}

static int dfccl_mx_algo(dfccl_mx_t *mx, dfccl_msccl_prog_t *p, xmlNodePtr root)
{
    long long v;
    char *name;
    int ngpu;

    name = dfccl_mx_str(root, "name");
    if (name == NULL) {
        return DFCCL_MX_FAIL(mx, xmlGetLineNo(root), "<algo> has no attribute name, which MSCCL "
                             "requires");
    }
    snprintf(p->name, sizeof(p->name), "%s", name);
    xmlFree(name);
    if (dfccl_mx_enum(mx, root, "coll", dfccl_msccl_colls, DFCCL_MSCCL_NCOLLS, 0, 0, &p->coll) !=
            0 ||
        dfccl_mx_enum(mx, root, "proto", dfccl_msccl_protos, 3, 1, DFCCL_MSCCL_SIMPLE,
                      &p->proto) != 0) {
        return -1;
    }
    if (dfccl_mx_int(mx, root, "ngpus", 0, 0, 1, DFCCL_MSCCL_MAX_RANKS, &v) != 0) {
        return -1;
    }
    p->ngpus = (int32_t)v;
    if (dfccl_mx_int(mx, root, "nchannels", 0, 0, 1, DFCCL_MSCCL_MAX_CHANNELS, &v) != 0) {
        return -1;
    }
    p->nchannels = (int32_t)v;
    if (dfccl_mx_int(mx, root, "nchunksperloop", 0, 0, 1, DFCCL_MSCCL_MAX_CHUNKS, &v) != 0) {
        return -1;
    }
    p->nchunksperloop = (int32_t)v;
    if (dfccl_mx_int(mx, root, "inplace", 1, 0, 0, 1, &v) != 0) {
        return -1;
    }
    p->inplace = (int32_t)v;
    if (dfccl_mx_int(mx, root, "outofplace", 1, 1, 0, 1, &v) != 0) {
        return -1;
    }
    p->outofplace = (int32_t)v;
    if (!p->inplace && !p->outofplace) {
        return DFCCL_MX_FAIL(mx, xmlGetLineNo(root), "<algo> has inplace=\"0\" and "
                             "outofplace=\"0\": it would run for no call");
    }
    if (dfccl_mx_int(mx, root, "minBytes", 1, 0, 0, INT64_MAX, &v) != 0) {
        return -1;
    }
    p->min_bytes = (uint64_t)v;
    /* 0, as MSCCL reads it, or none: no bound */
    if (dfccl_mx_int(mx, root, "maxBytes", 1, 0, 0, INT64_MAX, &v) != 0) {
        return -1;
    }
    p->max_bytes = v == 0 ? UINT64_MAX : (uint64_t)v;
    if (p->max_bytes < p->min_bytes) {
        return DFCCL_MX_FAIL(mx, xmlGetLineNo(root), "<algo> has maxBytes=\"%llu\" below "
                             "minBytes=\"%llu\"", (unsigned long long)p->max_bytes,
                             (unsigned long long)p->min_bytes);
    }
    if (dfccl_mx_children(mx, root, "gpu", p->ngpus, &ngpu) != 0) {
        return -1;
    }
    p->gpus = calloc((size_t)p->ngpus, sizeof(*p->gpus));
    if (p->gpus == NULL) {
        return DFCCL_MX_FAIL(mx, 0, "out of memory");
    }
    for (xmlNodePtr c = root->children; c != NULL; c = c->next) {
        if (dfccl_mx_is(c, "gpu") && dfccl_mx_gpu(mx, p, c) != 0) {
            return -1;
        }
    }
    for (int g = 0; g < p->ngpus; g++) {
        if (p->gpus[g].line == 0) {
            return DFCCL_MX_FAIL(mx, xmlGetLineNo(root), "<algo ngpus=\"%d\"> has no <gpu "
                                 "id=\"%d\">", p->ngpus, g);
        }
        for (int t = 0; t < p->gpus[g].ntbs; t++) {
            if (p->gpus[g].tbs[t].line == 0) {
                return DFCCL_MX_FAIL(mx, p->gpus[g].line, "gpu %d has %d thread blocks but no "
                                     "<tb id=\"%d\">: they are numbered from 0 without gaps", g,
                                     p->gpus[g].ntbs, t);
            }
        }
    }
    if (dfccl_mx_check_deps(mx, p) != 0 || dfccl_mx_check_pairs(mx, p) != 0) {
        return -1;
    }
    return dfccl_mx_check_runs(mx, p);
}

int dfccl_msccl_parse(const char *file, const char *text, size_t len, dfccl_msccl_prog_t **prog_p,
                      char *err, size_t errlen)
{
    dfccl_mx_t mx = {file, err, errlen};
    dfccl_msccl_prog_t *p;
    xmlDocPtr doc;
    xmlNodePtr root;
    int rc;

    *prog_p = NULL;
    if (len > DFCCL_MSCCL_MAX_FILE || len > (size_t)INT32_MAX) {
        return DFCCL_MX_FAIL(&mx, 0, "%zu bytes: more than an MSCCL program may have", len);
    }
    /* no network, no entity expansion beyond libxml2's own limits, and
     * errors come back here rather than on stderr */
    doc = xmlReadMemory(text, (int)len, file, NULL,
                        XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING |
                            XML_PARSE_BIG_LINES);
    if (doc == NULL) {
        const xmlError *e = xmlGetLastError();
        char msg[256];
        snprintf(msg, sizeof(msg), "%s", e != NULL && e->message != NULL ? e->message : "");
        msg[strcspn(msg, "\n")] = '\0';
        rc = DFCCL_MX_FAIL(&mx, e != NULL ? e->line : 0, "not well-formed XML: %s", msg);
        xmlResetLastError();
        return rc;
    }
    root = xmlDocGetRootElement(doc);
    if (root == NULL || !dfccl_mx_is(root, "algo")) {
        rc = DFCCL_MX_FAIL(&mx, root != NULL ? xmlGetLineNo(root) : 0, "the root element is "
                           "<%s>; an MSCCL program is one <algo> element",
                           root != NULL ? (const char *)root->name : "");
        xmlFreeDoc(doc);
        return rc;
    }
    p = calloc(1, sizeof(*p));
    if (p == NULL) {
        xmlFreeDoc(doc);
        return DFCCL_MX_FAIL(&mx, 0, "out of memory");
    }
    snprintf(p->file, sizeof(p->file), "%s", file);
    rc = dfccl_mx_algo(&mx, p, root);
    xmlFreeDoc(doc);
    if (rc != 0) {
        dfccl_msccl_free(p);
        return -1;
    }
    *prog_p = p;
    return 0;
}

#endif /* HAVE_LIBXML2 */
