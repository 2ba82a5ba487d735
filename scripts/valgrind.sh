#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Run a short 2-rank dfccl program under valgrind's memcheck: every
# collective kind a few times on the host backend, then everything
# destroyed (test/reliability/test_small). The harness forks the ranks, so
# valgrind follows the children; any error or definite leak fails.
#
#   scripts/valgrind.sh [build dir, default ./build]
#
# The build dir must be configured (scripts/build.sh, or configure and
# make); this script builds test_small there. It installs valgrind with apt
# when it is missing, unless DFCCL_VALGRIND_NO_INSTALL=1. The full log goes
# to <build>/valgrind.log; the summary of every process is printed.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
log=$build/valgrind.log

if ! command -v valgrind >/dev/null 2>&1; then
    if [ "${DFCCL_VALGRIND_NO_INSTALL:-0}" != 0 ]; then
        echo "valgrind.sh: valgrind is not installed (apt-get install valgrind)"
        exit 77
    fi
    if [ "$(id -u)" = 0 ]; then s=; else s=sudo; fi
    $s apt-get update -qq
    $s env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null
fi

make -C "$build" -j"$(nproc 2>/dev/null || echo 2)" libdfccl.la >/dev/null
make -C "$build/test/reliability" test_small >/dev/null

# Under valgrind the ranks' daemon threads crawl: a long harness timeout,
# and DFCCL_BACKEND=host whatever the machine has.
echo "valgrind.sh: running test/reliability/test_small (2 ranks) under valgrind; log: $log"
rc=0
DFCCL_BACKEND=host DFCCL_TEST_TIMEOUT=${DFCCL_TEST_TIMEOUT:-600} \
    "$build/libtool" --mode=execute \
    valgrind --leak-check=full --show-leak-kinds=definite,indirect \
             --errors-for-leak-kinds=definite,indirect --error-exitcode=1 \
             --trace-children=yes --track-origins=yes --num-callers=30 \
             --log-file="$log.%p" \
             "$build/test/reliability/test_small" || rc=$?

# One log per process (the parent and each forked rank): gather them.
: >"$log"
for f in "$log".*; do
    [ -e "$f" ] || continue
    echo "==== $(basename "$f")" >>"$log"
    cat "$f" >>"$log"
    rm -f "$f"
done
grep -E '==[0-9]+== (ERROR SUMMARY|   definitely lost|   indirectly lost|   possibly lost|   still reachable|All heap blocks)' \
    "$log" | sed 's/^/valgrind.sh: /' || true
if [ "$rc" != 0 ]; then
    echo "valgrind.sh: FAILED (exit $rc): errors or leaks, see $log"
    exit 1
fi
echo "valgrind.sh: no memcheck error, no definite or indirect leak"
