#include "passes/verification.h"

#include <algorithm>

#include "ir/error.h"
#ifdef ONNXFORGE_HAVE_RUNTIME
#include "runtime/verify.h"
#endif

namespace onnxforge::passes {

#ifdef ONNXFORGE_HAVE_RUNTIME
bool runtime_available() { return true; }

// The core's reference runs, kept for every seed (the optimizer checks many candidates).
struct Reference::Impl {
  explicit Impl(const Model& original, const VerifyOptions& o)
      : ref(original,
            rt::VerifyOptions{.seeds = std::max(1, o.seeds),
                              .dims = o.dims,
                              .inputs = rt::UserInputs{.specs = o.inputs, .values = o.input_values, .arrays = {}},
                              .parallel = one_seed_at_a_time(original) ? 1 : 0,
                              .names = rt::Correspondence::SameNames,
                              .progress = progress_of(o),
                              .budget_seconds = o.budget_seconds,
                              .stream_weights = stream_weights(original)},
            /*keep_runs=*/true) {}
  // Seeds run one at a time when the weights dominate memory: a run of such a model already keeps
  // both threads busy in its GEMMs, and a second seed in flight only adds its activations to a
  // peak that is the packed weights (TinyLlama-1.1B: within 1 % of the model's size).
  static bool one_seed_at_a_time(const Model& m) { return m.tensors.total_bytes() > (uint64_t{1} << 30); }
  // Above 512 MiB of weights, both models read their MatMul weights in place on every run
  // (rt::VerifyOptions::stream_weights) instead of packing a copy per session: a packed copy is
  // the model's size again, and packing it cost more than a few runs' in-tile packing saves
  // (TinyLlama-1.1B: peak RSS 4.1 GiB -> 0.6 GiB and faster; docs/benchmarks.md, "Measurements that
  // decided the code").
  static bool stream_weights(const Model& m) { return rt::weights_dominate(m); }
  static std::function<void(const rt::VerifyProgress&)> progress_of(const VerifyOptions& o) {
    if (!o.progress) return nullptr;
    return [f = o.progress](const rt::VerifyProgress& p) { f(p.line()); };
  }
  rt::Reference ref;
};

Reference::Reference(const Model& original, const VerifyOptions& o) : impl_(std::make_unique<Impl>(original, o)) {}

Reference::~Reference() = default;
int Reference::seeds() const { return impl_->ref.options().seeds; }
const std::vector<std::string>& Reference::notes() const { return impl_->ref.budget_notes(); }
bool Reference::over_budget() const { return impl_->ref.over_budget(); }

VerifyResult Reference::check(const Model& candidate, Tolerance tol) const {
  VerifyResult r;
  rt::VerifyReport rep;
  try {
    rep = impl_->ref.check(candidate, tol.abs, tol.rel, tol.floor);
  } catch (const std::exception& e) {
    r.ok = false;
    r.error = e.what();
    return r;
  }
  for (const rt::OutputDiff& d : rep.outputs) {
    r.outputs.push_back({d.name, d.max_abs_max, d.max_rel, d.pass, d.problem});
    r.ok = r.ok && d.pass;
    r.max_diff = std::max(r.max_diff, d.max_abs_max);
  }
  r.degenerate = rep.degenerate_text();
  return r;
}
#else
bool runtime_available() { return false; }
struct Reference::Impl {};
Reference::Reference(const Model&, const VerifyOptions&) { fail("verification needs the runtime; use --no-verify"); }
Reference::~Reference() = default;
int Reference::seeds() const { return 0; }
const std::vector<std::string>& Reference::notes() const {
  static const std::vector<std::string> none;
  return none;
}
bool Reference::over_budget() const { return false; }
VerifyResult Reference::check(const Model&, Tolerance) const { return {}; }
#endif

}  // namespace onnxforge::passes
