// audit: forensics, fingerprint and census on the exported zoo (real exporter spellings).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "analysis/forensics.h"
#include "analysis/shapes.h"
#include "tests/common/models.h"
#include "io/model_io.h"
#include "optimize.h"
#include "passes/audit.h"
#include "passes/upgrade_opset.h"

namespace onnxforge {
namespace {

struct Expect {
  const char* model;
  Family family;
  int64_t attention_blocks;  // one per layer in the small configurations (2 layers)
  int64_t layer_norms;       // decomposed LayerNorms as exported
};

class AuditZoo : public ::testing::TestWithParam<Expect> {};

TEST_P(AuditZoo, FingerprintAndForensicsMatchTheArchitecture) {
  const Expect& e = GetParam();
  auto m = load_model(test::zoo_model(e.model));
  infer_shapes(*m);
  const Fingerprint f = fingerprint(*m);
  EXPECT_EQ(f.family, e.family) << e.model << ": " << family_name(f.family) << " (" << f.reason << ")";
  const Forensics x = forensics(*m);
  EXPECT_EQ(x.attention_blocks, e.attention_blocks) << e.model;
  EXPECT_EQ(x.layer_norm_decomposed, e.layer_norms) << e.model;
}

INSTANTIATE_TEST_SUITE_P(Zoo, AuditZoo,
                         ::testing::Values(Expect{"resnet_small", Family::VisionCnn, 0, 0},
                                           Expect{"mobilenet_v3_small", Family::VisionCnn, 0, 0},
                                           Expect{"efficientnet_b0", Family::VisionCnn, 0, 0},
                                           // 2 layers x (attention + output) LayerNorms + the embeddings' LayerNorm.
                                           Expect{"bert_small", Family::EncoderTransformer, 2, 5},
                                           Expect{"distilbert_small", Family::EncoderTransformer, 2, 5},
                                           // 2 layers x (ln_1, ln_2) + ln_f.
                                           Expect{"gpt2_small_cfg", Family::DecoderLlm, 2, 5},
                                           // RMSNorms are not LayerNorms.
                                           Expect{"llama_small", Family::DecoderLlm, 2, 0},
                                           // The causal decoders with and without a KV cache (issue 25): Llama with
                                           // _prepare_4d_causal_attention_mask (no Trilu), GPT-2 with its tied LM head,
                                           // Phi (cached rotary tables: no Sin/Cos; one LayerNorm per layer + the final
                                           // one), Gemma (MQA, (1 + w) RMSNorm).
                                           Expect{"llama_small_past", Family::DecoderLlm, 2, 0},
                                           Expect{"gpt2_small_lm", Family::DecoderLlm, 2, 5},
                                           Expect{"gpt2_small_past", Family::DecoderLlm, 2, 5},
                                           Expect{"phi_small", Family::DecoderLlm, 2, 3},
                                           Expect{"phi_small_past", Family::DecoderLlm, 2, 3},
                                           Expect{"gemma_small", Family::DecoderLlm, 2, 0},
                                           Expect{"gemma_small_past", Family::DecoderLlm, 2, 0},
                                           // 2 layers x 2 + the final LayerNorm.
                                           Expect{"vit_small", Family::VisionTransformer, 2, 5},
                                           Expect{"whisper_small_enc", Family::Speech, 2, 5}),
                         [](const auto& info) { return std::string(info.param.model); });

// The M11 models (tools/models, issue 17), where present in the zoo folder.
class AuditM11 : public ::testing::TestWithParam<Expect> {};

TEST_P(AuditM11, FamilyMatchesTheArchitecture) {
  const Expect& e = GetParam();
  const auto path = test::model_dir() / (std::string(e.model) + ".onnx");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not exported";
  auto m = load_model(path);
  infer_shapes(*m);
  const Fingerprint f = fingerprint(*m);
  EXPECT_EQ(f.family, e.family) << e.model << ": " << family_name(f.family) << " (" << f.reason << ")";
}

INSTANTIATE_TEST_SUITE_P(Zoo, AuditM11,
                         ::testing::Values(Expect{"roberta_mini", Family::EncoderTransformer, 0, 0},
                                           Expect{"deit_mini", Family::VisionTransformer, 0, 0},
                                           Expect{"mobilevit_mini", Family::Hybrid, 0, 0},
                                           Expect{"yolov8n_mini", Family::VisionCnn, 0, 0},
                                           Expect{"wav2vec2_mini", Family::Speech, 0, 0}),
                         [](const auto& info) { return std::string(info.param.model); });

// The family survives `optimize --target-opset 24`: the fused Attention / RotaryEmbedding /
// RMSNormalization / Swish ops keep what the decomposed blocks showed (before the fused
// spellings were read, ViT, DeiT and MobileViT came out "vision CNN" and BERT, GPT-2 and Llama
// "unknown").
TEST(Audit, FamilyOfTheFusedModelsIsTheOriginals) {
  for (const char* name :
       {"vit_small", "deit_mini", "mobilevit_mini", "bert_small", "roberta_mini", "distilbert_small", "gpt2_small_cfg",
        "llama_small", "whisper_small_enc", "wav2vec2_mini", "yolov8n_mini", "llama_small_past", "gpt2_small_lm",
        "gpt2_small_past", "phi_small", "phi_small_past", "gemma_small", "gemma_small_past"}) {
    SCOPED_TRACE(name);
    const auto path = test::model_dir() / (std::string(name) + ".onnx");
    if (!std::filesystem::exists(path)) continue;  // the M11 models, when not exported
    auto m = load_model(path);
    infer_shapes(*m);
    const Family original = fingerprint(*m).family;
    passes::upgrade_opset(*m, 24);
    passes::RunResult r = test::optimize(*m);
    EXPECT_LT(r.after.nodes, r.before.nodes);
    infer_shapes(*m);
    const Fingerprint f = fingerprint(*m);
    EXPECT_EQ(f.family, original) << family_name(f.family) << " (" << f.reason << ")";
  }
}

TEST(Audit, LlamaFingerprintSeesRotaryAndRmsNorm) {
  auto m = load_model(test::zoo_model("llama_small"));
  infer_shapes(*m);
  const Fingerprint f = fingerprint(*m);
  EXPECT_TRUE(f.rotary);
  EXPECT_TRUE(f.has_rms_norm);
  EXPECT_TRUE(f.silu);
  EXPECT_TRUE(f.token_input);
  EXPECT_FALSE(f.image_input);
}

// Each decoder read by the evidence it really has. Before issue 25 the Llama cache export (mask
// from arange comparisons, no Trilu) and Phi (rotary tables cached as initializers, no Sin/Cos)
// read as "encoder transformer": only Trilu and Sin+Cos counted.
TEST(Audit, DecoderEvidenceOfEachSpelling) {
  struct Case {
    const char* model;
    bool kv_cache, causal_mask, rotary, sin_cos;
  };
  for (const Case& c :
       {Case{"llama_small", false, true, true, true}, Case{"llama_small_past", true, true, true, true},
        Case{"phi_small", false, true, true, false}, Case{"phi_small_past", true, true, true, false},
        Case{"gemma_small_past", true, true, true, true}, Case{"gpt2_small_lm", false, true, false, false},
        Case{"gpt2_small_past", true, true, false, false}, Case{"bert_small", false, false, false, false}}) {
    SCOPED_TRACE(c.model);
    auto m = load_model(test::zoo_model(c.model));
    infer_shapes(*m);
    const Fingerprint f = fingerprint(*m);
    EXPECT_EQ(f.kv_cache, c.kv_cache);
    EXPECT_EQ(f.causal_mask, c.causal_mask);
    EXPECT_EQ(f.rotary, c.rotary);
    bool sin = false;
    for (NodeId n : m->main().nodes()) sin = sin || m->main().is_op(n, "Sin");
    EXPECT_EQ(sin, c.sin_cos);  // Phi's rotary is found without them
    if (c.kv_cache) { EXPECT_NE(f.reason.find("KV cache"), std::string::npos) << f.reason; }
  }
}

// Each piece of decoder evidence on its own, on the Llama cache export with the others taken
// away: the Trilu-free mask (Less of two Ranges) and the past Concat each make it a decoder;
// with neither (and no rotary), token input + attention is an encoder.
TEST(Audit, EachDecoderFeatureAloneDecides) {
  // Every `op` node rewritten as `replacement` on its first `arity` inputs (same outputs).
  auto strip = [](Model& m, const char* op, const char* replacement, size_t arity = 2) {
    Graph& g = m.main();
    std::vector<NodeId> hits;
    for (NodeId n : g.nodes())
      if (g.is_op(n, op)) hits.push_back(n);
    for (NodeId n : hits) {
      std::vector<ValueId> ins(g.inputs(n).begin(), g.inputs(n).end()), outs(g.outputs(n).begin(), g.outputs(n).end());
      ins.resize(std::min(ins.size(), arity));
      g.kill_node(n);
      g.add_node(intern(replacement), Sym{}, Sym{}, ins, outs);
    }
    return hits.size();
  };
  auto family = [](Model& m) {
    infer_shapes(m);
    return fingerprint(m);
  };
  {
    auto m = load_model(test::zoo_model("llama_small_past"));
    strip(*m, "Neg", "Abs");  // no rotate_half
    strip(*m, "Sin", "Tanh");
    const Fingerprint f = family(*m);
    EXPECT_FALSE(f.rotary);
    EXPECT_TRUE(f.kv_cache && f.causal_mask);
    EXPECT_EQ(f.family, Family::DecoderLlm) << f.reason;
    EXPECT_EQ(strip(*m, "Less", "Equal"), 1u);  // no causal comparison either: the cache alone decides
    const Fingerprint g = family(*m);
    EXPECT_FALSE(g.causal_mask);
    EXPECT_EQ(g.family, Family::DecoderLlm) << g.reason;
  }
  {
    auto m = load_model(test::zoo_model("llama_small"));  // no cache: the mask alone decides
    strip(*m, "Neg", "Abs");
    strip(*m, "Sin", "Tanh");
    EXPECT_EQ(strip(*m, "Trilu", "Identity", 1), 1u);
    const Fingerprint f = family(*m);
    EXPECT_FALSE(f.rotary);
    EXPECT_FALSE(f.kv_cache);
    EXPECT_TRUE(f.causal_mask);  // arange(total) > cache_position.view(-1, 1)
    EXPECT_EQ(f.family, Family::DecoderLlm) << f.reason;
    EXPECT_EQ(strip(*m, "Greater", "Equal"), 1u);
    EXPECT_EQ(family(*m).family, Family::EncoderTransformer);
  }
}

TEST(Audit, Gpt2AttentionScaleAndFusedQkv) {
  auto m = load_model(test::zoo_model("gpt2_small_cfg"));
  infer_shapes(*m);
  const Forensics x = forensics(*m);
  // GPT-2's c_attn computes Q, K and V in one Gemm and splits them; the scores are divided.
  EXPECT_EQ(x.qkv_pattern.count("fused-split") ? x.qkv_pattern.at("fused-split") : 0, 2);
  EXPECT_EQ(x.attention_scale.count("scores-div") ? x.attention_scale.at("scores-div") : 0, 2);
}

TEST(Audit, BertProjectsQkvSeparately) {
  auto m = load_model(test::zoo_model("bert_small"));
  infer_shapes(*m);
  const Forensics x = forensics(*m);
  EXPECT_EQ(x.qkv_pattern.count("separate") ? x.qkv_pattern.at("separate") : 0, 2);
  EXPECT_GT(x.shape_chains, 0);
}

TEST(Audit, ResultHasOneCensusRowPerFusionAndReadsTheModel) {
  const passes::AuditResult a = passes::audit_model(test::zoo_model("bert_small").string());
  EXPECT_EQ(a.census.size(), passes::all_fusions().size());
  EXPECT_EQ(a.opset, 14);
  EXPECT_GT(a.nodes, a.nodes_simplified);
  const auto j = a.to_json();
  EXPECT_EQ(j["fingerprint"]["family"], "encoder transformer");
  EXPECT_TRUE(j["forensics"].contains("attention_blocks"));
}

// The census counts what `optimize` fuses. The exporters write Linear layers as
// MatMul(x, Transpose(W)); optimize folds the transpose (a deferred recipe) and the projections
// read constant weights. The audit folds nothing that reads a weight above 64 KiB, so until it
// folded weight transposes as recipes too, fuse_qkv_projections was "found 0" on TinyLlama
// (weights of 2-16 MiB) and Whisper while optimize fused one block per layer. llama_small
// (weights under 64 KiB) always agreed; it stays as the control.
TEST(Audit, QkvCensusMatchesWhatOptimizeFuses) {
  for (const char* name : {"tinyllama_2l", "whisper_tiny_enc", "llama_small"}) {
    SCOPED_TRACE(name);
    const auto path = test::model_dir() / (std::string(name) + ".onnx");
    if (!std::filesystem::exists(path)) continue;
    const passes::AuditResult a = passes::audit_model(path.string());
    const auto row = std::find_if(a.census.begin(), a.census.end(),
                                  [](const passes::CensusRow& r) { return r.fusion == "fuse_qkv_projections"; });
    ASSERT_NE(row, a.census.end());
    auto m = load_model(path);
    passes::upgrade_opset(*m, 23);
    const passes::RunResult r = test::optimize(*m);
    uint64_t fused = 0;
    for (const passes::PassStats& p : r.passes)
      if (p.name == "fuse_qkv_projections") fused = p.applied;
    EXPECT_GT(fused, 0u);
    EXPECT_EQ(row->found, static_cast<int64_t>(fused));
    EXPECT_EQ(row->fusable_here, static_cast<int64_t>(fused));
  }
  // TinyLlama-1.1B (the M11 folder, when exported): one QKV block per attention block, 22.
  const auto tl = test::model_dir() / "tinyllama_1b" / "tinyllama" / "model.onnx";
  if (!std::filesystem::exists(tl)) return;
  const passes::AuditResult a = passes::audit_model(tl.string());
  int64_t qkv = -1, attention = -1;
  for (const passes::CensusRow& r : a.census) {
    if (r.fusion == "fuse_qkv_projections") qkv = r.found;
    if (r.fusion == "fuse_attention") attention = r.found;
  }
  EXPECT_EQ(attention, 22);
  EXPECT_EQ(qkv, attention);
}

}  // namespace
}  // namespace onnxforge
