#include "api/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <sstream>

#include "api/extract_verify.h"
#include "hierarchy/hierarchy.h"
#include "hierarchy/summary.h"
#include "io/input_dims.h"
#include "io/safe_file.h"
#include "runtime/decode.h"
#include "ir/error.h"
#include "passes/pipeline.h"
#include "analysis/forensics.h"
#include "analysis/shapes.h"
#include "passes/fusion.h"
#include "passes/ort_ops.h"
#include "passes/registry.h"
#include "passes/targets.h"
#include "passes/inline.h"
#include "passes/upgrade_opset.h"
#include "runtime/runtime.h"

namespace onnxforge::api {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

std::vector<std::string> current_pass_names(std::vector<std::string> names, std::vector<std::string>* notes) {
  static const std::pair<std::string_view, std::string_view> renamed[] = {
      {"cleanup_attention", "fuse_consecutive_reshapes"},
      {"fuse_conv_relu", "annotate_conv_activation"},
  };
  for (std::string& n : names)
    for (auto [old_name, new_name] : renamed)
      if (n == old_name) {
        if (notes)
          notes->push_back("pass '" + std::string(old_name) + "' is now called '" + std::string(new_name) + "'");
        n = new_name;
      }
  return names;
}

namespace {

// The opset to upgrade to: for target ort, no higher than the highest at which ONNX Runtime 1.30
// has a kernel for every op of the model (a note says why); for generic, the target itself, with
// a note when ORT would lack an op there.
int64_t ort_capped_opset(const Model& m, const passes::TargetProfile& target, int64_t wanted,
                         std::vector<std::string>& notes) {
  const int64_t from = m.opset("");
  if (wanted <= from) return wanted;
  const std::vector<std::string> missing = passes::ort_missing(m, wanted);
  if (missing.empty() || (target.name != "ort" && target.name != "generic")) return wanted;
  const int64_t cap = passes::ort_highest_loadable_opset(m, from, wanted);
  if (target.name == "generic") {
    notes.push_back("opset " + std::to_string(wanted) + " takes " + missing[0] +
                    " to a version ONNX Runtime 1.30 has no kernel for" +
                    (cap >= from ? "; --target ort would stop at opset " + std::to_string(cap) : std::string()));
    return wanted;
  }
  const int64_t to = std::max(cap, from);
  notes.push_back("--target ort: upgrading to opset " + std::to_string(to) + ", not " + std::to_string(wanted) +
                  ": ONNX Runtime 1.30 has no kernel for " + missing[0]);
  return to;
}

}  // namespace

OptimizeOutcome optimize(const std::filesystem::path& input, const OptimizeSettings& s) {
  using namespace onnxforge::passes;
  if (s.seeds < 1 && s.verify) fail("verification needs at least 1 seed (got ", s.seeds, ")");
  // Options of a check that does not run would be dropped without a word (the CLI's names; Python
  // says verify_dims= / verify_decode= for the same settings).
  if (!s.verify && !s.verify_dims.empty())
    fail_usage(
        "--verify-dim sizes verification, which --no-verify skips: drop one of them (--dim fixes sizes in "
        "the output)");
  if (!s.verify && s.verify_decode > 0)
    fail_usage("--verify-decode verifies generation after the verification that --no-verify skips: drop one of them");
  auto t0 = Clock::now();
  auto say = [&](const std::string& line) {
    if (s.progress) s.progress(line);
  };
  if (!s.output.empty()) check_output(s.output, WriteRules(s.overwrite).protect(input));  // before any work
  RunOptions ro;
  ro.pass.evaluator = runtime_evaluator();
  if (s.fold_size) ro.pass.fold_size = *s.fold_size;
  ro.progress = s.progress;
  // --passes none: load, optional upgrade, verify, write, with no rewrite (as `zoo run --passes none`).
  const bool no_pass = std::find(s.passes.begin(), s.passes.end(), "none") != s.passes.end();
  if (no_pass && s.passes.size() > 1) fail_usage("--passes none cannot be combined with pass names");
  std::vector<const Pass*> passes =
      no_pass ? std::vector<const Pass*>{} : select_passes(current_pass_names(s.passes), current_pass_names(s.skip));
  const TargetProfile& target = target_profile(s.target);  // bad usage before any work
  if (s.target_opset) check_target_max_opset(target, *s.target_opset);
  const TargetPlan plan = plan_for_target(passes, target);
  passes = plan.passes;

  OptimizeOutcome out;
  say("loading " + input.string());
  out.model = load_model(input);
  out.strict = s.strict;
  ro.pass.dims = resolve_input_dims(s.dims, s.input_shapes, {out.model.get()});  // a dim the inputs lack is an error
  if (s.target_opset) check_target_opset(*out.model, *s.target_opset);  // before any work: a downgrade is bad input
  hier::read_tags(*out.model);  // module tags ride along in the graph tables through every pass
  double load_s = seconds_since(t0);
  std::unique_ptr<Reference> ref;
  double ref_s = 0;
  bool verify = s.verify;
  if (verify) {
    if (!runtime_available()) fail("verification needs the runtime, which this build lacks; use --no-verify");
    say("running the original model for verification");
    auto t = Clock::now();
    auto original = load_model(input);                             // a separate copy: the reference never sees a pass
    resolve_input_dims(s.dims, s.input_shapes, {original.get()});  // the same input shapes on the reference
    std::map<std::string, int64_t> verify_dims = ro.pass.dims;
    std::map<std::string, int64_t> checked;
    try {
      checked = resolve_input_dims(s.verify_dims, {}, {original.get()});
    } catch (const Error& e) {  // the same rule as --dim, said of the option the user gave
      std::string m = e.what();
      if (m.starts_with("--dim ")) m = "--verify-dim " + m.substr(6);
      throw e.reworded(m);
    }
    for (const auto& [name, size] : checked) {
      auto [it, fresh] = verify_dims.emplace(name, size);
      if (!fresh && it->second != size)
        fail_usage("--verify-dim ", name, "=", size, " contradicts --dim ", name, "=", it->second);
    }
    try {
      ref = std::make_unique<Reference>(
          *original, VerifyOptions{s.seeds, verify_dims, s.verify_budget, s.progress, s.inputs, s.input_values});
    } catch (const Error& e) {
      // A bad --inputs file or value is the user's input, reported as it is.
      if (e.kind() == Error::Kind::Usage || !e.file().empty()) throw;
      throw e
          .reworded("cannot verify: running the original model failed: " + std::string(e.what()) +
                    " (give the sizes it runs at with --verify-dim NAME=N, or skip verification with --no-verify)")
          .about(input.string());
    }
    ref_s = seconds_since(t);
    out.notes = ref->notes();
    if (ref->over_budget()) {
      out.over_budget = true;
      verify = false;
      ref.reset();
      if (!s.continue_over_budget) {
        out.report = {{"input", input.string()}, {"over_budget", true}, {"notes", out.notes}};
        return out;
      }
    }
  }
  specialise_dims(*out.model, ro.pass.dims);
  auto tp = Clock::now();
  // The architecture family (audit's fingerprint) is reported but selects no passes: the passes
  // a family would skip cost under 0.2 ms of pipelines of 30-160 ms (docs/benchmarks.md), and
  // skipping them would add a way to change the result (a hybrid misread as a CNN).
  infer_shapes(*out.model);
  const Fingerprint fp = fingerprint(*out.model);
  nlohmann::json family = {
      {"name", family_name(fp.family)}, {"reason", fp.reason}, {"passes_skipped", nlohmann::json::array()}};
  // target_opset: the upgrade runs first, on its own (class 0), so the pipeline's passes see the
  // new opset; the bisection below replays it first too.
  UpgradeReport upgrade;
  std::vector<const Pass*> bisect = passes;
  std::optional<int64_t> target_opset = s.target_opset;
  if (target_opset) target_opset = ort_capped_opset(*out.model, target, *target_opset, out.notes);
  if (target_opset) {
    say("upgrading to opset " + std::to_string(*target_opset));
    RunOptions uo = ro;
    uo.pass.target_opset = *target_opset;
    uo.pass.upgrade_report = &upgrade;
    run_passes(*out.model, pre_passes(), uo);
    if (upgrade.to == 0) {  // already at the target: nothing ran
      upgrade.from = upgrade.to = out.model->opset("");
      upgrade.ir_from = upgrade.ir_to = out.model->ir_version;
    }
    bisect.insert(bisect.begin(), &upgrade_opset_pass());
    ro.pass.target_opset = *target_opset;  // for the bisection's fresh loads
  }
  InlineReport inlined;
  if (s.inline_functions) {
    say("expanding local functions");
    inlined = inline_model_functions(*out.model);
    bisect.insert(bisect.begin() + (target_opset ? 1 : 0), &inline_functions_pass());
  }
  out.run = run_passes(*out.model, passes, ro);
  double passes_s = seconds_since(tp);

  out.report = stats_json(out.run);
  if (std::string grew = growth_note(out.run); !grew.empty()) out.notes.push_back(std::move(grew));
  out.report["input"] = input.string();
  out.report["target"] = {{"name", target.name},
                          {"max_opset", target.max_opset},
                          {"fusions_dropped", plan.dropped},
                          {"decompositions", plan.decompositions},
                          {"no_decomposition", plan.no_decomposition}};
  // What the target lacks and the model still holds, with the reason (a decomposition that
  // refused the node's form): said, never silently shipped.
  const std::vector<std::string> left = left_for_target(*out.model, target);
  out.report["target"]["left"] = left;
  out.notes.insert(out.notes.end(), left.begin(), left.end());
  if (target.name == "ort") {  // what ONNX Runtime 1.30 could not load (passes/ort_ops.h): not written
    out.target_missing = ort_missing(*out.model);
    out.report["target"]["ort_missing"] = out.target_missing;
  }
  if (const int64_t opset = out.model->opset(""); opset > target.max_opset)
    out.report["target"]["note"] = "the model is at opset " + std::to_string(opset) + ", above what target '" +
                                   target.name + "' accepts (" + std::to_string(target.max_opset) +
                                   "); onnxforge never downgrades";
  if (!s.target_opset) {
    // The census of the result: blocks still unfused because the model's opset lacks their op,
    // counted only for ops the target accepts at an opset it takes.
    infer_shapes(*out.model);
    std::vector<CensusRow> rows;
    for (CensusRow& r : fusion_census(*out.model, ro.pass))
      if (target.accepts(r.op) && r.min_opset <= target.max_opset) rows.push_back(std::move(r));
    out.hint = upgrade_hint(rows);
  }
  out.report["hint"] = out.hint;
  if (s.inline_functions)
    out.report["inline_functions"] = {
        {"calls", inlined.calls}, {"nodes_added", inlined.nodes}, {"functions_dropped", inlined.dropped}};
  out.report["family"] = std::move(family);
  if (s.target_opset) {
    nlohmann::json by = nlohmann::json::object();
    for (auto& [k, n] : upgrade.by_adapter) by[k] = n;
    out.report["upgrade"] = {{"opset_from", upgrade.from},
                             {"opset_to", upgrade.to},
                             {"ir_from", upgrade.ir_from},
                             {"ir_to", upgrade.ir_to},
                             {"nodes_adapted", upgrade.adapted},
                             {"nodes_added", upgrade.added},
                             {"adapters", by}};
  }
  if (!out.notes.empty()) out.report["notes"] = out.notes;
  if (out.over_budget) out.report["over_budget"] = true;
  double verify_s = 0;
  if (verify) {
    say("verifying");
    auto t = Clock::now();
    out.verified = true;
    out.seeds = ref->seeds();
    out.verification = ref->check(*out.model, tolerance_of(out.run.worst));
    verify_s = seconds_since(t);
    out.report["verification"] = verify_json(out.verification);
    out.report["verification"]["seeds"] = ref->seeds();
    if (out.verification.ok && s.verify_decode > 0) {
      say("verifying generation: a prefill and " + std::to_string(s.verify_decode) + " decode steps");
      const Tolerance tol = tolerance_of(out.run.worst);
      auto original = load_model(input);
      rt::DecodeReport d = rt::verify_decode(
          *original, *out.model, {.steps = s.verify_decode, .atol = tol.abs, .rtol = tol.rel, .dims = ro.pass.dims});
      out.report["verification"]["decode"] = d.to_json();
      out.decode = d.to_text();
      if (!d.pass) {
        out.verification.ok = false;
        out.verification.error = d.to_text();
      }
    }
    if (!out.verification.ok) {
      say("verification failed; finding the first pass that breaks the model");
      VerifyResult first;
      int k = first_breaking_pass(input, bisect, ro, *ref, &first);
      out.breaking_pass =
          k >= 0 ? bisect[static_cast<size_t>(k)]->name() : "the combination of passes (no single pass alone)";
      out.report["breaking_pass"] = out.breaking_pass;
    }
  }
  out.report["seconds"] = {
      {"load", load_s}, {"reference", ref_s}, {"passes", passes_s}, {"verify", verify_s}, {"total", seconds_since(t0)}};
  return out;
}

std::string verification_failure_text(const OptimizeOutcome& o) {
  const auto& v = o.verification;
  std::ostringstream os;
  os << "the optimized model does not match the original (max_diff " << v.max_diff
     << (v.error.empty() ? "" : ", " + v.error) << ")\n";
  for (const passes::OutputDiff& d : v.outputs)
    if (!d.ok) os << "  output '" << d.name << "': max_abs " << d.max_abs << " " << d.problem << "\n";
  os << "first breaking pass: " << o.breaking_pass;
  return os.str();
}

SaveStats write_optimized(OptimizeOutcome& o, const std::filesystem::path& output, bool strip_hierarchy,
                          const SaveOptions& options) {
  auto t = Clock::now();
  if (strip_hierarchy)
    hier::strip_hierarchy(*o.model);
  else
    hier::sync_tags_to_metadata(*o.model);
  SaveStats saved = save_model(*o.model, output, options);  // atomic: replaces an existing output only when complete
  double save_s = seconds_since(t);
  o.report["output"] = output.string();
  o.report["seconds"]["save"] = save_s;
  o.report["seconds"]["total"] = o.report["seconds"]["total"].get<double>() + save_s;
  o.report["saved"] = {{"model_bytes", saved.model_bytes},
                       {"external_bytes", saved.external_bytes},
                       {"tensors_verbatim", saved.tensors_verbatim},
                       {"tensors_reencoded", saved.tensors_reencoded}};
  return saved;
}

nlohmann::json list_passes() {
  nlohmann::json j = nlohmann::json::array();
  auto row = [](const passes::Pass& p, bool in_pipeline) {
    return nlohmann::json{{"name", p.name()},
                          {"accuracy_class", static_cast<int>(p.accuracy())},
                          {"summary", p.summary()},
                          {"default", in_pipeline}};
  };
  for (const passes::Rule& r : passes::rules()) {
    nlohmann::json p = row(*r.pass, true);
    if (r.fusion) {
      p["emits"] = r.fusion->info().op;
      p["min_opset"] = r.fusion->info().min_opset;
    }
    if (r.inverse) p["inverse"] = r.inverse->name();
    j.push_back(std::move(p));
  }
  for (const passes::Pass* p : passes::decomposition_passes()) j.push_back(row(*p, false));
  return j;
}

namespace {

struct Timings {
  std::vector<double> ms;
  double median() const {
    auto v = ms;
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  }
  double min() const { return ms.empty() ? 0 : *std::min_element(ms.begin(), ms.end()); }
};

// The paired ratio of two alternating series: the median of the per-pair log ratios, with the
// distribution-free 95% confidence interval of that median (order statistics k and n+1-k, k
// from the binomial(n, 1/2) tail; the whole range below 6 pairs). Pairs share the machine's
// momentary load, so their ratio is steady where either series alone is not.
nlohmann::json paired_ratio(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> l;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    if (a[i] > 0 && b[i] > 0) l.push_back(std::log(b[i] / a[i]));
  if (l.empty()) return nullptr;
  std::sort(l.begin(), l.end());
  const size_t n = l.size();
  const double med = n % 2 ? l[n / 2] : 0.5 * (l[n / 2 - 1] + l[n / 2]);
  size_t k = 0;  // 1-based rank of the lower bound; 0: none below the range
  if (n > 50) {
    k = static_cast<size_t>(
        std::max(0.0, std::floor(0.5 * static_cast<double>(n) - 0.98 * std::sqrt(static_cast<double>(n)))));
  } else {
    double tail = 0, term = std::pow(0.5, static_cast<double>(n));  // P(X = i), i = 0, 1, ...
    for (size_t i = 0; i < n && tail + term <= 0.025; ++i) {
      tail += term;
      k = i + 1;
      term *= static_cast<double>(n - i) / static_cast<double>(i + 1);
    }
  }
  const double lo = k >= 1 ? l[k - 1] : l.front(), hi = k >= 1 ? l[n - k] : l.back();
  return {{"n", n}, {"ratio", std::exp(med)}, {"log_ratio", med}, {"ci95", {std::exp(lo), std::exp(hi)}}};
}

double process_cpu_ms() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
}

}  // namespace

nlohmann::json bench(const std::filesystem::path& model, const BenchSettings& o) {
  if (o.iters < 0 || o.warmup < 0 || !(o.min_time >= 0)) fail("bench: iters, warmup and min_time must not be negative");
  auto ma = load_model(model);
  std::unique_ptr<Model> mb = o.vs.empty() ? nullptr : load_model(o.vs);
  std::vector<Model*> models{ma.get()};
  if (mb) models.push_back(mb.get());
  const std::map<std::string, int64_t> dims = resolve_input_dims(o.dims, o.input_shapes, models);
  rt::SessionOptions so;
  so.profile = o.profile;
  so.channels_last = !o.nchw;
  rt::Session sa(*ma, so);
  rt::SessionOptions so_b;
  so_b.channels_last = !o.vs_nchw;
  std::unique_ptr<rt::Session> sb = mb ? std::make_unique<rt::Session>(*mb, so_b) : nullptr;
  const rt::SeedInputs given(ma->main(), sa.input_values(), dims,
                             rt::UserInputs{.specs = o.input_files, .values = o.input_values, .arrays = o.inputs});
  auto inputs = given.make(0, 0);
  Timings a, b, cpu_a, cpu_b;  // wall and process CPU time (all threads) per run
  auto time_one = [&](const rt::Session& s, Timings* wall, Timings* cpu) {
    const double c0 = process_cpu_ms();
    auto t0 = Clock::now();
    auto outs = s.run(inputs);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count(),
                 cpu_ms = process_cpu_ms() - c0;
    if (wall) {
      wall->ms.push_back(ms);
      cpu->ms.push_back(cpu_ms);
    }
  };
  for (int i = 0; i < std::max(o.warmup, 1); ++i) {
    time_one(sa, nullptr, nullptr);
    if (sb) time_one(*sb, nullptr, nullptr);
  }
  auto start = Clock::now();
  for (int i = 0;; ++i) {
    if (o.iters > 0 ? i >= o.iters : (i >= 3 && seconds_since(start) >= o.min_time)) break;
    // Alternate run by run so drift (thermal, other load) hits both models alike, and flip the
    // order every pair so that neither model always runs second.
    if (sb && i % 2) time_one(*sb, &b, &cpu_b);
    time_one(sa, &a, &cpu_a);
    if (sb && !(i % 2)) time_one(*sb, &b, &cpu_b);
  }
  nlohmann::json j;
  j["model"] = model.string();
  j["threads"] = o.threads;
  j["iters"] = a.ms.size();
  j["median_ms"] = a.median();
  j["min_ms"] = a.min();
  j["cpu_median_ms"] = cpu_a.median();
  j["steps"] = sa.step_count();
  j["channels_last_steps"] = sa.channels_last_count();
  j["notes"] = given.notes();
  if (sb) {
    j["vs"] = {
        {"model", o.vs.string()}, {"median_ms", b.median()}, {"min_ms", b.min()}, {"cpu_median_ms", cpu_b.median()}};
    j["ratio"] = b.median() / a.median();
    j["paired"] = paired_ratio(a.ms, b.ms);  // what the zoo's gate reads
    j["cpu_paired"] = paired_ratio(cpu_a.ms, cpu_b.ms);
  }
  if (o.profile) {
    const auto runs = static_cast<double>(a.ms.size() + static_cast<size_t>(std::max(o.warmup, 1)));
    for (const auto& p : sa.profile())
      j["profile"].push_back({{"op", p.op}, {"ms_per_run", p.ms / runs}, {"nodes", p.nodes}});
    for (const auto& p : sa.step_profile())
      j["steps_profile"].push_back(
          {{"node", p.node}, {"op", p.op}, {"ms_per_run", p.ms / runs}, {"path", p.path}, {"depth", p.depth}});
  }
  return j;
}

nlohmann::json hierarchy(const std::filesystem::path& path, const std::filesystem::path& sidecar, bool use_names,
                         bool consumers) {
  auto model = load_model(path);
  hier::ReadOptions ro;
  ro.sidecar = sidecar;
  ro.use_names = use_names;
  hier::TagReport report = hier::read_tags(*model, ro);
  nlohmann::json j = hier::summarize_hierarchy(*model, report).to_json();
  j["model"] = path.string();
  if (consumers) j["consumers"] = hier::consuming_modules(*model);
  return j;
}

ExtractOutcome extract(const std::filesystem::path& path, const std::string& module,
                       const std::filesystem::path& output, const ExtractSettings& o) {
  WriteRules rules(o.overwrite);
  rules.protect(path);
  SaveOptions so;
  so.overwrite = o.overwrite;
  so.inputs = rules.inputs;
  if (o.external_data) so.placement = WeightPlacement::External;
  {  // the whole output set before any work (io/safe_file.h)
    std::vector<std::filesystem::path> set{output};
    std::vector<std::string> what{"output"};
    if (o.external_data) set.push_back(external_data_path(output, so)), what.push_back("external-data file");
    if (!o.expose_cuts.empty()) {
      set.push_back(o.expose_cuts), what.push_back("--expose-cuts");
      if (o.external_data) set.push_back(external_data_path(o.expose_cuts, so)), what.push_back("external-data file");
    }
    check_outputs(set, what, rules);
  }
  auto t0 = Clock::now();
  auto model = load_model(path);
  std::vector<std::string> dims;  // checked against the model's inputs now, not after the cut is written
  for (const auto& [k, v] : resolve_input_dims(parse_dim_specs(o.dims), o.input_shapes, {model.get()}))
    dims.push_back(k + "=" + std::to_string(v));
  hier::ReadOptions ro;
  ro.sidecar = o.sidecar;
  hier::read_tags(*model, ro);
  ExtractOutcome out;
  out.cut = hier::extract_module(*model, module);
  out.saved = save_model(*out.cut.model, output, so);
  if (!o.expose_cuts.empty()) save_model(*hier::with_cuts_exposed(*model, out.cut), o.expose_cuts, so);
  out.seconds = seconds_since(t0);
  std::vector<hier::OutputCheck> checks;
  if (o.verify) checks = hier::verify_extraction(*model, out.cut, o.seeds, dims);
  out.verified = o.verify;
  out.ok = std::all_of(checks.begin(), checks.end(), [](auto& c) { return c.max_diff == 0; });
  const hier::Extraction& cut = out.cut;
  nlohmann::json& j = out.report;
  j = {{"model", path.string()},
       {"module", module},
       {"output", output.string()},
       {"nodes", cut.nodes},
       {"inputs", cut.inputs},
       {"outputs", cut.outputs},
       {"initializers", cut.initializers},
       {"initializer_bytes", cut.initializer_bytes},
       {"model_bytes", out.saved.model_bytes},
       {"external_bytes", out.saved.external_bytes},
       {"tensors_verbatim", out.saved.tensors_verbatim},
       {"seconds", out.seconds}};
  if (!o.expose_cuts.empty()) j["expose_cuts"] = o.expose_cuts.string();
  if (o.verify) {
    nlohmann::json v = nlohmann::json::array();
    double worst = 0;
    for (auto& c : checks) {
      v.push_back({{"output", c.name}, {"max_diff", c.max_diff}, {"bit_exact", c.bit_exact}});
      worst = std::max(worst, c.max_diff);
    }
    j["verify"] = {{"seeds", o.seeds}, {"outputs", v}, {"max_diff", worst}, {"pass", out.ok}};
  }
  return out;
}

}  // namespace onnxforge::api
