#pragma once
// Verifying an extraction with the reference runtime (header-only: src/hierarchy is part of
// onnxforge_core, which does not link the runtime; the CLI and the tests do).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "hierarchy/extract.h"
#include "ir/error.h"
#include "runtime/inputs.h"
#include "runtime/runtime.h"

namespace onnxforge::hier {

struct OutputCheck {
  std::string name;
  double max_diff = 0;
  bool bit_exact = true;
};

// Runs the source with the cut tensors exposed and the sub-model fed with the values the source
// computed; per sub-model output, the max abs diff over all seeds (must be exactly 0).
inline std::vector<OutputCheck> verify_extraction(const Model& source, const Extraction& cut, int seeds,
                                                  const std::vector<std::string>& dims = {}) {
  // Both models are complete in memory: copied subgraphs keep their outer-scope reads as captures.
  auto full_model = with_cuts_exposed(source, cut);
  rt::Session full(*full_model), sub(*cut.model);
  rt::InputPlan plan = rt::plan_inputs(full_model->main(), full.input_values(), rt::parse_dims(dims));
  std::vector<OutputCheck> checks;
  for (const std::string& n : cut.outputs) checks.push_back({n});
  for (int seed = 0; seed < seeds; ++seed) {
    std::vector<rt::Tensor> inputs = rt::make_inputs(plan, static_cast<uint64_t>(seed));
    std::vector<rt::Tensor> outs = full.run(inputs);
    std::map<std::string, const rt::Tensor*> by_name;
    auto in_names = full.input_names();
    for (size_t i = 0; i < in_names.size(); ++i) by_name[in_names[i]] = &inputs[i];
    auto out_names = full.output_names();
    for (size_t i = 0; i < out_names.size(); ++i) by_name[out_names[i]] = &outs[i];
    std::vector<rt::Tensor> sub_inputs;
    for (const std::string& n : sub.input_names()) {
      auto it = by_name.find(n);
      if (it == by_name.end()) fail("verification: the source computes no tensor '", n, "'");
      sub_inputs.push_back(*it->second);
    }
    std::vector<rt::Tensor> sub_outs = sub.run(sub_inputs);
    auto sub_names = sub.output_names();
    for (size_t i = 0; i < sub_names.size(); ++i) {
      OutputCheck& c = *std::find_if(checks.begin(), checks.end(), [&](auto& x) { return x.name == sub_names[i]; });
      const rt::Tensor& want = *by_name.at(sub_names[i]);
      const rt::Tensor& got = sub_outs[i];
      if (want.dtype != got.dtype || want.shape != got.shape) {
        c.bit_exact = false;
        c.max_diff = std::numeric_limits<double>::infinity();
        continue;
      }
      if (std::memcmp(want.data, got.data, want.bytes()) != 0) c.bit_exact = false;
      for (int64_t k = 0; k < want.numel(); ++k) {
        double a = want.get_f64(k), b = got.get_f64(k);
        if (a != b && !(std::isnan(a) && std::isnan(b))) c.max_diff = std::max(c.max_diff, std::abs(a - b));
      }
    }
  }
  return checks;
}

}  // namespace onnxforge::hier
