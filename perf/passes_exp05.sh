#!/usr/bin/env bash
# Experiment 05 (M9 plan): ways to encode a fused Conv+Relu in an ONNX file, each run in ONNX
# Runtime (npm onnxruntime-node, CPU) against the plain Conv → Relu model: accepted? max_diff?
#   perf/passes_exp05.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=$(mktemp -d /tmp/exp05.XXXXXX)
/usr/bin/python3 - "$DIR" <<'PY'
import sys, numpy as np, onnx
from onnx import TensorProto, helper as h, numpy_helper as nh
d = sys.argv[1]
rng = np.random.default_rng(0)
W = nh.from_array(rng.standard_normal((8, 4, 3, 3)).astype(np.float32), "W")
B = nh.from_array(rng.standard_normal(8).astype(np.float32), "B")
x = h.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 16, 16])
y = h.make_tensor_value_info("y", TensorProto.FLOAT, None)
def model(nodes, name, inits=(W, B), opsets=(("", 17),)):
    g = h.make_graph(nodes, name, [x], [y], list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid(a, b) for a, b in opsets])
    m.ir_version = 8
    onnx.save(m, f"{d}/{name}.onnx")
conv = lambda out="c", **kw: h.make_node("Conv", ["x", "W", "B"], [out], pads=[1, 1, 1, 1], **kw)
model([conv(), h.make_node("Relu", ["c"], ["y"])], "baseline")
model([conv("y", activation="Relu")], "a_relu_removed_custom_attribute")
model([conv(activation="Relu"), h.make_node("Relu", ["c"], ["y"])], "b_annotation_attribute")
zero = nh.from_array(np.array(0, np.float32), "zero")
model([conv(), h.make_node("Clip", ["c", "zero"], ["y"])], "c_relu_as_clip_0_inf", inits=(W, B, zero))
model([h.make_node("FusedConv", ["x", "W", "B"], ["y"], domain="com.onnxforge", pads=[1, 1, 1, 1], activation="Relu")],
      "d_two_model_fused_half", opsets=(("", 17), ("com.onnxforge", 1)))
n = conv()
n.metadata_props.add(key="onnxforge.epilogue", value="Relu") if hasattr(n, "metadata_props") else None
model([n, h.make_node("Relu", ["c"], ["y"])], "e_node_metadata_annotation")
if not hasattr(n, "metadata_props"):  # onnx 1.12 lacks NodeProto.metadata_props (field 9): splice it in
    import struct
    m = onnx.load(f"{d}/e_node_metadata_annotation.onnx")
    entry = b"\x0a" + bytes([len("onnxforge.epilogue")]) + b"onnxforge.epilogue" + b"\x12\x04Relu"
    extra = b"\x4a" + bytes([len(entry)]) + entry
    node0 = m.graph.node[0]
    raw = node0.SerializeToString() + extra
    node0.ParseFromString(raw)  # unknown field kept by protobuf
    onnx.save(m, f"{d}/e_node_metadata_annotation.onnx")
model([h.make_node("FusedConv", ["x", "W", "B"], ["y"], domain="com.microsoft", pads=[1, 1, 1, 1], activation="Relu")],
      "f_ort_contrib_fusedconv", opsets=(("", 17), ("com.microsoft", 1)))
np.random.seed(1)
PY
cat > "$DIR/run.js" <<'JS'
const ort = require(process.argv[2]);
const fs = require('fs');
(async () => {
  const dir = process.argv[3];
  const x = new ort.Tensor('float32', Float32Array.from({length: 4 * 16 * 16}, (_, i) => Math.sin(i * 0.37) * 2), [1, 4, 16, 16]);
  const base = await ort.InferenceSession.create(`${dir}/baseline.onnx`, {graphOptimizationLevel: 'disabled'});
  const ref = (await base.run({x})).y.data;
  for (const f of fs.readdirSync(dir).filter((f) => f.endsWith('.onnx')).sort()) {
    let line = f.padEnd(40);
    try {
      const s = await ort.InferenceSession.create(`${dir}/${f}`, {graphOptimizationLevel: 'disabled'});
      const y = (await s.run({x})).y.data;
      let d = 0;
      for (let i = 0; i < y.length; i++) d = Math.max(d, Math.abs(y[i] - ref[i]));
      line += `accepted  max_diff ${d}`;
    } catch (e) {
      line += `REJECTED  ${String(e.message).split('\n')[0].slice(0, 110)}`;
    }
    console.log(line);
  }
})();
JS
node "$DIR/run.js" "$ROOT/tools/peers/node_modules/onnxruntime-node" "$DIR"
