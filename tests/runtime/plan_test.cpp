// The plan and executor: arena runs equal heap runs, in-place and views, fusion, folding,
// evaluate_node, error messages, float16 storage.
#include <gtest/gtest.h>

#include <cmath>

#include "io/model_io.h"
#include "runtime/inputs.h"
#include "runtime/runtime.h"
#include "runtime/tensor_io.h"
#include "tests/common/graph_builder.h"
#include "tests/common/models.h"
#include "tests/runtime/tensors.h"

using namespace onnxforge;
using onnxforge::test::GraphBuilder;
using onnxforge::test::make;
using onnxforge::test::values;

using onnxforge::test::same_bits;

TEST(Plan, ArenaRunsMatchHeapRunsInPlaceAndViews) {
  GraphBuilder m;
  ValueId x = m.input("x", {2, 3});
  ValueId a = m.node("Relu", {x});
  ValueId b = m.node("Exp", {a});  // in place on a's slot
  ValueId shape = m.i64("shape", {6});
  ValueId r = m.node("Reshape", {b, shape});  // a view of b
  ValueId c = m.node("Neg", {r});
  ValueId d = m.node("Add", {c, r});  // reads the view after Neg: b's slot must live
  ValueId e = m.node("Sigmoid", {d});
  m.outputs({e, r});
  rt::Session arena(m.model()), heap(m.model(), {true, false});
  for (int seed = 0; seed < 3; ++seed) {
    std::vector<float> v{-1.f, 0.5f, 2.f, -3.f, 0.25f + static_cast<float>(seed), 1.f};
    auto in = make<float>(DType::Float, {2, 3}, v);
    auto o1 = arena.run({in});
    auto o2 = heap.run({in});
    ASSERT_EQ(o1.size(), 2u);
    EXPECT_TRUE(same_bits(o1[0], o2[0]));
    EXPECT_TRUE(same_bits(o1[1], o2[1]));
    EXPECT_EQ(o1[1].shape, (rt::Shape{6}));
    EXPECT_FLOAT_EQ(values<float>(o1[1])[2], std::exp(2.f));
    EXPECT_FLOAT_EQ(values<float>(o1[0])[0], 0.5f);  // -e + e = 0 -> sigmoid 0.5
  }
}

TEST(Plan, OutputsSurviveTheNextRun) {
  GraphBuilder m;
  ValueId x = m.input("x", {4});
  ValueId y = m.node("Mul", {m.node("Abs", {x}), x});
  m.outputs({y});
  rt::Session s(m.model());
  auto first = s.run({make<float>(DType::Float, {4}, {1, -2, 3, -4})});
  for (int i = 0; i < 3; ++i) s.run({make<float>(DType::Float, {4}, {9, 9, 9, 9})});
  EXPECT_EQ(values<float>(first[0]), (std::vector<float>{1, -4, 9, -16}));
}

TEST(Plan, ZooModelsArenaEqualsHeap) {
  for (const char* name : {"bert_small", "resnet_small_bn", "llama_small"}) {
    auto model = load_model(test::zoo_model(name));
    rt::Session a(*model), h(*model, {true, false});
    rt::InputPlan plan = rt::plan_inputs(model->main(), a.input_values(), {{"sequence", 16}});
    for (uint64_t seed = 0; seed < 3; ++seed) {
      auto in = rt::make_inputs(plan, seed);
      auto oa = a.run(in), oh = h.run(in);
      for (size_t i = 0; i < oa.size(); ++i)
        EXPECT_TRUE(same_bits(oa[i], oh[i])) << name << " output " << i << " seed " << seed;
    }
  }
}

TEST(Plan, ConvReluIsFusedAndMatchesUnfused) {
  GraphBuilder m(13);
  ValueId x = m.input("x", {1, 2, 5, 5});
  std::vector<float> w(3 * 2 * 3 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(static_cast<float>(i)) * 0.5f;
  ValueId wv = m.f32("w", {3, 2, 3, 3}, w);
  ValueId bv = m.f32("b", {3}, {0.1f, -0.2f, 0.3f});
  ValueId conv = m.node("Conv", {x, wv, bv}, {NewAttr::Ints("pads", {1, 1, 1, 1})});
  ValueId lo = m.f32("lo", {}, {0.f});
  ValueId hi = m.f32("hi", {}, {0.6f});
  ValueId y = m.node("Clip", {conv, lo, hi});
  m.outputs({y});
  rt::Session fused(m.model()), plain(m.model(), {false, true});
  EXPECT_EQ(fused.fused_count(), 1u);
  EXPECT_EQ(fused.step_count(), 1u);
  EXPECT_EQ(plain.fused_count(), 0u);
  std::vector<float> xv(50);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = std::cos(static_cast<float>(i));
  auto in = make<float>(DType::Float, {1, 2, 5, 5}, xv);
  auto a = fused.run({in}), b = plain.run({in});
  auto va = values<float>(a[0]), vb = values<float>(b[0]);
  ASSERT_EQ(va.size(), 75u);
  for (size_t i = 0; i < va.size(); ++i) {
    EXPECT_NEAR(va[i], vb[i], 1e-6);
    EXPECT_GE(va[i], 0.f);
    EXPECT_LE(va[i], 0.6f);
  }
}

TEST(Plan, ConstantSubgraphsAreFoldedAtPlanTime) {
  GraphBuilder m;
  ValueId x = m.input("x", {2, 3});
  ValueId w = m.f32("w", {3, 2}, {1, 2, 3, 4, 5, 6});
  ValueId wt = m.node("Transpose", {w});  // folded: [2,3]
  ValueId y = m.node("Add", {x, wt});
  m.outputs({y});
  rt::Session s(m.model());
  EXPECT_EQ(s.step_count(), 1u);
  auto o = s.run({make<float>(DType::Float, {2, 3}, {0, 0, 0, 1, 1, 1})});
  EXPECT_EQ(values<float>(o[0]), (std::vector<float>{1, 3, 5, 3, 5, 7}));
}

TEST(Plan, MatMulWithPackedWeightsMatchesUnpacked) {
  GraphBuilder m;
  ValueId x = m.input("x", {2, 3, 4});
  std::vector<float> w(20);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 7) - 3.f;
  ValueId wv = m.f32("w", {4, 5}, w);
  ValueId y = m.node("MatMul", {x, wv});
  ValueId z = m.node("Relu", {y});
  m.outputs({z});
  rt::Session s(m.model());
  std::vector<float> xv(24);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i) * 0.1f - 1.f;
  auto o = s.run({make<float>(DType::Float, {2, 3, 4}, xv)});
  ASSERT_EQ(o[0].shape, (rt::Shape{2, 3, 5}));
  for (int r = 0; r < 6; ++r)
    for (int n = 0; n < 5; ++n) {
      double acc = 0;
      for (int k = 0; k < 4; ++k) acc += xv[static_cast<size_t>(r * 4 + k)] * w[static_cast<size_t>(k * 5 + n)];
      EXPECT_NEAR(o[0].ptr<float>()[r * 5 + n], std::max(acc, 0.0), 1e-5);
    }
}

TEST(Plan, UnsupportedOpErrorNamesOpDomainVersionAndNode) {
  GraphBuilder m(15);
  ValueId x = m.input("x", {2});
  m.outputs({m.node_n("FancyOp", {x}, {}, 1, "FancyOp0", "com.example")[0]});
  m.model().opsets.push_back({intern("com.example"), 3, true});
  try {
    rt::Session s(m.model());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string w = e.what();
    EXPECT_NE(w.find("FancyOp"), std::string::npos) << w;
    EXPECT_NE(w.find("com.example"), std::string::npos) << w;
    EXPECT_NE(w.find("opset 3"), std::string::npos) << w;
    EXPECT_NE(w.find("FancyOp0"), std::string::npos) << w;  // the node name
  }
}

TEST(Plan, KernelErrorsNameTheNode) {
  GraphBuilder m;
  ValueId a = m.input("a", {2, 3});
  ValueId b = m.input("b", {4});
  m.outputs({m.node("Add", {a, b})});
  rt::Session s(m.model());
  try {
    s.run({make<float>(DType::Float, {2, 3}, std::vector<float>(6)),
           make<float>(DType::Float, {4}, std::vector<float>(4))});
    FAIL();
  } catch (const Error& e) { EXPECT_NE(std::string(e.what()).find("(Add)"), std::string::npos) << e.what(); }
}

TEST(Plan, Float16IsStoredAndComputedInFloat) {
  GraphBuilder m;
  ValueId x = m.input("x", {3}, DType::Float16);
  ValueId y = m.node("Mul", {x, x});
  ValueId z = m.node("Cast", {y}, {NewAttr::Int("to", 1)});
  m.outputs({y, z});
  rt::Session s(m.model());
  rt::Tensor in = rt::cast(make<float>(DType::Float, {3}, {1.5f, -2.f, 0.25f}), DType::Float16);
  auto o = s.run({in});
  EXPECT_EQ(o[0].dtype, DType::Float16);
  EXPECT_EQ(values<float>(o[1]), (std::vector<float>{2.25f, 4.f, 0.0625f}));
}

TEST(EvaluateNode, FoldsOneNodeOnConstants) {
  GraphBuilder m(13);
  ValueId x = m.input("x", {2, 3});
  ValueId axes = m.input("axes", {1}, DType::Int64);
  ValueId u = m.node("Unsqueeze", {x, axes});
  ValueId t = m.node("Transpose", {x}, {NewAttr::Ints("perm", {1, 0})});
  ValueId sh = m.node("Shape", {u});
  m.outputs({u, t, sh});
  auto in = make<float>(DType::Float, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto ax = make<int64_t>(DType::Int64, {1}, {-1});
  rt::TensorView views[] = {in, ax};
  auto out = rt::evaluate_node(m.g(), m.g().producer(u), views);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape, (rt::Shape{2, 3, 1}));
  EXPECT_TRUE(out[0].hold != nullptr);  // owning, not a view of the input
  auto tout = rt::evaluate_node(m.g(), m.g().producer(t), std::span<const rt::TensorView>(views, 1));
  EXPECT_EQ(values<float>(tout[0]), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  auto sout = rt::evaluate_node(m.g(), m.g().producer(sh), std::span<const rt::TensorView>(out.data(), 1));
  EXPECT_EQ(values<int64_t>(sout[0]), (std::vector<int64_t>{2, 3, 1}));
}

TEST(Inputs, DeterministicTokenIdsMasksAndDefaults) {
  auto model = load_model(test::zoo_model("bert_small"));
  rt::Session s(*model);
  rt::InputPlan plan = rt::plan_inputs(model->main(), s.input_values(), {{"sequence", 8}});
  auto a = rt::make_inputs(plan, 7), b = rt::make_inputs(plan, 7), c = rt::make_inputs(plan, 8);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(same_bits(a[i], b[i]));
    const auto& spec = plan.inputs[i];
    if (spec.kind == rt::InputSpec::Kind::TokenIds) {
      EXPECT_GT(spec.id_range, 2);
      EXPECT_FALSE(same_bits(a[i], c[i]));
      for (int64_t k = 0; k < a[i].numel(); ++k) {
        EXPECT_GE(a[i].get_i64(k), 0);
        EXPECT_LT(a[i].get_i64(k), spec.id_range);
      }
    }
    if (spec.name.find("mask") != std::string::npos) {
      for (int64_t k = 0; k < a[i].numel(); ++k) { EXPECT_EQ(a[i].get_i64(k), 1); }
    }
    EXPECT_EQ(a[i].shape.back(), 8);
  }
}

TEST(Inputs, FilesSizeTheGeneratedInputsAndMismatchesAreErrors) {
  auto model = load_model(test::zoo_model("bert_small"));
  rt::Session s(*model);
  const Graph& g = model->main();
  auto dir = test::temp_dir("inputs_files");
  auto ids = rt::Tensor::alloc(DType::Int64, {2, 5});
  for (int64_t k = 0; k < ids.numel(); ++k) ids.ptr<int64_t>()[k] = k;
  rt::write_npy(dir / "ids.npy", ids);
  rt::write_npy(dir / "flat.npy", rt::Tensor::alloc(DType::Int64, {10}));
  rt::write_npy(dir / "floats.npy", rt::Tensor::alloc(DType::Float, {2, 5}));
  const std::string file = "input_ids=" + (dir / "ids.npy").string();
  rt::InputPlan plan;
  auto in = rt::prepare_inputs(g, s.input_values(), {}, {file}, 3, plan);
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(in[i].shape, (rt::Shape{2, 5})) << plan.inputs[i].name;
  EXPECT_EQ(in[0].get_i64(7), 7);  // the file's values
  EXPECT_EQ(s.run(in)[0].shape[0], 2);
  auto error = [&](std::map<std::string, int64_t> dims, const std::string& spec) {
    try {
      rt::prepare_inputs(g, s.input_values(), dims, {spec}, 3, plan);
    } catch (const Error& e) { return std::string(e.what()); }
    return std::string("no error");
  };
  EXPECT_NE(error({}, "input_ids=" + (dir / "flat.npy").string())
                .find("holds shape [10] but the model declares [batch,sequence]"),
            std::string::npos);
  EXPECT_NE(error({}, "input_ids=" + (dir / "floats.npy").string()).find("holds float32 but the model expects int64"),
            std::string::npos);
  EXPECT_NE(error({{"sequence", 8}}, file).find("gives dim 'sequence' = 5 but --dim sequence gives 8"),
            std::string::npos);
  EXPECT_NE(error({{"seq", 8}}, file).find("--dim seq=8: the model's inputs have no symbolic dim 'seq'"),
            std::string::npos);
  EXPECT_NE(error({}, "nosuch=" + (dir / "ids.npy").string()).find("the model has no input 'nosuch'"),
            std::string::npos);
}

// The note on how an integer input is generated ("values in [0, 2)") is said for a generated
// input, never for one the user gave (`bench --input k=file.npy` printed it).
TEST(Inputs, NotesOnGeneratedValuesAreLeftOutForGivenInputs) {
  GraphBuilder b;
  ValueId k = b.input("k", {3}, DType::Int64);
  b.output(b.node("Cast", {k}, {NewAttr::Int("to", static_cast<int64_t>(DType::Float))}));
  rt::Session s(*b.m);
  auto about_k = [](const rt::InputPlan& p) {
    return std::count_if(p.notes.begin(), p.notes.end(),
                         [](const std::string& n) { return n.starts_with("input 'k':"); });
  };
  rt::InputPlan generated, given;
  rt::prepare_inputs(b.g(), s.input_values(), {}, std::vector<std::string>{}, 1, generated);
  EXPECT_EQ(about_k(generated), 1);
  std::vector<int64_t> ids = {5, 6, 7};
  std::vector<rt::GivenInput> in{{"k", "test", rt::Tensor::view(DType::Int64, {3}, ids.data()).clone()}};
  auto got = rt::prepare_inputs(b.g(), s.input_values(), {}, std::move(in), 1, given);
  EXPECT_EQ(about_k(given), 0);
  EXPECT_EQ(got[0].get_i64(2), 7);
}

TEST(Plan, StepProfileListsEveryStepSlowestFirstAndAddsUpToTheOpProfile) {
  auto model = load_model(test::zoo_model("resnet_small_bn"));
  rt::SessionOptions o;
  o.profile = true;
  rt::Session s(*model, o);
  rt::InputPlan plan = rt::plan_inputs(model->main(), s.input_values(), {});
  auto in = rt::make_inputs(plan, 0);
  for (int i = 0; i < 2; ++i) s.run(in);
  auto steps = s.step_profile();
  ASSERT_EQ(steps.size(), s.step_count());
  double by_step = 0, by_op = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_NE(steps[i].node.find("node '"), std::string::npos);
    EXPECT_FALSE(steps[i].op.empty());
    if (i > 0) { EXPECT_GE(steps[i - 1].ms, steps[i].ms); }
    by_step += steps[i].ms;
  }
  for (const auto& p : s.profile()) by_op += p.ms;
  EXPECT_GT(by_step, 0);
  EXPECT_NEAR(by_step, by_op, 1e-6 * by_op);
  EXPECT_NE(steps.front().op.find("Conv"), std::string::npos);  // convolutions dominate a ResNet
}
