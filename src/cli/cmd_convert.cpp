// onnxforge convert IN -o OUT [--external-data[=MIN_BYTES]] [--embed] [--target-opset N]
#include <chrono>
#include <iostream>

#include "cli/command.h"
#include "io/model_io.h"
#include "ir/error.h"
#include "passes/upgrade_opset.h"

namespace onnxforge::cli {
namespace {

struct Options {
  std::string input, output;
  std::optional<uint64_t> external_min;
  bool external = false, embed = false;
  std::string external_file;
  int64_t target_opset = 0;
};

int run(const Options& o) {
  auto t0 = std::chrono::steady_clock::now();
  auto model = load_model(o.input);
  if (o.target_opset) {
    passes::UpgradeReport u = passes::upgrade_opset(*model, o.target_opset);
    std::cerr << "opset " << u.from << " -> " << u.to << ", IR " << u.ir_from << " -> " << u.ir_to << " (" << u.adapted
              << " nodes adapted, " << u.added << " added)\n";
  }
  SaveOptions save;
  if (o.embed) save.placement = WeightPlacement::Embed;
  if (o.external) {
    save.placement = WeightPlacement::External;
    if (o.external_min) save.external_min_bytes = *o.external_min;
  }
  save.external_file = o.external_file;
  SaveStats s = save_model(*model, o.output, save);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::cerr << "wrote " << o.output << " (" << s.model_bytes << " bytes";
  if (s.used_external) std::cerr << " + " << s.external_bytes << " bytes of external data in " << s.tensors_external << " tensors";
  std::cerr << ") in " << ms << " ms\n";
  return 0;
}

Command reg{"convert", "Load and save a model: move weights into or out of external data files", [](CLI::App& app) {
  auto o = std::make_shared<Options>();
  app.add_option("input", o->input, "Model to read")->required()->check(CLI::ExistingFile);
  app.add_option("-o,--output", o->output, "Model to write (never the input)")->required();
  auto* ext = app.add_option_function<std::string>(
      "--external-data",
      [o](const std::string& v) {
        o->external = true;
        if (!v.empty()) o->external_min = std::stoull(v);
      },
      "Store tensors of at least MIN_BYTES (default 1024) in an external data file");
  ext->expected(0, 1)->type_name("[MIN_BYTES]");
  app.add_flag("--embed", o->embed, "Store every weight inside the .onnx file (up to 2 GiB)");
  app.add_option("--external-file", o->external_file, "External data file name (default <output>.data)");
  app.add_option("--target-opset", o->target_opset,
                 "Upgrade the default-domain opset to N (never a downgrade), adapting the ops whose signature changes");
  app.callback([o] {
    if (o->embed && o->external) throw CLI::ValidationError("--embed and --external-data exclude each other");
  });
  return [o] { return run(*o); };
}};

}  // namespace
}  // namespace onnxforge::cli
