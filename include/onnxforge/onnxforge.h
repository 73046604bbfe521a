#pragma once
// onnxforge's C++ API: load an ONNX model, optimize it (with verification), verify two models
// against each other, save. Link with CMake:
//
//   find_package(onnxforge REQUIRED)
//   target_link_libraries(my_tool PRIVATE onnxforge::onnxforge)
//
//   #include <onnxforge/onnxforge.h>
//   onnxforge::LoadedModel model = onnxforge::load("model.onnx");
//   onnxforge::OptimizeOptions options;
//   options.skip = {"fuse_matmul_add"};
//   onnxforge::OptimizeResult r = onnxforge::optimize(model, options);
//   if (!r.report.verification_passed) ...           // r.report.failure says why
//   onnxforge::save(r.model, "model.opt.onnx");
//   onnxforge::VerifyReport v = onnxforge::verify(model, r.model);   // more seeds, other tolerances
//
// Every function reports bad input (a file that cannot be read, a malformed model, an unknown
// pass name) by throwing onnxforge::Error with a message that names the file and what to do.
// Nothing is printed. Functions may be called from several threads at once on different models;
// work inside a call runs on the TBB thread pool (OptimizeOptions::threads caps it per call).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "onnxforge/error.h"

namespace onnxforge {

// "0.1.0"
ONNXFORGE_API const char* version();

// A model in memory. Weights are not copied: they stay in the memory-mapped file (and its
// external-data files), which must stay in place while the model is alive. Move-only.
class ONNXFORGE_API LoadedModel {
 public:
  LoadedModel(LoadedModel&&) noexcept;
  LoadedModel& operator=(LoadedModel&&) noexcept;
  ~LoadedModel();

  // Where the model came from: its path, or "<bytes>" / "<optimized>" for models without a file.
  const std::string& source() const;
  // Main graph and subgraphs, live nodes / initializers / initializer bytes.
  int64_t nodes() const;
  int64_t initializers() const;
  int64_t initializer_bytes() const;

  struct Impl;
  explicit LoadedModel(std::unique_ptr<Impl> impl);
  Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// Loads an .onnx file (and its external data).
ONNXFORGE_API LoadedModel load(const std::filesystem::path& path);
// Loads a serialized ModelProto held in memory (kept in a private temporary file while the model
// lives; external data must be embedded).
ONNXFORGE_API LoadedModel load_bytes(std::string_view serialized);

enum class WeightStorage {
  Auto,      // embedded while the model fits in a 2 GiB protobuf, else external
  Embed,     // everything in the .onnx file (error if over 2 GiB)
  External,  // tensors of at least external_min_bytes go to "<file name>.data"
};

struct SaveModelOptions {
  WeightStorage weights = WeightStorage::Auto;
  uint64_t external_min_bytes = 1024;
};

// Writes atomically (a temporary file, then rename); refuses to overwrite the model's own input.
ONNXFORGE_API void save(const LoadedModel& model, const std::filesystem::path& path,
                        const SaveModelOptions& options = {});
// The serialized ModelProto (weights embedded; an Error over 2 GiB).
ONNXFORGE_API std::string to_bytes(const LoadedModel& model);

struct OptimizeOptions {
  std::vector<std::string> passes;      // run only these (empty: all, in pipeline order)
  std::vector<std::string> skip;        // never these
  std::map<std::string, int64_t> dims;  // fix symbolic dims: {"batch", 1}
  bool verify = true;                   // run original and result on `seeds` seeded inputs
  int seeds = 3;
  std::optional<int64_t> target_opset;               // upgrade the default-domain opset first (never a downgrade)
  std::optional<uint64_t> fold_size;                 // largest constant a fold may create (default 1 MiB)
  int threads = 0;                                   // worker threads for this call (0: all)
  bool strip_hierarchy = false;                      // drop module-hierarchy tags from the result
  std::function<void(const std::string&)> progress;  // status lines; may be called from worker threads
  // Deployment target: "generic" (every op, the model's opset), "ort", "tensorrt", "tflite".
  // Fusions into ops the target lacks do not run; such ops already in the model are decomposed.
  std::string target = "generic";
};

struct PassReport {
  std::string name;
  int accuracy_class = 0;  // 0 lossless, 1 float-bounded, 2 empirically safe
  int64_t nodes_removed = 0, initializers_removed = 0, bytes_removed = 0;  // negative: added
  uint64_t matches_applied = 0;
  int rounds = 0;
  double seconds = 0;
};

struct OptimizeReport {
  int64_t nodes_before = 0, nodes_after = 0;
  int64_t initializers_before = 0, initializers_after = 0;
  int64_t bytes_before = 0, bytes_after = 0;  // initializer bytes
  int rounds = 0;
  int worst_accuracy_class = 0;    // among the passes that changed something
  std::vector<PassReport> passes;  // in pipeline order
  bool verified = false;
  bool verification_passed = true;  // true when not verified
  double max_diff = 0;              // over outputs and seeds
  int seeds = 0;
  std::string breaking_pass;  // when verification failed
  std::string failure;        // when verification failed: what `onnxforge optimize` prints
  std::string hint;           // what an opset upgrade would unlock (empty: nothing)
  std::string json;           // what `onnxforge optimize --json` prints
};

struct OptimizeResult {
  LoadedModel model;  // the optimized model (also when verification failed: check the report)
  OptimizeReport report;
};

// Runs the passes to a fixed point and verifies the result against `model` (which is unchanged).
ONNXFORGE_API OptimizeResult optimize(const LoadedModel& model, const OptimizeOptions& options = {});

struct VerifyOptions {
  int seeds = 20;
  uint64_t first_seed = 0;
  double atol = 1e-4, rtol = 1e-3;  // |a - b| <= atol + rtol * |a|, element by element
  std::map<std::string, int64_t> dims;
};

struct OutputReport {
  std::string name;
  double max_abs = 0;  // over seeds
  double max_rel = 0;
  bool pass = true;
  std::string problem;  // shape / dtype / NaN mismatch
};

struct VerifyReport {
  bool pass = true;
  int seeds = 0;
  double max_diff = 0;  // max abs diff over outputs and seeds
  std::vector<OutputReport> outputs;
  std::string text;  // what `onnxforge verify` prints
  std::string json;  // what `onnxforge verify --json` prints
};

// Runs both models with the built-in runtime on the same seeded inputs and compares the outputs.
ONNXFORGE_API VerifyReport verify(const LoadedModel& reference, const LoadedModel& candidate,
                                  const VerifyOptions& options = {});

}  // namespace onnxforge
