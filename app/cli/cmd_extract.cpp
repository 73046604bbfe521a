// onnxforge extract MODEL --module TAG -o SUB.onnx [--hierarchy FILE] [--expose-cuts FULL.onnx]
//                   [--verify [--seeds N] [--dim name=N]] [--external-data] [--json]
#include <iostream>

#include "api/engine.h"
#include "cli/command.h"
#include "cli/common.h"
#include "io/units.h"

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
  api::ExtractSettings settings;
  settings.sidecar = o.sidecar;
  settings.expose_cuts = o.expose_cuts;
  settings.verify = o.verify;
  settings.seeds = o.seeds;
  settings.dims = o.dims.dims;
  settings.input_shapes = o.dims.input_shapes;
  settings.overwrite = o.overwrite;
  settings.external_data = o.external;
  api::ExtractOutcome r = api::extract(o.model, o.module, output, settings);
  if (o.json) {
    std::cout << r.report.dump(2) << "\n";
    return r.ok ? 0 : 1;
  }
  const hier::Extraction& cut = r.cut;
  std::cout << "Extracted '" << o.module << "': " << cut.nodes << " nodes, " << cut.inputs.size() << " inputs, "
            << cut.outputs.size() << " outputs, " << cut.initializers << " initializers ("
            << human_bytes(cut.initializer_bytes) << " shared with the source, not copied in memory) -> " << output
            << " in " << human_seconds(r.seconds) << "\n";
  for (const auto& n : cut.inputs) std::cout << "  input  " << n << "\n";
  for (const auto& n : cut.outputs) std::cout << "  output " << n << "\n";
  if (o.verify) {
    for (const auto& c : r.report["verify"]["outputs"])
      std::cout << "  verify " << c["output"].get<std::string>() << ": max_diff " << c["max_diff"].get<double>()
                << (c["bit_exact"].get<bool>() ? " (bit-exact)" : "") << "\n";
    std::cout << (r.ok ? "verify: PASS" : "verify: FAIL") << " (" << o.seeds << " seeds)\n";
  }
  return r.ok ? 0 : 1;
}

Command reg{
    "extract", "Cut one module out as a runnable model of its own", [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      app.add_option("model", o->model, "Model to cut from")->required();
      app.add_option("--module", o->module,
                     "Module path (encoder.layer.0) or class path (/BertModel/BertEncoder/BertLayer.0)")
          ->required();
      add_output_options(app, o->output, "Output model");
      app.add_flag("--overwrite", o->overwrite, "Replace existing outputs");
      app.add_option("--hierarchy", o->sidecar, "Sidecar JSON with node -> module maps")->check(CLI::ExistingFile);
      app.add_option(
          "--expose-cuts", o->expose_cuts,
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
