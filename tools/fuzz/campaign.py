#!/usr/bin/python3
"""A hostile-input campaign against the onnxforge binary, as issue 14 ran it: mutated models
through inspect, convert, optimize, run and hierarchy; every run must exit 0, 1 or 2 by itself.

  campaign.py BINARY [--models N] [--seed S] [--out DIR] [--timeout SECONDS] [SEED_DIR...]

Mutations (structured, like targets/mutator.cpp, plus raw byte flips) start from the small
models of SEED_DIRs (default: tools/fuzz/corpus/seed and corpus/regressions). Prints the count of
runs by outcome; keeps every model that made a command die by a signal, hang, or exit 3 (an
internal error) in DIR with the command, and exits 1 if there is any.
"""
import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import onnx

HOSTILE = [0, -1, 1, 2, 1 << 31, 1 << 62, (1 << 63) - 1, -(1 << 63), 65536, 3]
OPS = ["Conv", "Loop", "If", "Scan", "Range", "ConstantOfShape", "Reshape", "Expand", "Gather", "Resize", "Pad",
       "Slice", "Tile", "Concat", "Split", "MatMul", "Gemm", "Transpose", "TopK", "NonZero", "Unsqueeze", "Cast",
       "DepthToSpace", "SpaceToDepth", "MaxPool", "AveragePool", "ConvTranspose", "LSTM", "Softmax", "CumSum"]
ATTRS = ["strides", "dilations", "pads", "kernel_shape", "axis", "axes", "perm", "group", "value", "body", "to",
         "blocksize", "keepdims", "then_branch"]


def graphs(g, depth=0):
    yield g
    if depth < 3:
        for n in g.node:
            for a in n.attribute:
                if a.HasField("g"):
                    yield from graphs(a.g, depth + 1)
                for sg in a.graphs:
                    yield from graphs(sg, depth + 1)


def mutate(m, r):
    gs = list(graphs(m.graph))
    g = r.choice(gs)
    kind = r.randrange(7)
    infos = list(g.input) + list(g.output) + list(g.value_info)
    if kind == 0 and g.node:
        n = r.choice(g.node)
        if not n.attribute or r.random() < 0.3:
            a = n.attribute.add()
            a.name = r.choice(ATTRS)
            a.type = r.randrange(15)
            if r.random() < 0.5:
                a.i = r.choice(HOSTILE)
            else:
                a.ints.extend(r.choice(HOSTILE) for _ in range(r.randrange(4)))
        else:
            a = r.choice(n.attribute)
            c = r.randrange(5)
            if c == 0:
                a.type = r.randrange(15)
            elif c == 1:
                a.ClearField("g"); a.ClearField("t"); a.ClearField("ints"); a.ClearField("i")
            elif c == 2:
                a.ints.append(r.choice(HOSTILE))
            elif c == 3:
                a.i = r.choice(HOSTILE)
            else:
                a.f = r.choice([0.0, -1.0, 1e30, float("nan"), float("inf")])
    elif kind == 1 and infos:
        vi = r.choice(infos)
        shape = vi.type.tensor_type.shape
        if not shape.dim or r.random() < 0.3:
            shape.dim.add().dim_value = r.choice(HOSTILE)
        else:
            d = r.choice(shape.dim)
            if r.random() < 0.3:
                d.dim_param = r.choice(["batch", "seq", ""])
            else:
                d.dim_value = r.choice(HOSTILE)
    elif kind == 2:
        if infos and r.random() < 0.5:
            r.choice(infos).type.tensor_type.elem_type = r.randrange(26)
        elif g.initializer:
            t = r.choice(g.initializer)
            t.data_type = r.randrange(26)
            if r.random() < 0.3:
                t.int64_data.extend(r.choice(HOSTILE) for _ in range(r.randrange(4)))
    elif kind == 3:
        t = r.choice(m.graph.initializer) if m.graph.initializer and r.random() < 0.6 else m.graph.initializer.add()
        if not t.name:
            t.name = "ext%d" % r.randrange(3)
            t.data_type = 1
            t.dims.append(r.randrange(1100))
        t.ClearField("raw_data")
        t.data_location = onnx.TensorProto.EXTERNAL
        del t.external_data[:]
        e = t.external_data.add()
        e.key, e.value = "location", r.choice(["data.bin", "fifo", "dir", "missing.bin", "../data.bin", "/etc/passwd",
                                               "model.onnx", ""])
        if r.random() < 0.5:
            e = t.external_data.add()
            e.key, e.value = "offset", str(r.choice([0, 4, 4096, -1, 1 << 62]))
        if r.random() < 0.5:
            e = t.external_data.add()
            e.key, e.value = "length", str(r.choice([0, 4, 16, 4096, 1 << 62]))
    elif kind == 4 and g.node:
        n = r.choice(g.node)
        names = [""] + [i.name for i in g.input] + [t.name for t in g.initializer] + [o for x in g.node for o in x.output]
        c = r.randrange(5)
        if c == 0 and n.input:
            n.input[r.randrange(len(n.input))] = r.choice(names)
        elif c == 1:
            n.input.append(r.choice(names))
        elif c == 2 and n.output:
            n.output[0] = r.choice(names)
        elif c == 3 and len(g.node) > 1:
            i, j = r.randrange(len(g.node)), r.randrange(len(g.node))
            a, b = onnx.NodeProto(), onnx.NodeProto()
            a.CopyFrom(g.node[i]); b.CopyFrom(g.node[j])
            g.node[i].CopyFrom(b); g.node[j].CopyFrom(a)
        else:
            n.op_type = r.choice(OPS)
    elif kind == 5:
        m.ir_version = r.choice([3, 4, 7, 8, 10, 0, 65])
    data = bytearray(m.SerializeToString())
    if kind == 6 or r.random() < 0.2:
        for _ in range(1 + r.randrange(3)):
            if data:
                data[r.randrange(len(data))] = r.randrange(256)
    return bytes(data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("seeds", nargs="*", type=Path)
    ap.add_argument("--models", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=30)
    ap.add_argument("--out", type=Path, default=Path("campaign_findings"))
    ap.add_argument("--keep-unverified", action="store_true",
                    help="also keep models whose optimize failed verification (exit 1: a pass changed what it computes)")
    a = ap.parse_args()
    here = Path(__file__).resolve().parent
    seed_dirs = a.seeds or [here / "corpus" / "seed", here / "corpus" / "regressions"]
    sources = sorted(p for d in seed_dirs for p in d.glob("*.onnx"))
    r = random.Random(a.seed)
    outcomes, bad = Counter(), []
    work = Path(tempfile.mkdtemp(prefix="onnxforge_campaign_"))
    (work / "dir").mkdir()
    (work / "data.bin").write_bytes(b"\x3f" * 4096)
    os.mkfifo(work / "fifo")
    try:
        for i in range(a.models):
            src = r.choice(sources)
            m = onnx.ModelProto()
            try:
                m.ParseFromString(src.read_bytes())
            except Exception:
                continue
            data = src.read_bytes()
            for _ in range(1 + r.randrange(3)):
                try:
                    data = mutate(m, r)
                except ValueError:  # python-protobuf refuses to copy a name that is not UTF-8 (a seed's)
                    break
                try:
                    m = onnx.ModelProto()
                    m.ParseFromString(data)
                except Exception:
                    break
            model = work / "model.onnx"
            model.write_bytes(data)
            for cmd in (["inspect"], ["convert", "OUT", "--overwrite"], ["optimize", "OUT", "--overwrite", "--verify-seeds", "1"],
                        ["run", "--max-memory", "1G"], ["hierarchy"]):
                args = [a.binary, cmd[0], str(model)] + [str(work / "out.onnx") if x == "OUT" else x for x in cmd[1:]]
                try:
                    p = subprocess.run(args, capture_output=True, timeout=a.timeout)
                    code = p.returncode
                    outcome = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit {code}"
                except subprocess.TimeoutExpired:
                    outcome, p = "hang", None
                outcomes[(cmd[0], outcome)] += 1
                unverified = a.keep_unverified and cmd[0] == "optimize" and outcome == "exit 1"
                if outcome.startswith("signal") or outcome == "hang" or outcome == "exit 3" or unverified:
                    a.out.mkdir(parents=True, exist_ok=True)
                    keep = a.out / f"{len(bad):04d}_{cmd[0]}.onnx"
                    shutil.copy(model, keep)
                    err = p.stderr.decode(errors="replace")[-500:] if p else ""
                    bad.append((keep, " ".join(args[1:]), outcome, err))
            if (i + 1) % 100 == 0:
                print(f"{i + 1} models, {sum(outcomes.values())} runs, {len(bad)} failures", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for (cmd, outcome), n in sorted(outcomes.items()):
        print(f"{cmd:10s} {outcome:16s} {n}")
    total = sum(outcomes.values())
    signals = sum(n for (c, o), n in outcomes.items() if o.startswith("signal"))
    hangs = sum(n for (c, o), n in outcomes.items() if o == "hang")
    internal = sum(n for (c, o), n in outcomes.items() if o == "exit 3")
    print(f"{total} runs over {a.models} mutated models: {signals} signals, {hangs} hangs, {internal} internal errors")
    for keep, cmd, outcome, err in bad:
        print(f"FAIL {keep}: {outcome}: onnxforge {cmd}\n    {err.strip()[:300]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
