#!/usr/bin/env python3
"""Derives from ONNX Runtime itself which default-domain ops it implements on CPU at each opset,
and writes the table `--target ort` checks against (passes/ort_ops.inc, compiled into
passes/ort_ops.cpp).

  /usr/bin/python3 tools/peers/ort_op_table.py [--out passes/ort_ops.inc] [--testdata DIR]
  /usr/bin/python3 tools/peers/ort_op_table.py --check    # exit 1 when ORT disagrees with the committed table

For every op: one-node models (the ONNX backend test suite's node tests, Debian libonnx-testdata,
plus hand-made ones for ops the suite has no test for, such as the random ops) are re-stamped to
each opset 7..24 and loaded in ONNX Runtime (ort_load.js: a session per model, CPU provider).
Outcomes per (op, opset):
  - the session is created: ORT implements the op at that opset;
  - "Could not find an implementation for Op(V)" for every model of the op: it does not (V: the op's
    version at that opset), at least not for the element types the models use;
  - anything else (the node is invalid at that opset: an attribute became an input, a type was
    added later): no evidence; another model of the op may give it.
The table lists, per op, the opsets where ORT has a kernel and those where it has none, with the
version it asked for. Ops or opsets with no evidence are left out: the check says nothing there.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import onnx
from onnx import TensorProto, helper

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
OPSETS = range(7, 25)
PER_OP = 6  # models tried per op: any that loads shows a kernel (ORT says "no implementation" for a type it
            # lacks too, so an op is missing at an opset only when none of its models loads there)


def ir_version(opset: int) -> int:  # passes/upgrade_opset.cpp min_ir_version
    table = [(8, 3), (9, 4), (10, 5), (11, 6), (14, 7), (18, 8), (20, 9), (22, 10), (23, 11), (24, 12)]
    for top, ir in table:
        if opset <= top:
            return ir
    return 13


def backend_models(root: Path) -> dict[str, list[onnx.ModelProto]]:
    by_op: dict[str, list[onnx.ModelProto]] = {}
    for model_file in sorted(root.glob("test_*/model.onnx")):
        try:
            m = onnx.load(str(model_file))
        except Exception:
            continue
        nodes = list(m.graph.node)
        if len(nodes) != 1 or nodes[0].domain not in ("", "ai.onnx") or m.functions:
            continue
        lst = by_op.setdefault(nodes[0].op_type, [])
        if len(lst) < PER_OP:
            lst.append(m)
    return by_op


def handmade() -> dict[str, list[onnx.ModelProto]]:
    """Ops the backend suite does not test (their outputs are random)."""
    f = TensorProto.FLOAT
    x = helper.make_tensor_value_info("x", f, [2, 3])
    y = helper.make_tensor_value_info("y", f, [2, 3])
    yi = helper.make_tensor_value_info("y", TensorProto.INT32, [2, 1])

    def one(node, inputs, outputs):
        return helper.make_model(helper.make_graph([node], "g", inputs, outputs))

    return {
        "RandomNormalLike": [one(helper.make_node("RandomNormalLike", ["x"], ["y"]), [x], [y])],
        "RandomUniformLike": [one(helper.make_node("RandomUniformLike", ["x"], ["y"]), [x], [y])],
        "RandomNormal": [one(helper.make_node("RandomNormal", [], ["y"], shape=[2, 3]), [], [y])],
        "RandomUniform": [one(helper.make_node("RandomUniform", [], ["y"], shape=[2, 3]), [], [y])],
        "Multinomial": [one(helper.make_node("Multinomial", ["x"], ["y"]), [x], [yi])],
        "Bernoulli": [one(helper.make_node("Bernoulli", ["x"], ["y"]), [x], [y])],
    }


def restamp(m: onnx.ModelProto, opset: int) -> onnx.ModelProto:
    c = onnx.ModelProto()
    c.CopyFrom(m)
    del c.opset_import[:]
    c.opset_import.append(helper.make_opsetid("", opset))
    c.ir_version = ir_version(opset)
    return c


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(REPO / "passes" / "ort_ops.inc"))
    ap.add_argument("--check", action="store_true", help="compare with --out instead of writing it")
    ap.add_argument("--testdata", default="/usr/share/libonnx-testdata/data/node")
    ap.add_argument("--node", default="node")
    a = ap.parse_args()
    models = backend_models(Path(a.testdata))
    for op, lst in handmade().items():
        models.setdefault(op, []).extend(lst)
    ort_version = json.loads(subprocess.run([a.node, "-e", "console.log(JSON.stringify(require('onnxruntime-node/package.json').version))"],
                                            cwd=HERE, capture_output=True, text=True, check=True).stdout)
    with tempfile.TemporaryDirectory(prefix="ort_op_table.") as tmp:
        jobs = []  # (op, opset, path)
        for op, lst in sorted(models.items()):
            for k, m in enumerate(lst):
                for opset in OPSETS:
                    p = os.path.join(tmp, f"{op}.{k}.{opset}.onnx")
                    with open(p, "wb") as fh:
                        fh.write(restamp(m, opset).SerializeToString())
                    jobs.append((op, opset, p))
        out = subprocess.run([a.node, str(HERE / "ort_load.js")], input="\n".join(p for _, _, p in jobs) + "\n",
                             cwd=HERE, capture_output=True, text=True, check=True).stdout.splitlines()
    results = {json.loads(line)["model"]: json.loads(line) for line in out}
    missing_re = re.compile(r"Could not find an implementation for (\w+)\((\d+)\)")
    table: dict[str, dict] = {}
    for op, opset, p in jobs:
        r = results.get(p)
        if r is None:
            continue
        row = table.setdefault(op, {"implemented": set(), "missing": {}})
        if r["ok"]:
            row["implemented"].add(opset)
            row["missing"].pop(str(opset), None)  # the other model's types were the ones missing
        elif (mm := missing_re.search(r.get("error", ""))) and mm.group(1) == op and opset not in row["implemented"]:
            row["missing"][str(opset)] = int(mm.group(2))
    ops = {}
    for op, row in sorted(table.items()):
        if not row["implemented"] and not row["missing"]:
            continue
        ops[op] = {"implemented": sorted(row["implemented"]), "missing": dict(sorted(row["missing"].items(), key=lambda kv: int(kv[0])))}
    lines = [
        f"// Generated by tools/peers/ort_op_table.py from ONNX Runtime {ort_version} (npm onnxruntime-node, "
        "CPUExecutionProvider): do not edit.",
        "// Per default-domain op: bit N of `implemented` set when ORT creates a session for a one-node model of",
        "// the op at opset N; bit N of `missing` when it reports no kernel (\"Could not find an implementation\")",
        f"// for every model tried. Opsets {OPSETS.start}..{OPSETS.stop - 1}; an op or opset in neither is unknown.",
    ]
    for op, row in sorted(ops.items()):
        imp = sum(1 << o for o in row["implemented"])
        mis = sum(1 << int(o) for o in row["missing"])
        lines.append(f'{{"{op}", 0x{imp:x}ull, 0x{mis:x}ull}},')
    text = "\n".join(lines) + "\n"
    n_missing = sum(len(r["missing"]) for r in ops.values())
    if a.check:
        old = Path(a.out).read_text() if Path(a.out).exists() else ""
        if old != text:
            print(f"{a.out}: ONNX Runtime {ort_version} disagrees with the committed table; regenerate it", file=sys.stderr)
            import difflib
            sys.stderr.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True), a.out, "ort"))
            return 1
        print(f"{a.out}: matches ONNX Runtime {ort_version} ({len(ops)} ops)")
        return 0
    tmp_out = a.out + ".tmp"
    Path(tmp_out).write_text(text)
    os.replace(tmp_out, a.out)
    print(f"{a.out}: {len(ops)} ops, {n_missing} (op, opset) pairs without a kernel in ONNX Runtime {ort_version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
