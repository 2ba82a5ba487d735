/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for the MSCCL XML loader (runtime/msccl.c): the input
 * is parsed as a program file. A refusal must come with a message that
 * names the file; an accepted program must hold what the loader promises
 * (every index in range, every dependency on an existing step that says
 * hasdep, every send with a send peer), so that the executor can trust it.
 * Build and run it with scripts/fuzz.sh (target msccl).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msccl.c"

#define FZ_NAME "fuzz_msccl_xml"
#include "fuzz_assert.h"

static void fz_check(const dfccl_msccl_prog_t *p)
{
    FZ_ASSERT(p->ngpus >= 1 && p->ngpus <= DFCCL_MSCCL_MAX_RANKS, "ngpus %d", p->ngpus);
    FZ_ASSERT(p->nchannels >= 1 && p->nchannels <= DFCCL_MSCCL_MAX_CHANNELS, "nchannels %d",
              p->nchannels);
    FZ_ASSERT(p->coll >= 0 && p->coll < DFCCL_MSCCL_NCOLLS, "coll %d", p->coll);
    FZ_ASSERT(p->min_bytes <= p->max_bytes, "bytes %llu..%llu",
              (unsigned long long)p->min_bytes, (unsigned long long)p->max_bytes);
    for (int g = 0; g < p->ngpus; g++) {
        const dfccl_msccl_gpu_t *gpu = &p->gpus[g];
        for (int t = 0; t < gpu->ntbs; t++) {
            const dfccl_msccl_tb_t *tb = &gpu->tbs[t];
            FZ_ASSERT(tb->send >= -1 && tb->send < p->ngpus && tb->send != g, "send %d", tb->send);
            FZ_ASSERT(tb->recv >= -1 && tb->recv < p->ngpus && tb->recv != g, "recv %d", tb->recv);
            FZ_ASSERT(tb->chan >= 0 && tb->chan < p->nchannels, "chan %d", tb->chan);
            for (int s = 0; s < tb->nsteps; s++) {
                const dfccl_msccl_step_t *st = &tb->steps[s];
                const uint8_t does = dfccl_msccl_does[st->type];
                FZ_ASSERT(st->type < DFCCL_MSCCL_NTYPES, "type %d", st->type);
                FZ_ASSERT(!(does & DFCCL_M_SEND) || tb->send >= 0, "send without a peer");
                FZ_ASSERT(!(does & DFCCL_M_RECV) || tb->recv >= 0, "receive without a peer");
                FZ_ASSERT(!(does & DFCCL_M_SRC) ||
                              (st->srcoff >= 0 && st->srcoff + st->cnt <= gpu->chunks[st->srcbuf]),
                          "src chunks");
                FZ_ASSERT(!(does & DFCCL_M_DST) ||
                              (st->dstoff >= 0 && st->dstoff + st->cnt <= gpu->chunks[st->dstbuf]),
                          "dst chunks");
                if (st->depid >= 0) {
                    FZ_ASSERT(st->depid < gpu->ntbs && st->depid != t, "depid %d", st->depid);
                    FZ_ASSERT(st->deps >= 0 && st->deps < gpu->tbs[st->depid].nsteps &&
                                  gpu->tbs[st->depid].steps[st->deps].hasdep,
                              "deps %d", st->deps);
                }
            }
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dfccl_msccl_prog_t *p = NULL;
    char err[512];

    err[0] = '\0';
    if (dfccl_msccl_parse("in.xml", (const char *)data, size, &p, err, sizeof(err)) == 0) {
        FZ_ASSERT(p != NULL, "accepted without a program");
        fz_check(p);
        dfccl_msccl_free(p);
    } else {
        FZ_ASSERT(p == NULL, "refused with a program");
        FZ_ASSERT(strncmp(err, "in.xml", 6) == 0 && strlen(err) > 10, "message \"%s\"", err);
    }
    return 0;
}
