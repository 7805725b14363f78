#!/usr/bin/env bash
# Small jobs end to end: starts stripesolved on its embedded defaults (its RAM budget half the
# available memory; the GPU tier where a CUDA device is present) with a store and socket of its
# own, then times each client command from start to exit on matrices of the given orders:
# matrix create, two solves (--no-store, so the second factors again), matrix export. Prints
# one line a command and the daemon's lines on each solve (the plan's device, the cache's
# pinning on the GPU tier, the solve's time). Runs from the repository root on a release build.
# Usage: bench/daemon/small_jobs.sh [BUILD_DIR] [N ...]   (default build/release, N = 1000 8192)
set -euo pipefail
bin=${1:-build/release}
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1000 8192)
dir=$(mktemp -d /tmp/stripesolve-small-jobs.XXXXXX)
mkdir -p "$dir/run"
export XDG_DATA_HOME=$dir/data XDG_RUNTIME_DIR=$dir/run STRIPESOLVE_SOCKET=$dir/stripesolved.sock
"$bin/daemon/stripesolved" 2> "$dir/daemon.log" &
daemon_pid=$!
cleanup() {
  "$bin/client/stripesolve" daemon stop > /dev/null 2>&1 || kill "$daemon_pid" 2> /dev/null || true
  wait "$daemon_pid" 2> /dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
for _ in $(seq 200); do
  "$bin/client/stripesolve" daemon status > /dev/null 2>&1 && break
  sleep 0.1
done
grep -E "engine RAM budget" "$dir/daemon.log" | sed 's/.*\] //'
# Runs one client command and prints its wall time from start to exit.
timed() {
  local t0 t1 rc=0
  t0=$(date +%s%N)
  "$bin/client/stripesolve" "$@" > "$dir/out.txt" 2>&1 || rc=$?
  t1=$(date +%s%N)
  printf '%8.3f s  rc %d  stripesolve %s\n' "$(( t1 - t0 ))e-9" "$rc" "$*"
}
for n in "${sizes[@]}"; do
  timed matrix create "m$n" -n "$n" --seed 1
  timed solve "m$n" --generate uniform --no-store --out "$dir/x.npy"
  timed solve "m$n" --generate uniform --no-store --out "$dir/x.npy"
  timed matrix export "m$n" "$dir/m.npy"
  rm -f "$dir/m.npy" "$dir/x.npy"
  timed matrix rm "m$n"
done
grep -E "RAM cache pinned|GPU tier on|dense solve of .* done in" "$dir/daemon.log" |
  sed -e 's/.*\] //' -e 's/ on device [0-9]*: [^)]*)//' -e 's/ GPU tier on [^)]*)//' | cut -c1-200
