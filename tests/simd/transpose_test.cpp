// Transpose: all permutations of small ranks, every element size, strided inputs, the
// attention permutation, big 2-D planes and zero-size shapes.
#include <algorithm>
#include <numeric>

#include "simd/reference.h"
#include "simd/transpose.h"
#include "tests/simd/simd_test_util.h"

namespace onnxforge::simd::test {
namespace {

using Dims = std::vector<std::int64_t>;

std::vector<std::uint8_t> random_bytes(std::size_t n, unsigned seed) {
  return random_ints<std::uint8_t>(n, seed, 0, 255);
}

void check(std::size_t elem, const Dims& shape, const Dims& perm, const Dims& strides = {}, std::size_t span = 0,
           unsigned seed = 1) {
  std::size_t n = 1;
  for (std::int64_t d : shape) n *= static_cast<std::size_t>(d);
  const auto x = random_bytes(std::max(span, n) * elem, seed);
  std::vector<std::uint8_t> got(n * elem, 0xAB), want(n * elem, 0xCD);
  transpose(elem, shape, x.data(), perm, got.data(), strides);
  ref::transpose(elem, shape, x.data(), perm, want.data(), strides);
  EXPECT_EQ(got, want) << "elem " << elem << " shape " << dims_str(shape) << " perm " << dims_str(perm) << " strides "
                       << dims_str(strides);
}

TEST(Transpose, AllPermutationsSmallRanks) {
  unsigned seed = 1;
  for (const Dims& shape : {Dims{5}, Dims{3, 7}, Dims{2, 3, 5}, Dims{2, 1, 3, 4}, Dims{3, 2, 1, 4, 5}}) {
    Dims perm(shape.size());
    std::iota(perm.begin(), perm.end(), 0);
    do {
      for (std::size_t elem : {1, 2, 4, 8}) check(elem, shape, perm, {}, 0, seed++);
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
}

TEST(Transpose, CommonModelShapes) {
  check(4, {1, 128, 12, 64}, {0, 2, 1, 3});  // attention heads split
  check(4, {1, 12, 128, 64}, {0, 2, 1, 3});  // and merged back
  check(4, {1, 12, 128, 64}, {0, 1, 3, 2});  // K^T
  check(4, {1000, 777}, {1, 0});             // big 2-D plane, parallel split
  check(2, {513, 1025}, {1, 0});
  check(1, {4, 300, 301}, {2, 0, 1});
  check(8, {2, 3, 64, 65}, {3, 1, 2, 0});
  check(4, {8, 3, 224, 224}, {0, 2, 3, 1});  // NCHW -> NHWC
}

TEST(Transpose, StridedInputs) {
  // A [4, 6] window of a [10, 20] tensor, transposed and not.
  check(4, {4, 6}, {1, 0}, {20, 1}, 200);
  check(4, {4, 6}, {0, 1}, {20, 1}, 200);
  // Every other column (no unit-stride dim at all).
  check(4, {5, 7}, {1, 0}, {20, 2}, 200);
  check(4, {5, 7}, {0, 1}, {20, 2}, 200);
  // Broadcast-style zero strides (an expanded view).
  check(4, {3, 4, 5}, {2, 0, 1}, {0, 5, 1}, 20);
  // Column-major storage read as row-major.
  check(8, {6, 9}, {0, 1}, {1, 6}, 54);
}

TEST(Transpose, ZeroSizeAndScalars) {
  check(4, {0, 3}, {1, 0});
  check(4, {3, 0, 2}, {2, 1, 0});
  check(4, {}, {});
  check(4, {1, 1}, {1, 0});
}

TEST(Transpose, RejectsBadArguments) {
  std::vector<float> x(6), y(6);
  EXPECT_THROW(transpose(4, Dims{2, 3}, x.data(), Dims{0, 0}, y.data()), std::invalid_argument);
  EXPECT_THROW(transpose(4, Dims{2, 3}, x.data(), Dims{0}, y.data()), std::invalid_argument);
  EXPECT_THROW(transpose(3, Dims{2, 3}, x.data(), Dims{1, 0}, y.data()), std::invalid_argument);
  EXPECT_THROW(transpose(4, Dims{2, 3}, x.data(), Dims{1, 2}, y.data()), std::invalid_argument);
}

}  // namespace
}  // namespace onnxforge::simd::test
