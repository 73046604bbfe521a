#pragma once
// Test support: where exported zoo models and ONNX backend test data live.
#include <filesystem>
#include <string>
#include <vector>

namespace onnxforge::test {

// Folder of the exported zoo (tools/models/export_zoo.py), created by the zoo_export fixture.
std::filesystem::path model_dir();

// Path of a zoo model by name (e.g. "bert_small"); the test fails (not skips) if it is missing.
std::filesystem::path zoo_model(const std::string& name);

// Every .onnx file of the zoo (small configurations).
std::vector<std::filesystem::path> zoo_models();

// Debian's libonnx-testdata root (/usr/share/libonnx-testdata/data).
std::filesystem::path backend_data_dir();

// Whether ONNX Runtime, the peer (tools/peers/install.sh), is installed.
bool ort_peer_installed();

// A fresh, empty temporary directory removed at process exit.
std::filesystem::path temp_dir(const std::string& tag);

}  // namespace onnxforge::test
