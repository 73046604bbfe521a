#pragma once
// Verification of an optimized model against its original: the optimizer's adapter over the
// runtime's verification core (runtime/verify.h). The original runs once per seed (its inputs
// and outputs are kept), every candidate is checked against those runs with the tolerance of the
// worst accuracy class applied; inputs and outputs must keep their names.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/pass.h"

namespace onnxforge::passes {

struct VerifyOptions {
  int seeds = 3;
  std::map<std::string, int64_t> dims;  // symbolic dim values (default: batch-like 1, others 16)
  // Seconds verification may take (0: no limit; rt::VerifyOptions::budget_seconds): the seed count
  // is lowered to fit, never below 1; Reference::over_budget() when one seed does not fit.
  double budget_seconds = 0;
  // A progress line after each seed ("verifying: original model, seed 2/3, ... about 4 s left").
  std::function<void(const std::string&)> progress{};
  // The user's inputs (rt::UserInputs, runtime/inputs.h): --inputs entries and --input-value.
  std::vector<std::string> inputs{}, input_values{};
};

struct OutputDiff {
  std::string name;
  double max_abs = 0, max_rel = 0;
  bool ok = true;
  std::string problem;  // shape/dtype mismatch, NaN where the original has a number...
};

struct VerifyResult {
  bool ok = true;
  double max_diff = 0;  // max over outputs and seeds
  std::vector<OutputDiff> outputs;
  std::string error;  // the candidate could not be run
  // Not empty when the original's outputs prove little (rt::VerifyReport::degenerate_text):
  // "verified on degenerate inputs: output 'wav' is empty on every seed; ...".
  std::string degenerate;
};

// The original model's inputs and outputs for every seed, computed once.
class Reference {
 public:
  Reference(const Model& original, const VerifyOptions& options);
  ~Reference();
  VerifyResult check(const Model& candidate, Tolerance tol) const;
  int seeds() const;                              // after the budget (and grown to hold every input set)
  const std::vector<std::string>& notes() const;  // what the budget did
  bool over_budget() const;                       // even one seed does not fit the budget
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Whether the runtime is linked in (verification and folding need it).
bool runtime_available();

}  // namespace onnxforge::passes
