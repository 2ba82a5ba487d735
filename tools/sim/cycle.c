/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Exact cycle search in the dependency graph of a round (see round.h for the
 * nodes and edges).
 *
 * 1. Before an event the graph has no cycle (the round would have ended), so
 *    a cycle after it must use an edge the event added.  The event records,
 *    for every new edge, one node the edge touches (its root).
 * 2. A depth-first search from the roots, with the usual white / grey / black
 *    colouring shared across roots, meets a grey node again exactly when a
 *    cycle is reachable from a root; every cycle through a new edge contains
 *    a root, so the answer is exact.
 * 3. Colours are stamps of a per-round epoch, so nothing is cleared between
 *    searches, and the search stack is preallocated: a search allocates
 *    nothing and visits only what the new edges can reach.
 */
#include "round.h"

#include <string.h>

/* The next successor of the node on top of the stack, or -1. */
static inline int32_t dfccl_sim_cycle_next(dfccl_sim_round_t *round, dfccl_sim_frame_t *frame)
{
    const dfccl_sim_world_t *world = round->world;
    const uint8_t *state           = round->state;
    int32_t node                   = frame->node;
    int32_t part_num               = world->part_num;
    const dfccl_sim_member_t *member;
    dfccl_sim_gpu_t *gs;
    const dfccl_sim_entry_t *slots;
    int32_t c, b, end, q, h;
    unsigned st;

    if (node < part_num) {
        /* E(p): the members of its collective that keep it from succeeding */
        if ((frame->it == 0) && !dfccl_sim_part_live(round, node)) {
            return -1;
        }
        c   = world->part_coll[node];
        b   = world->coll_part0[c];
        end = world->coll_part0[c + 1];
        while (b + frame->it < end) {
            member = &world->coll_members[b + frame->it++];
            q      = member->part;
            h      = member->gpu;
            st     = state[q] & DFCCL_SIM_ST_MASK;
            if (st == DFCCL_SIM_PART_INVOKED) {
                return dfccl_sim_node_r(round, h);
            }
            if ((st == DFCCL_SIM_PART_UNINVOKED) && (round->gpu[h].pending > 0)) {
                return dfccl_sim_node_z(round, h);
            }
        }
        return -1;
    }

    if (node < part_num + world->gpu_num) {
        /* R(h): every executing part of h */
        h  = node - part_num;
        gs = &round->gpu[h];
        if (!round->finite || (frame->it >= gs->exec_cnt)) {
            return -1;
        }
        return round->slots[(size_t)h * (size_t)world->limit + (size_t)frame->it++].part;
    }

    /* Z(h): the parts of h's synchronization that are not done */
    h  = node - part_num - world->gpu_num;
    gs = &round->gpu[h];
    if (gs->pending == 0) {
        return -1;
    }
    if (round->finite) {
        slots = round->slots + (size_t)h * (size_t)world->limit;
        while (frame->it < gs->exec_cnt) {
            q = slots[frame->it++].part;
            if (state[q] & DFCCL_SIM_ST_SYNC) {
                return q;
            }
        }
        return -1;
    }
    if (frame->it == 0) {
        dfccl_sim_lo_advance(round, h);
    }
    while (gs->lo + frame->it < gs->hi) {
        q = dfccl_sim_world_part(world, h, gs->lo + frame->it++);
        if (dfccl_sim_part_live(round, q)) {  /* all of them, without a cap */
            return q;
        }
    }
    return -1;
}

/* Depth-first search from count roots; 1 if it meets a cycle. */
static int dfccl_sim_cycle_search(dfccl_sim_round_t *round, const int32_t *roots, int32_t count)
{
    dfccl_sim_frame_t *stack = round->stack;
    uint32_t *mark           = round->mark;
    uint32_t grey, black;
    int32_t sp, r, next;

    if (++round->epoch >= 0x7fffffffu) {
        memset(mark, 0, (size_t)round->node_num * sizeof(uint32_t));
        round->epoch = 1;
    }
    grey  = 2 * round->epoch;
    black = grey + 1;

    for (r = 0; r < count; r++) {
        if (mark[roots[r]] >= grey) {
            continue;  /* already searched from here in this pass */
        }
        mark[roots[r]] = grey;
        stack[0].node  = roots[r];
        stack[0].it    = 0;
        sp             = 1;
        while (sp > 0) {
            next = dfccl_sim_cycle_next(round, &stack[sp - 1]);
            if (next < 0) {
                mark[stack[--sp].node] = black;
                continue;
            }
            if (mark[next] == grey) {
                return 1;
            }
            if (mark[next] == black) {
                continue;
            }
            mark[next]        = grey;
            stack[sp].node    = next;
            stack[sp].it      = 0;
            sp++;
        }
    }
    return 0;
}

int dfccl_sim_cycle_find(dfccl_sim_round_t *round)
{
    int found = dfccl_sim_cycle_search(round, round->roots, round->nroots);

    round->nroots = 0;
    return found;
}

int dfccl_sim_cycle_find_all(dfccl_sim_round_t *round)
{
    int32_t n;
    int found;

    /* every node as a root; the roots array has room for all of them */
    for (n = 0; n < round->node_num; n++) {
        round->roots[n] = n;
    }
    found         = dfccl_sim_cycle_search(round, round->roots, round->node_num);
    round->nroots = 0;
    return found;
}
