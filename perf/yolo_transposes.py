#!/usr/bin/python3
"""Exp 02/15: eliminate_redundant_transposes on YOLOv8n and YOLOv8s (written up in
docs/yolo_transposes.md).

  /usr/bin/python3 perf/yolo_transposes.py [--bin build/onnxforge] [--zoo .cache/models]
        [--models yolov8n,yolov8s] [--opsets 14,12] [--threads 2] [--rounds 5] [--iters 10] [--json FILE]
        [--ort tools/peers/ort.js]

Per model and opset:
  1. a census of the original graph's Transpose nodes (producer -> Transpose(perm) -> consumers)
     and the rewrites a transpose pass can make, classified here from the ONNX protobuf (own code,
     no pattern matcher shared with the pass): Transpose -> Transpose pairs that cancel
     (composed perm = identity) or compose (one Transpose instead of two), Transpose -> unary
     elementwise -> Transpose that cancels, identity perms;
  2. the transpose passes alone: `onnxforge optimize --passes
     eliminate_redundant_transposes,sink_transposes` (per pass: matches applied, nodes removed;
     Transposes after, verification max_diff over 3 seeds). sink_transposes (class 1) pushes a
     Transpose that keeps the last axis through row-wise ops until it meets its inverse;
  3. the whole pipeline: `onnxforge optimize` (nodes before/after, Transposes after, max_diff),
     and for comparison the Transposes left by ONNX Runtime's offline optimizer (ort.js optimize
     at levels basic and all; its transpose optimizer can push a Transpose through Softmax);
  4. latency of the original against the optimized model: `onnxforge bench ORIG --vs OPT`
     (alternating runs, ratio of medians) and ONNX Runtime 1.30 (tools/peers/ort.js, graph
     optimization level all) on both, interleaved in rounds with onnxforge's, same inputs, same
     thread count; medians over rounds of the per-round medians.
Opset 14 models come from the zoo (tools/models/export_zoo.py --only yolov8n,yolov8s); other
opsets are exported by export_zoo.py --opset N into a scratch folder (same weights: same seed).
Prints a Markdown report on stdout.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onnx

REPO = Path(__file__).resolve().parent.parent
UNARY = {"Relu", "Sigmoid", "Tanh", "Exp", "Log", "Neg", "Abs", "Sqrt", "Erf", "Gelu", "LeakyRelu", "Elu", "Selu",
         "HardSigmoid", "HardSwish", "Softplus", "Softsign", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Sin",
         "Cos", "Not", "Identity"}


def run(cmd, **kw):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if r.returncode:
        raise SystemExit(f"yolo_transposes: {' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    return r.stdout


# ----------------------------------------------------------------------------- census
def census(path: Path) -> dict:
    """Transpose nodes and the rewrites available on them, from the protobuf alone."""
    g = onnx.load(str(path), load_external_data=False).graph
    producer = {o: n for n in g.node for o in n.output}
    consumers: dict = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    outputs = {o.name for o in g.output}

    def perm(n):
        for a in n.attribute:
            if a.name == "perm":
                return list(a.ints)
        return None  # reversed dims; rank unknown here

    def single_use(v):
        return len(consumers.get(v, [])) == 1 and v not in outputs

    rows, cancel, compose, through, identity = [], [], [], [], []
    for t in g.node:
        if t.op_type != "Transpose":
            continue
        p2 = perm(t)
        src = producer.get(t.input[0])
        rows.append({"name": t.name, "perm": p2, "from": f"{src.op_type} {src.name}" if src else f"input {t.input[0]}",
                     "to": [f"{c.op_type} {c.name}" for c in consumers.get(t.output[0], [])]})
        if p2 is not None and p2 == sorted(p2):
            identity.append(t.name)
            continue
        middle = None
        if src is not None and src.op_type in UNARY and single_use(t.input[0]):
            middle, src = src, producer.get(src.input[0])
            if src is None or not single_use(middle.input[0]):
                continue
        if src is None or src.op_type != "Transpose" or p2 is None:
            continue
        p1 = perm(src)
        if p1 is None or len(p1) != len(p2):
            continue
        q = [p1[i] for i in p2]
        pair = (src.name, middle.op_type if middle else None, t.name, q)
        if q == sorted(q):
            (through if middle else cancel).append(pair)
        elif not middle:
            compose.append(pair)
    return {"nodes": len(g.node), "transposes": rows, "cancelling_pairs": cancel, "composable_pairs": compose,
            "cancelling_through_unary": through, "identity_perms": identity,
            "ops": {op: sum(n.op_type == op for n in g.node) for op in ("Conv", "Reshape", "Softmax", "Concat", "Split")}}


def count_op(path: Path, op: str) -> int:
    return sum(n.op_type == op for n in onnx.load(str(path), load_external_data=False).graph.node)


# ----------------------------------------------------------------------------- onnxforge / ORT
def optimize(binary, src: Path, dst: Path, extra) -> dict:
    rep = dst.with_suffix(".report.json")
    run([binary, "optimize", src, "-o", dst, "--report", rep, *extra])
    r = json.loads(rep.read_text())
    def stats(name):
        tr = next((p for p in r["passes"] if p["name"] == name), {})
        return {k: tr.get(k, 0) for k in ("matches_applied", "nodes_removed")}
    return {"nodes_before": r["before"]["nodes"], "nodes_after": r["after"]["nodes"],
            "max_diff": r["verification"]["max_diff"], "verified": r["verification"]["ok"],
            "seeds": r["verification"]["seeds"], "transpose_pass": stats("eliminate_redundant_transposes"),
            "sink_pass": stats("sink_transposes"), "transposes_after": count_op(dst, "Transpose")}


def ort_transposes(ort, src: Path, tmp: Path) -> dict:
    out = {}
    for level in ("basic", "all"):
        dst = tmp / f"{src.stem}.ort_{level}.onnx"
        run(["node", ort, "optimize", src, "-o", dst, "--level", level])
        out[level] = count_op(dst, "Transpose")
    return out


def latency(binary, ort, orig: Path, opt: Path, tmp: Path, threads: int, rounds: int, iters: int) -> dict:
    inputs = tmp / (orig.stem + ".inputs")
    run([binary, "run", orig, "--save-inputs", inputs, "--json"])
    ours_a, ours_b, ort_a, ort_b = [], [], [], []
    for _ in range(rounds):  # interleaved: load on the machine hits every variant alike
        b = json.loads(run([binary, "bench", orig, "--vs", opt, "--threads", threads, "--iters", iters,
                            "--warmup", 2, "--json"]))
        ours_a.append(b["median_ms"])
        ours_b.append(b["vs"]["median_ms"])
        for model, acc in ((orig, ort_a), (opt, ort_b)):
            o = json.loads(run(["node", ort, "bench", model, "--inputs", inputs, "--threads", threads, "--iters", iters,
                                      "--warmup", 2]))
            acc.append(o["median_ms"])
    med = statistics.median
    return {"onnxforge_before_ms": med(ours_a), "onnxforge_after_ms": med(ours_b),
            "ort_before_ms": med(ort_a), "ort_after_ms": med(ort_b),
            "rounds": {"onnxforge_before": ours_a, "onnxforge_after": ours_b, "ort_before": ort_a, "ort_after": ort_b}}


# ----------------------------------------------------------------------------- report
def report(results: list, args) -> str:
    out = []
    out.append(f"Run {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, threads {args.threads}, "
               f"{args.rounds} rounds x {args.iters} iterations; onnxforge `{args.bin}`.\n")
    out.append("| model | opset | nodes | Transposes | cancelling pairs | composable pairs | T-unary-T | identity |"
               " eliminate_redundant_transposes: applied / nodes removed | sink_transposes: applied / nodes removed |"
               " Transposes after (passes / pipeline) | pipeline nodes |"
               " max_diff (passes / pipeline) | ORT offline Transposes (basic / all) |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        c, p, f = r["census"], r["pass_only"], r["pipeline"]
        out.append(f"| {r['model']} | {r['opset']} | {c['nodes']} | {len(c['transposes'])} | {len(c['cancelling_pairs'])} | "
                   f"{len(c['composable_pairs'])} | {len(c['cancelling_through_unary'])} | {len(c['identity_perms'])} | "
                   f"{p['transpose_pass']['matches_applied']} / {p['transpose_pass']['nodes_removed']} | "
                   f"{p['sink_pass']['matches_applied']} / {p['sink_pass']['nodes_removed']} | "
                   f"{p['transposes_after']} / {f['transposes_after']} | {f['nodes_before']} -> {f['nodes_after']} "
                   f"(-{f['nodes_before'] - f['nodes_after']}) | {p['max_diff']:.3g} / {f['max_diff']:.3g} | "
                   f"{r['ort_offline_transposes']['basic']} / {r['ort_offline_transposes']['all']} |")
    out.append("\nTranspose nodes in the original graphs:\n")
    for r in results:
        for t in r["census"]["transposes"]:
            out.append(f"- {r['model']} opset {r['opset']}: `{t['name']}` perm {t['perm']}, from {t['from']}, "
                       f"to {', '.join(t['to'])}")
    if any("latency" in r for r in results):
        out.append("\nLatency, original vs `onnxforge optimize` output (ms, medians of per-round medians):\n")
        out.append("| model | opset | onnxforge before | onnxforge after | after/before | ORT before | ORT after | "
                   "ORT after/before | onnxforge/ORT (after) |")
        out.append("|---|---|---|---|---|---|---|---|---|")
        for r in results:
            if "latency" not in r:
                continue
            L = r["latency"]
            out.append(f"| {r['model']} | {r['opset']} | {L['onnxforge_before_ms']:.2f} | {L['onnxforge_after_ms']:.2f} | "
                       f"{L['onnxforge_after_ms'] / L['onnxforge_before_ms']:.3f} | {L['ort_before_ms']:.2f} | "
                       f"{L['ort_after_ms']:.2f} | {L['ort_after_ms'] / L['ort_before_ms']:.3f} | "
                       f"{L['onnxforge_after_ms'] / L['ort_after_ms']:.2f} |")
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", type=Path, default=REPO / "build" / "onnxforge")
    ap.add_argument("--zoo", type=Path, default=REPO / ".cache" / "models")
    ap.add_argument("--models", default="yolov8n,yolov8s")
    ap.add_argument("--opsets", default="14,12", help="14 from the zoo; others exported to a scratch folder")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--no-latency", action="store_true")
    ap.add_argument("--json", type=Path, help="also write the raw results here")
    ap.add_argument("--ort", type=Path, default=REPO / "tools" / "peers" / "ort.js",
                    help="the ONNX Runtime peer (a worktree without node_modules: the main checkout's)")
    args = ap.parse_args()
    if not args.bin.exists():
        ap.error(f"{args.bin} does not exist (build the onnxforge target, or pass --bin)")
    if not (args.ort.parent / "node_modules" / "onnxruntime-node").exists():
        ap.error(f"ONNX Runtime peer missing next to {args.ort} (tools/peers/install.sh, or pass --ort)")
    models = [m for m in args.models.split(",") if m]
    opsets = [int(o) for o in args.opsets.split(",") if o]
    results = []
    with tempfile.TemporaryDirectory(prefix="yolo_transposes.") as d:
        tmp = Path(d)
        for opset in opsets:
            folder = args.zoo
            if opset != 14:
                folder = tmp / f"zoo{opset}"
                run([sys.executable, REPO / "tools" / "models" / "export_zoo.py", "--only", ",".join(models),
                     "--opset", opset, "--out", folder])
            for m in models:
                src = folder / f"{m}.onnx"
                if not src.exists():
                    raise SystemExit(f"yolo_transposes: {src} missing: /usr/bin/python3 tools/models/export_zoo.py "
                                     f"--only {m} --out {folder}")
                r = {"model": m, "opset": opset, "census": census(src)}
                r["pass_only"] = optimize(args.bin, src, tmp / f"{m}.{opset}.transposes.onnx",
                                          ["--passes", "eliminate_redundant_transposes,sink_transposes"])
                opt = tmp / f"{m}.{opset}.opt.onnx"
                r["pipeline"] = optimize(args.bin, src, opt, [])
                r["ort_offline_transposes"] = ort_transposes(args.ort, src, tmp)
                if not args.no_latency:
                    r["latency"] = latency(args.bin, args.ort, src, opt, tmp, args.threads, args.rounds, args.iters)
                results.append(r)
                print(f"yolo_transposes: {m} opset {opset} done", file=sys.stderr, flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    sys.stdout.write(report(results, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
