#!/usr/bin/python3
"""Run ORIGINAL and FUSED in ONNX Runtime 1.30 (tools/peers, level all, 2 threads) on the same
deterministic inputs (tools/peers/make_inputs.py) and check every output agrees within
1e-4 + 1e-3*|ref| (the issue's criterion for fused models).

  /usr/bin/python3 tests/passes/ort_agree.py ORIGINAL FUSED [--dim name=N ...] [--seed S] [--pad N] [--float16]

--pad N zeroes the last N positions of an `attention_mask` input (padding, so the masks matter).
--float16: the models compute in float16 (tools/models/to_fp16.py), where a fusion removes
roundings of 2^-11 of its operands: every element is judged as onnxforge's verification judges
such a model (runtime/verify.cpp, kLowPrecisionUlps), within 1e-4 + 8 float16 ulps (8 * 2^-10)
of the output's largest |ref| (floor 1).
Prints one JSON object; exit 0 when every output agrees, 1 when one does not, 2 on errors.
"""
import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
PEERS = REPO / "tools" / "peers"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("original")
    ap.add_argument("fused")
    ap.add_argument("--dim", action="append", default=[])
    ap.add_argument("--seed", default="0")
    ap.add_argument("--pad", type=int, default=0)
    ap.add_argument("--float16", action="store_true")
    a = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="ort_agree"))
    try:
        return compare(a, d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def compare(a, d):
    cmd = ["/usr/bin/python3", str(PEERS / "make_inputs.py"), a.original, "--out", str(d / "in"), "--seed", a.seed]
    for x in a.dim:
        cmd += ["--dim", x]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        print(json.dumps({"ok": False, "error": r.stderr[-500:]}))
        return 2
    mask = d / "in" / "attention_mask.npy"
    if a.pad and mask.exists():
        m = np.load(mask)
        m[..., m.shape[-1] - a.pad:] = 0
        np.save(mask, m)
    for tag, model in (("original", a.original), ("fused", a.fused)):
        r = subprocess.run(["node", str(PEERS / "ort.js"), "run", model, "--inputs", str(d / "in"), "--out",
                            str(d / tag), "--threads", "2"], capture_output=True, text=True)
        try:
            j = json.loads(r.stdout)
        except json.JSONDecodeError:
            j = {"ok": False, "error": (r.stdout + r.stderr)[-500:]}
        if not j.get("ok", False):
            print(json.dumps({"ok": False, "model": tag, "error": str(j.get("error"))[:500]}))
            return 2
    out, ok = {}, True
    for f in sorted((d / "original").iterdir()):
        x = np.load(f).astype(np.float64)
        y = np.load(d / "fused" / f.name).astype(np.float64)
        same = x.shape == y.shape
        diff = float(np.abs(x - y).max()) if same and x.size else 0.0
        if a.float16:
            scale = max(1.0, float(np.abs(x).max()) if x.size else 1.0)
            bound = 1e-4 + 8 * 2.0 ** -10 * scale
        else:
            bound = 1e-4 + 1e-3 * np.abs(x)
        good = same and bool(np.all(np.abs(x - y) <= bound))
        ok &= good
        out[f.stem] = {"max_abs": diff, "ok": good}
    print(json.dumps({"ok": ok, "outputs": out}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
