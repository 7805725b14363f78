#!/bin/bash
# The ADI example on the GPU machine: builds stripesolved (with CUDA) and stripesolve_adi, then
# runs examples/adi/run.sh on each grid of ADI_GRIDS with the daemon solving on the CPU and on
# the GPU (--device cpu / gpu). Dependencies the machine lacks come from Debian packages carried
# in .debs/ (scripts/device-start.sh). Logs, fields and PNGs go to $OUT.
# Usage (repository root): examples/adi/device_run.sh
set -u
OUT=${OUT:-/tmp/adi-out}
source scripts/device-start.sh device_run.log
BUILD=/tmp/adibuild
cmake -S . -B $BUILD -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRIPESOLVE_BUILD_BENCH=OFF \
  "${DEPS_CMAKE_ARGS[@]}" > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
grep -E "CUDA backend" "$OUT/configure.log"
cmake --build $BUILD -j"$(nproc)" --target stripesolved stripesolve_adi > "$OUT/build.log" 2>&1 \
  || { grep -E "error" "$OUT/build.log" | head -40; exit 1; }
export STRIPESOLVE_BUILD_DIR=$BUILD STRIPESOLVE_ADI_NO_BUILD=1
for g in ${ADI_GRIDS:-256 1024 2048}; do
  for dev in cpu gpu; do  # the default steps: enough to converge, so the error check holds
    echo "== grid $g, --device $dev"
    STRIPESOLVE_ADI_OUT=$OUT/${dev}_$g examples/adi/run.sh --grid "$g" --device "$dev" \
      | grep -E "^(grid|time per step|max error)"
  done
done
