#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Configure and build dfccl in ./build (out of tree). Extra arguments go to
# configure. Reuses an existing build directory.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ -x configure ] && [ configure -nt configure.ac ] || autoreconf -fi >/dev/null
mkdir -p build
cd build
[ -f config.status ] || ../configure "$@"
make -j"$(nproc)"
