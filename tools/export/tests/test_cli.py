"""The command line, run as a user would (subprocess)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

from tools.export import KEY_MODULE, KEY_TAG, read_hierarchy
from tools.export.cli import ZOO

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MODELS = os.path.join("tools", "export", "tests", "_models.py")


def run(*args, module=True):
    cmd = [sys.executable] + (["-m", "tools.export"] if module else [os.path.join("tools", "export", "export.py")])
    return subprocess.run(cmd + list(args), cwd=REPO, capture_output=True, text=True, timeout=120)


class TestCli(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="onnxforge-export-cli-")
        self.addCleanup(self.tmp.cleanup)

    def test_factory_file_dynamic_r7(self):
        out = os.path.join(self.tmp.name, "tb.onnx")
        p = run("--model", f"{MODELS}:make_tiny_bert", "--arg", "layers=3", "--out", out,
                "--dynamic", "--check-r7", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        summary = json.loads(p.stdout)
        self.assertTrue(summary["r7_identical"])
        self.assertEqual(summary["strategy"], "htp")
        self.assertEqual(summary["compute_coverage"], 1.0)
        self.assertIn("R7 identical", p.stderr)
        md = read_hierarchy(out)
        self.assertEqual(md["/encoder/layer.2/attention/key/MatMul"][KEY_TAG],
                         "/TinyBert/Encoder/Layer.2/SelfAttention/Linear.1")
        with open(os.path.join(self.tmp.name, "tb.hierarchy.json")) as f:
            side = json.load(f)
        self.assertEqual(side["strategy"], "htp")
        import onnx
        dims = [d.dim_param for d in onnx.load(out).graph.input[0].type.tensor_type.shape.dim]
        self.assertEqual(dims, ["batch", "sequence"])

    def test_script_form_module_class_auto(self):
        out = os.path.join(self.tmp.name, "dd.onnx")
        code = ("import torch, tools.export.tests._models as M\n"
                "class Net(M.DataDependent):\n"
                "    example_inputs = (torch.ones(2, 4),)\n")
        path = os.path.join(self.tmp.name, "user_model.py")
        with open(path, "w") as f:
            f.write(code)
        p = run("--model", f"{path}:Net", "--out", out, "--strategy", "auto",
                "--keep-torch-modules", "", "--no-sidecar", module=False)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("falling back to HTP", p.stderr)
        md = read_hierarchy(out)
        self.assertEqual({d[KEY_TAG] for d in md.values()}, {"/Net"})
        self.assertEqual(md["/a/Gemm"][KEY_MODULE], "a")  # ones: the traced branch is self.a
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "dd.hierarchy.json")))

    def test_bad_model_spec(self):
        p = run("--model", f"{MODELS}:no_such_factory", "--out", os.path.join(self.tmp.name, "x.onnx"))
        self.assertEqual(p.returncode, 2)
        self.assertIn("no attribute 'no_such_factory'", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "x.onnx")))

    @unittest.skipUnless(ZOO.is_file(), "tools/models/export_zoo.py not present")
    def test_zoo_bert(self):
        out = os.path.join(self.tmp.name, "bert.onnx")
        p = run("--model", "bert", "--out", out, "--dynamic", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        md = read_hierarchy(out)
        q = md["/encoder/layer.0/attention/self/query/MatMul"]
        self.assertEqual(q[KEY_TAG], "/BertModel/BertEncoder/BertLayer.0/BertAttention/BertSelfAttention/Linear.0")
        self.assertEqual(q[KEY_MODULE], "encoder.layer.0.attention.self.query")


if __name__ == "__main__":
    unittest.main()
