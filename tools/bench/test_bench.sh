#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Smoke test of dfccl-bench on the host backend: every collective at a few
# sizes with its results checked (#wrong must be 0; all-to-all's every
# received element, alltoallv's blocks uneven), the disorder rounds and
# the registration report, and bad command lines that must fail with one
# message naming the option (--compare's variants too); --model's table; --algos' table of every
# algorithm per size; scripts/demo.sh --help; dfccl-ucx-bw's table and
# its refusals, where it was built (MPI and UCX); dfccl-pybench.py --host
# through the coll component, where Open MPI, mpi4py and NumPy are.
# Two MPI ranks when the bench was built with MPI, one process otherwise.
set -u
bench=${DFCCL_BENCH:-$(dirname "$0")/dfccl-bench}
limit=${DFCCL_TEST_TIMEOUT:-120}
export DFCCL_BACKEND=host OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_pml=ob1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
launch=
# in the build tree the bench is libtool's wrapper script; the program is in .libs
real=$(dirname "$bench")/.libs/$(basename "$bench")
[ -f "$real" ] || real=$bench
if command -v mpirun >/dev/null 2>&1 && ldd "$real" 2>/dev/null | grep -q libmpi; then
    launch="mpirun --oversubscribe -np 2"
fi
echo "test_bench: ${launch:-one process}"
failed=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# run NAME WRONGCOL ARGS...: the run must exit 0, print at least one result
# row, and every row's column WRONGCOL (#wrong) must be 0
run() {
    name=$1 col=$2
    shift 2
    # shellcheck disable=SC2086
    timeout -k 5 "$limit" $launch "$bench" "$@" >"$out" 2>&1
    rc=$?
    rows=$(awk '$1 ~ /^[0-9]+$/' "$out" | wc -l)
    bad=$(awk -v c="$col" '$1 ~ /^[0-9]+$/ && $c != 0' "$out" | wc -l)
    if [ $rc -ne 0 ] || [ "$rows" -eq 0 ] || [ "$bad" -ne 0 ]; then
        echo "FAIL: $name (exit $rc, $rows rows, $bad with wrong elements)"
        sed 's/^/    /' "$out" | tail -30
        failed=1
    else
        echo "PASS: $name ($rows sizes)"
    fi
}

for c in allreduce allgather reducescatter reduce broadcast alltoall alltoallv; do
    run "$c" 8 -c "$c" -b 64 -e 256K -f 16 -w 1 -n 3
done
run "allreduce int8 max" 8 -t int8 -o max -b 64 -e 64K -f 32 -w 1 -n 3
# --disorder: -e bounds each collective of a round, not the round, so every
# size of the sweep has its row (256K too, whose round of 4 is 1 MiB); a
# size with less than an element per rank says it is skipped
# sizes EXPECTED: the sizes of the rows in $out must be EXPECTED
sizes() {
    got=$(awk '$1 ~ /^[0-9]+$/ { printf "%s%s", sep, $1; sep = " " }' "$out")
    if [ "$got" != "$1" ]; then
        echo "FAIL: $name: rows for sizes '$got', expected '$1'"
        sed 's/^/    /' "$out" | tail -20
        failed=1
    fi
}
run "disorder rounds" 7 --disorder 4 -b 1K -e 256K -f 16 -w 1 -n 3
sizes "1024 16384 262144"
run "alltoallv disorder rounds" 7 -c alltoallv --disorder 3 -b 1K -e 64K -f 16 -w 1 -n 2
sizes "1024 16384"
run "allgather disorder rounds from 2 bytes" 7 -c allgather --disorder 3 -b 2 -e 32 -f 4 -w 1 -n 2
sizes "8 32"
if ! grep -q '^# 2 bytes: skipped: less than one float element per rank' "$out"; then
    echo "FAIL: $name: no line says the 2-byte size was skipped"
    sed 's/^/    /' "$out" | tail -20
    failed=1
fi
# --stats: one line per size with the calls' median, 99th percentile and
# slowest, which must come in that order, and the daemon's counters
run "allreduce --stats" 8 -c allreduce -b 1K -e 64K -f 8 -w 1 -n 5 --stats
stats_re='^#   calls: median [0-9.]* us, p99 [0-9.]* us, slowest [0-9.]* us; daemon, most on a rank: [0-9]* launches'
nstats=$(grep -c "$stats_re" "$out")
if [ "$nstats" -ne 3 ]; then
    echo "FAIL: --stats printed $nstats stats lines for 3 sizes"
    failed=1
fi
unordered=$(grep "$stats_re" "$out" | awk '{ m = $4; p = $7; s = $10; if (!(m > 0 && m <= p && p <= s)) print }' | wc -l)
if [ "$unordered" -ne 0 ]; then
    echo "FAIL: --stats: $unordered lines where median <= p99 <= slowest does not hold"
    grep "$stats_re" "$out" | sed 's/^/    /'
    failed=1
fi
# --late: the last rank idles 20 ms before every timed call, and the others
# wait for it: no call can take less
run "allreduce --late 20000" 8 -c allreduce -b 1K -e 1K -w 1 -n 3 --late 20000 --stats
short=$(awk '$1 ~ /^[0-9]+$/ && $5 < 20000' "$out" | wc -l)
if [ "$short" -ne 0 ] && [ -n "$launch" ]; then
    echo "FAIL: --late 20000: $short sizes took less than the 20 ms the last rank idled"
    sed 's/^/    /' "$out" | tail -10
    failed=1
fi
# --barrier: a barrier before every timed call; the calls must still be
# checked right and, with --stats, timed one by one
run "allreduce --barrier" 8 -c allreduce -b 64 -e 4K -f 8 -w 1 -n 5 --barrier --stats
nstats=$(grep -c "$stats_re" "$out")
if [ "$nstats" -ne 3 ]; then
    echo "FAIL: --barrier --stats printed $nstats stats lines for 3 sizes"
    failed=1
fi
# connectors of 2 slots with 16 slices per ring step asked for: a ring step
# must be cut into fewer slices than a connector has slots, or every slot
# fills in the first step and the ring stops
DFCCL_SLOTS=2 DFCCL_STEP_SLICES=16
export DFCCL_SLOTS DFCCL_STEP_SLICES
run "allreduce, 2 slots per connector" 8 -c allreduce -b 64 -e 256K -f 16 -w 1 -n 3
run "allgather, 2 slots per connector" 8 -c allgather -b 64 -e 256K -f 16 -w 1 -n 3
unset DFCCL_SLOTS DFCCL_STEP_SLICES

# shellcheck disable=SC2086
timeout -k 5 "$limit" $launch "$bench" --registered 40 -b 8 -e 64K >"$out" 2>&1
rc=$?
if [ $rc -ne 0 ] || ! grep -q '^registered 40 .*#wrong 0' "$out" ||
   ! grep -q 'running 0' "$out"; then
    echo "FAIL: --registered 40 (exit $rc)"
    sed 's/^/    /' "$out" | tail -20
    failed=1
else
    echo "PASS: --registered 40: $(grep '^host memory' "$out")"
fi

# --model: 8 to 1024 GPUs at three sizes; the ring's time is
# 2 (P - 1) (alpha + N / (P B)) with NVLink's alpha and B on one host and
# the network's beyond, and overlapping the trees' ways never costs time
timeout -k 5 "$limit" "$bench" --model >"$out" 2>&1
rc=$?
bad=$(awk '$1 ~ /^[0-9]+$/ {
        rows++; p = $1; n = ($3 == "KiB" ? 1024 : 1048576) * $2
        a = p > 8 ? 5 : 1; bw = p > 8 ? 12e3 : 300e3
        ring = 2 * (p - 1) * (a + n / (p * bw))
        if (ring - $4 > 0.06 || $4 - ring > 0.06 || $6 > $5 + 0.05) bad++ }
      END { print (rows == 24 ? 0 : 1000) + bad }' "$out")
if [ $rc -ne 0 ] || [ "$bad" -ne 0 ]; then
    echo "FAIL: --model (exit $rc, $bad rows wrong or missing)"
    sed 's/^/    /' "$out" | head -30
    failed=1
else
    echo "PASS: --model"
fi

# --algos: a row per algorithm that can run each size (results checked,
# #wrong in column 7), the model's time positive, exactly one row per size
# marked as the tuner's pick and one as the static thresholds', and a line
# per size naming both and the fastest; under the model tuner too
algos() { # name args...
    name=$1
    shift
    run "$name" 7 --algos "$@"
    sizes=$(grep -c '^# [0-9]* bytes: pick [a-z]*, static [a-z]*, fastest [a-z]*;' "$out")
    bad=$(awk '$1 ~ /^[0-9]+$/ { if (!($4 > 0)) bad++; if ($8 ~ /pick/) p[$1]++;
                                 if ($8 ~ /static/) s[$1]++; n[$1] = 1 }
               END { for (k in n) if (p[k] != 1 || s[k] != 1) bad++; print bad + 0 }' "$out")
    rows=$(awk '$1 ~ /^[0-9]+$/ { n[$1] = 1 } END { print length(n) }' "$out")
    if [ "$sizes" -eq 0 ] || [ "$sizes" -ne "$rows" ] || [ "$bad" -ne 0 ] ||
       ! grep -q '^# model error over [0-9]* runs: mean' "$out"; then
        echo "FAIL: $name: $sizes summary lines for $rows sizes, $bad sizes without one pick"
        sed 's/^/    /' "$out" | tail -30
        failed=1
    fi
}
algos "allreduce --algos" -c allreduce -b 8 -e 256K -f 8 -w 1 -n 3
algos "alltoall --algos" -c alltoall -b 64 -e 64K -f 32 -w 1 -n 3
DFCCL_TUNER=model
export DFCCL_TUNER
algos "reducescatter --algos, model tuner" -c reducescatter -b 64 -e 64K -f 32 -w 1 -n 3
unset DFCCL_TUNER

# dfccl-ucx-bw, the ceiling of the net transport: UCP tagged messages
# between the two ranks on host memory, with UCX_TLS unset (the net
# transport's default, which the header must name). It must exit 0 with a
# row per size, each with a bandwidth, a latency up to 64 KiB ('-' above)
# and no wrong byte in the checked round. A bad -m is refused with status 2;
# -m cuda either runs or is refused with status 3 and its reason (no CUDA
# runtime, no GPU, or a UCX context without CUDA memory).
ucxbw=${DFCCL_UCX_BW:-$(dirname "$bench")/dfccl-ucx-bw}
# verdict STATUS WHAT...: PASS where STATUS is 0, else FAIL with the output's end
verdict() {
    st=$1
    shift
    if [ "$st" -eq 0 ]; then
        echo "PASS: $*"
    else
        echo "FAIL: $*"
        sed 's/^/    /' "$out" | tail -30
        failed=1
    fi
}
if [ ! -x "$ucxbw" ]; then
    echo "SKIP: dfccl-ucx-bw (not built: it needs MPI and UCX)"
elif ! command -v mpirun >/dev/null 2>&1; then
    echo "SKIP: dfccl-ucx-bw (no mpirun)"
else
    ucxrun="env -u UCX_TLS mpirun --oversubscribe -np 2 $ucxbw"
    # shellcheck disable=SC2086
    timeout -k 5 "$limit" $ucxrun -b 8 -e 256K -f 8 -w 4 -n 3 >"$out" 2>&1
    rc=$?
    bad=$(awk -v num='^[0-9]+[.][0-9]+$' '$1 ~ /^[0-9]+$/ {
            rows++
            lat = ($1 <= 65536) ? ($3 ~ num) : ($3 == "-")
            if ($2 !~ num || !lat || $4 != 0) bad++ }
          END { print (rows == 6 ? 0 : 100) + bad }' "$out")
    [ $rc -eq 0 ] && [ "$bad" -eq 0 ] && grep -q '^# UCX .*; UCX_TLS=tcp,sm,self (unset' "$out"
    verdict $? "dfccl-ucx-bw: exit $rc, $bad row(s) wrong (100 more: not 6 rows)," \
               "$(grep -c 'lane\[' "$out") endpoint lane(s)"
    # shellcheck disable=SC2086
    timeout -k 5 "$limit" $ucxrun -m gpu >"$out" 2>&1
    rc=$?
    lines=$(grep -c '^dfccl-ucx-bw: -m/--memory takes host or cuda' "$out")
    [ $rc -eq 2 ] && [ "$lines" -eq 1 ]
    verdict $? "dfccl-ucx-bw -m gpu refused: exit $rc (2), $lines line(s) naming -m (1)"
    # shellcheck disable=SC2086
    timeout -k 5 "$limit" $ucxrun -m cuda -b 8 -e 8 -w 1 -n 1 >"$out" 2>&1
    rc=$?
    { [ $rc -eq 3 ] && grep -q '^dfccl-ucx-bw: -m cuda: rank [01]: ' "$out"; } ||
        { [ $rc -eq 0 ] && awk '$1 == 8 && $4 == 0 { ok = 1 } END { exit !ok }' "$out"; }
    verdict $? "dfccl-ucx-bw -m cuda: exit $rc (3: refused with its reason, 0: a checked row)" \
               "$(grep -m1 '^dfccl-ucx-bw: -m cuda' "$out")"
fi

# dfccl-pybench.py --host: mpi4py on NumPy arrays through the dfccl coll
# component's host backend (coll_dfccl_backend host), 2 ranks, each
# collective it times at 3 sizes. Each run must exit 0 with a row per size
# and no wrong element, and both ranks' statistics lines of the component
# (coll_dfccl_verbose 1) must count collectives: dfccl ran them. A backend
# that --backends names and that cannot be imported is refused (exit 3) in
# one line that names it: a torch.py on PYTHONPATH that raises ImportError
# hides torch, whatever this machine has installed. A wrong result fails
# the run (exit 1) and is counted: a sitecustomize.py on PYTHONPATH puts in
# MPI.COMM_WORLD's place a communicator whose Allgather adds 1 to the first
# element rank 1 receives (the bench has no hook of its own for that). And
# two mistakes in the command line, refused with exit 2 in one line each.
# Skipped without a python3 that imports mpi4py and NumPy, without mpirun,
# or without the component (built with Open MPI only).
pybench=${DFCCL_PYBENCH:-$(cd "$(dirname "$0")" && pwd)/dfccl-pybench.py}
comp=${DFCCL_COMPONENT_DIR:-$(dirname "$bench")/../../ompi_coll_dfccl/.libs}
py=
for p in ${DFCCL_PYTHON:-} python3 /usr/bin/python3; do
    if "$p" -c 'import mpi4py, numpy' >/dev/null 2>&1; then
        py=$p
        break
    fi
done
if [ -z "$py" ]; then
    echo "SKIP: dfccl-pybench (no python3 imports mpi4py and numpy: apt-get install" \
         "python3-mpi4py python3-numpy, or set DFCCL_PYTHON)"
elif ! command -v mpirun >/dev/null 2>&1; then
    echo "SKIP: dfccl-pybench (no mpirun)"
elif [ ! -f "$comp/mca_coll_dfccl.so" ]; then
    echo "SKIP: dfccl-pybench ($comp/mca_coll_dfccl.so not built: it needs Open MPI)"
else
    sysdir=$(ompi_info --path pkglibdir --parsable 2>/dev/null |
             sed -n 's/^path:pkglibdir://p')
    stub=$(mktemp -d)
    pypath= # put before PYTHONPATH for a run, when set
    # pyrun ARGS...: the bench on 2 ranks, the component on its host backend
    pyrun() {
        (
            pp=${PYTHONPATH:-}
            [ -z "$pypath" ] || pp=$pypath${pp:+:$pp}
            [ -z "$pp" ] || export PYTHONPATH="$pp"
            OMPI_MCA_mca_base_component_path="$comp${sysdir:+:$sysdir}"
            export OMPI_MCA_mca_base_component_path
            timeout -k 5 "$limit" mpirun --oversubscribe -np 2 --mca coll_dfccl_backend host \
                --mca coll_dfccl_verbose 1 "$py" "$pybench" "$@" >"$out" 2>&1
        )
    }
    # pyrows W: the sizes of the rows (got), and how many rows have
    # something other than W in column 6, dfccl's wrong elements (off)
    pyrows() {
        got=$(awk '$1 ~ /^[0-9]+$/ { printf "%s%s", sep, $1; sep = " " }' "$out")
        off=$(awk -v w="$1" '$1 ~ /^[0-9]+$/ && $6 != w' "$out" | wc -l)
    }
    for c in allreduce allgather reducescatter broadcast alltoall; do
        pyrun --host -c $c -b 64 -e 64K -f 16 -w 1 -n 3
        rc=$?
        pyrows 0
        ran=$(grep '^dfccl: rank [01]: collectives' "$out" | awk '$5 > 0' | wc -l)
        [ $rc -eq 0 ] && [ "$got" = "64 1024 16384" ] && [ "$off" -eq 0 ] && [ "$ran" -eq 2 ]
        verdict $? "dfccl-pybench --host -c $c: exit $rc, rows for sizes '$got' (64 1024" \
                   "16384), $off with wrong elements, collectives run by dfccl on $ran of 2" \
                   "ranks"
    done

    mkdir "$stub/hidden" "$stub/faulty"
    printf 'raise ImportError("hidden by test_bench.sh")\n' >"$stub/hidden/torch.py"
    pypath=$stub/hidden
    pyrun --backends torch -b 64 -e 64
    rc=$?
    pypath=
    lines=$(grep -c '^dfccl-pybench: ' "$out")
    [ $rc -eq 3 ] && [ "$lines" -eq 1 ] &&
        grep -q '^dfccl-pybench: --backends torch: cannot import torch (hidden by' "$out"
    verdict $? "dfccl-pybench --backends torch, torch missing: exit $rc (3)," \
               "$(grep -m1 '^dfccl-pybench: ' "$out")"

    cat >"$stub/faulty/sitecustomize.py" <<'EOF'
from mpi4py import MPI


class FaultyWorld(MPI.Intracomm):
    """A world whose Allgather gets one element wrong on rank 1."""

    def Allgather(self, sendbuf, recvbuf):
        super().Allgather(sendbuf, recvbuf)
        if self.Get_rank() == 1:
            recvbuf[0] += 1


MPI.COMM_WORLD = FaultyWorld(MPI.COMM_WORLD)
EOF
    pypath=$stub/faulty
    pyrun --host -c allgather -b 64 -e 64K -f 16 -w 1 -n 3
    rc=$?
    pypath=
    pyrows 1
    [ $rc -eq 1 ] && [ "$got" = "64 1024 16384" ] && [ "$off" -eq 0 ] &&
        grep -q '^# dfccl-pybench: WRONG RESULTS: dfccl 3 elements' "$out"
    verdict $? "dfccl-pybench, an Allgather wrong by one element: exit $rc (1), rows for" \
               "sizes '$got', $off without exactly 1 wrong element"

    pybad() { # needle args...
        needle=$1
        shift
        pyrun "$@"
        rc=$?
        lines=$(grep -c '^dfccl-pybench: ' "$out")
        [ $rc -eq 2 ] && [ "$lines" -eq 1 ] && grep -q -- "$needle" "$out" &&
            ! grep -q '^ *[0-9][0-9]* ' "$out"
        verdict $? "dfccl-pybench $* refused: exit $rc (2), $(grep -m1 '^dfccl-pybench: ' "$out")"
    }
    pybad "invalid choice: 'gather'" --host -c gather
    pybad 'runs the dfccl backend only .*not torch' --host --backends dfccl,torch
    rm -rf "$stub"
fi

# A mistake in the command line (issue 55, item 12): refused (exit status
# 2) with one line (from rank 0 only) that names the option and the valid
# values, before anything runs. mpirun adds its own report of the exit
# status, which is not ours and not counted.
bad() { # needle args...
    needle=$1
    shift
    # shellcheck disable=SC2086
    timeout -k 5 "$limit" $launch "$bench" "$@" >"$out" 2>&1
    rc=$?
    lines=$(grep -c '^dfccl-bench: ' "$out")
    if [ $rc -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -q -- "$needle" "$out" ||
       grep -q '^ *[0-9][0-9]* ' "$out"; then
        echo "FAIL: dfccl-bench $* (exit $rc, $lines dfccl-bench line(s); expected exit 2 and" \
             "one line with: $needle)"
        sed 's/^/    /' "$out" | head -20
        failed=1
    else
        echo "PASS: dfccl-bench $*: $(grep '^dfccl-bench: ' "$out")"
    fi
}
bad 'the collectives are allreduce, allgather, reducescatter, reduce, broadcast, alltoall, alltoallv' -c gather
bad 'the types are int8' -t complex
bad '-n/--iters takes an integer from 1' -n 0
bad '-n/--iters takes an integer' -n 3x
bad '-b/--minbytes (1M) is larger than -e/--maxbytes (1K)' -b 1M -e 1K
bad "-b/--minbytes takes a size .*not '12X'" -b 12X
bad '-e/--maxbytes takes a size' -e -5
bad '-f/--stepfactor takes a number above 1' -f 1
bad '--disorder takes an integer from 0 to 64' --disorder 1000
bad "unknown option, or one without its value: '--bogus'" --bogus
bad "unexpected argument 'extra'" extra
bad '--algos runs what dfcclRegister takes: not alltoallv' --algos -c alltoallv
bad '--disorder, --registered and --algos run alone' --algos --stats
# --compare takes a comma-separated list of NCCL's variants: an unknown or
# empty one is refused by name. Where the bench has no NCCL (or no MPI) any
# list is refused saying so; where it has, a good list gets past the parser
# and the host backend refuses the comparison.
variants='the variants are nccl, nccl-sym, nccl-graph and nccl-best (all three)'
bad "--compare: unknown variant 'nccl-fast' in 'nccl,nccl-fast'; $variants" --compare nccl,nccl-fast
bad "--compare: unknown variant '' in 'nccl-sym,'; $variants" --compare nccl-sym,
if ldd "$real" 2>/dev/null | grep -q libnccl && ldd "$real" 2>/dev/null | grep -q libmpi; then
    # shellcheck disable=SC2086
    timeout -k 5 "$limit" $launch "$bench" --compare nccl-sym,nccl-graph -b 8 -e 8 >"$out" 2>&1
    rc=$?
    # (every rank says it, and their lines may run into one another)
    [ $rc -ne 0 ] && grep -q -- '--compare needs the CUDA backend' "$out" &&
        ! grep -q 'unknown variant' "$out"
    verdict $? "dfccl-bench --compare nccl-sym,nccl-graph on the host backend: exit $rc," \
               "refused for the backend, not the list"
else
    bad '--compare nccl-best: dfccl-bench was built without NCCL or MPI' --compare nccl-best
fi
"$bench" --help >"$out" 2>&1
if [ $? -ne 0 ] || ! grep -q '^usage: ' "$out"; then
    echo "FAIL: dfccl-bench --help"
    failed=1
fi

# scripts/demo.sh --help prints its usage and exits 0 without building or
# running anything; a bad argument is refused the same way
demo=$(cd "$(dirname "$0")/../.." && pwd)/scripts/demo.sh
if [ -f "$demo" ]; then
    timeout -k 5 30 bash "$demo" --help >"$out" 2>&1
    rc=$?
    if [ $rc -ne 0 ] || ! grep -q 'ITERATIONS' "$out" || grep -qi 'fail\|wrong' "$out"; then
        echo "FAIL: demo.sh --help (exit $rc)"
        sed 's/^/    /' "$out" | head -20
        failed=1
    else
        echo "PASS: demo.sh --help"
    fi
    timeout -k 5 30 bash "$demo" --iterations 5 >"$out" 2>&1
    rc=$?
    if [ $rc -ne 2 ] || ! grep -q 'expected one positive number of iterations' "$out"; then
        echo "FAIL: demo.sh --iterations 5 (exit $rc)"
        sed 's/^/    /' "$out" | head -20
        failed=1
    else
        echo "PASS: demo.sh --iterations 5 refused"
    fi
else
    echo "SKIP: demo.sh --help ($demo not found)"
fi
exit $failed
