/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A group's links in the alpha-beta model, measured (dfcclGroupProfile):
 * ring allreduces of a small and a large buffer, the fastest of a few
 * calls each; the per-step latency alpha and the bandwidth beta solve
 *
 *     T(S) = 2 (n - 1) alpha + 2 (n - 1) / n * S / beta
 *
 * at both sizes. Every rank then takes the worst of the ranks' answers
 * (the largest alpha and the smallest beta, through an allreduce on the
 * group itself), so that the estimates, and every choice made from them,
 * are the same on every rank. The algorithms' cost estimates and ctree's
 * chunk count read them from the group.
 */
#include "dfccl_int.h"

#include <math.h>
#include <string.h>
#include <time.h>

/* Calls of each size: untimed, then timed (the fastest counts). */
#define DFCCL_PROFILE_WARMUP 2
#define DFCCL_PROFILE_CALLS  5

static double dfccl_profile_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Register, run and wait for an allreduce of `count` elements of `type`
 * with `op` on `buf` (in place), `calls` times; the fastest call's
 * microseconds in *us_p (calls > 0). */
static dfccl_status_t dfccl_profile_run(dfccl_group_t g, dfccl_algo_choice_t algo, size_t count,
                                        dfccl_datatype_t type, dfccl_op_t op, void *buf,
                                        int calls, double *us_p)
{
    dfccl_coll_desc_t d = {DFCCL_KIND_ALLREDUCE, count, type, op, 0, 0, algo};
    dfccl_rank_ctx_t ctx = g->ctx;
    dfccl_status_t st, dst;
    double best = INFINITY;
    int id;

    st = dfcclRegister(&d, g, &id);
    if (st != DFCCL_OK) {
        return st;
    }
    for (int i = 0; i < DFCCL_PROFILE_WARMUP + calls && st == DFCCL_OK; i++) {
        const double t0 = dfccl_profile_now_us();
        double us;

        st = dfcclRunAllReduce(buf, buf, id, NULL, NULL, ctx);
        if (st == DFCCL_OK) {
            st = dfcclWait(id, -1, ctx);
        }
        us = dfccl_profile_now_us() - t0;
        if (i >= DFCCL_PROFILE_WARMUP && us < best) {
            best = us;
        }
    }
    dst = dfcclDeregister(id, ctx);
    if (us_p != NULL) {
        *us_p = best;
    }
    return st != DFCCL_OK ? st : dst;
}

dfccl_status_t dfcclGroupProfile(dfccl_group_t g, double *alpha_us_p, double *beta_gbps_p)
{
    dfccl_rank_ctx_t ctx;
    /* a large buffer that takes some hundreds of microseconds */
    size_t big;
    double t_small = 0, t_big = 0, worst[2];
    void *buf = NULL;
    dfccl_status_t st;
    int n;

    if (g == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclGroupProfile: group is NULL");
    }
    ctx = g->ctx;
    n   = g->nranks;
    if (n > 1) {
        big = ctx->backend == DFCCL_BACKEND_HOST ? (size_t)256 << 10 : (size_t)64 << 20;
        st  = ctx->be->dev_alloc(ctx, big, &buf);
        if (st == DFCCL_OK) {
            st = dfccl_profile_run(g, DFCCL_ALGO_RING, 2, DFCCL_FLOAT32, DFCCL_SUM, buf,
                                   DFCCL_PROFILE_CALLS, &t_small);
        }
        if (st == DFCCL_OK) {
            st = dfccl_profile_run(g, DFCCL_ALGO_RING, big / sizeof(float), DFCCL_FLOAT32,
                                   DFCCL_SUM, buf, DFCCL_PROFILE_CALLS, &t_big);
        }
        if (st == DFCCL_OK) {
            /* T(S) = a + b S: the steps' latency and the time per byte */
            const double b = (t_big - t_small) / (double)(big - 2 * sizeof(float));
            const double a = t_small - b * 2 * sizeof(float);
            double v[2];

            /* a measurement that says nothing (noise above the signal)
             * keeps the group's value */
            v[0] = a > 0 ? a / (2.0 * (n - 1)) : g->alpha_us;
            v[1] = b > 0 ? b * n / (2.0 * (n - 1)) : 1.0 / (g->beta_gbps * 1e3);
            st   = ctx->be->memcpy_h2d(ctx, buf, v, sizeof(v));
            if (st == DFCCL_OK) {
                st = dfccl_profile_run(g, DFCCL_ALGO_AUTO, 2, DFCCL_FLOAT64, DFCCL_MAX, buf, 1,
                                       NULL);
            }
            if (st == DFCCL_OK) {
                st = ctx->be->memcpy_d2h(ctx, worst, buf, sizeof(worst));
            }
        }
        if (buf != NULL) {
            ctx->be->dev_free(ctx, buf);
        }
        if (st != DFCCL_OK) {
            return dfccl_error(st, "dfcclGroupProfile(group %s): %s; the group keeps its "
                               "estimates (alpha %.3g us, beta %.3g GB/s)", g->name,
                               dfcclGetLastErrorMessage(), g->alpha_us, g->beta_gbps);
        }
        g->alpha_us  = worst[0];
        g->beta_gbps = 1.0 / (worst[1] * 1e3);
    }
    return dfcclGroupModel(g, alpha_us_p, beta_gbps_p);
}

dfccl_status_t dfcclGroupModel(dfccl_group_t g, double *alpha_us_p, double *beta_gbps_p)
{
    if (g == NULL) {
        return dfccl_error(DFCCL_ERR_INVALID_ARG, "dfcclGroupModel: group is NULL");
    }
    if (alpha_us_p != NULL) {
        *alpha_us_p = g->alpha_us;
    }
    if (beta_gbps_p != NULL) {
        *beta_gbps_p = g->beta_gbps;
    }
    return DFCCL_OK;
}
