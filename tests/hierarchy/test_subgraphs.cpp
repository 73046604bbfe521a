// If/Loop bodies: subgraph nodes are tagged (owner's tags when nothing else says), and extract
// copies the bodies and makes the outer-scope values they read inputs of the sub-model.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "hierarchy/extract.h"
#include "api/extract_verify.h"
#include "hierarchy/hierarchy.h"
#include "io/model_io.h"
#include "tests/hierarchy/hierarchy_test_util.h"

namespace onnxforge::hier {
namespace {

// x -> /pre/Relu -> r; /enc/If(cond) { then: Neg(r) ; else: Abs(x) } -> y -> /post/Sigmoid -> z
const char* kMakeModel = R"PY(
import onnx, sys
from onnx import helper as h, TensorProto as T
f = T.FLOAT
then_g = h.make_graph([h.make_node('Neg', ['r'], ['t'])], 'then', [], [h.make_tensor_value_info('t', f, [2])])
else_g = h.make_graph([h.make_node('Abs', ['x'], ['e'])], 'else', [], [h.make_tensor_value_info('e', f, [2])])
nodes = [h.make_node('Relu', ['x'], ['r'], name='/pre/Relu'),
         h.make_node('ReduceSum', ['x'], ['s'], name='/enc/ReduceSum', keepdims=0),
         h.make_node('Constant', [], ['zero'], name='Constant_3', value=h.make_tensor('zero', f, [], [0.0])),
         h.make_node('Greater', ['s', 'zero'], ['cond'], name='/enc/Greater'),
         h.make_node('If', ['cond'], ['y'], name='/enc/If', then_branch=then_g, else_branch=else_g),
         h.make_node('Sigmoid', ['y'], ['z'], name='/post/Sigmoid')]
g = h.make_graph(nodes, 'main', [h.make_tensor_value_info('x', f, [2])], [h.make_tensor_value_info('z', f, [2])],
                 value_info=[h.make_tensor_value_info('r', f, [2]), h.make_tensor_value_info('y', f, [2])])
m = h.make_model(g, opset_imports=[h.make_opsetid('', 14)])
onnx.checker.check_model(m)
onnx.save(m, sys.argv[1])
)PY";

std::filesystem::path make_if_model() {
  auto dir = test::temp_dir("subgraphs");
  auto script = dir / "make.py", out = dir / "if.onnx";
  { std::ofstream(script) << kMakeModel; }
  std::string cmd = "/usr/bin/python3 '" + script.string() + "' '" + out.string() + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return out;
}

TEST(Subgraphs, BodyNodesTakeTheOwnersModule) {
  auto model = load_model(make_if_model());
  TagReport rep = read_tags(*model);
  size_t body_nodes = 0;
  for (size_t gi = 1; gi < model->graph_count(); ++gi) {
    const Graph& g = model->graph(GraphId(static_cast<uint32_t>(gi)));
    for (NodeId n : g.nodes()) {
      ++body_nodes;
      ASSERT_EQ(modules_of(*model, g.scope(n)), std::vector<std::string>{"enc"});
      EXPECT_EQ(rep.at(g.id(), n), TagSource::Parent);
    }
  }
  EXPECT_EQ(body_nodes, 2u);
}

TEST(Subgraphs, ExtractFollowsOuterScopeValues) {
  auto model = load_model(make_if_model());
  read_tags(*model);
  Extraction cut = extract_module(*model, "enc");
  // the else branch reads x and the then branch reads r from the enclosing graph
  EXPECT_NE(std::find(cut.inputs.begin(), cut.inputs.end(), "x"), cut.inputs.end());
  EXPECT_NE(std::find(cut.inputs.begin(), cut.inputs.end(), "r"), cut.inputs.end());
  EXPECT_EQ(cut.outputs, std::vector<std::string>{"y"});
  auto out = test::temp_dir("subgraphs_out") / "enc.onnx";
  save_model(*cut.model, out);
  auto back = load_model(out);
  EXPECT_EQ(back->main().node_count(), 4u);  // ReduceSum, Constant, Greater, If
  size_t body_nodes = 0;
  for (size_t gi = 1; gi < back->graph_count(); ++gi) {
    const Graph& g = back->graph(GraphId(static_cast<uint32_t>(gi)));
    body_nodes += g.node_count();
    EXPECT_EQ(g.captures().size(), 1u);  // reloaded: the outer read is a capture again
  }
  EXPECT_EQ(body_nodes, 2u);
  for (const OutputCheck& c : verify_extraction(*model, cut, 3)) EXPECT_EQ(c.max_diff, 0.0) << c.name;
}

}  // namespace
}  // namespace onnxforge::hier
