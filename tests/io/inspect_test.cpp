// `inspect` counts equal python-onnx's counts on every zoo model and a sample of backend models.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>

#include "analysis/inspect.h"
#include "io/model_io.h"
#include "tests/common/models.h"

namespace fs = std::filesystem;
using namespace onnxforge;
using namespace onnxforge::test;

namespace {

nlohmann::json python_counts(const std::vector<fs::path>& models) {
  std::string cmd = "/usr/bin/python3 " ONNXFORGE_SOURCE_DIR "/tests/io/onnx_counts.py";
  for (const auto& m : models) cmd += " '" + m.string() + "'";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0) << cmd;
  return nlohmann::json::parse(out);
}

void expect_same_counts(const std::vector<fs::path>& models) {
  auto ref = python_counts(models);
  for (const auto& path : models) {
    SCOPED_TRACE(path.string());
    const auto& r = ref.at(path.string());
    auto model = load_model(path);
    auto j = summarize(*model).to_json();
    EXPECT_EQ(j["nodes"], r["nodes"]);
    EXPECT_EQ(j["nodes_total"], r["nodes_total"]);
    EXPECT_EQ(j["initializers"], r["initializers"]);
    EXPECT_EQ(j["inputs"], r["inputs"]);
    EXPECT_EQ(j["outputs"], r["outputs"]);
    EXPECT_EQ(j["value_infos"], r["value_infos"]);
    EXPECT_EQ(j["functions"], r["functions"]);
    EXPECT_EQ(j["ir_version"], r["ir_version"]);
    EXPECT_EQ(j["ops"], r["ops"]);
  }
}

}  // namespace

TEST(Inspect, CountsMatchPythonOnnxOnTheZoo) { expect_same_counts(zoo_models()); }

TEST(Inspect, CountsMatchPythonOnnxOnBackendModelsWithSubgraphs) {
  std::vector<fs::path> models;
  for (const char* name : {"node/test_if", "node/test_loop11", "node/test_scan_sum", "node/test_if_seq",
                           "node/test_sequence_map_add_2_sequences", "simple/test_expand_shape_model1",
                           "pytorch-converted/test_Conv2d", "node/test_range_float_type_positive_delta_expanded"})
    models.push_back(backend_data_dir() / name / "model.onnx");
  expect_same_counts(models);
}

TEST(Inspect, PassRelevanceSeesConvBatchNormPairs) {
  auto model = load_model(zoo_model("resnet_small_bn"));
  auto s = summarize(*model);
  bool found = false;
  for (auto& [family, text] : s.relevance)
    if (family == "Conv+BatchNormalization") {
      found = true;
      EXPECT_EQ(text.find(" 0 Conv→BN"), std::string::npos) << text;
    }
  EXPECT_TRUE(found);
}
