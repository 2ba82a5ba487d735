/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_plot: a small SVG chart writer for dfccl-bench's --plot option.
 *
 * Two panels side by side: bus bandwidth (GB/s, linear) and time per call
 * (us, log10), both against the message size (log2), with dfccl's series
 * and, when it was measured, NCCL's. Plain SVG 1.1, standard C and libm only.
 */
#ifndef DFCCL_TOOLS_BENCH_PLOT_H_
#define DFCCL_TOOLS_BENCH_PLOT_H_

typedef struct bench_plot bench_plot_t;

/* A new, empty chart; title (e.g. "allreduce, float, sum, 2 ranks") is
 * copied and may be NULL. Returns NULL on allocation failure. */
bench_plot_t *bench_plot_new(const char *title);

/* One measured size: bytes, time in microseconds and busbw in GB/s for
 * dfccl; nccl_us/nccl_busbw < 0 when NCCL was not measured. Points may come
 * in any order. Returns 0, or -1 with errno set (ENOMEM, EINVAL). */
int bench_plot_add(bench_plot_t *p, double bytes, double dfccl_us, double dfccl_busbw,
                   double nccl_us, double nccl_busbw);

/* Write the SVG to path (overwritten). Returns 0, or -1 with errno set
 * (the caller prints the error). */
int bench_plot_write(const bench_plot_t *p, const char *path);

/* Free the chart; NULL is a no-op. */
void bench_plot_free(bench_plot_t *p);

#endif /* DFCCL_TOOLS_BENCH_PLOT_H_ */
