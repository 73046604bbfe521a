#pragma once
// Test support for the attention/rotary/QKV fusion tests: zoo models at opset 23 and the census.
#include <gtest/gtest.h>

#include <sstream>

#include "analysis/shapes.h"
#include "io/model_io.h"
#include "passes/fusion.h"
#include "passes/graph_util.h"
#include "tests/common/graph_builder.h"
#include "optimize.h"
#include "passes/driver.h"
#include "passes/evaluator.h"
#include "passes/registry.h"
#include "passes/upgrade_opset.h"
#include "tests/common/models.h"

namespace onnxforge::test {

// A zoo model (opset 14) raised to opset 23 by the upgrade step (`--target-opset 23`).
inline std::unique_ptr<Model> zoo_at_23(const std::string& name) {
  auto m = load_model(zoo_model(name));
  passes::upgrade_step(*m, 23);
  EXPECT_EQ(m->opset(""), 23);
  return m;
}

inline const passes::CensusRow* census_row(const std::vector<passes::CensusRow>& rows, const std::string& fusion) {
  for (const auto& r : rows)
    if (r.fusion == fusion) return &r;
  return nullptr;
}

inline std::string census_text(const std::vector<passes::CensusRow>& rows) {
  std::ostringstream os;
  for (const auto& r : rows) {
    os << r.fusion << ": found " << r.found << ", here " << r.fusable_here << ", after upgrade "
       << r.fusable_after_upgrade;
    for (const auto& [why, n] : r.missed) os << ", missed " << n << " (" << why << ")";
    os << "\n";
  }
  return os.str();
}

// The census of `m` as the fusions see it in the pipeline: after the clean-ups that run before
// them (every pass but the fusions named), with shapes inferred.
inline std::vector<passes::CensusRow> census_after_cleanups(Model& m, const std::vector<std::string>& fusions) {
  std::vector<const passes::Pass*> list;
  for (const passes::Pass* p : passes::all_passes())
    if (std::find(fusions.begin(), fusions.end(), p->name()) == fusions.end()) list.push_back(p);
  passes::RunOptions o;
  o.pass.evaluator = passes::runtime_evaluator();
  passes::run_passes(m, list, o);
  infer_shapes(m);
  return passes::fusion_census(m, o.pass);
}

}  // namespace onnxforge::test
