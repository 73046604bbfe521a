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

// The cap on the opset upgrade: for target ort, the highest opset at which ONNX Runtime 1.30 has
// a kernel for every op of the model (a note says why); for generic none, with a note when ORT
// would lack an op at the opset asked for.
passes::OpsetCap ort_opset_cap(const Model& m, const passes::TargetProfile& target, int64_t wanted,
                               std::vector<std::string>& notes) {
  const int64_t from = m.opset("");
  if (wanted <= from) return {};
  const std::vector<std::string> missing = passes::ort_missing(m, wanted);
  if (missing.empty() || (target.name != "ort" && target.name != "generic")) return {};
  const int64_t cap = passes::ort_highest_loadable_opset(m, from, wanted);
  if (target.name == "generic") {
    notes.push_back("opset " + std::to_string(wanted) + " takes " + missing[0] +
                    " to a version ONNX Runtime 1.30 has no kernel for" +
                    (cap >= from ? "; --target ort would stop at opset " + std::to_string(cap) : std::string()));
    return {};
  }
  const int64_t to = std::max(cap, from);
  notes.push_back("--target ort: upgrading to opset " + std::to_string(to) + ", not " + std::to_string(wanted) +
                  ": ONNX Runtime 1.30 has no kernel for " + missing[0]);
  return {to, "ONNX Runtime 1.30 has no kernel for " + missing[0]};
}

// One `optimize` as named steps: load, reference, prepare (upgrade, inline), pipeline, report,
// verify. The steps share this state; the outcome collects what they return.
struct OptimizeJob {
  const std::filesystem::path& input;
  const OptimizeSettings& s;
  OptimizeOutcome& out;
  Clock::time_point t0 = Clock::now();
  passes::RunOptions ro = {};
  const passes::TargetProfile* target = nullptr;
  passes::TargetPlan plan = {};
  std::unique_ptr<passes::Reference> ref = {};
  bool verify = false;
  std::vector<passes::PreStep> steps = {};  // before the pipeline; the bisection replays them
  double load_s = 0, ref_s = 0, passes_s = 0, verify_s = 0;

  void say(const std::string& line) const {
    if (s.progress) s.progress(line);
  }
};

// Options of a check that does not run would be dropped without a word (the CLI's names; Python
// says verify_dims= / verify_decode= for the same settings).
void check_settings(const OptimizeSettings& s) {
  if (s.seeds < 1 && s.verify) fail("verification needs at least 1 seed (got ", s.seeds, ")");
  if (!s.verify && !s.verify_dims.empty())
    fail_usage(
        "--verify-dim sizes verification, which --no-verify skips: drop one of them (--dim fixes sizes in "
        "the output)");
  if (!s.verify && s.verify_decode > 0)
    fail_usage("--verify-decode verifies generation after the verification that --no-verify skips: drop one of them");
}

// The passes and the target's plan, and the output checked: bad usage before any work.
void plan(OptimizeJob& j) {
  using namespace passes;
  const OptimizeSettings& s = j.s;
  if (!s.output.empty()) check_output(s.output, WriteRules(s.overwrite).protect(j.input));
  j.ro.pass.evaluator = runtime_evaluator();
  if (s.fold_size) j.ro.pass.fold_size = *s.fold_size;
  j.ro.progress = s.progress;
  // --passes none: load, optional upgrade, verify, write, with no rewrite (as `zoo run --passes none`).
  const bool no_pass = std::find(s.passes.begin(), s.passes.end(), "none") != s.passes.end();
  if (no_pass && s.passes.size() > 1) fail_usage("--passes none cannot be combined with pass names");
  const std::vector<const Pass*> passes =
      no_pass ? std::vector<const Pass*>{} : select_passes(current_pass_names(s.passes), current_pass_names(s.skip));
  j.target = &target_profile(s.target);
  if (s.target_opset) check_target_max_opset(*j.target, *s.target_opset);
  j.plan = plan_for_target(passes, *j.target);
}

void load(OptimizeJob& j) {
  j.say("loading " + j.input.string());
  j.out.model = load_model(j.input);
  j.out.strict = j.s.strict;
  j.ro.pass.dims =
      resolve_input_dims(j.s.dims, j.s.input_shapes, {j.out.model.get()});            // a dim the inputs lack: an error
  if (j.s.target_opset) passes::check_target_opset(*j.out.model, *j.s.target_opset);  // a downgrade is bad input
  hier::read_tags(*j.out.model);  // module tags ride along in the graph tables through every pass
  j.load_s = seconds_since(j.t0);
}

// The original model's runs on a separate load (the reference never sees a pass). Returns false
// when one seed does not fit the budget and the caller asked to stop there.
bool reference(OptimizeJob& j) {
  using namespace passes;
  const OptimizeSettings& s = j.s;
  j.verify = s.verify;
  if (!j.verify) return true;
  if (!runtime_available()) fail("verification needs the runtime, which this build lacks; use --no-verify");
  j.say("running the original model for verification");
  auto t = Clock::now();
  auto original = load_model(j.input);
  resolve_input_dims(s.dims, s.input_shapes, {original.get()});  // the same input shapes on the reference
  std::map<std::string, int64_t> verify_dims = j.ro.pass.dims;
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
    j.ref = std::make_unique<Reference>(
        *original, VerifyOptions{s.seeds, verify_dims, s.verify_budget, s.progress, s.inputs, s.input_values});
  } catch (const Error& e) {
    // A bad --inputs file or value is the user's input, reported as it is.
    if (e.kind() == Error::Kind::Usage || !e.file().empty()) throw;
    throw e
        .reworded("cannot verify: running the original model failed: " + std::string(e.what()) +
                  " (give the sizes it runs at with --verify-dim NAME=N, or skip verification with --no-verify)")
        .about(j.input.string());
  }
  j.ref_s = seconds_since(t);
  j.out.notes = j.ref->notes();
  if (!j.ref->over_budget()) return true;
  j.out.over_budget = true;
  j.verify = false;
  j.ref.reset();
  if (s.continue_over_budget) return true;
  j.out.report = {{"input", j.input.string()}, {"over_budget", true}, {"notes", j.out.notes}};
  return false;
}

// The steps before the pipeline, class 0: the opset upgrade (so the pipeline's passes see the new
// opset) and the expansion of local functions; the bisection of a failed check replays them.
void prepare(OptimizeJob& j, InlineReport& inlined) {
  using namespace passes;
  if (j.s.target_opset) {
    const OpsetCap cap = ort_opset_cap(*j.out.model, *j.target, *j.s.target_opset, j.out.notes);
    const std::optional<int64_t> target = j.s.target_opset;
    j.say("upgrading to opset " + std::to_string(std::max(std::min(*target, cap.opset), j.out.model->opset(""))));
    j.out.upgrade = upgrade_step(*j.out.model, target, cap);
    j.steps.push_back({"upgrade_opset", [target, cap](Model& m) { return upgrade_step(m, target, cap).has_value(); }});
  }
  if (j.s.inline_functions) {
    j.say("expanding local functions");
    inlined = inline_model_functions(*j.out.model);
    j.steps.push_back({"inline_functions", [](Model& m) {
                         const bool any = !m.functions.empty();
                         inline_model_functions(m);
                         return any;
                       }});
  }
}

// The report of the pipeline's result against the target: what it lacks and the model still
// holds, what ORT cannot load, and (without an upgrade) what an upgrade would unlock.
void report_target(OptimizeJob& j) {
  using namespace passes;
  OptimizeOutcome& out = j.out;
  const TargetProfile& target = *j.target;
  out.report["target"] = {{"name", target.name},
                          {"max_opset", target.max_opset},
                          {"fusions_dropped", j.plan.dropped},
                          {"decompositions", j.plan.decompositions},
                          {"no_decomposition", j.plan.no_decomposition}};
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
  if (!j.s.target_opset) {
    // The census of the result: blocks still unfused because the model's opset lacks their op,
    // counted only for ops the target accepts at an opset it takes.
    infer_shapes(*out.model);
    std::vector<CensusRow> rows;
    for (CensusRow& r : fusion_census(*out.model, j.ro.pass))
      if (target.accepts(r.op) && r.min_opset <= target.max_opset) rows.push_back(std::move(r));
    out.hint = upgrade_hint(rows);
  }
  out.report["hint"] = out.hint;
}

// specialise_dims, the architecture family, the prepared model through the pipeline, the report.
void run_pipeline(OptimizeJob& j) {
  using namespace passes;
  OptimizeOutcome& out = j.out;
  specialise_dims(*out.model, j.ro.pass.dims);
  auto tp = Clock::now();
  // The architecture family (audit's fingerprint) is reported but selects no passes: the passes
  // a family would skip cost under 0.2 ms of pipelines of 30-160 ms (docs/benchmarks.md), and
  // skipping them would add a way to change the result (a hybrid misread as a CNN).
  infer_shapes(*out.model);
  const Fingerprint fp = fingerprint(*out.model);
  nlohmann::json family = {
      {"name", family_name(fp.family)}, {"reason", fp.reason}, {"passes_skipped", nlohmann::json::array()}};
  InlineReport inlined;
  prepare(j, inlined);
  out.run = run_passes(*out.model, j.plan.passes, j.ro);
  j.passes_s = seconds_since(tp);

  out.report = stats_json(out.run);
  if (std::string grew = growth_note(out.run); !grew.empty()) out.notes.push_back(std::move(grew));
  out.report["input"] = j.input.string();
  report_target(j);
  if (j.s.inline_functions)
    out.report["inline_functions"] = {
        {"calls", inlined.calls}, {"nodes_added", inlined.nodes}, {"functions_dropped", inlined.dropped}};
  out.report["family"] = std::move(family);
  if (out.upgrade) out.report["upgrade"] = upgrade_json(*out.upgrade);
  if (!out.notes.empty()) out.report["notes"] = out.notes;
  if (out.over_budget) out.report["over_budget"] = true;
}

// The result against the reference (and generation, when asked); on a failure, the first step
// or pass that breaks the model alone.
void verify(OptimizeJob& j) {
  using namespace passes;
  if (!j.verify) return;
  OptimizeOutcome& out = j.out;
  const OptimizeSettings& s = j.s;
  j.say("verifying");
  auto t = Clock::now();
  out.verified = true;
  out.seeds = j.ref->seeds();
  out.verification = j.ref->check(*out.model, tolerance_of(out.run.worst));
  j.verify_s = seconds_since(t);
  out.report["verification"] = verify_json(out.verification);
  out.report["verification"]["seeds"] = j.ref->seeds();
  if (out.verification.ok && s.verify_decode > 0) {
    j.say("verifying generation: a prefill and " + std::to_string(s.verify_decode) + " decode steps");
    const Tolerance tol = tolerance_of(out.run.worst);
    auto original = load_model(j.input);
    rt::DecodeReport d = rt::verify_decode(
        *original, *out.model, {.steps = s.verify_decode, .atol = tol.abs, .rtol = tol.rel, .dims = j.ro.pass.dims});
    out.report["verification"]["decode"] = d.to_json();
    out.decode = d.to_text();
    if (!d.pass) {
      out.verification.ok = false;
      out.verification.error = d.to_text();
    }
  }
  if (!out.verification.ok) {
    j.say("verification failed; finding the first pass that breaks the model");
    VerifyResult first;
    const std::string name = first_breaking_pass(j.input, j.steps, j.plan.passes, j.ro, *j.ref, &first);
    out.breaking_pass = name.empty() ? "the combination of passes (no single pass alone)" : name;
    out.report["breaking_pass"] = out.breaking_pass;
  }
}

}  // namespace

OptimizeOutcome optimize(const std::filesystem::path& input, const OptimizeSettings& s) {
  check_settings(s);
  OptimizeOutcome out;
  OptimizeJob j{input, s, out};
  plan(j);
  load(j);
  if (!reference(j)) return out;
  run_pipeline(j);
  verify(j);
  out.report["seconds"] = {{"load", j.load_s},
                           {"reference", j.ref_s},
                           {"passes", j.passes_s},
                           {"verify", j.verify_s},
                           {"total", seconds_since(j.t0)}};
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
