#!/bin/bash
# Times variants of the one-pass tridiagonal kernel beside the working tree, in one GPU session:
# runs `TRIDIAG_QUICK=1 scripts/device-check.sh` (build, GPU tests, quick benchmark of the tree
# as it is), then for each variant of LIST edits the sources, rebuilds the benchmark and runs it
# again, and puts the sources back. LIST is a bash file of lines
#   variant NAME [sed args for group_spike.cu] [-- sed args for warp_solves.h]
#   variant NAME CMD "shell command that edits the tree"
# e.g.  variant fewer_warps -e 's/kBlockWarps = 4;/kBlockWarps = 2;/'
# Usage (repository root, GPU machine): scripts/kernel-variants.sh LIST   (output under $OUT)
set -u
LIST=$1
OUT=${OUT:-/tmp/variants}
mkdir -p "$OUT"
TRIDIAG_QUICK=1 OUT=$OUT scripts/device-check.sh > "$OUT/base.log" 2>&1
grep -E "PASSED|FAILED|stripesolve" "$OUT/base.log"
export LD_LIBRARY_PATH=/opt/dep/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
SOURCES="tridiag/cuda/group_spike.cu tridiag/cuda/group_spike.cuh tridiag/cuda/warp_solves.h tridiag/cuda/small_solves.h tridiag/cuda/group_solve.h"
SAVED=$(mktemp -d)
for f in $SOURCES; do cp "$f" "$SAVED/$(basename "$f")"; done
restore() { for f in $SOURCES; do cp "$SAVED/$(basename "$f")" "$f"; done; }
variant() {
  local name=$1
  shift
  restore
  if [ "${1:-}" = CMD ]; then
    eval "$2"
  else
    local gs=() ws=() target=gs
    for a in "$@"; do
      if [ "$a" = -- ]; then target=ws; elif [ $target = gs ]; then gs+=("$a"); else ws+=("$a"); fi
    done
    [ ${#gs[@]} -gt 0 ] && sed -i "${gs[@]}" tridiag/cuda/group_spike.cu
    [ ${#ws[@]} -gt 0 ] && sed -i "${ws[@]}" tridiag/cuda/warp_solves.h
  fi
  echo "== $name"
  cmake --build /tmp/ssbuild -j16 --target tridiag_gpu_bench > "$OUT/build_$name.log" 2>&1 \
    || { grep error "$OUT/build_$name.log" | head; return; }
  /tmp/ssbuild/bench/tridiag/tridiag_gpu_bench 26 5 quick > "$OUT/$name.json" 2> "$OUT/$name.err"
  grep stripesolve "$OUT/$name.err"
}
. "$LIST"
restore
