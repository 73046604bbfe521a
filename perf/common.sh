# Sourced by the perf scripts (one copy of their set-up):
#   source "$(dirname "$0")/common.sh"; vs_ort_setup "${1:-$REPO/build}"
# REPO is the checkout; median prints the median of its arguments with 3 decimals.
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
median() { /usr/bin/python3 -c 'import sys,statistics; print("%.3f" % statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }

# The *_vs_ort.sh comparisons: onnxforge of build dir $1 against ONNX Runtime (tools/peers/ort.js),
# THREADS threads, ROUNDS interleaved rounds (environment overrides; ITERS stays per script).
vs_ort_setup() {
  BUILD=$1
  BIN=$BUILD/onnxforge
  ORT="node $REPO/tools/peers/ort.js"
  THREADS=${THREADS:-2}
  ROUNDS=${ROUNDS:-3}
}
