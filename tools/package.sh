#!/usr/bin/env bash
# Builds, from the release build in build/ (configured and built here if it is not yet):
# - the Debian package dist/onnxforge_<version>_amd64.deb: the command, its man page,
#   libonnxforge.so with its headers and CMake package, and the Python module (Depends filled in
#   by dpkg-shlibdeps);
# - the wheel dist/onnxforge-<version>-cp311-cp311-linux_x86_64.whl for Debian 12's python3: the
#   module with its extension, the `onnxforge` command as a console entry point, and the native
#   program in onnxforge/bin/ for `zoo run`'s steps (tools/wheel; Debian's python3-build, no PyPI).
#   tools/package.sh [OUT_DIR]          (ONNXFORGE_BUILD_DIR: another build folder than build/)
# Installing: apt install ./dist/onnxforge_*_amd64.deb, or pip install dist/onnxforge-*.whl;
# trying without installing: dpkg-deb -x dist/onnxforge_*_amd64.deb root && tests/package/check.sh
# root/usr MODEL, and tests/package/check_wheel.sh dist/onnxforge-*.whl MODEL.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-dist}")
b=${ONNXFORGE_BUILD_DIR:-build}
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
# Debian's layout (prefix /usr, multiarch libraries). Changing the prefix of an existing build/
# only regenerates it: install paths are not compile flags. The install step does not rebuild
# everything (tests, benchmarks): only the installed targets are built.
cmake -S . -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
  -DCMAKE_INSTALL_LIBDIR="lib/$multiarch" -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON >/dev/null
cmake --build "$b" -j"$(nproc)" --target onnxforge onnxforge_man onnxforge_shared onnxforge_python onnxforge_python_files
mkdir -p "$out"
cpack --config "$b/CPackConfig.cmake" -G DEB -B "$out" >/dev/null
rm -rf "$out/_CPack_Packages"
deb=$(ls -t "$out"/onnxforge_*_amd64.deb | head -1)
echo "package: $deb"
dpkg-deb -f "$deb" Package Version Architecture Depends Recommends

# The wheel from the same build: installed into a scratch prefix first, so the files are the
# installed ones (no build-tree RPATH), then staged beside tools/wheel's setup files.
version=$(sed -n 's/^project(onnxforge VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cmake --install "$b" --prefix "$stage/root" >/dev/null
mkdir -p "$stage/wheel/onnxforge/bin"
cp tools/wheel/pyproject.toml tools/wheel/setup.py README.md "$stage/wheel/"
cp -r "$stage/root/lib/python3/dist-packages/onnxforge/." "$stage/wheel/onnxforge/"
cp "$stage/root/bin/onnxforge" "$stage/wheel/onnxforge/bin/onnxforge"
ONNXFORGE_VERSION=$version /usr/bin/python3 -m build --wheel --no-isolation --outdir "$out" "$stage/wheel" >"$stage/build.log" 2>&1 ||
  { cat "$stage/build.log" >&2; exit 1; }
whl=$(ls -t "$out"/onnxforge-"$version"-*-linux_x86_64.whl | head -1)
echo "package: $whl"
