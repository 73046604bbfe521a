#!/usr/bin/python3
"""Int8 conv vs fp32 conv of the same shape through `onnxforge bench` (issue 18: int8 conv at >= 2x
the fp32 conv with VNNI). Per shape, three one-node models: Conv (float32 x, w, bias), ConvInteger
(uint8 x and w with zero points, as ISNet's quantize_dynamic twin has them) and the dynamic-quant
chain DynamicQuantizeLinear -> ConvInteger -> Cast -> Mul (what runs per conv in such a model,
the dequantize fused by the plan). Rounds alternate the variants; medians per variant, then
fp32 / int8 time ratios.

  /usr/bin/python3 perf/int8_conv_vs_fp32.py BUILD_DIR [--rounds 5] [--iters 5] [--threads 2]
"""
import argparse, json, os, statistics, subprocess, sys, tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# name, C, M, H, W, dilation: ResNet's 56x56x64 3x3 (the conv3x3 GEMM shape 3136x64x576 of
# bench_int8_gemm) and ISNet's 64-channel 3x3s at 256x256 and dilation 2.
SHAPES = [("resnet 64x56x56 3x3", 64, 64, 56, 56, 1),
          ("isnet 64x256x256 3x3", 64, 64, 256, 256, 1),
          ("isnet 64x128x128 3x3 d2", 64, 64, 128, 128, 2)]


def models(C, M, H, W, d, out):
    rng = np.random.default_rng(0)
    pads = [d, d, d, d]
    attrs = dict(kernel_shape=[3, 3], pads=pads, dilations=[d, d])
    w = rng.standard_normal((M, C, 3, 3)).astype(np.float32) * 0.05
    b = rng.standard_normal(M).astype(np.float32)
    g = helper.make_graph([helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)], "fp32",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, W])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    paths = {}
    paths["fp32"] = os.path.join(out, "fp32.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), paths["fp32"])
    wq = rng.integers(0, 256, (M, C, 3, 3), dtype=np.uint8)
    inits = [numpy_helper.from_array(wq, "wq"), numpy_helper.from_array(np.array(131, np.uint8), "wz"),
             numpy_helper.from_array(np.array(0.01, np.float32), "ws")]
    g = helper.make_graph([helper.make_node("ConvInteger", ["xq", "wq", "xz", "wz"], ["y"], **attrs)], "int8",
                          [helper.make_tensor_value_info("xq", TensorProto.UINT8, [1, C, H, W])],
                          [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
                          inits + [numpy_helper.from_array(np.array(117, np.uint8), "xz")])
    paths["int8"] = os.path.join(out, "int8.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), paths["int8"])
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             helper.make_node("ConvInteger", ["xq", "wq", "xz", "wz"], ["acc"], **attrs),
             helper.make_node("Cast", ["acc"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["xs", "ws"], ["s"]),
             helper.make_node("Mul", ["f", "s"], ["y"])]
    g = helper.make_graph(nodes, "dyn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, W])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    paths["dyn"] = os.path.join(out, "dyn.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), paths["dyn"])
    return paths


def bench(binary, model, threads, iters):
    r = subprocess.run([binary, "bench", model, "--threads", str(threads), "--iters", str(iters), "--warmup", "1",
                        "--json"], check=True, capture_output=True, text=True)
    return json.loads(r.stdout)["median_ms"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    binary = os.path.join(a.build, "onnxforge")
    print(f"# threads {a.threads}, {a.rounds} rounds x {a.iters} iterations, medians (ms)")
    print(f"{'shape':26} {'fp32':>9} {'int8':>9} {'dyn':>9} {'fp32/int8':>10} {'fp32/dyn':>9}")
    for name, C, M, H, W, d in SHAPES:
        with tempfile.TemporaryDirectory() as tmp:
            paths = models(C, M, H, W, d, tmp)
            t = {k: [] for k in paths}
            for _ in range(a.rounds):
                for k, p in paths.items():
                    t[k].append(bench(binary, p, a.threads, a.iters))
            m = {k: statistics.median(v) for k, v in t.items()}
            print(f"{name:26} {m['fp32']:9.3f} {m['int8']:9.3f} {m['dyn']:9.3f} {m['fp32'] / m['int8']:10.2f} "
                  f"{m['fp32'] / m['dyn']:9.2f}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
