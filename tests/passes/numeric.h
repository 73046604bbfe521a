#pragma once
// Numeric check of a pass result through the runtime: build the model twice, optimize one,
// compare both on seeded inputs.
#include <gtest/gtest.h>

#include <functional>

#include "passes/verification.h"
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

}  // namespace onnxforge::test
