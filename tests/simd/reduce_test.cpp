// Reductions over every kind of axis set: inner, outer, middle, several non-adjacent groups,
// all, none, size-1 and zero-size dims; every op, float and integer.
#include <cmath>
#include <limits>
#include <utility>

#include "simd/reduce.h"
#include "simd/reference.h"
#include "tests/simd/simd_test_util.h"

namespace onnxforge::simd::test {
namespace {

using Dims = std::vector<std::int64_t>;

const std::vector<std::pair<Dims, Dims>>& cases() {
  static const std::vector<std::pair<Dims, Dims>> c = {
      {{7}, {0}},                    // everything, 1-D
      {{3, 17}, {1}},                // rows (inner == 1)
      {{17, 3}, {0}},                // columns (outer reduction)
      {{4, 5, 6}, {1}},              // middle axis
      {{4, 5, 6}, {0, 2}},           // two groups: transpose path
      {{2, 3, 4, 5}, {0, 2}},        // non-adjacent
      {{2, 3, 4, 5}, {3, 1}},        // unsorted axes
      {{2, 3, 4, 5}, {1, 2}},        // adjacent axes merge
      {{2, 3, 4, 5}, {0, 1, 2, 3}},  // all axes
      {{2, 3, 4}, {}},               // no axes: elementwise
      {{2, 1, 4}, {1}},              // size-1 reduced dim
      {{1, 1, 9}, {0, 1}},           // only size-1 dims reduced
      {{3, 0, 4}, {1}},              // zero-size reduced dim: identities
      {{0, 5}, {1}},                 // zero-size kept dim: nothing to write
      {{2, 2, 2}, {2, 2}},           // duplicate axis
      {{64, 3000}, {1}},             // long rows, parallel
      {{3000, 64}, {0}},             // long columns
      {{8, 512, 96}, {1}},           // wide inner chunks
  };
  return c;
}

Dims kept_shape(const Dims& shape, const Dims& axes) {
  Dims out;
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (std::find(axes.begin(), axes.end(), static_cast<std::int64_t>(d)) == axes.end()) out.push_back(shape[d]);
  return out;
}

class Reduce : public SimdTest {};
ONNXFORGE_SIMD_ALL_ISAS(Reduce);

TEST_P(Reduce, FloatOps) {
  unsigned seed = 1;
  for (const auto& [shape, axes] : cases()) {
    const auto n = static_cast<std::size_t>(product(shape));
    const auto x = random_floats(n, seed++, 0.5f, 1.5f);  // positive: Prod and LogSum stay finite
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod, ReduceOp::L1,
                        ReduceOp::L2, ReduceOp::SumSquare, ReduceOp::LogSum, ReduceOp::LogSumExp}) {
      const auto outs = static_cast<std::size_t>(product(kept_shape(shape, axes)));
      std::vector<float> got(outs, -7.f), want(outs, -7.f);
      reduce(op, shape, x.data(), axes, got.data());
      ref::reduce(op, shape, x.data(), axes, want.data());
      expect_close(got, want, 1e-6f, 2e-5f,
                   "op " + std::to_string(static_cast<int>(op)) + " " + dims_str(shape) + " axes " + dims_str(axes));
    }
  }
}

TEST_P(Reduce, EmptyReductionGivesIdentity) {
  const Dims shape = {2, 0, 3}, axes = {1};
  const float inf = std::numeric_limits<float>::infinity();
  auto one = [&](ReduceOp op) {
    std::vector<float> y(6, 123.f);
    reduce(op, shape, nullptr, axes, y.data());
    return y[5];
  };
  EXPECT_EQ(one(ReduceOp::Sum), 0.f);
  EXPECT_EQ(one(ReduceOp::Prod), 1.f);
  EXPECT_EQ(one(ReduceOp::Max), -inf);
  EXPECT_EQ(one(ReduceOp::Min), inf);
  EXPECT_TRUE(std::isnan(one(ReduceOp::Mean)));
  EXPECT_EQ(one(ReduceOp::L2), 0.f);
  EXPECT_EQ(one(ReduceOp::LogSum), -inf);
  EXPECT_EQ(one(ReduceOp::LogSumExp), -inf);
}

TEST_P(Reduce, NaNAndInfinities) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> x(3 * 40, 1.f);
  x[5] = nan;                                                            // row 0
  x[40 + 39] = nan;                                                      // row 1, in the tail
  for (int i = 80; i < 120; ++i) x[static_cast<std::size_t>(i)] = -inf;  // row 2: all -inf
  const Dims shape = {3, 40}, rows = {1}, cols = {0};
  std::vector<float> y(3), yc(40);
  for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min}) {
    reduce(op, shape, x.data(), rows, y.data());
    EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[1])) << static_cast<int>(op);
    EXPECT_EQ(y[2], -inf);
    reduce(op, shape, x.data(), cols, yc.data());  // vertical: NaN only in columns 5 and 39
    for (std::size_t c = 0; c < 40; ++c) EXPECT_EQ(std::isnan(yc[c]), c == 5 || c == 39) << c;
  }
  reduce(ReduceOp::LogSumExp, shape, x.data(), rows, y.data());
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[2], -inf);
  const std::vector<float> big = {1e30f, 1e30f, 88.f, 1e30f};
  float lse;
  reduce(ReduceOp::LogSumExp, Dims{4}, big.data(), Dims{0}, &lse);
  EXPECT_FLOAT_EQ(lse, 1e30f);  // no overflow
}

template <class T>
void check_ints(unsigned seed) {
  for (const auto& [shape, axes] : cases()) {
    const auto n = static_cast<std::size_t>(product(shape));
    const auto x = random_ints<T>(n, seed++, -50, 50);
    std::vector<std::int64_t> x64(x.begin(), x.end());
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod, ReduceOp::L1,
                        ReduceOp::SumSquare}) {
      const auto outs = static_cast<std::size_t>(product(kept_shape(shape, axes)));
      std::vector<T> got(outs);
      std::vector<std::int64_t> want(outs);
      reduce(op, shape, x.data(), axes, got.data());
      ref::reduce(op, shape, x64.data(), axes, want.data());
      // int32 results are the int64 reference modulo 2^32 (sums here fit; products wrap alike),
      // except the identities of empty Max/Min, which are the type's own limits.
      for (std::size_t i = 0; i < outs; ++i) {
        const std::int64_t w = want[i];
        const T expect = w == std::numeric_limits<std::int64_t>::min()   ? std::numeric_limits<T>::lowest()
                         : w == std::numeric_limits<std::int64_t>::max() ? std::numeric_limits<T>::max()
                                                                         : static_cast<T>(w);
        EXPECT_EQ(got[i], expect) << "op " << static_cast<int>(op) << " " << dims_str(shape) << " at " << i;
      }
    }
  }
}

TEST_P(Reduce, Int64) { check_ints<std::int64_t>(100); }
TEST_P(Reduce, Int32) { check_ints<std::int32_t>(200); }

TEST_P(Reduce, RejectsBadArguments) {
  const std::vector<float> x(6);
  std::vector<float> y(6);
  EXPECT_THROW(reduce(ReduceOp::Sum, Dims{2, 3}, x.data(), Dims{2}, y.data()), std::invalid_argument);
  EXPECT_THROW(reduce(ReduceOp::Sum, Dims{2, 3}, x.data(), Dims{-1}, y.data()), std::invalid_argument);
  const std::vector<std::int64_t> xi(6);
  std::vector<std::int64_t> yi(6);
  EXPECT_THROW(reduce(ReduceOp::L2, Dims{2, 3}, xi.data(), Dims{1}, yi.data()), std::invalid_argument);
}

}  // namespace
}  // namespace onnxforge::simd::test
