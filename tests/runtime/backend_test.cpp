// The ONNX backend node tests from Debian's libonnx-testdata: every test whose model the runtime
// can plan runs on each test_data_set_* and is compared with output_*.pb (rtol 1e-3, atol 1e-7,
// as onnx's backend runner). Tests listed in backend_passing.txt must keep passing.
// ONNXFORGE_UPDATE_BACKEND_LIST=1 rewrites the list from this run.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <array>
#include <map>
#include <set>

#include "io/model_io.h"
#include "runtime/runtime.h"
#include "runtime/tensor_io.h"
#include "tests/common/models.h"

namespace fs = std::filesystem;
using namespace onnxforge;

namespace {

enum class Result { Pass, Fail, Unsupported };

struct Outcome {
  Result result;
  std::string detail;
};

bool close(const rt::Tensor& got, rt::Tensor want, std::string* why) {
  // onnx's test data stores bfloat16 tensors as uint16.
  if (got.dtype == DType::BFloat16 && want.dtype == DType::Uint16) want.dtype = DType::BFloat16;
  if (got.dtype != want.dtype) {
    *why = "dtype " + std::string(dtype_name(got.dtype)) + " vs " + std::string(dtype_name(want.dtype));
    return false;
  }
  if (got.shape != want.shape) {
    *why = "shape " + rt::shape_str(got.shape) + " vs " + rt::shape_str(want.shape);
    return false;
  }
  const bool fp = rt::is_float_dtype(want.dtype);
  for (int64_t i = 0, n = want.numel(); i < n; ++i) {
    double a = got.get_f64(i), b = want.get_f64(i);
    if (fp) {
      if (std::isnan(a) || std::isnan(b)) {
        if (std::isnan(a) != std::isnan(b)) {
          *why = "NaN mismatch at " + std::to_string(i);
          return false;
        }
        continue;
      }
      if (a == b) continue;
      if (!(std::fabs(a - b) <= 1e-7 + 1e-3 * std::fabs(b))) {
        *why = "element " + std::to_string(i) + ": " + std::to_string(a) + " vs " + std::to_string(b);
        return false;
      }
    } else if (got.get_i64(i) != want.get_i64(i)) {
      *why = "element " + std::to_string(i) + ": " + std::to_string(got.get_i64(i)) + " vs " +
             std::to_string(want.get_i64(i));
      return false;
    }
  }
  return true;
}

Outcome run_case(const fs::path& dir) {
  std::unique_ptr<Model> model;
  std::unique_ptr<rt::Session> session;
  try {
    model = load_model(dir / "model.onnx");
    session = std::make_unique<rt::Session>(*model);
  } catch (const std::exception& e) { return {Result::Unsupported, e.what()}; }
  bool any = false;
  for (auto& ds : fs::directory_iterator(dir)) {
    if (!ds.is_directory() || ds.path().filename().string().rfind("test_data_set_", 0) != 0) continue;
    std::vector<rt::Tensor> inputs, expected;
    try {
      for (size_t i = 0;; ++i) {
        fs::path p = ds.path() / ("input_" + std::to_string(i) + ".pb");
        if (!fs::exists(p)) break;
        inputs.push_back(rt::read_tensor_pb(p));
      }
      for (size_t i = 0;; ++i) {
        fs::path p = ds.path() / ("output_" + std::to_string(i) + ".pb");
        if (!fs::exists(p)) break;
        expected.push_back(rt::read_tensor_pb(p));
      }
    } catch (const std::exception& e) { return {Result::Unsupported, std::string("test data: ") + e.what()}; }
    for (size_t i = 0; i < inputs.size() && i < session->input_values().size(); ++i)
      if (inputs[i].dtype == DType::Uint16 && model->main().dtype(session->input_values()[i]) == DType::BFloat16)
        inputs[i].dtype = DType::BFloat16;
    if (inputs.size() != session->input_values().size())
      return {Result::Unsupported, "test gives " + std::to_string(inputs.size()) + " inputs"};
    try {
      // Twice: the first run records the arena layout, the second runs in the arena.
      for (int pass = 0; pass < 2; ++pass) {
        auto outs = session->run(inputs);
        for (size_t i = 0; i < expected.size() && i < outs.size(); ++i) {
          std::string why;
          if (!close(outs[i], expected[i], &why))
            return {Result::Fail, ds.path().filename().string() + " output " + std::to_string(i) +
                                      (pass ? " (arena run)" : "") + ": " + why};
        }
      }
    } catch (const std::exception& e) { return {Result::Fail, e.what()}; }
    any = true;
  }
  if (!any) return {Result::Unsupported, "no test data"};
  return {Result::Pass, ""};
}

fs::path list_path() { return fs::path(ONNXFORGE_SOURCE_DIR) / "tests/runtime/backend_passing.txt"; }

}  // namespace

TEST(BackendNodeTests, PassListHolds) {
  if (!fs::exists(test::backend_data_dir() / "node"))
    GTEST_SKIP() << "libonnx-testdata missing (apt install libonnx-testdata)";
  std::vector<fs::path> cases;
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple", "real"})
    if (fs::exists(test::backend_data_dir() / suite))
      for (auto& e : fs::directory_iterator(test::backend_data_dir() / suite))
        if (e.is_directory()) cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());
  std::set<std::string> listed;
  {
    std::ifstream f(list_path());
    for (std::string line; std::getline(f, line);)
      if (!line.empty() && line[0] != '#') listed.insert(line);
  }
  std::set<std::string> passing;
  int fail = 0, unsupported = 0;
  std::ofstream log(fs::temp_directory_path() / "onnxforge_backend_results.txt");
  for (const fs::path& c : cases) {
    Outcome o = run_case(c);
    std::string name = c.parent_path().filename().string() + "/" + c.filename().string();
    log << (o.result == Result::Pass   ? "PASS "
            : o.result == Result::Fail ? "FAIL "
                                       : "SKIP ")
        << name << " " << o.detail << "\n";
    if (o.result == Result::Pass)
      passing.insert(name);
    else if (o.result == Result::Fail)
      ++fail;
    else
      ++unsupported;
    if (listed.count(name) && o.result != Result::Pass) ADD_FAILURE() << name << " used to pass: " << o.detail;
  }
  const size_t total = cases.size();
  std::map<std::string, std::array<int, 2>> per_suite;  // pass, total
  for (const fs::path& c : cases) ++per_suite[c.parent_path().filename().string()][1];
  for (const std::string& n : passing) ++per_suite[n.substr(0, n.find('/'))][0];
  for (auto& [suite, pt] : per_suite) std::printf("  %-18s %4d / %4d pass\n", suite.c_str(), pt[0], pt[1]);
  std::printf(
      "backend tests: %zu pass, %d fail, %d unsupported of %zu (%.1f%% of all, %.1f%% of the runnable)\n",
      passing.size(), fail, unsupported, total,
      100.0 * static_cast<double>(passing.size()) / static_cast<double>(total),
      100.0 * static_cast<double>(passing.size()) / static_cast<double>(passing.size() + static_cast<size_t>(fail)));
  if (const char* u = std::getenv("ONNXFORGE_UPDATE_BACKEND_LIST"); u && *u == '1') {
    std::ofstream f(list_path());
    f << "# ONNX backend tests (libonnx-testdata: suite/test) that onnxforge's runtime passes; kept by\n"
         "# tests/runtime/backend_test.cpp (ONNXFORGE_UPDATE_BACKEND_LIST=1 rewrites it).\n";
    for (auto& n : passing) f << n << "\n";
  }
}
