// Hierarchy on a loaded model: reading tags (metadata / names + rules), the coverage summary,
// extracting one layer, and the structural hashes behind `diff`. Weights are never read except
// by the diff hashes (content hashing).
//
//   ./build-hier/perf/bench_hierarchy [--benchmark_filter=...]
//   ONNXFORGE_BENCH_MODEL=/path/to/model.onnx ONNXFORGE_BENCH_MODULE=encoder.layer.0 ./build-hier/perf/bench_hierarchy
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>

#include "hierarchy/extract.h"
#include "hierarchy/hierarchy.h"
#include "hierarchy/structural_hash.h"
#include "hierarchy/summary.h"
#include "io/model_io.h"

namespace {

using namespace onnxforge;

std::string model_path() {
  if (const char* p = std::getenv("ONNXFORGE_BENCH_MODEL")) return p;
  return std::string(ONNXFORGE_MODEL_DIR) + "/bert_small.onnx";
}

std::string module_name() {
  if (const char* p = std::getenv("ONNXFORGE_BENCH_MODULE")) return p;
  return "encoder.layer.0";
}

void BM_ReadTags(benchmark::State& state) {
  auto model = load_model(model_path());
  for (auto _ : state) benchmark::DoNotOptimize(hier::read_tags(*model));
  state.counters["nodes"] = static_cast<double>(model->main().node_count());
}
BENCHMARK(BM_ReadTags)->Unit(benchmark::kMillisecond);

void BM_Summary(benchmark::State& state) {
  auto model = load_model(model_path());
  hier::TagReport report = hier::read_tags(*model);
  for (auto _ : state) benchmark::DoNotOptimize(hier::summarize_hierarchy(*model, report));
}
BENCHMARK(BM_Summary)->Unit(benchmark::kMillisecond);

void BM_ExtractLayer(benchmark::State& state) {
  auto model = load_model(model_path());
  hier::read_tags(*model);
  for (auto _ : state) benchmark::DoNotOptimize(hier::extract_module(*model, module_name()));
}
BENCHMARK(BM_ExtractLayer)->Unit(benchmark::kMillisecond);

void BM_StructuralHash(benchmark::State& state) {
  auto model = load_model(model_path());
  for (auto _ : state) benchmark::DoNotOptimize(hier::hash_graph(*model, model->main()));
}
BENCHMARK(BM_StructuralHash)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
