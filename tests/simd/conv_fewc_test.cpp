// The direct few-input-channel conv kernel (AVX-512) against the double reference: kernels
// 3x3 to 7x7, strides 1 to 4 (different per dim), asymmetric pads, 1 to 4 input channels,
// output channels not a multiple of 16 or 64, output widths around the 16-pixel groups and the
// tiles in them, bias, residual, epilogues, the same bits at every thread count; and the stem
// through the public conv_packed() (routed on AVX-512, unpacked on other ISAs). The channels-last
// output (y_nhwc) holds the NCHW result's bits, transposed.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <tbb/global_control.h>

#include "simd/conv.h"
#include "simd/detail/conv_fewc.h"
#include "simd/reference.h"
#include "tests/simd/conv_test_util.h"
#include "tests/simd/simd_test_util.h"

namespace onnxforge::simd::test {
namespace {

// The kernel itself (whether or not conv_packed() routes the shape to it).
void check_kernel(const Shape& s, const Unary& act, bool with_bias, bool accumulate, unsigned seed) {
  const ConvParams p = params(s);
  ASSERT_TRUE(detail::conv_fewc_fits(p)) << describe(p);
  const Data d = make_data(p, seed);
  const std::vector<float> packed = detail::pack_conv_fewc(p, d.w.data());
  std::vector<float> got = accumulate ? d.res : std::vector<float>(d.res.size(), 99.f), want, tol;
  detail::conv_fewc(p, d.x.data(), packed.data(), with_bias ? d.b.data() : nullptr, got.data(), act, accumulate);
  expected(p, d, act, with_bias, accumulate, want, tol);
  expect_close(got, want, tol, "fewc " + describe(p) + (accumulate ? " accumulate" : ""));
}

class ConvFewc : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = active_isa_level();
    if (!set_isa(Isa::Avx512)) GTEST_SKIP() << "no AVX-512";
  }
  void TearDown() override { set_isa(saved_); }

 private:
  Isa saved_ = Isa::Sse;
};

TEST_F(ConvFewc, Stem) {
  check_kernel({1, 3, 64, 224, 224, 7, 7, 2, 2, 3, 3, 3, 3}, Unary::relu(), true, false, 1);
  check_kernel({2, 3, 64, 37, 45, 7, 7, 2, 2, 3, 3, 3, 3}, Unary::relu(), true, false, 2);
}

TEST_F(ConvFewc, KernelsStridesPadsChannels) {
  unsigned seed = 10;
  for (std::int64_t k : {3, 5, 7})
    for (std::int64_t s : {1, 2, 3, 4})
      for (std::int64_t c : {1, 2, 3, 4}) {
        if (c * k * k > 192) continue;  // does not fit
        const std::int64_t h = k / 2;
        check_kernel({1, c, 16 * c, 11, 29, k, k, s, s, h, h, h, h}, Unary::none(), true, false, seed++);
        check_kernel({1, c, 20, 9, 23, k, k, s, s, 0, k - 1, k / 2, 1}, Unary::relu(), false, false, seed++);
      }
  // Different strides and kernel sizes per dim, no padding, padding wider than the kernel reads.
  check_kernel({2, 3, 48, 17, 40, 7, 3, 3, 1, 0, 0, 0, 0}, Unary::relu(), true, false, seed++);
  check_kernel({1, 2, 32, 8, 33, 3, 5, 1, 2, 4, 0, 1, 6}, Unary::none(), true, false, seed++);
  check_kernel({1, 1, 1, 5, 5, 5, 5, 1, 1, 2, 2, 2, 2}, Unary::none(), true, false, seed++);
}

TEST_F(ConvFewc, OutputWidthsAndChannels) {
  unsigned seed = 200;
  // Output widths 1..40 (2x2 stride 1 valid conv of width + 1): every tile split of the
  // 16-pixel groups, for every tile width (4 vectors: 6 pixels; fewer: 8).
  for (std::int64_t ow = 1; ow <= 40; ++ow)
    for (std::int64_t m : {16, 40, 64})
      check_kernel({1, 3, m, 3, ow + 1, 2, 2, 1, 1, 0, 0, 0, 0}, Unary::relu(), true, false, seed++);
  for (std::int64_t m : {1, 15, 17, 31, 33, 47, 49, 63, 65, 80, 96, 112, 130})
    check_kernel({1, 3, m, 20, 36, 5, 5, 2, 2, 2, 2, 2, 2}, Unary::relu(), m % 2 == 0, false, seed++);
}

TEST_F(ConvFewc, EpiloguesAndResidual) {
  unsigned seed = 300;
  for (bool acc : {false, true})
    for (const Unary& act : {Unary::none(), Unary::relu(), Unary::of(UnaryOp::Sigmoid)}) {
      check_kernel({2, 3, 64, 30, 31, 7, 7, 2, 2, 3, 3, 3, 3}, act, true, acc, seed++);
      check_kernel({1, 4, 70, 13, 19, 3, 3, 1, 1, 1, 0, 2, 1}, act, false, acc, seed++);
    }
}

TEST_F(ConvFewc, SameBitsAtEveryThreadCount) {
  for (bool acc : {false, true}) {
    const ConvParams p = params({2, 3, 80, 41, 53, 7, 7, 2, 2, 3, 3, 3, 3});
    const Data d = make_data(p, 400);
    const std::vector<float> packed = detail::pack_conv_fewc(p, d.w.data());
    std::vector<float> first;
    for (int threads : {1, 2, 3, 4}) {
      tbb::global_control cap(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
      std::vector<float> got = d.res;
      detail::conv_fewc(p, d.x.data(), packed.data(), d.b.data(), got.data(), Unary::relu(), acc);
      if (threads == 1) {
        first = got;
      } else {
        EXPECT_EQ(0, std::memcmp(first.data(), got.data(), got.size() * sizeof(float))) << "threads " << threads;
      }
    }
  }
}

// Channels-last output: the NCHW result (checked against the reference above) transposed, bit
// for bit, the residual given in NHWC.
void check_nhwc(const Shape& s, const Unary& act, bool with_bias, bool accumulate, unsigned seed) {
  const ConvParams p = params(s);
  ASSERT_TRUE(detail::conv_fewc_fits(p)) << describe(p);
  const Data d = make_data(p, seed);
  const std::vector<float> packed = detail::pack_conv_fewc(p, d.w.data());
  const std::int64_t M = p.out_channels, HW = p.out_spatial();
  auto to_nhwc = [&](const std::vector<float>& v) {
    std::vector<float> t(v.size());
    for (std::int64_t n = 0; n < p.batch; ++n)
      for (std::int64_t m = 0; m < M; ++m)
        for (std::int64_t i = 0; i < HW; ++i) t[(n * HW + i) * M + m] = v[(n * M + m) * HW + i];
    return t;
  };
  const float* bias = with_bias ? d.b.data() : nullptr;
  std::vector<float> nchw = accumulate ? d.res : std::vector<float>(d.res.size(), 99.f);
  detail::conv_fewc(p, d.x.data(), packed.data(), bias, nchw.data(), act, accumulate);
  std::vector<float> nhwc = accumulate ? to_nhwc(d.res) : std::vector<float>(d.res.size(), 99.f);
  detail::conv_fewc(p, d.x.data(), packed.data(), bias, nhwc.data(), act, accumulate, true);
  const std::vector<float> want = to_nhwc(nchw);
  std::size_t diff = 0;
  for (std::size_t i = 0; i < want.size(); ++i) diff += std::memcmp(&want[i], &nhwc[i], sizeof(float)) != 0;
  EXPECT_EQ(diff, 0u) << "fewc nhwc " << describe(p) << (accumulate ? " accumulate" : "");
}

TEST_F(ConvFewc, NhwcOutputMatchesNchwBits) {
  unsigned seed = 800;
  for (bool acc : {false, true})
    for (const Unary& act : {Unary::none(), Unary::relu(), Unary::of(UnaryOp::Sigmoid)}) {
      check_nhwc({1, 3, 64, 224, 224, 7, 7, 2, 2, 3, 3, 3, 3}, act, true, acc, seed++);
      check_nhwc({2, 3, 64, 37, 45, 7, 7, 2, 2, 3, 3, 3, 3}, act, !acc, acc, seed++);
      check_nhwc({1, 4, 70, 13, 19, 3, 3, 1, 1, 1, 0, 2, 1}, act, true, acc, seed++);
    }
  for (std::int64_t s : {1, 2, 3, 4})
    for (std::int64_t m : {1, 15, 16, 17, 40, 63, 65, 80, 130}) {
      check_nhwc({1, 3, m, 17, 38, 5, 5, s, s, 2, 2, 2, 2}, Unary::relu(), m % 2 == 0, m % 3 == 0, seed++);
      check_nhwc({2, 2, m, 9, 23, 3, 3, s, 5 - s, 0, 2, 1, 0}, Unary::none(), true, m % 2 == 1, seed++);
    }
  // Output widths around the 16-pixel groups and the tiles in them.
  for (std::int64_t ow = 1; ow <= 24; ++ow)
    for (std::int64_t m : {16, 40, 64})
      check_nhwc({1, 3, m, 3, ow + 1, 2, 2, 1, 1, 0, 0, 0, 0}, Unary::relu(), true, ow % 2 == 0, seed++);
}

TEST_F(ConvFewc, NhwcSameBitsAtEveryThreadCount) {
  for (bool acc : {false, true}) {
    const ConvParams p = params({2, 3, 80, 41, 53, 7, 7, 2, 2, 3, 3, 3, 3});
    const Data d = make_data(p, 900);
    const std::vector<float> packed = detail::pack_conv_fewc(p, d.w.data());
    std::vector<float> first;
    for (int threads : {1, 2, 3, 4}) {
      tbb::global_control cap(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
      std::vector<float> got = d.res;
      detail::conv_fewc(p, d.x.data(), packed.data(), d.b.data(), got.data(), Unary::of(UnaryOp::Sigmoid), acc, true);
      if (threads == 1) {
        first = got;
      } else {
        EXPECT_EQ(0, std::memcmp(first.data(), got.data(), got.size() * sizeof(float))) << "threads " << threads;
      }
    }
  }
}

TEST(ConvFewcPacking, UnpackInvertsPack) {
  const ConvParams p = params({1, 3, 37, 10, 10, 7, 5, 2, 2, 0, 0, 0, 0});
  const auto w = random_floats(static_cast<std::size_t>(37 * 3 * 35), 500);
  std::vector<float> back(w.size());
  detail::unpack_conv_fewc(p, detail::pack_conv_fewc(p, w.data()).data(), back.data());
  EXPECT_EQ(w, back);
}

TEST(ConvFewcFits, Shapes) {
  EXPECT_TRUE(detail::conv_fewc_fits(params({1, 3, 64, 224, 224, 7, 7, 2, 2, 3, 3, 3, 3})));
  EXPECT_FALSE(detail::conv_fewc_fits(params({1, 4, 64, 224, 224, 7, 7, 2, 2, 3, 3, 3, 3})));  // 196 taps
  EXPECT_FALSE(detail::conv_fewc_fits(params({1, 3, 64, 224, 224, 7, 7, 2, 5, 3, 3, 3, 3})));  // stride 5
  EXPECT_FALSE(detail::conv_fewc_fits(params({1, 3, 64, 4, 4, 7, 7, 1, 1, 0, 0, 0, 0})));      // empty output
  ConvParams dilated = params({1, 3, 64, 30, 30, 3, 3, 1, 1, 1, 1, 1, 1});
  dilated.dilation = {2, 2, 1};
  EXPECT_FALSE(detail::conv_fewc_fits(dilated));
}

// The stem through the public API: routed to the kernel on AVX-512, and weights packed under
// AVX-512 still give the same results when another ISA is active at run time.
class ConvFewcStem : public SimdTest {};
ONNXFORGE_SIMD_ALL_ISAS(ConvFewcStem);

TEST_P(ConvFewcStem, PublicPathMatchesReference) {
  const ConvParams p = params({1, 3, 64, 56, 60, 7, 7, 2, 2, 3, 3, 3, 3});
  const Data d = make_data(p, 600);
  const bool avx512 = active_isa_level() == Isa::Avx512;
  EXPECT_EQ(avx512, conv_prefers_direct(p));
  const ConvPackedWeights packed = pack_conv_weights(p, d.w.data());
  EXPECT_EQ(avx512, !packed.direct.empty());
  for (bool acc : {false, true}) {
    std::vector<float> got = acc ? d.res : std::vector<float>(d.res.size(), 99.f), want, tol;
    conv_packed(p, d.x.data(), packed, d.b.data(), got.data(), Unary::relu(), acc);
    expected(p, d, Unary::relu(), true, acc, want, tol);
    expect_close(got, want, tol, "stem conv_packed" + std::string(acc ? " accumulate" : ""));
  }
}

TEST(ConvFewcFallback, WeightsPackedUnderAvx512RunOnAnotherIsa) {
  const Isa saved = active_isa_level();
  if (!set_isa(Isa::Avx512)) GTEST_SKIP() << "no AVX-512";
  const ConvParams p = params({1, 3, 64, 30, 34, 7, 7, 2, 2, 3, 3, 3, 3});
  const Data d = make_data(p, 700);
  const ConvPackedWeights packed = pack_conv_weights(p, d.w.data());
  ASSERT_FALSE(packed.direct.empty());
  std::vector<float> want(d.res.size()), got(want.size());
  conv_packed(p, d.x.data(), packed, d.b.data(), want.data(), Unary::relu());
  ASSERT_TRUE(set_isa(Isa::Sse));
  conv_packed(p, d.x.data(), packed, d.b.data(), got.data(), Unary::relu());
  set_isa(saved);
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4f) << i;
}

}  // namespace
}  // namespace onnxforge::simd::test
