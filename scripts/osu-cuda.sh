#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Run the OSU Micro-Benchmarks' collectives on device buffers through the
# dfccl coll component, with validation.
#
# usage: scripts/osu-cuda.sh -o OMB_SRC -b BUILDDIR [-n "2 4"] [-m 8:1048576] [--nccl]
#
#   -o OMB_SRC    an OSU Micro-Benchmarks 7.x source tree (not part of dfccl);
#                 it is configured with --enable-cuda=basic and built in place
#   -b BUILDDIR   a dfccl build directory (configured with CUDA and Open MPI)
#   -n "N ..."    rank counts (default "2"), one GPU per rank
#   -m MIN:MAX    message sizes (default 8:1048576)
#   --nccl        also build OMB's NCCL benchmarks (--enable-ncclomb) and run
#                 osu_xccl_allreduce beside the warm-daemon latency run: the
#                 same measure for NCCL (a launch and a stream synchronize)
#
# For each rank count, with -d cuda -c (device buffers, validation), for the
# default type (MPI_CHAR) and -T mpi_float, blocking and nonblocking: the
# collectives dfccl runs itself (osu_allreduce, osu_allgather,
# osu_reduce_scatter, osu_reduce, osu_bcast, osu_alltoall, osu_alltoallv
# and their osu_i* forms) and those the component stages through host
# memory (osu_allgatherv, osu_gather, osu_gatherv, osu_scatter,
# osu_scatterv and their osu_i* forms); osu_barrier and osu_ibarrier, which have no buffers
# to validate, plainly; then osu_allreduce without validation (warm-daemon
# latency). Exits non-zero if a run fails, a benchmark is missing, or any
# line reports a validation failure. NVLink multicast stays off.
set -u

omb=
build=
ranks=2
sizes=8:1048576
nccl=0
while [ $# -gt 0 ]; do
    case "$1" in
    -o) omb=$2; shift 2 ;;
    -b) build=$2; shift 2 ;;
    -n) ranks=$2; shift 2 ;;
    -m) sizes=$2; shift 2 ;;
    --nccl) nccl=1; shift ;;
    -h|--help) sed -n '3,/^set -u$/{/^set -u$/!p}' "$0"; exit 0 ;;
    *) echo "osu-cuda: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
if [ -z "$omb" ] || [ -z "$build" ]; then
    echo "osu-cuda: -o OMB_SRC and -b BUILDDIR are required (see --help)" >&2
    exit 2
fi
comp="$build/ompi_coll_dfccl/.libs"
if [ ! -f "$comp/mca_coll_dfccl.so" ]; then
    echo "osu-cuda: $comp/mca_coll_dfccl.so not found: build dfccl with Open MPI first" >&2
    exit 2
fi
export NCCL_NVLS_ENABLE=0
cuda=$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")

xflags=
[ $nccl = 1 ] && xflags=--enable-ncclomb
if [ ! -x "$omb/c/mpi/collective/blocking/osu_allreduce" ] ||
   { [ $nccl = 1 ] && [ ! -x "$omb/c/xccl/collective/osu_xccl_allreduce" ]; }; then
    # shellcheck disable=SC2086
    (cd "$omb" && ./configure CC=mpicc CXX=mpicxx --enable-cuda=basic --with-cuda="$cuda" \
        $xflags) \
        >"$omb/dfccl-configure.log" 2>&1 ||
        { echo "osu-cuda: OMB configure failed, see $omb/dfccl-configure.log" >&2; exit 1; }
    # the utilities first (some optional parts may fail), then the collectives
    make -C "$omb/c/util" -j"$(nproc)" >"$omb/dfccl-make.log" 2>&1
    make -C "$omb/c/mpi/collective" -j"$(nproc)" >>"$omb/dfccl-make.log" 2>&1
    if [ $nccl = 1 ]; then
        make -C "$omb/c/xccl" -j"$(nproc)" >>"$omb/dfccl-make.log" 2>&1 ||
            echo "osu-cuda: OMB's NCCL benchmarks did not build, see $omb/dfccl-make.log" >&2
    fi
    if [ ! -x "$omb/c/mpi/collective/blocking/osu_allreduce" ]; then
        echo "osu-cuda: OMB build failed, see $omb/dfccl-make.log" >&2
        exit 1
    fi
fi

sysdir=$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p')
oc="$omb/c/mpi/collective"
rc=0
# osu_run LABEL BENCHMARK ARGS...: run it on "${mr[@]}" and fail the script
# (rc) on a non-zero exit or a line that reports a failure
osu_run() {
    local out st
    echo "### $1"
    shift
    out=$(timeout 300 "${mr[@]}" "$@" 2>&1)
    st=$?
    echo "$out"
    if [ $st -ne 0 ] || echo "$out" | grep -qi 'fail'; then
        echo "### FAILED (exit $st)"
        rc=1
    fi
}
for n in $ranks; do
    mr=(mpirun --oversubscribe --bind-to none -np "$n" -x NCCL_NVLS_ENABLE=0
        --mca mca_base_component_path "$comp${sysdir:+:$sysdir}"
        --mca coll_dfccl_backend cuda --mca coll_dfccl_verbose 1)
    for c in allreduce allgather reduce_scatter reduce bcast \
             alltoall alltoallv allgatherv gather gatherv scatter scatterv; do
        for b in "blocking/osu_$c" "non_blocking/osu_i$c"; do
            if [ ! -x "$oc/$b" ]; then
                echo "### FAILED: $oc/$b was not built"
                rc=1
                continue
            fi
            for t in "" "-T mpi_float"; do
                # shellcheck disable=SC2086
                osu_run "$n ranks: $(basename "$b") -d cuda -c -m $sizes $t" \
                    "$oc/$b" -d cuda -c -m "$sizes" -i 100 -x 10 $t
            done
        done
    done
    # no buffers: neither -d nor -c
    for b in blocking/osu_barrier non_blocking/osu_ibarrier; do
        osu_run "$n ranks: $(basename "$b")" "$oc/$b" -i 1000 -x 100
    done
    echo "### $n ranks: osu_allreduce -d cuda (no validation: warm daemon)"
    timeout 300 "${mr[@]}" "$oc/blocking/osu_allreduce" -d cuda -m 8:65536 -i 2000 -x 200 ||
        rc=1
    if [ $nccl = 1 ] && [ -x "$omb/c/xccl/collective/osu_xccl_allreduce" ]; then
        echo "### $n ranks: osu_xccl_allreduce -d cuda (NCCL: launch + stream synchronize)"
        timeout 300 mpirun --oversubscribe --bind-to none -np "$n" -x NCCL_NVLS_ENABLE=0 \
            "$omb/c/xccl/collective/osu_xccl_allreduce" -d cuda -m 8:65536 -i 2000 -x 200 ||
            rc=1
    fi
done
exit $rc
