#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The test command: install dependencies, build, and run every test suite
# (make check: unit and multi-process tests of libdfccl on the host
# backend, the simulator's tests, the Open MPI component under mpirun), then
# make distcheck (the release tarball builds and passes its quick checks).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$root/build"
status=0
make -j2 check || status=$?
pass=0 fail=0
for f in test/*/test-suite.log; do
    [ -f "$f" ] || continue
    pass=$((pass + $(sed -n 's/^# PASS: *//p' "$f")))
    fail=$((fail + $(sed -n 's/^# FAIL: *//p' "$f") + $(sed -n 's/^# ERROR: *//p' "$f")))
    [ "$status" -eq 0 ] || tail -n 80 "$f"
done
echo "$pass passed, $fail failed"
[ "$status" -eq 0 ] || exit "$status"
# The tarball: builds from scratch and runs the suites in their quick mode
# (DFCCL_TEST_QUICK: fewer rank counts and iterations) to bound CI time.
DFCCL_TEST_QUICK=1 make distcheck DISTCHECK_CONFIGURE_FLAGS="--without-cuda"
