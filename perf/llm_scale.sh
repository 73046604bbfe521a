#!/usr/bin/env bash
# Issue 13's TinyLlama-1.1B targets, every figure with its peer from the same run:
#   1. nodes after `optimize --target-opset 23` (≤ 420) and the fusion census (none missed);
#   2. `optimize --target-opset 23 --no-verify` against `cp -r` of the model's files, alternating
#      run by run (≤ 2× cp -r, peak RSS ≤ half the model);
#   3. the same with the default verification (≤ 6× cp -r, peak RSS ≤ the model);
#   4. `audit` (≤ 0.5 s, ≤ 64 MiB peak RSS);
#   5. with ORT=1: ONNX Runtime 1.30 loads the fused output, agrees with the original within
#      1e-4 + 1e-3·|ref| (tests/passes/ort_agree.py), and runs it no slower (level all, 2 threads,
#      original and fused alternating).
# Peak RSS is the kernel's high-water mark; anonymous and file-backed RSS are sampled apart
# (perf/rss_peak.py): mapped weight pages are file-backed, packed weights and copies anonymous.
#
#   perf/llm_scale.sh MODEL [runs=3]        e.g. .cache/models/tinyllama_1b/tinyllama/model.onnx
#   ORT=1 SEQ=32 ITERS=3 perf/llm_scale.sh MODEL 3
set -euo pipefail
source "$(dirname "$0")/common.sh"
model=$(realpath "$1")
runs=${2:-3}
BIN=${BIN:-$REPO/build/onnxforge}
SEQ=${SEQ:-32}
ITERS=${ITERS:-3}
src_dir=$(dirname "$model")
work=$(mktemp -d "${TMPDIR:-/tmp}/onnxforge_llm.XXXXXX")
trap 'rm -rf "$work"' EXIT
peak() { "$REPO/perf/rss_peak.py" --json -- "$@" 2> "$work/peak.json" > "$work/peak.out" || { cat "$work/peak.out"; return 1; }
         tail -1 "$work/peak.json"; }  # rss_peak's JSON is its last stderr line
field() { /usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
maxof() { /usr/bin/python3 -c 'import sys; print(max(float(x) for x in sys.argv[1:]))' "$@"; }
now() { date +%s.%N; }

# The model's own files, gathered (hard links, no data copied) into one folder for `cp -r`.
mkdir "$work/src"
ln "$model" "$work/src/"
"$BIN" inspect --json "$model" | /usr/bin/python3 -c 'import json,sys; [print(f) for f in json.load(sys.stdin)["external_files"]]' |
  while read -r f; do ln "$src_dir/$f" "$work/src/"; done
bytes=$(cat "$work/src"/* | wc -c)
mib=$((bytes / 1048576))
echo "model=$model bytes=$bytes ($mib MiB) files=$(ls "$work/src" | wc -l) runs=$runs load=$(cut -d' ' -f1-3 /proc/loadavg)"
cat "$work/src"/* > /dev/null  # every variant starts from a warm page cache

# 1. nodes and census
mkdir -p "$work/fused"
"$BIN" optimize "$model" -o "$work/fused/model.onnx" --target-opset 23 --no-verify > "$work/opt.txt" 2>&1 || { cat "$work/opt.txt"; exit 1; }
grep -m1 -- '->' "$work/opt.txt"
nodes=$(grep -oP 'nodes [0-9]+ -> \K[0-9]+' "$work/opt.txt")
"$BIN" audit --json "$model" > "$work/audit.json"
/usr/bin/python3 - "$work/audit.json" <<'EOF'
import json, sys
a = json.load(open(sys.argv[1]))[0]
for c in a["census"]:
    if c["found"]:
        print(f"census {c['op']:20} found {c['found']:4} here {c['fusable_here']:4} after upgrade "
              f"{c['fusable_after_upgrade']:4} missed {sum(c['missed'].values()) if c['missed'] else 0} {c['missed'] or ''}")
EOF
"$BIN" inspect "$work/fused/model.onnx" | sed -n '/^operators/,/^$/p' | head -30
echo "nodes after --target-opset 23: $nodes (target ≤ 420)"

# 2 + 3. optimize against cp -r, alternating
declare -A T R A F
for v in cp noverify verify; do T[$v]=""; R[$v]=""; A[$v]=""; F[$v]=""; done
for ((i = 0; i < runs; i++)); do
  t0=$(now); cp -r "$work/src" "$work/cp"; sync -f "$work/cp" 2>/dev/null || true; t1=$(now)
  T[cp]+=" $(echo "$t1 - $t0" | bc)"; rm -rf "$work/cp"
  for v in noverify verify; do
    flags=(--target-opset 23); [ $v = noverify ] && flags+=(--no-verify)
    rm -rf "$work/of"; mkdir -p "$work/of"
    t0=$(now); j=$(peak "$BIN" optimize "$model" -o "$work/of/model.onnx" "${flags[@]}")
    sync -f "$work/of" 2>/dev/null || true; t1=$(now)
    [ $v = verify ] && grep -m1 '^verified' "$work/peak.out" | sed "s/^/  run $i: /"
    T[$v]+=" $(echo "$t1 - $t0" | bc)"; R[$v]+=" $(field "$j" peak_rss_mib)"
    A[$v]+=" $(field "$j" peak_anon_mib)"; F[$v]+=" $(field "$j" peak_file_mib)"
  done
  rm -rf "$work/of"
done
cp_m=$(median ${T[cp]})
echo "cp -r of the model's files: median ${cp_m} s (runs:${T[cp]})"
for v in noverify verify; do
  m=$(median ${T[$v]}); goal=2; rss_goal=$((mib / 2)); [ $v = verify ] && goal=6 && rss_goal=$mib
  echo "optimize --target-opset 23 ($v): median $m s = $(echo "scale=2; $m / $cp_m" | bc)× cp -r (goal ≤ ${goal}×);" \
       "peak RSS max $(maxof ${R[$v]}) MiB (goal ≤ $rss_goal MiB; runs:${R[$v]}), sampled anon max $(maxof ${A[$v]})," \
       "file max $(maxof ${F[$v]}) MiB"
done

# 4. audit
at=(); ar=()
for ((i = 0; i < 5; i++)); do
  j=$(peak "$BIN" audit "$model"); at+=("$(field "$j" wall_s)"); ar+=("$(field "$j" peak_rss_mib)")
done
echo "audit: median $(median "${at[@]}") s (goal ≤ 0.5), peak RSS max $(maxof "${ar[@]}") MiB (goal ≤ 64)"

# 5. ONNX Runtime on the fused output
if [ "${ORT:-0}" = 1 ]; then
  ORTJS="node $REPO/tools/peers/ort.js"
  if /usr/bin/python3 "$REPO/tests/passes/ort_agree.py" "$model" "$work/fused/model.onnx" --dim sequence=$SEQ --dim batch=1 \
      > "$work/agree.json" 2>&1; then echo "ORT agrees: $(tail -c 400 "$work/agree.json")"; else echo "ORT agree FAILED: $(tail -c 800 "$work/agree.json")"; fi
  /usr/bin/python3 "$REPO/tools/peers/make_inputs.py" "$model" --out "$work/in" --dim sequence=$SEQ --dim batch=1 > /dev/null
  ms() { /usr/bin/python3 -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])[sys.argv[1]])' "$1"; }
  a=(); b=(); la=(); lb=()
  for ((i = 0; i < runs; i++)); do
    out=$($ORTJS bench "$model" --inputs "$work/in" --threads 2 --iters "$ITERS" --warmup 1)
    a+=("$(echo "$out" | ms median_ms)"); la+=("$(echo "$out" | ms load_ms)")
    out=$($ORTJS bench "$work/fused/model.onnx" --inputs "$work/in" --threads 2 --iters "$ITERS" --warmup 1)
    b+=("$(echo "$out" | ms median_ms)"); lb+=("$(echo "$out" | ms load_ms)")
  done
  A_=$(median "${a[@]}"); B_=$(median "${b[@]}")
  echo "ORT level all, 2 threads, seq $SEQ: original $A_ ms (runs ${a[*]}), fused $B_ ms (runs ${b[*]})," \
       "fused/original $(echo "scale=3; $B_ / $A_" | bc); session load original $(median "${la[@]}") ms, fused $(median "${lb[@]}") ms"
fi
