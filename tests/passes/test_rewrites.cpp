// eliminate_redundant_transposes, fuse_consecutive_reshapes, simplify_shape_chains, fold_constants.
#include <gtest/gtest.h>

#include "passes/graph_util.h"
#include "numeric.h"

namespace onnxforge::test {
namespace {

NewAttr perm(std::vector<int64_t> p) { return NewAttr::Ints("perm", std::move(p)); }

TEST(Transposes, CancellingPairIsRemovedComposedPairBecomesOne) {
  auto make = [] {
    GraphBuilder b;
    ValueId x = b.input("x", {2, 3, 4});
    ValueId a = b.node("Transpose", {b.node("Transpose", {x}, {perm({1, 0, 2})})}, {perm({1, 0, 2})});
    ValueId c = b.node("Transpose", {b.node("Transpose", {a}, {perm({0, 2, 1})})}, {perm({2, 0, 1})});
    b.output(b.node("Relu", {c}));
    return std::move(b.m);
  };
  auto m = optimize_and_check(make, {"eliminate_redundant_transposes", "eliminate_dead_nodes"},
                              passes::AccuracyClass::Lossless);
  EXPECT_EQ(count_op(m->main(), "Transpose"), 1u);
}

TEST(Transposes, PushedThroughUnaryWhenThatCancels) {
  auto make = [] {
    GraphBuilder b;
    ValueId x = b.input("x", {2, 3});
    ValueId t = b.node("Transpose", {b.node("Relu", {b.node("Transpose", {x}, {perm({1, 0})})})}, {perm({1, 0})});
    b.output(b.node("Sigmoid", {t}));
    return std::move(b.m);
  };
  auto m = optimize_and_check(make, {"eliminate_redundant_transposes"}, passes::AccuracyClass::Lossless);
  EXPECT_EQ(count_op(m->main(), "Transpose"), 0u);
  EXPECT_EQ(count_op(m->main(), "Relu"), 1u);
}

TEST(Transposes, InnerTransposeWithOtherReadersStays) {
  GraphBuilder b;
  ValueId x = b.input("x", {2, 3});
  ValueId t1 = b.node("Transpose", {x}, {perm({1, 0})});
  ValueId t2 = b.node("Transpose", {t1}, {perm({1, 0})});
  b.output(b.node("Relu", {t2}));
  b.output(b.node("Sigmoid", {t1}));
  optimize(*b.m, {"eliminate_redundant_transposes", "eliminate_dead_nodes"});
  EXPECT_EQ(count_op(b.g(), "Transpose"), 1u);
}

// Relu(Reshape(Reshape(x[2,3,4], inner), outer)) through fuse_consecutive_reshapes, checked.
std::unique_ptr<Model> reshape_pair(std::vector<int64_t> inner, std::vector<int64_t> outer) {
  auto make = [&] {
    GraphBuilder b;
    ValueId x = b.input("x", {2, 3, 4});
    ValueId r1 = b.node("Reshape", {x, b.i64("s1", inner)});
    ValueId r2 = b.node("Reshape", {r1, b.i64("s2", outer)});
    b.output(b.node("Relu", {r2}));
    return std::move(b.m);
  };
  return optimize_and_check(make, {"fuse_consecutive_reshapes", "eliminate_dead_nodes"},
                            passes::AccuracyClass::Lossless);
}

TEST(CleanupAttention, ConsecutiveReshapesCompose) {
  auto m = reshape_pair({6, 4}, {2, 12});
  EXPECT_EQ(count_op(m->main(), "Reshape"), 1u);
}

// The onnxoptimizer bug: Reshape(Reshape(x, [6,4]), [0, 2, -1]) — the 0 copies dim 0 of the
// *intermediate* (6 → [6,2,2]); composing the target as written would copy x's dim 0 (2 →
// [2,2,6]). The 0 is resolved to the inner target's 6 instead.
TEST(CleanupAttention, ComposesAZeroAsTheDimItCopies) {
  auto m = reshape_pair({6, 4}, {0, 2, -1});
  ASSERT_EQ(count_op(m->main(), "Reshape"), 1u);
  const Graph& g = m->main();
  for (NodeId n : g.nodes())
    if (g.is_op(n, "Reshape")) {
      EXPECT_EQ(constant_ints(g, g.input(n, 1)), (std::vector<int64_t>{6, 2, -1}));
      EXPECT_EQ(str(g.value_name(g.input(n, 0))), "x");
    }
}

// Where the inner target is -1 at the position the 0 copies, the dim is not a constant: the pair
// stays.
TEST(CleanupAttention, NeverComposesAZeroOverAnInferredDim) {
  auto m = reshape_pair({-1, 4}, {0, 2, -1});
  EXPECT_EQ(count_op(m->main(), "Reshape"), 2u);
}

// Llama's key and value heads with a symbolic batch and sequence: the head split Reshape(x, [0, 0,
// 2, 16]) that fuse_attention re-merges with Reshape(·, [0, 0, 32]) composes into
// Reshape(x, [0, 0, 32]) — a copy of both symbolic dims and x's own 32 — which keeps x's shape and
// goes. A split into other heads composes into one Reshape; another rank is no no-op.
TEST(CleanupAttention, HeadSplitAndMergeWithSymbolicDimsCancel) {
  auto make = [](std::vector<int64_t> merge) {
    return [merge] {
      GraphBuilder b;
      ValueId x = b.input("x", {-1, -1, 32}, DType::Float, {"batch", "sequence"});
      ValueId split = b.node("Reshape", {x, b.i64("split", {0, 0, 2, 16})});
      ValueId merged = b.node("Reshape", {split, b.i64("merge", merge)});
      b.output(b.node("Relu", {merged}));
      return std::move(b.m);
    };
  };
  const std::vector<std::string> passes = {"fuse_consecutive_reshapes", "eliminate_dead_nodes"};
  auto m = optimize_and_check(make({0, 0, 32}), passes, passes::AccuracyClass::Lossless);
  EXPECT_EQ(count_op(m->main(), "Reshape"), 0u);
  m = optimize_and_check(make({0, -1, 32}), passes, passes::AccuracyClass::Lossless);
  EXPECT_EQ(count_op(m->main(), "Reshape"), 0u);
  m = optimize_and_check(make({0, 0, 4, 8}), passes, passes::AccuracyClass::Lossless);
  ASSERT_EQ(count_op(m->main(), "Reshape"), 1u);
  m = optimize_and_check(make({0, 0, 32, 1}), passes, passes::AccuracyClass::Lossless);
  EXPECT_EQ(count_op(m->main(), "Reshape"), 1u);  // composed, but rank 4: it stays
  // A graph output keeps its Reshape (its name is the output's).
  GraphBuilder b;
  ValueId x = b.input("x", {-1, -1, 32}, DType::Float, {"batch", "sequence"});
  b.output(b.node("Reshape", {x, b.i64("same", {0, 0, 32})}));
  optimize(*b.m, passes);
  EXPECT_EQ(count_op(b.g(), "Reshape"), 1u);
}

TEST(CleanupAttention, ReshapeWithSeveralReadersIsKeptAndSameShapeReshapeGoes) {
  GraphBuilder b;
  ValueId x = b.input("x", {2, 3, 4});
  ValueId r1 = b.node("Reshape", {x, b.i64("s1", {6, 4})});
  ValueId r2 = b.node("Reshape", {r1, b.i64("s2", {24})});
  ValueId same = b.node("Reshape", {x, b.i64("s3", {2, 3, -1})});
  b.output(b.node("Relu", {r2}));
  b.output(b.node("Sigmoid", {r1}));
  b.output(b.node("Tanh", {same}));
  optimize(*b.m, {"fuse_consecutive_reshapes", "eliminate_dead_nodes"});
  EXPECT_EQ(count_op(b.g(), "Reshape"), 2u);  // r1 kept for Sigmoid, r2 reads x, `same` removed
}

// BERT's head split: Shape(x) → Gather(0), Gather(1) → Unsqueeze → Concat(.., 4, 16) → Reshape(x).
TEST(ShapeChains, DynamicReshapeTargetBecomesZerosAndConstants) {
  auto make = [] {
    GraphBuilder b;
    ValueId x = b.input("x", {-1, -1, 64}, DType::Float, {"batch", "seq"});
    ValueId s = b.node("Shape", {x});
    ValueId axes = b.i64("axes", {0});
    ValueId d0 = b.node("Unsqueeze", {b.node("Gather", {s, b.i64("i0", {0}, true)}), axes});
    ValueId d1 = b.node("Unsqueeze", {b.node("Gather", {s, b.i64("i1", {1}, true)}), axes});
    ValueId target = b.node("Concat", {d0, d1, b.i64("h", {4}), b.i64("d", {16})}, {NewAttr::Int("axis", 0)});
    b.output(b.node("Reshape", {x, target}));
    return std::move(b.m);
  };
  auto m = optimize_and_check(make, {"simplify_shape_chains", "eliminate_dead_nodes"}, passes::AccuracyClass::Lossless);
  EXPECT_EQ(m->main().node_count(), 1u);
  NodeId r = m->main().nodes()[0];
  auto target = constant_ints(m->main(), m->main().input(r, 1));
  ASSERT_TRUE(target);
  EXPECT_EQ(*target, (std::vector<int64_t>{0, 0, 4, 16}));
}

TEST(ShapeChains, StaticChainFoldsToConstant) {
  GraphBuilder b;
  ValueId x = b.input("x", {2, 8});
  ValueId s = b.node("Shape", {x});
  ValueId n = b.node("Gather", {s, b.i64("i", {1}, true)});
  ValueId t =
      b.node("Concat", {b.node("Unsqueeze", {n, b.i64("axes", {0})}), b.i64("m", {-1})}, {NewAttr::Int("axis", 0)});
  b.output(b.node("Reshape", {x, t}));
  optimize(*b.m, {"simplify_shape_chains", "eliminate_dead_nodes"});
  EXPECT_EQ(b.g().node_count(), 1u);
}

TEST(FoldConstants, FoldsConstantSubgraphsAndConstantNodes) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  auto make = [] {
    GraphBuilder b;
    ValueId x = b.input("x", {2});
    ValueId c = b.node("Add", {b.f32("a", {2}, {1, 2}), b.f32("b", {2}, {3, 4})});
    ValueId k = b.node("Mul", {c, b.f32("two", {}, {2})});
    b.output(b.node("Add", {x, k}));
    b.output(b.node("Reshape", {x, b.constant_i64("shape", {2, 1})}));
    return std::move(b.m);
  };
  auto m = optimize_and_check(make, {"fold_constants", "eliminate_dead_nodes", "eliminate_unused_initializers"});
  EXPECT_EQ(m->main().node_count(), 2u);
  EXPECT_EQ(count_op(m->main(), "Constant"), 0u);
}

TEST(FoldConstants, SizeGuardKeepsModelSmall) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  GraphBuilder b;
  ValueId x = b.input("x", {1024, 1024});
  // ConstantOfShape([1024,1024]) of a 16-byte shape would add 4 MiB: over the 1 MiB budget.
  ValueId big = b.node("ConstantOfShape", {b.i64("shape", {1024, 1024})});
  b.output(b.node("Add", {x, big}));
  optimize(*b.m, {"fold_constants"});
  EXPECT_EQ(count_op(b.g(), "ConstantOfShape"), 1u);
  GraphBuilder b2;
  ValueId x2 = b2.input("x", {1024, 1024});
  ValueId big2 = b2.node("ConstantOfShape", {b2.i64("shape", {1024, 1024})});
  b2.output(b2.node("Add", {x2, big2}));
  optimize(*b2.m, {"fold_constants"}, uint64_t{8} << 20);  // --fold-size 8M allows it
  EXPECT_EQ(count_op(b2.g(), "ConstantOfShape"), 0u);
}

TEST(FoldConstants, ShapeOfStaticValueFoldsAndOverridableInitializersDoNot) {
  GraphBuilder b;
  ValueId x = b.input("x", {2, 3});
  ValueId w = b.f32("w", {2}, {1, 2});
  auto ins = b.g().graph_inputs();
  ins.push_back(w);  // IR >= 4 input with a default: users may feed another value
  b.g().set_graph_inputs(ins);
  b.output(b.node("Shape", {x}), DType::Int64);
  b.output(b.node("Relu", {w}));
  optimize(*b.m, {"fold_constants"});
  EXPECT_EQ(count_op(b.g(), "Relu"), 1u);
  EXPECT_EQ(count_op(b.g(), "Shape"), 1u);  // a graph output: stays a node (no Identity churn)
}

}  // namespace
}  // namespace onnxforge::test
