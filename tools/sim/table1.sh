#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Run every Table 1 configuration in tools/sim/configs with seed 2025 on two
# threads, one after the other, and print the table of "Measured: Table 1" in
# tools/sim/README.md as Markdown (wall and CPU seconds from bash's time).
#
#   tools/sim/table1.sh [dfccl-sim]    default: build/tools/sim/dfccl-sim
#
# Extra arguments after the program go to every run (for example -r 3200).
set -euo pipefail

sim=${1:-build/tools/sim/dfccl-sim}
shift || true
configs=$(cd "$(dirname "$0")" && pwd)/configs
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ ! -x "$sim" ]; then
    echo "table1.sh: $sim is not a program; build first (bash scripts/build.sh)" >&2
    exit 1
fi

# 0.004 -> 4e-3, 1e-06 -> 1e-6
prob() {
    awk -v p="$1" 'BEGIN { if (p == 0) print "0"; else printf "%.0e\n", p }' |
        sed -E 's/e([-+])0*([0-9])/e\1\2/; s/e\+/e/'
}

echo "| configuration | model | GPUs | disorder | sync | rounds | stepped | deadlocks | ratio | wall s | CPU s |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
export LC_ALL=C
TIMEFORMAT='%R %U %S'
for file in "$configs"/table1-*.json; do
    name=$(basename "$file" .json)
    { time "$sim" -f "$file" -s 2025 -j 2 "$@" >"$work/out" 2>"$work/err"; } 2>"$work/time"
    read -r wall user sys <"$work/time"
    out=$work/out
    model=$(awk '$1 == "model" { print $2 }' "$out")
    gpus=$(awk '$1 == "GPUs" { sub(",", "", $2); print $2 }' "$out")
    disorder=$(prob "$(awk '$1 == "disorder_prob" { print $2 }' "$out")")
    sync='–'
    if [ "$model" = StreamWithSync ]; then
        sync=$(prob "$(awk '$1 == "sync_prob" { print $2 }' "$out")")
    fi
    stepped=$(awk '$1 == "stepped" { print $2 }' "$out")
    read -r deadlocks rounds ratio < <(awk '$1 == "deadlocks" { print $2, $4, $7 }' "$out")
    awk -v n="${name#table1-}" -v m="$model" -v g="$gpus" -v d="$disorder" -v s="$sync" \
        -v r="$rounds" -v st="$stepped" -v dl="$deadlocks" -v ra="$ratio" \
        -v w="$wall" -v c="$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" '
        function secs(x) { return (x < 10) ? sprintf("%.1f", x) : sprintf("%.0f", x) }
        BEGIN {
            printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", n, m,
                   (g >= 1000) ? sprintf("%d,%03d", g / 1000, g % 1000) : g, d, s, r, st, dl,
                   (ra == 0) ? "0" : sprintf("%.3g", ra), secs(w), secs(c)
        }'
done
