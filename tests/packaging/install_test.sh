#!/usr/bin/env bash
# `cmake --install` into a staging folder and `cpack -G DEB`, then the installed daemon checks the
# installed configuration, both binaries print their version, and the units start the installed
# daemon. Usage: install_test.sh BUILD_DIR
set -euo pipefail
build=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

check_tree() {  # root prefix etc
  local root=$1 prefix=$2 etc=$3
  local bin=$root$prefix/bin
  [ -x "$bin/stripesolved" ] && [ -x "$bin/stripesolve" ] || fail "binaries missing under $root$prefix/bin"
  local version
  version=$("$bin/stripesolved" --version) || fail "stripesolved --version"
  grep -q "^stripesolved [0-9]" <<< "$version" || fail "stripesolved --version: $version"
  version=$("$bin/stripesolve" --version) || fail "stripesolve --version"
  grep -q "^stripesolve [0-9]" <<< "$version" || fail "stripesolve --version: $version"
  "$bin/stripesolved" --check-config --config "$root$etc/stripesolve/stripesolved.yaml" > "$tmp/check.txt" \
    || fail "--check-config of the installed configuration"
  [ -f "$root$etc/logrotate.d/stripesolved" ] || fail "logrotate snippet missing"
  for kind in system user; do
    local unit=$root$prefix/lib/systemd/$kind/stripesolved.service
    grep -q "^ExecStart=$prefix/bin/stripesolved" "$unit" || fail "$unit does not start $prefix/bin/stripesolved"
  done
  grep -q -- "--config $etc/stripesolve/stripesolved.yaml" "$root$prefix/lib/systemd/system/stripesolved.service" \
    || fail "the system unit does not read $etc/stripesolve/stripesolved.yaml"
}

DESTDIR=$tmp/stage cmake --install "$build" --prefix /opt/stripesolve > "$tmp/install.log" \
  || { cat "$tmp/install.log"; fail "cmake --install"; }
check_tree "$tmp/stage" /opt/stripesolve /opt/stripesolve/etc
echo "cmake --install: ok"

if ! command -v dpkg-deb > /dev/null; then
  echo "SKIP: dpkg-deb not found, the .deb is not checked"
  exit 0
fi
(cd "$tmp" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/deb" > "$tmp/cpack.log") \
  || { cat "$tmp/cpack.log"; fail "cpack -G DEB"; }
deb=$(ls "$tmp"/deb/stripesolve_*.deb)
# (Captured first: with pipefail, grep -q closing the pipe early would fail its writer.)
info=$(dpkg-deb -I "$deb")
grep -q "Depends: .*libspdlog" <<< "$info" || fail "the .deb names no dependencies"
control=$(dpkg-deb --ctrl-tarfile "$deb" | tar -t)
grep -q postinst <<< "$control" || fail "the .deb has no postinst"
dpkg-deb -x "$deb" "$tmp/root"
check_tree "$tmp/root" /usr /etc
echo "cpack -G DEB: ok ($(basename "$deb"))"
