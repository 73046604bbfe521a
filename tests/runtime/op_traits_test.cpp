// The op traits table (ir/op_traits.h) agrees with the rest of the tree: every op the runtime
// executes has shape inference and a row; the lists derived from it keep their meaning.
#include <gtest/gtest.h>

#include <set>

#include "analysis/shapes.h"
#include "hierarchy/op_category.h"
#include "ir/op_traits.h"
#include "runtime/runtime.h"
#include "tests/common/graph_builder.h"

using namespace onnxforge;
using onnxforge::test::GraphBuilder;

namespace {

std::pair<std::string, std::string> split(const std::string& name) {  // "domain::Op" or "Op"
  size_t sep = name.find("::");
  if (sep == std::string::npos) return {"", name};
  return {name.substr(0, sep), name.substr(sep + 2)};
}

}  // namespace

TEST(OpTraits, EveryRuntimeOpHasShapeInferenceAndATraitsRow) {
  std::vector<std::string> ops = rt::supported_ops();
  ASSERT_GT(ops.size(), 100u);
  for (const std::string& name : ops) {
    auto [domain, op] = split(name);
    EXPECT_TRUE(has_shape_function(domain, op)) << name << " runs but shape inference does not know it";
    EXPECT_NE(op_traits(domain, op), nullptr) << name << " runs but has no row in ir/op_traits.cpp";
  }
}

TEST(OpTraits, RowsAreSortedAndUnique) {
  std::set<std::pair<std::string_view, std::string_view>> seen;
  std::string_view prev;
  for (const OpTraits& t : all_op_traits()) {
    EXPECT_TRUE(seen.insert({t.domain, t.op}).second) << t.op << " twice";
    EXPECT_LT(prev, t.op) << "rows out of order at " << t.op;
    prev = t.op;
    if (t.neutral) { EXPECT_TRUE(t.domain.empty()) << t.op; }
  }
}

TEST(OpTraits, DerivedListsExecuteAndInfer) {
  // Every elementwise unary op is inferred (the shape engine registers them from the table) and,
  // but for Identity and Not's bool output, keeps its input's shape and type.
  for (const std::string& op : ops_with(kUnary)) EXPECT_TRUE(has_shape_function("", op)) << op;
  // Every epilogue activation has a kernel: the runtime's plan fuses them.
  std::vector<std::string> epilogue = ops_with(kEpilogue);
  EXPECT_EQ(epilogue, (std::vector<std::string>{"Clip", "Gelu", "HardSigmoid", "HardSwish", "LeakyRelu", "Relu",
                                                "Sigmoid", "Swish", "Tanh"}));
  for (const std::string& op : epilogue) EXPECT_TRUE(rt::has_kernel("", op)) << op;
  EXPECT_EQ(ops_with_neutral(), (std::vector<std::string>{"Add", "Div", "Mul", "Sub"}));
  EXPECT_TRUE(op_traits("ai.onnx", "Add")->has(kCommutative));
  EXPECT_FALSE(op_traits("", "Sub")->has(kCommutative));
  EXPECT_EQ(*op_traits("", "Div")->neutral, 1.0);
}

TEST(OpTraits, ShapeInferenceOfTheOpsItLearnedFromTheTable) {
  // HardSwish is inferred only through the table's elementwise-unary fact.
  GraphBuilder b;
  ValueId x = b.input("x", {2, -1}, DType::Float, {"", "seq"});
  ValueId y = b.node("HardSwish", {x});
  ValueId n = b.node("Not", {b.node("IsNaN", {y})});
  b.output(y);  // n stays undeclared: its type is inferred only
  infer_shapes(*b.m);
  const Graph& g = b.g();
  ASSERT_TRUE(g.has_shape(y));
  EXPECT_EQ(g.dtype(y), DType::Float);
  ASSERT_EQ(g.rank(y), 2);
  EXPECT_EQ(g.shape(y)[0], Dim::of(2));
  EXPECT_EQ(g.shape(y)[1], g.shape(x)[1]);
  EXPECT_EQ(g.dtype(n), DType::Bool);  // Not keeps its own function
}

TEST(OpTraits, DeterminismAndCategories) {
  GraphBuilder b;
  Graph& g = b.g();
  ValueId x = b.input("x", {4});
  auto node = [&](const char* op) { return g.producer(b.node(op, {x})); };
  NodeId sigmoid = node("Sigmoid");
  EXPECT_TRUE(is_nondeterministic(g, node("RandomNormalLike")));
  EXPECT_TRUE(is_nondeterministic(g, node("Multinomial")));
  EXPECT_FALSE(is_nondeterministic(g, sigmoid));
  NodeId contrib = g.add_node(intern("FastGelu"), intern("com.microsoft"), intern("fg"), std::vector<ValueId>{x},
                              std::vector<ValueId>{g.add_value(intern("c"))});
  EXPECT_TRUE(is_nondeterministic(g, contrib));  // other domains: assume the worst
  EXPECT_EQ(hier::categorize("com.microsoft", "FastGelu"), OpCategory::Activation);
  EXPECT_EQ(hier::categorize("", "Gelu"), OpCategory::Activation);
  EXPECT_EQ(hier::categorize("", "MatMul"), OpCategory::Math);
  EXPECT_EQ(hier::categorize("", "Reshape"), OpCategory::TensorManipulation);
  EXPECT_EQ(hier::categorize("", "NoSuchOp"), OpCategory::Other);
  EXPECT_TRUE(has_fact(g, sigmoid, kEpilogue));
  EXPECT_FALSE(has_fact(g, contrib, kUnary));
}
