/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dfccl-bench --model: the alpha-beta model of an allreduce of N bytes on
 * P GPUs in hosts of 8, for the ring and the trees, at the sizes of the
 * C-Cube paper's scaling study (16 KiB, 1 MiB, 64 MiB).
 *
 * A step that crosses a link costs alpha plus its bytes over the link's
 * bandwidth; every step runs as slow as the slowest link of the run: the
 * network's once the ranks span two hosts, NVLink's within one. The
 * tree's height h is the heap's (dfccl_tree_shape) and its pipelines are
 * cut into the K chunks that give the least time (K from 1 to 65536):
 *
 *   ring:                 2 (P - 1) (alpha + N / (P B))
 *   double tree, phases:  two trees of N/2, the reduction then the
 *                         broadcast: 2 (h + K - 1) (alpha + N / (2 K B))
 *   tree (dfccl):         the same trees, each chunk's way down right
 *                         after its way up: (2h + K - 1) (alpha + N / (2 K B))
 *   ctree (C-Cube's C1):  one tree of N, overlapped: (2h + K - 1) (alpha + N / (K B))
 *
 * The overlapped double tree assumes that the two trees' edges never use
 * a link in the same direction at once; C-Cube needed extra links for
 * that on a DGX-1.
 */
#include "bench_model.h"

#include "daemon_types.h"

#include <float.h>

/* The least time over K of (hops + K - 1) (alpha + bytes / (K bw)). */
static double model_pipe(double hops, double alpha, double bw, double bytes, int *k_p)
{
    double best = DBL_MAX;

    for (int k = 1; k <= 65536; k++) {
        const double t = (hops + k - 1) * (alpha + bytes / (k * bw));
        if (t < best) {
            best = t;
            *k_p = k;
        }
    }
    return best;
}

void bench_model_print(FILE *out)
{
    /* the link types dfccl's groups assume (runtime/group.c) */
    const double nv_alpha = 1.0, nv_bw = 300e3, net_alpha = 5.0, net_bw = 12e3;
    const double sizes[] = {16384.0, 1048576.0, 67108864.0};
    const char *const names[] = {"16 KiB", "1 MiB", "64 MiB"};
    double most[3] = {0, 0, 0};

    fprintf(out, "# alpha-beta model of an allreduce, P GPUs in hosts of 8: within a host "
                 "%.0f us and %.0f GB/s a step, across hosts %.0f us and %.0f GB/s\n",
            nv_alpha, nv_bw / 1e3, net_alpha, net_bw / 1e3);
    fprintf(out, "# times in us; K: the chunks of the tree's and ctree's pipelines\n");
    fprintf(out, "#     P    bytes        ring   tree-phases     tree (K)      ctree (K)  "
                 "ring/ctree\n");
    for (int p = 8; p <= 1024; p *= 2) {
        const double alpha = p > 8 ? net_alpha : nv_alpha, bw = p > 8 ? net_bw : nv_bw;
        const double h = dfccl_tree_height(p);

        for (int s = 0; s < 3; s++) {
            const double n = sizes[s];
            const double ring = 2.0 * (p - 1) * (alpha + n / (p * bw));
            int kb = 1, kt = 1, kc = 1;
            const double phases = 2.0 * model_pipe(h, alpha, bw, n / 2, &kb);
            const double tree   = model_pipe(2 * h, alpha, bw, n / 2, &kt);
            const double ctree  = model_pipe(2 * h, alpha, bw, n, &kc);

            fprintf(out, "%7d %8s %11.1f %13.1f %9.1f (%3d) %10.1f (%3d) %10.2f\n", p,
                    names[s], ring, phases, tree, kt, ctree, kc, ring / ctree);
            if (ring / ctree > most[s]) {
                most[s] = ring / ctree;
            }
        }
    }
    fprintf(out, "# ring/ctree, the most up to 1024 GPUs: %.1fx at 16 KiB, %.1fx at 1 MiB, "
                 "%.2fx at 64 MiB;\n", most[0], most[1], most[2]);
    fprintf(out, "# the C-Cube paper's simulation (ASTRA-sim, its Fig. 14a): up to 20x at "
                 "16 kB and 1 MB, up to 1.35x at 64 MB\n");
}
