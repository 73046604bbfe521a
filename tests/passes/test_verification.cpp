// Verification: a pass that changes the outputs is caught and named by bisection.
#include <gtest/gtest.h>

#include <limits>

#include <cstdlib>
#include <cstring>

#include "analysis/shapes.h"
#include "fp16_fixture.h"
#include "io/model_io.h"
#include "numeric.h"
#include "runtime/inputs.h"
#include "passes/pipeline.h"
#include "runtime/runtime.h"
#include "runtime/verify.h"
#include "tests/common/models.h"

namespace onnxforge::test {
namespace {

// A deliberately wrong pass: Relu becomes Sigmoid.
struct Match {
  NodeId relu;
};
std::vector<Match> analyze(const Graph& g, const Uses&, const passes::PassOptions&) {
  std::vector<Match> out;
  for (NodeId n : g.nodes())
    if (g.is_op(n, "Relu")) out.push_back({n});
  return out;
}
bool apply(passes::Edits& e, const Match& m) {
  if (e.touched(m.relu)) return false;
  ValueId y = e.g.output(m.relu, 0), r = e.new_value("broken");
  NodeId tags[] = {m.relu};
  e.add_node("Sigmoid", {e.g.input(m.relu, 0)}, {r}, {}, tags);
  e.replace_uses(y, r);
  e.kill(m.relu);
  return true;
}
const passes::PassOf<Match> broken{"broken_relu", passes::AccuracyClass::Lossless, analyze, apply, {}, "test only"};

TEST(Verification, FirstBreakingPassIsNamed) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  GraphBuilder b;
  ValueId x = b.input("x", {2, 3});
  b.output(b.node("Relu", {b.node("Identity", {x})}));
  auto dir = temp_dir("passes_verify");
  save_model(*b.m, dir / "m.onnx");
  auto original = load_model(dir / "m.onnx");
  passes::Reference ref(*original, passes::VerifyOptions{2, {}});
  std::vector<const passes::Pass*> list = {passes::find_pass("eliminate_identity_ops"), &broken,
                                           passes::find_pass("eliminate_dead_nodes")};
  passes::RunOptions ro;
  auto model = load_model(dir / "m.onnx");
  passes::run_passes(*model, list, ro);
  EXPECT_FALSE(ref.check(*model, passes::tolerance_of(passes::AccuracyClass::Lossless)).ok);
  passes::VerifyResult failure;
  EXPECT_EQ(passes::first_breaking_pass(dir / "m.onnx", {}, list, ro, ref, &failure), "broken_relu");
  EXPECT_FALSE(failure.ok);
  EXPECT_GT(failure.max_diff, 0.0);
  // The steps before the pipeline are replayed first and named when one alone breaks the model;
  // one that changed nothing is not checked.
  auto run_broken = [&ro](Model& m) {
    const passes::Pass* one[] = {&broken};
    return passes::run_passes(m, one, ro).passes[0].applied > 0;
  };
  const std::vector<passes::PreStep> steps = {{"quiet_step", [](Model&) { return false; }},
                                              {"broken_step", run_broken}};
  const std::vector<const passes::Pass*> lossless = {passes::find_pass("eliminate_identity_ops")};
  EXPECT_EQ(passes::first_breaking_pass(dir / "m.onnx", steps, lossless, ro, ref, &failure), "broken_step");
  EXPECT_EQ(passes::first_breaking_pass(dir / "m.onnx", {steps[0]}, lossless, ro, ref, &failure), "");
}

// A dead Reshape reading a conv's output keeps that value NCHW in the fast runtime; without it the
// value and the next conv go channels-last, which sums in another order. Verification compares
// in one layout, so removing the dead reader stays bit-identical (fuzz seed 703).
TEST(Verification, LosslessPassesStayExactWhenTheyChangeTheRuntimeLayout) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  GraphBuilder b;
  auto weights = [&](const std::string& name, std::vector<int64_t> dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7919 % 1000) / 1000.0 - 0.5);
    return b.f32(name, dims, v);
  };
  std::vector<NewAttr> pads = {NewAttr::Ints("pads", {1, 1, 1, 1})};
  ValueId x = b.input("x", {1, 4, 12, 12});
  ValueId stem = b.node("Conv", {x, weights("w1", {24, 4, 3, 3}), weights("b1", {24})}, pads);
  b.node("Reshape", {stem, b.i64("flat", {1, -1})});  // dead
  b.output(b.node("Conv", {stem, weights("w2", {24, 24, 3, 3}), weights("b2", {24})}, pads));
  auto dir = temp_dir("passes_verify_layout");
  save_model(*b.m, dir / "m.onnx");
  auto original = load_model(dir / "m.onnx");
  auto model = load_model(dir / "m.onnx");
  std::vector<const passes::Pass*> dce = {passes::find_pass("eliminate_dead_nodes")};
  passes::run_passes(*model, dce, passes::RunOptions{});
  ASSERT_EQ(model->main().node_count(), 2u);
  // The fast plans differ: only the optimized model keeps the stem's output channels-last.
  EXPECT_LT(rt::Session(*original).channels_last_count(), rt::Session(*model).channels_last_count());
  passes::Reference ref(*original, passes::VerifyOptions{2, {}});
  auto v = ref.check(*model, passes::tolerance_of(passes::AccuracyClass::Lossless));
  EXPECT_TRUE(v.ok) << "max_diff " << v.max_diff << " " << v.error;
}

// The magnitude floor (runtime/verify.h kMagnitudeFloor): an element is judged against its
// output's scale as well as its own. Off by 0.016 at 4 in an output whose largest value is 640
// is float rounding of 640-sized operands and passes; off by 0.05 there does not.
TEST(Verification, MagnitudeFloorJudgesSmallElementsByTheOutputsScale) {
  std::vector<float> ref = {640.f, 4.f, -12.f}, close = {640.f, 4.016f, -12.f}, off = {640.f, 4.05f, -12.f};
  auto t = [](std::vector<float>& v) { return rt::Tensor::view(DType::Float, {3}, v.data()); };
  EXPECT_FALSE(rt::compare(t(ref), t(close), 1e-4, 1e-3, 0).pass);  // element-wise only
  EXPECT_TRUE(rt::compare(t(ref), t(close), 1e-4, 1e-3, rt::kMagnitudeFloor).pass);
  EXPECT_FALSE(rt::compare(t(ref), t(off), 1e-4, 1e-3, rt::kMagnitudeFloor).pass);
  EXPECT_EQ(passes::tolerance_of(passes::AccuracyClass::Lossless).floor, 0);  // class 0 stays exact
  EXPECT_EQ(passes::tolerance_of(passes::AccuracyClass::FloatBounded).floor, rt::kMagnitudeFloor);
}

// Infinities agree only with the same infinity, under every tolerance: an output that overflows
// everywhere in both models verifies at class 0 (rtol 0 * inf was NaN: it failed with max_diff
// 0), and an infinity that became finite, or changed sign, fails at class 1 (rtol * inf was inf:
// it passed).
TEST(Verification, InfinitiesAgreeOnlyWithTheSameInfinity) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> ref = {inf, -inf, 1.f}, same = ref, finite = {3e38f, -inf, 1.f}, flipped = {inf, inf, 1.f};
  auto t = [](std::vector<float>& v) { return rt::Tensor::view(DType::Float, {3}, v.data()); };
  for (auto c : {passes::AccuracyClass::Lossless, passes::AccuracyClass::FloatBounded}) {
    const auto tol = passes::tolerance_of(c);
    EXPECT_TRUE(rt::compare(t(ref), t(same), tol.abs, tol.rel, tol.floor).pass);
    EXPECT_FALSE(rt::compare(t(ref), t(finite), tol.abs, tol.rel, tol.floor).pass);
    EXPECT_FALSE(rt::compare(t(ref), t(flipped), tol.abs, tol.rel, tol.floor).pass);
    EXPECT_EQ(rt::compare(t(ref), t(finite), tol.abs, tol.rel, tol.floor).problem, "infinity at different positions");
  }
}

// The zoo model that needed it: YOLOv8n (mini) with random BatchNormalization statistics, whose
// boxes are anchor ± distance near 640. fuse_conv_batchnorm's rounding put a box corner near 4
// 0.016 off (element-wise: refused); within the class-1 bound with the floor.
TEST(Verification, YoloWithBatchNormVerifiesAfterFolding) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  auto path = zoo_model("yolov8n_mini_bn");
  auto original = load_model(path);
  auto model = load_model(path);
  passes::RunResult r = optimize(*model);
  EXPECT_EQ(count_op(model->main(), "BatchNormalization"), 0u);
  passes::Reference ref(*original, passes::VerifyOptions{3, {}});
  passes::Tolerance tol = passes::tolerance_of(r.worst);
  auto v = ref.check(*model, tol);
  EXPECT_TRUE(v.ok) << "max_diff " << v.max_diff << " " << v.error;
  tol.floor = 0;
  EXPECT_FALSE(ref.check(*model, tol).ok) << "the element-wise bound no longer fails: the test lost its point";
}

// The runtime's own fusions (LayerNorm chains, residual Adds, activations) compute a chain in
// float32 and round once. In a float16 model that is not the graph's arithmetic, which rounds at
// every node. Were a value of undeclared type taken for float32, the same float16 model would run
// fused as loaded (exporters declare no intermediate types) and unfused once shape inference had
// typed it, which `optimize` does, and class-0 passes would fail verification (mobilenet_v2 in
// float16: 0.0032 off with nothing changed). Typed or not, the outputs must be the same bits.
TEST(Verification, Float16ModelsRunTheSameTypedOrNot) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  for (const char* name : {"mobilenet_v2", "resnet_small", "bert_small", "llama_small"}) {
    SCOPED_TRACE(name);
    const auto path = fp16_zoo_model(name);
    auto loaded = load_model(path), typed = load_model(path);
    infer_shapes(*typed);
    rt::Session a(*loaded), b(*typed);
    const rt::InputPlan plan = rt::plan_inputs(loaded->main(), a.input_values(), {});
    const std::vector<rt::Tensor> in = rt::make_inputs(plan, 7);
    const std::vector<rt::Tensor> ya = a.run(in), yb = b.run(in);
    ASSERT_EQ(ya.size(), yb.size());
    for (size_t i = 0; i < ya.size(); ++i) {
      ASSERT_EQ(ya[i].bytes(), yb[i].bytes());
      EXPECT_EQ(std::memcmp(ya[i].data, yb[i].data, ya[i].bytes()), 0) << "output " << i;
    }
  }
}

// Bounded classes on a float16 model are judged in float16 ulps of each output's scale (runtime/
// verify.h kLowPrecisionUlps): GPT-2's and ViT's fusions at opset 23 verify, although their
// outputs are not those of the chains they replace (the exact check fails); a weight off by 3%
// still fails.
TEST(Verification, Float16ModelsAreJudgedInFloat16Ulps) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  for (const char* name : {"gpt2_small_cfg", "vit_small"}) {
    SCOPED_TRACE(name);
    const auto path = fp16_zoo_model(name);
    auto original = load_model(path), model = load_model(path);
    passes::upgrade_opset(*model, 23);
    const passes::RunResult r = optimize(*model);
    EXPECT_GT(count_op(model->main(), "Attention"), 0u);
    // Norms and GELUs computed in float16 fuse too (stash_type=1), none left behind.
    EXPECT_GT(count_op(model->main(), "LayerNormalization"), 0u);
    EXPECT_GT(count_op(model->main(), "Gelu"), 0u);
    EXPECT_EQ(count_op(model->main(), "ReduceMean") + count_op(model->main(), "Erf") + count_op(model->main(), "Tanh"),
              0u);
    passes::Reference ref(*original, passes::VerifyOptions{3, {}});
    const passes::VerifyResult v = ref.check(*model, passes::tolerance_of(r.worst));
    EXPECT_TRUE(v.ok) << "max_diff " << v.max_diff << " " << v.error;
    EXPECT_FALSE(ref.check(*model, passes::tolerance_of(passes::AccuracyClass::Lossless)).ok);
    // The same model with its largest weight 3% off.
    const auto off = fp16_zoo_model(
        name,
        "t = max(m.graph.initializer, key=lambda t: np.prod(t.dims))\n"
        "t.CopyFrom(nh.from_array((nh.to_array(t).astype(np.float32) * 1.03).astype(np.float16), t.name))");
    auto wrong = load_model(off);
    EXPECT_FALSE(ref.check(*wrong, passes::tolerance_of(passes::AccuracyClass::FloatBounded)).ok);
  }
}

// The Llama in float16: RMSNorm, rotary (cos/sin computed in the graph, in float16) and attention
// all fuse at opset 23, 645 -> 70 nodes as the float32 export's 644 -> 69 plus the Cast of its
// output to float32, and verify (test_fp16_zoo.cpp: the other float16 zoo models).
TEST(Verification, Float16LlamaFusesEveryBlock) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  const auto path = fp16_zoo_model("llama_small");
  auto original = load_model(path), model = load_model(path);
  passes::upgrade_opset(*model, 23);
  const passes::RunResult r = optimize(*model);
  const Graph& g = model->main();
  EXPECT_EQ(count_op(g, "RMSNormalization"), 5u);
  EXPECT_EQ(count_op(g, "RotaryEmbedding"), 4u);
  EXPECT_EQ(count_op(g, "Attention"), 2u);
  EXPECT_EQ(count_op(g, "ReduceMean") + count_op(g, "Neg") + count_op(g, "Softmax"), 0u);
  passes::Reference ref(*original, passes::VerifyOptions{3, {}});
  const passes::VerifyResult v = ref.check(*model, passes::tolerance_of(r.worst));
  EXPECT_TRUE(v.ok) << "max_diff " << v.max_diff << " " << v.error;
}

// ... and for a target without those ops (--target tensorrt) the float16 Attention and
// RotaryEmbedding decompose back into float16 chains (constants in float16), verified.
TEST(Verification, Float16LlamaDecomposesForATargetWithoutTheOps) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  const auto path = fp16_zoo_model("llama_small");
  auto fused = load_model(path);
  passes::upgrade_opset(*fused, 23);
  optimize(*fused);
  ASSERT_EQ(count_op(fused->main(), "Attention"), 2u);
  const auto dir = temp_dir("fp16_decomp");
  save_model(*fused, dir / "fused.onnx");
  auto original = load_model(dir / "fused.onnx"), model = load_model(dir / "fused.onnx");
  const passes::RunResult r = optimize(*model, {"decompose_rotary_embedding", "decompose_attention"});
  EXPECT_EQ(count_op(model->main(), "Attention") + count_op(model->main(), "RotaryEmbedding"), 0u);
  passes::Reference ref(*original, passes::VerifyOptions{3, {}});
  const passes::VerifyResult v = ref.check(*model, passes::tolerance_of(r.worst));
  EXPECT_TRUE(v.ok) << "max_diff " << v.max_diff << " " << v.error;
}

}  // namespace
}  // namespace onnxforge::test
