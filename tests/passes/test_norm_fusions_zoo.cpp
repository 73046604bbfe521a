// The norm and activation fusions on the real spellings of the zoo's exporters: torch.onnx's
// LayerNorm / GELU (erf and GPT-2's tanh) / Llama RMSNorm / SiLU in BERT, DistilBERT, GPT-2, ViT,
// Whisper's encoder and Llama, exported at opset 14 and upgraded (upgrade_opset, class 0) to the
// opset each fusion needs.
// Every block of these models must be found and fused (the census shows none missed), and the
// fused model must agree with the original (run at its own opset) within class 1.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>

#include "analysis/shapes.h"
#include "io/model_io.h"
#include "numeric.h"
#include "passes/fusion.h"
#include "passes/upgrade_opset.h"
#include "runtime/inputs.h"
#include "runtime/runtime.h"
#include "tests/common/models.h"
#include "tests/runtime/ort_run.h"

namespace onnxforge::test {
namespace {

// The original run op by op (the runtime plan's own fusions of decomposed LayerNorm/GELU off, so
// no matcher at all decides how the original is computed) against the candidate as it would
// run: max |a − b| over every output, and whether each element is within class 1.
std::pair<double, bool> unfused_diff(const Model& original, const Model& candidate) {
  return class1_diff(original, candidate, 7, /*fuse_b=*/true);
}

// ONNX Runtime 1.30 (the peer) runs the fused model and agrees with onnxforge's run of the
// original within 1e-4 + 1e-3·|ref| (the bar for every fused output).
void ort_agrees(const Model& original, const std::filesystem::path& fused, const std::string& label) {
  if (!ort_peer_installed()) return;
  const double worst = ort_agrees_with_original(original, fused);
  std::printf("[ norms    ] %-18s ONNX Runtime 1.30 on the fused model: max_diff %.3g\n", label.c_str(), worst);
}

struct Expect {
  const char* model;
  int64_t layer_norm, gelu, rms_norm, swish;
};

const passes::CensusRow& row(const std::vector<passes::CensusRow>& rows, std::string_view fusion) {
  for (const auto& r : rows)
    if (r.fusion == fusion) return r;
  throw std::runtime_error("no fusion " + std::string(fusion));
}

std::string misses(const std::vector<passes::CensusRow>& rows) {
  std::string s;
  for (const auto& r : rows)
    for (const auto& [why, n] : r.missed) s += r.fusion + ": " + why + " x" + std::to_string(n) + "; ";
  return s;
}

// Loads, raises to `opset`, checks the census, optimizes with every pass, checks what is fused
// and that nothing is left, verifies against the original. Prints the node counts. `full`:
// also optimizes the original at its own opset for comparison and saves/reloads the result
// (left out for the full-size models: each costs a pass over hundreds of MB).
void fuse_and_verify(const std::filesystem::path& path, const Expect& e, int64_t opset, int seeds = 2,
                     bool full = true) {
  SCOPED_TRACE(path.filename().string() + " at opset " + std::to_string(opset));
  auto original = load_model(path);
  auto baseline = full ? load_model(path) : nullptr;
  auto model = load_model(path);
  passes::upgrade_opset(*model, opset);  // class 0: the meaning of every op is kept
  infer_shapes(*model);
  auto before = passes::fusion_census(*model, {});
  EXPECT_EQ(row(before, "fuse_layer_norm").found, e.layer_norm);
  EXPECT_EQ(row(before, "fuse_gelu").found, e.gelu);
  EXPECT_EQ(row(before, "fuse_rms_norm").found, e.rms_norm);
  EXPECT_EQ(row(before, "fuse_swish").found, e.swish);
  // The norm and activation fusions (the attention fusions need the shape chains simplified
  // first: on the raw export their census counts unresolved head splits).
  for (const char* f : {"fuse_layer_norm", "fuse_gelu", "fuse_rms_norm", "fuse_swish"})
    EXPECT_EQ(row(before, f).missed_total(), 0) << misses(before);

  passes::RunResult base;
  if (full) base = optimize(*baseline);
  passes::RunResult r = optimize(*model);
  const Graph& g = model->main();
  const bool ln = opset >= 17, gelu = opset >= 20, rms = opset >= 23, swish = opset >= 24;
  EXPECT_EQ(count_op(g, "LayerNormalization"), static_cast<size_t>(ln ? e.layer_norm : 0));
  EXPECT_EQ(count_op(g, "Gelu"), static_cast<size_t>(gelu ? e.gelu : 0));
  EXPECT_EQ(count_op(g, "RMSNormalization"), static_cast<size_t>(rms ? e.rms_norm : 0));
  EXPECT_EQ(count_op(g, "Swish"), static_cast<size_t>(swish ? e.swish : 0));
  auto after = passes::fusion_census(*model, {});
  EXPECT_EQ(row(after, "fuse_layer_norm").found, ln ? 0 : e.layer_norm);
  EXPECT_EQ(row(after, "fuse_gelu").found, gelu ? 0 : e.gelu);
  EXPECT_EQ(row(after, "fuse_rms_norm").found, rms ? 0 : e.rms_norm);
  const std::string base_nodes = full ? std::to_string(base.after.nodes) : "-";
  std::printf(
      "[ norms    ] %-18s opset %2lld: %lld nodes, optimize at opset 14: %s, at %lld: %lld (LN %zu, Gelu %zu, RMSNorm "
      "%zu, Swish %zu)\n",
      path.stem().string().c_str(), static_cast<long long>(opset), static_cast<long long>(r.before.nodes),
      base_nodes.c_str(), static_cast<long long>(opset), static_cast<long long>(r.after.nodes),
      count_op(g, "LayerNormalization"), count_op(g, "Gelu"), count_op(g, "RMSNormalization"), count_op(g, "Swish"));
  if (full && ((ln && e.layer_norm) || (gelu && e.gelu) || (rms && e.rms_norm) || (swish && e.swish))) {
    EXPECT_LT(r.after.nodes, base.after.nodes);
  }
  passes::Reference ref(*original, passes::VerifyOptions{seeds, {}});
  passes::VerifyResult v = ref.check(*model, passes::tolerance_of(r.worst));
  EXPECT_TRUE(v.ok) << "max_diff " << v.max_diff << " " << v.error;
  auto [plain_diff, plain_ok] = unfused_diff(*original, *model);
  EXPECT_TRUE(plain_ok) << "against the original run op by op: max_diff " << plain_diff;
  std::printf("[ norms    ] %-18s max_diff %.3g (original op by op: %.3g)\n", path.stem().string().c_str(), v.max_diff,
              plain_diff);
  if (!full) return;
  auto dir = temp_dir("norm_fusions_" + path.stem().string());
  save_model(*model, dir / "out.onnx");
  auto again = load_model(dir / "out.onnx");
  EXPECT_EQ(count_op(again->main(), "LayerNormalization"), count_op(g, "LayerNormalization"));
  ort_agrees(*original, dir / "out.onnx", path.stem().string());
}

const Expect kSmall[] = {
    {"bert_small", 5, 2, 0, 0}, {"distilbert_small", 5, 2, 0, 0},  {"gpt2_small_cfg", 5, 2, 0, 0},
    {"vit_small", 5, 2, 0, 0},  {"whisper_small_enc", 5, 4, 0, 0}, {"llama_small", 0, 0, 5, 2},
};

TEST(NormFusionsZoo, EveryBlockOfTheSmallExportsFusesAndVerifies) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  for (const Expect& e : kSmall) fuse_and_verify(zoo_model(e.model), e, 24);
}

// Each fusion waits for its opset: at 17 only LayerNorms, at 20 also GELUs, at 23 RMSNorms and
// not yet Swish.
TEST(NormFusionsZoo, OpsetGatesEachFusion) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  fuse_and_verify(zoo_model("bert_small"), kSmall[0], 17, 1);
  fuse_and_verify(zoo_model("gpt2_small_cfg"), kSmall[2], 20, 1);
  fuse_and_verify(zoo_model("llama_small"), kSmall[5], 20, 1);
  fuse_and_verify(zoo_model("llama_small"), kSmall[5], 23, 1);
}

// torchvision's ConvNeXt: every LayerNorm sits between Permutes (over the channels of NHWC, the
// trailing axis) and fuses; the Transposes stay (tests/passes/data/make_convnext_mini.py).
TEST(NormFusionsZoo, TorchvisionConvNeXtLayerNormsBetweenPermutes) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  fuse_and_verify(std::filesystem::path(ONNXFORGE_SOURCE_DIR) / "tests/passes/data/convnext_mini.onnx",
                  {"convnext_mini", 5, 2, 0, 0}, 20);
}

// torch's opset-13 MobileNetV3 writes each h-swish as x · HardSigmoid(x) (19 of them) beside the
// squeeze-excitation gates x · HardSigmoid(se(x)) (9). Raised to opset 14 the h-swishes fuse and
// the gates stay: the same ops as the opset-14 export of the same weights, which has HardSwish
// nodes; verified, and ONNX Runtime agrees.
TEST(NormFusionsZoo, MobileNetV3HardSwishAsTorchWritesItBelowOpset14) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  const auto path = zoo_model("mobilenet_v3_small_op13");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "zoo model mobilenet_v3_small_op13 not exported";
  auto original = load_model(path);
  auto model = load_model(path);
  passes::upgrade_opset(*model, 14);
  infer_shapes(*model);
  auto before = passes::fusion_census(*model, {});
  EXPECT_EQ(row(before, "fuse_hard_swish").found, 19) << misses(before);
  EXPECT_EQ(row(before, "fuse_hard_swish").fusable_here, 19) << misses(before);
  passes::RunResult r = optimize(*model);
  auto twin = load_model(zoo_model("mobilenet_v3_small"));
  optimize(*twin);
  auto ops = [](const Graph& g) {
    std::map<std::string, size_t> h;
    for (NodeId n : g.nodes()) ++h[std::string(str(g.op_type(n)))];
    return h;
  };
  EXPECT_EQ(ops(model->main()), ops(twin->main()));
  EXPECT_EQ(count_op(model->main(), "HardSwish"), 19u);
  EXPECT_EQ(count_op(model->main(), "HardSigmoid"), 9u);
  passes::Reference ref(*original, passes::VerifyOptions{2, {}});
  passes::VerifyResult v = ref.check(*model, passes::tolerance_of(r.worst));
  EXPECT_TRUE(v.ok) << "max_diff " << v.max_diff << " " << v.error;
  auto dir = temp_dir("hard_swish_mobilenet_v3");
  save_model(*model, dir / "out.onnx");
  ort_agrees(*original, dir / "out.onnx", "mobilenet_v3_op13");
}

// The full-size exports when present (tools/models/export_zoo.py --only NAME): the same blocks
// at scale (BERT-base, GPT-2, DistilBERT, ViT-B/16, Whisper-tiny encoder, TinyLlama's 2 layers).
TEST(NormFusionsZoo, FullSizeExportsWhenPresent) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  const Expect full[] = {
      {"bert_base", 25, 12, 0, 0}, {"distilbert_base", 13, 6, 0, 0}, {"gpt2", 25, 12, 0, 0},
      {"vit_b_16", 25, 12, 0, 0},  {"whisper_tiny_enc", 9, 6, 0, 0}, {"tinyllama_2l", 0, 0, 5, 2},
  };
  int found = 0;
  for (const Expect& e : full) {
    auto path = model_dir() / (std::string(e.model) + ".onnx");
    if (!std::filesystem::exists(path)) continue;
    ++found;
    fuse_and_verify(path, e, 24, 1, /*full=*/false);
  }
  if (found == 0) GTEST_SKIP() << "no full-size exports in " << model_dir();
}

}  // namespace
}  // namespace onnxforge::test
