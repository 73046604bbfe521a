#include "cli/common.h"

#include <algorithm>
#include <charconv>
#include <optional>

#include "io/input_dims.h"
#include "io/units.h"
#include "ir/error.h"

namespace onnxforge::cli {

void add_dim_options(CLI::App& app, DimOptions& o, const std::string& what) {
  app.add_option("--dim", o.dims, "NAME=N: the size of symbolic dimension NAME" + what + " (repeatable)")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            return parse_dim_spec(s) ? "" : "expects NAME=N with a non-negative integer N, got '" + s + "'";
          },
          "NAME=N"));
  app.add_option("--input-shape", o.input_shapes,
                 "NAME:D0,D1,...: the whole shape of input NAME, for dims without a name" + what + " (repeatable)")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            return parse_input_shape_spec(s) ? ""
                                             : "expects NAME:D0,D1,... with non-negative integers, got '" + s + "'";
          },
          "NAME:D0,D1,..."));
}

std::map<std::string, int64_t> resolve_dims(const DimOptions& o, const std::vector<Model*>& models) {
  return resolve_input_dims(parse_dim_specs(o.dims), o.input_shapes, models);
}

void add_output_options(CLI::App& app, OutputOption& o, const std::string& help) {
  auto* opt = app.add_option("-o,--output", o.option, help);
  auto* pos = app.add_option("output", o.positional, help + " (instead of -o)");
  opt->excludes(pos);
  pos->excludes(opt);
}

const std::string& OutputOption::required(const char* command) const {
  if (path().empty()) fail_usage(command, " needs an output: -o OUT, or OUT after the input");
  return path();
}

WriteRules output_rules(bool overwrite, const std::vector<std::string>& inputs) {
  WriteRules rules;
  rules.overwrite = overwrite;
  for (const std::string& in : inputs) rules.protect(in);
  return rules;
}

std::string declared_output_warning(const Graph& g, const std::string& name, std::string_view dtype,
                                    const std::vector<int64_t>& shape) {
  for (ValueId v : g.graph_outputs()) {
    if (str(g.value_name(v)) != name) continue;
    const bool dtype_differs = g.dtype(v) != DType::Undefined && dtype_name(g.dtype(v)) != dtype;
    bool shape_differs = false;
    std::string declared = "[";
    if (g.has_shape(v)) {
      auto dims = g.shape(v);
      shape_differs = dims.size() != shape.size();
      for (size_t i = 0; i < dims.size(); ++i) {
        declared +=
            (i ? "," : "") + (dims[i].known() ? std::to_string(dims[i].value) : std::string(str(dims[i].param)));
        if (!shape_differs && dims[i].known() && dims[i].value != shape[i]) shape_differs = true;
      }
    }
    if (!dtype_differs && !shape_differs) return "";
    std::string computed = "[";
    for (size_t i = 0; i < shape.size(); ++i) computed += (i ? "," : "") + std::to_string(shape[i]);
    return "output '" + name + "' is declared " + std::string(dtype_name(g.dtype(v))) +
           (g.has_shape(v) ? " " + declared + "]" : "") + " but computes " + std::string(dtype) + " " + computed + "]";
  }
  return "";
}

CLI::Validator size_validator() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        return parse_bytes(s) ? "" : "expects a size such as 512M, 2G or 1048576, got '" + s + "'";
      },
      "SIZE");
}

}  // namespace onnxforge::cli
