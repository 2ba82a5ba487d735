#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Called by libtool in compile mode as if nvcc were a C compiler: pass the
# flags nvcc understands, and hand the host-compiler-only ones (-fPIC, -DPIC
# and friends) over through -Xcompiler.
nvcc=$1
shift
args=""
for a in "$@"; do
    case "$a" in
    -fPIC|-fpic|-pthread|-fno-common|-fvisibility=*)
        args="$args -Xcompiler $a" ;;
    -Wl,*)
        args="$args -Xlinker ${a#-Wl,}" ;;
    *)
        args="$args $a" ;;
    esac
done
# shellcheck disable=SC2086
exec "$nvcc" $args
