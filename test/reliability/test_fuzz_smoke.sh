#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# make check's short fuzz run: scripts/fuzz.sh for DFCCL_FUZZ_SECONDS (20)
# seconds per target, installing nothing. Skipped (exit 77) when clang
# cannot build libFuzzer programs here (apt-get install clang
# libclang-rt-<version>-dev). The simulator is fuzzed through its parser
# only, as simulating accepted configurations trips a known bug (see
# docs/reliability.md).
# DFCCL_FUZZ_SECONDS=0 skips it, as does quick mode without DFCCL_FUZZ_SECONDS.
#
# The fuzz build configures the sources again, out of tree, with clang. A
# source tree configured in place refuses that ("source directory already
# configured"), so it always runs from a copy of the sources without what
# configure and make wrote into them: the same steps whether this tree was
# configured in place, out of tree, or is a read-only distcheck tree.
if [ "${DFCCL_FUZZ_SECONDS:-20}" = 0 ]; then
    echo "test_fuzz_smoke: DFCCL_FUZZ_SECONDS=0: skipped"
    exit 77
fi
# Quick mode (DFCCL_TEST_QUICK, make distcheck): the same fuzzers ran in
# make check of the same sources, and their clang build is the longest
# step of a quick run; DFCCL_FUZZ_SECONDS set runs them anyway.
if [ -n "${DFCCL_TEST_QUICK:-}" ] && [ -z "${DFCCL_FUZZ_SECONDS:-}" ]; then
    echo "test_fuzz_smoke: quick mode (DFCCL_TEST_QUICK): skipped; set DFCCL_FUZZ_SECONDS to run it"
    exit 77
fi
top=${DFCCL_TOP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${DFCCL_FUZZ_BUILD:-$PWD/fuzz-build}
src=$build/src
if [ ! -x "$src/configure" ] || [ "$top/configure" -nt "$src/configure" ] ||
   [ -n "$(find "$top/runtime" "$top/include" "$top/test/fuzz" -newer "$src/configure" \
          -type f 2>/dev/null | head -n 1)" ]; then
    rm -rf "$src" "$build/lib"
    mkdir -p "$src"
    # everything but hidden top-level directories (version control,
    # caches), build trees and configure's and make's outputs (the
    # generated configure and Makefile.in files stay)
    (cd "$top" && tar cf - --exclude='./.*' --exclude=./build --exclude=./build-fuzz \
        --exclude=fuzz-build --exclude=Makefile --exclude=config.status \
        --exclude=config.log --exclude=./config.h --exclude=./libtool --exclude=stamp-h1 \
        --exclude=./dfccl.pc --exclude='*.o' --exclude='*.lo' --exclude='*.la' \
        --exclude='*.a' --exclude='*.so' --exclude=.libs --exclude=.deps \
        --exclude=.dirstamp --exclude='*.log' --exclude='*.trs' .) |
        (cd "$src" && tar xf -) || {
        echo "test_fuzz_smoke: cannot copy the sources of $top to $src"
        exit 1
    }
fi
if [ -f "$src/config.status" ]; then
    echo "test_fuzz_smoke: the copy in $src is still configured in place"
    exit 1
fi
DFCCL_FUZZ_NO_INSTALL=1 DFCCL_FUZZ_BUILD=$build FUZZ_SIM_WORLD=${FUZZ_SIM_WORLD:-0}
FUZZ_INPUT_TIMEOUT=${FUZZ_INPUT_TIMEOUT:-120}
export DFCCL_FUZZ_NO_INSTALL DFCCL_FUZZ_BUILD FUZZ_SIM_WORLD FUZZ_INPUT_TIMEOUT
exec bash "$src/scripts/fuzz.sh" "${DFCCL_FUZZ_SECONDS:-20}"
