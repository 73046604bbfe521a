#pragma once
// Subcommands register themselves: one cmd_*.cpp file per command, no shared list to edit.
//
//   static onnxforge::cli::Command reg{"inspect", "Summarise a model", [](CLI::App& app) {
//     auto opts = std::make_shared<Options>();
//     app.add_option("model", opts->path)->required();
//     return [opts]() { return run(*opts); };   // returns the process exit code
//   }};
#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace onnxforge::cli {

using Runner = std::function<int()>;
using Setup = std::function<Runner(CLI::App&)>;

struct Command {
  Command(std::string name, std::string description, Setup setup);
};

struct CommandEntry {
  std::string name, description;
  Setup setup;
};
std::vector<CommandEntry>& commands();

// The whole command line (the `onnxforge` executable's main, and `python3 -m onnxforge`): parses
// argv, runs the subcommand and returns the exit code; reports errors on stderr.
int run_command_line(int argc, char** argv);

// True when stderr is a terminal (progress output goes there).
bool stderr_is_tty();

}  // namespace onnxforge::cli
