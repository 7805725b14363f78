#!/usr/bin/env bash
# The thread-safety analysis: builds the libraries and the daemon with clang (Debian 12's, 14)
# and -Werror=thread-safety, so a member marked GUARDED_BY(mu_) (base/thread_annotations.h)
# touched without its mutex, or a REQUIRES(mu_) function called without it, fails the build.
# Only the annotated code matters, so no tests, benchmarks, examples or CUDA (about 4 minutes on
# 2 cores; the build stays in build/clang-threads for the next run).
# scripts/test.sh runs it only without the asan tier, whose clang build runs the same analysis.
# Usage: scripts/check-threads.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cxx=${CLANG_CXX:-clang++}
command -v "$cxx" > /dev/null || { echo "check-threads: $cxx not found (apt install clang)" >&2; exit 2; }
dir=build/clang-threads
CXX=$cxx cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS="-O0 -g0" \
  -DCMAKE_CXX_FLAGS_DEBUG="-Werror=thread-safety" -DSTRIPESOLVE_ENABLE_CUDA=OFF \
  -DSTRIPESOLVE_BUILD_TESTS=OFF -DSTRIPESOLVE_BUILD_BENCH=OFF -DSTRIPESOLVE_BUILD_EXAMPLES=OFF \
  > /dev/null
start=$(date +%s)
if ! cmake --build "$dir" -j "${STRIPESOLVE_JOBS:-$(nproc)}" > "$dir/check-threads.log" 2>&1; then
  grep -E "error|warning: .*thread" "$dir/check-threads.log" | head -40
  echo "check-threads: the thread-safety analysis failed (full log: $dir/check-threads.log)"
  exit 1
fi
echo "check-threads: clang -Werror=thread-safety build clean in $(( $(date +%s) - start )) s"
