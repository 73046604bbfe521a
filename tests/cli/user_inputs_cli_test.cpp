// The command line of issue 29: --inputs / --input-value on the commands that run models, the
// degenerate verdict and --strict, a FIFO given as an input file, optimize's early output check,
// the no-kernel error, and `--target ort` outputs that load in ONNX Runtime 1.30.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <chrono>
#include <fstream>

#include <nlohmann/json.hpp>

#include "runtime/tensor.h"
#include "runtime/tensor_io.h"
#include "tests/cli/cli_runner.h"
#include "tests/common/models.h"

using namespace onnxforge;
using namespace onnxforge::test;
namespace fs = std::filesystem;

namespace {

// y = x * 2 + Cast(n); x float [batch, seq], n int64 scalar.
fs::path scaled_sum(const fs::path& dir) {
  onnx::NodeProto cast = make_node("Cast", {"n"}, {"nf"}, "cast");
  add_int(cast, "to", 1);
  auto model =
      make_model({cast, make_node("Mul", {"x", "two"}, {"x2"}, "mul"), make_node("Add", {"x2", "nf"}, {"y"}, "add")},
                 {tensor_info("x", 1, {-1, -1}, {{0, "batch"}, {1, "seq"}}), tensor_info("n", 7, {})},
                 {tensor_info("y", 1, {-1, -1}, {{0, "batch"}, {1, "seq"}})}, {float_tensor("two", {}, {2.f})});
  const fs::path p = dir / "scaled_sum.onnx";
  std::ofstream(p, std::ios::binary) << model.SerializeAsString();
  return p;
}

// NonZero(x > 100): empty on normal inputs.
fs::path nonzero_model(const fs::path& dir) {
  auto model =
      make_model({make_node("Greater", {"x", "big"}, {"gt"}, "gt"), make_node("NonZero", {"gt"}, {"idx"}, "nz")},
                 {tensor_info("x", 1, {1, -1}, {{1, "seq"}})}, {tensor_info("idx", 7, {2, -1}, {{1, "hits"}})},
                 {float_tensor("big", {}, {100.f})});
  const fs::path p = dir / "nonzero.onnx";
  std::ofstream(p, std::ios::binary) << model.SerializeAsString();
  return p;
}

double seconds_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST(CliInputs, InputsAndValuesOnRunVerifyBenchOptimize) {
  const fs::path dir = temp_dir("cli_inputs");
  const fs::path m = scaled_sum(dir);
  rt::Tensor x = rt::Tensor::alloc(DType::Float, {1, 5});
  for (int64_t i = 0; i < 5; ++i) x.ptr<float>()[i] = 1.f;
  rt::write_npy(dir / "x.npy", x);
  const std::string xs = "x=" + (dir / "x.npy").string();
  CliResult r = run_cli({"run", m.string(), "--inputs", xs, "--input-value", "n=4", "--json"});
  ASSERT_EQ(r.code, 0) << r.describe();
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["outputs"][0]["shape"], nlohmann::json::array({1, 5}));
  EXPECT_DOUBLE_EQ(j["outputs"][0]["sum"].get<double>(), 30.0);                            // 5 * (2 + 4)
  EXPECT_EQ(run_cli({"run", m.string(), "--input", xs, "--input-value", "n=4"}).code, 0);  // the old spelling
  r = run_cli({"verify", m.string(), m.string(), "--inputs", xs, "--input-value", "n=4", "--seeds", "2", "--json"});
  ASSERT_EQ(r.code, 0) << r.describe();
  EXPECT_EQ(nlohmann::json::parse(r.out)["outputs"][0]["shape"], nlohmann::json::array({1, 5}));
  EXPECT_EQ(
      run_cli({"bench", m.string(), "--inputs", xs, "--input-value", "n=1", "--iters", "2", "--warmup", "1"}).code, 0)
      << r.describe();
  r = run_cli({"optimize", m.string(), (dir / "out.onnx").string(), "--inputs", xs, "--input-value", "n=4", "--json"});
  EXPECT_EQ(r.code, 0) << r.describe();
  // Bad values and files: usage or input errors, one line, never a hang.
  r = run_cli({"run", m.string(), "--input-value", "n=abc"});
  EXPECT_EQ(r.code, 2);
  std::ofstream(dir / "bad.npz") << "PK\x03\x04 not a zip";
  r = run_cli({"run", m.string(), "--inputs", (dir / "bad.npz").string(), "--json"});
  EXPECT_EQ(r.code, 2) << r.describe();
  auto err = nlohmann::json::parse(r.out)["error"];
  EXPECT_EQ(err["kind"], "input");
  EXPECT_EQ(err["file"], (dir / "bad.npz").string());
  ASSERT_EQ(::mkfifo((dir / "fifo.npy").c_str(), 0600), 0);
  r = run_cli({"verify", m.string(), m.string(), "--inputs", "x=" + (dir / "fifo.npy").string()}, 20);
  EXPECT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code, 2) << r.describe();
  EXPECT_NE(r.err.find("FIFO"), std::string::npos) << r.err;
}

TEST(CliInputs, DegenerateVerdictAndStrict) {
  const fs::path dir = temp_dir("cli_degenerate");
  const fs::path m = nonzero_model(dir);
  CliResult r = run_cli({"verify", m.string(), m.string(), "--seeds", "2"});
  EXPECT_EQ(r.code, 0) << r.describe();
  EXPECT_NE(r.out.find("verified on degenerate inputs: output 'idx' is empty on every seed"), std::string::npos)
      << r.out;
  r = run_cli({"verify", m.string(), m.string(), "--seeds", "2", "--strict", "--json"});
  EXPECT_EQ(r.code, 1) << r.describe();
  EXPECT_EQ(nlohmann::json::parse(r.out)["degenerate"], true);
  r = run_cli({"optimize", m.string(), (dir / "o.onnx").string()});
  EXPECT_EQ(r.code, 0) << r.describe();
  EXPECT_NE(r.out.find("verified on degenerate inputs"), std::string::npos) << r.out;
  r = run_cli({"optimize", m.string(), (dir / "o2.onnx").string(), "--strict"});
  EXPECT_EQ(r.code, 1) << r.describe();
  EXPECT_FALSE(fs::exists(dir / "o2.onnx"));
  // Real inputs that reach the threshold: no longer degenerate.
  rt::Tensor x = rt::Tensor::alloc(DType::Float, {1, 4});
  for (int64_t i = 0; i < 4; ++i) x.ptr<float>()[i] = 500.f;
  rt::write_npy(dir / "x.npy", x);
  r = run_cli(
      {"verify", m.string(), m.string(), "--inputs", "x=" + (dir / "x.npy").string(), "--seeds", "1", "--strict"});
  EXPECT_EQ(r.code, 0) << r.describe();
}

TEST(CliInputs, OptimizeChecksItsOutputFirst) {
  const fs::path big = zoo_model("bert_small");
  if (!fs::exists(big)) GTEST_SKIP() << "zoo not exported";
  run_cli({"inspect", big.string()});  // warm the binary and the page cache
  CliResult r;
  const double s = seconds_of([&] { r = run_cli({"optimize", big.string(), "/nonexistent_dir_29/out.onnx"}); });
  EXPECT_EQ(r.code, 2) << r.describe();
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
  EXPECT_LT(s, 0.5);  // nothing loaded (the budget of issue 29 is 0.1 s; a loaded machine gets slack)
  r = run_cli({"optimize", big.string(), "-o", big.string(), "--overwrite"});
  EXPECT_EQ(r.code, 2) << r.describe();
}

TEST(CliInputs, NoKernelErrorIsOneLineWithTheFile) {
  const fs::path dir = temp_dir("cli_nokernel");
  auto model = make_model({make_node("NoSuchOp", {"x"}, {"y"}, "strange")}, {tensor_info("x", 1, {2})},
                          {tensor_info("y", 1, {2})});
  const fs::path p = dir / "nokernel.onnx";
  std::ofstream(p, std::ios::binary) << model.SerializeAsString();
  CliResult r = run_cli({"run", p.string(), "--json"});
  EXPECT_EQ(r.code, 2) << r.describe();
  EXPECT_EQ(r.err.find("README"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("'strange'"), std::string::npos) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["error"]["file"], p.string());
}

// Every zoo model optimized for ONNX Runtime at opset 24 loads in ONNX Runtime 1.30.
TEST(CliInputs, TargetOrtOutputsLoadInOrt) {
  if (!ort_peer_installed()) GTEST_SKIP() << "ONNX Runtime peer missing: tools/peers/install.sh";
  const fs::path dir = temp_dir("cli_target_ort");
  std::string list;
  int n = 0;
  for (const fs::path& m : zoo_models()) {
    const std::string name = m.stem().string();
    if (name == "bert_base" || name.rfind("tinyllama", 0) == 0 || name == "resnet50" || name == "whisper_tiny_enc")
      continue;
    const fs::path out = dir / (name + ".onnx");
    CliResult r =
        run_cli({"optimize", m.string(), out.string(), "--target", "ort", "--target-opset", "24", "--no-verify"}, 600);
    EXPECT_EQ(r.code, 0) << name << ": " << r.describe();
    if (r.code == 0) list += out.string() + "\n", ++n;
  }
  ASSERT_GT(n, 0);
  std::ofstream(dir / "list.txt") << list;
  const std::string cmd = "node " ONNXFORGE_SOURCE_DIR "/tools/peers/ort_load.js < " + (dir / "list.txt").string() +
                          " > " + (dir / "loaded.jsonl").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(dir / "loaded.jsonl");
  int loaded = 0;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    EXPECT_TRUE(j["ok"].get<bool>()) << j.dump();
    loaded += j["ok"].get<bool>();
  }
  EXPECT_EQ(loaded, n);
}

namespace {

// vits_small from the zoo, else exported into the build folder by tools/models/vits_models.py.
fs::path vits_model() {
  if (fs::path z = model_dir() / "vits_small.onnx"; fs::exists(z)) return z;
  const fs::path out = fs::path(ONNXFORGE_BINARY_DIR) / "converted_models" / "vits_small.onnx";
  if (fs::exists(out)) return out;
  fs::create_directories(out.parent_path());
  const std::string cmd =
      "/usr/bin/python3 " ONNXFORGE_SOURCE_DIR "/tools/models/vits_models.py " + out.string() + " > /dev/null 2>&1";
  return std::system(cmd.c_str()) == 0 && fs::exists(out) ? out : fs::path();
}

fs::path silero_model() {
  std::vector<fs::path> where;
  if (const char* env = std::getenv("ONNXFORGE_REAL_MODELS")) where.emplace_back(env);
  where.push_back(fs::path(ONNXFORGE_SOURCE_DIR) / ".cache/real_models");
  where.push_back(model_dir().parent_path() / "real_models");
  for (const fs::path& d : where)
    if (fs::exists(d / "silero_vad_v5.onnx")) return d / "silero_vad_v5.onnx";
  return {};
}

}  // namespace

// The VITS-style model: random noise, duration expansion (CumSum/NonZero/ScatterND), an output
// length the input values set. With generated inputs it verifies on non-degenerate values or
// says "degenerate"; with given inputs it verifies; --target ort output loads in ORT 1.30.
TEST(CliInputs, VitsVerifiesWithGeneratedAndGivenInputs) {
  const fs::path m = vits_model();
  if (m.empty()) GTEST_SKIP() << "cannot export vits_small (torch missing?)";
  CliResult r = run_cli({"verify", m.string(), m.string(), "--seeds", "3", "--json"}, 600);
  ASSERT_EQ(r.code, 0) << r.describe();
  auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["pass"].get<bool>());
  if (!j["degenerate"].get<bool>()) { EXPECT_GT(j["outputs"][0]["shape"][2].get<int64_t>(), 128) << j.dump(); }

  const fs::path dir = temp_dir("cli_vits");
  rt::Tensor ids = rt::Tensor::alloc(DType::Int64, {1, 24}), len = rt::Tensor::alloc(DType::Int64, {1}),
             scales = rt::Tensor::alloc(DType::Float, {3});
  for (int64_t i = 0; i < 24; ++i) ids.ptr<int64_t>()[i] = (i * 7) % 40;
  len.ptr<int64_t>()[0] = 24;
  const float sc[3] = {0.667f, 1.0f, 0.8f};
  std::memcpy(scales.data, sc, sizeof sc);
  rt::write_npy(dir / "ids.npy", ids);
  rt::write_npy(dir / "len.npy", len);
  rt::write_npy(dir / "scales.npy", scales);
  r = run_cli({"verify", m.string(), m.string(), "--inputs", "input=" + (dir / "ids.npy").string(), "--inputs",
               "input_lengths=" + (dir / "len.npy").string(), "--inputs", "scales=" + (dir / "scales.npy").string(),
               "--seeds", "1", "--strict", "--json"},
              600);
  ASSERT_EQ(r.code, 0) << r.describe();
  j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j["degenerate"].get<bool>());
  EXPECT_GE(j["outputs"][0]["shape"][2].get<int64_t>(), 24 * 16);  // at least a frame of 16 samples per phoneme

  const fs::path out = dir / "vits_ort.onnx";
  r = run_cli({"optimize", m.string(), out.string(), "--target", "ort", "--target-opset", "23", "--inputs",
               "input=" + (dir / "ids.npy").string(), "--inputs", "input_lengths=" + (dir / "len.npy").string()},
              600);
  ASSERT_EQ(r.code, 0) << r.describe();
  EXPECT_NE(
      r.err.find("--target ort: upgrading to opset 21, not 23: ONNX Runtime 1.30 has no kernel for RandomNormalLike"),
      std::string::npos)
      << r.err;
  if (ort_peer_installed()) {
    const std::string cmd =
        "echo " + out.string() + " | node " ONNXFORGE_SOURCE_DIR "/tools/peers/ort_load.js | grep -q '\"ok\":true'";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  r = run_cli({"optimize", m.string(), (dir / "vits_generic.onnx").string(), "--target-opset", "23", "--no-verify"},
              600);
  EXPECT_EQ(r.code, 0) << r.describe();
  EXPECT_NE(r.err.find("to a version ONNX Runtime 1.30 has no kernel for; --target ort would stop at opset 21"),
            std::string::npos)
      << r.err;
}

// silero VAD v5 at its real shapes: the generated sample rate is the one its If compares with.
TEST(CliInputs, SileroVadVerifiesAtItsRealShapes) {
  const fs::path m = silero_model();
  if (m.empty()) GTEST_SKIP() << "silero_vad_v5.onnx not fetched (tools/models/fetch_real_models.sh)";
  for (bool given : {false, true}) {
    std::vector<std::string> args = {"verify",      m.string(),      m.string(),      "--input-shape",
                                     "input:1,512", "--input-shape", "state:2,1,128", "--seeds",
                                     "3",           "--strict",      "--json"};
    if (given) args.insert(args.end(), {"--input-value", "sr=16000"});
    CliResult r = run_cli(args, 300);
    ASSERT_EQ(r.code, 0) << r.describe();
    auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j["pass"].get<bool>());
    EXPECT_FALSE(j["degenerate"].get<bool>());
  }
}

// `zoo run` forwards a manifest entry's inputs to optimize and bench.
TEST(CliInputs, ZooManifestInputsReachTheSteps) {
  const fs::path dir = temp_dir("cli_zoo_inputs");
  const fs::path m = scaled_sum(dir);
  rt::Tensor x = rt::Tensor::alloc(DType::Float, {1, 6});
  rt::write_npy(dir / "x.npy", x);
  std::ofstream(dir / "zoo.json")
      << R"({"models": [{"path": "scaled_sum.onnx", "inputs": ["x=x.npy"], "input_values": {"n": 3}}]})";
  CliResult r = run_cli(
      {"zoo", "run", (dir / "zoo.json").string(), "-o", (dir / "out").string(), "--no-attribute", "--bench-iters", "2"},
      300);
  ASSERT_EQ(r.code, 0) << r.describe();
  std::ifstream in(dir / "out" / "results" / "scaled_sum.json");
  ASSERT_TRUE(in) << "no result file";
  auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["status"], "ok") << j.dump();
  EXPECT_EQ(j["inputs"], nlohmann::json::array({"--inputs", "x=" + (dir / "x.npy").string(), "--input-value", "n=3"}));
  EXPECT_EQ(j["steps"]["optimize"]["verification"]["ok"], true);
}
