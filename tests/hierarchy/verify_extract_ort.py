#!/usr/bin/python3
"""Cross-check `onnxforge extract` with ONNX Runtime (an independent runtime).

  onnxforge extract MODEL --module M -o SUB.onnx --expose-cuts FULL.onnx
  /usr/bin/python3 tests/hierarchy/verify_extract_ort.py FULL.onnx SUB.onnx [--seed S] [--level disabled]

Runs FULL (the source with the cut tensors as extra outputs) on deterministic inputs
(tools/peers/make_inputs.py), feeds SUB the tensors FULL computed, runs SUB, and prints the
max abs diff per SUB output as JSON. Exit 0 only when every diff is exactly 0.
"""
import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx

REPO = Path(__file__).resolve().parents[2]


def stem(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(map(str, cmd))}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("full", type=Path)
    ap.add_argument("sub", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--level", default="disabled")
    a = ap.parse_args()
    sub = onnx.load(str(a.sub), load_external_data=False).graph
    tmp = Path(tempfile.mkdtemp(prefix="verify_extract_"))
    try:
        ins, full_out, sub_in, sub_out = (tmp / d for d in ("in", "full", "sub_in", "sub_out"))
        run(["/usr/bin/python3", str(REPO / "tools/peers/make_inputs.py"), str(a.full), "--out", str(ins),
             "--seed", str(a.seed)])
        ort = ["node", str(REPO / "tools/peers/ort.js"), "run"]
        run(ort + [str(a.full), "--inputs", str(ins), "--out", str(full_out), "--level", a.level, "--threads", "1"])
        sub_in.mkdir()
        initializers = {t.name for t in sub.initializer}
        for v in sub.input:
            if v.name in initializers:
                continue
            src = full_out / (stem(v.name) + ".npy")
            if not src.exists():
                src = ins / (stem(v.name) + ".npy")
            shutil.copy(src, sub_in / (stem(v.name) + ".npy"))
        run(ort + [str(a.sub), "--inputs", str(sub_in), "--out", str(sub_out), "--level", a.level, "--threads", "1"])
        result = {}
        for v in sub.output:
            want = np.load(full_out / (stem(v.name) + ".npy"))
            got = np.load(sub_out / (stem(v.name) + ".npy"))
            if want.shape != got.shape or want.dtype != got.dtype:
                result[v.name] = "shape/dtype mismatch"
                continue
            diff = np.abs(want.astype(np.float64) - got.astype(np.float64))
            result[v.name] = float(diff.max()) if diff.size else 0.0
        ok = all(isinstance(d, float) and d == 0.0 for d in result.values())
        print(json.dumps({"ok": ok, "max_diff": result}, indent=1))
        return 0 if ok else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
