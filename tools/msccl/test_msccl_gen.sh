#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Test of msccl_gen.py: every program at every rank count from 2 to 8 (the
# ring allreduce with 1 and 2 instances, the ring all-gather and
# reduce-scatter with 1 and 3; hierarchical and two-step with every group
# size L that divides N with L >= 2 and N/L >= 2, the hierarchical one with
# both allreduces across groups) is generated and checked by simulation,
# with unbounded and with the executor's tightest buffering. Then damaged
# files must fail the check, each for the reason the damage causes, and
# bad command lines must be refused. With DFCCL_MSCCL_CHECK set, dfccl's
# loader must take every generated file too. Exit 77 (skipped) without python3.
# MSCCL_TEST_VERBOSE=1 shows what the check says about each damaged file.
set -u
if ! command -v python3 >/dev/null 2>&1; then
    echo "test_msccl_gen: SKIP (no python3)"
    exit 77
fi
tool=$(dirname "$0")/msccl_gen.py
dir=$(mktemp -d "${TMPDIR:-/tmp}/msccl_gen.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
failed=0 ngen=0 nbad=0

fail() {
    echo "FAIL: $*"
    failed=1
}

# gen FILE ARGS...: generate into $dir/FILE
gen() {
    f=$1
    shift
    ngen=$((ngen + 1))
    if ! python3 "$tool" "$@" -o "$dir/$f" 2>"$dir/err"; then
        fail "msccl_gen.py $* ($(head -n 1 "$dir/err"))"
    fi
}

for n in 2 3 4 5 6 7 8; do
    gen "ring_n${n}_k1.xml" ring-allreduce --ranks "$n" --instances 1
    gen "ring_n${n}_k2.xml" ring-allreduce --ranks "$n" --instances 2
    gen "allpairs_n${n}.xml" allpairs-allreduce --ranks "$n"
    gen "ag_n${n}_k1.xml" ring-allgather --ranks "$n"
    gen "ag_n${n}_k3.xml" ring-allgather --ranks "$n" --instances 3
    gen "rs_n${n}_k1.xml" ring-reduce-scatter --ranks "$n"
    gen "rs_n${n}_k3.xml" ring-reduce-scatter --ranks "$n" --instances 3
    for l in 2 3 4; do
        if [ $((n % l)) -ne 0 ] || [ $((n / l)) -lt 2 ]; then
            continue
        fi
        gen "hier_n${n}_l${l}_ring.xml" hierarchical-allreduce --ranks "$n" --local "$l" --cross ring
        gen "hier_n${n}_l${l}_allpairs.xml" hierarchical-allreduce --ranks "$n" --local "$l" \
            --cross allpairs
        gen "a2a_n${n}_l${l}.xml" two-step-alltoall --ranks "$n" --local "$l"
    done
done
gen proto.xml ring-allreduce --ranks 4 --proto LL128 --name ring_ll128 --min-bytes 1024 \
    --max-bytes 1048576 --inplace

# All files in one run per buffering, so python starts twice, not per file.
for slots in 0 2; do
    if ! python3 "$tool" check -q --slots "$slots" "$dir"/*.xml 2>"$dir/err"; then
        fail "check --slots $slots:"
        sed 's/^/    /' "$dir/err"
    fi
done
# With DFCCL_MSCCL_CHECK (dfccl's loader as a command, set by make check),
# every generated file must also load in dfccl.
loader=
if [ -n "${DFCCL_MSCCL_CHECK:-}" ]; then
    loader=", loaded by $(basename "$DFCCL_MSCCL_CHECK")"
    if ! "$DFCCL_MSCCL_CHECK" "$dir"/*.xml >"$dir/out" 2>&1; then
        fail "$DFCCL_MSCCL_CHECK refuses a generated file:"
        grep -v ': ok: ' "$dir/out" | sed 's/^/    /' | head -20
    fi
fi
if ! grep -q 'name="ring_ll128" proto="LL128" .*inplace="1" outofplace="0" minBytes="1024" maxBytes="1048576"' \
    "$dir/proto.xml"; then
    fail "the common options are not in proto.xml's <algo>"
fi

# damage NAME WHAT AWK: apply the awk program to a copy of the base file;
# the check must fail, and its message must contain WHAT. The awk programs
# see g and t, the gpu and thread block ids of the current line.
damage() {
    name=$1 what=$2 prog=$3
    nbad=$((nbad + 1))
    awk '/<gpu id=/ { g = $0; sub(/.*<gpu id="/, "", g); sub(/".*/, "", g) }
         /<tb id=/ { t = $0; sub(/.*<tb id="/, "", t); sub(/".*/, "", t) }'"
         $prog"'
         { print }' "$base" >"$dir/bad.xml"
    if cmp -s "$base" "$dir/bad.xml"; then
        fail "damage $name changed nothing"
    elif python3 "$tool" check "$dir/bad.xml" >"$dir/out" 2>&1; then
        fail "check accepts a file with damage $name"
    elif ! grep -q "$what" "$dir/out"; then
        fail "damage $name: check fails, but not for '$what':"
        sed 's/^/    /' "$dir/out"
    elif [ -n "${MSCCL_TEST_VERBOSE:-}" ]; then
        sed "s/^/    [$name] /" "$dir/out"
    fi
}

base=$dir/ring_n4_k2.xml
# the k-th send and the k-th receive of a pair must move the same chunks
damage cnt 'cnt \[' '!d && /type="rrs"/ { sub(/cnt="1"/, "cnt=\"2\""); d = 1 }'
# without gpu 0's first send (the later steps renumbered) its receiver is
# one message short
# shellcheck disable=SC2016
damage dropped-send 'which receives' 'g == "0" && t == "0" && /<step / {
        n = $0; sub(/.*<step s="/, "", n); sub(/".*/, "", n)
        if (n == 0) next
        sub(/<step s="[0-9]*"/, "<step s=\"" (n - 1) "\"") }'
# passing a partial sum on without adding its own input loses a contribution
damage reduce-lost 'wrong result' '!d && /type="rrs"/ { sub(/type="rrs"/, "type=\"rcs\""); d = 1 }'
# hasdep on a step that nobody waits for
damage hasdep 'no thread block waits' '!d && /hasdep="0"/ { sub(/hasdep="0"/, "hasdep=\"1\""); d = 1 }'
# gpu 0's two rings each wait for the other to finish first
damage deadlock 'cycle: gpu 0 tb' 'g == "0" && /<step s="0"/ {
        sub(/depid="-1" deps="-1"/, "depid=\"" (1 - t) "\" deps=\"6\"") }
    g == "0" && /<step s="6"/ { sub(/hasdep="0"/, "hasdep=\"1\"") }'
base=$dir/rs_n4_k1.xml
# a reduce-scatter hop that forwards without adding its own block
damage rs-reduce-lost 'wrong result' '!d && /type="rrs"/ { sub(/type="rrs"/, "type=\"rcs\""); d = 1 }'
base=$dir/ag_n4_k1.xml
# an all-gather that never puts its own input in its place of the output
# (out of place; in place it is there already)
damage ag-own-lost 'out of place: wrong result' 'g == "2" && /type="cpy"/ { next }'
base=$dir/hier_n4_l2_ring.xml
# the allreduce across groups no longer waits for the reduce-scatter's result
damage race 'race on gpu 0' 'g == "0" && t == "1" && /<step s="0"/ {
        sub(/depid="0" deps="1"/, "depid=\"-1\" deps=\"-1\"") }
    g == "0" && t == "0" && /<step s="1"/ { sub(/hasdep="1"/, "hasdep=\"0\"") }'
# a waited-for step that does not signal
damage unsignalled 'would never be told' 'g == "1" && t == "0" && /<step s="1"/ {
        sub(/hasdep="1"/, "hasdep=\"0\"") }'

# refused command lines
refuse() {
    nbad=$((nbad + 1))
    if python3 "$tool" "$@" >/dev/null 2>&1; then
        fail "msccl_gen.py $* was accepted"
    fi
}
refuse ring-allreduce --ranks 1
refuse allpairs-allreduce --ranks 17
refuse ring-allreduce --ranks 4 --instances 0
refuse hierarchical-allreduce --ranks 6 --local 4
refuse hierarchical-allreduce --ranks 4 --local 4
refuse two-step-alltoall --ranks 8 --local 1
refuse ring-allreduce --ranks 4 --max-bytes 0
refuse ring-allgather --ranks 4 --instances 33
refuse ring-reduce-scatter --ranks 1

if [ $failed -ne 0 ]; then
    echo "test_msccl_gen: FAILED"
    exit 1
fi
echo "test_msccl_gen: PASS ($ngen programs generated and checked$loader, $nbad bad inputs refused)"
exit 0
