#pragma once
// Register-only FMA loops per ISA level: the machine's FP32 peak (bench_fma_peak) and the
// yardstick the GEMM is held against (bench_gemm_vs_peak).
#include <immintrin.h>

#include <cstdint>

namespace onnxforge::perf {

// 12 independent chains in named registers (an array would be kept on the stack): enough to
// cover FMA latency (4 cycles) on two FMA ports. The empty asm keeps the loop from being folded.
inline constexpr std::int64_t kChains = 12;
inline constexpr std::int64_t kIters = 1 << 16;

// The X-macro lists below keep one entry per line.
// clang-format off
#define ONNXFORGE_CHAINS(X, ...) \
  X(0, __VA_ARGS__) X(1, __VA_ARGS__) X(2, __VA_ARGS__) X(3, __VA_ARGS__) X(4, __VA_ARGS__) X(5, __VA_ARGS__) \
  X(6, __VA_ARGS__) X(7, __VA_ARGS__) X(8, __VA_ARGS__) X(9, __VA_ARGS__) X(10, __VA_ARGS__) X(11, __VA_ARGS__)
#define ONNXFORGE_KEEP(R)                                                                          \
  __asm__ volatile("" : "+" R(a0), "+" R(a1), "+" R(a2), "+" R(a3), "+" R(a4), "+" R(a5), "+" R(a6), \
                   "+" R(a7), "+" R(a8), "+" R(a9), "+" R(a10), "+" R(a11))
#define ONNXFORGE_INIT(i, V, SET1) V a##i = SET1(static_cast<float>(i));
#define ONNXFORGE_STEP(i, FMA) a##i = FMA(a##i, m, c);
#define ONNXFORGE_SUM(i, ADD) s = ADD(s, a##i);
// One loop body for every ISA: V is the vector type, SET1/FMA/ADD/ZERO its intrinsics, REG the
// asm constraint of its registers. Leaves the sum of the chains in s.
#define ONNXFORGE_FMA_BODY(V, SET1, FMA, ADD, ZERO, REG) \
  ONNXFORGE_CHAINS(ONNXFORGE_INIT, V, SET1)              \
  const V m = SET1(0.9999f), c = SET1(1e-4f);            \
  for (std::int64_t it = 0; it < iters; ++it) {          \
    ONNXFORGE_CHAINS(ONNXFORGE_STEP, FMA)                \
    ONNXFORGE_KEEP(REG);                                 \
  }                                                      \
  V s = ZERO();                                          \
  ONNXFORGE_CHAINS(ONNXFORGE_SUM, ADD)
// SSE has no FMA: a multiply and an add per element count as the same two flops.
#define ONNXFORGE_SSE_FMA(a, m, c) _mm_add_ps(_mm_mul_ps(a, m), c)
// clang-format on

__attribute__((target("avx512f"))) inline float loop_avx512(std::int64_t iters) {
  ONNXFORGE_FMA_BODY(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, _mm512_setzero_ps, "v")
  alignas(64) float out[16];
  _mm512_store_ps(out, s);
  return out[0] + out[15];
}

__attribute__((target("avx2,fma"))) inline float loop_avx2(std::int64_t iters) {
  ONNXFORGE_FMA_BODY(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, _mm256_setzero_ps, "x")
  alignas(32) float out[8];
  _mm256_store_ps(out, s);
  return out[0] + out[7];
}

inline float loop_sse(std::int64_t iters) {
  ONNXFORGE_FMA_BODY(__m128, _mm_set1_ps, ONNXFORGE_SSE_FMA, _mm_add_ps, _mm_setzero_ps, "x")
  return _mm_cvtss_f32(s);
}

#undef ONNXFORGE_CHAINS
#undef ONNXFORGE_KEEP
#undef ONNXFORGE_INIT
#undef ONNXFORGE_STEP
#undef ONNXFORGE_SUM
#undef ONNXFORGE_FMA_BODY
#undef ONNXFORGE_SSE_FMA

}  // namespace onnxforge::perf
