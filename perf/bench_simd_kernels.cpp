// Throughput of the non-GEMM simd kernels on model-shaped inputs (active ISA, or ONNXFORGE_ISA),
// each with 1 and 2 threads: ResNet-50 3x3 and 1x1 convolutions, a MobileNet depthwise layer,
// BERT-base LayerNorm and attention softmax, vector math over 1M floats, the attention
// transpose (0,2,1,3).
//
//   ./build-simd/perf/bench_simd_kernels
#include <benchmark/benchmark.h>
#include <tbb/task_arena.h>

#include <cstdint>
#include <random>
#include <vector>

#include "simd/simd.h"
#include "tests/common/random.h"

namespace {

namespace simd = onnxforge::simd;

using onnxforge::test::noise;

// Runs the benchmark loop inside an arena of state.range(0) threads.
template <class F>
void in_arena(benchmark::State& state, F body) {
  tbb::task_arena arena(static_cast<int>(state.range(0)));
  arena.execute([&] {
    for (auto _ : state) {
      body();
      benchmark::ClobberMemory();
    }
  });
  state.SetLabel(simd::active_isa());
}

void set_flops(benchmark::State& state, double flops_per_iter) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops_per_iter * 1e-9 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

simd::ConvParams conv2d(std::int64_t c, std::int64_t m, std::int64_t g, std::int64_t hw, std::int64_t k,
                        std::int64_t s) {
  simd::ConvParams p;
  p.rank = 2, p.batch = 1, p.in_channels = c, p.out_channels = m, p.group = g;
  p.in = {hw, hw, 1}, p.kernel = {k, k, 1}, p.stride = {s, s, 1};
  p.pad_begin = {k / 2, k / 2, 0}, p.pad_end = {k / 2, k / 2, 0};
  return p;
}

// Args: threads. Conv shapes are fixed per benchmark.
void conv_bench(benchmark::State& state, const simd::ConvParams& p) {
  const auto x = noise(static_cast<std::size_t>(p.in_channels * p.in[0] * p.in[1]), 1);
  const auto w =
      noise(static_cast<std::size_t>(p.out_channels * (p.in_channels / p.group) * p.kernel[0] * p.kernel[1]), 2);
  const auto b = noise(static_cast<std::size_t>(p.out_channels), 3);
  std::vector<float> y(static_cast<std::size_t>(p.out_channels * p.out_spatial()));
  in_arena(state, [&] { simd::conv(p, x.data(), w.data(), b.data(), y.data(), simd::Unary::relu()); });
  set_flops(state, 2.0 * static_cast<double>(p.out_channels * p.out_spatial() * (p.in_channels / p.group) *
                                             p.kernel[0] * p.kernel[1]));
}

void BM_Conv3x3_ResNet50(benchmark::State& state) { conv_bench(state, conv2d(64, 64, 1, 56, 3, 1)); }
void BM_Conv1x1_ResNet50(benchmark::State& state) { conv_bench(state, conv2d(256, 64, 1, 56, 1, 1)); }
void BM_ConvDepthwise3x3_MobileNetV2(benchmark::State& state) { conv_bench(state, conv2d(144, 144, 144, 56, 3, 1)); }
void BM_ConvDepthwise3x3s2_MobileNetV2(benchmark::State& state) { conv_bench(state, conv2d(144, 144, 144, 56, 3, 2)); }

void BM_LayerNorm_128x768(benchmark::State& state) {
  const std::size_t rows = 128, cols = 768;
  const auto x = noise(rows * cols, 1), s = noise(cols, 2), b = noise(cols, 3);
  std::vector<float> y(rows * cols);
  in_arena(state, [&] { simd::layer_norm(rows, cols, x.data(), s.data(), b.data(), 1e-12f, y.data()); });
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * rows * cols * 8));
}

void BM_Softmax_12x128x128(benchmark::State& state) {
  const std::size_t rows = 12 * 128, cols = 128;
  const auto x = noise(rows * cols, 1, -10.f, 10.f);
  std::vector<float> y(rows * cols);
  in_arena(state, [&] { simd::softmax(rows, cols, x.data(), y.data()); });
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * rows * cols));
}

template <void (*fn)(const float*, float*, std::size_t)>
void BM_Math_1M(benchmark::State& state) {
  const std::size_t n = 1 << 20;
  const auto x = noise(n, 1, -8.f, 8.f);
  std::vector<float> y(n);
  in_arena(state, [&] { fn(x.data(), y.data(), n); });
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

void BM_Transpose0213_1x128x12x64(benchmark::State& state) {
  const std::vector<std::int64_t> shape = {1, 128, 12, 64}, perm = {0, 2, 1, 3};
  const auto x = noise(128 * 12 * 64, 1);
  std::vector<float> y(x.size());
  in_arena(state, [&] { simd::transpose(sizeof(float), shape, x.data(), perm, y.data()); });
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * x.size() * sizeof(float) * 2));
}

// A TinyLlama MLP weight [5632, 2048] transposed (what folding a Linear layer's Transpose costs).
void BM_Transpose10_5632x2048(benchmark::State& state) {
  const std::vector<std::int64_t> shape = {5632, 2048}, perm = {1, 0};
  const auto x = noise(5632 * 2048, 1);
  std::vector<float> y(x.size());
  in_arena(state, [&] { simd::transpose(sizeof(float), shape, x.data(), perm, y.data()); });
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * x.size() * sizeof(float) * 2));
}

void threads(benchmark::internal::Benchmark* b) {
  b->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_Conv3x3_ResNet50)->Apply(threads);
BENCHMARK(BM_Conv1x1_ResNet50)->Apply(threads);
BENCHMARK(BM_ConvDepthwise3x3_MobileNetV2)->Apply(threads);
BENCHMARK(BM_ConvDepthwise3x3s2_MobileNetV2)->Apply(threads);
BENCHMARK(BM_LayerNorm_128x768)->Apply(threads);
BENCHMARK(BM_Softmax_12x128x128)->Apply(threads);
BENCHMARK(BM_Math_1M<simd::vmath::exp>)->Name("BM_Exp_1M")->Apply(threads);
BENCHMARK(BM_Math_1M<simd::vmath::erf>)->Name("BM_Erf_1M")->Apply(threads);
BENCHMARK(BM_Math_1M<simd::vmath::gelu>)->Name("BM_Gelu_1M")->Apply(threads);
BENCHMARK(BM_Math_1M<simd::vmath::tanh>)->Name("BM_Tanh_1M")->Apply(threads);
BENCHMARK(BM_Transpose0213_1x128x12x64)->Apply(threads);
BENCHMARK(BM_Transpose10_5632x2048)->Apply(threads);

}  // namespace

BENCHMARK_MAIN();
