// Channels-last pooling and layout conversions. STUB: plain loops; vectorized kernels replace them.
#include <algorithm>
#include <cmath>

#include "simd/nhwc.h"

namespace onnxforge::simd {

void max_pool_nhwc(const Pool2d& p, const float* x, float* y) {
  for (std::int64_t n = 0; n < p.N; ++n)
    for (std::int64_t oh = 0; oh < p.OH; ++oh)
      for (std::int64_t ow = 0; ow < p.OW; ++ow)
        for (std::int64_t c = 0; c < p.C; ++c) {
          float acc = -INFINITY;
          for (std::int64_t kh = 0; kh < p.KH; ++kh)
            for (std::int64_t kw = 0; kw < p.KW; ++kw) {
              const std::int64_t ih = oh * p.SH - p.pad_top + kh, iw = ow * p.SW - p.pad_left + kw;
              if (ih < 0 || ih >= p.H || iw < 0 || iw >= p.W) continue;
              const float v = x[((n * p.H + ih) * p.W + iw) * p.C + c];
              if (v > acc || v != v) acc = v;
            }
          y[((n * p.OH + oh) * p.OW + ow) * p.C + c] = acc;
        }
}

void avg_pool_nhwc(const Pool2d& p, const float* x, float* y, bool count_include_pad) {
  for (std::int64_t n = 0; n < p.N; ++n)
    for (std::int64_t oh = 0; oh < p.OH; ++oh)
      for (std::int64_t ow = 0; ow < p.OW; ++ow) {
        const std::int64_t h0 = oh * p.SH - p.pad_top, w0 = ow * p.SW - p.pad_left;
        const std::int64_t a0 = std::max<std::int64_t>(h0, 0), a1 = std::min(h0 + p.KH, p.H);
        const std::int64_t b0 = std::max<std::int64_t>(w0, 0), b1 = std::min(w0 + p.KW, p.W);
        std::int64_t cnt = std::max<std::int64_t>(a1 - a0, 0) * std::max<std::int64_t>(b1 - b0, 0);
        if (count_include_pad)
          cnt = (std::min(h0 + p.KH, p.H + p.pad_bottom) - h0) * (std::min(w0 + p.KW, p.W + p.pad_right) - w0);
        for (std::int64_t c = 0; c < p.C; ++c) {
          double s = 0;
          for (std::int64_t ih = a0; ih < a1; ++ih)
            for (std::int64_t iw = b0; iw < b1; ++iw) s += x[((n * p.H + ih) * p.W + iw) * p.C + c];
          y[((n * p.OH + oh) * p.OW + ow) * p.C + c] = static_cast<float>(s / static_cast<double>(std::max<std::int64_t>(cnt, 1)));
        }
      }
}

void global_avg_pool_nhwc(std::int64_t N, std::int64_t HW, std::int64_t C, const float* x, float* y) {
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c) {
      double s = 0;
      for (std::int64_t i = 0; i < HW; ++i) s += x[(n * HW + i) * C + c];
      y[n * C + c] = HW ? static_cast<float>(s / static_cast<double>(HW)) : NAN;
    }
}

void global_max_pool_nhwc(std::int64_t N, std::int64_t HW, std::int64_t C, const float* x, float* y) {
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c) {
      float acc = -INFINITY;
      for (std::int64_t i = 0; i < HW; ++i) {
        const float v = x[(n * HW + i) * C + c];
        if (v > acc || v != v) acc = v;
      }
      y[n * C + c] = acc;
    }
}

void nchw_to_nhwc(std::int64_t N, std::int64_t C, std::int64_t HW, const float* x, float* y) {
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t i = 0; i < HW; ++i) y[(n * HW + i) * C + c] = x[(n * C + c) * HW + i];
}

void nhwc_to_nchw(std::int64_t N, std::int64_t C, std::int64_t HW, const float* x, float* y) {
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t i = 0; i < HW; ++i) y[(n * C + c) * HW + i] = x[(n * HW + i) * C + c];
}

}  // namespace onnxforge::simd
