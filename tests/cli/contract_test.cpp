// The command-line contract (docs/cli.md), run against the binary: exit codes, usage errors that
// name the option, JSON errors, --overwrite/--write-unverified, the positional output,
// --input-shape, --dim checks, human units, inspect's inputs and outputs, --version.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "io/model_io.h"
#include "tests/cli/cli_runner.h"
#include "tests/common/models.h"
#include "tests/common/proto_builder.h"

namespace fs = std::filesystem;
using namespace onnxforge;
using namespace onnxforge::test;
using ::testing::HasSubstr;
using json = nlohmann::json;

namespace {

constexpr int kFloat = onnx::TensorProto::FLOAT;

fs::path tiny(const std::string& tag) {
  fs::path p = temp_dir(tag) / "tiny.onnx";
  write_model(tiny_model(), p);
  return p;
}

// silero VAD's state input: [2, ?, 128] with an unnamed dim, plus a named batch dim elsewhere.
fs::path unnamed_dim_model(const std::string& tag) {
  auto m = make_model({make_node("Relu", {"state"}, {"y"}, "relu0"), make_node("Neg", {"x"}, {"z"}, "neg0")},
                      {tensor_info("state", kFloat, {2, -1, 128}), tensor_info("x", kFloat, {-1, 4}, {{0, "batch"}})},
                      {tensor_info("y", kFloat, {2, -1, 128}), tensor_info("z", kFloat, {-1, 4}, {{0, "batch"}})});
  fs::path p = temp_dir(tag) / "unnamed.onnx";
  write_model(m, p);
  return p;
}

void expect_usage_error(const std::vector<std::string>& args, const std::string& option) {
  CliResult r = run_cli(args);
  std::string cmd;
  for (const auto& a : args) cmd += a + " ";
  ASSERT_TRUE(r.exited()) << cmd << r.describe();
  EXPECT_EQ(r.code, 2) << cmd << r.describe();
  EXPECT_THAT(r.err, HasSubstr(option)) << cmd << r.describe();
}

}  // namespace

TEST(CliContract, ExitCodes) {
  fs::path m = tiny("exit");
  EXPECT_EQ(run_cli({"inspect", m}).code, 0);
  EXPECT_EQ(run_cli({"--help"}).code, 0);
  EXPECT_EQ(run_cli({"inspect", "--help"}).code, 0);
  EXPECT_EQ(run_cli({}).code, 2);  // no command
  EXPECT_EQ(run_cli({"nosuchcommand"}).code, 2);
  EXPECT_EQ(run_cli({"inspect", m, "--no-such-option"}).code, 2);
  EXPECT_EQ(run_cli({"inspect", "/nonexistent.onnx"}).code, 2);
  EXPECT_EQ(run_cli({"run", m, "--seed"}).code, 2);  // missing value
  // 1: the check said no (diff found a difference; verify found a mismatch).
  auto other = tiny_model();
  other.mutable_graph()->mutable_node(0)->set_op_type("Sigmoid");
  fs::path m2 = m.parent_path() / "other.onnx";
  write_model(other, m2);
  EXPECT_EQ(run_cli({"diff", m, m}).code, 0);
  EXPECT_EQ(run_cli({"diff", m, m2}).code, 1);
  EXPECT_EQ(run_cli({"verify", m, m, "--seeds", "2"}).code, 0);
  EXPECT_EQ(run_cli({"verify", m, m2, "--seeds", "2"}).code, 1);
}

TEST(CliContract, MalformedOptionValuesAreUsageErrorsNamingTheOption) {
  fs::path m = tiny("malformed");
  fs::path out = m.parent_path() / "out.onnx";
  expect_usage_error({"convert", m, out, "--external-data=abc"}, "--external-data");
  expect_usage_error({"attribute", m, "--dim", "batch=abc"}, "--dim");
  expect_usage_error({"optimize", m, out, "--dim", "=3"}, "--dim");
  expect_usage_error({"run", m, "--dim", "batch=-1"}, "--dim");
  expect_usage_error({"run", m, "--seed", "x"}, "--seed");
  expect_usage_error({"run", m, "--input-shape", "x:1,a"}, "--input-shape");
  expect_usage_error({"run", m, "--input-shape", "x"}, "--input-shape");
  expect_usage_error({"bench", m, "--iters", "-3"}, "--iters");
  expect_usage_error({"verify", m, m, "--seeds", "0"}, "--seeds");
  expect_usage_error({"optimize", m, out, "--fold-size", "12Q"}, "--fold-size");
  expect_usage_error({"run", m, "--max-memory", "lots"}, "--max-memory");
  expect_usage_error({"optimize", m, out, "-o", out}, "output");  // both forms of the output
}

TEST(CliContract, JsonErrors) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{"inspect", "/nonexistent/model.onnx", "--json"},
                                               {"run", "/nonexistent/model.onnx", "--json"}}) {
    CliResult r = run_cli(args);
    ASSERT_EQ(r.code, 2) << r.describe();
    json j = json::parse(r.out);
    EXPECT_EQ(j["error"]["kind"], "input") << r.out;
    EXPECT_THAT(j["error"]["message"].get<std::string>(), HasSubstr("cannot open"));
    EXPECT_EQ(j["error"]["file"], "/nonexistent/model.onnx");
  }
  CliResult r = run_cli({"inspect", "--json", "--bogus"});
  ASSERT_EQ(r.code, 2) << r.describe();
  json j = json::parse(r.out);
  EXPECT_EQ(j["error"]["kind"], "usage");
  EXPECT_TRUE(j["error"]["file"].is_null());
  // A bad model under --json: the message names what is wrong, "file" the model.
  fs::path bad = temp_dir("jsonbad") / "bad.onnx";
  write_bytes(bad, "\x0a\x02hi");
  r = run_cli({"inspect", bad, "--json"});
  ASSERT_EQ(r.code, 2) << r.describe();
  j = json::parse(r.out);
  EXPECT_EQ(j["error"]["file"], bad.string());
  EXPECT_THAT(j["error"]["message"].get<std::string>(), HasSubstr("wire type"));
  // Over the memory budget: kind "memory".
  auto big = make_model({make_node("Relu", {"x"}, {"y"}, "relu0")}, {tensor_info("x", kFloat, {1 << 20, 64})},
                        {tensor_info("y", kFloat, {})});
  fs::path bm = temp_dir("jsonmem") / "big.onnx";
  write_model(big, bm);
  r = run_cli({"run", bm, "--json", "--max-memory", "16M"});
  ASSERT_EQ(r.code, 2) << r.describe();
  EXPECT_EQ(json::parse(r.out)["error"]["kind"], "memory");
}

TEST(CliContract, PositionalOutputAndOverwrite) {
  fs::path m = tiny("positional");
  fs::path out = m.parent_path() / "out.onnx";
  CliResult r = run_cli({"optimize", m, out, "--no-verify"});
  ASSERT_EQ(r.code, 0) << r.describe();
  EXPECT_NO_THROW(load_model(out));
  r = run_cli({"optimize", m, out, "--no-verify"});
  EXPECT_EQ(r.code, 2) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("--overwrite"));
  r = run_cli({"optimize", m, "-o", out, "--no-verify", "--overwrite"});
  EXPECT_EQ(r.code, 0) << r.describe();
  r = run_cli({"optimize", m, out, "--no-verify", "--force"});
  EXPECT_EQ(r.code, 0) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("--force is deprecated"));
  r = run_cli({"optimize", m});
  EXPECT_EQ(r.code, 2) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("needs an output"));
}

TEST(CliContract, InputShapeForUnnamedDims) {
  fs::path m = unnamed_dim_model("inshape");
  CliResult r = run_cli({"run", m, "--input-shape", "state:2,7,128", "--dim", "batch=3", "--json"});
  ASSERT_EQ(r.code, 0) << r.describe();
  json j = json::parse(r.out);
  EXPECT_EQ(j["outputs"][0]["shape"], json::array({2, 7, 128}));
  EXPECT_EQ(j["outputs"][1]["shape"], json::array({3, 4}));
  // A named dim given through --input-shape sizes every input that shares it.
  r = run_cli({"run", m, "--input-shape", "x:5,4", "--input-shape", "state:2,1,128", "--json"});
  ASSERT_EQ(r.code, 0) << r.describe();
  EXPECT_EQ(json::parse(r.out)["outputs"][1]["shape"], json::array({5, 4}));
  // Wrong rank, a static dim contradicted, an unknown input, a conflict with --dim: usage errors.
  expect_usage_error({"run", m, "--input-shape", "state:2,7"}, "rank 3");
  expect_usage_error({"run", m, "--input-shape", "state:3,7,128"}, "axis 0");
  expect_usage_error({"run", m, "--input-shape", "nope:1"}, "no input 'nope'");
  expect_usage_error({"run", m, "--input-shape", "x:5,4", "--dim", "batch=2"}, "batch");
  // Every command with --dim has it.
  fs::path out = m.parent_path() / "out.onnx";
  r = run_cli({"optimize", m, out, "--input-shape", "state:2,7,128"});
  ASSERT_EQ(r.code, 0) << r.describe();
  auto opt = load_model(out);
  auto shape = opt->main().shape(*opt->main().find_value("state"));
  ASSERT_EQ(shape.size(), 3u);
  EXPECT_EQ(shape[1].value, 7);
  for (std::vector<std::string> args : {std::vector<std::string>{"verify", m, m, "--seeds", "1"},
                                        {"bench", m, "--iters", "1"},
                                        {"attribute", m, "--no-verify"}}) {
    args.push_back("--input-shape");
    args.push_back("state:2,3,128");
    r = run_cli(args);
    EXPECT_EQ(r.code, 0) << args[0] << r.describe();
  }
}

TEST(CliContract, MisspeltDimIsAnErrorInEveryCommand) {
  fs::path m = unnamed_dim_model("misspelt");
  fs::path out = m.parent_path() / "out.onnx";
  for (std::vector<std::string> args :
       {std::vector<std::string>{"run", m}, {"optimize", m, out}, {"verify", m, m}, {"bench", m}, {"attribute", m}}) {
    args.push_back("--dim");
    args.push_back("batchh=2");
    CliResult r = run_cli(args);
    EXPECT_EQ(r.code, 2) << args[0] << r.describe();
    EXPECT_THAT(r.err, HasSubstr("no symbolic dim 'batchh'")) << args[0];
    EXPECT_THAT(r.err, HasSubstr("batch")) << args[0];
  }
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(run_cli({"run", m, "--dim", "state:1=4"}).code, 0);  // INPUT:AXIS names an unnamed dim
}

TEST(CliContract, HumanUnits) {
  fs::path m = tiny("units");
  CliResult r = run_cli({"convert", m, m.parent_path() / "c.onnx"});
  ASSERT_EQ(r.code, 0) << r.describe();
  EXPECT_THAT(r.err, ::testing::ContainsRegex("wrote .* \\([0-9]+ B\\) in [0-9.]+ (ns|us|ms|s)"));
  r = run_cli({"run", m});
  EXPECT_THAT(r.out, ::testing::ContainsRegex("ran in [0-9.]+ (ns|us|ms|s) "));
  r = run_cli({"optimize", m, m.parent_path() / "o.onnx"});
  EXPECT_THAT(r.out, ::testing::ContainsRegex("initializer bytes [0-9.]+ [KMG]?i?B -> "));
}

TEST(CliContract, InspectListsInputsAndOutputs) {
  fs::path m = unnamed_dim_model("inspectio");
  CliResult r = run_cli({"inspect", m});
  ASSERT_EQ(r.code, 0) << r.describe();
  EXPECT_THAT(r.out,
              ::testing::ContainsRegex("inputs\n  state +float32 +\\[2, \\?, 128\\]\n  x +float32 +\\[batch, 4\\]"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("outputs\n  y +float32 +\\[2, \\?, 128\\]"));
  r = run_cli({"inspect", m, "--json"});
  json j = json::parse(r.out);
  EXPECT_EQ(j["graph_inputs"][0]["name"], "state");
  EXPECT_EQ(j["graph_inputs"][0]["dtype"], "float32");
  EXPECT_EQ(j["graph_inputs"][0]["shape"], json::parse("[2, null, 128]"));
  EXPECT_EQ(j["graph_inputs"][1]["shape"], json::parse("[\"batch\", 4]"));
}

TEST(CliContract, VersionListsIsaLevels) {
  CliResult r = run_cli({"--version"});
  ASSERT_EQ(r.code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("onnxforge 0.1.0"));
  EXPECT_THAT(r.out, HasSubstr("this CPU supports: sse"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("active: (sse|avx2|avx512)"));
}

TEST(CliContract, WriteUnverifiedFlag) {
  // Verification cannot fail on demand with the real passes, so this checks the flag's wiring:
  // accepted, documented in --help, and a passing model writes and exits 0.
  fs::path m = tiny("unverified");
  CliResult r = run_cli({"optimize", m, m.parent_path() / "o.onnx", "--write-unverified"});
  EXPECT_EQ(r.code, 0) << r.describe();
  r = run_cli({"optimize", "--help"});
  EXPECT_THAT(r.out, HasSubstr("--write-unverified"));
  EXPECT_THAT(r.out, HasSubstr("--overwrite"));
}

// Commands and options added after the contract was written (audit, --target-opset) follow it too.
TEST(CliContract, AuditAndTargetOpset) {
  fs::path m = tiny("newcmds");  // opset 13
  fs::path out = m.parent_path() / "up.onnx";
  // audit: 0 on a model, 2 on a missing one (with a JSON error under --json), 2 on a bad option.
  CliResult r = run_cli({"audit", m, "--json"});
  ASSERT_EQ(r.code, 0) << r.describe();
  EXPECT_FALSE(json::parse(r.out).empty()) << r.out;
  r = run_cli({"audit", m, "/nonexistent/model.onnx", "--json"});
  ASSERT_EQ(r.code, 2) << r.describe();
  json j = json::parse(r.out);
  EXPECT_EQ(j["error"]["kind"], "input");
  EXPECT_EQ(j["error"]["file"], "/nonexistent/model.onnx");
  expect_usage_error({"audit", m, "--bogus"}, "--bogus");
  // --target-opset: malformed or out of range values are usage errors naming the option.
  for (const char* cmd : {"convert", "optimize"}) {
    expect_usage_error({cmd, m, out, "--target-opset", "abc"}, "--target-opset");
    expect_usage_error({cmd, m, out, "--target-opset", "99"}, "--target-opset");
    // A downgrade is bad input (exit 2, nothing written), as JSON under --json.
    r = run_cli({cmd, m, out, "--target-opset", "11", "--json"});
    ASSERT_EQ(r.code, 2) << cmd << r.describe();
    EXPECT_THAT(json::parse(r.out)["error"]["message"].get<std::string>(), HasSubstr("downgrade")) << cmd;
    EXPECT_FALSE(fs::exists(out)) << cmd;
    // Positional output, upgrade, and an existing output refused without --overwrite.
    r = run_cli({cmd, m, out, "--target-opset", "17"});
    ASSERT_EQ(r.code, 0) << cmd << r.describe();
    EXPECT_EQ(load_model(out)->opset(""), 17) << cmd;
    r = run_cli({cmd, m, out, "--target-opset", "18"});
    EXPECT_EQ(r.code, 2) << cmd << r.describe();
    EXPECT_THAT(r.err, HasSubstr("--overwrite")) << cmd;
    EXPECT_EQ(load_model(out)->opset(""), 17) << cmd;
    r = run_cli({cmd, m, out, "--target-opset", "18", "--overwrite"});
    EXPECT_EQ(r.code, 0) << cmd << r.describe();
    EXPECT_EQ(load_model(out)->opset(""), 18) << cmd;
    fs::remove(out);
  }
  r = run_cli({"convert", m, out, "--target-opset", "17", "--json"});
  ASSERT_EQ(r.code, 0) << r.describe();
  EXPECT_EQ(json::parse(r.out)["upgrade"]["opset_to"], 17);
  // optimize: the output is checked before any work, also with --target-opset.
  r = run_cli({"optimize", m, out, "--target-opset", "17"});
  EXPECT_EQ(r.code, 2) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("--overwrite"));
}
