// Op kernels on hand-built graphs, with the opset variants where attributes became inputs.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/runtime.h"
#include "tests/common/graph_builder.h"
#include "tests/runtime/tensors.h"

using namespace onnxforge;
using onnxforge::test::GraphBuilder;
using onnxforge::test::make;
using onnxforge::test::values;

namespace {

template <class T = float>
std::vector<T> run1(GraphBuilder& m, std::vector<rt::Tensor> ins, rt::Shape* shape = nullptr) {
  rt::Session s(m.model());
  auto o = s.run(ins);
  if (shape) *shape = o[0].shape;
  return values<T>(o[0]);
}

}  // namespace

TEST(Ops, BroadcastingBinaryInEveryPosition) {
  GraphBuilder m;
  ValueId a = m.input("a", {2, 1, 3});
  ValueId b = m.input("b", {4, 1});
  m.outputs({m.node("Sub", {a, b})});
  rt::Shape s;
  auto y = run1(
      m, {make<float>(DType::Float, {2, 1, 3}, {1, 2, 3, 4, 5, 6}), make<float>(DType::Float, {4, 1}, {0, 1, 2, 3})},
      &s);
  EXPECT_EQ(s, (rt::Shape{2, 4, 3}));
  EXPECT_FLOAT_EQ(y[0], 1);
  EXPECT_FLOAT_EQ(y[3 * 3 + 2], 0);       // a[0,0,2]=3 - b[3]=3
  EXPECT_FLOAT_EQ(y[12 + 1 * 3 + 0], 3);  // a[1,0,0]=4 - b[1]=1
}

TEST(Ops, IntegerDivTruncatesAndPowMixedTypes) {
  GraphBuilder m;
  ValueId a = m.input("a", {4}, DType::Int64);
  ValueId b = m.input("b", {4}, DType::Int64);
  ValueId x = m.input("x", {2});
  ValueId e = m.input("e", {2}, DType::Int64);
  m.outputs({m.node("Div", {a, b}), m.node("Pow", {x, e})});
  rt::Session s(m.model());
  auto o = s.run({make<int64_t>(DType::Int64, {4}, {7, -7, 7, -7}), make<int64_t>(DType::Int64, {4}, {2, 2, -2, -2}),
                  make<float>(DType::Float, {2}, {3, 2}), make<int64_t>(DType::Int64, {2}, {2, 3})});
  EXPECT_EQ(values<int64_t>(o[0]), (std::vector<int64_t>{3, -3, -3, 3}));
  EXPECT_EQ(values<float>(o[1]), (std::vector<float>{9, 8}));
}

TEST(Ops, SliceAttributeFormAndInputFormWithNegativeSteps) {
  {
    GraphBuilder m(9);
    ValueId x = m.input("x", {2, 4});
    m.outputs(
        {m.node("Slice", {x},
                {NewAttr::Ints("starts", {0, 1}), NewAttr::Ints("ends", {1, 1000}), NewAttr::Ints("axes", {0, 1})})});
    EXPECT_EQ(run1(m, {make<float>(DType::Float, {2, 4}, {1, 2, 3, 4, 5, 6, 7, 8})}), (std::vector<float>{2, 3, 4}));
  }
  {
    GraphBuilder m(13);
    ValueId x = m.input("x", {2, 4});
    ValueId st = m.i64("st", {-1});
    ValueId en = m.i64("en", {INT64_MIN});
    ValueId ax = m.i64("ax", {1});
    ValueId sp = m.i64("sp", {-2});
    m.outputs({m.node("Slice", {x, st, en, ax, sp})});
    rt::Shape s;
    EXPECT_EQ(run1(m, {make<float>(DType::Float, {2, 4}, {1, 2, 3, 4, 5, 6, 7, 8})}, &s),
              (std::vector<float>{4, 2, 8, 6}));
    EXPECT_EQ(s, (rt::Shape{2, 2}));
  }
}

TEST(Ops, SqueezeUnsqueezeAxesAttributeBefore13InputAfter) {
  GraphBuilder m11(11);
  ValueId x = m11.input("x", {1, 3});
  m11.outputs(
      {m11.node("Unsqueeze", {m11.node("Squeeze", {x}, {NewAttr::Ints("axes", {0})})}, {NewAttr::Ints("axes", {-1})})});
  rt::Shape s;
  run1(m11, {make<float>(DType::Float, {1, 3}, {1, 2, 3})}, &s);
  EXPECT_EQ(s, (rt::Shape{3, 1}));
  GraphBuilder m13(13);
  ValueId y = m13.input("y", {1, 3});
  ValueId a0 = m13.i64("a0", {0});
  ValueId a1 = m13.i64("a1", {0, -1});
  m13.outputs({m13.node("Unsqueeze", {m13.node("Squeeze", {y, a0}), a1})});
  run1(m13, {make<float>(DType::Float, {1, 3}, {1, 2, 3})}, &s);
  EXPECT_EQ(s, (rt::Shape{1, 3, 1}));
}

TEST(Ops, ClipAttributesBefore11InputsAfter) {
  GraphBuilder m6(6);
  ValueId x = m6.input("x", {3});
  m6.outputs({m6.node("Clip", {x}, {NewAttr::Float("min", -1), NewAttr::Float("max", 1)})});
  EXPECT_EQ(run1(m6, {make<float>(DType::Float, {3}, {-5, 0.5f, 5})}), (std::vector<float>{-1, 0.5f, 1}));
  GraphBuilder m13(13);
  ValueId y = m13.input("y", {3}, DType::Int32);
  ValueId lo = m13.init<int32_t>("lo", {}, {0}, DType::Int32);
  m13.outputs({m13.node("Clip", {y, lo})});
  EXPECT_EQ(run1<int32_t>(m13, {make<int32_t>(DType::Int32, {3}, {-5, 2, 500})}), (std::vector<int32_t>{0, 2, 500}));
}

TEST(Ops, SplitSizesAttributeInputAndEqual) {
  GraphBuilder m11(11);
  ValueId x = m11.input("x", {5});
  auto outs = m11.node_n("Split", {x}, {NewAttr::Ints("split", {2, 3})}, 2);
  m11.outputs(outs);
  rt::Session s11(m11.model());
  auto o = s11.run({make<float>(DType::Float, {5}, {1, 2, 3, 4, 5})});
  EXPECT_EQ(values<float>(o[1]), (std::vector<float>{3, 4, 5}));
  GraphBuilder m13(13);
  ValueId y = m13.input("y", {6});
  auto outs13 = m13.node_n("Split", {y}, {}, 3);
  m13.outputs(outs13);
  rt::Session s13(m13.model());
  auto o13 = s13.run({make<float>(DType::Float, {6}, {1, 2, 3, 4, 5, 6})});
  EXPECT_EQ(values<float>(o13[2]), (std::vector<float>{5, 6}));
}

TEST(Ops, ReduceSumAxesAttributeBefore13InputAfterAndNoop) {
  GraphBuilder m11(11);
  ValueId x = m11.input("x", {2, 3});
  m11.outputs({m11.node("ReduceSum", {x}, {NewAttr::Ints("axes", {1}), NewAttr::Int("keepdims", 0)})});
  EXPECT_EQ(run1(m11, {make<float>(DType::Float, {2, 3}, {1, 2, 3, 4, 5, 6})}), (std::vector<float>{6, 15}));
  GraphBuilder m13(13);
  ValueId y = m13.input("y", {2, 3});
  ValueId ax = m13.i64("ax", {0});
  m13.outputs({m13.node("ReduceSum", {y, ax})});
  rt::Shape s;
  EXPECT_EQ(run1(m13, {make<float>(DType::Float, {2, 3}, {1, 2, 3, 4, 5, 6})}, &s), (std::vector<float>{5, 7, 9}));
  EXPECT_EQ(s, (rt::Shape{1, 3}));
  GraphBuilder mn(13);
  ValueId z = mn.input("z", {2});
  mn.outputs({mn.node("ReduceSum", {z}, {NewAttr::Int("noop_with_empty_axes", 1)})});
  EXPECT_EQ(run1(mn, {make<float>(DType::Float, {2}, {1, 2})}), (std::vector<float>{1, 2}));
}

TEST(Ops, SoftmaxCoercesTo2DBefore13) {
  std::vector<float> in{1, 2, 3, 4};
  GraphBuilder m11(11);
  ValueId x = m11.input("x", {1, 2, 2});
  m11.outputs({m11.node("Softmax", {x})});  // axis 1: over all 4 values
  auto a = run1(m11, {make<float>(DType::Float, {1, 2, 2}, in)});
  double z = std::exp(1) + std::exp(2) + std::exp(3) + std::exp(4);
  EXPECT_NEAR(a[0], std::exp(1) / z, 1e-6);
  GraphBuilder m13(13);
  ValueId y = m13.input("y", {1, 2, 2});
  m13.outputs({m13.node("Softmax", {y}, {NewAttr::Int("axis", 1)})});  // over the middle axis only
  auto b = run1(m13, {make<float>(DType::Float, {1, 2, 2}, in)});
  EXPECT_NEAR(b[0], std::exp(1) / (std::exp(1) + std::exp(3)), 1e-6);
}

TEST(Ops, PadAttributeBefore11InputsAfterModes) {
  GraphBuilder m2(2);
  ValueId x = m2.input("x", {3});
  m2.outputs({m2.node("Pad", {x}, {NewAttr::Ints("pads", {1, 2}), NewAttr::Float("value", 9)})});
  EXPECT_EQ(run1(m2, {make<float>(DType::Float, {3}, {1, 2, 3})}), (std::vector<float>{9, 1, 2, 3, 9, 9}));
  GraphBuilder m13(13);
  ValueId y = m13.input("y", {3});
  ValueId p = m13.i64("p", {2, 2});
  m13.outputs({m13.node("Pad", {y, p}, {NewAttr::String("mode", "reflect")})});
  EXPECT_EQ(run1(m13, {make<float>(DType::Float, {3}, {1, 2, 3})}), (std::vector<float>{3, 2, 1, 2, 3, 2, 1}));
}

TEST(Ops, DropoutRatioInputAndMaskAtInference) {
  GraphBuilder m(13);
  ValueId x = m.input("x", {3});
  ValueId r = m.f32("r", {}, {0.5f});
  auto outs = m.node_n("Dropout", {x, r}, {}, 2);
  m.outputs(outs);
  rt::Session s(m.model());
  auto o = s.run({make<float>(DType::Float, {3}, {1, 2, 3})});
  EXPECT_EQ(values<float>(o[0]), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(values<uint8_t>(o[1]), (std::vector<uint8_t>{1, 1, 1}));
}

TEST(Ops, ResizeScalesAndSizes) {
  GraphBuilder m(13);
  ValueId x = m.input("x", {1, 1, 2, 2});
  ValueId roi = m.f32("roi", {0}, {});
  ValueId sc = m.f32("sc", {4}, {1, 1, 2, 2});
  m.outputs({m.node("Resize", {x, roi, sc}, {NewAttr::String("mode", "nearest")})});
  rt::Shape s;
  auto y = run1(m, {make<float>(DType::Float, {1, 1, 2, 2}, {1, 2, 3, 4})}, &s);
  EXPECT_EQ(s, (rt::Shape{1, 1, 4, 4}));
  EXPECT_EQ(y, (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
}

TEST(Ops, NewFusedOpsAtAnyOpset) {
  GraphBuilder m(14);  // Gelu is opset 20, LayerNormalization 17, RMSNormalization/RotaryEmbedding 23
  ValueId x = m.input("x", {1, 2, 4});
  ValueId sc = m.f32("sc", {4}, {1, 1, 1, 1});
  ValueId g = m.node("Gelu", {x});
  ValueId ln = m.node("LayerNormalization", {x, sc}, {NewAttr::Float("epsilon", 0)});
  ValueId rms = m.node("RMSNormalization", {x, sc}, {NewAttr::Float("epsilon", 0)});
  m.outputs({g, ln, rms});
  rt::Session s(m.model());
  auto o = s.run({make<float>(DType::Float, {1, 2, 4}, {1, 2, 3, 4, -1, 0, 1, 2})});
  EXPECT_NEAR(values<float>(o[0])[0], 0.5 * (1 + std::erf(1 / std::sqrt(2.0))), 1e-6);
  EXPECT_NEAR(values<float>(o[1])[0], (1 - 2.5) / std::sqrt(1.25), 1e-5);
  EXPECT_NEAR(values<float>(o[2])[3], 4 / std::sqrt(30.0 / 4), 1e-5);
}

TEST(Ops, RotaryEmbeddingMatchesTheDefinition) {
  GraphBuilder m(14);
  ValueId x = m.input("x", {1, 1, 2, 4});  // [B, H, S, D]
  ValueId cs = m.f32("cos", {2, 2}, {1, 1, 0.5f, 0.25f});
  ValueId sn = m.f32("sin", {2, 2}, {0, 0, 0.5f, 0.75f});
  ValueId pos = m.init<int64_t>("pos", {1, 2}, {0, 1}, DType::Int64);
  m.outputs({m.node("RotaryEmbedding", {x, cs, sn, pos})});
  auto y = run1(m, {make<float>(DType::Float, {1, 1, 2, 4}, {1, 2, 3, 4, 1, 2, 3, 4})});
  // position 0: identity; position 1: x1=(1,2), x2=(3,4): real = c*x1 - s*x2, imag = s*x1 + c*x2
  EXPECT_EQ((std::vector<float>(y.begin(), y.begin() + 4)), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_FLOAT_EQ(y[4], 0.5f * 1 - 0.5f * 3);
  EXPECT_FLOAT_EQ(y[5], 0.25f * 2 - 0.75f * 4);
  EXPECT_FLOAT_EQ(y[6], 0.5f * 1 + 0.5f * 3);
  EXPECT_FLOAT_EQ(y[7], 0.75f * 2 + 0.25f * 4);
}

TEST(Ops, GatherNegativeIndicesAndEinsum) {
  GraphBuilder m;
  ValueId d = m.input("d", {3, 2});
  ValueId i = m.input("i", {2}, DType::Int64);
  ValueId a = m.input("a", {2, 3});
  ValueId b = m.input("b", {3, 2});
  m.outputs({m.node("Gather", {d, i}), m.node("Einsum", {a, b}, {NewAttr::String("equation", "ij,jk->ik")})});
  rt::Session s(m.model());
  auto o = s.run({make<float>(DType::Float, {3, 2}, {1, 2, 3, 4, 5, 6}), make<int64_t>(DType::Int64, {2}, {-1, 0}),
                  make<float>(DType::Float, {2, 3}, {1, 2, 3, 4, 5, 6}),
                  make<float>(DType::Float, {3, 2}, {1, 0, 0, 1, 1, 1})});
  EXPECT_EQ(values<float>(o[0]), (std::vector<float>{5, 6, 1, 2}));
  EXPECT_EQ(values<float>(o[1]), (std::vector<float>{4, 5, 10, 11}));
}

TEST(Ops, QuantizeDequantizeRoundTrip) {
  GraphBuilder m(13);
  ValueId x = m.input("x", {4});
  ValueId sc = m.f32("s", {}, {0.5f});
  ValueId zp = m.init<int8_t>("z", {}, {1}, DType::Int8);
  ValueId q = m.node("QuantizeLinear", {x, sc, zp});
  m.outputs({q, m.node("DequantizeLinear", {q, sc, zp})});
  rt::Session s(m.model());
  auto o = s.run({make<float>(DType::Float, {4}, {0.f, 1.25f, -100.f, 0.75f})});
  EXPECT_EQ(values<int8_t>(o[0]), (std::vector<int8_t>{1, 3, -128, 3}));  // 2.5 -> 2 (half to even) + 1
  EXPECT_EQ(values<float>(o[1]), (std::vector<float>{0.f, 1.f, -64.5f, 1.f}));
}
