// onnxforge optimize IN -o OUT [--passes a,b] [--skip c] [--list-passes] [--fold-size 1M]
//                   [--dim name=N]... [--report FILE.json] [--verify-seeds N] [--verify-budget S] [--no-verify] [--force]
//                   [--target-opset N]
// Runs the pass pipeline to a fixed point, verifies the result against the original through the
// runtime (unless --no-verify) and writes it. A model that fails verification is not written and
// the first pass that broke it is named.
#include <tbb/global_control.h>

#include <chrono>
#include <fstream>
#include <iostream>

#include "cli/command.h"
#include "hierarchy/hierarchy.h"
#include "io/model_io.h"
#include "ir/error.h"
#include "passes/pipeline.h"
#include "passes/registry.h"
#include "passes/upgrade_opset.h"

namespace onnxforge::cli {
namespace {

using namespace onnxforge::passes;

struct Options {
  std::string in, out, report, fold_size;
  std::vector<std::string> passes, skip, dims;
  bool list = false, no_verify = false, force = false, json = false, strip_hierarchy = false;
  int seeds = 3, threads = 0;
  double verify_budget = 0;
  int64_t target_opset = 0;
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::map<std::string, int64_t> parse_dims(const std::vector<std::string>& list) {
  std::map<std::string, int64_t> out;
  for (const std::string& d : list) {
    auto eq = d.find('=');
    if (eq == std::string::npos || eq == 0) fail("--dim expects name=N, got '", d, "'");
    try {
      out[d.substr(0, eq)] = std::stoll(d.substr(eq + 1));
    } catch (const std::exception&) {
      fail("--dim expects name=N with an integer N, got '", d, "'");
    }
  }
  return out;
}

int list_passes(bool json) {
  nlohmann::json j = nlohmann::json::array();
  for (const Pass* p : all_passes()) {
    if (json) j.push_back({{"name", p->name()}, {"accuracy_class", static_cast<int>(p->accuracy())}, {"summary", p->summary()}});
    else std::cout << p->name() << "  [class " << static_cast<int>(p->accuracy()) << ", " << accuracy_name(p->accuracy())
                   << "]\n    " << p->summary() << "\n";
  }
  if (json) std::cout << j.dump(2) << "\n";
  return 0;
}

// Names passes had before issue 12, still accepted by --passes and --skip so that scripts and
// notes keep working (with a note on stderr).
std::vector<std::string> current_pass_names(std::vector<std::string> names) {
  static const std::pair<std::string_view, std::string_view> renamed[] = {
      {"cleanup_attention", "fuse_consecutive_reshapes"},
      {"fuse_conv_relu", "annotate_conv_activation"},
  };
  for (std::string& n : names)
    for (auto [old_name, new_name] : renamed)
      if (n == old_name) {
        std::cerr << "note: pass '" << old_name << "' is now called '" << new_name << "'\n";
        n = new_name;
      }
  return names;
}

int run(const Options& o) {
  if (o.list) return list_passes(o.json);
  if (o.in.empty() || o.out.empty()) fail("optimize needs an input model and -o OUTPUT (or --list-passes)");
  if (std::filesystem::exists(o.out) && !o.force)
    fail("output '", o.out, "' exists; pass --force to overwrite it");
  std::unique_ptr<tbb::global_control> threads;
  if (o.threads > 0) threads = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, o.threads);
  auto t0 = std::chrono::steady_clock::now();
  bool tty = stderr_is_tty();
  auto say = [&](const std::string& s) {
    if (tty) std::cerr << "\r\033[K" << s << std::flush;
  };

  RunOptions ro;
  ro.pass.dims = parse_dims(o.dims);
  ro.pass.evaluator = runtime_evaluator();
  if (!o.fold_size.empty()) ro.pass.fold_size = parse_size(o.fold_size);
  if (tty) ro.progress = say;
  std::vector<const Pass*> passes = select_passes(current_pass_names(o.passes), current_pass_names(o.skip));

  say("loading " + o.in);
  auto model = load_model(o.in);
  if (o.target_opset) check_target_opset(*model, o.target_opset);  // before any work: a downgrade is exit 2
  hier::read_tags(*model);  // module tags ride along in the graph tables through every pass
  double load_s = seconds_since(t0);
  bool verify = !o.no_verify;
  std::unique_ptr<Reference> ref;
  double ref_s = 0;
  if (verify) {
    if (!runtime_available()) fail("verification needs the runtime, which this build lacks; use --no-verify");
    say("running the original model for verification");
    auto t = std::chrono::steady_clock::now();
    auto original = load_model(o.in);
    try {
      ref = std::make_unique<Reference>(*original, VerifyOptions{o.seeds, ro.pass.dims, o.verify_budget,
                                                                 tty ? std::function<void(const std::string&)>(say) : nullptr});
    } catch (const Error& e) {
      if (tty) std::cerr << "\n";
      fail("cannot verify: running the original model failed: ", e.what(), "\n(use --no-verify to skip verification)");
    }
    ref_s = seconds_since(t);
    if (tty && !ref->notes().empty()) std::cerr << "\r\033[K";
    for (const std::string& n : ref->notes()) std::cerr << "note: " << n << "\n";
    if (ref->over_budget()) {
      if (!o.force) {
        std::cerr << "error: " << o.in << " cannot be verified within --verify-budget " << o.verify_budget
                  << " s; nothing was written: raise the budget, or pass --force to write it unverified\n";
        return 1;
      }
      std::cerr << "--force: optimizing without verification\n";
      verify = false;
      ref.reset();
    }
  }
  specialise_dims(*model, ro.pass.dims);
  auto tp = std::chrono::steady_clock::now();
  // --target-opset: the upgrade runs first, on its own (class 0), so the pipeline's passes see
  // the new opset; the bisection below replays it first too.
  UpgradeReport upgrade;
  std::vector<const Pass*> bisect = passes;
  if (o.target_opset) {
    say("upgrading to opset " + std::to_string(o.target_opset));
    RunOptions uo = ro;
    uo.pass.target_opset = o.target_opset;
    uo.pass.upgrade_report = &upgrade;
    run_passes(*model, pre_passes(), uo);
    if (upgrade.to == 0) {  // already at the target: nothing ran
      upgrade.from = upgrade.to = model->opset("");
      upgrade.ir_from = upgrade.ir_to = model->ir_version;
    }
    bisect.insert(bisect.begin(), &upgrade_opset_pass());
    ro.pass.target_opset = o.target_opset;  // for the bisection's fresh loads
  }
  RunResult r = run_passes(*model, passes, ro);
  double passes_s = seconds_since(tp);

  nlohmann::json report = stats_json(r);
  report["input"] = o.in;
  report["output"] = o.out;
  if (o.target_opset) {
    nlohmann::json by;
    for (auto& [k, n] : upgrade.by_adapter) by[k] = n;
    report["upgrade"] = {{"opset_from", upgrade.from}, {"opset_to", upgrade.to}, {"ir_from", upgrade.ir_from},
                         {"ir_to", upgrade.ir_to}, {"nodes_adapted", upgrade.adapted}, {"nodes_added", upgrade.added},
                         {"adapters", by.is_null() ? nlohmann::json::object() : by}};
  }
  VerifyResult v;
  double verify_s = 0;
  if (verify) {
    say("verifying");
    auto t = std::chrono::steady_clock::now();
    v = ref->check(*model, tolerance_of(r.worst));
    verify_s = seconds_since(t);
    report["verification"] = verify_json(v);
    report["verification"]["seeds"] = ref->seeds();
    if (!v.ok) {
      say("verification failed; finding the first pass that breaks the model");
      VerifyResult first;
      int k = first_breaking_pass(o.in, bisect, ro, *ref, &first);
      if (tty) std::cerr << "\n";
      std::string culprit = k >= 0 ? bisect[k]->name() : "the combination of passes (no single pass alone)";
      report["breaking_pass"] = culprit;
      if (!o.report.empty()) std::ofstream(o.report) << report.dump(2) << "\n";
      std::cerr << "error: the optimized model does not match the original (max_diff " << v.max_diff
                << (v.error.empty() ? "" : ", " + v.error) << ")\n";
      for (const OutputDiff& d : v.outputs)
        if (!d.ok) std::cerr << "  output '" << d.name << "': max_abs " << d.max_abs << " " << d.problem << "\n";
      if (!o.force) {
        std::cerr << "first breaking pass: " << culprit << "\nnothing was written; rerun with --skip " << culprit
                  << " (and please report the model), or --force to write it anyway\n";
        return 1;
      }
      std::cerr << "first breaking pass: " << culprit << "\n--force: writing the model although it failed verification\n";
    }
  }
  say("writing " + o.out);
  auto ts = std::chrono::steady_clock::now();
  if (o.strip_hierarchy) hier::strip_hierarchy(*model);
  else hier::sync_tags_to_metadata(*model);
  SaveStats saved = save_model(*model, o.out);  // atomic: replaces an existing output only when complete
  double save_s = seconds_since(ts);
  if (tty) std::cerr << "\r\033[K";
  report["seconds"] = {{"load", load_s}, {"reference", ref_s}, {"passes", passes_s}, {"verify", verify_s},
                       {"save", save_s}, {"total", seconds_since(t0)}};
  report["saved"] = {{"model_bytes", saved.model_bytes}, {"external_bytes", saved.external_bytes},
                     {"tensors_verbatim", saved.tensors_verbatim}, {"tensors_reencoded", saved.tensors_reencoded}};
  if (!o.report.empty()) std::ofstream(o.report) << report.dump(2) << "\n";
  if (o.json) {
    std::cout << report.dump(2) << "\n";
    return 0;
  }
  std::cout << o.in << " -> " << o.out << ": nodes " << r.before.nodes << " -> " << r.after.nodes << ", initializers "
            << r.before.initializers << " -> " << r.after.initializers << ", initializer bytes " << r.before.bytes
            << " -> " << r.after.bytes << " (" << r.rounds << " rounds, passes " << passes_s << " s)\n";
  if (o.target_opset)
    std::cout << "  upgrade_opset: opset " << upgrade.from << " -> " << upgrade.to << ", IR " << upgrade.ir_from << " -> "
              << upgrade.ir_to << " (" << upgrade.adapted << " nodes adapted, " << upgrade.added << " added)\n";
  for (const PassStats& s : r.passes)
    if (s.applied)
      std::cout << "  " << s.name << ": nodes " << std::showpos << -s.removed.nodes << ", initializers "
                << -s.removed.initializers << ", bytes " << -s.removed.bytes << std::noshowpos << " (" << s.applied
                << " matches, " << s.rounds << " rounds, " << s.seconds() << " s)\n";
  if (verify)
    std::cout << "verified on " << ref->seeds() << " seeds: max_diff " << v.max_diff << " (class "
              << static_cast<int>(r.worst) << " tolerance)\n";
  else std::cout << (o.no_verify ? "not verified (--no-verify)\n" : "not verified (over --verify-budget)\n");
  return 0;
}

Command reg{"optimize", "Optimize a model with the pass pipeline, verify it and write it", [](CLI::App& app) {
  auto o = std::make_shared<Options>();
  app.add_option("model", o->in, "Model to optimize");
  app.add_option("-o,--output", o->out, "Where to write the optimized model");
  app.add_option("--passes", o->passes, "Run only these passes (comma-separated)")->delimiter(',');
  app.add_option("--skip", o->skip, "Do not run these passes (comma-separated)")->delimiter(',');
  app.add_flag("--list-passes", o->list, "List the passes and exit");
  app.add_option("--fold-size", o->fold_size, "Largest folded constant allowed beyond its inputs' size (default 1M)");
  app.add_option("--dim", o->dims, "Fix a symbolic dimension: name=N (repeatable)");
  app.add_option("--report", o->report, "Write a JSON report to this file");
  app.add_option("--verify-seeds", o->seeds, "Seeds for verification (default 3)");
  app.add_option("--verify-budget", o->verify_budget,
                 "Seconds verification may take: fewer seeds (never below 1) to fit, and a model whose one seed "
                 "does not fit is reported (exit 1) instead of verified")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--no-verify", o->no_verify, "Skip verification");
  app.add_flag("--force", o->force, "Overwrite an existing output, and write the model even if verification fails");
  app.add_flag("--strip-hierarchy", o->strip_hierarchy, "Remove module-hierarchy tags from the output");
  app.add_option("--threads", o->threads, "Worker threads (default: all)");
  app.add_flag("--json", o->json, "Print the report as JSON");
  app.add_option("--target-opset", o->target_opset,
                 "Upgrade the default-domain opset to N first (7.." + std::to_string(kMaxRuntimeOpset) +
                     "; never a downgrade), adapting the ops whose signature changes");
  return [o] { return run(*o); };
}};

}  // namespace
}  // namespace onnxforge::cli
