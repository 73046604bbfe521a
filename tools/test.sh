#!/usr/bin/env bash
# Runs the whole test suite: builds if needed, exports the small test-model zoo (cached in
# .cache/models), then runs every GoogleTest and script test through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f build/build.ninja ] || cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@"
