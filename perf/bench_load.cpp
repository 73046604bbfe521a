// Loading cost against the floor (reading the file from the page cache, as `cat` does) and
// against protobuf's generated ModelProto parser, on the same file in the same run.
//   ONNXFORGE_BENCH_MODEL=path/to/model.onnx ./bench_load --benchmark_min_time=2
// Default model: .cache/models/bert_base.onnx (tools/models/export_zoo.py --only bert_base).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "analysis/inspect.h"
#include "io/model_io.h"

namespace {

std::string model_path() {
  if (const char* p = std::getenv("ONNXFORGE_BENCH_MODEL")) return p;
  return ONNXFORGE_MODEL_DIR "/bert_base.onnx";
}

void BM_CatToDevNull(benchmark::State& state) {
  std::vector<char> buf(1 << 20);
  for (auto _ : state) {
    int fd = ::open(model_path().c_str(), O_RDONLY);
    ssize_t n, total = 0;
    while ((n = ::read(fd, buf.data(), buf.size())) > 0) total += n;
    ::close(fd);
    benchmark::DoNotOptimize(total);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(std::filesystem::file_size(model_path())));
}

void BM_OnnxforgeLoad(benchmark::State& state) {
  for (auto _ : state) {
    auto m = onnxforge::load_model(model_path());
    benchmark::DoNotOptimize(m.get());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(std::filesystem::file_size(model_path())));
}

void BM_OnnxforgeInspect(benchmark::State& state) {
  for (auto _ : state) {
    auto m = onnxforge::load_model(model_path());
    auto s = onnxforge::summarize(*m);
    benchmark::DoNotOptimize(s.nodes);
  }
}

void BM_ProtobufGeneratedParse(benchmark::State& state) {
  for (auto _ : state) {
    int fd = ::open(model_path().c_str(), O_RDONLY);
    google::protobuf::io::FileInputStream raw(fd);
    google::protobuf::io::CodedInputStream in(&raw);
    in.SetTotalBytesLimit(INT32_MAX);
    onnx::ModelProto m;
    bool ok = m.ParseFromCodedStream(&in);
    ::close(fd);
    if (!ok) state.SkipWithError("protobuf parse failed");
    benchmark::DoNotOptimize(m.graph().node_size());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(std::filesystem::file_size(model_path())));
}

void BM_OnnxforgeLoadSave(benchmark::State& state) {
  auto out = std::filesystem::temp_directory_path() / "onnxforge_bench_load_save.onnx";
  for (auto _ : state) {
    auto m = onnxforge::load_model(model_path());
    onnxforge::save_model(*m, out);
  }
  std::filesystem::remove(out);
}

BENCHMARK(BM_CatToDevNull)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_OnnxforgeLoad)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_OnnxforgeInspect)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ProtobufGeneratedParse)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_OnnxforgeLoadSave)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
