// onnxforge inspect MODEL [--json]
#include <unistd.h>

#include <iostream>

#include "analysis/inspect.h"
#include "cli/command.h"
#include "io/model_io.h"

namespace onnxforge::cli {
namespace {

struct Options {
  std::string model;
  bool json = false;
};

int run(const Options& o) {
  auto model = load_model(o.model);
  ModelSummary s = summarize(*model);
  add_declaration_warnings(*model, s);
  if (o.json)
    std::cout << s.to_json().dump(2) << "\n";
  else
    std::cout << format_summary(s, ::isatty(1) == 1);
  return 0;
}

Command reg{"inspect", "Summarise a model: counts, bytes, inputs and outputs, operators, what the passes can do",
            [](CLI::App& app) {
              auto o = std::make_shared<Options>();
              app.add_option("model", o->model, "Model to inspect")->required();
              app.add_flag("--json", o->json, "Print JSON");
              return [o]() { return run(*o); };
            }};

}  // namespace
}  // namespace onnxforge::cli
