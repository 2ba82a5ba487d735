#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The main job: install dependencies, build, and run the deadlock demo
# (examples/demo.c) on 4 ranks: on GPUs when dfccl is built with CUDA and
# GPUs are visible, on the host backend otherwise.
#
#   bash scripts/demo.sh [ITERATIONS]
#
# ITERATIONS: rounds of the 8 collectives in a random order per rank
# (default 20). -h, --help: this text.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
case "${1:-}" in
-h | --help)
    sed -n '3,/^set -euo/{/^set -euo/!s/^# \{0,1\}//p}' "$0"
    exit 0
    ;;
esac
if [ $# -gt 1 ] || { [ $# -eq 1 ] && ! [[ $1 =~ ^[1-9][0-9]{0,5}$ ]]; }; then
    echo "demo.sh: expected one positive number of iterations, got: $*" >&2
    echo "usage: bash scripts/demo.sh [ITERATIONS] (see --help)" >&2
    exit 2
fi
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
# every rank may spin: let 4 ranks share fewer cores
timeout 600 mpirun --oversubscribe --bind-to none -np 4 "$root/build/examples/demo" "$@"
