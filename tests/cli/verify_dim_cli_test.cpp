// optimize's --verify-dim sizes verification only: with --no-verify there is nothing for it to
// size, and a flag that silently does nothing is refused (exit 2, one error line, nothing written).
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/cli/cli_runner.h"
#include "tests/common/models.h"

using namespace onnxforge::test;
namespace fs = std::filesystem;

namespace {

// A check that runs after verification, asked for with --no-verify: one usage error naming both
// options, and nothing written.
void expect_usage_error_with_no_verify(const fs::path& model, const fs::path& out, const std::string& flag,
                                       const std::string& value) {
  CliResult r = run_cli({"optimize", model.string(), "-o", out.string(), "--no-verify", flag, value});
  EXPECT_EQ(r.code, 2) << r.describe();
  EXPECT_NE(r.err.find(flag), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--no-verify"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("error:"), r.err.rfind("error:")) << r.err;  // one error
  EXPECT_FALSE(fs::exists(out));
}

TEST(CliVerifyDim, WithNoVerifyIsAUsageError) {
  const fs::path model = zoo_model("llama_small_past");
  const fs::path out = temp_dir("cli_verify_dim") / "out.onnx";
  expect_usage_error_with_no_verify(model, out, "--verify-dim", "sequence=1");
  // Either alone works: --no-verify writes the model, --verify-dim verifies at that size.
  CliResult r = run_cli({"optimize", model.string(), "-o", out.string(), "--no-verify"});
  EXPECT_EQ(r.code, 0) << r.describe();
  EXPECT_TRUE(fs::exists(out));
  r = run_cli({"optimize", model.string(), "-o", out.string(), "--overwrite", "--verify-dim", "sequence=1",
               "--verify-seeds", "1"});
  EXPECT_EQ(r.code, 0) << r.describe();
}

// --verify-decode likewise: generation is verified after the verification --no-verify skips.
TEST(CliVerifyDim, VerifyDecodeWithNoVerifyIsAUsageError) {
  expect_usage_error_with_no_verify(zoo_model("llama_small_past"), temp_dir("cli_verify_decode") / "out.onnx",
                                    "--verify-decode", "2");
}

}  // namespace
