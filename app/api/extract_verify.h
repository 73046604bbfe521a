#pragma once
// Verifying an extraction: extraction's adapter over the runtime's verification core
// (runtime/verify.h). Header-only: src/hierarchy is part of onnxforge_core, which does not link
// the runtime; the CLI and the tests do.
#include <algorithm>
#include <string>
#include <vector>

#include "hierarchy/extract.h"
#include "runtime/inputs.h"
#include "runtime/verify.h"

namespace onnxforge::hier {

struct OutputCheck {
  std::string name;
  double max_diff = 0;
  bool bit_exact = true;
};

// Runs the source with the cut tensors exposed and the sub-model fed with the values the source
// computed; per sub-model output (in cut.outputs order), the max abs diff over all seeds (must be
// exactly 0).
inline std::vector<OutputCheck> verify_extraction(const Model& source, const Extraction& cut, int seeds,
                                                  const std::vector<std::string>& dims = {}) {
  // Both models are complete in memory: copied subgraphs keep their outer-scope reads as captures.
  auto full_model = with_cuts_exposed(source, cut);
  rt::VerifyOptions o{
      .seeds = seeds, .atol = 0, .rtol = 0, .dims = rt::parse_dims(dims), .names = rt::Correspondence::ByName};
  rt::VerifyReport r = rt::verify(*full_model, *cut.model, o);
  std::vector<OutputCheck> checks;
  for (const std::string& n : cut.outputs) {
    auto d = std::find_if(r.outputs.begin(), r.outputs.end(), [&](const rt::OutputDiff& x) { return x.name == n; });
    if (d == r.outputs.end())
      checks.push_back({n});
    else
      checks.push_back({n, d->max_abs_max, d->bit_exact});
  }
  return checks;
}

}  // namespace onnxforge::hier
