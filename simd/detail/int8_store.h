#pragma once
// The int32 -> output conversions of the 8-bit kernels' stores (simd/int8_gemm.cpp's conv8,
// simd/conv8_depthwise.cpp), per lane the steps and operand order of int8_gemm.cpp's SSE
// store_row, so the bytes do not depend on the kernel:
//   requantization: float(v + b) * mu, rounded half to even, + z, max(., lo), min(., hi) (NaN to
//     lo, as QuantizeLinear), converted back to int32 (in [lo, hi]: exact);
//   dequantization: float(v) * mu (+ bias), then max(lo, .) and min(hi, .) (simd::unary's Relu /
//     Clip operand order, so NaN and -0 come out as the standalone ops give them).
// The AVX2 and AVX-512 forms carry target attributes and run only after the caller's CPU check;
// the four-lane one is SSE4.1, the baseline.
#include <immintrin.h>

#include <cstdint>

namespace onnxforge::simd::detail {

// Four int32 sums (any bias already added) requantized, packed with saturation (exact: already in
// range) into the low 4 bytes, int8 when is_signed else uint8.
inline std::int32_t requant4_bytes(__m128i v, __m128 mu, __m128 z, __m128 lo, __m128 hi, bool is_signed) {
  __m128 f = _mm_round_ps(_mm_mul_ps(_mm_cvtepi32_ps(v), mu), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  f = _mm_min_ps(_mm_max_ps(_mm_add_ps(f, z), lo), hi);
  __m128i q = _mm_cvtps_epi32(f);
  q = _mm_packs_epi32(q, q);
  q = is_signed ? _mm_packs_epi16(q, q) : _mm_packus_epi16(q, q);
  return _mm_cvtsi128_si32(q);
}

// The masked forms with every lane set: the unmasked ones pass an undefined source that GCC 12
// reports as maybe-uninitialized outside an AVX-512 translation unit.
__attribute__((target("avx512f"))) inline __m512i requant16(__m512i v, __m512i b, __m512 mu, __m512 z, __m512 lo,
                                                            __m512 hi) {
  constexpr __mmask16 all = 0xFFFF;
  __m512 f = _mm512_mask_cvtepi32_ps(_mm512_setzero_ps(), all, _mm512_add_epi32(v, b));
  f = _mm512_mask_mul_ps(f, all, f, mu);
  f = _mm512_mask_roundscale_ps(f, all, f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  f = _mm512_mask_add_ps(f, all, f, z);
  f = _mm512_mask_max_ps(f, all, f, lo);
  f = _mm512_mask_min_ps(f, all, f, hi);
  return _mm512_mask_cvtps_epi32(_mm512_setzero_si512(), all, f);
}

__attribute__((target("avx512f"))) inline __m512 dequant16(__m512i v, __m512 mu, bool has_bias, __m512 bias,
                                                           bool has_lo, __m512 lo, bool has_hi, __m512 hi) {
  constexpr __mmask16 all = 0xFFFF;
  __m512 f = _mm512_mask_cvtepi32_ps(_mm512_setzero_ps(), all, v);
  f = _mm512_mask_mul_ps(f, all, f, mu);
  if (has_bias) f = _mm512_mask_add_ps(f, all, f, bias);
  if (has_lo) f = _mm512_mask_max_ps(f, all, lo, f);
  if (has_hi) f = _mm512_mask_min_ps(f, all, hi, f);
  return f;
}

__attribute__((target("avx2"))) inline __m256i requant8(__m256i v, __m256i b, __m256 mu, __m256 z, __m256 lo,
                                                        __m256 hi) {
  __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(v, b)), mu);
  f = _mm256_round_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  f = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(f, z), lo), hi);
  return _mm256_cvtps_epi32(f);
}

__attribute__((target("avx2"))) inline __m256 dequant8(__m256i v, __m256 mu, bool has_bias, __m256 bias, bool has_lo,
                                                       __m256 lo, bool has_hi, __m256 hi) {
  __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(v), mu);
  if (has_bias) f = _mm256_add_ps(f, bias);
  if (has_lo) f = _mm256_max_ps(lo, f);
  if (has_hi) f = _mm256_min_ps(hi, f);
  return f;
}

}  // namespace onnxforge::simd::detail
