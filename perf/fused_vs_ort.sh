#!/bin/bash
# Issue 13's latency targets on the fused transformer outputs, every peer in the same run:
#   - ONNX Runtime (level all) on the original vs on `optimize --target-opset T` output;
#   - onnxforge's runtime vs ONNX Runtime on the same fused model;
#   - the fused output loads in ORT and agrees with the original within 1e-4 + 1e-3*|ref|
#     (tests/passes/ort_agree.py).
# Rounds alternate ORT-original, ORT-fused, onnxforge-fused; medians of the rounds' medians.
#
#   perf/fused_vs_ort.sh [BUILD_DIR] [MODEL:DIMS ...]   e.g. bert_base:sequence=128
#   THREADS=2 ROUNDS=3 ITERS=10 TARGET=24 ZOO=.cache/models perf/fused_vs_ort.sh build
set -euo pipefail
source "$(dirname "$0")/common.sh"
vs_ort_setup "${1:-$REPO/build}"
shift || true
ITERS=${ITERS:-10}
TARGET=${TARGET:-24}
ZOO=${ZOO:-$REPO/.cache/models}
CASES=("$@")
[ ${#CASES[@]} -eq 0 ] && CASES=(bert_base:sequence=128 gpt2:sequence=128 llama_small:sequence=128 whisper_tiny_enc:)
TMP=$(mktemp -d /tmp/onnxforge_fused.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
# ort.js prints one JSON line last; onnxforge bench --json one (multi-line) object.
ms() { /usr/bin/python3 -c 'import json,sys
t = sys.stdin.read().strip()
try: j = json.loads(t)
except ValueError: j = json.loads(t.splitlines()[-1])
print(j["median_ms"])'; }
load() { /usr/bin/python3 -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["load_ms"])'; }

printf "%-18s %6s %6s %10s %10s %8s %10s %8s %9s %9s %s\n" model nodes fused "ORT orig" "ORT fused" ratio "ours fused" "ours/ORT" "ORT load" "load fsd" agree
for c in "${CASES[@]}"; do
  name=${c%%:*}; dims=${c#*:}
  dimargs=(); pydims=()
  IFS=, read -ra ds <<< "$dims"
  for d in "${ds[@]}"; do [ -n "$d" ] && dimargs+=(--dim "$d") && pydims+=(--dim "$d"); done
  orig=$ZOO/$name.onnx
  fused=$TMP/$name.onnx
  "$BIN" optimize "$orig" -o "$fused" --target-opset "$TARGET" > "$TMP/$name.opt" 2>&1
  n0=$(grep -oP 'nodes \K[0-9]+(?= ->)' "$TMP/$name.opt"); n1=$(grep -oP 'nodes [0-9]+ -> \K[0-9]+' "$TMP/$name.opt")
  agree=$(/usr/bin/python3 "$REPO/tests/passes/ort_agree.py" "$orig" "$fused" "${pydims[@]}" > "$TMP/$name.agree" 2>&1 && echo yes || echo NO)
  /usr/bin/python3 "$REPO/tools/peers/make_inputs.py" "$orig" --out "$TMP/in_$name" "${pydims[@]}" > /dev/null
  a=(); b=(); o=(); la=(); lb=()
  for r in $(seq "$ROUNDS"); do
    out=$($ORT bench "$orig" --inputs "$TMP/in_$name" --threads "$THREADS" --iters "$ITERS" --warmup 2)
    a+=("$(echo "$out" | ms)"); la+=("$(echo "$out" | load)")
    out=$($ORT bench "$fused" --inputs "$TMP/in_$name" --threads "$THREADS" --iters "$ITERS" --warmup 2)
    b+=("$(echo "$out" | ms)"); lb+=("$(echo "$out" | load)")
    o+=("$("$BIN" bench "$fused" --threads "$THREADS" --iters "$ITERS" --warmup 2 "${dimargs[@]}" --json | ms)")
  done
  A=$(median "${a[@]}"); B=$(median "${b[@]}"); O=$(median "${o[@]}"); LA=$(median "${la[@]}"); LB=$(median "${lb[@]}")
  printf "%-18s %6s %6s %10s %10s %8.2f %10s %8.2f %9s %9s %s\n" "$name" "$n0" "$n1" "$A" "$B" \
    "$(/usr/bin/python3 -c "print($B / $A)")" "$O" "$(/usr/bin/python3 -c "print($O / $B)")" "$LA" "$LB" "$agree"
done
