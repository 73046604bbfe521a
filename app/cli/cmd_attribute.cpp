// onnxforge attribute MODEL... [--json] [--order-sensitivity K] [--verify-seeds N] [--dim n=N]
// Which pass does what (Experiments 01, 19, 07): per model and pass, the isolated effect (the
// pass alone on the original) and the cumulative one (passes one after another in pipeline
// order, each to its fixed point): Δnodes, Δinitializers, Δbytes, time; the cumulative model's
// max_diff against the original; a passes × models matrix; with --order-sensitivity K, K
// shuffled pass orders and whether the canonical order gives the fewest nodes.
#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <random>

#include "cli/command.h"
#include "cli/common.h"
#include "io/model_io.h"
#include "ir/error.h"
#include "passes/pipeline.h"
#include "passes/registry.h"

namespace onnxforge::cli {
namespace {

using namespace onnxforge::passes;
using json = nlohmann::json;

struct Options {
  std::vector<std::string> models;
  DimOptions dims;
  bool json_out = false, no_verify = false;
  int order_k = 0, seeds = 1;
};

struct Step {
  int64_t d_nodes = 0, d_inits = 0, d_bytes = 0;
  double seconds = 0;
};

Step run_one(Model& m, const Pass* p, const RunOptions& ro) {
  const Pass* one[] = {p};
  RunResult r = run_passes(m, one, ro);
  return {r.after.nodes - r.before.nodes, r.after.initializers - r.before.initializers, r.after.bytes - r.before.bytes,
          r.seconds};
}

json step_json(const Step& s) {
  return {{"d_nodes", s.d_nodes}, {"d_initializers", s.d_inits}, {"d_bytes", s.d_bytes}, {"seconds", s.seconds}};
}

std::unique_ptr<Model> load_with_shapes(const std::string& path, const DimOptions& o) {
  auto m = load_model(path);
  resolve_dims(o, {m.get()});  // --input-shape on this copy
  return m;
}

int64_t nodes_for_order(const std::string& path, const DimOptions& o, const std::vector<const Pass*>& order,
                        const RunOptions& ro) {
  auto m = load_with_shapes(path, o);
  specialise_dims(*m, ro.pass.dims);
  for (const Pass* p : order) run_one(*m, p, ro);
  return measure(*m).nodes;
}

int run(const Options& o) {
  std::vector<std::unique_ptr<Model>> originals;
  std::vector<Model*> all_models;
  for (const std::string& path : o.models) all_models.push_back(originals.emplace_back(load_model(path)).get());
  // A --dim must name a dim of some model's inputs (checked here, before any work).
  std::map<std::string, int64_t> dims = resolve_dims(o.dims, all_models);
  RunOptions ro;
  ro.pass.evaluator = runtime_evaluator();
  ro.pass.dims = dims;
  const auto& passes = all_passes();
  json out;
  out["passes"] = json::array();
  for (const Pass* p : passes)
    out["passes"].push_back({{"name", p->name()}, {"accuracy_class", static_cast<int>(p->accuracy())}});
  bool tty = stderr_is_tty();
  for (size_t mi = 0; mi < o.models.size(); ++mi) {
    const std::string& path = o.models[mi];
    json jm;
    jm["model"] = path;
    Model* original = originals[mi].get();
    ModelSize base = measure(*original);
    jm["before"] = {{"nodes", base.nodes}, {"initializers", base.initializers}, {"bytes", base.bytes}};
    for (const Pass* p : passes) {
      if (tty) std::cerr << "\r\033[K" << path << ": " << p->name() << " (isolated)" << std::flush;
      auto m = load_with_shapes(path, o.dims);
      specialise_dims(*m, dims);
      jm["isolated"][p->name()] = step_json(run_one(*m, p, ro));
    }
    auto cum = load_with_shapes(path, o.dims);
    specialise_dims(*cum, dims);
    AccuracyClass worst = AccuracyClass::Lossless;
    for (const Pass* p : passes) {
      if (tty) std::cerr << "\r\033[K" << path << ": " << p->name() << " (cumulative)" << std::flush;
      Step s = run_one(*cum, p, ro);
      if (s.d_nodes || s.d_inits || s.d_bytes)
        if (static_cast<int>(p->accuracy()) > static_cast<int>(worst)) worst = p->accuracy();
      jm["cumulative"][p->name()] = step_json(s);
    }
    // Then the driver's own fixed point over all passes together (what `optimize` does).
    const std::vector<const Pass*>& all = passes;
    RunResult fin = run_passes(*cum, all, ro);
    ModelSize after = measure(*cum);
    jm["after"] = {{"nodes", after.nodes}, {"initializers", after.initializers}, {"bytes", after.bytes}};
    jm["final_fixed_point_d_nodes"] = fin.after.nodes - fin.before.nodes;
    if (!o.no_verify && runtime_available()) {
      try {
        Reference ref(*original, VerifyOptions{o.seeds, dims});
        VerifyResult v = ref.check(*cum, tolerance_of(worst));
        jm["max_diff"] = v.max_diff;
        jm["verified"] = v.ok;
        if (!v.error.empty()) jm["verify_error"] = v.error;
      } catch (const std::exception& e) { jm["verify_error"] = e.what(); }
    }
    if (o.order_k > 0) {
      std::mt19937_64 rng(12345);
      std::vector<const Pass*> canonical(passes.begin(), passes.end());
      int64_t canon = nodes_for_order(path, o.dims, canonical, ro);
      json orders = json::array();
      int64_t best = canon;
      for (int k = 0; k < o.order_k; ++k) {
        if (tty) std::cerr << "\r\033[K" << path << ": order " << k + 1 << "/" << o.order_k << std::flush;
        std::vector<const Pass*> order = canonical;
        std::shuffle(order.begin(), order.end(), rng);
        int64_t n = nodes_for_order(path, o.dims, order, ro);
        best = std::min(best, n);
        json names = json::array();
        for (const Pass* p : order) names.push_back(p->name());
        orders.push_back({{"order", names}, {"nodes", n}});
      }
      jm["order_sensitivity"] = {
          {"canonical_nodes", canon}, {"best_nodes", best}, {"canonical_is_best", canon <= best}, {"orders", orders}};
    }
    out["models"].push_back(jm);
  }
  if (tty) std::cerr << "\r\033[K";
  if (o.json_out) {
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  // Matrix: passes × models, isolated / cumulative Δnodes.
  std::cout << std::left << std::setw(32) << "Δnodes isolated/cumulative";
  for (const json& jm : out["models"]) {
    std::string n = std::filesystem::path(jm["model"].get<std::string>()).stem().string();
    std::cout << std::setw(18) << n.substr(0, 17);
  }
  std::cout << "\n";
  for (const Pass* p : passes) {
    std::cout << std::setw(32) << p->name();
    for (const json& jm : out["models"]) {
      std::string cell = std::to_string(jm["isolated"][p->name()]["d_nodes"].get<int64_t>()) + "/" +
                         std::to_string(jm["cumulative"][p->name()]["d_nodes"].get<int64_t>());
      std::cout << std::setw(18) << cell;
    }
    std::cout << "\n";
  }
  std::cout << std::setw(32) << "nodes before → after";
  for (const json& jm : out["models"])
    std::cout << std::setw(18)
              << (std::to_string(jm["before"]["nodes"].get<int64_t>()) + "→" +
                  std::to_string(jm["after"]["nodes"].get<int64_t>()));
  std::cout << "\n" << std::setw(32) << "max_diff (cumulative)";
  for (const json& jm : out["models"]) {
    std::ostringstream s;
    if (jm.contains("max_diff"))
      s << std::setprecision(3) << jm["max_diff"].get<double>();
    else
      s << "-";
    std::cout << std::setw(18) << s.str();
  }
  std::cout << "\n";
  for (const json& jm : out["models"])
    if (jm.contains("order_sensitivity"))
      std::cout << jm["model"].get<std::string>() << ": canonical order " << jm["order_sensitivity"]["canonical_nodes"]
                << " nodes, best of " << o.order_k << " shuffled orders " << jm["order_sensitivity"]["best_nodes"]
                << (jm["order_sensitivity"]["canonical_is_best"].get<bool>() ? " (canonical is best)"
                                                                             : " (canonical is NOT best)")
                << "\n";
  return 0;
}

Command reg{"attribute", "Attribute node/initializer/byte reductions to each pass (isolated and cumulative)",
            [](CLI::App& app) {
              auto o = std::make_shared<Options>();
              app.add_option("models", o->models, "Models")->required();
              app.add_flag("--json", o->json_out, "Print JSON");
              app.add_option("--order-sensitivity", o->order_k, "Also run K shuffled pass orders")
                  ->check(CLI::NonNegativeNumber);
              app.add_option("--verify-seeds", o->seeds, "Seeds for the cumulative model's max_diff (default 1)")
                  ->check(CLI::PositiveNumber);
              app.add_flag("--no-verify", o->no_verify, "Skip the max_diff check");
              add_dim_options(app, o->dims);
              return [o] { return run(*o); };
            }};

}  // namespace
}  // namespace onnxforge::cli
