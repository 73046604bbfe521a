#pragma once
// What `optimize` and `attribute` share: pass selection, stats as JSON, bisecting a failure.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "passes/driver.h"
#include "passes/verification.h"

namespace onnxforge::passes {

// Passes in pipeline order: `only` (empty = all) minus `skip`. Unknown names are an Error
// listing the known ones.
std::vector<const Pass*> select_passes(const std::vector<std::string>& only, const std::vector<std::string>& skip);

// Includes "growth" when the output stores more tensor bytes (initializers and Constant nodes)
// than the input: the total and each pass's change of initializer bytes, largest addition first.
nlohmann::json stats_json(const RunResult& r);
// One line for an output larger than its input: by how much, which passes added bytes and which
// removed them ("" when it is not larger).
std::string growth_note(const RunResult& r);
nlohmann::json verify_json(const VerifyResult& v);

// A step that runs on the loaded model before the pipeline (the opset upgrade, inlining the
// local functions), class 0; returns whether it changed the model.
struct PreStep {
  std::string name;
  std::function<bool(Model&)> run;
};

// On a fresh load of `path`: `steps`, then `passes` one at a time (each to its fixed point),
// checking the reference after each that changed the model. Returns the name of the first whose
// result fails, or "" when none does alone.
std::string first_breaking_pass(const std::filesystem::path& path, const std::vector<PreStep>& steps,
                                const std::vector<const Pass*>& passes, const RunOptions& options, const Reference& ref,
                                VerifyResult* failure);

// "1M", "512k", "4096" → bytes.
uint64_t parse_size(const std::string& s);

}  // namespace onnxforge::passes
