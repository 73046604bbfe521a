// Elementwise span kernels for one ISA level: unary functions, float binary ops (vector-vector,
// vector-scalar, scalar-vector) and float comparisons into bytes.
#include "simd/kernels/isa_config.h"
#include "simd/kernels/vmath.h"

namespace onnxforge::simd::detail::ONNXFORGE_ISA_NS {
namespace {

template <BinaryOp op>
V bin(V a, V b) {
  if constexpr (op == BinaryOp::Add) return a + b;
  if constexpr (op == BinaryOp::Sub) return a - b;
  if constexpr (op == BinaryOp::Mul) return a * b;
  if constexpr (op == BinaryOp::Div) return a / b;
  if constexpr (op == BinaryOp::Max) return vmax_nan(a, b);
  if constexpr (op == BinaryOp::Min) return vmin_nan(a, b);
}

// Loads of a, b are functions of the offset so one loop serves vv, vs and sv.
template <BinaryOp op, class LA, class LB>
void binary_loop(LA la, LB lb, float* y, std::size_t n) {
  std::size_t i = 0;
  for (; i + kW <= n; i += kW) bin<op>(la(i, kW), lb(i, kW)).store_unaligned(y + i);
  if (i < n) store_partial(bin<op>(la(i, n - i), lb(i, n - i)), y + i, n - i);
}

auto span_loader(const float* p) {
  return [p](std::size_t i, std::size_t n) { return n == kW ? V::load_unaligned(p + i) : load_partial(p + i, n); };
}
auto scalar_loader(float s) {
  return [v = V(s)](std::size_t, std::size_t) { return v; };
}

// General Pow goes through libm's powf (correctly rounded in practice, every IEEE special
// case right): float-only exp(b log a) loses about |b log a| ulps, and xsimd's pow misses special
// cases. Models mostly use constant exponents, which pow_shortcut() vectorizes.
template <BinaryOp op>
void vv_op(const float* a, const float* b, float* y, std::size_t n) {
  if constexpr (op == BinaryOp::Pow) {
    for (std::size_t i = 0; i < n; ++i) y[i] = std::pow(a[i], b[i]);
  } else {
    binary_loop<op>(span_loader(a), span_loader(b), y, n);
  }
}
template <BinaryOp op>
void vs_op(const float* a, float b, float* y, std::size_t n) {
  if constexpr (op == BinaryOp::Pow) {
    for (std::size_t i = 0; i < n; ++i) y[i] = std::pow(a[i], b);
  } else {
    binary_loop<op>(span_loader(a), scalar_loader(b), y, n);
  }
}
template <BinaryOp op>
void sv_op(float a, const float* b, float* y, std::size_t n) {
  if constexpr (op == BinaryOp::Pow) {
    for (std::size_t i = 0; i < n; ++i) y[i] = std::pow(a, b[i]);
  } else {
    binary_loop<op>(scalar_loader(a), span_loader(b), y, n);
  }
}

// x ** e for the exponents models use as constants: exact shortcuts (and much cheaper).
bool pow_shortcut(const float* a, float e, float* y, std::size_t n) {
  if (e == 1.f) {
    map_span(a, y, n, [](V v) { return v; });
  } else if (e == 2.f) {
    map_span(a, y, n, [](V v) { return v * v; });
  } else if (e == 3.f) {
    map_span(a, y, n, [](V v) { return v * v * v; });
  } else if (e == 0.5f) {
    // pow(-0, 0.5) is +0 and pow(-inf, 0.5) is +inf, where sqrt gives -0 and NaN.
    map_span(a, y, n, [](V v) {
      return xsimd::select(v == V(-INFINITY), V(INFINITY), xsimd::sqrt(v) + V(0.f));
    });
  } else if (e == -1.f) {
    map_span(a, y, n, [](V v) { return V(1.f) / v; });
  } else if (e == -0.5f) {
    // 1 / sqrt with the same special cases as 0.5 (pow(-0, -0.5) = +inf).
    map_span(a, y, n, [](V v) {
      return V(1.f) / xsimd::select(v == V(-INFINITY), V(INFINITY), xsimd::sqrt(v) + V(0.f));
    });
  } else if (e == 0.f) {
    map_span(a, y, n, [](V) { return V(1.f); });
  } else {
    return false;
  }
  return true;
}

#define ONNXFORGE_BINARY_SWITCH(op, fn, ...)   \
  switch (op) {                                \
    case BinaryOp::Add:                        \
      return fn<BinaryOp::Add>(__VA_ARGS__);   \
    case BinaryOp::Sub:                        \
      return fn<BinaryOp::Sub>(__VA_ARGS__);   \
    case BinaryOp::Mul:                        \
      return fn<BinaryOp::Mul>(__VA_ARGS__);   \
    case BinaryOp::Div:                        \
      return fn<BinaryOp::Div>(__VA_ARGS__);   \
    case BinaryOp::Max:                        \
      return fn<BinaryOp::Max>(__VA_ARGS__);   \
    case BinaryOp::Min:                        \
      return fn<BinaryOp::Min>(__VA_ARGS__);   \
    case BinaryOp::Pow:                        \
      return fn<BinaryOp::Pow>(__VA_ARGS__);   \
  }

void binary_vv(BinaryOp op, const float* a, const float* b, float* y, std::size_t n) {
  ONNXFORGE_BINARY_SWITCH(op, vv_op, a, b, y, n)
}
void binary_vs(BinaryOp op, const float* a, float b, float* y, std::size_t n) {
  if (op == BinaryOp::Pow && pow_shortcut(a, b, y, n)) return;
  ONNXFORGE_BINARY_SWITCH(op, vs_op, a, b, y, n)
}
void binary_sv(BinaryOp op, float a, const float* b, float* y, std::size_t n) {
  ONNXFORGE_BINARY_SWITCH(op, sv_op, a, b, y, n)
}
#undef ONNXFORGE_BINARY_SWITCH

// Comparisons: plain loops, which the compiler vectorizes for this unit's ISA.
template <CompareOp op>
std::uint8_t cmp(float a, float b) {
  if constexpr (op == CompareOp::Equal) return a == b;
  if constexpr (op == CompareOp::NotEqual) return a != b;
  if constexpr (op == CompareOp::Less) return a < b;
  if constexpr (op == CompareOp::LessOrEqual) return a <= b;
  if constexpr (op == CompareOp::Greater) return a > b;
  if constexpr (op == CompareOp::GreaterOrEqual) return a >= b;
}

template <CompareOp op>
void cmp_vv(const float* a, const float* b, std::uint8_t* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = cmp<op>(a[i], b[i]);
}
template <CompareOp op>
void cmp_vs(const float* a, float b, std::uint8_t* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = cmp<op>(a[i], b);
}
template <CompareOp op>
void cmp_sv(float a, const float* b, std::uint8_t* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = cmp<op>(a, b[i]);
}

#define ONNXFORGE_COMPARE_SWITCH(op, fn, ...)          \
  switch (op) {                                        \
    case CompareOp::Equal:                             \
      return fn<CompareOp::Equal>(__VA_ARGS__);        \
    case CompareOp::NotEqual:                          \
      return fn<CompareOp::NotEqual>(__VA_ARGS__);     \
    case CompareOp::Less:                              \
      return fn<CompareOp::Less>(__VA_ARGS__);         \
    case CompareOp::LessOrEqual:                       \
      return fn<CompareOp::LessOrEqual>(__VA_ARGS__);  \
    case CompareOp::Greater:                           \
      return fn<CompareOp::Greater>(__VA_ARGS__);      \
    case CompareOp::GreaterOrEqual:                    \
      return fn<CompareOp::GreaterOrEqual>(__VA_ARGS__); \
  }

void compare_vv(CompareOp op, const float* a, const float* b, std::uint8_t* y, std::size_t n) {
  ONNXFORGE_COMPARE_SWITCH(op, cmp_vv, a, b, y, n)
}
void compare_vs(CompareOp op, const float* a, float b, std::uint8_t* y, std::size_t n) {
  ONNXFORGE_COMPARE_SWITCH(op, cmp_vs, a, b, y, n)
}
void compare_sv(CompareOp op, float a, const float* b, std::uint8_t* y, std::size_t n) {
  ONNXFORGE_COMPARE_SWITCH(op, cmp_sv, a, b, y, n)
}
#undef ONNXFORGE_COMPARE_SWITCH

// bfloat16 <-> float32. Widening is a shift; narrowing adds 0x7fff plus the kept part's lowest
// bit (round to nearest even) and keeps NaNs NaN by setting the quiet bit instead (rounding
// could carry a NaN's payload into infinity). Copies of ir/float16.h's bf16_to_float /
// float_to_bf16 for the tails (that header's inline functions must not be compiled at this
// level: isa_config.h). Vectorized, a Cast float -> bfloat16 -> float over 4 Mi elements costs
// what float16's does (12.1 vs 12.8 ms, 1 thread; 19.5 ms element by element through double).
inline float b2f(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline std::uint16_t f2b(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

void bf16_to_float_span(const std::uint16_t* x, float* y, std::size_t n) {
  std::size_t i = 0;
#if defined(ONNXFORGE_SIMD_ISA_AVX512)
  for (; i + 16 <= n; i += 16) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)));
    _mm512_storeu_si512(y + i, _mm512_slli_epi32(w, 16));
  }
#elif defined(ONNXFORGE_SIMD_ISA_AVX2)
  for (; i + 8 <= n; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), _mm256_slli_epi32(w, 16));
  }
#endif
  for (; i < n; ++i) y[i] = b2f(x[i]);
}

void float_to_bf16_span(const float* x, std::uint16_t* y, std::size_t n) {
  std::size_t i = 0;
#if defined(ONNXFORGE_SIMD_ISA_AVX512)
  const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff), inf = _mm512_set1_epi32(0x7f800000),
                abs = _mm512_set1_epi32(0x7fffffff), quiet = _mm512_set1_epi32(0x40);
  for (; i + 16 <= n; i += 16) {
    const __m512i u = _mm512_loadu_si512(x + i);
    const __m512i hi = _mm512_srli_epi32(u, 16);
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, bias), _mm512_and_si512(hi, one)), 16);
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, abs), inf);
    const __m512i r = _mm512_mask_or_epi32(rounded, nan, hi, quiet);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), _mm512_cvtepi32_epi16(r));
  }
#elif defined(ONNXFORGE_SIMD_ISA_AVX2)
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff), inf = _mm256_set1_epi32(0x7f800000),
                abs = _mm256_set1_epi32(0x7fffffff), quiet = _mm256_set1_epi32(0x40);
  for (; i + 8 <= n; i += 8) {
    const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    const __m256i hi = _mm256_srli_epi32(u, 16);
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, bias), _mm256_and_si256(hi, one)), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs), inf);
    const __m256i r = _mm256_blendv_epi8(rounded, _mm256_or_si256(hi, quiet), nan);
    // Every lane is < 2^16, so the unsigned-saturating pack is exact; it interleaves the two
    // 128-bit halves, which the permute puts back in order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_castsi256_si128(packed));
  }
#endif
  for (; i < n; ++i) y[i] = f2b(x[i]);
}

}  // namespace

void install_eltwise(KernelTable& t) {
  t.unary = &apply_unary_span;
  t.binary_vv = &binary_vv;
  t.binary_vs = &binary_vs;
  t.binary_sv = &binary_sv;
  t.compare_vv = &compare_vv;
  t.compare_vs = &compare_vs;
  t.compare_sv = &compare_sv;
  t.bf16_to_float = &bf16_to_float_span;
  t.float_to_bf16 = &float_to_bf16_span;
}

}  // namespace onnxforge::simd::detail::ONNXFORGE_ISA_NS
