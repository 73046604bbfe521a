#pragma once
// Shared by the libFuzzer targets (tools/fuzz/README.md): the input bytes become a model file in
// a per-process scratch folder that also holds what hostile external-data entries may point at
// (a data file, a FIFO, a directory), and errors are sorted into expected (onnxforge::Error: a
// clean refusal) and findings (anything else escapes and libFuzzer reports it).
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "io/budget.h"
#include "io/model_io.h"
#include "ir/error.h"

namespace onnxforge::fuzz {

inline const std::filesystem::path& scratch() {
  static const std::filesystem::path dir = [] {
    auto base = std::filesystem::exists("/dev/shm") ? std::filesystem::path("/dev/shm")
                                                    : std::filesystem::temp_directory_path();
    auto d = base / ("onnxforge_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d / "dir");
    std::ofstream(d / "data.bin", std::ios::binary) << std::string(4096, '\x3f');
    ::mkfifo((d / "fifo").c_str(), 0600);
    // Small budget: a fuzz input must not allocate its way past libFuzzer's RSS limit; going
    // over the budget is a clean refusal (onnxforge::Error), not a finding.
    set_memory_budget(uint64_t{256} << 20);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch(), ec);
    });
    return d;
  }();
  return dir;
}

// Writes the input as scratch()/model.onnx and loads it; nullptr when the reader refuses it.
// Also starts the input's time budget: a model whose compute is unbounded (a Loop of 2^62 empty
// iterations) is refused cleanly after 5 s, half of libFuzzer's -timeout, so a timeout finding
// means code that does not reach a check (a loop inside one kernel), not a long model.
inline std::unique_ptr<Model> load_bytes(const uint8_t* data, size_t size) {
  const auto path = scratch() / "model.onnx";
  set_time_budget(5);
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    return load_model(path);
  } catch (const Error&) { return nullptr; }
}

}  // namespace onnxforge::fuzz
