"""R7: a tagged export must equal a plain torch.onnx.export except for metadata."""
from __future__ import annotations

from typing import List

import onnx

from .metadata import NODE_METADATA_FIELD, _fields, iter_graph_nodes


def _strip_node(node: onnx.NodeProto) -> None:
    if hasattr(node, "metadata_props"):
        del node.metadata_props[:]
        return
    buf = node.SerializeToString()
    kept = b"".join(buf[s:e] for f, _, s, e in _fields(buf) if f != NODE_METADATA_FIELD)
    if len(kept) != len(buf):
        node.Clear()
        node.ParseFromString(kept)


def strip_metadata(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` without node metadata_props and model metadata_props."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    del m.metadata_props[:]
    for node in iter_graph_nodes(m.graph):
        _strip_node(node)
    return m


def diff_models(a, b, limit: int = 10) -> List[str]:
    """Differences between two models other than metadata; [] means identical (R7)."""
    a = strip_metadata(a if isinstance(a, onnx.ModelProto) else onnx.load(a, load_external_data=False))
    b = strip_metadata(b if isinstance(b, onnx.ModelProto) else onnx.load(b, load_external_data=False))
    if a.SerializeToString() == b.SerializeToString():
        return []
    out = []
    for f in ("ir_version", "producer_name", "producer_version", "domain", "model_version", "doc_string"):
        if getattr(a, f) != getattr(b, f):
            out.append(f"model.{f}: {getattr(a, f)!r} != {getattr(b, f)!r}")
    if list(a.opset_import) != list(b.opset_import):
        out.append("opset_import differs")
    ga, gb = a.graph, b.graph
    for f in ("input", "output", "value_info", "initializer", "sparse_initializer"):
        la, lb = list(getattr(ga, f)), list(getattr(gb, f))
        if len(la) != len(lb):
            out.append(f"graph.{f}: {len(la)} != {len(lb)} entries")
        for i, (x, y) in enumerate(zip(la, lb)):
            if x != y:
                out.append(f"graph.{f}[{i}] ({getattr(x, 'name', '')}) differs")
    na, nb = list(iter_graph_nodes(ga)), list(iter_graph_nodes(gb))
    if len(na) != len(nb):
        out.append(f"node count {len(na)} != {len(nb)}")
    for i, (x, y) in enumerate(zip(na, nb)):
        if x != y:
            out.append(f"node {i}: {x.op_type} {x.name!r} vs {y.op_type} {y.name!r} "
                       f"(inputs {list(x.input) == list(y.input)}, outputs {list(x.output) == list(y.output)}, "
                       f"attributes {list(x.attribute) == list(y.attribute)})")
    return (out or ["serialized bytes differ (field order or unknown fields)"])[:limit]
