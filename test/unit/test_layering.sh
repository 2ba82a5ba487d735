#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The files of libdfccl are layered: no file calls (or takes the address
# of) a function of a file that calls back into it, at any distance. From
# the built objects: file A uses file B when one of A's undefined symbols is
# defined by B (nm); the graph must have no cycle (tsort). Calls back up go
# through the context's hooks (coll_release, coll_resolve, kick).
set -u
top=${DFCCL_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
objs=$(find "$top/runtime" "$top/kernels" -name 'libdfccl_la-*.o' -path '*/.libs/*' | sort)
[ -n "$objs" ] || objs=$(find "$top/runtime" "$top/kernels" -name 'libdfccl_la-*.o' | sort)
if [ -z "$objs" ]; then
    echo "test_layering: no libdfccl objects under $top" >&2
    exit 99
fi
name() { basename "$1" .o | sed 's/^libdfccl_la-//'; }
defs=$(mktemp)
edges=$(mktemp)
trap 'rm -f "$defs" "$edges"' EXIT
for o in $objs; do
    f=$(name "$o")
    nm --defined-only -g "$o" | awk -v f="$f" '$2 ~ /[TDBRC]/ {print $3, f}'
done | sort -u >"$defs"
for o in $objs; do
    f=$(name "$o")
    nm -u "$o" | awk '{print $2}' | sort -u | join - "$defs" | awk -v f="$f" '$2 != f {print f, $2, $1}'
done | sort -u >"$edges"
echo "test_layering: $(echo "$objs" | wc -l) objects, $(awk '{print $1, $2}' "$edges" | sort -u | wc -l) file-to-file uses"
if ! awk '{print $1, $2}' "$edges" | sort -u | tsort >/dev/null 2>&1; then
    echo "FAIL: the files of libdfccl call each other in a loop:" >&2
    awk '{print $1, $2}' "$edges" | sort -u | tsort 2>&1 >/dev/null | sed 's/^/  /' >&2
    awk '{u[$1" "$2] = u[$1" "$2] " " $3} END {for (k in u) {split(k, p, " ");
         if ((p[2] " " p[1]) in u) print "  " p[1] " -> " p[2] ":" u[k]}}' "$edges" >&2
    exit 1
fi
echo "PASS: no loop"
