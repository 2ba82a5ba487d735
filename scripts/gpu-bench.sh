#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The performance tables of docs/performance.md: dfccl-bench against NCCL for
# every collective, on each rank count (one GPU per rank), with plots.
#
# usage: scripts/gpu-bench.sh -b BUILDDIR [-n "2 4"] [-o OUTDIR] [-c "allreduce ..."]
#                              [-s "SECTION ..."] [-C nccl|nccl-best|none]
#
#   -b BUILDDIR   a dfccl build directory configured with CUDA, NCCL, MPI and
#                 UCX (the net transport and tools/bench/dfccl-ucx-bw)
#   -n "N ..."    rank counts (default "2 4")
#   -o OUTDIR     tables (.txt) and plots (.svg) go here (default $OUT or .)
#   -c "C ..."    collectives (default: all seven)
#   -s "S ..."    sections (default: all, in this order): colls cold net
#                 disorder registered msccl trees straggler algos python; a
#                 long campaign split over several jobs runs a few at a time
#   -C WHAT       what dfccl is compared with in the same job: nccl (the
#                 default), nccl-best (plain NCCL, NCCL on symmetric buffers
#                 and NCCL from a CUDA graph: the fastest at each size), or
#                 none (dfccl alone, e.g. ranks sharing one GPU, which NCCL
#                 refuses)
#
# Sections, for each rank count:
#   colls       every collective of -c, with NCCL;
#   cold        allreduce after idling;
#   net         (2 ranks) both libraries' network transports;
#   disorder    8 allreduces per round in order and shuffled;
#   registered  the memory of 1,000 registered allreduces;
#   msccl       MSCCL programs from tools/msccl/msccl_gen.py against the
#               built-in algorithm they stand in for and NCCL: one-phase
#               all-pairs (1, 4 and 8 instances by size range) against the
#               one-shot from 8 B to 256 KiB, and a 32-ring program against
#               the ring from 16 MiB to 1 GiB; each pair is summed up in
#               NAME-vs-NAME.txt (time / time per size);
#   trees       tree and ctree against NCCL's Tree, the ring against NCCL's
#               Ring, 256 KiB to 1 GiB;
#   straggler   the last rank late by 0.1, 1 and 10 ms before every
#               allreduce, with and without straggler tolerance (the
#               others' time per call, summed up as above);
#   algos       dfccl-bench --algos for every collective of -c, 8 B to
#               1 GiB: each algorithm's predicted and measured time, and the
#               picks of the model and of the static thresholds;
#   python      tools/bench/dfccl-pybench.py for the collectives of -c it
#               has (allreduce, allgather, reducescatter, broadcast,
#               alltoall), 8 B to 256 MiB: mpi4py on CuPy arrays through the
#               component (BUILDDIR/ompi_coll_dfccl) against CuPy's NCCL
#               communicator and torch.distributed, under DFCCL_PYTHON or
#               python3; the NCCL backends need a GPU per rank (skipped, with
#               a line, where ranks share one), and -C has no say here.
#
# colls: 8 B to 64 KiB (factor 8, 200 timed
# calls: latency) and 256 KiB to 1 GiB (factor 4, 50 timed calls:
# bandwidth), both with --compare nccl (-C), --plot and --stats (each size's
# median, p99 and slowest call next to the mean: a mean of a few calls
# moves with one slow call). Then, for allreduce: the cold latency
# (--cold 3000, with --stats); on 2 ranks, the network transports forced on
# both sides in one job, dfccl's net (DFCCL_NET=1, UCX) against NCCL's
# (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1), 8 B to 64 KiB (200 timed calls)
# and 256 KiB to 1 GiB (10), and UCX's own ceiling between the two processes
# (dfccl-ucx-bw, 16 MiB to 1 GiB: host memory on the transports dfccl's net
# uses, UCX_TLS or else tcp,sm,self, then GPU memory with cuda_copy added to
# them, skipped with its reason where this UCX cannot take CUDA memory; with
# DFCCL_UCX_CUDA=DIR, a UCX built with CUDA from scripts/ucx-cuda.sh, the
# net runs again with its slots on the GPU, and the GPU-memory ceiling with
# that UCX and cuda_ipc); 8
# allreduces per round in one order against a random order per rank
# (--disorder 8); the device memory of 1,000 registered allreduces and the
# daemon's SMs, active and idle (--registered 1000, sizes 8 B to 1 MiB, then
# 1 MiB to 64 MiB). Exits non-zero if a run fails or reports wrong elements
# (or bytes). NVLink multicast stays off.
set -u

build=
ranks="2 4"
out=${OUT:-.}
colls="allreduce allgather reducescatter reduce broadcast alltoall alltoallv"
all_sections="colls cold net disorder registered msccl trees straggler algos python"
sections=$all_sections
cmp=(--compare nccl)
while [ $# -gt 0 ]; do
    case "$1" in
    -b) build=$2; shift 2 ;;
    -n) ranks=$2; shift 2 ;;
    -o) out=$2; shift 2 ;;
    -c) colls=$2; shift 2 ;;
    -s) sections=$2; shift 2 ;;
    -C) case "$2" in
        none) cmp=() ;;
        nccl|nccl-best) cmp=(--compare "$2") ;;
        *) echo "gpu-bench: -C takes nccl, nccl-best or none, not $2" >&2; exit 2 ;;
        esac
        shift 2 ;;
    -h|--help) sed -n '3,/^set -u$/{/^set -u$/!p}' "$0"; exit 0 ;;
    *) echo "gpu-bench: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
bench="$build/tools/bench/dfccl-bench"
ucxbw="$build/tools/bench/dfccl-ucx-bw"
if [ -z "$build" ] || [ ! -x "$bench" ]; then
    echo "gpu-bench: -b BUILDDIR with tools/bench/dfccl-bench is required (see --help)" >&2
    exit 2
fi
for sec in $sections; do
    case " $all_sections " in
    *" $sec "*) ;;
    *) echo "gpu-bench: unknown section $sec (sections: $all_sections)" >&2; exit 2 ;;
    esac
done
want() { case " $sections " in *" $1 "*) return 0 ;; esac; return 1; }
gen="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tools/msccl/msccl_gen.py"
pybench="$(dirname "$gen")/../bench/dfccl-pybench.py"
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
rc=0

# run NAME ARGS...: one dfccl-bench (or dfccl-ucx-bw) run, its table in
# $out/NAME.txt (wcol: the column of dfccl's #wrong; dfccl-ucx-bw's is 4)
wcol=8
run() {
    local name=$1 st
    shift
    echo "### $name: $*" | tee "$out/$name.txt"
    timeout 600 "$@" 2>&1 | tee -a "$out/$name.txt"
    st=${PIPESTATUS[0]}
    # column 8 is dfccl's #wrong, column 12 NCCL's
    if [ "$st" != 0 ] || awk -v w=$wcol '$1 ~ /^[0-9]+$/ && NF >= w && ($w != 0 ||
                               (w == 8 && NF >= 12 && $12 ~ /^[0-9]+$/ && $12 != 0)) {bad=1}
                               END {exit !bad}' "$out/$name.txt"; then
        echo "### $name FAILED (exit $st, or wrong elements)" | tee -a "$out/$name.txt"
        rc=1
    fi
}

# compare A B: per size, A's time over B's (column 5 of both tables), in
# $out/A-vs-B.txt
compare() {
    awk -v a="$1" -v b="$2" '
        FNR == 1 { f++ }
        $1 ~ /^[0-9]+$/ && NF >= 8 { if (f == 1) t[$1] = $5; else if ($1 in t) {
            if (!hdr++) printf "#%11s %10s %10s %8s\n", "size", a, b, "ratio"
            printf "%12s %10.1f %10.1f %8.2f\n", $1, t[$1], $5, ($5 > 0 ? t[$1] / $5 : 0) } }' \
        "$out/$1.txt" "$out/$2.txt" | tee "$out/$1-vs-$2.txt"
}

# UCX's ceiling between the two processes of a 2-rank job (dfccl-ucx-bw):
# host memory on the transports dfccl's net uses (UCX_TLS, or else its
# default tcp,sm,self, which dfccl-ucx-bw takes too), then GPU memory,
# staged by cuda_copy, where this UCX takes it (status 3: it cannot, said
# and skipped)
net_ceiling() {
    local cuda st tls=${UCX_TLS:-tcp,sm,self}
    if [ ! -x "$ucxbw" ]; then
        echo "### ucx-bw: skipped, $ucxbw was not built (it needs MPI and UCX)"
        return
    fi
    wcol=4
    run "ucx-bw-host" "${mr[@]}" "$ucxbw" -m host -b 16M -e 1G -f 4 -w 8 -n 5
    cuda=("${mr[@]}" -x UCX_TLS="$tls,cuda_copy" "$ucxbw" -m cuda)
    timeout 120 "${cuda[@]}" -b 8 -e 8 -w 1 -n 1 >"$out/ucx-bw-cuda-probe.txt" 2>&1
    st=$?
    if [ "$st" = 0 ]; then
        run "ucx-bw-cuda" "${cuda[@]}" -b 16M -e 1G -f 4 -w 8 -n 5
    elif [ "$st" = 3 ]; then
        echo "### ucx-bw-cuda: skipped: $(grep -m1 '^dfccl-ucx-bw:' \
              "$out/ucx-bw-cuda-probe.txt")" | tee "$out/ucx-bw-cuda.txt"
    else
        echo "### ucx-bw-cuda FAILED (its probe exited $st: $out/ucx-bw-cuda-probe.txt)" |
            tee "$out/ucx-bw-cuda.txt"
        rc=1
    fi
    wcol=8
}

for n in $ranks; do
    mr=(mpirun --oversubscribe --bind-to none -np "$n" -x NCCL_NVLS_ENABLE=0)
    for c in $colls; do
        want colls || break
        run "$c-small-${n}gpu" "${mr[@]}" "$bench" -c "$c" -b 8 -e 64K -f 8 -w 20 -n 200 \
            "${cmp[@]}" --stats --plot "$out/$c-small-${n}gpu.svg"
        run "$c-${n}gpu" "${mr[@]}" "$bench" -c "$c" -b 256K -e 1G -f 4 -w 3 -n 50 \
            "${cmp[@]}" --stats --plot "$out/$c-${n}gpu.svg"
    done
    if want cold; then
        run "allreduce-cold-${n}gpu" "${mr[@]}" "$bench" -c allreduce -b 8 -e 64K -f 8 -w 5 \
            -n 50 --cold 3000 "${cmp[@]}" --stats
    fi
    if [ "$n" = 2 ] && want net; then
        # every byte through a network transport: dfccl's UCX proxies, NCCL's net
        net=("${mr[@]}" -x DFCCL_NET=1 -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1)
        run "allreduce-net-small-2gpu" "${net[@]}" "$bench" -c allreduce -b 8 -e 64K -f 8 \
            -w 20 -n 200 "${cmp[@]}" --stats
        run "allreduce-net-2gpu" "${net[@]}" "$bench" -c allreduce -b 256K -e 1G -f 4 -w 3 \
            -n 10 "${cmp[@]}" --stats --plot "$out/allreduce-net-2gpu.svg"
        net_ceiling
        # with a UCX built with CUDA (scripts/ucx-cuda.sh): the net's slots
        # on the GPU, and UCX's ceiling from GPU memory on the transports it
        # then picks
        if [ -n "${DFCCL_UCX_CUDA:-}" ]; then
            uc=(-x "LD_LIBRARY_PATH=$DFCCL_UCX_CUDA/libucx/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
            run "allreduce-net-gpumem-small-2gpu" "${net[@]}" "${uc[@]}" -x DFCCL_NET_MEM=device \
                "$bench" -c allreduce -b 8 -e 64K -f 8 -w 20 -n 200 "${cmp[@]}" --stats
            run "allreduce-net-gpumem-2gpu" "${net[@]}" "${uc[@]}" -x DFCCL_NET_MEM=device \
                "$bench" -c allreduce -b 256K -e 1G -f 4 -w 3 -n 10 "${cmp[@]}" --stats
            wcol=4
            run "ucx-bw-cuda-ucxcuda" "${mr[@]}" "${uc[@]}" \
                -x UCX_TLS="${UCX_TLS:-tcp,sm,self},cuda_copy,cuda_ipc" "$ucxbw" -m cuda \
                -b 16M -e 1G -f 4 -w 8 -n 5
            wcol=8
        fi
    fi
    if want disorder; then
        wcol=7
        run "allreduce-disorder-${n}gpu" "${mr[@]}" "$bench" -c allreduce --disorder 8 -b 1K \
            -e 1G -f 8 -w 3 -n 20
        wcol=8
    fi
    if want registered; then
        # the registered runs print "#wrong N" in a sentence; dfccl-bench exits 1 if N > 0
        run "allreduce-registered-small-${n}gpu" "${mr[@]}" "$bench" --registered 1000 -b 8 \
            -e 1M
        run "allreduce-registered-large-${n}gpu" "${mr[@]}" "$bench" --registered 1000 -b 1M \
            -e 64M
    fi
    if want msccl; then
        # small sizes: one-phase all-pairs, more instances as sizes grow
        files=
        for k in "1 0 32768" "4 32768 65536" "8 65536 262145"; do
            set -- $k
            python3 "$gen" allpairs-allreduce --ranks "$n" --phases 1 --instances "$1" \
                --min-bytes "$2" --max-bytes "$3" -o "$out/ap$1-${n}gpu.xml" || rc=1
            files=${files:+$files:}$out/ap$1-${n}gpu.xml
        done
        run "allreduce-oneshot-${n}gpu" "${mr[@]}" -x DFCCL_ALGO=oneshot "$bench" -b 8 \
            -e 256K -f 4 -w 20 -n 100 "${cmp[@]}"
        run "allreduce-allpairs-${n}gpu" "${mr[@]}" -x DFCCL_MSCCL_XML_FILES="$files" \
            "$bench" -b 8 -e 256K -f 4 -w 20 -n 100 "${cmp[@]}"
        compare "allreduce-allpairs-${n}gpu" "allreduce-oneshot-${n}gpu"
        # large sizes: 32 rings; the bench registers a size at a time, and
        # the program's connectors at 1 GiB pass the default budget
        python3 "$gen" ring-allreduce --ranks "$n" --instances 32 --min-bytes 16777216 \
            -o "$out/ring32-${n}gpu.xml" || rc=1
        run "allreduce-ring-${n}gpu" "${mr[@]}" -x DFCCL_ALGO=ring -x NCCL_ALGO=Ring "$bench" \
            -b 16M -e 1G -w 3 -n 10 "${cmp[@]}"
        run "allreduce-ringprog-${n}gpu" "${mr[@]}" -x NCCL_ALGO=Ring \
            -x DFCCL_MSCCL_XML_FILES="$out/ring32-${n}gpu.xml" -x DFCCL_CONN_BUDGET=4G \
            "$bench" -b 16M -e 1G -w 3 -n 10 "${cmp[@]}"
        compare "allreduce-ringprog-${n}gpu" "allreduce-ring-${n}gpu"
    fi
    if want trees; then
        for t in tree ctree; do
            run "allreduce-$t-${n}gpu" "${mr[@]}" -x DFCCL_ALGO=$t -x NCCL_ALGO=Tree "$bench" \
                -b 256K -e 1G -f 4 -w 3 -n 10 "${cmp[@]}" --stats
        done
        run "allreduce-ring-trees-${n}gpu" "${mr[@]}" -x DFCCL_ALGO=ring -x NCCL_ALGO=Ring \
            "$bench" -b 256K -e 1G -f 4 -w 3 -n 10 "${cmp[@]}" --stats
    fi
    if want straggler; then
        for late in 100 1000 10000; do
            for mode in plain straggler; do
                run "allreduce-late$late-$mode-${n}gpu" "${mr[@]}" "$bench" -b 4K -e 64M -f 16 \
                    -w 5 -n 40 --late $late --stats $([ $mode = straggler ] && echo --straggler)
            done
            compare "allreduce-late$late-straggler-${n}gpu" "allreduce-late$late-plain-${n}gpu"
        done
    fi
    if want algos; then
        # a row per algorithm and size: its #wrong is column 7
        wcol=7
        for c in $colls; do
            run "algos-$c-${n}gpu" "${mr[@]}" -x DFCCL_TUNER=model "$bench" -c "$c" --algos -b 8 -e 1G -f 8 -w 3 \
                -n 10
        done
        wcol=8
    fi
    if want python; then
        comp="$(cd "$build" && pwd)/ompi_coll_dfccl/.libs"
        sysdir=$(ompi_info --path pkglibdir --parsable 2>/dev/null |
                 sed -n 's/^path:pkglibdir://p')
        if [ ! -f "$comp/mca_coll_dfccl.so" ]; then
            echo "### python: skipped, $comp/mca_coll_dfccl.so was not built (it needs Open MPI)"
        else
            # a row per size: dfccl's wrong elements are column 6; the
            # script exits 1 when any backend's result is wrong
            wcol=6
            for c in $colls; do
                case $c in
                allreduce | allgather | reducescatter | broadcast | alltoall) ;;
                *) continue ;;
                esac
                run "python-$c-${n}gpu" "${mr[@]}" \
                    --mca mca_base_component_path "$comp${sysdir:+:$sysdir}" \
                    "${DFCCL_PYTHON:-python3}" "$pybench" -c "$c" -b 8 -e 256M -f 8 -w 5 -n 50
            done
            wcol=8
        fi
    fi
done
exit $rc
