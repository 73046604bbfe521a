// The pass driver on zoo models: whole pipeline (no verification), with 1 and 2 worker threads,
// so the parallel analyses/folding ratio can be read off (threads:1 vs threads:2).
//   build-passes/perf/bench_passes --benchmark_filter=bert
#include <benchmark/benchmark.h>
#include <tbb/global_control.h>

#include <filesystem>

#include "io/model_io.h"
#include "passes/driver.h"
#include "passes/registry.h"

namespace {

using namespace onnxforge;

void BM_Pipeline(benchmark::State& state, const char* name) {
  std::filesystem::path path = std::filesystem::path(ONNXFORGE_MODEL_DIR) / name;
  if (!std::filesystem::exists(path)) {
    state.SkipWithError("model missing: run tools/models/export_zoo.py");
    return;
  }
  tbb::global_control threads(tbb::global_control::max_allowed_parallelism, static_cast<size_t>(state.range(0)));
  passes::RunOptions o;
  o.pass.evaluator = passes::runtime_evaluator();
  for (auto _ : state) {
    state.PauseTiming();
    auto m = load_model(path);
    state.ResumeTiming();
    auto r = passes::run_passes(*m, passes::all_passes(), o);
    benchmark::DoNotOptimize(r.after.nodes);
    state.counters["nodes_after"] = static_cast<double>(r.after.nodes);
  }
}

BENCHMARK_CAPTURE(BM_Pipeline, bert_small, "bert_small.onnx")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Pipeline, llama_small, "llama_small.onnx")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Pipeline, mobilenet_v2_bn, "mobilenet_v2_bn.onnx")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Pipeline, bert_base, "bert_base.onnx")
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2);

}  // namespace

BENCHMARK_MAIN();
