// Resampling kernels for one ISA level: the two halves of a separable Resize (a weighted sum of
// whole rows, and a per-element gather along a row) and float16 <-> float32 conversion spans.
#include "simd/kernels/isa_config.h"

namespace onnxforge::simd::detail::ONNXFORGE_ISA_NS {
namespace {

// y[i] = sum_k w[k] * rows[k][i] (taps >= 1), accumulated in tap order.
void blend_rows(const float* const* rows, const float* w, std::size_t taps, float* y, std::size_t n) {
  std::size_t i = 0;
  auto at = [&](std::size_t j, auto load) {
    V acc = V(w[0]) * load(rows[0] + j);
    for (std::size_t k = 1; k < taps; ++k) acc = vfma(V(w[k]), load(rows[k] + j), acc);
    return acc;
  };
  auto full = [](const float* p) { return V::load_unaligned(p); };
  if (taps == 2) {  // linear: the common case, two streams
    const V w0(w[0]), w1(w[1]);
    const float *r0 = rows[0], *r1 = rows[1];
    for (; i + kW <= n; i += kW)
      vfma(w1, V::load_unaligned(r1 + i), w0 * V::load_unaligned(r0 + i)).store_unaligned(y + i);
  }
  for (; i + kW <= n; i += kW) at(i, full).store_unaligned(y + i);
  if (i < n) {
    const std::size_t m = n - i;
    store_partial(at(i, [m](const float* p) { return load_partial(p, m); }), y + i, m);
  }
}

// y[i] = sum_k w[k * stride + i] * x[index[k * stride + i]] for i < n: one output row of a
// resize along its innermost axis (tap-major tables, `stride` entries per tap).
void gather_row(const float* x, const std::int32_t* index, const float* w, std::size_t taps, std::size_t stride,
                float* y, std::size_t n) {
  std::size_t i = 0;
#if defined(ONNXFORGE_SIMD_ISA_AVX512) || defined(ONNXFORGE_SIMD_ISA_AVX2)
  for (; i + kW <= n; i += kW) {
    V acc(0.f);
    for (std::size_t k = 0; k < taps; ++k) {
#if defined(ONNXFORGE_SIMD_ISA_AVX512)
      const __m512i idx = _mm512_loadu_si512(index + k * stride + i);
      const V v = _mm512_i32gather_ps(idx, x, 4);
#else
      const __m256i idx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(index + k * stride + i));
      const V v = _mm256_i32gather_ps(x, idx, 4);
#endif
      acc = k == 0 ? V::load_unaligned(w + i) * v : vfma(V::load_unaligned(w + k * stride + i), v, acc);
    }
    acc.store_unaligned(y + i);
  }
#endif
  for (; i < n; ++i) {
    float acc = w[i] * x[index[i]];
    for (std::size_t k = 1; k < taps; ++k) {
#if defined(ONNXFORGE_SIMD_ISA_SSE)
      acc += w[k * stride + i] * x[index[k * stride + i]];
#else
      acc = std::fma(w[k * stride + i], x[index[k * stride + i]], acc);
#endif
    }
    y[i] = acc;
  }
}

// IEEE binary16 <-> binary32, round to nearest even (as ONNX Cast). F16C where the level has
// it; h2f/f2h are copies of ir/float16.h's half_to_float/float_to_half (the bit-exact
// definitions, tests/runtime/float16_test.cpp holds them equal): including that header here
// would emit its inline functions with this level's instructions, a copy the linker may hand
// to baseline code (isa_config.h).
inline float h2f(std::uint16_t h) {
  std::uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ffu, u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while (!(man & 0x400u));
      u = sign | static_cast<std::uint32_t>(127 - 15 - e) << 23 | (man & 0x3ffu) << 13;
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | man << 13;
  } else {
    u = sign | (exp + 112) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline std::uint16_t f2h(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  std::uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0));
  if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (a < 0x38800000u) {
    float af;
    std::memcpy(&af, &a, 4);
    af += 0.5f;
    std::uint32_t ru;
    std::memcpy(&ru, &af, 4);
    return static_cast<std::uint16_t>(sign | (ru - 0x3f000000u));
  }
  const std::uint32_t mant_odd = (a >> 13) & 1u;
  a += 0xc8000fffu + mant_odd;
  return static_cast<std::uint16_t>(sign | (a >> 13));
}

void half_to_float_span(const std::uint16_t* x, float* y, std::size_t n) {
  std::size_t i = 0;
#if defined(ONNXFORGE_SIMD_ISA_AVX512)
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i))));
#elif defined(ONNXFORGE_SIMD_ISA_AVX2)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
#endif
  for (; i < n; ++i) y[i] = h2f(x[i]);
}

void float_to_half_span(const float* x, std::uint16_t* y, std::size_t n) {
  std::size_t i = 0;
  // F16C rounds to nearest even like f2h; NaNs differ only in payload (F16C keeps the top
  // payload bits, f2h writes the canonical quiet NaN), so NaNs go through f2h for identical bits.
#if defined(ONNXFORGE_SIMD_ISA_AVX512)
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    if (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q)) {
      for (std::size_t j = i; j < i + 16; ++j) y[j] = f2h(x[j]);
      continue;
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
#elif defined(ONNXFORGE_SIMD_ISA_AVX2)
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) {
      for (std::size_t j = i; j < i + 8; ++j) y[j] = f2h(x[j]);
      continue;
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
#endif
  for (; i < n; ++i) y[i] = f2h(x[i]);
}

// y[i] = float(half(x[i])): the value a Cast to float16 and back leaves.
void round_to_half_span(const float* x, float* y, std::size_t n) {
  std::size_t i = 0;
#if defined(ONNXFORGE_SIMD_ISA_AVX512)
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    if (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q)) {
      for (std::size_t j = i; j < i + 16; ++j) y[j] = h2f(f2h(x[j]));
      continue;
    }
    _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)));
  }
#elif defined(ONNXFORGE_SIMD_ISA_AVX2)
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) {
      for (std::size_t j = i; j < i + 8; ++j) y[j] = h2f(f2h(x[j]));
      continue;
    }
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)));
  }
#endif
  for (; i < n; ++i) y[i] = h2f(f2h(x[i]));
}

}  // namespace

void install_resample(KernelTable& t) {
  t.blend_rows = &blend_rows;
  t.gather_row = &gather_row;
  t.half_to_float = &half_to_float_span;
  t.float_to_half = &float_to_half_span;
  t.round_to_half = &round_to_half_span;
}

}  // namespace onnxforge::simd::detail::ONNXFORGE_ISA_NS
