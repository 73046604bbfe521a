#!/usr/bin/env bash
# Load + save (unchanged) of a model with onnxforge against `cp -r` of the files it consists of
# (the .onnx and its external-data files), alternating run by run; prints medians, the ratio and
# onnxforge's peak RSS. CMD picks the onnxforge command (default `convert`: load + save).
#   perf/io_vs_cp.sh .cache/models/tinyllama/model.onnx [runs=3]
#   CMD="optimize --no-verify" perf/io_vs_cp.sh .cache/models/tinyllama/model.onnx 5
set -euo pipefail
model=$(realpath "$1")
runs=${2:-3}
read -r -a cmd <<< "${CMD:-convert}"
bin=$(dirname "$0")/../build/onnxforge
src_dir=$(dirname "$model")
work=$(mktemp -d "${TMPDIR:-/tmp}/onnxforge_io.XXXXXX")
trap 'rm -rf "$work"' EXIT
# The model's own files, gathered (as hard links, no data copied) into one folder for `cp -r`.
mkdir "$work/src"
ln "$model" "$work/src/"
"$bin" inspect --json "$model" | /usr/bin/python3 -c 'import json,sys; [print(f) for f in json.load(sys.stdin)["external_files"]]' |
  while read -r f; do ln "$src_dir/$f" "$work/src/"; done
cat "$work/src"/* > /dev/null  # both start from a warm page cache

now() { date +%s.%N; }
cp_times=() ; of_times=() ; rss=()
for ((i = 0; i < runs; i++)); do
  t0=$(now); cp -r "$work/src" "$work/cp"; sync -f "$work/cp" 2>/dev/null || true; t1=$(now)
  cp_times+=("$(echo "$t1 - $t0" | bc)"); rm -rf "$work/cp"
  mkdir -p "$work/of"
  t0=$(now)
  /usr/bin/time -f "%M" -o "$work/rss" "$bin" "${cmd[@]}" "$model" -o "$work/of/model.onnx" 2>/dev/null
  sync -f "$work/of" 2>/dev/null || true; t1=$(now)
  of_times+=("$(echo "$t1 - $t0" | bc)"); rss+=("$(cat "$work/rss")"); rm -rf "$work/of"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
cp_m=$(median "${cp_times[@]}"); of_m=$(median "${of_times[@]}"); rss_m=$(median "${rss[@]}")
size=$(du -sbL "$work/src" | cut -f1)
echo "model=$model bytes=$size runs=$runs"
echo "cp -r median:            ${cp_m} s"
echo "onnxforge ${cmd[*]}:     ${of_m} s  (ratio $(echo "scale=2; $of_m / $cp_m" | bc)x cp -r)"
echo "onnxforge peak RSS:      $((rss_m / 1024)) MiB"
