#!/usr/bin/python3
"""Reference shapes for tests/analysis: runs onnx.shape_inference on models and writes JSON.

usage: onnx_shapes.py [--strip-outputs] [--fix=name=N,...] OUT.json MODEL.onnx...

--fix=name=N,... replaces those dim_params of the graph inputs/outputs by constants.
--strip-outputs clears the declared shapes of graph outputs first (backend node tests declare
the exact shapes of their outputs; the test infers them and checks against the declaration).

OUT.json = {model_path: {"error": str} | {"values": {name: [elem_type, dims | null]}}}
for every node output of every graph (subgraphs included); dims entries are ints, dim_param
strings, or null (unknown). A value onnx could not type is absent.
"""
import json
import sys

import onnx
from onnx import shape_inference


def types_of(graph, out):
    declared = {}
    for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
        declared[vi.name] = vi
    for node in graph.node:
        for name in node.output:
            if name and name in declared:
                out[name] = describe(declared[name])
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                types_of(attr.g, out)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    types_of(g, out)


def describe(vi):
    t = vi.type
    if not t.HasField("tensor_type"):
        return None
    tt = t.tensor_type
    if not tt.HasField("shape"):
        return [tt.elem_type, None]
    dims = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            dims.append(d.dim_value)
        elif d.HasField("dim_param"):
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return [tt.elem_type, dims]


def main():
    args = sys.argv[1:]
    strip = "--strip-outputs" in args
    args = [a for a in args if a != "--strip-outputs"]
    fixed = {}
    for a in [a for a in args if a.startswith("--fix=")]:
        for item in a[len("--fix="):].split(","):
            k, v = item.split("=")
            fixed[k] = int(v)
    args = [a for a in args if not a.startswith("--fix=")]
    out_path, models = args[0], args[1:]
    result = {}
    for path in models:
        try:
            model = onnx.load(path, load_external_data=False)
            # Judge inference, not the file: drop declared intermediates and output shapes.
            del model.graph.value_info[:]
            for vi in list(model.graph.input) + list(model.graph.output):
                if vi.type.HasField("tensor_type"):
                    for d in vi.type.tensor_type.shape.dim:
                        if d.HasField("dim_param") and d.dim_param in fixed:
                            d.dim_value = fixed[d.dim_param]
            if strip:
                for o in model.graph.output:
                    if o.type.HasField("tensor_type"):
                        o.type.tensor_type.ClearField("shape")
            inferred = shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
            values = {}
            types_of(inferred.graph, values)
            result[path] = {"values": {k: v for k, v in values.items() if v is not None}}
        except Exception as e:  # noqa: BLE001 - reported per model
            result[path] = {"error": str(e).splitlines()[0] if str(e) else type(e).__name__}
    with open(out_path, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
