#!/bin/bash
# Whole-model latency on real-world models shipped in npm packages (issue 18: segmentation with
# float16 activations, OCR detection/recognition/classification) vs ONNX Runtime (npm
# onnxruntime-node 1.30), same inputs, same threads, the two alternating in rounds so that load
# on the shared machine hits both alike. Prints per-model medians and the ratio.
#
#   perf/real_models_vs_ort.sh [BUILD_DIR]                 (default: build)
#   THREADS=2 ROUNDS=3 ITERS=5 MODELS="ppocr_det isnet_fp16" perf/real_models_vs_ort.sh
#
# Models come from tools/models/fetch_real_models.sh (run here if one is missing) into
# .cache/real_models. isnet_quint8 (ConvInteger + DynamicQuantizeLinear) is not in the default
# list: the int8 kernels are another branch's work (issue 18 item 3).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$REPO/build}
BIN=$BUILD/onnxforge
ORT="node $REPO/tools/peers/ort.js"
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
ITERS=${ITERS:-5}
DIR=${REAL_MODELS:-$REPO/.cache/real_models}
MODELS=(${MODELS:-ppocr_det ppocr_rec ppocr_cls isnet_fp16})
PY=/usr/bin/python3

# Symbolic dimensions of each model's input: the sizes the packages' own pipelines feed.
dims_of() {
  case "$1" in
    ppocr_det) echo "--dim p2o.DynamicDimension.0=1 --dim p2o.DynamicDimension.1=640 --dim p2o.DynamicDimension.2=640" ;;
    ppocr_rec) echo "--dim p2o.DynamicDimension.0=1 --dim p2o.DynamicDimension.1=320" ;;
    ppocr_cls) echo "--dim p2o.DynamicDimension.0=1 --dim p2o.DynamicDimension.1=48 --dim p2o.DynamicDimension.2=192" ;;
    *) echo "" ;;
  esac
}

for m in "${MODELS[@]}"; do
  if [ ! -f "$DIR/$m.onnx" ]; then
    "$REPO/tools/models/fetch_real_models.sh" "$DIR"
    break
  fi
done

TMP=$(mktemp -d /tmp/onnxforge_real_perf.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
median() { $PY -c 'import sys,statistics; print("%.2f" % statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, threads $THREADS, rounds $ROUNDS x $ITERS iterations"
printf "%-14s %14s %12s %8s\n" model "onnxforge ms" "ORT ms" ratio
for m in "${MODELS[@]}"; do
  model=$DIR/$m.onnx
  # shellcheck disable=SC2046
  "$BIN" run "$model" $(dims_of "$m") --save-inputs "$TMP/$m" --json > /dev/null
  ours=(); theirs=()
  for _ in $(seq "$ROUNDS"); do
    # shellcheck disable=SC2046
    ours+=("$("$BIN" bench "$model" $(dims_of "$m") --threads "$THREADS" --iters "$ITERS" --warmup 1 --json |
             $PY -c 'import json,sys; print(json.load(sys.stdin)["median_ms"])')")
    theirs+=("$($ORT bench "$model" --inputs "$TMP/$m" --threads "$THREADS" --iters "$ITERS" --warmup 1 |
               $PY -c 'import json,sys; print(json.load(sys.stdin)["median_ms"])')")
  done
  a=$(median "${ours[@]}"); b=$(median "${theirs[@]}")
  printf "%-14s %14s %12s %8.2f\n" "$m" "$a" "$b" "$($PY -c "print($a / $b)")"
done
