// Einsum on float32 goes through the GEMM (pairwise contraction, runtime/ops/einsum.cpp); on
// float64 through the generic loop over every label combination. The same equation on the same
// values, once in each type, must agree: the float64 run is the brute-force reference.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "ir/error.h"
#include "runtime/runtime.h"
#include "tests/runtime/tensors.h"

using namespace onnxforge;
using onnxforge::test::GraphBuilder;
using onnxforge::test::make;
using onnxforge::test::values;

namespace {

// The equation run on `shapes` with seeded values, in float32 and in float64; returns both outputs.
std::pair<rt::Tensor, rt::Tensor> both(const std::string& eq, const std::vector<std::vector<int64_t>>& shapes,
                                       unsigned seed) {
  std::vector<rt::Tensor> f, d;
  GraphBuilder mf(12), md(12);
  std::vector<ValueId> inf, ind;
  for (size_t i = 0; i < shapes.size(); ++i) {
    std::vector<float> v =
        test::noise(static_cast<size_t>(test::numel(shapes[i])), seed * 31 + static_cast<unsigned>(i));
    f.push_back(make<float>(DType::Float, shapes[i], v));
    d.push_back(make<double>(DType::Double, shapes[i], std::vector<double>(v.begin(), v.end())));
    inf.push_back(mf.input("x" + std::to_string(i), shapes[i]));
    ind.push_back(md.input("x" + std::to_string(i), shapes[i], DType::Double));
  }
  mf.outputs({mf.node("Einsum", inf, {NewAttr::String("equation", eq)})});
  md.outputs({md.node("Einsum", ind, {NewAttr::String("equation", eq)})});
  rt::Session sf(mf.model()), sd(md.model());
  return {sf.run(f)[0], sd.run(d)[0]};
}

void expect_same(const std::string& eq, const std::vector<std::vector<int64_t>>& shapes, unsigned seed) {
  auto [y, ref] = both(eq, shapes, seed);
  std::string where = eq + " seed " + std::to_string(seed) + " shapes";
  for (const auto& s : shapes) where += " " + rt::shape_str(s);
  ASSERT_EQ(y.dtype, DType::Float) << where;
  ASSERT_EQ(y.shape, ref.shape) << where;
  double worst = 0;
  for (int64_t i = 0; i < y.numel(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(y.ptr<float>()[i]) - ref.ptr<double>()[i]) /
                                (1 + std::abs(ref.ptr<double>()[i])));
  EXPECT_LT(worst, 2e-5) << where;
}

// Shapes for the terms of `eq` (letters only) from one random size per label, 1 to 6.
std::vector<std::vector<int64_t>> random_shapes(const std::string& eq, std::mt19937& r) {
  std::map<char, int64_t> size;
  std::uniform_int_distribution<int64_t> d(1, 6);
  std::vector<std::vector<int64_t>> shapes(1);
  for (char ch : eq.substr(0, eq.find("->"))) {
    if (ch == ',')
      shapes.emplace_back();
    else
      shapes.back().push_back(size.emplace(ch, d(r)).first->second);
  }
  return shapes;
}

}  // namespace

TEST(Einsum, GemmPathMatchesTheGenericLoopOnRandomShapes) {
  // What exporters emit (attention scores and context, batched and plain matmuls, projections
  // against a weight), the reductions, transposes, diagonals and traces, outer and inner
  // products, labels in an output order of their own, implicit outputs and three operands.
  const char* equations[] = {
      "bhqd,bhkd->bhqk", "bhqk,bhkd->bhqd", "bij,bjk->bik", "bij,jk->bik",    "bnd,hd->bnh", "ij,jk->ik",
      "ij,kj->ik",       "ji,jk->ik",       "ij->ji",       "ij->i",          "ij->j",       "ij->",
      "ijk->kij",        "ii->i",           "ii->",         "iij,jk->ik",     "i,j->ij",     "i,i->",
      "ij,ij->ij",       "ij,ij->",         "ijk,jl->lik",  "bij,bkj->bki",   "ij,jk",       "ba,ca",
      "abc,cd,de->abe",  "i,j,k->",         "ab,bc,ca->",   "bhid,bhjd->bhij"};
  std::mt19937 r(20261127);
  for (const char* eq : equations)
    for (unsigned seed = 0; seed < 4; ++seed) expect_same(eq, random_shapes(eq, r), seed);
}

TEST(Einsum, EllipsisBatchDimsBroadcast) {
  expect_same("...ij,...jk->...ik", {{2, 3, 4, 5}, {2, 3, 5, 6}}, 1);
  expect_same("...ij,...jk->...ik", {{2, 1, 4, 5}, {3, 5, 6}}, 2);  // [2,1] and [3]: batch [2,3]
  expect_same("...ij,...jk->...ik", {{4, 5}, {7, 5, 6}}, 3);        // A has no batch dims
  expect_same("...ij,jk->...ik", {{2, 3, 4, 5}, {5, 6}}, 4);
  expect_same("b...,b...->b", {{3, 2, 4}, {3, 2, 4}}, 5);
  expect_same("...ii->...i", {{2, 3, 3}}, 6);
  expect_same("bhqd,bhkd->bhqk", {{2, 1, 5, 8}, {2, 4, 7, 8}}, 7);  // h broadcasts
}

TEST(Einsum, EmptyOperands) {
  // A contracted label of size 0 sums over nothing: zeros. A kept one: an empty output.
  auto [y, ref] = both("ij,jk->ik", {{2, 0}, {0, 3}}, 1);
  EXPECT_EQ(y.shape, (rt::Shape{2, 3}));
  EXPECT_EQ(values<float>(y), std::vector<float>(6, 0.f));
  auto [e, eref] = both("ij,jk->ik", {{0, 4}, {4, 3}}, 1);
  EXPECT_EQ(e.shape, (rt::Shape{0, 3}));
}

TEST(Einsum, AttentionSizedContractionRunsOnTheGemm) {
  // 12 heads x 128 x 128 scores over 64: 12.6 M multiply-adds, which the generic loop (float64)
  // would take as 25 M label combinations of 2 reads each. Compared with the exact sum on a few
  // elements: the GEMM's float32 sum stays within 1e-5 of it.
  const int64_t H = 12, S = 128, D = 64;
  GraphBuilder m(12);
  ValueId q = m.input("q", {1, H, S, D}), k = m.input("k", {1, H, S, D});
  m.outputs({m.node("Einsum", {q, k}, {NewAttr::String("equation", "bhqd,bhkd->bhqk")})});
  std::vector<float> qv = test::noise(static_cast<size_t>(H * S * D), 1),
                     kv = test::noise(static_cast<size_t>(H * S * D), 2);
  rt::Session s(m.model());
  rt::Tensor y = s.run({make<float>(DType::Float, {1, H, S, D}, qv), make<float>(DType::Float, {1, H, S, D}, kv)})[0];
  ASSERT_EQ(y.shape, (rt::Shape{1, H, S, S}));
  for (int64_t h : {0L, 5L, 11L})
    for (int64_t i : {0L, 77L, 127L})
      for (int64_t j : {0L, 3L, 127L}) {
        double ref = 0;
        for (int64_t d = 0; d < D; ++d)
          ref += static_cast<double>(qv[static_cast<size_t>((h * S + i) * D + d)]) *
                 kv[static_cast<size_t>((h * S + j) * D + d)];
        EXPECT_NEAR(y.ptr<float>()[(h * S + i) * S + j], ref, 1e-5 * (1 + std::abs(ref)));
      }
}

TEST(Einsum, RepeatedOutputLabelIsRefused) {
  GraphBuilder m(12);
  ValueId x = m.input("x", {3});
  m.outputs({m.node("Einsum", {x}, {NewAttr::String("equation", "i->ii")})});
  rt::Session s(m.model());
  try {
    s.run({make<float>(DType::Float, {3}, {1, 2, 3})});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("output label i appears twice in 'i->ii'"), std::string::npos) << e.what();
  }
}
