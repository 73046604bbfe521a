// Convolution against the direct double reference: groups, depthwise (with channel
// multiplier), 1x1, strides, dilations, asymmetric pads, 1-D/2-D/3-D, epilogues.
#include <cmath>
#include <cstring>
#include <random>

#include <tbb/global_control.h>

#include "simd/conv.h"
#include "simd/reference.h"
#include "tests/simd/simd_test_util.h"

namespace onnxforge::simd::test {
namespace {

// Tolerance per output: accumulation error scales with sum |x * w|.
std::vector<float> tolerances(const ConvParams& p, const std::vector<float>& x, const std::vector<float>& w,
                              const float* bias) {
  ConvParams q = p;
  std::vector<float> ax(x.size()), aw(w.size());
  for (std::size_t i = 0; i < x.size(); ++i) ax[i] = std::fabs(x[i]);
  for (std::size_t i = 0; i < w.size(); ++i) aw[i] = std::fabs(w[i]);
  std::vector<float> ab;
  if (bias != nullptr)
    for (std::int64_t m = 0; m < p.out_channels; ++m) ab.push_back(std::fabs(bias[m]));
  std::vector<float> tol(static_cast<std::size_t>(p.batch * p.out_channels * p.out_spatial()));
  ref::conv(q, ax.data(), aw.data(), bias != nullptr ? ab.data() : nullptr, tol.data());
  for (float& t : tol) t = 4e-6f * (t + 1.f);
  return tol;
}

void run(const ConvParams& p, const Unary& act, bool with_bias, unsigned seed) {
  const std::int64_t in_sp = [&] {
    std::int64_t n = 1;
    for (int i = 0; i < p.rank; ++i) n *= p.in[i];
    return n;
  }();
  std::int64_t k_sp = 1;
  for (int i = 0; i < p.rank; ++i) k_sp *= p.kernel[i];
  const auto x = random_floats(static_cast<std::size_t>(p.batch * p.in_channels * in_sp), seed);
  const auto w = random_floats(static_cast<std::size_t>(p.out_channels * (p.in_channels / p.group) * k_sp), seed + 1);
  const auto b = random_floats(static_cast<std::size_t>(p.out_channels), seed + 2);
  const float* bias = with_bias ? b.data() : nullptr;
  const auto n_out = static_cast<std::size_t>(p.batch * p.out_channels * p.out_spatial());
  std::vector<float> got(n_out, 99.f), want(n_out);
  conv(p, x.data(), w.data(), bias, got.data(), act);
  ref::conv(p, x.data(), w.data(), bias, want.data(), act);
  std::string what = "conv rank " + std::to_string(p.rank) + " N" + std::to_string(p.batch) + " C" +
                     std::to_string(p.in_channels) + " M" + std::to_string(p.out_channels) + " G" +
                     std::to_string(p.group) + " in";
  for (int i = 0; i < p.rank; ++i)
    what += " " + std::to_string(p.in[i]) + "/k" + std::to_string(p.kernel[i]) + "/s" + std::to_string(p.stride[i]) +
            "/d" + std::to_string(p.dilation[i]) + "/p" + std::to_string(p.pad_begin[i]) + "," +
            std::to_string(p.pad_end[i]);
  const auto tol = tolerances(p, x, w, bias);
  expect_close(got, want, tol, what);
  // The packed-weights (transposed) path, and both paths accumulating onto a residual:
  // y = act(conv + bias + residual), against the reference without act, plus residual, then act.
  const ConvPackedWeights packed = pack_conv_weights(p, w.data());
  std::fill(got.begin(), got.end(), 99.f);
  conv_packed(p, x.data(), packed, bias, got.data(), act);
  expect_close(got, want, tol, what + " (packed)");
  if (n_out == 0) return;
  const auto res = random_floats(n_out, seed + 3);
  std::vector<float> plain(n_out), want_acc(n_out), tol_acc(tol);
  ref::conv(p, x.data(), w.data(), bias, plain.data());
  for (std::size_t i = 0; i < n_out; ++i) {
    want_acc[i] = static_cast<float>(ref::unary(act, static_cast<double>(plain[i]) + res[i]));
    tol_acc[i] += 4e-6f * std::fabs(res[i]);
  }
  for (bool use_packed : {false, true}) {
    got = res;
    if (use_packed)
      conv_packed(p, x.data(), packed, bias, got.data(), act, true);
    else
      conv(p, x.data(), w.data(), bias, got.data(), act, true);
    expect_close(got, want_acc, tol_acc, what + (use_packed ? " (packed, accumulate)" : " (accumulate)"));
  }
}

ConvParams conv2d(std::int64_t n, std::int64_t c, std::int64_t m, std::int64_t g, std::int64_t h, std::int64_t w,
                  std::int64_t kh, std::int64_t kw, std::int64_t s, std::int64_t d, std::array<std::int64_t, 4> pads) {
  ConvParams p;
  p.rank = 2, p.batch = n, p.in_channels = c, p.out_channels = m, p.group = g;
  p.in = {h, w, 1}, p.kernel = {kh, kw, 1}, p.stride = {s, s, 1}, p.dilation = {d, d, 1};
  p.pad_begin = {pads[0], pads[1], 0}, p.pad_end = {pads[2], pads[3], 0};
  return p;
}

class Conv : public SimdTest {};
ONNXFORGE_SIMD_ALL_ISAS(Conv);

TEST_P(Conv, General2d) {
  unsigned seed = 1;
  struct Ch {
    std::int64_t c, m, g;
  };
  for (Ch ch : {Ch{1, 1, 1}, Ch{3, 8, 1}, Ch{4, 6, 2}, Ch{6, 6, 3}, Ch{16, 20, 4}})
    for (std::int64_t k : {1, 3, 5})
      for (std::int64_t s : {1, 2, 3})
        for (std::int64_t d : {1, 2}) {
          if (k == 1 && d == 2) continue;
          const std::array<std::int64_t, 4> pads = {k / 2, (k + 1) / 2, 0, k / 2 + (s == 2)};
          run(conv2d(2, ch.c, ch.m, ch.g, 11, 9, k, k, s, d, pads), Unary::none(), true, seed++);
        }
}

TEST_P(Conv, NonSquareKernelsAndOddPads) {
  unsigned seed = 100;
  run(conv2d(1, 5, 7, 1, 13, 6, 1, 3, 1, 1, {0, 1, 0, 1}), Unary::none(), true, seed++);
  run(conv2d(1, 5, 7, 1, 6, 13, 3, 1, 2, 1, {2, 0, 1, 0}), Unary::none(), false, seed++);
  run(conv2d(2, 3, 4, 1, 7, 7, 7, 7, 2, 1, {3, 3, 3, 3}), Unary::none(), true, seed++);   // ResNet stem shape
  run(conv2d(1, 2, 3, 1, 1, 1, 3, 3, 1, 1, {1, 1, 1, 1}), Unary::none(), true, seed++);   // 1x1 input, all padding
  run(conv2d(1, 4, 4, 1, 9, 9, 3, 3, 1, 3, {0, 0, 0, 0}), Unary::none(), true, seed++);   // dilation 3
  run(conv2d(1, 3, 5, 1, 5, 40, 2, 3, 1, 1, {0, 0, 0, 0}), Unary::none(), true, seed++);  // long rows: runs
}

TEST_P(Conv, Pointwise) {
  unsigned seed = 200;
  run(conv2d(2, 64, 32, 1, 14, 14, 1, 1, 1, 1, {0, 0, 0, 0}), Unary::none(), true, seed++);
  run(conv2d(1, 16, 24, 2, 7, 5, 1, 1, 1, 1, {0, 0, 0, 0}), Unary::relu(), true, seed++);
  run(conv2d(1, 8, 8, 1, 9, 9, 1, 1, 2, 1, {0, 0, 0, 0}), Unary::none(), true, seed++);  // strided 1x1: im2col
}

TEST_P(Conv, Depthwise) {
  unsigned seed = 300;
  for (std::int64_t mult : {1, 2})
    for (std::int64_t k : {3, 5})
      for (std::int64_t s : {1, 2})
        for (std::int64_t d : {1, 2})
          for (std::int64_t w : {7, 19, 40}) {
            const std::array<std::int64_t, 4> pads = {k / 2, k / 2, k / 2, (k / 2) + 1};
            run(conv2d(2, 8, 8 * mult, 8, 9, w, k, k, s, d, pads), Unary::relu(), true, seed++);
          }
  run(conv2d(1, 32, 32, 32, 112, 112, 3, 3, 1, 1, {1, 1, 1, 1}), Unary::clip(0.f, 6.f), true, seed++);  // MobileNet
  run(conv2d(1, 4, 4, 4, 5, 5, 7, 1, 1, 1, {3, 0, 3, 0}), Unary::none(), false, seed++);    // kernel taller than input
  run(conv2d(1, 6, 6, 6, 13, 17, 3, 3, 3, 1, {1, 2, 0, 1}), Unary::none(), true, seed++);   // stride 3
  run(conv2d(1, 6, 12, 6, 16, 23, 5, 5, 4, 2, {0, 3, 2, 0}), Unary::none(), true, seed++);  // stride 4, dilation 2
}

TEST_P(Conv, Epilogues) {
  unsigned seed = 400;
  for (const Unary& act : {Unary::relu(), Unary::of(UnaryOp::Gelu), Unary::of(UnaryOp::Sigmoid), Unary::hard_swish(),
                           Unary::leaky_relu(0.2f), Unary::of(UnaryOp::Silu)})
    for (bool bias : {false, true}) {
      run(conv2d(1, 6, 10, 2, 8, 8, 3, 3, 1, 1, {1, 1, 1, 1}), act, bias, seed++);
      run(conv2d(1, 6, 6, 6, 8, 8, 3, 3, 1, 1, {1, 1, 1, 1}), act, bias, seed++);
    }
}

TEST_P(Conv, OneAndThreeDimensional) {
  unsigned seed = 500;
  ConvParams p;
  p.rank = 1, p.batch = 2, p.in_channels = 16, p.out_channels = 24;
  p.in = {50, 1, 1}, p.kernel = {3, 1, 1}, p.stride = {2, 1, 1}, p.pad_begin = {1, 0, 0}, p.pad_end = {1, 0, 0};
  run(p, Unary::of(UnaryOp::Gelu), true, seed++);  // Whisper's second conv
  p.stride = {1, 1, 1}, p.dilation = {2, 1, 1};
  run(p, Unary::none(), true, seed++);
  p.group = 16, p.out_channels = 16;  // depthwise 1-D
  run(p, Unary::none(), true, seed++);
  ConvParams q;
  q.rank = 3, q.batch = 1, q.in_channels = 4, q.out_channels = 6, q.group = 2;
  q.in = {5, 6, 7}, q.kernel = {3, 2, 3}, q.stride = {1, 2, 1}, q.dilation = {1, 1, 2};
  q.pad_begin = {1, 0, 2}, q.pad_end = {1, 1, 0};
  run(q, Unary::relu(), true, seed++);
  q.group = 4, q.out_channels = 4;  // depthwise 3-D goes through the GEMM path
  run(q, Unary::none(), true, seed++);
}

TEST_P(Conv, StridedPointwise) {
  // 1x1 with strides and no padding: the sampled positions are gathered into a dense input and
  // run as a pointwise GEMM (ResNet's downsampling shortcuts). Odd sizes, unequal strides,
  // groups, batches, dilation (irrelevant for 1x1), 1-D and 3-D, fused activation and residual.
  unsigned seed = 700;
  run(conv2d(1, 64, 200, 1, 28, 28, 1, 1, 2, 1, {0, 0, 0, 0}), Unary::relu(), true, seed++);  // ResNet-like shortcut
  run(conv2d(2, 19, 37, 1, 13, 11, 1, 1, 2, 1, {0, 0, 0, 0}), Unary::none(), true, seed++);
  run(conv2d(1, 12, 20, 4, 17, 10, 1, 1, 3, 2, {0, 0, 0, 0}), Unary::relu(), false, seed++);
  ConvParams p = conv2d(2, 9, 70, 1, 15, 16, 1, 1, 1, 1, {0, 0, 0, 0});
  p.stride = {3, 2, 1};
  run(p, Unary::none(), true, seed++);
  p.stride = {1, 4, 1};
  run(p, Unary::relu(), true, seed++);
  ConvParams q;
  q.rank = 1, q.batch = 2, q.in_channels = 10, q.out_channels = 14;
  q.in = {41, 1, 1}, q.stride = {3, 1, 1};
  run(q, Unary::none(), true, seed++);
  q.rank = 3, q.in = {5, 7, 9}, q.stride = {2, 3, 2}, q.group = 2;
  run(q, Unary::relu(), true, seed++);
}

TEST_P(Conv, WideMapsWithFewRows) {
  // 56x56 maps with 64 output channels: the GEMM's columns are cut into a tile count that
  // divides evenly over the threads (5 tiles become 6 on 2 threads); 1x1 and padded 3x3.
  unsigned seed = 800;
  run(conv2d(1, 8, 64, 1, 56, 56, 1, 1, 1, 1, {0, 0, 0, 0}), Unary::relu(), true, seed++);
  run(conv2d(1, 4, 64, 1, 56, 56, 3, 3, 1, 1, {1, 1, 1, 1}), Unary::relu(), true, seed++);
  run(conv2d(1, 4, 61, 1, 57, 53, 3, 3, 1, 1, {1, 0, 1, 2}), Unary::none(), true, seed++);
}

TEST_P(Conv, LateStageShapesPreferPackedWeights) {
  // ResNet's 7x7 stage: few positions, many channels (conv_prefers_packed); run() checks both
  // paths, with residual-style accumulation, on any shape.
  unsigned seed = 600;
  EXPECT_TRUE(conv_prefers_packed(conv2d(1, 512, 2048, 1, 7, 7, 1, 1, 1, 1, {0, 0, 0, 0})));
  EXPECT_FALSE(conv_prefers_packed(conv2d(1, 64, 64, 1, 56, 56, 3, 3, 1, 1, {1, 1, 1, 1})));
  EXPECT_FALSE(conv_prefers_packed(conv2d(1, 64, 64, 64, 7, 7, 3, 3, 1, 1, {1, 1, 1, 1})));    // depthwise
  EXPECT_TRUE(conv_prefers_packed(conv2d(1, 512, 512, 1, 7, 7, 3, 3, 1, 1, {1, 1, 1, 1})));    // 3x3 at 7x7
  EXPECT_TRUE(conv_prefers_packed(conv2d(1, 512, 512, 1, 14, 14, 3, 3, 2, 1, {1, 1, 1, 1})));  // to 7x7
  EXPECT_TRUE(conv_prefers_packed(conv2d(1, 1024, 2048, 1, 14, 14, 1, 1, 2, 1, {0, 0, 0, 0})));
  EXPECT_FALSE(conv_prefers_packed(conv2d(1, 256, 256, 1, 14, 14, 3, 3, 1, 1, {1, 1, 1, 1})));
  run(conv2d(1, 96, 200, 1, 7, 7, 1, 1, 1, 1, {0, 0, 0, 0}), Unary::relu(), true, seed++);
  run(conv2d(1, 40, 72, 1, 7, 7, 3, 3, 1, 1, {1, 1, 1, 1}), Unary::relu(), true, seed++);
  run(conv2d(2, 24, 80, 2, 15, 13, 3, 3, 2, 1, {1, 0, 1, 1}), Unary::none(), true, seed++);
  run(conv2d(1, 33, 65, 1, 14, 14, 1, 1, 2, 1, {0, 0, 0, 0}), Unary::relu(), false, seed++);  // strided 1x1
}

TEST_P(Conv, StridedStems) {
  // Stride-2 convs with large kernels over few channels (the padded input split into stride
  // phases, or the implicit im2col's strided gather with clipped ranges where the phase rows would
  // waste too many columns): odd and even sizes, asymmetric and zero pads, kernels larger than the input.
  unsigned seed = 700;
  run(conv2d(1, 3, 16, 1, 224, 224, 7, 7, 2, 1, {3, 3, 3, 3}), Unary::relu(), true, seed++);  // ResNet stem
  run(conv2d(2, 3, 8, 1, 23, 18, 7, 7, 2, 1, {3, 2, 1, 3}), Unary::none(), true, seed++);
  run(conv2d(1, 4, 5, 1, 12, 13, 5, 6, 2, 1, {0, 0, 0, 0}), Unary::relu(), false, seed++);
  run(conv2d(1, 2, 6, 1, 5, 6, 7, 7, 2, 1, {3, 3, 3, 3}), Unary::none(), true, seed++);
  run(conv2d(1, 8, 4, 1, 9, 9, 5, 5, 3, 1, {2, 2, 2, 2}), Unary::of(UnaryOp::Sigmoid), true, seed++);  // stride 3
}

TEST_P(Conv, SameBitsAtEveryThreadCount) {
  // However the threads split a conv (GEMM tiles, copies, crops), every output must come out bit
  // for bit the same whatever the thread count. Padded (cropped) and strided (phase-split) 3x3s
  // and stems, 1x1s with more and fewer than 128 rows, groups, the packed path, with residual
  // and Relu.
  unsigned seed = 900;
  const ConvParams shapes[] = {
      conv2d(1, 8, 64, 1, 56, 56, 3, 3, 1, 1, {1, 1, 1, 1}),    // wide rows, cropped
      conv2d(1, 16, 200, 1, 28, 28, 1, 1, 1, 1, {0, 0, 0, 0}),  // > 128 rows: B packed first
      conv2d(1, 24, 40, 1, 56, 56, 1, 1, 1, 1, {0, 0, 0, 0}),   // B rows too far apart: per tile
      conv2d(1, 3, 16, 1, 61, 64, 7, 7, 2, 1, {3, 3, 2, 3}),    // stem-like, phase-split
      conv2d(1, 16, 24, 1, 57, 55, 3, 3, 2, 1, {1, 1, 1, 1}),   // stride 2 to 28x27
      conv2d(1, 32, 48, 1, 14, 14, 3, 3, 1, 1, {1, 1, 1, 1}),   // small map
      conv2d(2, 12, 30, 3, 30, 30, 3, 3, 1, 1, {1, 1, 1, 1}),   // groups and batch
  };
  for (const ConvParams& p : shapes) {
    std::int64_t in_sp = p.in[0] * p.in[1], k_sp = p.kernel[0] * p.kernel[1];
    const auto x = random_floats(static_cast<std::size_t>(p.batch * p.in_channels * in_sp), seed);
    const auto w = random_floats(static_cast<std::size_t>(p.out_channels * (p.in_channels / p.group) * k_sp), seed + 1);
    const auto b = random_floats(static_cast<std::size_t>(p.out_channels), seed + 2);
    const auto res = random_floats(static_cast<std::size_t>(p.batch * p.out_channels * p.out_spatial()), seed + 3);
    seed += 4;
    const ConvPackedWeights packed = pack_conv_weights(p, w.data());
    std::vector<float> want[4];
    for (int threads : {1, 2, 3, 4}) {
      tbb::global_control cap(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
      std::vector<float> got[4];
      for (int v = 0; v < 4; ++v) {
        const bool use_packed = v % 2 == 1, acc = v >= 2;
        got[v] = acc ? res : std::vector<float>(res.size(), 0.f);
        if (use_packed)
          conv_packed(p, x.data(), packed, b.data(), got[v].data(), Unary::relu(), acc);
        else
          conv(p, x.data(), w.data(), b.data(), got[v].data(), Unary::relu(), acc);
        if (threads == 1) {
          want[v] = got[v];
          continue;
        }
        EXPECT_EQ(0, std::memcmp(got[v].data(), want[v].data(), got[v].size() * sizeof(float)))
            << "M" << p.out_channels << " in " << p.in[0] << "x" << p.in[1] << " k" << p.kernel[0] << " s"
            << p.stride[0] << " packed " << use_packed << " accumulate " << acc << " threads " << threads;
      }
    }
  }
}

TEST_P(Conv, StridedPhasePlanes) {
  // Strided convs over a padded input split into stride phases (conv_padded_rows): unequal
  // strides, strides 3 and 4, kernel == stride (patch embedding), dilation, asymmetric pads,
  // strided 1x1 with padding, groups, batches, 1-D; wide outputs (the phase path) and narrow
  // ones (the implicit im2col).
  unsigned seed = 1000;
  run(conv2d(1, 64, 40, 1, 56, 56, 3, 3, 2, 1, {1, 1, 1, 1}), Unary::relu(), true, seed++);  // ResNet 3x3 s2
  run(conv2d(2, 6, 10, 2, 33, 31, 3, 3, 2, 1, {0, 1, 2, 0}), Unary::none(), true, seed++);
  run(conv2d(1, 5, 7, 1, 40, 41, 5, 5, 3, 2, {2, 1, 0, 3}), Unary::relu(), false, seed++);
  run(conv2d(1, 3, 12, 1, 32, 48, 4, 4, 4, 1, {0, 0, 0, 0}), Unary::none(), true, seed++);  // patches
  run(conv2d(1, 8, 9, 1, 30, 30, 1, 1, 2, 1, {1, 1, 0, 1}), Unary::none(), true, seed++);   // 1x1 padded
  ConvParams p = conv2d(1, 7, 11, 1, 23, 37, 3, 5, 1, 1, {1, 2, 1, 2});
  p.stride = {1, 2, 1};
  run(p, Unary::relu(), true, seed++);
  p.stride = {3, 1, 1};
  run(p, Unary::none(), true, seed++);
  ConvParams q;
  q.rank = 1, q.batch = 2, q.in_channels = 8, q.out_channels = 12;
  q.in = {97, 1, 1}, q.kernel = {5, 1, 1}, q.stride = {2, 1, 1}, q.dilation = {2, 1, 1};
  q.pad_begin = {3, 0, 0}, q.pad_end = {1, 0, 0};
  run(q, Unary::none(), true, seed++);
}

TEST_P(Conv, DegenerateShapes) {
  // No input channels: the output is act(bias).
  ConvParams p = conv2d(1, 0, 3, 1, 4, 4, 3, 3, 1, 1, {1, 1, 1, 1});
  const std::vector<float> bias = {1.f, -2.f, 3.f};
  std::vector<float> y(3 * 16, 7.f);
  conv(p, nullptr, nullptr, bias.data(), y.data(), Unary::relu());
  for (std::size_t i = 0; i < y.size(); ++i) EXPECT_EQ(y[i], std::max(0.f, bias[i / 16]));
  // Zero batch, and a kernel larger than the padded input: nothing to compute.
  p = conv2d(0, 3, 3, 1, 4, 4, 3, 3, 1, 1, {0, 0, 0, 0});
  conv(p, nullptr, nullptr, nullptr, nullptr);
  p = conv2d(1, 1, 1, 1, 2, 2, 3, 3, 1, 1, {0, 0, 0, 0});
  EXPECT_EQ(p.out_spatial(), 0);
  conv(p, nullptr, nullptr, nullptr, nullptr);
}

TEST_P(Conv, RejectsBadParameters) {
  std::vector<float> buf(1024);
  EXPECT_THROW(conv(conv2d(1, 3, 4, 2, 4, 4, 3, 3, 1, 1, {0, 0, 0, 0}), buf.data(), buf.data(), nullptr, buf.data()),
               std::invalid_argument);
  EXPECT_THROW(conv(conv2d(1, 4, 4, 1, 4, 4, 3, 3, 0, 1, {0, 0, 0, 0}), buf.data(), buf.data(), nullptr, buf.data()),
               std::invalid_argument);
  EXPECT_THROW(conv(conv2d(1, 4, 4, 1, 4, 4, 3, 3, 1, 1, {-1, 0, 0, 0}), buf.data(), buf.data(), nullptr, buf.data()),
               std::invalid_argument);
  ConvParams p = conv2d(1, 4, 4, 1, 4, 4, 3, 3, 1, 1, {0, 0, 0, 0});
  p.rank = 4;
  EXPECT_THROW(conv(p, buf.data(), buf.data(), nullptr, buf.data()), std::invalid_argument);
}

}  // namespace
}  // namespace onnxforge::simd::test
