#!/bin/bash
# Builds bench_dense_gpu on the GPU machine and runs one of issue 16's benchmark modes, leaving
# JSON and logs in $OUT (bench/plots/make_plots.py draws the plot from results/). Dependencies
# the machine lacks come from the Debian packages carried in .debs/ (unpacked into /opt/dep), as
# scripts/device-check.sh does; BENCH=path runs a binary built elsewhere instead of building.
# Extra arguments go to the benchmark.
# Usage (repository root):
#   bench/dense_gpu/device_run.sh fits|ram|ssd|smoke [bench_dense_gpu args...]
#     fits   n = 32768, 57344, the RAM cache holds A, the engine's default device budget
#     ram    n = 57344, RAM cache holds A, --gpu-memory 12GiB (J stripes stream through the GPU)
#     ssd    n = 49152, --ram-budget 4GiB --gpu-memory 8GiB, store and disk test in --dir
#     smoke  n = 8192 in the ssd mode's shape with small budgets (a minute: checks the flow)
set -u
OUT=${OUT:-/tmp/dense-gpu-out}
MODE=${1:-smoke}
shift || true
source scripts/device-start.sh "device_run_$MODE.log"  # its dependencies also serve a carried BENCH
{ free -g | sed -n 2p; df -h /var/tmp | tail -1; } 2>&1
B=${BENCH:-}
if [ -z "$B" ]; then
  BUILD=${BUILD:-build/device-dense-gpu}  # inside the tree: kept while the machine stays warm
  cmake -S . -B $BUILD -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRIPESOLVE_WERROR=ON \
    "${DEPS_CMAKE_ARGS[@]}" \
    > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
  grep -E "CUDA backend" "$OUT/configure.log"
  cmake --build $BUILD -j16 --target bench_dense_gpu > "$OUT/build.log" 2>&1 \
    || { grep -E "error" "$OUT/build.log" | head -40; exit 1; }
  B=$BUILD/bench/dense_gpu/bench_dense_gpu
fi
case $MODE in
  fits) ARGS=(--mode fits --n 32768,57344) ;;
  ram) ARGS=(--mode ram --n 57344 --gpu-memory 12GiB) ;;
  ssd) ARGS=(--mode ssd --n 49152 --ram-budget 4GiB --gpu-memory 8GiB) ;;
  smoke) ARGS=(--mode ssd --n 8192 --ram-budget 256MiB --gpu-memory 2GiB --disk-bytes 1GiB --reps 1) ;;
  *) echo "mode: fits, ram, ssd or smoke"; exit 2 ;;
esac
echo "== $B ${ARGS[*]} $*"
"$B" "${ARGS[@]}" "$@" > "$OUT/dense_gpu_$MODE.json" 2> "$OUT/dense_gpu_$MODE.err"
rc=$?
grep -vE "^\s*$|^  (basic|zigzag|meta_zigzag|note)" "$OUT/dense_gpu_$MODE.err" | grep -vE "^\[.*\]     " | tail -30
echo "rc=$rc"
python3 - "$OUT/dense_gpu_$MODE.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d.get("runs", []):
    s, c = r.get("stripesolve", {}), r.get("cusolver", {})
    print(f"n={r['n']}: stripesolve f+s {s.get('tflops_factor_solve', 0):.2f} TFLOP/s "
          f"(factor {s.get('tflops_factor', 0):.2f}, residual {s.get('residual', -1):.2e}); "
          f"cusolver {c.get('tflops', 0):.2f} TFLOP/s (residual {c.get('residual', -1):.2e}); "
          f"{json.dumps(r.get('comparison', {}))}")
    if "ssd" in r:
        print("  ssd:", json.dumps(r["ssd"]))
EOF
exit $rc
