#pragma once
// What several commands share on the command line (docs/cli.md): --dim and --input-shape, the
// output path given as -o or as a second positional, and the file rules of --overwrite. Malformed
// values are rejected while parsing, as usage errors that name the option (exit 2), never later
// as an exception from std::stoll.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "io/model_io.h"
#include "ir/error.h"
#include "io/safe_file.h"
#include "ir/graph.h"

namespace onnxforge::cli {

// --dim NAME=N (repeatable) and --input-shape NAME:d0,d1,... (repeatable).
struct DimOptions {
  std::vector<std::string> dims, input_shapes;
};
// Runs a command on one model file: an error that names no file of its own (a kernel that
// refuses its inputs, a shape that does not broadcast) is about that model, so `--json` says which
// file. Usage errors stay about the command line; an error naming its own file (an --inputs file)
// keeps it.
template <class F>
int on_model(const std::string& model, F&& run) {
  try {
    return run();
  } catch (const Error& e) {
    if (e.kind() == Error::Kind::Usage) throw;
    throw e.about(model);
  }
}

void add_dim_options(CLI::App& app, DimOptions& o, const std::string& what = "");

// Sizes of symbolic dims for the runtime's inputs and the passes: every --dim, plus the named
// dims the --input-shape options give. Applies the --input-shape options to `models`' graph
// inputs (their declared shapes become the given static shape) after checking each names an
// input of the right rank whose static dims agree. A --dim that no input of any model has is a
// usage error (the same rule as `run`), as is an --input-shape that contradicts a --dim.
std::map<std::string, int64_t> resolve_dims(const DimOptions& o, const std::vector<Model*>& models);

// Output path: `-o OUT` or the positional after the input (`optimize IN OUT`, as
// onnx-simplifier users type), not both.
struct OutputOption {
  std::string option, positional;
  const std::string& path() const { return option.empty() ? positional : option; }
  const std::string& required(const char* command) const;  // path(); a usage error when none
};
void add_output_options(CLI::App& app, OutputOption& o, const std::string& help);

// The file rules of a command's outputs (io/safe_file.h): --overwrite, and the command's input
// files, which no output may be written onto. Outputs are checked together with check_outputs
// before any work and written with save_model / write_file_atomically.
WriteRules output_rules(bool overwrite, const std::vector<std::string>& inputs);

// A warning when graph output `name` of `g` is declared with another element type or static
// shape than a run computed (`dtype`: dtype_name of the result); empty when they agree or the
// output is not declared. `run` and `verify` print it: the file promises something else.
std::string declared_output_warning(const Graph& g, const std::string& name, std::string_view dtype,
                                    const std::vector<int64_t>& shape);

// CLI11 check for a size with an optional K/M/G/T suffix.
CLI::Validator size_validator();

}  // namespace onnxforge::cli
