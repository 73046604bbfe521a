#pragma once
// Test models written by onnx's Python helper (Debian's python3 with onnx and NumPy).
#include <filesystem>
#include <string>

namespace onnxforge::test {

// `body` (run with onnx, `h` (onnx.helper), `T` (TensorProto), `np` (numpy) and `nh`
// (numpy_helper) imported) builds the ModelProto `m`, saved as model.onnx in a fresh
// temp_dir(tag). The test fails if the script does.
std::filesystem::path python_model(const std::string& tag, const std::string& body);

}  // namespace onnxforge::test
