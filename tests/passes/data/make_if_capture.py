# Writes if_capture.onnx: an If whose branches read main-graph values (captures), with work for
# the passes inside the bodies.   /usr/bin/python3 make_if_capture.py
import onnx
from onnx import TensorProto, helper as h

x = h.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
cond = h.make_tensor_value_info("cond", TensorProto.BOOL, [])
y = h.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])

then_g = h.make_graph(
    [
        h.make_node("Identity", ["captured"], ["t0"]),                      # removable inside the body
        h.make_node("Transpose", ["t0"], ["t1"], perm=[1, 0]),
        h.make_node("Transpose", ["t1"], ["t2"], perm=[1, 0]),              # cancelling pair
        h.make_node("Add", ["t2", "x"], ["then_out"]),
    ],
    "then", [], [h.make_tensor_value_info("then_out", TensorProto.FLOAT, [2, 3])])
else_g = h.make_graph(
    [h.make_node("Neg", ["x"], ["else_out"])],
    "else", [], [h.make_tensor_value_info("else_out", TensorProto.FLOAT, [2, 3])])

nodes = [
    h.make_node("Exp", ["x"], ["captured"]),        # read only inside the then-branch: must stay
    h.make_node("Sigmoid", ["x"], ["dead"]),        # read by nothing: goes
    h.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g),
]
g = h.make_graph(nodes, "if_capture", [x, cond], [y])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
m.ir_version = 8
onnx.checker.check_model(m)
onnx.save(m, "if_capture.onnx")
