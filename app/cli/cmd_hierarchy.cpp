// onnxforge hierarchy MODEL [--json] [--tree] [--consumers] [--hierarchy FILE]
#include <unistd.h>

#include <iostream>

#include "api/engine.h"
#include "cli/command.h"
#include "hierarchy/hierarchy.h"
#include "hierarchy/summary.h"
#include "io/model_io.h"

namespace onnxforge::cli {
namespace {

struct Options {
  std::string model, sidecar;
  bool json = false, tree = false, consumers = false, no_names = false;
};

int run(const Options& o) {
  if (o.json) {
    std::cout << api::hierarchy(o.model, o.sidecar, !o.no_names, o.consumers).dump(2) << "\n";
    return 0;
  }
  auto model = load_model(o.model);
  hier::ReadOptions ro;
  ro.sidecar = o.sidecar;
  ro.use_names = !o.no_names;
  hier::TagReport report = hier::read_tags(*model, ro);
  hier::HierarchySummary s = hier::summarize_hierarchy(*model, report);
  std::cout << hier::format_hierarchy(s, o.tree, ::isatty(1) == 1);
  if (o.consumers) std::cout << hier::format_consumers(hier::consuming_modules(*model), 30);
  return 0;
}

Command reg{
    "hierarchy", "Module tree, tagging coverage by operator category, untagged nodes by why", [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      app.add_option("model", o->model, "Model to read")->required();
      app.add_option("--hierarchy", o->sidecar, "Sidecar JSON (tools/export format) with node -> module maps")
          ->check(CLI::ExistingFile);
      app.add_flag("--json", o->json, "Print JSON");
      app.add_flag("--tree", o->tree, "Print the module tree with node counts");
      app.add_flag("--consumers", o->consumers, "Tag every tensor and node with all modules that consume it (R13)");
      app.add_flag("--no-names", o->no_names, "Do not read TorchScript scope names (metadata and sidecar only)");
      return [o] { return run(*o); };
    }};

}  // namespace
}  // namespace onnxforge::cli
