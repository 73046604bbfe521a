// Every small zoo model, and the ONNX backend test models beyond single nodes, through onnxforge
// and ONNX Runtime on the same inputs: max|ours - ort| <= 1e-4 * max(1, max|ort|)
// (tests/runtime/ort_crosscheck.py does the work).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "tests/common/models.h"

namespace {

namespace fs = std::filesystem;

// The cross-check command for these models, or "" (with the reason) when it cannot run here.
std::string crosscheck_command(std::string* why) {
  if (!onnxforge::test::ort_peer_installed()) *why = "ONNX Runtime peer missing: tools/peers/install.sh";
  if (!fs::exists(ONNXFORGE_BINARY_DIR "/onnxforge")) *why = "build the onnxforge executable first";
  if (!why->empty()) return "";
  return "/usr/bin/python3 " ONNXFORGE_SOURCE_DIR "/tests/runtime/ort_crosscheck.py " ONNXFORGE_BINARY_DIR "/onnxforge";
}

// The zoo model `name` converted by tools/models/SCRIPT (input and output paths, then `args`)
// into NAME_SUFFIX.onnx under the build folder; an empty path when the zoo lacks the model.
fs::path converted(const std::string& script, const std::string& name, const std::string& suffix,
                   const std::string& args = "") {
  const fs::path src = onnxforge::test::model_dir() / (name + ".onnx");
  if (!fs::exists(src)) return {};
  const fs::path dir = fs::path(ONNXFORGE_BINARY_DIR) / "converted_models";
  fs::create_directories(dir);
  const fs::path out = dir / (name + "_" + suffix + ".onnx");
  const std::string c = "/usr/bin/python3 " ONNXFORGE_SOURCE_DIR "/tools/models/" + script + " " + src.string() + " " +
                        out.string() + " " + args + " > /dev/null 2>&1";
  EXPECT_EQ(std::system(c.c_str()), 0) << c;
  return out;
}

// The zoo models `names` converted by `script` (`suffix`, `args` as converted()) run by both
// runtimes, agreeing within `tol` of max(1, max|ort|); skipped when none could be converted.
void expect_converted_agree(const std::string& script, std::initializer_list<const char*> names,
                            const std::string& suffix, const std::string& args, const std::string& tol) {
  std::string why, cmd = crosscheck_command(&why);
  if (cmd.empty()) GTEST_SKIP() << why;
  int n = 0;
  for (const char* name : names)
    if (const fs::path out = converted(script, name, suffix, args); !out.empty()) {
      cmd += " " + out.string();
      ++n;
    }
  if (n == 0) GTEST_SKIP() << "zoo models missing";
  cmd += " --tol=" + tol;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

}  // namespace

TEST(OrtCrossCheck, ZooModelsAgree) {
  std::string why, cmd = crosscheck_command(&why);
  if (cmd.empty()) GTEST_SKIP() << why;
  int n = 0;
  for (const fs::path& m : onnxforge::test::zoo_models()) {
    std::string name = m.stem().string();
    if (name == "bert_base" || name.rfind("tinyllama", 0) == 0 || name == "resnet50" || name == "whisper_tiny_enc")
      continue;
    cmd += " " + m.string();
    ++n;
  }
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// The backend suites' small real models (pytorch-converted, pytorch-operator, simple) that the
// runtime passes against their shipped outputs, run on those shipped inputs. ORT 1.30 lacks
// kernels for some ops at opsets below 7 (Add-6, BatchNormalization-6, ...): those are skipped,
// and at least 85 of the 124 must be compared.
TEST(OrtCrossCheck, BackendModelsAgree) {
  std::string why, cmd = crosscheck_command(&why);
  if (cmd.empty()) GTEST_SKIP() << why;
  if (!fs::exists(onnxforge::test::backend_data_dir())) GTEST_SKIP() << "libonnx-testdata missing";
  std::ifstream list(ONNXFORGE_SOURCE_DIR "/tests/runtime/backend_passing.txt");
  int n = 0;
  for (std::string line; std::getline(list, line);) {
    if (line.empty() || line[0] == '#' || line.rfind("node/", 0) == 0) continue;
    cmd += " " + (onnxforge::test::backend_data_dir() / line / "model.onnx").string();
    ++n;
  }
  ASSERT_GT(n, 85);
  cmd += " --skip-ort-unsupported --min-compared=85";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// Zoo models quantized by tools/models/quantize.py: dynamic (DynamicQuantizeLinear + MatMulInteger
// / ConvInteger, as ORT's quantize_dynamic writes them) must agree at the usual tolerance (the
// integer sums are exact and every float step is the graph's own); static QDQ models are compared
// with ORT running the graph as written (--ort-level=disabled: its QDQ fusions change the
// rounding) at 5% of max(1, max|ort|): activations are rounded to a grid, so an fp32 sum that
// differs in its last bit can land one step apart and the step propagates (measured: ResNet
// 0.012 of 1.5, MobileNetV2 0.025 of 0.56; ORT's own fused run is 0.03 / 0.077 from ours).
TEST(OrtCrossCheck, QuantizedZooModelsAgree) {
  std::string why, cmd = crosscheck_command(&why);
  if (cmd.empty()) GTEST_SKIP() << why;
  std::string dynamic = cmd, qdq = cmd;
  int n = 0;
  for (const char* name : {"bert_small", "resnet_small", "mobilenet_v2"})
    for (const char* mode : {"dynamic", "qdq"}) {
      const fs::path out = converted("quantize.py", name, mode,
                                     std::string("--mode ") + mode + " --runner " ONNXFORGE_BINARY_DIR "/onnxforge");
      if (out.empty()) continue;
      (std::string(mode) == "dynamic" ? dynamic : qdq) += " " + out.string();
      ++n;
    }
  if (n == 0) GTEST_SKIP() << "zoo models missing";
  EXPECT_EQ(std::system(dynamic.c_str()), 0) << dynamic;
  qdq += " --ort-level=disabled --tol=0.05";
  EXPECT_EQ(std::system(qdq.c_str()), 0) << qdq;
}

// QOperator format (quantize.py --mode qoperator: QLinearConv, com.microsoft QGemm, QLinearAdd,
// QLinearGlobalAveragePool, Relu/Clip folded into output ranges): ORT runs its own kernels (MLAS
// folds QLinearAdd's scales into one ratio, so a value can land one step away and propagate).
// Measured: ResNet 0 of 1.47, MobileNetV2 0.0083 of 0.55; tolerance 5% of max(1, max|ort|).
TEST(OrtCrossCheck, QOperatorZooModelsAgree) {
  expect_converted_agree("quantize.py", {"resnet_small", "mobilenet_v2"}, "qoperator",
                         "--mode qoperator --runner " ONNXFORGE_BINARY_DIR "/onnxforge", "0.05");
}

// Zoo models converted to float16 by tools/models/to_fp16.py (weights, activations and computed
// masks in float16, float32 inputs and outputs: onnxconverter-common's keep_io_types form, as
// fp16 deployments ship). Tolerance 2% of max(1, max|ort|): both runtimes round every op's output
// to float16, but ORT 1.30's float16 kernels on this CPU do not round exactly. Measured on
// yolov8n_mini's first Conv against the float64 result rounded once to float16: ours differs in
// 0.035% of the elements (float32 sums landing on the other side of a tie), ORT in 42%. Over 60
// layers these one-ulp steps grow to 10.5 of 676 at YOLO's box output (1.6%); every other model
// stays under 0.3%.
TEST(OrtCrossCheck, Float16ZooModelsAgree) {
  expect_converted_agree("to_fp16.py",
                         {"bert_small", "gpt2_small_cfg", "llama_small", "vit_small", "whisper_small_enc",
                          "wav2vec2_mini", "resnet_small", "mobilenet_v2", "yolov8n_mini"},
                         "fp16", "", "0.02");
}

// The committed table of the op versions ONNX Runtime 1.30 implements (passes/ort_ops.inc, what
// `--target ort` checks against) is what ORT itself says today: tools/peers/ort_op_table.py
// loads one-node models of every op at every opset and compares.
TEST(OrtCrossCheck, OpTableMatchesOrt) {
  if (!onnxforge::test::ort_peer_installed()) GTEST_SKIP() << "ONNX Runtime peer missing: tools/peers/install.sh";
  const std::string cmd = "/usr/bin/python3 " ONNXFORGE_SOURCE_DIR "/tools/peers/ort_op_table.py --check";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}
