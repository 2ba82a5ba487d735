/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The consumer kernel of grad_queue.c: a block per layer; its thread 0
 * polls the allreduce's progress words (dfcclPartialReady, which acquires
 * what it reports) until the layer's bytes are final, then the block
 * updates the layer. The daemon never waits for it: the words are only
 * read here. A block gives up after GQ_WAIT_NS (the allreduce failed).
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "grad_queue.h"

#define GQ_WAIT_NS 10000000000ull

static __device__ int gq_failed;

static __device__ uint64_t gq_now_ns(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

static __global__ void gq_update_kernel(dfccl_partial_t p, gq_model_t m, const float *grad,
                                        float *param, float *mom)
{
    const int k = blockIdx.x;
    __shared__ int go;

    if (threadIdx.x == 0) {
        const uint64_t t0 = gq_now_ns();

        go = 1;
        while (dfcclPartialReady(&p, p.words, m.off[k] * sizeof(float)) <
               m.elems[k] * sizeof(float)) {
            if (gq_now_ns() - t0 > GQ_WAIT_NS) {
                go = 0;
                atomicExch(&gq_failed, 1);
                break;
            }
            __nanosleep(256);
        }
    }
    __syncthreads();
    if (!go) {
        return;
    }
    for (size_t i = m.off[k] + threadIdx.x; i < m.off[k] + m.elems[k]; i += blockDim.x) {
        gq_update_one(&m, grad, param, mom, i);
    }
}

extern "C" int gq_launch_update(const dfccl_partial_t *p, const gq_model_t *m,
                                const float *grad, float *param, float *mom, void *stream)
{
    gq_update_kernel<<<NLAYERS, 256, 0, (cudaStream_t)stream>>>(*p, *m, grad, param, mom);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" int gq_finish(void *stream, int *failed_p)
{
    const int zero = 0;

    if (cudaStreamSynchronize((cudaStream_t)stream) != cudaSuccess ||
        cudaMemcpyFromSymbol(failed_p, gq_failed, sizeof(int)) != cudaSuccess ||
        cudaMemcpyToSymbol(gq_failed, &zero, sizeof(int)) != cudaSuccess) {
        return -1;
    }
    return 0;
}
