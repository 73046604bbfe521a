#!/usr/bin/python3
"""Cross-check onnxforge's runtime against ONNX Runtime on the same inputs.

  /usr/bin/python3 tests/runtime/ort_crosscheck.py ONNXFORGE_BIN MODEL... [--json] [--skip-ort-unsupported] [--min-compared=N]
      [--ort-level=disabled|basic|extended|all] [--tol=R]

For each model: `onnxforge run --save-inputs` writes the inputs and our outputs (the inputs are
generated, or for an ONNX backend test model the test's own test_data_set_0/input_<i>.pb),
`node tools/peers/ort.js run` computes ORT's outputs on those inputs, and every output must
satisfy max|ours - ort| <= R * max(1, max|ort|) (R = 1e-4 unless --tol) (NaN where both are NaN). Exit code 1 if any
model fails. --skip-ort-unsupported: a model ORT has no kernel for is listed as skipped, not failed;
--min-compared=N: fail if fewer than N models were compared.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def shipped_inputs(model):
    """`--input NAME=FILE` arguments for a backend test model's own inputs (none for others)."""
    data = os.path.join(os.path.dirname(model), "test_data_set_0")
    if not os.path.isfile(os.path.join(data, "input_0.pb")):
        return []
    graph = onnx.load(model, load_external_data=False).graph
    initializers = {t.name for t in graph.initializer}
    names = [i.name for i in graph.input if i.name not in initializers]
    args = []
    for k, n in enumerate(names):
        f = os.path.join(data, f"input_{k}.pb")
        if os.path.isfile(f):
            args += ["--input", f"{n}={f}"]
    return args


RANDOM_OPS = {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Bernoulli", "Multinomial"}


def noise_off(model, tmp):
    """(args, skip reason) for a model with random ops, whose draws ORT makes differently: a VITS
    export with Piper's `scales` input [noise, length, noise_w] runs noiseless as [0, 1, 0] (the
    noise is multiplied by zero); other random models are skipped."""
    graph = onnx.load(model, load_external_data=False).graph
    if not any(n.op_type in RANDOM_OPS for n in graph.node):
        return [], None
    if any(i.name == "scales" for i in graph.input):
        f = os.path.join(tmp, model_name(model).replace("/", "_") + "_scales.npy")
        np.save(f, np.array([0.0, 1.0, 0.0], np.float32))
        return ["--inputs", f"scales={f}"], None
    return [], "random ops draw other numbers in ORT"


def model_name(model):
    """The file's stem, or for a backend test (.../<suite>/<test>/model.onnx) suite/test."""
    stem = os.path.splitext(os.path.basename(model))[0]
    if stem != "model":
        return stem
    parts = os.path.normpath(model).split(os.sep)
    return parts[-3] + "/" + parts[-2]


def check(binary, model, tmp):
    name = model_name(model)
    ins, ours, theirs = (os.path.join(tmp, name.replace("/", "_"), d) for d in ("in", "ours", "ort"))
    noise_args, random_skip = noise_off(model, tmp)
    if random_skip:
        return {"model": name, "ok": True, "skipped": random_skip}
    r = subprocess.run([binary, "run", model, "--save-inputs", ins, "--out", ours, "--json"] + shipped_inputs(model) +
                       noise_args, capture_output=True, text=True)
    if r.returncode:
        return {"model": name, "ok": False, "error": "onnxforge: " + r.stderr.strip()[-500:]}
    out_names = [o["name"] for o in json.loads(r.stdout)["outputs"]]
    r = subprocess.run(["node", os.path.join(REPO, "tools/peers/ort.js"), "run", model, "--inputs", ins,
                        "--out", theirs, "--threads", "2"] + ORT_LEVEL, capture_output=True, text=True)
    if r.returncode:
        error = (r.stdout + r.stderr).strip()
        if PEER_SKIPS and "Could not find an implementation for" in error:
            # ORT 1.30 has no kernels for some ops at opsets below 7 (Add-6, BatchNormalization-6, ...).
            op = re.search(r"implementation for (\S+)", error).group(1)
            return {"model": name, "ok": True, "skipped": "ORT has no kernel for " + op}
        return {"model": name, "ok": False, "error": "ort: " + error[-500:]}
    res = {"model": name, "ok": True, "outputs": []}
    for n in out_names:
        f = "".join(c if c.isalnum() or c in "._-" else "_" for c in n) + ".npy"
        a = np.load(os.path.join(ours, f)).astype(np.float64)
        b = np.load(os.path.join(theirs, f)).astype(np.float64)
        if a.shape != b.shape:
            res["outputs"].append({"name": n, "ok": False, "error": f"shape {a.shape} vs {b.shape}"})
            res["ok"] = False
            continue
        both_nan = np.isnan(a) & np.isnan(b)
        ref = float(np.max(np.abs(b[~both_nan]), initial=0.0))
        diff = float(np.max(np.abs(a - b)[~both_nan], initial=0.0))
        tol = REL_TOL * max(1.0, ref)
        ok = bool(diff <= tol) and bool(np.all(np.isnan(a) == np.isnan(b)))
        res["outputs"].append({"name": n, "max_abs_diff": diff, "max_ref": ref, "tol": tol, "ok": ok})
        res["ok"] &= ok
    return res


PEER_SKIPS = "--skip-ort-unsupported" in sys.argv
# --ort-level=L: ORT's graph optimization level (ort.js --level; default all). QDQ models are
# compared at "disabled": ORT's QDQ fusions run DequantizeLinear -> op -> QuantizeLinear as integer
# kernels, which moves values across rounding boundaries (not what the graph computes).
ORT_LEVEL = ["--level", a.split("=", 1)[1]] if (a := next((x for x in sys.argv if x.startswith("--ort-level=")), None)) else []
# --tol=R: relative tolerance (default 1e-4). A static-quantized model rounds its activations to a
# grid; fp32 sums that differ in the last bit (summation order) can land one step apart, and the
# step propagates: such models are compared at a tolerance of a few quantization steps.
REL_TOL = float(a.split("=", 1)[1]) if (a := next((x for x in sys.argv if x.startswith("--tol=")), None)) else 1e-4


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    need = [int(a.split("=", 1)[1]) for a in sys.argv[1:] if a.startswith("--min-compared=")]
    binary, models = args[0], args[1:]
    results = []
    with tempfile.TemporaryDirectory(prefix="onnxforge_ortcheck_") as tmp:
        for m in models:
            res = check(binary, m, tmp)
            results.append(res)
            if "--json" not in sys.argv:
                if "skipped" in res:
                    print(f"{res['model']:40} skipped: {res['skipped']}")
                if "error" in res:
                    print(f"{res['model']:40} ERROR {res['error']}")
                for o in res.get("outputs", []):
                    print(f"{res['model']:40} {o['name'][:30]:30} max|d| {o.get('max_abs_diff', float('nan')):.3g} "
                          f"max|ref| {o.get('max_ref', float('nan')):.3g} {'ok' if o['ok'] else 'FAIL'}")
                sys.stdout.flush()
    if "--json" in sys.argv:
        print(json.dumps(results, indent=1))
    else:
        compared = sum(1 for r in results if "skipped" not in r)
        failed = sum(1 for r in results if not r["ok"])
        print(f"{compared} models compared, {failed} failed, {len(results) - compared} skipped")
    if need and sum(1 for r in results if "skipped" not in r) < need[0]:
        print(f"fewer than {need[0]} models compared")
        return 1
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
