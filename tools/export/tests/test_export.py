"""HTP/FX tagging, R7 identity, sidecar, and metadata round trips on small models."""
import io
import json
import os
import shutil
import tempfile
import unittest
import warnings

import onnx
import torch

from tools.export import (KEY_DEPTH, KEY_MODULE, KEY_SOURCE, KEY_TAG, export, plain_export,
                          read_hierarchy)
from tools.export.compare import diff_models
from tools.export.core import COMPUTE_OPS
from tools.export.tests import _models as M

BERT_IO = dict(input_names=["input_ids", "attention_mask"],
               output_names=["last_hidden_state", "pooler_output"])
BERT_DYN = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"},
            "last_hidden_state": {0: "batch", 1: "sequence"}, "pooler_output": {0: "batch"}}


def setUpModule():
    global TMP
    warnings.simplefilter("ignore")  # TracerWarnings from torch
    torch.manual_seed(0)
    TMP = tempfile.mkdtemp(prefix="onnxforge-export-test-")


def tearDownModule():
    shutil.rmtree(TMP, ignore_errors=True)


def load_json(path):
    with open(path) as f:
        return json.load(f)


def tagged_and_plain(name, model, args, **kw):
    """Export with tags and plainly; return (result, tagged path, plain path)."""
    model.eval()
    out, plain = os.path.join(TMP, name + ".onnx"), os.path.join(TMP, name + ".plain.onnx")
    log = io.StringIO()
    res = export(model, args, out, log=log, **kw)
    res.log = log.getvalue()
    kw.pop("strategy", None)
    kw.pop("keep_torch_modules", None)
    plain_export(model, args, plain, **kw)
    return res, out, plain


class HierarchyChecks:
    """Assertions shared by every model."""

    def check_common(self, res, out, plain):
        self.assertEqual(diff_models(out, plain), [], "R7: tagged export differs from plain export")
        proto = onnx.load(out)
        md = read_hierarchy(proto)
        names = [n.name for n in proto.graph.node]
        self.assertEqual(set(md), set(names), "every node carries metadata")
        for n in proto.graph.node:
            d = md[n.name]
            self.assertEqual(d[KEY_TAG], res.table.tag[d[KEY_MODULE]])
            self.assertEqual(int(d[KEY_DEPTH]), d[KEY_TAG].count("/"))
            want = M.module_from_node_name(n.name)
            if want is not None:  # scoped node name: its module must be exactly ours
                self.assertEqual(d[KEY_MODULE], want, n.name)
                self.assertIn(d[KEY_SOURCE], ("scope", "fx"), n.name)
        compute = [n for n in proto.graph.node if n.op_type in COMPUTE_OPS]
        exact = [n for n in compute if md[n.name][KEY_SOURCE] in ("scope", "fx")]
        self.assertGreaterEqual(len(exact), 0.97 * len(compute))
        self.assertGreaterEqual(res.compute_coverage, 0.97)
        side = load_json(res.sidecar_path)
        self.assertEqual(side["format"], "onnxforge.hierarchy/1")
        self.assertEqual(list(side["node_tags"]), names)
        self.assertEqual({n: md[n][KEY_TAG] for n in names}, side["node_tags"])
        self.assertEqual({n: md[n][KEY_MODULE] for n in names}, side["node_modules"])
        for tag, paths in side["hierarchy"].items():
            for p in paths:
                self.assertEqual(side["modules"][p]["tag"], tag)
        visible = [m["tag"] for m in side["modules"].values() if m["in_tag"]]
        self.assertEqual(len(visible), len(set(visible)), "visible modules have unique tags")
        return proto, md, side


class TestTinyBert(unittest.TestCase, HierarchyChecks):
    @classmethod
    def setUpClass(cls):
        cls.model = M.TinyBert(2).eval()
        cls.args = M.tiny_bert_inputs()

    def test_static_axes_tags(self):
        res, out, plain = tagged_and_plain("bert_static", self.model, self.args, **BERT_IO)
        proto, md, side = self.check_common(res, out, plain)
        q = md["/encoder/layer.0/attention/query/MatMul"]
        self.assertEqual(q[KEY_TAG], "/TinyBert/Encoder/Layer.0/SelfAttention/Linear.0")
        self.assertEqual(q[KEY_MODULE], "encoder.layer.0.attention.query")
        self.assertEqual(q[KEY_DEPTH], "5")
        self.assertEqual(md["/encoder/layer.1/attention/value/MatMul"][KEY_TAG],
                         "/TinyBert/Encoder/Layer.1/SelfAttention/Linear.2")
        self.assertEqual(md["/encoder/layer.1/attention/Softmax"][KEY_TAG],
                         "/TinyBert/Encoder/Layer.1/SelfAttention")
        # Output is used twice per layer: two instances of one class under Layer
        self.assertEqual(md["/encoder/layer.0/output/LayerNorm/ReduceMean"][KEY_TAG],
                         "/TinyBert/Encoder/Layer.0/Output.1/LayerNorm")
        self.assertEqual(md["/encoder/layer.0/attn_out/dense/MatMul"][KEY_TAG],
                         "/TinyBert/Encoder/Layer.0/Output.0/Linear")
        # Dropout is a hidden built-in: its module path is kept, the tag stops at its parent
        self.assertEqual(res.table.tag["encoder.layer.0.attention.dropout"],
                         "/TinyBert/Encoder/Layer.0/SelfAttention")
        # GELU (Erf) inside Layer.forward, outside any submodule
        erf = [n for n in proto.graph.node if n.op_type == "Erf"]
        self.assertEqual(len(erf), 2)
        self.assertEqual(md[erf[0].name][KEY_MODULE], "encoder.layer.0")
        # top-level mask arithmetic: root tag from the root's own scope
        top_mul = [n.name for n in proto.graph.node if n.op_type == "Mul" and n.name.count("/") == 1]
        self.assertTrue(top_mul)
        for n in top_mul:
            self.assertEqual(md[n][KEY_TAG], "/TinyBert")
            self.assertEqual(md[n][KEY_MODULE], "")
            self.assertEqual(md[n][KEY_SOURCE], "scope")
        # sidecar module facts
        att = side["modules"]["encoder.layer.0.attention"]
        self.assertEqual(att["class"], "SelfAttention")
        self.assertEqual(att["forward_args"], ["hidden", "mask"])
        self.assertEqual(att["children"], ["encoder.layer.0.attention.query",
                                           "encoder.layer.0.attention.key",
                                           "encoder.layer.0.attention.value",
                                           "encoder.layer.0.attention.dropout"])
        self.assertIn("encoder.layer.0.attention.value.bias", att["parameters"])
        self.assertEqual(att["direct_parameters"], [])
        self.assertEqual(side["modules"]["encoder.layer.0.attention.query"]["direct_parameters"],
                         ["encoder.layer.0.attention.query.weight", "encoder.layer.0.attention.query.bias"])
        self.assertEqual(side["modules"][""]["forward_defaults"], {"attention_mask": None})
        self.assertEqual(side["modules"]["encoder.layer"]["tag"], "/TinyBert/Encoder")
        self.assertEqual(side["modules"]["encoder.layer.1"]["calls"], 1)
        self.assertIn("encoder.layer", side["hierarchy"]["/TinyBert/Encoder"])

    def test_dynamic_axes(self):
        res, out, plain = tagged_and_plain("bert_dynamic", self.model, self.args,
                                           dynamic_axes=BERT_DYN, **BERT_IO)
        proto, md, side = self.check_common(res, out, plain)
        dims = [d.dim_param for d in proto.graph.input[0].type.tensor_type.shape.dim]
        self.assertEqual(dims, ["batch", "sequence"])
        # exporter-made constants (folded Unsqueeze axes, the folded position_ids slice) have
        # no scope; they are attributed to the module of their consumers
        derived = {n: s for n, s in side["node_sources"].items() if s == "consumers"}
        self.assertTrue(derived)
        cons = {}
        for n in proto.graph.node:
            for i in n.input:
                cons.setdefault(i, []).append(n.name)
        for n in proto.graph.node:
            if n.name in derived:
                users = {md[c][KEY_MODULE] for c in cons[n.output[0]]}
                if len(users) == 1:
                    self.assertEqual(md[n.name][KEY_MODULE], users.pop())

    def test_fx_matches_htp_when_traceable(self):
        # TinyBert is FX-traceable (no data-dependent branches once attention_mask is given)
        htp, _, _ = tagged_and_plain("bert_htp", self.model, self.args, **BERT_IO)
        fx, out, plain = tagged_and_plain("bert_fx", self.model, self.args, strategy="fx", **BERT_IO)
        self.assertEqual(fx.strategy, "fx")
        self.check_common(fx, out, plain)
        self.assertEqual(fx.node_modules, htp.node_modules)
        self.assertEqual(load_json(fx.sidecar_path)["modules"]["encoder.layer.0"]["calls"], 1)

    def test_keep_torch_modules(self):
        res, out, plain = tagged_and_plain("bert_nokeep", self.model, self.args,
                                           keep_torch_modules="", **BERT_IO)
        md = read_hierarchy(out)
        q = md["/encoder/layer.0/attention/query/MatMul"]
        self.assertEqual(q[KEY_TAG], "/TinyBert/Encoder/Layer.0/SelfAttention")
        self.assertEqual(q[KEY_MODULE], "encoder.layer.0.attention.query")
        self.assertEqual(diff_models(out, plain), [])


class TestSequential(unittest.TestCase, HierarchyChecks):
    def test_sequential(self):
        model, x = M.SeqNet(), torch.randn(1, 3, 8, 8)
        res, out, plain = tagged_and_plain("seq", model, (x,), input_names=["x"])
        proto, md, side = self.check_common(res, out, plain)
        conv = md["/features/features.2/features.2.1/conv/Conv"]
        self.assertEqual(conv[KEY_MODULE], "features.2.1.conv")
        self.assertEqual(conv[KEY_TAG], "/SeqNet/Block.1/Conv2d")
        self.assertEqual(md["/features/features.0/Conv"][KEY_TAG], "/SeqNet/Conv2d.1")
        self.assertEqual(md["/stem/Conv"][KEY_TAG], "/SeqNet/Conv2d.0")
        self.assertEqual(md["/head/Conv"][KEY_TAG], "/SeqNet/Conv2d.2")
        self.assertEqual(md["/features/features.1/Relu"][KEY_MODULE], "features.1")
        self.assertEqual(md["/features/features.1/Relu"][KEY_TAG], "/SeqNet")

    def test_sequential_root_fx(self):
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
        res, out, plain = tagged_and_plain("seqroot", model, (torch.randn(2, 4),), strategy="auto")
        self.assertEqual(res.strategy, "fx")
        proto, md, _ = self.check_common(res, out, plain)
        self.assertEqual(sorted({d[KEY_TAG] for d in md.values()}),
                         ["/Sequential", "/Sequential/Linear.0", "/Sequential/Linear.1"])


class TestShared(unittest.TestCase, HierarchyChecks):
    def test_shared_module_called_twice(self):
        res, out, plain = tagged_and_plain("shared", M.Shared(), (torch.randn(2, 8),))
        proto, md, side = self.check_common(res, out, plain)
        self.assertEqual(md["/proj/Gemm"][KEY_MODULE], "proj")
        self.assertEqual(md["/proj_1/Gemm"][KEY_MODULE], "proj")
        self.assertEqual(md["/proj_1/Gemm"][KEY_TAG], "/Shared/Linear")
        # second call of block: the exporter names it /block/fc_1 and /block_1/Relu
        self.assertEqual(md["/block/fc_1/Gemm"][KEY_TAG], "/Shared/Mlp/Linear")
        self.assertEqual(md["/block/fc_1/Gemm"][KEY_MODULE], "block.fc")
        self.assertEqual(md["/block_1/Relu"][KEY_MODULE], "block")
        self.assertEqual(md["/Mul"][KEY_MODULE], "")  # top-level op between the two calls
        self.assertEqual(md["/Mul"][KEY_TAG], "/Shared")
        self.assertEqual(side["modules"]["proj"]["calls"], 2)
        self.assertEqual(side["modules"]["block.fc"]["calls"], 2)


class TestStrategies(unittest.TestCase, HierarchyChecks):
    def test_auto_falls_back_to_htp(self):
        res, out, plain = tagged_and_plain("datadep", M.DataDependent(), (torch.randn(2, 4),),
                                           strategy="auto")
        self.assertEqual(res.strategy, "htp")
        self.assertIn("falling back to HTP", res.log)
        self.assertIn("symbolic_trace", res.fallback_reason)
        self.check_common(res, out, plain)
        side = load_json(res.sidecar_path)
        self.assertEqual((side["strategy"], side["strategy_requested"]), ("htp", "auto"))

    def test_fx_strict_raises(self):
        with self.assertRaises(RuntimeError):
            export(M.DataDependent().eval(), (torch.randn(2, 4),), os.path.join(TMP, "x.onnx"),
                   strategy="fx", log=None)
        self.assertFalse(os.path.exists(os.path.join(TMP, "x.onnx")))


@torch.jit.script
def _scripted(x, n: int):
    for _ in range(n):
        x = x * 2.0 + 1.0
    if bool(x.sum() > 0):
        x = x - 1.0
    return x


class _Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(4, 4)

    def forward(self, x):
        return _scripted(self.l(x), x.shape[0])


class _Scripted(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = _Inner()

    def forward(self, x):
        return self.inner(x)


class TestSubgraphs(unittest.TestCase):
    def test_scripted_control_flow(self):
        """Loop/If with bodies: R7 holds and every node, subgraph nodes too, has metadata.
        torch inlines scripted functions without a tracer scope: those nodes are 'none'."""
        res, out, plain = tagged_and_plain("scripted", _Scripted(), (torch.randn(3, 4),),
                                           input_names=["x"], dynamic_axes={"x": {0: "n"}})
        self.assertEqual(diff_models(out, plain), [])
        proto = onnx.load(out)
        md = read_hierarchy(proto)
        from tools.export.metadata import iter_graph_nodes
        nodes = list(iter_graph_nodes(proto.graph))
        self.assertGreater(len(nodes), len(proto.graph.node))
        self.assertEqual(set(md), {n.name for n in nodes})
        self.assertEqual(md["/inner/l/Gemm"][KEY_MODULE], "inner.l")
        loop = next(n for n in proto.graph.node if n.op_type == "Loop")
        self.assertEqual(md[loop.name][KEY_SOURCE], "none")
        self.assertEqual(md[loop.name][KEY_TAG], "/_Scripted")


class TestMetadataSurvives(unittest.TestCase):
    def test_save_load_roundtrip(self):
        model = M.Shared().eval()
        out = os.path.join(TMP, "rt.onnx")
        export(model, (torch.randn(2, 8),), out, log=None)
        before = read_hierarchy(out)
        proto = onnx.load(out)
        onnx.checker.check_model(proto)
        again = os.path.join(TMP, "rt2.onnx")
        onnx.save(proto, again)
        self.assertEqual(read_hierarchy(again), before)
        reparsed = onnx.ModelProto()
        reparsed.ParseFromString(proto.SerializeToString())
        self.assertEqual(read_hierarchy(reparsed), before)
        self.assertEqual({p.key: p.value for p in reparsed.metadata_props}["onnxforge.hierarchy.strategy"], "htp")


if __name__ == "__main__":
    unittest.main()
