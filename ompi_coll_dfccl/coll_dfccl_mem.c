/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What a pointer is, and copies. CUDA answers through the driver's
 * cuPointerGetAttributes, reached through the runtime's entry points: the
 * component links libcudart, never libcuda (Open MPI skips a component that
 * pulls libcuda in). One call gives a buffer's memory type, whether it is
 * managed, its GPU and its SYNC_MEMOPS attribute. Plain host memory is what
 * CUDA does not know; page-locked and registered host memory is CUDA's host
 * memory; device memory covers cudaMalloc, stream-ordered pools and the
 * virtual memory API alike.
 *
 * Copies between any two kinds go through cudaMemcpy on the calling
 * thread's legacy default stream and wait for that stream: a copy is then
 * ordered after the application's own work on that stream, and complete on
 * return. dfccl's daemon never runs there, so this never waits for a
 * collective.
 */
#include "coll_dfccl.h"

#include <stdlib.h>
#include <string.h>

#ifdef DFCCL_HAVE_CUDART
#include <cuda.h> /* the driver's types only: its functions come through libcudart */
#include <cuda_runtime_api.h>

#include "../runtime/cuda_driver.h"

typedef CUresult (*dfccl_ptr_attrs_fn)(unsigned int, CUpointer_attribute *, void **,
                                       CUdeviceptr);
typedef CUresult (*dfccl_ptr_set_fn)(const void *, CUpointer_attribute, CUdeviceptr);
static dfccl_ptr_attrs_fn dfccl_ptr_attrs;
static dfccl_ptr_set_fn dfccl_ptr_set;
static pthread_once_t dfccl_ptr_once = PTHREAD_ONCE_INIT;


static void dfccl_ptr_init(void)
{
    dfccl_ptr_attrs = (dfccl_ptr_attrs_fn)dfccl_cuda_driver_fn("cuPointerGetAttributes");
    dfccl_ptr_set   = (dfccl_ptr_set_fn)dfccl_cuda_driver_fn("cuPointerSetAttribute");
    if (dfccl_ptr_attrs == NULL || dfccl_ptr_set == NULL) {
        dfccl_ptr_attrs = NULL;
        MCA_COLL_DFCCL_VERBOSE(1, "%s", "this CUDA gives no cuPointerGetAttributes or "
                               "cuPointerSetAttribute: device buffers are recognised with "
                               "cudaPointerGetAttributes, and every call on them waits for "
                               "CUDA's default stream first");
    }
}

/* The runtime's answer, where the driver's entry points are missing. */
static mca_coll_dfccl_mem_t dfccl_mem_query_rt(const void *ptr, int *device_p, int *settle)
{
    struct cudaPointerAttributes attr;

    if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
        cudaGetLastError(); /* no device, or not a CUDA pointer: host */
        return MCA_COLL_DFCCL_MEM_HOST;
    }
    switch (attr.type) {
    case cudaMemoryTypeDevice:
        *device_p = attr.device;
        *settle   = 1;
        return MCA_COLL_DFCCL_MEM_DEVICE;
    case cudaMemoryTypeManaged:
        *settle = 1;
        return MCA_COLL_DFCCL_MEM_MANAGED;
    case cudaMemoryTypeHost:
        return MCA_COLL_DFCCL_MEM_PINNED;
    default:
        return MCA_COLL_DFCCL_MEM_HOST;
    }
}
#endif

mca_coll_dfccl_mem_t mca_coll_dfccl_mem_query(const void *ptr, int *device_p, int *settle)
{
    *device_p = -1;
#ifdef DFCCL_HAVE_CUDART
    CUpointer_attribute at[4] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                 CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                 CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                                 CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    /* zeroed 8 bytes each: the driver writes an unsigned int, a bool or an int */
    uint64_t type = 0, managed = 0, sync = 0;
    int64_t ordinal = 0;
    void *data[4] = {&type, &managed, &sync, &ordinal};
    unsigned int one = 1;

    if (ptr == NULL || ptr == MPI_IN_PLACE || !mca_coll_dfccl_component.gpus) {
        return MCA_COLL_DFCCL_MEM_HOST; /* without a GPU there is no CUDA memory */
    }
    pthread_once(&dfccl_ptr_once, dfccl_ptr_init);
    if (dfccl_ptr_attrs == NULL ||
        dfccl_ptr_attrs(4, at, data, (CUdeviceptr)(uintptr_t)ptr) != CUDA_SUCCESS) {
        return dfccl_mem_query_rt(ptr, device_p, settle);
    }
    if (managed) {
        *settle = 1; /* its copies may migrate pages; no attribute for that */
        return MCA_COLL_DFCCL_MEM_MANAGED;
    }
    if ((CUmemorytype)type == CU_MEMORYTYPE_HOST) {
        return MCA_COLL_DFCCL_MEM_PINNED;
    }
    if ((CUmemorytype)type != CU_MEMORYTYPE_DEVICE) {
        return MCA_COLL_DFCCL_MEM_HOST; /* not CUDA's */
    }
    *device_p = (int)(int32_t)ordinal;
    if (!sync) {
        /* First seen (or a new allocation at the address): from now on a
         * synchronous copy or memset into it is complete when it returns.
         * One issued before may still be in flight: this call waits for
         * the default stream, and so does every call if the attribute does
         * not take (memory of the virtual memory API, some pools). */
        *settle = 1;
        if (dfccl_ptr_set(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                          (CUdeviceptr)(uintptr_t)ptr) != CUDA_SUCCESS) {
            MCA_COLL_DFCCL_VERBOSE(3, "buffer %p: CU_POINTER_ATTRIBUTE_SYNC_MEMOPS not set; "
                                   "calls on it wait for CUDA's default stream", ptr);
        }
    }
    return MCA_COLL_DFCCL_MEM_DEVICE;
#else
    (void)ptr;
    (void)settle;
    return MCA_COLL_DFCCL_MEM_HOST;
#endif
}

int mca_coll_dfccl_mem_direct(mca_coll_dfccl_mem_t kind, int device)
{
    mca_coll_dfccl_component_t *cm = &mca_coll_dfccl_component;

    if (cm->mode == MCA_COLL_DFCCL_MODE_HOST) {
        return kind == MCA_COLL_DFCCL_MEM_HOST;
    }
    /* the daemon reads managed memory where it is, migrating pages */
    return (kind == MCA_COLL_DFCCL_MEM_DEVICE && device == cm->device) ||
           kind == MCA_COLL_DFCCL_MEM_MANAGED;
}

int mca_coll_dfccl_current_device(void)
{
#ifdef DFCCL_HAVE_CUDART
    int dev = 0;

    if (cudaGetDevice(&dev) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return dev;
#else
    return -1;
#endif
}

/*
 * Wait for the work queued on the calling thread's legacy default stream: a
 * cudaMemcpy from pageable host memory (or between device buffers) into
 * memory without CU_POINTER_ATTRIBUTE_SYNC_MEMOPS may return before its data
 * has landed, and the daemon, on its own non-blocking stream, is not
 * ordered after it.
 */
int mca_coll_dfccl_settle_default_stream(void)
{
#ifdef DFCCL_HAVE_CUDART
    cudaError_t e = cudaStreamSynchronize(cudaStreamLegacy);
    if (e != cudaSuccess) {
        mca_coll_dfccl_warn("waiting for CUDA's default stream failed: %s",
                            cudaGetErrorString(e));
        return OMPI_ERROR;
    }
#endif
    return OMPI_SUCCESS;
}

int mca_coll_dfccl_copy(void *dst, const void *src, size_t bytes)
{
    if (bytes == 0 || dst == src) {
        return OMPI_SUCCESS;
    }
#ifdef DFCCL_HAVE_CUDART
    if (mca_coll_dfccl_component.gpus) {
        int dev, settle = 0;
        if (mca_coll_dfccl_mem_query(dst, &dev, &settle) != MCA_COLL_DFCCL_MEM_HOST ||
            mca_coll_dfccl_mem_query(src, &dev, &settle) != MCA_COLL_DFCCL_MEM_HOST) {
            if (cudaMemcpy(dst, src, bytes, cudaMemcpyDefault) != cudaSuccess) {
                mca_coll_dfccl_warn("cudaMemcpy of %zu bytes from %p to %p failed: %s", bytes,
                                    src, dst, cudaGetErrorString(cudaGetLastError()));
                return OMPI_ERROR;
            }
            /* device to device and pageable copies may return early */
            return mca_coll_dfccl_settle_default_stream();
        }
    }
#endif
    memcpy(dst, src, bytes);
    return OMPI_SUCCESS;
}

void *mca_coll_dfccl_tmp_alloc(size_t bytes)
{
    void *p = NULL;

#ifdef DFCCL_HAVE_CUDART
    if (mca_coll_dfccl_component.mode == MCA_COLL_DFCCL_MODE_CUDA) {
        int prev = mca_coll_dfccl_current_device(), dev = mca_coll_dfccl_component.device;
        cudaError_t e;

        if (prev != dev) {
            cudaSetDevice(dev);
        }
        e = cudaMalloc(&p, bytes > 0 ? bytes : 1);
        if (prev != dev) {
            cudaSetDevice(prev);
        }
        if (e != cudaSuccess) {
            cudaGetLastError();
            return NULL;
        }
        return p;
    }
#endif
    p = malloc(bytes > 0 ? bytes : 1);
    return p;
}

void mca_coll_dfccl_tmp_free(void *p)
{
    if (p == NULL) {
        return;
    }
#ifdef DFCCL_HAVE_CUDART
    if (mca_coll_dfccl_component.mode == MCA_COLL_DFCCL_MODE_CUDA) {
        cudaFree(p);
        return;
    }
#endif
    free(p);
}
