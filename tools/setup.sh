#!/usr/bin/env bash
# Installs everything onnxforge needs on Debian 12 (Debian packages + ONNX Runtime from npm as the
# independent peer) and builds it into build/. Safe to run again: installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(g++ cmake ninja-build ccache libonnx-dev libprotobuf-dev protobuf-compiler libtbb-dev libmimalloc-dev
          libxsimd-dev xtl-dev libbenchmark-dev libgtest-dev libgmock-dev nlohmann-json3-dev libcli11-dev
          python3-onnx python3-numpy python3-torch python3-torchvision libonnx-testdata time
          pybind11-dev dpkg-dev file curl
          libminizip-dev  # .npz input archives (runtime/tensor_io.cpp)
          python3-build python3-setuptools python3-wheel python3-venv  # the wheel (tools/package.sh), offline
          libjs-chart.js chromium  # zoo report: Chart.js inlined into report.html; headless check of the page
          clang-format  # the style check (tools/format.sh, .clang-format)
          clang libclang-rt-14-dev)  # the fuzz targets (tools/fuzz): clang with libFuzzer and the sanitizers' runtimes
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js may come from elsewhere (NodeSource bundles npm; Debian's npm then conflicts): ask apt
# only for what is missing as a command.
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# ONNX Runtime (CPU) for cross-checks. Without ONNXRUNTIME_NODE_INSTALL=skip its postinstall tries
# to download GPU libraries and fails on machines without outside access.
tools/peers/install.sh

build_type=${ONNXFORGE_BUILD_TYPE:-Release}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$build_type" ${ONNXFORGE_CMAKE_ARGS:-}
# Only what the main job needs: the command, the library and the Python module (tools/test.sh
# builds the tests and benchmarks).
cmake --build build -j"$(nproc)" --target onnxforge onnxforge_shared onnxforge_python
echo "setup: built build/onnxforge"
