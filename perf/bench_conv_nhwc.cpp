// Per-conv throughput of onnxforge::simd::conv_nhwc (channels-last: pointwise convs as a plain
// GEMM on the activations, the others as an implicit GEMM) on the distinct ResNet-50 conv
// shapes (batch 1, 224x224), with 1 and 2 threads, bias + Relu fused and the residual
// accumulated where ResNet fuses it: the NHWC counterpart of bench_conv (same shapes, same
// arguments, so the two tables compare line by line). `count` is how often the shape occurs in
// ResNet-50.
//
//   ./build/perf/bench_conv_nhwc --benchmark_filter='threads:2'
#include <benchmark/benchmark.h>
#include <tbb/task_arena.h>

#include <cstddef>
#include <string>
#include <vector>

#include "perf/resnet50_convs.h"
#include "simd/nhwc.h"
#include "simd/simd.h"

namespace {

namespace simd = onnxforge::simd;

// Args: resnet50_conv_args (perf/resnet50_convs.h).
void BM_ConvNhwc(benchmark::State& state) {
  const std::int64_t c = state.range(0), m = state.range(1), hw = state.range(2), k = state.range(3),
                     s = state.range(4);
  const bool accumulate = state.range(5) != 0;
  const int threads = static_cast<int>(state.range(7));
  const simd::ConvParams p = onnxforge::perf::resnet50_conv_params(state);
  using onnxforge::perf::random_vector;
  const auto x = random_vector(static_cast<std::size_t>(hw * hw * c), 1, 1.f);  // [H, W, C]
  const auto w = random_vector(static_cast<std::size_t>(m * c * k * k), 2, 0.05f);
  const auto b = random_vector(static_cast<std::size_t>(m), 3, 0.1f);
  std::vector<float> y(static_cast<std::size_t>(m * p.out_spatial()));
  tbb::task_arena arena(threads);
  arena.execute([&] {
    const simd::ConvNhwcWeights pw = simd::pack_conv_weights_nhwc(p, w.data());
    const simd::WarmWorkers warm;  // as inside a model run: workers spin between calls
    for (auto _ : state) {
      simd::conv_nhwc(p, x.data(), false, pw, b.data(), y.data(), simd::Unary::relu(), accumulate);
      benchmark::ClobberMemory();
    }
  });
  const double flops = 2.0 * static_cast<double>(m * c * k * k * p.out_spatial());
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(std::string(simd::active_isa()) + (k == 1 && s == 1 ? " gemm" : " igemm"));
}

const int registered = onnxforge::perf::register_conv_shapes("BM_ConvNhwc", BM_ConvNhwc);

}  // namespace

BENCHMARK_MAIN();
