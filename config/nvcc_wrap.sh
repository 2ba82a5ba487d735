#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Called by libtool in compile mode as if nvcc were a C compiler: pass the
# flags nvcc understands, and hand the host-compiler-only ones (-fPIC, -DPIC
# and friends) over through -Xcompiler. The argument after -Xcompiler,
# -Xlinker or -Xptxas is already meant for that tool and passes unchanged.
nvcc=$1
shift
n=$#
raw=0
while [ "$n" -gt 0 ]; do
    a=$1
    shift
    n=$((n - 1))
    if [ "$raw" = 1 ]; then
        set -- "$@" "$a"
        raw=0
        continue
    fi
    case "$a" in
    -Xcompiler|-Xlinker|-Xptxas|-Xnvlink)
        set -- "$@" "$a"; raw=1 ;;
    -fPIC|-fpic|-pthread|-fno-common|-fvisibility=*|-fno-exceptions|-fno-rtti)
        set -- "$@" -Xcompiler "$a" ;;
    -Wl,*)
        set -- "$@" -Xlinker "${a#-Wl,}" ;;
    *)
        set -- "$@" "$a" ;;
    esac
done
exec "$nvcc" "$@"
