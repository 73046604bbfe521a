// FP32 FMA peak of this machine: a register-only loop of independent multiply-adds per ISA
// level, on 1 thread and on every thread. The GEMM benchmarks are judged against these.
//
//   ./build-simd/perf/bench_fma_peak
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstdint>
#include <thread>

#include "simd/isa.h"

namespace {

// 12 independent chains in named registers (an array would be kept on the stack): enough to
// cover FMA latency (4 cycles) on two FMA ports. The empty asm keeps the loop from being folded.
constexpr std::int64_t kChains = 12;
constexpr std::int64_t kIters = 1 << 16;

#define ONNXFORGE_CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define ONNXFORGE_KEEP(R)                                                                          \
  __asm__ volatile("" : "+" R(a0), "+" R(a1), "+" R(a2), "+" R(a3), "+" R(a4), "+" R(a5), "+" R(a6), \
                   "+" R(a7), "+" R(a8), "+" R(a9), "+" R(a10), "+" R(a11))

__attribute__((target("avx512f"))) float loop_avx512(std::int64_t iters) {
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

__attribute__((target("avx2,fma"))) float loop_avx2(std::int64_t iters) {
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
float loop_sse(std::int64_t iters) {
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

template <onnxforge::simd::Isa isa>
void BM_FmaPeak(benchmark::State& state) {
  using onnxforge::simd::Isa;
  if (onnxforge::simd::cpu_isa() < isa) {
    state.SkipWithError("ISA not supported by this CPU");
    return;
  }
  const int lanes = isa == Isa::Avx512 ? 16 : isa == Isa::Avx2 ? 8 : 4;
  for (auto _ : state) {
    float r = isa == Isa::Avx512 ? loop_avx512(kIters) : isa == Isa::Avx2 ? loop_avx2(kIters) : loop_sse(kIters);
    benchmark::DoNotOptimize(r);
  }
  const double flops = 2.0 * lanes * kChains * static_cast<double>(kIters) * static_cast<double>(state.iterations());
  // Summed over threads and divided by wall time: the machine total for threads:N.
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsRate);
}

const int kAllThreads = static_cast<int>(std::thread::hardware_concurrency());

void threads(benchmark::internal::Benchmark* b) { b->Threads(1)->Threads(kAllThreads)->UseRealTime(); }

BENCHMARK(BM_FmaPeak<onnxforge::simd::Isa::Avx512>)->Name("fma_peak/avx512")->Apply(threads);
BENCHMARK(BM_FmaPeak<onnxforge::simd::Isa::Avx2>)->Name("fma_peak/avx2")->Apply(threads);
BENCHMARK(BM_FmaPeak<onnxforge::simd::Isa::Sse>)->Name("fma_peak/sse")->Apply(threads);

}  // namespace

BENCHMARK_MAIN();
