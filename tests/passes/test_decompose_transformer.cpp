// decompose_rotary_embedding and decompose_attention: RotaryEmbedding and Attention back into
// primitives for a --target that lacks them. Each attribute combination the runtime implements is
// built by hand and the decomposition compared, element by element within class 1, with the
// runtime's RotaryEmbedding / Attention kernels (both models run op by op: no matcher decides how
// either side is computed); the ops emitted are checked against the model's opset; what the
// passes must leave alone is left, with the reason optimize reports. On the zoo: llama_small,
// bert_small, gpt2 and whisper fused at opset 23 and decomposed again match the original export,
// and `optimize --target tensorrt|tflite` leaves nothing the target lacks.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <random>

#include "api/engine.h"
#include "io/model_io.h"
#include "numeric.h"
#include "tests/common/random.h"
#include "passes/registry.h"
#include "passes/targets.h"
#include "passes/upgrade_opset.h"
#include "tests/common/models.h"
#include "tests/runtime/ort_run.h"

namespace onnxforge::test {
namespace {

// Decomposes a fresh copy of `make()` with `pass`, checks the op is gone and the outputs match
// the op's kernel within class 1 on two seeds. Returns the decomposed model.
std::unique_ptr<Model> decomposes(const std::function<std::unique_ptr<Model>()>& make, const std::string& op,
                                  const std::string& pass, double* worst = nullptr) {
  auto original = make();
  auto model = make();
  optimize(*model, {pass});
  EXPECT_EQ(count_op(model->main(), op), 0u);
  if (!passes::runtime_available()) return model;
  for (uint64_t seed : {3, 4}) {
    auto [diff, ok] = class1_diff(*original, *model, seed, /*fuse_b=*/false, /*equal_infinities=*/true);
    EXPECT_TRUE(ok) << "max_diff " << diff;
    if (worst) *worst = std::max(*worst, diff);
  }
  return model;
}

// ONNX Runtime 1.30 (the peer, when installed) loads the decomposed model — it checks every node
// against the schema of the model's opset, an independent check of the forms emitted — and its
// outputs agree with the runtime's kernels on the original within class 1.
void ort_agrees(const Model& original, Model& decomposed, const std::string& label) {
  if (!ort_peer_installed() || !passes::runtime_available()) return;
  SCOPED_TRACE(label + " in ONNX Runtime");
  const auto path = temp_dir("decompose_ort") / "model.onnx";
  decomposed.ir_version = std::max<int64_t>(decomposed.ir_version, 11);  // opset 23 needs IR 11
  save_model(decomposed, path);
  ort_agrees_with_original(original, path);
}

// Ops whose form changed with the opset, in the form of the model's.
void forms_match_opset(const Model& m) {
  const Graph& g = m.main();
  const int64_t opset = m.opset("");
  for (NodeId n : g.nodes()) {
    SCOPED_TRACE(std::string(str(g.node_name(n))));
    if (g.is_op(n, "Unsqueeze")) { EXPECT_EQ(g.inputs(n).size(), opset >= 13 ? 2u : 1u); }
    if (g.is_op(n, "Slice")) {
      EXPECT_GE(opset, 10);
      EXPECT_GE(g.inputs(n).size(), 3u);
    }
    if (g.is_op(n, "ReduceMean")) { EXPECT_EQ(g.inputs(n).size(), opset >= 18 ? 2u : 1u); }
    if (opset < 12) { EXPECT_FALSE(g.is_op(n, "LessOrEqual")); }
    if (opset < 11) { EXPECT_FALSE(g.is_op(n, "Range")); }
    if (g.is_op(n, "Softmax")) { EXPECT_EQ(g.attr_int(n, "axis", 0), opset >= 11 ? -1 : 3); }
  }
}

api::OptimizeSettings for_target(const std::string& target, std::optional<int64_t> opset = {}, bool verify = false) {
  api::OptimizeSettings s;
  s.verify = verify;
  s.target = target;
  s.target_opset = opset;
  return s;
}

// ---- RotaryEmbedding ------------------------------------------------------------------------

struct Rope {
  int rank = 4;
  bool interleaved = false, partial = false, positions = false;
  int64_t opset = 23;
  bool dynamic = false;  // a symbolic sequence length
};

constexpr int64_t kB = 2, kH = 3, kS = 5, kD = 16;

std::unique_ptr<Model> rope_model(const Rope& r) {
  GraphBuilder b(r.opset);
  const int64_t S = r.dynamic ? -1 : kS;
  ValueId x = r.rank == 4 ? b.input("x", {kB, kH, S, kD}, DType::Float, {"", "", "seq"})
                          : b.input("x", {kB, S, kH * kD}, DType::Float, {"", "seq"});
  const int64_t rot = r.partial ? 8 : kD, half = rot / 2;
  std::vector<ValueId> ins = {x};
  if (r.positions) {
    const int64_t max_pos = r.dynamic ? 160 : kS + 3;  // the zoo's inputs: 128 along a symbolic "seq"
    ins.push_back(b.f32("cos_cache", {max_pos, half}, noise(static_cast<size_t>(max_pos * half), 11)));
    ins.push_back(b.f32("sin_cache", {max_pos, half}, noise(static_cast<size_t>(max_pos * half), 12)));
    ins.push_back(b.input("position_ids", {kB, S}, DType::Int64, {"", "seq"}));
  } else {
    ins.push_back(b.input("cos", {kB, S, half}, DType::Float, {"", "seq"}));
    ins.push_back(b.input("sin", {kB, S, half}, DType::Float, {"", "seq"}));
  }
  std::vector<NewAttr> attrs = {NewAttr::Int("interleaved", r.interleaved)};
  if (r.rank == 3) attrs.push_back(NewAttr::Int("num_heads", kH));
  if (r.partial) attrs.push_back(NewAttr::Int("rotary_embedding_dim", rot));
  b.output(b.node("RotaryEmbedding", ins, attrs));
  return std::move(b.m);
}

TEST(DecomposeRotary, EveryAttributeCombinationMatchesTheKernel) {
  double worst = 0;
  int cases = 0;
  for (int rank : {3, 4})
    for (bool interleaved : {false, true})
      for (bool partial : {false, true})
        for (bool positions : {false, true}) {
          Rope r{rank, interleaved, partial, positions};
          SCOPED_TRACE("rank " + std::to_string(rank) + " interleaved " + std::to_string(interleaved) + " partial " +
                       std::to_string(partial) + " positions " + std::to_string(positions));
          auto m = decomposes([&] { return rope_model(r); }, "RotaryEmbedding", "decompose_rotary_embedding", &worst);
          forms_match_opset(*m);
          ++cases;
        }
  std::printf("[ rotary   ] %d combinations, max_diff %.3g\n", cases, worst);
}

TEST(DecomposeRotary, DynamicSequenceAndOlderOpsets) {
  for (int64_t opset : {10, 12, 13, 18, 23})
    for (int rank : {3, 4}) {
      SCOPED_TRACE("opset " + std::to_string(opset) + " rank " + std::to_string(rank));
      Rope r{rank, opset % 2 == 0, true, true, opset, /*dynamic=*/true};
      auto m = decomposes([&] { return rope_model(r); }, "RotaryEmbedding", "decompose_rotary_embedding");
      forms_match_opset(*m);
      ort_agrees(*rope_model(r), *m, "opset " + std::to_string(opset));
    }
}

// ---- Attention --------------------------------------------------------------------------------

enum class Mask { None, Bool, Additive, ShortBool, ShortAdditive };

struct Attn {
  int rank = 4;
  int64_t hq = 4, hkv = 4;
  Mask mask = Mask::None;
  bool causal = false, scale = false, softcap = false, past = false;
  int qk_mode = -1;  // -1: qk_matmul_output not asked for
  int64_t opset = 23;
  bool dynamic = false;              // symbolic sequence lengths (then no mask: its shape would need them)
  std::vector<int64_t> nonpad = {};  // Attention-24's nonpad_kv_seqlen, one per batch (a constant)
};

constexpr int64_t kSq = 3, kSkv = 5, kP = 2, kHd = 8;

std::unique_ptr<Model> attn_model(const Attn& a) {
  GraphBuilder b(a.opset);
  const int64_t sq = a.dynamic ? -1 : kSq, skv = a.dynamic ? -1 : kSkv, p = a.dynamic ? -1 : kP;
  const int64_t T = kSkv + (a.past ? kP : 0);
  std::vector<ValueId> ins;
  if (a.rank == 4) {
    ins.push_back(b.input("q", {kB, a.hq, sq, kHd}, DType::Float, {"", "", "qlen"}));
    ins.push_back(b.input("k", {kB, a.hkv, skv, kHd}, DType::Float, {"", "", "kvlen"}));
    ins.push_back(b.input("v", {kB, a.hkv, skv, kHd}, DType::Float, {"", "", "kvlen"}));
  } else {
    ins.push_back(b.input("q", {kB, sq, a.hq * kHd}, DType::Float, {"", "qlen"}));
    ins.push_back(b.input("k", {kB, skv, a.hkv * kHd}, DType::Float, {"", "kvlen"}));
    ins.push_back(b.input("v", {kB, skv, a.hkv * kHd}, DType::Float, {"", "kvlen"}));
  }
  // Masks as constants: rows with some keys masked, one row with every key masked (the op gives
  // zeros there, a plain Softmax NaN).
  const int64_t mlen = (a.mask == Mask::ShortBool || a.mask == Mask::ShortAdditive) ? T - 2 : T;
  if (a.mask == Mask::Bool || a.mask == Mask::ShortBool) {
    std::vector<uint8_t> bits(static_cast<size_t>(kB * kSq * mlen));
    std::mt19937 rng(7);
    for (auto& x : bits) x = rng() % 3 != 0;
    for (int64_t j = 0; j < mlen; ++j) bits[static_cast<size_t>(1 * mlen + j)] = 0;  // batch 0, row 1: nothing
    ins.push_back(b.init("mask", {kB, 1, kSq, mlen}, bits, DType::Bool));
  } else if (a.mask == Mask::Additive || a.mask == Mask::ShortAdditive) {
    std::vector<float> add = noise(static_cast<size_t>(kSq * mlen), 8, -2, 2);
    for (size_t i = 0; i < add.size(); i += 4) add[i] = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < mlen; ++j) add[static_cast<size_t>(2 * mlen + j)] = -std::numeric_limits<float>::infinity();
    ins.push_back(b.f32("mask", {kSq, mlen}, add));
  }
  if (a.past) {
    ins.resize(4);
    ins.push_back(b.input("past_key", {kB, a.hkv, p, kHd}, DType::Float, {"", "", "past"}));
    ins.push_back(b.input("past_value", {kB, a.hkv, p, kHd}, DType::Float, {"", "", "past"}));
  }
  if (!a.nonpad.empty()) {
    ins.resize(6);
    ins.push_back(b.i64("nonpad_kv_seqlen", a.nonpad));
  }
  std::vector<NewAttr> attrs;
  if (a.rank == 3) {
    attrs.push_back(NewAttr::Int("q_num_heads", a.hq));
    attrs.push_back(NewAttr::Int("kv_num_heads", a.hkv));
  }
  if (a.causal) attrs.push_back(NewAttr::Int("is_causal", 1));
  if (a.scale) attrs.push_back(NewAttr::Float("scale", 0.3f));
  if (a.softcap) attrs.push_back(NewAttr::Float("softcap", 2.0f));
  if (a.qk_mode >= 0) attrs.push_back(NewAttr::Int("qk_matmul_output_mode", a.qk_mode));
  const size_t outs = a.qk_mode >= 0 ? 4 : a.past ? 3 : 1;
  std::vector<ValueId> o = b.node_n("Attention", ins, attrs, outs);
  b.output(o[0]);
  if (a.past) {
    b.output(o[1]);
    b.output(o[2]);
  }
  if (a.qk_mode >= 0) b.output(o[3]);
  return std::move(b.m);
}

std::string describe(const Attn& a) {
  static const char* masks[] = {"none", "bool", "additive", "short bool", "short additive"};
  return std::to_string(a.rank) + "-D Hq " + std::to_string(a.hq) + " Hkv " + std::to_string(a.hkv) + " mask " +
         masks[static_cast<int>(a.mask)] + (a.causal ? " causal" : "") + (a.scale ? " scale" : "") +
         (a.softcap ? " softcap" : "") + (a.past ? " past" : "") + " qk " + std::to_string(a.qk_mode) + " opset " +
         std::to_string(a.opset) + (a.dynamic ? " dynamic" : "");
}

TEST(DecomposeAttention, EveryAttributeCombinationMatchesTheKernel) {
  double worst = 0;
  int cases = 0;
  for (int rank : {3, 4})
    for (int64_t hkv : {4, 2})
      for (Mask mask : {Mask::None, Mask::Bool, Mask::Additive, Mask::ShortBool, Mask::ShortAdditive})
        for (bool causal : {false, true})
          for (bool scale : {false, true})
            for (bool softcap : {false, true})
              for (bool past : {false, true}) {
                const Attn a{.rank = rank,
                             .hkv = hkv,
                             .mask = mask,
                             .causal = causal,
                             .scale = scale,
                             .softcap = softcap,
                             .past = past};
                SCOPED_TRACE(describe(a));
                auto m = decomposes([&] { return attn_model(a); }, "Attention", "decompose_attention", &worst);
                forms_match_opset(*m);
                ++cases;
              }
  std::printf("[ attention] %d combinations, max_diff %.3g\n", cases, worst);
}

TEST(DecomposeAttention, QkMatmulOutputModes) {
  for (int mode : {0, 1, 2, 3}) {
    const Attn a{.rank = 3, .hkv = 2, .mask = Mask::Bool, .causal = true, .softcap = true, .qk_mode = mode};
    SCOPED_TRACE(describe(a));
    decomposes([&] { return attn_model(a); }, "Attention", "decompose_attention");
  }
}

// Symbolic lengths (a causal mask built with Range), and the opset forms: Unsqueeze's axes an
// attribute below 13, Not(Greater) below 12 (LessOrEqual is opset 12).
TEST(DecomposeAttention, DynamicLengthsAndOlderOpsets) {
  // One decomposition: its ops in the opset's forms, ORT agreeing with the original; `range`
  // whether the causal mask is built with Range (dynamic lengths) or is a constant.
  const auto check = [](const Attn& a, std::optional<bool> range) {
    SCOPED_TRACE(describe(a));
    auto m = decomposes([&] { return attn_model(a); }, "Attention", "decompose_attention");
    forms_match_opset(*m);
    if (range) { EXPECT_EQ(count_op(m->main(), "Range") > 0, *range); }
    ort_agrees(*attn_model(a), *m, describe(a));
  };
  for (int64_t opset : {11, 12, 13, 23})
    for (bool past : {false, true})
      check({.hkv = 2, .causal = true, .past = past, .opset = opset, .dynamic = true}, true);
  // A static causal mask is a constant (opset 9: Where, IsNaN; Softmax's axis not negative).
  for (int64_t opset : {9, 11}) check({.hkv = 2, .causal = true, .scale = true, .past = true, .opset = opset}, false);
  // Masks (a short one padded: Pad of a bool is opset 13), GQA, past, softcap, 3-D and 4-D.
  for (int rank : {3, 4})
    for (Mask mask : {Mask::Bool, Mask::ShortBool, Mask::ShortAdditive})
      check({.rank = rank, .hkv = 2, .mask = mask, .causal = true, .softcap = true, .past = true, .opset = 13},
            std::nullopt);
}

// Attention-24's nonpad_kv_seqlen (an external, static KV cache: keys at or beyond the length
// are padding, the causal frontier sits length - q_length right of the diagonal), with and
// without is_causal and a mask, GQA, 3-D and 4-D; a batch with length 0 has no key left (zeros).
TEST(DecomposeAttention, NonpadKvSeqlen) {
  for (int rank : {3, 4})
    for (bool causal : {false, true})
      for (Mask mask : {Mask::None, Mask::Bool})
        for (std::vector<int64_t> lens : {std::vector<int64_t>{5, 2}, std::vector<int64_t>{0, 4}}) {
          const Attn a{.rank = rank, .hkv = 2, .mask = mask, .causal = causal, .opset = 24, .nonpad = lens};
          const auto make = [&] { return attn_model(a); };
          SCOPED_TRACE(describe(a) + " nonpad " + std::to_string(lens[0]) + "," + std::to_string(lens[1]));
          auto m = decomposes(make, "Attention", "decompose_attention");
          forms_match_opset(*m);
          if (lens[0] == 0) ort_agrees(*make(), *m, describe(a));
        }
}

// What the pass must leave alone, and the reason optimize reports for it: Attention-24's
// nonpad_kv_seqlen (an external cache's valid lengths), an unknown head size the default scale
// needs, a RotaryEmbedding whose caches are not of the input's type (float16 x, float32 caches:
// the chain would mix types). Float16 alike decomposes (Verification.Float16LlamaDecomposes...).
TEST(DecomposeAttention, MustNotTouch) {
  {
    // nonpad_kv_seqlen with a past cache: the op forbids it (the kernel refuses to run it).
    GraphBuilder b(24);
    ValueId q = b.input("q", {1, 4, 3, 8}), k = b.input("k", {1, 4, 5, 8}), v = b.input("v", {1, 4, 5, 8});
    ValueId pk = b.input("past_key", {1, 4, 2, 8}), pv = b.input("past_value", {1, 4, 2, 8});
    ValueId lens = b.i64("nonpad_kv_seqlen", {4});
    b.output(b.node("Attention", {q, k, v, {}, pk, pv, lens}));
    passes::RunResult r = optimize(*b.m, {"decompose_attention"});
    EXPECT_EQ(count_op(b.m->main(), "Attention"), 1u);
    EXPECT_EQ(r.after.nodes, r.before.nodes);
    const auto left = passes::left_for_target(*b.m, passes::target_profile("tensorrt"));
    ASSERT_EQ(left.size(), 1u);
    EXPECT_NE(left[0].find("nonpad_kv_seqlen with past_key"), std::string::npos) << left[0];
    EXPECT_TRUE(passes::left_for_target(*b.m, passes::target_profile("ort")).empty());
  }
  {
    GraphBuilder b(23);
    ValueId q = b.input("q", {1, 4, 3, -1}), k = b.input("k", {1, 4, 5, -1}), v = b.input("v", {1, 4, 5, -1});
    b.output(b.node("Attention", {q, k, v}));
    optimize(*b.m, {"decompose_attention"});
    EXPECT_EQ(count_op(b.m->main(), "Attention"), 1u);
    const auto left = passes::left_for_target(*b.m, passes::target_profile("tflite"));
    ASSERT_EQ(left.size(), 1u);
    EXPECT_NE(left[0].find("head size is unknown"), std::string::npos) << left[0];
    // optimize says it: a note and the report's target.left.
    const auto path = temp_dir("decompose_left") / "head_size.onnx";
    save_model(*b.m, path);
    api::OptimizeOutcome out = api::optimize(path, for_target("tensorrt"));
    ASSERT_EQ(out.report["target"]["left"].size(), 1u);
    EXPECT_NE(out.report["target"]["left"][0].get<std::string>().find("1 Attention left for target 'tensorrt'"),
              std::string::npos);
    EXPECT_TRUE(std::any_of(out.notes.begin(), out.notes.end(),
                            [](const std::string& n) { return n.find("head size is unknown") != std::string::npos; }));
  }
  {
    GraphBuilder b(23);
    ValueId x = b.input("x", {1, 2, 3, 8}, DType::Float16);
    ValueId c = b.input("cos", {1, 3, 4}), s = b.input("sin", {1, 3, 4});
    b.output(b.node("RotaryEmbedding", {x, c, s}), DType::Float16);
    optimize(*b.m, {"decompose_rotary_embedding"});
    EXPECT_EQ(count_op(b.m->main(), "RotaryEmbedding"), 1u);
    const auto left = passes::left_for_target(*b.m, passes::target_profile("tensorrt"));
    ASSERT_EQ(left.size(), 1u);
    EXPECT_NE(left[0].find("not of input 0's type"), std::string::npos) << left[0];
  }
}

// A fusion and its inverse never run together: a target's plan drops the fusion of every op it
// lacks and puts the decomposition in front, so they cannot undo each other round after round.
TEST(DecomposeTargets, FusionAndInverseNeverInOnePlan) {
  const std::pair<const char*, const char*> pairs[] = {{"fuse_layer_norm", "decompose_layer_norm"},
                                                       {"fuse_rms_norm", "decompose_rms_norm"},
                                                       {"fuse_gelu", "decompose_gelu"},
                                                       {"fuse_swish", "decompose_swish"},
                                                       {"fuse_rotary_embedding", "decompose_rotary_embedding"},
                                                       {"fuse_attention", "decompose_attention"}};
  for (const passes::TargetProfile& t : passes::all_targets()) {
    const passes::TargetPlan plan = passes::plan_for_target(passes::all_passes(), t);
    std::vector<std::string> run;
    for (const passes::Pass* p : plan.passes) run.push_back(p->name());
    for (auto [fuse, inverse] : pairs) {
      const bool f = std::find(run.begin(), run.end(), fuse) != run.end();
      const bool d = std::find(run.begin(), run.end(), inverse) != run.end();
      EXPECT_FALSE(f && d) << t.name << ": " << fuse << " and " << inverse;
    }
  }
}

// ---- the zoo ----------------------------------------------------------------------------------

// fused at opset 23 (rotary + attention + norms), then decomposed: none of the two ops left, the
// outputs agree with the original export within class 1 (both run op by op).
TEST(DecomposeZoo, FusedAtOpset23ThenDecomposedMatchesTheExport) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  for (const char* name : {"llama_small", "bert_small", "gpt2_small_cfg", "whisper_small_enc"}) {
    SCOPED_TRACE(name);
    auto [original, model] = zoo_fused_at(name, 23);
    const size_t attn = count_op(model->main(), "Attention"), rope = count_op(model->main(), "RotaryEmbedding");
    EXPECT_GT(attn, 0u);
    if (std::string(name) == "llama_small") { EXPECT_GT(rope, 0u); }
    const int64_t fused_nodes = static_cast<int64_t>(model->main().node_count());
    optimize(*model, {"decompose_rotary_embedding", "decompose_attention"});
    EXPECT_EQ(count_op(model->main(), "Attention"), 0u);
    EXPECT_EQ(count_op(model->main(), "RotaryEmbedding"), 0u);
    forms_match_opset(*model);
    auto [diff, ok] = class1_diff(*original, *model, 5, false);
    EXPECT_TRUE(ok) << "decomposed against the original export: max_diff " << diff;
    ort_agrees(*original, *model, name);
    std::printf(
        "[ decomp   ] %-16s %zu Attention, %zu RotaryEmbedding: %lld -> %zu nodes, max_diff %.3g vs the export\n", name,
        attn, rope, static_cast<long long>(fused_nodes), static_cast<size_t>(model->main().node_count()), diff);
  }
}

// Nothing a target lacks is left in what optimize writes for it: from the export (the fusions
// the target lacks do not run) and from a model already fused for ONNX Runtime at opset 23/24
// (the decompositions undo them), verified against that model.
TEST(DecomposeZoo, NothingTheTargetLacksIsLeft) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  const auto dir = temp_dir("decompose_targets");
  for (const char* name : {"llama_small", "bert_small"}) {
    // Fused for ONNX Runtime at the highest opset each target takes (tflite: 20 has none of the
    // transformer ops, so 23 goes through tensorrt only; the tflite run starts from opset 23 too:
    // onnxforge never downgrades, the report says so).
    api::OptimizeOutcome ort = api::optimize(zoo_model(name), for_target("ort", 23));
    ASSERT_GT(count_op(ort.model->main(), "Attention"), 0u) << name;
    const auto fused = dir / (std::string(name) + "_ort23.onnx");
    api::write_optimized(ort, fused, false);
    for (const char* target : {"tensorrt", "tflite"}) {
      SCOPED_TRACE(std::string(name) + " for " + target);
      const passes::TargetProfile& t = passes::target_profile(target);
      for (const auto& input : {zoo_model(name), fused}) {
        api::OptimizeOutcome out = api::optimize(input, for_target(target, {}, /*verify=*/true));
        EXPECT_TRUE(out.ok()) << input << ": max_diff " << out.verification.max_diff;
        for (const std::string& op : t.lacks) EXPECT_EQ(count_op(out.model->main(), op), 0u) << input << " " << op;
        EXPECT_TRUE(passes::left_for_target(*out.model, t).empty()) << input;
        EXPECT_TRUE(out.report["target"]["left"].empty()) << input;
        std::printf("[ target   ] %-12s %-8s from %-22s: %lld -> %lld nodes, max_diff %.3g\n", name, target,
                    input.filename().string().c_str(), static_cast<long long>(out.run.before.nodes),
                    static_cast<long long>(out.run.after.nodes), out.verification.max_diff);
      }
    }
  }
}

}  // namespace
}  // namespace onnxforge::test
