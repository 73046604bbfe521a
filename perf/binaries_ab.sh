#!/usr/bin/env bash
# Two onnxforge binaries on the same models, alternating (the machine is shared and noisy):
# ROUNDS rounds of `bench --min-time SECS` per binary per model, then the median of each
# binary's per-round medians, their ratio (new/old), and the median of the per-round ratios. For refactors that must not slow the
# runtime (issue 12: "bench --vs of the old and new binaries shows no slowdown beyond noise").
#
#   perf/binaries_ab.sh OLD_BINARY NEW_BINARY MODEL[:DIM=N,...]...
#   ROUNDS=5 SECS=2 THREADS=2 perf/binaries_ab.sh BASELINE/onnxforge build/onnxforge .cache/models/bert_base.onnx
set -euo pipefail
old=$1 new=$2
shift 2
ROUNDS=${ROUNDS:-5} SECS=${SECS:-2} THREADS=${THREADS:-2}
printf '%-28s %10s %10s %8s %14s\n' model old_ms new_ms new/old "paired (range)"
for spec in "$@"; do
  model=${spec%%:*}
  dims=()
  if [[ $spec == *:* ]]; then IFS=, read -ra kv <<<"${spec#*:}"; for d in "${kv[@]}"; do dims+=(--dim "$d"); done; fi
  o=() n=()
  for ((r = 0; r < ROUNDS; ++r)); do
    o+=("$("$old" bench "$model" "${dims[@]}" --threads "$THREADS" --min-time "$SECS" --json | sed -n 's/.*"median_ms": \([0-9.e+-]*\).*/\1/p')")
    n+=("$("$new" bench "$model" "${dims[@]}" --threads "$THREADS" --min-time "$SECS" --json | sed -n 's/.*"median_ms": \([0-9.e+-]*\).*/\1/p')")
  done
  /usr/bin/python3 - "$(basename "$model")" "${o[*]}" "${n[*]}" <<'PY'
import statistics, sys
name, o, n = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
mo, mn = statistics.median(o), statistics.median(n)
# The host's speed drifts by 30% over seconds (other tenants): the ratio of each round's
# back-to-back pair is steadier than the ratio of the medians.
r = sorted(b / a for a, b in zip(o, n))
print(f"{name:28s} {mo:10.2f} {mn:10.2f} {mn / mo:8.3f} {statistics.median(r):6.3f} ({r[0]:.2f}-{r[-1]:.2f})")
PY
done
