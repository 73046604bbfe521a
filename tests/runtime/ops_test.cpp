// Op kernels on hand-built graphs, with the opset variants where attributes became inputs.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/runtime.h"
#include "tests/runtime/graph_builder.h"

using namespace onnxforge;
using onnxforge::test::TinyModel;
using onnxforge::test::make;
using onnxforge::test::values;

namespace {

template <class T = float>
std::vector<T> run1(TinyModel& m, std::vector<rt::Tensor> ins, rt::Shape* shape = nullptr) {
  rt::Session s(m.model);
  auto o = s.run(ins);
  if (shape) *shape = o[0].shape;
  return values<T>(o[0]);
}

}  // namespace

TEST(Ops, BroadcastingBinaryInEveryPosition) {
  TinyModel m;
  ValueId a = m.input("a", DType::Float, {2, 1, 3});
  ValueId b = m.input("b", DType::Float, {4, 1});
  m.outputs({m.op("Sub", {a, b})});
  rt::Shape s;
  auto y = run1(m, {make<float>(DType::Float, {2, 1, 3}, {1, 2, 3, 4, 5, 6}), make<float>(DType::Float, {4, 1}, {0, 1, 2, 3})}, &s);
  EXPECT_EQ(s, (rt::Shape{2, 4, 3}));
  EXPECT_FLOAT_EQ(y[0], 1);
  EXPECT_FLOAT_EQ(y[3 * 3 + 2], 0);       // a[0,0,2]=3 - b[3]=3
  EXPECT_FLOAT_EQ(y[12 + 1 * 3 + 0], 3);  // a[1,0,0]=4 - b[1]=1
}

TEST(Ops, IntegerDivTruncatesAndPowMixedTypes) {
  TinyModel m;
  ValueId a = m.input("a", DType::Int64, {4});
  ValueId b = m.input("b", DType::Int64, {4});
  ValueId x = m.input("x", DType::Float, {2});
  ValueId e = m.input("e", DType::Int64, {2});
  m.outputs({m.op("Div", {a, b}), m.op("Pow", {x, e})});
  rt::Session s(m.model);
  auto o = s.run({make<int64_t>(DType::Int64, {4}, {7, -7, 7, -7}), make<int64_t>(DType::Int64, {4}, {2, 2, -2, -2}),
                  make<float>(DType::Float, {2}, {3, 2}), make<int64_t>(DType::Int64, {2}, {2, 3})});
  EXPECT_EQ(values<int64_t>(o[0]), (std::vector<int64_t>{3, -3, -3, 3}));
  EXPECT_EQ(values<float>(o[1]), (std::vector<float>{9, 8}));
}

TEST(Ops, SliceAttributeFormAndInputFormWithNegativeSteps) {
  {
    TinyModel m(9);
    ValueId x = m.input("x", DType::Float, {2, 4});
    m.outputs({m.op("Slice", {x}, {NewAttr::Ints("starts", {0, 1}), NewAttr::Ints("ends", {1, 1000}), NewAttr::Ints("axes", {0, 1})})});
    EXPECT_EQ(run1(m, {make<float>(DType::Float, {2, 4}, {1, 2, 3, 4, 5, 6, 7, 8})}), (std::vector<float>{2, 3, 4}));
  }
  {
    TinyModel m(13);
    ValueId x = m.input("x", DType::Float, {2, 4});
    ValueId st = m.constant<int64_t>("st", DType::Int64, {1}, {-1});
    ValueId en = m.constant<int64_t>("en", DType::Int64, {1}, {INT64_MIN});
    ValueId ax = m.constant<int64_t>("ax", DType::Int64, {1}, {1});
    ValueId sp = m.constant<int64_t>("sp", DType::Int64, {1}, {-2});
    m.outputs({m.op("Slice", {x, st, en, ax, sp})});
    rt::Shape s;
    EXPECT_EQ(run1(m, {make<float>(DType::Float, {2, 4}, {1, 2, 3, 4, 5, 6, 7, 8})}, &s), (std::vector<float>{4, 2, 8, 6}));
    EXPECT_EQ(s, (rt::Shape{2, 2}));
  }
}

TEST(Ops, SqueezeUnsqueezeAxesAttributeBefore13InputAfter) {
  TinyModel m11(11);
  ValueId x = m11.input("x", DType::Float, {1, 3});
  m11.outputs({m11.op("Unsqueeze", {m11.op("Squeeze", {x}, {NewAttr::Ints("axes", {0})})}, {NewAttr::Ints("axes", {-1})})});
  rt::Shape s;
  run1(m11, {make<float>(DType::Float, {1, 3}, {1, 2, 3})}, &s);
  EXPECT_EQ(s, (rt::Shape{3, 1}));
  TinyModel m13(13);
  ValueId y = m13.input("y", DType::Float, {1, 3});
  ValueId a0 = m13.constant<int64_t>("a0", DType::Int64, {1}, {0});
  ValueId a1 = m13.constant<int64_t>("a1", DType::Int64, {2}, {0, -1});
  m13.outputs({m13.op("Unsqueeze", {m13.op("Squeeze", {y, a0}), a1})});
  run1(m13, {make<float>(DType::Float, {1, 3}, {1, 2, 3})}, &s);
  EXPECT_EQ(s, (rt::Shape{1, 3, 1}));
}

TEST(Ops, ClipAttributesBefore11InputsAfter) {
  TinyModel m6(6);
  ValueId x = m6.input("x", DType::Float, {3});
  m6.outputs({m6.op("Clip", {x}, {NewAttr::Float("min", -1), NewAttr::Float("max", 1)})});
  EXPECT_EQ(run1(m6, {make<float>(DType::Float, {3}, {-5, 0.5f, 5})}), (std::vector<float>{-1, 0.5f, 1}));
  TinyModel m13(13);
  ValueId y = m13.input("y", DType::Int32, {3});
  ValueId lo = m13.constant<int32_t>("lo", DType::Int32, {}, {0});
  m13.outputs({m13.op("Clip", {y, lo})});
  EXPECT_EQ(run1<int32_t>(m13, {make<int32_t>(DType::Int32, {3}, {-5, 2, 500})}), (std::vector<int32_t>{0, 2, 500}));
}

TEST(Ops, SplitSizesAttributeInputAndEqual) {
  TinyModel m11(11);
  ValueId x = m11.input("x", DType::Float, {5});
  auto outs = m11.node("Split", {x}, {NewAttr::Ints("split", {2, 3})}, 2);
  m11.outputs(outs);
  rt::Session s11(m11.model);
  auto o = s11.run({make<float>(DType::Float, {5}, {1, 2, 3, 4, 5})});
  EXPECT_EQ(values<float>(o[1]), (std::vector<float>{3, 4, 5}));
  TinyModel m13(13);
  ValueId y = m13.input("y", DType::Float, {6});
  auto outs13 = m13.node("Split", {y}, {}, 3);
  m13.outputs(outs13);
  rt::Session s13(m13.model);
  auto o13 = s13.run({make<float>(DType::Float, {6}, {1, 2, 3, 4, 5, 6})});
  EXPECT_EQ(values<float>(o13[2]), (std::vector<float>{5, 6}));
}

TEST(Ops, ReduceSumAxesAttributeBefore13InputAfterAndNoop) {
  TinyModel m11(11);
  ValueId x = m11.input("x", DType::Float, {2, 3});
  m11.outputs({m11.op("ReduceSum", {x}, {NewAttr::Ints("axes", {1}), NewAttr::Int("keepdims", 0)})});
  EXPECT_EQ(run1(m11, {make<float>(DType::Float, {2, 3}, {1, 2, 3, 4, 5, 6})}), (std::vector<float>{6, 15}));
  TinyModel m13(13);
  ValueId y = m13.input("y", DType::Float, {2, 3});
  ValueId ax = m13.constant<int64_t>("ax", DType::Int64, {1}, {0});
  m13.outputs({m13.op("ReduceSum", {y, ax})});
  rt::Shape s;
  EXPECT_EQ(run1(m13, {make<float>(DType::Float, {2, 3}, {1, 2, 3, 4, 5, 6})}, &s), (std::vector<float>{5, 7, 9}));
  EXPECT_EQ(s, (rt::Shape{1, 3}));
  TinyModel mn(13);
  ValueId z = mn.input("z", DType::Float, {2});
  mn.outputs({mn.op("ReduceSum", {z}, {NewAttr::Int("noop_with_empty_axes", 1)})});
  EXPECT_EQ(run1(mn, {make<float>(DType::Float, {2}, {1, 2})}), (std::vector<float>{1, 2}));
}

TEST(Ops, SoftmaxCoercesTo2DBefore13) {
  std::vector<float> in{1, 2, 3, 4};
  TinyModel m11(11);
  ValueId x = m11.input("x", DType::Float, {1, 2, 2});
  m11.outputs({m11.op("Softmax", {x})});  // axis 1: over all 4 values
  auto a = run1(m11, {make<float>(DType::Float, {1, 2, 2}, in)});
  double z = std::exp(1) + std::exp(2) + std::exp(3) + std::exp(4);
  EXPECT_NEAR(a[0], std::exp(1) / z, 1e-6);
  TinyModel m13(13);
  ValueId y = m13.input("y", DType::Float, {1, 2, 2});
  m13.outputs({m13.op("Softmax", {y}, {NewAttr::Int("axis", 1)})});  // over the middle axis only
  auto b = run1(m13, {make<float>(DType::Float, {1, 2, 2}, in)});
  EXPECT_NEAR(b[0], std::exp(1) / (std::exp(1) + std::exp(3)), 1e-6);
}

TEST(Ops, PadAttributeBefore11InputsAfterModes) {
  TinyModel m2(2);
  ValueId x = m2.input("x", DType::Float, {3});
  m2.outputs({m2.op("Pad", {x}, {NewAttr::Ints("pads", {1, 2}), NewAttr::Float("value", 9)})});
  EXPECT_EQ(run1(m2, {make<float>(DType::Float, {3}, {1, 2, 3})}), (std::vector<float>{9, 1, 2, 3, 9, 9}));
  TinyModel m13(13);
  ValueId y = m13.input("y", DType::Float, {3});
  ValueId p = m13.constant<int64_t>("p", DType::Int64, {2}, {2, 2});
  m13.outputs({m13.op("Pad", {y, p}, {NewAttr::String("mode", "reflect")})});
  EXPECT_EQ(run1(m13, {make<float>(DType::Float, {3}, {1, 2, 3})}), (std::vector<float>{3, 2, 1, 2, 3, 2, 1}));
}

TEST(Ops, DropoutRatioInputAndMaskAtInference) {
  TinyModel m(13);
  ValueId x = m.input("x", DType::Float, {3});
  ValueId r = m.constant<float>("r", DType::Float, {}, {0.5f});
  auto outs = m.node("Dropout", {x, r}, {}, 2);
  m.outputs(outs);
  rt::Session s(m.model);
  auto o = s.run({make<float>(DType::Float, {3}, {1, 2, 3})});
  EXPECT_EQ(values<float>(o[0]), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(values<uint8_t>(o[1]), (std::vector<uint8_t>{1, 1, 1}));
}

TEST(Ops, ResizeScalesAndSizes) {
  TinyModel m(13);
  ValueId x = m.input("x", DType::Float, {1, 1, 2, 2});
  ValueId roi = m.constant<float>("roi", DType::Float, {0}, {});
  ValueId sc = m.constant<float>("sc", DType::Float, {4}, {1, 1, 2, 2});
  m.outputs({m.op("Resize", {x, roi, sc}, {NewAttr::String("mode", "nearest")})});
  rt::Shape s;
  auto y = run1(m, {make<float>(DType::Float, {1, 1, 2, 2}, {1, 2, 3, 4})}, &s);
  EXPECT_EQ(s, (rt::Shape{1, 1, 4, 4}));
  EXPECT_EQ(y, (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
}

TEST(Ops, NewFusedOpsAtAnyOpset) {
  TinyModel m(14);  // Gelu is opset 20, LayerNormalization 17, RMSNormalization/RotaryEmbedding 23
  ValueId x = m.input("x", DType::Float, {1, 2, 4});
  ValueId sc = m.constant<float>("sc", DType::Float, {4}, {1, 1, 1, 1});
  ValueId g = m.op("Gelu", {x});
  ValueId ln = m.op("LayerNormalization", {x, sc}, {NewAttr::Float("epsilon", 0)});
  ValueId rms = m.op("RMSNormalization", {x, sc}, {NewAttr::Float("epsilon", 0)});
  m.outputs({g, ln, rms});
  rt::Session s(m.model);
  auto o = s.run({make<float>(DType::Float, {1, 2, 4}, {1, 2, 3, 4, -1, 0, 1, 2})});
  EXPECT_NEAR(values<float>(o[0])[0], 0.5 * (1 + std::erf(1 / std::sqrt(2.0))), 1e-6);
  EXPECT_NEAR(values<float>(o[1])[0], (1 - 2.5) / std::sqrt(1.25), 1e-5);
  EXPECT_NEAR(values<float>(o[2])[3], 4 / std::sqrt(30.0 / 4), 1e-5);
}

TEST(Ops, RotaryEmbeddingMatchesTheDefinition) {
  TinyModel m(14);
  ValueId x = m.input("x", DType::Float, {1, 1, 2, 4});  // [B, H, S, D]
  ValueId cs = m.constant<float>("cos", DType::Float, {2, 2}, {1, 1, 0.5f, 0.25f});
  ValueId sn = m.constant<float>("sin", DType::Float, {2, 2}, {0, 0, 0.5f, 0.75f});
  ValueId pos = m.constant<int64_t>("pos", DType::Int64, {1, 2}, {0, 1});
  m.outputs({m.op("RotaryEmbedding", {x, cs, sn, pos})});
  auto y = run1(m, {make<float>(DType::Float, {1, 1, 2, 4}, {1, 2, 3, 4, 1, 2, 3, 4})});
  // position 0: identity; position 1: x1=(1,2), x2=(3,4): real = c*x1 - s*x2, imag = s*x1 + c*x2
  EXPECT_EQ((std::vector<float>(y.begin(), y.begin() + 4)), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_FLOAT_EQ(y[4], 0.5f * 1 - 0.5f * 3);
  EXPECT_FLOAT_EQ(y[5], 0.25f * 2 - 0.75f * 4);
  EXPECT_FLOAT_EQ(y[6], 0.5f * 1 + 0.5f * 3);
  EXPECT_FLOAT_EQ(y[7], 0.75f * 2 + 0.25f * 4);
}

TEST(Ops, GatherNegativeIndicesAndEinsum) {
  TinyModel m;
  ValueId d = m.input("d", DType::Float, {3, 2});
  ValueId i = m.input("i", DType::Int64, {2});
  ValueId a = m.input("a", DType::Float, {2, 3});
  ValueId b = m.input("b", DType::Float, {3, 2});
  m.outputs({m.op("Gather", {d, i}), m.op("Einsum", {a, b}, {NewAttr::String("equation", "ij,jk->ik")})});
  rt::Session s(m.model);
  auto o = s.run({make<float>(DType::Float, {3, 2}, {1, 2, 3, 4, 5, 6}), make<int64_t>(DType::Int64, {2}, {-1, 0}),
                  make<float>(DType::Float, {2, 3}, {1, 2, 3, 4, 5, 6}), make<float>(DType::Float, {3, 2}, {1, 0, 0, 1, 1, 1})});
  EXPECT_EQ(values<float>(o[0]), (std::vector<float>{5, 6, 1, 2}));
  EXPECT_EQ(values<float>(o[1]), (std::vector<float>{4, 5, 10, 11}));
}

TEST(Ops, QuantizeDequantizeRoundTrip) {
  TinyModel m(13);
  ValueId x = m.input("x", DType::Float, {4});
  ValueId sc = m.constant<float>("s", DType::Float, {}, {0.5f});
  ValueId zp = m.constant<int8_t>("z", DType::Int8, {}, {1});
  ValueId q = m.op("QuantizeLinear", {x, sc, zp});
  m.outputs({q, m.op("DequantizeLinear", {q, sc, zp})});
  rt::Session s(m.model);
  auto o = s.run({make<float>(DType::Float, {4}, {0.f, 1.25f, -100.f, 0.75f})});
  EXPECT_EQ(values<int8_t>(o[0]), (std::vector<int8_t>{1, 3, -128, 3}));  // 2.5 -> 2 (half to even) + 1
  EXPECT_EQ(values<float>(o[1]), (std::vector<float>{0.f, 1.f, -64.5f, 1.f}));
}
