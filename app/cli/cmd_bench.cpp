// onnxforge bench MODEL [--vs OTHER] [--threads N] [--iters N | --min-time S] [--warmup W] [--json]
#include <tbb/global_control.h>

#include <algorithm>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "api/engine.h"
#include "cli/command.h"
#include "cli/common.h"
#include "cli/input_options.h"
#include "io/input_dims.h"

namespace onnxforge::cli {
namespace {

// Steps listed by --profile, slowest first (the JSON has all of them).
constexpr size_t kSlowestSteps = 15;

struct Options {
  std::string model, vs;
  int threads = 0, iters = 0, warmup = 3;
  double min_time = 3.0;
  InputOptions inputs;
  DimOptions dims;
  bool json = false, profile = false, nchw = false, vs_nchw = false;
};

int run(const Options& o) {
  std::unique_ptr<tbb::global_control> gc;
  if (o.threads > 0)
    gc = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, o.threads);
  const api::BenchSettings settings{.vs = o.vs,
                                    .iters = o.iters,
                                    .min_time = o.min_time,
                                    .warmup = o.warmup,
                                    .dims = parse_dim_specs(o.dims.dims),
                                    .input_shapes = o.dims.input_shapes,
                                    .input_files = o.inputs.inputs,
                                    .input_values = o.inputs.values,
                                    .profile = o.profile,
                                    .nchw = o.nchw,
                                    .vs_nchw = o.vs_nchw,
                                    .threads = o.threads};
  nlohmann::json j = api::bench(o.model, settings);
  if (!o.json)
    for (const auto& n : j["notes"]) std::cerr << "note: " << n.get<std::string>() << "\n";
  if (o.profile && !o.json) {
    for (const auto& p : j["profile"])
      std::printf("  %-28s %4d nodes %10.3f ms/run\n", p["op"].get<std::string>().c_str(), p["nodes"].get<int>(),
                  p["ms_per_run"].get<double>());
    std::printf("  slowest steps:\n");
    for (size_t i = 0; i < std::min<size_t>(kSlowestSteps, j["steps_profile"].size()); ++i) {
      const auto& p = j["steps_profile"][i];
      std::printf("  %10.3f ms/run  %-22s %s\n", p["ms_per_run"].get<double>(), p["op"].get<std::string>().c_str(),
                  p["node"].get<std::string>().c_str());
    }
  }
  if (o.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    std::printf("%-40s median %9.3f ms  min %9.3f ms  (%zu runs, %zu kernels, %zu channels-last)\n", o.model.c_str(),
                j["median_ms"].get<double>(), j["min_ms"].get<double>(), j["iters"].get<size_t>(),
                j["steps"].get<size_t>(), j["channels_last_steps"].get<size_t>());
    if (j.contains("vs")) {
      std::printf("%-40s median %9.3f ms  min %9.3f ms\n", o.vs.c_str(), j["vs"]["median_ms"].get<double>(),
                  j["vs"]["min_ms"].get<double>());
      std::printf("ratio (vs / model, medians): %.3f\n", j["ratio"].get<double>());
      if (j["paired"].is_object())
        std::printf("paired ratio (median of per-pair ratios): %.3f, 95%% interval %.3f-%.3f\n",
                    j["paired"]["ratio"].get<double>(), j["paired"]["ci95"][0].get<double>(),
                    j["paired"]["ci95"][1].get<double>());
    }
  }
  return 0;
}

Command reg{
    "bench", "Measure a model's latency with onnxforge's runtime (optionally against another model)",
    [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      app.add_option("model", o->model, "Model to time")->required();
      app.add_option(
          "--vs", o->vs,
          "Second model, run alternately; the ratio of medians and the paired ratio (95% interval) are reported");
      app.add_option("--threads", o->threads, "Threads (default: all cores)")->check(CLI::NonNegativeNumber);
      auto* it = app.add_option("--iters", o->iters, "Timed runs per model")->check(CLI::NonNegativeNumber);
      app.add_option("--min-time", o->min_time, "Seconds of timed runs (default 3)")
          ->excludes(it)
          ->check(CLI::NonNegativeNumber);
      app.add_option("--warmup", o->warmup, "Untimed runs first")->capture_default_str()->check(CLI::NonNegativeNumber);
      add_dim_options(app, o->dims);
      add_input_options(app, o->inputs, "instead of generated ones (the first input set is timed)");
      app.add_flag("--nchw", o->nchw, "Keep the model's activations NCHW (no channels-last chains)");
      app.add_flag("--vs-nchw", o->vs_nchw, "Likewise for the --vs model (--vs MODEL --vs-nchw: the layout's gain)");
      app.add_flag("--profile", o->profile, "Time every kernel; print the time per op type and the slowest steps");
      app.add_flag("--json", o->json, "Print JSON");
      return [o] { return on_model(o->model, [&] { return run(*o); }); };
    }};

}  // namespace
}  // namespace onnxforge::cli
