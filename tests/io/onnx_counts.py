"""Counts python-onnx sees in a model (reference for the inspect test). Usage: onnx_counts.py MODEL..."""
import collections, json, sys
import onnx

def walk(graph, ops):
    total = 0
    for node in graph.node:
        total += 1
        key = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"
        ops[key] += 1
        for a in node.attribute:
            for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                total += walk(g, ops)
    return total

out = {}
for path in sys.argv[1:]:
    m = onnx.load(path, load_external_data=False)
    ops = collections.Counter()
    total = walk(m.graph, ops)
    for f in m.functions:
        for node in f.node:
            total += 1
            key = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"
            ops[key] += 1
    out[path] = {"nodes": len(m.graph.node), "nodes_total": total, "initializers": len(m.graph.initializer),
                 "inputs": len(m.graph.input), "outputs": len(m.graph.output), "value_infos": len(m.graph.value_info),
                 "functions": len(m.functions), "ops": dict(ops), "ir_version": m.ir_version,
                 "initializer_bytes": sum(len(t.raw_data) for t in m.graph.initializer)}
json.dump(out, sys.stdout)
