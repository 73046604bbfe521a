// The decompositions (decompose_layer_norm, decompose_rms_norm, decompose_gelu, decompose_swish):
// each standard op back into primitives at the model's opset, checked numerically through the
// runtime with the runtime's own fusions of decomposed patterns off (so no matcher at all decides
// how either side is computed), what they must leave alone, and the round trip fuse → decompose
// → fuse on the zoo's exports. Also the target table (passes/targets.h) and what `optimize`
// does with a target: fusions the target lacks dropped, --target-opset above its maximum
// refused, the upgrade hint.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "analysis/shapes.h"
#include "api/engine.h"
#include "io/model_io.h"
#include "ir/error.h"
#include "numeric.h"
#include "tests/common/random.h"
#include "passes/fusion.h"
#include "passes/registry.h"
#include "passes/targets.h"
#include "passes/upgrade_opset.h"
#include "runtime/inputs.h"
#include "runtime/runtime.h"
#include "tests/common/models.h"

namespace onnxforge::test {
namespace {

// max |a − b| over every output of two models on the same seeded inputs, both run op by op
// (the runtime plan's fusions of decomposed LayerNorm/GELU off), and whether every element is
// within class 1 (1e-4 + 1e-3·|a|).
std::pair<double, bool> plain_diff(const Model& a, const Model& b, uint64_t seed = 5) {
  return class1_diff(a, b, seed, /*fuse_b=*/false);
}

// One standard op on a [2, 5, 16] input.
struct OneOp {
  std::string op;
  int64_t opset = 24;
  std::vector<NewAttr> attrs;
  bool bias = true;        // LayerNormalization's B
  bool read_mean = false;  // LayerNormalization's Mean output read by a graph output
};

OneOp spec(std::string op, int64_t opset, std::vector<NewAttr> attrs = {}, bool bias = true, bool read_mean = false) {
  OneOp s;
  s.op = std::move(op);
  s.opset = opset;
  s.attrs = std::move(attrs);
  s.bias = bias;
  s.read_mean = read_mean;
  return s;
}

std::unique_ptr<Model> one_op(const OneOp& s) {
  GraphBuilder b(s.opset);
  ValueId x = b.input("x", {2, 5, 16});
  std::vector<ValueId> ins = {x};
  if (s.op == "LayerNormalization" || s.op == "RMSNormalization") {
    ins.push_back(b.f32("scale", {16}, noise(16, 3, 0.5f, 1.5f)));
    if (s.op == "LayerNormalization" && s.bias) ins.push_back(b.f32("bias", {16}, noise(16, 4)));
  }
  if (s.read_mean) {
    auto outs = b.node_n(s.op, ins, s.attrs, 2);
    b.output(outs[0]);
    b.output(outs[1]);
  } else {
    b.output(b.node(s.op, ins, s.attrs));
  }
  return std::move(b.m);
}

// Decomposes with `pass`, checks nothing of `op` is left and the result matches the op's kernel.
void decomposes(const OneOp& s, const std::string& pass) {
  SCOPED_TRACE(s.op + " at opset " + std::to_string(s.opset));
  auto original = one_op(s);
  auto model = one_op(s);
  passes::RunResult r = optimize(*model, {pass});
  EXPECT_EQ(count_op(model->main(), s.op), 0u);
  EXPECT_GT(r.after.nodes, r.before.nodes);
  if (!passes::runtime_available()) return;
  auto [diff, ok] = plain_diff(*original, *model);
  EXPECT_TRUE(ok) << "max_diff " << diff;
}

TEST(Decompositions, LayerNormAtOpset17And18) {
  decomposes(spec("LayerNormalization", 17, {NewAttr::Float("epsilon", 1e-3f)}), "decompose_layer_norm");
  decomposes(spec("LayerNormalization", 18), "decompose_layer_norm");
  decomposes(spec("LayerNormalization", 23, {NewAttr::Int("axis", -2)}, false), "decompose_layer_norm");
  decomposes(spec("LayerNormalization", 17, {NewAttr::Int("axis", 2)}), "decompose_layer_norm");
  // opset 17: the axes of ReduceMean are an attribute; 18: an input.
  auto m17 = one_op(spec("LayerNormalization", 17));
  optimize(*m17, {"decompose_layer_norm"});
  for (NodeId n : m17->main().nodes())
    if (m17->main().is_op(n, "ReduceMean")) { EXPECT_EQ(m17->main().inputs(n).size(), 1u); }
  auto m18 = one_op(spec("LayerNormalization", 18));
  optimize(*m18, {"decompose_layer_norm"});
  for (NodeId n : m18->main().nodes())
    if (m18->main().is_op(n, "ReduceMean")) { EXPECT_EQ(m18->main().inputs(n).size(), 2u); }
}

TEST(Decompositions, GeluBothForms) {
  decomposes(spec("Gelu", 20), "decompose_gelu");
  decomposes(spec("Gelu", 20, {NewAttr::String("approximate", "tanh")}), "decompose_gelu");
}

TEST(Decompositions, RmsNormAndSwish) {
  decomposes(spec("RMSNormalization", 23, {NewAttr::Float("epsilon", 1e-6f)}), "decompose_rms_norm");
  decomposes(spec("RMSNormalization", 23, {NewAttr::Int("axis", -2)}), "decompose_rms_norm");
  decomposes(spec("Swish", 24), "decompose_swish");
  decomposes(spec("Swish", 24, {NewAttr::Float("alpha", 1.702f)}), "decompose_swish");
}

// What a decomposition must not touch: a LayerNormalization whose Mean output is read (nothing
// else computes it), a Gelu with an approximation the spec does not define, and a graph without
// the op (nothing changes at all).
TEST(Decompositions, MustNotTouch) {
  auto ln = one_op(spec("LayerNormalization", 17, {}, true, true));
  passes::RunResult r = optimize(*ln, {"decompose_layer_norm"});
  EXPECT_EQ(count_op(ln->main(), "LayerNormalization"), 1u);
  EXPECT_EQ(r.after.nodes, r.before.nodes);
  auto gelu = one_op(spec("Gelu", 20, {NewAttr::String("approximate", "sigmoid")}));
  optimize(*gelu, {"decompose_gelu"});
  EXPECT_EQ(count_op(gelu->main(), "Gelu"), 1u);
  auto swish = one_op(spec("Swish", 24));
  r = optimize(*swish, {"decompose_layer_norm", "decompose_gelu", "decompose_rms_norm"});
  EXPECT_EQ(count_op(swish->main(), "Swish"), 1u);
  EXPECT_EQ(r.after.nodes, r.before.nodes);
}

// The decompositions are not in the default pipeline: without a target nothing is undone.
TEST(Decompositions, NotInTheDefaultPipeline) {
  for (const passes::Pass* p : passes::all_passes()) EXPECT_EQ(p->name().rfind("decompose_", 0), std::string::npos);
  auto m = one_op(spec("LayerNormalization", 17));
  optimize(*m);
  EXPECT_EQ(count_op(m->main(), "LayerNormalization"), 1u);
}

// fuse → decompose → fuse on the zoo's exports (upgraded to opset 24, every norm and activation
// fusion legal): the decomposed model matches the original export within class 1 (both run op by
// op), holds none of the four ops, and fuses back to the same count of each.
TEST(DecompositionsZoo, FuseDecomposeFuseRoundTrip) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  const std::vector<std::string> ops = {"LayerNormalization", "Gelu", "RMSNormalization", "Swish"};
  const std::vector<std::string> decompositions = {"decompose_layer_norm", "decompose_gelu", "decompose_rms_norm",
                                                   "decompose_swish"};
  for (const char* name : {"bert_small", "gpt2_small_cfg", "vit_small", "whisper_small_enc", "llama_small"}) {
    SCOPED_TRACE(name);
    auto [original, model] = zoo_fused_at(name, 24);
    std::vector<size_t> fused;
    size_t total = 0;
    for (const std::string& op : ops) total += fused.emplace_back(count_op(model->main(), op));
    EXPECT_GT(total, 0u);
    optimize(*model, decompositions);
    for (const std::string& op : ops) EXPECT_EQ(count_op(model->main(), op), 0u) << op;
    auto [diff, ok] = plain_diff(*original, *model);
    EXPECT_TRUE(ok) << "decomposed against the original export: max_diff " << diff;
    optimize(*model);
    for (size_t i = 0; i < ops.size(); ++i) EXPECT_EQ(count_op(model->main(), ops[i]), fused[i]) << ops[i];
    std::printf(
        "[ decomp   ] %-18s LN %zu, Gelu %zu, RMSNorm %zu, Swish %zu fused, decomposed (max_diff %.3g) and fused "
        "back\n",
        name, fused[0], fused[1], fused[2], fused[3], diff);
  }
}

// ---- targets ----------------------------------------------------------------------------------

std::vector<std::string> names(const std::vector<const passes::Pass*>& ps) {
  std::vector<std::string> out;
  for (const passes::Pass* p : ps) out.push_back(p->name());
  return out;
}
bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// One row per rule (registry.cpp): every fusion into an op a target may lack has its inverse, the
// inverse undoes exactly that op, and what --list-passes prints is derived from the same rows.
TEST(Registry, RowsDeriveThePipelineTheInversesAndTheList) {
  std::vector<std::string> fusions, inverses;
  for (const passes::Rule& r : passes::rules()) {
    ASSERT_NE(r.pass, nullptr);
    if (r.fusion) fusions.push_back(r.fusion->info().name);
    if (!r.inverse) continue;
    ASSERT_NE(r.fusion, nullptr) << r.pass->name();
    inverses.push_back(r.inverse->name());
    EXPECT_EQ(passes::inverse_of(r.fusion->info().op), r.inverse) << r.fusion->info().op;
    // The decomposition takes the op apart (one_op builds the norms and activations; attention
    // and rotary have their own tests in test_decompose_transformer.cpp).
    const std::string& op = r.fusion->info().op;
    if (op == "Attention" || op == "RotaryEmbedding") continue;
    auto m = one_op(spec(op, 24));
    optimize(*m, {r.inverse->name()});
    EXPECT_EQ(count_op(m->main(), op), 0u) << r.inverse->name();
  }
  std::vector<std::string> listed;
  for (const passes::Fusion* f : passes::all_fusions()) listed.push_back(f->info().name);
  EXPECT_EQ(listed, fusions);
  EXPECT_EQ(names(passes::decomposition_passes()), inverses);
  EXPECT_EQ(inverses.size(), 6u);
  EXPECT_EQ(passes::inverse_of("MatMul"), nullptr);  // fuse_qkv_projections emits MatMul: nothing to undo
  EXPECT_EQ(passes::inverse_of("Conv"), nullptr);
}

TEST(Targets, ProfilesAndPlans) {
  EXPECT_THROW(passes::target_profile("coreml"), Error);
  const auto& all = passes::all_passes();
  for (const char* t : {"generic", "ort"}) {
    passes::TargetPlan p = passes::plan_for_target(all, passes::target_profile(t));
    EXPECT_EQ(names(p.passes), names(all)) << t;
    EXPECT_TRUE(p.dropped.empty()) << t;
  }
  for (const char* t : {"tensorrt", "tflite"}) {
    const passes::TargetProfile& prof = passes::target_profile(t);
    EXPECT_TRUE(prof.accepts("LayerNormalization"));
    EXPECT_TRUE(prof.accepts("Gelu"));
    passes::TargetPlan p = passes::plan_for_target(all, prof);
    auto run = names(p.passes);
    for (const char* f : {"fuse_rms_norm", "fuse_swish", "fuse_rotary_embedding", "fuse_attention"}) {
      EXPECT_FALSE(has(run, f)) << t << " " << f;
      EXPECT_TRUE(has(p.dropped, f)) << t << " " << f;
    }
    for (const char* f : {"fuse_layer_norm", "fuse_gelu", "fold_constants"}) EXPECT_TRUE(has(run, f)) << t << " " << f;
    // The decompositions of what it lacks run first, and every op it lacks has one.
    ASSERT_GE(run.size(), 4u);
    const std::vector<std::string> first(run.begin(), run.begin() + 4);
    for (const char* d : {"decompose_rms_norm", "decompose_rotary_embedding", "decompose_attention", "decompose_swish"})
      EXPECT_TRUE(has(first, d)) << t << " " << d;
    EXPECT_TRUE(p.no_decomposition.empty()) << t;
  }
  EXPECT_NO_THROW(passes::check_target_max_opset(passes::target_profile("tensorrt"), 23));
  EXPECT_THROW(passes::check_target_max_opset(passes::target_profile("tensorrt"), 24), Error);
  EXPECT_THROW(passes::check_target_max_opset(passes::target_profile("tflite"), 21), Error);
}

api::OptimizeSettings quick(std::string target, std::optional<int64_t> opset = {}) {
  api::OptimizeSettings s;
  s.verify = false;
  s.target = std::move(target);
  s.target_opset = opset;
  return s;
}

// optimize with a target: --target-opset above its maximum is bad usage; fusions it lacks do not
// run (llama_small at opset 24 for tflite keeps RMSNorm and SiLU decomposed, fuses nothing the
// converter cannot take), the report says what was dropped.
TEST(Targets, OptimizeHonoursTheTarget) {
  const auto llama = zoo_model("llama_small");
  try {
    api::optimize(llama, quick("tensorrt", 24));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("above what target 'tensorrt' accepts"), std::string::npos) << e.what();
  }
  EXPECT_THROW(api::optimize(llama, quick("nnapi")), Error);
  api::OptimizeOutcome ort = api::optimize(llama, quick("ort", 24));
  EXPECT_GT(count_op(ort.model->main(), "RMSNormalization"), 0u);
  api::OptimizeOutcome trt = api::optimize(llama, quick("tensorrt", 23));
  EXPECT_EQ(count_op(trt.model->main(), "RMSNormalization"), 0u);
  EXPECT_EQ(count_op(trt.model->main(), "Attention"), 0u);
  EXPECT_EQ(trt.report["target"]["name"], "tensorrt");
  EXPECT_TRUE(has(trt.report["target"]["fusions_dropped"].get<std::vector<std::string>>(), "fuse_rms_norm"));
}

// A model that already holds RMSNormalization and Swish (fused for ONNX Runtime) going to
// TensorRT: both decomposed, verified against the original export.
TEST(Targets, AModelHoldingTheOpsGetsThemDecomposed) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  const auto dir = temp_dir("targets_decompose");
  api::OptimizeOutcome ort = api::optimize(zoo_model("llama_small"), quick("ort", 24));
  ASSERT_GT(count_op(ort.model->main(), "RMSNormalization"), 0u);
  ASSERT_GT(count_op(ort.model->main(), "Swish"), 0u);
  api::write_optimized(ort, dir / "ort.onnx", false);
  api::OptimizeSettings s = quick("tensorrt");
  s.verify = true;
  api::OptimizeOutcome trt = api::optimize(dir / "ort.onnx", s);
  EXPECT_TRUE(trt.ok()) << trt.verification.max_diff;
  EXPECT_EQ(count_op(trt.model->main(), "RMSNormalization"), 0u);
  EXPECT_EQ(count_op(trt.model->main(), "Swish"), 0u);
  auto decs = trt.report["target"]["decompositions"].get<std::vector<std::string>>();
  EXPECT_TRUE(has(decs, "decompose_rms_norm"));
  EXPECT_TRUE(has(decs, "decompose_swish"));
  // opset 24 is above tensorrt's 23: said, not silently ignored (no downgrade).
  EXPECT_TRUE(trt.report["target"].contains("note"));
}

// Without --target-opset, optimize says what an upgrade would unlock, for the target's ops only.
TEST(Targets, UpgradeHint) {
  const auto bert = zoo_model("bert_small");  // opset 14: 5 LayerNorms, 2 GELUs
  api::OptimizeOutcome g = api::optimize(bert, quick("generic"));
  EXPECT_NE(g.hint.find("5 LayerNormalization"), std::string::npos) << g.hint;
  EXPECT_NE(g.hint.find("2 Gelu"), std::string::npos) << g.hint;
  EXPECT_NE(g.hint.find("--target-opset 2"), std::string::npos) << g.hint;
  EXPECT_EQ(g.report["hint"], g.hint);
  // The fingerprint's family is reported; it selects no passes (measured: nothing to gain,
  // docs/benchmarks.md), so the list of skipped passes is empty.
  EXPECT_EQ(g.report["family"]["name"], "encoder transformer");
  EXPECT_TRUE(g.report["family"]["passes_skipped"].empty());
  // With the upgrade asked for, nothing is left to hint at.
  api::OptimizeOutcome up = api::optimize(bert, quick("generic", 24));
  EXPECT_TRUE(up.hint.empty()) << up.hint;
  EXPECT_EQ(up.report["hint"], "");
  // llama_small (opset 14, RMSNorm and SiLU): for tflite (no RMSNormalization, no Swish, opset
  // <= 20) there is nothing an upgrade would unlock; for ort both are named with opset 24.
  api::OptimizeOutcome tfl = api::optimize(zoo_model("llama_small"), quick("tflite"));
  EXPECT_TRUE(tfl.hint.empty()) << tfl.hint;
  api::OptimizeOutcome ort = api::optimize(zoo_model("llama_small"), quick("ort"));
  EXPECT_NE(ort.hint.find("RMSNormalization"), std::string::npos) << ort.hint;
  EXPECT_NE(ort.hint.find("--target-opset 24"), std::string::npos) << ort.hint;
}

}  // namespace
}  // namespace onnxforge::test
