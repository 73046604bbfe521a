#!/usr/bin/env bash
# ThreadSanitizer over the parallel parts (issue 14): builds `test_tsan` (tests/CMakeLists.txt:
# the runtime's thread pool, sessions, the driver's analyses, folding, verification seeds) with
# -fsanitize=thread and runs it.
#
#   tools/tsan/run.sh            # build-tsan/ (and an instrumented oneTBB in build-tsan/tbb), then ctest -L tsan
#
# TBB must be instrumented too: with Debian's libtbb, TSan cannot see the library's own
# synchronisation and reports races in a correct 20-line parallel_for + flow-graph program (at least 15
# reports). So oneTBB v2021.8.0, the version Debian 12 ships (same headers, same ABI), is built
# once from its sources with TBB_SANITIZE=thread and used for this build only.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build-tsan}
TBB_PREFIX=$BUILD/tbb
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$ROOT/..}

# The sources come from Debian's own archive (the orig tarball of the libtbb12 package this
# machine runs; sha256-checked), so the CI machine needs no access beyond apt's mirror.
TBB_TARBALL_URL=http://deb.debian.org/debian/pool/main/o/onetbb/onetbb_2021.8.0.orig.tar.xz
TBB_TARBALL_SHA256=7e9111b8bb59c8800bf6d0b06afe7b0891937443d2dae1ee1101c8e2ede6a7ef
if [[ ! -f $TBB_PREFIX/lib/cmake/TBB/TBBConfig.cmake ]]; then
  src=${TBB_SOURCE:-$BUILD/onetbb-src}
  if [[ ! -d $src ]]; then
    mkdir -p "$BUILD"
    tarball=$BUILD/onetbb_2021.8.0.orig.tar.xz
    [[ -f $tarball ]] || curl -sSf -o "$tarball.tmp" "$TBB_TARBALL_URL" && { [[ -f $tarball ]] || mv "$tarball.tmp" "$tarball"; }
    echo "$TBB_TARBALL_SHA256  $tarball" | sha256sum -c --quiet - || { echo "tsan: $tarball: sha256 mismatch" >&2; exit 2; }
    mkdir -p "$src.tmp" && tar xJf "$tarball" -C "$src.tmp" --strip-components=1 && mv "$src.tmp" "$src"
  fi
  cmake -S "$src" -B "$BUILD/onetbb-build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTBB_SANITIZE=thread \
    -DTBB_TEST=OFF -DTBBMALLOC_BUILD=OFF -DTBB_STRICT=OFF -DCMAKE_INSTALL_PREFIX="$TBB_PREFIX" > /dev/null
  nice -n 10 cmake --build "$BUILD/onetbb-build" -j"${JOBS:-2}"
  cmake --install "$BUILD/onetbb-build" > /dev/null
fi

cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DONNXFORGE_TSAN=ON -DONNXFORGE_PERF=OFF \
  -DONNXFORGE_PYTHON=OFF -DTBB_DIR="$TBB_PREFIX/lib/cmake/TBB" -DCMAKE_BUILD_RPATH="$TBB_PREFIX/lib" \
  ${ONNXFORGE_MODEL_DIR:+-DONNXFORGE_MODEL_DIR=$ONNXFORGE_MODEL_DIR} > /dev/null
nice -n 10 cmake --build "$BUILD" -j"${JOBS:-2}" --target test_tsan
# halt_on_error: the first race fails its test. second_deadlock_stack: both stacks of a lock-order report.
TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1} \
  ctest --test-dir "$BUILD" --output-on-failure -L tsan -j1 ${CTEST_ARGS:-}
