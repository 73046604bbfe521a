#include <unistd.h>

#include <iostream>
#include <map>

#include "cli/command.h"
#include "ir/error.h"

namespace onnxforge::cli {

std::vector<CommandEntry>& commands() {
  static std::vector<CommandEntry> all;
  return all;
}

Command::Command(std::string name, std::string description, Setup setup) {
  commands().push_back({std::move(name), std::move(description), std::move(setup)});
}

bool stderr_is_tty() { return ::isatty(2) == 1; }

int run_command_line(int argc, char** argv) {
  CLI::App app{"onnxforge: make ONNX models smaller and faster, and prove it did no harm"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "onnxforge 0.1.0");
  std::map<CLI::App*, Runner> runners;
  auto& all = commands();
  std::sort(all.begin(), all.end(), [](auto& a, auto& b) { return a.name < b.name; });
  for (auto& c : all) {
    CLI::App* sub = app.add_subcommand(c.name, c.description);
    runners[sub] = c.setup(*sub);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version print and exit 0; any other parse failure (an unknown option, a value
    // a validator rejects: CLI11 returns its own codes such as 105) is bad usage: exit 2.
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    for (auto& [sub, run] : runners)
      if (sub->parsed()) return run();
  } catch (const onnxforge::Error& e) {
    std::cerr << "onnxforge: error: " << e.what() << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "onnxforge: error: out of memory\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "onnxforge: internal error: " << e.what() << "\n";
    return 3;
  }
  return 0;
}

}  // namespace onnxforge::cli
