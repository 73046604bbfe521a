#pragma once
// Reading and writing ONNX models without copying weights.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "ir/graph.h"

namespace onnxforge {

struct LoadOptions {
  bool validate = true;  // dangling inputs, two producers, cycles
};

// Loads an .onnx file. Weights stay in the mapping (embedded) or in mapped external-data files.
// Throws onnxforge::Error naming the file and what is wrong.
std::unique_ptr<Model> load_model(const std::filesystem::path& path, const LoadOptions& options = {});

enum class WeightPlacement {
  Auto,      // embedded while the model fits in a 2 GiB protobuf, else external
  Embed,     // everything in the .onnx file (error if over 2 GiB)
  External,  // tensors of at least `external_min_bytes` go to the external-data file
};

struct SaveOptions {
  WeightPlacement placement = WeightPlacement::Auto;
  uint64_t external_min_bytes = 1024;
  // External-data file name (relative to the output folder); default "<output file name>.data".
  std::string external_file;
  // Write nodes in the graphs' table order (a loaded model's file order) instead of sorting them
  // topologically: `convert` keeps a model as it was, even one whose file is not sorted.
  bool keep_node_order = false;
};

struct SaveStats {
  uint64_t model_bytes = 0, external_bytes = 0;
  uint32_t tensors_verbatim = 0, tensors_reencoded = 0, tensors_external = 0;
  bool used_external = false;
};

// Writes atomically (temporary files in the target folder, then rename) and refuses to write
// over the model's own input files.
SaveStats save_model(const Model& model, const std::filesystem::path& path, const SaveOptions& options = {});

// Refuses (a usage error naming the path) to replace an existing file unless `overwrite`: callers
// check an output before any work, so that a long job does not end in a refusal (docs/cli.md).
void check_overwrite(const std::filesystem::path& path, bool overwrite);

// Whether every graph's nodes, in table order, come after the producers of what they read (a
// loaded model: whether the file is topologically sorted, as ONNX requires).
bool nodes_topologically_sorted(const Model& model);

// Protobuf messages cannot exceed 2 GiB.
inline constexpr uint64_t kProtobufLimit = (uint64_t{1} << 31) - 1;

}  // namespace onnxforge
