#pragma once
// Tensor files: NumPy .npy (read/write), .npz archives and ONNX TensorProto .pb (read), plus the
// file-name escaping shared with tools/peers (every char outside [A-Za-z0-9._-] becomes '_').
// Malformed files are an onnxforge::Error (Kind::Input) whose message starts with the file and
// whose file() is set.
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/safe_file.h"
#include "runtime/tensor.h"

namespace onnxforge {
class MappedFile;
}

namespace onnxforge::rt {

// The bytes of a file given as input data. Only regular files are read, opened without blocking
// (a FIFO or a device fails at once with one line). The one place input files are opened: a
// shared side-file reader can replace it.
struct InputFileBytes {
  std::string_view view;
  std::shared_ptr<const MappedFile> hold;
};
InputFileBytes read_input_file(const std::filesystem::path& path);

// Parsers over bytes; `where` names the source in messages (a file, or "FILE: entry 'x.npy'").
Tensor parse_npy(std::string_view bytes, const std::string& where);
Tensor parse_tensor_pb(std::string_view bytes, const std::string& where, std::string* name = nullptr);

Tensor read_npy(const std::filesystem::path& path);
// bfloat16 is written as float32 (NumPy has no bfloat16). Written by the file rules of
// io/safe_file.h (by default an existing regular file is replaced).
void write_npy(const std::filesystem::path& path, const Tensor& t, const WriteRules& rules = WriteRules(true));
// A serialized TensorProto (the ONNX backend tests' input_*.pb / output_*.pb); `name` receives
// TensorProto.name.
Tensor read_tensor_pb(const std::filesystem::path& path, std::string* name = nullptr);
// A NumPy .npz archive (np.savez / np.savez_compressed): its arrays in archive order, named
// without ".npy".
std::vector<std::pair<std::string, Tensor>> read_npz(const std::filesystem::path& path);
// .npy or .pb by extension.
Tensor read_tensor_file(const std::filesystem::path& path);

std::string escape_file_name(std::string_view tensor_name);

// A stable checksum of the values (sum of float64 values and of |values|, printed by `run`).
struct Checksum {
  double sum = 0, abs_sum = 0;
};
Checksum checksum(const Tensor& t);

}  // namespace onnxforge::rt
