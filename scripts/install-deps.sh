#!/usr/bin/env bash
# Installs what stripesolve needs to build and test, from Debian 12 packages only.
# Idempotent: packages already present are skipped; nothing is downloaded from elsewhere.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git python3
  liburing-dev            # io_uring I/O engine (storage/)
  libboost-dev            # Boost.Asio, header-only (daemon/, client/)
  libspdlog-dev libfmt-dev  # logging (base/)
  libyaml-cpp-dev         # configuration (base/)
  nlohmann-json3-dev      # JSON headers for the protocol and JSON logs
  libcli11-dev            # command-line parsing (client, daemon, bench)
  libgtest-dev libgmock-dev  # unit and integration tests
  libopenblas-dev liblapacke-dev  # CPU backend (BLAS, LAPACK)
  libsqlite3-dev          # the daemon's job journal (daemon/job_journal.h)
  python3-matplotlib      # docs/plots (bench/plots/make_plots.py, its test; examples/adi's PNG)
  clang-format            # scripts/check-style.sh (version 14 on Debian 12: the tree's format)
  clang-tidy              # scripts/check-style.sh --tidy (CI: the files of the commit under test)
  clang libclang-rt-14-dev  # the asan tier (clang's ASan + UBSan, thread-safety analysis)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
