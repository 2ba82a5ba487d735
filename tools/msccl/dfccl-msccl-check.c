/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dfccl-msccl-check FILE...: load MSCCL algorithm files as dfccl does and
 * say, for each, what it is or why dfccl refuses it (file, line, rule).
 * Exit status 0 when every file loads, 1 when one does not, 2 on usage.
 */
#include <stdio.h>
#include <string.h>

#include "../../runtime/msccl.c"

static const char *const protos[] = {"Simple", "LL", "LL128"};

int main(int argc, char **argv)
{
    int bad = 0;

    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        fprintf(argc < 2 ? stderr : stdout,
                "usage: dfccl-msccl-check FILE...\n"
                "Loads each MSCCL algorithm XML file as dfccl does and prints what it holds,\n"
                "or the file, line and rule it breaks. Exit status: 0 every file loads, 1 one\n"
                "does not.\n");
        return argc < 2 ? 2 : 0;
    }
    for (int i = 1; i < argc; i++) {
        dfccl_msccl_prog_t *p;
        char err[1024];
        long tbs = 0, steps = 0;

        if (dfccl_msccl_load(argv[i], &p, err, sizeof(err)) != 0) {
            printf("%s\n", err);
            bad = 1;
            continue;
        }
        for (int g = 0; g < p->ngpus; g++) {
            tbs += p->gpus[g].ntbs;
            for (int t = 0; t < p->gpus[g].ntbs; t++) {
                steps += p->gpus[g].tbs[t].nsteps;
            }
        }
        printf("%s: ok: \"%s\", %s on %d ranks, %s, %d channel(s), %d chunks per loop, ", argv[i],
               p->name, dfccl_msccl_coll_name(p->coll), p->ngpus, protos[p->proto], p->nchannels,
               p->nchunksperloop);
        if (p->max_bytes == UINT64_MAX) {
            printf("from %llu bytes up", (unsigned long long)p->min_bytes);
        } else {
            printf("%llu to %llu bytes", (unsigned long long)p->min_bytes,
                   (unsigned long long)p->max_bytes);
        }
        printf(", %s; %ld thread blocks, %ld steps\n",
               p->inplace && p->outofplace ? "in and out of place"
               : p->inplace                ? "in place"
                                           : "out of place",
               tbs, steps);
        dfccl_msccl_free(p);
    }
    return bad;
}
