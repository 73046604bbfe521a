// `onnxforge optimize --passes/--skip` accept the names passes had before they were renamed
// (cleanup_attention → fuse_consecutive_reshapes, fuse_conv_relu → annotate_conv_activation).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "tests/common/models.h"

namespace fs = std::filesystem;
using namespace onnxforge::test;

namespace {

struct CliRun {
  int exit_code = -1;
  std::string out;
};

CliRun optimize(const std::string& args) {
  fs::path dir = temp_dir("cli_pass_names");
  std::string cmd = std::string(ONNXFORGE_BINARY_DIR) + "/onnxforge optimize '" +
                    zoo_model("resnet_small_bn").string() + "' -o '" + (dir / "out.onnx").string() +
                    "' --force --no-verify --json " + args + " 2>/dev/null";
  CliRun r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::set<std::string> passes_run(const CliRun& r) {
  std::set<std::string> names;
  nlohmann::json report = nlohmann::json::parse(r.out);
  for (const auto& p : report["passes"]) names.insert(p["name"].get<std::string>());
  return names;
}

}  // namespace

TEST(CliPassNames, OldNamesSelectTheRenamedPasses) {
  CliRun r = optimize("--passes cleanup_attention,fuse_conv_relu");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(passes_run(r), (std::set<std::string>{"fuse_consecutive_reshapes", "annotate_conv_activation"}));
  CliRun now = optimize("--passes fuse_consecutive_reshapes,annotate_conv_activation");
  ASSERT_EQ(now.exit_code, 0);
  EXPECT_EQ(passes_run(now), passes_run(r));
}

TEST(CliPassNames, OldNamesSkipTheRenamedPasses) {
  CliRun r = optimize("--skip fuse_conv_relu");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::set<std::string> ran = passes_run(r);
  EXPECT_FALSE(ran.count("annotate_conv_activation"));
  EXPECT_TRUE(ran.count("fuse_consecutive_reshapes"));
  EXPECT_TRUE(ran.count("fuse_conv_batchnorm"));
}

TEST(CliPassNames, UnknownNamesAreStillRejected) { EXPECT_EQ(optimize("--passes fuse_conv_relus").exit_code, 2); }

// --list-passes --json comes from the registry's rows: a fusion says the op it emits, that op's
// opset and its inverse; the decompositions follow, outside the default pipeline.
TEST(CliPassNames, ListPassesDerivesFromTheRegistryRows) {
  std::string text;
  FILE* p = ::popen((std::string(ONNXFORGE_BINARY_DIR) + "/onnxforge optimize --list-passes --json").c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) text.append(buf, n);
  ASSERT_EQ(::pclose(p), 0);
  const nlohmann::json list = nlohmann::json::parse(text);
  std::set<std::string> decompositions;
  bool in_pipeline = true;
  for (const auto& row : list) {
    const std::string name = row["name"].get<std::string>();
    if (!row["default"].get<bool>()) {
      in_pipeline = false;
      EXPECT_TRUE(name.starts_with("decompose_")) << name;
      decompositions.insert(name);
      continue;
    }
    EXPECT_TRUE(in_pipeline) << name << " listed after the decompositions";
    if (name == "fuse_attention") {
      EXPECT_EQ(row["emits"], "Attention");
      EXPECT_EQ(row["min_opset"], 23);
      EXPECT_EQ(row["inverse"], "decompose_attention");
      EXPECT_EQ(row["accuracy_class"], 1);
    }
    if (name == "fuse_hard_swish") {
      EXPECT_EQ(row["emits"], "HardSwish");
      EXPECT_FALSE(row.contains("inverse"));
    }
    if (name == "fold_constants") { EXPECT_FALSE(row.contains("emits")); }
    if (row.contains("inverse")) { EXPECT_TRUE(row.contains("emits")) << name; }
  }
  EXPECT_EQ(decompositions.size(), 6u);
  EXPECT_TRUE(decompositions.count("decompose_attention"));
}
