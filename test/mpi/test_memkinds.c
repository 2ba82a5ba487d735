/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The collectives dfccl runs itself (allreduce, allgather, bcast, reduce,
 * reduce_scatter_block) on every kind of memory a CUDA program may hand to
 * MPI: cudaMalloc on the process's GPU and on another GPU (GPU
 * (local_rank + 1) % n, when more than one is visible), cudaMallocManaged,
 * cudaMallocHost, malloc'ed memory registered with cudaHostRegister,
 * virtual memory from cuMemCreate/cuMemMap/cuMemSetAccess, memory from
 * cudaMallocAsync (the device's default pool) and from a pool of its own
 * (cudaMemPoolCreate), and plain malloc'ed memory. Every kind is tried as
 * both buffers of a call, then mixed: the send buffer of one kind and the
 * receive buffer of another, and each rank with different kinds in the
 * same call. Blocking and nonblocking, in place for allreduce, at a small
 * and a large count; every element is checked. Host-accessible kinds are
 * written and read by the CPU, as programs do; device memory through
 * cudaMemcpy.
 *
 * The GPU is chosen after MPI_Init from the node-local rank, and the first
 * collective uses cudaMalloc memory on it. The driver's virtual memory
 * functions are reached through the runtime's entry points, so the program
 * links only libcudart. Without a GPU (or a CUDA build) it exits 77: the
 * GPU lane runs it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef HAVE_CUDART
#include <cuda.h> /* the driver's types only: its functions come through libcudart */
#include <cuda_runtime_api.h>
#endif
#include "test_util.h"

#ifndef HAVE_CUDART
int main(int argc, char **argv)
{
    int rank;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        printf("test_memkinds: built without CUDA; skipped\n");
    }
    MPI_Finalize();
    return 77;
}
#else

enum {
    K_DEVICE,     /* cudaMalloc on this process's GPU */
    K_PEER,       /* cudaMalloc on another GPU */
    K_MANAGED,    /* cudaMallocManaged */
    K_PINNED,     /* cudaMallocHost */
    K_REGISTERED, /* malloc + cudaHostRegister */
    K_VMM,        /* cuMemCreate + cuMemAddressReserve + cuMemMap + cuMemSetAccess */
    K_ASYNC,      /* cudaMallocAsync from the device's default pool */
    K_POOL,       /* cudaMallocFromPoolAsync from a pool of the test's own */
    K_PAGEABLE,   /* malloc */
    NKINDS
};
static const char *const kind_names[NKINDS] = {
    "cudaMalloc", "cudaMalloc on another GPU", "cudaMallocManaged", "cudaMallocHost",
    "cudaHostRegister", "cuMemCreate (VMM)", "cudaMallocAsync", "cudaMallocFromPoolAsync",
    "malloc (pageable)"};

static int rank, size, checks;
static int gpu, peer_gpu; /* this process's GPU, and the one K_PEER uses */
static cudaStream_t stream;
static cudaMemPool_t pool;

/* ---- the driver's virtual memory functions, through the runtime ---------- */

typedef CUresult (*granularity_fn)(size_t *, const CUmemAllocationProp *,
                                   CUmemAllocationGranularity_flags);
typedef CUresult (*create_fn)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                              unsigned long long);
typedef CUresult (*reserve_fn)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
typedef CUresult (*map_fn)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                           unsigned long long);
typedef CUresult (*access_fn)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
typedef CUresult (*unmap_fn)(CUdeviceptr, size_t);
typedef CUresult (*release_fn)(CUmemGenericAllocationHandle);
typedef CUresult (*addrfree_fn)(CUdeviceptr, size_t);

static struct {
    granularity_fn granularity;
    create_fn      create;
    reserve_fn     reserve;
    map_fn         map;
    access_fn      access;
    unmap_fn       unmap;
    release_fn     release;
    addrfree_fn    addrfree;
} vmm;

static void *driver_fn(const char *name)
{
    void *fn = NULL;
#if CUDART_VERSION >= 12050
    enum cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
        fn = NULL;
    }
#elif CUDART_VERSION >= 12000
    enum cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
        fn = NULL;
    }
#else
    if (cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault) != cudaSuccess) {
        fn = NULL;
    }
#endif
    cudaGetLastError();
    return fn;
}

static int vmm_init(void)
{
    vmm.granularity = (granularity_fn)driver_fn("cuMemGetAllocationGranularity");
    vmm.create      = (create_fn)driver_fn("cuMemCreate");
    vmm.reserve     = (reserve_fn)driver_fn("cuMemAddressReserve");
    vmm.map         = (map_fn)driver_fn("cuMemMap");
    vmm.access      = (access_fn)driver_fn("cuMemSetAccess");
    vmm.unmap       = (unmap_fn)driver_fn("cuMemUnmap");
    vmm.release     = (release_fn)driver_fn("cuMemRelease");
    vmm.addrfree    = (addrfree_fn)driver_fn("cuMemAddressFree");
    return vmm.granularity && vmm.create && vmm.reserve && vmm.map && vmm.access &&
           vmm.unmap && vmm.release && vmm.addrfree;
}

#define TEST_CU(_call)                                                                   \
    do {                                                                                 \
        CUresult _r = (_call);                                                           \
        if (_r != CUDA_SUCCESS) {                                                        \
            fprintf(stderr, "rank %d: %s:%d: %s failed: CUresult %d\n", rank, __FILE__,  \
                    __LINE__, #_call, (int)_r);                                          \
            MPI_Abort(MPI_COMM_WORLD, 2);                                                \
        }                                                                                \
    } while (0)

/* ---- memory of every kind ------------------------------------------------ */

typedef struct {
    int                          kind;
    void                        *p;
    size_t                       bytes;  /* what the test uses */
    size_t                       mapped; /* K_VMM: the granularity-rounded size */
    CUmemGenericAllocationHandle handle;
} mem_t;

static int host_accessible(int kind)
{
    return kind == K_MANAGED || kind == K_PINNED || kind == K_REGISTERED || kind == K_PAGEABLE;
}

static void mem_alloc(mem_t *m, int kind, size_t bytes)
{
    memset(m, 0, sizeof(*m));
    m->kind  = kind;
    m->bytes = bytes;
    switch (kind) {
    case K_DEVICE:
        TEST_CUDA(cudaMalloc(&m->p, bytes));
        break;
    case K_PEER:
        TEST_CUDA(cudaSetDevice(peer_gpu));
        TEST_CUDA(cudaMalloc(&m->p, bytes));
        TEST_CUDA(cudaSetDevice(gpu));
        break;
    case K_MANAGED:
        TEST_CUDA(cudaMallocManaged(&m->p, bytes, cudaMemAttachGlobal));
        break;
    case K_PINNED:
        TEST_CUDA(cudaMallocHost(&m->p, bytes));
        break;
    case K_REGISTERED:
        if (posix_memalign(&m->p, 4096, bytes) != 0) {
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        TEST_CUDA(cudaHostRegister(m->p, bytes, cudaHostRegisterDefault));
        break;
    case K_VMM: {
        CUmemAllocationProp prop;
        CUmemAccessDesc acc;
        CUdeviceptr va;
        size_t g = 0;

        memset(&prop, 0, sizeof(prop));
        prop.type          = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id   = gpu;
        TEST_CU(vmm.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
        m->mapped = (bytes + g - 1) / g * g;
        TEST_CU(vmm.create(&m->handle, m->mapped, &prop, 0));
        TEST_CU(vmm.reserve(&va, m->mapped, g, 0, 0));
        TEST_CU(vmm.map(va, m->mapped, 0, m->handle, 0));
        memset(&acc, 0, sizeof(acc));
        acc.location = prop.location;
        acc.flags    = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        TEST_CU(vmm.access(va, m->mapped, &acc, 1));
        m->p = (void *)(uintptr_t)va;
        break;
    }
    case K_ASYNC:
        TEST_CUDA(cudaMallocAsync(&m->p, bytes, stream));
        TEST_CUDA(cudaStreamSynchronize(stream));
        break;
    case K_POOL:
        TEST_CUDA(cudaMallocFromPoolAsync(&m->p, bytes, pool, stream));
        TEST_CUDA(cudaStreamSynchronize(stream));
        break;
    default:
        m->p = malloc(bytes);
        if (m->p == NULL) {
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        break;
    }
}

static void mem_free(mem_t *m)
{
    switch (m->kind) {
    case K_DEVICE:
    case K_PEER:
    case K_MANAGED:
        TEST_CUDA(cudaFree(m->p));
        break;
    case K_PINNED:
        TEST_CUDA(cudaFreeHost(m->p));
        break;
    case K_REGISTERED:
        TEST_CUDA(cudaHostUnregister(m->p));
        free(m->p);
        break;
    case K_VMM:
        TEST_CU(vmm.unmap((CUdeviceptr)(uintptr_t)m->p, m->mapped));
        TEST_CU(vmm.release(m->handle));
        TEST_CU(vmm.addrfree((CUdeviceptr)(uintptr_t)m->p, m->mapped));
        break;
    case K_ASYNC:
    case K_POOL:
        TEST_CUDA(cudaFreeAsync(m->p, stream));
        TEST_CUDA(cudaStreamSynchronize(stream));
        break;
    default:
        free(m->p);
        break;
    }
}

/* Data in, complete before the MPI call: the CPU writes host-accessible
 * memory itself; device memory gets a copy and a synchronization. */
static void mem_write(mem_t *m, const void *src)
{
    if (host_accessible(m->kind)) {
        memcpy(m->p, src, m->bytes);
        return;
    }
    TEST_CUDA(cudaMemcpy(m->p, src, m->bytes, cudaMemcpyHostToDevice));
    TEST_CUDA(cudaDeviceSynchronize());
    if (m->kind == K_PEER) { /* and the GPU that holds it */
        TEST_CUDA(cudaSetDevice(peer_gpu));
        TEST_CUDA(cudaDeviceSynchronize());
        TEST_CUDA(cudaSetDevice(gpu));
    }
}

static void mem_read(const mem_t *m, void *dst)
{
    if (host_accessible(m->kind)) {
        memcpy(dst, m->p, m->bytes);
        return;
    }
    TEST_CUDA(cudaMemcpy(dst, m->p, m->bytes, cudaMemcpyDeviceToHost));
}

/* ---- checks ---------------------------------------------------------------- */

typedef struct {
    const char *coll;
    int         nonblocking, inplace, sk, rk;
    size_t      n;
} call_t;

static void fail(const call_t *c, const char *fmt, ...)
{
    char what[160];
    va_list ap;

    snprintf(what, sizeof(what), "%s %s%s, send %s, receive %s, count %zu", c->coll,
             c->nonblocking ? "nonblocking" : "blocking", c->inplace ? " in-place" : "",
             kind_names[c->sk], kind_names[c->rk], c->n);
    va_start(ap, fmt);
    test_vfail(what, fmt, ap);
    va_end(ap);
}

static void call_rc(const call_t *c, int rc)
{
    char s[MPI_MAX_ERROR_STRING];

    checks++;
    if (rc != MPI_SUCCESS) {
        fail(c, "the call returned an error: %s", test_errstr(rc, s));
    }
}

static void expect(const call_t *c, const int *got, size_t n, int (*want)(size_t, void *),
                   void *arg)
{
    for (size_t i = 0; i < n; i++) {
        if (got[i] != want(i, arg)) {
            fail(c, "element %zu is %d, expected %d", i, got[i], want(i, arg));
            return;
        }
    }
}

/* rank r's element i */
static int v(int r, size_t i)
{
    return r * 1000 + (int)(i % 997);
}

static int want_sum(size_t i, void *arg)
{
    int s = 0;
    (void)arg;
    for (int r = 0; r < size; r++) {
        s += v(r, i);
    }
    return s;
}

static int want_gathered(size_t i, void *arg)
{
    size_t n = *(size_t *)arg;
    return v((int)(i / n), i % n);
}

static int want_root(size_t i, void *arg)
{
    return v(*(int *)arg, i);
}

static int want_rs(size_t i, void *arg)
{
    size_t n = *(size_t *)arg;
    return want_sum(rank * n + i, NULL);
}

/* Run a collective blocking or as the nonblocking call plus MPI_Wait. */
#define RUN(_c, _blocking, _nonblocking)                                          \
    do {                                                                          \
        MPI_Request _req;                                                         \
        int _rc;                                                                  \
        if ((_c)->nonblocking) {                                                  \
            _rc = (_nonblocking);                                                 \
            if (_rc == MPI_SUCCESS) {                                             \
                _rc = MPI_Wait(&_req, MPI_STATUS_IGNORE);                         \
            }                                                                     \
        } else {                                                                  \
            _rc = (_blocking);                                                    \
        }                                                                         \
        call_rc((_c), _rc);                                                       \
    } while (0)

static void fill(int *h, size_t n, int r)
{
    for (size_t i = 0; i < n; i++) {
        h[i] = v(r, i);
    }
}

static void poison(int *h, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h[i] = -1;
    }
}

/* One combination: send buffer of kind sk, receive buffer of kind rk. */
static void run_kinds(int sk, int rk, size_t n, int nb, int root)
{
    size_t big = n * size;
    int *h = malloc(big * sizeof(int)), *out = malloc(big * sizeof(int));
    mem_t s, r;

    if (h == NULL || out == NULL) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    /* allreduce, out of place and in place */
    {
        call_t c = {"allreduce", nb, 0, sk, rk, n};
        mem_alloc(&s, sk, n * sizeof(int));
        mem_alloc(&r, rk, n * sizeof(int));
        fill(h, n, rank);
        mem_write(&s, h);
        poison(h, n);
        mem_write(&r, h);
        RUN(&c, MPI_Allreduce(s.p, r.p, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
            MPI_Iallreduce(s.p, r.p, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &_req));
        mem_read(&r, out);
        expect(&c, out, n, want_sum, NULL);

        c.inplace = 1;
        c.sk      = rk;
        fill(h, n, rank);
        mem_write(&r, h);
        RUN(&c, MPI_Allreduce(MPI_IN_PLACE, r.p, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
            MPI_Iallreduce(MPI_IN_PLACE, r.p, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD,
                           &_req));
        mem_read(&r, out);
        expect(&c, out, n, want_sum, NULL);
        mem_free(&s);
        mem_free(&r);
    }
    /* allgather */
    {
        call_t c = {"allgather", nb, 0, sk, rk, n};
        mem_alloc(&s, sk, n * sizeof(int));
        mem_alloc(&r, rk, big * sizeof(int));
        fill(h, n, rank);
        mem_write(&s, h);
        poison(h, big);
        mem_write(&r, h);
        RUN(&c, MPI_Allgather(s.p, (int)n, MPI_INT, r.p, (int)n, MPI_INT, MPI_COMM_WORLD),
            MPI_Iallgather(s.p, (int)n, MPI_INT, r.p, (int)n, MPI_INT, MPI_COMM_WORLD, &_req));
        mem_read(&r, out);
        expect(&c, out, big, want_gathered, &n);
        mem_free(&s);
        mem_free(&r);
    }
    /* bcast: the root's buffer is of the send kind, the others' of the
     * receive kind */
    {
        int mine = rank == root ? sk : rk;
        call_t c = {"bcast", nb, 0, sk, rk, n};
        mem_alloc(&s, mine, n * sizeof(int));
        if (rank == root) {
            fill(h, n, root);
        } else {
            poison(h, n);
        }
        mem_write(&s, h);
        RUN(&c, MPI_Bcast(s.p, (int)n, MPI_INT, root, MPI_COMM_WORLD),
            MPI_Ibcast(s.p, (int)n, MPI_INT, root, MPI_COMM_WORLD, &_req));
        mem_read(&s, out);
        expect(&c, out, n, want_root, &root);
        mem_free(&s);
    }
    /* reduce */
    {
        call_t c = {"reduce", nb, 0, sk, rk, n};
        mem_alloc(&s, sk, n * sizeof(int));
        mem_alloc(&r, rk, n * sizeof(int));
        fill(h, n, rank);
        mem_write(&s, h);
        poison(h, n);
        mem_write(&r, h);
        RUN(&c, MPI_Reduce(s.p, r.p, (int)n, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD),
            MPI_Ireduce(s.p, r.p, (int)n, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD, &_req));
        if (rank == root) {
            mem_read(&r, out);
            expect(&c, out, n, want_sum, NULL);
        }
        mem_free(&s);
        mem_free(&r);
    }
    /* reduce_scatter_block */
    {
        call_t c = {"reduce_scatter_block", nb, 0, sk, rk, n};
        mem_alloc(&s, sk, big * sizeof(int));
        mem_alloc(&r, rk, n * sizeof(int));
        fill(h, big, rank);
        mem_write(&s, h);
        poison(h, n);
        mem_write(&r, h);
        RUN(&c, MPI_Reduce_scatter_block(s.p, r.p, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
            MPI_Ireduce_scatter_block(s.p, r.p, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD,
                                      &_req));
        mem_read(&r, out);
        expect(&c, out, n, want_rs, &n);
        mem_free(&s);
        mem_free(&r);
    }
    free(h);
    free(out);
}

int main(int argc, char **argv)
{
    size_t counts[] = {7, 70000};
    int have = 0, all_have = 0, avail = 0, ngpu, local, nk = 0;
    int kinds[NKINDS];

    test_init(&argc, &argv, "test_memkinds", 0, &rank, &size);
    /* the GPU, chosen after MPI_Init from the node-local rank */
    local = test_local_rank();
    ngpu  = test_gpu_count();
    have  = ngpu > 0;
    MPI_Allreduce(&have, &all_have, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_have) {
        if (rank == 0) {
            printf("test_memkinds: no GPU visible on some rank; skipped\n");
        }
        MPI_Finalize();
        return 77;
    }
    gpu      = local % ngpu;
    peer_gpu = (local + 1) % ngpu;
    TEST_CUDA(cudaSetDevice(gpu));
    TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    /* which kinds this rank can make; every rank tests those all can */
    for (int k = 0; k < NKINDS; k++) {
        int ok = 1;
        if (k == K_PEER) {
            ok = ngpu > 1;
        } else if (k == K_VMM) {
            ok = vmm_init(); /* a GPU without VMM fails at cuMemCreate, loudly */
        } else if (k == K_ASYNC || k == K_POOL) {
            int attr = 0;
            ok = cudaDeviceGetAttribute(&attr, cudaDevAttrMemoryPoolsSupported, gpu) ==
                     cudaSuccess && attr;
            cudaGetLastError();
        }
        avail |= ok << k;
    }
    MPI_Allreduce(MPI_IN_PLACE, &avail, 1, MPI_INT, MPI_BAND, MPI_COMM_WORLD);
    if (avail & (1 << K_POOL)) {
        struct cudaMemPoolProps props;
        memset(&props, 0, sizeof(props));
        props.allocType     = cudaMemAllocationTypePinned;
        props.location.type = cudaMemLocationTypeDevice;
        props.location.id   = gpu;
        TEST_CUDA(cudaMemPoolCreate(&pool, &props));
    }
    for (int k = 0; k < NKINDS; k++) {
        if (avail & (1 << k)) {
            kinds[nk++] = k;
        }
    }
    if (rank == 0) {
        printf("test_memkinds: %d ranks, %d GPUs visible to rank 0; kinds:", size, ngpu);
        for (int i = 0; i < nk; i++) {
            printf("%s %s", i ? "," : "", kind_names[kinds[i]]);
        }
        printf("\n");
        for (int k = 0; k < NKINDS; k++) {
            if (!(avail & (1 << k))) {
                printf("test_memkinds: %s is not available on every rank: not tested\n",
                       kind_names[k]);
            }
        }
        fflush(stdout);
    }

    for (int ci = 0; ci < 2; ci++) {
        size_t n = counts[ci];
        for (int nb = 0; nb < 2; nb++) {
            /* each kind alone, cudaMalloc first: the process binds to its GPU */
            for (int i = 0; i < nk; i++) {
                run_kinds(kinds[i], kinds[i], n, nb, i % size);
            }
            /* mixed: send and receive kinds differ, and differ between ranks,
             * among the CUDA kinds (the last one, pageable memory, is left
             * out: a call on CUDA memory on some ranks and pageable memory
             * alone on others is the one mix the component does not take,
             * docs/mpi.md) */
            for (int i = 0; i < nk - 1; i++) {
                run_kinds(kinds[(i + rank) % (nk - 1)], kinds[(i + 2 * rank + 1) % (nk - 1)], n,
                          nb, (i + 1) % size);
            }
        }
    }

    if (avail & (1 << K_POOL)) {
        cudaMemPoolDestroy(pool);
    }
    cudaStreamDestroy(stream);
    return test_finish(test_failures, "test_memkinds: %d ranks, %d kinds, %d calls on rank 0",
                       size, nk, checks);
}
#endif
