// Driver of the direct 3x3 / stride 1 or 2 / pad 1 convolution (simd/detail/conv_direct.h): weight
// packing, fit test, threading over (image, channel group, output row or tile of rows).
#include <algorithm>
#include <cstdlib>
#include <vector>

#include "simd/conv.h"
#include "simd/detail/conv_direct.h"
#include "simd/detail/kernel_table.h"
#include "simd/detail/parallel.h"
#include "simd/detail/scratch.h"

namespace onnxforge::simd::detail {

bool conv_direct_fits(const ConvParams& p) {
  if (p.rank != 2 || p.group != 1 || p.in_channels < 1 || p.out_channels < 1) return false;
  for (int i = 0; i < 2; ++i)
    if (p.kernel[i] != 3 || p.dilation[i] != 1 || p.pad_begin[i] != 1 || p.pad_end[i] != 1) return false;
  return (p.stride[0] == 1 || p.stride[0] == 2) && p.stride[1] == p.stride[0] && p.in[0] > 0 && p.in[1] > 0;
}

// Whether the direct 3x3 kernel (AVX-512 only) is routed for p. Measured on ResNet-50's 3x3
// convs (64 to 512 channels, 56x56 to 7x7 outputs, stride 1 and 2): 13-30% faster than the
// padded-rows GEMM and the packed GEMM at 1 thread. Few output channels would leave most of
// the 16 lanes idle. ONNXFORGE_CONV_DIRECT=0 turns it off (A/B measurements).
bool conv_direct_routed(const ConvParams& p) {
  static const bool enabled = [] {
    const char* e = std::getenv("ONNXFORGE_CONV_DIRECT");
    return e == nullptr || e[0] != '0';
  }();
  return enabled && detail::active_table().isa == Isa::Avx512 && conv_direct_fits(p) &&
         (p.out_channels % 16 == 0 || p.out_channels >= 48);
}

std::vector<float> pack_conv_direct(const ConvParams& p, const float* w) {
  const std::int64_t C = p.in_channels, M = p.out_channels, Mb = (M + 15) / 16;
  std::vector<float> out(static_cast<std::size_t>(Mb * C * 144), 0.f);
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t t = 0; t < 9; ++t)
        out[static_cast<std::size_t>((((m / 16) * C + c) * 9 + t) * 16 + m % 16)] = w[(m * C + c) * 9 + t];
  return out;
}

void unpack_conv_direct(const ConvParams& p, const float* packed, float* w) {
  const std::int64_t C = p.in_channels, M = p.out_channels;
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t t = 0; t < 9; ++t) w[(m * C + c) * 9 + t] = packed[(((m / 16) * C + c) * 9 + t) * 16 + m % 16];
}

// AVX-512 must be active. y = act(conv + bias (+ y)).
void conv_direct(const ConvParams& p, const float* x, const float* wp, const float* bias, float* y, const Unary& act,
                 bool accumulate) {
  const KernelTable& kt = active_table();
  const std::int64_t C = p.in_channels, M = p.out_channels, H = p.in[0], W = p.in[1], Mb = (M + 15) / 16;
  const std::int64_t OH = p.out(0), OW = p.out(1);
  constexpr int NV = 2;  // 2 x 16 channels x 14 pixels per tile (3 and 4 measured no better)
  const std::int64_t groups = (Mb + NV - 1) / NV;
  const bool relu = act.op == UnaryOp::Relu, other = !relu && act.op != UnaryOp::Identity;
  // Narrow maps: tiles of R whole rows (the weights reused R times as often).
  const bool small = small_map(W, OW, static_cast<int>(p.stride[0]));
  const std::int64_t R = small ? small_rows(static_cast<int>(OW)) : 1, tiles = (OH + R - 1) / R;
  const auto items = static_cast<std::size_t>(p.batch * groups * tiles);
  parallel_chunks(items, 1, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      const auto ii = static_cast<std::int64_t>(i);
      const std::int64_t t = ii % tiles, g = (ii / tiles) % groups, n = ii / (tiles * groups);
      ConvDirectArgs a{
          x + n * C * H * W, wp, bias, y + n * M * OH * OW, C, M, H, W, OH, OW, static_cast<int>(p.stride[0]), relu,
          accumulate};
      const std::int64_t mb0 = g * NV, oh0 = t * R, rows = std::min(R, OH - oh0);
      const int nv = static_cast<int>(std::min<std::int64_t>(NV, Mb - mb0));
      if (small)
        avx512::conv3x3_direct_rows(a, oh0, static_cast<int>(rows), mb0, nv);
      else
        avx512::conv3x3_direct_row(a, oh0, mb0, nv);
      if (other)
        for (std::int64_t m = mb0 * 16; m < std::min(M, (mb0 + nv) * 16); ++m) {
          float* r = a.y + (m * OH + oh0) * OW;
          kt.unary(act, r, r, static_cast<std::size_t>(rows * OW));
        }
    }
  });
}

}  // namespace onnxforge::simd::detail
