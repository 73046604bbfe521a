"""NodeProto.metadata_props (field 9) written as raw protobuf bytes and read back."""
import unittest

import onnx
from onnx import helper

from tools.export import metadata as md
from tools.export.compare import strip_metadata


def _node():
    return helper.make_node("Relu", ["x"], ["y"], name="r")


class TestMetadata(unittest.TestCase):
    def test_wire_format(self):
        # field 9 (0x4A), entry {1: "k", 2: "v"}: exactly the bytes newer onnx would write
        self.assertEqual(md.encode_metadata({"k": "v"}), b"\x4a\x06\x0a\x01k\x12\x01v")
        long = "x" * 300  # multi-byte varint lengths
        n = _node()
        md.set_node_metadata(n, {"a": long})
        self.assertEqual(md.get_node_metadata(n), {"a": long})

    def test_set_get_replace(self):
        n = _node()
        md.set_node_metadata(n, {md.KEY_TAG: "/A/B", md.KEY_MODULE: "b", md.KEY_DEPTH: "2"})
        md.set_node_metadata(n, {"other": "1"})
        md.set_node_metadata(n, {md.KEY_TAG: "/A/C"})
        self.assertEqual(md.get_node_metadata(n),
                         {md.KEY_MODULE: "b", md.KEY_DEPTH: "2", "other": "1", md.KEY_TAG: "/A/C"})
        # the known fields are untouched
        self.assertEqual((n.op_type, list(n.input), list(n.output), n.name), ("Relu", ["x"], ["y"], "r"))

    def test_survives_serialization_and_subgraphs(self):
        inner = _node()
        md.set_node_metadata(inner, {md.KEY_TAG: "/M/Inner"})
        body = helper.make_graph([inner], "body", [], [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])])
        cond = helper.make_node("If", ["c"], ["y"], name="if", then_branch=body, else_branch=body)
        md.set_node_metadata(cond, {md.KEY_TAG: "/M"})
        g = helper.make_graph([cond], "g", [helper.make_tensor_value_info("c", onnx.TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])])
        model = helper.make_model(g)
        again = onnx.load_from_string(model.SerializeToString())
        self.assertEqual(md.read_hierarchy(again), {"if": {md.KEY_TAG: "/M"}, "r": {md.KEY_TAG: "/M/Inner"}})
        self.assertEqual(again.SerializeToString(), model.SerializeToString())
        stripped = strip_metadata(again)
        self.assertEqual(md.read_hierarchy(stripped), {})
        self.assertEqual(len(list(md.iter_graph_nodes(stripped.graph))), 3)


if __name__ == "__main__":
    unittest.main()
