#!/usr/bin/python3
"""Convert an fp32 ONNX model to fp16 the way deployment tools write them (onnxconverter-common's
`convert_float_to_float16(keep_io_types=True)`), with onnx + numpy only: test models for the
runtime's float16 path and its ONNX Runtime cross-check (no onnxconverter package here).

  /usr/bin/python3 tools/models/to_fp16.py MODEL OUT [--bfloat16]

With --bfloat16 the new type is bfloat16 (as mixed-precision exports of LLMs write them): the
same rules, rounding to nearest even; finite values that would round to infinity are clipped to
bfloat16's largest (float32's lowest, a mask fill, rounds to -inf otherwise), tiny ones are kept.

- float32 initializers, Constant values and ConstantOfShape fills become float16, except inputs
  the spec keeps float32 whatever the data type (Resize/Upsample `scales`);
- Cast(to=FLOAT) becomes Cast(to=FLOAT16), so computed masks and positions stay in the new type;
- the graph's float32 inputs and outputs keep their type: a Cast to float16 follows each input
  and a Cast back to float32 precedes each output (keep_io_types), so the same input files serve
  the fp32 and the fp16 model;
- intermediate value_info of float type is dropped (the types changed; consumers infer them).
Finite values beyond float16's range are clipped to +-65504 and nonzero values below 1e-7 to
+-1e-7, as the converters do (the script says which tensors were clipped at the top).
Subgraphs (If/Loop/Scan bodies) are converted the same way.
"""
import argparse
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# (op_type, input index) pairs that the spec types as float32 regardless of the data's type.
KEEP_FLOAT32 = {("Resize", 2), ("Upsample", 1)}


LOW = TensorProto.FLOAT16  # the new type: FLOAT16, or BFLOAT16 with --bfloat16


def to_bf16(t, name):
    """bfloat16 of a float32 tensor: the top 16 bits, rounded to nearest even (NaNs stay quiet).
    Finite values that would round to infinity (float32's lowest, the usual mask fill) become
    bfloat16's largest finite value, torch.finfo(torch.bfloat16).min as PyTorch's bfloat16
    models write it: -inf would make 0 * -inf = NaN in the mask arithmetic."""
    a = numpy_helper.to_array(t).astype(np.float32)
    big = np.float32(3.3895313892515355e38)  # 0x7f7f0000
    a = np.where(np.isfinite(a) & (np.abs(a) > big), np.sign(a) * big, a).astype(np.float32)
    u = np.atleast_1d(a).view(np.uint32).astype(np.uint64)  # no wrap-around in the sum
    s16, one = np.uint64(16), np.uint64(1)
    r = ((u + np.uint64(0x7FFF) + ((u >> s16) & one)) >> s16).astype(np.uint16)
    r = np.where(np.isnan(np.atleast_1d(a)), ((u >> s16) | np.uint64(0x40)).astype(np.uint16), r)
    out = TensorProto()
    out.name, out.data_type = name, TensorProto.BFLOAT16
    out.dims.extend(a.shape)
    out.raw_data = r.astype("<u2").tobytes()
    return out


def to_half(t, name, overflowed):
    """float16 of a float32 tensor, with the converters' clipping: finite values beyond float16's
    range become +-65504 (a mask filled with float32's lowest value stays a large negative number,
    where -inf would make 0 * -inf = NaN), and nonzero values below 1e-7 become +-1e-7
    (onnxconverter-common's min_positive_val: BERT's LayerNorm epsilon 1e-12 stays an epsilon
    instead of flushing to 0)."""
    if LOW == TensorProto.BFLOAT16:
        return to_bf16(t, t.name)
    a = numpy_helper.to_array(t)
    big = np.isfinite(a) & (np.abs(a) > 65504)
    tiny = (a != 0) & (np.abs(a) < 1e-7)
    if big.any():
        overflowed.append(name)
    a = np.where(big, np.sign(a) * 65504, np.where(tiny, np.sign(a) * 1e-7, a))
    return numpy_helper.from_array(a.astype(np.float16), t.name)


def float32_only(g):
    """Values that must stay float32: the KEEP_FLOAT32 inputs and everything they are computed from
    (Resize scales are often Shape -> Cast(FLOAT) -> Mul -> Concat chains)."""
    producer = {o: n for n in g.node for o in n.output}
    keep = {n.input[i] for n in g.node for (op, i) in KEEP_FLOAT32 if n.op_type == op and len(n.input) > i}
    todo = list(keep)
    while todo:
        n = producer.get(todo.pop())
        for x in n.input if n is not None else []:
            if x and x not in keep:
                keep.add(x)
                todo.append(x)
    return keep


def convert_graph(g, overflowed, top):
    keep = float32_only(g)
    for k, t in enumerate(g.initializer):
        if t.data_type == TensorProto.FLOAT and t.name not in keep:
            g.initializer[k].CopyFrom(to_half(t, t.name, overflowed))
    for n in g.node:
        kept = bool(n.output) and n.output[0] in keep
        for a in n.attribute:
            if n.op_type in ("Constant", "ConstantOfShape") and a.type == onnx.AttributeProto.TENSOR \
                    and a.t.data_type == TensorProto.FLOAT and not kept:
                a.t.CopyFrom(to_half(a.t, n.output[0], overflowed))
            elif n.op_type == "Constant" and a.name == "value_float" and not kept:
                v = a.f
                n.attribute.remove(a)
                scalar = numpy_helper.from_array(np.array(v, np.float32), "value")
                n.attribute.append(helper.make_attribute("value", to_half(scalar, "value", overflowed)))
                break
            elif n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT and not kept:
                a.i = LOW
            elif a.type == onnx.AttributeProto.GRAPH:
                convert_graph(a.g, overflowed, top=False)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for sg in a.graphs:
                    convert_graph(sg, overflowed, top=False)
    float_vi = [v for v in g.value_info if v.type.tensor_type.elem_type == TensorProto.FLOAT]
    for v in float_vi:
        g.value_info.remove(v)
    if not top:
        # A body's own inputs and outputs take the new type (its caller feeds and reads fp16).
        for v in list(g.input) + list(g.output):
            if v.type.tensor_type.elem_type == TensorProto.FLOAT:
                v.type.tensor_type.elem_type = LOW
        return
    inits = {t.name for t in g.initializer}
    names = {v for n in g.node for v in list(n.input) + list(n.output)} | inits | {v.name for v in g.input}

    def unique(base):
        name, k = base, 1
        while name in names:
            name, k = f"{base}_{k}", k + 1
        names.add(name)
        return name

    def rename(old, new, outputs):
        """Every read of `old` (and with `outputs` its producer's output) becomes `new`."""
        for n in g.node:
            for field in (n.input, n.output) if outputs else (n.input,):
                for i, x in enumerate(field):
                    if x == old:
                        field[i] = new

    head, tail = [], []
    for v in g.input:
        if v.name in inits or v.type.tensor_type.elem_type != TensorProto.FLOAT:
            continue
        half = unique(v.name + "_fp16")
        rename(v.name, half, outputs=False)
        head.append(helper.make_node("Cast", [v.name], [half], to=LOW, name=unique(v.name + "_to_fp16")))
    for v in g.output:  # an output read inside the graph too reads the float16 value
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            half = unique(v.name + "_fp16")
            rename(v.name, half, outputs=True)
            tail.append(helper.make_node("Cast", [half], [v.name], to=TensorProto.FLOAT, name=unique(v.name + "_to_fp32")))
    nodes = head + list(g.node) + tail
    del g.node[:]
    g.node.extend(nodes)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--bfloat16", action="store_true", help="convert to bfloat16 instead of float16")
    args = ap.parse_args()
    global LOW
    LOW = TensorProto.BFLOAT16 if args.bfloat16 else TensorProto.FLOAT16
    m = onnx.load(args.model)
    overflowed = []
    convert_graph(m.graph, overflowed, top=True)
    if overflowed:
        print(f"to_fp16: {len(overflowed)} tensors clipped to float16's range: {overflowed[:5]}", file=sys.stderr)
    onnx.save(m, args.out)


if __name__ == "__main__":
    main()
