#pragma once
// Tensor files: NumPy .npy (read/write) and ONNX TensorProto .pb (read), plus the file-name
// escaping shared with tools/peers (every char outside [A-Za-z0-9._-] becomes '_').
#include <filesystem>
#include <string>

#include "io/safe_file.h"
#include "runtime/tensor.h"

namespace onnxforge::rt {

// Input files are read as side files (io/safe_file.h), bounded by the memory budget.
Tensor read_npy(const std::filesystem::path& path);
// bfloat16 is written as float32 (NumPy has no bfloat16). Written by the file rules of
// io/safe_file.h (by default an existing regular file is replaced).
void write_npy(const std::filesystem::path& path, const Tensor& t, const WriteRules& rules = WriteRules(true));
// A serialized TensorProto (the ONNX backend tests' input_*.pb / output_*.pb); `name` receives
// TensorProto.name.
Tensor read_tensor_pb(const std::filesystem::path& path, std::string* name = nullptr);
// .npy or .pb by extension.
Tensor read_tensor_file(const std::filesystem::path& path);

std::string escape_file_name(std::string_view tensor_name);

// A stable checksum of the values (sum of float64 values and of |values|, printed by `run`).
struct Checksum {
  double sum = 0, abs_sum = 0;
};
Checksum checksum(const Tensor& t);

}  // namespace onnxforge::rt
