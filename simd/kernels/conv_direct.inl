// Direct 3x3 / stride 1 or 2 / pad 1 convolution row kernel (see simd/detail/conv_direct.h).
// AVX-512 only; the other ISA units compile to nothing.
#include <algorithm>
#include <array>
#include <utility>

#include "simd/kernels/isa_config.h"

#if defined(ONNXFORGE_SIMD_ISA_AVX512)
#include "simd/detail/conv_direct.h"

namespace onnxforge::simd::detail::avx512 {
namespace {

constexpr int kMaxNp = 16;

// NV channel vectors x NP pixels: output columns ow0 .. ow0 + NP - 1 of one row, stride S.
// r: input row of tap kh0 at column S * ow0 (channel 0); w: weights of (channel 0, tap
// (kh0, 0)) of the first vector. LEFT: pixel 0 reads the left padding at kw = 0 (skipped);
// RIGHT: the last pixel reads the right padding at kw = 2 (skipped). buf: [NP][NV*16].
template <int S, int NV, int NP, bool LEFT, bool RIGHT, int KW>
__attribute__((always_inline)) inline void taps(__m512 (&acc)[NV][NP], const float* rr, const float* wk,
                                                std::int64_t wstride) {
  // Keeps GCC from hoisting the broadcasts of all taps (shared across kw) at once: with them
  // live it runs out of registers and spills accumulators.
  __asm__ volatile("" ::: "memory");
  __m512 wv[NV];
#pragma GCC unroll 64
  for (int v = 0; v < NV; ++v) wv[v] = _mm512_loadu_ps(wk + KW * 16 + v * wstride);
#pragma GCC unroll 64
  for (int p = 0; p < NP; ++p) {
    if ((LEFT && KW == 0 && p == 0) || (RIGHT && KW == 2 && p == NP - 1)) continue;
    const __m512 b = _mm512_set1_ps(rr[S * p + KW - 1]);
#pragma GCC unroll 64
    for (int v = 0; v < NV; ++v) acc[v][p] = _mm512_fmadd_ps(wv[v], b, acc[v][p]);
  }
}

template <int S, int NV, int NP, bool LEFT, bool RIGHT>
void tile(const float* r, std::int64_t plane, std::int64_t W, int nkh, const float* w, std::int64_t wstride,
          std::int64_t C, float* buf) {
  __m512 acc[NV][NP];
#pragma GCC unroll 64
  for (int v = 0; v < NV; ++v)
#pragma GCC unroll 64
    for (int p = 0; p < NP; ++p) acc[v][p] = _mm512_setzero_ps();
  for (std::int64_t c = 0; c < C; ++c) {
    const float* rc = r + c * plane;
    const float* wc = w + c * 144;
    for (int kh = 0; kh < nkh; ++kh) {
      const float* rr = rc + kh * W;
      const float* wk = wc + kh * 48;
      taps<S, NV, NP, LEFT, RIGHT, 0>(acc, rr, wk, wstride);
      taps<S, NV, NP, LEFT, RIGHT, 1>(acc, rr, wk, wstride);
      taps<S, NV, NP, LEFT, RIGHT, 2>(acc, rr, wk, wstride);
    }
  }
#pragma GCC unroll 64
  for (int p = 0; p < NP; ++p)
#pragma GCC unroll 64
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(buf + (p * NV + v) * 16, acc[v][p]);
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

// buf [np][nv*16] (pixel-major) -> y rows, with bias, residual, relu: per 16-channel
// vector, a 16 x 16 transpose turns the pixels' channel vectors into channel rows.
void store(const ConvDirectArgs& a, std::int64_t oh, std::int64_t ow0, int np, std::int64_t mb0, int nv,
           const float* buf) {
  const __mmask16 mask = static_cast<__mmask16>((1u << np) - 1u);
  const std::int64_t plane = a.OH * a.OW;
  for (int v = 0; v < nv; ++v) {
    __m512 r[16];
#pragma GCC unroll 16
    for (int p = 0; p < 16; ++p) r[p] = p < np ? _mm512_load_ps(buf + (p * nv + v) * 16) : _mm512_setzero_ps();
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

// Pixels per tile: NV * NP accumulators, NV weight vectors and a broadcast within 32 zmm.
template <int NV>
constexpr int np_for() {
  return NV == 1 ? 16 : 14;
}

template <int S, int NV, int NP, bool LEFT, bool RIGHT>
void block(const ConvDirectArgs& a, const float* r, int nkh, const float* w, std::int64_t oh, std::int64_t ow0,
           std::int64_t mb0, float* buf) {
  tile<S, NV, NP, LEFT, RIGHT>(r, a.H * a.W, a.W, nkh, w, a.C * 144, a.C, buf);
  store(a, oh, ow0, NP, mb0, NV, buf);
}

using BlockFn = void (*)(const ConvDirectArgs&, const float*, int, const float*, std::int64_t, std::int64_t,
                         std::int64_t, float*);

// The last block of a row, np (< NP) pixels: left edge too when it is the only block; right
// edge when its last pixel's third tap falls on the padding.
template <int S, int NV, std::size_t... I>
BlockFn last_block(int np, bool left, bool right, std::index_sequence<I...>) {
  static constexpr BlockFn fns[2][2][sizeof...(I)] = {{{&block<S, NV, static_cast<int>(I) + 1, false, false>...},
                                                       {&block<S, NV, static_cast<int>(I) + 1, false, true>...}},
                                                      {{&block<S, NV, static_cast<int>(I) + 1, true, false>...},
                                                       {&block<S, NV, static_cast<int>(I) + 1, true, true>...}}};
  return fns[left][right][np - 1];
}

template <int S, int NV>
void row(const ConvDirectArgs& a, std::int64_t oh, std::int64_t mb0) {
  constexpr int NP = np_for<NV>();
  alignas(64) float buf[kMaxNp * 2 * 16];
  const std::int64_t W = a.W, H = a.H, OW = a.OW;
  const int kh0 = oh == 0 ? 1 : 0, kh1 = static_cast<int>(std::min<std::int64_t>(3, H - S * oh + 1));
  const int nkh = kh1 - kh0;
  const float* w = a.w + mb0 * a.C * 144 + kh0 * 48;
  const float* xr = a.x + (S * oh - 1 + kh0) * W;  // column 0 of the first tap row
  const bool right_pad = S * (OW - 1) + 1 >= W;    // the last output column reads the right padding
  std::int64_t ow = 0;
  for (; ow + NP <= OW; ow += NP) {
    const bool left = ow == 0, right = right_pad && ow + NP == OW;
    const float* r = xr + S * ow;
    if (left && right)
      block<S, NV, NP, true, true>(a, r, nkh, w, oh, ow, mb0, buf);
    else if (left)
      block<S, NV, NP, true, false>(a, r, nkh, w, oh, ow, mb0, buf);
    else if (right)
      block<S, NV, NP, false, true>(a, r, nkh, w, oh, ow, mb0, buf);
    else
      block<S, NV, NP, false, false>(a, r, nkh, w, oh, ow, mb0, buf);
  }
  if (ow < OW)
    last_block<S, NV>(static_cast<int>(OW - ow), ow == 0, right_pad, std::make_index_sequence<NP - 1>{})(
        a, xr + S * ow, nkh, w, oh, ow, mb0, buf);
}

// Small maps: a tile = R whole output rows from oh0, PW = OW pixels each, so a weight vector
// feeds R * PW pixels. Pixel (k, j), tap (KH, KW) reads x0[(S * k + KH - 1) * W + S * j + KW - 1]
// (x0: channel c at input row S * oh0); the taps on the padding are skipped at compile time:
// left (j = 0, KW = 0), right (stride 1: j = PW - 1, KW = 2), top (TOP: k = 0, KH = 0) and
// bottom (BOTTOM: k = R - 1, KH = 2). The second vector's weights are wstride floats on.
template <int S, int PW, int R, bool TOP, bool BOTTOM, int KH, int KW>
__attribute__((always_inline)) inline void rows_taps(__m512 (&acc)[2][R * PW], const float* x0, std::int64_t W,
                                                     const float* wc, std::int64_t wstride) {
  __asm__ volatile("" ::: "memory");  // as in taps()
  const __m512 w0 = _mm512_loadu_ps(wc + (KH * 3 + KW) * 16);
  const __m512 w1 = _mm512_loadu_ps(wc + (KH * 3 + KW) * 16 + wstride);
#pragma GCC unroll 64
  for (int k = 0; k < R; ++k) {
    if ((TOP && k == 0 && KH == 0) || (BOTTOM && k == R - 1 && KH == 2)) continue;
#pragma GCC unroll 64
    for (int j = 0; j < PW; ++j) {
      if ((j == 0 && KW == 0) || (S == 1 && j == PW - 1 && KW == 2)) continue;
      const __m512 b = _mm512_set1_ps(x0[(S * k + KH - 1) * W + S * j + KW - 1]);
      acc[0][k * PW + j] = _mm512_fmadd_ps(w0, b, acc[0][k * PW + j]);
      acc[1][k * PW + j] = _mm512_fmadd_ps(w1, b, acc[1][k * PW + j]);
    }
  }
}

template <int S, int PW, int R, bool TOP, bool BOTTOM, int KH>
__attribute__((always_inline)) inline void rows_taps_kh(__m512 (&acc)[2][R * PW], const float* x0, std::int64_t W,
                                                        const float* wc, std::int64_t wstride) {
  rows_taps<S, PW, R, TOP, BOTTOM, KH, 0>(acc, x0, W, wc, wstride);
  rows_taps<S, PW, R, TOP, BOTTOM, KH, 1>(acc, x0, W, wc, wstride);
  rows_taps<S, PW, R, TOP, BOTTOM, KH, 2>(acc, x0, W, wc, wstride);
}

template <int S, int PW, int R, bool TOP, bool BOTTOM>
void rows_block(const ConvDirectArgs& a, std::int64_t oh0, std::int64_t mb0, std::int64_t wstride, int nv,
                float* buf) {
  constexpr int NP = R * PW;
  const std::int64_t W = a.W, plane = a.H * W;
  const float* x = a.x + S * oh0 * W;
  const float* w = a.w + mb0 * a.C * 144;
  __m512 acc[2][NP];
#pragma GCC unroll 64
  for (int p = 0; p < NP; ++p) acc[0][p] = acc[1][p] = _mm512_setzero_ps();
  for (std::int64_t c = 0; c < a.C; ++c) {
    const float* x0 = x + c * plane;
    const float* wc = w + c * 144;
    rows_taps_kh<S, PW, R, TOP, BOTTOM, 0>(acc, x0, W, wc, wstride);
    rows_taps_kh<S, PW, R, TOP, BOTTOM, 1>(acc, x0, W, wc, wstride);
    rows_taps_kh<S, PW, R, TOP, BOTTOM, 2>(acc, x0, W, wc, wstride);
  }
#pragma GCC unroll 64
  for (int p = 0; p < NP; ++p)
#pragma GCC unroll 2
    for (int v = 0; v < nv; ++v) _mm512_storeu_ps(buf + (p * nv + v) * 16, acc[v][p]);
  // The R whole rows are contiguous in y: one block of NP pixels from (oh0, 0).
  store(a, oh0, 0, NP, mb0, nv, buf);
}

using RowsFn = void (*)(const ConvDirectArgs&, std::int64_t, std::int64_t, std::int64_t, int, float*);
using RowsTb = std::array<RowsFn, 4>;  // [TOP * 2 + BOTTOM]

template <int S, int PW, int R>
constexpr RowsTb rows_tb() {
  return {&rows_block<S, PW, R, false, false>, &rows_block<S, PW, R, false, true>, &rows_block<S, PW, R, true, false>,
          &rows_block<S, PW, R, true, true>};
}

// [R - 1] for R <= kSmallMaxRows; entries beyond small_rows(PW) repeat the largest (never
// called) so that they add no instantiations.
template <int S, int PW, std::size_t... R>
constexpr std::array<RowsTb, kSmallMaxRows> rows_by_count(std::index_sequence<R...>) {
  return {rows_tb<S, PW, std::min(static_cast<int>(R) + 1, small_rows(PW))>()...};
}

template <int S, std::size_t... PW>
RowsFn rows_fn(int pw, int rows, bool top, bool bottom, std::index_sequence<PW...>) {
  static constexpr std::array<std::array<RowsTb, kSmallMaxRows>, sizeof...(PW)> fns = {
      rows_by_count<S, static_cast<int>(PW) + 1>(std::make_index_sequence<kSmallMaxRows>{})...};
  return fns[pw - 1][rows - 1][top * 2 + bottom];
}

template <int S>
void rows_dispatch(const ConvDirectArgs& a, std::int64_t oh0, int rows, std::int64_t mb0, int nv) {
  alignas(64) float buf[kMaxNp * 2 * 16];
  // The last row's third tap row is the bottom padding when S * (OH - 1) + 1 >= H.
  const bool top = oh0 == 0, bottom = oh0 + rows == a.OH && S * (a.OH - 1) + 1 >= a.H;
  // nv == 1: the second vector re-reads the first's weights (no vector beyond Mb is packed).
  const std::int64_t wstride = nv == 2 ? a.C * 144 : 0;
  rows_fn<S>(static_cast<int>(a.OW), rows, top, bottom, std::make_index_sequence<kSmallPx - 1>{})(a, oh0, mb0,
                                                                                                 wstride, nv, buf);
}

}  // namespace

void conv3x3_direct_rows(const ConvDirectArgs& a, std::int64_t oh0, int rows, std::int64_t mb0, int nv) {
  if (a.stride == 1)
    rows_dispatch<1>(a, oh0, rows, mb0, nv);
  else
    rows_dispatch<2>(a, oh0, rows, mb0, nv);
}

void conv3x3_direct_row(const ConvDirectArgs& a, std::int64_t oh, std::int64_t mb0, int nv) {
  if (a.stride == 1) {
    if (nv == 1)
      row<1, 1>(a, oh, mb0);
    else
      row<1, 2>(a, oh, mb0);
  } else {
    if (nv == 1)
      row<2, 1>(a, oh, mb0);
    else
      row<2, 2>(a, oh, mb0);
  }
}

}  // namespace onnxforge::simd::detail::avx512
#endif
