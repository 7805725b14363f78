# Sourced by the scripts that build on the GPU machine (through scripts/device-start.sh, or
# directly by a one-off script that only needs the dependencies): unpacks the Debian packages
# carried in .debs/ (what that machine lacks: liburing, CLI11, nlohmann-json, LAPACKE, SQLite; the
# list is in device-check.sh) into /opt/dep, points the loader and pkg-config at them, and sets
# DEPS_CMAKE_ARGS, the CMake arguments that find them. Run from the repository root.
PREFIX=/opt/dep
L=$PREFIX/usr/lib/x86_64-linux-gnu
mkdir -p $PREFIX
for f in .debs/*.deb; do [ -e "$f" ] && dpkg -x "$f" $PREFIX; done
export LD_LIBRARY_PATH=$L:${LD_LIBRARY_PATH:-}
export PKG_CONFIG_PATH=$L/pkgconfig:${PKG_CONFIG_PATH:-}
# The carried .pc names /usr.
[ -e $L/pkgconfig/liburing.pc ] && sed -i "s|=/usr|=$PREFIX/usr|" $L/pkgconfig/liburing.pc
DEPS_CMAKE_ARGS=(-DCMAKE_PREFIX_PATH=$PREFIX/usr)
[ -e $PREFIX/usr/include/lapacke.h ] &&
  DEPS_CMAKE_ARGS+=(-DLAPACKE_INCLUDE_DIR=$PREFIX/usr/include -DLAPACKE_LIBRARY=$L/liblapacke.so)
true
