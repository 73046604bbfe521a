#include <cerrno>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/common.h"
#include "io/budget.h"
#include "io/units.h"
#include "ir/error.h"
#ifdef ONNXFORGE_HAVE_SIMD
#include "simd/isa.h"
#endif

namespace onnxforge::cli {

std::vector<CommandEntry>& commands() {
  static std::vector<CommandEntry> all;
  return all;
}

Command::Command(std::string name, std::string description, Setup setup) {
  commands().push_back({std::move(name), std::move(description), std::move(setup)});
}

bool stderr_is_tty() { return ::isatty(2) == 1; }

namespace {

// Exit codes (docs/cli.md): 0 success, 1 the check said no, 2 bad usage or bad input,
// 3 internal error.
constexpr int kUsage = 2, kInternal = 3;

bool g_json = false;  // errors as JSON on stdout (the command was given --json)

int report(const char* kind, const std::string& message, const std::string& file, int code,
           const std::string& node = {}) {
  std::cerr << "onnxforge: " << (code == kInternal ? "internal error" : "error") << ": " << message << "\n";
  if (std::string_view(kind) == "usage") std::cerr << "Run with --help for the options.\n";
  if (g_json) {
    auto or_null = [](const std::string& s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); };
    nlohmann::json j = {
        {"error", {{"kind", kind}, {"message", message}, {"file", or_null(file)}, {"node", or_null(node)}}}};
    std::cout << j.dump(2) << std::endl;
  }
  return code;
}

const char* kind_name(onnxforge::Error::Kind k) {
  switch (k) {
    case onnxforge::Error::Kind::Usage: return "usage";
    case onnxforge::Error::Kind::Memory: return "memory";
    default: return "input";
  }
}

std::string version_text() {
  std::string s = "onnxforge " ONNXFORGE_VERSION "\n";
#ifdef ONNXFORGE_HAVE_SIMD
  s += "kernels: built for x86-64-v2 (sse), avx2+fma and avx512 (f/bw/dq/vl); this CPU supports:";
  for (simd::Isa i : simd::available_isas()) s += std::string(" ") + simd::isa_name(i);
  s += "; active: " + std::string(simd::active_isa());
  s += " (ONNXFORGE_ISA=sse|avx2|avx512 caps it)";
#else
  s += "kernels: not in this build";
#endif
  return s;
}

// An uncaught exception (one escaping a worker thread or a noexcept function) is a bug: exit 3
// with a message instead of SIGABRT.
[[noreturn]] void on_terminate() {
  std::string what = "terminate called without an active exception";
  if (auto e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) { what = std::string("uncaught exception: ") + x.what(); } catch (...) {
      what = "uncaught exception of unknown type";
    }
  }
  report("internal", what, "", kInternal);
  std::cout.flush();
  std::_Exit(kInternal);
}

}  // namespace

int run_command_line(int argc, char** argv) {
  // Restored on return: the Python module runs the command line inside its own process.
  struct Restore {
    std::terminate_handler previous = std::set_terminate(on_terminate);
    ~Restore() { std::set_terminate(previous); }
  } restore;
  g_json = false;
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "--json") g_json = true;  // until parsing says which command has it
  CLI::App app{"onnxforge: make ONNX models smaller and faster, and prove it did no harm"};
  app.require_subcommand(1);
  app.set_version_flag("--version", version_text());
  std::map<CLI::App*, Runner> runners;
  std::string max_memory;
  double max_time = 0;
  uint64_t max_loop = onnxforge::kDefaultLoopIterations;
  auto& all = commands();
  std::sort(all.begin(), all.end(), [](auto& a, auto& b) { return a.name < b.name; });
  for (auto& c : all) {
    CLI::App* sub = app.add_subcommand(c.name, c.description);
    runners[sub] = c.setup(*sub);
    sub->add_option("--max-memory", max_memory,
                    "Memory budget of the runtime's tensors, e.g. 512M, 4G (default: 3/4 of RAM, " +
                        onnxforge::human_bytes(onnxforge::default_memory_budget()) + " here)")
        ->check(size_validator());
    sub->add_option("--max-time", max_time,
                    "Seconds the runtime's work may take (model runs, verification, folding); a run past it "
                    "stops with an error naming the node (default: no limit)")
        ->check(CLI::Validator(
            [](const std::string& v) {
              char* end = nullptr;
              const double x = std::strtod(v.c_str(), &end);
              return end && *end == 0 && x > 0 && x < 1e12 ? std::string()
                                                           : "'" + v + "' is not a positive number of seconds";
            },
            "SECONDS"));
    sub->add_option("--max-loop-iterations", max_loop,
                    "Node steps one Loop or Scan may take: iterations x (its body's nodes + 2), nested ones "
                    "included (default " +
                        std::to_string(onnxforge::kDefaultLoopIterations) + ")")
        ->check(CLI::Validator(
            [](const std::string& v) {
              char* end = nullptr;
              errno = 0;  // a value past 2^63 - 1 saturates with ERANGE: refused, not clamped
              const long long x = std::strtoll(v.c_str(), &end, 10);
              return end && *end == 0 && errno == 0 && x > 0 ? std::string()
                                                             : "'" + v + "' is not a positive whole number below 2^63";
            },
            "N"));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // CLI11's own codes (104-109 and so on) become the usual 2; its message names the option.
    return report("usage", e.what(), "", kUsage);
  }
  if (!max_memory.empty()) onnxforge::set_memory_budget(*onnxforge::parse_bytes(max_memory));
  onnxforge::set_time_budget(max_time);  // counted from here: the whole command's runtime work
  onnxforge::set_loop_iteration_limit(max_loop);
  try {
    for (auto& [sub, run] : runners) {
      if (!sub->parsed()) continue;
      const CLI::Option* json = sub->get_option_no_throw("--json");
      g_json = json && json->count() > 0;
      for (const CLI::App* nested : sub->get_subcommands())  // `zoo report --json`
        if (const CLI::Option* j = nested->get_option_no_throw("--json")) g_json = g_json || j->count() > 0;
      int code = run();
      std::cout.flush();
      return code;
    }
  } catch (const onnxforge::Error& e) {
    return report(kind_name(e.kind()), e.what(), e.file(), kUsage, e.node());
  } catch (const std::bad_alloc&) {
    return report("memory", "out of memory (lower the work or raise the limit: --max-memory)", "", kUsage);
  } catch (const std::exception& e) { return report("internal", e.what(), "", kInternal); }
  return 0;
}

}  // namespace onnxforge::cli
