#pragma once
// Numeric check of a pass result through the runtime: build the model twice, optimize one,
// compare both on seeded inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "io/model_io.h"
#include "passes/upgrade_opset.h"
#include "passes/verification.h"
#include "tests/common/models.h"
#include "runtime/inputs.h"
#include "runtime/runtime.h"
#include "optimize.h"

namespace onnxforge::test {

using MakeModel = std::function<std::unique_ptr<Model>()>;

// Returns the optimized model after checking it against a fresh build of the original.
inline std::unique_ptr<Model> optimize_and_check(const MakeModel& make, std::vector<std::string> names = {},
                                                 passes::AccuracyClass c = passes::AccuracyClass::FloatBounded) {
  auto original = make();
  auto model = make();
  optimize(*model, std::move(names));
  if (passes::runtime_available()) {
    passes::Reference ref(*original, passes::VerifyOptions{2, {}});
    passes::VerifyResult v = ref.check(*model, passes::tolerance_of(c));
    EXPECT_TRUE(v.ok) << "max_diff " << v.max_diff << " " << v.error;
  }
  return model;
}

// Runs both models on the same seeded inputs with the runtime's plan fusions of decomposed
// patterns off on `a` (and on `b` too unless fuse_b): the fusion/decomposition under test is
// compared against the graph op by op, never through a matcher of its own kind. Returns the
// largest difference and whether every element is within the class-1 tolerance.
// equal_infinities: equal values (also both infinite, or both NaN) count as equal, and a NaN
// difference is reported as the largest — Attention's qk_matmul_output holds -inf at every masked
// key on both sides, and |-inf - -inf| is NaN, otherwise a mismatch.
inline std::pair<double, bool> class1_diff(const Model& a_model, const Model& b_model, uint64_t seed, bool fuse_b,
                                           bool equal_infinities = false) {
  rt::SessionOptions plain = rt::comparison_options();
  plain.fuse_activations = false;
  rt::Session a(a_model, plain), b(b_model, fuse_b ? rt::comparison_options() : plain);
  auto inputs = rt::make_inputs(rt::plan_inputs(a_model.main(), a.input_values(), {}), seed);
  auto ra = a.run(inputs), rb = b.run(inputs);
  const passes::Tolerance tol = passes::tolerance_of(passes::AccuracyClass::FloatBounded);
  double worst = 0;
  bool ok = ra.size() == rb.size();
  for (size_t i = 0; ok && i < ra.size(); ++i) {
    ok = ra[i].shape == rb[i].shape;
    for (int64_t j = 0; ok && j < ra[i].numel(); ++j) {
      const double x = ra[i].get_f64(j), y = rb[i].get_f64(j);
      if (equal_infinities && (x == y || (std::isnan(x) && std::isnan(y)))) continue;
      const double d = std::fabs(x - y);
      worst = equal_infinities && std::isnan(d) ? d : std::max(worst, d);
      ok = d <= tol.abs + tol.rel * std::fabs(x);
    }
  }
  return {worst, ok};
}

// A zoo model as exported, and a copy upgraded to `opset` and run through every pass: where
// the round trips (fuse at a new opset, decompose again, compare with the export) start.
struct ZooFused {
  std::unique_ptr<Model> original, model;
};
inline ZooFused zoo_fused_at(const std::string& name, int64_t opset) {
  const auto path = zoo_model(name);
  ZooFused z{load_model(path), load_model(path)};
  passes::upgrade_opset(*z.model, opset);
  optimize(*z.model);
  return z;
}

}  // namespace onnxforge::test
