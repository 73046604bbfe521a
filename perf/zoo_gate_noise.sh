#!/usr/bin/env bash
# How often `zoo report --baseline`'s latency gate is right on a busy machine (docs/zoo.md
# "Regression gate"). A baseline run of a few small zoo models plus a toy model, then, with two
# busy loops on the cores (what `stress -c 2` does):
#   - TRIES equivalent reruns (`zoo run --baseline`, then `zoo report --baseline`, default
#     threshold): each must pass;
#   - TRIES reruns where the toy model keeps its extra ops (eliminate_redundant_transposes skipped
#     for it: its optimized model still has the cancelling Transpose pairs, about 30% of its time):
#     each must fail with that model flagged "slower".
#   perf/zoo_gate_noise.sh [BUILD_DIR] [TRIES]     (environment: MODELS, BUSY=2, BENCH_TIME=1)
# Prints the counts and the toy's measured slowdown; the work is left in $OUT (default a temp dir).
set -euo pipefail
source "$(dirname "$0")/common.sh"
build=$(cd "${1:-$REPO/build}" && pwd)
tries=${2:-20}
exe=$build/onnxforge
models_dir=${ONNXFORGE_MODEL_DIR:-$REPO/.cache/models}
MODELS=${MODELS:-"mobilenet_v3_small distilbert_small bert_small llama_small"}
out=${OUT:-$(mktemp -d /tmp/zoo-gate-noise.XXXXXX)}
mkdir -p "$out"

# The toy: Y = Tanh(X·W) repeated, and after each layer PAIRS Transpose pairs that cancel.
/usr/bin/python3 - "$out/transposes.onnx" "${PAIRS:-3}" <<'PY'
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
path, pairs = sys.argv[1], int(sys.argv[2])
n, layers = 256, 4
rng = np.random.default_rng(0)
nodes, inits, cur = [], [], "x"
for i in range(layers):
    inits.append(numpy_helper.from_array((rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32), f"w{i}"))
    nodes += [helper.make_node("MatMul", [cur, f"w{i}"], [f"m{i}"]), helper.make_node("Tanh", [f"m{i}"], [f"t{i}_0"])]
    cur = f"t{i}_0"
    for p in range(pairs):
        nodes += [helper.make_node("Transpose", [cur], [f"t{i}_{p}a"], perm=[1, 0]),
                  helper.make_node("Transpose", [f"t{i}_{p}a"], [f"t{i}_{p + 1}"], perm=[1, 0])]
        cur = f"t{i}_{p + 1}"
g = helper.make_graph(nodes, "transposes", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, n])],
                      [helper.make_tensor_value_info(cur, TensorProto.FLOAT, [n, n])], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
PY
manifest() {  # $1: file, $2: "skip" for the regressed variant
  /usr/bin/python3 - "$1" "$2" "$models_dir" "$out/transposes.onnx" $MODELS <<'PY'
import json, sys
path, variant, mdir, toy, *names = sys.argv[1:]
toy_entry = {"path": toy}
if variant == "skip":
    toy_entry["skip"] = ["eliminate_redundant_transposes"]
json.dump({"models": [toy_entry] + [{"path": f"{mdir}/{n}.onnx"} for n in names]}, open(path, "w"))
PY
}
manifest "$out/same.json" same
manifest "$out/slow.json" skip
run=(zoo run --jobs 2 --no-attribute --bench-time "${BENCH_TIME:-1}")  # 2 jobs x 1 thread, as CI runs the gate

echo "zoo-gate-noise: $(uptime)"
rm -rf "$out/base"
"$exe" "${run[@]}" "$out/same.json" -o "$out/base" >"$out/base.log" 2>&1
"$exe" zoo report "$out/base" >/dev/null
/usr/bin/python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print("zoo-gate-noise: baseline spread", s.get("latency_spread"))' "$out/base/summary.json"

busy=()
stop_busy() { for p in "${busy[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap stop_busy EXIT
for _ in $(seq "${BUSY:-2}"); do
  (while :; do :; done) &
  busy+=($!)
done
echo "zoo-gate-noise: ${#busy[@]} busy loops; $(uptime)"

pass_same=0 caught=0
ratios=()
for i in $(seq "$tries"); do
  for variant in same slow; do
    d=$out/$variant$i
    rm -rf "$d"
    "$exe" "${run[@]}" "$out/$variant.json" -o "$d" --baseline "$out/base" >"$d.log" 2>&1 || true
    rc=0
    "$exe" zoo report "$d" --baseline "$out/base" >"$d.md" || rc=$?
    if [ "$variant" = same ]; then
      [ "$rc" = 0 ] && pass_same=$((pass_same + 1)) || { echo "zoo-gate-noise: equivalent rerun $i flagged:"; sed -n '/Regressions against/,$p' "$d.md"; }
    else
      if [ "$rc" = 1 ] && grep -q "^| transposes | slower" "$d.md"; then caught=$((caught + 1)); else echo "zoo-gate-noise: slowdown $i missed (exit $rc)"; fi
      ratios+=("$(/usr/bin/python3 -c 'import json,sys; a,b=(json.load(open(p+"/results/transposes.json"))["summary"]["latency_ratio"] for p in sys.argv[1:3]); print(a/b)' "$d" "$out/base")")
    fi
  done
  echo "zoo-gate-noise: try $i: equivalent passed $pass_same/$i, slowdown caught $caught/$i; $(uptime | sed 's/.*load/load/')"
done
echo "zoo-gate-noise: equivalent reruns passed the default gate in $pass_same of $tries; the slowed toy was caught in $caught of $tries"
echo "zoo-gate-noise: the toy's slowdown (after/before ratio, slowed run over baseline): median $(median "${ratios[@]}")"
