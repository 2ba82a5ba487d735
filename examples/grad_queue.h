/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What grad_queue.c and its consumer kernel (grad_queue_kernel.cu) share:
 * the model's layers and the update, the same arithmetic on the host and
 * on the GPU, so that both modes of a step give the same parameters.
 */
#ifndef DFCCL_EXAMPLE_GRAD_QUEUE_H_
#define DFCCL_EXAMPLE_GRAD_QUEUE_H_

#include <stddef.h>

#include "dfccl.h"

#define NLAYERS 8

typedef struct {
    size_t off[NLAYERS];   /* a layer's first element in the gradient buffer */
    size_t elems[NLAYERS];
    int    work;           /* repeats of the update's arithmetic */
    float  lr;
    float  inv_n;          /* 1 / ranks: the allreduce sums */
} gq_model_t;

#if defined(__CUDACC__)
#define GQ_FN static inline __host__ __device__
#else
#define GQ_FN static inline
#endif

/* Momentum SGD on element i, `work` times over. */
GQ_FN void gq_update_one(const gq_model_t *m, const float *grad, float *param, float *mom,
                         size_t i)
{
    const float v = grad[i] * m->inv_n;
    float mo = mom[i], pa = param[i];

    for (int w = 0; w < m->work; w++) {
        mo = 0.9f * mo + 0.1f * v;
        pa -= m->lr * mo / (1.0f + (pa < 0 ? -pa : pa));
    }
    mom[i]   = mo;
    param[i] = pa;
}

GQ_FN void gq_update_range(const gq_model_t *m, const float *grad, float *param, float *mom,
                           size_t from, size_t to)
{
    for (size_t i = from; i < to; i++) {
        gq_update_one(m, grad, param, mom, i);
    }
}

#ifdef __cplusplus
extern "C" {
#endif
/* grad_queue_kernel.cu (built with nvcc): on `stream` (a cudaStream_t), a
 * block per layer waits until the progress words of p say the layer's
 * bytes are final, then updates it; gq_finish waits for it and says
 * whether a block gave up waiting (*failed_p). 0, or -1 on a CUDA error. */
int gq_launch_update(const dfccl_partial_t *p, const gq_model_t *m, const float *grad,
                     float *param, float *mom, void *stream);
int gq_finish(void *stream, int *failed_p);
#ifdef __cplusplus
}
#endif

#endif
