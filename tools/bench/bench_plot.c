/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_plot: the SVG chart behind dfccl-bench --plot (see bench_plot.h).
 *
 * 1100x450 px: the title and the legend on top, then two panels, busbw
 * (linear, 0 to a rounded-up maximum) and time per call (log10), both
 * against log2 of the message size. Points that a log axis cannot show
 * (size or time <= 0, NaN) are left out and break their series' line.
 */
#include "bench_plot.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PLOT_W          1100.0
#define PLOT_H          450.0
#define PANEL_W         (PLOT_W / 2)
#define AREA_LEFT       72.0  /* panel edge to plot area: y labels and title */
#define AREA_RIGHT      30.0  /* room for half an x label past the edge */
#define AREA_TOP        92.0
#define AREA_H          288.0
#define X_TICK_MIN_PX   64.0  /* room for a label like "512 KiB" */
#define Y_TICK_MIN_PX   24.0
#define COLOR_DFCCL     "#1f77b4"
#define COLOR_NCCL      "#ff7f0e"
#define COLOR_AXIS      "#333333"
#define COLOR_GRID      "#d9d9d9"
#define COLOR_GRID_FINE "#f0f0f0"

typedef struct {
    double bytes;
    double us[2];  /* [0] dfccl, [1] NCCL */
    double bw[2];
} plot_point_t;

struct bench_plot {
    char         *title;
    plot_point_t *pts;
    size_t        n, cap;
};

enum { SERIES_DFCCL, SERIES_NCCL };
enum { PANEL_BW, PANEL_TIME };

/* One plot area and its axes: x is log2(bytes); y is GB/s or log10(us). */
typedef struct {
    int    kind;
    double x0, y0, w, h;  /* plot area in px, y0 at the top */
    double xlo, xhi;
    double ylo, yhi;
    double ystep;         /* linear: tick step in GB/s; log: decades per tick */
} panel_t;

bench_plot_t *bench_plot_new(const char *title)
{
    bench_plot_t *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return NULL;
    if (title == NULL)
        title = "";
    size_t len = strlen(title);
    p->title   = malloc(len + 1);
    if (p->title == NULL) {
        free(p);
        return NULL;
    }
    memcpy(p->title, title, len + 1);
    return p;
}

int bench_plot_add(bench_plot_t *p, double bytes, double dfccl_us, double dfccl_busbw,
                   double nccl_us, double nccl_busbw)
{
    if (p == NULL) {
        errno = EINVAL;
        return -1;
    }
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 32;
        if (cap > (size_t)-1 / sizeof(*p->pts)) {
            errno = ENOMEM;
            return -1;
        }
        plot_point_t *pts = realloc(p->pts, cap * sizeof(*pts));
        if (pts == NULL) {
            errno = ENOMEM;
            return -1;
        }
        p->pts = pts;
        p->cap = cap;
    }
    plot_point_t *pt        = &p->pts[p->n++];
    pt->bytes               = bytes;
    pt->us[SERIES_DFCCL]    = dfccl_us;
    pt->bw[SERIES_DFCCL]    = dfccl_busbw;
    pt->us[SERIES_NCCL]     = nccl_us;
    pt->bw[SERIES_NCCL]     = nccl_busbw;
    return 0;
}

void bench_plot_free(bench_plot_t *p)
{
    if (p == NULL)
        return;
    free(p->title);
    free(p->pts);
    free(p);
}

/* ---- values and axes ---------------------------------------------------- */

static int cmp_bytes(const void *a, const void *b)
{
    double x = ((const plot_point_t *)a)->bytes, y = ((const plot_point_t *)b)->bytes;
    if (isnan(x) || isnan(y))  /* NaN last, for a consistent order */
        return isnan(x) - isnan(y);
    return (x > y) - (x < y);
}

static int x_valid(const plot_point_t *pt)
{
    return isfinite(pt->bytes) && pt->bytes > 0;
}

/* The point's y value on panel kind for series s (GB/s, or log10 of us), or 0
 * when it has none there. Busbw 0 is a value; a time must be > 0. */
static int point_y(const plot_point_t *pt, int kind, int s, double *y)
{
    if (!x_valid(pt))
        return 0;
    if (kind == PANEL_BW) {
        if (!isfinite(pt->bw[s]) || pt->bw[s] < 0)
            return 0;
        *y = pt->bw[s];
    } else {
        if (!isfinite(pt->us[s]) || pt->us[s] <= 0)
            return 0;
        *y = log10(pt->us[s]);
    }
    return 1;
}

/* 1, 2, 5, 10, 20, 50, ...: steps between ticks on an axis of whole
 * exponents */
static double next_step(double s)
{
    double mag = pow(10, floor(log10(s) + 1e-9));
    double m   = s / mag;
    return m < 1.5 ? 2 * mag : m < 3.5 ? 5 * mag : 10 * mag;
}

/* 1, 2, 2.5, 5 or 10 times a power of ten, at least raw */
static double nice_step(double raw)
{
    double mag = pow(10, floor(log10(raw)));
    double f   = raw / mag;
    if (f <= 1 + 1e-9)
        return mag;
    if (f <= 2 + 1e-9)
        return 2 * mag;
    if (f <= 2.5 + 1e-9)
        return 2.5 * mag;
    if (f <= 5 + 1e-9)
        return 5 * mag;
    return 10 * mag;
}

static double px_x(const panel_t *pa, double x)
{
    return pa->x0 + (x - pa->xlo) / (pa->xhi - pa->xlo) * pa->w;
}

static double px_y(const panel_t *pa, double y)
{
    return pa->y0 + pa->h - (y - pa->ylo) / (pa->yhi - pa->ylo) * pa->h;
}

/* Whole exponents of two around the sizes; 0 when no size is valid. */
static int x_range(const plot_point_t *pts, size_t n, double *lo, double *hi)
{
    int    any  = 0;
    double bmin = 0, bmax = 0;
    for (size_t i = 0; i < n; i++) {
        if (!x_valid(&pts[i]))
            continue;
        if (!any || pts[i].bytes < bmin)
            bmin = pts[i].bytes;
        if (!any || pts[i].bytes > bmax)
            bmax = pts[i].bytes;
        any = 1;
    }
    if (!any)
        return 0;
    *lo = floor(log2(bmin));
    *hi = ceil(log2(bmax));
    if (*hi <= *lo) {
        *lo -= 1;
        *hi += 1;
    }
    return 1;
}

/* The panel's y range; returns whether any point has a value there. */
static int y_range(panel_t *pa, const plot_point_t *pts, size_t n, int nseries)
{
    int    any  = 0;
    double ymin = 0, ymax = 0;
    for (size_t i = 0; i < n; i++) {
        for (int s = 0; s < nseries; s++) {
            double y;
            if (!point_y(&pts[i], pa->kind, s, &y))
                continue;
            if (!any || y < ymin)
                ymin = y;
            if (!any || y > ymax)
                ymax = y;
            any = 1;
        }
    }
    if (pa->kind == PANEL_BW) {
        if (!any || ymax <= 0)
            ymax = 1;
        pa->ystep = nice_step(ymax / 5);
        pa->ylo   = 0;
        pa->yhi   = pa->ystep * ceil(ymax / pa->ystep - 1e-9);
        if (pa->yhi < ymax)
            pa->yhi += pa->ystep;
    } else {
        if (!any) {
            ymin = 0;
            ymax = 1;
        }
        pa->ylo = floor(ymin);
        pa->yhi = ceil(ymax);
        if (pa->yhi <= pa->ylo) {
            pa->ylo -= 1;
            pa->yhi += 1;
        }
        pa->ystep = 1;
        while (pa->ystep * pa->h / (pa->yhi - pa->ylo) < Y_TICK_MIN_PX)
            pa->ystep = next_step(pa->ystep);
    }
    return any;
}

/* ---- text --------------------------------------------------------------- */

static void format_bytes(char *buf, size_t len, double bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    size_t                   u       = 0;
    while (bytes >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
        bytes /= 1024;
        u++;
    }
    snprintf(buf, len, "%.4g %s", bytes, units[u]);
}

/* 10^k as a tick label: 0.001 ... 10000, else 1e5 */
static void format_decade(char *buf, size_t len, int k)
{
    if (k >= 0 && k <= 4)
        snprintf(buf, len, "%.0f", pow(10, k));
    else if (k < 0 && k >= -3)
        snprintf(buf, len, "%.*f", -k, pow(10, k));
    else
        snprintf(buf, len, "1e%d", k);
}

/* text with XML's special characters escaped; control characters, which
 * XML 1.0 does not allow, become spaces */
static void write_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            fputc((unsigned char)*s < 0x20 ? ' ' : *s, f);
            break;
        }
    }
}

static void write_text(FILE *f, double x, double y, const char *anchor, const char *attrs,
                       const char *text)
{
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\"%s%s>%s</text>\n", x, y, anchor,
            attrs[0] ? " " : "", attrs, text);
}

/* ---- drawing ------------------------------------------------------------ */

static void write_line(FILE *f, double x1, double y1, double x2, double y2, const char *color)
{
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>\n", x1, y1,
            x2, y2, color);
}

static void write_marker(FILE *f, int s, double x, double y)
{
    if (s == SERIES_DFCCL)
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.2\"", x, y);
    else
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"6\" height=\"6\"", x - 3, y - 3);
}

static void write_axes(FILE *f, const panel_t *pa, int has_data)
{
    char   label[32];
    double bottom = pa->y0 + pa->h, right = pa->x0 + pa->w;

    /* x: a grid line and a label every step-th power of two, small ticks at
     * the others */
    double xstep = 1;
    while (xstep * pa->w / (pa->xhi - pa->xlo) < X_TICK_MIN_PX)
        xstep = next_step(xstep);
    fprintf(f, "<g font-size=\"11\" fill=\"%s\">\n", COLOR_AXIS);
    if (pa->w / (pa->xhi - pa->xlo) >= 4) {
        for (double e = pa->xlo; e <= pa->xhi + 1e-9; e += 1) {
            double x = px_x(pa, e);
            write_line(f, x, bottom, x, bottom + 3, COLOR_AXIS);
        }
    }
    for (double e = ceil(pa->xlo / xstep - 1e-9) * xstep; e <= pa->xhi + 1e-9; e += xstep) {
        double x = px_x(pa, e);
        write_line(f, x, pa->y0, x, bottom, COLOR_GRID);
        write_line(f, x, bottom, x, bottom + 6, COLOR_AXIS);
        format_bytes(label, sizeof(label), ldexp(1, (int)e));
        write_text(f, x, bottom + 19, "middle", "", label);
    }

    /* y */
    if (pa->kind == PANEL_BW) {
        int nticks = (int)floor((pa->yhi - pa->ylo) / pa->ystep + 0.5);
        for (int i = 0; i <= nticks; i++) {
            double v = pa->ylo + i * pa->ystep, y = px_y(pa, v);
            if (i > 0)
                write_line(f, pa->x0, y, right, y, COLOR_GRID);
            write_line(f, pa->x0 - 5, y, pa->x0, y, COLOR_AXIS);
            snprintf(label, sizeof(label), "%g", v);
            write_text(f, pa->x0 - 8, y + 4, "end", "", label);
        }
    } else {
        double decade_px = pa->h / (pa->yhi - pa->ylo);
        if (pa->ystep == 1 && decade_px >= 40) {
            for (double k = pa->ylo; k < pa->yhi - 1e-9; k += 1) {
                for (int m = 2; m <= 9; m++) {
                    double y = px_y(pa, k + log10(m));
                    write_line(f, pa->x0, y, right, y, COLOR_GRID_FINE);
                    write_line(f, pa->x0 - 3, y, pa->x0, y, COLOR_AXIS);
                }
            }
        }
        for (double k = pa->ylo; k <= pa->yhi + 1e-9; k += pa->ystep) {
            double y = px_y(pa, k);
            if (k > pa->ylo + 1e-9)
                write_line(f, pa->x0, y, right, y, COLOR_GRID);
            write_line(f, pa->x0 - 5, y, pa->x0, y, COLOR_AXIS);
            format_decade(label, sizeof(label), (int)floor(k + 0.5));
            write_text(f, pa->x0 - 8, y + 4, "end", "", label);
        }
    }

    /* frame, then the titles */
    fprintf(f,
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
            "stroke=\"%s\"/>\n",
            pa->x0, pa->y0, pa->w, pa->h, COLOR_AXIS);
    fprintf(f, "</g>\n<g font-size=\"13\" fill=\"%s\">\n", COLOR_AXIS);
    double cx = pa->x0 + pa->w / 2, cy = pa->y0 + pa->h / 2;
    write_text(f, cx, pa->y0 - 10, "middle", "font-weight=\"bold\"",
               pa->kind == PANEL_BW ? "Bus bandwidth" : "Time per call");
    write_text(f, cx, bottom + 42, "middle", "", "message size");
    double ty = pa->x0 - AREA_LEFT + 18;
    fprintf(f,
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
            "transform=\"rotate(-90 %.1f %.1f)\">%s</text>\n",
            ty, cy, ty, cy, pa->kind == PANEL_BW ? "busbw (GB/s)" : "time per call (&#181;s)");
    if (!has_data)
        write_text(f, cx, cy, "middle", "fill=\"#888888\"", "no data");
    fprintf(f, "</g>\n");
}

static void write_series(FILE *f, const panel_t *pa, const plot_point_t *pts, size_t n, int s)
{
    const char *color = s == SERIES_DFCCL ? COLOR_DFCCL : COLOR_NCCL;
    const char *name  = s == SERIES_DFCCL ? "dfccl" : "NCCL";
    int         any = 0, open = 0;
    double      y;

    /* the line, broken where a point has no value */
    for (size_t i = 0; i < n; i++) {
        if (!point_y(&pts[i], pa->kind, s, &y)) {
            open = 0;
            continue;
        }
        fprintf(f, "%s%s%.1f %.1f", any ? " " : "<path d=\"", open ? "L" : "M",
                px_x(pa, log2(pts[i].bytes)), px_y(pa, y));
        any = open = 1;
    }
    if (!any)
        return;
    fprintf(f, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s/>\n", color,
            s == SERIES_NCCL ? " stroke-dasharray=\"6 4\"" : "");

    /* markers, each with a tooltip */
    fprintf(f, "<g fill=\"%s\">\n", color);
    for (size_t i = 0; i < n; i++) {
        char size[32];
        if (!point_y(&pts[i], pa->kind, s, &y))
            continue;
        write_marker(f, s, px_x(pa, log2(pts[i].bytes)), px_y(pa, y));
        format_bytes(size, sizeof(size), pts[i].bytes);
        fprintf(f, "><title>%s %s: %.4g us, %.4g GB/s</title></%s>\n", name, size, pts[i].us[s],
                pts[i].bw[s], s == SERIES_DFCCL ? "circle" : "rect");
    }
    fprintf(f, "</g>\n");
}

static void write_legend(FILE *f, int nseries)
{
    double entry_w = 110, x = PLOT_W / 2 - nseries * entry_w / 2, y = 52;
    fprintf(f, "<g font-size=\"13\">\n");
    for (int s = 0; s < nseries; s++, x += entry_w) {
        const char *color = s == SERIES_DFCCL ? COLOR_DFCCL : COLOR_NCCL;
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                "stroke-width=\"2\"%s/>\n",
                x, y, x + 32, y, color, s == SERIES_NCCL ? " stroke-dasharray=\"6 4\"" : "");
        fprintf(f, "<g fill=\"%s\">", color);
        write_marker(f, s, x + 16, y);
        fprintf(f, "/></g>\n");
        write_text(f, x + 40, y + 4.5, "start", "fill=\"" COLOR_AXIS "\"",
                   s == SERIES_DFCCL ? "dfccl" : "NCCL");
    }
    fprintf(f, "</g>\n");
}

static void write_svg(FILE *f, const char *title, const plot_point_t *pts, size_t n)
{
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%.0f\" "
            "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n",
            PLOT_W, PLOT_H, PLOT_W, PLOT_H);
    fprintf(f, "<title>");
    write_escaped(f, title);
    fprintf(f, "</title>\n<rect width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", PLOT_W,
            PLOT_H);
    fprintf(f, "<text x=\"%.1f\" y=\"26\" text-anchor=\"middle\" font-size=\"16\" "
               "font-weight=\"bold\" fill=\"%s\">",
            PLOT_W / 2, COLOR_AXIS);
    write_escaped(f, title);
    fprintf(f, "</text>\n");

    double xlo, xhi;
    if (!x_range(pts, n, &xlo, &xhi)) {
        write_text(f, PLOT_W / 2, PLOT_H / 2, "middle", "font-size=\"16\" fill=\"#888888\"",
                   "no data");
        fprintf(f, "</svg>\n");
        return;
    }

    /* NCCL's series when any of its values was given */
    int nseries = 1;
    for (size_t i = 0; i < n; i++) {
        if (pts[i].us[SERIES_NCCL] >= 0 || pts[i].bw[SERIES_NCCL] >= 0)
            nseries = 2;
    }
    write_legend(f, nseries);

    for (int kind = PANEL_BW; kind <= PANEL_TIME; kind++) {
        panel_t pa = {
            .kind = kind,
            .x0   = kind * PANEL_W + AREA_LEFT,
            .y0   = AREA_TOP,
            .w    = PANEL_W - AREA_LEFT - AREA_RIGHT,
            .h    = AREA_H,
            .xlo  = xlo,
            .xhi  = xhi,
        };
        int has_data = y_range(&pa, pts, n, nseries);
        fprintf(f, "<g>\n");
        write_axes(f, &pa, has_data);
        for (int s = nseries - 1; s >= 0; s--)  /* dfccl's on top */
            write_series(f, &pa, pts, n, s);
        fprintf(f, "</g>\n");
    }
    fprintf(f, "</svg>\n");
}

int bench_plot_write(const bench_plot_t *p, const char *path)
{
    if (p == NULL || path == NULL) {
        errno = EINVAL;
        return -1;
    }

    /* sorted by size, on a copy */
    plot_point_t *pts = NULL;
    if (p->n > 0) {
        pts = malloc(p->n * sizeof(*pts));
        if (pts == NULL) {
            errno = ENOMEM;
            return -1;
        }
        memcpy(pts, p->pts, p->n * sizeof(*pts));
        qsort(pts, p->n, sizeof(*pts), cmp_bytes);
    }

    FILE *f = fopen(path, "w");
    if (f == NULL) {
        int err = errno;
        free(pts);
        errno = err;
        return -1;
    }
    errno = 0;
    write_svg(f, p->title, pts, p->n);
    free(pts);
    int err = ferror(f) ? (errno ? errno : EIO) : 0;
    if (fclose(f) != 0 && err == 0)
        err = errno ? errno : EIO;
    if (err != 0) {
        errno = err;
        return -1;
    }
    return 0;
}
