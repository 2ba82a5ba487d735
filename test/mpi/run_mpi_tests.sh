#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Runs the coll component's multi-rank tests under mpirun with 2, 3 and 4
# ranks. Every run has a timeout, so a hang is a failure. Open MPI finds the
# uninstalled component through mca_base_component_path (our .libs first,
# then its own directory). The dfccl runs use the host backend
# (coll_dfccl_backend=host), so no GPU is needed; the fallback run uses the
# default backend (set on its command line and DFCCL_BACKEND left out of
# its environment, whatever the caller's say) and checks that the program
# behaves as without dfccl. A program that exits 77 (test_memkinds without
# a GPU) is reported as skipped. The mpi4py programs run under a python3
# that imports mpi4py and NumPy (DFCCL_PYTHON, else python3, else
# /usr/bin/python3: Debian's python3-mpi4py); without one they are skipped
# with a message.
set -u
comp=${DFCCL_COMPONENT_DIR:-$(cd "$(dirname "$0")/../../ompi_coll_dfccl/.libs" && pwd)}
bin=${DFCCL_TEST_DIR:-$(dirname "$0")}
src=${DFCCL_TEST_SRCDIR:-$(cd "$(dirname "$0")" && pwd)}
examples=${DFCCL_EXAMPLES_SRCDIR:-$src/../../examples}
limit=${DFCCL_TEST_TIMEOUT:-120}
# the error tests end in seconds when the component does its job
elimit=${DFCCL_TEST_ERROR_TIMEOUT:-30}
sysdir=$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p')
if [ ! -f "$comp/mca_coll_dfccl.so" ]; then
    echo "run_mpi_tests: $comp/mca_coll_dfccl.so not built" >&2
    exit 99
fi
export OMPI_MCA_mca_base_component_path="$comp${sysdir:+:$sysdir}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# quiet, loopback-only transports: CI containers have no network to speak of
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_pml=ob1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1

failed=0
tlimit= # a run's own timeout, when set
unset_env= # variables left out of a run's environment, when set
# when set: the run must print exactly `lines_n` lines matching `lines_re`
# (errors are printed once per rank and failure, not twice)
lines_re= lines_n=
run() { # name ranks expect-dfccl(0: none, 1: every rank, 2: any) mca-args... -- program args...
    name=$1 np=$2 want=$3
    shift 3
    log=$(mktemp)
    start=$(date +%s)
    # shellcheck disable=SC2086
    timeout -k 5 "${tlimit:-$limit}" env ${unset_env:+-u $unset_env} mpirun --oversubscribe \
        -np "$np" --mca coll_dfccl_verbose 1 "$@" >"$log" 2>&1
    rc=$?
    took=$(( $(date +%s) - start ))
    nstat=$(grep -c '^dfccl: rank .*: collectives' "$log")
    ndfccl=$(grep '^dfccl: rank .*: collectives' "$log" | awk '$5 > 0' | wc -l)
    status=PASS
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        status="FAIL (hung: killed after ${tlimit:-$limit}s)"
    elif [ $rc -eq 77 ]; then
        echo "SKIP: $name, $np ranks: $(grep -m1 'skipped' "$log")"
        rm -f "$log"
        return
    elif [ $rc -ne 0 ]; then
        status="FAIL (exit $rc)"
    elif [ "$nstat" -ne "$np" ]; then
        status="FAIL ($nstat of $np statistics lines)"
    elif [ "$want" = 1 ] && [ "$ndfccl" -ne "$np" ]; then
        status="FAIL (dfccl ran nothing on some rank)"
    elif [ "$want" = 0 ] && [ "$ndfccl" -ne 0 ]; then
        status="FAIL (dfccl ran collectives on the fallback path)"
    elif [ -n "$lines_re" ] && [ "$(grep -cE "$lines_re" "$log")" -ne "$lines_n" ]; then
        status="FAIL ($(grep -cE "$lines_re" "$log") lines match '$lines_re', expected $lines_n)"
    fi
    echo "$status: $name, $np ranks (${took}s)"
    if [ "$status" != PASS ]; then
        failed=1
        sed 's/^/    /' "$log" | tail -40
    fi
    rm -f "$log"
}

# An incorrect program under MPI_ERRORS_ARE_FATAL: the job must abort with
# Open MPI's handler message, having reached the call (the program prints
# `reached` first), with no crash, no call returning (FAIL) and no hang.
run_fatal() { # name ranks reached-pattern mca-args... -- program args...
    name=$1 np=$2 reached=$3
    shift 3
    log=$(mktemp)
    start=$(date +%s)
    timeout -k 5 "$elimit" mpirun --oversubscribe -np "$np" "$@" >"$log" 2>&1
    rc=$?
    took=$(( $(date +%s) - start ))
    status=PASS
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        status="FAIL (hung: killed after ${elimit}s)"
    elif [ $rc -eq 0 ]; then
        status="FAIL (the job did not abort)"
    elif grep -qiE 'segmentation fault|signal 11|sigsegv|bus error|core dumped' "$log"; then
        status="FAIL (a process crashed)"
    elif grep -q 'FAIL' "$log"; then
        status="FAIL (a call returned instead of aborting)"
    elif ! grep -q "$reached" "$log"; then
        status="FAIL (the program did not reach the failing call)"
    elif ! grep -q 'MPI_ERRORS_ARE_FATAL' "$log" &&
         ! grep -qE 'ORTE_ERROR_LOG: .*show_help\.c' "$log"; then
        # (when every rank aborts at once on a loaded machine, Open MPI 4.1's
        # mpirun can lose the message in show_help and say so in that line)
        status="FAIL (no MPI_ERRORS_ARE_FATAL message from Open MPI)"
    fi
    echo "$status: $name, $np ranks (${took}s, mpirun exit $rc)"
    if [ "$status" != PASS ]; then
        failed=1
        sed 's/^/    /' "$log" | tail -40
    fi
    rm -f "$log"
}

# a Python with mpi4py and NumPy, for the mpi4py test and example
py=
for p in ${DFCCL_PYTHON:-} python3 /usr/bin/python3; do
    if "$p" -c 'import mpi4py, numpy' >/dev/null 2>&1; then
        py=$p
        break
    fi
done
[ -n "$py" ] || echo "SKIP: the mpi4py tests: no python3 imports mpi4py and numpy" \
    "(apt-get install python3-mpi4py python3-numpy, or set DFCCL_PYTHON)"

host="--mca coll_dfccl_backend host"
# quick mode (DFCCL_TEST_QUICK, used by make distcheck): 3 ranks only
nps="2 3 4"
[ -z "${DFCCL_TEST_QUICK:-}" ] || nps=3
for np in $nps; do
    run "every collective x form x in-place x type x op" $np 1 $host "$bin/test_coll"
    # the default backend (auto: CUDA where a GPU is visible, else dfccl is
    # off), which takes no host buffer; a DFCCL_BACKEND=host of the caller
    # would put them on dfccl
    unset_env=DFCCL_BACKEND
    run "fallback path (default backend, host buffers)" $np 0 --mca coll_dfccl_backend auto \
        "$bin/test_coll" --quick
    unset_env=
    run "threads: blocking allreduces on two communicators" $np 1 $host "$bin/test_threads"
    run "device sync between collectives in opposite orders" $np 1 $host "$bin/test_devsync"
    run "disorder: 8 communicators, random order per rank" $np 1 $host "$bin/test_disorder" \
        ${DFCCL_TEST_DISORDER_COUNT:-}
    # the same over the net transport (UCX): every communicator's setup
    # connects over the net, in a different order on every rank
    if [ "${DFCCL_TEST_NET:-0}" = 1 ]; then
        run "disorder over the net transport (coll_dfccl_net 1)" $np 1 $host \
            --mca coll_dfccl_net 1 "$bin/test_disorder" ${DFCCL_TEST_DISORDER_COUNT:-}
    fi
    run "every other collective x form x in-place x type, neighbors, mixed" $np 1 $host \
        "$bin/test_allcolls"
    run "a second thread that never selects a device" $np 1 $host "$bin/test_thread_nodevice"
    # every CUDA memory kind: the default backend (CUDA with a GPU), else skipped
    run "memory kinds (GPU only)" $np 1 "$bin/test_memkinds"
    tlimit=$elimit
    # two failures (blocking, nonblocking), one error line each on every rank
    lines_re='^(dfccl\[[0-9]+\]: error|coll_dfccl: (warning|error))' lines_n=$((2 * np))
    run "mismatched count: the same error class everywhere" $np 1 $host "$bin/test_errors"
    lines_re= tlimit=
    # a setting out of range, as an MCA variable or in the environment:
    # the component is off, said in one line per rank, and MPI goes on
    lines_re='^(dfccl\[[0-9]+\]: error|coll_dfccl: (warning|error))' lines_n=$np
    run "coll_dfccl_timeout -1: off, one line per rank" $np 0 $host \
        --mca coll_dfccl_timeout -1 "$bin/test_coll" --quick
    run "DFCCL_TIMEOUT=-1: off, one line per rank" $np 0 $host -x DFCCL_TIMEOUT=-1 \
        "$bin/test_coll" --quick
    lines_re=
    run_fatal "mismatched count under MPI_ERRORS_ARE_FATAL aborts the job" $np \
        'starting the mismatched' $host "$bin/test_errors" --fatal
    if [ -n "$py" ]; then
        run "mpi4py (NumPy): import-time init, every buffer collective" $np 1 $host \
            "$py" "$src/test_mpi4py.py" --numpy
        run "mpi4py example: data-parallel training" $np 1 $host \
            "$py" "$examples/python/train_dp.py" --numpy --steps 50
    fi
done
# an incorrect program (the last rank skips a collective) fails with an
# error through the communicator's error handler, within the timeout
run "timeout reaches the error handler" 3 2 $host --mca coll_dfccl_timeout 2 \
    "$bin/test_timeout"
exit $failed
