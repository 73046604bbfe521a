// Direct few-input-channel convolution row kernel (see simd/detail/conv_fewc.h).
// AVX-512 only; the other ISA units compile to nothing.
#include <algorithm>
#include <utility>

#include "simd/kernels/isa_config.h"

#if defined(ONNXFORGE_SIMD_ISA_AVX512)
#include "simd/detail/conv_fewc.h"

namespace onnxforge::simd::detail::avx512 {
namespace {

// Pixels per tile: NV * NP accumulators, NV weight vectors and a broadcast within 32 zmm.
template <int NV>
constexpr int np_for() {
  return NV == 4 ? 6 : 8;
}

// NV channel vectors x NP consecutive output pixels, horizontal stride S, summed over every
// (channel, kh, kw). r: padded input of channel 0, kernel row 0, at the first pixel's column;
// w: packed weights of the first vector at tap 0. buf: [pixel][NV*16].
template <int S, int NV, int NP>
void tile(const ConvFewcArgs& a, const float* r, const float* w, float* buf) {
  const std::int64_t plane = a.HP * a.WP, wstride = a.C * a.KH * a.KW * 16;
  __m512 acc[NV][NP];
#pragma GCC unroll 64
  for (int v = 0; v < NV; ++v)
#pragma GCC unroll 64
    for (int p = 0; p < NP; ++p) acc[v][p] = _mm512_setzero_ps();
  for (std::int64_t c = 0; c < a.C; ++c)
    for (std::int64_t kh = 0; kh < a.KH; ++kh) {
      const float* rr = r + c * plane + kh * a.WP;
      for (std::int64_t kw = 0; kw < a.KW; ++kw, ++rr, w += 16) {
        // Keeps GCC from carrying broadcasts over to the taps that read them again (kw + S):
        // its register rotation then spills accumulators.
        __asm__ volatile("" ::: "memory");
        __m512 wv[NV];
#pragma GCC unroll 64
        for (int v = 0; v < NV; ++v) wv[v] = _mm512_loadu_ps(w + v * wstride);
#pragma GCC unroll 64
        for (int p = 0; p < NP; ++p) {
          const __m512 b = _mm512_set1_ps(rr[S * p]);
#pragma GCC unroll 64
          for (int v = 0; v < NV; ++v) acc[v][p] = _mm512_fmadd_ps(wv[v], b, acc[v][p]);
        }
      }
    }
#pragma GCC unroll 64
  for (int p = 0; p < NP; ++p)
#pragma GCC unroll 64
    for (int v = 0; v < NV; ++v) _mm512_store_ps(buf + (p * NV + v) * 16, acc[v][p]);
}

// In place: r[j] lane i <- r[i] lane j.
__attribute__((always_inline)) inline void transpose16(__m512 (&r)[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0x88);
    t[4 + i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0xdd);
    t[8 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0x88);
    t[12 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0xdd);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
    r[4 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0x88);
    r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xdd);
    r[12 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0xdd);
  }
}

// buf [np][NV*16] (pixel-major) -> channels-last y from column ow0: each pixel's channel
// vectors stored straight (the last one masked to M), with the same arithmetic per element as
// the NCHW store.
template <int NV>
void store_nhwc(const ConvFewcArgs& a, std::int64_t oh, std::int64_t ow0, int np, std::int64_t mb0,
                const float* buf) {
  __m512 bias[NV];
  __mmask16 mask[NV];
#pragma GCC unroll 16
  for (int v = 0; v < NV; ++v) {
    const std::int64_t left = a.M - (mb0 + v) * 16;
    mask[v] = left >= 16 ? static_cast<__mmask16>(0xffff)
                         : static_cast<__mmask16>(left > 0 ? (1u << left) - 1u : 0u);
    bias[v] = a.bias != nullptr ? _mm512_maskz_loadu_ps(mask[v], a.bias + (mb0 + v) * 16) : _mm512_setzero_ps();
  }
  float* row = a.y + (oh * a.OW + ow0) * a.M + mb0 * 16;
  for (int p = 0; p < np; ++p) {
    float* out = row + p * a.M;
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) {
      if (mask[v] == 0) break;
      __m512 s = _mm512_load_ps(buf + (p * NV + v) * 16);
      if (a.bias != nullptr) s = _mm512_add_ps(s, bias[v]);
      if (a.accumulate) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(mask[v], out + v * 16));
      if (a.relu) s = _mm512_max_ps(s, _mm512_setzero_ps());
      _mm512_mask_storeu_ps(out + v * 16, mask[v], s);
    }
  }
}

// buf [np][NV*16] (pixel-major) -> y rows from column ow0, with bias, residual, relu.
template <int NV>
void store(const ConvFewcArgs& a, std::int64_t oh, std::int64_t ow0, int np, std::int64_t mb0, const float* buf) {
  if (a.y_nhwc) {
    store_nhwc<NV>(a, oh, ow0, np, mb0, buf);
    return;
  }
  const __mmask16 mask = static_cast<__mmask16>((1u << np) - 1u);
  const std::int64_t plane = a.OH * a.OW;
  for (int v = 0; v < NV; ++v) {
    __m512 r[16];
#pragma GCC unroll 16
    for (int p = 0; p < 16; ++p) r[p] = p < np ? _mm512_load_ps(buf + (p * NV + v) * 16) : _mm512_setzero_ps();
    transpose16(r);
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {
      const std::int64_t m = (mb0 + v) * 16 + j;
      if (m >= a.M) return;
      __m512 s = r[j];
      if (a.bias != nullptr) s = _mm512_add_ps(s, _mm512_set1_ps(a.bias[m]));
      float* out = a.y + m * plane + oh * a.OW + ow0;
      if (a.accumulate) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(mask, out));
      if (a.relu) s = _mm512_max_ps(s, _mm512_setzero_ps());
      _mm512_mask_storeu_ps(out, mask, s);
    }
  }
}

using TileFn = void (*)(const ConvFewcArgs&, const float*, const float*, float*);

// The tile for the last np (< NP) pixels of a 16-pixel group.
template <int S, int NV, std::size_t... I>
TileFn short_tile(int np, std::index_sequence<I...>) {
  static constexpr TileFn fns[] = {&tile<S, NV, static_cast<int>(I) + 1>...};
  return fns[np - 1];
}

// The output row in groups of 16 pixels (one transpose each), each computed as tiles of NP.
template <int S, int NV>
void row(const ConvFewcArgs& a, std::int64_t oh, std::int64_t mb0) {
  constexpr int NP = np_for<NV>();
  alignas(64) float buf[16 * NV * 16];
  const float* xr = a.x + oh * a.stride_h * a.WP;
  const float* w = a.w + mb0 * a.C * a.KH * a.KW * 16;
  for (std::int64_t ow0 = 0; ow0 < a.OW; ow0 += 16) {
    const int n = static_cast<int>(std::min<std::int64_t>(16, a.OW - ow0));
    int p = 0;
    for (; p + NP <= n; p += NP) tile<S, NV, NP>(a, xr + S * (ow0 + p), w, buf + p * NV * 16);
    if (p < n)
      short_tile<S, NV>(n - p, std::make_index_sequence<NP - 1>{})(a, xr + S * (ow0 + p), w, buf + p * NV * 16);
    store<NV>(a, oh, ow0, n, mb0, buf);
  }
}

using RowFn = void (*)(const ConvFewcArgs&, std::int64_t, std::int64_t);

static_assert(kFewcVectors == 4);
template <int S>
constexpr RowFn rows_for[kFewcVectors] = {&row<S, 1>, &row<S, 2>, &row<S, 3>, &row<S, 4>};

}  // namespace

void conv_fewc_row(const ConvFewcArgs& a, std::int64_t oh, std::int64_t mb0, int nv) {
  static constexpr const RowFn* by_stride[4] = {rows_for<1>, rows_for<2>, rows_for<3>, rows_for<4>};
  by_stride[a.stride_w - 1][nv - 1](a, oh, mb0);
}

}  // namespace onnxforge::simd::detail::avx512
#endif
