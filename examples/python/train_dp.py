#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Data-parallel training with mpi4py: linear regression by gradient descent,
each rank on its own shard of the data, on CuPy arrays when CuPy and a GPU
are there (NumPy otherwise).

Every step, each rank computes the gradient of its shard's loss and the
ranks average it with comm.Allreduce on the arrays themselves (CUDA-aware
MPI: no copy to the host). Two more collectives run on two duplicated
communicators, started in a different order on even and odd ranks, then
MPI.Request.Waitall: the summed loss for logging, on one, and on the other
the replicas' parameters reduced with MAX (of w and of -w), which shows that
every rank holds the same model. A stream-ordered GPU collective library can
hang on that opposite order; with dfccl it completes.

    mpirun -np 4 python3 train_dp.py [--steps N] [--cupy | --numpy]

Prints the loss as it goes down, then checks that it fell by at least a
factor of 1000, that the model is the one the data came from, and that the
replicas never differed; exit status 0 when all of that holds.
"""
import argparse
import sys
import traceback

from mpi4py import MPI  # initializes MPI; the GPU is chosen after it

import numpy as np


def array_module(want):
    """(module, description): CuPy on this rank's GPU (chosen from the
    node-local rank) when it imports and a GPU is visible, else NumPy; want
    "cupy" or "numpy" insists on one (RuntimeError when CuPy is not usable).
    test/mpi/test_mpi4py.py uses it too."""
    if want != "numpy":
        try:
            import cupy

            ngpu = cupy.cuda.runtime.getDeviceCount()
        except Exception as e:  # no CuPy, no driver, no GPU
            if want == "cupy":
                raise RuntimeError("--cupy: CuPy is not usable here: %s" % e)
            return np, "NumPy"
        if ngpu > 0:
            node = MPI.COMM_WORLD.Split_type(MPI.COMM_TYPE_SHARED)
            local = node.Get_rank()
            node.Free()
            cupy.cuda.Device(local % ngpu).use()
            return cupy, "CuPy on GPU %d" % (local % ngpu)
        if want == "cupy":
            raise RuntimeError("--cupy: no GPU is visible")
    return np, "NumPy"


def main():
    ap = argparse.ArgumentParser(description="data-parallel linear regression over MPI")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--samples", type=int, default=512, help="samples per rank")
    ap.add_argument("--features", type=int, default=16)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--cupy", dest="xp", action="store_const", const="cupy")
    g.add_argument("--numpy", dest="xp", action="store_const", const="numpy")
    args = ap.parse_args()

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    xp, where = array_module(args.xp)

    def sync():
        # CUDA-aware MPI reads the arrays directly: the kernels that wrote
        # them must be done
        if xp is not np:
            xp.cuda.get_current_stream().synchronize()

    # the same true model everywhere, a shard of the data on each rank
    d, n = args.features, args.samples
    truth = np.random.default_rng(1234).normal(size=d + 1)
    rng = np.random.default_rng(100 + rank)
    X = np.hstack([rng.normal(size=(n, d)), np.ones((n, 1))])  # last column: the bias
    y = X @ truth + 0.01 * rng.normal(size=n)
    X, y = xp.asarray(X), xp.asarray(y)
    w = xp.zeros(d + 1)
    total = n * size

    loss_comm = comm.Dup()  # the loss, for logging
    sync_comm = comm.Dup()  # the replicas' parameters, to compare them
    if rank == 0:
        print("train_dp: %d ranks, %d samples each, %d features, %s" % (size, n, d, where))
        print("%6s %14s" % ("step", "loss"))
    first = last = None
    diverged = 0
    for step in range(args.steps):
        err = X @ w - y
        grad = (2.0 / total) * (X.T @ err)  # this shard's part of the gradient
        loss = xp.asarray([float((err * err).sum()) / total])
        sync()
        # the gradient, summed over the shards
        comm.Allreduce(MPI.IN_PLACE, grad, op=MPI.SUM)
        # the loss on one communicator and the replicas' parameters on the
        # other, started in opposite orders on even and odd ranks
        spread = xp.concatenate([w, -w])
        sync()
        start = [lambda: loss_comm.Iallreduce(MPI.IN_PLACE, loss, op=MPI.SUM),
                 lambda: sync_comm.Iallreduce(MPI.IN_PLACE, spread, op=MPI.MAX)]
        if rank % 2:
            start.reverse()
        reqs = [s() for s in start]
        MPI.Request.Waitall(reqs)
        # the largest and the smallest value of each parameter over the
        # ranks are this rank's own: every replica is the same
        if not (bool((spread[: d + 1] == w).all()) and bool((-spread[d + 1:] == w).all())):
            diverged += 1
        w -= args.lr * grad
        last = float(loss[0])
        if first is None:
            first = last
        if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
            print("%6d %14.6e" % (step, last), flush=True)

    err_w = float(np.abs((xp.asnumpy(w) if xp is not np else w) - truth).max())
    diverged = comm.allreduce(diverged, op=MPI.SUM)
    ok = last < first / 1000 and err_w < 1e-2 and diverged == 0
    if rank == 0:
        print("train_dp: loss %.3e -> %.3e, largest parameter error %.2e, replicas %s: %s"
              % (first, last, err_w, "identical" if diverged == 0 else
                 "DIFFERED at %d steps" % diverged, "check passed" if ok else "CHECK FAILED"))
    loss_comm.Free()
    sync_comm.Free()
    return 0 if ok else 1


def run(main):
    """Exits with main()'s status. An exception on one rank aborts the job:
    the other ranks must not wait for this one in a collective.
    test/mpi/test_mpi4py.py uses it too."""
    try:
        status = main()
    except Exception:
        traceback.print_exc()
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(1)
    sys.exit(status)


if __name__ == "__main__":
    run(main)
