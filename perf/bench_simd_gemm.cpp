// GEMM throughput of onnxforge::simd (active ISA, or ONNXFORGE_ISA) on BERT-base shapes and
// 1024^3, with 1 and 2 threads, plain and with pre-packed B. Compare with bench_fma_peak.
//
//   ./build-simd/perf/bench_simd_gemm
#include <benchmark/benchmark.h>
#include <tbb/task_arena.h>

#include <cstddef>
#include <random>
#include <vector>

#include "simd/simd.h"
#include "tests/common/random.h"

namespace {

using onnxforge::simd::gemm;
using onnxforge::simd::gemm_packed;
using onnxforge::simd::pack_b;

using onnxforge::test::noise;

// Args: M, N, K, threads, packed (0/1).
void BM_Gemm(benchmark::State& state) {
  const auto M = static_cast<std::size_t>(state.range(0)), N = static_cast<std::size_t>(state.range(1)),
             K = static_cast<std::size_t>(state.range(2));
  const int threads = static_cast<int>(state.range(3));
  const bool packed = state.range(4) != 0;
  const std::vector<float> a = noise(M * K, 1), b = noise(K * N, 2);
  std::vector<float> c(M * N);
  tbb::task_arena arena(threads);
  arena.execute([&] {
    const onnxforge::simd::PackedB pb = packed ? pack_b(false, K, N, b.data(), N) : onnxforge::simd::PackedB{};
    const onnxforge::simd::WarmWorkers warm;  // as inside a model run: workers spin between calls
    state.counters["spinners"] = onnxforge::simd::warm_spinners();
    for (auto _ : state) {
      if (packed) {
        gemm_packed(false, M, 1.f, a.data(), K, pb, 0.f, c.data(), N);
      } else {
        gemm(false, false, M, N, K, 1.f, a.data(), K, b.data(), N, 0.f, c.data(), N);
      }
      benchmark::ClobberMemory();
    }
  });
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * M * N * K * 1e-9 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(onnxforge::simd::active_isa());
}

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "N", "K", "threads", "packed"});
  for (int packed : {0, 1})
    for (int threads : {1, 2}) {
      b->Args({128, 768, 768, threads, packed});
      b->Args({128, 3072, 768, threads, packed});
      b->Args({1024, 1024, 1024, threads, packed});
    }
}

// Small M: transformer decode (M = 1) and short sequences, N and K in 768..3072.
void small_m(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "N", "K", "threads", "packed"});
  for (int packed : {0, 1})
    for (int threads : {1, 2})
      for (int M : {1, 16, 64}) {
        b->Args({M, 768, 768, threads, packed});
        b->Args({M, 3072, 768, threads, packed});
        b->Args({M, 768, 3072, threads, packed});
      }
}

BENCHMARK(BM_Gemm)->Apply(shapes)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Gemm)->Name("BM_GemmSmallM")->Apply(small_m)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
