#!/usr/bin/python3
"""Cross-check onnxforge's runtime against ONNX Runtime on the same inputs.

  /usr/bin/python3 tests/runtime/ort_crosscheck.py ONNXFORGE_BIN MODEL... [--json]

For each model: `onnxforge run --save-inputs` writes the generated inputs and our outputs,
`node tools/peers/ort.js run` computes ORT's outputs on those inputs, and every output must
satisfy max|ours - ort| <= 1e-4 * max(1, max|ort|). Exit code 1 if any model fails.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def check(binary, model, tmp):
    name = os.path.splitext(os.path.basename(model))[0]
    ins, ours, theirs = (os.path.join(tmp, name, d) for d in ("in", "ours", "ort"))
    r = subprocess.run([binary, "run", model, "--save-inputs", ins, "--out", ours, "--json"],
                       capture_output=True, text=True)
    if r.returncode:
        return {"model": name, "ok": False, "error": "onnxforge: " + r.stderr.strip()[-500:]}
    out_names = [o["name"] for o in json.loads(r.stdout)["outputs"]]
    r = subprocess.run(["node", os.path.join(REPO, "tools/peers/ort.js"), "run", model, "--inputs", ins,
                        "--out", theirs, "--threads", "2"], capture_output=True, text=True)
    if r.returncode:
        return {"model": name, "ok": False, "error": "ort: " + (r.stdout + r.stderr).strip()[-500:]}
    res = {"model": name, "ok": True, "outputs": []}
    for n in out_names:
        f = "".join(c if c.isalnum() or c in "._-" else "_" for c in n) + ".npy"
        a = np.load(os.path.join(ours, f)).astype(np.float64)
        b = np.load(os.path.join(theirs, f)).astype(np.float64)
        if a.shape != b.shape:
            res["outputs"].append({"name": n, "ok": False, "error": f"shape {a.shape} vs {b.shape}"})
            res["ok"] = False
            continue
        ref = float(np.max(np.abs(b))) if b.size else 0.0
        diff = float(np.max(np.abs(a - b))) if a.size else 0.0
        tol = 1e-4 * max(1.0, ref)
        ok = bool(diff <= tol) and bool(np.all(np.isnan(a) == np.isnan(b)))
        res["outputs"].append({"name": n, "max_abs_diff": diff, "max_ref": ref, "tol": tol, "ok": ok})
        res["ok"] &= ok
    return res


def main():
    args = [a for a in sys.argv[1:] if a != "--json"]
    binary, models = args[0], args[1:]
    results = []
    with tempfile.TemporaryDirectory(prefix="onnxforge_ortcheck_") as tmp:
        for m in models:
            res = check(binary, m, tmp)
            results.append(res)
            if "--json" not in sys.argv:
                if "error" in res:
                    print(f"{res['model']:28} ERROR {res['error']}")
                for o in res.get("outputs", []):
                    print(f"{res['model']:28} {o['name'][:30]:30} max|d| {o.get('max_abs_diff', float('nan')):.3g} "
                          f"max|ref| {o.get('max_ref', float('nan')):.3g} {'ok' if o['ok'] else 'FAIL'}")
                sys.stdout.flush()
    if "--json" in sys.argv:
        print(json.dumps(results, indent=1))
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
