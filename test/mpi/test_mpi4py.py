#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Collectives through the dfccl component from mpi4py, written as mpi4py
programs are: MPI is initialized when mpi4py is imported, then the array
module is chosen: CuPy when it imports and a GPU is visible (the GPU picked
after the import, from the node-local rank), NumPy otherwise. Allreduce (out
of place and in place), Iallreduce on two duplicated communicators started
in a different order on even and odd ranks then Waitall, Bcast, Allgather,
Reduce_scatter_block, Alltoall, and the pickle-based lowercase allreduce;
every result is checked exactly. CuPy work is synchronized before each MPI
call, as mpi4py's documentation asks of CUDA-aware MPI.

usage: test_mpi4py.py [--cupy | --numpy]
  --cupy   CuPy on the GPU, or fail (the GPU lane)
  --numpy  NumPy host arrays even where CuPy works (the host backend)
Exit status 0 when every check passed on every rank.
"""
import os
import sys

from mpi4py import MPI  # initializes MPI, before any GPU is chosen

import numpy as np

# the example's choice of the array module and GPU (examples/python); no
# bytecode left in the source tree (read-only under make distcheck)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples", "python"))
sys.dont_write_bytecode = True
from train_dp import array_module, run  # noqa: E402


def main():
    want = None
    for arg in sys.argv[1:]:
        if arg in ("--cupy", "--numpy"):
            want = arg[2:]
        else:
            print(__doc__, file=sys.stderr)
            return 2
    xp, what = array_module(want)
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    failures = []

    def sync():
        if xp is not np:
            xp.cuda.get_current_stream().synchronize()

    def check(name, got, expected):
        got = xp.asnumpy(got) if xp is not np else got
        if got.shape != expected.shape or not np.array_equal(got, expected):
            i = 0
            if got.shape == expected.shape:
                i = int(np.flatnonzero(got.ravel() != expected.ravel())[0])
            failures.append(name)
            print("rank %d: FAIL %s: element %d is %r, expected %r"
                  % (rank, name, i, got.ravel()[i], expected.ravel()[i]),
                  file=sys.stderr, flush=True)

    n = 10000
    idx = np.arange(n)

    # Allreduce, out of place (float64 and int32) and in place
    for dt in (np.float64, np.int32):
        send = xp.asarray(idx % 101 + rank, dtype=dt)
        recv = xp.zeros(n, dtype=dt)
        sync()
        world.Allreduce(send, recv, op=MPI.SUM)
        check("Allreduce %s" % np.dtype(dt).name, recv,
              (size * (idx % 101) + size * (size - 1) // 2).astype(dt))
    buf = xp.asarray(idx % 7 * (rank + 1), dtype=np.int64)
    sync()
    world.Allreduce(MPI.IN_PLACE, buf, op=MPI.MAX)
    check("Allreduce in place max", buf, (idx % 7 * size).astype(np.int64))

    # Iallreduce on two communicators, started in opposite orders
    comms = [world.Dup(), world.Dup()]
    bufs = [xp.asarray(idx % 13 + 10 * c + rank, dtype=np.float32) for c in range(2)]
    order = [0, 1] if rank % 2 == 0 else [1, 0]
    sync()
    reqs = [None, None]
    for c in order:
        reqs[c] = comms[c].Iallreduce(MPI.IN_PLACE, bufs[c], op=MPI.SUM)
    MPI.Request.Waitall(reqs)
    for c in range(2):
        check("Iallreduce on communicator %d" % c, bufs[c],
              (size * (idx % 13 + 10 * c) + size * (size - 1) // 2).astype(np.float32))

    # Bcast from the last rank
    root = size - 1
    b = xp.asarray(idx * 3 if rank == root else -np.ones(n, dtype=np.int64), dtype=np.int64)
    sync()
    comms[0].Bcast(b, root=root)
    check("Bcast", b, (idx * 3).astype(np.int64))

    # Allgather
    send = xp.asarray(idx[:100] + 1000 * rank, dtype=np.float64)
    recv = xp.zeros(100 * size, dtype=np.float64)
    sync()
    comms[1].Allgather(send, recv)
    check("Allgather", recv, np.concatenate([idx[:100] + 1000 * r for r in range(size)])
          .astype(np.float64))

    # Reduce_scatter_block: rank r gets the sum of every rank's r-th block
    k = 257
    send = xp.asarray(np.arange(k * size) + rank, dtype=np.int32)
    recv = xp.zeros(k, dtype=np.int32)
    sync()
    world.Reduce_scatter_block(send, recv, op=MPI.SUM)
    check("Reduce_scatter_block", recv,
          (size * np.arange(rank * k, (rank + 1) * k) + size * (size - 1) // 2)
          .astype(np.int32))

    # Alltoall: block d of rank r holds 100 * r + d
    k = 33
    send = xp.asarray(np.repeat(np.arange(size) + 100 * rank, k), dtype=np.int32)
    recv = xp.zeros(k * size, dtype=np.int32)
    sync()
    world.Alltoall(send, recv)
    check("Alltoall", recv, np.repeat(100 * np.arange(size) + rank, k).astype(np.int32))

    # the pickle-based lowercase collective, on Python objects
    total = world.allreduce(rank + 1, op=MPI.SUM)
    if total != size * (size + 1) // 2:
        failures.append("allreduce (object)")
        print("rank %d: FAIL allreduce (object): %r" % (rank, total), file=sys.stderr)

    for c in comms:
        c.Free()
    nfail = world.allreduce(len(failures), op=MPI.SUM)
    if rank == 0:
        print("test_mpi4py: %d ranks, %s arrays, %d failures in all" % (size, what, nfail),
              flush=True)
    return 0 if nfail == 0 else 1


if __name__ == "__main__":
    run(main)  # one rank's exception aborts the job
