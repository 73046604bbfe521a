#pragma once
// ONNX Runtime 1.30 (tools/peers/ort.js, CPU) on a model file and named inputs: the outputs by
// name, or an error. Callers skip when test::ort_peer_installed() is false.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "runtime/inputs.h"
#include "runtime/runtime.h"
#include "runtime/tensor.h"
#include "runtime/tensor_io.h"

namespace onnxforge::test {

inline std::map<std::string, rt::Tensor> ort_run(const std::filesystem::path& model,
                                                 const std::vector<std::pair<std::string, rt::Tensor>>& inputs,
                                                 std::string* error, int threads = 1) {
  namespace fs = std::filesystem;
  const fs::path io = model.parent_path() / (model.stem().string() + "_ort");
  fs::remove_all(io);
  fs::create_directories(io / "in");
  for (const auto& [name, t] : inputs) rt::write_npy(io / "in" / (rt::escape_file_name(name) + ".npy"), t);
  const fs::path log = io / "result.json";
  const std::string cmd = "node '" ONNXFORGE_SOURCE_DIR "/tools/peers/ort.js' run '" + model.string() + "' --inputs '" +
                          (io / "in").string() + "' --out '" + (io / "out").string() + "' --threads " +
                          std::to_string(threads) + " > '" + log.string() + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  std::stringstream text;
  text << std::ifstream(log).rdbuf();
  std::map<std::string, rt::Tensor> out;
  if (rc != 0) {
    *error = "ort.js failed: " + text.str();
    return out;
  }
  try {
    // ort.js prints one JSON object on stdout (warnings may precede it on stderr).
    std::string s = text.str();
    const auto brace = s.find("{\"ok\"");
    const nlohmann::json j = nlohmann::json::parse(brace == std::string::npos ? s : s.substr(brace));
    for (const auto& o : j.at("outputs"))
      out[o.at("name").get<std::string>()] = rt::read_npy(o.at("file").get<std::string>());
  } catch (const std::exception& e) {
    *error = std::string("cannot read ort.js's result: ") + e.what() + "\n" + text.str();
  }
  return out;
}

// ONNX Runtime on `file` agrees with onnxforge's run of `original` (comparison options, inputs
// of seed 3) within 1e-4 + 1e-3·|ref| on every output: the bar for fused and decomposed models.
// Fails the test at the first miss; returns the largest difference seen.
inline double ort_agrees_with_original(const Model& original, const std::filesystem::path& file) {
  rt::Session a(original, rt::comparison_options());
  auto inputs = rt::make_inputs(rt::plan_inputs(original.main(), a.input_values(), {}), 3);
  auto ref = a.run(inputs);
  std::vector<std::pair<std::string, rt::Tensor>> named;
  for (size_t i = 0; i < inputs.size(); ++i) named.emplace_back(a.input_names()[i], inputs[i]);
  std::string error;
  auto out = ort_run(file, named, &error, 2);
  double worst = 0;
  EXPECT_TRUE(error.empty()) << error;
  if (!error.empty()) return worst;
  for (size_t i = 0; i < ref.size(); ++i) {
    const std::string name = a.output_names()[i];
    EXPECT_TRUE(out.count(name)) << name;
    if (!out.count(name)) return worst;
    const rt::Tensor& b = out.at(name);
    EXPECT_EQ(b.shape, ref[i].shape) << name;
    if (b.shape != ref[i].shape) return worst;
    for (int64_t j = 0; j < b.numel(); ++j) {
      const double x = ref[i].get_f64(j), d = std::fabs(x - b.get_f64(j));
      worst = std::max(worst, d);
      EXPECT_LE(d, 1e-4 + 1e-3 * std::fabs(x)) << name << "[" << j << "]";
      if (d > 1e-4 + 1e-3 * std::fabs(x)) return worst;
    }
  }
  return worst;
}

}  // namespace onnxforge::test
