// FP32 FMA peak of this machine: a register-only loop of independent multiply-adds per ISA
// level, on 1 thread and on every thread. The GEMM benchmarks are judged against these.
//
//   ./build-simd/perf/bench_fma_peak
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstdint>
#include <thread>

#include "perf/fma_loops.h"
#include "simd/isa.h"

namespace {

using namespace onnxforge::perf;

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
