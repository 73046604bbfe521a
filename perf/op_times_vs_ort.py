#!/usr/bin/python3
"""Where the time goes, onnxforge's runtime against ONNX Runtime on one model, same run.

Rounds alternate ORT with its profiler (perf/ort_op_times.js: kernel ms per op type) and
`onnxforge bench --profile` (ms per step kind); prints the medians of the rounds per op type for
both, and both wall medians. The runtimes name fused work differently (ORT: BiasGelu, FusedGemm,
MatMul without its bias Add; onnxforge: MatMul+act with bias and activation, Split+Attention),
so compare groups, not rows.

  /usr/bin/python3 perf/op_times_vs_ort.py MODEL [--dim sequence=128 ...] [--build build]
      [--threads 2] [--rounds 3] [--iters 10]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--dim", action="append", default=[])
    ap.add_argument("--build", default=str(REPO / "build"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    args = ap.parse_args()
    binary = str(Path(args.build) / "onnxforge")
    ort_ops, ours_ops = defaultdict(list), defaultdict(list)
    ort_nodes, ours_nodes = {}, {}
    ort_wall, ours_wall = [], []
    step = re.compile(r"^\s+(\S+)\s+(\d+) nodes\s+([0-9.]+) ms/run")
    with tempfile.TemporaryDirectory(prefix="onnxforge_ops_") as tmp:
        dims = [a for d in args.dim for a in ("--dim", d)]
        subprocess.run(["/usr/bin/python3", str(REPO / "tools/peers/make_inputs.py"), args.model, "--out", tmp, *dims],
                       check=True, stdout=subprocess.DEVNULL)
        print(f"{args.model}, {args.threads} threads, {args.rounds} rounds x {args.iters} runs; "
              f"load average {os.getloadavg()[0]:.2f}")
        for _ in range(args.rounds):
            out = subprocess.run(["node", str(REPO / "perf/ort_op_times.js"), args.model, tmp, str(args.threads),
                                  str(args.iters)], check=True, capture_output=True, text=True).stdout
            j = json.loads(out.strip().splitlines()[-1])
            ort_wall.append(j["median_ms"])
            for op, o in j["ops"].items():
                ort_ops[op].append(o["ms"])
                ort_nodes[op] = o["nodes"]
            res = subprocess.run([binary, "bench", args.model, "--threads", str(args.threads), "--iters", str(args.iters),
                                  "--warmup", "2", "--profile", *dims], check=True, capture_output=True, text=True)
            text = res.stdout + res.stderr
            for line in text.splitlines():
                m = step.match(line)
                if m:
                    ours_ops[m.group(1)].append(float(m.group(3)))
                    ours_nodes[m.group(1)] = int(m.group(2))
                elif "median" in line and "ms" in line:
                    ours_wall.append(float(re.search(r"median\s+([0-9.]+) ms", line).group(1)))
    med = lambda v, n: statistics.median(v + [0.0] * (n - len(v)))  # a kind missing in a round counts 0
    rows_o = sorted(((med(v, args.rounds), k) for k, v in ort_ops.items()), reverse=True)
    rows_f = sorted(((med(v, args.rounds), k) for k, v in ours_ops.items()), reverse=True)
    print(f"{'ONNX Runtime':<34} {'ms/run':>9}   {'onnxforge':<34} {'ms/run':>9}")
    for i in range(max(len(rows_o), len(rows_f))):
        left = f"{rows_o[i][1]:<22} {ort_nodes[rows_o[i][1]]:>4g} nodes {rows_o[i][0]:9.3f}" if i < len(rows_o) else " " * 44
        right = f"{rows_f[i][1]:<22} {ours_nodes[rows_f[i][1]]:>4d} nodes {rows_f[i][0]:9.3f}" if i < len(rows_f) else ""
        print(f"{left}   {right}")
    so, sf = sum(r[0] for r in rows_o), sum(r[0] for r in rows_f)
    print(f"{'kernels':<34} {so:9.3f}   {'kernels':<34} {sf:9.3f}")
    print(f"{'wall median':<34} {statistics.median(ort_wall):9.3f}   {'wall median (profiled)':<34} "
          f"{statistics.median(ours_wall):9.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
