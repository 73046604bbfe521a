#pragma once
// Running passes on a model built with tests/common/graph_builder.h.
#include <string>
#include <vector>

#include "passes/driver.h"
#include "passes/registry.h"
#include "tests/common/graph_builder.h"

namespace onnxforge::test {

// Runs the named passes (all when empty) to a fixed point.
inline passes::RunResult optimize(Model& m, std::vector<std::string> names = {}, uint64_t fold_size = 1 << 20) {
  passes::RunOptions o;
  o.pass.evaluator = passes::runtime_evaluator();
  o.pass.fold_size = fold_size;
  std::vector<const passes::Pass*> list;
  if (names.empty())
    list = passes::all_passes();
  else
    for (auto& n : names) list.push_back(passes::find_pass(n));
  return passes::run_passes(m, list, o);
}

}  // namespace onnxforge::test
