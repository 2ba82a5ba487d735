/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Logging, user-facing error messages and small lookup helpers (names of
 * types, ops and collectives; status strings; the clock).
 */
#include "dfccl_int.h"

#include <stdarg.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int dfccl_log_level = 0;

static __thread char dfccl_last_error[2048];
static __thread int dfccl_quiet_depth;

/* The last error line printed by the process, and its lock: a failure seen
 * by several threads or several calls (a collective's error at its run
 * and at its wait) is printed once. */
static pthread_mutex_t dfccl_printed_lock = PTHREAD_MUTEX_INITIALIZER;
static char dfccl_printed[2048];

void dfccl_log_msg(int level, const char *file, int line, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;

    if (level > dfccl_log_level) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    fprintf(stderr, "dfccl[%d]: %s (%s:%d)\n", (int)getpid(), buf, file, line);
}

dfccl_status_t dfccl_error(dfccl_status_t status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(dfccl_last_error, sizeof(dfccl_last_error), fmt, ap);
    va_end(ap);
    if (dfccl_log_level >= 0 && dfccl_quiet_depth == 0) {
        dfccl_print_error(dfccl_last_error);
    }
    return status;
}

void dfccl_print_error(const char *msg)
{
    int same;

    pthread_mutex_lock(&dfccl_printed_lock);
    same = strcmp(dfccl_printed, msg) == 0;
    if (!same) {
        snprintf(dfccl_printed, sizeof(dfccl_printed), "%s", msg);
        fprintf(stderr, "dfccl[%d]: error: %s\n", (int)getpid(), msg);
    }
    pthread_mutex_unlock(&dfccl_printed_lock);
}

void dfccl_error_quiet(int on)
{
    dfccl_quiet_depth += on ? 1 : -1;
}

void dfccl_set_last_error(const char *msg)
{
    snprintf(dfccl_last_error, sizeof(dfccl_last_error), "%s", msg);
}

const char *dfcclGetLastErrorMessage(void)
{
    return dfccl_last_error;
}

const char *dfcclGetErrorString(dfccl_status_t status)
{
    switch (status) {
    case DFCCL_OK:              return "success";
    case DFCCL_INPROGRESS:      return "in progress";
    case DFCCL_ERR_INVALID_ARG: return "invalid argument";
    case DFCCL_ERR_NO_MEMORY:   return "out of memory";
    case DFCCL_ERR_UNSUPPORTED: return "unsupported type, op, algorithm or backend";
    case DFCCL_ERR_NOT_FOUND:   return "unknown collective id or group";
    case DFCCL_ERR_BUSY:        return "busy: collective in flight or work outstanding";
    case DFCCL_ERR_TIMEOUT:     return "timed out";
    case DFCCL_ERR_SYSTEM:      return "system call failed";
    case DFCCL_ERR_CUDA:        return "CUDA call failed";
    case DFCCL_ERR_BOOTSTRAP:   return "bootstrap (out-of-band allgather) failed";
    case DFCCL_ERR_MISMATCH:    return "ranks registered mismatched collectives";
    case DFCCL_ERR_ABORTED:     return "rank context aborted";
    case DFCCL_ERR_TRANSPORT:   return "connector transport failed";
    case DFCCL_ERR_INTERNAL:    return "internal error";
    default:                    return "unknown status";
    }
}

uint64_t dfccl_time_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char *dfccl_dtype_name(int dtype)
{
    static const char *names[] = {"int8",    "uint8",    "int32",   "uint32",  "int64",
                                  "uint64",  "float16",  "bfloat16", "float32", "float64"};
    return (dtype >= 0 && dtype < DFCCL_DATATYPE_COUNT) ? names[dtype] : "unknown-type";
}

const char *dfccl_op_name(int op)
{
    static const char *names[] = {"sum", "prod", "min", "max", "avg"};
    return (op >= 0 && op < DFCCL_OP_COUNT) ? names[op] : "unknown-op";
}

const char *dfccl_coll_name(int kind)
{
    static const char *names[] = {"allreduce", "allgather", "reduce-scatter", "reduce",
                                  "broadcast", "alltoall", "alltoallv"};
    return (kind >= 0 && kind < DFCCL_COLL_KIND_COUNT) ? names[kind] : "unknown-collective";
}

size_t dfccl_dtype_bytes(int dtype)
{
    static const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
    return (dtype >= 0 && dtype < DFCCL_DATATYPE_COUNT) ? sizes[dtype] : 0;
}

void dfccl_coll_label(struct dfccl_rank_ctx *ctx, int id, char *buf, size_t len)
{
    const dfccl_coll_t *c = &ctx->colls[id];

    snprintf(buf, len, "collective %d (%s of %llu %s) on group %s (rank %d of %d)", id,
             dfccl_coll_name(c->st.kind), (unsigned long long)c->st.count,
             dfccl_dtype_name(c->st.dtype), c->group->name, c->group->rank, c->group->nranks);
}

void dfccl_coll_describe_sig(const uint64_t sig[8], char *buf, size_t len)
{
    snprintf(buf, len, "%s of %llu %s (op %s, root %d), registration #%llu, %u channel(s)",
             dfccl_coll_name((int)(sig[1] & 0xffff)), (unsigned long long)sig[2],
             dfccl_dtype_name((int)((sig[1] >> 16) & 0xffff)),
             dfccl_op_name((int)((sig[1] >> 32) & 0xffff)), (int)(uint32_t)sig[3],
             (unsigned long long)sig[6], (unsigned)(uint32_t)sig[4]);
}
