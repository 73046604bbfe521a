#!/usr/bin/python3
"""Pad alone, onnxforge's runtime against ONNX Runtime, same run (issue 27's shapes).

Each case is a one-node model (opset 11, pads as an initializer input, as tf2onnx writes them)
written to a temporary folder and timed by perf/op_times_vs_ort.py, whose rounds alternate ORT
(its profiler's kernel time) and `onnxforge bench --profile` (the Pad step's time). Prints the
Pad kernel medians of both and their ratio per case.

  /usr/bin/python3 perf/pad_vs_ort.py [--build build] [--threads 2] [--rounds 5] [--iters 20]
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# (name, input shape, pads in ONNX order, mode, element type)
CASES = [
    ("c96x160_pad1", [1, 96, 160, 160], [0, 0, 1, 1, 0, 0, 1, 1], "constant", "float"),
    ("c144x80_pad1", [1, 144, 80, 80], [0, 0, 1, 1, 0, 0, 1, 1], "constant", "float"),
    ("c96x160_same_s2", [1, 96, 160, 160], [0, 0, 0, 0, 0, 0, 1, 1], "constant", "float"),
    ("c64x128_reflect3", [1, 64, 128, 128], [0, 0, 3, 3, 0, 0, 3, 3], "reflect", "float"),
    ("c96x160_pad1_fp16", [1, 96, 160, 160], [0, 0, 1, 1, 0, 0, 1, 1], "constant", "float16"),
]


def make_model(path: Path, shape, pads, mode, dtype) -> None:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    et = {"float": TensorProto.FLOAT, "float16": TensorProto.FLOAT16}[dtype]
    out = [d + pads[i] + pads[i + len(shape)] for i, d in enumerate(shape)]
    node = helper.make_node("Pad", ["x", "pads"], ["y"], mode=mode)
    g = helper.make_graph([node], "pad", [helper.make_tensor_value_info("x", et, shape)],
                          [helper.make_tensor_value_info("y", et, out)],
                          [numpy_helper.from_array(np.array(pads, dtype=np.int64), "pads")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)]), str(path))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=str(REPO / "build"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--only", help="comma-separated case names")
    a = ap.parse_args()
    only = set(a.only.split(",")) if a.only else None
    # op_times_vs_ort.py prints ORT's kinds left, ours right (from column 47), each sorted by time:
    # the Pad row may be on different lines (ORT runs float16 Pad between two Casts).
    row = re.compile(r"Pad\s+\S+ nodes\s+([0-9.]+)")
    print(f"Pad vs ONNX Runtime, {a.threads} threads, {a.rounds} alternating rounds x {a.iters} runs; "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'case':<20} {'shape':<20} {'mode':<9} {'ORT ms':>8} {'ours ms':>8} {'ratio':>6}")
    with tempfile.TemporaryDirectory(prefix="onnxforge_pad_") as tmp:
        for name, shape, pads, mode, dtype in CASES:
            if only and name not in only:
                continue
            model = Path(tmp) / f"{name}.onnx"
            make_model(model, shape, pads, mode, dtype)
            res = subprocess.run(["/usr/bin/python3", str(REPO / "perf/op_times_vs_ort.py"), str(model), "--build",
                                  a.build, "--threads", str(a.threads), "--rounds", str(a.rounds), "--iters",
                                  str(a.iters)], check=True, capture_output=True, text=True)
            found = {}
            for line in res.stdout.splitlines():
                for m in row.finditer(line):
                    found["ours" if m.start() >= 40 else "ort"] = float(m.group(1))
            if len(found) != 2:
                sys.stderr.write(res.stdout)
                return 3
            ort, ours = found["ort"], found["ours"]
            print(f"{name:<20} {str(shape):<20} {mode:<9} {ort:8.3f} {ours:8.3f} {ours / ort:6.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
