// onnxforge diff A B [--json] [--all-modules] [--hierarchy-a FILE] [--hierarchy-b FILE]
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "hierarchy/diff.h"
#include "hierarchy/hierarchy.h"
#include "io/model_io.h"

namespace onnxforge::cli {
namespace {

struct Options {
  std::string a, b, sidecar_a, sidecar_b;
  bool json = false, all = false;
};

int run(const Options& o) {
  auto a = load_model(o.a);
  auto b = load_model(o.b);
  hier::ReadOptions ra, rb;
  ra.sidecar = o.sidecar_a;
  rb.sidecar = o.sidecar_b;
  hier::read_tags(*a, ra);
  hier::read_tags(*b, rb);
  hier::ModelDiff d = hier::diff_models(*a, *b);
  if (o.json) {
    nlohmann::json j = d.to_json(o.all);
    j["a"] = o.a;
    j["b"] = o.b;
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << d.to_text(o.all);
  }
  return d.identical ? 0 : 1;
}

Command reg{"diff", "Compare two models' topology ignoring names, overall and per module (exit 1 if different)",
            [](CLI::App& app) {
              auto o = std::make_shared<Options>();
              app.add_option("a", o->a, "First model")->required();
              app.add_option("b", o->b, "Second model")->required();
              app.add_option("--hierarchy-a", o->sidecar_a, "Sidecar JSON for A")->check(CLI::ExistingFile);
              app.add_option("--hierarchy-b", o->sidecar_b, "Sidecar JSON for B")->check(CLI::ExistingFile);
              app.add_flag("--all-modules", o->all, "List unchanged modules too");
              app.add_flag("--json", o->json, "Print JSON");
              return [o] { return run(*o); };
            }};

}  // namespace
}  // namespace onnxforge::cli
