#!/usr/bin/env bash
# Differential-fuzzing soak: many more random graphs than the CI test, in chunks of seeds so a
# failure names a reproducible seed range.
#   tools/fuzz/soak.sh [TOTAL_GRAPHS=100000] [FIRST_SEED=1000000] [TEST_BINARY]
# Reproduce one failure: ONNXFORGE_FUZZ_GRAPHS=1 ONNXFORGE_FUZZ_SEED=<seed> test_passes --gtest_filter='Fuzz*'
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TOTAL=${1:-100000}
FIRST=${2:-1000000}
BIN=${3:-$ROOT/build-passes/tests/test_passes}
CHUNK=5000
for ((s = FIRST; s < FIRST + TOTAL; s += CHUNK)); do
  n=$(( FIRST + TOTAL - s < CHUNK ? FIRST + TOTAL - s : CHUNK ))
  if ! ONNXFORGE_FUZZ_GRAPHS=$n ONNXFORGE_FUZZ_SEED=$s "$BIN" --gtest_filter='Fuzz*' > /tmp/fuzz_soak_$s.log 2>&1; then
    echo "FAIL in seeds [$s, $((s + n))): see /tmp/fuzz_soak_$s.log"
    grep -E "seed [0-9]+" /tmp/fuzz_soak_$s.log | head -5
    exit 1
  fi
  echo "ok seeds [$s, $((s + n)))"
done
