/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The tunables table (dfcclGetTunables) against what depends on it: the
 * README's configuration table must be its env, doc and def_doc columns
 * row for row; every field of dfccl_config_t must have a row; names must be
 * unique; every environment variable must reach its field. With
 * --markdown the program prints the README table instead (to regenerate
 * it after a change to runtime/config.c).
 */
#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dfccl.h"
#include "suite.h"
#include "unit_util.h"

#define BEGIN "<!-- tunables: begin -->"
#define END   "<!-- tunables: end -->"

/* The README table: header, then a row per tunable. */
static char *tunables_markdown(void)
{
    int n;
    const dfccl_tunable_t *t = dfcclGetTunables(&n);
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);

    len += (size_t)snprintf(out + len, cap - len,
                            "| variable | meaning | default (host / cuda) |\n|---|---|---|\n");
    for (int i = 0; i < n; i++) {
        size_t need = strlen(t[i].env) + strlen(t[i].doc) + strlen(t[i].def_doc) + 16;
        if (len + need >= cap) {
            cap = 2 * (cap + need);
            out = realloc(out, cap);
        }
        len += (size_t)snprintf(out + len, cap - len, "| `%s` | %s | %s |\n", t[i].env,
                                t[i].doc, t[i].def_doc);
    }
    return out;
}

START_TEST(test_readme_table)
{
    const char *path = getenv("DFCCL_README");
    char *readme, *begin, *end, *want;

    ck_assert_msg(path != NULL, "DFCCL_README (the path of README.md) is not set");
    readme = unit_read_file(path);
    ck_assert_msg(readme != NULL, "cannot read %s", path);
    begin = strstr(readme, BEGIN);
    end   = strstr(readme, END);
    ck_assert_msg(begin != NULL && end != NULL && end > begin, "%s has no %s ... %s section",
                  path, BEGIN, END);
    begin += strlen(BEGIN);
    while (*begin == '\n') {
        begin++;
    }
    *end = '\0';
    want = tunables_markdown();
    if (strcmp(begin, want) != 0) {
        /* the first line that differs */
        const char *a = begin, *b = want;
        while (*a != '\0' && *a == *b) {
            a++;
            b++;
        }
        while (a > begin && a[-1] != '\n') {
            a--;
            b--;
        }
        ck_abort_msg("README.md's configuration table and the tunables table of runtime/"
                     "config.c differ; README has\n  %.200s\nthe table gives\n  %.200s\n"
                     "regenerate the README's table with test/unit/test_tunables --markdown",
                     a, b);
    }
    free(want);
    free(readme);
}
END_TEST

static size_t field_size(const dfccl_tunable_t *t)
{
    switch (t->type) {
    case DFCCL_TUNABLE_SIZE:
    case DFCCL_TUNABLE_SECONDS:
        return 8;
    case DFCCL_TUNABLE_ENV:
        return 0;
    default:
        return 4;
    }
}

static int by_offset(const void *a, const void *b)
{
    const dfccl_tunable_t *x = *(const dfccl_tunable_t *const *)a;
    const dfccl_tunable_t *y = *(const dfccl_tunable_t *const *)b;

    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Every byte of dfccl_config_t is a row's field or padding before the next
 * one: a field added without a row leaves a gap at least its own size. */
START_TEST(test_every_field)
{
    int n, m = 0;
    const dfccl_tunable_t *t = dfcclGetTunables(&n), *rows[128];
    size_t at = 0;

    for (int i = 0; i < n && m < 128; i++) {
        if (t[i].type != DFCCL_TUNABLE_ENV) {
            rows[m++] = &t[i];
        }
    }
    qsort(rows, (size_t)m, sizeof(rows[0]), by_offset);
    for (int i = 0; i < m; i++) {
        size_t sz = field_size(rows[i]);
        ck_assert_msg(rows[i]->offset >= at, "%s overlaps the field before it", rows[i]->field);
        ck_assert_msg(rows[i]->offset - at < sz, "dfccl_config_t has %zu bytes before %s that "
                      "no tunable covers: a field without a row in runtime/config.c",
                      rows[i]->offset - at, rows[i]->field);
        at = rows[i]->offset + sz;
    }
    ck_assert_msg(sizeof(dfccl_config_t) - at < 8, "dfccl_config_t has %zu bytes after %s that "
                  "no tunable covers", sizeof(dfccl_config_t) - at, rows[m - 1]->field);
}
END_TEST

START_TEST(test_unique_names)
{
    int n;
    const dfccl_tunable_t *t = dfcclGetTunables(&n);

    for (int i = 0; i < n; i++) {
        ck_assert_msg(strncmp(t[i].env, "DFCCL_", 6) == 0, "%s is not a DFCCL_ name", t[i].env);
        ck_assert_msg(t[i].doc != NULL && t[i].doc[0] != '\0' && t[i].def_doc != NULL &&
                          t[i].valid != NULL,
                      "%s has no documentation", t[i].env);
        for (int j = 0; j < i; j++) {
            ck_assert_msg(strcmp(t[i].env, t[j].env) != 0, "%s twice", t[i].env);
            ck_assert_msg(t[i].mca == NULL || t[j].mca == NULL || strcmp(t[i].mca, t[j].mca) != 0,
                          "MCA name %s twice", t[i].mca);
        }
    }
}
END_TEST

/* A valid value other than dfcclConfigInit's, as the environment spells it. */
static void other_value(const dfccl_tunable_t *t, char *buf, size_t len, uint64_t *bits)
{
    if (t->type == DFCCL_TUNABLE_ENUM) {
        int k = t->init == 0 ? 1 : 0;
        snprintf(buf, len, "%s", t->names[k]);
        *bits = (uint64_t)k;
    } else if (t->type == DFCCL_TUNABLE_SECONDS) {
        snprintf(buf, len, "%s", t->init == 3 ? "4.5" : "3");
        *bits = t->init == 3 ? 45 : 30; /* tenths */
    } else {
        int64_t v = t->lo != (int64_t)t->init ? t->lo : t->lo + 1;
        snprintf(buf, len, "%lld", (long long)v);
        *bits = (uint64_t)v;
    }
}

START_TEST(test_env_reaches_field)
{
    int n;
    const dfccl_tunable_t *t = dfcclGetTunables(&n);

    for (int i = 0; i < n; i++) {
        dfccl_config_t c;
        char val[64];
        uint64_t want, got = 0;
        const char *p;

        if (t[i].type == DFCCL_TUNABLE_ENV) {
            continue;
        }
        other_value(&t[i], val, sizeof(val), &want);
        setenv(t[i].env, val, 1);
        ck_assert_msg(dfcclConfigInit(&c) == DFCCL_OK, "%s=%s: %s", t[i].env, val,
                      dfcclGetLastErrorMessage());
        unsetenv(t[i].env);
        p = (const char *)&c + t[i].offset;
        switch (t[i].type) {
        case DFCCL_TUNABLE_SIZE:
            got = *(const size_t *)(const void *)p;
            break;
        case DFCCL_TUNABLE_U32:
            got = *(const uint32_t *)(const void *)p;
            break;
        case DFCCL_TUNABLE_SECONDS:
            got = (uint64_t)(*(const double *)(const void *)p * 10 + 0.5);
            break;
        default:
            got = (uint64_t)(int64_t) * (const int *)(const void *)p;
            break;
        }
        ck_assert_msg(got == want, "%s=%s gave field %s the value %llu", t[i].env, val,
                      t[i].field, (unsigned long long)got);
    }
}
END_TEST

/* Sizes take Open MPI's K, M, G and T suffixes (powers of 1024); other
 * letters, fractions, overflows and suffixes on counts are refused, and the
 * message says what a size takes. */
START_TEST(test_size_suffix)
{
    static const struct {
        const char *env, *val;
        size_t      want; /* 0: refused */
    } cases[] = {
        {"DFCCL_CONN_BUDGET", "4G", (size_t)4 << 30},
        {"DFCCL_CONN_BUDGET", "64k", 65536},
        {"DFCCL_CONN_BUDGET", "3M", (size_t)3 << 20},
        {"DFCCL_CONN_BUDGET", "1T", (size_t)1 << 40},
        {"DFCCL_SLOT_BYTES", "0x10K", 16384},
        {"DFCCL_CONN_BUDGET", "1.5M", 0},
        {"DFCCL_CONN_BUDGET", "4X", 0},
        {"DFCCL_CONN_BUDGET", "4GB", 0},
        {"DFCCL_CONN_BUDGET", "-1K", 0},
        {"DFCCL_CONN_BUDGET", "17179869184T", 0},
        {"DFCCL_SPIN_HEAD", "4K", 0},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        dfccl_config_t c;
        dfccl_status_t st;

        setenv(cases[i].env, cases[i].val, 1);
        st = dfcclConfigInit(&c);
        unsetenv(cases[i].env);
        if (cases[i].want == 0) {
            ck_assert_msg(st == DFCCL_ERR_INVALID_ARG, "%s=%s was accepted", cases[i].env,
                          cases[i].val);
            ck_assert_msg(strstr(dfcclGetLastErrorMessage(), cases[i].env) != NULL,
                          "%s=%s: the message does not name the variable: %s", cases[i].env,
                          cases[i].val, dfcclGetLastErrorMessage());
            ck_assert_msg(strcmp(cases[i].env, "DFCCL_CONN_BUDGET") != 0 ||
                              strstr(dfcclGetLastErrorMessage(), "K, M, G or T suffix") != NULL,
                          "%s=%s: the message does not say what a size takes: %s",
                          cases[i].env, cases[i].val, dfcclGetLastErrorMessage());
            continue;
        }
        ck_assert_msg(st == DFCCL_OK, "%s=%s: %s", cases[i].env, cases[i].val,
                      dfcclGetLastErrorMessage());
        ck_assert_msg(strcmp(cases[i].env, "DFCCL_CONN_BUDGET") == 0
                          ? c.conn_budget == cases[i].want
                          : c.slot_bytes == cases[i].want,
                      "%s=%s gave %zu, not %zu", cases[i].env, cases[i].val,
                      strcmp(cases[i].env, "DFCCL_CONN_BUDGET") == 0 ? c.conn_budget
                                                                      : c.slot_bytes,
                      cases[i].want);
    }
}
END_TEST

int main(int argc, char **argv)
{
    Suite *s  = suite_create("tunables");
    TCase *tc = dfccl_test_case(s, "table", 0);

    if (argc > 1 && strcmp(argv[1], "--markdown") == 0) {
        char *md = tunables_markdown();
        fputs(md, stdout);
        free(md);
        return 0;
    }
    tcase_add_test(tc, test_readme_table);
    tcase_add_test(tc, test_every_field);
    tcase_add_test(tc, test_unique_names);
    tcase_add_test(tc, test_env_reaches_field);
    tcase_add_test(tc, test_size_suffix);
    return dfccl_test_run(s, CK_NORMAL);
}
