// Einsum on the GEMM (runtime/ops/einsum.cpp) against MatMul on the same contraction, through a
// Session (operands are graph inputs: nothing is packed ahead). The float64 run of the first
// equation is the generic loop over every label combination (the path of non-float32 types).
//
//   nice -n 19 build/perf/bench_einsum --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
//
// A BERT-base projection over 128 tokens (128 x 768 x 768) and attention's scores (12 heads,
// 128 x 128 over 64), the equations exporters write for them.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "runtime/runtime.h"
#include "tests/common/graph_builder.h"
#include "tests/common/random.h"

namespace {

using namespace onnxforge;
using onnxforge::test::GraphBuilder;

rt::Tensor tensor(DType t, const std::vector<int64_t>& shape, unsigned seed) {
  std::vector<float> v = test::noise(static_cast<size_t>(test::numel(shape)), seed);
  rt::Tensor x = rt::Tensor::alloc(t, shape);
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DType::Double)
      x.ptr<double>()[i] = v[i];
    else
      x.ptr<float>()[i] = v[i];
  }
  return x;
}

// One node (Einsum with `eq`, or MatMul when eq is empty) on inputs of `shapes`.
void run_node(benchmark::State& state, const std::string& eq, const std::vector<std::vector<int64_t>>& shapes, DType t,
              double flops) {
  GraphBuilder m(12);
  std::vector<ValueId> ins;
  std::vector<rt::Tensor> xs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    ins.push_back(m.input("x" + std::to_string(i), shapes[i], t));
    xs.push_back(tensor(t, shapes[i], static_cast<unsigned>(i + 1)));
  }
  m.outputs({eq.empty() ? m.node("MatMul", ins) : m.node("Einsum", ins, {NewAttr::String("equation", eq)})});
  rt::Session s(m.model());
  for (auto _ : state) benchmark::DoNotOptimize(s.run(xs));
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

constexpr double kProj = 2.0 * 128 * 768 * 768, kScores = 2.0 * 12 * 128 * 128 * 64;

void BM_Einsum_ij_jk(benchmark::State& s) { run_node(s, "ij,jk->ik", {{128, 768}, {768, 768}}, DType::Float, kProj); }
void BM_MatMul_ij_jk(benchmark::State& s) { run_node(s, "", {{128, 768}, {768, 768}}, DType::Float, kProj); }
void BM_Einsum_bnd_hd(benchmark::State& s) {
  run_node(s, "bnd,hd->bnh", {{1, 128, 768}, {768, 768}}, DType::Float, kProj);
}
void BM_Einsum_bhqd_bhkd(benchmark::State& s) {
  run_node(s, "bhqd,bhkd->bhqk", {{1, 12, 128, 64}, {1, 12, 128, 64}}, DType::Float, kScores);
}
void BM_MatMul_bhqd_bhdk(benchmark::State& s) {
  run_node(s, "", {{1, 12, 128, 64}, {1, 12, 64, 128}}, DType::Float, kScores);
}
void BM_EinsumGeneric_ij_jk_f64(benchmark::State& s) {
  run_node(s, "ij,jk->ik", {{128, 768}, {768, 768}}, DType::Double, kProj);
}

BENCHMARK(BM_Einsum_ij_jk)->Unit(benchmark::kMillisecond)->MinTime(0.5);
BENCHMARK(BM_MatMul_ij_jk)->Unit(benchmark::kMillisecond)->MinTime(0.5);
BENCHMARK(BM_Einsum_bnd_hd)->Unit(benchmark::kMillisecond)->MinTime(0.5);
BENCHMARK(BM_Einsum_bhqd_bhkd)->Unit(benchmark::kMillisecond)->MinTime(0.5);
BENCHMARK(BM_MatMul_bhqd_bhdk)->Unit(benchmark::kMillisecond)->MinTime(0.5);
BENCHMARK(BM_EinsumGeneric_ij_jk_f64)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
