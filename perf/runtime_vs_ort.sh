#!/bin/bash
# Whole-model latency of onnxforge's runtime vs ONNX Runtime (npm onnxruntime-node), same inputs,
# same thread count, runs interleaved in rounds so machine load hits both alike; then peak RSS
# of `onnxforge run` and the time of `verify --seeds 20` vs ORT's 40 runs.
#
#   perf/runtime_vs_ort.sh [BUILD_DIR] [MODEL...]     (default: build-rt, the zoo's perf models)
#   THREADS=2 ROUNDS=3 ITERS=10 perf/runtime_vs_ort.sh
set -euo pipefail
source "$(dirname "$0")/common.sh"
vs_ort_setup "${1:-$REPO/build-rt}"
shift || true
ITERS=${ITERS:-10}
ZOO=$REPO/.cache/models
MODELS=("$@")
if [ ${#MODELS[@]} -eq 0 ]; then
  for m in bert_base resnet50 llama_small whisper_tiny_enc; do
    [ -f "$ZOO/$m.onnx" ] && MODELS+=("$ZOO/$m.onnx") || echo "skip $m: $ZOO/$m.onnx missing (tools/models/export_zoo.py --only $m)" >&2
  done
fi
TMP=$(mktemp -d /tmp/onnxforge_rt_perf.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

printf "%-22s %12s %12s %8s\n" model "onnxforge ms" "ORT ms" ratio
for model in "${MODELS[@]}"; do
  name=$(basename "$model" .onnx)
  "$BIN" run "$model" --save-inputs "$TMP/$name" --json > /dev/null
  ours=(); theirs=()
  for r in $(seq "$ROUNDS"); do
    ours+=("$("$BIN" bench "$model" --threads "$THREADS" --iters "$ITERS" --warmup 2 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["median_ms"])')")
    theirs+=("$($ORT bench "$model" --inputs "$TMP/$name" --threads "$THREADS" --iters "$ITERS" --warmup 2 | python3 -c 'import json,sys; print(json.load(sys.stdin)["median_ms"])')")
  done
  a=$(median "${ours[@]}"); b=$(median "${theirs[@]}")
  printf "%-22s %12s %12s %8.2f\n" "$name" "$a" "$b" "$(python3 -c "print($a / $b)")"
done

# Peak RSS of `run` on BERT-base against the file size.
bert=$ZOO/bert_base.onnx
if [ -f "$bert" ]; then
  rss=$(/usr/bin/time -f %M "$BIN" run "$bert" 2>&1 >/dev/null | tail -1)
  size=$(stat -c %s "$bert")
  echo "peak RSS of run on bert_base: $((rss / 1024)) MiB (file $((size / 1048576)) MiB, budget file + 200 MiB)"
  t0=$(date +%s.%N)
  "$BIN" verify "$bert" "$bert" --seeds 20 > /dev/null
  t1=$(date +%s.%N)
  "$BIN" run "$bert" --save-inputs "$TMP/bert_verify" --json > /dev/null
  t2=$(date +%s.%N)
  $ORT bench "$bert" --inputs "$TMP/bert_verify" --threads "$(nproc)" --iters 40 --warmup 0 > /dev/null
  t3=$(date +%s.%N)
  python3 -c "print('verify --seeds 20 on bert_base vs itself: %.1f s; ORT 40 runs (incl. session load): %.1f s' % ($t1 - $t0, $t3 - $t2))"
fi
