#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Fuzz dfccl with libFuzzer: builds libdfccl (and dfccl-sim's library) out of
# tree with clang, AddressSanitizer and UndefinedBehaviorSanitizer, links the
# fuzz targets of test/fuzz (the native API's argument checking on a
# one-rank host-backend context, dfccl-sim's JSON configuration parser, and
# the MSCCL XML loader),
# and runs each for a bounded time from the seed corpora in
# test/fuzz/corpus. A crash leaves its input in <build>/crashes and fails.
#
#   scripts/fuzz.sh [seconds per target, default 60]
#
# On a fresh Debian 12 it installs what it needs with apt (clang, the
# compiler-rt runtime with libFuzzer, json-c, libxml2, autotools); set
# DFCCL_FUZZ_NO_INSTALL=1 to install nothing (make check does). The build
# goes to $DFCCL_FUZZ_BUILD (default ./build-fuzz). FUZZ_TARGETS selects
# targets ("api sim msccl", the default); FUZZ_INPUT_TIMEOUT (30 s) is how long one
# input may run before it counts as a hang. FUZZ_SIM_WORLD=0 fuzzes the simulator's
# parser alone (by default accepted configurations are also simulated);
# FUZZ_API_NULL_CTX_WAIT=1 adds dfcclWait(id, t, NULL) to the API calls.
# Exit status: 0 clean, 1 a target
# crashed, 77 clang with libFuzzer is missing and may not be installed.
set -euo pipefail

secs=${1:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DFCCL_FUZZ_BUILD:-$PWD/build-fuzz}
targets=${FUZZ_TARGETS:-api sim msccl}
cc=${FUZZ_CC:-clang}
san="-fsanitize=address,undefined -fno-sanitize-recover=all"
cflags="-g -O1 -fno-omit-frame-pointer $san"

# Nested in make check: do not hand make's jobserver and flags to our make.
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES

log() { echo "fuzz.sh: $*"; }

sudo_cmd() {
    if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# Can $cc build a libFuzzer program?
probe() {
    local dir
    dir=$(mktemp -d)
    printf '#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return 0; }\n' \
        > "$dir/p.c"
    if command -v "$cc" >/dev/null 2>&1 &&
       "$cc" -fsanitize=fuzzer,address,undefined "$dir/p.c" -o "$dir/p" >/dev/null 2>&1; then
        rm -rf "$dir"
        return 0
    fi
    rm -rf "$dir"
    return 1
}

install_deps() {
    local ver pkgs="clang libjson-c-dev libxml2-dev pkg-config autoconf automake libtool make"
    log "installing $pkgs (apt)"
    sudo_cmd apt-get update -qq
    sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $pkgs >/dev/null
    # libFuzzer comes with compiler-rt, packaged per clang version
    ver=$("$cc" --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -n1)
    sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        "libclang-rt-$ver-dev" >/dev/null
}

if ! probe; then
    if [ "${DFCCL_FUZZ_NO_INSTALL:-0}" != 0 ]; then
        log "$cc cannot build libFuzzer programs (apt-get install clang libclang-rt-<version>-dev); skipping"
        exit 77
    fi
    install_deps
    probe || { log "$cc still cannot build libFuzzer programs"; exit 1; }
fi

# ---- build ------------------------------------------------------------------
mkdir -p "$build/lib" "$build/crashes"
if [ ! -x "$root/configure" ]; then
    log "running autoreconf -fi in $root"
    (cd "$root" && autoreconf -fi >/dev/null)
fi
if [ ! -f "$build/lib/config.status" ]; then
    log "configuring libdfccl with $cc and sanitizers in $build/lib"
    (cd "$build/lib" &&
     "$root/configure" --without-cuda --enable-static --disable-shared \
         CC="$cc" CXX="${FUZZ_CXX:-clang++}" \
         CFLAGS="$cflags -fsanitize=fuzzer-no-link" >configure.log 2>&1) ||
        { log "configure failed, see $build/lib/configure.log"; tail -n 20 "$build/lib/configure.log"; exit 1; }
fi
jobs=$(nproc 2>/dev/null || echo 2)
log "building libdfccl.a"
make -C "$build/lib" -j"$jobs" libdfccl.la >"$build/lib/make.log" 2>&1 ||
    { log "build failed, see $build/lib/make.log"; tail -n 30 "$build/lib/make.log"; exit 1; }

have_sim=0
if grep -q '^S\["HAVE_JSONC_TRUE"\]=""' "$build/lib/config.status"; then
    log "building libdfccl_sim.a"
    make -C "$build/lib/tools/sim" -j"$jobs" libdfccl_sim.la >>"$build/lib/make.log" 2>&1 ||
        { log "build of the simulator failed, see $build/lib/make.log"; exit 1; }
    have_sim=1
fi

build_target() { # name source cppflags libraries...
    local name=$1 src=$2 cppflags=$3
    shift 3
    log "linking $name"
    "$cc" $cflags -fsanitize=fuzzer -std=gnu11 -I"$root/include" $cppflags "$src" "$@" \
        -o "$build/$name" -pthread -lm
}

# What a static libtool library needs at link time (UCX, CUDA, ...).
la_deps() {
    sed -n "s/^dependency_libs='\(.*\)'$/\1/p" "$1"
}

# ---- run --------------------------------------------------------------------
failed=0
run_target() { # name corpus-dir
    local name=$1 seeds=$2 work="$build/corpus-$1" out="$build/$1.log" rc=0
    local tmo=${FUZZ_INPUT_TIMEOUT:-30} t0 left part="$build/$1.part.log" execs=0 n
    mkdir -p "$work"
    : >"$out"
    t0=$(date +%s)
    left=$secs
    log "running $name for $secs s (log: $out)"
    # A libFuzzer run that stops early on a timeout that does not reproduce
    # goes on from the grown corpus with the time that is left.
    while [ "$left" -gt 0 ]; do
        rc=0
        # -timeout: one input running that long (30 s) is a hang;
        # -rss_limit_mb: a leak or an allocation run wild.
        ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
        UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
        "$build/$name" -max_total_time="$left" -timeout="$tmo" -rss_limit_mb=3072 \
            -print_final_stats=1 -artifact_prefix="$build/crashes/$name-" \
            "$work" "$seeds" >"$part" 2>&1 || rc=$?
        cat "$part" >>"$out"
        grep -E '^stat::number_of_executed_units|^stat::average_exec_per_sec|^stat::new_units_added|^stat::peak_rss_mb' \
            "$part" | sed "s/^/fuzz.sh: $name: /" || true
        n=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$part" | tail -n1)
        execs=$((execs + ${n:-0}))
        # A "timeout" on a loaded machine may be the scheduler's doing: run
        # the input again alone, and fail only if it still takes that long.
        if [ "$rc" != 0 ] && grep -q 'ERROR: libFuzzer: timeout' "$part"; then
            local unit
            unit=$(sed -n 's/.*Test unit written to \(.*timeout-[0-9a-f]*\).*/\1/p' "$part" | tail -n1)
            if [ -n "$unit" ] && "$build/$name" -timeout="$tmo" "$unit" >>"$out" 2>&1; then
                log "$name: the timeout did not reproduce when run alone (a loaded machine); not a failure"
                rm -f "$unit"
                rc=0
                left=$((secs - ($(date +%s) - t0)))
                continue
            fi
        fi
        break
    done
    rm -f "$part"
    if [ "$rc" != 0 ]; then
        log "$name FAILED (exit $rc); the input is in $build/crashes; the end of its log:"
        tail -n 40 "$out"
        failed=1
    else
        log "$name: no crash in $(($(date +%s) - t0)) s ($execs inputs)"
    fi
}

for t in $targets; do
    case $t in
    api)
        build_target fuzz_api "$root/test/fuzz/fuzz_api.c" \
            "-DFUZZ_API_NULL_CTX_WAIT=${FUZZ_API_NULL_CTX_WAIT:-0}" \
            "$build/lib/.libs/libdfccl.a" $(la_deps "$build/lib/libdfccl.la") -lrt
        run_target fuzz_api "$root/test/fuzz/corpus/api"
        ;;
    sim)
        if [ "$have_sim" = 0 ]; then
            log "json-c missing: skipping the simulator's parser"
            continue
        fi
        build_target fuzz_sim_config "$root/test/fuzz/fuzz_sim_config.c" \
            "-I$root/tools/sim $(pkg-config --cflags json-c) -DFUZZ_SIM_WORLD=${FUZZ_SIM_WORLD:-1}" \
            "$build/lib/tools/sim/.libs/libdfccl_sim.a" \
            $(la_deps "$build/lib/tools/sim/libdfccl_sim.la") $(pkg-config --libs json-c)
        run_target fuzz_sim_config "$root/test/fuzz/corpus/sim_config"
        ;;
    msccl)
        if ! pkg-config --exists libxml-2.0; then
            log "libxml2 missing: skipping the MSCCL loader"
            continue
        fi
        build_target fuzz_msccl_xml "$root/test/fuzz/fuzz_msccl_xml.c" \
            "-I$root/runtime -DHAVE_LIBXML2=1 $(pkg-config --cflags libxml-2.0)" \
            $(pkg-config --libs libxml-2.0)
        run_target fuzz_msccl_xml "$root/test/fuzz/corpus/msccl"
        ;;
    *)
        log "unknown target $t (api, sim, msccl)"
        exit 2
        ;;
    esac
done
exit $failed
