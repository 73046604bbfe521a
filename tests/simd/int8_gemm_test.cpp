// The integer GEMM (simd/int8_gemm.h) against its int64 reference, bit-exact, at every ISA level
// this CPU supports (each level packs for its own kernel): every signedness pair, per-tensor and
// per-column zero points, saturating values (all 255 x -128 / 127: the case vpmaddubsw would get
// wrong), ragged M/N/K around the tile and cell sizes, transposed B, and a strided C; conv8_nd
// (1-D to 3-D, strides, dilations, padding) with its int32, float and requantized stores.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <random>
#include <vector>

#include "simd/int8_gemm.h"

using namespace onnxforge::simd;

namespace {

class Int8GemmTest : public ::testing::Test {
 protected:
  void TearDown() override { set_isa(saved_); }
  Isa saved_ = active_isa_level();
};

struct Case {
  std::size_t M, N, K;
  bool a_signed, b_signed, trans_b, per_col;
  int fill;  // 0 random, 1 extremes (A max, B min), 2 extremes with zero points at the far end
};

void check(const Case& c, std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<std::uint8_t> A(c.M * c.K), B(c.K * c.N);
  for (auto& v : A) v = static_cast<std::uint8_t>(c.fill ? (c.a_signed ? 127 : 255) : byte(rng));
  for (auto& v : B) v = static_cast<std::uint8_t>(c.fill ? (c.b_signed ? 0x80 : 0) : byte(rng));
  const std::int32_t za = c.fill == 2 ? (c.a_signed ? -128 : 0) : c.a_signed ? byte(rng) - 128 : byte(rng);
  std::vector<std::int32_t> zb(c.per_col ? c.N : 1);
  for (auto& z : zb) z = c.fill == 2 ? (c.b_signed ? 127 : 255) : c.b_signed ? byte(rng) - 128 : byte(rng);
  const std::size_t ldb = c.trans_b ? c.K : c.N, ldc = c.N + 3;
  std::vector<std::int32_t> want(c.M * ldc, 7), got(c.M * ldc, 7);
  gemm8_reference(c.M, c.N, c.K, A.data(), c.K, c.a_signed, za, c.trans_b, B.data(), ldb, c.b_signed, zb.data(),
                  zb.size(), want.data(), ldc);
  PackedB8 p = pack_b8(c.trans_b, c.K, c.N, B.data(), ldb, c.b_signed, zb.data(), zb.size());
  ASSERT_EQ(p.kernel(), active_int8_kernel());
  gemm8(c.M, A.data(), c.K, c.a_signed, za, p, got.data(), ldc);
  for (std::size_t i = 0; i < want.size(); ++i)
    ASSERT_EQ(got[i], want[i]) << int8_kernel_name(p.kernel()) << " M=" << c.M << " N=" << c.N << " K=" << c.K
                               << " a_signed=" << c.a_signed << " b_signed=" << c.b_signed << " fill=" << c.fill
                               << " at " << i / ldc << "," << i % ldc;
}

}  // namespace

TEST_F(Int8GemmTest, ExactAtEveryIsaLevel) {
  std::mt19937 rng(18);
  int levels = 0;
  for (Isa isa : available_isas()) {
    ASSERT_TRUE(set_isa(isa));
    ++levels;
    for (bool as : {false, true})
      for (bool bs : {false, true})
        for (bool tb : {false, true})
          for (bool pc : {false, true})
            for (auto [M, N, K] : {std::array<std::size_t, 3>{1, 1, 1},
                                   {5, 17, 3},
                                   {9, 33, 7},
                                   {8, 32, 64},
                                   {13, 47, 130},
                                   {70, 65, 300}})
              for (int fill : {0, 1, 2}) check({M, N, K, as, bs, tb, pc, fill}, rng);
  }
  EXPECT_GE(levels, 1);
}

// Every row count of the last tile (the kernels are instantiated per count of rows computed: 1
// to 8 on VNNI, 1 to 6 on AVX2), at every ISA level.
TEST_F(Int8GemmTest, ExactForEveryTileRowCount) {
  std::mt19937 rng(27);
  for (Isa isa : available_isas()) {
    ASSERT_TRUE(set_isa(isa));
    for (std::size_t M = 1; M <= 17; ++M)
      for (bool as : {false, true}) check({M, 40, 37, as, !as, M % 2 == 0, M % 3 == 0, 0}, rng);
  }
}

// Large enough for the threaded split (M * N * K >= 2^18) and for K beyond int16 pair sums.
TEST_F(Int8GemmTest, ExactThreadedLargeK) {
  std::mt19937 rng(5);
  for (Isa isa : available_isas()) {
    ASSERT_TRUE(set_isa(isa));
    check({64, 96, 3072, false, true, false, true, 0}, rng);
    check({37, 50, 1000, false, false, true, false, 2}, rng);
  }
}

TEST_F(Int8GemmTest, KernelFollowsIsaLevel) {
  ASSERT_TRUE(set_isa(Isa::Sse));
  EXPECT_EQ(active_int8_kernel(), Int8Kernel::Scalar);
  if (set_isa(Isa::Avx2)) { EXPECT_EQ(active_int8_kernel(), Int8Kernel::Avx2); }
  if (set_isa(Isa::Avx512)) { EXPECT_EQ(active_int8_kernel(), cpu_has_vnni() ? Int8Kernel::Vnni : Int8Kernel::Avx2); }
}

// ---- conv8_nd: the weights-broadcast conv against an int64 direct convolution ----------------

namespace {

using Dims = std::array<std::size_t, 3>;  // depth, height, width

struct ConvCase {
  std::size_t C, M;
  Dims in, kernel, pad_begin, pad_end, dilation, stride;
  bool x_signed, w_signed, per_channel;
  int fill;  // 0 random, 1 extremes (x max, w min), 2 extremes with zero points at the far end
};

Conv8Shape shape_of(const ConvCase& c) { return {c.C, c.in, c.kernel, c.pad_begin, c.pad_end, c.dilation, c.stride}; }

// y[m][od][oh][ow] = sum (x - zx) * (w - zw[m]) over the window (padding = zx, contributes 0),
// int64, written from the definition (no phases, no padded copy).
std::vector<std::int64_t> conv_reference(const ConvCase& c, const std::vector<std::uint8_t>& x, std::int32_t zx,
                                         const std::vector<std::uint8_t>& w, const std::vector<std::int32_t>& zw) {
  const Conv8Shape s = shape_of(c);
  const Dims O{s.out(0), s.out(1), s.out(2)};
  auto xv = [&](std::size_t i) -> std::int64_t { return c.x_signed ? static_cast<std::int8_t>(x[i]) : x[i]; };
  auto wv = [&](std::size_t i) -> std::int64_t { return c.w_signed ? static_cast<std::int8_t>(w[i]) : w[i]; };
  std::vector<std::int64_t> y(c.M * O[0] * O[1] * O[2]);
  std::size_t at = 0;
  for (std::size_t m = 0; m < c.M; ++m)
    for (std::size_t od = 0; od < O[0]; ++od)
      for (std::size_t oh = 0; oh < O[1]; ++oh)
        for (std::size_t ow = 0; ow < O[2]; ++ow) {
          std::int64_t acc = 0;
          std::size_t wi = m * c.C * c.kernel[0] * c.kernel[1] * c.kernel[2];
          for (std::size_t ch = 0; ch < c.C; ++ch)
            for (std::size_t kd = 0; kd < c.kernel[0]; ++kd)
              for (std::size_t kh = 0; kh < c.kernel[1]; ++kh)
                for (std::size_t kw = 0; kw < c.kernel[2]; ++kw, ++wi) {
                  const std::array<std::size_t, 3> o{od, oh, ow}, k{kd, kh, kw};
                  std::array<std::int64_t, 3> i{};
                  bool inside = true;
                  for (std::size_t d = 0; d < 3; ++d) {
                    i[d] = static_cast<std::int64_t>(o[d] * c.stride[d] + k[d] * c.dilation[d]) -
                           static_cast<std::int64_t>(c.pad_begin[d]);
                    inside &= i[d] >= 0 && i[d] < static_cast<std::int64_t>(c.in[d]);
                  }
                  if (!inside) continue;
                  const auto xi = static_cast<std::size_t>(
                      ((static_cast<std::int64_t>(ch * c.in[0]) + i[0]) * static_cast<std::int64_t>(c.in[1]) + i[1]) *
                          static_cast<std::int64_t>(c.in[2]) +
                      i[2]);
                  acc += (xv(xi) - zx) * (wv(wi) - zw[zw.size() > 1 ? m : 0]);
                }
          y[at++] = acc;
        }
  return y;
}

std::int32_t wrap32(std::int64_t v) { return static_cast<std::int32_t>(static_cast<std::uint32_t>(v)); }

// Counts, over every check_conv call, of requantized outputs that were exact ties (x.5 before
// rounding) and that saturated: the cases must reach both.
struct Q8Stats {
  std::size_t ties = 0, saturated = 0;
} q8_stats;

// parallel: conv8_nd's threaded split (the big cases); the small ones run serially, since on a
// loaded machine each parallel region waits for a helper thread to be scheduled.
void check_conv(const ConvCase& c, std::mt19937& rng, bool parallel = false) {
  std::uniform_int_distribution<int> byte(0, 255);
  const std::size_t K = c.C * c.kernel[0] * c.kernel[1] * c.kernel[2];
  std::vector<std::uint8_t> x(c.C * c.in[0] * c.in[1] * c.in[2]), w(c.M * K);
  for (auto& v : x) v = static_cast<std::uint8_t>(c.fill ? (c.x_signed ? 127 : 255) : byte(rng));
  for (auto& v : w) v = static_cast<std::uint8_t>(c.fill ? (c.w_signed ? 0x80 : 0) : byte(rng));
  const std::int32_t zx = c.fill == 2 ? (c.x_signed ? -128 : 0) : c.x_signed ? byte(rng) - 128 : byte(rng);
  std::vector<std::int32_t> zw(c.per_channel ? c.M : 1);
  for (auto& z : zw) z = c.fill == 2 ? (c.w_signed ? 127 : 255) : c.w_signed ? byte(rng) - 128 : byte(rng);
  const std::vector<std::int64_t> want = conv_reference(c, x, zx, w, zw);
  const Conv8Shape s = shape_of(c);
  const std::size_t P = s.out(0) * s.out(1) * s.out(2);
  ASSERT_EQ(want.size(), c.M * P);
  const PackedW8 pw = pack_w8(c.M, K, w.data(), K, c.w_signed, zw.data(), zw.size());
  ASSERT_EQ(pw.kernel(), active_int8_kernel());
  auto dims = [](const Dims& d) {
    return std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]);
  };
  const std::string what = std::string(int8_kernel_name(pw.kernel())) + " C=" + std::to_string(c.C) +
                           " M=" + std::to_string(c.M) + " in " + dims(c.in) + " k " + dims(c.kernel) + " stride " +
                           dims(c.stride) + " dil " + dims(c.dilation) + " pads " + dims(c.pad_begin) + "/" +
                           dims(c.pad_end) + " fill=" + std::to_string(c.fill) +
                           " x_signed=" + std::to_string(c.x_signed) + " w_signed=" + std::to_string(c.w_signed);
  // int32: the reference wrapped to int32 (the spec's output type), sentinels after each channel
  // (ld past P) untouched.
  const std::size_t ld = P + 3;
  std::vector<std::int32_t> got(c.M * ld, 7);
  Conv8Output o;
  o.i32 = got.data(), o.ld = ld;
  conv8_nd(s, x.data(), c.x_signed, zx, pw, o, parallel);
  for (std::size_t m = 0; m < c.M; ++m) {
    for (std::size_t p = 0; p < P; ++p)
      ASSERT_EQ(got[m * ld + p], wrap32(want[m * P + p])) << what << " at m=" << m << " p=" << p;
    for (std::size_t p = P; p < ld; ++p) ASSERT_EQ(got[m * ld + p], 7) << what << " wrote past channel " << m;
  }
  // float: float(acc) * mult[m] + bias[m], then Relu / Clip, each rounding as the unfused graph.
  std::vector<float> mult(c.M), bias(c.M);
  for (std::size_t m = 0; m < c.M; ++m)
    mult[m] = 1e-3f * static_cast<float>(m + 1), bias[m] = 0.37f * (static_cast<float>(m) - 2.f);
  for (const Unary act : {Unary{}, Unary::relu(), Unary::clip(-0.5f, 3.f)}) {
    std::vector<float> gf(c.M * P, -99.f);
    Conv8Output of;
    of.f32 = gf.data(), of.ld = P, of.mult = mult.data(), of.mult_count = c.M, of.bias = bias.data(),
    of.bias_count = c.M;
    of.act = act;
    conv8_nd(s, x.data(), c.x_signed, zx, pw, of, parallel);
    for (std::size_t m = 0; m < c.M; ++m)
      for (std::size_t p = 0; p < P; ++p) {
        volatile float prod = static_cast<float>(wrap32(want[m * P + p])) * mult[m];
        volatile float v = prod + bias[m];
        float r = v;
        if (act.op == UnaryOp::Relu) r = 0.f > r ? 0.f : r;
        if (act.op == UnaryOp::Clip) r = std::min(3.f, -0.5f > r ? -0.5f : r);
        ASSERT_EQ(gf[m * P + p], r) << what << " float act=" << static_cast<int>(act.op) << " at m=" << m << " p=" << p;
      }
  }
  // Requantized (QLinearConv): saturate(round_half_even(float(acc + bias) * mult) + zero), uint8
  // and int8. The multipliers mix powers of two (0.5: every odd sum is a tie; 2^-6) with an
  // arbitrary one, per channel or one for all; the zero points sit near the ends of the range so
  // that both ends saturate.
  std::vector<std::int32_t> ibias(c.M);
  std::vector<float> qmult(c.M);
  for (std::size_t m = 0; m < c.M; ++m) {
    ibias[m] = static_cast<std::int32_t>(m % 3 == 0 ? 0 : (m % 3 == 1 ? 1 : -777)) * static_cast<std::int32_t>(m + 1);
    qmult[m] = m % 4 == 0 ? 0.5f : m % 4 == 1 ? 0.015625f : m % 4 == 2 ? 0.0123f : 3.1e-4f;
  }
  for (const bool q_signed : {false, true})
    for (const bool per_m : {true, false}) {
      const float zero = q_signed ? (per_m ? -120.f : 100.f) : (per_m ? 3.f : 250.f);
      const std::size_t qld = P + 5;
      std::vector<std::uint8_t> gq(c.M * qld, 0xA5);
      Conv8Output oq;
      oq.q8 = gq.data(), oq.q8_signed = q_signed, oq.q8_zero = zero, oq.ld = qld;
      oq.mult = qmult.data(), oq.mult_count = per_m ? c.M : 1, oq.acc_bias = per_m ? ibias.data() : nullptr;
      conv8_nd(s, x.data(), c.x_signed, zx, pw, oq, parallel);
      const double lo = q_signed ? -128 : 0, hi = q_signed ? 127 : 255;
      for (std::size_t m = 0; m < c.M; ++m) {
        const float mu = qmult[per_m ? m : 0];
        const std::int32_t bv = per_m ? ibias[m] : 0;
        for (std::size_t p = 0; p < P; ++p) {
          const std::int32_t acc = wrap32(want[m * P + p] + bv);
          volatile float prod = static_cast<float>(acc) * mu;
          const double r = std::nearbyint(static_cast<double>(prod));
          q8_stats.ties += std::fabs(static_cast<double>(prod) - std::trunc(static_cast<double>(prod))) == 0.5;
          const double v = std::clamp(r + zero, lo, hi);
          q8_stats.saturated += v == lo || v == hi;
          const int want_q = static_cast<int>(v);
          const int got_q = q_signed ? static_cast<std::int8_t>(gq[m * qld + p]) : gq[m * qld + p];
          ASSERT_EQ(got_q, want_q) << what << " q8 signed=" << q_signed << " per_m=" << per_m << " at m=" << m
                                   << " p=" << p << " acc=" << acc;
        }
        for (std::size_t p = P; p < qld; ++p)
          ASSERT_EQ(gq[m * qld + p], 0xA5) << what << " q8 wrote past channel " << m;
      }
    }
}

ConvCase conv2d(std::size_t C, std::size_t M, std::size_t H, std::size_t W, std::size_t KH, std::size_t KW,
                std::size_t pt, std::size_t pl, std::size_t pb, std::size_t pr, std::size_t dh, std::size_t dw,
                std::size_t sh = 1, std::size_t sw = 1) {
  return {C, M, {1, H, W}, {1, KH, KW}, {0, pt, pl}, {0, pb, pr}, {1, dh, dw}, {1, sh, sw}, false, false, false, 0};
}

}  // namespace

// Every ISA level: both signednesses, per-tensor and per-channel zero points, the saturating
// extremes, padding on each side, dilation, 1x1 (no padding: x read in place), widths below, at
// and across the 32-position panel (rows split between panels), K tails of every residue;
// strides 2 and 3 (one phase for a strided 1x1, every phase for a 3x3, one for a 3x3 at
// dilation 2, the vector deinterleave on a 70-wide row), 1-D and 3-D.
namespace {

std::vector<ConvCase> conv_shapes() {
  return {
      conv2d(3, 5, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1),
      conv2d(8, 16, 12, 40, 3, 3, 1, 1, 1, 1, 1, 1),
      conv2d(5, 9, 11, 13, 3, 3, 2, 2, 2, 2, 2, 2),
      conv2d(16, 20, 6, 70, 1, 1, 0, 0, 0, 0, 1, 1),
      conv2d(7, 3, 9, 33, 3, 2, 0, 2, 1, 0, 1, 3),
      conv2d(2, 17, 5, 5, 3, 3, 0, 0, 0, 0, 1, 1),
      conv2d(5, 9, 11, 13, 3, 3, 1, 1, 1, 1, 1, 1, 2, 2),    // ResNet's strided 3x3, odd sizes
      conv2d(16, 20, 14, 14, 1, 1, 0, 0, 0, 0, 1, 1, 2, 2),  // its strided 1x1 downsample
      conv2d(4, 7, 17, 19, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2),    // dilation 2 at stride 2: one phase
      conv2d(3, 5, 10, 23, 2, 4, 1, 0, 0, 2, 1, 1, 3, 2),    // stride 3 x 2, uneven pads
      conv2d(8, 16, 12, 70, 3, 3, 1, 1, 1, 1, 1, 1, 2, 2),   // 36-wide phases: vector deinterleave
      conv2d(3, 4, 3, 4, 5, 5, 2, 2, 2, 2, 1, 1, 2, 2),      // kernel past the image, pads only
      {6, 11, {1, 1, 40}, {1, 1, 5}, {0, 0, 2}, {0, 0, 2}, {1, 1, 1}, {1, 1, 2}, false, false, false, 0},  // 1-D s2
      {7, 3, {1, 1, 50}, {1, 1, 3}, {0, 0, 0}, {0, 0, 0}, {1, 1, 3}, {1, 1, 1}, false, false, false, 0},   // 1-D d3
      {3, 10, {5, 6, 7}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, false, false, false, 0},   // 3-D
      {4, 8, {6, 9, 10}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 2, 2}, false, false, false, 0},   // video
      {2, 5, {7, 8, 9}, {2, 3, 2}, {1, 0, 1}, {0, 1, 0}, {2, 1, 1}, {2, 2, 2}, false, false, false, 0},
      {5, 6, {4, 5, 6}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, {1, 1, 1}, false, false, false, 0},  // 3-D 1x1x1
  };
}

}  // namespace

TEST_F(Int8GemmTest, Conv8ExactAtEveryIsaLevel) {
  std::mt19937 rng(81);
  q8_stats = {};
  const std::vector<ConvCase> shapes = conv_shapes();
  for (Isa isa : available_isas()) {
    ASSERT_TRUE(set_isa(isa));
    for (bool xs : {false, true})
      for (bool ws : {false, true})
        for (int fill : {0, 1, 2})
          for (std::size_t i = 0; i < shapes.size(); ++i) {
            ConvCase c = shapes[i];
            c.x_signed = xs, c.w_signed = ws, c.per_channel = (fill + i) % 2 == 0, c.fill = fill;
            check_conv(c, rng);
          }
    // Threaded, many panels, K = 576 (ResNet's 64-channel 3x3), at stride 1 and 2 (two blocks of
    // positions: the patches packed once into a shared buffer, then the channel panels split over
    // threads); a small plane with many channels (one block); a large plane at K = 72 (ten blocks,
    // each packed by the thread that runs it).
    check_conv({8, 8, {1, 160, 128}, {1, 3, 3}, {0, 1, 1}, {0, 1, 1}, {1, 1, 1}, {1, 1, 1}, true, false, true, 0}, rng,
               true);
    check_conv({64, 24, {1, 20, 28}, {1, 3, 3}, {0, 1, 1}, {0, 1, 1}, {1, 1, 1}, {1, 1, 1}, false, false, false, 0},
               rng, true);
    check_conv({64, 24, {1, 41, 57}, {1, 3, 3}, {0, 1, 1}, {0, 1, 1}, {1, 1, 1}, {1, 2, 2}, true, true, true, 0}, rng,
               true);
    check_conv({48, 200, {1, 7, 7}, {1, 3, 3}, {0, 1, 1}, {0, 1, 1}, {1, 1, 1}, {1, 1, 1}, false, true, true, 0}, rng,
               true);
    check_conv({48, 200, {1, 7, 7}, {1, 3, 3}, {0, 1, 1}, {0, 1, 1}, {1, 1, 1}, {1, 1, 1}, true, false, false, 2}, rng,
               true);
  }
  EXPECT_GT(q8_stats.ties, 0u);
  EXPECT_GT(q8_stats.saturated, 0u);
}

// ---- DynamicQuantizeLinear fused into the packing (conv8_nd_quantizing, gemm8_quantizing) -----

namespace {

// The spec's quantization, written independently of simd::quantize_span: float32 x / scale,
// round half to even, + zero, saturated; NaN at the bottom (as the op gives it); scale 0 (an
// all-zero range) gives the zero point.
std::uint8_t spec_quantize(float x, float scale, std::uint8_t zero) {
  if (scale == 0) return zero;
  const float v = std::nearbyint(x / scale) + static_cast<float>(zero);
  return std::isnan(v) ? 0 : static_cast<std::uint8_t>(std::clamp(v, 0.f, 255.f));
}

// Float inputs of a kind, with the scale / zero point DynamicQuantizeLinear would give them
// (kind 4: half that scale, so that both ends saturate): 0 normal, 1 with NaN and +-inf, 2 all
// equal, 3 all zero, 4 saturating.
struct FloatInput {
  std::vector<float> x;
  float scale;
  std::uint8_t zero;
};

FloatInput float_input(std::size_t n, int kind, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.3f, 2.f);
  FloatInput f{std::vector<float>(n), 0, 0};
  for (std::size_t i = 0; i < n; ++i) {
    f.x[i] = kind == 2 ? 1.75f : kind == 3 ? 0.f : nd(rng);
    if (kind == 1 && i % 17 == 3) f.x[i] = std::numeric_limits<float>::quiet_NaN();
    if (kind == 1 && i % 29 == 5)
      f.x[i] = i % 2 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
  }
  float lo = 0, hi = 0;
  for (float v : f.x)
    if (!std::isnan(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  f.scale = (hi - lo) / 255.f;
  if (kind == 4) f.scale *= 0.5f;
  f.zero = f.scale == 0 ? 0 : saturate_round<std::uint8_t>((0.f - lo) / f.scale, 0.f);
  return f;
}

}  // namespace

// conv8_nd_quantizing(x) == conv8_nd(DynamicQuantizeLinear(x)) bit for bit, int32 and float
// stores, on every conv shape family conv8_nd takes (1-D to 3-D, strides, dilations, padding:
// the pad is the zero point either way; 1x1 unpadded: quantized per block of positions; other
// unpadded: quantized once into scratch; padded or strided: per channel in the phase pass), with
// NaN / inf / all-equal / all-zero / saturating inputs, serial and threaded, at every ISA level.
TEST_F(Int8GemmTest, Conv8QuantizingEqualsQuantizeThenConv) {
  std::mt19937 rng(2718);
  std::vector<ConvCase> shapes = conv_shapes();
  // Threaded, several blocks of positions (a 1x1 over 100x90: 9000 positions; K = 40 and 300).
  shapes.push_back({40, 24, {1, 100, 90}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, {1, 1, 1}, false, true, true, 0});
  shapes.push_back(
      {300, 16, {1, 30, 70}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, {1, 1, 1}, false, true, false, 0});
  shapes.push_back({24, 40, {1, 33, 41}, {1, 3, 3}, {0, 1, 1}, {0, 1, 1}, {1, 1, 1}, {1, 1, 1}, false, false, true, 0});
  std::uniform_int_distribution<int> byte(0, 255);
  int levels = 0;
  for (Isa isa : available_isas()) {
    ASSERT_TRUE(set_isa(isa));
    ++levels;
    for (std::size_t i = 0; i < shapes.size(); ++i)
      for (int kind = 0; kind < 5; ++kind) {
        const ConvCase& c = shapes[i];
        const bool big = i >= shapes.size() - 3;
        if (big && kind % 2) continue;
        const std::size_t K = c.C * c.kernel[0] * c.kernel[1] * c.kernel[2], n = c.C * c.in[0] * c.in[1] * c.in[2];
        const FloatInput f = float_input(n, kind, rng);
        std::vector<std::uint8_t> xq(n), w(c.M * K);
        dynamic_quantize_span(f.x.data(), xq.data(), n, f.scale, f.zero);
        for (std::size_t j = 0; j < n; ++j)
          ASSERT_EQ(xq[j], spec_quantize(f.x[j], f.scale, f.zero)) << isa_name(isa) << " x=" << f.x[j];
        for (auto& v : w) v = static_cast<std::uint8_t>(byte(rng));
        std::vector<std::int32_t> zw(c.per_channel ? c.M : 1);
        for (auto& z : zw) z = c.w_signed ? byte(rng) - 128 : byte(rng);
        const PackedW8 pw = pack_w8(c.M, K, w.data(), K, c.w_signed, zw.data(), zw.size());
        const Conv8Shape s = shape_of(c);
        const std::size_t P = s.out(0) * s.out(1) * s.out(2);
        const std::string what =
            std::string(isa_name(isa)) + " shape " + std::to_string(i) + " kind " + std::to_string(kind);
        std::vector<std::int32_t> want(c.M * P, 7), got(c.M * P, 7);
        Conv8Output o;
        o.i32 = want.data(), o.ld = P;
        conv8_nd(s, xq.data(), false, f.zero, pw, o, big);
        o.i32 = got.data();
        conv8_nd_quantizing(s, f.x.data(), f.scale, f.zero, pw, o, big);
        ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0) << what << " int32";
        std::vector<float> mult(c.M), bias(c.M), wf(c.M * P, -9.f), gf(c.M * P, -9.f);
        for (std::size_t m = 0; m < c.M; ++m)
          mult[m] = f.scale * 0.01f * static_cast<float>(m + 1), bias[m] = 0.1f * static_cast<float>(m);
        Conv8Output of;
        of.f32 = wf.data(), of.ld = P, of.mult = mult.data(), of.mult_count = c.M, of.bias = bias.data(),
        of.bias_count = c.M;
        of.act = Unary::relu();
        conv8_nd(s, xq.data(), false, f.zero, pw, of, big);
        of.f32 = gf.data();
        conv8_nd_quantizing(s, f.x.data(), f.scale, f.zero, pw, of, big);
        ASSERT_EQ(std::memcmp(wf.data(), gf.data(), wf.size() * 4), 0) << what << " float";
      }
  }
  EXPECT_GE(levels, 1);
}

// gemm8_quantizing(A) == gemm8(DynamicQuantizeLinear(A)) bit for bit: ragged M, N, K around the
// tiles and cells, a strided A, per-tensor and per-column weight zero points, every input kind,
// serial and threaded (BERT's 128 x 768 x 768), at every ISA level.
TEST_F(Int8GemmTest, Gemm8QuantizingEqualsQuantizeThenGemm) {
  std::mt19937 rng(3141);
  std::uniform_int_distribution<int> byte(0, 255);
  struct Shape {
    std::size_t M, N, K, lda;
  };
  const std::vector<Shape> shapes = {{1, 1, 1, 1},   {7, 19, 37, 37},    {9, 33, 70, 75},
                                     {17, 48, 5, 5}, {40, 70, 129, 130}, {128, 768, 768, 768}};
  for (Isa isa : available_isas()) {
    ASSERT_TRUE(set_isa(isa));
    for (const Shape& sh : shapes)
      for (int kind = 0; kind < 5; ++kind)
        for (bool per_col : {false, true}) {
          const FloatInput f = float_input(sh.M * sh.lda, kind, rng);
          std::vector<std::uint8_t> aq(sh.M * sh.lda), b(sh.K * sh.N);
          dynamic_quantize_span(f.x.data(), aq.data(), aq.size(), f.scale, f.zero);
          for (auto& v : b) v = static_cast<std::uint8_t>(byte(rng));
          std::vector<std::int32_t> zb(per_col ? sh.N : 1);
          for (auto& z : zb) z = byte(rng) - 128;
          const PackedB8 pb = pack_b8(false, sh.K, sh.N, b.data(), sh.N, true, zb.data(), zb.size());
          std::vector<std::int32_t> want(sh.M * sh.N, 7), got(sh.M * sh.N, 7);
          gemm8(sh.M, aq.data(), sh.lda, false, f.zero, pb, want.data(), sh.N);
          gemm8_quantizing(sh.M, f.x.data(), sh.lda, f.scale, f.zero, pb, got.data(), sh.N);
          ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0)
              << isa_name(isa) << " M=" << sh.M << " N=" << sh.N << " K=" << sh.K << " kind " << kind;
        }
  }
}

// gemm8_requantize (QLinearMatMul's store, QLinearConv's on small maps) against the int64
// reference requantized by the scalar rule: saturate(round_half_even(float(acc + bias[n]) *
// mult[n]) + zero), uint8 and int8, per tensor and per column, with and without a per-column
// int32 bias (some large enough to wrap), multipliers with exact ties (0.5) and both ends
// saturating, every signedness, at every ISA level; bytes past each row's N columns untouched.
TEST_F(Int8GemmTest, Gemm8RequantizeExactAtEveryIsaLevel) {
  std::mt19937 rng(1618);
  std::uniform_int_distribution<int> byte(0, 255);
  std::size_t ties = 0, saturated = 0;
  struct Shape {
    std::size_t M, N, K;
  };
  for (Isa isa : available_isas()) {
    ASSERT_TRUE(set_isa(isa));
    for (const Shape& sh : std::vector<Shape>{{1, 1, 3}, {9, 21, 70}, {13, 35, 17}, {33, 64, 64}, {130, 100, 300}})
      for (bool a_signed : {false, true})
        for (bool b_signed : {false, true})
          for (bool y_signed : {false, true})
            for (int variant = 0; variant < 4; ++variant) {
              const bool per_col = variant & 1, with_bias = variant & 2;
              std::vector<std::uint8_t> a(sh.M * sh.K), b(sh.K * sh.N);
              for (auto& v : a) v = static_cast<std::uint8_t>(byte(rng));
              for (auto& v : b) v = static_cast<std::uint8_t>(byte(rng));
              const std::int32_t za = a_signed ? byte(rng) - 128 : byte(rng);
              std::vector<std::int32_t> zb(per_col ? sh.N : 1);
              for (auto& z : zb) z = b_signed ? byte(rng) - 128 : byte(rng);
              std::vector<float> mult(per_col ? sh.N : 1);
              for (std::size_t j = 0; j < mult.size(); ++j)
                mult[j] = j % 4 == 0 ? 0.5f : j % 4 == 1 ? 2e-4f : j % 4 == 2 ? 0.0123f : 7.7e-5f;
              if (!per_col) mult[0] = sh.K > 100 ? 1.3e-4f : 0.5f;
              const float zero = y_signed ? (per_col ? -100.f : 20.f) : (per_col ? 3.f : 240.f);
              std::vector<std::int32_t> acc(sh.M * sh.N);
              gemm8_reference(sh.M, sh.N, sh.K, a.data(), sh.K, a_signed, za, false, b.data(), sh.N, b_signed,
                              zb.data(), zb.size(), acc.data(), sh.N);
              const PackedB8 pb = pack_b8(false, sh.K, sh.N, b.data(), sh.N, b_signed, zb.data(), zb.size());
              const std::size_t ldy = sh.N + 3;
              std::vector<std::uint8_t> y(sh.M * ldy, 0xA5);
              Gemm8Requant rq;
              rq.y = y.data(), rq.ldy = ldy, rq.y_signed = y_signed, rq.zero = zero;
              rq.mult = mult.data(), rq.mult_count = mult.size();
              std::vector<std::int32_t> bias(sh.N);
              for (std::size_t j = 0; j < sh.N; ++j)
                bias[j] = j % 5 == 4 ? std::numeric_limits<std::int32_t>::max() - 3 : (byte(rng) - 128) * 1000;
              if (with_bias) rq.acc_bias = bias.data();
              gemm8_requantize(sh.M, a.data(), sh.K, a_signed, za, pb, rq);
              const double lo = y_signed ? -128 : 0, hi = y_signed ? 127 : 255;
              for (std::size_t m = 0; m < sh.M; ++m) {
                for (std::size_t n = 0; n < sh.N; ++n) {
                  const auto sum = static_cast<std::int32_t>(static_cast<std::uint32_t>(acc[m * sh.N + n]) +
                                                             static_cast<std::uint32_t>(with_bias ? bias[n] : 0));
                  volatile float prod = static_cast<float>(sum) * mult[per_col ? n : 0];
                  const double r = std::nearbyint(static_cast<double>(prod));
                  ties += std::fabs(static_cast<double>(prod) - std::trunc(static_cast<double>(prod))) == 0.5;
                  const double v = std::clamp(r + zero, lo, hi);
                  saturated += v == lo || v == hi;
                  const int got = y_signed ? static_cast<std::int8_t>(y[m * ldy + n]) : y[m * ldy + n];
                  ASSERT_EQ(got, static_cast<int>(v))
                      << isa_name(isa) << " M=" << sh.M << " N=" << sh.N << " K=" << sh.K << " at " << m << "," << n;
                }
                for (std::size_t n = sh.N; n < ldy; ++n) ASSERT_EQ(y[m * ldy + n], 0xA5) << "wrote past row " << m;
              }
            }
  }
  EXPECT_GT(ties, 0u);
  EXPECT_GT(saturated, 0u);
}

// QLinearAdd / QLinearMul in registers (qlinear_binary_span) against the spec's float steps
// written out here (DequantizeLinear of each input, the IEEE op, QuantizeLinear: x / scale rounded
// half to even, + zero, saturated), at every ISA level: every signedness, both ops, scales that
// make exact ties (0.5 / 1) and saturate at both ends, lengths that leave every tail.
TEST_F(Int8GemmTest, QLinearBinarySpanEqualsTheSpecAtEveryIsaLevel) {
  std::mt19937 rng(31);
  std::uniform_int_distribution<int> byte(0, 255);
  std::size_t ties = 0, saturated = 0;
  for (Isa isa : available_isas()) {
    ASSERT_TRUE(set_isa(isa));
    for (const bool mul : {false, true})
      for (int signs = 0; signs < 8; ++signs)
        for (const float sy : {1.f, 0.0173f, 0.25f})
          for (const std::size_t n : {std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{1037}}) {
            QLinearBinary p;
            p.mul = mul, p.a_signed = signs & 1, p.b_signed = signs & 2, p.y_signed = signs & 4;
            p.sa = 0.5f, p.sb = mul ? 0.031f : 1.f, p.sy = sy;
            p.za = p.a_signed ? byte(rng) - 128 : byte(rng), p.zb = p.b_signed ? byte(rng) - 128 : byte(rng);
            p.zy = p.y_signed ? -3.f : 120.f;
            std::vector<std::uint8_t> a(n), b(n), y(n + 1, 0xA5);
            for (auto& v : a) v = static_cast<std::uint8_t>(byte(rng));
            for (auto& v : b) v = static_cast<std::uint8_t>(byte(rng));
            qlinear_binary_span(p, a.data(), b.data(), y.data(), n);
            auto val = [](std::uint8_t v, bool s) {
              return s ? static_cast<int>(static_cast<std::int8_t>(v)) : int{v};
            };
            for (std::size_t i = 0; i < n; ++i) {
              volatile float fa = static_cast<float>(val(a[i], p.a_signed) - p.za) * p.sa;
              volatile float fb = static_cast<float>(val(b[i], p.b_signed) - p.zb) * p.sb;
              volatile float f = mul ? fa * fb : fa + fb;
              volatile float d = f / p.sy;
              ties += std::fabs(d - std::trunc(d)) == 0.5f;
              const double lo = p.y_signed ? -128 : 0, hi = p.y_signed ? 127 : 255;
              const double v = std::clamp(std::nearbyint(static_cast<double>(d)) + p.zy, lo, hi);
              saturated += v == lo || v == hi;
              ASSERT_EQ(val(y[i], p.y_signed), static_cast<int>(v))
                  << isa_name(isa) << " mul=" << mul << " signs=" << signs << " sy=" << sy << " n=" << n << " at " << i;
            }
            ASSERT_EQ(y[n], 0xA5) << isa_name(isa) << " wrote past the end";
          }
  }
  EXPECT_GT(ties, 0u);
  EXPECT_GT(saturated, 0u);
}
