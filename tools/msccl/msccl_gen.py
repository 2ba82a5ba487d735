#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Write MSCCL algorithm XML files, and check such files by simulating them.

The files are in the format that microsoft/msccl-tools writes and the MSCCL
executor (msccl-executor-nccl) reads: an <algo> of <gpu>s, each a list of
thread blocks (<tb>), each a list of <step>s.

    msccl_gen.py ring-allreduce --ranks 8 --instances 2 -o ring.xml
    msccl_gen.py ring-allgather --ranks 8 --instances 4 -o ag.xml
    msccl_gen.py ring-reduce-scatter --ranks 8 --instances 4 -o rs.xml
    msccl_gen.py allpairs-allreduce --ranks 8 -o allpairs.xml
    msccl_gen.py allpairs-allreduce --ranks 2 --phases 1 --instances 8 -o ap1.xml
    msccl_gen.py hierarchical-allreduce --ranks 8 --local 4 -o hier.xml
    msccl_gen.py two-step-alltoall --ranks 8 --local 4 -o a2a.xml
    msccl_gen.py check ring.xml allpairs.xml

`check` runs a file on small integer data and fails on a deadlock, a data
race between thread blocks, a wrong result or a rule of the format broken.
Every generated program is checked the same way before it is written.

Python 3 standard library only.
"""

import argparse
import collections
import os
import re
import sys
import xml.etree.ElementTree as ET

INT64_MAX = (1 << 63) - 1
PROTOS = ('Simple', 'LL', 'LL128')
MIN_RANKS, MAX_RANKS = 2, 16

# Limits of the MSCCL executor as built by default (msccl_struct.h, its
# makefiles): a file beyond them is refused there, so refuse it here too.
EXEC_MAX_STEPS = 64          # MSCCL_MAX_NUM_STEPS, steps per thread block
EXEC_MAX_COUNT = 72          # MSCCL_MAX_COUNT, cnt must stay below it
EXEC_MAX_TBS_PER_CHANNEL = 32
EXEC_MAX_CHANNELS = 32       # MAXCHANNELS
# Messages a connection buffers: NCCL's FIFO has 8 steps and one MSCCL
# transmission takes at most 4 of them (Simple; 1 with LL and LL128).
EXEC_MIN_SLOTS = 2

# What each step type does: receives, sends, reads src, reads dst, writes dst.
RECV, SEND, RSRC, RDST, WDST = 1, 2, 4, 8, 16
DOES = {
    's': SEND | RSRC,
    'r': RECV | WDST,
    'rcs': RECV | SEND | WDST,
    'rrs': RECV | SEND | RSRC,
    'rrc': RECV | RSRC | WDST,
    'rrcs': RECV | SEND | RSRC | WDST,
    'cpy': RSRC | WDST,
    're': RSRC | RDST | WDST,
    'nop': 0,
}
BUFS = ('i', 'o', 's')


# ---------------------------------------------------------------------------
# Building programs
# ---------------------------------------------------------------------------

class Step(object):
    """One step of a thread block while a program is built.

    Dependencies are kept as Step objects until finish(): inserting the nops
    that carry extra dependencies renumbers steps, so indices come last."""

    __slots__ = ('rank', 'tb', 'pos', 'type', 'src', 'dst', 'cnt', 'deps',
                 'dep', 'index', 'hasdep')

    def __init__(self, rank, tb, pos, type_, src, dst, cnt, deps):
        self.rank, self.tb, self.pos = rank, tb, pos
        self.type, self.src, self.dst, self.cnt = type_, src, dst, cnt
        self.deps = list(deps)
        self.dep = None
        self.index = -1
        self.hasdep = 0


class ThreadBlock(object):
    def __init__(self, tid, send, recv, chan):
        self.id, self.send, self.recv, self.chan = tid, send, recv, chan
        self.steps = []


class Builder(object):
    """Collects thread blocks and steps, then writes the XML."""

    def __init__(self, name, coll, ngpus, nchunksperloop, nchannels, chunks,
                 proto, inplace, outofplace, min_bytes, max_bytes):
        self.name, self.coll, self.ngpus = name, coll, ngpus
        self.nchunksperloop, self.nchannels = nchunksperloop, nchannels
        self.chunks = chunks            # (i_chunks, o_chunks, s_chunks)
        self.proto, self.inplace, self.outofplace = proto, inplace, outofplace
        self.min_bytes, self.max_bytes = min_bytes, max_bytes
        self.tbs = [[] for _ in range(ngpus)]
        self._by_key = {}

    def tb(self, rank, send=-1, recv=-1, chan=0):
        """The thread block of `rank` with these peers on `chan`, made on
        first use. A channel holds one connection to a peer each way, so a
        second block sending to (or receiving from) the same peer on the same
        channel is a bug in the generator."""
        key = (rank, send, recv, chan)
        if key in self._by_key:
            return self._by_key[key]
        for t in self.tbs[rank]:
            if t.chan == chan and ((send >= 0 and t.send == send) or
                                   (recv >= 0 and t.recv == recv)):
                raise AssertionError('gpu %d channel %d: two thread blocks on one '
                                     'connection' % (rank, chan))
        t = ThreadBlock(len(self.tbs[rank]), send, recv, chan)
        self.tbs[rank].append(t)
        self._by_key[key] = t
        return t

    def step(self, rank, tb, type_, src=None, dst=None, cnt=1, deps=()):
        """Append a step; src and dst are (buffer, chunk offset) or None.
        deps are steps of other thread blocks of `rank` to wait for."""
        st = Step(rank, tb, len(tb.steps), type_, src, dst, cnt, deps)
        tb.steps.append(st)
        return st

    def finish(self):
        """Turn dependency lists into what the format can say: one depid/deps
        per step. Extra dependencies go on nops just before the step, which is
        how the executor collects several waits for one step (it also refuses
        nops with waits that are not followed by a step that waits itself, so
        the step keeps the last one)."""
        for rank in range(self.ngpus):
            for tb in self.tbs[rank]:
                waited = {}   # other thread block id -> latest pos waited for
                out = []
                for st in tb.steps:
                    latest = {}
                    for d in st.deps:
                        if d.rank != rank:
                            raise AssertionError('dependency across ranks')
                        if d.tb is tb:
                            # program order already covers it
                            if d.pos >= st.pos:
                                raise AssertionError('dependency on a later step')
                            continue
                        if waited.get(d.tb.id, -1) >= d.pos:
                            continue    # an earlier step already waited for it
                        if d.tb.id not in latest or latest[d.tb.id].pos < d.pos:
                            latest[d.tb.id] = d
                    deps = [latest[k] for k in sorted(latest)]
                    for d in deps:
                        waited[d.tb.id] = d.pos
                    for d in deps[:-1]:
                        nop = Step(rank, tb, -1, 'nop', None, None, 0, ())
                        nop.dep = d
                        out.append(nop)
                    st.dep = deps[-1] if deps else None
                    out.append(st)
                tb.steps = out
                for i, st in enumerate(out):
                    st.index = i
        for rank in range(self.ngpus):
            for tb in self.tbs[rank]:
                for st in tb.steps:
                    if st.dep is not None:
                        st.dep.hasdep = 1

    def xml(self):
        """The program as text. Written by hand rather than by ElementTree:
        the executor's own XML reader wants exactly one space between
        attributes, no XML declaration and no tabs."""
        a = ['<algo name="%s" proto="%s" nchannels="%d" nchunksperloop="%d" '
             'ngpus="%d" coll="%s" inplace="%d" outofplace="%d" minBytes="%d" '
             'maxBytes="%d">' % (self.name, self.proto, self.nchannels,
                                 self.nchunksperloop, self.ngpus, self.coll,
                                 self.inplace, self.outofplace,
                                 self.min_bytes, self.max_bytes)]
        ic, oc, sc = self.chunks
        for rank in range(self.ngpus):
            a.append('  <gpu id="%d" i_chunks="%d" o_chunks="%d" s_chunks="%d">'
                     % (rank, ic, oc, sc))
            for tb in self.tbs[rank]:
                a.append('    <tb id="%d" send="%d" recv="%d" chan="%d">'
                         % (tb.id, tb.send, tb.recv, tb.chan))
                for st in tb.steps:
                    # unused sides get msccl-tools' placeholders
                    sb, so = st.src if st.src else ('i', -1)
                    db, do = st.dst if st.dst else ('o', -1)
                    depid, deps = ((st.dep.tb.id, st.dep.index)
                                   if st.dep is not None else (-1, -1))
                    a.append('      <step s="%d" type="%s" srcbuf="%s" srcoff="%d" '
                             'dstbuf="%s" dstoff="%d" cnt="%d" depid="%d" deps="%d" '
                             'hasdep="%d"/>' % (st.index, st.type, sb, so, db, do,
                                                st.cnt, depid, deps, st.hasdep))
                a.append('    </tb>')
            a.append('  </gpu>')
        a.append('</algo>')
        return '\n'.join(a) + '\n'


# Building blocks shared by the programs. `members` lists the ranks taking
# part in ring (or group) order; off(j) is the first chunk of shard j, which
# is `cnt` chunks long; `src` is the buffer holding each rank's contribution.

def ring_reduce_scatter(b, members, off, cnt, src, chan, last, first_deps=None):
    """Reduce-scatter around the ring members[p] -> members[p+1]. The member
    at position p ends holding the reduction of shard p+1 in the output,
    written by its last step (`last`: rrc, or rrcs to start an all-gather in
    the same pass). Returns ({rank: thread block}, {rank: last step})."""
    n = len(members)
    tbs, finals = {}, {}
    for p, r in enumerate(members):
        tb = b.tb(r, send=members[(p + 1) % n], recv=members[(p - 1) % n], chan=chan)
        tbs[r] = tb
        deps = (first_deps or {}).get(r, ())
        b.step(r, tb, 's', (src, off(p)), (src, off(p)), cnt, deps)
        for t in range(1, n - 1):
            j = (p - t) % n
            b.step(r, tb, 'rrs', (src, off(j)), (src, off(j)), cnt)
        j = (p + 1) % n
        finals[r] = b.step(r, tb, last, (src, off(j)), ('o', off(j)), cnt)
    return tbs, finals


def ring_allgather(b, members, off, cnt, tbs, started, first_deps=None):
    """All-gather of the output shards that ring_reduce_scatter left (member
    p owns shard p+1), on the same thread blocks. `started`: the reduce-
    scatter ended with rrcs, which already sent the owned shard on."""
    n = len(members)
    lasts = {}
    for p, r in enumerate(members):
        tb = tbs[r]
        if not started:
            own = (p + 1) % n
            b.step(r, tb, 's', ('o', off(own)), ('o', off(own)), cnt,
                   (first_deps or {}).get(r, ()))
        for t in range(1, n - 1):
            j = (p + 1 - t) % n
            b.step(r, tb, 'rcs', ('o', off(j)), ('o', off(j)), cnt)
        j = (p + 2) % n
        lasts[r] = b.step(r, tb, 'r', ('o', off(j)), ('o', off(j)), cnt)
    return lasts


def allpairs_allreduce(b, members, off, cnt, src, chan, sbase, first_deps=None):
    """All-pairs allreduce: member p owns shard p. Every member sends each
    peer that peer's shard; the owner reduces the contributions and sends the
    result to every peer. One thread block per peer, so the transfers run in
    parallel. The block for the first peer reduces: it receives that peer's
    contribution straight into the reduction (rrc); the others land in
    scratch (slots from `sbase`) and are added once received. Returns
    {rank: [last step of each of its thread blocks]}."""
    n = len(members)
    lasts = {}
    for p, r in enumerate(members):
        fd = (first_deps or {}).get(r, ())
        # start at p+1 so that the ranks do not all talk to rank 0 first
        peers = [(p + k) % n for k in range(1, n)]
        tbs = [b.tb(r, send=members[q], recv=members[q], chan=chan) for q in peers]
        got = []
        for k in range(1, len(peers)):
            q, slot = peers[k], sbase + (k - 1) * cnt
            b.step(r, tbs[k], 's', (src, off(q)), (src, off(q)), cnt, fd)
            got.append((slot, b.step(r, tbs[k], 'r', ('s', slot), ('s', slot), cnt)))
        q0 = peers[0]
        b.step(r, tbs[0], 's', (src, off(q0)), (src, off(q0)), cnt, fd)
        red = b.step(r, tbs[0], 'rrc', (src, off(p)), ('o', off(p)), cnt)
        for slot, rs in got:
            red = b.step(r, tbs[0], 're', ('s', slot), ('o', off(p)), cnt, [rs])
        b.step(r, tbs[0], 's', ('o', off(p)), ('o', off(p)), cnt)
        ends = [b.step(r, tbs[0], 'r', ('o', off(q0)), ('o', off(q0)), cnt)]
        for k in range(1, len(peers)):
            b.step(r, tbs[k], 's', ('o', off(p)), ('o', off(p)), cnt, [red])
            q = peers[k]
            ends.append(b.step(r, tbs[k], 'r', ('o', off(q)), ('o', off(q)), cnt))
        lasts[r] = ends
    return lasts


# The programs. Each returns a finished Builder.

def gen_ring_allreduce(n, k, opts):
    """K independent rings on K channels; ring k reduces chunks k*n..k*n+n-1."""
    b = Builder(opts.name or 'ring_allreduce_n%d_k%d' % (n, k), 'allreduce', n,
                n * k, k, (n * k, n * k, 0), opts.proto or 'Simple',
                opts.inplace, opts.outofplace, opts.min_bytes,
                opts.max_bytes if opts.max_bytes is not None else INT64_MAX)
    members = list(range(n))
    for c in range(k):
        off = (lambda base: lambda j: base + j)(c * n)
        tbs, _ = ring_reduce_scatter(b, members, off, 1, 'i', c, 'rrcs')
        ring_allgather(b, members, off, 1, tbs, started=True)
    return b


def gen_ring_allgather(n, k, opts):
    """K rings on K channels; ring c carries chunk c of every rank's input
    (output chunk j*K + c is rank j's). Each rank sends its own chunk on,
    forwards the n - 2 that reach it (rcs) and keeps the last (r); its own
    goes to its place in the output last (in place that is where it is)."""
    b = Builder(opts.name or 'ring_allgather_n%d_k%d' % (n, k), 'allgather', n,
                n * k, k, (k, n * k, 0), opts.proto or 'Simple',
                opts.inplace, opts.outofplace, opts.min_bytes,
                opts.max_bytes if opts.max_bytes is not None else INT64_MAX)
    for c in range(k):
        for p in range(n):
            tb = b.tb(p, send=(p + 1) % n, recv=(p - 1) % n, chan=c)
            b.step(p, tb, 's', ('i', c), ('i', c), 1)
            for t in range(1, n):
                j = (p - t) % n
                b.step(p, tb, 'rcs' if t < n - 1 else 'r', ('o', j * k + c),
                       ('o', j * k + c), 1)
            b.step(p, tb, 'cpy', ('i', c), ('o', p * k + c), 1)
    return b


def gen_ring_reduce_scatter(n, k, opts):
    """K rings on K channels; ring c reduces chunk c of every rank's block
    (input chunk j*K + c belongs to rank j). Block j starts at rank j + 1
    and gathers one contribution a hop (rrs) until rank j adds its own and
    writes the result (rrc): n - 1 hops."""
    b = Builder(opts.name or 'ring_reduce_scatter_n%d_k%d' % (n, k), 'reducescatter', n,
                n * k, k, (n * k, k, 0), opts.proto or 'Simple',
                opts.inplace, opts.outofplace, opts.min_bytes,
                opts.max_bytes if opts.max_bytes is not None else INT64_MAX)
    for c in range(k):
        for p in range(n):
            tb = b.tb(p, send=(p + 1) % n, recv=(p - 1) % n, chan=c)
            j = (p - 1) % n
            b.step(p, tb, 's', ('i', j * k + c), ('i', j * k + c), 1)
            for t in range(1, n - 1):
                j = (p - 1 - t) % n
                b.step(p, tb, 'rrs', ('i', j * k + c), ('i', j * k + c), 1)
            b.step(p, tb, 'rrc', ('i', p * k + c), ('o', c), 1)
    return b


def allpairs_oneshot(b, n, chunk, chan, sbase):
    """One-phase all-pairs allreduce of input chunk `chunk`: every rank sends
    it whole to every peer and reduces what it receives, one hop instead of
    two, for n - 1 times the data on each link. One thread block per peer;
    the first peer's data is reduced as it arrives (rrc), the others land in
    scratch (slots from `sbase`) and are added once received."""
    for r in range(n):
        peers = [(r + k) % n for k in range(1, n)]
        tbs = [b.tb(r, send=q, recv=q, chan=chan) for q in peers]
        sends = [b.step(r, tb, 's', ('i', chunk), ('i', chunk), 1) for tb in tbs]
        got = [(sbase + k - 1, b.step(r, tbs[k], 'r', ('s', sbase + k - 1),
                                      ('s', sbase + k - 1), 1))
               for k in range(1, len(peers))]
        # in place the input is the output: every copy of it leaves first
        b.step(r, tbs[0], 'rrc', ('i', chunk), ('o', chunk), 1, sends[1:])
        for slot, rs in got:
            b.step(r, tbs[0], 're', ('s', slot), ('o', chunk), 1, [rs])


def gen_allpairs_allreduce(n, k, phases, opts):
    """K instances on K channels, instance c on its own share of the data."""
    per = n if phases == 2 else 1
    name = 'allpairs%s_allreduce_n%d%s' % ('' if phases == 2 else '1', n,
                                          '' if k == 1 else '_k%d' % k)
    b = Builder(opts.name or name, 'allreduce', n, per * k, k,
                (per * k, per * k, max(0, n - 2) * k), opts.proto or 'LL', opts.inplace,
                opts.outofplace, opts.min_bytes,
                opts.max_bytes if opts.max_bytes is not None else 256 * 1024)
    for c in range(k):
        if phases == 2:
            allpairs_allreduce(b, list(range(n)), (lambda base: lambda j: base + j)(c * n), 1,
                               'i', c, c * max(0, n - 2))
        else:
            allpairs_oneshot(b, n, c, c, c * max(0, n - 2))
    return b


def gen_hierarchical_allreduce(n, L, cross, opts):
    """Groups of L consecutive ranks. Chunks: shard l of the group is chunks
    l*G..l*G+G-1 (G groups), so that the allreduce across groups can cut it
    into one chunk per group. Ring reduce-scatter in the group leaves local
    index l with shard l+1; the ranks of equal local index allreduce it
    across the groups; a ring all-gather in the group finishes."""
    G = n // L
    b = Builder(opts.name or 'hierarchical_allreduce_n%d_l%d_%s' % (n, L, cross),
                'allreduce', n, n, 1,
                (n, n, max(0, G - 2) if cross == 'allpairs' else 0),
                opts.proto or 'Simple', opts.inplace, opts.outofplace,
                opts.min_bytes,
                opts.max_bytes if opts.max_bytes is not None else INT64_MAX)
    intra_tbs, rs_done = {}, {}
    for g in range(G):
        members = [g * L + l for l in range(L)]
        tbs, finals = ring_reduce_scatter(b, members, lambda j: j * G, G, 'i', 0, 'rrc')
        intra_tbs.update(tbs)
        rs_done.update(finals)
    cross_done = {}
    for l in range(L):
        members = [g * L + l for g in range(G)]
        shard = (l + 1) % L
        off = (lambda base: lambda j: base + j)(shard * G)
        first = dict((r, [rs_done[r]]) for r in members)
        if cross == 'ring':
            tbs, _ = ring_reduce_scatter(b, members, off, 1, 'o', 0, 'rrcs', first)
            lasts = ring_allgather(b, members, off, 1, tbs, started=True)
            for r in members:
                cross_done[r] = [lasts[r]]
        else:
            cross_done.update(allpairs_allreduce(b, members, off, 1, 'o', 0, 0, first))
    for g in range(G):
        members = [g * L + l for l in range(L)]
        ring_allgather(b, members, lambda j: j * G, G, intra_tbs, started=False,
                       first_deps=cross_done)
    return b


def gen_two_step_alltoall(n, L, opts):
    """Groups of L consecutive ranks, rank (g, l) = g*L + l; one chunk per
    (source, destination) pair. Step one gathers, at (g, l), the blocks that
    the ranks of group g hold for (h, l), for every other group h: a scratch
    region of L chunks per h, ordered by source local index. Step two sends
    each region to (h, l) in one transfer; its blocks all belong to (h, l) and
    sit next to each other in its output (sources (g, 0..L-1)), so the
    transfer lands in place. Blocks within the group go directly."""
    G = n // L
    b = Builder(opts.name or 'two_step_alltoall_n%d_l%d' % (n, L), 'alltoall', n,
                n, 1, (n, n, (G - 1) * L), opts.proto or 'Simple', opts.inplace,
                opts.outofplace, opts.min_bytes,
                opts.max_bytes if opts.max_bytes is not None else INT64_MAX)

    def region(g, h):       # place of remote group h among g's, g+1 first
        return (h - g - 1) % G

    remotes = lambda g: [(g + d) % G for d in range(1, G)]
    gathered = collections.defaultdict(list)   # (rank, h) -> receive steps
    for g in range(G):
        for l in range(L):
            r = g * L + l
            for d in range(1, L):
                lp = (l + d) % L
                p = g * L + lp
                tb = b.tb(r, send=p, recv=p)
                # remote groups in region order on both sides, so the k-th
                # send here is the k-th receive at p
                for h in remotes(g):
                    b.step(r, tb, 's', ('i', h * L + lp), ('i', h * L + lp))
                    slot = region(g, h) * L + lp
                    gathered[(r, h)].append(b.step(r, tb, 'r', ('s', slot), ('s', slot)))
                b.step(r, tb, 's', ('i', p), ('i', p))
                b.step(r, tb, 'r', ('o', p), ('o', p))
    for g in range(G):
        for l in range(L):
            r = g * L + l
            for i, h in enumerate(remotes(g)):
                q = h * L + l
                tb = b.tb(r, send=q, recv=q)
                if i == 0:
                    b.step(r, tb, 'cpy', ('i', r), ('o', r))
                base = region(g, h) * L
                b.step(r, tb, 'cpy', ('i', q), ('s', base + l))
                b.step(r, tb, 's', ('s', base), ('s', base), L, gathered[(r, h)])
                b.step(r, tb, 'r', ('o', h * L), ('o', h * L), L)
    return b


# ---------------------------------------------------------------------------
# Reading and checking programs
# ---------------------------------------------------------------------------

class CheckError(Exception):
    pass


_INT = re.compile(r'^-?(0|[1-9][0-9]*)$')


def _int(elem, attr, where, lo=None, hi=None):
    v = elem.get(attr)
    if v is None:
        raise CheckError('%s has no attribute %s' % (where, attr))
    # the executor reads numbers with strtol(..., 0): "010" would be 8 there
    if not _INT.match(v):
        raise CheckError('%s: %s="%s" is not a plain decimal integer' % (where, attr, v))
    n = int(v)
    if (lo is not None and n < lo) or (hi is not None and n > hi):
        raise CheckError('%s: %s="%d" is out of range [%s, %s]'
                         % (where, attr, n, lo, hi))
    return n


class Prog(object):
    pass


class PStep(object):
    __slots__ = ('type', 'srcbuf', 'srcoff', 'dstbuf', 'dstoff', 'cnt',
                 'depid', 'deps', 'hasdep')


class PTb(object):
    __slots__ = ('id', 'send', 'recv', 'chan', 'steps')


def parse_program(root):
    """The program of an <algo> element, with the format's attributes read
    and range-checked; the rules between them are in validate()."""
    if root.tag != 'algo':
        raise CheckError('the root element is <%s>, not <algo>' % root.tag)
    p = Prog()
    p.name = root.get('name')
    if p.name is None:
        raise CheckError('<algo> has no attribute name')
    p.proto = root.get('proto')
    if p.proto not in PROTOS:
        raise CheckError('<algo> proto="%s" is none of %s' % (p.proto, ', '.join(PROTOS)))
    p.coll = root.get('coll')
    if p.coll is None:
        raise CheckError('<algo> has no attribute coll')
    p.ngpus = _int(root, 'ngpus', '<algo>', 1)
    p.nchannels = _int(root, 'nchannels', '<algo>', 1, EXEC_MAX_CHANNELS)
    p.nchunksperloop = _int(root, 'nchunksperloop', '<algo>', 1)
    p.inplace = _int(root, 'inplace', '<algo>', 0, 1)
    p.outofplace = _int(root, 'outofplace', '<algo>', 0, 1)
    p.min_bytes = _int(root, 'minBytes', '<algo>', 0, INT64_MAX)
    p.max_bytes = _int(root, 'maxBytes', '<algo>', 0, INT64_MAX)
    if not p.inplace and not p.outofplace:
        raise CheckError('<algo> says inplace="0" and outofplace="0": no call can use it')
    if p.max_bytes and p.max_bytes < p.min_bytes:
        raise CheckError('<algo> maxBytes=%d is below minBytes=%d' % (p.max_bytes, p.min_bytes))
    p.gpus = [None] * p.ngpus
    for ge in root:
        if ge.tag != 'gpu':
            raise CheckError('<algo> holds a <%s>; only <gpu> belongs there' % ge.tag)
        gid = _int(ge, 'id', '<gpu>', 0, p.ngpus - 1)
        where = 'gpu %d' % gid
        if p.gpus[gid] is not None:
            raise CheckError('%s appears twice' % where)
        chunks = {'i': _int(ge, 'i_chunks', where, 0), 'o': _int(ge, 'o_chunks', where, 0),
                  's': _int(ge, 's_chunks', where, 0)}
        tbs = {}
        for te in ge:
            if te.tag != 'tb':
                raise CheckError('%s holds a <%s>; only <tb> belongs there' % (where, te.tag))
            tb = PTb()
            tb.id = _int(te, 'id', where + ' <tb>', 0)
            tw = '%s thread block %d' % (where, tb.id)
            if tb.id in tbs:
                raise CheckError('%s appears twice' % tw)
            tb.send = _int(te, 'send', tw, -1, p.ngpus - 1)
            tb.recv = _int(te, 'recv', tw, -1, p.ngpus - 1)
            tb.chan = _int(te, 'chan', tw, 0, p.nchannels - 1)
            if tb.send == gid or tb.recv == gid:
                raise CheckError('%s has itself as a peer' % tw)
            tb.steps = []
            for se in te:
                if se.tag != 'step':
                    raise CheckError('%s holds a <%s>; only <step> belongs there' % (tw, se.tag))
                sw = '%s step %d' % (tw, len(tb.steps))
                s = _int(se, 's', sw)
                if s != len(tb.steps):
                    raise CheckError('%s is numbered s="%d"; steps count 0, 1, 2, ... in order'
                                     % (sw, s))
                st = PStep()
                st.type = se.get('type')
                if st.type not in DOES:
                    raise CheckError('%s has type="%s", which is none of %s'
                                     % (sw, st.type, ' '.join(sorted(DOES))))
                st.srcbuf, st.dstbuf = se.get('srcbuf'), se.get('dstbuf')
                for a, v in (('srcbuf', st.srcbuf), ('dstbuf', st.dstbuf)):
                    if v not in BUFS:   # the executor reads both, used or not
                        raise CheckError('%s has %s="%s"; buffers are i, o and s' % (sw, a, v))
                st.srcoff = _int(se, 'srcoff', sw, -1)
                st.dstoff = _int(se, 'dstoff', sw, -1)
                st.cnt = _int(se, 'cnt', sw, 0)
                st.depid = _int(se, 'depid', sw, -1)
                st.deps = _int(se, 'deps', sw, -1)
                st.hasdep = _int(se, 'hasdep', sw, 0, 1)
                tb.steps.append(st)
            tbs[tb.id] = tb
        for t in range(len(tbs)):
            if t not in tbs:
                raise CheckError('%s has no thread block %d; ids run 0..n-1 without gaps'
                                 % (where, t))
        p.gpus[gid] = (chunks, [tbs[t] for t in range(len(tbs))])
    for g in range(p.ngpus):
        if p.gpus[g] is None:
            raise CheckError('<algo ngpus="%d"> has no <gpu id="%d">' % (p.ngpus, g))
    return p


def io_sizes(p):
    """Chunks in each rank's input and output for the collective, in the
    units of the file (a chunk is the total size / nchunksperloop)."""
    n, c = p.ngpus, p.nchunksperloop
    if p.coll == 'allreduce':
        return c, c
    if p.coll in ('allgather', 'reducescatter', 'alltoall'):
        if c % n:
            raise CheckError('%s over %d gpus needs nchunksperloop divisible by %d, not %d'
                             % (p.coll, n, n, c))
        return {'allgather': (c // n, c), 'reducescatter': (c, c // n),
                'alltoall': (c, c)}[p.coll]
    raise CheckError('coll="%s": the checker knows allreduce, allgather, reducescatter '
                     'and alltoall' % p.coll)


def _tbw(g, t):
    return 'gpu %d thread block %d' % (g, t)


def validate(p, max_steps=EXEC_MAX_STEPS):
    """The rules that hold whatever order things run in: those of the format
    and those the MSCCL executor adds. Raises CheckError on the first one
    broken."""
    cin, cout = io_sizes(p)
    waited_on = set()
    for g in range(p.ngpus):
        chunks, tbs = p.gpus[g]
        for b, size in (('i', cin), ('o', cout)):
            if chunks[b] > size:
                raise CheckError('gpu %d declares %s_chunks=%d, but the %s buffer of a %s '
                                 'holds %d chunks' % (g, b, chunks[b],
                                                      'input' if b == 'i' else 'output',
                                                      p.coll, size))
        conns = {}
        nsend, nrecv = collections.Counter(), collections.Counter()
        for tb in tbs:
            w = _tbw(g, tb.id)
            for side, peer in (('send', tb.send), ('recv', tb.recv)):
                if peer < 0:
                    continue
                key = (side, tb.chan, peer)
                if key in conns:
                    raise CheckError('%s and thread block %d both %s gpu %d on channel %d; '
                                     'a channel holds one connection to a peer each way'
                                     % (w, conns[key], 'send to' if side == 'send'
                                        else 'receive from', peer, tb.chan))
                conns[key] = tb.id
            if tb.send >= 0:
                nsend[tb.chan] += 1
            if tb.recv >= 0:
                nrecv[tb.chan] += 1
            if len(tb.steps) > max_steps:
                raise CheckError('%s has %d steps; the MSCCL executor takes at most %d '
                                 '(MSCCL_MAX_NUM_STEPS)' % (w, len(tb.steps), max_steps))
            pending_nop_wait = False
            prev = None
            for s, st in enumerate(tb.steps):
                sw = '%s step %d (%s)' % (w, s, st.type)
                does = DOES[st.type]
                if st.type != 'nop' and not 1 <= st.cnt < EXEC_MAX_COUNT:
                    raise CheckError('%s has cnt=%d; a step moves 1 to %d chunks'
                                     % (sw, st.cnt, EXEC_MAX_COUNT - 1))
                if does & SEND and tb.send < 0:
                    raise CheckError('%s sends, but its thread block has send="-1"' % sw)
                if does & RECV and tb.recv < 0:
                    raise CheckError('%s receives, but its thread block has recv="-1"' % sw)
                for flag, b, off in ((RSRC, st.srcbuf, st.srcoff),
                                     (WDST | RDST, st.dstbuf, st.dstoff)):
                    if does & flag and (off < 0 or off + st.cnt > chunks[b]):
                        raise CheckError('%s touches chunks %d..%d of buffer %s, which has '
                                         '%d (%s_chunks)' % (sw, off, off + st.cnt - 1, b,
                                                             chunks[b], b))
                if (st.depid < 0) != (st.deps < 0):
                    raise CheckError('%s has depid=%d deps=%d: both name the awaited step, '
                                     'or both are -1' % (sw, st.depid, st.deps))
                if st.depid >= 0:
                    if st.depid == tb.id:
                        raise CheckError('%s waits for its own thread block' % sw)
                    if st.depid >= len(tbs) or st.deps >= len(tbs[st.depid].steps):
                        raise CheckError('%s waits for step %d of thread block %d, which '
                                         'does not exist' % (sw, st.deps, st.depid))
                    on = tbs[st.depid].steps[st.deps]
                    if on.type == 'nop':
                        raise CheckError('%s waits for a nop (step %d of thread block %d); '
                                         'the executor never signals nops'
                                         % (sw, st.deps, st.depid))
                    waited_on.add((g, st.depid, st.deps))
                # The executor hands the waits of nops to the next real step,
                # and refuses the file when that step does not wait itself.
                # It counts a nop only through its wait: without one, the
                # later steps of the block would signal wrong step numbers.
                if st.type == 'nop':
                    if st.depid < 0:
                        raise CheckError('%s waits for nothing; the executor does not count '
                                         'such a nop, so later step numbers would be off' % sw)
                    pending_nop_wait = True
                    if st.hasdep:
                        raise CheckError('%s has hasdep=1; nops never signal' % sw)
                else:
                    if pending_nop_wait and st.depid < 0:
                        raise CheckError('%s follows nops that wait, but waits for nothing '
                                         'itself; the MSCCL executor refuses that' % sw)
                    pending_nop_wait = False
                # Consecutive reductions into one chunk are fused into one by
                # the executor, which then uses the count of the last one.
                if (st.type == 're' and prev is not None and prev.type == 're'
                        and st.depid < 0 and not prev.hasdep
                        and prev.dstbuf == st.dstbuf and prev.dstoff == st.dstoff
                        and prev.srcbuf == st.srcbuf and prev.cnt != st.cnt):
                    raise CheckError('%s follows a reduction into the same chunk with another '
                                     'cnt; the executor fuses the two and keeps one cnt' % sw)
                if st.type != 'nop':
                    prev = st
            if pending_nop_wait:
                raise CheckError('%s ends with nops that wait; the executor drops those waits' % w)
        for c in range(p.nchannels):
            if nsend[c] > EXEC_MAX_TBS_PER_CHANNEL or nrecv[c] > EXEC_MAX_TBS_PER_CHANNEL:
                raise CheckError('gpu %d channel %d has more than %d sending or receiving '
                                 'thread blocks' % (g, c, EXEC_MAX_TBS_PER_CHANNEL))
    for g in range(p.ngpus):
        for tb in p.gpus[g][1]:
            for s, st in enumerate(tb.steps):
                w = '%s step %d (%s)' % (_tbw(g, tb.id), s, st.type)
                if st.hasdep and (g, tb.id, s) not in waited_on:
                    raise CheckError('%s has hasdep=1, but no thread block waits for it' % w)
                if not st.hasdep and (g, tb.id, s) in waited_on:
                    raise CheckError('%s has hasdep=0, but a thread block waits for it; it '
                                     'would never be told' % w)
    # Sends and receives pair in order per (sender, receiver, channel).
    for g in range(p.ngpus):
        for tb in p.gpus[g][1]:
            if tb.send < 0:
                continue
            peer_tbs = [t for t in p.gpus[tb.send][1] if t.recv == g and t.chan == tb.chan]
            sent = [st.cnt for st in tb.steps if DOES[st.type] & SEND]
            got = ([st.cnt for st in peer_tbs[0].steps if DOES[st.type] & RECV]
                   if peer_tbs else [])
            if sent != got:
                raise CheckError('%s sends %d message(s) to gpu %d on channel %d (cnt %s), '
                                 'which receives %d from it there (cnt %s)'
                                 % (_tbw(g, tb.id), len(sent), tb.send, tb.chan,
                                    sent, len(got), got))
    for g in range(p.ngpus):
        for tb in p.gpus[g][1]:
            if tb.recv < 0:
                continue
            if not any(t.send == g and t.chan == tb.chan for t in p.gpus[tb.recv][1]):
                n = sum(1 for st in tb.steps if DOES[st.type] & RECV)
                if n:
                    raise CheckError('%s receives %d message(s) from gpu %d on channel %d, '
                                     'where nothing sends to it' % (_tbw(g, tb.id), n,
                                                                    tb.recv, tb.chan))


# Test data: chunk c of rank r's input is 1 << (DIGIT * (r*cin + c)), one
# base-2**DIGIT digit per input chunk, so a sum shows exactly how many times
# each input chunk went into it.
DIGIT = 16


def describe(v, cin):
    if v is None:
        return 'nothing (never written)'
    parts, k, mask = [], 0, (1 << DIGIT) - 1
    while v:
        m = v & mask
        if m:
            parts.append('%sin[%d][%d]' % ('%d*' % m if m > 1 else '', k // cin, k % cin))
        v >>= DIGIT
        k += 1
    return ' + '.join(parts) if parts else '0'


def simulate(p, inplace, slots=0):
    """Run the program once, in place or out of place, and raise CheckError
    on the first problem. Thread blocks run their steps in order; a step
    waits for its dependency, for its message when it receives and, with
    `slots` > 0, for room in the connection when it sends. A vector clock per
    thread block tells which accesses are ordered; two accesses to a chunk by
    different thread blocks, one a write, not ordered by a chain of
    dependencies and messages, are a race: on a GPU their order is luck."""
    n = p.ngpus
    cin, cout = io_sizes(p)
    mode = 'in place' if inplace else 'out of place'
    stor, views = [], []
    for r in range(n):
        sch = p.gpus[r][0]['s']
        # where each buffer lives: (storage, first chunk, chunks)
        if not inplace:
            st = {'i': [None] * cin, 'o': [None] * cout, 's': [None] * sch}
            vw = {'i': ('i', 0, cin), 'o': ('o', 0, cout), 's': ('s', 0, sch)}
        elif p.coll == 'allgather':     # input is this rank's part of output
            st = {'o': [None] * cout, 's': [None] * sch}
            vw = {'i': ('o', r * cin, cin), 'o': ('o', 0, cout), 's': ('s', 0, sch)}
        elif p.coll == 'reducescatter':  # output is this rank's part of input
            st = {'i': [None] * cin, 's': [None] * sch}
            vw = {'i': ('i', 0, cin), 'o': ('i', r * cout, cout), 's': ('s', 0, sch)}
        else:                           # one buffer is both
            st = {'i': [None] * cin, 's': [None] * sch}
            vw = {'i': ('i', 0, cin), 'o': ('i', 0, cout), 's': ('s', 0, sch)}
        sname, base, _ = vw['i']
        for c in range(cin):
            st[sname][base + c] = 1 << (DIGIT * (r * cin + c))
        stor.append(st)
        views.append(vw)

    tbl = []            # global thread block index -> (rank, tb)
    first = []          # rank -> global index of its thread block 0
    for r in range(n):
        first.append(len(tbl))
        for tb in p.gpus[r][1]:
            tbl.append((r, tb))
    T = len(tbl)
    pcs = [0] * T
    clocks = [[0] * T for _ in range(T)]
    stepclock = [[None] * len(tb.steps) for _, tb in tbl]
    queues = collections.defaultdict(collections.deque)
    # (rank, storage, chunk) -> [last write, {reader: read}], where a write or
    # read is (global thread block, its own clock entry then, its step)
    shadow = {}

    def fail(msg):
        raise CheckError('%s: %s' % (mode, msg))

    def who(acc):       # acc: (global thread block, its clock, its step)
        return 'step %d of thread block %d' % (acc[2], tbl[acc[0]][1].id)

    def access(r, buf, off, cnt, gi, s, C, where, write, values=None):
        """Read or write chunks of a buffer of rank r for step s of thread
        block gi, whose vector clock is C; returns what it reads."""
        sname, base, size = views[r][buf]
        if off + cnt > size:
            fail('%s touches chunks %d..%d of buffer %s, beyond the %d chunks of the %s'
                 % (where, off, off + cnt - 1, buf, size, p.coll))
        out = []
        for k in range(cnt):
            key = (r, sname, base + off + k)
            ent = shadow.get(key)
            if ent is None:
                ent = shadow[key] = [None, {}]
            lw = ent[0]
            if lw is not None and lw[0] != gi and C[lw[0]] < lw[1]:
                fail('race on gpu %d, chunk %d of buffer %s: %s %s it while %s writes it, '
                     'and nothing orders the two' % (r, off + k, buf, where,
                                                     'writes' if write else 'reads', who(lw)))
            if write:
                for rd, acc in ent[1].items():
                    if rd != gi and C[rd] < acc[1]:
                        fail('race on gpu %d, chunk %d of buffer %s: %s writes it while %s '
                             'reads it, and nothing orders the two'
                             % (r, off + k, buf, where, who(acc)))
                ent[0] = (gi, C[gi], s)
                ent[1] = {}
                stor[r][sname][base + off + k] = values[k]
            else:
                v = stor[r][sname][base + off + k]
                if v is None:
                    fail('%s reads chunk %d of buffer %s on gpu %d, which nothing has written'
                         % (where, off + k, buf, r))
                ent[1][gi] = (gi, C[gi], s)
                out.append(v)
        return out

    def blocked(gi):
        """Why thread block gi cannot run its next step, with the thread
        block it waits for (or None), or None when it can run."""
        r, tb = tbl[gi]
        st = tb.steps[pcs[gi]]
        if st.depid >= 0 and pcs[first[r] + st.depid] <= st.deps:
            return ('waits for step %d of thread block %d' % (st.deps, st.depid),
                    first[r] + st.depid)
        if DOES[st.type] & RECV and not queues[(tb.recv, r, tb.chan)]:
            src = [first[tb.recv] + t.id for t in p.gpus[tb.recv][1]
                   if t.send == r and t.chan == tb.chan]
            return ('waits for a message from gpu %d on channel %d' % (tb.recv, tb.chan),
                    src[0] if src else None)
        if DOES[st.type] & SEND and slots and len(queues[(r, tb.send, tb.chan)]) >= slots:
            dst = [first[tb.send] + t.id for t in p.gpus[tb.send][1]
                   if t.recv == r and t.chan == tb.chan]
            return ('waits for room to send to gpu %d on channel %d' % (tb.send, tb.chan),
                    dst[0] if dst else None)
        return None

    def run_step(gi):
        r, tb = tbl[gi]
        s = pcs[gi]
        st = tb.steps[s]
        where = 'gpu %d thread block %d step %d (%s)' % (r, tb.id, s, st.type)
        C = clocks[gi]
        if st.depid >= 0:
            C = [max(a, b) for a, b in zip(C, stepclock[first[r] + st.depid][st.deps])]
        msg = None
        if DOES[st.type] & RECV:
            msg = queues[(tb.recv, r, tb.chan)].popleft()
            if msg[0] != st.cnt:
                fail('%s receives %d chunk(s), but gpu %d sent %d there'
                     % (where, st.cnt, tb.recv, msg[0]))
            C = [max(a, b) for a, b in zip(C, msg[2])]
        if C is clocks[gi]:
            C = list(C)
        C[gi] += 1
        clocks[gi] = C
        does = DOES[st.type]
        src = (access(r, st.srcbuf, st.srcoff, st.cnt, gi, s, C, where, False)
               if does & RSRC else None)
        if st.type == 're':
            cur = access(r, st.dstbuf, st.dstoff, st.cnt, gi, s, C, where, False)
            data = [a + b for a, b in zip(cur, src)]
        elif msg is not None:
            data = [a + b for a, b in zip(msg[1], src)] if src is not None else msg[1]
        else:
            data = src
        if does & WDST:
            access(r, st.dstbuf, st.dstoff, st.cnt, gi, s, C, where, True, data)
        if does & SEND:
            queues[(r, tb.send, tb.chan)].append((st.cnt, data, C))
        stepclock[gi][s] = C
        pcs[gi] += 1

    progress = True
    while progress:
        progress = False
        for gi in range(T):
            steps = tbl[gi][1].steps
            while pcs[gi] < len(steps) and blocked(gi) is None:
                run_step(gi)
                progress = True

    stuck = [gi for gi in range(T) if pcs[gi] < len(tbl[gi][1].steps)]
    if stuck:
        lines = []
        for gi in stuck[:8]:
            r, tb = tbl[gi]
            lines.append('  gpu %d thread block %d step %d (%s) %s'
                         % (r, tb.id, pcs[gi], tb.steps[pcs[gi]].type, blocked(gi)[0]))
        if len(stuck) > 8:
            lines.append('  ... and %d more' % (len(stuck) - 8))
        # follow the waits from one stuck block to show the cycle, if any
        seen, gi, path = {}, stuck[0], []
        while gi is not None and gi not in seen and pcs[gi] < len(tbl[gi][1].steps):
            seen[gi] = len(path)
            path.append(gi)
            gi = blocked(gi)[1]
        if gi is not None and gi in seen:
            cyc = path[seen[gi]:] + [gi]
            lines.append('  cycle: ' + ' -> '.join('gpu %d tb %d' % (tbl[x][0], tbl[x][1].id)
                                                   for x in cyc))
        elif gi is not None:
            r, tb = tbl[gi]
            lines.append('  the chain ends at gpu %d thread block %d, which finished without '
                         'doing what its waiter needs' % (r, tb.id))
        fail('deadlock: %d of %d thread blocks cannot go on\n%s' % (len(stuck), T, '\n'.join(lines)))
    for (a, b_, c), q in sorted(queues.items()):
        if q:
            fail('gpu %d sent %d message(s) to gpu %d on channel %d that nothing received'
                 % (a, len(q), b_, c))

    # the collective's definition
    wrong = []
    for r in range(n):
        sname, base, _ = views[r]['o']
        for c in range(cout):
            got = stor[r][sname][base + c]
            if p.coll == 'allreduce':
                exp = sum(1 << (DIGIT * (q * cin + c)) for q in range(n))
            elif p.coll == 'allgather':
                per = cin
                exp = 1 << (DIGIT * ((c // per) * cin + c % per))
            elif p.coll == 'reducescatter':
                exp = sum(1 << (DIGIT * (q * cin + r * cout + c)) for q in range(n))
            else:   # alltoall: block q of the output is q's block for r
                per = cin // n
                q = c // per
                exp = 1 << (DIGIT * (q * cin + r * per + c % per))
            if got != exp:
                wrong.append('  gpu %d output chunk %d holds %s; expected %s'
                             % (r, c, describe(got, cin), describe(exp, cin)))
    if wrong:
        more = ['  ... and %d more' % (len(wrong) - 6)] if len(wrong) > 6 else []
        fail('wrong result (%d of %d output chunks):\n%s'
             % (len(wrong), n * cout, '\n'.join(wrong[:6] + more)))
    return sum(len(tb.steps) for _, tb in tbl), T


def check_root(root, slots=0, max_steps=EXEC_MAX_STEPS):
    """Check a parsed file in every mode it claims. Returns a summary line."""
    p = parse_program(root)
    validate(p, max_steps)
    modes = []
    if p.inplace:
        nsteps, ntbs = simulate(p, True, slots)
        modes.append('in place')
    if p.outofplace:
        nsteps, ntbs = simulate(p, False, slots)
        modes.append('out of place')
    return ('%s, %s, %d gpus, %d channel(s), %d thread blocks, %d steps; %s'
            % (p.name, p.coll, p.ngpus, p.nchannels, ntbs, nsteps, ' and '.join(modes)))


def cmd_check(args):
    bad = 0
    for path in args.files:
        try:
            try:
                root = ET.parse(path).getroot()
            except ET.ParseError as e:
                raise CheckError('not well-formed XML: %s' % e)
            except (IOError, OSError) as e:
                raise CheckError(str(e))
            summary = check_root(root, args.slots, args.max_steps)
            if not args.quiet:
                print('ok: %s: %s' % (path, summary))
        except CheckError as e:
            print('FAIL: %s: %s' % (path, e), file=sys.stderr)
            bad += 1
    return 1 if bad else 0


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------

_NAME = re.compile(r'^[A-Za-z0-9_.+-]{1,127}$')


def ranks_arg(s):
    try:
        n = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError('not an integer: %r' % s)
    if not MIN_RANKS <= n <= MAX_RANKS:
        raise argparse.ArgumentTypeError('%d ranks; the generator writes %d to %d'
                                         % (n, MIN_RANKS, MAX_RANKS))
    return n


def bytes_arg(s):
    if s == 'none':
        return INT64_MAX
    try:
        n = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError('not an integer: %r' % s)
    if not 0 <= n <= INT64_MAX:
        raise argparse.ArgumentTypeError('%d is out of range' % n)
    return n


def name_arg(s):
    # the executor's reader knows no XML entities and keeps 255 characters
    if not _NAME.match(s):
        raise argparse.ArgumentTypeError('names are 1 to 127 of A-Z a-z 0-9 _ . + -')
    return s


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog='msccl_gen.py',
        description='Write MSCCL algorithm XML files, or check them by simulation.')
    sub = ap.add_subparsers(dest='cmd', metavar='COMMAND')
    sub.required = True

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument('--ranks', type=ranks_arg, required=True, metavar='N',
                        help='number of GPUs, %d to %d' % (MIN_RANKS, MAX_RANKS))
    common.add_argument('--name', type=name_arg, help='the algo name (default: from the '
                        'program and its sizes)')
    common.add_argument('--proto', choices=PROTOS,
                        help='NCCL protocol (default Simple; LL for allpairs-allreduce)')
    common.add_argument('--min-bytes', type=bytes_arg, default=0, metavar='B',
                        help='smallest buffer the file is for (default 0)')
    common.add_argument('--max-bytes', type=bytes_arg, metavar='B|none',
                        help='largest buffer the file is for; none: no bound (the '
                        'default; 262144 for allpairs-allreduce)')
    common.add_argument('--inplace', action='store_true',
                        help='for in-place calls only (with --outofplace: both)')
    common.add_argument('--outofplace', action='store_true',
                        help='for out-of-place calls only (with --inplace: both)')
    common.add_argument('-o', '--output', metavar='FILE', help='write here, not to stdout')

    p = sub.add_parser('ring-allreduce', parents=[common],
                       help='ring allreduce, one ring per channel')
    p.add_argument('--instances', type=int, default=1, metavar='K',
                   help='rings, each on its own channel (1 to %d; default 1)' % EXEC_MAX_CHANNELS)
    p = sub.add_parser('ring-allgather', parents=[common],
                       help='ring all-gather, one ring per channel')
    p.add_argument('--instances', type=int, default=1, metavar='K',
                   help='rings, each on its own channel and chunk of every input '
                        '(1 to %d; default 1)' % EXEC_MAX_CHANNELS)
    p = sub.add_parser('ring-reduce-scatter', parents=[common],
                       help='ring reduce-scatter, one ring per channel')
    p.add_argument('--instances', type=int, default=1, metavar='K',
                   help='rings, each on its own channel and chunk of every output '
                        '(1 to %d; default 1)' % EXEC_MAX_CHANNELS)
    p = sub.add_parser('allpairs-allreduce', parents=[common],
                       help='all-pairs allreduce through scratch, for small sizes')
    p.add_argument('--instances', type=int, default=1, metavar='K',
                   help='copies of the program, each on its own channel and share of the '
                        'data (1 to %d; default 1)' % EXEC_MAX_CHANNELS)
    p.add_argument('--phases', type=int, choices=(1, 2), default=2,
                   help='2 (default): each rank reduces its shard of the data and sends '
                        'the result to every peer; 1: each rank sends its whole input '
                        'to every peer and reduces all of it, one hop instead of two '
                        'for n - 1 times the data on each link')
    p = sub.add_parser('hierarchical-allreduce', parents=[common],
                       help='reduce-scatter in groups, allreduce across, all-gather in groups')
    p.add_argument('--local', type=int, required=True, metavar='L',
                   help='ranks per group (consecutive ranks)')
    p.add_argument('--cross', choices=('ring', 'allpairs'), default='ring',
                   help='allreduce across the groups (default ring)')
    p = sub.add_parser('two-step-alltoall', parents=[common],
                       help='alltoall: gather within the group, one transfer per remote group')
    p.add_argument('--local', type=int, required=True, metavar='L',
                   help='ranks per group (consecutive ranks)')

    p = sub.add_parser('check', help='simulate files and check their results')
    p.add_argument('files', nargs='+', metavar='FILE')
    p.add_argument('--slots', type=int, default=0, metavar='K',
                   help='messages a connection holds before a send waits (default 0: '
                        'no limit). The executor holds at least %d (Simple: 8 FIFO steps, '
                        '4 per message), so %d is the strictest real bound'
                        % (EXEC_MIN_SLOTS, EXEC_MIN_SLOTS))
    p.add_argument('--max-steps', type=int, default=EXEC_MAX_STEPS, metavar='N',
                   help='steps a thread block may have (default %d, the MSCCL '
                        "executor's build default)" % EXEC_MAX_STEPS)
    p.add_argument('-q', '--quiet', action='store_true', help='print only failures')

    args = ap.parse_args(argv)
    if args.cmd == 'check':
        if args.slots < 0:
            ap.error('--slots must be 0 or more')
        if args.max_steps < 1:
            ap.error('--max-steps must be 1 or more')
        return cmd_check(args)

    n = args.ranks
    if args.max_bytes == 0:
        # MSCCL reads maxBytes="0" as no bound, other readers as a bound of 0
        ap.error('--max-bytes 0 means different things to different readers; '
                 'give a size, or none for no bound')
    if args.max_bytes is not None and args.max_bytes < args.min_bytes:
        ap.error('--max-bytes is below --min-bytes')
    both = args.inplace == args.outofplace
    args.inplace, args.outofplace = int(both or args.inplace), int(both or args.outofplace)

    if args.cmd in ('ring-allreduce', 'allpairs-allreduce', 'ring-allgather',
                    'ring-reduce-scatter'):
        if not 1 <= args.instances <= EXEC_MAX_CHANNELS:
            ap.error('--instances must be 1 to %d' % EXEC_MAX_CHANNELS)
    if args.cmd == 'ring-allreduce':
        b = gen_ring_allreduce(n, args.instances, args)
    elif args.cmd == 'ring-allgather':
        b = gen_ring_allgather(n, args.instances, args)
    elif args.cmd == 'ring-reduce-scatter':
        b = gen_ring_reduce_scatter(n, args.instances, args)
    elif args.cmd == 'allpairs-allreduce':
        b = gen_allpairs_allreduce(n, args.instances, args.phases, args)
    else:
        L = args.local
        if L < 2 or n % L or n // L < 2:
            ap.error('--local %d with --ranks %d: L must divide N, with L >= 2 and at least '
                     'two groups (N/L >= 2)' % (L, n))
        if args.cmd == 'hierarchical-allreduce':
            b = gen_hierarchical_allreduce(n, L, args.cross, args)
        else:
            b = gen_two_step_alltoall(n, L, args)
    b.finish()
    text = b.xml()
    # never write a file that fails its own check, with the tightest
    # buffering the executor can have
    try:
        check_root(ET.fromstring(text), slots=EXEC_MIN_SLOTS)
    except CheckError as e:
        print('msccl_gen.py: internal error, the generated program fails its check: %s' % e,
              file=sys.stderr)
        return 1
    if args.output:
        # a half-written file would look like a broken program
        tmp = args.output + '.tmp%d' % os.getpid()
        try:
            with open(tmp, 'w') as f:
                f.write(text)
            os.replace(tmp, args.output)
        except (IOError, OSError) as e:
            print('msccl_gen.py: %s' % e, file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    return 0


if __name__ == '__main__':
    sys.exit(main())
