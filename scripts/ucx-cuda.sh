#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# A UCX built with CUDA, for machines whose UCX is not (Debian's and
# Ubuntu's packages are built without it): RAPIDS' libucx-cu12 wheel from
# PyPI, unpacked into DIR. dfccl built against any UCX 1.x then runs with it
# through LD_LIBRARY_PATH, and its net transport keeps its slots on the GPU
# (DFCCL_NET_MEM, docs/multihost.md).
#
# usage: scripts/ucx-cuda.sh DIR [VERSION]
#
#   DIR       where the libraries go: DIR/libucx/lib (libucp, libuct, libucs,
#             libucm and the modules in ucx/), DIR/libucx/bin (ucx_info,
#             ucx_perftest) and DIR/libucx_cu12.libs (what they link)
#   VERSION   a libucx-cu12 version (default: the newest)
#
# Needs pip and unzip, and PyPI within reach; copy DIR to machines without.
# Then, on a machine with a GPU:
#
#   export LD_LIBRARY_PATH=DIR/libucx/lib:$LD_LIBRARY_PATH
#   DIR/libucx/bin/ucx_info -d | grep cuda     # cuda_copy, cuda_ipc
set -euo pipefail

if [ $# -lt 1 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
    sed -n '3,/^set -euo/{/^set -euo/!p}' "$0"
    exit 2
fi
dir=$1
spec=libucx-cu12${2:+==$2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --only-binary=:all: \
    --platform manylinux_2_28_x86_64 --python-version 3.12 -d "$tmp" "$spec"
unzip -q "$tmp"/libucx_cu12-*.whl 'libucx/lib/*' 'libucx/bin/*' 'libucx_cu12.libs/*' \
    -d "$tmp/x"
mkdir -p "$dir/libucx/lib/ucx" "$dir/libucx/bin" "$dir/libucx_cu12.libs"
# the wheel stores links as copies: keep the names the loader asks for
for f in "$tmp"/x/libucx/lib/*.so.0 "$tmp"/x/libucx/lib/ucx/*.so.0; do
    rel=${f#"$tmp"/x/}
    cp "$f" "$dir/$rel"
done
cp "$tmp"/x/libucx/bin/ucx_info "$tmp"/x/libucx/bin/ucx_perftest "$dir/libucx/bin/"
cp "$tmp"/x/libucx_cu12.libs/* "$dir/libucx_cu12.libs/"
chmod +x "$dir"/libucx/bin/*
echo "UCX $(LD_LIBRARY_PATH="$dir/libucx/lib" "$dir/libucx/bin/ucx_info" -v |
    sed -n 's/^# Library version: //p') in $dir"
echo "run with: LD_LIBRARY_PATH=$dir/libucx/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
