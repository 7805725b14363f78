#!/bin/bash
# Times variants of the tridiagonal reduction kernels (cr, pcr and their hybrids) on the GPU
# machine in one session, beside the tree as it is and the tree built without the near-breakdown
# test (-DSTRIPESOLVE_TRIDIAG_MEASURE_NO_PIVOT_TEST): each variant is a patch applied to a copy of
# the tree. Builds them all, runs each variant's GPU tests (tridiag_test Gpu* and Cuda*), then
# `tridiag_gpu_bench 26 5 reduction` ROUNDS times (default 3) for every build in turn, and
# prints each algorithm and size's best time, its cost against the build without the test and
# its speed against the tree, then each build's kernels' SASS instruction counts
# (scripts/sass-counts.py). $OUT gets summary.txt, the log and one tarball of the JSON, build
# and test logs (the device tool returns only a few files).
# Usage (repository root, GPU machine): scripts/reduction-variants.sh [variant.patch ...]
set -u
OUT=${OUT:-/tmp/reduction-variants}
source scripts/device-start.sh reduction_variants.log
ROUNDS=${ROUNDS:-3}
WORK=/tmp/reduction-variants
rm -rf "$WORK" && mkdir -p "$WORK/logs" "$WORK/json"
names=(tree none)
sources=("$PWD" "$PWD")
no_test=-DSTRIPESOLVE_TRIDIAG_MEASURE_NO_PIVOT_TEST
flags=("" "$no_test")
for patch in "$@"; do
  name=$(basename "$patch" .patch)
  src=$WORK/src_$name
  mkdir -p "$src"
  tar -C . --exclude=./.debs --exclude=./.session --exclude=./build -cf - . | tar -C "$src" -xf -
  abs=$(realpath "$patch")
  (cd "$src" && { git apply "$abs" 2> /dev/null || patch -s -p1 < "$abs"; }) ||
    { echo "$patch does not apply"; exit 1; }
  names+=("$name")
  sources+=("$src")
  flags+=("")
done
count=${#names[@]}
jobs=$(( $(nproc) / count > 1 ? $(nproc) / count : 1 ))
echo "== building ${names[*]} ($jobs jobs each) $(date +%T)"
pids=()
for k in $(seq 0 $((count - 1))); do
  (
    b=$WORK/build_${names[$k]}
    extra=()
    [ -n "${flags[$k]}" ] && extra=("-DCMAKE_CUDA_FLAGS=${flags[$k]}" "-DCMAKE_CXX_FLAGS=${flags[$k]}")
    cmake -S "${sources[$k]}" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRIPESOLVE_WERROR=ON \
      "${DEPS_CMAKE_ARGS[@]}" "${extra[@]}" > "$WORK/logs/configure_${names[$k]}.log" 2>&1 &&
      cmake --build "$b" -j "$jobs" --target tridiag_test tridiag_gpu_bench \
        > "$WORK/logs/build_${names[$k]}.log" 2>&1
    echo "${names[$k]}: build rc $?"
  ) &
  pids+=($!)
done
wait "${pids[@]}"  # these builds only: a bare wait would wait on device-start.sh's tee as well
for k in $(seq 0 $((count - 1))); do
  [ "${names[$k]}" = none ] && continue  # its near-breakdown tests fail by design
  echo "== GPU tests, ${names[$k]}"
  timeout 300 "$WORK/build_${names[$k]}/tridiag/tridiag_test" --gtest_filter='Gpu*:Cuda*' \
    > "$WORK/logs/tests_${names[$k]}.log" 2>&1
  grep -E "^\[ *(PASSED|FAILED) *\]|Failure" "$WORK/logs/tests_${names[$k]}.log" | head -12
done
echo "== reduction benchmark, $ROUNDS rounds $(date +%T)"
for round in $(seq 1 "$ROUNDS"); do
  for name in "${names[@]}"; do
    timeout 120 "$WORK/build_$name/bench/tridiag/tridiag_gpu_bench" 26 5 reduction \
      > "$WORK/json/${name}_$round.json" 2> "$WORK/logs/bench_${name}_$round.err"
  done
done
python3 - "$WORK/json" "${names[@]}" > "$OUT/summary.txt" <<'PY'
import glob, json, os, sys
folder, names = sys.argv[1], sys.argv[2:]
best = {name: {} for name in names}
for path in glob.glob(os.path.join(folder, '*.json')):
    name = os.path.basename(path).rsplit('_', 1)[0]
    try:
        rows = json.load(open(path))['strided_batches']
    except (ValueError, KeyError):
        continue
    for row in rows:
        for key, v in row.items():
            if key.startswith('stripesolve') and isinstance(v, dict):
                k = (key.split()[1], row['n'])
                best[name][k] = min(best[name].get(k, float('inf')), v['seconds'])
print('best of the rounds, ms; (cost against none) [speed against tree]')
width = max([30] + [len(n) + 2 for n in names])
print('algorithm      n     ' + ''.join(f'{n:>{width}s}' for n in names))
for k in sorted(best['tree']):
    cells = []
    for name in names:
        t, none, tree = best[name].get(k), best['none'].get(k), best['tree'].get(k)
        cell = '-' if t is None else f'{t * 1e3:.4f}'
        if t is not None and none is not None:
            cell += f' ({100 * (t / none - 1):+5.1f}%)'
        if t is not None and tree is not None:
            cell += f' [{tree / t:.3f}x]'
        cells.append(cell)
    print(f'{k[0]:14s} {k[1]:5d} ' + ''.join(f'{c:>{width}s}' for c in cells))
PY
# Each build's reduction kernels as SASS: instructions and FP64 instructions a kernel (static
# counts; the levels are unrolled), where the toolkit has cuobjdump.
if command -v cuobjdump > /dev/null; then
  for name in "${names[@]}"; do
    echo
    echo "SASS, $name"
    for src in warp_reduction reduction_kernels pcr_shuffle_steps pcr_level_groups; do
      find "$WORK/build_$name" -name "$src.cu.o" -exec cuobjdump -sass {} \; |
        scripts/sass-counts.py
    done
  done >> "$OUT/summary.txt"
fi
cat "$OUT/summary.txt"
tar -C "$WORK" -czf "$OUT/results.tgz" json logs
echo "end $(date +%T)"
