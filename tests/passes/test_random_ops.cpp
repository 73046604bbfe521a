// Random ops under passes: never folded (RandomNormal has no inputs, RandomUniformLike a constant
// one), never merged as duplicates, and a model with them verifies after the whole pipeline
// because the original and the optimized model draw the same numbers where the node survives.
#include <gtest/gtest.h>

#include "numeric.h"

namespace onnxforge::test {
namespace {

TEST(RandomOps, NeverFoldedNorMerged) {
  auto make = [] {
    GraphBuilder b;
    ValueId x = b.input("x", {2, 3});
    ValueId c = b.f32("c", {2, 3}, {1, 2, 3, 4, 5, 6});
    ValueId n = b.node("RandomNormal", {}, {NewAttr::Ints("shape", {2, 3})}, "normal");
    ValueId u = b.node("RandomUniformLike", {c}, {}, "uniform");  // every input constant
    ValueId a1 = b.node("RandomNormalLike", {x}, {}, "a");
    ValueId a2 = b.node("RandomNormalLike", {x}, {}, "b");  // the same op, input and attributes as "a"
    b.output(b.node("Add", {b.node("Add", {n, u}), b.node("Sub", {a1, a2})}));
    return std::move(b.m);
  };
  auto m = optimize_and_check(make, {"fold_constants", "eliminate_duplicate_constants", "eliminate_dead_nodes"},
                              passes::AccuracyClass::Lossless);
  EXPECT_EQ(count_op(m->main(), "RandomNormal"), 1u);
  EXPECT_EQ(count_op(m->main(), "RandomUniformLike"), 1u);
  EXPECT_EQ(count_op(m->main(), "RandomNormalLike"), 2u);
  // The two draws differ: merging them would make a1 - a2 zero.
  rt::Session s(*m);
  auto out = s.run({rt::Tensor::alloc(DType::Float, {2, 3})}, 1);
  EXPECT_NE(out[0].get_f64(0), out[0].get_f64(1));
}

TEST(RandomOps, ModelWithNoiseVerifiesAfterEveryPass) {
  auto make = [] {
    GraphBuilder b;
    ValueId x = b.input("x", {1, 16, 8});
    ValueId w = b.f32("w", {8, 8}, std::vector<float>(64, 0.125f));
    ValueId h = b.node("MatMul", {x, w});
    ValueId noise = b.node("RandomNormalLike", {h}, {NewAttr::Float("scale", 0.5f)}, "/dp/RandomNormalLike");
    b.output(b.node("Relu", {b.node("Add", {h, noise})}));
    return std::move(b.m);
  };
  auto m = optimize_and_check(make, {}, passes::AccuracyClass::FloatBounded);
  EXPECT_EQ(count_op(m->main(), "RandomNormalLike"), 1u);
}

}  // namespace
}  // namespace onnxforge::test
