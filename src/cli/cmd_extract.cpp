// onnxforge extract MODEL --module TAG -o SUB.onnx [--hierarchy FILE] [--expose-cuts FULL.onnx]
//                   [--verify [--seeds N] [--dim name=N]] [--external-data] [--json]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/common.h"
#include "hierarchy/extract.h"
#include "hierarchy/hierarchy.h"
#include "io/model_io.h"
#include "io/units.h"
#include "ir/error.h"
#include "hierarchy/extract_verify.h"

namespace onnxforge::cli {
namespace {

struct Options {
  std::string model, module, sidecar, expose_cuts;
  OutputOption output;
  DimOptions dims;
  int seeds = 3;
  bool json = false, external = false, verify = false, overwrite = false;
};

int run(const Options& o) {
  const std::string& output = o.output.required("extract");
  check_overwrite(output, o.overwrite);
  if (!o.expose_cuts.empty()) check_overwrite(o.expose_cuts, o.overwrite);
  auto t0 = std::chrono::steady_clock::now();
  auto model = load_model(o.model);
  std::vector<std::string> dims;
  for (const auto& [k, v] : resolve_dims(o.dims, {model.get()})) dims.push_back(k + "=" + std::to_string(v));
  hier::ReadOptions ro;
  ro.sidecar = o.sidecar;
  hier::read_tags(*model, ro);
  hier::Extraction cut = hier::extract_module(*model, o.module);
  SaveOptions so;
  if (o.external) so.placement = WeightPlacement::External;
  SaveStats stats = save_model(*cut.model, output, so);
  if (!o.expose_cuts.empty()) save_model(*hier::with_cuts_exposed(*model, cut), o.expose_cuts, so);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<hier::OutputCheck> checks;
  if (o.verify) checks = hier::verify_extraction(*model, cut, o.seeds, dims);
  bool ok = std::all_of(checks.begin(), checks.end(), [](auto& c) { return c.max_diff == 0; });
  if (o.json) {
    nlohmann::json j = {{"model", o.model}, {"module", o.module}, {"output", output}, {"nodes", cut.nodes},
                        {"inputs", cut.inputs}, {"outputs", cut.outputs}, {"initializers", cut.initializers},
                        {"initializer_bytes", cut.initializer_bytes}, {"model_bytes", stats.model_bytes},
                        {"external_bytes", stats.external_bytes}, {"tensors_verbatim", stats.tensors_verbatim},
                        {"seconds", seconds}};
    if (!o.expose_cuts.empty()) j["expose_cuts"] = o.expose_cuts;
    if (o.verify) {
      nlohmann::json v = nlohmann::json::array();
      double worst = 0;
      for (auto& c : checks) {
        v.push_back({{"output", c.name}, {"max_diff", c.max_diff}, {"bit_exact", c.bit_exact}});
        worst = std::max(worst, c.max_diff);
      }
      j["verify"] = {{"seeds", o.seeds}, {"outputs", v}, {"max_diff", worst}, {"pass", ok}};
    }
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "Extracted '" << o.module << "': " << cut.nodes << " nodes, " << cut.inputs.size() << " inputs, "
              << cut.outputs.size() << " outputs, " << cut.initializers << " initializers (" << human_bytes(cut.initializer_bytes)
              << " shared with the source, not copied in memory) -> " << output << " in " << human_seconds(seconds) << "\n";
    for (const auto& n : cut.inputs) std::cout << "  input  " << n << "\n";
    for (const auto& n : cut.outputs) std::cout << "  output " << n << "\n";
    for (auto& c : checks)
      std::cout << "  verify " << c.name << ": max_diff " << c.max_diff << (c.bit_exact ? " (bit-exact)" : "") << "\n";
    if (o.verify) std::cout << (ok ? "verify: PASS" : "verify: FAIL") << " (" << o.seeds << " seeds)\n";
  }
  return ok ? 0 : 1;
}

Command reg{"extract", "Cut one module out as a runnable model of its own", [](CLI::App& app) {
  auto o = std::make_shared<Options>();
  app.add_option("model", o->model, "Model to cut from")->required();
  app.add_option("--module", o->module, "Module path (encoder.layer.0) or class path (/BertModel/BertEncoder/BertLayer.0)")
      ->required();
  add_output_options(app, o->output, "Output model");
  app.add_flag("--overwrite", o->overwrite, "Replace existing outputs");
  app.add_option("--hierarchy", o->sidecar, "Sidecar JSON with node -> module maps")->check(CLI::ExistingFile);
  app.add_option("--expose-cuts", o->expose_cuts,
                 "Also write the source model with the cut tensors as extra outputs (to verify with another runtime)");
  app.add_flag("--verify", o->verify, "Run source and sub-model on the same inputs; exit 1 unless max_diff is 0");
  app.add_option("--seeds", o->seeds, "Seeds for --verify")->check(CLI::PositiveNumber);
  add_dim_options(app, o->dims, " for --verify");
  app.add_flag("--external-data", o->external, "Write weights as external data");
  app.add_flag("--json", o->json, "Print JSON");
  return [o] { return run(*o); };
}};

}  // namespace
}  // namespace onnxforge::cli
