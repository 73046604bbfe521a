"""The Python module against the command line on the same models.

Run by ctest (label python) with PYTHONPATH=build/python, ONNXFORGE_BIN=build/onnxforge and
ONNXFORGE_MODEL_DIR=the zoo; by hand:
  PYTHONPATH=build/python ONNXFORGE_BIN=build/onnxforge ONNXFORGE_MODEL_DIR=.cache/models \
    /usr/bin/python3 -m unittest discover -s tests/python -v
"""
import io
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import unittest.mock

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import onnxforge

BIN = os.environ.get("ONNXFORGE_BIN", "build/onnxforge")
MODELS = pathlib.Path(os.environ.get("ONNXFORGE_MODEL_DIR", ".cache/models"))
BERT = MODELS / "bert_small.onnx"
CNN = MODELS / "mobilenet_v2_bn.onnx"  # ~0.8 s to optimize with 1 thread: long enough to time


def cli(*args, check=True):
    """Runs the onnxforge executable; returns (exit code, stdout, stderr)."""
    p = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"onnxforge {' '.join(map(str, args))} exited {p.returncode}: {p.stderr}")
    return p.returncode, p.stdout, p.stderr


def same_model(test, a, b):
    """Same nodes (op types, in order) and initializer values, whatever the names (a model given
    as a proto or bytes has no path, so its report and metadata may differ from a file's)."""
    a = a if isinstance(a, onnx.ModelProto) else onnx.load(a)
    b = b if isinstance(b, onnx.ModelProto) else onnx.load(b)
    test.assertEqual([n.op_type for n in a.graph.node], [n.op_type for n in b.graph.node])
    test.assertEqual(len(a.graph.initializer), len(b.graph.initializer))
    for x, y in zip(a.graph.initializer, b.graph.initializer):
        np.testing.assert_array_equal(numpy_helper.to_array(x), numpy_helper.to_array(y))


def cli_json(*args):
    return json.loads(cli(*args, "--json")[1])


def toy_cnn(seed=0, bias_shift=0.0):
    """Conv -> BatchNormalization -> Relu -> Identity -> Flatten -> MatMul -> Add: work for
    fuse_conv_batchnorm, annotate_conv_activation, eliminate_identity_ops and fuse_matmul_add."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    scale = rng.uniform(0.5, 1.5, 4).astype(np.float32)
    bias = rng.standard_normal(4).astype(np.float32) + np.float32(bias_shift)
    mean = rng.standard_normal(4).astype(np.float32)
    var = rng.uniform(0.5, 2.0, 4).astype(np.float32)
    fc = rng.standard_normal((4 * 8 * 8, 10)).astype(np.float32)
    fc_b = rng.standard_normal(10).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in
             [(w, "w"), (scale, "scale"), (bias, "bias"), (mean, "mean"), (var, "var"), (fc, "fc"), (fc_b, "fc_b")]]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["bn"], name="bn"),
        helper.make_node("Relu", ["bn"], ["r"], name="relu"),
        helper.make_node("Identity", ["r"], ["i"], name="identity"),
        helper.make_node("Flatten", ["i"], ["f"], name="flatten"),
        helper.make_node("MatMul", ["f", "fc"], ["m"], name="fc"),
        helper.make_node("Add", ["m", "fc_b"], ["y"], name="fc_add"),
    ]
    graph = helper.make_graph(nodes, "toy_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="test")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


class Temp(unittest.TestCase):
    def setUp(self):
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="onnxforge_py_"))
        self.toy = self.dir / "toy.onnx"
        onnx.save(toy_cnn(), self.toy)

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)


class Optimize(Temp):
    def test_three_input_kinds_give_the_same_model_and_numbers(self):
        proto = toy_cnn()
        out_proto, r_proto = onnxforge.optimize(proto)
        self.assertIsInstance(out_proto, onnx.ModelProto)
        out_bytes, r_bytes = onnxforge.optimize(proto.SerializeToString())
        self.assertIsInstance(out_bytes, bytes)
        written, r_path = onnxforge.optimize(self.toy, self.dir / "out.onnx")
        self.assertEqual(written, self.dir / "out.onnx")
        from_path, _ = onnxforge.optimize(str(self.toy))  # a path without output comes back as a ModelProto
        self.assertIsInstance(from_path, onnx.ModelProto)
        onnx.checker.check_model(out_proto)
        same_model(self, out_proto, onnx.load_from_string(out_bytes))
        same_model(self, out_proto, self.dir / "out.onnx")
        same_model(self, out_proto, from_path)
        for r in (r_proto, r_bytes, r_path):
            self.assertEqual((r.nodes_before, r.nodes_after), (7, 4))  # Conv(+BN), Relu, Flatten, Gemm (MatMul+Add)
            self.assertEqual(r.initializers_before, 7)
            self.assertEqual(r.verdict, "pass")
            self.assertEqual(r.verified, True)
            self.assertLess(r.max_diff, 1e-4)
        applied = {p["name"] for p in r_path.passes if p["matches_applied"]}
        self.assertTrue({"fuse_conv_batchnorm", "annotate_conv_activation", "eliminate_identity_ops"} <= applied, applied)
        self.assertEqual(r_proto["input"], "<ModelProto>")
        self.assertEqual(r_bytes["input"], "<bytes>")
        self.assertEqual(r_path["output"], str(self.dir / "out.onnx"))

    def test_report_equals_the_cli_report(self):
        for model in (self.toy, BERT):
            with self.subTest(model=model.name):
                cli_out = self.dir / f"cli_{model.name}"
                py_out = self.dir / f"py_{model.name}"
                want = cli_json("optimize", model, "-o", cli_out)
                _, got = onnxforge.optimize(model, py_out)
                got = got.to_dict()
                for k in ("before", "after", "rounds", "worst_accuracy_class"):
                    self.assertEqual(got[k], want[k], k)
                strip = lambda passes: [{k: v for k, v in p.items() if not k.endswith("seconds")} for p in passes]
                self.assertEqual(strip(got["passes"]), strip(want["passes"]))
                self.assertEqual(got["verification"], want["verification"])
                same_model(self, py_out, cli_out)

    def test_options_reach_the_engine(self):
        _, r = onnxforge.optimize(self.toy, passes=["eliminate_identity_ops"], verify=False)
        self.assertEqual([p["name"] for p in r.passes], ["eliminate_identity_ops"])
        self.assertEqual((r.nodes_before, r.nodes_after), (7, 6))
        self.assertEqual(r.verdict, "not verified")
        self.assertIsNone(r.max_diff)
        _, r = onnxforge.optimize(self.toy, skip="fuse_conv_batchnorm,fuse_conv_relu", seeds=5)
        self.assertNotIn("fuse_conv_batchnorm", [p["name"] for p in r.passes])
        self.assertNotIn("annotate_conv_activation", [p["name"] for p in r.passes])  # its name before issue 12
        self.assertEqual(r["verification"]["seeds"], 5)
        _, r = onnxforge.optimize(BERT, dims={"batch": 2, "sequence": 16}, verify=False)
        self.assertLess(r.nodes_after, r.nodes_before)

    def test_report_converts_to_a_dict(self):
        _, r = onnxforge.optimize(self.toy)
        d = dict(r)
        self.assertEqual(d["before"]["nodes"], 7)
        self.assertEqual(json.loads(json.dumps(r.to_dict())), r.to_dict())
        self.assertIn("nodes", repr(r))

    def test_progress_only_when_asked(self):
        lines = []
        onnxforge.optimize(self.toy, progress=lines.append)
        self.assertTrue(any("verif" in line for line in lines), lines)
        code = ("import onnxforge, sys; onnxforge.optimize(sys.argv[1]); onnxforge.inspect(sys.argv[1]); "
                "onnxforge.run(sys.argv[1]); onnxforge.verify(sys.argv[1], sys.argv[1], seeds=2)")
        p = subprocess.run([sys.executable, "-c", code, str(self.toy)], capture_output=True, text=True)
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "", ""))
        p = subprocess.run([sys.executable, "-c", "import onnxforge, sys; onnxforge.optimize(sys.argv[1], progress=True)",
                            str(self.toy)], capture_output=True, text=True)
        self.assertIn("onnxforge: verifying", p.stderr)

    def test_a_model_optimized_twice_stays_put(self):
        once, _ = onnxforge.optimize(toy_cnn())
        twice, r = onnxforge.optimize(once)
        self.assertEqual(r.nodes_before, r.nodes_after)
        same_model(self, twice, once)

    def test_names_made_up_by_passes_are_the_clis(self):
        """fresh_name counts per model (ir/rewrite.h): BERT optimized after other models in this
        long-lived process is the file one CLI run writes, byte for byte, every time."""
        cli_out = self.dir / "cli_bert.onnx"
        cli("optimize", BERT, "-o", cli_out, "--target-opset", "23", "--no-verify")
        for i in range(2):
            onnxforge.optimize(toy_cnn(seed=i))  # other rewrites in between
            out = self.dir / f"py_bert_{i}.onnx"
            onnxforge.optimize(BERT, out, target_opset=23, verify=False)
            self.assertEqual(out.read_bytes(), cli_out.read_bytes(), i)

    def test_target_opset_upgrades_as_the_cli_does(self):
        cli_out = self.dir / "cli_up.onnx"
        want = cli_json("optimize", BERT, "-o", cli_out, "--target-opset", "24")
        model, got = onnxforge.optimize(BERT, target_opset=24)
        got = got.to_dict()
        self.assertEqual(got["upgrade"], want["upgrade"])
        self.assertEqual((got["upgrade"]["opset_from"], got["upgrade"]["opset_to"]), (14, 24))
        self.assertEqual(got["after"], want["after"])
        self.assertIn("Attention", [n.op_type for n in model.graph.node])  # the fusions the upgrade unlocks ran
        same_model(self, model, cli_out)

    def test_a_decoder_with_past_verifies_generation_and_keeps_its_dims(self):
        past = MODELS / "llama_small_past.onnx"
        if not past.exists():
            self.skipTest("zoo model llama_small_past not exported")
        model, r = onnxforge.optimize(past, target_opset=23, verify_decode=3, verify_dims={"past_sequence": 5})
        decode = r.to_dict()["verification"]["decode"]
        self.assertTrue(decode["pass"])
        self.assertEqual([s["past"] for s in decode["steps"]], [0, 16, 17, 18])
        self.assertEqual([d.dim_param for d in model.graph.input[3].type.tensor_type.shape.dim][2], "past_sequence")
        with self.assertRaises(onnxforge.Error):  # a dim no input has
            onnxforge.optimize(past, verify_dims={"no_such_dim": 3})
        with self.assertRaises(onnxforge.Error):  # not a decoder with a cache
            onnxforge.optimize(BERT, verify_decode=2)

    def test_target_as_the_cli_does(self):
        cli_out = self.dir / "cli_trt.onnx"
        want = cli_json("optimize", BERT, "-o", cli_out, "--target", "tensorrt")
        model, got = onnxforge.optimize(BERT, target="tensorrt")
        got = got.to_dict()
        self.assertEqual(got["target"], want["target"])
        self.assertEqual(got["hint"], want["hint"])
        self.assertIn("--target-opset", got["hint"])  # BERT at opset 14: LayerNorm/Gelu would fuse after an upgrade
        self.assertEqual(got["after"], want["after"])
        with self.assertRaisesRegex(onnxforge.Error, "above what target 'tflite' accepts"):
            onnxforge.optimize(BERT, target="tflite", target_opset=23)
        with self.assertRaisesRegex(onnxforge.Error, "unknown target"):
            onnxforge.optimize(BERT, target="coreml")

    def test_inline_functions_as_the_cli_does(self):
        fn = MODELS / "bert_small_fn.onnx"
        if not fn.exists():
            self.skipTest("zoo model bert_small_fn not exported")
        cli_out = self.dir / "cli_inlined.onnx"
        want = cli_json("optimize", fn, "-o", cli_out, "--inline-functions")
        model, got = onnxforge.optimize(fn, inline_functions=True)
        got = got.to_dict()
        self.assertEqual(got["inline_functions"], want["inline_functions"])
        self.assertGreater(got["inline_functions"]["calls"], 0)
        self.assertEqual(len(model.functions), 0)
        self.assertEqual(got["after"], want["after"])
        same_model(self, model, cli_out)
        kept, _ = onnxforge.optimize(fn)  # without it the functions stay, optimized inside
        self.assertEqual(len(kept.functions), len(onnx.load(fn).functions))

    def test_target_opset_never_downgrades(self):
        with self.assertRaisesRegex(onnxforge.Error, "downgrade"):
            onnxforge.optimize(BERT, target_opset=11)


class BadInput(Temp):
    def test_garbage_bytes(self):
        with self.assertRaises(onnxforge.Error) as e:
            onnxforge.optimize(b"this is not an onnx model")
        self.assertIsInstance(e.exception, ValueError)
        self.assertIn("<bytes>", str(e.exception))
        self.assertNotIn(tempfile.gettempdir() + "/onnxforge-", str(e.exception))  # no scratch paths

    def test_message_is_the_clis(self):
        bad = self.dir / "bad.onnx"
        bad.write_bytes(self.toy.read_bytes()[:-40])  # truncated
        rc, _, err = cli("inspect", bad, check=False)
        self.assertEqual(rc, 2)
        for fn in (onnxforge.inspect, onnxforge.optimize, onnxforge.run, onnxforge.hierarchy):
            with self.subTest(fn=fn.__name__), self.assertRaises(onnxforge.Error) as e:
                fn(bad)
            self.assertEqual("onnxforge: error: " + str(e.exception), err.strip())

    def test_missing_file_unknown_pass_bad_inputs(self):
        with self.assertRaisesRegex(onnxforge.Error, "nosuch.onnx"):
            onnxforge.inspect(self.dir / "nosuch.onnx")
        with self.assertRaisesRegex(onnxforge.Error, "unknown pass 'fold_everything'.*fuse_conv_batchnorm"):
            onnxforge.optimize(self.toy, passes=["fold_everything"])
        with self.assertRaisesRegex(onnxforge.Error, "holds int64 but the model expects float32"):
            onnxforge.run(self.toy, {"x": np.zeros((1, 3, 8, 8), np.int64)})
        with self.assertRaisesRegex(onnxforge.Error, r"holds shape \[1,3,4,4\]"):
            onnxforge.run(self.toy, {"x": np.zeros((1, 3, 4, 4), np.float32)})
        with self.assertRaisesRegex(onnxforge.Error, "no input 'z'"):
            onnxforge.run(self.toy, {"z": np.zeros(3, np.float32)})
        with self.assertRaises(TypeError):
            onnxforge.inspect(42)
        with self.assertRaisesRegex(onnxforge.Error, "threads"):
            onnxforge.run(self.toy, threads=0)

    def test_the_clis_contract_errors(self):
        """The checks docs/cli.md describes live in the engine: the module raises what the CLI prints."""
        out = self.dir / "out.onnx"
        rc, _, err = cli("optimize", self.toy, out, "--dim", "batchh=2", check=False)
        self.assertEqual(rc, 2)
        self.assertFalse(out.exists())
        for call in (lambda: onnxforge.optimize(self.toy, out, dims={"batchh": 2}),
                     lambda: onnxforge.run(self.toy, dims={"batchh": 2}),
                     lambda: onnxforge.bench(self.toy, dims={"batchh": 2}, iters=1),
                     lambda: onnxforge.verify(self.toy, self.toy, dims={"batchh": 2}, seeds=1)):
            with self.assertRaises(onnxforge.Error) as e:
                call()
            self.assertIsInstance(e.exception, ValueError)
            self.assertEqual("onnxforge: error: " + str(e.exception), err.strip().splitlines()[0])
        self.assertFalse(out.exists())
        # An existing output is replaced only when asked, as `optimize IN OUT` needs --overwrite.
        onnxforge.optimize(self.toy, out)
        rc, _, err = cli("optimize", self.toy, out, check=False)
        self.assertEqual(rc, 2)
        with self.assertRaisesRegex(onnxforge.Error, "exists; pass --overwrite"):
            onnxforge.optimize(self.toy, out)
        onnxforge.optimize(self.toy, out, overwrite=True)


class Functions(Temp):
    def test_inspect_is_the_clis_json(self):
        for model in (self.toy, BERT):
            with self.subTest(model=model.name):
                self.assertEqual(onnxforge.inspect(model), cli_json("inspect", model))
        self.assertEqual(onnxforge.inspect(self.toy.read_bytes())["nodes"], onnxforge.inspect(self.toy)["nodes"])

    def test_run_matches_the_cli_outputs(self):
        out = self.dir / "outs"
        cli("run", BERT, "--seed", 3, "--out", out)
        got = onnxforge.run(BERT, seed=3)
        self.assertEqual(list(got), [p.stem for p in sorted(out.iterdir(), key=lambda p: list(got).index(p.stem))])
        for name, a in got.items():
            np.testing.assert_array_equal(a, np.load(out / f"{name}.npy"))

    def test_user_inputs_on_run_verify_bench_optimize(self):
        """Issue 29: arrays and files feed every seed, an .npz / a list of dicts are input sets,
        input_values fill an input; the same as the command line's --inputs / --input-value."""
        nodes = [helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT, name="cast"),
                 helper.make_node("Mul", ["x", "two"], ["x2"], name="mul"), helper.make_node("Add", ["x2", "nf"], ["y"], name="add")]
        graph = helper.make_graph(nodes, "scaled_sum", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq"]),
                                                        helper.make_tensor_value_info("n", TensorProto.INT64, [])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq"])],
                                  [numpy_helper.from_array(np.array(2, np.float32), "two")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        x = np.ones((1, 5), np.float32)
        y = onnxforge.run(model, {"x": x}, input_values={"n": 4})["y"]
        np.testing.assert_array_equal(y, np.full((1, 5), 6, np.float32))
        np.save(self.dir / "x.npy", x * 3)
        y = onnxforge.run(model, {"x": self.dir / "x.npy"}, input_values={"n": 1})["y"]
        np.testing.assert_array_equal(y, np.full((1, 5), 7, np.float32))
        np.savez(self.dir / "set.npz", x=np.ones((1, 2), np.float32), n=np.array(5))
        sets = [self.dir / "set.npz", {"x": np.zeros((1, 3), np.float32), "n": np.array(1)}]
        self.assertEqual(onnxforge.run(model, sets, seed=1)["y"].shape, (1, 3))  # seed S: set S
        r = onnxforge.verify(model, model, seeds=1, inputs=sets)
        self.assertTrue(r)
        self.assertEqual(r["seeds"], 2)  # both sets run
        self.assertFalse(r["degenerate"])
        self.assertTrue(onnxforge.bench(model, inputs={"x": x}, input_values={"n": 2}, iters=2, warmup=1))
        _, rep = onnxforge.optimize(model, inputs={"x": x}, input_values={"n": 3})
        self.assertTrue(rep["verification"]["ok"])
        with self.assertRaises(onnxforge.Error):
            onnxforge.verify(model, model, inputs={"x": self.dir / "missing.npy"})
        (self.dir / "bad.npz").write_bytes(b"PK\x03\x04 not a zip")
        with self.assertRaises(onnxforge.Error):
            onnxforge.run(model, self.dir / "bad.npz")

    def test_run_takes_numpy_inputs(self):
        x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
        y = onnxforge.run(toy_cnn(), {"x": x})["y"]
        self.assertEqual(y.shape, (1, 10))
        self.assertEqual(y.dtype, np.float32)
        # The same computation in NumPy (float64), to float32 accuracy.
        m = toy_cnn()
        p = {i.name: numpy_helper.to_array(i).astype(np.float64) for i in m.graph.initializer}
        xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
        conv = np.zeros((1, 4, 8, 8))
        for i in range(8):
            for j in range(8):
                conv[0, :, i, j] = np.tensordot(p["w"], xp[0, :, i:i + 3, j:j + 3], axes=3)
        bn = (conv - p["mean"][:, None, None]) / np.sqrt(p["var"][:, None, None] + 1e-5) * p["scale"][:, None, None] \
            + p["bias"][:, None, None]
        want = np.maximum(bn, 0).reshape(1, -1) @ p["fc"] + p["fc_b"]
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
        # int32 token ids convert to the model's int64; a given input replaces the generated one.
        ids = np.arange(16, dtype=np.int32).reshape(1, 16)
        a = onnxforge.run(BERT, {"input_ids": ids}, dims={"batch": 1, "sequence": 16})
        b = onnxforge.run(BERT, {"input_ids": ids.astype(np.int64)}, dims={"batch": 1, "sequence": 16})
        c = onnxforge.run(BERT, dims={"batch": 1, "sequence": 16})
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])
        self.assertFalse(all(np.array_equal(a[k], c[k]) for k in a))

    def test_verify_is_the_clis_report(self):
        opt = self.dir / "opt.onnx"
        onnxforge.optimize(BERT, opt)
        got = onnxforge.verify(BERT, opt, seeds=4)
        rc, out, _ = cli("verify", BERT, opt, "--seeds", 4, "--json")
        want = json.loads(out)
        self.assertEqual(rc, 0)
        self.assertTrue(got.passed)
        self.assertTrue(got)
        strip = lambda d: {k: v for k, v in d.items() if k != "seconds"}
        self.assertEqual(strip(got.to_dict()), strip(want))
        self.assertGreaterEqual(got.max_diff, 0)
        self.assertIn("pass", got.text)

    def test_verify_finds_a_different_model(self):
        other = toy_cnn(bias_shift=0.5)
        r = onnxforge.verify(toy_cnn(), other, seeds=3)
        self.assertFalse(r.passed)
        self.assertEqual(r.verdict, "fail")
        self.assertGreater(r.max_diff, 1e-3)
        loose = onnxforge.verify(toy_cnn(), other, seeds=3, atol=1e3)
        self.assertTrue(loose.passed)

    def test_bench(self):
        r = onnxforge.bench(self.toy, iters=5, warmup=1)
        self.assertEqual(r.iters, 5)
        self.assertGreater(r.median_ms, 0)
        self.assertLessEqual(r.min_ms, r.median_ms)
        self.assertIsNone(r.ratio)
        want = cli_json("bench", self.toy, "--iters", 5, "--warmup", 1)
        self.assertEqual(set(r), set(want))
        self.assertEqual((r["steps"], r["channels_last_steps"]), (want["steps"], want["channels_last_steps"]))
        opt, _ = onnxforge.optimize(toy_cnn())
        r = onnxforge.bench(toy_cnn(), vs=opt, iters=3, warmup=1, threads=1,
                            inputs={"x": np.ones((1, 3, 8, 8), np.float32)}, profile=True)
        self.assertEqual((r["model"], r["vs"]["model"]), ("<ModelProto>", "<ModelProto>"))
        self.assertGreater(r.ratio, 0)
        self.assertTrue(r["profile"])

    def test_hierarchy_and_extract_are_the_clis(self):
        self.assertEqual(onnxforge.hierarchy(BERT), cli_json("hierarchy", BERT))
        self.assertEqual(onnxforge.hierarchy(BERT, consumers=True)["consumers"],
                         cli_json("hierarchy", BERT, "--consumers")["consumers"])
        cli_out, py_out = self.dir / "cli_layer.onnx", self.dir / "py_layer.onnx"
        want = cli_json("extract", BERT, "--module", "encoder.layer.0", "-o", cli_out, "--verify")
        path, got = onnxforge.extract(BERT, "encoder.layer.0", py_out, verify=True)
        self.assertEqual(path, py_out)
        strip = lambda d: {k: v for k, v in d.items() if k not in ("seconds", "output")}
        self.assertEqual(strip(got), strip(want))
        self.assertEqual(got["verify"]["pass"], True)
        self.assertEqual(py_out.read_bytes(), cli_out.read_bytes())
        sub, report = onnxforge.extract(onnx.load(BERT), "encoder.layer.0")
        self.assertIsInstance(sub, onnx.ModelProto)
        self.assertEqual(len(sub.graph.node), want["nodes"])
        self.assertEqual(report["model"], "<ModelProto>")
        with self.assertRaisesRegex(onnxforge.Error, "encoder.layer"):
            onnxforge.extract(BERT, "encoder.layer.99")

    def test_audit_is_the_clis(self):
        strip = lambda d: {k: v for k, v in d.items() if k not in ("seconds", "model")}
        want = cli_json("audit", BERT, self.toy)
        got = onnxforge.audit([BERT, toy_cnn()])
        self.assertEqual([strip(g) for g in got], [strip(w) for w in want])
        self.assertEqual((got[0]["model"], got[1]["model"]), (str(BERT), "<ModelProto>"))
        self.assertEqual(strip(onnxforge.audit(BERT)), strip(want[0]))

    def test_list_passes_and_docs(self):
        self.assertEqual(onnxforge.list_passes(), json.loads(cli("optimize", "--list-passes", "--json")[1]))
        for fn in (onnxforge.optimize, onnxforge.run, onnxforge.verify, onnxforge.bench, onnxforge.inspect,
                   onnxforge.hierarchy, onnxforge.extract, onnxforge.audit):
            self.assertGreater(len(fn.__doc__ or ""), 100, fn.__name__)
        stubs = pathlib.Path(onnxforge.__file__).with_name("__init__.pyi")
        self.assertTrue(stubs.exists())
        for name in onnxforge.__all__:
            self.assertIn(name, stubs.read_text())

    def test_python_m_runs_the_cli(self):
        p = subprocess.run([sys.executable, "-m", "onnxforge", "inspect", str(self.toy), "--json"], capture_output=True,
                           text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout), cli_json("inspect", self.toy))
        p = subprocess.run([sys.executable, "-m", "onnxforge", "inspect", str(self.dir / "nosuch.onnx")],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, cli("inspect", self.dir / "nosuch.onnx", check=False)[0])
        p = subprocess.run([sys.executable, "-m", "onnxforge", "--version"], capture_output=True, text=True)
        self.assertIn(onnxforge.__version__, p.stdout)


def counting_loop(trips=2**40):
    """A Loop of ``trips`` iterations adding 1 to a carried value: no memory grows, so only the
    time budget, the iteration limit or an interruption stops it."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Add", ["acc_in", "one"], ["acc_out"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [1])],
        [numpy_helper.from_array(np.ones(1, np.float32), "one")])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "cond", "a0"], ["acc"], body=body, name="loop0")], "loop",
        [helper.make_tensor_value_info("a0", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("acc", TensorProto.FLOAT, [1])],
        [numpy_helper.from_array(np.array(trips, np.int64), "M"), numpy_helper.from_array(np.array(True), "cond")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def recursive_model(pair):
    """A model-local function that calls itself (pair=False) or two that call each other."""
    def fn(name, calls):
        return helper.make_function("local", name, ["a"], ["b"], [helper.make_node(calls, ["a"], ["b"], domain="local")],
                                    [helper.make_opsetid("", 17)])
    functions = [fn("F", "G"), fn("G", "F")] if pair else [fn("F", "F")]
    graph = helper.make_graph([helper.make_node("F", ["x"], ["y"], domain="local")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
                             functions=functions)


class Hostile(Temp):
    """Issue 26: arguments, limits, interruption and hostile models never crash or hang the
    interpreter, and every argument error is an onnxforge.Error of one line."""

    def assertOneLineError(self, call, needle):
        with self.assertRaises(onnxforge.Error) as e:
            call()
        self.assertIn(needle, str(e.exception))
        self.assertNotIn("\n", str(e.exception))

    def test_argument_errors_are_onnxforge_errors(self):
        toy = str(self.toy)
        self.assertOneLineError(lambda: onnxforge.optimize(toy, seeds=2**40), "seeds")
        self.assertOneLineError(lambda: onnxforge.optimize(toy, fold_size=-1), "fold_size")
        self.assertOneLineError(lambda: onnxforge.optimize(toy, target_opset="17"), "target_opset must be a whole number")
        self.assertOneLineError(lambda: onnxforge.run(toy, threads=2**63), "threads")
        self.assertOneLineError(lambda: onnxforge.inspect(toy + "\x00junk"), "NUL")
        self.assertOneLineError(lambda: onnxforge.optimize(toy, self.dir / "o\x00.onnx"), "NUL")
        self.assertOneLineError(lambda: onnxforge.run(toy, dims={"batch": 1.5}), "dims['batch']")
        self.assertOneLineError(lambda: onnxforge.run(toy, seed=-1), "seed")
        self.assertOneLineError(lambda: onnxforge.verify(toy, toy, seeds=0), "seeds")
        self.assertOneLineError(lambda: onnxforge.bench(toy, min_time=float("inf")), "min_time")
        self.assertOneLineError(lambda: onnxforge.bench(toy, min_time=float("nan")), "min_time")
        self.assertOneLineError(lambda: onnxforge.run(toy, max_memory="lots"), "max_memory")
        self.assertOneLineError(lambda: onnxforge.run(toy, max_time=-1), "max_time")
        err = io.StringIO()
        with unittest.mock.patch("sys.stderr", err):
            self.assertEqual(onnxforge.main(["inspect", toy + "\x00junk"]), 2)
        self.assertIn("NUL", err.getvalue())

    def test_recursive_functions_do_not_kill_the_interpreter(self):
        for pair in (False, True):
            m = recursive_model(pair)
            with self.subTest(pair=pair):
                self.assertOneLineError(lambda: onnxforge.audit(m), "recursive")
                self.assertOneLineError(lambda: onnxforge.optimize(m, verify=False), "recursive")
                self.assertOneLineError(lambda: onnxforge.inspect(m), "recursive")
        self.assertEqual(onnxforge.inspect(self.toy)["nodes"], 7)  # still alive

    def test_limits(self):
        loop = counting_loop()
        t0 = time.monotonic()
        self.assertOneLineError(lambda: onnxforge.run(loop, max_time=0.3, max_loop_iterations=2**62), "time budget")
        self.assertLess(time.monotonic() - t0, 5)
        self.assertOneLineError(lambda: onnxforge.run(loop, max_loop_iterations=1000), "--max-loop-iterations")
        big = helper.make_model(helper.make_graph(
            [helper.make_node("ConstantOfShape", ["s"], ["y"], name="cos0")], "big", [],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
            [numpy_helper.from_array(np.array([1 << 13, 1 << 13], np.int64), "s")]),
            opset_imports=[helper.make_opsetid("", 13)])
        self.assertOneLineError(lambda: onnxforge.run(big, max_memory="16M"), "memory budget")
        # The limits end with the call: the same model runs afterwards (256 MiB under the default budget).
        self.assertEqual(onnxforge.run(big)["y"].shape, (1 << 13, 1 << 13))
        self.assertEqual(onnxforge.run(counting_loop(10), {"a0": np.zeros(1, np.float32)})["acc"][0], 10)

    def test_keyboard_interrupt_stops_a_long_call(self):
        loop = counting_loop()
        calls = [lambda: onnxforge.run(loop, max_loop_iterations=2**62), lambda: onnxforge.bench(self.toy, min_time=60),
                 lambda: onnxforge.verify(loop, loop, seeds=2, max_loop_iterations=2**62)]
        if CNN.exists():  # passes then verification: ~0.8 s with one thread
            calls.append(lambda: onnxforge.optimize(CNN, threads=1, seeds=20))
        for call in calls:
            sent = []

            def interrupt():
                sent.append(time.monotonic())
                os.kill(os.getpid(), signal.SIGINT)
            timer = threading.Timer(0.3, interrupt)
            timer.start()
            with self.assertRaises(KeyboardInterrupt):
                call()
            elapsed = time.monotonic() - sent[0]
            timer.join()
            # 50 ms polling plus one node step; the bound leaves room for a loaded machine.
            self.assertLess(elapsed, 1.0, f"KeyboardInterrupt {elapsed:.3f} s after SIGINT")
        self.assertEqual(onnxforge.run(counting_loop(3), {"a0": np.zeros(1, np.float32)})["acc"][0], 3)  # the cancellation was cleared

    def test_side_files(self):
        fifo = self.dir / "fifo"
        os.mkfifo(fifo)
        self.assertOneLineError(lambda: onnxforge.hierarchy(self.toy, sidecar=fifo), "FIFO")
        listing = self.dir / "list.json"
        listing.write_text("[1, 2, 3]")
        self.assertOneLineError(lambda: onnxforge.hierarchy(self.toy, sidecar=listing), "not a JSON object")
        self.assertOneLineError(lambda: onnxforge.optimize(self.toy, "/dev/null", overwrite=True), "character device")


class Threads(unittest.TestCase):
    """The GIL is released while the engine works (behavioural checks, not speed goals)."""

    def setUp(self):
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="onnxforge_threads_"))
        self.calls = 0

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def one(self):
        # Written to a file: returning a ModelProto would parse it in Python, under the GIL.
        self.calls += 1
        onnxforge.optimize(CNN, self.dir / f"out{self.calls}.onnx", threads=1, seeds=2)

    def test_python_runs_while_the_engine_works(self):
        # A Python thread keeps counting while the main thread is inside optimize(): with the GIL
        # held for the whole call the counter could not move.
        stop, ticks = threading.Event(), [0]

        def count():
            while not stop.is_set():
                ticks[0] += 1
                time.sleep(0.001)
        t = threading.Thread(target=count)
        t.start()
        try:
            time.sleep(0.05)
            before = ticks[0]
            start = time.perf_counter()
            self.one()
            during = ticks[0] - before
            elapsed = time.perf_counter() - start
        finally:
            stop.set()
            t.join()
        if elapsed < 0.05:
            self.skipTest(f"optimize() took {elapsed:.3f} s: too short to tell")
        # Held, the count stays at 0 or 1; released, it advances every 1-5 ms on an idle machine.
        # Only the fact that it moves is asserted: a rate failed a sibling run under load (the
        # counter's thread got a few slices while nice-19 builds filled both cores).
        self.assertGreaterEqual(during, 3, (during, elapsed))

    def test_two_threads_optimize_at_once(self):
        # Two calls on two threads, one worker each. With the GIL held for a whole call they could
        # not overlap: every status line of one call would come before or after all of the
        # other's. Released, they interleave. The times are printed, not asserted: a timing
        # assertion gated on the load average failed CI's sibling run here when other work started
        # inside the load average's one-minute lag (speed goals live in perf/, not in unit tests).
        # Tries that miss are repeated; one interleaving shows the release.
        self.one()  # warm up (page cache, allocator)
        tries, interleaved = [], False
        for _ in range(4):
            t0 = time.perf_counter()
            self.one()
            single = time.perf_counter() - t0
            events = []
            lock = threading.Lock()

            def call(k):
                def seen(line):
                    with lock:
                        events.append(k)
                self.calls += 1
                onnxforge.optimize(CNN, self.dir / f"pair{self.calls}_{k}.onnx", threads=1, seeds=2, progress=seen)
            threads = [threading.Thread(target=call, args=(k,)) for k in range(2)]
            t0 = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            double = time.perf_counter() - t0
            tries.append((round(single, 3), round(double, 3)))
            runs = sum(1 for a, b in zip(events, events[1:]) if a != b) + 1  # 2 when not interleaved
            interleaved = interleaved or runs > 2
            if interleaved:
                break
        self.assertTrue(interleaved, f"the status lines of two calls never interleaved: {events}")
        load, cores = os.getloadavg()[0], os.cpu_count() or 1
        note = f"one optimization, two at once (s): {tries}; load {load:.1f} on {cores} cores"
        print(f"\n{note}", file=sys.stderr)


if __name__ == "__main__":
    unittest.main()
