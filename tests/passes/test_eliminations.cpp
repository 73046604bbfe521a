// eliminate_dead_nodes, eliminate_identity_ops, eliminate_unused_initializers,
// eliminate_duplicate_constants: what they change, what they leave alone, numerics.
#include <gtest/gtest.h>

#include "numeric.h"

namespace onnxforge::test {
namespace {

TEST(DeadNodes, RemovesNodesThatReachNoOutput) {
  auto make = [] {
    GraphBuilder b;
    ValueId x = b.input("x", {2, 3});
    ValueId y = b.node("Relu", {x});
    b.node("Sigmoid", {b.node("Exp", {x})});  // dead chain
    b.output(y);
    return std::move(b.m);
  };
  auto m = optimize_and_check(make, {"eliminate_dead_nodes"}, passes::AccuracyClass::Lossless);
  EXPECT_EQ(m->main().node_count(), 1u);
  EXPECT_EQ(count_op(m->main(), "Relu"), 1u);
}

TEST(DeadNodes, KeepsGraphOutputsAndNames) {
  GraphBuilder b;
  ValueId x = b.input("x", {2});
  ValueId y = b.node("Relu", {x}, {}, "y");
  b.output(y);
  optimize(*b.m, {"eliminate_dead_nodes"});
  EXPECT_EQ(b.g().node_count(), 1u);
  EXPECT_EQ(str(b.g().value_name(b.g().graph_outputs()[0])), "y");
}

TEST(IdentityOps, RemovesIdentityDropoutCastAndNeutralArithmetic) {
  auto make = [] {
    GraphBuilder b(13);
    ValueId x = b.input("x", {2, 3});
    ValueId one = b.f32("one", {}, {1.0f});
    ValueId zero = b.f32("zero", {1}, {0.0f});
    ValueId v = b.node("Identity", {x});
    v = b.node("Mul", {v, one});
    v = b.node("Add", {zero, v});
    v = b.node("Sub", {v, zero});
    v = b.node("Div", {v, one});
    v = b.node("Dropout", {v});
    v = b.node("Cast", {v}, {NewAttr::Int("to", 1)});
    b.output(b.node("Relu", {v}));
    return std::move(b.m);
  };
  auto m = optimize_and_check(make, {"eliminate_identity_ops"}, passes::AccuracyClass::Lossless);
  EXPECT_EQ(m->main().node_count(), 1u);
}

TEST(IdentityOps, LeavesShapeChangingAndTrainingForms) {
  GraphBuilder b(13);
  ValueId x = b.input("x", {3});
  ValueId zeros = b.f32("zeros", {2, 3}, {0, 0, 0, 0, 0, 0});  // broadcasts x to [2,3]
  ValueId t = b.init("train", {}, std::vector<uint8_t>{1}, DType::Bool);
  ValueId r = b.f32("ratio", {}, {0.5f});
  ValueId a = b.node("Add", {x, zeros});
  ValueId d = b.node("Dropout", {a, r, t});                   // training_mode = true: not an identity
  ValueId c = b.node("Cast", {d}, {NewAttr::Int("to", 11)});  // float -> double
  b.output(c, DType::Double);
  optimize(*b.m, {"eliminate_identity_ops"});
  EXPECT_EQ(b.g().node_count(), 3u);
}

TEST(IdentityOps, IdentityBetweenGraphInputAndOutputStays) {
  GraphBuilder b;
  ValueId x = b.input("x", {2});
  b.output(b.node("Identity", {x}, {}, "y"));
  auto r = optimize(*b.m, {"eliminate_identity_ops"});
  EXPECT_EQ(b.g().node_count(), 1u);  // removing it would rename the output or the input
  EXPECT_EQ(r.rounds, 0);
}

TEST(UnusedInitializers, RemovesUnusedAndShadowingInputsBelowIr4) {
  GraphBuilder b;
  b.m->ir_version = 3;
  ValueId x = b.input("x", {2});
  ValueId w = b.f32("w", {2}, {1, 2});
  ValueId unused = b.f32("unused", {2}, {3, 4});
  auto ins = b.g().graph_inputs();
  ins.push_back(unused);  // IR 3: initializers are listed as inputs too
  ins.push_back(w);
  b.g().set_graph_inputs(ins);
  b.output(b.node("Add", {x, w}));
  optimize(*b.m, {"eliminate_unused_initializers"});
  EXPECT_EQ(b.g().initializers().size(), 1u);
  EXPECT_EQ(b.g().graph_inputs().size(), 2u);  // x and w
}

TEST(UnusedInitializers, KeepsOverridableInputsFromIr4) {
  GraphBuilder b;
  ValueId x = b.input("x", {2});
  ValueId unused = b.f32("unused", {2}, {3, 4});
  auto ins = b.g().graph_inputs();
  ins.push_back(unused);
  b.g().set_graph_inputs(ins);
  b.output(b.node("Relu", {x}));
  optimize(*b.m, {"eliminate_unused_initializers"});
  EXPECT_EQ(b.g().initializers().size(), 1u);
}

TEST(DuplicateConstants, MergesEqualInitializersAndConstantsAndNodes) {
  auto make = [] {
    GraphBuilder b;
    ValueId x = b.input("x", {2});
    ValueId a = b.f32("a", {2}, {1, 2});
    ValueId a2 = b.f32("a2", {2}, {1, 2});
    ValueId c = b.f32("c", {2}, {1, 3});
    ValueId p = b.node("Add", {x, a});
    ValueId q = b.node("Add", {x, a2});  // same as p once a2 == a
    ValueId s = b.node("Mul", {b.node("Relu", {p}), b.node("Relu", {q})});
    b.output(b.node("Add", {s, c}));
    return std::move(b.m);
  };
  auto m = optimize_and_check(make, {"eliminate_duplicate_constants", "eliminate_unused_initializers"},
                              passes::AccuracyClass::Lossless);
  EXPECT_EQ(m->main().initializers().size(), 2u);
  EXPECT_EQ(count_op(m->main(), "Relu"), 1u);
  EXPECT_EQ(count_op(m->main(), "Add"), 2u);
}

TEST(DuplicateConstants, DifferentAttributesOrRandomOpsAreNotMerged) {
  GraphBuilder b;
  ValueId x = b.input("x", {2, 3});
  ValueId s1 = b.node("Softmax", {x}, {NewAttr::Int("axis", 0)});
  ValueId s2 = b.node("Softmax", {x}, {NewAttr::Int("axis", 1)});
  ValueId r1 = b.node("RandomUniformLike", {x});
  ValueId r2 = b.node("RandomUniformLike", {x});
  b.output(b.node("Add", {b.node("Add", {s1, s2}), b.node("Add", {r1, r2})}));
  optimize(*b.m, {"eliminate_duplicate_constants"});
  EXPECT_EQ(count_op(b.g(), "Softmax"), 2u);
  EXPECT_EQ(count_op(b.g(), "RandomUniformLike"), 2u);
}

TEST(DuplicateConstants, GraphOutputsAreNotMergedAway) {
  GraphBuilder b;
  ValueId x = b.input("x", {2});
  ValueId y1 = b.node("Relu", {x}, {}, "y1");
  ValueId y2 = b.node("Relu", {x}, {}, "y2");
  b.output(y1);
  b.output(y2);
  optimize(*b.m);
  ASSERT_EQ(b.g().graph_outputs().size(), 2u);
  EXPECT_EQ(str(b.g().value_name(b.g().graph_outputs()[0])), "y1");
  EXPECT_EQ(str(b.g().value_name(b.g().graph_outputs()[1])), "y2");
}

}  // namespace
}  // namespace onnxforge::test
