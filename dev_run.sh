#!/bin/bash
# Untracked: this session's device runs. TARGETS to build, STEPS to eval; output to $OUT.
set -u
mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; nproc; } 2>&1
source scripts/device-deps.sh
BUILD=build/dev-gpu
if [ ! -f $BUILD/build.ninja ]; then
  cmake -S . -B $BUILD -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRIPESOLVE_WERROR=ON \
    "${DEPS_CMAKE_ARGS[@]}" > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
fi
t0=$(date +%s)
cmake --build $BUILD -j16 --target ${TARGETS} > "$OUT/build.log" 2>&1 \
  || { grep -E "error" -A3 "$OUT/build.log" | head -60; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
B=$BUILD/bench/dense_gpu/bench_dense_gpu
ram() {  # ram NAME ARGS...: one RAM-tier run, n = 57344, 12 GiB
  local name=$1; shift
  OPENBLAS_NUM_THREADS=16 $B --mode ram --n 57344 --gpu-memory 12GiB --reps 1 --skip cusolver,disk,dgemm \
    --trace $OUT/$name.trace.json "$@" > $OUT/$name.json 2> $OUT/$name.err
  echo "== $name ($*): rc=$?"
  grep -E "stripesolve rep|TFLOP" $OUT/$name.err | tail -3
}
eval "$STEPS"
cd $OUT && tar czf all.tgz --remove-files $(ls | grep -v all.tgz) 2>/dev/null; ls $OUT
