#!/usr/bin/python3
"""Run the ORT peer chain over an exported zoo and print a markdown table.

  /usr/bin/python3 tools/peers/zoo_report.py [--zoo DIR] [--only a,b] [--threads 2] [--min-time 1] [--json FILE]

Per model (from DIR/zoo.json): make_inputs.py -> ort.js run (outputs must be finite) ->
ort.js optimize --level basic (node counts before/after counted with python onnx) ->
ort.js bench (level all: what ORT users get). Outputs come from ORT at level disabled (a plain
interpreter). A `<cnn>_bn` variant must give the same outputs as `<cnn>` (same weights,
BatchNormalization kept instead of folded by the exporter).
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


def run_json(cmd):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    try:
        res = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        res = {"ok": False, "error": (p.stderr or p.stdout).strip()[-500:]}
    if p.returncode != 0 or not res.get("ok", False):
        raise RuntimeError(f"{Path(str(cmd[1])).name} {cmd[2]}: {res.get('error', p.stderr.strip()[-500:])}")
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--zoo", type=Path, default=REPO / ".cache" / "models")
    ap.add_argument("--only")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--json", type=Path, help="also write the rows as JSON")
    a = ap.parse_args()
    models = json.loads((a.zoo / "zoo.json").read_text())["models"]
    names = a.only.split(",") if a.only else sorted(models)
    ort = ["node", HERE / "ort.js"]
    work = Path(tempfile.mkdtemp(prefix="zoo_report_"))
    rows, outputs, failures = [], {}, []
    for name in names:
        e = models[name]
        path = a.zoo / e["file"]
        row = {"model": name, "nodes": e["stats"]["nodes"], "initializers": e["stats"]["initializers"],
               "mb": e["stats"]["bytes"] / 1e6}
        try:
            inp, out = work / name / "in", work / name / "out"
            run_json([sys.executable, HERE / "make_inputs.py", path, "--out", inp])
            r = run_json(ort + ["run", path, "--inputs", inp, "--out", out, "--threads", a.threads,
                                "--level", "disabled"])  # ORT as a plain interpreter: no fused rounding
            outs = {o["name"]: np.load(o["file"]) for o in r["outputs"]}
            if not all(np.isfinite(v).all() for v in outs.values()):
                raise RuntimeError("non-finite outputs")
            outputs[name] = outs
            opt = work / name / "basic.onnx"
            o = run_json(ort + ["optimize", path, "-o", opt, "--level", "basic", "--threads", a.threads])
            row["basic_nodes"] = len(onnx.load(str(opt), load_external_data=False).graph.node)
            row["basic_s"] = o["seconds"]
            assert len(onnx.load(str(path), load_external_data=False).graph.node) == row["nodes"]
            b = run_json(ort + ["bench", path, "--inputs", inp, "--threads", a.threads, "--min-time", a.min_time])
            row["ms"], row["min_ms"], row["iters"] = b["median_ms"], b["min_ms"], b["iters"]
            base = name[:-3] if name.endswith("_bn") else None
            if base in outputs:
                d = max(float(np.abs(outputs[base][k] - v).max()) for k, v in outs.items())
                scale = max(float(np.abs(v).max()) for v in outs.values())
                row["vs_base"] = f"max|d| {d:.1e} (|y|max {scale:.1f})"
                if d > 1e-3 * max(1.0, scale):
                    raise RuntimeError(f"differs from {base}: {d}")
        except Exception as ex:  # report all models, fail at the end
            row["error"] = str(ex)
            failures.append(name)
        rows.append(row)
        print(f"zoo_report: {name} done", file=sys.stderr, flush=True)
    print(f"| model | nodes | initializers | MB | ORT basic nodes | basic s | ORT ms @{a.threads}t median | min | note |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['model']} | {r['nodes']} | {r['initializers']} | {r['mb']:.1f} | {r.get('basic_nodes', '-')} | "
              f"{r.get('basic_s', '-')} | {r.get('ms', '-')} | {r.get('min_ms', '-')} | {r.get('error', r.get('vs_base', ''))} |")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
