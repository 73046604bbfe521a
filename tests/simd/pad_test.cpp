// Pad: every mode, element size and crop against the element-by-element reference, at every
// ISA level: rows shorter and longer than a vector, borders wider than the axis, merged
// channels-last pixels, empty axes, and the shapes of tf2onnx CNNs.
#include <stdexcept>

#include "simd/pad.h"
#include "simd/reference.h"
#include "tests/simd/simd_test_util.h"

namespace onnxforge::simd::test {
namespace {

using Dims = std::vector<std::int64_t>;

class Pad : public SimdTest {};

const char* mode_name(PadMode m) {
  switch (m) {
    case PadMode::Constant: return "constant";
    case PadMode::Reflect: return "reflect";
    case PadMode::Edge: return "edge";
    case PadMode::Wrap: return "wrap";
  }
  return "?";
}

// Pads x (random bytes) both ways and compares all bytes; the output buffers start with
// different garbage, so a byte the kernel does not write shows.
void check(std::size_t elem, const Dims& shape, const Dims& begin, const Dims& end, PadMode mode, unsigned seed = 1) {
  std::size_t n = 1, m = 1;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    n *= static_cast<std::size_t>(shape[d]);
    m *= static_cast<std::size_t>(shape[d] + begin[d] + end[d]);
  }
  const auto x = random_ints<std::uint8_t>(n * elem, seed, 0, 255);
  const auto value = random_ints<std::uint8_t>(elem, seed + 1000, 0, 255);
  std::vector<std::uint8_t> got(m * elem, 0xAB), want(m * elem, 0xCD);
  pad(elem, shape, x.data(), begin, end, mode, value.data(), got.data());
  ref::pad(elem, shape, x.data(), begin, end, mode, value.data(), want.data());
  ASSERT_EQ(got, want) << mode_name(mode) << " elem " << elem << " shape " << dims_str(shape) << " begin "
                       << dims_str(begin) << " end " << dims_str(end);
}

constexpr PadMode kModes[] = {PadMode::Constant, PadMode::Reflect, PadMode::Edge, PadMode::Wrap};

TEST_P(Pad, EveryModeAndElementSizeOnSmallShapes) {
  unsigned seed = 1;
  for (PadMode mode : kModes)
    for (std::size_t elem : {1, 2, 4, 8, 16}) {
      check(elem, {5}, {2}, {3}, mode, seed++);
      check(elem, {3, 7}, {1, 0}, {0, 2}, mode, seed++);
      check(elem, {2, 3, 5}, {0, 1, 2}, {1, 1, 1}, mode, seed++);
      check(elem, {2, 3, 4, 5}, {0, 0, 1, 1}, {0, 0, 1, 1}, mode, seed++);
      check(elem, {1, 4, 9, 130}, {0, 0, 3, 67}, {0, 0, 2, 70}, mode, seed++);  // borders longer than a vector
      check(elem, {2, 1, 3}, {1, 2, 0}, {0, 3, 1}, mode, seed++);               // a length-1 axis padded
    }
}

TEST_P(Pad, BordersWiderThanTheAxisKeepMirroringAndWrapping) {
  for (PadMode mode : kModes) {
    check(4, {3}, {7}, {8}, mode);
    check(2, {2, 4}, {5, 9}, {6, 10}, mode);
    check(1, {1, 1}, {3, 3}, {3, 3}, mode);
  }
}

TEST_P(Pad, NegativePadsCropFirst) {
  for (PadMode mode : kModes) {
    check(4, {4, 6}, {-1, -2}, {-1, -1}, mode);  // crop only
    check(4, {4, 6}, {-1, 2}, {3, -2}, mode);    // crop one side, pad the other
    check(2, {2, 5, 7}, {0, -2, 1}, {0, 1, -3}, mode);
    check(8, {3, 4, 5}, {0, 0, -1}, {0, 0, 0}, mode);   // a cropped last axis, not merged
    check(4, {3, 4, 5}, {0, -1, 0}, {0, -1, 0}, mode);  // a cropped middle axis under whole rows
    check(1, {6, 6}, {-5, 3}, {2, -5}, mode);           // crop to one element, then repeat it
  }
  check(4, {3, 4}, {-3, 1}, {2, 1}, PadMode::Constant);  // cropped to nothing: all fill
}

TEST_P(Pad, ChannelsLastPixelsMergeIntoTheElement) {
  for (PadMode mode : kModes) {
    check(4, {1, 20, 20, 96}, {0, 1, 1, 0}, {0, 1, 1, 0}, mode);
    check(2, {2, 9, 11, 24}, {0, 0, 2, 0}, {0, 3, 1, 0}, mode);
    check(1, {1, 17, 13, 3}, {0, 2, 2, 0}, {0, 2, 2, 0}, mode);
  }
}

TEST_P(Pad, ModelShapesAndCopies) {
  check(4, {1, 96, 160, 160}, {0, 0, 1, 1}, {0, 0, 1, 1}, PadMode::Constant);  // tf2onnx MobileNetV2
  check(4, {1, 144, 80, 80}, {0, 0, 0, 0}, {0, 0, 1, 1}, PadMode::Constant);   // TF "SAME" stride 2
  check(2, {1, 32, 64, 64}, {0, 0, 3, 3}, {0, 0, 3, 3}, PadMode::Reflect);     // float16 reflect pad
  check(1, {1, 24, 40, 40}, {0, 0, 1, 1}, {0, 0, 1, 1}, PadMode::Edge);
  check(4, {7, 300, 301}, {0, 0, 0}, {0, 0, 0}, PadMode::Constant);  // nothing to pad: one copy
  check(4, {0, 3}, {0, 1}, {0, 1}, PadMode::Constant);               // empty output
  check(4, {0, 3}, {1, 0}, {1, 0}, PadMode::Constant);               // rows of fill only
  check(4, {}, {}, {}, PadMode::Edge);                               // a scalar
}

TEST_P(Pad, BadArgumentsThrow) {
  const float x[4] = {1, 2, 3, 4}, v = 0;
  float y[16];
  const Dims shape{2, 2};
  EXPECT_THROW(pad(4, shape, x, Dims{-3, 0}, Dims{0, 0}, PadMode::Constant, &v, y), std::invalid_argument);
  EXPECT_THROW(pad(4, Dims{0, 2}, x, Dims{1, 0}, Dims{0, 0}, PadMode::Edge, &v, y), std::invalid_argument);
  EXPECT_THROW(pad(3, shape, x, Dims{0, 0}, Dims{0, 0}, PadMode::Constant, &v, y), std::invalid_argument);
}

ONNXFORGE_SIMD_ALL_ISAS(Pad);

}  // namespace
}  // namespace onnxforge::simd::test
