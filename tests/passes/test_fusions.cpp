// fuse_conv_batchnorm, annotate_conv_activation, fuse_matmul_add.
#include <gtest/gtest.h>

#include <random>

#include "numeric.h"
#include "tests/common/random.h"

namespace onnxforge::test {
namespace {

ValueId bn(GraphBuilder& b, ValueId x, int64_t c, const std::string& p) {
  return b.node("BatchNormalization", {x, b.f32(p + "s", {c}, noise(c, 1)), b.f32(p + "b", {c}, noise(c, 2)),
                                       b.f32(p + "m", {c}, noise(c, 3)), b.f32(p + "v", {c}, noise(c, 4, 0.5f, 2))});
}

TEST(ConvBatchNorm, ConvAndConvTransposeFoldInFloat64) {
  auto make = [] {
    GraphBuilder b;
    ValueId x = b.input("x", {1, 3, 8, 8});
    ValueId c = b.node("Conv", {x, b.f32("w", {4, 3, 3, 3}, noise(108, 5)), b.f32("bias", {4}, noise(4, 6))},
                       {NewAttr::Ints("pads", {1, 1, 1, 1})});
    ValueId y = bn(b, c, 4, "bn1");
    ValueId t = b.node("ConvTranspose", {y, b.f32("wt", {4, 2, 2, 2}, noise(32, 7))},
                       {NewAttr::Ints("strides", {2, 2}), NewAttr::Int("group", 1)});
    b.output(bn(b, t, 2, "bn2"));
    return std::move(b.m);
  };
  auto m = optimize_and_check(make, {"fuse_conv_batchnorm", "eliminate_unused_initializers"});
  EXPECT_EQ(count_op(m->main(), "BatchNormalization"), 0u);
  EXPECT_EQ(m->main().node_count(), 2u);
}

TEST(ConvBatchNorm, BatchNormBeforeUnpaddedConvFolds) {
  auto make = [] {
    GraphBuilder b;
    ValueId x = b.input("x", {1, 3, 6, 6});
    ValueId y = bn(b, x, 3, "bn");
    b.output(b.node("Conv", {y, b.f32("w", {4, 3, 1, 1}, noise(12, 5))}));
    return std::move(b.m);
  };
  auto m = optimize_and_check(make, {"fuse_conv_batchnorm"});
  EXPECT_EQ(m->main().node_count(), 1u);
}

TEST(ConvBatchNorm, SharedWeightsOrPaddedBatchNormFirstAreLeftAlone) {
  GraphBuilder b;
  ValueId x = b.input("x", {1, 3, 6, 6});
  ValueId w = b.f32("w", {3, 3, 1, 1}, noise(9, 5));
  ValueId c1 = b.node("Conv", {x, w});
  ValueId c2 = b.node("Conv", {x, w});  // same weights: folding would change c2
  b.output(bn(b, c1, 3, "bn1"));
  b.output(c2);
  ValueId y = bn(b, x, 3, "bn2");
  b.output(b.node("Conv", {y, b.f32("w2", {3, 3, 3, 3}, noise(81, 6))}, {NewAttr::Ints("pads", {1, 1, 1, 1})}));
  optimize(*b.m, {"fuse_conv_batchnorm"});
  EXPECT_EQ(count_op(b.g(), "BatchNormalization"), 2u);
}

TEST(ConvRelu, MarksEpilogueAndDropsRedundantRelu) {
  auto make = [] {
    GraphBuilder b;
    ValueId x = b.input("x", {1, 2, 4, 4});
    ValueId c = b.node("Conv", {x, b.f32("w", {2, 2, 1, 1}, noise(4, 5))});
    b.output(b.node("Relu", {b.node("Relu", {c})}));
    return std::move(b.m);
  };
  auto m = optimize_and_check(make, {"annotate_conv_activation"}, passes::AccuracyClass::Lossless);
  EXPECT_EQ(count_op(m->main(), "Relu"), 1u);
  NodeId conv = m->main().nodes()[0];
  for (NodeId n : m->main().nodes())
    if (m->main().is_op(n, "Conv")) conv = n;
  EXPECT_EQ(m->main().metadata_value(conv, "onnxforge.epilogue"), "Relu");
}

TEST(MatMulAdd, Rank2WithBiasBecomesGemm) {
  auto make = [] {
    GraphBuilder b;
    ValueId x = b.input("x", {3, 4});
    ValueId y = b.node("MatMul", {x, b.f32("w", {4, 5}, noise(20, 1))});
    b.output(b.node("Add", {y, b.f32("bias", {5}, noise(5, 2))}));
    return std::move(b.m);
  };
  auto m = optimize_and_check(make, {"fuse_matmul_add"});
  EXPECT_EQ(count_op(m->main(), "Gemm"), 1u);
  EXPECT_EQ(m->main().node_count(), 1u);
}

TEST(MatMulAdd, Rank3WrongBiasOrSharedProductStay) {
  GraphBuilder b;
  ValueId x3 = b.input("x3", {2, 3, 4});
  ValueId x = b.input("x", {3, 4});
  ValueId w = b.f32("w", {4, 5}, noise(20, 1));
  b.output(b.node("Add", {b.node("MatMul", {x3, w}), b.f32("b1", {5}, noise(5, 2))}));
  b.output(b.node("Add", {b.node("MatMul", {x, w}), b.f32("b2", {2, 3, 5}, noise(30, 3))}));  // grows the output
  ValueId p = b.node("MatMul", {x, w});
  b.output(b.node("Add", {p, b.f32("b3", {5}, noise(5, 4))}));
  b.output(p);
  optimize(*b.m, {"fuse_matmul_add"});
  EXPECT_EQ(count_op(b.g(), "Gemm"), 0u);
}

}  // namespace
}  // namespace onnxforge::test
