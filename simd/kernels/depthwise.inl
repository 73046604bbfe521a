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

// PB pixels at once (independent FMA chains) x M outputs.
template <int PB, int M>
void few_outputs_block(const float* const* taps, std::size_t ntaps, std::size_t step, std::size_t C, const float* w,
                       const float* bias, float* y) {
  V acc[PB][M];
#pragma GCC unroll 8
  for (int p = 0; p < PB; ++p)
#pragma GCC unroll 4
    for (int m = 0; m < M; ++m) acc[p][m] = V(0.f);
  const std::size_t wm = ntaps * C;  // one output's weights
  for (std::size_t t = 0; t < ntaps; ++t) {
    const float* wt = w + t * C;
    const float* src = taps[t];
    std::size_t c = 0;
    for (; c + kW <= C; c += kW) {
      V wv[M];
#pragma GCC unroll 4
      for (int m = 0; m < M; ++m) wv[m] = V::load_unaligned(wt + static_cast<std::size_t>(m) * wm + c);
#pragma GCC unroll 8
      for (int p = 0; p < PB; ++p) {
        const V xv = V::load_unaligned(src + static_cast<std::size_t>(p) * step + c);
#pragma GCC unroll 4
        for (int m = 0; m < M; ++m) acc[p][m] = vfma(xv, wv[m], acc[p][m]);
      }
    }
    if (c < C) {
      const std::size_t n = C - c;
      V wv[M];
#pragma GCC unroll 4
      for (int m = 0; m < M; ++m) wv[m] = load_partial(wt + static_cast<std::size_t>(m) * wm + c, n);
#pragma GCC unroll 8
      for (int p = 0; p < PB; ++p) {
        const V xv = load_partial(src + static_cast<std::size_t>(p) * step + c, n);
#pragma GCC unroll 4
        for (int m = 0; m < M; ++m) acc[p][m] = vfma(xv, wv[m], acc[p][m]);
      }
    }
  }
#pragma GCC unroll 8
  for (int p = 0; p < PB; ++p)
#pragma GCC unroll 4
    for (int m = 0; m < M; ++m)
      y[p * M + m] = xsimd::hadd(acc[p][m]) + (bias != nullptr ? bias[m] : 0.f);
}

template <int M>
void few_outputs_pixels_m(const float* const* taps, std::size_t ntaps, std::size_t step, std::size_t np,
                          std::size_t C, const float* w, const float* bias, float* y) {
  const float* moved[kFewOutputsMaxTaps];
  for (std::size_t t = 0; t < ntaps; ++t) moved[t] = taps[t];
  constexpr int kPb = M <= 2 ? 4 : 2;  // PB x M accumulators within the registers of every level
  std::size_t p = 0;
  auto advance = [&](std::size_t k) {
    for (std::size_t t = 0; t < ntaps; ++t) moved[t] += k * step;
    p += k;
  };
  while (p + kPb <= np) {
    few_outputs_block<kPb, M>(moved, ntaps, step, C, w, bias, y + p * M);
    advance(kPb);
  }
  while (p < np) {
    few_outputs_block<1, M>(moved, ntaps, step, C, w, bias, y + p * M);
    advance(1);
  }
}

// Few output channels, channels-last: y[p * M + m] = the sum over taps t of the dot product of
// the C floats at taps[t] + p * step with w[m][t][0, C), plus bias[m], for p < np.
void few_outputs_pixels(const float* const* taps, std::size_t ntaps, std::size_t step, std::size_t np, std::size_t C,
                        const float* w, std::size_t M, const float* bias, float* y) {
  switch (M) {
    case 1: few_outputs_pixels_m<1>(taps, ntaps, step, np, C, w, bias, y); break;
    case 2: few_outputs_pixels_m<2>(taps, ntaps, step, np, C, w, bias, y); break;
    case 3: few_outputs_pixels_m<3>(taps, ntaps, step, np, C, w, bias, y); break;
    case 4: few_outputs_pixels_m<4>(taps, ntaps, step, np, C, w, bias, y); break;
    default: break;
  }
}

}  // namespace

void install_depthwise(KernelTable& t) {
  t.depthwise_plane = &depthwise_plane;
  t.few_outputs_pixels = &few_outputs_pixels;
}

}  // namespace onnxforge::simd::detail::ONNXFORGE_ISA_NS
