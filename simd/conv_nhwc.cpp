// Channels-last convolution. STUB: correct but slow (NCHW conv between two transposes); the
// implicit-GEMM kernel replaces it.
#include <stdexcept>

#include "simd/nhwc.h"

namespace onnxforge::simd {

bool conv_nhwc_supported(const ConvParams& p) { return p.rank == 2 && p.group == 1; }

ConvNhwcWeights pack_conv_weights_nhwc(const ConvParams& p, const float* w) {
  if (!conv_nhwc_supported(p)) throw std::invalid_argument("pack_conv_weights_nhwc: needs a 2-D conv with group 1");
  ConvNhwcWeights r;
  r.params = p;
  r.plain.assign(w, w + p.out_channels * p.in_channels * p.kernel[0] * p.kernel[1]);
  return r;
}

void conv_nhwc(const ConvParams& p, const float* x, bool x_nchw, const ConvNhwcWeights& w, const float* bias,
               float* y, const Unary& act, bool accumulate) {
  const std::int64_t N = p.batch, C = p.in_channels, M = p.out_channels, HW = p.in[0] * p.in[1],
                     OHW = p.out_spatial();
  std::vector<float> xt, yt(static_cast<std::size_t>(N * M * OHW));
  if (!x_nchw) {
    xt.resize(static_cast<std::size_t>(N * C * HW));
    nhwc_to_nchw(N, C, HW, x, xt.data());
    x = xt.data();
  }
  if (accumulate) nhwc_to_nchw(N, M, OHW, y, yt.data());
  conv(p, x, w.plain.data(), bias, yt.data(), act, accumulate);
  nchw_to_nhwc(N, M, OHW, yt.data(), y);
}

}  // namespace onnxforge::simd
