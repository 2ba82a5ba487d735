#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The main job: install dependencies, build, and run the deadlock demo
# (examples/demo.c) on 4 ranks: on GPUs when dfccl is built with CUDA and
# GPUs are visible, on the host backend otherwise.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
# every rank may spin: let 4 ranks share fewer cores
timeout 600 mpirun --oversubscribe --bind-to none -np 4 "$root/build/examples/demo" "$@"
