#!/usr/bin/env bash
# tests/package/check_wheel.sh WHEEL MODEL: installs the wheel with pip into a fresh venv of
# Debian's python3 (--system-site-packages for numpy; no index, nothing downloaded) and checks,
# from a folder outside the source and build trees: `import onnxforge` comes from the venv, the
# `onnxforge` console command works, and `python -m onnxforge zoo run` starts its steps with the
# native program shipped in the wheel — never a file of the current folder.
set -euo pipefail
wheel=$(realpath "$1")
model=$(realpath "$2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

/usr/bin/python3 -m venv --system-site-packages "$work/venv"
"$work/venv/bin/pip" install --no-index --no-deps --quiet "$wheel"
cd "$work"
# What an interpreter or PATH's "." would run if the module took the wrong program.
echo "open('$work/EXECUTED', 'w')" >inspect
printf '#!/bin/sh\ntouch %s/EXECUTED\n' "$work" >onnxforge && chmod +x onnxforge

"$work/venv/bin/onnxforge" --version
"$work/venv/bin/onnxforge" optimize "$model" -o "$work/cli.onnx" --verify-seeds 2 >/dev/null
"$work/venv/bin/python" - "$model" "$work/venv" <<'PY'
import sys, onnxforge
model, venv = sys.argv[1], sys.argv[2]
assert onnxforge.__file__.startswith(venv), onnxforge.__file__
out, report = onnxforge.optimize(open(model, "rb").read(), seeds=2)
assert report.verdict == "pass" and report.nodes_after < report.nodes_before, report
print(f"check_wheel: import onnxforge {onnxforge.__version__} from {onnxforge.__file__}: "
      f"nodes {report.nodes_before} -> {report.nodes_after}")
PY
PATH=".:$PATH" "$work/venv/bin/python" -m onnxforge zoo run "$model" -o "$work/zoo" --no-attribute --bench-iters 2 2>"$work/zoo.log" ||
  { cat "$work/zoo.log" >&2; exit 1; }
[ ! -e "$work/EXECUTED" ] || { echo "check_wheel: a file of the current folder was run" >&2; exit 1; }
grep -q '"status": "ok"' "$work"/zoo/results/*.json
echo "check_wheel: $(basename "$wheel"): pip install, import, the onnxforge command and zoo run work"
