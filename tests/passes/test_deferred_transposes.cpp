// Large weight transposes are folded into deferred tensors: recorded, not computed, merged by
// recipe, streamed by the writer and computed by anything else that reads them.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "io/model_io.h"
#include "numeric.h"
#include "tests/common/models.h"

namespace onnxforge::test {
namespace {

// [rows, cols] floats, distinct per seed; 1024 x 512 is 2 MiB (over the 1 MiB deferral size).
std::vector<float> weights(int64_t rows, int64_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (float& v : w) v = d(rng);
  return w;
}

std::vector<float> transposed(const std::vector<float>& w, int64_t rows, int64_t cols) {
  std::vector<float> t(w.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = w[r * cols + c];
  return t;
}

// y = x · Transpose(W): a Linear layer as PyTorch exports it without constant folding.
std::unique_ptr<Model> linear(int64_t rows, int64_t cols, unsigned seed = 1) {
  GraphBuilder b;
  ValueId x = b.input("x", {3, cols});
  ValueId w = b.f32("W", {rows, cols}, weights(rows, cols, seed));
  b.output(b.node("MatMul", {x, b.node("Transpose", {w})}));
  return std::move(b.m);
}

const std::vector<std::string> kFold = {"fold_constants", "eliminate_duplicate_constants", "eliminate_dead_nodes",
                                        "eliminate_unused_initializers"};

TensorId weight_of_matmul(const Graph& g) {
  for (NodeId n : g.nodes())
    if (g.is_op(n, "MatMul")) return g.initializer(g.input(n, 1));
  return TensorId{};
}

std::vector<float> floats(const TensorStore& ts, TensorId t) { return ts.values<float>(t); }

TEST(DeferredTransposes, FoldedWeightIsRecordedNotComputed) {
  auto m = linear(1024, 512);
  optimize(*m, kFold);
  EXPECT_EQ(count_op(m->main(), "Transpose"), 0u);
  TensorId t = weight_of_matmul(m->main());
  ASSERT_TRUE(t.valid());
  EXPECT_TRUE(m->tensors.is_deferred(t));
  EXPECT_EQ(std::vector<int64_t>(m->tensors.dims(t).begin(), m->tensors.dims(t).end()),
            (std::vector<int64_t>{512, 1024}));
  // Reading it computes it, once.
  EXPECT_EQ(floats(m->tensors, t), transposed(weights(1024, 512, 1), 1024, 512));
  EXPECT_FALSE(m->tensors.is_deferred(t));
}

TEST(DeferredTransposes, SmallTransposesAreComputedAtOnce) {
  auto m = linear(64, 32);  // 8 KiB
  optimize(*m, kFold);
  TensorId t = weight_of_matmul(m->main());
  ASSERT_TRUE(t.valid());
  EXPECT_FALSE(m->tensors.is_deferred(t));
  EXPECT_EQ(floats(m->tensors, t), transposed(weights(64, 32, 1), 64, 32));
}

TEST(DeferredTransposes, NumericallyEqualThroughTheRuntime) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  auto m = optimize_and_check([] { return linear(1024, 512); }, kFold, passes::AccuracyClass::Lossless);
  EXPECT_EQ(count_op(m->main(), "Transpose"), 0u);
}

// The runtime packs a deferred weight transpose from its source (KernelDef::prepare_transposed_b)
// and computes any other deferred weight into plan memory: verifying never leaves a computed copy
// in the store (TinyLlama-1.1B kept 4 GB of them and peaked at 12 GiB).
TEST(DeferredTransposes, VerificationLeavesThemDeferred) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  for (bool also_read_at_run_time : {false, true}) {
    SCOPED_TRACE(also_read_at_run_time);
    auto make = [also_read_at_run_time] {
      GraphBuilder b;
      ValueId x = b.input("x", {3, 512});
      ValueId wt = b.node("Transpose", {b.f32("W", {1024, 512}, weights(1024, 512, 1))});
      b.output(b.node("MatMul", {x, wt}));
      if (also_read_at_run_time)  // not a packing reader and not foldable: the plan computes it
        b.output(b.node("Add", {b.input("z", {512, 1024}), wt}));
      return std::move(b.m);
    };
    auto m = optimize_and_check(make, kFold, passes::AccuracyClass::Lossless);
    TensorId t = weight_of_matmul(m->main());
    ASSERT_TRUE(t.valid());
    EXPECT_TRUE(m->tensors.is_deferred(t));
    passes::Reference ref(*make(), passes::VerifyOptions{1, {}});
    EXPECT_TRUE(ref.check(*m, passes::tolerance_of(passes::AccuracyClass::Lossless)).ok);
    EXPECT_TRUE(m->tensors.is_deferred(t));
  }
}

TEST(DeferredTransposes, SaveStreamsThemEmbeddedAndExternal) {
  auto dir = temp_dir("deferred_save");
  const auto expect = transposed(weights(1024, 512, 1), 1024, 512);
  for (WeightPlacement placement : {WeightPlacement::Embed, WeightPlacement::External}) {
    auto m = linear(1024, 512);
    optimize(*m, kFold);
    TensorId t = weight_of_matmul(m->main());
    SaveOptions o;
    o.placement = placement;
    auto path = dir / (placement == WeightPlacement::Embed ? "embedded.onnx" : "external.onnx");
    SaveStats s = save_model(*m, path, o);
    EXPECT_EQ(s.used_external, placement == WeightPlacement::External);
    EXPECT_TRUE(m->tensors.is_deferred(t)) << "the writer computes into scratch memory, the store keeps the recipe";
    auto back = load_model(path);
    TensorId bt = weight_of_matmul(back->main());
    ASSERT_TRUE(bt.valid());
    EXPECT_FALSE(back->tensors.is_deferred(bt));
    EXPECT_EQ(floats(back->tensors, bt), expect);
  }
}

TEST(DeferredTransposes, EqualRecipesMergeWithoutComputingDifferentWeightsDoNot) {
  GraphBuilder b;
  ValueId x = b.input("x", {3, 512});
  ValueId w = b.f32("W", {1024, 512}, weights(1024, 512, 1));
  ValueId w_copy = b.f32("W_copy", {1024, 512}, weights(1024, 512, 1));  // same bytes, other initializer
  ValueId other = b.f32("V", {1024, 512}, weights(1024, 512, 2));
  for (ValueId src : {w, w_copy, other}) b.output(b.node("MatMul", {x, b.node("Transpose", {src})}));
  optimize(*b.m, {"fold_constants", "eliminate_duplicate_constants"});
  const Graph& g = b.g();
  std::vector<TensorId> read;
  for (NodeId n : g.nodes())
    if (g.is_op(n, "MatMul")) read.push_back(g.initializer(g.input(n, 1)));
  ASSERT_EQ(read.size(), 3u);
  std::set<uint32_t> distinct;
  for (TensorId t : read) {
    distinct.insert(t.v);
    EXPECT_TRUE(b.m->tensors.is_deferred(t));
  }
  EXPECT_EQ(distinct.size(), 2u) << "W and W_copy transpose to one tensor; V's stays separate";
}

TEST(DeferredTransposes, ReplacingASourceComputesItsDependentsFirst) {
  auto m = linear(1024, 512);
  optimize(*m, {"fold_constants"});
  TensorId t = weight_of_matmul(m->main());
  ASSERT_TRUE(m->tensors.is_deferred(t));
  TensorId source = m->tensors.recipe(t)->sources[0];
  std::vector<float> zeros(1024 * 512, 0.f);
  std::vector<int64_t> dims = {1024, 512};
  m->tensors.replace(source, dims, std::as_bytes(std::span(zeros)));
  EXPECT_EQ(floats(m->tensors, t), transposed(weights(1024, 512, 1), 1024, 512));
}

}  // namespace
}  // namespace onnxforge::test
