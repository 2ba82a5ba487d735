/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dfccl-ucx-bw: the bandwidth and latency of UCP tagged messages between two
 * processes, the ceiling of dfccl's net transport, whose proxy
 * (runtime/transport/net.c) moves each connector slot with ucp_tag_send_nbx
 * into a posted ucp_tag_recv_nbx.
 *
 *   mpirun -np 2 dfccl-ucx-bw [-b 8] [-e 16M] [-f 2] [-w 16] [-n 20]
 *                             [--warmup 2] [-m host|cuda]
 *
 * MPI only carries the two worker addresses and holds the barriers; every
 * timed byte goes through UCX. For each size, a round is: rank 0 posts a
 * window of -w tagged sends of the size, rank 1 receives them all (into one
 * buffer) and answers with an 8-byte ack. After --warmup rounds, rank 0
 * times -n rounds, from the start of the first to the last ack:
 * GB/s = size * window * rounds / time (1e9 bytes a second, one direction).
 * Sizes up to 64 KiB add a latency: half the round trip of a ping-pong of
 * the size (rank 1 sends each message back), the mean of window * rounds of
 * them after window * warmup untimed ones. Then one untimed round checks
 * the data: rank 0 writes a pattern of the size into its buffer, rank 1
 * clears its own, receives the window and counts the bytes that differ
 * (#wrong), which its ack carries back.
 *
 * UCX_* variables apply (ucp_config_read). Without UCX_TLS the transports
 * are those the net transport takes by default, tcp,sm,self, and with host
 * memory and without UCX_MEMTYPE_CACHE, UCX runs without its memory type
 * cache, as there: the figures compare like for like. The header names the
 * UCX version, UCX_TLS and where it came from, the two hosts, and the lanes
 * of rank 0's endpoint (ucp_ep_print_info). -m cuda puts both buffers in
 * GPU memory (a rank on device local rank mod the devices of its host);
 * the UCX context must support it: a UCX built with CUDA and cuda_copy in
 * UCX_TLS (e.g. UCX_TLS=tcp,sm,self,cuda_copy).
 *
 * Output: lines that start with '#' (the header and the column names), then
 * one row a size: bytes, GB/s, latency in us ('-' above 64 KiB), #wrong.
 * Exit status: 0; 1 after a UCX error or wrong data; 2 for a mistake in the
 * command line; 3 where -m cuda cannot run here (a build without the CUDA
 * runtime, no GPU, or a UCX context without CUDA memory).
 */
#include "config.h"

#include <getopt.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucp/api/ucp.h>
#ifdef HAVE_CUDART
#include <cuda_runtime_api.h>
#endif

#include "bench_args.h"

/* the net transport's default (DFCCL_NET_DEFAULT_TLS in runtime/transport/net.c) */
#define UBW_DEFAULT_TLS "tcp,sm,self"
#define UBW_LAT_MAX     (64 * 1024) /* the largest size with a latency */
#define UBW_EXIT_NO_CUDA 3

enum { UBW_TAG_DATA = 1, UBW_TAG_ACK, UBW_TAG_PING, UBW_TAG_PONG };

typedef struct {
    size_t min_bytes, max_bytes;
    double factor;
    int    window, iters, warmup;
    int    cuda; /* -m cuda */
} ubw_opts_t;

typedef struct {
    int               rank;
    ucp_context_h     ucp;
    ucp_worker_h      worker;
    ucp_ep_h          ep;    /* to the other rank */
    ucs_memory_type_t mtype; /* of sbuf and rbuf */
    char             *sbuf, *rbuf; /* max_bytes each */
    unsigned char    *host;  /* -m cuda: max_bytes of host memory to fill and check through */
    void            **reqs;  /* window + 1 */
} ubw_t;

static int ubw_rank;

static double ubw_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* A mistake in the command line: both ranks find it, rank 0 says so, and
 * both leave normally. */
static void ubw_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void ubw_usage_error(const char *fmt, ...)
{
    va_list ap;

    if (ubw_rank == 0) {
        fprintf(stderr, "dfccl-ucx-bw: ");
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, "; see --help\n");
    }
    MPI_Finalize();
    exit(2);
}

/* A failure of this rank (UCX, CUDA, memory): said, and the job ends. */
static void ubw_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void ubw_fail(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "dfccl-ucx-bw: rank %d: ", ubw_rank);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

static void ubw_ucx(ucs_status_t s, const char *what)
{
    if (s != UCS_OK) {
        ubw_fail("%s failed: %s", what, ucs_status_string(s));
    }
}

/* Post a tagged send (to the other rank) or receive of len bytes at buf, in
 * memory of type mt; NULL where it completed at once. */
static void *ubw_post(ubw_t *u, int send, void *buf, size_t len, ucp_tag_t tag,
                      ucs_memory_type_t mt)
{
    ucp_request_param_t prm;
    ucs_status_ptr_t r;

    memset(&prm, 0, sizeof(prm));
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    prm.memory_type  = mt;
    r = send ? ucp_tag_send_nbx(u->ep, buf, len, tag, &prm)
             : ucp_tag_recv_nbx(u->worker, buf, len, tag, ~(ucp_tag_t)0, &prm);
    if (UCS_PTR_IS_ERR(r)) {
        ubw_fail("%s of %zu bytes failed: %s", send ? "ucp_tag_send_nbx" : "ucp_tag_recv_nbx",
                 len, ucs_status_string(UCS_PTR_STATUS(r)));
    }
    return r;
}

/* Progress the worker until every request of reqs[0..n) is done. */
static void ubw_wait(ubw_t *u, void **reqs, int n, const char *what)
{
    for (int i = 0; i < n; i++) {
        ucs_status_t s;

        if (reqs[i] == NULL) {
            continue;
        }
        while ((s = ucp_request_check_status(reqs[i])) == UCS_INPROGRESS) {
            ucp_worker_progress(u->worker);
        }
        ucp_request_free(reqs[i]);
        reqs[i] = NULL;
        ubw_ucx(s, what);
    }
}

/* A barrier that keeps the worker progressing (the other rank may need
 * this one's UCX to finish what it waits for), and waits for req too where
 * it is not NULL. */
static void ubw_barrier(ubw_t *u, void *req, const char *what)
{
    MPI_Request b;
    int done = 0;

    MPI_Ibarrier(MPI_COMM_WORLD, &b);
    while (!done || req != NULL) {
        ucp_worker_progress(u->worker);
        if (req != NULL) {
            ucs_status_t s = ucp_request_check_status(req);
            if (s != UCS_INPROGRESS) {
                ucp_request_free(req);
                req = NULL;
                ubw_ucx(s, what);
            }
        }
        if (!done) {
            MPI_Test(&b, &done, MPI_STATUS_IGNORE);
        }
    }
}

/* ---- the data: a pattern of the size, cleared and checked -------------- */

/* Byte i of the pattern of a size: a multiplicative hash of both, so that
 * a byte out of place, or a message of another size, shows. */
static unsigned char ubw_pattern(size_t i, size_t bytes)
{
    uint64_t x = ((uint64_t)i + (uint64_t)bytes * 0x632be59bd9b4e019ull) * 0x9e3779b97f4a7c15ull;

    return (unsigned char)(x >> 56);
}

/* Rank 0: its send buffer holds the pattern of the size. */
static void ubw_fill(ubw_t *u, size_t bytes)
{
    unsigned char *p = u->host != NULL ? u->host : (unsigned char *)u->sbuf;

    for (size_t i = 0; i < bytes; i++) {
        p[i] = ubw_pattern(i, bytes);
    }
#ifdef HAVE_CUDART
    if (u->host != NULL && cudaMemcpy(u->sbuf, u->host, bytes, cudaMemcpyHostToDevice) !=
                               cudaSuccess) {
        ubw_fail("cudaMemcpy to the send buffer failed: %s",
                 cudaGetErrorString(cudaGetLastError()));
    }
#endif
}

/* Rank 1: its receive buffer cleared, before the checked round. */
static void ubw_clear(ubw_t *u, size_t bytes)
{
#ifdef HAVE_CUDART
    if (u->host != NULL) {
        if (cudaMemset(u->rbuf, 0, bytes) != cudaSuccess || cudaDeviceSynchronize() !=
                                                                 cudaSuccess) {
            ubw_fail("cudaMemset of the receive buffer failed: %s",
                     cudaGetErrorString(cudaGetLastError()));
        }
        return;
    }
#endif
    memset(u->rbuf, 0, bytes);
}

/* Rank 1: the bytes of its receive buffer that differ from the pattern. */
static uint64_t ubw_wrong(ubw_t *u, size_t bytes)
{
    const unsigned char *p = (const unsigned char *)u->rbuf;
    uint64_t wrong         = 0;

#ifdef HAVE_CUDART
    if (u->host != NULL) {
        if (cudaMemcpy(u->host, u->rbuf, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
            ubw_fail("cudaMemcpy from the receive buffer failed: %s",
                     cudaGetErrorString(cudaGetLastError()));
        }
        p = u->host;
    }
#endif
    for (size_t i = 0; i < bytes; i++) {
        wrong += p[i] != ubw_pattern(i, bytes);
    }
    return wrong;
}

/* ---- the measurements --------------------------------------------------- */

/*
 * One round: rank 0 sends the window and waits for the ack; rank 1 receives
 * the window and sends the ack, which carries, on the checked round, the
 * bytes of its buffer that differ from the pattern. Returns the ack's
 * value on rank 0.
 */
static uint64_t ubw_round(ubw_t *u, const ubw_opts_t *o, size_t bytes, int check)
{
    uint64_t ack = 0;
    int w        = o->window;

    if (u->rank == 0) {
        u->reqs[w] = ubw_post(u, 0, &ack, sizeof(ack), UBW_TAG_ACK, UCS_MEMORY_TYPE_HOST);
        for (int i = 0; i < w; i++) {
            u->reqs[i] = ubw_post(u, 1, u->sbuf, bytes, UBW_TAG_DATA, u->mtype);
        }
        ubw_wait(u, u->reqs, w + 1, "a window of sends and its ack");
        return ack;
    }
    for (int i = 0; i < w; i++) {
        u->reqs[i] = ubw_post(u, 0, u->rbuf, bytes, UBW_TAG_DATA, u->mtype);
    }
    ubw_wait(u, u->reqs, w, "a window of receives");
    if (check) {
        ack = ubw_wrong(u, bytes);
    }
    u->reqs[0] = ubw_post(u, 1, &ack, sizeof(ack), UBW_TAG_ACK, UCS_MEMORY_TYPE_HOST);
    ubw_wait(u, u->reqs, 1, "the ack");
    return 0;
}

/* One ping-pong of the size: rank 1 sends back what it received. */
static void ubw_pingpong(ubw_t *u, size_t bytes)
{
    if (u->rank == 0) {
        u->reqs[0] = ubw_post(u, 0, u->rbuf, bytes, UBW_TAG_PONG, u->mtype);
        u->reqs[1] = ubw_post(u, 1, u->sbuf, bytes, UBW_TAG_PING, u->mtype);
        ubw_wait(u, u->reqs, 2, "a ping-pong");
        return;
    }
    u->reqs[0] = ubw_post(u, 0, u->rbuf, bytes, UBW_TAG_PING, u->mtype);
    ubw_wait(u, u->reqs, 1, "a ping");
    u->reqs[0] = ubw_post(u, 1, u->rbuf, bytes, UBW_TAG_PONG, u->mtype);
    ubw_wait(u, u->reqs, 1, "a pong");
}

/* Rank 0's row for one size (rank 1 takes its part); 1 if data was wrong. */
static int ubw_size(ubw_t *u, const ubw_opts_t *o, size_t bytes)
{
    double t0 = 0, gbs;
    uint64_t wrong;
    char latbuf[32] = "-";

    ubw_barrier(u, NULL, NULL);
    for (int r = 0; r < o->warmup + o->iters; r++) {
        if (r == o->warmup) {
            t0 = ubw_now_us();
        }
        ubw_round(u, o, bytes, 0);
    }
    gbs = (double)bytes * o->window * o->iters / (ubw_now_us() - t0) / 1e3;
    if (bytes <= UBW_LAT_MAX) {
        int n = o->window * o->iters, warm = o->window * o->warmup;

        ubw_barrier(u, NULL, NULL);
        for (int i = 0; i < warm + n; i++) {
            if (i == warm) {
                t0 = ubw_now_us();
            }
            ubw_pingpong(u, bytes);
        }
        snprintf(latbuf, sizeof(latbuf), "%.2f", (ubw_now_us() - t0) / n / 2);
    }
    /* the checked round, untimed */
    if (u->rank == 0) {
        ubw_fill(u, bytes);
    } else {
        ubw_clear(u, bytes);
    }
    ubw_barrier(u, NULL, NULL);
    wrong = ubw_round(u, o, bytes, 1);
    if (u->rank == 0) {
        printf("%12zu %10.3f %10s %8llu\n", bytes, gbs, latbuf, (unsigned long long)wrong);
        fflush(stdout);
        if (wrong != 0) {
            fprintf(stderr, "dfccl-ucx-bw: %llu of the %zu bytes rank 1 received differ from "
                    "what rank 0 sent\n", (unsigned long long)wrong, bytes);
        }
    }
    return wrong != 0;
}

/* ---- setup -------------------------------------------------------------- */

/*
 * -m cuda runs on both ranks or on neither: each that cannot says why (why
 * not NULL), and both leave with status 3.
 */
static void ubw_cuda_agree(ubw_t *u, const char *why)
{
    int ok = why == NULL, all = 0;

    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all) {
        return;
    }
    if (why != NULL) {
        fprintf(stderr, "dfccl-ucx-bw: -m cuda: rank %d: %s\n", u->rank, why);
    }
    if (u->worker != NULL) {
        ucp_worker_destroy(u->worker);
    }
    if (u->ucp != NULL) {
        ucp_cleanup(u->ucp);
    }
    MPI_Finalize();
    exit(UBW_EXIT_NO_CUDA);
}

/* -m cuda: this rank's GPU, local rank mod the devices of its host; NULL,
 * or why there is none. */
static const char *ubw_cuda_device(void)
{
#ifdef HAVE_CUDART
    static char why[160];
    MPI_Comm node;
    int local = 0, ndev = 0;
    cudaError_t e;

    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        snprintf(why, sizeof(why), "no GPU is visible (cudaGetDeviceCount: %s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return why;
    }
    e = cudaSetDevice(local % ndev);
    if (e != cudaSuccess) {
        snprintf(why, sizeof(why), "cudaSetDevice(%d): %s", local % ndev, cudaGetErrorString(e));
        return why;
    }
    return NULL;
#else
    return "this dfccl-ucx-bw was built without the CUDA runtime (configure found none)";
#endif
}

/* The UCX context and worker: UCX_* variables apply, with dfccl's default
 * transports where UCX_TLS is unset; *tls_p: the transports asked for. */
static void ubw_ucx_init(ubw_t *u, const ubw_opts_t *o, const char **tls_p)
{
    ucp_config_t *cfg;
    ucp_params_t prm;
    ucp_worker_params_t wprm;
    ucs_status_t s;

    ubw_ucx(ucp_config_read(NULL, NULL, &cfg), "ucp_config_read");
    *tls_p = getenv("UCX_TLS");
    if (*tls_p == NULL) {
        *tls_p = UBW_DEFAULT_TLS;
        ubw_ucx(ucp_config_modify(cfg, "TLS", UBW_DEFAULT_TLS),
                "ucp_config_modify(TLS=" UBW_DEFAULT_TLS ")");
    }
    /* as the net transport, which hands UCX host memory only */
    if (!o->cuda && getenv("UCX_MEMTYPE_CACHE") == NULL) {
        (void)ucp_config_modify(cfg, "MEMTYPE_CACHE", "n");
    }
    memset(&prm, 0, sizeof(prm));
    prm.field_mask = UCP_PARAM_FIELD_FEATURES;
    prm.features   = UCP_FEATURE_TAG;
    s              = ucp_init(&prm, cfg, &u->ucp);
    ucp_config_release(cfg);
    ubw_ucx(s, "ucp_init (check UCX_TLS)");
    memset(&wprm, 0, sizeof(wprm));
    wprm.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wprm.thread_mode = UCS_THREAD_MODE_SINGLE;
    ubw_ucx(ucp_worker_create(u->ucp, &wprm, &u->worker), "ucp_worker_create");
}

/* Whether the UCX context takes CUDA memory; NULL, or why not. */
static const char *ubw_ucx_cuda(ubw_t *u, const char *tls)
{
    static char why[256];
    ucp_context_attr_t attr;

    memset(&attr, 0, sizeof(attr));
    attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
    ubw_ucx(ucp_context_query(u->ucp, &attr), "ucp_context_query");
    if (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) {
        return NULL;
    }
    snprintf(why, sizeof(why), "the UCX context does not support CUDA memory with "
             "UCX_TLS=%s (a UCX built with CUDA needs cuda_copy among them, e.g. "
             "UCX_TLS=%s,cuda_copy)", tls, tls);
    return why;
}

/* Exchange the worker addresses through MPI and connect to the other rank. */
static void ubw_connect(ubw_t *u)
{
    ucp_address_t *addr;
    size_t len;
    uint64_t lens[2], mine;
    char *all, *me;
    size_t most;
    ucp_ep_params_t prm;

    ubw_ucx(ucp_worker_get_address(u->worker, &addr, &len), "ucp_worker_get_address");
    mine = len;
    MPI_Allgather(&mine, 1, MPI_UINT64_T, lens, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    most = lens[0] > lens[1] ? lens[0] : lens[1];
    all  = calloc(2, most);
    me   = calloc(1, most);
    if (all == NULL || me == NULL) {
        ubw_fail("out of host memory for %zu bytes of worker addresses", 3 * most);
    }
    memcpy(me, addr, len);
    ucp_worker_release_address(u->worker, addr);
    MPI_Allgather(me, (int)most, MPI_BYTE, all, (int)most, MPI_BYTE, MPI_COMM_WORLD);
    memset(&prm, 0, sizeof(prm));
    prm.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    prm.address    = (const ucp_address_t *)(all + (size_t)(1 - u->rank) * most);
    ubw_ucx(ucp_ep_create(u->worker, &prm, &u->ep), "ucp_ep_create");
    free(all);
    free(me);
}

static void ubw_alloc(ubw_t *u, const ubw_opts_t *o)
{
    u->reqs = calloc((size_t)o->window + 1, sizeof(void *));
    if (u->reqs == NULL) {
        ubw_fail("out of host memory%s", "");
    }
#ifdef HAVE_CUDART
    if (o->cuda) {
        u->mtype = UCS_MEMORY_TYPE_CUDA;
        u->host  = malloc(o->max_bytes);
        if (u->host == NULL || cudaMalloc((void **)&u->sbuf, o->max_bytes) != cudaSuccess ||
            cudaMalloc((void **)&u->rbuf, o->max_bytes) != cudaSuccess) {
            ubw_fail("cannot allocate 2 x %zu bytes of GPU memory and %zu of host memory",
                     o->max_bytes, o->max_bytes);
        }
        return;
    }
#endif
    u->mtype = UCS_MEMORY_TYPE_HOST;
    u->sbuf  = calloc(1, o->max_bytes);
    u->rbuf  = calloc(1, o->max_bytes);
    if (u->sbuf == NULL || u->rbuf == NULL) {
        ubw_fail("cannot allocate 2 x %zu bytes of host memory", o->max_bytes);
    }
}

static void ubw_free(ubw_t *u)
{
#ifdef HAVE_CUDART
    if (u->host != NULL) {
        cudaFree(u->sbuf);
        cudaFree(u->rbuf);
        free(u->host);
        u->sbuf = u->rbuf = NULL;
    }
#endif
    free(u->sbuf);
    free(u->rbuf);
    free(u->reqs);
}

/* Rank 0: the header, with the lanes of its endpoint (after a first
 * exchange, so that they are wired up). */
static void ubw_header(ubw_t *u, const ubw_opts_t *o, const char *tls, const char *hosts)
{
    char *info = NULL, *line, *save = NULL;
    size_t len = 0;
    FILE *f;

    printf("# dfccl-ucx-bw: UCP tagged messages from rank 0 (%s) to rank 1 (%s), %s memory, "
           "window %d, %d rounds after %d warmup\n", hosts, hosts + MPI_MAX_PROCESSOR_NAME,
           o->cuda ? "cuda" : "host", o->window, o->iters, o->warmup);
    printf("# UCX %s; UCX_TLS=%s (%s)", ucp_get_version_string(), tls,
           getenv("UCX_TLS") != NULL ? "from the environment"
                                     : "unset: the default of dfccl's net transport");
    if (getenv("UCX_NET_DEVICES") != NULL) {
        printf("; UCX_NET_DEVICES=%s", getenv("UCX_NET_DEVICES"));
    }
    printf("\n# rank 0's endpoint (ucp_ep_print_info):\n");
    f = open_memstream(&info, &len);
    if (f != NULL) {
        ucp_ep_print_info(u->ep, f);
        fclose(f);
        for (line = strtok_r(info, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
            printf("%s%s\n", line[0] == '#' ? "" : "# ", line);
        }
        free(info);
    }
    printf("# GB/s: size * window * rounds / time, one direction, 1e9 bytes/s; lat_us: half "
           "a ping-pong's round trip (sizes up to %d KiB); #wrong: bytes that differ in the "
           "checked round\n", UBW_LAT_MAX / 1024);
    printf("#%11s %10s %10s %8s\n", "bytes", "GB/s", "lat_us", "#wrong");
    fflush(stdout);
}

static void ubw_usage(void)
{
    printf("usage: mpirun -np 2 dfccl-ucx-bw [options]\n"
           "  -b, --minbytes SIZE  smallest size, K/M/G suffixes (8)\n"
           "  -e, --maxbytes SIZE  largest size (16M)\n"
           "  -f, --stepfactor F   size multiplier (2)\n"
           "  -w, --window N       sends in flight per round (16)\n"
           "  -n, --iters N        timed rounds per size (20)\n"
           "      --warmup N       untimed rounds per size before them (2)\n"
           "  -m, --memory host|cuda  where the buffers are (host); cuda needs a UCX\n"
           "                       built with CUDA and cuda_copy in UCX_TLS\n"
           "Rank 0 sends a window of tagged messages, rank 1 receives them and acks;\n"
           "GB/s is one direction. Sizes up to 64 KiB add a ping-pong latency (us).\n"
           "Without UCX_TLS, UCX takes tcp,sm,self, as dfccl's net transport does.\n");
}

static void ubw_parse(int argc, char **argv, ubw_opts_t *o)
{
    static const struct option longopts[] = {
        {"minbytes", 1, NULL, 'b'}, {"maxbytes", 1, NULL, 'e'}, {"stepfactor", 1, NULL, 'f'},
        {"window", 1, NULL, 'w'},   {"iters", 1, NULL, 'n'},    {"warmup", 1, NULL, 'W'},
        {"memory", 1, NULL, 'm'},   {"help", 0, NULL, 'h'},     {NULL, 0, NULL, 0}};
    long v = 0;
    int c;

    opterr = 0; /* its complaints come from ubw_usage_error, once */
    while ((c = getopt_long(argc, argv, "b:e:f:w:n:m:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'b':
        case 'e':
            if (bench_args_size(optarg, c == 'b' ? &o->min_bytes : &o->max_bytes) != 0) {
                ubw_usage_error("%s takes a size in bytes from 1 up to 1T, with an optional "
                                "K, M or G suffix (8, 64K, 1M, 1G), not '%s'",
                                c == 'b' ? "-b/--minbytes" : "-e/--maxbytes", optarg);
            }
            break;
        case 'f':
            if (bench_args_factor(optarg, &o->factor) != 0) {
                ubw_usage_error("-f/--stepfactor takes a number above 1 (up to 1024), not "
                                "'%s'", optarg);
            }
            break;
        case 'w':
        case 'n':
        case 'W': {
            const char *opt = c == 'w' ? "-w/--window" : c == 'n' ? "-n/--iters" : "--warmup";
            long lo = c == 'W' ? 0 : 1, hi = c == 'w' ? 1024 : 1000000;
            if (bench_args_int(optarg, lo, hi, &v) != 0) {
                ubw_usage_error("%s takes an integer from %ld to %ld, not '%s'", opt, lo, hi,
                                optarg);
            }
            *(c == 'w' ? &o->window : c == 'n' ? &o->iters : &o->warmup) = (int)v;
            break;
        }
        case 'm':
            if (strcmp(optarg, "host") != 0 && strcmp(optarg, "cuda") != 0) {
                ubw_usage_error("-m/--memory takes host or cuda, not '%s'", optarg);
            }
            o->cuda = strcmp(optarg, "cuda") == 0;
            break;
        case 'h':
            if (ubw_rank == 0) {
                ubw_usage();
            }
            MPI_Finalize();
            exit(0);
        default:
            if (optopt != 0 && strchr("befwnm", optopt) != NULL) {
                ubw_usage_error("option -%c needs a value", optopt);
            } else if (optopt != 0) {
                ubw_usage_error("unknown option -%c", optopt);
            }
            ubw_usage_error("unknown option, or one without its value: '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) {
        ubw_usage_error("unexpected argument '%s'", argv[optind]);
    }
    if (o->min_bytes > o->max_bytes) {
        char lo[32], hi[32];
        ubw_usage_error("-b/--minbytes (%s) is larger than -e/--maxbytes (%s): no size to run",
                        bench_args_size_text(o->min_bytes, lo, sizeof(lo)),
                        bench_args_size_text(o->max_bytes, hi, sizeof(hi)));
    }
}

int main(int argc, char **argv)
{
    ubw_opts_t o = {.min_bytes = 8, .max_bytes = 16ul << 20, .factor = 2.0, .window = 16,
                    .iters = 20, .warmup = 2};
    ubw_t u;
    char hosts[2 * MPI_MAX_PROCESSOR_NAME], me[MPI_MAX_PROCESSOR_NAME];
    const char *tls;
    size_t bytes;
    int nranks, len = 0, failed = 0;

    memset(&u, 0, sizeof(u));
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &u.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    ubw_rank = u.rank;
    ubw_parse(argc, argv, &o);
    if (nranks != 2) {
        ubw_usage_error("runs on 2 processes (mpirun -np 2), not %d", nranks);
    }
    memset(me, 0, sizeof(me));
    MPI_Get_processor_name(me, &len);
    MPI_Allgather(me, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                  MPI_COMM_WORLD);
    if (o.cuda) {
        ubw_cuda_agree(&u, ubw_cuda_device());
    }
    ubw_ucx_init(&u, &o, &tls);
    if (o.cuda) {
        ubw_cuda_agree(&u, ubw_ucx_cuda(&u, tls));
    }
    ubw_alloc(&u, &o);
    ubw_connect(&u);
    /* a first exchange wires the endpoints up before rank 0 prints its lanes */
    ubw_pingpong(&u, 1);
    ubw_barrier(&u, NULL, NULL);
    if (u.rank == 0) {
        ubw_header(&u, &o, tls, hosts);
    }
    for (bytes = o.min_bytes; bytes <= o.max_bytes;) {
        size_t next = (size_t)((double)bytes * o.factor);
        failed |= ubw_size(&u, &o, bytes);
        bytes = next > bytes ? next : bytes + 1;
    }
    {
        /* flush and close the endpoint on both ranks before either worker goes */
        ucp_request_param_t prm;
        void *req;

        memset(&prm, 0, sizeof(prm));
        req = ucp_ep_close_nbx(u.ep, &prm);
        if (UCS_PTR_IS_ERR(req)) {
            ubw_fail("ucp_ep_close_nbx failed: %s", ucs_status_string(UCS_PTR_STATUS(req)));
        }
        ubw_barrier(&u, req, "closing the endpoint");
    }
    ucp_worker_destroy(u.worker);
    ucp_cleanup(u.ucp);
    ubw_free(&u);
    MPI_Finalize();
    return failed;
}
