#pragma once
// What `optimize` and `attribute` share: pass selection, stats as JSON, bisecting a failure.
#include <nlohmann/json.hpp>

#include <filesystem>
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

// Runs `passes` one at a time (each to its fixed point) on a fresh load of `path`, checking the
// reference after each; returns the index of the first pass whose result fails, or -1.
int first_breaking_pass(const std::filesystem::path& path, const std::vector<const Pass*>& passes,
                        const RunOptions& options, const Reference& ref, VerifyResult* failure);

// "1M", "512k", "4096" → bytes.
uint64_t parse_size(const std::string& s);

}  // namespace onnxforge::passes
