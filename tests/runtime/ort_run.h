#pragma once
// ONNX Runtime 1.30 (tools/peers/ort.js, CPU) on a model file and named inputs: the outputs by
// name, or an error. Callers skip when test::ort_peer_installed() is false.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

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
    for (const auto& o : j.at("outputs")) out[o.at("name").get<std::string>()] = rt::read_npy(o.at("file").get<std::string>());
  } catch (const std::exception& e) {
    *error = std::string("cannot read ort.js's result: ") + e.what() + "\n" + text.str();
  }
  return out;
}

}  // namespace onnxforge::test
