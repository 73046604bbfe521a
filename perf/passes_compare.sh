#!/usr/bin/env bash
# Node counts of `onnxforge optimize` vs ONNX Runtime's offline optimizer at level basic on every
# zoo model, plus a check that ORT loads and runs our output and agrees with the original.
#   perf/passes_compare.sh [ONNXFORGE_BINARY] [MODEL_DIR] [extra optimize args...]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$ROOT/build-passes/onnxforge}
DIR=${2:-$ROOT/.cache/models}
shift $(( $# > 2 ? 2 : $# )) || true
OUT=$(mktemp -d /tmp/passes_compare.XXXXXX)
printf "%-24s %8s %8s %8s %8s %9s %10s %9s\n" model original ort_basic onnxforge delta ort_loads max_diff seconds
for m in "$DIR"/*.onnx; do
  name=$(basename "$m" .onnx)
  node "$ROOT/tools/peers/ort.js" optimize "$m" -o "$OUT/$name.ort.onnx" --level basic >/dev/null 2>&1 || true
  "$BIN" optimize "$m" -o "$OUT/$name.of.onnx" --force --report "$OUT/$name.json" "$@" >/dev/null 2>"$OUT/$name.err" || true
  loads=$(node "$ROOT/tools/peers/ort.js" info "$OUT/$name.of.onnx" 2>/dev/null | /usr/bin/python3 -c 'import json,sys; print("yes" if json.load(sys.stdin).get("ok") else "NO")' 2>/dev/null || echo NO)
  /usr/bin/python3 - "$m" "$OUT/$name.ort.onnx" "$OUT/$name.of.onnx" "$name" "$loads" "$OUT/$name.json" <<'PY'
import sys, os, json
import onnx
def count(p):
    if not os.path.exists(p): return None
    return len(onnx.load(p, load_external_data=False).graph.node)
orig, ortp, ofp, name, loads, rep = sys.argv[1:]
a, b, c = count(orig), count(ortp), count(ofp)
diff, secs = "-", "-"
if os.path.exists(rep):
    r = json.load(open(rep))
    diff = r.get("verification", {}).get("max_diff", "-")
    secs = round(r["seconds"]["passes"], 3)
print(f"{name:<24} {a!s:>8} {b!s:>8} {c!s:>8} {'' if b is None or c is None else c-b!s:>8} {loads:>9} {diff!s:>10} {secs!s:>9}")
PY
done
echo "outputs in $OUT"
