// Whole-model latency of onnxforge's runtime on the zoo's perf models (one Session per model,
// inputs from runtime/inputs.h as `onnxforge bench` makes them, default dims). The comparison
// with ONNX Runtime stays perf/runtime_vs_ort.sh; this is the in-process number to track.
//   ./bench_models --benchmark_min_time=2                       (threads: ONNXFORGE_BENCH_THREADS, default 2)
//   ./bench_models --benchmark_filter=resnet50
// Models missing from .cache/models are skipped (tools/models/export_zoo.py --only NAME).
#include <benchmark/benchmark.h>
#include <tbb/global_control.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "io/model_io.h"
#include "runtime/inputs.h"
#include "runtime/runtime.h"

namespace {

int bench_threads() {
  const char* t = std::getenv("ONNXFORGE_BENCH_THREADS");
  return t != nullptr && std::atoi(t) > 0 ? std::atoi(t) : 2;
}

void BM_Model(benchmark::State& state, const std::string& name) {
  const std::filesystem::path path = std::filesystem::path(ONNXFORGE_MODEL_DIR) / (name + ".onnx");
  if (!std::filesystem::exists(path)) {
    state.SkipWithError(("missing " + path.string()).c_str());
    return;
  }
  tbb::global_control gc(tbb::global_control::max_allowed_parallelism, static_cast<size_t>(bench_threads()));
  auto model = onnxforge::load_model(path);
  onnxforge::rt::Session session(*model);
  auto plan = onnxforge::rt::plan_inputs(model->main(), session.input_values(), {});
  auto inputs = onnxforge::rt::make_inputs(plan, 0);
  for (int i = 0; i < 2; ++i) session.run(inputs);  // first run records the arena layout
  for (auto _ : state) {
    auto outs = session.run(inputs);
    benchmark::DoNotOptimize(outs.data());
  }
  state.counters["threads"] = bench_threads();
  state.counters["steps"] = static_cast<double>(session.step_count());
}

}  // namespace

BENCHMARK_CAPTURE(BM_Model, bert_base, std::string("bert_base"))->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Model, resnet50, std::string("resnet50"))->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Model, llama_small, std::string("llama_small"))->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Model, whisper_tiny_enc, std::string("whisper_tiny_enc"))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK_MAIN();
