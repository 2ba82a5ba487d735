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
#include "../../runtime/cuda_driver.h"
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


static int vmm_init(void)
{
    vmm.granularity = (granularity_fn)dfccl_cuda_driver_fn("cuMemGetAllocationGranularity");
    vmm.create      = (create_fn)dfccl_cuda_driver_fn("cuMemCreate");
    vmm.reserve     = (reserve_fn)dfccl_cuda_driver_fn("cuMemAddressReserve");
    vmm.map         = (map_fn)dfccl_cuda_driver_fn("cuMemMap");
    vmm.access      = (access_fn)dfccl_cuda_driver_fn("cuMemSetAccess");
    vmm.unmap       = (unmap_fn)dfccl_cuda_driver_fn("cuMemUnmap");
    vmm.release     = (release_fn)dfccl_cuda_driver_fn("cuMemRelease");
    vmm.addrfree    = (addrfree_fn)dfccl_cuda_driver_fn("cuMemAddressFree");
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

/* rank r's element i */
static int v(int r, size_t i)
{
    return r * 1000 + (int)(i % 997);
}

/* The expected element i of a result, for count n and root. */
static int want_sum(size_t i, size_t n, int root)
{
    int s = 0;
    (void)n;
    (void)root;
    for (int r = 0; r < size; r++) {
        s += v(r, i);
    }
    return s;
}

static int want_gathered(size_t i, size_t n, int root)
{
    (void)root;
    return v((int)(i / n), i % n);
}

static int want_root(size_t i, size_t n, int root)
{
    (void)n;
    return v(root, i);
}

static int want_rs(size_t i, size_t n, int root)
{
    return want_sum(rank * n + i, n, root);
}

/* The collectives: blocking, or with req the nonblocking call (then
 * waited for). s is NULL for bcast, MPI_IN_PLACE for an in-place call. */
static int c_allreduce(void *s, void *r, int n, int root, MPI_Request *req)
{
    (void)root;
    return req ? MPI_Iallreduce(s, r, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, req)
               : MPI_Allreduce(s, r, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
}

static int c_allgather(void *s, void *r, int n, int root, MPI_Request *req)
{
    (void)root;
    return req ? MPI_Iallgather(s, n, MPI_INT, r, n, MPI_INT, MPI_COMM_WORLD, req)
               : MPI_Allgather(s, n, MPI_INT, r, n, MPI_INT, MPI_COMM_WORLD);
}

static int c_bcast(void *s, void *r, int n, int root, MPI_Request *req)
{
    (void)s;
    return req ? MPI_Ibcast(r, n, MPI_INT, root, MPI_COMM_WORLD, req)
               : MPI_Bcast(r, n, MPI_INT, root, MPI_COMM_WORLD);
}

static int c_reduce(void *s, void *r, int n, int root, MPI_Request *req)
{
    return req ? MPI_Ireduce(s, r, n, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD, req)
               : MPI_Reduce(s, r, n, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD);
}

static int c_rsb(void *s, void *r, int n, int root, MPI_Request *req)
{
    (void)root;
    return req ? MPI_Ireduce_scatter_block(s, r, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, req)
               : MPI_Reduce_scatter_block(s, r, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
}

/* the size of a buffer: none (bcast's send buffer), n or n * size elements */
enum { NONE, N, BIG };

static const struct coll {
    const char *name;
    int         sbuf, rbuf; /* NONE, N or BIG */
    int         root_only;  /* the result is checked on the root only */
    int         in_place;   /* then in place on the receive buffer */
    int (*want)(size_t i, size_t n, int root);
    int (*call)(void *s, void *r, int n, int root, MPI_Request *req);
} colls[] = {
    {"allreduce", N, N, 0, 1, want_sum, c_allreduce},
    {"allgather", N, BIG, 0, 0, want_gathered, c_allgather},
    /* bcast: the root's buffer is of the send kind, the others' of the
     * receive kind */
    {"bcast", NONE, N, 0, 0, want_root, c_bcast},
    {"reduce", N, N, 1, 0, want_sum, c_reduce},
    {"reduce_scatter_block", BIG, N, 0, 0, want_rs, c_rsb},
};

/* Run the call of k, blocking or as the nonblocking call plus MPI_Wait,
 * then check the rn elements of r (read into out), but on the root only
 * for a collective whose result only the root gets. */
static void run(const call_t *c, const struct coll *k, void *s, mem_t *r, size_t rn, int root,
                int *out)
{
    MPI_Request req;
    char err[MPI_MAX_ERROR_STRING];
    int rc = k->call(s, r->p, (int)c->n, root, c->nonblocking ? &req : NULL);

    if (rc == MPI_SUCCESS && c->nonblocking) {
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    checks++;
    if (rc != MPI_SUCCESS) {
        fail(c, "the call returned an error: %s", test_errstr(rc, err));
    }
    if (k->root_only && rank != root) {
        return;
    }
    mem_read(r, out);
    for (size_t i = 0; i < rn; i++) {
        if (out[i] != k->want(i, c->n, root)) {
            fail(c, "element %zu is %d, expected %d", i, out[i], k->want(i, c->n, root));
            return;
        }
    }
}

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

    if (h == NULL || out == NULL) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (size_t ci = 0; ci < sizeof(colls) / sizeof(colls[0]); ci++) {
        const struct coll *k = &colls[ci];
        call_t c  = {k->name, nb, 0, sk, rk, n};
        size_t sn = k->sbuf == BIG ? big : n, rn = k->rbuf == BIG ? big : n;
        mem_t s, r;

        if (k->sbuf != NONE) {
            mem_alloc(&s, sk, sn * sizeof(int));
        }
        mem_alloc(&r, k->sbuf == NONE && rank == root ? sk : rk, rn * sizeof(int));
        if (k->sbuf != NONE) {
            fill(h, sn, rank);
            mem_write(&s, h);
        }
        if (k->sbuf == NONE && rank == root) {
            fill(h, rn, root);
        } else {
            poison(h, rn);
        }
        mem_write(&r, h);
        run(&c, k, k->sbuf == NONE ? NULL : s.p, &r, rn, root, out);
        if (k->in_place) {
            c.inplace = 1;
            c.sk      = rk;
            fill(h, n, rank);
            mem_write(&r, h);
            run(&c, k, MPI_IN_PLACE, &r, rn, root, out);
        }
        if (k->sbuf != NONE) {
            mem_free(&s);
        }
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
