#pragma once
// This process's /proc/self/status fields, for the memory tests (LlmMemory, InPlaceWeights).
#include <fstream>
#include <string>

namespace onnxforge::test {

// A /proc/self/status field in bytes (kB lines), -1 when absent.
inline double status_bytes(const std::string& key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key + ":", 0) == 0) return std::stod(line.substr(key.size() + 1)) * 1024.0;
  return -1;
}

}  // namespace onnxforge::test
