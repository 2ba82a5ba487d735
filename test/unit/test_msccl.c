/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The MSCCL XML loader (runtime/msccl.c): a valid program loads with
 * every field as written; each rule a file can break is refused with the
 * file, the line and the rule, on a program that breaks only that rule.
 * The loader is built into this test from its source: libdfccl exports
 * only its public API.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "suite.h"
#include "../../runtime/msccl.c"

/* Two ranks, allreduce in place of 2 chunks: each reduces one chunk and
 * sends it back. Line numbers matter: the mutations below name them. */
static const char base[] =
    "<algo name=\"pair\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"2\" ngpus=\"2\" "
    "coll=\"allreduce\" inplace=\"1\" outofplace=\"0\" minBytes=\"0\" maxBytes=\"65536\">\n" /* 1 */
    "  <gpu id=\"0\" i_chunks=\"2\" o_chunks=\"0\" s_chunks=\"0\">\n"                      /* 2 */
    "    <tb id=\"0\" send=\"1\" recv=\"1\" chan=\"0\">\n"                                  /* 3 */
    "      <step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"i\" dstoff=\"1\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"   /* 4 */
    "      <step s=\"1\" type=\"rrc\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n" /* 5 */
    "      <step s=\"2\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"   /* 6 */
    "      <step s=\"3\" type=\"r\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"i\" dstoff=\"1\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"   /* 7 */
    "    </tb>\n"                                                                           /* 8 */
    "  </gpu>\n"                                                                            /* 9 */
    "  <gpu id=\"1\" i_chunks=\"2\" o_chunks=\"0\" s_chunks=\"0\">\n"                      /* 10 */
    "    <tb id=\"0\" send=\"0\" recv=\"0\" chan=\"0\">\n"                                  /* 11 */
    "      <step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"   /* 12 */
    "      <step s=\"1\" type=\"rrc\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"i\" dstoff=\"1\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n" /* 13 */
    "      <step s=\"2\" type=\"s\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"i\" dstoff=\"1\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"   /* 14 */
    "      <step s=\"3\" type=\"r\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"   /* 15 */
    "    </tb>\n"                                                                           /* 16 */
    "  </gpu>\n"                                                                            /* 17 */
    "</algo>\n";                                                                            /* 18 */

/* base with the first occurrence of `from` after line `line` replaced by
 * `to` (malloc'd) */
static char *mutate(int line, const char *from, const char *to)
{
    const char *p = base;
    char *out, *hit;
    size_t n;

    for (int l = 1; l < line; l++) {
        p = strchr(p, '\n') + 1;
    }
    hit = strstr(p, from);
    ck_assert_msg(hit != NULL, "mutation: \"%s\" is not on or after line %d", from, line);
    n   = strlen(base) - strlen(from) + strlen(to) + 1;
    out = malloc(n);
    ck_assert_ptr_nonnull(out);
    snprintf(out, n, "%.*s%s%s", (int)(hit - base), base, to, hit + strlen(from));
    return out;
}

START_TEST(test_valid)
{
    dfccl_msccl_prog_t *p;
    char err[512] = "";
    const dfccl_msccl_tb_t *tb;

    ck_assert_msg(dfccl_msccl_parse("pair.xml", base, strlen(base), &p, err, sizeof(err)) == 0,
                  "%s", err);
    ck_assert_str_eq(p->name, "pair");
    ck_assert_int_eq(p->coll, DFCCL_MSCCL_COLL_ALLREDUCE);
    ck_assert_int_eq(p->proto, DFCCL_MSCCL_SIMPLE);
    ck_assert_int_eq(p->ngpus, 2);
    ck_assert_int_eq(p->nchannels, 1);
    ck_assert_int_eq(p->nchunksperloop, 2);
    ck_assert_int_eq(p->inplace, 1);
    ck_assert_int_eq(p->outofplace, 0);
    ck_assert_uint_eq(p->min_bytes, 0);
    ck_assert_uint_eq(p->max_bytes, 65536);
    ck_assert_int_eq(p->gpus[1].chunks[DFCCL_MSCCL_BUF_IN], 2);
    ck_assert_int_eq(p->gpus[1].ntbs, 1);
    tb = &p->gpus[1].tbs[0];
    ck_assert_int_eq(tb->send, 0);
    ck_assert_int_eq(tb->recv, 0);
    ck_assert_int_eq(tb->nsteps, 4);
    ck_assert_int_eq(tb->steps[1].type, DFCCL_MSCCL_RECV_REDUCE_COPY);
    ck_assert_int_eq(tb->steps[1].srcoff, 1);
    ck_assert_int_eq(tb->steps[1].line, 13);
    ck_assert_int_eq(tb->steps[3].type, DFCCL_MSCCL_RECV);
    dfccl_msccl_free(p);

    /* the same from a file; optional attributes left out take defaults */
    {
        char path[] = "/tmp/test_msccl_XXXXXX";
        int fd      = mkstemp(path);
        char *t     = mutate(1, " inplace=\"1\" outofplace=\"0\" minBytes=\"0\" maxBytes=\"65536\"",
                             " inplace=\"1\"");
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, t, strlen(t)), (ssize_t)strlen(t));
        close(fd);
        ck_assert_msg(dfccl_msccl_load(path, &p, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(p->outofplace, 1);
        ck_assert_uint_eq(p->max_bytes, UINT64_MAX);
        dfccl_msccl_free(p);
        /* maxBytes="0" is no bound too, as MSCCL reads it */
        free(t);
        t = mutate(1, "maxBytes=\"65536\"", "maxBytes=\"0\"");
        ck_assert_msg(dfccl_msccl_parse(path, t, strlen(t), &p, err, sizeof(err)) == 0, "%s", err);
        ck_assert_uint_eq(p->max_bytes, UINT64_MAX);
        ck_assert_str_eq(p->file, path);
        dfccl_msccl_free(p);
        unlink(path);
        free(t);
    }
    ck_assert_int_eq(dfccl_msccl_load("/nonexistent/x.xml", &p, err, sizeof(err)), -1);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(err, "/nonexistent/x.xml: cannot open") != NULL, "%s", err);
}
END_TEST

typedef struct {
    int         line;   /* where the mutation is */
    const char *from;
    const char *to;
    const char *where;  /* "pair.xml:N:" the message must start with, or NULL: no line */
    const char *rule;   /* what the message must say */
} bad_t;

static const bad_t bads[] = {
    {5, "<step s=\"1\"", "<step s=\"1\" s=\"1\"", "pair.xml:5:", "not well-formed XML"},
    {1, " ngpus=\"2\"", "", "pair.xml:1:", "no attribute ngpus"},
    {1, "ngpus=\"2\"", "ngpus=\"two\"", "pair.xml:1:", "not an integer"},
    {1, "ngpus=\"2\"", "ngpus=\"2x\"", "pair.xml:1:", "not an integer"},
    {1, "nchannels=\"1\"", "nchannels=\"0\"", "pair.xml:1:", "must be from 1 to 32"},
    {1, "coll=\"allreduce\"", "coll=\"allfoo\"", "pair.xml:1:", "must be allreduce, allgather"},
    {1, "proto=\"Simple\"", "proto=\"LL256\"", "pair.xml:1:", "must be Simple, LL or LL128"},
    {1, "outofplace=\"0\"", "outofplace=\"0\" inplace2=\"1\"", NULL, NULL}, /* unknown: taken */
    {1, "inplace=\"1\"", "inplace=\"0\"", "pair.xml:1:", "for no call"},
    {1, "maxBytes=\"65536\"", "maxBytes=\"65536\" minBytes2=\"0\"", NULL, NULL},
    {1, "minBytes=\"0\"", "minBytes=\"100000\"", "pair.xml:1:", "below minBytes"},
    {1, "ngpus=\"2\"", "ngpus=\"3\"", "pair.xml:1:", "no <gpu id=\"2\">"},
    {10, "<gpu id=\"1\"", "<gpu id=\"0\"", "pair.xml:10:", "gpu id=\"0\" again"},
    {10, "<gpu id=\"1\"", "<gpu id=\"2\"", "pair.xml:10:", "must be from 0 to 1"},
    {2, "i_chunks=\"2\"", "i_chunks=\"-1\"", "pair.xml:2:", "must be from 0"},
    {3, "<tb id=\"0\"", "<tb id=\"1\"", "pair.xml:3:", "must be from 0 to 0"},
    {3, "send=\"1\"", "send=\"0\"", "pair.xml:3:", "sends to itself"},
    {3, "chan=\"0\"", "chan=\"1\"", "pair.xml:3:", "must be from -1 to 0"},
    {3, "chan=\"0\"", "chan=\"-1\"", "pair.xml:3:", "only a block that neither sends nor receives"},
    {1, "coll=\"allreduce\"", "coll=\"custom\"", NULL, NULL}, /* older MSCCL's own patterns */
    {3, "    <tb id=\"0\"", "    <foo/>\n    <tb id=\"0\"", "pair.xml:3:", "only <tb> elements"},
    {5, "s=\"1\"", "s=\"2\"", "pair.xml:5:", "numbered 0, 1, 2"},
    {5, "type=\"rrc\"", "type=\"rrx\"", "pair.xml:5:", "must be s, r, rcs"},
    {5, "type=\"rrc\"", "type=\"ra\"", "pair.xml:5:", "a residual add"},
    {5, "srcbuf=\"i\"", "srcbuf=\"x\"", "pair.xml:5:", "must be i, o or s"},
    {5, "srcoff=\"0\"", "srcoff=\"2\"", "pair.xml:5:", "buffer i (srcbuf), which has 2 chunks"},
    {5, "cnt=\"1\"", "cnt=\"0\"", "pair.xml:5:", "at least 1"},
    {5, "depid=\"-1\" deps=\"-1\"", "depid=\"0\" deps=\"0\"", "pair.xml:5:",
     "its own thread block"},
    {5, "depid=\"-1\" deps=\"-1\"", "depid=\"3\" deps=\"0\"", "pair.xml:5:",
     "does not have (1 thread blocks)"},
    {5, "deps=\"-1\"", "deps=\"2\"", "pair.xml:5:", "names both a thread block and its step"},
    {5, "hasdep=\"0\"", "hasdep=\"2\"", "pair.xml:5:", "must be from 0 to 1"},
    {3, "send=\"1\"", "send=\"-1\"", "pair.xml:4:", "has no send peer"},
    {11, "recv=\"0\"", "recv=\"-1\"", "pair.xml:13:", "has no receive peer"},
    {12, "cnt=\"1\"", "cnt=\"2\"", "pair.xml:12:", "sends 2 chunks to gpu 0 on channel 0"},
    {14, "type=\"s\"", "type=\"cpy\"", "pair.xml:7:", "which sends nothing more there"},
    {7, "type=\"r\"", "type=\"cpy\"", "pair.xml:14:", "which receives nothing more there"},
    /* a send taken away: its receiver waits for one more */
    {4, "type=\"s\" srcbuf=\"i\" srcoff=\"1\"", "type=\"nop\" srcbuf=\"i\" srcoff=\"1\"",
     "pair.xml:15:", "which sends nothing more there"},
};

START_TEST(test_bad)
{
    for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
        const bad_t *b = &bads[i];
        char *t        = mutate(b->line, b->from, b->to);
        char err[1024] = "";
        dfccl_msccl_prog_t *p;
        int rc = dfccl_msccl_parse("pair.xml", t, strlen(t), &p, err, sizeof(err));

        if (b->rule == NULL) {
            ck_assert_msg(rc == 0, "case %zu (%s -> %s) must load: %s", i, b->from, b->to, err);
            dfccl_msccl_free(p);
        } else {
            ck_assert_msg(rc == -1 && p == NULL, "case %zu (%s -> %s) loaded", i, b->from, b->to);
            ck_assert_msg(strncmp(err, b->where, strlen(b->where)) == 0 &&
                              strstr(err, b->rule) != NULL,
                          "case %zu (%s -> %s): expected \"%s ... %s\", got \"%s\"", i, b->from,
                          b->to, b->where, b->rule, err);
        }
        free(t);
    }
}
END_TEST

/* Refusals that need more than one edit. */
START_TEST(test_bad_structure)
{
    char err[1024] = "";
    dfccl_msccl_prog_t *p;
    char *u;

    /* the root element is not <algo> */
    {
        const char *other = "<?xml version=\"1.0\"?>\n<program name=\"x\"/>\n";
        ck_assert_int_eq(dfccl_msccl_parse("other.xml", other, strlen(other), &p, err,
                                           sizeof(err)), -1);
        ck_assert_msg(strstr(err, "other.xml:2:") == err &&
                          strstr(err, "one <algo> element") != NULL, "%s", err);
    }
    /* a dependency on a step that does not say hasdep */
    {
        /* gpu 0 gets a second thread block that waits for step 0 of block 0 */
        const char *tb1 = "    <tb id=\"1\" send=\"-1\" recv=\"-1\" chan=\"0\">\n"
                          "      <step s=\"0\" type=\"nop\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" "
                          "dstoff=\"0\" cnt=\"0\" depid=\"0\" deps=\"0\" hasdep=\"0\"/>\n"
                          "    </tb>\n";
        char *with = malloc(strlen(base) + strlen(tb1) + 1);
        const char *cut = strstr(base, "  </gpu>\n");
        sprintf(with, "%.*s%s%s", (int)(cut - base), base, tb1, cut);
        ck_assert_int_eq(dfccl_msccl_parse("pair.xml", with, strlen(with), &p, err, sizeof(err)),
                         -1);
        ck_assert_msg(strstr(err, "pair.xml:4:") == err && strstr(err, "hasdep=\"0\"") != NULL &&
                          strstr(err, "line 10") != NULL,
                      "%s", err);
        /* with hasdep="1" on the step waited for, it loads */
        u = strstr(with, "hasdep=\"0\"");
        u[8] = '1';
        ck_assert_msg(dfccl_msccl_parse("pair.xml", with, strlen(with), &p, err, sizeof(err)) == 0,
                      "%s", err);
        ck_assert_int_eq(p->gpus[0].ntbs, 2);
        ck_assert_int_eq(p->gpus[0].tbs[1].steps[0].depid, 0);
        dfccl_msccl_free(p);
        free(with);
    }
    /* two blocks of a rank send to the same peer on one channel */
    {
        const char *tb1 = "    <tb id=\"1\" send=\"1\" recv=\"-1\" chan=\"0\">\n    </tb>\n";
        char *with = malloc(strlen(base) + strlen(tb1) + 1);
        const char *cut = strstr(base, "  </gpu>\n");
        sprintf(with, "%.*s%s%s", (int)(cut - base), base, tb1, cut);
        ck_assert_int_eq(dfccl_msccl_parse("pair.xml", with, strlen(with), &p, err, sizeof(err)),
                         -1);
        ck_assert_msg(strstr(err, "pair.xml:9:") == err && strstr(err, "both send to gpu 1") != NULL,
                      "%s", err);
        free(with);
    }
    /* a cycle of waits: each rank receives before it sends */
    {
        char *a = mutate(4, "<step s=\"0\" type=\"s\"", "<step s=\"0\" type=\"r\"");
        char *b = strstr(a, "<step s=\"3\" type=\"r\"");
        char *c, *d;
        b[18] = 's'; /* gpu 0: r, rrc, s, s */
        c = strstr(a, "<gpu id=\"1\"");
        d = strstr(c, "<step s=\"0\" type=\"s\"");
        d[18] = 'r';
        d = strstr(c, "<step s=\"3\" type=\"r\"");
        d[18] = 's';
        ck_assert_int_eq(dfccl_msccl_parse("pair.xml", a, strlen(a), &p, err, sizeof(err)), -1);
        ck_assert_msg(strstr(err, "never completes") != NULL &&
                          strstr(err, "waits to receive from gpu 1") != NULL,
                      "%s", err);
        free(a);
    }
}
END_TEST

int main(void)
{
    Suite *s  = suite_create("msccl");
    TCase *tc = dfccl_test_case(s, "loader", 60);

#ifndef HAVE_LIBXML2
    printf("libxml2 is not built in: skipped\n");
    return 77;
#endif
    tcase_add_test(tc, test_valid);
    tcase_add_test(tc, test_bad);
    tcase_add_test(tc, test_bad_structure);
    return dfccl_test_run(s, CK_NORMAL);
}
