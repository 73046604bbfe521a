// Driver of the direct few-input-channel convolution (simd/detail/conv_fewc.h): fit test, weight
// packing, the zero-padded input copy, threading over (image, channel group, output row).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "simd/conv.h"
#include "simd/detail/conv_fewc.h"
#include "simd/detail/kernel_table.h"
#include "simd/detail/parallel.h"
#include "simd/detail/scratch.h"

namespace onnxforge::simd::detail {

namespace {

std::int64_t taps(const ConvParams& p) { return p.kernel[0] * p.kernel[1]; }

// Padded extent of spatial dim i that the outputs read (the end padding may be cut short).
std::int64_t padded(const ConvParams& p, int i) { return (p.out(i) - 1) * p.stride[i] + p.kernel[i]; }

// x (batch images [C][H][W]) -> xp (batch images [C][HP][WP]), zeros outside the input.
void pad_input(const ConvParams& p, const float* x, float* xp) {
  const std::int64_t H = p.in[0], W = p.in[1], HP = padded(p, 0), WP = padded(p, 1);
  const std::int64_t top = p.pad_begin[0], left = p.pad_begin[1];
  const std::int64_t lead = std::min(left, WP), cols = std::max<std::int64_t>(0, std::min(W, WP - left));
  const auto rows = static_cast<std::size_t>(p.batch * p.in_channels * HP);
  const std::size_t grain = std::max<std::size_t>(1, 16384 / static_cast<std::size_t>(WP));
  parallel_chunks(rows, grain, [&](std::size_t b, std::size_t e) {
    for (auto r = static_cast<std::int64_t>(b); r < static_cast<std::int64_t>(e); ++r) {
      float* dst = xp + r * WP;
      const std::int64_t plane = r / HP, ih = r % HP - top;
      if (ih < 0 || ih >= H) {
        std::fill(dst, dst + WP, 0.f);
        continue;
      }
      std::fill(dst, dst + lead, 0.f);
      std::memcpy(dst + lead, x + (plane * H + ih) * W, static_cast<std::size_t>(cols) * sizeof(float));
      std::fill(dst + lead + cols, dst + WP, 0.f);
    }
  });
}

}  // namespace

bool conv_fewc_fits(const ConvParams& p) {
  if (p.rank != 2 || p.group != 1 || p.in_channels < 1 || p.out_channels < 1) return false;
  if (p.dilation[0] != 1 || p.dilation[1] != 1 || p.stride[1] > 4 || p.out(0) < 1 || p.out(1) < 1) return false;
  // One group's weights, kFewcVectors x 16 channels x C * KH * KW floats, must stay in L1:
  // 192 taps (48 KB) at most.
  return p.in_channels * taps(p) <= 192;
}

// Whether the direct few-input-channel kernel (AVX-512 only) is routed for p. Measured against
// the padded-rows GEMM (K = C * kernel size is too short for it): ResNet's stem (3 -> 64, 7x7,
// stride 2) 1.4-1.8x faster, 5x5 / 6x6 / 7x7 / 3x3-stride-2 stems with 1 to 4 channels and 16
// to 64 outputs 1.1-2.4x, a 4x4 stride-4 patchify (3 -> 96) even. ONNXFORGE_CONV_FEWC=0 turns
// it off (A/B measurements).
bool conv_fewc_routed(const ConvParams& p) {
  static const bool enabled = [] {
    const char* e = std::getenv("ONNXFORGE_CONV_FEWC");
    return e == nullptr || e[0] != '0';
  }();
  return enabled && detail::active_table().isa == Isa::Avx512 && detail::conv_fewc_fits(p) && p.in_channels <= 4;
}

std::vector<float> pack_conv_fewc(const ConvParams& p, const float* w) {
  const std::int64_t K = p.in_channels * taps(p), M = p.out_channels;
  std::vector<float> out(static_cast<std::size_t>((M + 15) / 16 * K * 16), 0.f);
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t k = 0; k < K; ++k) out[static_cast<std::size_t>(((m / 16) * K + k) * 16 + m % 16)] = w[m * K + k];
  return out;
}

void unpack_conv_fewc(const ConvParams& p, const float* packed, float* w) {
  const std::int64_t K = p.in_channels * taps(p), M = p.out_channels;
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t k = 0; k < K; ++k) w[m * K + k] = packed[((m / 16) * K + k) * 16 + m % 16];
}

// AVX-512 must be active. y = act(conv + bias (+ y)).
void conv_fewc(const ConvParams& p, const float* x, const float* wp, const float* bias, float* y, const Unary& act,
               bool accumulate, bool y_nhwc) {
  const KernelTable& kt = active_table();
  const std::int64_t C = p.in_channels, M = p.out_channels, Mb = (M + 15) / 16;
  const std::int64_t HP = padded(p, 0), WP = padded(p, 1), OH = p.out(0), OW = p.out(1);
  Scratch pad(static_cast<std::size_t>(p.batch * C * HP * WP));
  pad_input(p, x, pad.data());
  const std::int64_t groups = (Mb + kFewcVectors - 1) / kFewcVectors;
  const bool relu = act.op == UnaryOp::Relu, other = !relu && act.op != UnaryOp::Identity;
  const auto items = static_cast<std::size_t>(p.batch * groups * OH);
  parallel_chunks(items, 1, [&](std::size_t b, std::size_t e) {
    for (auto i = static_cast<std::int64_t>(b); i < static_cast<std::int64_t>(e); ++i) {
      const std::int64_t oh = i % OH, g = (i / OH) % groups, n = i / (OH * groups);
      const ConvFewcArgs a{pad.data() + n * C * HP * WP,
                           wp,
                           bias,
                           y + n * M * OH * OW,
                           C,
                           M,
                           HP,
                           WP,
                           p.kernel[0],
                           p.kernel[1],
                           OH,
                           OW,
                           p.stride[0],
                           static_cast<int>(p.stride[1]),
                           relu,
                           accumulate,
                           y_nhwc};
      const std::int64_t mb0 = g * kFewcVectors;
      const int nv = static_cast<int>(std::min<std::int64_t>(kFewcVectors, Mb - mb0));
      avx512::conv_fewc_row(a, oh, mb0, nv);
      if (!other) continue;
      const std::int64_t m0 = mb0 * 16, m1 = std::min(M, (mb0 + nv) * 16);
      if (y_nhwc) {
        float* r = a.y + oh * OW * M;
        if (m1 - m0 == M) {
          kt.unary(act, r, r, static_cast<std::size_t>(OW * M));
        } else {
          for (std::int64_t ow = 0; ow < OW; ++ow) {
            float* px = r + ow * M + m0;
            kt.unary(act, px, px, static_cast<std::size_t>(m1 - m0));
          }
        }
        continue;
      }
      for (std::int64_t m = m0; m < m1; ++m) {
        float* r = a.y + (m * OH + oh) * OW;
        kt.unary(act, r, r, static_cast<std::size_t>(OW));
      }
    }
  });
}

}  // namespace onnxforge::simd::detail
