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

#define ONNXFORGE_CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define ONNXFORGE_KEEP(R)                                                                          \
  __asm__ volatile("" : "+" R(a0), "+" R(a1), "+" R(a2), "+" R(a3), "+" R(a4), "+" R(a5), "+" R(a6), \
                   "+" R(a7), "+" R(a8), "+" R(a9), "+" R(a10), "+" R(a11))

// One loop body for every ISA, written on V (the vector type) and the SET1 / FMA / ADD / ZERO
// intrinsics each function below defines before it expands the body.
#define INIT(i) V a##i = SET1(static_cast<float>(i));
#define STEP(i) a##i = FMA(a##i, m, c);
#define SUM(i) s = ADD(s, a##i);
#define ONNXFORGE_FMA_BODY(REG)                      \
  ONNXFORGE_CHAINS(INIT)                             \
  const V m = SET1(0.9999f), c = SET1(1e-4f);        \
  for (std::int64_t it = 0; it < iters; ++it) {      \
    ONNXFORGE_CHAINS(STEP)                           \
    ONNXFORGE_KEEP(REG);                             \
  }                                                  \
  V s = ZERO();                                      \
  ONNXFORGE_CHAINS(SUM)

#define V __m512
#define SET1 _mm512_set1_ps
#define FMA _mm512_fmadd_ps
#define ADD _mm512_add_ps
#define ZERO _mm512_setzero_ps
__attribute__((target("avx512f"))) inline float loop_avx512(std::int64_t iters) {
  ONNXFORGE_FMA_BODY("v")
  alignas(64) float out[16];
  _mm512_store_ps(out, s);
  return out[0] + out[15];
}
#undef V
#undef SET1
#undef FMA
#undef ADD
#undef ZERO

#define V __m256
#define SET1 _mm256_set1_ps
#define FMA _mm256_fmadd_ps
#define ADD _mm256_add_ps
#define ZERO _mm256_setzero_ps
__attribute__((target("avx2,fma"))) inline float loop_avx2(std::int64_t iters) {
  ONNXFORGE_FMA_BODY("x")
  alignas(32) float out[8];
  _mm256_store_ps(out, s);
  return out[0] + out[7];
}
#undef V
#undef SET1
#undef FMA
#undef ADD
#undef ZERO

// SSE has no FMA: a multiply and an add per element count as the same two flops.
#define V __m128
#define SET1 _mm_set1_ps
#define FMA(a, m, c) _mm_add_ps(_mm_mul_ps(a, m), c)
#define ADD _mm_add_ps
#define ZERO _mm_setzero_ps
inline float loop_sse(std::int64_t iters) {
  ONNXFORGE_FMA_BODY("x")
  return _mm_cvtss_f32(s);
}
#undef V
#undef SET1
#undef FMA
#undef ADD
#undef ZERO

#undef INIT
#undef STEP
#undef SUM
#undef ONNXFORGE_FMA_BODY
#undef ONNXFORGE_CHAINS
#undef ONNXFORGE_KEEP

}  // namespace onnxforge::perf
