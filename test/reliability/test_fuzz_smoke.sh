#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# make check's short fuzz run: scripts/fuzz.sh for DFCCL_FUZZ_SECONDS (20)
# seconds per target, installing nothing. Skipped (exit 77) when clang
# cannot build libFuzzer programs here (apt-get install clang
# libclang-rt-<version>-dev). The simulator is fuzzed through its parser
# only, as simulating accepted configurations trips a known bug (see
# docs/reliability.md).
# DFCCL_FUZZ_SECONDS=0 skips it.
if [ "${DFCCL_FUZZ_SECONDS:-20}" = 0 ]; then
    echo "test_fuzz_smoke: DFCCL_FUZZ_SECONDS=0: skipped"
    exit 77
fi
top=${DFCCL_TOP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${DFCCL_FUZZ_BUILD:-$PWD/fuzz-build}
DFCCL_FUZZ_NO_INSTALL=1 DFCCL_FUZZ_BUILD=$build FUZZ_SIM_WORLD=${FUZZ_SIM_WORLD:-0}
FUZZ_INPUT_TIMEOUT=${FUZZ_INPUT_TIMEOUT:-120}
export DFCCL_FUZZ_NO_INSTALL DFCCL_FUZZ_BUILD FUZZ_SIM_WORLD FUZZ_INPUT_TIMEOUT
exec bash "$top/scripts/fuzz.sh" "${DFCCL_FUZZ_SECONDS:-20}"
