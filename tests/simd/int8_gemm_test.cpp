// The integer GEMM (simd/int8_gemm.h) against its int64 reference, bit-exact, at every ISA level
// this CPU supports (each level packs for its own kernel): every signedness pair, per-tensor and
// per-column zero points, saturating values (all 255 x -128 / 127: the case vpmaddubsw would get
// wrong), ragged M/N/K around the tile and cell sizes, transposed B, and a strided C; gemm8_at
// (k-major A) on every case too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
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
  // The same product from k-major A (a conv's patch rows), with a row stride past M.
  const std::size_t ld_at = c.M + 5;
  std::vector<std::uint8_t> At(c.K * ld_at, 0xA5);
  for (std::size_t m = 0; m < c.M; ++m)
    for (std::size_t k = 0; k < c.K; ++k) At[k * ld_at + m] = A[m * c.K + k];
  std::vector<std::int32_t> got_at(c.M * ldc, 7);
  gemm8_at(c.M, At.data(), ld_at, c.a_signed, za, p, got_at.data(), ldc);
  for (std::size_t i = 0; i < want.size(); ++i)
    ASSERT_EQ(got_at[i], want[i]) << "gemm8_at " << int8_kernel_name(p.kernel()) << " M=" << c.M << " N=" << c.N
                                  << " K=" << c.K << " a_signed=" << c.a_signed << " b_signed=" << c.b_signed
                                  << " fill=" << c.fill << " at " << i / ldc << "," << i % ldc;
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
            for (auto [M, N, K] : {std::array<std::size_t, 3>{1, 1, 1}, {5, 17, 3}, {9, 33, 7}, {8, 32, 64},
                                   {13, 47, 130}, {70, 65, 300}})
              for (int fill : {0, 1, 2}) check({M, N, K, as, bs, tb, pc, fill}, rng);
  }
  EXPECT_GE(levels, 1);
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
  if (set_isa(Isa::Avx2)) {
    EXPECT_EQ(active_int8_kernel(), Int8Kernel::Avx2);
  }
  if (set_isa(Isa::Avx512)) {
    EXPECT_EQ(active_int8_kernel(), cpu_has_vnni() ? Int8Kernel::Vnni : Int8Kernel::Avx2);
  }
}

// ---- conv8 / conv8_2d: the weights-broadcast conv against an int64 direct convolution ----------

namespace {

struct ConvCase {
  std::size_t C, M, H, W, KH, KW, pt, pl, pb, pr, dh, dw;
  bool x_signed, w_signed, per_channel;
  int fill;  // 0 random, 1 extremes (x max, w min), 2 extremes with zero points at the far end
};

// y[m][oh][ow] = sum (x - zx) * (w - zw[m]) over the window (padding = zx, contributes 0), int64.
std::vector<std::int64_t> conv_reference(const ConvCase& c, const std::vector<std::uint8_t>& x, std::int32_t zx,
                                         const std::vector<std::uint8_t>& w, const std::vector<std::int32_t>& zw) {
  const std::size_t OH = c.H + c.pt + c.pb - (c.KH - 1) * c.dh, OW = c.W + c.pl + c.pr - (c.KW - 1) * c.dw;
  auto xv = [&](std::size_t i) -> std::int64_t { return c.x_signed ? static_cast<std::int8_t>(x[i]) : x[i]; };
  auto wv = [&](std::size_t i) -> std::int64_t { return c.w_signed ? static_cast<std::int8_t>(w[i]) : w[i]; };
  std::vector<std::int64_t> y(c.M * OH * OW);
  for (std::size_t m = 0; m < c.M; ++m)
    for (std::size_t oh = 0; oh < OH; ++oh)
      for (std::size_t ow = 0; ow < OW; ++ow) {
        std::int64_t acc = 0;
        for (std::size_t ch = 0; ch < c.C; ++ch)
          for (std::size_t kh = 0; kh < c.KH; ++kh)
            for (std::size_t kw = 0; kw < c.KW; ++kw) {
              const auto ih = static_cast<std::int64_t>(oh + kh * c.dh) - static_cast<std::int64_t>(c.pt);
              const auto iw = static_cast<std::int64_t>(ow + kw * c.dw) - static_cast<std::int64_t>(c.pl);
              if (ih < 0 || iw < 0 || ih >= static_cast<std::int64_t>(c.H) || iw >= static_cast<std::int64_t>(c.W))
                continue;
              const std::size_t xi = (ch * c.H + static_cast<std::size_t>(ih)) * c.W + static_cast<std::size_t>(iw);
              acc += (xv(xi) - zx) * (wv(((m * c.C + ch) * c.KH + kh) * c.KW + kw) - zw[zw.size() > 1 ? m : 0]);
            }
        y[(m * OH + oh) * OW + ow] = acc;
      }
  return y;
}

void check_conv(const ConvCase& c, std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(0, 255);
  const std::size_t K = c.C * c.KH * c.KW;
  std::vector<std::uint8_t> x(c.C * c.H * c.W), w(c.M * K);
  for (auto& v : x) v = static_cast<std::uint8_t>(c.fill ? (c.x_signed ? 127 : 255) : byte(rng));
  for (auto& v : w) v = static_cast<std::uint8_t>(c.fill ? (c.w_signed ? 0x80 : 0) : byte(rng));
  const std::int32_t zx = c.fill == 2 ? (c.x_signed ? -128 : 0) : c.x_signed ? byte(rng) - 128 : byte(rng);
  std::vector<std::int32_t> zw(c.per_channel ? c.M : 1);
  for (auto& z : zw) z = c.fill == 2 ? (c.w_signed ? 127 : 255) : c.w_signed ? byte(rng) - 128 : byte(rng);
  const std::vector<std::int64_t> want = conv_reference(c, x, zx, w, zw);
  const Conv8Shape s{c.C, c.H, c.W, c.KH, c.KW, c.pt, c.pl, c.pb, c.pr, c.dh, c.dw};
  const std::size_t P = s.out_h() * s.out_w();
  const PackedW8 pw = pack_w8(c.M, K, w.data(), K, c.w_signed, zw.data(), zw.size());
  ASSERT_EQ(pw.kernel(), active_int8_kernel());
  const std::string what = std::string(int8_kernel_name(pw.kernel())) + " C=" + std::to_string(c.C) +
                           " M=" + std::to_string(c.M) + " " + std::to_string(c.H) + "x" + std::to_string(c.W) +
                           " k" + std::to_string(c.KH) + "x" + std::to_string(c.KW) + " fill=" + std::to_string(c.fill) +
                           " x_signed=" + std::to_string(c.x_signed) + " w_signed=" + std::to_string(c.w_signed);
  // int32: the reference wrapped to int32 (the spec's output type), sentinels after each channel
  // (ld past P) untouched.
  const std::size_t ld = P + 3;
  std::vector<std::int32_t> got(c.M * ld, 7);
  Conv8Output o;
  o.i32 = got.data(), o.ld = ld;
  conv8_2d(s, x.data(), c.x_signed, zx, pw, o);
  for (std::size_t m = 0; m < c.M; ++m) {
    for (std::size_t p = 0; p < P; ++p)
      ASSERT_EQ(got[m * ld + p], static_cast<std::int32_t>(static_cast<std::uint32_t>(want[m * P + p])))
          << what << " at m=" << m << " p=" << p;
    for (std::size_t p = P; p < ld; ++p) ASSERT_EQ(got[m * ld + p], 7) << what << " wrote past channel " << m;
  }
  // float: float(acc) * mult[m] + bias[m], then Relu / Clip, each rounding as the unfused graph.
  std::vector<float> mult(c.M), bias(c.M);
  for (std::size_t m = 0; m < c.M; ++m) mult[m] = 1e-3f * static_cast<float>(m + 1), bias[m] = 0.37f * (static_cast<float>(m) - 2.f);
  for (const Unary act : {Unary{}, Unary::relu(), Unary::clip(-0.5f, 3.f)}) {
    std::vector<float> gf(c.M * P, -99.f);
    Conv8Output of;
    of.f32 = gf.data(), of.ld = P, of.mult = mult.data(), of.mult_count = c.M, of.bias = bias.data(), of.bias_count = c.M;
    of.act = act;
    conv8_2d(s, x.data(), c.x_signed, zx, pw, of);
    for (std::size_t m = 0; m < c.M; ++m)
      for (std::size_t p = 0; p < P; ++p) {
        volatile float prod = static_cast<float>(static_cast<std::int32_t>(static_cast<std::uint32_t>(want[m * P + p]))) * mult[m];
        volatile float v = prod + bias[m];
        float r = v;
        if (act.op == UnaryOp::Relu) r = 0.f > r ? 0.f : r;
        if (act.op == UnaryOp::Clip) r = std::min(3.f, -0.5f > r ? -0.5f : r);
        ASSERT_EQ(gf[m * P + p], r) << what << " float act=" << static_cast<int>(act.op) << " at m=" << m << " p=" << p;
      }
  }
}

}  // namespace

// Every ISA level: both signednesses, per-tensor and per-channel zero points, the saturating
// extremes, padding on each side, dilation, 1x1 (no padding: x read in place), widths below,
// at and across the 32-position panel (rows split between panels), K tails of every residue.
TEST_F(Int8GemmTest, Conv8ExactAtEveryIsaLevel) {
  std::mt19937 rng(81);
  for (Isa isa : available_isas()) {
    ASSERT_TRUE(set_isa(isa));
    for (bool xs : {false, true})
      for (bool ws : {false, true})
        for (int fill : {0, 1, 2}) {
          check_conv({3, 5, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, xs, ws, fill == 0, fill}, rng);
          check_conv({8, 16, 12, 40, 3, 3, 1, 1, 1, 1, 1, 1, xs, ws, true, fill}, rng);
          check_conv({5, 9, 11, 13, 3, 3, 2, 2, 2, 2, 2, 2, xs, ws, false, fill}, rng);
          check_conv({16, 20, 6, 70, 1, 1, 0, 0, 0, 0, 1, 1, xs, ws, true, fill}, rng);
          check_conv({7, 3, 9, 33, 3, 2, 0, 2, 1, 0, 1, 3, xs, ws, fill == 1, fill}, rng);
          check_conv({2, 17, 5, 5, 3, 3, 0, 0, 0, 0, 1, 1, xs, ws, false, fill}, rng);
        }
    // Threaded, many panels, K = 576 (ResNet's 64-channel 3x3).
    check_conv({64, 24, 20, 28, 3, 3, 1, 1, 1, 1, 1, 1, false, false, false, 0}, rng);
  }
}
