// onnxforge inspect MODEL [--json]
#include <unistd.h>

#include <algorithm>
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

struct Port {
  std::string name, dtype;
  std::vector<std::string> shape;  // "128", "batch", "?"; empty with known_rank false: rank unknown
  bool known_rank = false;
};

// The graph's inputs (without initializers) or outputs with their declared dtypes and shapes.
std::vector<Port> ports(const Graph& g, bool inputs) {
  std::vector<Port> out;
  for (ValueId v : inputs ? g.graph_inputs() : g.graph_outputs()) {
    if (inputs && g.is_initializer(v)) continue;
    Port p;
    p.name = std::string(str(g.value_name(v)));
    p.dtype = g.has_type(v) && g.type_raw(v).empty() ? std::string(dtype_name(g.dtype(v)))
              : g.type_raw(v).empty()               ? "?"
                                                    : "(non-tensor type)";
    p.known_rank = g.has_shape(v);
    for (const Dim& d : g.shape(v))
      p.shape.push_back(d.known() ? std::to_string(d.value) : d.param.empty() ? "?" : std::string(str(d.param)));
    out.push_back(std::move(p));
  }
  return out;
}

std::string shape_text(const Port& p) {
  if (!p.known_rank) return "(shape unknown)";
  std::string s = "[";
  for (size_t i = 0; i < p.shape.size(); ++i) s += (i ? ", " : "") + p.shape[i];
  return s + "]";
}

nlohmann::json ports_json(const std::vector<Port>& ps) {
  nlohmann::json a = nlohmann::json::array();
  for (const Port& p : ps) {
    nlohmann::json shape = nlohmann::json::array();
    for (const std::string& d : p.shape) {
      if (!d.empty() && std::all_of(d.begin(), d.end(), ::isdigit)) shape.push_back(std::stoll(d));
      else shape.push_back(d == "?" ? nlohmann::json() : nlohmann::json(d));
    }
    a.push_back({{"name", p.name}, {"dtype", p.dtype}, {"shape", p.known_rank ? shape : nlohmann::json()}});
  }
  return a;
}

int run(const Options& o) {
  auto model = load_model(o.model);
  ModelSummary s = summarize(*model);
  auto ins = ports(model->main(), true), outs = ports(model->main(), false);
  const bool sorted = nodes_topologically_sorted(*model);
  if (o.json) {
    nlohmann::json j = s.to_json();
    j["graph_inputs"] = ports_json(ins);
    j["graph_outputs"] = ports_json(outs);
    j["topologically_sorted"] = sorted;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << format_summary(s, ::isatty(1) == 1);
  size_t width = 4;
  for (const auto* list : {&ins, &outs})
    for (const Port& p : *list) width = std::max(width, p.name.size());
  for (const auto& [title, list] : {std::pair{"inputs", &ins}, std::pair{"outputs", &outs}}) {
    std::cout << "\n" << title << "\n";
    for (const Port& p : *list)
      std::cout << "  " << p.name << std::string(width - p.name.size() + 2, ' ') << p.dtype
                << std::string(p.dtype.size() < 9 ? 9 - p.dtype.size() : 1, ' ') << shape_text(p) << "\n";
  }
  if (!sorted) std::cout << "\nnote: the nodes are not topologically sorted (ONNX requires it; `optimize` sorts them)\n";
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
