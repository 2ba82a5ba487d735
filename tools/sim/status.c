/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Status strings, user messages and the logging allocator of dfccl-sim: the
 * small pieces every other file of the simulator uses to report errors.
 */
#include "sim.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

const char *dfccl_sim_status_string(dfccl_sim_status_t status)
{
    switch (status) {
    case DFCCL_SIM_OK:
        return "success";
    case DFCCL_SIM_ERR_NO_MEMORY:
        return "out of memory";
    case DFCCL_SIM_ERR_IO:
        return "input/output error";
    case DFCCL_SIM_ERR_PARSE:
        return "not valid JSON";
    case DFCCL_SIM_ERR_INVALID_PARAM:
        return "invalid parameter";
    case DFCCL_SIM_ERR_TOO_LARGE:
        return "configuration too large";
    case DFCCL_SIM_ERR_BAD_EVENT:
        return "event not allowed";
    case DFCCL_SIM_ERR_SYSTEM:
        return "system call failed";
    }
    return "unknown status";
}

void dfccl_sim_msg_set(dfccl_sim_msg_t *msg, const char *fmt, ...)
{
    va_list ap;

    if (msg == NULL) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(msg->text, sizeof(msg->text), fmt, ap);
    va_end(ap);
}

void *dfccl_sim_calloc(size_t count, size_t size, const char *what)
{
    void *ptr;

    if (count == 0) {
        count = 1;
    }
    /* 64-byte aligned: some arrays hold over-aligned structs (the per-GPU
     * state is aligned(32)), which calloc's 16 bytes do not honour. */
    if (size != 0 && count > SIZE_MAX / size) {
        ptr = NULL;
    } else if (posix_memalign(&ptr, 64, count * size) != 0) {
        ptr = NULL;
    } else {
        memset(ptr, 0, count * size);
    }
    if (ptr == NULL) {
        fprintf(stderr, "dfccl-sim: cannot allocate %zu x %zu bytes for %s\n", count, size,
                what);
    }
    return ptr;
}
