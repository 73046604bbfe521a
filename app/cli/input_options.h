#pragma once
// --inputs and --input-value, shared by optimize, verify, run, bench and zoo (docs/cli.md
// "Inputs"): the user's inputs for the runtime (rt::UserInputs, runtime/inputs.h). The files are
// read and checked against the model by the runtime; here only the spellings are checked.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace onnxforge::cli {

struct InputOptions {
  std::vector<std::string> inputs;  // NAME=FILE (.npy, .pb), FILE.npz, DIR (backend test data)
  std::vector<std::string> values;  // NAME=V
};
// `what` ends the help text ("for verification"). --input is accepted as another spelling of
// --inputs (what bench and run called it).
void add_input_options(CLI::App& app, InputOptions& o, const std::string& what);

}  // namespace onnxforge::cli
