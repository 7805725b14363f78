#!/usr/bin/env bash
# The main job: installs dependencies, builds the release preset, starts stripesolved on its
# embedded defaults (store under $XDG_DATA_HOME/stripesolve; the GPU tier when a CUDA device is
# present, else the CPU backend) with a RAM stripe cache a quarter of the matrix, creates a
# random dense matrix (002 §9.1: uniform on [-0.5, 0.5]), solves it out of core through the
# client with a progress bar, prints the residual, the rate (GFLOP/s or TFLOP/s) and the device,
# removes the matrix and its factors, and stops the daemon.
#
# Knobs (environment): STRIPESOLVE_MAIN_N (order, default 8192 = 512 MiB of float64),
# STRIPESOLVE_MAIN_CACHE (RAM cache, default 128MiB), STRIPESOLVE_JOBS (build parallelism),
# STRIPESOLVE_SKIP_INSTALL=1 (dependencies already there, e.g. the GPU host without network)
# and STRIPESOLVE_CONFIGURE_ARGS (extra cmake arguments, e.g. -DCMAKE_PREFIX_PATH=...).
set -euo pipefail
cd "$(dirname "$0")/.."

n=${STRIPESOLVE_MAIN_N:-8192}
cache=${STRIPESOLVE_MAIN_CACHE:-128MiB}

[ "${STRIPESOLVE_SKIP_INSTALL:-0}" = 1 ] || scripts/install-deps.sh
# shellcheck disable=SC2086  # the extra arguments are words on purpose
cmake --preset release ${STRIPESOLVE_CONFIGURE_ARGS:-} >/dev/null
# The daemon and the client only (the tests and benchmarks are scripts/test.sh's).
cmake --build --preset release -j "${STRIPESOLVE_JOBS:-$(nproc)}" --target stripesolved stripesolve

bin=build/release
run_dir=$(mktemp -d /tmp/stripesolve-main.XXXXXX)
export STRIPESOLVE_SOCKET="$run_dir/stripesolved.sock"  # a socket of its own: no clash with a running daemon
client() { "$bin/client/stripesolve" "$@"; }
matrix="main-job-$$"

"$bin/daemon/stripesolved" --ram-budget "$cache" 2> "$run_dir/daemon.log" &
daemon_pid=$!
cleanup() {
  client matrix rm "$matrix.lu.row" > /dev/null 2>&1 || true
  client matrix rm "$matrix" > /dev/null 2>&1 || true
  client daemon stop > /dev/null 2>&1 || kill "$daemon_pid" 2> /dev/null || true
  wait "$daemon_pid" 2> /dev/null || true
  rm -rf "$run_dir"
}
trap cleanup EXIT

for _ in $(seq 100); do
  client daemon status > /dev/null 2>&1 && break
  kill -0 "$daemon_pid" 2> /dev/null || { cat "$run_dir/daemon.log"; exit 1; }
  sleep 0.1
done
client daemon status

echo "== creating a random $n x $n matrix ($(( n * n * 8 / 1048576 )) MiB, RAM cache $cache)"
client matrix create "$matrix" -n "$n" --seed 1
echo "== solving it out of core (row pivoting, meta-stripe zigzag)"
client solve "$matrix" --generate uniform --strategy meta_zigzag --out "$run_dir/x.npy"
echo "== solution: $(stat -c %s "$run_dir/x.npy") bytes written to an .npy (removed on exit)"
echo "== daemon log (last lines)"
tail -n 4 "$run_dir/daemon.log"
