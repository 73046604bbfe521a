#!/usr/bin/python3
"""The MatMul side of the int8 ops on BERT-base's shapes (128 tokens), as one thread's CPU time per
run (the method of perf/int8_conv_cpu_time.py: `onnxforge bench --threads 1` with 2 + n and 2
iterations, the difference over n), two onnxforge binaries alternating in every round:
  dyn   DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul(Mul(a_scale, b_scale)) -> Add(bias),
        as quantize_dynamic writes each BERT projection (per-column int8 weights);
  qkv   one DynamicQuantizeLinear read by three such projections (BERT's Q, K and V);
  qlin  QLinearMatMul, uint8 A, int8 per-column weights, uint8 out.
Prints per shape and variant the medians (ms of CPU per run) of NEW and BASE and BASE / NEW.

  /usr/bin/python3 perf/int8_matmul_cpu_time.py NEW_ONNXFORGE BASE_ONNXFORGE [ROUNDS]
"""
import os, resource, statistics, subprocess, sys, tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# name, rows (tokens), K, N
SHAPES = [("bert qkv/out 128x768x768", 128, 768, 768), ("bert fc1 128x3072x768", 128, 768, 3072),
          ("bert fc2 128x768x3072", 128, 3072, 768)]


def save(nodes, name, inputs, outputs, inits, path):
    g = helper.make_graph(nodes, name, inputs, outputs, inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def models(M, K, N, out):
    rng = np.random.default_rng(0)
    paths = {}
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, M, K])
    inits, nodes, outs = [], [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"])], []
    for p in range(3):
        t = str(p)
        inits += [numpy_helper.from_array(rng.integers(-128, 128, (K, N), dtype=np.int8), "w" + t),
                  numpy_helper.from_array(np.zeros(N, np.int8), "wz" + t),
                  numpy_helper.from_array((rng.random(N) * 0.01 + 1e-3).astype(np.float32), "ws" + t),
                  numpy_helper.from_array(rng.standard_normal(N).astype(np.float32), "b" + t)]
        nodes += [helper.make_node("MatMulInteger", ["xq", "w" + t, "xz", "wz" + t], ["acc" + t]),
                  helper.make_node("Cast", ["acc" + t], ["f" + t], to=TensorProto.FLOAT),
                  helper.make_node("Mul", ["xs", "ws" + t], ["s" + t]),
                  helper.make_node("Mul", ["f" + t, "s" + t], ["d" + t]),
                  helper.make_node("Add", ["d" + t, "b" + t], ["y" + t])]
        outs.append(helper.make_tensor_value_info("y" + t, TensorProto.FLOAT, None))
        if p == 0:
            paths["dyn"] = os.path.join(out, "dyn.onnx")
            save(nodes, "dyn", [x], outs, inits, paths["dyn"])
    paths["qkv"] = os.path.join(out, "qkv.onnx")
    save(nodes, "qkv", [x], outs, inits, paths["qkv"])
    paths["qlin"] = os.path.join(out, "qlin.onnx")
    save([helper.make_node("QLinearMatMul", ["a", "as", "az", "w0", "ws0", "wz0", "ys", "yz"], ["y"])], "qlin",
         [helper.make_tensor_value_info("a", TensorProto.UINT8, [1, M, K])],
         [helper.make_tensor_value_info("y", TensorProto.UINT8, None)],
         inits[:3] + [numpy_helper.from_array(np.array(0.02, np.float32), "as"),
                      numpy_helper.from_array(np.array(117, np.uint8), "az"),
                      numpy_helper.from_array(np.array(0.5, np.float32), "ys"),
                      numpy_helper.from_array(np.array(128, np.uint8), "yz")], paths["qlin"])
    return paths


from int8_conv_cpu_time import cpu  # noqa: E402  (CPU seconds of one `bench` child)


def main():
    new, base = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    print(f"# ms of CPU per run, 1 thread, medians of {rounds} rounds, the binaries alternating")
    print(f"{'shape':28} {'variant':7} {'new':>8} {'base':>8} {'base/new':>8}")
    for name, M, K, N in SHAPES:
        with tempfile.TemporaryDirectory() as out:
            paths = models(M, K, N, out)
            for key, p in paths.items():
                est = max(1e-4, (cpu(new, p, 12) - cpu(new, p, 2)) / 10)
                n = int(min(400, max(10, 0.5 / est)))
                tn, tb = [], []
                for _ in range(rounds):
                    tn.append((cpu(new, p, 2 + n) - cpu(new, p, 2)) / n * 1e3)
                    tb.append((cpu(base, p, 2 + n) - cpu(base, p, 2)) / n * 1e3)
                mn, mb = statistics.median(tn), statistics.median(tb)
                print(f"{name:28} {key:7} {mn:8.3f} {mb:8.3f} {mb / mn:8.2f}", flush=True)


if __name__ == "__main__":
    main()
