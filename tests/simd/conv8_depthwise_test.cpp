// The depthwise 8-bit conv (simd/conv8_depthwise.h) at every ISA level this CPU supports (each
// level runs its own kernel: scalar, avx2-vpmaddwd, avx512-vnni) against an int64 convolution
// written from the definition here, bit for bit: the int32 sums, the requantized 8-bit store
// (QuantizeLinear's rule on float(acc + bias) * mult) and the dequantized float store with
// Relu / Clip. Odd sizes around the 16/32-position blocks, strides 1, 2 and 3, dilations, 3x3,
// 5x5 and other kernels, 1-D and 3-D, asymmetric pads, int8 and uint8 data and weights, zero
// points 0 / 128 / asymmetric, per-tensor and per-channel, and values that saturate at both ends.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "simd/conv8_depthwise.h"
#include "simd_test_util.h"

namespace onnxforge::simd::test {
namespace {

using Dims = std::array<std::size_t, 3>;  // depth, height, width

struct DwCase {
  std::size_t C;
  Dims in, kernel, pad_begin, pad_end, dilation, stride;
};

std::string dims(const Dims& d) {
  return std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]);
}

std::string describe(const DwCase& c) {
  return "C=" + std::to_string(c.C) + " in " + dims(c.in) + " k " + dims(c.kernel) + " stride " + dims(c.stride) +
         " dil " + dims(c.dilation) + " pads " + dims(c.pad_begin) + "/" + dims(c.pad_end);
}

// Data and weights of one case: x and w raw 8-bit, their zero points, w - zw per channel.
struct DwData {
  bool x_signed = false, w_signed = false;
  std::int32_t zx = 0;
  std::vector<std::uint8_t> x, w;
  std::vector<std::int32_t> zw;    // 1 or C values
  std::vector<std::int32_t> weff;  // [C][taps]: w - zw
};

// zx_kind: 0 zero, 1 the middle of the type (128 for uint8, 0 for int8), 2 random asymmetric;
// fill: 0 random, 1 x at its top and w at its bottom with zero points at the far end
// (the largest products of one sign), 2 the same with the other sign.
DwData make_data(const DwCase& c, bool x_signed, bool w_signed, bool per_channel, int zx_kind, int fill,
                 std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(0, 255);
  DwData d;
  d.x_signed = x_signed, d.w_signed = w_signed;
  const std::size_t taps = c.kernel[0] * c.kernel[1] * c.kernel[2];
  d.x.resize(c.C * c.in[0] * c.in[1] * c.in[2]);
  d.w.resize(c.C * taps);
  const std::uint8_t x_top = x_signed ? 127 : 255;
  const std::uint8_t w_top = w_signed ? 127 : 255, w_bottom = w_signed ? 0x80 : 0;
  for (auto& v : d.x) v = fill ? x_top : static_cast<std::uint8_t>(byte(rng));
  for (auto& v : d.w) v = fill == 1 ? w_bottom : fill == 2 ? w_top : static_cast<std::uint8_t>(byte(rng));
  const std::int32_t x_lo = x_signed ? -128 : 0, w_lo = w_signed ? -128 : 0;
  if (fill)
    d.zx = x_lo;  // x - zx = 255
  else
    d.zx = zx_kind == 0 ? 0 : zx_kind == 1 ? (x_signed ? 0 : 128) : x_lo + 1 + byte(rng) % 254;
  d.zw.resize(per_channel ? c.C : 1);
  for (auto& z : d.zw)
    z = fill == 1 ? w_lo + 255 : fill == 2 ? w_lo : zx_kind == 1 ? (w_signed ? 0 : 128) : w_lo + byte(rng);
  d.weff.resize(d.w.size());
  for (std::size_t ch = 0; ch < c.C; ++ch)
    for (std::size_t t = 0; t < taps; ++t) {
      const std::uint8_t b = d.w[ch * taps + t];
      d.weff[ch * taps + t] = (w_signed ? static_cast<std::int8_t>(b) : b) - d.zw[per_channel ? ch : 0];
    }
  return d;
}

Conv8Shape shape_of(const DwCase& c) { return {c.C, c.in, c.kernel, c.pad_begin, c.pad_end, c.dilation, c.stride}; }

// From the definition: padding is x's zero point (contributes 0); int64 sums.
std::vector<std::int64_t> reference(const DwCase& c, const DwData& d) {
  const Conv8Shape s = shape_of(c);
  const Dims O{s.out(0), s.out(1), s.out(2)};
  const std::size_t taps = c.kernel[0] * c.kernel[1] * c.kernel[2];
  std::vector<std::int64_t> y;
  for (std::size_t ch = 0; ch < c.C; ++ch)
    for (std::size_t od = 0; od < O[0]; ++od)
      for (std::size_t oh = 0; oh < O[1]; ++oh)
        for (std::size_t ow = 0; ow < O[2]; ++ow) {
          std::int64_t acc = 0;
          for (std::size_t kd = 0; kd < c.kernel[0]; ++kd)
            for (std::size_t kh = 0; kh < c.kernel[1]; ++kh)
              for (std::size_t kw = 0; kw < c.kernel[2]; ++kw) {
                const std::array<std::size_t, 3> o{od, oh, ow}, k{kd, kh, kw};
                std::array<std::int64_t, 3> i{};
                bool inside = true;
                for (std::size_t a = 0; a < 3; ++a) {
                  i[a] = static_cast<std::int64_t>(o[a] * c.stride[a] + k[a] * c.dilation[a]) -
                         static_cast<std::int64_t>(c.pad_begin[a]);
                  inside &= i[a] >= 0 && i[a] < static_cast<std::int64_t>(c.in[a]);
                }
                const std::uint8_t wb = d.w[ch * taps + (kd * c.kernel[1] + kh) * c.kernel[2] + kw];
                const std::int64_t wv =
                    (d.w_signed ? static_cast<std::int8_t>(wb) : wb) - d.zw[d.zw.size() > 1 ? ch : 0];
                std::int64_t xv = d.zx;
                if (inside) {
                  const std::uint8_t xb =
                      d.x[((ch * c.in[0] + static_cast<std::size_t>(i[0])) * c.in[1] + static_cast<std::size_t>(i[1])) *
                              c.in[2] +
                          static_cast<std::size_t>(i[2])];
                  xv = d.x_signed ? static_cast<std::int8_t>(xb) : xb;
                }
                acc += (xv - d.zx) * wv;
              }
          y.push_back(acc);
        }
  return y;
}

std::int32_t wrap32(std::int64_t v) { return static_cast<std::int32_t>(static_cast<std::uint32_t>(v)); }

// QuantizeLinear's rule, written out: round half to even, + zero, saturate; NaN to the bottom.
template <class Q>
Q requantize(std::int32_t acc, std::int32_t bias, float mult, float zero) {
  const float v = static_cast<float>(wrap32(static_cast<std::int64_t>(acc) + bias)) * mult;
  constexpr float lo = std::numeric_limits<Q>::min(), hi = std::numeric_limits<Q>::max();
  if (std::isnan(v)) return static_cast<Q>(lo);
  const float r = std::nearbyint(v) + zero;  // default rounding mode: half to even
  return static_cast<Q>(r < lo ? lo : r > hi ? hi : r);
}

class Conv8Depthwise : public SimdTest {};

// Runs the three stores of one case and compares each with the definition. parallel: the
// threaded split over channels; 7 after every channel's plane (ld past the plane) must stay.
struct Reached {
  std::size_t saturated_low = 0, saturated_high = 0, ties = 0;
};

void check(const DwCase& c, const DwData& d, bool per_channel_mult, bool parallel, Reached& seen,
           const std::string& tag) {
  const Conv8Shape s = shape_of(c);
  const std::size_t P = s.out(0) * s.out(1) * s.out(2), ld = P + 3;
  const std::string what = std::string(int8_kernel_name(active_int8_kernel())) + " " + describe(c) + " " + tag +
                           " x_signed=" + std::to_string(d.x_signed) + " w_signed=" + std::to_string(d.w_signed) +
                           " zx=" + std::to_string(d.zx);
  const std::vector<std::int64_t> want = reference(c, d);
  ASSERT_EQ(want.size(), c.C * P) << what;
  // The library's own reference agrees with the definition.
  std::vector<std::int32_t> ref(c.C * P);
  conv8_depthwise_reference(s, d.x.data(), d.x_signed, d.zx, d.weff.data(), ref.data());
  for (std::size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(ref[i], wrap32(want[i])) << what << " reference at " << i;

  // int32.
  std::vector<std::int32_t> got(c.C * ld, 7);
  Conv8Output o;
  o.i32 = got.data(), o.ld = ld;
  conv8_depthwise(s, d.x.data(), d.x_signed, d.zx, d.weff.data(), o, parallel);
  for (std::size_t ch = 0; ch < c.C; ++ch) {
    for (std::size_t p = 0; p < P; ++p)
      ASSERT_EQ(got[ch * ld + p], wrap32(want[ch * P + p])) << what << " int32 at c=" << ch << " p=" << p;
    for (std::size_t p = P; p < ld; ++p) ASSERT_EQ(got[ch * ld + p], 7) << what << " wrote past channel " << ch;
  }

  // Requantized, uint8 and int8 outputs. Multipliers sized to the sums so that most values land
  // inside the range and some saturate; per channel or one for all.
  std::int64_t amax = 1;
  for (std::int64_t v : want) amax = std::max(amax, v < 0 ? -v : v);
  std::vector<float> mult(per_channel_mult ? c.C : 1);
  for (std::size_t i = 0; i < mult.size(); ++i)
    mult[i] = 300.f / static_cast<float>(amax) * (1.f + 0.25f * static_cast<float>(i % 5));
  std::vector<std::int32_t> acc_bias(c.C);
  for (std::size_t i = 0; i < c.C; ++i) acc_bias[i] = static_cast<std::int32_t>(i * 37 % 101) - 50;
  for (bool y_signed : {false, true})
    for (float zero : {0.f, y_signed ? -3.f : 128.f, y_signed ? 17.f : 3.f}) {
      std::vector<std::uint8_t> y(c.C * ld, 0xA5);
      Conv8Output q;
      q.q8 = y.data(), q.q8_signed = y_signed, q.q8_zero = zero, q.ld = ld;
      q.mult = mult.data(), q.mult_count = mult.size(), q.acc_bias = acc_bias.data();
      conv8_depthwise(s, d.x.data(), d.x_signed, d.zx, d.weff.data(), q, parallel);
      for (std::size_t ch = 0; ch < c.C; ++ch) {
        const float mu = mult[mult.size() > 1 ? ch : 0];
        for (std::size_t p = 0; p < P; ++p) {
          const std::int32_t a = wrap32(want[ch * P + p]);
          const std::uint8_t byte = y[ch * ld + p];
          if (y_signed) {
            const std::int8_t e = requantize<std::int8_t>(a, acc_bias[ch], mu, zero);
            ASSERT_EQ(static_cast<std::int8_t>(byte), e) << what << " int8 at c=" << ch << " p=" << p << " acc=" << a;
            seen.saturated_low += e == -128, seen.saturated_high += e == 127;
          } else {
            const std::uint8_t e = requantize<std::uint8_t>(a, acc_bias[ch], mu, zero);
            ASSERT_EQ(byte, e) << what << " uint8 at c=" << ch << " p=" << p << " acc=" << a;
            seen.saturated_low += e == 0, seen.saturated_high += e == 255;
          }
          const float v = static_cast<float>(wrap32(static_cast<std::int64_t>(a) + acc_bias[ch])) * mu;
          seen.ties += v - std::floor(v) == 0.5f;
        }
        for (std::size_t p = P; p < ld; ++p) ASSERT_EQ(y[ch * ld + p], 0xA5) << what << " wrote past channel " << ch;
      }
    }

  // Dequantized float with a bias and Relu / Clip / none.
  std::vector<float> bias(c.C);
  for (std::size_t i = 0; i < c.C; ++i) bias[i] = 0.37f * (static_cast<float>(i) - 2.f);
  for (UnaryOp op : {UnaryOp::Identity, UnaryOp::Relu, UnaryOp::Clip}) {
    std::vector<float> y(c.C * ld, -7.f);
    Conv8Output f;
    f.f32 = y.data(), f.ld = ld, f.mult = mult.data(), f.mult_count = mult.size();
    f.bias = bias.data(), f.bias_count = c.C;
    f.act.op = op, f.act.alpha = -1.5f, f.act.beta = 2.5f;
    conv8_depthwise(s, d.x.data(), d.x_signed, d.zx, d.weff.data(), f, parallel);
    for (std::size_t ch = 0; ch < c.C; ++ch) {
      for (std::size_t p = 0; p < P; ++p) {
        float e = static_cast<float>(wrap32(want[ch * P + p])) * mult[mult.size() > 1 ? ch : 0];
        e = e + bias[ch];
        if (op == UnaryOp::Relu) e = 0.f > e ? 0.f : e;
        if (op == UnaryOp::Clip) e = -1.5f > e ? -1.5f : e, e = 2.5f < e ? 2.5f : e;
        ASSERT_EQ(y[ch * ld + p], e) << what << " float at c=" << ch << " p=" << p;
      }
      for (std::size_t p = P; p < ld; ++p) ASSERT_EQ(y[ch * ld + p], -7.f) << what << " wrote past channel " << ch;
    }
  }
}

const std::vector<DwCase>& cases() {
  static const std::vector<DwCase> v = {
      // MobileNet's: 3x3 pad 1, strides 1 and 2, widths around the 16/32-position blocks.
      {5, {1, 7, 7}, {1, 3, 3}, {0, 1, 1}, {0, 1, 1}, {1, 1, 1}, {1, 1, 1}},
      {3, {1, 13, 17}, {1, 3, 3}, {0, 1, 1}, {0, 1, 1}, {1, 1, 1}, {1, 1, 1}},
      {3, {1, 15, 33}, {1, 3, 3}, {0, 1, 1}, {0, 1, 1}, {1, 1, 1}, {2, 2, 2}},
      {2, {1, 14, 14}, {1, 3, 3}, {0, 0, 0}, {0, 1, 1}, {1, 1, 1}, {1, 2, 2}},
      // 5x5 (EfficientNet, MnasNet), strides 1 and 2.
      {3, {1, 11, 9}, {1, 5, 5}, {0, 2, 2}, {0, 2, 2}, {1, 1, 1}, {1, 1, 1}},
      {3, {1, 12, 19}, {1, 5, 5}, {0, 2, 2}, {0, 2, 2}, {1, 1, 1}, {1, 2, 2}},
      // General: tall and wide kernels, stride 3, mixed strides, dilations, asymmetric and no pads.
      {2, {1, 10, 12}, {1, 4, 3}, {0, 2, 0}, {0, 1, 3}, {1, 1, 1}, {1, 3, 1}},
      {2, {1, 9, 20}, {1, 3, 3}, {0, 2, 2}, {0, 2, 2}, {1, 2, 2}, {1, 1, 1}},
      {2, {1, 17, 23}, {1, 3, 5}, {0, 1, 0}, {0, 0, 4}, {1, 2, 3}, {1, 2, 3}},
      {3, {1, 6, 5}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, {1, 1, 1}},
      {2, {1, 8, 9}, {1, 2, 2}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, {1, 2, 2}},
      {2, {1, 1, 1}, {1, 3, 3}, {0, 1, 1}, {0, 1, 1}, {1, 1, 1}, {1, 1, 1}},
      {2, {1, 3, 4}, {1, 7, 7}, {0, 3, 3}, {0, 3, 3}, {1, 1, 1}, {1, 1, 1}},
      // 1-D and 3-D.
      {4, {1, 1, 37}, {1, 1, 3}, {0, 0, 1}, {0, 0, 1}, {1, 1, 1}, {1, 1, 1}},
      {3, {1, 1, 40}, {1, 1, 5}, {0, 0, 2}, {0, 0, 1}, {1, 1, 2}, {1, 1, 2}},
      {2, {5, 6, 7}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}},
      {2, {6, 7, 9}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {2, 2, 2}},
  };
  return v;
}

TEST_P(Conv8Depthwise, ExactAgainstTheDefinition) {
  std::mt19937 rng(27);
  Reached seen;
  std::size_t n = 0;
  for (const DwCase& c : cases())
    for (bool xs : {false, true})
      for (bool ws : {false, true})
        for (int zk : {0, 1, 2}) {
          const bool per_channel = (n++ % 2) == 0;
          const DwData d = make_data(c, xs, ws, per_channel, zk, 0, rng);
          check(c, d, !per_channel, false, seen, "random zk=" + std::to_string(zk));
          if (HasFatalFailure()) return;
        }
  // Both ends reached and exact ties rounded (to even) somewhere among the cases.
  EXPECT_GT(seen.saturated_low, 0u);
  EXPECT_GT(seen.saturated_high, 0u);
  EXPECT_GT(seen.ties, 0u);
}

// The largest products of each sign (|x - zx| = |w - zw| = 255 at every tap), 7x7 and 3x3 windows:
// the int16 pair sums and the int32 accumulation at their bounds, and requantization saturating
// at both ends.
TEST_P(Conv8Depthwise, ExtremeValuesSaturate) {
  std::mt19937 rng(3);
  Reached seen;
  for (const DwCase& c : {DwCase{3, {1, 9, 40}, {1, 7, 7}, {0, 3, 3}, {0, 3, 3}, {1, 1, 1}, {1, 1, 1}},
                          DwCase{3, {1, 9, 40}, {1, 3, 3}, {0, 1, 1}, {0, 1, 1}, {1, 1, 1}, {1, 2, 2}}})
    for (bool xs : {false, true})
      for (bool ws : {false, true})
        for (int fill : {1, 2}) {
          const DwData d = make_data(c, xs, ws, true, 0, fill, rng);
          check(c, d, true, false, seen, "fill=" + std::to_string(fill));
          if (HasFatalFailure()) return;
        }
  EXPECT_GT(seen.saturated_low, 0u);
  EXPECT_GT(seen.saturated_high, 0u);
}

// Many channels over threads, MobileNetV2's shapes: [144, 56, 56] stride 1 and [96, 112, 112]
// stride 2 (the plane far larger than a vector block).
TEST_P(Conv8Depthwise, ThreadedMobileNetShapes) {
  std::mt19937 rng(9);
  Reached seen;
  for (const DwCase& c : {DwCase{144, {1, 56, 56}, {1, 3, 3}, {0, 1, 1}, {0, 1, 1}, {1, 1, 1}, {1, 1, 1}},
                          DwCase{96, {1, 112, 112}, {1, 3, 3}, {0, 0, 0}, {0, 1, 1}, {1, 1, 1}, {1, 2, 2}}}) {
    const DwData d = make_data(c, false, true, true, 2, 0, rng);
    check(c, d, true, true, seen, "threaded");
    if (HasFatalFailure()) return;
  }
}

TEST_P(Conv8Depthwise, EmptyOutputAndBadShapes) {
  const std::vector<std::uint8_t> x(16, 1);
  const std::vector<std::int32_t> w(9, 1);
  std::vector<std::int32_t> y(16, 7);
  Conv8Output o;
  o.i32 = y.data(), o.ld = 16;
  // A 3x3 kernel over a 2x2 input without padding: no output, nothing written.
  conv8_depthwise({1, {1, 2, 2}, {1, 3, 3}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, {1, 1, 1}}, x.data(), false, 0, w.data(),
                  o);
  for (std::int32_t v : y) EXPECT_EQ(v, 7);
  EXPECT_THROW(conv8_depthwise({1, {1, 2, 2}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, {1, 0, 1}}, x.data(), false,
                               0, w.data(), o),
               std::invalid_argument);
}

ONNXFORGE_SIMD_ALL_ISAS(Conv8Depthwise);

}  // namespace
}  // namespace onnxforge::simd::test
