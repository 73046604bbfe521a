// Channels-last conv (simd/nhwc.h) against the NCHW double reference, the tensors transposed
// by plain loops here: pointwise GEMM and implicit-GEMM paths, kernels 1x1 to 7x7 and 1x3,
// strides 1-3, dilation, asymmetric pads, batch 2, input channels giving every kind of K block
// (whole taps, one tap, split taps in uneven chunks), output channels around the panel width,
// small output maps, bias, activations, residual, NCHW input, every ISA level, the same bits at
// every thread count, empty shapes and invalid arguments.
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <tbb/global_control.h>

#include "simd/nhwc.h"
#include "simd/reference.h"
#include "tests/simd/conv_test_util.h"
#include "tests/simd/simd_test_util.h"

namespace onnxforge::simd::test {
namespace {

// [N, C, HW] -> [N, HW, C], plain loops.
std::vector<float> to_nhwc(const std::vector<float>& v, std::int64_t n, std::int64_t c, std::int64_t hw) {
  std::vector<float> out(v.size());
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t ch = 0; ch < c; ++ch)
      for (std::int64_t i = 0; i < hw; ++i)
        out[static_cast<std::size_t>((b * hw + i) * c + ch)] = v[static_cast<std::size_t>((b * c + ch) * hw + i)];
  return out;
}

// act(conv + bias (+ residual)) as NHWC, the residual d.res taken as NHWC.
void expected_nhwc(const ConvParams& p, const Data& d, const Unary& act, bool with_bias, bool accumulate,
                   std::vector<float>& want, std::vector<float>& tol) {
  const std::int64_t n = p.batch, m = p.out_channels, ohw = p.out_spatial();
  Data nchw = d;
  for (std::int64_t b = 0; b < n; ++b)  // the residual back to NCHW for the reference
    for (std::int64_t c = 0; c < m; ++c)
      for (std::int64_t i = 0; i < ohw; ++i)
        nchw.res[static_cast<std::size_t>((b * m + c) * ohw + i)] =
            d.res[static_cast<std::size_t>((b * ohw + i) * m + c)];
  expected(p, nchw, act, with_bias, accumulate, want, tol);
  want = to_nhwc(want, n, m, ohw);
  tol = to_nhwc(tol, n, m, ohw);
}

std::vector<float> run(const ConvParams& p, const Data& d, const ConvNhwcWeights& w, const Unary& act, bool with_bias,
                       bool accumulate, bool x_nchw) {
  const std::vector<float> x = x_nchw ? d.x : to_nhwc(d.x, p.batch, p.in_channels, p.in[0] * p.in[1]);
  std::vector<float> y = accumulate ? d.res : std::vector<float>(d.res.size(), 99.f);
  conv_nhwc(p, x.data(), x_nchw, w, with_bias ? d.b.data() : nullptr, y.data(), act, accumulate);
  return y;
}

void check(const Shape& s, const Unary& act, bool with_bias, bool accumulate, bool x_nchw, unsigned seed) {
  const ConvParams p = params(s);
  const Data d = make_data(p, seed);
  const ConvNhwcWeights w = pack_conv_weights_nhwc(p, d.w.data());
  const std::vector<float> got = run(p, d, w, act, with_bias, accumulate, x_nchw);
  std::vector<float> want, tol;
  expected_nhwc(p, d, act, with_bias, accumulate, want, tol);
  expect_close(
      got, want, tol,
      describe(p) + (accumulate ? " accumulate" : "") + (x_nchw ? " x_nchw" : "") + (with_bias ? " bias" : ""));
}

class ConvNhwc : public SimdTest {};
ONNXFORGE_SIMD_ALL_ISAS(ConvNhwc);

TEST_P(ConvNhwc, KernelsStridesDilationPads) {
  unsigned seed = 1;
  check({1, 16, 24, 9, 11, 1, 1, 1, 1, 0, 0, 0, 0}, Unary::relu(), true, false, false, seed++);  // pointwise GEMM
  check({1, 16, 24, 9, 11, 1, 1, 2, 2, 0, 0, 0, 0}, Unary::relu(), true, false, false, seed++);  // strided 1x1
  check({1, 16, 24, 9, 11, 1, 1, 1, 1, 1, 0, 0, 1}, Unary::none(), true, false, false, seed++);  // padded 1x1
  for (std::int64_t k : {3, 5, 7})
    for (std::int64_t s : {1, 2, 3}) {
      check({1, 7, 20, 13, 17, k, k, s, s, k / 2, k / 2, k / 2, k / 2}, Unary::relu(), true, false, false, seed++);
      check({1, 16, 49, 12, 15, k, k, s, s, 0, k - 1, k / 2, 1}, Unary::none(), false, false, false, seed++);
    }
  check({1, 16, 33, 8, 10, 1, 3, 1, 1, 0, 1, 0, 1}, Unary::relu(), true, false, false, seed++);        // 1x3
  check({1, 5, 17, 9, 12, 3, 1, 2, 1, 1, 0, 2, 0}, Unary::relu(), true, false, false, seed++);         // 3x1
  check({1, 7, 30, 11, 13, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2}, Unary::relu(), true, false, false, seed++);  // dilation 2
  check({1, 9, 30, 14, 13, 3, 5, 2, 1, 3, 0, 1, 4, 2, 3}, Unary::none(), true, false, false, seed++);
  // Padding wider than the kernel reads: whole output rows of zeros plus bias.
  check({1, 4, 8, 3, 4, 3, 3, 1, 1, 4, 4, 4, 4}, Unary::none(), true, false, false, seed++);
  // Batch 2.
  check({2, 16, 40, 10, 9, 3, 3, 1, 1, 1, 1, 1, 1}, Unary::relu(), true, false, false, seed++);
  check({2, 24, 40, 10, 9, 3, 3, 2, 2, 1, 1, 1, 1}, Unary::relu(), true, true, false, seed++);
  check({2, 24, 40, 10, 9, 1, 1, 1, 1, 0, 0, 0, 0}, Unary::relu(), true, true, true, seed++);
}

TEST_P(ConvNhwc, InputChannelsAndKBlocks) {
  unsigned seed = 100;
  for (std::int64_t c : {1, 3, 4, 7, 16, 64, 100, 384, 385, 520}) {
    check({1, c, 49, 6, 7, 3, 3, 1, 1, 1, 1, 1, 1}, Unary::relu(), true, false, false, seed++);
    check({1, c, 20, 5, 5, 1, 1, 1, 1, 0, 0, 0, 0}, Unary::none(), true, false, false, seed++);
    check({1, c, 20, 8, 7, 1, 1, 2, 2, 0, 0, 0, 0}, Unary::none(), true, true, false, seed++);
  }
  // Weights small enough for a single K block longer than the GEMM's (K = 576 and 900).
  check({2, 64, 64, 13, 11, 3, 3, 1, 1, 1, 1, 1, 1}, Unary::relu(), true, true, false, seed++);
  check({1, 100, 60, 9, 8, 3, 3, 2, 2, 1, 1, 1, 1}, Unary::none(), true, false, true, seed++);
  // Several chunks per tap with a K of its own in every block.
  check({1, 1000, 17, 4, 5, 2, 2, 1, 1, 0, 0, 0, 0}, Unary::relu(), true, false, false, seed++);
}

TEST_P(ConvNhwc, OutputChannels) {
  unsigned seed = 200;
  for (std::int64_t m : {1, 5, 16, 47, 48, 49, 96, 130}) {
    check({1, 16, m, 9, 10, 3, 3, 1, 1, 1, 1, 1, 1}, Unary::relu(), true, false, false, seed++);
    check({1, 8, m, 9, 10, 1, 1, 1, 1, 0, 0, 0, 0}, Unary::relu(), m % 2 == 0, m % 3 == 0, false, seed++);
  }
}

TEST_P(ConvNhwc, FewOutputChannels) {
  // 1-4 outputs (segmentation side outputs): per-pixel dot products over the taps, every ISA
  // level against the reference: channel counts around the vector width, borders on every side
  // (pads wider than the kernel reach too), strides, dilation, batch 2, residual, activations,
  // NCHW input.
  unsigned seed = 220;
  for (std::int64_t m : {1, 2, 3, 4})
    for (std::int64_t c : {8, 17, 64, 100}) {
      const Shape s{1, c, m, 11, 13, 3, 3, 1, 1, 1, 1, 1, 1};
      ASSERT_TRUE(conv_nhwc_few_outputs(params(s)));
      check(s, Unary::none(), true, false, false, seed++);
      check({2, c, m, 9, 10, 3, 3, 2, 1, 2, 0, 1, 3, 2, 2}, Unary::relu(), m % 2 == 0, true, false, seed++);
      check({1, c, m, 6, 7, 1, 1, 1, 1, 0, 0, 0, 0}, Unary::of(UnaryOp::Sigmoid), true, m == 3, c == 17, seed++);
      check({1, c, m, 12, 9, 7, 7, 1, 3, 3, 3, 3, 3}, Unary::relu(), true, false, false, seed++);
      check({1, c, m, 4, 5, 3, 3, 1, 1, 4, 4, 4, 4}, Unary::none(), true, true, true, seed++);
    }
  // Not for 5 outputs, fewer than 8 input channels or more than 49 taps.
  EXPECT_FALSE(conv_nhwc_few_outputs(params({1, 16, 5, 9, 9, 3, 3, 1, 1, 1, 1, 1, 1})));
  EXPECT_FALSE(conv_nhwc_few_outputs(params({1, 7, 1, 9, 9, 3, 3, 1, 1, 1, 1, 1, 1})));
  EXPECT_FALSE(conv_nhwc_few_outputs(params({1, 16, 1, 9, 9, 1, 50, 1, 1, 0, 0, 0, 0})));
}

TEST_P(ConvNhwc, PointwiseOnWidePanels) {
  // Output channels the 64-column indirect panel fits (128, 256, 320 on AVX-512: the implicit
  // GEMM with one tap), next to the plain GEMM's (64, 192), with every kind of K block.
  unsigned seed = 250;
  for (std::int64_t m : {64, 128, 192, 256, 320})
    for (std::int64_t c : {3, 64, 385, 520}) {
      check({1, c, m, 5, 7, 1, 1, 1, 1, 0, 0, 0, 0}, Unary::relu(), true, c % 2 == 0, false, seed++);
      check({2, c, m, 3, 11, 1, 1, 1, 1, 0, 0, 0, 0}, Unary::of(UnaryOp::Sigmoid), c > 64, true, c == 64, seed++);
    }
}

TEST_P(ConvNhwc, OutputMapSizes) {
  unsigned seed = 300;
  for (std::int64_t oh : {1, 2, 3, 7, 13, 20})
    for (std::int64_t ow : {1, 2, 5, 8, 11, 20})
      check({1, 12, 52, oh, ow, 3, 3, 1, 1, 1, 1, 1, 1}, Unary::relu(), true, oh % 2 == 1, false, seed++);
  // The largest maps of the direct 3x3 kernel between transposes (16 x 16) and the first past it.
  check({1, 40, 64, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1}, Unary::relu(), true, true, false, seed++);
  check({1, 40, 64, 16, 17, 3, 3, 1, 1, 1, 1, 1, 1}, Unary::relu(), true, false, false, seed++);
  // Up to 32 x 32 with at least 256 input channels; fewer channels stay on the implicit GEMM.
  check({1, 256, 48, 24, 24, 3, 3, 1, 1, 1, 1, 1, 1}, Unary::relu(), true, true, false, seed++);
  check({1, 255, 48, 24, 24, 3, 3, 1, 1, 1, 1, 1, 1}, Unary::none(), true, false, false, seed++);
}

TEST_P(ConvNhwc, EpiloguesResidualAndNchwInput) {
  unsigned seed = 400;
  for (bool acc : {false, true})
    for (bool nchw : {false, true})
      for (const Unary& act : {Unary::none(), Unary::relu(), Unary::of(UnaryOp::Sigmoid)})
        for (bool bias : {false, true}) {
          check({2, 19, 50, 11, 12, 3, 3, 2, 1, 1, 1, 0, 1}, act, bias, acc, nchw, seed++);
          check({1, 19, 50, 11, 12, 1, 1, 1, 1, 0, 0, 0, 0}, act, bias, acc, nchw, seed++);
        }
}

TEST_P(ConvNhwc, StemsReadingNchwInput) {
  // C <= 4 input channels from the NCHW graph input: the direct few-channel kernel on AVX-512
  // (simd/conv_fewc.cpp, NHWC store), the implicit GEMM elsewhere and for NHWC input.
  unsigned seed = 500;
  for (bool nchw : {true, false})
    for (bool acc : {false, true}) {
      check({1, 3, 64, 30, 28, 7, 7, 2, 2, 3, 3, 3, 3}, Unary::relu(), true, acc, nchw, seed++);  // ResNet's
      check({2, 1, 17, 13, 16, 5, 5, 1, 1, 2, 2, 2, 2}, Unary::none(), false, acc, nchw, seed++);
      check({1, 4, 40, 19, 21, 3, 3, 2, 2, 1, 0, 0, 1}, Unary::of(UnaryOp::Sigmoid), true, acc, nchw, seed++);
    }
}

TEST_P(ConvNhwc, SameBitsAtEveryThreadCount) {
  for (const Shape& s :
       {Shape{2, 64, 130, 17, 19, 3, 3, 1, 1, 1, 1, 1, 1}, Shape{1, 520, 100, 9, 14, 3, 3, 2, 2, 1, 1, 1, 1},
        Shape{2, 48, 96, 20, 21, 1, 1, 1, 1, 0, 0, 0, 0}, Shape{2, 520, 128, 9, 13, 1, 1, 1, 1, 0, 0, 0, 0},
        Shape{2, 100, 64, 15, 17, 3, 3, 1, 1, 1, 1, 1, 1}, Shape{2, 64, 1, 19, 23, 3, 3, 1, 1, 1, 1, 1, 1}})
    for (bool acc : {false, true}) {
      const ConvParams p = params(s);
      const Data d = make_data(p, 500);
      const ConvNhwcWeights w = pack_conv_weights_nhwc(p, d.w.data());
      std::vector<float> first;
      for (int threads : {1, 2, 3, 4}) {
        tbb::global_control cap(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
        const std::vector<float> got = run(p, d, w, Unary::relu(), true, acc, false);
        if (threads == 1) {
          first = got;
          std::vector<float> want, tol;
          expected_nhwc(p, d, Unary::relu(), true, acc, want, tol);
          expect_close(got, want, tol, describe(p));
        } else {
          EXPECT_EQ(0, std::memcmp(first.data(), got.data(), got.size() * sizeof(float)))
              << describe(p) << " threads " << threads;
        }
      }
    }
}

TEST_P(ConvNhwc, EmptyShapes) {
  // Batch 0, no output channels, a kernel larger than the padded input: nothing to do.
  for (const Shape& s : {Shape{0, 8, 8, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1}, Shape{1, 8, 0, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1},
                         Shape{1, 8, 8, 2, 2, 5, 5, 1, 1, 0, 0, 0, 0}, Shape{1, 8, 0, 5, 5, 1, 1, 1, 1, 0, 0, 0, 0}}) {
    const ConvParams p = params(s);
    const Data d = make_data(p, 600);
    const ConvNhwcWeights w = pack_conv_weights_nhwc(p, d.w.data());
    std::vector<float> y(4, 7.f);
    conv_nhwc(p, d.x.data(), false, w, d.b.data(), y.data(), Unary::relu());
    EXPECT_EQ(y, std::vector<float>(4, 7.f)) << describe(p);
  }
  // No input channels: act(bias (+ residual)).
  check({1, 0, 9, 4, 5, 3, 3, 1, 1, 1, 1, 1, 1}, Unary::relu(), true, false, false, 601);
  check({1, 0, 9, 4, 5, 3, 3, 1, 1, 1, 1, 1, 1}, Unary::relu(), true, true, false, 602);
  check({1, 0, 9, 4, 5, 1, 1, 1, 1, 0, 0, 0, 0}, Unary::none(), true, true, false, 603);
}

TEST_P(ConvNhwc, InvalidArguments) {
  const ConvParams p = params({1, 8, 8, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1});
  const Data d = make_data(p, 700);
  std::vector<float> y(d.res.size());
  ConvParams bad = p;
  bad.rank = 1;
  EXPECT_FALSE(conv_nhwc_supported(bad));
  EXPECT_THROW(pack_conv_weights_nhwc(bad, d.w.data()), std::invalid_argument);
  bad = p;
  bad.group = 2;
  EXPECT_FALSE(conv_nhwc_supported(bad));
  EXPECT_THROW(pack_conv_weights_nhwc(bad, d.w.data()), std::invalid_argument);
  bad = p;
  bad.pad_end = {-1, 0, 0};
  EXPECT_THROW(pack_conv_weights_nhwc(bad, d.w.data()), std::invalid_argument);
  bad = p;
  bad.stride = {0, 1, 1};
  EXPECT_THROW(pack_conv_weights_nhwc(bad, d.w.data()), std::invalid_argument);
  EXPECT_TRUE(conv_nhwc_supported(p));

  const ConvNhwcWeights w = pack_conv_weights_nhwc(p, d.w.data());
  for (auto change : {+[](ConvParams& q) { q.in_channels = 4; }, +[](ConvParams& q) { q.out_channels = 9; },
                      +[](ConvParams& q) {
                        q.stride = {2, 2, 1};
                      },
                      +[](ConvParams& q) {
                        q.kernel = {1, 1, 1};
                      },
                      +[](ConvParams& q) {
                        q.pad_begin = {0, 0, 0};
                      },
                      +[](ConvParams& q) { q.group = 2; }}) {
    ConvParams q = p;
    change(q);
    EXPECT_THROW(conv_nhwc(q, d.x.data(), false, w, nullptr, y.data()), std::invalid_argument) << describe(q);
  }
  EXPECT_THROW(conv_nhwc(p, d.x.data(), false, ConvNhwcWeights{}, nullptr, y.data()), std::invalid_argument);
  // Weights packed for a pointwise conv used for a padded one of the same kernel size.
  ConvParams pw = params({1, 8, 8, 5, 5, 1, 1, 1, 1, 0, 0, 0, 0});
  ConvNhwcWeights wpw = pack_conv_weights_nhwc(pw, d.w.data());
  wpw.params.pad_begin = {1, 1, 0};
  pw.pad_begin = {1, 1, 0};
  EXPECT_THROW(conv_nhwc(pw, d.x.data(), false, wpw, nullptr, y.data()), std::invalid_argument);
  // Another batch or input size is fine (the packing does not depend on them).
  ConvParams other = p;
  other.batch = 2, other.in = {6, 4, 1};
  Data d2 = make_data(other, 701);
  d2.w = d.w;
  std::vector<float> want, tol;
  expected_nhwc(other, d2, Unary::none(), false, false, want, tol);
  EXPECT_NO_THROW(expect_close(run(other, d2, w, Unary::none(), false, false, true), want, tol, describe(other)));
}

// Weights packed under one level keep that level's kernels when another is active at run time.
TEST(ConvNhwcIsa, WeightsKeepTheirIsaLevel) {
  const Isa saved = active_isa_level();
  const std::vector<Isa> isas = available_isas();
  for (const Shape& s :
       {Shape{1, 40, 50, 9, 8, 3, 3, 1, 1, 1, 1, 1, 1}, Shape{1, 40, 50, 9, 8, 1, 1, 1, 1, 0, 0, 0, 0}})
    for (Isa pack_isa : isas) {
      const ConvParams p = params(s);
      const Data d = make_data(p, 800);
      ASSERT_TRUE(set_isa(pack_isa));
      const ConvNhwcWeights w = pack_conv_weights_nhwc(p, d.w.data());
      const std::vector<float> first = run(p, d, w, Unary::relu(), true, false, false);
      for (Isa run_isa : isas) {
        ASSERT_TRUE(set_isa(run_isa));
        const std::vector<float> got = run(p, d, w, Unary::relu(), true, false, false);
        EXPECT_EQ(0, std::memcmp(first.data(), got.data(), got.size() * sizeof(float)))
            << describe(p) << " packed " << isa_name(pack_isa) << " run " << isa_name(run_isa);
      }
    }
  set_isa(saved);
}

}  // namespace
}  // namespace onnxforge::simd::test
