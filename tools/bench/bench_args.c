/* SPDX-License-Identifier: BSD-3-Clause */
/* The command-line values of the benchmarks (bench_args.h). */
#include "bench_args.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int bench_args_size(const char *s, size_t *v)
{
    char *end;
    double x;

    errno = 0;
    x     = strtod(s, &end);
    if (errno == 0 && end != s && *end != '\0' && end[1] == '\0') {
        switch (toupper((unsigned char)*end)) {
        case 'K': x *= 1024.0; end++; break;
        case 'M': x *= 1024.0 * 1024.0; end++; break;
        case 'G': x *= 1024.0 * 1024.0 * 1024.0; end++; break;
        default: break;
        }
    }
    if (errno != 0 || end == s || *end != '\0' || !(x >= 1) || x > 1024.0 * 1024 * 1024 * 1024) {
        return -1;
    }
    *v = (size_t)x;
    return 0;
}

int bench_args_int(const char *s, long lo, long hi, long *v)
{
    char *end;
    long x;

    errno = 0;
    x     = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || x < lo || x > hi) {
        return -1;
    }
    *v = x;
    return 0;
}

int bench_args_factor(const char *s, double *v)
{
    char *end;
    double x = strtod(s, &end);

    if (end == s || *end != '\0' || !(x > 1.0) || x > 1024) {
        return -1;
    }
    *v = x;
    return 0;
}

const char *bench_args_size_text(size_t v, char *buf, size_t len)
{
    if (v >= (1ul << 30) && v % (1ul << 30) == 0) {
        snprintf(buf, len, "%zuG", v >> 30);
    } else if (v >= (1ul << 20) && v % (1ul << 20) == 0) {
        snprintf(buf, len, "%zuM", v >> 20);
    } else if (v >= (1ul << 10) && v % (1ul << 10) == 0) {
        snprintf(buf, len, "%zuK", v >> 10);
    } else {
        snprintf(buf, len, "%zu", v);
    }
    return buf;
}
