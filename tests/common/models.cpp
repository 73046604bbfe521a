#include "tests/common/models.h"
#include "tests/common/python_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <vector>
#include <unistd.h>

namespace fs = std::filesystem;

namespace onnxforge::test {

fs::path model_dir() {
  if (const char* env = std::getenv("ONNXFORGE_MODEL_DIR")) return env;
  return ONNXFORGE_MODEL_DIR;
}

fs::path zoo_model(const std::string& name) {
  fs::path p = model_dir() / (name + ".onnx");
  if (!fs::exists(p)) {
    ADD_FAILURE() << "zoo model " << p << " is missing: run /usr/bin/python3 tools/models/export_zoo.py --small --out "
                  << model_dir() << " (ctest runs it as the zoo_export fixture)";
  }
  return p;
}

// The small (CI) configurations listed in zoo.json; full-size models may share the folder.
std::vector<fs::path> zoo_models() {
  std::vector<fs::path> out;
  fs::path manifest = model_dir() / "zoo.json";
  if (fs::exists(manifest)) {
    std::ifstream f(manifest);
    auto zoo = nlohmann::json::parse(f);
    for (auto& [name, entry] : zoo["models"].items()) {
      auto sets = entry.value("sets", nlohmann::json::array());
      bool small = std::find(sets.begin(), sets.end(), "small") != sets.end();
      fs::path p = model_dir() / entry.value("file", name + ".onnx");
      if (small && fs::exists(p)) out.push_back(p);
    }
  }
  std::sort(out.begin(), out.end());
  if (out.empty()) ADD_FAILURE() << "no zoo models in " << model_dir();
  return out;
}

fs::path backend_data_dir() { return "/usr/share/libonnx-testdata/data"; }

bool ort_peer_installed() { return fs::exists(ONNXFORGE_SOURCE_DIR "/tools/peers/node_modules/onnxruntime-node"); }

namespace {
// Every directory temp_dir() made, removed when the test process exits (set
// ONNXFORGE_KEEP_TEST_DIRS=1 to keep them for a look). Left behind, they would add up to
// gigabytes per full test run in the temporary folder (an ORT shape reference is 239 MB).
struct TempDirs {
  std::mutex mutex;
  std::vector<fs::path> made;
  ~TempDirs() {
    if (std::getenv("ONNXFORGE_KEEP_TEST_DIRS") != nullptr) return;
    std::error_code ec;
    for (const fs::path& p : made) fs::remove_all(p, ec);
  }
};
TempDirs& temp_dirs() {
  static TempDirs dirs;
  return dirs;
}
}  // namespace

fs::path temp_dir(const std::string& tag) {
  static std::atomic<int> counter{0};
  fs::path p = fs::temp_directory_path() /
               ("onnxforge_test_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  fs::remove_all(p);
  fs::create_directories(p);
  TempDirs& dirs = temp_dirs();
  std::lock_guard lock(dirs.mutex);
  dirs.made.push_back(p);
  return p;
}

fs::path python_model(const std::string& tag, const std::string& body) {
  fs::path dir = temp_dir(tag);
  fs::path script = dir / "make.py", out = dir / "model.onnx";
  std::ofstream(script)
      << "import onnx, numpy as np\nfrom onnx import helper as h, TensorProto as T, numpy_helper as nh\n"
      << body << "\nonnx.save(m, '" << out.string() << "')\n";
  std::string cmd = "/usr/bin/python3 " + script.string();
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return out;
}

}  // namespace onnxforge::test
