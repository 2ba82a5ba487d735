#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# GPU test lane: build dfccl with CUDA and run the test suites on GPUs.
#
# usage: scripts/gpu-lane.sh [-b BUILDDIR] [-j JOBS] [-r "2 4"] [-R "8"]
#                            [-s "STEP ..."] [-u "TEST ..."] [--no-autoreconf]
#
#   -b BUILDDIR       out-of-tree build directory (default /tmp/dfccl-gpu-lane)
#   -j JOBS           parallel make jobs (default: all cores)
#   -r "N ..."        rank counts for the GPU tests (default "2 4")
#   -R "N ..."        rank counts for the unit step: DFCCL_TEST_RANKS, which
#                     test_coll, test_deadlock, test_straggler and
#                     test_alltoall run every multi-rank test at instead of
#                     their own (default: their own; a DFCCL_TEST_RANKS in
#                     the environment passes through as before), e.g. "8"
#                     on a machine with 8 GPUs
#   -s "STEP ..."     run only these steps (default: all, in this order):
#                     build unit gpu mpi sanitizer reliability soak; a lane
#                     split over several runs passes the same BUILDDIR
#   -u "TEST ..."     the unit step runs only these programs of test/unit
#                     (default: all of them)
#   --mps             run the steps under an MPS control daemon of the lane's
#                     own (CUDA_MPS_PIPE_DIRECTORY under BUILDDIR), stopped
#                     around the sanitizer step, whose tools need plain
#                     contexts: ranks that share a GPU then run side by side
#                     instead of in time slices (about 1 ms per collective)
#   --no-autoreconf   skip autoreconf -fi (the tree already has configure)
#
# Steps, each logged to $OUT/<step>.log when OUT is set (else BUILDDIR/logs):
#   1. fail unless a GPU is visible (a skip must never hide lost coverage);
#   2. autoreconf -fi, configure (CUDA kernels must be enabled), make;
#   3. test/unit's make check with DFCCL_BACKEND=cuda: the correctness
#      matrix, deadlock scenarios and bad input, one GPU per rank (ranks
#      share GPUs when there are fewer);
#   4. the GPU tests (test/gpu) with each rank count of -r (also with
#      preemptions at every primitive, and past the connector budget); with
#      DFCCL_UCX_CUDA=DIR (a UCX built with CUDA, scripts/ucx-cuda.sh),
#      test_net's forced and two-host cases with the net's slots on the GPU
#      (DFCCL_NET_MEM=device, which fails where that UCX cannot reach them);
#      the MPI
#      component on device buffers, every program choosing its GPU after
#      MPI_Init from the node-local rank: the collective matrix
#      (test/mpi/test_coll --device, 1, 2, 3 and 4 ranks), then with 2 ranks and
#      each count of -r: every other MPI collective (test_allcolls --device),
#      the collective matrix again with each rank seeing only its own GPU
#      (CUDA_VISIBLE_DEVICES per rank, P2P forced),
#      every CUDA memory kind (test_memkinds), a thread that never selects a
#      device (test_thread_nodevice --device), a mismatched count under
#      MPI_ERRORS_RETURN and MPI_ERRORS_ARE_FATAL (test_errors --device),
#      a program that resets its device before MPI_Finalize (test_devreset),
#      the deadlock examples, and mpi4py with CuPy (test/mpi/test_mpi4py.py
#      --cupy and examples/python/train_dp.py --cupy, under DFCCL_PYTHON or
#      python3); each MPI run must show dfccl's statistics with collectives
#      on every rank;
#   5. compute-sanitizer memcheck on a 2-rank allreduce, racecheck and
#      synccheck on a small one (sizes capped by DFCCL_TEST_MAX_COUNT) and on
#      SIMPLE, and memcheck with the leak check on test/reliability's small
#      2-rank run;
#   6. test/reliability's make check on the CUDA backend (soak scaled down,
#      shared memory, small run);
#   7. the full soak: DFCCL_SOAK_COUNT=1000000 collectives per rank
#      (DFCCL_LANE_SOAK_COUNT sets another count).
# Prints a summary and exits non-zero if any step failed. Run it on a GPU
# machine from any directory; NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
# DFCCL_LANE_STEP_TIMEOUT (seconds, default 1800) bounds every step.
set -u

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=/tmp/dfccl-gpu-lane
jobs=$(nproc 2>/dev/null || echo 4)
ranks="2 4"
steps="build unit gpu mpi sanitizer reliability soak"
reconf=1
unit=
unit_ranks=
mps=0
while [ $# -gt 0 ]; do
    case "$1" in
    -b) build=$2; shift 2 ;;
    -j) jobs=$2; shift 2 ;;
    -r) ranks=$2; shift 2 ;;
    -R) unit_ranks=$2; shift 2 ;;
    -s) steps=$2; shift 2 ;;
    -u) unit=$2; shift 2 ;;
    --mps) mps=1; shift ;;
    --no-autoreconf) reconf=0; shift ;;
    -h|--help) sed -n '3,/^set -u$/{/^set -u$/!p}' "$0"; exit 0 ;;
    *) echo "gpu-lane: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
logs=${OUT:-$build/logs}
mkdir -p "$build" "$logs"
export NCCL_NVLS_ENABLE=0
failed=()
summary=()

# step NAME COMMAND...: run in the build directory, log, record the result.
step() {
    local name=$1 t0 rc
    shift
    t0=$(date +%s)
    touch "$logs/$name.log.start"
    echo "== $name: $*"
    (cd "$build" && timeout "${DFCCL_LANE_STEP_TIMEOUT:-1800}" "$@") >"$logs/$name.log" 2>&1
    rc=$?
    summary+=("$(printf '%-28s %s (%ds)' "$name" "$([ $rc = 0 ] && echo PASS || echo "FAIL rc=$rc")" $(($(date +%s) - t0)))")
    if [ $rc != 0 ]; then
        failed+=("$name")
        # the failing tests' own output
        find "$build" -name test-suite.log -newer "$logs/$name.log.start" \
            -exec cat {} + >>"$logs/$name.log" 2>/dev/null
        tail -n 40 "$logs/$name.log"
    fi
    rm -f "$logs/$name.log.start"
    return $rc
}

# MPS: one control daemon for the lane, with its own pipe and log
# directories, so that it neither finds nor disturbs another one.
mps_start() {
    [ $mps = 1 ] || return 0
    export CUDA_MPS_PIPE_DIRECTORY="$build/mps/pipe" CUDA_MPS_LOG_DIRECTORY="$build/mps/log"
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if ! nvidia-cuda-mps-control -d; then
        echo "gpu-lane: cannot start the MPS control daemon (nvidia-cuda-mps-control -d)" >&2
        failed+=(mps)
        finish
    fi
    echo "== MPS control daemon started ($CUDA_MPS_PIPE_DIRECTORY)"
}

mps_stop() {
    [ $mps = 1 ] && [ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ] || return 0
    echo quit | nvidia-cuda-mps-control >/dev/null 2>&1
    sleep 1
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    echo "== MPS control daemon stopped"
}

finish() {
    mps_stop
    echo
    echo "== GPU lane summary (logs in $logs)"
    printf '%s\n' "${summary[@]}" | tee "$logs/summary.txt"
    if [ ${#failed[@]} -ne 0 ]; then
        echo "FAILED: ${failed[*]}" | tee -a "$logs/summary.txt"
        exit 1
    fi
    echo "all steps passed" | tee -a "$logs/summary.txt"
    exit 0
}

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "${ngpu:-0}" -lt 1 ]; then
    echo "gpu-lane: no GPU visible (nvidia-smi -L lists none): the lane needs one" >&2
    exit 1
fi
nvidia-smi -L >"$logs/gpus.txt" 2>&1
nvidia-smi topo -m >>"$logs/gpus.txt" 2>&1

want() {
    case " $steps " in *" $1 "*) return 0 ;; esac
    return 1
}

if want build; then
    if [ $reconf = 1 ]; then
        step autoreconf bash -c "cd '$src' && autoreconf -fi" || finish
    fi
    step configure "$src/configure" || finish
    if ! grep -q 'CUDA kernels (nvcc) : yes' "$logs/configure.log"; then
        echo "gpu-lane: configure did not enable the CUDA kernels" >&2
        failed+=(configure-cuda)
        finish
    fi
    step make make -j"$jobs" || finish
elif [ ! -f "$build/Makefile" ]; then
    echo "gpu-lane: $build is not built; run the build step first" >&2
    exit 1
fi

mps_start
# one test program at a time: they share the GPUs
if want unit; then
    # -R: the rank counts in the step's name and environment
    uenv=(DFCCL_BACKEND=cuda)
    ustep=check-cuda
    if [ -n "$unit_ranks" ]; then
        uenv+=(DFCCL_TEST_RANKS="$unit_ranks")
        ustep+="-ranks-$(echo $unit_ranks | tr ' ,' '--')"
    fi
    if [ -n "$unit" ]; then
        step "$ustep-${unit// /-}" env "${uenv[@]}" make -C test/unit check TESTS="$unit"
    else
        step "$ustep" env "${uenv[@]}" make -C test/unit check
    fi
fi
if want gpu; then
    for n in $ranks; do
        step "gpu-tests-${n}ranks" env DFCCL_TEST_NRANKS="$n" make -C test/gpu check
        # SIMPLE with a spin threshold of 1 and 4 slices per ring step: the
        # collectives are preempted at almost every primitive, between the
        # slices the publishing warp releases
        step "gpu-preempt-simple-${n}ranks" env DFCCL_TEST_NRANKS="$n" DFCCL_PROTO=simple \
            DFCCL_SPIN_HEAD=1 DFCCL_SPIN_MIN=1 DFCCL_SPIN_STICKY=1 DFCCL_STEP_SLICES=4 \
            test/gpu/test_gpu_allreduce
        # one shot up to 64 KiB (allgather and reduce-scatter: a rank) and
        # two shot above it up to 16 MiB, with thresholds of 64 polls:
        # preempted wherever a peer is a little late
        step "gpu-preempt-shots-${n}ranks" env DFCCL_TEST_NRANKS="$n" \
            DFCCL_SPIN_HEAD=64 DFCCL_SPIN_MIN=64 DFCCL_SPIN_STICKY=64 \
            DFCCL_ONESHOT_BYTES=65536 DFCCL_ONESHOT_GATHER_BYTES=65536 \
            DFCCL_TWOSHOT_BYTES=16777216 \
            DFCCL_TWOSHOT_CHANNEL_BYTES=16384 test/gpu/test_gpu_allreduce
        # a connector budget that every registration passes: the one-shot
        # allreduces (of up to 128 LL lines a channel: run by the blocks'
        # first warps) fall back to the ring, on lean connectors, which
        # runs on every thread
        step "gpu-budget-${n}ranks" env DFCCL_TEST_NRANKS="$n" DFCCL_CONN_BUDGET=1 \
            DFCCL_TEST_MAX_COUNT=1048579 test/gpu/test_gpu_allreduce
    done
    if [ -n "${DFCCL_UCX_CUDA:-}" ]; then
        # test_net is built by the unit step's make check; a lane that runs
        # the gpu step alone builds it here
        step net-build make -C test/unit test_net
        for case in forced two_hosts; do
            step "net-gpu-memory-$case" env \
                LD_LIBRARY_PATH="$DFCCL_UCX_CUDA/libucx/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
                DFCCL_BACKEND=cuda DFCCL_NET_MEM=device CK_RUN_CASE=$case test/unit/test_net
        done
    fi
fi
# the MPI component on device buffers, as MPI programs use it: each program
# chooses its GPU after MPI_Init (the node-local rank), or after importing
# mpi4py. Every run must exit 0 and print dfccl's statistics with
# collectives on every rank (coll_dfccl_verbose 1), so that a silent
# fallback to the other components fails too.
#
# mpi_check NP COMMAND...: run an MPI job and check both.
mpi_check() {
    local np=$1 out rc n
    shift
    out=$(timeout -k 10 "${DFCCL_LANE_MPI_TIMEOUT:-600}" "$@" 2>&1)
    rc=$?
    printf '%s\n' "$out"
    [ $rc = 0 ] || return $rc
    n=$(printf '%s\n' "$out" | grep '^dfccl: rank .*: collectives' | awk '$5 > 0' | wc -l)
    if [ "$n" -lt "$np" ]; then
        echo "gpu-lane: dfccl ran collectives on $n of $np ranks"
        return 1
    fi
}
# mpi_fatal NP REACHED COMMAND...: an MPI job that must abort through
# MPI_ERRORS_ARE_FATAL after printing REACHED, with no crash and no hang.
mpi_fatal() {
    local reached=$2 out rc
    shift 2
    out=$(timeout -k 10 120 "$@" 2>&1)
    rc=$?
    printf '%s\n' "$out"
    if [ $rc = 0 ] || [ $rc = 124 ] || [ $rc = 137 ]; then
        echo "gpu-lane: the job did not abort (exit $rc)"
        return 1
    fi
    if printf '%s\n' "$out" |
       grep -qiE 'segmentation fault|signal 11|sigsegv|bus error|core dumped'; then
        echo "gpu-lane: a process crashed"
        return 1
    fi
    if printf '%s\n' "$out" | grep -q 'FAIL' ||
       ! printf '%s\n' "$out" | grep -q "$reached" ||
       ! printf '%s\n' "$out" | grep -q 'MPI_ERRORS_ARE_FATAL'; then
        echo "gpu-lane: expected the failing call, then Open MPI's MPI_ERRORS_ARE_FATAL abort"
        return 1
    fi
}
export -f mpi_check mpi_fatal
if want mpi; then
    comp="$build/ompi_coll_dfccl/.libs"
    sysdir=$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p')
    py=${DFCCL_PYTHON:-python3}
    # mr: the mpirun command line for $1 ranks on the component
    mpi_cmd() {
        mr=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
            mpirun --oversubscribe --bind-to none -np "$1"
            --mca mca_base_component_path "$comp${sysdir:+:$sysdir}"
            --mca coll_dfccl_backend cuda --mca coll_dfccl_verbose 1)
    }
    make -C "$build/test/mpi" test_coll test_allcolls test_memkinds test_thread_nodevice \
        test_errors test_devreset >/dev/null 2>&1
    for n in 1 2 3 4; do
        mpi_cmd "$n"
        step "mpi-test_coll-device-${n}ranks" bash -c 'mpi_check "$@"' _ "$n" "${mr[@]}" \
            test/mpi/test_coll --device
    done
    for n in $(printf '%s\n' 2 $ranks | sort -nu); do
        mpi_cmd "$n"
        step "mpi-test_allcolls-device-${n}ranks" bash -c 'mpi_check "$@"' _ "$n" "${mr[@]}" \
            test/mpi/test_allcolls --device
        # each rank sees only its own GPU, as under Slurm's --gpus-per-task
        # or a per-rank wrapper script: every rank's GPU is its device 0, so
        # the peers' GPUs are known by UUID, and reached by P2P (forced: a
        # rank that cannot find the path fails the job)
        step "mpi-test_coll-own-gpu-${n}ranks" bash -c 'mpi_check "$@"' _ "$n" "${mr[@]}" \
            --mca coll_dfccl_transport p2p bash -c \
            'export CUDA_VISIBLE_DEVICES=$((OMPI_COMM_WORLD_LOCAL_RANK % $0)); exec "$@"' \
            "$ngpu" test/mpi/test_coll --device
        step "mpi-test_memkinds-${n}ranks" bash -c 'mpi_check "$@"' _ "$n" "${mr[@]}" \
            test/mpi/test_memkinds
        step "mpi-test_thread_nodevice-${n}ranks" bash -c 'mpi_check "$@"' _ "$n" "${mr[@]}" \
            test/mpi/test_thread_nodevice --device
        step "mpi-test_errors-return-${n}ranks" bash -c 'mpi_check "$@"' _ "$n" "${mr[@]}" \
            test/mpi/test_errors --device
        step "mpi-test_errors-fatal-${n}ranks" bash -c 'mpi_fatal "$@"' _ "$n" \
            'starting the mismatched' "${mr[@]}" test/mpi/test_errors --device --fatal
        # the device reset before MPI_Finalize, as CUDA's samples end
        step "mpi-test_devreset-${n}ranks" bash -c 'mpi_check "$@"' _ "$n" "${mr[@]}" \
            test/mpi/test_devreset --device
        for ex in mpi_disorder mpi_threads mpi_devsync; do
            step "mpi-${ex}-${n}ranks" bash -c 'mpi_check "$@"' _ "$n" "${mr[@]}" "examples/$ex"
        done
        # mpi4py: MPI initialized at the import, the GPU chosen after it (CuPy)
        step "mpi-mpi4py-cupy-${n}ranks" bash -c 'mpi_check "$@"' _ "$n" "${mr[@]}" \
            "$py" "$src/test/mpi/test_mpi4py.py" --cupy
        step "mpi-train_dp-cupy-${n}ranks" bash -c 'mpi_check "$@"' _ "$n" "${mr[@]}" \
            "$py" "$src/examples/python/train_dp.py" --cupy
    done
fi

if want sanitizer; then
    mps_stop
    san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    if [ -x "$san" ]; then
        # built by the gpu step's make check, unless that step was not run
        make -C "$build/test/gpu" test_gpu_allreduce >/dev/null 2>&1
        step memcheck-allreduce-2ranks env DFCCL_TEST_NRANKS=2 DFCCL_TEST_MAX_COUNT=70000 \
            "$san" --tool memcheck --target-processes all --error-exitcode 1 \
            test/gpu/test_gpu_allreduce
        # racecheck reports shared-memory accesses ordered by __syncthreads
        # as races once some warps of the block also take a barrier of
        # their own: the first warps that run a small one-shot allreduce
        # (DFCCL_TEAM_THREADS, kernels/daemon.h), and the warp that
        # publishes SIMPLE slices (kernels/prims.h). So it checks one shot
        # on whole blocks and SIMPLE in 96-thread blocks (no publishing
        # warp), and synccheck checks the barriers of both
        step racecheck-allreduce-2ranks env DFCCL_TEST_NRANKS=2 DFCCL_TEST_MAX_COUNT=4096 \
            DFCCL_MAX_BLOCKS=2 DFCCL_TEAM_THREADS=0 "$san" --tool racecheck \
            --target-processes all --error-exitcode 1 test/gpu/test_gpu_allreduce
        step synccheck-allreduce-2ranks env DFCCL_TEST_NRANKS=2 DFCCL_TEST_MAX_COUNT=4096 \
            DFCCL_MAX_BLOCKS=2 "$san" --tool synccheck --target-processes all \
            --error-exitcode 1 test/gpu/test_gpu_allreduce
        step racecheck-simple-2ranks env DFCCL_PROTO=simple DFCCL_THREADS=96 \
            DFCCL_TEST_NRANKS=2 DFCCL_TEST_MAX_COUNT=300000 DFCCL_MAX_BLOCKS=2 \
            "$san" --tool racecheck --target-processes all --error-exitcode 1 \
            test/gpu/test_gpu_allreduce
        step synccheck-simple-2ranks env DFCCL_PROTO=simple DFCCL_TEST_NRANKS=2 \
            DFCCL_TEST_MAX_COUNT=300000 DFCCL_MAX_BLOCKS=2 "$san" --tool synccheck \
            --target-processes all --error-exitcode 1 test/gpu/test_gpu_allreduce
        # device memory leaks: every rank destroys its context and frees
        # its buffers before it exits
        make -C "$build/test/reliability" test_small >/dev/null 2>&1
        step memcheck-leaks-small env DFCCL_BACKEND=cuda "$san" --tool memcheck \
            --leak-check full --target-processes all --error-exitcode 1 \
            test/reliability/test_small
    else
        echo "gpu-lane: compute-sanitizer not found" >&2
        failed+=(compute-sanitizer)
    fi
    mps_start
fi
if want reliability; then
    step reliability-cuda env DFCCL_BACKEND=cuda make -C test/reliability check
fi
if want soak; then
    soak_count=${DFCCL_LANE_SOAK_COUNT:-1000000}
    make -C "$build/test/reliability" test_soak >/dev/null 2>&1
    step soak-$soak_count env DFCCL_BACKEND=cuda DFCCL_SOAK_COUNT=$soak_count \
        CK_DEFAULT_TIMEOUT=3000 test/reliability/test_soak
fi
finish
