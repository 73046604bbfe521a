#!/usr/bin/python3
"""Ground truth for tests/analysis: the real shape of every intermediate value, from a run.

usage: ort_shapes.py MODEL.onnx WORKDIR [--dim name=N ...]

Exposes every node output of the main graph as a graph output (types only, no shapes, so the
run judges nothing it is told), makes inputs with tools/peers/make_inputs.py, runs ONNX Runtime
(tools/peers/ort.js, optimizations disabled) and prints {name: [dims...]} as JSON on stdout.
"""
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parents[2]


def main():
    model_path, work = Path(sys.argv[1]), Path(sys.argv[2])
    dims = []
    args = sys.argv[3:]
    for i, a in enumerate(args):
        if a == "--dim":
            dims += ["--dim", args[i + 1]]
    work.mkdir(parents=True, exist_ok=True)
    model = onnx.load(str(model_path))
    del model.graph.value_info[:]
    outputs = {o.name for o in model.graph.output}
    names = []
    for node in model.graph.node:
        for name in node.output:
            if name and name not in outputs:
                vi = model.graph.output.add()
                vi.name = name
                names.append(name)
    exposed = work / "exposed.onnx"
    onnx.save(model, str(exposed))
    inputs, out = work / "inputs", work / "out"
    subprocess.run([sys.executable, str(ROOT / "tools/peers/make_inputs.py"), str(model_path), "--out", str(inputs)] + dims,
                   check=True, stdout=subprocess.DEVNULL)
    run = subprocess.run(["node", str(ROOT / "tools/peers/ort.js"), "run", str(exposed), "--inputs", str(inputs), "--out",
                          str(out), "--threads", "1", "--level", "disabled"], capture_output=True, text=True)
    if run.returncode != 0:
        print(json.dumps({"error": (run.stdout + run.stderr)[-500:]}))
        return
    shapes = {}
    for name in list(outputs) + names:
        f = out / (re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".npy")
        if f.exists():
            shapes[name] = list(np.load(str(f), allow_pickle=False).shape)
    print(json.dumps({"shapes": shapes}))


if __name__ == "__main__":
    main()
