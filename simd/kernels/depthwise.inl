// Direct depthwise convolution of one channel plane for one ISA level. The driver has padded
// the input plane and split its columns into sw phases (padded column c lives in phase c % sw at
// index c / sw), so every tap of every output row is a contiguous run whatever the stride and
// dilation: out[oh][x] = act(bias + sum_t w[t] * plane[tap_offset[t] + oh * row_step + x]).
#include "simd/kernels/isa_config.h"
#include "simd/kernels/vmath.h"

namespace onnxforge::simd::detail::ONNXFORGE_ISA_NS {
namespace {

void depthwise_plane(const float* plane, const std::int64_t* tap_offset, std::size_t taps, const float* w,
                     float bias, std::size_t row_step, std::size_t oh_n, std::size_t ow_n, float* out,
                     const Unary* act) {
  const bool fused = in_register_act(act);
  const V b(bias);
  for (std::size_t oh = 0; oh < oh_n; ++oh) {
    const float* base = plane + oh * row_step;
    float* row = out + oh * ow_n;
    std::size_t x = 0;
    for (; x + 2 * kW <= ow_n; x += 2 * kW) {
      V a0 = b, a1 = b;
      for (std::size_t t = 0; t < taps; ++t) {
        const V wt(w[t]);
        const float* src = base + tap_offset[t] + x;
        a0 = vfma(wt, V::load_unaligned(src), a0);
        a1 = vfma(wt, V::load_unaligned(src + kW), a1);
      }
      if (fused) a0 = register_act(a0, act), a1 = register_act(a1, act);
      a0.store_unaligned(row + x);
      a1.store_unaligned(row + x + kW);
    }
    for (; x < ow_n; x += kW) {
      const std::size_t n = ow_n - x < kW ? ow_n - x : kW;
      V a = b;
      for (std::size_t t = 0; t < taps; ++t) a = vfma(V(w[t]), load_partial(base + tap_offset[t] + x, n), a);
      if (fused) a = register_act(a, act);
      store_partial(a, row + x, n);
    }
    if (!fused) apply_unary_span(*act, row, row, ow_n);
  }
}

}  // namespace

void install_depthwise(KernelTable& t) { t.depthwise_plane = &depthwise_plane; }

}  // namespace onnxforge::simd::detail::ONNXFORGE_ISA_NS
