#!/usr/bin/env bash
# A refactor's proof that optimize's outputs did not change: every model of the small zoo
# optimized by two binaries (the default pipeline and --target-opset 23, --no-verify), exit
# codes compared, outputs compared byte for byte and, where the bytes differ, modulo value and
# node names (tools/structural_diff.py).
#   tools/ab_outputs.sh OLD_BINARY NEW_BINARY [MODEL_DIR] [WORK_DIR]
# Prints one line per model and configuration ("identical", "equal modulo names" or the first
# difference), then "N of N equal, M byte-identical"; exit 1 when any differs beyond names.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OLD=${1:?old binary}
NEW=${2:?new binary}
DIR=${3:-$ROOT/.cache/models}
WORK=${4:-$(mktemp -d /tmp/ab_outputs.XXXXXX)}
mkdir -p "$WORK"
models=$(/usr/bin/python3 -c 'import json,sys; z=json.load(open(sys.argv[1]))["models"]
print("\n".join(sorted(v["file"] for v in z.values() if "small" in v.get("sets", []))))' "$DIR/zoo.json")
total=0
equal=0
identical=0
for f in $models; do
  name=${f%.onnx}
  for cfg in default opset23; do
    args=(--no-verify --overwrite)
    [ "$cfg" = opset23 ] && args+=(--target-opset 23)
    "$OLD" optimize "$DIR/$f" -o "$WORK/$name.$cfg.old.onnx" "${args[@]}" >/dev/null 2>"$WORK/$name.$cfg.old.err"
    rc_old=$?
    "$NEW" optimize "$DIR/$f" -o "$WORK/$name.$cfg.new.onnx" "${args[@]}" >/dev/null 2>"$WORK/$name.$cfg.new.err"
    rc_new=$?
    total=$((total + 1))
    if [ "$rc_old" != "$rc_new" ]; then
      result="exit codes differ: $rc_old vs $rc_new"
    elif [ "$rc_old" != 0 ]; then
      result="equal (both exit $rc_old)"
    elif cmp -s "$WORK/$name.$cfg.old.onnx" "$WORK/$name.$cfg.new.onnx"; then
      result="identical"
      identical=$((identical + 1))
    else
      result=$(/usr/bin/python3 "$ROOT/tools/structural_diff.py" "$WORK/$name.$cfg.old.onnx" "$WORK/$name.$cfg.new.onnx")
      [[ "$result" == equal* ]] && result="equal modulo names"
    fi
    [[ "$result" == equal* || "$result" == identical ]] && equal=$((equal + 1))
    printf "%-28s %-8s %s\n" "$name" "$cfg" "$result"
  done
done
echo "$equal of $total equal, $identical byte-identical"
[ "$equal" = "$total" ]
