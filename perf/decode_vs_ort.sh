#!/bin/bash
# One decode step of a decoder with a KV cache (sequence 1 after a past of P tokens, batch 1):
# onnxforge's runtime vs ONNX Runtime on the same model and inputs, alternating rounds, medians,
# and the memory-bandwidth bound beside them: the bytes of weights a token reads (every
# initializer except tables only gathered from, such as the token embedding) divided by the
# machine's read bandwidth on all threads (perf/bench_stream).
#
#   perf/decode_vs_ort.sh BUILD_DIR MODEL [PAST...]       (default pasts: 127 1023)
#   THREADS=2 ROUNDS=5 ITERS=20 perf/decode_vs_ort.sh build model.onnx 127
# OLD=BINARY adds another onnxforge binary (a build before a change) to every round, with the
# median of the paired per-round ratios ours/old: an A/B in the same conditions. The load average
# is printed with each past.
set -euo pipefail
source "$(dirname "$0")/common.sh"
vs_ort_setup "${1:?BUILD_DIR}"
MODEL=${2:?MODEL}
shift 2
PASTS=("$@")
[ ${#PASTS[@]} -eq 0 ] && PASTS=(127 1023)
ITERS=${ITERS:-20}
TMP=$(mktemp -d /tmp/onnxforge_decode.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

# Weight bytes read per token, and the read bandwidth.
weights=$(/usr/bin/python3 - "$MODEL" <<'EOF'
import sys, onnx
from onnx import numpy_helper
m = onnx.load(sys.argv[1], load_external_data=False)
g = m.graph
gathered = {}  # initializer -> only read as Gather's data
for n in g.node:
    for i, x in enumerate(n.input):
        ok = n.op_type == "Gather" and i == 0
        gathered[x] = gathered.get(x, True) and ok
total = 0
for t in g.initializer:
    if gathered.get(t.name, False):
        continue
    n = 1
    for d in t.dims:
        n *= d
    total += n * {1: 4, 10: 2, 16: 2, 11: 8, 7: 8, 6: 4}.get(t.data_type, 4)
print(total)
EOF
)
stream=$BUILD/perf/bench_stream
bw=""
if [ -x "$stream" ]; then
  bw=$("$stream" --benchmark_filter="stream_read/real_time/threads:$(nproc)" --benchmark_min_time=1 --benchmark_format=json 2>/dev/null |
       /usr/bin/python3 -c 'import json,sys; b=json.load(sys.stdin)["benchmarks"]; print(b[0]["bytes_per_second"])')
fi

OLD=${OLD:-}
printf "%-8s %12s %12s %8s %14s %10s" past "onnxforge ms" "ORT ms" ratio "bound ms" "ours/bound"
[ -n "$OLD" ] && printf " %10s %9s" "old ms" "ours/old"
printf "  %s\n" load
for P in "${PASTS[@]}"; do
  T=$((P + 1))
  dims=(--dim batch=1 --dim sequence=1 --dim "past_sequence=$P" --dim "total_sequence=$T")
  rm -rf "$TMP/in"
  "$BIN" run "$MODEL" "${dims[@]}" --save-inputs "$TMP/in" --json > /dev/null
  ours=(); theirs=(); old=(); pairs=()
  for r in $(seq "$ROUNDS"); do
    ours+=("$("$BIN" bench "$MODEL" "${dims[@]}" --threads "$THREADS" --iters "$ITERS" --warmup 3 --json |
              /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["median_ms"])')")
    if [ -n "$OLD" ]; then
      old+=("$("$OLD" bench "$MODEL" "${dims[@]}" --threads "$THREADS" --iters "$ITERS" --warmup 3 --json |
               /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["median_ms"])')")
      pairs+=("$(/usr/bin/python3 -c "print(${ours[-1]} / ${old[-1]})")")
    fi
    theirs+=("$($ORT bench "$MODEL" --inputs "$TMP/in" --threads "$THREADS" --iters "$ITERS" --warmup 3 |
                /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["median_ms"])')")
  done
  a=$(median "${ours[@]}"); b=$(median "${theirs[@]}")
  bound="-"; vs="-"
  if [ -n "$bw" ]; then
    bound=$(/usr/bin/python3 -c "print(round($weights / $bw * 1e3, 2))")
    vs=$(/usr/bin/python3 -c "print(round($a / ($weights / $bw * 1e3), 2))")
  fi
  printf "%-8s %12s %12s %8.2f %14s %10s" "$P" "$a" "$b" "$(/usr/bin/python3 -c "print($a / $b)")" "$bound" "$vs"
  [ -n "$OLD" ] && printf " %10s %9s" "$(median "${old[@]}")" "$(median "${pairs[@]}")"
  printf "  %s\n" "$(cut -d' ' -f1-3 /proc/loadavg)"
done
echo "weights read per token: $((weights / 1048576)) MiB; read bandwidth (all threads): ${bw:-not measured (build perf/bench_stream)} B/s; load: $(cut -d' ' -f1-3 /proc/loadavg)"
