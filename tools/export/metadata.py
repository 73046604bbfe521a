"""NodeProto.metadata_props (field 9) for onnx builds that predate it (Debian's onnx 1.12).

Newer onnx Python classes have the field and we use it. Older ones do not: we merge the raw
protobuf bytes of field 9 into the node (protobuf keeps unknown fields and re-serializes them
unchanged) and read them back with a tiny wire-format parser.  See REFERENCE.md for the numbers:
NodeProto.metadata_props = 9, StringStringEntryProto key = 1, value = 2.
"""
from __future__ import annotations

from typing import Dict, Iterator, List, Mapping, Tuple

import onnx

NODE_METADATA_FIELD = 9
KEY_TAG = "onnxforge.hierarchy.tag"
KEY_MODULE = "onnxforge.hierarchy.module"
KEY_DEPTH = "onnxforge.hierarchy.depth"
KEY_SOURCE = "onnxforge.hierarchy.source"


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _len_field(field: int, data: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def encode_metadata(props: Mapping[str, str]) -> bytes:
    """Wire bytes of `repeated StringStringEntryProto metadata_props = 9` for `props`."""
    return b"".join(
        _len_field(NODE_METADATA_FIELD, _len_field(1, k.encode()) + _len_field(2, str(v).encode()))
        for k, v in props.items())


def _read_varint(buf: bytes, i: int) -> Tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def _fields(buf: bytes) -> Iterator[Tuple[int, int, int, int]]:
    """Yield (field number, wire type, start, end) of each top-level field; [start, end) is the
    whole field including its tag, so fields can be cut out."""
    i, n = 0, len(buf)
    while i < n:
        start = i
        key, i = _read_varint(buf, i)
        field, wt = key >> 3, key & 7
        if wt == 0:
            _, i = _read_varint(buf, i)
        elif wt == 1:
            i += 8
        elif wt == 2:
            ln, i = _read_varint(buf, i)
            i += ln
        elif wt == 5:
            i += 4
        else:  # groups never occur in onnx.proto
            raise ValueError(f"unsupported protobuf wire type {wt} in field {field}")
        yield field, wt, start, i


def _decode_entry(data: bytes) -> Tuple[str, str]:
    k = v = ""
    for field, wt, s, e in _fields(data):
        if wt != 2:
            continue
        ln, p = _read_varint(data, s + len(_varint(field << 3 | 2)))
        text = data[p:p + ln].decode()
        if field == 1:
            k = text
        elif field == 2:
            v = text
    return k, v


def _raw_entries(node: onnx.NodeProto) -> List[Tuple[str, str, int, int]]:
    buf = node.SerializeToString()
    out = []
    for field, wt, s, e in _fields(buf):
        if field == NODE_METADATA_FIELD and wt == 2:
            ln, p = _read_varint(buf, s + 1)
            out.append((*_decode_entry(buf[p:p + ln]), s, e))
    return out


def get_node_metadata(node: onnx.NodeProto) -> Dict[str, str]:
    """metadata_props of `node` as a dict (later duplicates win, as in onnx)."""
    if hasattr(node, "metadata_props"):
        return {p.key: p.value for p in node.metadata_props}
    return {k: v for k, v, _, _ in _raw_entries(node)}


def set_node_metadata(node: onnx.NodeProto, props: Mapping[str, str]) -> None:
    """Set (replace) the given keys in `node`'s metadata_props, keeping other keys."""
    if hasattr(node, "metadata_props"):
        keep = [(p.key, p.value) for p in node.metadata_props if p.key not in props]
        del node.metadata_props[:]
        for k, v in keep + [(k, str(v)) for k, v in props.items()]:
            e = node.metadata_props.add()
            e.key, e.value = k, v
        return
    old = _raw_entries(node)
    if any(k in props for k, _, _, _ in old):  # cut the stale entries out of the node's bytes
        buf = node.SerializeToString()
        cut, pos = bytearray(), 0
        for k, _, s, e in old:
            if k in props:
                cut += buf[pos:s]
                pos = e
        cut += buf[pos:]
        node.Clear()
        node.ParseFromString(bytes(cut))
    node.MergeFromString(encode_metadata(props))


def iter_graph_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """All nodes of `graph`, depth-first into subgraphs (If/Loop/Scan bodies)."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from iter_graph_nodes(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from iter_graph_nodes(g)


def read_hierarchy(model) -> Dict[str, Dict[str, str]]:
    """node name -> its onnxforge.hierarchy.* metadata, for a ModelProto or a path."""
    if isinstance(model, (str, bytes)) or hasattr(model, "__fspath__"):
        model = onnx.load(model, load_external_data=False)
    out = {}
    for node in iter_graph_nodes(model.graph):
        md = {k: v for k, v in get_node_metadata(node).items() if k.startswith("onnxforge.hierarchy.")}
        if md:
            out[node.name] = md
    return out
