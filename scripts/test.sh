#!/usr/bin/env bash
# Sets up and runs every test tier: installs dependencies (Debian 12 packages), checks the format
# (scripts/check-style.sh) and the lock discipline (scripts/check-threads.sh), then builds and runs the unit and integration tests in the release
# build, under ASan+UBSan, and the threaded tests under ThreadSanitizer.
# Usage: scripts/test.sh [release|asan|tsan ...] (default: all three).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
scripts/check-style.sh
scripts/check-threads.sh

presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(release asan tsan)
jobs=${STRIPESOLVE_JOBS:-$(nproc)}

for preset in "${presets[@]}"; do
  echo "=== ${preset}: configure, build, test ==="
  start=$(date +%s)
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
  ctest --preset "$preset" -j "$jobs"
  echo "=== ${preset}: done in $(( $(date +%s) - start )) s ==="
done
