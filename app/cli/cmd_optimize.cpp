// onnxforge optimize IN [-o] OUT [--passes a,b] [--skip c] [--list-passes] [--fold-size 1M]
//                   [--dim name=N]... [--input-shape NAME:D0,D1...]... [--report FILE.json]
//                   [--verify-seeds N] [--verify-budget S] [--no-verify] [--overwrite] [--write-unverified]
//                   [--target-opset N] [--target generic|ort|tensorrt|tflite] [--inline-functions]
// Runs the pass pipeline to a fixed point, verifies the result against the original through the
// runtime (unless --no-verify) and writes it. A model that fails verification is not written and
// the first pass that broke it is named.
#include <tbb/global_control.h>

#include <iostream>
#include <optional>

#include "api/engine.h"
#include "cli/command.h"
#include "cli/common.h"
#include "cli/input_options.h"
#include "io/input_dims.h"
#include "io/units.h"
#include "ir/error.h"
#include "passes/pipeline.h"
#include "passes/upgrade_opset.h"

namespace onnxforge::cli {
namespace {

using namespace onnxforge::passes;

struct Options {
  std::string in, report, fold_size;
  OutputOption out;
  DimOptions dims;
  std::vector<std::string> verify_dims;
  int verify_decode = 0;
  InputOptions inputs;
  std::vector<std::string> passes, skip;
  bool strict = false, list = false, no_verify = false, force = false, overwrite = false, write_unverified = false,
       json = false, strip_hierarchy = false, inline_functions = false;
  int seeds = 3, threads = 0;
  double verify_budget = 0;
  std::optional<int64_t> target_opset;
  std::string target = "generic";
};

int list_passes(bool json) {
  nlohmann::json j = api::list_passes();
  if (json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  bool extra = false;
  for (const auto& p : j) {
    if (!p["default"].get<bool>() && !extra) {
      std::cout << "\nnot in the default pipeline (--passes NAME, or put in by a --target that lacks the op):\n";
      extra = true;
    }
    std::cout << p["name"].get<std::string>() << "  [class " << p["accuracy_class"].get<int>() << ", "
              << accuracy_name(static_cast<AccuracyClass>(p["accuracy_class"].get<int>()));
    if (p.contains("emits"))
      std::cout << "; emits " << p["emits"].get<std::string>() << " (opset " << p["min_opset"].get<int>() << "+)";
    if (p.contains("inverse")) std::cout << "; inverse " << p["inverse"].get<std::string>();
    std::cout << "]\n    " << p["summary"].get<std::string>() << "\n";
  }
  return 0;
}

// The engine's settings from the command line (--force's meanings resolved by the caller).
api::OptimizeSettings settings_of(const Options& o, const std::string& out, bool overwrite, bool write_unverified,
                                  bool tty) {
  api::OptimizeSettings settings;
  std::vector<std::string> notes;
  settings.passes = api::current_pass_names(o.passes, &notes);
  settings.skip = api::current_pass_names(o.skip, &notes);
  for (const std::string& n : notes) std::cerr << "note: " << n << "\n";
  settings.dims = parse_dim_specs(o.dims.dims);
  settings.input_shapes = o.dims.input_shapes;
  settings.verify_dims = parse_dim_specs(o.verify_dims);
  settings.verify_decode = o.verify_decode;
  settings.inputs = o.inputs.inputs;
  settings.input_values = o.inputs.values;
  settings.strict = o.strict;
  settings.output = out;  // checked (exists without --overwrite) before any work
  settings.overwrite = overwrite;
  if (!o.fold_size.empty()) settings.fold_size = *parse_bytes(o.fold_size);
  settings.verify = !o.no_verify;
  settings.seeds = o.seeds;
  settings.verify_budget = o.verify_budget;
  settings.continue_over_budget = write_unverified;
  settings.target_opset = o.target_opset;
  settings.target = o.target;
  settings.inline_functions = o.inline_functions;
  if (tty) settings.progress = [](const std::string& s) { std::cerr << "\r\033[K" << s << std::flush; };
  return settings;
}

// What the engine's verdict means for the output: the exit code when nothing is to be written
// (over budget, --target ort, --strict, a failed check), after saying why; nullopt to write.
std::optional<int> refuse_unless_written(const Options& o, const api::OptimizeOutcome& r, const WriteRules& rules,
                                         bool write_unverified, bool tty) {
  if (r.over_budget) {
    if (!write_unverified) {
      if (!o.report.empty()) write_file_atomically(o.report, r.report.dump(2) + "\n", rules);
      std::cerr << "error: " << o.in << " cannot be verified within --verify-budget " << o.verify_budget
                << " s; nothing was written: raise the budget, or pass --write-unverified to write it unverified\n";
      return 1;
    }
    std::cerr << "--write-unverified: writing the model unverified (over --verify-budget)\n";
  } else if (!r.target_missing.empty()) {  // --target ort: the result would not load in ONNX Runtime 1.30
    if (tty) std::cerr << "\r\033[K";
    if (!o.report.empty()) write_file_atomically(o.report, r.report.dump(2) + "\n", rules);
    std::cerr << "error: ONNX Runtime 1.30 has no kernel for " << r.target_missing[0]
              << "; the output would not load there (--target ort)\n";
    if (!write_unverified) {
      std::cerr << "nothing was written\n";
      if (o.json) std::cout << r.report.dump(2) << "\n";
      return 1;
    }
  } else if (!r.ok() && r.verification.ok) {  // --strict: the check passed, on degenerate inputs
    if (tty) std::cerr << "\r\033[K";
    if (!o.report.empty()) write_file_atomically(o.report, r.report.dump(2) + "\n", rules);
    std::cerr << "error: " << r.verification.degenerate << " (--strict)\n";
    if (!write_unverified) {
      std::cerr << "nothing was written\n";
      if (o.json) std::cout << r.report.dump(2) << "\n";
      return 1;
    }
  } else if (!r.ok()) {
    if (tty) std::cerr << "\n";
    if (!o.report.empty()) write_file_atomically(o.report, r.report.dump(2) + "\n", rules);
    std::cerr << "error: " << api::verification_failure_text(r) << "\n";
    if (!write_unverified) {
      const bool one_pass = r.breaking_pass.rfind("the combination", 0) != 0;
      std::cerr << "nothing was written; rerun with "
                << (one_pass ? "--skip " + r.breaking_pass : std::string("fewer passes (--passes)"))
                << " (and please report the model), or --write-unverified to write it anyway\n";
      if (o.json) std::cout << r.report.dump(2) << "\n";
      return 1;
    }
    std::cerr << "--write-unverified: writing the model although it failed verification\n";
  }
  return std::nullopt;
}

// The text summary: sizes, the upgrade, each pass that applied, and the verification.
void print_summary(const Options& o, const std::string& out, const api::OptimizeOutcome& r) {
  const nlohmann::json& report = r.report;
  const RunResult& s = r.run;
  const double passes_s = report["seconds"]["passes"].get<double>(), total_s = report["seconds"]["total"].get<double>();
  std::cout << o.in << " -> " << out << ": nodes " << s.before.nodes << " -> " << s.after.nodes << ", initializers "
            << s.before.initializers << " -> " << s.after.initializers << ", initializer bytes "
            << human_bytes(static_cast<uint64_t>(s.before.bytes)) << " -> "
            << human_bytes(static_cast<uint64_t>(s.after.bytes)) << " (" << s.rounds << " rounds, passes "
            << human_seconds(passes_s) << ", total " << human_seconds(total_s) << ")\n";
  if (r.upgrade) std::cout << "  upgrade_opset: " << passes::upgrade_text(*r.upgrade) << "\n";
  for (const PassStats& p : s.passes)
    if (p.applied) {
      const int64_t bytes = -p.removed.bytes;
      std::cout << "  " << p.name << ": nodes " << std::showpos << -p.removed.nodes << ", initializers "
                << -p.removed.initializers << std::noshowpos << ", bytes " << (bytes < 0 ? "-" : "+")
                << human_bytes(static_cast<uint64_t>(bytes < 0 ? -bytes : bytes)) << " (" << p.applied << " matches, "
                << p.rounds << " rounds, " << human_seconds(p.seconds()) << ")\n";
    }
  if (r.verified && !r.verification.degenerate.empty())
    std::cout << r.verification.degenerate << " (" << r.seeds << " seeds: max_diff " << r.verification.max_diff
              << ")\n";
  else if (r.verified)
    std::cout << "verified on " << r.seeds << " seeds: max_diff " << r.verification.max_diff << " (class "
              << static_cast<int>(s.worst) << " tolerance)\n";
  if (r.verified && !r.decode.empty()) std::cout << r.decode << "\n";
  if (!r.verified)
    std::cout << (o.no_verify ? "not verified (--no-verify)\n" : "not verified (over --verify-budget)\n");
  if (!r.hint.empty()) std::cout << r.hint << "\n";
}

int run(const Options& o) {
  if (o.list) return list_passes(o.json);
  if (o.in.empty()) fail_usage("optimize needs an input model and an output (or --list-passes)");
  const std::string& out = o.out.required("optimize");
  if (o.force) std::cerr << "note: --force is deprecated; it means --overwrite --write-unverified\n";
  const bool overwrite = o.overwrite || o.force, write_unverified = o.write_unverified || o.force;
  // The output set (io/safe_file.h): the model and the --report, never onto the input.
  const WriteRules rules = output_rules(overwrite, {o.in});
  {
    std::vector<std::filesystem::path> set{out};
    std::vector<std::string> what{"output"};
    if (!o.report.empty()) set.push_back(o.report), what.push_back("--report");
    check_outputs(set, what, rules);
  }
  std::unique_ptr<tbb::global_control> threads;
  if (o.threads > 0)
    threads = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, o.threads);
  bool tty = stderr_is_tty();
  auto clear = [&] {
    if (tty) std::cerr << "\r\033[K";
  };

  api::OptimizeSettings settings = settings_of(o, out, overwrite, write_unverified, tty);
  api::OptimizeOutcome r;
  try {
    r = api::optimize(o.in, settings);
  } catch (const Error&) {
    if (tty) std::cerr << "\n";
    throw;
  }
  r.report["output"] = out;
  if (tty && !r.notes.empty()) std::cerr << "\r\033[K";
  for (const std::string& n : r.notes) std::cerr << "note: " << n << "\n";
  if (auto refused = refuse_unless_written(o, r, rules, write_unverified, tty)) return *refused;
  if (tty)
    std::cerr << "\r\033[K"
              << "writing " << out << std::flush;
  SaveOptions save;
  save.overwrite = overwrite;
  save.inputs = rules.inputs;
  api::write_optimized(r, out, o.strip_hierarchy, save);
  clear();
  const nlohmann::json& report = r.report;
  if (!o.report.empty()) write_file_atomically(o.report, report.dump(2) + "\n", rules);
  if (o.json) {
    std::cout << report.dump(2) << "\n";
    return r.ok() || r.over_budget
               ? 0
               : 1;  // written with --write-unverified, but the check said no (over budget: unchecked)
  }
  print_summary(o, out, r);
  return r.ok() || r.over_budget ? 0 : 1;
}

Command reg{
    "optimize", "Optimize a model with the pass pipeline, verify it and write it", [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      app.add_option("model", o->in, "Model to optimize");
      add_output_options(app, o->out, "Where to write the optimized model");
      app.add_option("--passes", o->passes,
                     "Run only these passes (comma-separated; none: no pass, only load, upgrade, verify, write)")
          ->delimiter(',');
      app.add_option("--skip", o->skip, "Do not run these passes (comma-separated)")->delimiter(',');
      app.add_flag("--list-passes", o->list, "List the passes and exit");
      app.add_option("--fold-size", o->fold_size,
                     "Largest folded constant allowed beyond its inputs' size (default 1M)")
          ->check(size_validator());
      add_dim_options(app, o->dims, " (fixed in the output)");
      app.add_option("--verify-dim", o->verify_dims,
                     "NAME=N: the size of symbolic dimension NAME in verification only; the output keeps it "
                     "symbolic (repeatable)")
          ->check([](const std::string& s) {
            return parse_dim_spec(s) ? "" : "expects NAME=N with a non-negative integer N, got '" + s + "'";
          });
      add_input_options(app, o->inputs, "for verification");
      app.add_flag("--strict", o->strict, "Exit 1 (nothing written) when verified on degenerate inputs");
      app.add_option("--report", o->report, "Write a JSON report to this file");
      app.add_option("--verify-seeds", o->seeds, "Seeds for verification (default 3)")->check(CLI::PositiveNumber);
      app.add_option("--verify-budget", o->verify_budget,
                     "Seconds verification may take: fewer seeds (never below 1) to fit, and a model whose one seed "
                     "does not fit is reported (exit 1) instead of verified")
          ->check(CLI::NonNegativeNumber);
      app.add_option("--verify-decode", o->verify_decode,
                     "Also verify generation on a decoder with a KV cache: a prefill and N one-token steps, each model "
                     "feeding its own cache back; logits compared and greedy tokens matched at every step")
          ->check(CLI::NonNegativeNumber);
      app.add_flag("--no-verify", o->no_verify, "Skip verification");
      app.add_flag("--overwrite", o->overwrite, "Replace an existing output");
      app.add_flag("--write-unverified", o->write_unverified,
                   "Write the model even if verification fails (still exit 1)");
      app.add_flag("--force", o->force, "Deprecated: --overwrite and --write-unverified");
      app.add_flag("--strip-hierarchy", o->strip_hierarchy, "Remove module-hierarchy tags from the output");
      app.add_option("--threads", o->threads, "Worker threads (default: all)")->check(CLI::NonNegativeNumber);
      app.add_flag("--json", o->json, "Print the report as JSON");
      app.add_option("--target-opset", o->target_opset,
                     "Upgrade the default-domain opset to N first (7.." + std::to_string(kMaxRuntimeOpset) +
                         "; never a downgrade), adapting the ops whose signature changes");
      app.add_option("--target", o->target,
                     "Deployment target: generic (default: every op, the model's opset), ort, tensorrt, tflite; "
                     "fusions into ops the target lacks do not run, and such ops are decomposed");
      app.add_flag("--inline-functions", o->inline_functions,
                   "Expand every call of a model-local function (FunctionProto) into its caller and drop the "
                   "functions; without it the passes optimize inside each function body");
      return [o] { return run(*o); };
    }};

}  // namespace
}  // namespace onnxforge::cli
