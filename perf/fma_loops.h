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

__attribute__((target("avx512f"))) inline float loop_avx512(std::int64_t iters) {
#define INIT(i) __m512 a##i = _mm512_set1_ps(static_cast<float>(i));
#define STEP(i) a##i = _mm512_fmadd_ps(a##i, m, c);
#define SUM(i) s = _mm512_add_ps(s, a##i);
  ONNXFORGE_CHAINS(INIT)
  const __m512 m = _mm512_set1_ps(0.9999f), c = _mm512_set1_ps(1e-4f);
  for (std::int64_t it = 0; it < iters; ++it) {
    ONNXFORGE_CHAINS(STEP)
    ONNXFORGE_KEEP("v");
  }
  __m512 s = _mm512_setzero_ps();
  ONNXFORGE_CHAINS(SUM)
  alignas(64) float out[16];
  _mm512_store_ps(out, s);
  return out[0] + out[15];
#undef INIT
#undef STEP
#undef SUM
}

__attribute__((target("avx2,fma"))) inline float loop_avx2(std::int64_t iters) {
#define INIT(i) __m256 a##i = _mm256_set1_ps(static_cast<float>(i));
#define STEP(i) a##i = _mm256_fmadd_ps(a##i, m, c);
#define SUM(i) s = _mm256_add_ps(s, a##i);
  ONNXFORGE_CHAINS(INIT)
  const __m256 m = _mm256_set1_ps(0.9999f), c = _mm256_set1_ps(1e-4f);
  for (std::int64_t it = 0; it < iters; ++it) {
    ONNXFORGE_CHAINS(STEP)
    ONNXFORGE_KEEP("x");
  }
  __m256 s = _mm256_setzero_ps();
  ONNXFORGE_CHAINS(SUM)
  alignas(32) float out[8];
  _mm256_store_ps(out, s);
  return out[0] + out[7];
#undef INIT
#undef STEP
#undef SUM
}

// SSE has no FMA: a multiply and an add per element count as the same two flops.
inline float loop_sse(std::int64_t iters) {
#define INIT(i) __m128 a##i = _mm_set1_ps(static_cast<float>(i));
#define STEP(i) a##i = _mm_add_ps(_mm_mul_ps(a##i, m), c);
#define SUM(i) s = _mm_add_ps(s, a##i);
  ONNXFORGE_CHAINS(INIT)
  const __m128 m = _mm_set1_ps(0.9999f), c = _mm_set1_ps(1e-4f);
  for (std::int64_t it = 0; it < iters; ++it) {
    ONNXFORGE_CHAINS(STEP)
    ONNXFORGE_KEEP("x");
  }
  __m128 s = _mm_setzero_ps();
  ONNXFORGE_CHAINS(SUM)
  return _mm_cvtss_f32(s);
#undef INIT
#undef STEP
#undef SUM
}

#undef ONNXFORGE_CHAINS
#undef ONNXFORGE_KEEP

}  // namespace onnxforge::perf
