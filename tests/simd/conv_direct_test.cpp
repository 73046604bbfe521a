// The direct 3x3 / stride 1 or 2 / pad 1 path of conv_packed() (AVX-512; other ISAs pack for the
// GEMM) against the double reference: odd widths around the pixel blocks, 1-2 pixel maps,
// small maps on multi-row tiles, channels not a multiple of 16, bias, epilogues, residual, and
// the same bits at every thread count.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <tbb/global_control.h>

#include "simd/conv.h"
#include "simd/reference.h"
#include "tests/simd/simd_test_util.h"

namespace onnxforge::simd::test {
namespace {

ConvParams conv3x3(std::int64_t n, std::int64_t c, std::int64_t m, std::int64_t h, std::int64_t w, std::int64_t s = 1) {
  ConvParams p;
  p.rank = 2, p.batch = n, p.in_channels = c, p.out_channels = m;
  p.in = {h, w, 1}, p.kernel = {3, 3, 1}, p.stride = {s, s, 1}, p.pad_begin = {1, 1, 0}, p.pad_end = {1, 1, 0};
  return p;
}

void check(const ConvParams& p, const Unary& act, bool with_bias, bool accumulate, unsigned seed) {
  const auto x = random_floats(static_cast<std::size_t>(p.batch * p.in_channels * p.in[0] * p.in[1]), seed);
  const auto w = random_floats(static_cast<std::size_t>(p.out_channels * p.in_channels * 9), seed + 1);
  const auto b = random_floats(static_cast<std::size_t>(p.out_channels), seed + 2);
  const auto n_out = static_cast<std::size_t>(p.batch * p.out_channels * p.out_spatial());
  const auto res = random_floats(n_out, seed + 3);
  const float* bias = with_bias ? b.data() : nullptr;
  const ConvPackedWeights packed = pack_conv_weights(p, w.data());
  ASSERT_EQ(active_isa_level() == Isa::Avx512, !packed.direct.empty());
  ASSERT_EQ(active_isa_level() == Isa::Avx512, conv_prefers_direct(p));
  std::vector<float> got = accumulate ? res : std::vector<float>(n_out, 99.f), plain(n_out), want(n_out), tol(n_out);
  conv_packed(p, x.data(), packed, bias, got.data(), act, accumulate);
  ref::conv(p, x.data(), w.data(), bias, plain.data());
  // Tolerance: scales with sum |x * w|.
  std::vector<float> ax(x.size()), aw(w.size()), ab(b.size());
  for (std::size_t i = 0; i < x.size(); ++i) ax[i] = std::fabs(x[i]);
  for (std::size_t i = 0; i < w.size(); ++i) aw[i] = std::fabs(w[i]);
  for (std::size_t i = 0; i < b.size(); ++i) ab[i] = std::fabs(b[i]);
  ref::conv(p, ax.data(), aw.data(), with_bias ? ab.data() : nullptr, tol.data());
  for (std::size_t i = 0; i < n_out; ++i) {
    const double pre = static_cast<double>(plain[i]) + (accumulate ? res[i] : 0.f);
    want[i] = static_cast<float>(ref::unary(act, pre));
    tol[i] = 4e-6f * (tol[i] + 1.f + (accumulate ? std::fabs(res[i]) : 0.f));
  }
  expect_close(got, want, tol,
               "direct N" + std::to_string(p.batch) + " C" + std::to_string(p.in_channels) + " M" +
                   std::to_string(p.out_channels) + " " + std::to_string(p.in[0]) + "x" + std::to_string(p.in[1]) +
                   " s" + std::to_string(p.stride[0]) + (accumulate ? " accumulate" : ""));
}

class ConvDirect : public SimdTest {};
ONNXFORGE_SIMD_ALL_ISAS(ConvDirect);

TEST_P(ConvDirect, OddShapes) {
  unsigned seed = 1;
  for (std::int64_t s : {1, 2})
    for (std::int64_t w : {1, 2, 3, 4, 7, 13, 14, 15, 16, 17, 27, 28, 29, 30, 31, 57})
      for (std::int64_t h : {1, 2, 5, 6}) check(conv3x3(1, 3, 16, h, w, s), Unary::none(), true, false, seed++);
  for (std::int64_t c : {1, 16, 17})
    for (std::int64_t m : {16, 32, 48, 49, 64, 70, 130})
      for (std::int64_t s : {1, 2}) check(conv3x3(2, c, m, 6, 19, s), Unary::relu(), m % 2 == 0, false, seed++);
}

TEST_P(ConvDirect, EpiloguesAndResidual) {
  unsigned seed = 100;
  for (bool acc : {false, true})
    for (const Unary& act : {Unary::none(), Unary::relu(), Unary::of(UnaryOp::Sigmoid)}) {
      check(conv3x3(1, 20, 50, 9, 23), act, true, acc, seed++);
      check(conv3x3(2, 8, 64, 14, 14), act, false, acc, seed++);
      check(conv3x3(1, 12, 32, 29, 58, 2), act, true, acc, seed++);
    }
}

// Output widths below 14 (stride 2: even input widths) take tiles of several whole rows (e.g.
// 2 rows of 7) with the border taps skipped per row: every height against every width, so that
// tiles start on the top row, end on the bottom one, both, or neither, and row counts end short.
TEST_P(ConvDirect, SmallMapsEveryHeightAndWidth) {
  unsigned seed = 200;
  for (std::int64_t s : {1, 2})
    for (std::int64_t h = 1; h <= 16; ++h)
      for (std::int64_t w = 1; w <= 16; ++w)
        check(conv3x3(1, 5, 32, h, w, s), (h + w) % 2 ? Unary::relu() : Unary::none(), w % 3 != 0, h % 4 == 3, seed++);
  for (std::int64_t w : {25, 26, 27, 28})  // stride-2 widths around 13 / 14 outputs
    check(conv3x3(1, 5, 32, 9, w, 2), Unary::relu(), true, false, seed++);
}

TEST_P(ConvDirect, SmallMapsChannelsAndEpilogues) {
  unsigned seed = 800;
  for (std::int64_t c : {1, 17, 40})
    for (std::int64_t m : {16, 49, 70, 96})
      for (std::int64_t s : {1, 2})
        check(conv3x3(2, c, m, 7 * s, 7 * s, s), Unary::relu(), m % 2 == 0, c == 17, seed++);
  for (bool acc : {false, true})
    for (const Unary& act : {Unary::none(), Unary::relu(), Unary::of(UnaryOp::Sigmoid)}) {
      check(conv3x3(1, 20, 50, 7, 7), act, true, acc, seed++);
      check(conv3x3(2, 8, 64, 14, 14, 2), act, false, acc, seed++);
      check(conv3x3(1, 12, 50, 11, 3), act, true, acc, seed++);
    }
}

void expect_same_bits_at_every_thread_count(std::int64_t c, std::int64_t m, std::int64_t h, std::int64_t w,
                                            std::int64_t s, bool acc) {
  const ConvParams p = conv3x3(2, c, m, h, w, s);
  const auto x = random_floats(static_cast<std::size_t>(2 * c * h * w), 7);
  const auto wt = random_floats(static_cast<std::size_t>(m * c * 9), 8);
  const auto b = random_floats(static_cast<std::size_t>(m), 9);
  const auto res = random_floats(static_cast<std::size_t>(2 * m * p.out_spatial()), 10);
  const ConvPackedWeights packed = pack_conv_weights(p, wt.data());
  std::vector<float> first;
  for (int threads : {1, 2, 3, 4}) {
    tbb::global_control cap(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
    std::vector<float> got = res;
    conv_packed(p, x.data(), packed, b.data(), got.data(), Unary::relu(), acc);
    if (threads == 1) {
      first = got;
    } else {
      EXPECT_EQ(0, std::memcmp(first.data(), got.data(), got.size() * sizeof(float)))
          << "threads " << threads << " " << h << "x" << w << " s" << s;
    }
  }
}

TEST_P(ConvDirect, SameBitsAtEveryThreadCount) {
  for (bool acc : {false, true}) expect_same_bits_at_every_thread_count(24, 72, 13, 31, acc ? 2 : 1, acc);
}

TEST_P(ConvDirect, SmallMapsSameBitsAtEveryThreadCount) {
  expect_same_bits_at_every_thread_count(40, 72, 7, 7, 1, false);
  expect_same_bits_at_every_thread_count(40, 72, 14, 14, 2, true);
  expect_same_bits_at_every_thread_count(24, 48, 23, 3, 1, true);
}

TEST(ConvDirectFallback, WeightsPackedUnderAvx512RunOnAnotherIsa) {
  const Isa saved = active_isa_level();
  if (!set_isa(Isa::Avx512)) GTEST_SKIP() << "no AVX-512";
  const ConvParams p = conv3x3(1, 5, 32, 6, 9);
  const auto x = random_floats(static_cast<std::size_t>(5 * 6 * 9), 11);
  const auto w = random_floats(static_cast<std::size_t>(32 * 5 * 9), 12);
  const ConvPackedWeights packed = pack_conv_weights(p, w.data());
  ASSERT_FALSE(packed.direct.empty());
  std::vector<float> want(static_cast<std::size_t>(32 * 6 * 9)), got(want.size());
  conv_packed(p, x.data(), packed, nullptr, want.data(), Unary::relu());
  ASSERT_TRUE(set_isa(Isa::Sse));
  conv_packed(p, x.data(), packed, nullptr, got.data(), Unary::relu());
  set_isa(saved);
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4f) << i;
}

}  // namespace
}  // namespace onnxforge::simd::test
