#!/usr/bin/python3
"""Int8 conv vs fp32 conv of the same shape through `onnxforge bench` (issue 18: int8 conv at >= 2x
the fp32 conv with VNNI). Per shape, four models: Conv (float32 x, w, bias), ConvInteger
(uint8 x and w with zero points, as ISNet's quantize_dynamic twin has them) and the dynamic-quant
chain DynamicQuantizeLinear -> ConvInteger -> Cast -> Mul -> Add(bias) -> Relu (what runs per
conv in ISNet's twin, the dequantize, bias and Relu fused by the plan; the fp32 Conv has its bias
and a fused Relu too), and QLinearConv (uint8 in and out, requantized in the store). Rounds
alternate the variants; medians per variant, then fp32 / int8 time
ratios. --baseline OTHER_BUILD also times that build's int8 and dyn variants in the same rounds
(before/after of a change, same run).

  /usr/bin/python3 perf/int8_conv_vs_fp32.py BUILD_DIR [--rounds 5] [--iters 5] [--threads 2]
      [--baseline BUILD_DIR] [--only SUBSTRING]
"""
import argparse, json, os, statistics, subprocess, sys, tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# name, C, M, H, W, kernel, dilation, stride: ResNet's 56x56x64 3x3 (the conv3x3 GEMM shape
# 3136x64x576 of bench_int8_gemm), its bottleneck 1x1s (256 -> 64 and 64 -> 256 at 56x56, 512 ->
# 128 at 28x28), its strided 3x3 and 1x1 downsample into stage 3, and ISNet's 64-channel 3x3s at
# 256x256 and dilation 2.
SHAPES = [("resnet 64x56x56 3x3", 64, 64, 56, 56, 3, 1, 1),
          ("resnet 256>64 56x56 1x1", 256, 64, 56, 56, 1, 1, 1),
          ("resnet 64>256 56x56 1x1", 64, 256, 56, 56, 1, 1, 1),
          ("resnet 512>128 28x28 1x1", 512, 128, 28, 28, 1, 1, 1),
          ("resnet 128 56>28 3x3 s2", 128, 128, 56, 56, 3, 1, 2),
          ("resnet 256>512 56>28 1x1 s2", 256, 512, 56, 56, 1, 1, 2),
          ("isnet 64x256x256 3x3", 64, 64, 256, 256, 3, 1, 1),
          ("isnet 64x128x128 3x3 d2", 64, 64, 128, 128, 3, 2, 1)]


def models(C, M, H, W, k, d, st, out):
    rng = np.random.default_rng(0)
    p = d * (k // 2)
    attrs = dict(kernel_shape=[k, k], pads=[p, p, p, p], dilations=[d, d], strides=[st, st])
    w = rng.standard_normal((M, C, k, k)).astype(np.float32) * 0.05
    b = rng.standard_normal(M).astype(np.float32)
    g = helper.make_graph([helper.make_node("Conv", ["x", "w", "b"], ["c"], **attrs),
                           helper.make_node("Relu", ["c"], ["y"])], "fp32",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, W])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    paths = {}
    paths["fp32"] = os.path.join(out, "fp32.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), paths["fp32"])
    wq = rng.integers(0, 256, (M, C, k, k), dtype=np.uint8)
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
             helper.make_node("Mul", ["f", "s"], ["d"]),
             helper.make_node("Add", ["d", "bias"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"])]
    g = helper.make_graph(nodes, "dyn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, W])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          inits + [numpy_helper.from_array(b.reshape(M, 1, 1), "bias")])
    paths["dyn"] = os.path.join(out, "dyn.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), paths["dyn"])
    # QLinearConv, uint8 in and out (requantized in the conv's store), int32 bias.
    g = helper.make_graph([helper.make_node("QLinearConv", ["xq", "xs", "xz", "wq", "ws", "wz", "ys", "yz", "bq"], ["y"],
                                            **attrs)], "qlinear",
                          [helper.make_tensor_value_info("xq", TensorProto.UINT8, [1, C, H, W])],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, None)],
                          inits + [numpy_helper.from_array(np.array(117, np.uint8), "xz"),
                                   numpy_helper.from_array(np.array(0.02, np.float32), "xs"),
                                   numpy_helper.from_array(np.array(0.5, np.float32), "ys"),
                                   numpy_helper.from_array(np.array(128, np.uint8), "yz"),
                                   numpy_helper.from_array((b * 100).astype(np.int32), "bq")])
    paths["qlin"] = os.path.join(out, "qlin.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), paths["qlin"])
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
    ap.add_argument("--baseline", help="another build dir: its int8 and dyn variants timed in the same rounds")
    ap.add_argument("--only", help="shapes whose name contains this")
    a = ap.parse_args()
    binary = os.path.join(a.build, "onnxforge")
    base = os.path.join(a.baseline, "onnxforge") if a.baseline else None
    print(f"# threads {a.threads}, {a.rounds} rounds x {a.iters} iterations, medians (ms)")
    head = (f"{'shape':28} {'fp32':>9} {'int8':>9} {'dyn':>9} {'qlin':>9} {'fp32/int8':>10} {'fp32/dyn':>9} "
            f"{'fp32/qlin':>10}")
    if base:
        head += (f" {'base int8':>10} {'base dyn':>9} {'base qlin':>10} {'b fp32/int8':>12} {'b fp32/dyn':>11} "
                 f"{'b fp32/qlin':>12}")
    print(head)
    for name, C, M, H, W, k, d, st in SHAPES:
        if a.only and a.only not in name:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            paths = models(C, M, H, W, k, d, st, tmp)
            runs = [(key, binary, p) for key, p in paths.items()]
            if base:
                runs += [("base " + key, base, paths[key]) for key in ("int8", "dyn", "qlin")]
            t = {key: [] for key, _, _ in runs}
            for _ in range(a.rounds):
                for key, b, p in runs:
                    t[key].append(bench(b, p, a.threads, a.iters))
            m = {key: statistics.median(v) for key, v in t.items()}
            line = (f"{name:28} {m['fp32']:9.3f} {m['int8']:9.3f} {m['dyn']:9.3f} {m['qlin']:9.3f} "
                    f"{m['fp32'] / m['int8']:10.2f} {m['fp32'] / m['dyn']:9.2f} {m['fp32'] / m['qlin']:10.2f}")
            if base:
                line += (f" {m['base int8']:10.3f} {m['base dyn']:9.3f} {m['base qlin']:10.3f} "
                         f"{m['fp32'] / m['base int8']:12.2f} {m['fp32'] / m['base dyn']:11.2f} "
                         f"{m['fp32'] / m['base qlin']:12.2f}")
            print(line)
            sys.stdout.flush()


if __name__ == "__main__":
    main()
