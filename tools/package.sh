#!/usr/bin/env bash
# Builds the Debian package dist/onnxforge_<version>_amd64.deb from the release build in build/
# (configured and built here if it is not yet): the command, its man page, libonnxforge.so with
# its headers and CMake package, and the Python module. Depends are filled in by dpkg-shlibdeps.
#   tools/package.sh [OUT_DIR]
# Installing: apt install ./dist/onnxforge_*_amd64.deb; trying without installing:
#   dpkg-deb -x dist/onnxforge_*_amd64.deb root && tests/package/check.sh root/usr MODEL
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-dist}")
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
# Debian's layout (prefix /usr, multiarch libraries). Changing the prefix of an existing build/
# only regenerates it: install paths are not compile flags. The install step does not rebuild
# everything (tests, benchmarks): only the installed targets are built.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
  -DCMAKE_INSTALL_LIBDIR="lib/$multiarch" -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON >/dev/null
cmake --build build -j"$(nproc)" --target onnxforge onnxforge_man onnxforge_shared onnxforge_python onnxforge_python_files
mkdir -p "$out"
cpack --config build/CPackConfig.cmake -G DEB -B "$out" >/dev/null
rm -rf "$out/_CPack_Packages"
deb=$(ls -t "$out"/onnxforge_*_amd64.deb | head -1)
echo "package: $deb"
dpkg-deb -f "$deb" Package Version Architecture Depends Recommends
