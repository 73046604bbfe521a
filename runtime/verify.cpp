#include "runtime/verify.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <optional>
#include <sstream>

#include "ir/error.h"
#include "runtime/inputs.h"
#include "runtime/runtime.h"

namespace onnxforge::rt {
namespace {

// Maps b's values to a's order: by name when every name matches, else by position.
std::vector<size_t> match(const std::vector<std::string>& a, const std::vector<std::string>& b, const char* what) {
  if (a.size() != b.size()) fail("the models have different numbers of ", what, " (", a.size(), " vs ", b.size(), ")");
  std::vector<size_t> m(a.size());
  bool by_name = true;
  for (size_t i = 0; i < a.size() && by_name; ++i) {
    auto it = std::find(b.begin(), b.end(), a[i]);
    if (it == b.end())
      by_name = false;
    else
      m[i] = static_cast<size_t>(it - b.begin());
  }
  if (!by_name)
    for (size_t i = 0; i < a.size(); ++i) m[i] = i;
  return m;
}

std::optional<size_t> index_of(const std::vector<std::string>& names, const std::string& n) {
  auto it = std::find(names.begin(), names.end(), n);
  if (it == names.end()) return std::nullopt;
  return static_cast<size_t>(it - names.begin());
}

// What the budget allowed: the seeds run and notes on lowering them.
struct SeedRun {
  int seeds = 0;
  bool over_budget = false;
  std::vector<std::string> notes;
};

std::string secs(double s) {
  char b[32];
  std::snprintf(b, sizeof b, s < 10 ? "%.1f s" : "%.0f s", s);
  return b;
}

// Seeds 0..n-1 (relative to first_seed): the first alone, so that it records the arena layout
// the others then use; the rest in parallel unless options.parallel is 1. With a budget, the
// first seed's time (times `weight`: the runs a seed will cost in all, relative to what one() does
// now) decides how many seeds run. Reports progress after each seed.
template <class F>
SeedRun for_seeds(const VerifyOptions& o, const char* phase, double weight, F&& one) {
  SeedRun run{std::max(o.seeds, 0), false, {}};
  const auto t0 = std::chrono::steady_clock::now();
  auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  std::mutex mu;
  int done = 0;
  auto finished = [&] {
    if (!o.progress) return;
    std::lock_guard l(mu);
    o.progress(VerifyProgress{phase, ++done, run.seeds, since()});
  };
  if (run.seeds == 0) return run;
  one(0);
  if (o.budget_seconds > 0) {
    const double per_seed = since() * weight;
    const int fit = static_cast<int>(std::min<double>(run.seeds, o.budget_seconds / std::max(per_seed, 1e-9)));
    if (fit < 1) {
      run.over_budget = true;
      run.notes.push_back("one seed takes about " + secs(per_seed) + ", over the verification budget of " +
                          secs(o.budget_seconds) + ": the model cannot be verified within it");
      run.seeds = 1;
    } else if (fit < run.seeds) {
      run.notes.push_back("verification budget " + secs(o.budget_seconds) + ": " + std::to_string(fit) + " of " +
                          std::to_string(run.seeds) + " seeds (one takes about " + secs(per_seed) + ")");
      run.seeds = fit;
    }
  }
  finished();
  if (o.parallel == 1) {
    for (int s = 1; s < run.seeds; ++s) one(s), finished();
  } else {
    tbb::parallel_for(1, std::max(run.seeds, 1), [&](int s) { one(s), finished(); });
  }
  return run;
}

}  // namespace

TensorDiff compare(const Tensor& a, const Tensor& b, double atol, double rtol, double floor_fraction) {
  TensorDiff d;
  auto mismatch = [&](std::string problem) {
    d.pass = d.bit_exact = false;
    d.max_abs = INFINITY;
    d.problem = std::move(problem);
    return d;
  };
  if (a.shape != b.shape) return mismatch("shape " + shape_str(a.shape) + " became " + shape_str(b.shape));
  if (a.dtype != b.dtype)
    return mismatch(std::string("type ") + std::string(dtype_name(a.dtype)) + " became " +
                    std::string(dtype_name(b.dtype)));
  d.bit_exact = a.bytes() == 0 || std::memcmp(a.data, b.data, a.bytes()) == 0;
  const double floor = std::max(atol, 1e-30);
  double scale = 0;  // the output's largest finite |reference|
  for (int64_t i = 0, n = floor_fraction > 0 ? a.numel() : 0; i < n; ++i)
    if (double x = std::fabs(a.get_f64(i)); std::isfinite(x)) scale = std::max(scale, x);
  const double magnitude_floor = floor_fraction * scale;
  for (int64_t i = 0, n = a.numel(); i < n; ++i) {
    double x = a.get_f64(i), y = b.get_f64(i);
    if (std::isnan(x) || std::isnan(y)) {
      if (std::isnan(x) != std::isnan(y)) {
        d.pass = false;
        d.problem = "NaN at different positions";
        d.max_abs = INFINITY;
      }
      continue;
    }
    if (x != 0) d.all_zero = false;
    // Infinities agree only with the same infinity. (Before: inf against inf failed an exact
    // tolerance, rtol 0 * inf being NaN, and inf against a finite value passed any relative one,
    // rtol * inf being inf. Found by tools/fuzz/campaign.py --keep-unverified: a chain of
    // MatMuls overflowing to inf everywhere failed verification with max_diff 0.)
    if (std::isinf(x) || std::isinf(y)) {
      if (x != y) {
        d.pass = false;
        d.problem = "infinity at different positions";
        d.max_abs = INFINITY;
      }
      continue;
    }
    d.max_ref = std::max(d.max_ref, std::fabs(x));
    double diff = x == y ? 0.0 : std::fabs(x - y);
    d.max_abs = std::max(d.max_abs, diff);
    d.max_rel = std::max(d.max_rel, diff / std::max(std::fabs(x), floor));
    if (!(diff <= atol + rtol * std::max(std::fabs(x), magnitude_floor))) d.pass = false;
  }
  return d;
}

namespace {

// Per output, the axes whose size the inputs' shapes do not give: declared unknown, or named by
// a symbol no input has (an exporter's name for a NonZero count or a duration sum). An output
// without a declared shape gets none: nothing is assumed about it.
std::vector<std::vector<bool>> value_dependent_axes(const Graph& g) {
  std::vector<std::string> input_symbols;
  for (ValueId v : g.graph_inputs())
    if (g.has_shape(v))
      for (const Dim& d : g.shape(v))
        if (!d.known() && !d.param.empty()) input_symbols.emplace_back(str(d.param));
  std::vector<std::vector<bool>> out;
  for (ValueId v : g.graph_outputs()) {
    std::vector<bool> axes;
    if (g.has_shape(v))
      for (const Dim& d : g.shape(v))
        axes.push_back(!d.known() && (d.param.empty() || std::find(input_symbols.begin(), input_symbols.end(),
                                                                   str(d.param)) == input_symbols.end()));
    out.push_back(std::move(axes));
  }
  return out;
}

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.dtype == b.dtype && a.shape == b.shape && (a.bytes() == 0 || std::memcmp(a.data, b.data, a.bytes()) == 0);
}

// What one seed's reference run says about the outputs, for the degenerate check.
struct SeedShape {
  int64_t input_scale = 0;          // the largest dim of any input
  bool inputs_differ = false;       // from seed 0's
  std::vector<Shape> shapes;        // per reference output
  std::vector<bool> same_as_first;  // per reference output: seed 0's bytes
};

SeedShape observe(const std::vector<Tensor>& ins, const std::vector<Tensor>& outs, const std::vector<Tensor>& first_ins,
                  const std::vector<Tensor>& first_outs, bool first) {
  SeedShape s;
  for (size_t i = 0; i < ins.size(); ++i) {
    for (int64_t d : ins[i].shape) s.input_scale = std::max(s.input_scale, d);
    s.inputs_differ = s.inputs_differ || (!first && !same_tensor(ins[i], first_ins[i]));
  }
  for (size_t k = 0; k < outs.size(); ++k) {
    s.shapes.push_back(outs[k].shape);
    s.same_as_first.push_back(first || same_tensor(outs[k], first_outs[k]));
  }
  return s;
}

// Why output `k`'s reference values prove little, or "" (VerifyReport::degenerate). A
// value-dependent axis is degenerate when its size changes with the values and stays far below
// the inputs' dims (1/16 of the largest) on every seed: a size that is the same on every seed
// is a shape (a batch of 1, a CNN's pooled dim), not a collapse.
std::string degenerate_reason(const std::vector<SeedShape>& seen, size_t k, const std::vector<bool>& value_dependent) {
  if (seen.empty()) return "";
  bool empty = true, constant = seen.size() > 1, inputs_differ = false;
  for (const SeedShape& s : seen) {
    empty = empty && numel(s.shapes[k]) == 0;
    constant = constant && s.same_as_first[k];
    inputs_differ = inputs_differ || s.inputs_differ;
  }
  if (empty) return "is empty on every seed (shape " + shape_str(seen[0].shapes[k]) + ")";
  if (constant && inputs_differ) return "has the same values on every seed although the inputs differ";
  for (size_t a = 0; a < value_dependent.size(); ++a) {
    if (!value_dependent[a]) continue;
    bool small = true, varies = false;
    int64_t lo = INT64_MAX, hi = 0, scale = 0;
    for (const SeedShape& s : seen) {
      if (s.shapes[k].size() != value_dependent.size()) return "";
      const int64_t d = s.shapes[k][a];
      lo = std::min(lo, d), hi = std::max(hi, d), scale = std::max(scale, s.input_scale);
      small = small && d * 16 < s.input_scale;
      varies = varies || d != seen[0].shapes[k][a];
    }
    if (small && varies)
      return "has a value-dependent axis " + std::to_string(a) + " of size " +
             (lo == hi ? std::to_string(lo) : std::to_string(lo) + ".." + std::to_string(hi)) +
             " on every seed, far below the inputs' dims (up to " + std::to_string(scale) + ")";
  }
  return "";
}

SessionOptions session_options(const VerifyOptions& o) {
  SessionOptions s = comparison_options();
  s.pack_weights = !o.stream_weights;
  return s;
}
}  // namespace

struct Reference::Impl {
  Impl(const Model& m, VerifyOptions opts)
      : o(std::move(opts)),
        session(std::make_unique<Session>(m, session_options(o))),
        given(m.main(), session->input_values(), o.dims, o.inputs, verification_sequence(m.tensors.total_bytes())),
        in_names(session->input_names()),
        out_names(session->output_names()),
        mantissa(narrowest_float_bits(m)),
        value_dependent(value_dependent_axes(m.main())) {
    // Every input set runs: the seed count grows to hold them.
    o.seeds = std::max(o.seeds, static_cast<int>(given.sets()));
  }
  // Run `s` of a verification: input set s when there is one, else generated from first_seed + s.
  // Random ops draw from first_seed + s in both models.
  uint64_t random_seed(int s) const { return o.first_seed + static_cast<uint64_t>(s); }
  std::vector<Tensor> make(int s) const {
    return given.make(static_cast<size_t>(s), o.first_seed + static_cast<uint64_t>(s));
  }
  VerifyOptions o;
  // With keep_runs, gone once the runs are kept: the reference's packed weights and the
  // candidate's are then never resident together (verifying TinyLlama holds one model's worth).
  std::unique_ptr<Session> session;
  SeedInputs given;  // the user's inputs and the generated ones' plan
  std::vector<std::string> in_names, out_names;
  int mantissa = 23;                               // of the narrowest float type the reference computes in
  std::vector<std::vector<bool>> value_dependent;  // per output, per axis (value_dependent_axes)
  bool keep = false;
  std::vector<std::vector<Tensor>> inputs, outputs;  // per seed, with keep_runs
  std::vector<std::string> budget_notes;
  bool over_budget = false;
};

Reference::Reference(const Model& reference, VerifyOptions options, bool keep_runs)
    : impl_([&] {
        const std::string name = options.reference_name;
        try {
          return std::make_unique<Impl>(reference, std::move(options));
        } catch (const Error& e) { throw e.reworded(name + ": " + e.what()); }
      }()) {
  Impl& r = *impl_;
  r.keep = keep_runs;
  if (!keep_runs) return;
  const auto n = static_cast<size_t>(std::max(r.o.seeds, 0));
  r.inputs.resize(n);
  r.outputs.resize(n);
  // Budget: each seed runs the reference now and the candidate in check(), so twice what is timed.
  SeedRun run = for_seeds(r.o, "original", 2.0, [&](int s) {
    r.inputs[static_cast<size_t>(s)] = r.make(s);
    r.outputs[static_cast<size_t>(s)] = r.session->run(r.inputs[static_cast<size_t>(s)], r.random_seed(s));
  });
  r.o.seeds = run.seeds;
  r.inputs.resize(static_cast<size_t>(run.seeds));
  r.outputs.resize(static_cast<size_t>(run.seeds));
  r.budget_notes = std::move(run.notes);
  r.over_budget = run.over_budget;
  r.o.budget_seconds = 0;  // spent: check() runs the seeds kept
  r.session.reset();       // the outputs are stored: the reference's plan and packed weights can go
}

const std::vector<std::string>& Reference::budget_notes() const { return impl_->budget_notes; }
bool Reference::over_budget() const { return impl_->over_budget; }

std::string VerifyProgress::line() const {
  std::string s = std::string("verifying: ") +
                  (std::string_view(phase) == "original" ? "original model" : "optimized model") + ", seed " +
                  std::to_string(done) + "/" + std::to_string(total);
  if (done > 0) s += ", " + secs(elapsed / done) + " per seed";
  if (done < total && eta() >= 0) s += ", about " + secs(eta()) + " left";
  return s;
}

Reference::~Reference() = default;

const VerifyOptions& Reference::options() const { return impl_->o; }

VerifyReport Reference::check(const Model& candidate) const {
  return check(candidate, impl_->o.atol, impl_->o.rtol, impl_->o.floor);
}

VerifyReport Reference::check(const Model& candidate, double atol, double rtol, double floor) const {
  auto t0 = std::chrono::steady_clock::now();
  const Impl& r = *impl_;
  const VerifyOptions& o = r.o;
  // A bounded class (rtol > 0) on a model that rounds to a narrower float than float32 at its own
  // steps: a fusion removes roundings of 2^-mantissa relative to the operands, and the operands
  // of a sum are of the output's scale, not of the element's. So every element is judged against
  // kLowPrecisionUlps ulps of the output's largest |ref| (floor 1). Measured on the small zoo in
  // float16 (tools/models/to_fp16.py, --target-opset 23, 3 seeds): GPT-2's unflatten_gemm and
  // ViT's fuse_attention move elements near 0 by 3.9e-3 of 4.2 and 7.5e-4 of 0.49, 1-3 ulps of
  // the scale, 8-30 of the element. Exact classes stay exact.
  std::string precision_note;
  if (rtol > 0 && r.mantissa < 23) {
    const double ulp_rtol = kLowPrecisionUlps * std::ldexp(1.0, -r.mantissa);
    rtol = std::max(rtol, ulp_rtol);
    floor = std::max(floor, 1.0);
    std::ostringstream note;
    note << "the model computes in a float type with a " << (r.mantissa + 1) << "-bit significand: each element is"
         << " judged against " << kLowPrecisionUlps << " of its ulps of the output's largest |ref| (rtol " << rtol
         << ", floor 1)";
    precision_note = note.str();
  }
  // A failure names the model it is about (`verify A B` where B fails named neither).
  auto about = [](const std::string& which, auto&& f) {
    try {
      return f();
    } catch (const Error& e) { throw e.reworded(which + ": " + e.what()); }
  };
  Session sb = about(o.candidate_name, [&] { return Session(candidate, session_options(o)); });
  const auto b_in = sb.input_names(), b_out = sb.output_names();
  // Where each candidate input comes from (a reference input, or with ByName a reference
  // output), and the (reference, candidate) output pairs compared, in report order.
  struct Feed {
    bool from_output = false;
    size_t index = 0;
  };
  std::vector<Feed> feed(b_in.size());
  std::vector<std::pair<size_t, size_t>> pairs;
  switch (o.names) {
    case Correspondence::NameOrPosition: {
      auto in_map = match(r.in_names, b_in, "inputs");
      for (size_t i = 0; i < in_map.size(); ++i) feed[in_map[i]] = {false, i};
      auto out_map = match(r.out_names, b_out, "outputs");
      for (size_t k = 0; k < out_map.size(); ++k) pairs.emplace_back(k, out_map[k]);
      break;
    }
    case Correspondence::SameNames:
      if (b_in != r.in_names) fail("the candidate model's inputs differ from the reference's");
      if (b_out != r.out_names) fail("the candidate model's outputs differ from the reference's");
      for (size_t i = 0; i < b_in.size(); ++i) feed[i] = {false, i};
      for (size_t k = 0; k < b_out.size(); ++k) pairs.emplace_back(k, k);
      break;
    case Correspondence::ByName:
      for (size_t i = 0; i < b_in.size(); ++i) {
        if (auto j = index_of(r.in_names, b_in[i]))
          feed[i] = {false, *j};
        else if (auto k = index_of(r.out_names, b_in[i]))
          feed[i] = {true, *k};
        else
          fail("verification: the reference computes no tensor '", b_in[i], "' (an input of the candidate)");
      }
      for (size_t k = 0; k < b_out.size(); ++k) {
        auto j = index_of(r.out_names, b_out[k]);
        if (!j) fail("verification: the reference has no output '", b_out[k], "' (an output of the candidate)");
        pairs.emplace_back(*j, k);
      }
      break;
  }
  const size_t no = pairs.size();
  std::vector<std::vector<TensorDiff>> diffs(no, std::vector<TensorDiff>(static_cast<size_t>(std::max(o.seeds, 0))));
  std::vector<std::pair<DType, Shape>> meta(no);
  std::vector<Tensor> first_ins, first_outs;  // seed 0's, which runs alone before the others
  std::vector<SeedShape> seen(static_cast<size_t>(std::max(o.seeds, 0)));
  SeedRun run = for_seeds(o, "check", 1.0, [&](int s) {
    std::vector<Tensor> ins, outs;
    if (r.keep) {
      ins = r.inputs[static_cast<size_t>(s)];
      outs = r.outputs[static_cast<size_t>(s)];
    } else {
      ins = r.make(s);
      outs = about(o.reference_name, [&] { return r.session->run(ins, r.random_seed(s)); });
    }
    std::vector<Tensor> ins_b(feed.size());
    for (size_t i = 0; i < feed.size(); ++i) ins_b[i] = feed[i].from_output ? outs[feed[i].index] : ins[feed[i].index];
    auto outs_b = about(o.candidate_name, [&] { return sb.run(ins_b, r.random_seed(s)); });
    if (s == 0) first_ins = ins, first_outs = outs;
    seen[static_cast<size_t>(s)] = observe(ins, outs, first_ins, first_outs, s == 0);
    for (size_t k = 0; k < no; ++k) {
      const Tensor& a = outs[pairs[k].first];
      diffs[k][static_cast<size_t>(s)] = compare(a, outs_b[pairs[k].second], atol, rtol, floor);
      if (s == 0) meta[k] = {a.dtype, a.shape};  // seed 0 runs alone
    }
  });
  VerifyReport rep;
  rep.seeds = run.seeds;
  rep.notes = r.given.notes();
  rep.notes.insert(rep.notes.end(), r.budget_notes.begin(), r.budget_notes.end());
  rep.notes.insert(rep.notes.end(), run.notes.begin(), run.notes.end());
  if (!precision_note.empty()) rep.notes.push_back(precision_note);
  rep.over_budget = r.over_budget || run.over_budget;
  for (auto& d : diffs) d.resize(static_cast<size_t>(run.seeds));
  seen.resize(static_cast<size_t>(run.seeds));
  for (size_t k = 0; k < no; ++k) {
    OutputDiff d;
    d.name = r.out_names[pairs[k].first];
    d.dtype = std::string(dtype_name(meta[k].first));
    d.shape = meta[k].second;
    std::vector<double> m;
    for (const TensorDiff& s : diffs[k]) {
      m.push_back(s.max_abs);
      d.max_rel = std::max(d.max_rel, s.max_rel);
      d.max_ref = std::max(d.max_ref, s.max_ref);
      d.all_zero &= s.all_zero;
      d.pass &= s.pass;
      d.bit_exact &= s.bit_exact;
      if (d.problem.empty()) d.problem = s.problem;
    }
    if (!m.empty()) {
      std::sort(m.begin(), m.end());
      d.max_abs_min = m.front();
      d.max_abs_max = m.back();
      double sum = 0;
      for (double x : m) sum += x;
      d.max_abs_mean = sum / static_cast<double>(m.size());
      d.max_abs_p99 =
          m[std::min(m.size() - 1, static_cast<size_t>(std::ceil(0.99 * static_cast<double>(m.size()))) - 1)];
    }
    d.degenerate = degenerate_reason(seen, pairs[k].first, r.value_dependent[pairs[k].first]);
    rep.pass &= d.pass;
    rep.outputs.push_back(std::move(d));
  }
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

bool weights_dominate(const Model& m) { return m.tensors.total_bytes() > (uint64_t{512} << 20); }

VerifyReport verify(const Model& reference, const Model& candidate, const VerifyOptions& options) {
  auto t0 = std::chrono::steady_clock::now();
  // Models whose weights dominate memory read them in place, as optimize's verification does
  // (passes/verification.cpp): packed, `verify` of TinyLlama-1.1B with past held both models'
  // copies, 8.0 GiB anonymous for 4.1 GiB of weights (390 MiB in place). Seeds stay in parallel:
  // in place, a second seed in flight adds only its activations.
  VerifyOptions o = options;
  if (weights_dominate(reference) || weights_dominate(candidate)) o.stream_weights = true;
  VerifyReport r = Reference(reference, std::move(o)).check(candidate);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

bool VerifyReport::degenerate() const {
  return std::any_of(outputs.begin(), outputs.end(), [](const OutputDiff& d) { return !d.degenerate.empty(); });
}

std::string VerifyReport::degenerate_text() const {
  std::string s;
  for (const OutputDiff& d : outputs)
    if (!d.degenerate.empty()) s += (s.empty() ? "" : "; ") + ("output '" + d.name + "' " + d.degenerate);
  return s.empty() ? s : "verified on degenerate inputs: " + s + "; give real inputs with --inputs";
}

nlohmann::json VerifyReport::to_json() const {
  nlohmann::json j;
  j["pass"] = pass;
  j["degenerate"] = degenerate();
  if (degenerate()) j["degenerate_text"] = degenerate_text();
  j["seeds"] = seeds;
  j["over_budget"] = over_budget;
  j["seconds"] = seconds;
  j["notes"] = notes;
  auto& outs = j["outputs"] = nlohmann::json::array();
  for (const OutputDiff& d : outputs) {
    auto num = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(std::to_string(x)); };
    outs.push_back({{"name", d.name},
                    {"dtype", d.dtype},
                    {"shape", d.shape},
                    {"max_abs",
                     {{"min", num(d.max_abs_min)},
                      {"max", num(d.max_abs_max)},
                      {"mean", num(d.max_abs_mean)},
                      {"p99", num(d.max_abs_p99)}}},
                    {"max_rel", num(d.max_rel)},
                    {"max_ref", num(d.max_ref)},
                    {"all_zero", d.all_zero},
                    {"pass", d.pass},
                    {"problem", d.problem},
                    {"degenerate", d.degenerate}});
  }
  return j;
}

std::string VerifyReport::to_text() const {
  std::ostringstream os;
  for (const auto& n : notes) os << "note: " << n << "\n";
  os << "output                           shape            max|d| min      mean       p99        max    max rel   "
        "result\n";
  for (const OutputDiff& d : outputs) {
    char line[512];
    std::snprintf(line, sizeof line, "%-32s %-16s %9.3g %9.3g %9.3g %9.3g %9.3g   %s%s%s\n",
                  d.name.substr(0, 32).c_str(), shape_str(d.shape).c_str(), d.max_abs_min, d.max_abs_mean,
                  d.max_abs_p99, d.max_abs_max, d.max_rel, d.pass ? "pass" : "FAIL",
                  d.all_zero ? " (reference all zero)" : "", d.problem.empty() ? "" : (" " + d.problem).c_str());
    os << line;
  }
  char tail[128];
  std::snprintf(tail, sizeof tail, "%s: %d seeds in %.2f s\n",
                !pass          ? "FAIL"
                : degenerate() ? "DEGENERATE"
                               : "PASS",
                seeds, seconds);
  os << tail;
  if (pass && degenerate()) os << degenerate_text() << "\n";
  return os.str();
}

}  // namespace onnxforge::rt
