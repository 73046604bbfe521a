#include "api/engine.h"

#include <algorithm>
#include <chrono>
#include <sstream>

#include "hierarchy/extract_verify.h"
#include "hierarchy/hierarchy.h"
#include "hierarchy/summary.h"
#include "io/input_dims.h"
#include "ir/error.h"
#include "passes/pipeline.h"
#include "analysis/forensics.h"
#include "analysis/shapes.h"
#include "passes/fusion.h"
#include "passes/registry.h"
#include "passes/targets.h"
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
        if (notes) notes->push_back("pass '" + std::string(old_name) + "' is now called '" + std::string(new_name) + "'");
        n = new_name;
      }
  return names;
}

OptimizeOutcome optimize(const std::filesystem::path& input, const OptimizeSettings& s) {
  using namespace onnxforge::passes;
  if (s.seeds < 1 && s.verify) fail("verification needs at least 1 seed (got ", s.seeds, ")");
  auto t0 = Clock::now();
  auto say = [&](const std::string& line) {
    if (s.progress) s.progress(line);
  };
  if (!s.output.empty()) check_overwrite(s.output, s.overwrite);  // before any work
  RunOptions ro;
  ro.pass.evaluator = runtime_evaluator();
  if (s.fold_size) ro.pass.fold_size = *s.fold_size;
  ro.progress = s.progress;
  std::vector<const Pass*> passes = select_passes(current_pass_names(s.passes), current_pass_names(s.skip));
  const TargetProfile& target = target_profile(s.target);  // bad usage before any work
  if (s.target_opset) check_target_max_opset(target, *s.target_opset);
  const TargetPlan plan = plan_for_target(passes, target);
  passes = plan.passes;

  OptimizeOutcome out;
  say("loading " + input.string());
  out.model = load_model(input);
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
    auto original = load_model(input);  // a separate copy: the reference never sees a pass
    resolve_input_dims(s.dims, s.input_shapes, {original.get()});  // the same input shapes on the reference
    try {
      ref = std::make_unique<Reference>(*original, VerifyOptions{s.seeds, ro.pass.dims, s.verify_budget, s.progress});
    } catch (const Error& e) {
      fail("cannot verify: running the original model failed: ", e.what(), "\n(use --no-verify to skip verification)");
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
  // The architecture family (audit's fingerprint: tables only, no weights) is reported, but it
  // does not select passes. Measured (2026-11-26, 5 runs, 2 threads, docs/benchmarks.md): the
  // passes a family would skip cost a median 0.016 ms on resnet50 (norm/attention/rotary/QKV
  // matchers) and 0.12 ms on bert_base (conv/RMSNorm/rotary/Swish) — anchored passes that find
  // nothing sit out later rounds — against pipelines of 30 ms and 161 ms whose run-to-run spread
  // is 24 ms and 82 ms. Skipping them saves nothing measurable and would add a way to change
  // the result (a hybrid misread as a CNN).
  infer_shapes(*out.model);
  const Fingerprint fp = fingerprint(*out.model);
  nlohmann::json family = {{"name", family_name(fp.family)}, {"reason", fp.reason},
                           {"passes_skipped", nlohmann::json::array()}};
  // target_opset: the upgrade runs first, on its own (class 0), so the pipeline's passes see the
  // new opset; the bisection below replays it first too.
  UpgradeReport upgrade;
  std::vector<const Pass*> bisect = passes;
  if (s.target_opset) {
    say("upgrading to opset " + std::to_string(*s.target_opset));
    RunOptions uo = ro;
    uo.pass.target_opset = *s.target_opset;
    uo.pass.upgrade_report = &upgrade;
    run_passes(*out.model, pre_passes(), uo);
    if (upgrade.to == 0) {  // already at the target: nothing ran
      upgrade.from = upgrade.to = out.model->opset("");
      upgrade.ir_from = upgrade.ir_to = out.model->ir_version;
    }
    bisect.insert(bisect.begin(), &upgrade_opset_pass());
    ro.pass.target_opset = *s.target_opset;  // for the bisection's fresh loads
  }
  out.run = run_passes(*out.model, passes, ro);
  double passes_s = seconds_since(tp);

  out.report = stats_json(out.run);
  if (std::string grew = growth_note(out.run); !grew.empty()) out.notes.push_back(std::move(grew));
  out.report["input"] = input.string();
  out.report["target"] = {{"name", target.name}, {"max_opset", target.max_opset},
                          {"fusions_dropped", plan.dropped}, {"decompositions", plan.decompositions},
                          {"no_decomposition", plan.no_decomposition}};
  // What the target lacks and the model still holds, with the reason (a decomposition that
  // refused the node's form): said, never silently shipped.
  const std::vector<std::string> left = left_for_target(*out.model, target);
  out.report["target"]["left"] = left;
  out.notes.insert(out.notes.end(), left.begin(), left.end());
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
  out.report["family"] = std::move(family);
  if (s.target_opset) {
    nlohmann::json by = nlohmann::json::object();
    for (auto& [k, n] : upgrade.by_adapter) by[k] = n;
    out.report["upgrade"] = {{"opset_from", upgrade.from}, {"opset_to", upgrade.to}, {"ir_from", upgrade.ir_from},
                             {"ir_to", upgrade.ir_to}, {"nodes_adapted", upgrade.adapted},
                             {"nodes_added", upgrade.added}, {"adapters", by}};
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
    if (!out.verification.ok) {
      say("verification failed; finding the first pass that breaks the model");
      VerifyResult first;
      int k = first_breaking_pass(input, bisect, ro, *ref, &first);
      out.breaking_pass = k >= 0 ? bisect[static_cast<size_t>(k)]->name() : "the combination of passes (no single pass alone)";
      out.report["breaking_pass"] = out.breaking_pass;
    }
  }
  out.report["seconds"] = {{"load", load_s}, {"reference", ref_s}, {"passes", passes_s}, {"verify", verify_s},
                           {"total", seconds_since(t0)}};
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
  if (strip_hierarchy) hier::strip_hierarchy(*o.model);
  else hier::sync_tags_to_metadata(*o.model);
  SaveStats saved = save_model(*o.model, output, options);  // atomic: replaces an existing output only when complete
  double save_s = seconds_since(t);
  o.report["output"] = output.string();
  o.report["seconds"]["save"] = save_s;
  o.report["seconds"]["total"] = o.report["seconds"]["total"].get<double>() + save_s;
  o.report["saved"] = {{"model_bytes", saved.model_bytes}, {"external_bytes", saved.external_bytes},
                       {"tensors_verbatim", saved.tensors_verbatim}, {"tensors_reencoded", saved.tensors_reencoded}};
  return saved;
}

nlohmann::json list_passes() {
  nlohmann::json j = nlohmann::json::array();
  for (const passes::Pass* p : passes::all_passes())
    j.push_back({{"name", p->name()}, {"accuracy_class", static_cast<int>(p->accuracy())}, {"summary", p->summary()}});
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
  rt::InputPlan plan;
  if (!o.input_files.empty() && !o.inputs.empty()) fail("bench: inputs come either from files or from memory");
  auto inputs = o.input_files.empty() ? rt::prepare_inputs(ma->main(), sa.input_values(), dims, o.inputs, 0, plan)
                                      : rt::prepare_inputs(ma->main(), sa.input_values(), dims, o.input_files, 0, plan);
  auto time_one = [&](const rt::Session& s) {
    auto t0 = Clock::now();
    auto outs = s.run(inputs);
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  for (int i = 0; i < std::max(o.warmup, 1); ++i) {
    time_one(sa);
    if (sb) time_one(*sb);
  }
  Timings a, b;
  auto start = Clock::now();
  for (int i = 0;; ++i) {
    if (o.iters > 0 ? i >= o.iters : (i >= 3 && seconds_since(start) >= o.min_time)) break;
    // Alternate run by run so drift (thermal, other load) hits both models alike.
    a.ms.push_back(time_one(sa));
    if (sb) b.ms.push_back(time_one(*sb));
  }
  nlohmann::json j;
  j["model"] = model.string();
  j["threads"] = o.threads;
  j["iters"] = a.ms.size();
  j["median_ms"] = a.median();
  j["min_ms"] = a.min();
  j["steps"] = sa.step_count();
  j["channels_last_steps"] = sa.channels_last_count();
  j["notes"] = plan.notes;
  if (sb) {
    j["vs"] = {{"model", o.vs.string()}, {"median_ms", b.median()}, {"min_ms", b.min()}};
    j["ratio"] = b.median() / a.median();
  }
  if (o.profile) {
    const auto runs = static_cast<double>(a.ms.size() + static_cast<size_t>(std::max(o.warmup, 1)));
    for (const auto& p : sa.profile())
      j["profile"].push_back({{"op", p.op}, {"ms_per_run", p.ms / runs}, {"nodes", p.nodes}});
    for (const auto& p : sa.step_profile())
      j["steps_profile"].push_back({{"node", p.node}, {"op", p.op}, {"ms_per_run", p.ms / runs}, {"path", p.path}, {"depth", p.depth}});
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

ExtractOutcome extract(const std::filesystem::path& path, const std::string& module, const std::filesystem::path& output,
                       const ExtractSettings& o) {
  check_overwrite(output, o.overwrite);  // before any work
  if (!o.expose_cuts.empty()) check_overwrite(o.expose_cuts, o.overwrite);
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
  SaveOptions so;
  if (o.external_data) so.placement = WeightPlacement::External;
  out.saved = save_model(*out.cut.model, output, so);
  if (!o.expose_cuts.empty()) save_model(*hier::with_cuts_exposed(*model, out.cut), o.expose_cuts, so);
  out.seconds = seconds_since(t0);
  std::vector<hier::OutputCheck> checks;
  if (o.verify) checks = hier::verify_extraction(*model, out.cut, o.seeds, dims);
  out.verified = o.verify;
  out.ok = std::all_of(checks.begin(), checks.end(), [](auto& c) { return c.max_diff == 0; });
  const hier::Extraction& cut = out.cut;
  nlohmann::json& j = out.report;
  j = {{"model", path.string()}, {"module", module}, {"output", output.string()}, {"nodes", cut.nodes},
       {"inputs", cut.inputs}, {"outputs", cut.outputs}, {"initializers", cut.initializers},
       {"initializer_bytes", cut.initializer_bytes}, {"model_bytes", out.saved.model_bytes},
       {"external_bytes", out.saved.external_bytes}, {"tensors_verbatim", out.saved.tensors_verbatim},
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
