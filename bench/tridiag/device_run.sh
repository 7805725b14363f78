#!/bin/bash
# Builds base + tridiag + bench/tridiag on the GPU machine from a copy of only those folders
# (other modules may be mid-edit), runs tridiag_test and the GPU benchmark, and leaves logs and
# JSON in $OUT. Dependencies come from the system when present, else from carried Debian
# packages in .debs/ (unpacked into /opt/dep). Usage (repository root):
#   bench/tridiag/device_run.sh [log2_unknowns = 26; 0 = tests only; cpu = CPU benchmark on 2 cores]
set -u
OUT=${OUT:-/tmp/tridiag-out}
mkdir -p "$OUT"
LOG2=${1:-26}
ROOT=$(pwd)
exec > >(tee "$OUT/device_run.log") 2>&1
{ head -2 /etc/os-release; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc; cmake --version | head -1; } 
have() { [ -e "/usr/include/$1" ] || ls /usr/include/*/"$1" > /dev/null 2>&1; }
PREFIX=/opt/dep
mkdir -p $PREFIX
need=()
have nlohmann/json.hpp || need+=(nlohmann-json3-dev)
have CLI/CLI.hpp || need+=(libcli11-dev)
have lapacke.h || need+=(liblapacke-dev liblapacke libtmglib3 libtmglib-dev)
have spdlog/spdlog.h || need+=(libspdlog-dev libspdlog1.10 libfmt-dev libfmt9)
have fmt/format.h || need+=(libfmt-dev libfmt9)
have yaml-cpp/yaml.h || need+=(libyaml-cpp-dev libyaml-cpp0.7)
have gtest/gtest.h || need+=(libgtest-dev libgmock-dev)
have boost/asio.hpp || need+=(libboost1.74-dev libboost-dev)
have cblas.h || need+=(libopenblas-dev libopenblas0-pthread libopenblas-pthread-dev liblapack3 liblapack-dev libblas3 libblas-dev libgfortran5)
echo "carried packages used: ${need[*]:-none}"
for p in "${need[@]:-}"; do [ -n "$p" ] && for f in .debs/${p}_*.deb; do dpkg -x "$f" $PREFIX; done; done
L=$PREFIX/usr/lib/x86_64-linux-gnu
for d in $L/openblas-pthread $L/lapack $L/blas; do
  [ -d $d ] && for s in $d/*.so*; do ln -sf "$s" $L/$(basename "$s"); done
done
export LD_LIBRARY_PATH=$L:${LD_LIBRARY_PATH:-}
SRC=/tmp/trisrc
rm -rf $SRC && mkdir -p $SRC/bench
cp -r CMakeLists.txt CMakePresets.json cmake base tridiag $SRC/
cp bench/CMakeLists.txt $SRC/bench/ && cp -r bench/tridiag $SRC/bench/
EXTRA=()
[ -e $PREFIX/usr/include/lapacke.h ] && EXTRA+=(-DLAPACKE_INCLUDE_DIR=$PREFIX/usr/include -DLAPACKE_LIBRARY=$L/liblapacke.so)
cmake -S $SRC -B /tmp/tribuild -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRIPESOLVE_BUILD_TESTS=ON \
  -DSTRIPESOLVE_WERROR=ON -DCMAKE_PREFIX_PATH=$PREFIX/usr "${EXTRA[@]}" > "$OUT/configure.log" 2>&1 \
  || { tail -40 "$OUT/configure.log"; exit 1; }
grep "CUDA backend" "$OUT/configure.log"
if [ "$LOG2" = cpu ]; then  # the CPU benchmark on 2 pinned cores of the quiet GPU machine
  cmake --build /tmp/tribuild -j16 --target tridiag_cpu_bench > "$OUT/build.log" 2>&1 || exit 1
  OPENBLAS_NUM_THREADS=1 taskset -c 0,1 /tmp/tribuild/bench/tridiag/tridiag_cpu_bench 22 2 > "$OUT/cpu_bench.json"
  exit $?
fi
cmake --build /tmp/tribuild -j16 --target tridiag_test tridiag_gpu_bench > "$OUT/build.log" 2>&1 \
  || { grep -E "error" "$OUT/build.log" | head -40; exit 1; }
echo "== tests"
/tmp/tribuild/tridiag/tridiag_test --gtest_output=json:"$OUT/tridiag_test.json" 2>&1 | grep -vE "^\[ *(RUN|OK) *\]" | tail -40
[ "$LOG2" = 0 ] && exit 0  # tests only
echo "== gpu bench"
/tmp/tribuild/bench/tridiag/tridiag_gpu_bench "$LOG2" 5 > "$OUT/gpu_bench.json"
echo "rc=$?"
