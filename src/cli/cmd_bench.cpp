// onnxforge bench MODEL [--vs OTHER] [--threads N] [--iters N | --min-time S] [--warmup W] [--json]
#include <tbb/global_control.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/common.h"
#include "io/units.h"
#include "io/model_io.h"
#include "runtime/inputs.h"
#include "runtime/runtime.h"

namespace onnxforge::cli {
namespace {

// Steps listed by --profile, slowest first (the JSON has all of them).
constexpr size_t kSlowestSteps = 15;

struct Options {
  std::string model, vs;
  int threads = 0, iters = 0, warmup = 3;
  double min_time = 3.0;
  std::vector<std::string> inputs;
  DimOptions dims;
  bool json = false, profile = false, nchw = false, vs_nchw = false;
};

struct Stats {
  std::vector<double> ms;
  double median() const {
    auto v = ms;
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  }
  double min() const { return ms.empty() ? 0 : *std::min_element(ms.begin(), ms.end()); }
};

int run(const Options& o) {
  std::unique_ptr<tbb::global_control> gc;
  if (o.threads > 0) gc = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, o.threads);
  auto ma = load_model(o.model);
  std::unique_ptr<Model> mb = o.vs.empty() ? nullptr : load_model(o.vs);
  std::vector<Model*> models{ma.get()};
  if (mb) models.push_back(mb.get());
  auto dims = resolve_dims(o.dims, models);
  rt::SessionOptions so;
  so.profile = o.profile;
  so.channels_last = !o.nchw;
  rt::Session sa(*ma, so);
  rt::SessionOptions so_b;
  so_b.channels_last = !o.vs_nchw;
  std::unique_ptr<rt::Session> sb = mb ? std::make_unique<rt::Session>(*mb, so_b) : nullptr;
  rt::InputPlan plan;
  auto inputs = rt::prepare_inputs(ma->main(), sa.input_values(), dims, o.inputs, 0, plan);
  if (!o.json)
    for (const auto& n : plan.notes) std::cerr << "note: " << n << "\n";
  auto time_one = [&](const rt::Session& s) {
    auto t0 = std::chrono::steady_clock::now();
    auto outs = s.run(inputs);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  for (int i = 0; i < std::max(o.warmup, 1); ++i) {
    time_one(sa);
    if (sb) time_one(*sb);
  }
  Stats a, b;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0;; ++i) {
    if (o.iters > 0 ? i >= o.iters
                    : (i >= 3 && std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >= o.min_time))
      break;
    // Alternate run by run so drift (thermal, other load) hits both models alike.
    a.ms.push_back(time_one(sa));
    if (sb) b.ms.push_back(time_one(*sb));
  }
  nlohmann::json j;
  j["model"] = o.model;
  j["threads"] = o.threads;
  j["iters"] = a.ms.size();
  j["median_ms"] = a.median();
  j["min_ms"] = a.min();
  j["steps"] = sa.step_count();
  j["channels_last_steps"] = sa.channels_last_count();
  if (sb) {
    j["vs"] = {{"model", o.vs}, {"median_ms", b.median()}, {"min_ms", b.min()}};
    j["ratio"] = b.median() / a.median();
  }
  if (o.profile) {
    const auto runs = static_cast<double>(a.ms.size() + static_cast<size_t>(std::max(o.warmup, 1)));
    for (const auto& p : sa.profile())
      j["profile"].push_back({{"op", p.op}, {"ms_per_run", p.ms / runs}, {"nodes", p.nodes}});
    for (const auto& p : sa.step_profile())
      j["steps_profile"].push_back({{"node", p.node}, {"op", p.op}, {"ms_per_run", p.ms / runs}});
    if (!o.json) {
      for (const auto& p : j["profile"])
        std::printf("  %-28s %4d nodes %10.3f ms/run\n", p["op"].get<std::string>().c_str(), p["nodes"].get<int>(), p["ms_per_run"].get<double>());
      std::printf("  slowest steps:\n");
      for (size_t i = 0; i < std::min<size_t>(kSlowestSteps, j["steps_profile"].size()); ++i) {
        const auto& p = j["steps_profile"][i];
        std::printf("  %10.3f ms/run  %-22s %s\n", p["ms_per_run"].get<double>(), p["op"].get<std::string>().c_str(),
                    p["node"].get<std::string>().c_str());
      }
    }
  }
  if (o.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    std::printf("%-40s median %9.3f ms  min %9.3f ms  (%zu runs, %zu kernels, %zu channels-last)\n", o.model.c_str(),
                a.median(), a.min(), a.ms.size(), sa.step_count(), sa.channels_last_count());
    if (sb) {
      std::printf("%-40s median %9.3f ms  min %9.3f ms\n", o.vs.c_str(), b.median(), b.min());
      std::printf("ratio (vs / model, medians): %.3f\n", b.median() / a.median());
    }
  }
  return 0;
}

Command reg{"bench", "Measure a model's latency with onnxforge's runtime (optionally against another model)", [](CLI::App& app) {
  auto o = std::make_shared<Options>();
  app.add_option("model", o->model, "Model to time")->required();
  app.add_option("--vs", o->vs, "Second model, run alternately; the ratio of medians is reported");
  app.add_option("--threads", o->threads, "Threads (default: all cores)")->check(CLI::NonNegativeNumber);
  auto* it = app.add_option("--iters", o->iters, "Timed runs per model")->check(CLI::NonNegativeNumber);
  app.add_option("--min-time", o->min_time, "Seconds of timed runs (default 3)")->excludes(it)->check(CLI::NonNegativeNumber);
  app.add_option("--warmup", o->warmup, "Untimed runs first")->capture_default_str()->check(CLI::NonNegativeNumber);
  add_dim_options(app, o->dims);
  app.add_option("--input", o->inputs, "NAME=FILE input instead of a generated one");
  app.add_flag("--nchw", o->nchw, "Keep the model's activations NCHW (no channels-last chains)");
  app.add_flag("--vs-nchw", o->vs_nchw, "Likewise for the --vs model (--vs MODEL --vs-nchw: the layout's gain)");
  app.add_flag("--profile", o->profile, "Time every kernel; print the time per op type and the slowest steps");
  app.add_flag("--json", o->json, "Print JSON");
  return [o] { return run(*o); };
}};

}  // namespace
}  // namespace onnxforge::cli
