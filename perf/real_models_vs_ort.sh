#!/bin/bash
# Whole-model latency on real-world models shipped in npm packages (issue 18: segmentation with
# float16 activations, OCR detection/recognition/classification, silero VAD's LSTM inside nested
# If bodies, openWakeWord's mel front end, speech embedding and wake-word heads) vs ONNX Runtime (npm
# onnxruntime-node 1.30), same inputs, same threads, the two alternating in rounds so that load
# on the shared machine hits both alike. Prints per-model medians and the ratio.
#
#   perf/real_models_vs_ort.sh [BUILD_DIR]                 (default: build)
#   THREADS=2 ROUNDS=3 ITERS=5 MODELS="ppocr_det isnet_fp16" perf/real_models_vs_ort.sh
#   BASE_BIN=/path/to/old/onnxforge ... perf/real_models_vs_ort.sh build
#     also times a baseline binary in every round (base, ours, ORT back to back) and prints
#     its median and the median of the per-round ours/base ratios
#
# Models come from tools/models/fetch_real_models.sh (run here if one is missing) into
# .cache/real_models. isnet_quint8 (ConvInteger + DynamicQuantizeLinear, ~3.4 s a run under load)
# is in the default list: its integer convs run fast enough for a round (docs/benchmarks.md).
set -euo pipefail
source "$(dirname "$0")/common.sh"
vs_ort_setup "${1:-$REPO/build}"
ITERS=${ITERS:-5}
DIR=${REAL_MODELS:-$REPO/.cache/real_models}
MODELS=(${MODELS:-ppocr_det ppocr_rec ppocr_cls isnet_fp16 isnet_quint8 silero_vad_v5 oww_melspectrogram oww_embedding oww_hey_jarvis oww_alexa})
PY=/usr/bin/python3

# Symbolic dimensions of each model's input: the sizes the packages' own pipelines feed.
dims_of() {
  case "$1" in
    ppocr_det) echo "--dim p2o.DynamicDimension.0=1 --dim p2o.DynamicDimension.1=640 --dim p2o.DynamicDimension.2=640" ;;
    ppocr_rec) echo "--dim p2o.DynamicDimension.0=1 --dim p2o.DynamicDimension.1=320" ;;
    ppocr_cls) echo "--dim p2o.DynamicDimension.0=1 --dim p2o.DynamicDimension.1=48 --dim p2o.DynamicDimension.2=192" ;;
    oww_melspectrogram) echo "--dim batch_size=1 --dim samples=1280" ;;
    oww_embedding) echo "--dim unk__314=1" ;;
    *) echo "" ;;
  esac
}

# Iterations per round: a 0.2 ms model needs many for a stable median.
iters_of() {
  case "$1" in
    silero_vad_v5 | oww_*) echo "${ITERS_SMALL:-2000}" ;;
    *) echo "$ITERS" ;;
  esac
}

# Models whose inputs must hold particular values write them into DIR and print our --input
# flags (silero: a 512-sample frame at 16 kHz, the sr input selecting the 16 kHz branch, and a
# zero LSTM state as at the start of a stream); others print nothing.
given_inputs() {
  local m=$1 dir=$2
  case "$m" in
    silero_vad_v5)
      mkdir -p "$dir"
      $PY -c "
import numpy as np, sys
d = sys.argv[1]
np.save(d + '/input.npy', (np.random.default_rng(0).standard_normal((1, 512)) * 0.1).astype(np.float32))
np.save(d + '/state.npy', np.zeros((2, 1, 128), np.float32))
np.save(d + '/sr.npy', np.array(16000, np.int64))" "$dir"
      echo "--input input=$dir/input.npy --input state=$dir/state.npy --input sr=$dir/sr.npy" ;;
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

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, threads $THREADS, rounds $ROUNDS x $ITERS iterations (silero_vad_v5, oww_*: ${ITERS_SMALL:-2000})"
if [ -n "${BASE_BIN:-}" ]; then
  printf "%-14s %10s %14s %12s %8s %8s %12s\n" model "base ms" "onnxforge ms" "ORT ms" ratio base/ORT "paired new/base"
else
  printf "%-14s %14s %12s %8s\n" model "onnxforge ms" "ORT ms" ratio
fi
for m in "${MODELS[@]}"; do
  model=$DIR/$m.onnx
  given=$(given_inputs "$m" "$TMP/$m")
  iters=$(iters_of "$m")
  # shellcheck disable=SC2046,SC2086
  "$BIN" run "$model" $(dims_of "$m") $given --save-inputs "$TMP/$m" --json > /dev/null
  ours=(); theirs=(); base=(); paired=()
  for _ in $(seq "$ROUNDS"); do
    if [ -n "${BASE_BIN:-}" ]; then
      # shellcheck disable=SC2046,SC2086
      base+=("$("$BASE_BIN" bench "$model" $(dims_of "$m") $given --threads "$THREADS" --iters "$iters" --warmup 1 --json |
               $PY -c 'import json,sys; print(json.load(sys.stdin)["median_ms"])')")
    fi
    # shellcheck disable=SC2046,SC2086
    ours+=("$("$BIN" bench "$model" $(dims_of "$m") $given --threads "$THREADS" --iters "$iters" --warmup 1 --json |
             $PY -c 'import json,sys; print(json.load(sys.stdin)["median_ms"])')")
    theirs+=("$($ORT bench "$model" --inputs "$TMP/$m" --threads "$THREADS" --iters "$iters" --warmup 1 |
               $PY -c 'import json,sys; print(json.load(sys.stdin)["median_ms"])')")
  done
  a=$(median "${ours[@]}"); b=$(median "${theirs[@]}")
  if [ -n "${BASE_BIN:-}" ]; then
    for i in "${!ours[@]}"; do paired+=("$($PY -c "print(${ours[$i]} / ${base[$i]})")"); done
    c=$(median "${base[@]}")
    printf "%-14s %10s %14s %12s %8.2f %8.2f %12s\n" "$m" "$c" "$a" "$b" "$($PY -c "print($a / $b)")" \
      "$($PY -c "print($c / $b)")" "$(median "${paired[@]}")"
  else
    printf "%-14s %14s %12s %8.2f\n" "$m" "$a" "$b" "$($PY -c "print($a / $b)")"
  fi
done
