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
#include <string>
#include <vector>

#include "perf/resnet50_convs.h"
#include "simd/simd.h"

namespace {

namespace simd = onnxforge::simd;

// Args: resnet50_conv_args (perf/resnet50_convs.h).
void BM_Conv(benchmark::State& state) {
  const std::int64_t c = state.range(0), m = state.range(1), hw = state.range(2), k = state.range(3);
  const bool accumulate = state.range(5) != 0;
  const int threads = static_cast<int>(state.range(7));
  const simd::ConvParams p = onnxforge::perf::resnet50_conv_params(state);
  using onnxforge::perf::random_vector;
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
  state.SetLabel(std::string(simd::active_isa()) + (simd::conv_prefers_direct(p) ? " direct"
                                                    : packed                     ? " packed"
                                                                                 : ""));
}

const int registered = onnxforge::perf::register_conv_shapes("BM_Conv", BM_Conv);

}  // namespace

BENCHMARK_MAIN();
