#pragma once
// Verification: two models (original and optimized) on the same deterministic inputs for many
// seeds; per output, statistics of the per-seed max abs diff and a pass/fail against
// |a - b| <= atol + rtol * |a| (a = reference, the first model) element by element. NaN equals
// NaN at the same position; a shape or dtype change fails.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/graph.h"
#include "runtime/tensor.h"

namespace onnxforge::rt {

struct VerifyOptions {
  int seeds = 20;
  uint64_t first_seed = 0;
  double atol = 1e-4, rtol = 1e-3;
  std::map<std::string, int64_t> dims;  // symbolic dim values (see inputs.h)
  int parallel = 0;                     // seeds in flight at once; 0 = TBB decides
};

struct OutputDiff {
  std::string name;
  std::string dtype;
  Shape shape;
  // Per-seed max abs diff, summarised over seeds.
  double max_abs_min = 0, max_abs_max = 0, max_abs_mean = 0, max_abs_p99 = 0;
  double max_rel = 0;      // max over elements of |a-b| / max(|a|, atol)
  double max_ref = 0;      // max |a|
  bool all_zero = true;    // the reference was 0 everywhere on every seed (the check proves little)
  bool pass = true;
  std::string problem;     // shape/dtype/NaN mismatch
};

struct VerifyReport {
  bool pass = true;
  int seeds = 0;
  double seconds = 0;
  std::vector<std::string> notes;  // defaulted dims, input kinds
  std::vector<OutputDiff> outputs;
  nlohmann::json to_json() const;
  std::string to_text() const;
};

// Runs both models (plans built once; seeds in parallel). Throws onnxforge::Error if the models'
// inputs or outputs do not correspond (by name, else by position) or a model fails to run.
VerifyReport verify(const Model& reference, const Model& candidate, const VerifyOptions& options = {});

}  // namespace onnxforge::rt
