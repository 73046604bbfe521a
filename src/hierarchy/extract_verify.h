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

#include <unistd.h>

#include <filesystem>

#include "hierarchy/extract.h"
#include "io/model_io.h"
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
  auto full_model = with_cuts_exposed(source, cut);
  const Model* sub_model = cut.model.get();
  std::unique_ptr<Model> sub_reloaded;
  if (full_model->graph_count() > 1 || sub_model->graph_count() > 1) {
    // Copied subgraphs read outer values by name only; a save/load round trip turns those reads
    // into proper captures, which the runtime needs (Graph has no public way to add a capture).
    auto dir = std::filesystem::temp_directory_path() / ("onnxforge_extract_verify_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    save_model(*full_model, dir / "full.onnx");
    save_model(*sub_model, dir / "sub.onnx");
    full_model = load_model(dir / "full.onnx");
    sub_reloaded = load_model(dir / "sub.onnx");
    sub_model = sub_reloaded.get();
    std::filesystem::remove_all(dir);
  }
  rt::Session full(*full_model), sub(*sub_model);
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
