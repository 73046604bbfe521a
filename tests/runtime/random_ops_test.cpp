// Random ops (runtime/ops/random.cpp): RandomNormal, RandomUniform, their Like forms, Bernoulli
// and Multinomial draw from the stated distributions, deterministically per node and run seed:
// the same node name (or seed attribute) and run seed give the same numbers in any model.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/runtime.h"
#include "tests/common/graph_builder.h"
#include "tests/runtime/tensors.h"

using namespace onnxforge;
using onnxforge::test::GraphBuilder;
using onnxforge::test::same_bits;

namespace {

struct Moments {
  double mean = 0, sd = 0, lo = INFINITY, hi = -INFINITY;
};
Moments moments(const rt::Tensor& t) {
  Moments m;
  const double n = static_cast<double>(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double x = t.get_f64(i);
    m.mean += x / n;
    m.lo = std::min(m.lo, x), m.hi = std::max(m.hi, x);
  }
  for (int64_t i = 0; i < t.numel(); ++i) m.sd += std::pow(t.get_f64(i) - m.mean, 2) / n;
  m.sd = std::sqrt(m.sd);
  return m;
}

}  // namespace

TEST(RandomOps, DistributionsShapesAndTypes) {
  GraphBuilder b;
  ValueId x = b.input("x", {100, 100});
  ValueId n =
      b.node("RandomNormal", {},
             {NewAttr::Ints("shape", {200, 100}), NewAttr::Float("mean", 3.f), NewAttr::Float("scale", 2.f)}, "n");
  ValueId u = b.node("RandomUniformLike", {x}, {NewAttr::Float("low", -1.f), NewAttr::Float("high", 5.f)}, "u");
  ValueId h = b.node("RandomNormalLike", {x}, {NewAttr::Int("dtype", static_cast<int64_t>(DType::Float16))}, "h");
  ValueId d = b.node("RandomUniform", {},
                     {NewAttr::Ints("shape", {4}), NewAttr::Int("dtype", static_cast<int64_t>(DType::Double))}, "d");
  b.outputs({n, u, h, d});
  rt::Session s(*b.m);
  rt::Tensor in = rt::Tensor::alloc(DType::Float, {100, 100});
  auto out = s.run({in}, 7);
  EXPECT_EQ(out[0].shape, (rt::Shape{200, 100}));
  Moments mn = moments(out[0]);
  EXPECT_NEAR(mn.mean, 3.0, 0.05);
  EXPECT_NEAR(mn.sd, 2.0, 0.05);
  Moments mu = moments(out[1]);
  EXPECT_GE(mu.lo, -1.0);
  EXPECT_LT(mu.hi, 5.0);
  EXPECT_NEAR(mu.mean, 2.0, 0.1);
  EXPECT_EQ(out[2].dtype, DType::Float16);
  EXPECT_NEAR(moments(out[2]).sd, 1.0, 0.05);
  EXPECT_EQ(out[3].dtype, DType::Double);
}

TEST(RandomOps, SameNodeAndRunSeedSameNumbersOtherwiseDifferent) {
  auto make = [](const std::string& name, std::vector<NewAttr> attrs = {}) {
    GraphBuilder b;
    ValueId x = b.input("x", {64});
    b.outputs({b.node("RandomNormalLike", {x}, std::move(attrs), name)});
    return std::move(b.m);
  };
  auto a = make("noise"), a2 = make("noise"), other = make("other");
  rt::Session sa(*a), sa2(*a2), so(*other);
  rt::Tensor in = rt::Tensor::alloc(DType::Float, {64});
  EXPECT_TRUE(same_bits(sa.run({in}, 1)[0], sa2.run({in}, 1)[0]));  // another model, the same node: the same draws
  EXPECT_TRUE(same_bits(sa.run({in}, 1)[0], sa.run({in}, 1)[0]));   // run again
  EXPECT_FALSE(same_bits(sa.run({in}, 1)[0], sa.run({in}, 2)[0]));  // another run seed
  EXPECT_FALSE(same_bits(sa.run({in}, 1)[0], so.run({in}, 1)[0]));  // another node
  // A `seed` attribute decides instead of the name.
  auto s1 = make("one", {NewAttr::Float("seed", 5.f)}), s2 = make("two", {NewAttr::Float("seed", 5.f)});
  rt::Session ss1(*s1), ss2(*s2);
  EXPECT_TRUE(same_bits(ss1.run({in}, 3)[0], ss2.run({in}, 3)[0]));
}

TEST(RandomOps, BernoulliAndMultinomial) {
  GraphBuilder b;
  ValueId p = b.input("p", {1000});
  ValueId logits = b.input("logits", {2, 3});
  ValueId bern = b.node("Bernoulli", {p}, {}, "coin");
  ValueId draws = b.node("Multinomial", {logits}, {NewAttr::Int("sample_size", 500), NewAttr::Int("dtype", 7)}, "dice");
  b.outputs({bern, draws});
  rt::Session s(*b.m);
  rt::Tensor pt = rt::Tensor::alloc(DType::Float, {1000});
  for (int64_t i = 0; i < 1000; ++i) pt.ptr<float>()[i] = i < 500 ? 0.f : 1.f;
  rt::Tensor lt = rt::Tensor::alloc(DType::Float, {2, 3});
  const float l[6] = {0, 0, 50, 0, 0, 0};  // row 0: class 2 almost surely; row 1: uniform
  std::memcpy(lt.data, l, sizeof l);
  auto out = s.run({pt, lt}, 0);
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(out[0].get_f64(i), i < 500 ? 0.0 : 1.0) << i;
  ASSERT_EQ(out[1].shape, (rt::Shape{2, 500}));
  ASSERT_EQ(out[1].dtype, DType::Int64);
  int counts[3] = {0, 0, 0};
  for (int64_t k = 0; k < 500; ++k) {
    EXPECT_EQ(out[1].get_i64(k), 2);
    ++counts[out[1].get_i64(500 + k)];
  }
  for (int c : counts) EXPECT_GT(c, 120);  // about 167 each
}
