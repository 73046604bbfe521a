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
            rt::VerifyOptions{.seeds = std::max(1, o.seeds), .dims = o.dims, .names = rt::Correspondence::SameNames},
            /*keep_runs=*/true) {}
  rt::Reference ref;
};

Reference::Reference(const Model& original, const VerifyOptions& o) : impl_(std::make_unique<Impl>(original, o)) {}

Reference::~Reference() = default;

VerifyResult Reference::check(const Model& candidate, Tolerance tol) const {
  VerifyResult r;
  rt::VerifyReport rep;
  try {
    rep = impl_->ref.check(candidate, tol.abs, tol.rel);
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
