#!/usr/bin/env bash
# Runs paper 003's ADI example end to end: builds the daemon and the example if needed (release
# preset), starts stripesolved on its embedded defaults with a socket and store of its own in a
# temporary folder, runs stripesolve_adi (every half step a tridiag_solve job of that daemon),
# draws the final field with matplotlib when it is installed, and stops the daemon.
#
#   examples/adi/run.sh                          # 64 x 64 grid, 30 steps, CPU or the GPU found
#   examples/adi/run.sh --grid 1024 --device gpu  # 78 steps; --help lists the options
#
# Arguments go to stripesolve_adi (--help lists them). Environment: STRIPESOLVE_BUILD_DIR (a
# configured build tree, default build/release), STRIPESOLVE_ADI_OUT (where adi_field.npy and
# adi_field.png go, default <build>/examples/adi/out), STRIPESOLVE_ADI_NO_BUILD=1 (use the binaries as
# they are: the CTest run). Exit status: stripesolve_adi's (1: error above the bound).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${STRIPESOLVE_BUILD_DIR:-$root/build/release}
out=${STRIPESOLVE_ADI_OUT:-$build/examples/adi/out}

if [ "${STRIPESOLVE_ADI_NO_BUILD:-0}" != 1 ]; then
  if [ ! -f "$build/build.ninja" ] && [ ! -f "$build/Makefile" ]; then
    (cd "$root" && cmake --preset release > /dev/null)
  fi
  cmake --build "$build" -j "${STRIPESOLVE_JOBS:-$(nproc)}" --target stripesolved stripesolve_adi
fi
daemon_bin=$build/daemon/stripesolved
adi_bin=$build/examples/adi/stripesolve_adi
for b in "$daemon_bin" "$adi_bin"; do
  [ -x "$b" ] || { echo "run.sh: $b is missing (build it, or unset STRIPESOLVE_ADI_NO_BUILD)" >&2; exit 2; }
done

case " $* " in *" --help "*|*" -h "*) exec "$adi_bin" --help ;; esac

run_dir=$(mktemp -d /tmp/stripesolve-adi.XXXXXX)
export STRIPESOLVE_SOCKET=$run_dir/stripesolved.sock
# The daemon's store and journal go under the temporary folder, not the user's data.
XDG_DATA_HOME=$run_dir/data "$daemon_bin" 2> "$run_dir/daemon.log" &
daemon_pid=$!
cleanup() {
  kill "$daemon_pid" 2> /dev/null || true
  wait "$daemon_pid" 2> /dev/null || true
  rm -rf "$run_dir"
}
trap cleanup EXIT
for _ in $(seq 100); do
  [ -S "$STRIPESOLVE_SOCKET" ] && break
  kill -0 "$daemon_pid" 2> /dev/null || { cat "$run_dir/daemon.log" >&2; exit 2; }
  sleep 0.1
done

mkdir -p "$out"
status=0
"$adi_bin" --out "$out/adi_field.npy" "$@" || status=$?
if [ -f "$out/adi_field.npy" ]; then
  # Debian's interpreter too: python3-matplotlib installs for it, a python3 earlier on PATH may lack it.
  python=
  for p in python3 /usr/bin/python3; do
    if command -v "$p" > /dev/null && "$p" -c "import matplotlib, numpy" 2> /dev/null; then python=$p; break; fi
  done
  if [ -n "$python" ]; then
    "$python" "$here/plot_field.py" "$out/adi_field.npy" "$out/adi_field.png"
  else
    echo "run.sh: no PNG (matplotlib is missing: apt install python3-matplotlib)"
  fi
fi
exit "$status"
