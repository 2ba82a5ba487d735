#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""dfccl-pybench: the collectives a Python program would run, timed through
dfccl (mpi4py on CuPy arrays, Open MPI's dfccl coll component underneath)
against the libraries Python users otherwise reach for: CuPy's NCCL
communicator (cupy.cuda.nccl.NcclCommunicator) and torch.distributed with
its NCCL backend, on the same sizes in the same job.

    mpirun -np N [--mca ...] python3 dfccl-pybench.py [-c allreduce] [-d float32]
        [-b 8] [-e 1G] [-f 2] [-w 5] [-n 20] [--backends dfccl,cupy-nccl,torch]
    mpirun -np N --mca coll_dfccl_backend host python3 dfccl-pybench.py --host ...

One row per size: the size in bytes and the count in elements (nccl-tests'
convention: allgather's and reduce-scatter's size is the whole gathered
buffer, all-to-all's the bytes each rank sends in all), then per backend
the median call (us) of the slowest rank, the slowest rank's 99th
percentile, busbw (GB/s, nccl-tests' factor) and the elements that were
wrong in one more call after the timed ones, checked against a known
pattern of small integers (exact in floating point too); last, the fastest
other backend's time over dfccl's (above 1: dfccl is faster) and its name.

A call is timed from its start until its result is there: the MPI call on
CuPy arrays returns when its result is in place; an NCCL call is followed
by a synchronization of its stream. The stream of CuPy is synchronized
before every call, outside the time, as mpi4py asks of CUDA-aware MPI.
dfccl and cupy-nccl run out of place on CuPy arrays; torch on tensors it
allocated itself, its all_reduce and broadcast in place (their only form).
Every backend runs each size in turn (dfccl first), its warm-up calls
untimed; before the NCCL backends time a size, dfccl's daemon is left time
to quit (it gives its SMs back after DFCCL_QUIT_US of idling).

--host runs NumPy arrays through the dfccl backend only, for machines
without GPUs: with `--mca coll_dfccl_backend host` they run on dfccl's host
backend. A backend that cannot run here (its module missing, no GPU, more
ranks on a host than GPUs for NCCL) is skipped with one line saying why, or,
when --backends names it, is an error (exit status 3). Exit status 0 when
every result was right, 1 when one was wrong, 2 for a mistake in the
command line.
"""
import argparse
import os
import shlex
import socket
import sys
import time
import traceback

from mpi4py import MPI  # initializes MPI; the GPU is chosen after it

import numpy as np

PROG = "dfccl-pybench"
COLLS = ("allreduce", "allgather", "reducescatter", "broadcast", "alltoall")
DTYPES = ("float32", "float64", "int32", "int64")
BACKENDS = ("dfccl", "cupy-nccl", "torch")
# nccl-tests' bus bandwidth factors
BUSBW = {
    "allreduce": lambda n: 2.0 * (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "reducescatter": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
}
SENTINEL = -1  # in an output before the checked call: no result is negative


class Usage(Exception):
    """A mistake in the command line: exit status 2."""


class Unavailable(Exception):
    """A backend asked for that cannot run here: exit status 3."""


world = MPI.COMM_WORLD
rank, nranks = world.Get_rank(), world.Get_size()


def say(text):
    if rank == 0:
        print(text, flush=True)


# -- the command line ------------------------------------------------------


def parse_size(s):
    """Bytes from '64', '1.5K', '16M' or '1G', from 1 up to 1T."""
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = s.strip()
    x = None
    try:
        if text and text[-1].upper() in mult:
            x = float(text[:-1]) * mult[text[-1].upper()]
        else:
            x = float(text)
    except ValueError:
        pass
    if x is None or not (1 <= x <= (1 << 40)):
        raise argparse.ArgumentTypeError(
            "takes a size in bytes from 1 up to 1T, with an optional K, M or G suffix, "
            "not '%s'" % s)
    return int(x)


def size_text(v):
    for shift, suffix in ((30, "G"), (20, "M"), (10, "K")):
        if v >= 1 << shift and v % (1 << shift) == 0:
            return "%d%s" % (v >> shift, suffix)
    return str(v)


def int_in(lo, hi):
    def parse(s):
        try:
            v = int(s)
        except ValueError:
            v = None
        if v is None or not lo <= v <= hi:
            raise argparse.ArgumentTypeError(
                "takes an integer from %d to %d, not '%s'" % (lo, hi, s))
        return v
    return parse


def parse_factor(s):
    try:
        v = float(s)
    except ValueError:
        v = None
    if v is None or not 1 < v <= 1024:
        raise argparse.ArgumentTypeError("takes a number above 1 (up to 1024), not '%s'" % s)
    return v


def parse_backends(s):
    names = [b.strip() for b in s.split(",")]
    for b in names:
        if b not in BACKENDS:
            raise argparse.ArgumentTypeError("unknown backend '%s'; the backends are %s"
                                             % (b, ", ".join(BACKENDS)))
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError("names a backend twice: '%s'" % s)
    return [b for b in BACKENDS if b in names]


class Parser(argparse.ArgumentParser):
    """argparse whose messages come once, from rank 0, in the benchmarks'
    form, and whose errors are Usage exceptions."""

    def error(self, message):
        raise Usage(message)

    def print_help(self, file=None):
        if rank == 0:
            super().print_help(file)

    def print_usage(self, file=None):
        if rank == 0:
            super().print_usage(file)


def parse_args(argv):
    ap = Parser(prog=PROG, allow_abbrev=False,
                formatter_class=argparse.RawDescriptionHelpFormatter,
                usage="mpirun -np N [--mca ...] python3 %(prog)s.py [options]",
                description="Times collectives through dfccl (mpi4py on CuPy arrays, the "
                            "dfccl coll component underneath) against cupy.cuda.nccl and "
                            "torch.distributed (NCCL) on the same sizes; checks every result.",
                epilog="Sizes are nccl-tests': allgather's and reducescatter's the whole "
                       "gathered buffer, alltoall's the bytes each rank sends in all.\n"
                       "Exit status: 0 every result right, 1 a result wrong, 2 a mistake in "
                       "the command line, 3 a backend named in --backends cannot run here.")
    ap.add_argument("-c", "--coll", choices=COLLS, default="allreduce",
                    help="the collective (allreduce)")
    ap.add_argument("-d", "--dtype", choices=DTYPES, default="float32",
                    help="the element type (float32); sums where the collective has an op")
    ap.add_argument("-b", "--minbytes", type=parse_size, default=8, metavar="SIZE",
                    help="smallest size, K/M/G suffixes (8)")
    ap.add_argument("-e", "--maxbytes", type=parse_size, default=None, metavar="SIZE",
                    help="largest size (1G on GPUs, 16M with --host)")
    ap.add_argument("-f", "--stepfactor", type=parse_factor, default=2.0, metavar="F",
                    help="size multiplier (2)")
    ap.add_argument("-w", "--warmup", type=int_in(0, 1000000), default=5, metavar="N",
                    help="untimed calls per size and backend (5)")
    ap.add_argument("-n", "--iters", type=int_in(1, 10000000), default=20, metavar="N",
                    help="timed calls per size and backend (20)")
    ap.add_argument("-r", "--root", type=int_in(0, nranks - 1), default=0, metavar="N",
                    help="root of broadcast (0)")
    ap.add_argument("--backends", type=parse_backends, default=None, metavar="LIST",
                    help="comma-separated, of %s (default: those that can run here; "
                         "one named here that cannot is an error)" % ",".join(BACKENDS))
    ap.add_argument("--host", action="store_true",
                    help="NumPy arrays on the host, the dfccl backend only (with --mca "
                         "coll_dfccl_backend host: dfccl's host backend), for machines "
                         "without GPUs")
    a = ap.parse_args(argv)
    a.explicit = a.backends is not None
    if a.host:
        if a.explicit and a.backends != ["dfccl"]:
            raise Usage("--host runs the dfccl backend only (NumPy arrays on the host), "
                        "not %s" % ", ".join(b for b in a.backends if b != "dfccl"))
        a.backends = ["dfccl"]
    elif a.backends is None:
        a.backends = list(BACKENDS)
    if a.maxbytes is None:
        a.maxbytes = (16 << 20) if a.host else (1 << 30)
        if a.minbytes > a.maxbytes:
            raise Usage("-b/--minbytes (%s) is larger than the default -e/--maxbytes (%s): "
                        "no size to run" % (size_text(a.minbytes), size_text(a.maxbytes)))
    elif a.minbytes > a.maxbytes:
        raise Usage("-b/--minbytes (%s) is larger than -e/--maxbytes (%s): no size to run"
                    % (size_text(a.minbytes), size_text(a.maxbytes)))
    return a


# -- the pattern every result is checked against ------------------------------


def value(r, idx):
    """Rank r's input at global indices idx: small integers, so sums over
    any number of ranks a test runs are exact in every type."""
    return (idx + 3 * r) % 11


def arange(xp, n):
    return xp.arange(n, dtype=xp.int32 if n + 16 * nranks < (1 << 31) else xp.int64)


class Layout:
    """One size of the sweep: the elements each buffer of the collective
    holds (nccl-tests' sizes), and how to fill and check them."""

    def __init__(self, coll, nbytes, esz, n):
        count = nbytes // esz
        self.coll = coll
        if coll in ("allgather", "reducescatter", "alltoall"):
            self.per = count // n
            count = self.per * n
        else:
            self.per = count
        self.count = count
        self.nbytes = count * esz
        self.nin = self.per if coll == "allgather" else count
        self.nout = self.per if coll == "reducescatter" else count

    def fill_input(self, xp, buf, root):
        c = self.coll
        if c == "broadcast":
            if rank == root:
                buf[...] = value(root, arange(xp, self.count))
            else:
                buf[...] = SENTINEL
        elif c == "allgather":
            buf[...] = value(rank, rank * self.per + arange(xp, self.per))
        else:
            buf[...] = value(rank, arange(xp, self.nin))

    def expected(self, xp, root):
        c, per = self.coll, self.per
        if c == "allreduce":
            i = arange(xp, self.count)
            return sum(value(q, i) for q in range(nranks))
        if c == "reducescatter":
            i = rank * per + arange(xp, per)
            return sum(value(q, i) for q in range(nranks))
        if c == "allgather":
            i = arange(xp, self.count)
            return value(i // per, i)
        if c == "alltoall":
            # block s of our output is block `rank` of rank s's input
            i = arange(xp, self.count)
            return value(i // per, rank * per + i % per)
        return value(root, arange(xp, self.count))  # broadcast

    def wrong(self, xp, out, root):
        exp = self.expected(xp, root).astype(out.dtype)
        return int(xp.count_nonzero(out != exp))


# -- the backends -------------------------------------------------------------


class Backend:
    """A library that runs the collectives. bufs(lay) gives its buffers
    for one size as arrays of xp, to fill and check (the input, then the
    output: the same memory where it runs in place); caller(lay, root) a
    function that runs one collective on them and returns when its result
    is there."""

    name = ""
    inplace_colls = ("broadcast",)

    def __init__(self, env, maxn):
        self.env = env
        self.maxn = max(maxn, 1)

    def inplace(self, coll):
        return coll in self.inplace_colls

    def bufs(self, lay):
        # self.send and self.recv: arrays of xp, of maxn elements each
        if self.inplace(lay.coll):
            return self.send[:lay.nin], self.send[:lay.nout]
        return self.send[:lay.nin], self.recv[:lay.nout]

    def close(self):
        pass


class DfcclBackend(Backend):
    """mpi4py on the arrays themselves: Open MPI hands them to the dfccl
    component."""

    name = "dfccl"

    def __init__(self, env, maxn):
        super().__init__(env, maxn)
        xp = env.xp
        self.send = env.alloc(self.maxn, "dfccl")
        self.recv = env.alloc(self.maxn, "dfccl")
        # the component sets up at its first call: not in any timed one
        one = xp.ones(1, dtype=env.dtype)
        out = xp.zeros(1, dtype=env.dtype)
        env.sync()
        world.Allreduce(one, out, op=MPI.SUM)

    def caller(self, lay, root):
        s, r = self.bufs(lay)
        c = lay.coll
        if c == "allreduce":
            return lambda: world.Allreduce(s, r, op=MPI.SUM)
        if c == "allgather":
            return lambda: world.Allgather(s, r)
        if c == "reducescatter":
            return lambda: world.Reduce_scatter_block(s, r, op=MPI.SUM)
        if c == "alltoall":
            return lambda: world.Alltoall(s, r)
        return lambda: world.Bcast(r, root=root)


class CupyNcclBackend(Backend):
    """cupy.cuda.nccl.NcclCommunicator: rank 0's unique id goes to every
    rank over MPI; calls on CuPy's current stream, then its synchronize."""

    name = "cupy-nccl"

    def __init__(self, env, maxn):
        super().__init__(env, maxn)
        from cupy.cuda import nccl

        self.nccl = nccl
        uid = nccl.get_unique_id() if rank == 0 else None
        uid = world.bcast(uid, root=0)
        self.comm = nccl.NcclCommunicator(nranks, uid, rank)
        self.dt = {"float32": nccl.NCCL_FLOAT32, "float64": nccl.NCCL_FLOAT64,
                   "int32": nccl.NCCL_INT32, "int64": nccl.NCCL_INT64}[env.dtype_name]
        self.stream = env.xp.cuda.get_current_stream()
        self.send = env.alloc(self.maxn, "cupy-nccl")
        self.recv = env.alloc(self.maxn, "cupy-nccl")
        self.caller(Layout("allreduce", env.esz, env.esz, nranks), 0)()

    def caller(self, lay, root):
        comm, nccl, dt, st = self.comm, self.nccl, self.dt, self.stream
        s, r = self.bufs(lay)
        sp, rp, c, per = s.data.ptr, r.data.ptr, lay.coll, lay.per
        stream = st.ptr
        if c == "allreduce":
            def call():
                comm.allReduce(sp, rp, lay.count, dt, nccl.NCCL_SUM, stream)
                st.synchronize()
        elif c == "allgather":
            def call():
                comm.allGather(sp, rp, per, dt, stream)
                st.synchronize()
        elif c == "reducescatter":
            def call():
                comm.reduceScatter(sp, rp, per, dt, nccl.NCCL_SUM, stream)
                st.synchronize()
        elif c == "alltoall":
            # a send and a receive of a block per rank, ours too, in one group
            step = per * self.env.esz

            def call():
                nccl.groupStart()
                try:
                    for q in range(nranks):
                        comm.send(sp + q * step, per, dt, q, stream)
                        comm.recv(rp + q * step, per, dt, q, stream)
                finally:
                    nccl.groupEnd()
                st.synchronize()
        else:
            def call():
                comm.broadcast(rp, rp, lay.count, dt, root, stream)
                st.synchronize()
        return call

    def close(self):
        self.comm.destroy()


class TorchBackend(Backend):
    """torch.distributed with the NCCL backend on tensors torch allocated,
    initialized over TCP at an address and free port rank 0 chooses and
    sends over MPI. A call is followed by a synchronization of torch's
    current stream, which waits for NCCL's (never the device: dfccl's
    daemon may still be resident)."""

    name = "torch"
    inplace_colls = ("broadcast", "allreduce")

    def __init__(self, env, maxn):
        super().__init__(env, maxn)
        import datetime

        import torch
        import torch.distributed as dist

        self.torch, self.dist = torch, dist
        torch.cuda.set_device(env.device)
        if rank == 0:
            if env.one_host:
                addr = "127.0.0.1"
            else:
                addr = os.environ.get("MASTER_ADDR") or socket.gethostname()
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("", 0))
                port = s.getsockname()[1]
            where = (addr, port)
        else:
            where = None
        addr, port = world.bcast(where, root=0)
        dist.init_process_group("nccl", init_method="tcp://%s:%d" % (addr, port),
                                world_size=nranks, rank=rank,
                                timeout=datetime.timedelta(seconds=300))
        tdt = getattr(torch, env.dtype_name)
        dev = torch.device("cuda", env.device)
        try:
            self.tsend = torch.empty(self.maxn, dtype=tdt, device=dev)
            self.trecv = torch.empty(self.maxn, dtype=tdt, device=dev)
        except RuntimeError as e:
            env.die("cannot allocate torch's buffers of %d elements: %s; lower -e"
                    % (self.maxn, e))
        # CuPy views of the tensors, to fill and check them as the others
        self.send, self.recv = env.view(self.tsend), env.view(self.trecv)
        self.all_gather = getattr(dist, "all_gather_into_tensor", None) or \
            dist._all_gather_base
        self.reduce_scatter = getattr(dist, "reduce_scatter_tensor", None) or \
            dist._reduce_scatter_base
        self.stream = torch.cuda.current_stream()
        # NCCL's communicator is made at the first call: not in a timed one
        self.trecv[:1].fill_(1)
        self.caller(Layout("allreduce", env.esz, env.esz, nranks), 0)()

    def bufs(self, lay):
        if self.inplace(lay.coll):
            return self.recv[:lay.nin], self.recv[:lay.nout]
        return self.send[:lay.nin], self.recv[:lay.nout]

    def tensors(self, lay):
        if self.inplace(lay.coll):
            return self.trecv[:lay.nin], self.trecv[:lay.nout]
        return self.tsend[:lay.nin], self.trecv[:lay.nout]

    def caller(self, lay, root):
        dist, st, c = self.dist, self.stream, lay.coll
        s, r = self.tensors(lay)
        if c == "allreduce":
            def call():
                dist.all_reduce(r)
                st.synchronize()
        elif c == "allgather":
            def call():
                self.all_gather(r, s)
                st.synchronize()
        elif c == "reducescatter":
            def call():
                self.reduce_scatter(r, s)
                st.synchronize()
        elif c == "alltoall":
            def call():
                dist.all_to_all_single(r, s)
                st.synchronize()
        else:
            def call():
                dist.broadcast(r, src=root)
                st.synchronize()
        return call

    def close(self):
        self.dist.destroy_process_group()


# -- where the arrays live ----------------------------------------------------


class Env:
    """The array module (NumPy with --host, else CuPy on the GPU of the
    node-local rank), the element type, and what the header says."""

    def __init__(self, args):
        self.host = args.host
        self.dtype_name = args.dtype
        self.dtype = np.dtype(args.dtype)
        self.esz = self.dtype.itemsize
        node = world.Split_type(MPI.COMM_TYPE_SHARED)
        self.local, self.local_size = node.Get_rank(), node.Get_size()
        node.Free()
        self.one_host = self.local_size == nranks
        self.xp = np
        self.device = None
        self.ngpu = 0
        self.gpu_name = None

    def use_gpu(self):
        import cupy

        self.xp = cupy
        self.ngpu = cupy.cuda.runtime.getDeviceCount()
        self.device = self.local % self.ngpu
        cupy.cuda.Device(self.device).use()
        name = cupy.cuda.runtime.getDeviceProperties(self.device)["name"]
        self.gpu_name = name.decode() if isinstance(name, bytes) else str(name)

    def sync(self):
        # CUDA-aware MPI and NCCL read the arrays at once: the kernels that
        # wrote them must be done
        if self.xp is not np:
            self.xp.cuda.get_current_stream().synchronize()

    def alloc(self, n, who):
        try:
            return self.xp.empty(n, dtype=self.dtype)
        except Exception as e:  # CuPy's OutOfMemoryError, NumPy's MemoryError
            self.die("cannot allocate %s's buffers of %d elements: %s; lower -e" % (who, n, e))

    def view(self, tensor):
        """A CuPy array on a torch tensor's memory (no copy)."""
        cupy = self.xp
        try:
            v = cupy.from_dlpack(tensor)
        except Exception:  # an older CuPy: __cuda_array_interface__
            v = cupy.asarray(tensor)
        if v.data.ptr != tensor.data_ptr() or v.size != tensor.numel():
            self.die("CuPy copied a torch tensor instead of viewing it")
        return v

    @staticmethod
    def die(msg):
        sys.stderr.write("%s: rank %d: %s\n" % (PROG, rank, msg))
        sys.stderr.flush()
        world.Abort(3)


def probe(env, name):
    """Why backend `name` cannot run on this rank, or None when it can: its
    modules first, then the GPUs."""
    if env.host:
        return None  # --host runs dfccl on NumPy, which is there
    need = {"dfccl": ["cupy"], "cupy-nccl": ["cupy", "cupy.cuda.nccl"],
            "torch": ["torch", "torch.distributed", "cupy"]}[name]
    for mod in need:
        try:
            __import__(mod)
        except Exception as e:
            return "cannot import %s (%s)" % (mod, e)
    import cupy

    if name == "cupy-nccl":
        from cupy.cuda import nccl

        if not getattr(nccl, "available", True):
            return "CuPy found no NCCL library (cupy.cuda.nccl.available is False)"
    if name == "torch":
        import torch
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_nccl_available()):
            return "this torch has no NCCL backend for torch.distributed"
        if not torch.cuda.is_available():
            return "torch sees no GPU"
    try:
        ngpu = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:
        return "CuPy finds no usable GPU (%s)" % e
    if ngpu == 0:
        return "no GPU is visible"
    if name != "dfccl" and env.local_size > ngpu:
        return ("%d ranks on host %s share its %d GPU(s): NCCL takes one rank per GPU"
                % (env.local_size, socket.gethostname(), ngpu))
    return None


def choose(env, args):
    """The backends that run, the same on every rank; a line for each one
    skipped. Raises Unavailable for one that --backends named."""
    runs, notes = [], []
    if "torch" in args.backends and not env.host:
        # torch first: the NCCL it was built with is loaded before CuPy's
        # (CuPy's binding takes whichever libnccl.so.2 is there; torch may
        # need its own, newer one)
        try:
            import torch  # noqa: F401
        except Exception:
            pass  # probe() says why
    for name in args.backends:
        why = world.allgather(probe(env, name))
        bad = [(r, w) for r, w in enumerate(why) if w is not None]
        if not bad:
            runs.append(name)
            continue
        r, w = bad[0]
        where = "" if len(bad) == nranks else "rank %d: " % r
        if args.explicit:
            raise Unavailable("--backends %s: %s%s; install what it needs, or leave it "
                              "out of --backends%s"
                              % (name, where, w, " (without GPUs: --host)"
                                 if name == "dfccl" else ""))
        notes.append("# skipped: %s: %s%s" % (name, where, w))
    if not runs:
        raise Unavailable("no backend can run here (%s); without GPUs, --host times NumPy "
                          "arrays through dfccl's host backend"
                          % "; ".join(n[len("# skipped: "):] for n in notes))
    return runs, notes


# -- the header ---------------------------------------------------------------


def nccl_text(v):
    if isinstance(v, (tuple, list)):
        return ".".join(str(x) for x in v)
    v = int(v)
    if v >= 20900:  # NCCL 2.9 on: major * 10000 + minor * 100 + patch
        return "%d.%d.%d" % (v // 10000, v % 10000 // 100, v % 100)
    return "%d.%d.%d" % (v // 1000, v % 1000 // 100, v % 100)


def versions(env, runs):
    import mpi4py

    mpi = MPI.Get_library_version().strip().splitlines()[0].split(",")[0]
    out = ["Python %s" % sys.version.split()[0], "mpi4py %s" % mpi4py.__version__, mpi,
           "NumPy %s" % np.__version__]
    if env.xp is not np:
        cupy = env.xp
        rt = cupy.cuda.runtime.runtimeGetVersion()
        out.append("CuPy %s (CUDA runtime %d.%d)" % (cupy.__version__, rt // 1000,
                                                     rt % 1000 // 10))
        try:
            from cupy.cuda import nccl

            out.append("NCCL %s (cupy.cuda.nccl.get_version)" % nccl_text(nccl.get_version()))
        except Exception as e:
            out.append("NCCL through CuPy: none (%s)" % e)
    if "torch" in runs:
        import torch

        try:
            tn = nccl_text(torch.cuda.nccl.version())
        except Exception as e:
            tn = "unknown: %s" % e
        out.append("torch %s (NCCL %s)" % (torch.__version__, tn))
    return ", ".join(out)


def header(env, args, runs, notes, gap):
    f = BUSBW[args.coll](nranks)
    where = ("NumPy arrays on the host" if env.host else
             "CuPy arrays on GPUs (%s; rank %d on GPU %d of %d)"
             % (env.gpu_name, rank, env.device, env.ngpu))
    say("# %s: %s, %s%s, %d rank(s), warmup %d, iterations %d, %s"
        % (PROG, args.coll, args.dtype,
           ", sum" if args.coll in ("allreduce", "reducescatter") else "",
           nranks, args.warmup, args.iters, where))
    say("# command: %s %s" % (os.path.basename(sys.executable), shlex.join(sys.argv)))
    say("# versions: %s" % versions(env, runs))
    lib = {"dfccl": "mpi4py through Open MPI's dfccl coll component",
           "cupy-nccl": "cupy.cuda.nccl.NcclCommunicator",
           "torch": "torch.distributed, NCCL backend"}
    say("# backends: %s" % "; ".join("%s: %s" % (b, lib[b]) for b in runs))
    for n in notes:
        say(n)
    if env.host:
        backend = os.environ.get("OMPI_MCA_coll_dfccl_backend",
                                 os.environ.get("DFCCL_BACKEND", ""))
        if backend != "host":
            say("# note: NumPy arrays run on dfccl only on its host backend (--mca "
                "coll_dfccl_backend host); without it, Open MPI's own collectives run them")
    if any(b != "dfccl" for b in runs):
        say("# NCCL_NVLS_ENABLE=0 (NVLink multicast off, as dfccl-bench)%s"
            % ("; the NCCL backends wait %.0f ms after dfccl's calls of a size, for its "
               "daemon to quit" % (gap * 1e3) if "dfccl" in runs else ""))
    if "torch" in runs and args.coll in TorchBackend.inplace_colls:
        say("# torch runs %s in place (its only form)" % args.coll)
    say("# time: the slowest rank's median us per call (call and wait for the result); "
        "p99: the slowest rank's 99th percentile")
    say("# busbw: GB/s, size / time x %.3g (nccl-tests); wrong: elements that differ from "
        "the expected result in one more call, all ranks" % f)
    if len(runs) > 1 and "dfccl" in runs:
        say("# vs dfccl: the fastest other backend's time / dfccl's (above 1: dfccl is "
            "faster), and its name")
    cols = "%10s %9s %8s %6s"
    line1 = "#%11s %12s" % ("", "")
    line2 = "#%11s %12s" % ("size", "count")
    for b in runs:
        line1 += "  " + b.center(36, "-")
        line2 += "  " + cols % ("time", "p99", "busbw", "wrong")
    if len(runs) > 1 and "dfccl" in runs:
        line2 += "  %8s" % "vs dfccl"
    say(line1)
    say(line2)


# -- the run ------------------------------------------------------------------


def percentile(sorted_t, q):
    """Nearest rank, as dfccl-bench's --stats."""
    return sorted_t[int((len(sorted_t) - 1) * q + 0.5)]


def time_size(env, be, lay, args):
    """(median us, p99 us, wrong elements) of this rank for one backend at
    one size."""
    s, r = be.bufs(lay)
    call = be.caller(lay, args.root)
    lay.fill_input(env.xp, s, args.root)
    env.sync()
    world.Barrier()
    for _ in range(args.warmup):
        env.sync()
        call()
    world.Barrier()
    t = []
    for _ in range(args.iters):
        env.sync()  # nothing is queued: outside the time all the same
        t0 = time.perf_counter()
        call()
        t.append(time.perf_counter() - t0)
    # one more call, checked: the output cleared, then the input again
    # (in place, the input is what stays)
    r[...] = SENTINEL
    lay.fill_input(env.xp, s, args.root)
    env.sync()
    call()
    wrong = lay.wrong(env.xp, r, args.root)
    t.sort()
    return percentile(t, 0.5) * 1e6, percentile(t, 0.99) * 1e6, wrong


def quit_wait():
    """Seconds for dfccl's daemon to quit after its last call: well above
    DFCCL_QUIT_US (1 ms on GPUs unless set)."""
    us = os.environ.get("OMPI_MCA_coll_dfccl_quit_us") or os.environ.get("DFCCL_QUIT_US")
    try:
        us = int(us) if us else 1000
    except ValueError:
        us = 1000
    return max(0.02, 3 * us / 1e6)


def main():
    try:
        args = parse_args(sys.argv[1:])
    except Usage as e:
        say_err("%s; see --help" % e)
        return 2
    except SystemExit as e:  # --help
        return e.code if isinstance(e.code, int) else 0
    env = Env(args)
    try:
        runs, notes = choose(env, args)
    except Unavailable as e:
        say_err(str(e))
        return 3
    if not env.host:
        # NCCL's NVLink multicast can take shared GPUs out of service
        os.environ["NCCL_NVLS_ENABLE"] = "0"
        env.use_gpu()
    gap = quit_wait()
    header(env, args, runs, notes, gap)
    maxn = args.maxbytes // env.esz
    made = {"dfccl": DfcclBackend, "cupy-nccl": CupyNcclBackend, "torch": TorchBackend}
    backends = [made[b](env, maxn) for b in runs]

    wrong_total = {b: 0 for b in runs}
    f = BUSBW[args.coll](nranks)
    nbytes = args.minbytes
    while nbytes <= args.maxbytes:
        lay = Layout(args.coll, nbytes, env.esz, nranks)
        if lay.per == 0:
            say("# %d bytes: skipped: less than one %s element per rank on %d ranks"
                % (nbytes, args.dtype, nranks))
        else:
            row = "%12d %12d" % (lay.nbytes, lay.count)
            times = {}
            last = None
            for be in backends:
                if last == "dfccl" and be.name != "dfccl":
                    time.sleep(gap)
                med, p99, wrong = time_size(env, be, lay, args)
                last = be.name
                got = world.allgather((med, p99, wrong))
                med = max(g[0] for g in got)
                p99 = max(g[1] for g in got)
                wrong = sum(g[2] for g in got)
                wrong_total[be.name] += wrong
                times[be.name] = med
                busbw = lay.nbytes / (med * 1e3) * f if med > 0 else 0.0
                row += "  %10.1f %9.1f %8.2f %6d" % (med, p99, busbw, wrong)
            if len(backends) > 1 and "dfccl" in times:
                others = [(t, b) for b, t in times.items() if b != "dfccl"]
                best_t, best = min(others)
                row += "  %8.2f %s" % (best_t / times["dfccl"], best)
            say(row)
        nxt = int(nbytes * args.stepfactor)
        nbytes = nxt if nxt > nbytes else nbytes + 1

    for be in backends:
        be.close()
    bad = {b: w for b, w in wrong_total.items() if w}
    if bad:
        say("# %s: WRONG RESULTS: %s"
            % (PROG, ", ".join("%s %d elements" % (b, w) for b, w in bad.items())))
        return 1
    say("# %s: every result checked and right" % PROG)
    return 0


def say_err(text):
    if rank == 0:
        sys.stderr.write("%s: %s\n" % (PROG, text))
        sys.stderr.flush()


if __name__ == "__main__":
    # an exception on one rank ends the job: the others must not wait for
    # it in a collective
    try:
        status = main()
    except Exception:
        traceback.print_exc()
        sys.stderr.flush()
        world.Abort(1)
    sys.stdout.flush()
    sys.exit(status)
