// Per-conv throughput of onnxforge::simd::conv / conv_packed (the path the runtime picks) on the
// distinct ResNet-50 conv shapes (batch 1, 224x224), with 1 and 2 threads, bias + Relu fused and
// the residual accumulated where ResNet fuses it. GFLOP/s per conv against bench_fma_peak shows
// where time goes; the 1- vs 2-thread ratio shows the scaling per conv. `count` is how often the
// shape occurs in ResNet-50 (weight the times by it for the model's conv total).
//
//   ./build/perf/bench_conv --benchmark_filter='threads:2'
#include <benchmark/benchmark.h>
#include <tbb/task_arena.h>

#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "simd/simd.h"

namespace {

namespace simd = onnxforge::simd;

std::vector<float> random_vector(std::size_t n, unsigned seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Args: in channels, out channels, input size, kernel, stride, accumulate, count, threads.
void BM_Conv(benchmark::State& state) {
  const std::int64_t c = state.range(0), m = state.range(1), hw = state.range(2), k = state.range(3),
                     s = state.range(4);
  const bool accumulate = state.range(5) != 0;
  const int threads = static_cast<int>(state.range(7));
  simd::ConvParams p;
  p.rank = 2, p.batch = 1, p.in_channels = c, p.out_channels = m;
  p.in = {hw, hw, 1}, p.kernel = {k, k, 1}, p.stride = {s, s, 1};
  p.pad_begin = {k / 2, k / 2, 0}, p.pad_end = {k / 2, k / 2, 0};
  const auto x = random_vector(static_cast<std::size_t>(c * hw * hw), 1, 1.f);
  const auto w = random_vector(static_cast<std::size_t>(m * c * k * k), 2, 0.05f);
  const auto b = random_vector(static_cast<std::size_t>(m), 3, 0.1f);
  std::vector<float> y(static_cast<std::size_t>(m * p.out_spatial()));
  const bool packed = simd::conv_prefers_packed(p) || simd::conv_prefers_direct(p);
  tbb::task_arena arena(threads);
  arena.execute([&] {
    const simd::ConvPackedWeights pw = packed ? simd::pack_conv_weights(p, w.data()) : simd::ConvPackedWeights{};
    const simd::WarmWorkers warm;  // as inside a model run: workers spin between calls
    for (auto _ : state) {
      if (packed) {
        simd::conv_packed(p, x.data(), pw, b.data(), y.data(), simd::Unary::relu(), accumulate);
      } else {
        simd::conv(p, x.data(), w.data(), b.data(), y.data(), simd::Unary::relu(), accumulate);
      }
      benchmark::ClobberMemory();
    }
  });
  const double flops = 2.0 * static_cast<double>(m * c * k * k * p.out_spatial());
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(std::string(simd::active_isa()) +
                 (simd::conv_prefers_direct(p) ? " direct" : packed ? " packed" : ""));
}

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"C", "M", "in", "k", "s", "acc", "count", "threads"});
  struct Shape {
    std::int64_t c, m, hw, k, s, acc, count;
  };
  const Shape all[] = {
      {3, 64, 224, 7, 2, 0, 1},                                                       // stem
      {64, 64, 56, 1, 1, 0, 1},     {64, 64, 56, 3, 1, 0, 3},    {64, 256, 56, 1, 1, 1, 3},
      {64, 256, 56, 1, 1, 0, 1},    {256, 64, 56, 1, 1, 0, 2},                           // 56x56
      {256, 128, 56, 1, 1, 0, 1},   {128, 128, 56, 3, 2, 0, 1},  {128, 512, 28, 1, 1, 1, 4},
      {256, 512, 56, 1, 2, 0, 1},   {512, 128, 28, 1, 1, 0, 3},  {128, 128, 28, 3, 1, 0, 3},  // 28x28
      {512, 256, 28, 1, 1, 0, 1},   {256, 256, 28, 3, 2, 0, 1},  {256, 1024, 14, 1, 1, 1, 6},
      {512, 1024, 28, 1, 2, 0, 1},  {1024, 256, 14, 1, 1, 0, 5}, {256, 256, 14, 3, 1, 0, 5},  // 14x14
      {1024, 512, 14, 1, 1, 0, 1},  {512, 512, 14, 3, 2, 0, 1},  {512, 2048, 7, 1, 1, 1, 3},
      {1024, 2048, 14, 1, 2, 0, 1}, {2048, 512, 7, 1, 1, 0, 2},  {512, 512, 7, 3, 1, 0, 2},    // 7x7
  };
  for (int threads : {1, 2})
    for (const Shape& s : all) b->Args({s.c, s.m, s.hw, s.k, s.s, s.acc, s.count, threads});
}

BENCHMARK(BM_Conv)->Apply(shapes)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
