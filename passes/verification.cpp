#include "passes/verification.h"

#include <tbb/parallel_for.h>

#include <cmath>

#include "ir/error.h"
#ifdef ONNXFORGE_HAVE_RUNTIME
#include "runtime/inputs.h"
#include "runtime/runtime.h"
#endif

namespace onnxforge::passes {

#ifdef ONNXFORGE_HAVE_RUNTIME
bool runtime_available() { return true; }

struct Reference::Impl {
  std::vector<std::string> input_names, output_names;
  std::vector<std::vector<rt::Tensor>> inputs, outputs;  // per seed
};

Reference::Reference(const Model& original, const VerifyOptions& o) : impl_(std::make_unique<Impl>()) {
  rt::Session s(original, rt::comparison_options());
  impl_->input_names = s.input_names();
  impl_->output_names = s.output_names();
  int seeds = std::max(1, o.seeds);
  impl_->inputs.resize(seeds);
  impl_->outputs.resize(seeds);
  // The project's deterministic inputs (runtime/inputs.h): token ids in the embedding's range,
  // masks of ones, symbolic dims from --dim or defaults.
  rt::InputPlan plan = rt::plan_inputs(original.main(), s.input_values(), o.dims);
  for (int k = 0; k < seeds; ++k) impl_->inputs[k] = rt::make_inputs(plan, static_cast<uint64_t>(k));
  tbb::parallel_for(0, seeds, [&](int k) { impl_->outputs[k] = s.run(impl_->inputs[k]); });
}

Reference::~Reference() = default;

VerifyResult Reference::check(const Model& candidate, Tolerance tol) const {
  VerifyResult r;
  std::vector<std::vector<rt::Tensor>> outs(impl_->inputs.size());
  try {
    rt::Session s(candidate, rt::comparison_options());
    if (s.input_names() != impl_->input_names) fail("the optimized model's inputs differ from the original's");
    if (s.output_names() != impl_->output_names) fail("the optimized model's outputs differ from the original's");
    std::vector<std::string> errors(outs.size());
    tbb::parallel_for(size_t{0}, outs.size(), [&](size_t k) {
      try {
        outs[k] = s.run(impl_->inputs[k]);
      } catch (const std::exception& e) {
        errors[k] = e.what();
      }
    });
    for (auto& e : errors)
      if (!e.empty()) fail(e);
  } catch (const std::exception& e) {
    r.ok = false;
    r.error = e.what();
    return r;
  }
  r.outputs.resize(impl_->output_names.size());
  for (size_t i = 0; i < r.outputs.size(); ++i) r.outputs[i].name = impl_->output_names[i];
  for (size_t k = 0; k < outs.size(); ++k)
    for (size_t i = 0; i < r.outputs.size(); ++i) {
      OutputDiff& d = r.outputs[i];
      const rt::Tensor& a = impl_->outputs[k][i];
      const rt::Tensor& b = outs[k][i];
      if (a.dtype != b.dtype || a.shape != b.shape) {
        d.ok = false;
        d.problem = "dtype/shape " + std::string(dtype_name(a.dtype)) + rt::shape_str(a.shape) + " vs " +
                    std::string(dtype_name(b.dtype)) + rt::shape_str(b.shape);
        d.max_abs = INFINITY;
        continue;
      }
      int64_t n = a.numel();
      for (int64_t j = 0; j < n; ++j) {
        double x = a.get_f64(j), y = b.get_f64(j);
        if (std::isnan(x) && std::isnan(y)) continue;
        double diff = std::fabs(x - y);
        if (std::isnan(diff)) diff = INFINITY;
        if (x == y) diff = 0;  // equal infinities
        d.max_abs = std::max(d.max_abs, diff);
        if (diff > 0) d.max_rel = std::max(d.max_rel, diff / std::max(std::fabs(x), 1e-30));
        if (diff > tol.abs + tol.rel * std::fabs(x)) d.ok = false;
      }
    }
  for (const OutputDiff& d : r.outputs) {
    r.ok = r.ok && d.ok;
    r.max_diff = std::max(r.max_diff, d.max_abs);
  }
  return r;
}
#else
bool runtime_available() { return false; }
struct Reference::Impl {};
Reference::Reference(const Model&, const VerifyOptions&) { fail("verification needs the runtime; use --no-verify"); }
Reference::~Reference() = default;
VerifyResult Reference::check(const Model&, Tolerance) const { return {}; }
#endif

}  // namespace onnxforge::passes
