#!/usr/bin/python3
"""Quantize an fp32 ONNX model to int8 the way ONNX Runtime's quantization tool writes them, with
onnx + numpy only (test models for the runtime's int8 kernels; no onnxruntime Python package).

  /usr/bin/python3 tools/models/quantize.py MODEL OUT --mode dynamic
  /usr/bin/python3 tools/models/quantize.py MODEL OUT --mode qdq --runner build/onnxforge [--calib-seeds 3]

dynamic (as onnxruntime.quantization.quantize_dynamic with per_channel=True writes them): every
  MatMul / Gemm / Conv with a constant fp32 weight becomes
      DynamicQuantizeLinear(x) -> MatMulInteger / ConvInteger(x_q, W_q, x_zp, W_zp)
        -> Cast(float) -> Mul(x_scale * W_scale) (-> Add(bias))
  with W_q int8, symmetric (zero point 0) per output channel (MatMul/Gemm: per column of B; Conv:
  per output channel). One DynamicQuantizeLinear per activation tensor, shared by its readers.
qdq (static, as quantize_static in QDQ format writes them): the same nodes read their activation
  through QuantizeLinear -> DequantizeLinear (uint8, per tensor, range from calibration runs of
  the fp32 model on `--calib-seeds` generated inputs through `--runner run`) and their weight
  through DequantizeLinear (int8 symmetric per output channel, axis 0 for Conv, 1 for MatMul).
  Biases stay fp32.
qoperator (static, QuantFormat.QOperator): QLinearConv, com.microsoft QGemm / QLinearAdd /
  QLinearMul / QLinearGlobalAveragePool / QLinearAveragePool / QLinearConcat / QLinearSigmoid /
  QLinearLeakyRelu on uint8 activations (per tensor, calibrated like qdq) and int8 per-channel
  weights, int32 biases; Relu/Clip after a Conv/Gemm/Add folded into its output range; pooling
  and reshaping ops on the 8-bit tensors; anything else in float (quantize_qoperator).
Weights are stored inline unless the result exceeds 2 GB.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto


def per_channel_int8(w, axis):
    """Symmetric int8 per channel along `axis`: (q, scale) with w ~= q * scale."""
    red = tuple(i for i in range(w.ndim) if i != axis)
    amax = np.max(np.abs(w), axis=red) if red else np.abs(w)
    scale = (amax / 127.0).astype(np.float32)
    scale[scale == 0] = 1.0
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(np.rint(w / scale.reshape(shape)), -127, 127).astype(np.int8)
    return q, scale


class Rewriter:
    def __init__(self, model):
        self.model = model
        self.graph = model.graph
        self.inits = {t.name: t for t in self.graph.initializer}
        self.new_inits = []
        self.names = set(self.inits) | {v for n in self.graph.node for v in list(n.input) + list(n.output)}
        self.shared = {}  # activation name -> its quantized triple / dequantized name
        self.producer = {o: n for n in self.graph.node for o in n.output}

    def constant(self, name):
        """An initializer's array, also through an exporter's Transpose of one (folded here as
        ORT's quantizer sees it after its graph optimizations), or None."""
        if name in self.inits:
            return numpy_helper.to_array(self.inits[name])
        n = self.producer.get(name)
        if n is not None and n.op_type == "Transpose" and n.input[0] in self.inits:
            perm = [a for a in n.attribute if a.name == "perm"]
            a = numpy_helper.to_array(self.inits[n.input[0]])
            return np.transpose(a, list(perm[0].ints) if perm else None)
        return None

    def unique(self, base):
        name, k = base, 1
        while name in self.names:
            name, k = f"{base}_{k}", k + 1
        self.names.add(name)
        return name

    def init(self, base, array):
        name = self.unique(base)
        self.new_inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def weight(self, node):
        """(W as [K, N] for MatMul/Gemm or [M, C/g, ...] for Conv, bias or None, kind) or None."""
        def const(i):
            return self.constant(node.input[i]) if len(node.input) > i and node.input[i] else None
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        w = const(1)
        if w is None or w.dtype != np.float32:
            return None
        if node.op_type == "MatMul" and w.ndim == 2:
            return w, None, "matmul"
        if node.op_type == "Gemm" and w.ndim == 2 and not attrs.get("transA", 0) and attrs.get("alpha", 1.0) == 1.0:
            bias = const(2)
            if len(node.input) > 2 and node.input[2] and bias is None:
                return None
            if bias is not None:
                bias = bias * np.float32(attrs.get("beta", 1.0))
            return (w.T if attrs.get("transB", 0) else w), bias, "matmul"
        if node.op_type == "Conv":
            bias = const(2)
            if len(node.input) > 2 and node.input[2] and bias is None:
                return None
            return w, bias, "conv"
        return None


def quantize_dynamic(model):
    rw = Rewriter(model)
    out_nodes = []
    for node in rw.graph.node:
        found = rw.weight(node)
        if found is None:
            out_nodes.append(node)
            continue
        w, bias, kind = found
        x, y = node.input[0], node.output[0]
        if x not in rw.shared:
            q, s, z = rw.unique(x + "_quantized"), rw.unique(x + "_scale"), rw.unique(x + "_zero_point")
            out_nodes.append(helper.make_node("DynamicQuantizeLinear", [x], [q, s, z], name=rw.unique(x + "_QuantizeLinear")))
            rw.shared[x] = (q, s, z)
        xq, xs, xz = rw.shared[x]
        base = node.name or y
        wq, ws = per_channel_int8(w, 1 if kind == "matmul" else 0)
        wq_name = rw.init(node.input[1] + "_quantized", wq)
        # Symmetric weights: the zero point is 0 for every channel. ConvInteger's is a scalar (ORT's
        # kernel rejects a per-channel vector), MatMulInteger's one per column as ORT writes it.
        wz_name = rw.init(node.input[1] + "_zero_point", np.zeros(ws.shape if kind == "matmul" else (), np.int8))
        ints = rw.unique(base + "_output_quantized")
        if kind == "matmul":
            out_nodes.append(helper.make_node("MatMulInteger", [xq, wq_name, xz, wz_name], [ints], name=rw.unique(base + "_quant")))
            ws_name = rw.init(node.input[1] + "_scale", ws)
        else:
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            out_nodes.append(helper.make_node("ConvInteger", [xq, wq_name, xz, wz_name], [ints],
                                              name=rw.unique(base + "_quant"), **attrs))
            ws_name = rw.init(node.input[1] + "_scale", ws.reshape([-1] + [1] * (w.ndim - 2)))
        cast = rw.unique(base + "_output_quantized_cast_output")
        out_nodes.append(helper.make_node("Cast", [ints], [cast], to=TensorProto.FLOAT, name=rw.unique(base + "_output_quantized_cast")))
        scales = rw.unique(base + "_scales_mul")
        out_nodes.append(helper.make_node("Mul", [xs, ws_name], [scales], name=rw.unique(base + "_scales_mul_node")))
        if bias is None:
            out_nodes.append(helper.make_node("Mul", [cast, scales], [y], name=rw.unique(base + "_output_mul")))
        else:
            mul = rw.unique(base + "_output_mul_output")
            out_nodes.append(helper.make_node("Mul", [cast, scales], [mul], name=rw.unique(base + "_output_mul")))
            b = bias if kind == "matmul" else bias.reshape([-1] + [1] * (w.ndim - 2))
            out_nodes.append(helper.make_node("Add", [mul, rw.init(base + "_bias", b.astype(np.float32))], [y],
                                              name=rw.unique(base + "_bias_add")))
    return rw, out_nodes


def calibrate(model_path, names, runner, seeds):
    """min/max of each named value over `seeds` runs of the fp32 model through `runner run`."""
    model = onnx.load(model_path)
    have = {o.name for o in model.graph.output}
    for n in names:
        if n not in have:
            model.graph.output.append(helper.make_empty_tensor_value_info(n))
    ranges = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "calib.onnx")
        onnx.save(model, path)
        for seed in range(seeds):
            out = os.path.join(tmp, f"out{seed}")
            r = subprocess.run([runner, "run", path, "--seed", str(seed), "--out", out, "--json"], capture_output=True, text=True)
            if r.returncode:
                sys.exit(f"calibration run failed: {r.stderr.strip()[-500:]}")
            for o in json.loads(r.stdout)["outputs"]:
                if o["name"] not in names:
                    continue
                a = np.load(os.path.join(out, "".join(c if c.isalnum() or c in "._-" else "_" for c in o["name"]) + ".npy"))
                lo, hi = float(a.min()), float(a.max())
                old = ranges.get(o["name"], (lo, hi))
                ranges[o["name"]] = (min(lo, old[0]), max(hi, old[1]))
    return ranges


def quantize_qdq(model, model_path, runner, seeds):
    rw = Rewriter(model)
    targets = [n for n in rw.graph.node if rw.weight(n) is not None]
    ranges = calibrate(model_path, sorted({n.input[0] for n in targets}), runner, seeds)
    out_nodes = []
    target_ids = {id(n) for n in targets}
    for node in rw.graph.node:
        if id(node) not in target_ids:
            out_nodes.append(node)
            continue
        w, bias, kind = rw.weight(node)
        x = node.input[0]
        if x not in rw.shared:
            lo, hi = ranges[x]
            lo, hi = min(lo, 0.0), max(hi, 0.0)
            scale = np.float32((hi - lo) / 255.0) if hi > lo else np.float32(1.0)
            zp = np.uint8(np.clip(np.rint(-lo / scale), 0, 255))
            s_name, z_name = rw.init(x + "_scale", np.array(scale, np.float32)), rw.init(x + "_zero_point", np.array(zp, np.uint8))
            q, dq = rw.unique(x + "_QuantizeLinear_Output"), rw.unique(x + "_DequantizeLinear_Output")
            out_nodes.append(helper.make_node("QuantizeLinear", [x, s_name, z_name], [q], name=rw.unique(x + "_QuantizeLinear")))
            out_nodes.append(helper.make_node("DequantizeLinear", [q, s_name, z_name], [dq], name=rw.unique(x + "_DequantizeLinear")))
            rw.shared[x] = dq
        axis = 1 if kind == "matmul" else 0
        wq, ws = per_channel_int8(w, axis)
        wq_name = rw.init(node.input[1] + "_quantized", wq)
        w_dq = rw.unique(node.input[1] + "_DequantizeLinear_Output")
        out_nodes.append(helper.make_node(
            "DequantizeLinear", [wq_name, rw.init(node.input[1] + "_scale", ws), rw.init(node.input[1] + "_zero_point", np.zeros(ws.shape, np.int8))],
            [w_dq], axis=axis, name=rw.unique(node.input[1] + "_DequantizeLinear")))
        if node.op_type == "Gemm":
            # The weight is now [K, N]: a MatMul (+ Add of the bias).
            base = node.name or node.output[0]
            if bias is None:
                out_nodes.append(helper.make_node("MatMul", [rw.shared[x], w_dq], [node.output[0]], name=rw.unique(base + "_matmul")))
            else:
                mm = rw.unique(base + "_matmul_output")
                out_nodes.append(helper.make_node("MatMul", [rw.shared[x], w_dq], [mm], name=rw.unique(base + "_matmul")))
                out_nodes.append(helper.make_node("Add", [mm, rw.init(base + "_bias", bias.astype(np.float32))], [node.output[0]],
                                                  name=rw.unique(base + "_bias_add")))
        else:
            inputs = [rw.shared[x], w_dq] + list(node.input[2:])
            new = helper.make_node(node.op_type, inputs, list(node.output), name=node.name)
            new.attribute.extend(node.attribute)
            out_nodes.append(new)
    return rw, out_nodes


PASSTHROUGH = {"MaxPool", "Flatten", "Reshape", "Transpose", "Squeeze", "Unsqueeze"}  # the same op on 8 bits
FUSED_ACT = {"Relu", "Clip"}


def quantize_qoperator(model, model_path, runner, seeds):
    """QOperator format (quantize_static with QuantFormat.QOperator): Conv -> QLinearConv, Gemm ->
    com.microsoft QGemm, Add/Mul -> QLinearAdd/QLinearMul, GlobalAveragePool / AveragePool ->
    QLinearGlobalAveragePool / QLinearAveragePool, Concat -> QLinearConcat, Sigmoid / LeakyRelu ->
    QLinearSigmoid / QLinearLeakyRelu, a Relu or Clip right after a Conv/Gemm/Add folded into its
    output's range (zero point 0, top at the calibrated maximum, as ORT's quantizer does),
    MaxPool/Flatten/Reshape/Transpose/Squeeze/Unsqueeze on the 8-bit tensor; everything else in
    float behind a DequantizeLinear. Activations uint8 per tensor from calibration, weights int8
    symmetric per output channel, biases int32 at input_scale * weight_scale."""
    rw = Rewriter(model)
    g = rw.graph
    consumers = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    outputs = {o.name for o in g.output}
    consts = set(rw.inits) | {o for n in g.node if n.op_type == "Constant" for o in n.output}
    names = sorted({v.name for v in g.input if v.name not in rw.inits} |
                   {o for n in g.node if n.op_type != "Constant" for o in n.output})
    ranges = calibrate(model_path, names, runner, seeds)
    params = {}   # float value -> (scale name, zero point name, scale)
    qname = {}    # float value -> its uint8 tensor's name
    have_float = {v.name for v in g.input} | consts
    out_nodes, skip = [], set()

    def qparams(v):
        if v not in params:
            lo, hi = ranges[v]
            lo, hi = min(lo, 0.0), max(hi, 0.0)
            scale = np.float32((hi - lo) / 255.0) if hi > lo else np.float32(1.0)
            zp = np.uint8(np.clip(np.rint(-lo / scale), 0, 255))
            params[v] = (scalar(v + "_scale", np.array(scale, np.float32)), scalar(v + "_zero_point", np.array(zp, np.uint8)), scale)
        return params[v]

    def scalar(base, array):  # 0-d, as the contrib ops' schemas require (rw.init makes it [1])
        name = rw.unique(base)
        rw.new_inits.append(numpy_helper.from_array(array, name))
        return name

    def quantized(v):
        if v not in qname:
            s, z, _ = qparams(v)
            qname[v] = rw.unique(v + "_quantized")
            out_nodes.append(helper.make_node("QuantizeLinear", [v, s, z], [qname[v]], name=rw.unique(v + "_QuantizeLinear")))
        return qname[v]

    def as_float(v):
        if v and v not in have_float and v in qname:
            s, z, _ = params[v]
            out_nodes.append(helper.make_node("DequantizeLinear", [qname[v], s, z], [v], name=rw.unique(v + "_DequantizeLinear")))
            have_float.add(v)
        return v

    def fused_act(node):
        """The Relu/Clip reading this node's output alone, whose output then stands for it."""
        y = node.output[0]
        users = consumers.get(y, [])
        if y in outputs or len(users) != 1 or users[0].op_type not in FUSED_ACT:
            return None
        return users[0]

    def emit(op, ins, out, domain="", **attrs):
        y = rw.unique(out + "_quantized")
        out_nodes.append(helper.make_node(op, ins, [y], name=rw.unique(out + "_" + op), domain=domain, **attrs))
        qname[out] = y

    def triple(v):
        s, z, _ = qparams(v)
        return [quantized(v), s, z]

    for node in g.node:
        if id(node) in skip:
            continue
        op = node.op_type
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        data_in = [i for i in node.input[:1] if i]
        found = rw.weight(node) if op in ("Conv", "Gemm") else None
        if found is not None and node.input[0] not in consts:
            w, bias, kind = found
            act = fused_act(node)
            out = act.output[0] if act else node.output[0]
            if act:
                skip.add(id(act))
            x = node.input[0]
            xq, xs, xz = triple(x)
            ys, yz, _ = qparams(out)
            x_scale = params[x][2]
            if kind == "conv":
                wq, ws = per_channel_int8(w, 0)
                ins = [xq, xs, xz, rw.init(node.input[1] + "_quantized", wq), rw.init(node.input[1] + "_scale", ws),
                       rw.init(node.input[1] + "_zero_point", np.zeros(ws.shape, np.int8)), ys, yz]
                if bias is not None:
                    ins.append(rw.init(node.input[1] + "_bias_quantized", np.rint(bias / (x_scale * ws)).astype(np.int32)))
                emit("QLinearConv", ins, out, **attrs)
            else:  # Gemm: B as [N, K] (transB = 1), scales per output column
                wq, ws = per_channel_int8(w, 1)
                ins = [xq, xs, xz, rw.init(node.input[1] + "_quantized", np.ascontiguousarray(wq.T)), rw.init(node.input[1] + "_scale", ws),
                       rw.init(node.input[1] + "_zero_point", np.zeros(ws.shape, np.int8))]
                ins.append(rw.init(node.input[1] + "_bias_quantized", np.rint(bias / (x_scale * ws)).astype(np.int32)) if bias is not None else "")
                ins += [ys, yz]
                emit("QGemm", ins, out, domain="com.microsoft", transB=1)
            continue
        if op in ("Add", "Mul") and len(node.input) == 2 and not any(i in consts for i in node.input):
            act = fused_act(node) if op == "Add" else None
            out = act.output[0] if act else node.output[0]
            if act:
                skip.add(id(act))
            emit("QLinear" + op, triple(node.input[0]) + triple(node.input[1]) + list(qparams(out)[:2]), out, domain="com.microsoft")
            continue
        if op in ("GlobalAveragePool", "AveragePool", "Sigmoid", "LeakyRelu") and node.input[0] not in consts:
            out = node.output[0]
            emit("QLinear" + op, triple(node.input[0]) + list(qparams(out)[:2]), out, domain="com.microsoft", **attrs)
            continue
        if op == "Concat" and not any(i in consts for i in node.input):
            out = node.output[0]
            ins = list(qparams(out)[:2])
            for i in node.input:
                ins += triple(i)
            emit("QLinearConcat", ins, out, domain="com.microsoft", **attrs)
            continue
        if op in PASSTHROUGH and data_in and data_in[0] in qname and node.input[0] not in outputs:
            out = node.output[0]
            y = rw.unique(out + "_quantized")
            out_nodes.append(helper.make_node(op, [qname[data_in[0]]] + list(node.input[1:]), [y], name=rw.unique(out + "_" + op), **attrs))
            qname[out] = y
            params[out] = params[data_in[0]]
            continue
        for i in node.input:
            as_float(i)
        out_nodes.append(node)
        have_float.update(node.output)
    for o in g.output:
        as_float(o.name)
    has_ms = any(imp.domain == "com.microsoft" for imp in model.opset_import)
    if not has_ms:
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return rw, out_nodes


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--mode", choices=["dynamic", "qdq", "qoperator"], required=True)
    ap.add_argument("--runner", help="onnxforge executable (qdq calibration)")
    ap.add_argument("--calib-seeds", type=int, default=3)
    args = ap.parse_args()
    model = onnx.load(args.model)
    if args.mode != "dynamic" and not args.runner:
        sys.exit(f"--mode {args.mode} needs --runner (the onnxforge executable) for calibration")
    if args.mode == "dynamic":
        rw, nodes = quantize_dynamic(model)
    elif args.mode == "qdq":
        rw, nodes = quantize_qdq(model, args.model, args.runner, args.calib_seeds)
    else:
        rw, nodes = quantize_qoperator(model, args.model, args.runner, args.calib_seeds)
    # Nodes nothing reads any more (the weights' Transposes) and weights only they read are dropped.
    outputs = {o.name for o in model.graph.output}
    while True:
        used = {i for n in nodes for i in n.input} | outputs
        live = [n for n in nodes if any(o in used for o in n.output)]
        if len(live) == len(nodes):
            break
        nodes = live
    kept = [t for t in model.graph.initializer if t.name in used] + rw.new_inits
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx") and imp.version < 13:
            imp.version = 13  # per-axis DequantizeLinear
    onnx.checker.check_model(model)
    size = model.ByteSize()
    if size > 2_000_000_000:
        onnx.save(model, args.out, save_as_external_data=True, location=os.path.basename(args.out) + ".data")
    else:
        onnx.save(model, args.out)
    n_int = sum(n.op_type in ("MatMulInteger", "ConvInteger", "DequantizeLinear") or n.op_type.startswith("QLinear") or
                n.op_type == "QGemm" for n in nodes)
    print(json.dumps({"model": args.out, "mode": args.mode, "bytes": os.path.getsize(args.out), "quantized_nodes": n_int}))


if __name__ == "__main__":
    main()
