#!/usr/bin/env bash
# Sets up and runs every test tier: installs dependencies (Debian 12 packages), checks the format
# (scripts/check-style.sh; with the asan tier also clang-tidy on the commit's C++ files), then builds and runs the unit and integration tests in the release
# build, under ASan+UBSan (built by clang with -Werror=thread-safety: the lock discipline of
# base/thread_annotations.h), and the threaded tests under ThreadSanitizer. Without the asan tier
# the lock discipline is checked by scripts/check-threads.sh instead.
# Usage: scripts/test.sh [release|asan|tsan ...] (default: all three).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
scripts/check-style.sh

presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(release asan tsan)
[[ " ${presets[*]} " == *" asan "* ]] || scripts/check-threads.sh
jobs=${STRIPESOLVE_JOBS:-$(nproc)}

for preset in "${presets[@]}"; do
  echo "=== ${preset}: configure, build, test ==="
  start=$(date +%s)
  cmake --preset "$preset" >/dev/null
  # clang-tidy (.clang-tidy) on the C++ files the commit under test changes, with the asan
  # tier's flags and a compile database that lists files one by one (the unity builds' names
  # their batches only): a tree configured without unity and never built (no generated files).
  if [ "$preset" = asan ] && git rev-parse -q --verify HEAD~1 > /dev/null; then
    cmake --preset asan -B build/tidy -DCMAKE_UNITY_BUILD=OFF >/dev/null
    BUILD=build/tidy scripts/check-style.sh --tidy HEAD~1 --no-format
  fi
  cmake --build --preset "$preset" -j "$jobs"
  ctest --preset "$preset" -j "$jobs"
  echo "=== ${preset}: done in $(( $(date +%s) - start )) s ==="
done
