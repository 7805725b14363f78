#!/bin/bash
# Builds the whole tree with CUDA on the GPU machine and runs what needs it: the dense GPU tier's
# tests and its benchmark beside cuSOLVER (DENSE_GPU_ONLY=1 runs only those), the GPU tests of
# tridiag/ and the tridiagonal benchmark beside cuSPARSE, the daemon's tridiagonal jobs end to
# end (with a GPU present the daemon solves them there), and the storage benchmark on the
# machine's local NVMe disk (STORAGE_REPS repetitions, default 5; STORAGE_ONLY=1 runs only
# that). TRIDIAG_QUICK=1 runs only the tridiagonal GPU tests and the strided-batch part of the
# benchmark (about a minute with the build, for iterating on kernels). TRIDIAG_ONLY=1 runs all
# but the storage benchmark. TRIDIAG_PROFILE=1 builds with line info and runs Nsight Compute on
# the one-pass kernel's launches of that benchmark (scripts/ncu-summary.py prints each launch's
# occupancy and stall reasons; PROFILE_N=n profiles only strided batches of n;
# PROFILE_KERNEL=regex and PROFILE_MODE=reduction profile another kernel and benchmark mode, e.g.
# reduction_kernel). TRIDIAG_CPU=1 runs only the CPU tridiagonal benchmark on 2 pinned cores of
# the quiet GPU machine (2^22 unknowns, as docs/performance.md quotes). MULTI_GPU=1 (a host of
# two or more GPUs) runs only what needs several: the two-device and device-list tests, dense
# and tridiagonal, and the tridiagonal batches on every GPU against one (tridiag_multi_gpu_bench;
# the dense 1-vs-2 GPU figures are bench/dense_gpu/device_run.sh's). SUITE=1 builds everything
# and runs the whole test suite on the GPU host (ctest -j16, about two minutes after a one-minute
# build on 16 cores): where the engine takes the GPU by default, a CPU test's expectation may not
# hold. Logs and JSON go to $OUT.
# Dependencies the machine lacks come from Debian packages carried in .debs/ (unpacked into
# /opt/dep): apt-get download liburing-dev liburing2 nlohmann-json3-dev libcli11-dev
# liblapacke-dev liblapacke libtmglib3 libtmglib-dev libsqlite3-dev libsqlite3-0.
# Usage (repository root): scripts/device-check.sh
set -u
OUT=${OUT:-/tmp/device-check}
source scripts/device-start.sh device_check.log
BUILD=/tmp/ssbuild
EXTRA=()
[ "${TRIDIAG_PROFILE:-0}" = 1 ] && EXTRA=(-DCMAKE_CUDA_FLAGS=-lineinfo)
cmake -S . -B $BUILD -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRIPESOLVE_WERROR=ON "${EXTRA[@]}" \
  "${DEPS_CMAKE_ARGS[@]}" > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
grep -E "CUDA backend|liburing" "$OUT/configure.log"
# Builds the given targets into $BUILD (appending to build.log), or stops with the errors.
build() {
  cmake --build $BUILD -j16 --target "$@" >> "$OUT/build.log" 2>&1 \
    || { grep -E "error" "$OUT/build.log" | head -40; exit 1; }
}
run_tridiag_gpu_tests() {
  echo "== tridiag tests (GPU included)"
  $BUILD/tridiag/tridiag_test --gtest_filter='Gpu*' 2>&1 | grep -E "^\[ *(PASSED|FAILED|SKIPPED) *\]|Failure|rror" | head -30
}
run_storage_bench() {
  echo "== storage bench (local disk)"
  $BUILD/bench/storage/storage_bench --dir /tmp/storage_bench --gib 2 --max-paths 2 --reps ${STORAGE_REPS:-5} \
    --queue-depth 32 --request-mib 16 > "$OUT/storage_bench.json" 2> "$OUT/storage_bench.err"
  python3 -c "import json; d = json.load(open('$OUT/storage_bench.json'))
for s in d['summary']: print({k: round(v, 3) for k, v in s.items()})"
}
run_dense_gpu() {  # the GPU tier's tests (device and host engine) and its benchmark, fits mode
  echo "== dense GPU tier tests"
  OPENBLAS_NUM_THREADS=4 $BUILD/scheduler/gpu_dense_test 2>&1 | grep -E "^\[ *(OK|PASSED|FAILED|SKIPPED) *\]|Failure" | head -30
  echo "== dense GPU benchmark (fits the device; DENSE_GPU_ARGS to change)"
  OPENBLAS_NUM_THREADS=16 $BUILD/bench/dense_gpu/bench_dense_gpu ${DENSE_GPU_ARGS:---mode fits --n 32768 --reps 1} \
    > "$OUT/dense_gpu.json" 2> "$OUT/dense_gpu.err"
  grep -E "stripesolve rep|cusolver rep|dgemm" "$OUT/dense_gpu.err"
}
if [ "${DENSE_GPU_ONLY:-0}" = 1 ]; then  # only the dense GPU tier
  build gpu_dense_test bench_dense_gpu
  run_dense_gpu
  exit 0
fi
if [ "${STORAGE_ONLY:-0}" = 1 ]; then  # only the storage benchmark
  build storage_bench
  run_storage_bench
  exit 0
fi
if [ "${TRIDIAG_CPU:-0}" = 1 ]; then  # the CPU benchmark on 2 pinned cores
  build tridiag_cpu_bench
  OPENBLAS_NUM_THREADS=1 taskset -c 0,1 $BUILD/bench/tridiag/tridiag_cpu_bench 22 2 > "$OUT/cpu_bench.json"
  exit $?
fi
if [ "${MULTI_GPU:-0}" = 1 ]; then  # what needs two or more GPUs
  build tridiag_test gpu_dense_test tridiag_multi_gpu_bench
  echo "== two-device and device-list tests"
  $BUILD/tridiag/tridiag_test --gtest_filter='GpuTest.TwoDevices*:GpuTest.LargeSystemsSolveOnEveryDevice' \
    2>&1 | grep -E "^\[ *(OK|PASSED|FAILED|SKIPPED) *\]|Failure" | head -20
  OPENBLAS_NUM_THREADS=4 $BUILD/scheduler/gpu_dense_test --gtest_filter='*TwoDevices*:*EngineDevices*' \
    2>&1 | grep -E "^\[ *(OK|PASSED|FAILED|SKIPPED) *\]|Failure" | head -20
  echo "== tridiagonal batches on every GPU against one (2^26 unknowns, best of 5)"
  $BUILD/bench/tridiag/tridiag_multi_gpu_bench 26 5 64,256,1024,4096 > "$OUT/multi_gpu.json" \
    2> "$OUT/multi_gpu.err"
  tail -12 "$OUT/multi_gpu.err"
  exit 0
fi
if [ "${SUITE:-0}" = 1 ]; then  # every test, on the GPU host
  cmake --build $BUILD -j16 >> "$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head -40; exit 1; }
  (cd $BUILD && ctest -j16 --timeout 300 --output-on-failure > "$OUT/ctest.log" 2>&1)
  rc=$?
  grep -E "tests passed|\((Failed|Timeout)\)|Not Run" "$OUT/ctest.log"
  grep -E "Failure|Expected|Which is|  Actual" "$OUT/ctest.log" | head -40
  echo "skipping: $(grep -c '(Skipped)' "$OUT/ctest.log") (listed in ctest.log)"
  exit $rc
fi
if [ "${TRIDIAG_QUICK:-0}" = 1 ]; then  # kernels only: GPU tests, strided batches
  build tridiag_test tridiag_gpu_bench
  run_tridiag_gpu_tests
  $BUILD/bench/tridiag/tridiag_gpu_bench 26 5 quick > "$OUT/gpu_bench_quick.json" 2> "$OUT/gpu_bench.err"
  cat "$OUT/gpu_bench.err"
  exit 0
fi
if [ "${TRIDIAG_PROFILE:-0}" = 1 ]; then  # where the one-pass kernel spends its time
  build tridiag_gpu_bench
  NCU=$(ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
  $NCU -k regex:${PROFILE_KERNEL:-group_spike} --launch-count 24 --import-source yes \
    --section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats \
    --section InstructionStats --section SourceCounters --section LaunchStats \
    --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
    -o "$OUT/profile" $BUILD/bench/tridiag/tridiag_gpu_bench 26 1 ${PROFILE_MODE:-quick} \
    ${PROFILE_N:-} > /dev/null 2> "$OUT/ncu.err"
  tail -3 "$OUT/ncu.err"
  python3 scripts/ncu-summary.py "$NCU" "$OUT/profile.ncu-rep"
  exit 0
fi
build tridiag_test storage_bench tridiag_gpu_bench gpu_dense_test bench_dense_gpu
run_dense_gpu
run_tridiag_gpu_tests
echo "== tridiag GPU benchmark (2^26 unknowns, best of 5)"
$BUILD/bench/tridiag/tridiag_gpu_bench 26 5 > "$OUT/gpu_bench.json" 2> "$OUT/gpu_bench.err"
grep -E "stripesolve (spike|thomas)|cusparse gtsv2|lu_pivoting" "$OUT/gpu_bench.err"
[ "${TRIDIAG_ONLY:-0}" = 1 ] || run_storage_bench
build integration_test stripesolve stripesolved
echo "== the GPU tier's crash test (daemon killed 20 times, resumed on the device)"
STRIPESOLVE_CRASH_KILLS=20 $BUILD/tests/integration/integration_test \
  --gtest_filter='CrashIntegration.AKilledGpu*' 2>&1 | grep -E "^\[ *(OK|FAILED|SKIPPED) *\]|Failure|crash test"
echo "== daemon tridiagonal jobs on the GPU machine"
OPENBLAS_NUM_THREADS=1 $BUILD/tests/integration/integration_test --gtest_filter='*Tridiag*' 2>&1 \
  | grep -E "^\[ *(PASSED|FAILED|SKIPPED|OK) *\]|Failure|Expected|actual|Which is" | head -60
