#!/bin/bash
# Registers and spills of each CUDA kernel in the given sources, as ptxas reports them for the
# build's target (sm_90, -O3), on any machine with the CUDA toolkit (no GPU needed): a first look
# at what a change does to kernels near the register limit before a GPU run times it. Default
# sources: the tridiagonal reduction kernels (cr, pcr and their hybrids). Extra nvcc flags after
# `--`, e.g. -- -DSTRIPESOLVE_TRIDIAG_MEASURE_NO_PIVOT_TEST.
# Usage (repository root): scripts/kernel-registers.sh [file.cu ...] [-- nvcc flags]
set -euo pipefail
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
sources=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do sources+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
[ ${#sources[@]} -gt 0 ] || sources=(tridiag/cuda/warp_reduction.cu tridiag/cuda/reduction_kernels.cu
                                    tridiag/cuda/pcr_shuffle_steps.cu tridiag/cuda/pcr_level_groups.cu)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for src in "${sources[@]}"; do
  "$NVCC" -DSTRIPESOLVE_HAVE_CUDA=1 -I. -O3 -DNDEBUG --generate-code=arch=compute_90,code=sm_90 \
    -std=c++20 --expt-relaxed-constexpr -Xptxas -v "$@" -x cu -c "$src" \
    -o "$work/$(basename "$src").o" 2> "$work/$(basename "$src").txt" &
done
wait
for src in "${sources[@]}"; do
  echo "== $src"
  # ptxas prints, for each entry function: its mangled name, the spills, then the registers.
  awk '/Compiling entry function/ { match($0, /'"'"'[^'"'"']+'"'"'/); name = substr($0, RSTART + 1, RLENGTH - 2) }
       /spill stores/ { spill = $5 }
       /Used [0-9]+ registers/ { match($0, /Used [0-9]+/); print name, substr($0, RSTART + 5, RLENGTH - 5), spill }' \
    "$work/$(basename "$src").txt" |
    while read -r name regs spill; do
      printf '  %-64s registers %3s  spilled bytes %s\n' \
        "$(c++filt "$name" | sed -E -e 's/stripesolve::tridiag::(gpu::)?(\(anonymous namespace\)::)?(warp::)?//; s/\(double const\*.*//' \
          -e 's/\(stripesolve::tridiag::Algorithm\)1/thomas/; s/\(stripesolve::tridiag::Algorithm\)2/cr/' \
          -e 's/\(stripesolve::tridiag::Algorithm\)3/pcr/; s/\(stripesolve::tridiag::Algorithm\)4/cr_pcr/' \
          -e 's/\(stripesolve::tridiag::Algorithm\)5/pcr_thomas/; s/\(stripesolve::tridiag::Algorithm\)6/cr_pcr_thomas/')" \
        "$regs" "$spill"
    done
done
