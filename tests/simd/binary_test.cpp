// Broadcasting binary ops and comparisons: every broadcast position, float and integer
// semantics (NaN-propagating Max/Min, truncating integer Div), in place, large parallel shapes.
#include <cmath>
#include <limits>
#include <utility>

#include "simd/binary.h"
#include "simd/reference.h"
#include "tests/simd/simd_test_util.h"

namespace onnxforge::simd::test {
namespace {

using Dims = std::vector<std::int64_t>;

const std::vector<std::pair<Dims, Dims>>& shape_pairs() {
  static const std::vector<std::pair<Dims, Dims>> pairs = {
      {{}, {}},                      // scalar op scalar
      {{}, {2, 3}},                  // scalar first
      {{2, 3}, {}},                  // scalar second
      {{1}, {37}},                   // size-1 vector
      {{2, 3, 4}, {2, 3, 4}},        // same shape
      {{2, 3, 33}, {33}},            // row vector
      {{2, 3, 33}, {3, 1}},          // column vector
      {{3, 1}, {2, 3, 33}},          // column vector first
      {{2, 3, 17}, {2, 1, 17}},      // middle axis
      {{2, 1, 17}, {1, 3, 1}},       // both broadcast
      {{5, 1}, {1, 6}},              // outer product
      {{2, 3, 4, 5}, {3, 1, 5}},     // mixed
      {{4, 1, 1, 7}, {1, 3, 5, 1}},  // mixed, both sides
      {{1, 1, 1}, {2, 3, 4}},        // all-ones shape
      {{0, 3}, {3}},                 // zero-size
      {{2, 0}, {2, 1}},              // zero-size broadcast
      {{3, 1, 7}, {3, 5, 7}},
      {{130, 1000}, {1000}},  // large: parallel over rows
      {{1000, 130}, {1000, 1}},
      {{3, 70001}, {1}},  // large inner span
      {{70001}, {70001}},
  };
  return pairs;
}

class Binary : public SimdTest {};
ONNXFORGE_SIMD_ALL_ISAS(Binary);

TEST_P(Binary, FloatOpsInEveryBroadcastPosition) {
  unsigned seed = 1;
  for (const auto& [as, bs] : shape_pairs()) {
    const Dims ys = broadcast_shape(as, bs);
    const auto a = random_floats(static_cast<std::size_t>(product(as)), seed++, -4.f, 4.f);
    auto b = random_floats(static_cast<std::size_t>(product(bs)), seed++, -4.f, 4.f);
    for (BinaryOp op : {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Max, BinaryOp::Min}) {
      std::vector<float> got(static_cast<std::size_t>(product(ys))), want(got.size());
      binary(op, as, a.data(), bs, b.data(), got.data());
      ref::binary(op, as, a.data(), bs, b.data(), want.data());
      EXPECT_EQ(got, want) << "op " << static_cast<int>(op) << " " << dims_str(as) << " vs " << dims_str(bs);
    }
  }
}

TEST_P(Binary, Pow) {
  unsigned seed = 50;
  for (const auto& [as, bs] : shape_pairs()) {
    const Dims ys = broadcast_shape(as, bs);
    const auto a = random_floats(static_cast<std::size_t>(product(as)), seed++, 0.f, 5.f);
    const auto b = random_floats(static_cast<std::size_t>(product(bs)), seed++, -3.f, 3.f);
    std::vector<float> got(static_cast<std::size_t>(product(ys))), want(got.size());
    binary(BinaryOp::Pow, as, a.data(), bs, b.data(), got.data());
    ref::binary(BinaryOp::Pow, as, a.data(), bs, b.data(), want.data());
    expect_close(got, want, 1e-30f, 4e-6f, "pow " + dims_str(as) + " ^ " + dims_str(bs));
  }
  // Integer exponents of negative bases, and the constant exponents with shortcuts.
  const std::vector<float> base = {-2.f,     -1.5f, -0.f,   0.f, 3.f, 0.25f, -INFINITY,
                                   INFINITY, NAN,   1e-20f, 7.f, 1.f, -1.f};
  const Dims n = {static_cast<std::int64_t>(base.size())};
  // Every base with every exponent through the general (vector exponent) path.
  const std::vector<float> exps = {2.f,  3.f, 0.5f, 1.f,   -1.f,     0.f,       -2.f,
                                   -3.f, 4.f, 1.5f, -0.5f, INFINITY, -INFINITY, NAN};
  const Dims bcol = {n[0], 1}, erow = {1, static_cast<std::int64_t>(exps.size())};
  std::vector<float> table(base.size() * exps.size()), expect(table.size());
  binary(BinaryOp::Pow, bcol, base.data(), erow, exps.data(), table.data());
  for (std::size_t i = 0; i < base.size(); ++i)
    for (std::size_t j = 0; j < exps.size(); ++j) expect[i * exps.size() + j] = std::pow(base[i], exps[j]);
  expect_close(table, expect, 0.f, 4e-7f, "pow table");
  for (float e : {2.f, 3.f, 0.5f, -0.5f, 1.f, -1.f, 0.f, -2.f, 4.f, 1.5f}) {
    std::vector<float> got(base.size()), want(base.size());
    binary(BinaryOp::Pow, n, base.data(), {}, &e, got.data());
    for (std::size_t i = 0; i < base.size(); ++i) want[i] = std::pow(base[i], e);
    expect_close(got, want, 0.f, 4e-7f, "pow(x, " + std::to_string(e) + ")");
  }
}

TEST_P(Binary, MaxMinPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> a = {1.f, nan, 3.f, nan, -0.f}, b = {nan, 2.f, -1.f, nan, 0.f};
  for (int i = 0; i < 20; ++i) a.push_back(static_cast<float>(i)), b.push_back(i % 3 ? nan : 1.f);
  const Dims s = {static_cast<std::int64_t>(a.size())};
  for (BinaryOp op : {BinaryOp::Max, BinaryOp::Min}) {
    std::vector<float> y(a.size());
    binary(op, s, a.data(), s, b.data(), y.data());
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(std::isnan(y[i]), std::isnan(a[i]) || std::isnan(b[i])) << i;
    // A NaN scalar on either side poisons everything.
    binary(op, s, a.data(), {}, &nan, y.data());
    for (float v : y) EXPECT_TRUE(std::isnan(v));
    binary(op, {}, &nan, s, b.data(), y.data());
    for (float v : y) EXPECT_TRUE(std::isnan(v));
  }
}

TEST_P(Binary, InPlace) {
  auto a = random_floats(1000, 3);
  const auto b = random_floats(10, 4);
  std::vector<float> want(1000);
  const Dims as = {100, 10}, bs = {10};
  ref::binary(BinaryOp::Mul, as, a.data(), bs, b.data(), want.data());
  binary(BinaryOp::Mul, as, a.data(), bs, b.data(), a.data());
  EXPECT_EQ(a, want);
}

template <class T>
void check_ints(unsigned seed) {
  const T lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
  for (const auto& [as, bs] : shape_pairs()) {
    const Dims ys = broadcast_shape(as, bs);
    auto a = random_ints<T>(static_cast<std::size_t>(product(as)), seed++, -1000, 1000);
    auto b = random_ints<T>(static_cast<std::size_t>(product(bs)), seed++, -20, 20);
    // Overflow, INT_MIN / -1 and division by zero must neither trap nor differ.
    if (a.size() > 3) a[0] = lo, a[1] = hi, a[2] = lo;
    if (b.size() > 3) b[0] = -1, b[1] = 2, b[2] = 0;
    for (BinaryOp op :
         {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Max, BinaryOp::Min, BinaryOp::Pow}) {
      if (op == BinaryOp::Pow)
        for (T& v : b) v = static_cast<T>(v % 5);
      std::vector<T> got(static_cast<std::size_t>(product(ys))), want(got.size());
      binary(op, as, a.data(), bs, b.data(), got.data());
      ref::binary(op, as, a.data(), bs, b.data(), want.data());
      EXPECT_EQ(got, want) << "op " << static_cast<int>(op) << " " << dims_str(as) << " vs " << dims_str(bs);
    }
  }
}

TEST_P(Binary, Int32) { check_ints<std::int32_t>(100); }
TEST_P(Binary, Int64) { check_ints<std::int64_t>(200); }

TEST_P(Binary, IntegerDivTruncatesTowardZero) {
  const std::vector<std::int64_t> a = {7, -7, 7, -7, -11, 0, 5}, b = {2, 2, -2, -2, 3, 3, 0};
  const std::vector<std::int64_t> want = {3, -3, -3, 3, -3, 0, 0};
  std::vector<std::int64_t> y(a.size());
  const Dims s = {static_cast<std::int64_t>(a.size())};
  binary(BinaryOp::Div, s, a.data(), s, b.data(), y.data());
  EXPECT_EQ(y, want);
}

TEST_P(Binary, Comparisons) {
  unsigned seed = 300;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const auto& [as, bs] : shape_pairs()) {
    const Dims ys = broadcast_shape(as, bs);
    auto a = random_floats(static_cast<std::size_t>(product(as)), seed++, -3.f, 3.f);
    auto b = random_floats(static_cast<std::size_t>(product(bs)), seed++, -3.f, 3.f);
    for (float& v : a) v = std::round(v);  // make ties common
    for (float& v : b) v = std::round(v);
    if (!a.empty()) a[0] = nan;
    std::vector<std::int64_t> ai(a.size()), bi(b.size());
    for (std::size_t i = 0; i < a.size(); ++i) ai[i] = std::isnan(a[i]) ? 0 : static_cast<std::int64_t>(a[i]);
    for (std::size_t i = 0; i < b.size(); ++i) bi[i] = static_cast<std::int64_t>(b[i]);
    for (CompareOp op : {CompareOp::Equal, CompareOp::NotEqual, CompareOp::Less, CompareOp::LessOrEqual,
                         CompareOp::Greater, CompareOp::GreaterOrEqual}) {
      std::vector<std::uint8_t> got(static_cast<std::size_t>(product(ys))), want(got.size());
      compare(op, as, a.data(), bs, b.data(), got.data());
      ref::compare(op, as, a.data(), bs, b.data(), want.data());
      EXPECT_EQ(got, want) << "float op " << static_cast<int>(op) << " " << dims_str(as) << " vs " << dims_str(bs);
      compare(op, as, ai.data(), bs, bi.data(), got.data());
      ref::compare(op, as, ai.data(), bs, bi.data(), want.data());
      EXPECT_EQ(got, want) << "int64 op " << static_cast<int>(op);
      std::vector<std::int32_t> a32(ai.begin(), ai.end()), b32(bi.begin(), bi.end());
      compare(op, as, a32.data(), bs, b32.data(), got.data());
      EXPECT_EQ(got, want) << "int32 op " << static_cast<int>(op);
    }
  }
}

TEST_P(Binary, RejectsIncompatibleShapes) {
  const std::vector<float> a(6), b(6);
  std::vector<float> y(36);
  EXPECT_THROW(binary(BinaryOp::Add, Dims{2, 3}, a.data(), Dims{2}, b.data(), y.data()), std::invalid_argument);
  EXPECT_THROW(broadcast_shape(Dims{4, 3}, Dims{2, 3}), std::invalid_argument);
  EXPECT_EQ(broadcast_shape(Dims{4, 1, 3}, Dims{5, 1}), (Dims{4, 5, 3}));
}

}  // namespace
}  // namespace onnxforge::simd::test
