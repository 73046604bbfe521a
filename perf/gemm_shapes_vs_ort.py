#!/usr/bin/python3
"""One transformer GEMM at a time, onnxforge's runtime against ONNX Runtime (level all), same run.

Each case is a one-block ONNX model with constant random weights, spelled as the fused BERT-base
(optimize --target-opset 23) spells it: x [1, M, K] -> MatMul W [K, N] -> Add bias [N], then
optionally Gelu (the FFN up-projection) or Split into three equal outputs (the fused QKV
projection). Rounds alternate ORT and onnxforge; the table gives medians of the rounds' medians
and their ratio, so a shape that loses to MLAS shows up on its own.

  /usr/bin/python3 perf/gemm_shapes_vs_ort.py [--build build] [--rounds 3] [--iters 40]
      [--threads 2] [--m 128] [--case K,N[,gelu|split] ...]

Default cases: BERT-base at sequence 128 (768x2304 + Split, 768x768, 768x3072 + Gelu, 3072x768).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CASES = ["768,2304,split", "768,768", "768,3072,gelu", "3072,768"]


def make_model(path: Path, m: int, k: int, n: int, tail: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32) * 0.1
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"]), helper.make_node("Add", ["mm", "b"], ["y0"])]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    outs = []
    if tail == "gelu":
        nodes.append(helper.make_node("Gelu", ["y0"], ["y"]))
        outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, m, n])]
    elif tail == "split":
        inits.append(numpy_helper.from_array(np.array([n // 3] * 3, dtype=np.int64), "parts"))
        nodes.append(helper.make_node("Split", ["y0", "parts"], ["q", "k", "v"], axis=-1))
        outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, [1, m, n // 3]) for o in "qkv"]
    else:
        nodes[-1].output[0] = "y"
        outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, m, n])]
    g = helper.make_graph(nodes, "gemm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, m, k])], outs, inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 11
    onnx.save(model, path)


def last_json(text: str) -> dict:
    text = text.strip()
    try:
        return json.loads(text)
    except ValueError:
        return json.loads(text.splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=str(REPO / "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--m", type=int, default=128)
    ap.add_argument("--case", action="append", help="K,N[,gelu|split]")
    ap.add_argument("--vs", help="a second onnxforge binary, timed in the same rounds (old vs new)")
    args = ap.parse_args()
    binary = str(Path(args.build) / "onnxforge")
    ort = ["node", str(REPO / "tools/peers/ort.js")]
    cases = args.case or DEFAULT_CASES
    with tempfile.TemporaryDirectory(prefix="onnxforge_gemm_") as tmp:
        print(f"M = {args.m}, {args.threads} threads, {args.rounds} rounds x {args.iters} runs; "
              f"load average {os.getloadavg()[0]:.2f}")
        head = f"{'case':<22} {'GFLOP':>6} {'ORT ms':>8} {'ours ms':>8} {'ours/ORT':>8} {'ORT GF/s':>8} {'ours GF/s':>9}"
        if args.vs:
            head += f" {'vs ms':>8} {'vs/ORT':>7}"
        print(head)
        for i, c in enumerate(cases):
            parts = c.split(",")
            k, n = int(parts[0]), int(parts[1])
            tail = parts[2] if len(parts) > 2 else ""
            model = Path(tmp) / f"case{i}.onnx"
            make_model(model, args.m, k, n, tail, seed=i)
            inputs = Path(tmp) / f"in{i}"
            subprocess.run(["/usr/bin/python3", str(REPO / "tools/peers/make_inputs.py"), str(model), "--out", str(inputs)],
                           check=True, stdout=subprocess.DEVNULL)
            ours_cmd = [binary, "bench", str(model), "--threads", str(args.threads), "--iters", str(args.iters),
                        "--warmup", "5", "--json"]
            ort_cmd = ort + ["bench", str(model), "--inputs", str(inputs), "--threads", str(args.threads),
                             "--iters", str(args.iters), "--warmup", "5"]
            t_ort, t_ours, t_vs = [], [], []
            for _ in range(args.rounds):
                t_ort.append(last_json(subprocess.run(ort_cmd, check=True, capture_output=True, text=True).stdout)["median_ms"])
                t_ours.append(last_json(subprocess.run(ours_cmd, check=True, capture_output=True, text=True).stdout)["median_ms"])
                if args.vs:
                    cmd = [args.vs] + ours_cmd[1:]
                    t_vs.append(last_json(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["median_ms"])
            a, o = statistics.median(t_ort), statistics.median(t_ours)
            gf = 2.0 * args.m * k * n / 1e9
            row = f"{c:<22} {gf:6.3f} {a:8.3f} {o:8.3f} {o / a:8.2f} {gf / a * 1e3:8.1f} {gf / o * 1e3:9.1f}"
            if args.vs:
                v = statistics.median(t_vs)
                row += f" {v:8.3f} {v / a:7.2f}"
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
