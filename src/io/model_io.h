#pragma once
// Reading and writing ONNX models without copying weights.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "io/mapped_file.h"  // FileIdentity

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
  // Replace an existing regular file at the model's path or its external-data path (the CLI's
  // --overwrite); without it save_model refuses them. Devices, FIFOs, links and the model's own
  // input files are refused either way (io/safe_file.h).
  bool overwrite = true;
  // Further files never written onto (the command's other inputs).
  std::vector<FileIdentity> inputs;
};

struct SaveStats {
  uint64_t model_bytes = 0, external_bytes = 0;
  uint32_t tensors_verbatim = 0, tensors_reencoded = 0, tensors_external = 0;
  bool used_external = false;
};

// Writes atomically (temporary files in the target folder, then rename) by the file rules of
// io/safe_file.h: never over the model's own input files, a link, a device or a FIFO.
SaveStats save_model(const Model& model, const std::filesystem::path& path, const SaveOptions& options = {});

// Where save_model puts the external data of a model written to `path`.
std::filesystem::path external_data_path(const std::filesystem::path& path, const SaveOptions& options);

// Whether every graph's nodes, in table order, come after the producers of what they read (a
// loaded model: whether the file is topologically sorted, as ONNX requires).
bool nodes_topologically_sorted(const Model& model);

// Protobuf messages cannot exceed 2 GiB.
inline constexpr uint64_t kProtobufLimit = (uint64_t{1} << 31) - 1;

}  // namespace onnxforge
