#pragma once
// Models that arrive or leave as bytes (the Python module's bytes and onnx.ModelProto, the C++
// API's load_bytes/to_bytes). The reader maps files and the writer writes them atomically, so a
// model in memory goes through a private folder under $TMPDIR: written once, then mapped like any
// other file. The folder and everything in it are removed when the ScratchDir goes.
#include <filesystem>
#include <string>
#include <string_view>

#include "io/model_io.h"

namespace onnxforge::api {

class ScratchDir {
 public:
  ScratchDir();  // throws onnxforge::Error when $TMPDIR has no room for a folder
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Writes `bytes` to a file `name` in the folder and returns its path.
  std::filesystem::path write(std::string_view name, std::string_view bytes) const;

 private:
  std::filesystem::path path_;
};

std::string read_file_bytes(const std::filesystem::path& path);

// The model as one serialized ModelProto, weights embedded (an Error naming `what` past 2 GiB).
std::string model_bytes(const Model& model, std::string_view what = "the model");

}  // namespace onnxforge::api
