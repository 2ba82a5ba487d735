/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Host build of the daemon: the scheduler and primitives of daemon.h
 * compiled by the host C compiler. A daemon "block" is one CPU thread that
 * calls dfccl_daemon_host_block(); runtime/backend/host.c starts them.
 */
#include "daemon_host.h"

#include "daemon.h"

int dfccl_daemon_host_block(const dfccl_daemon_args_t *args, uint32_t block)
{
    return dfccl_daemon_block(args, block);
}
