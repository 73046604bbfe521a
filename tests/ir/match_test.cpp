// The pattern vocabulary (ir/match.h) on hand-built graphs: op checks with domains and dead
// nodes, single readers, constants in every form a matcher meets, float16/bfloat16, early returns.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/float16.h"
#include "ir/match.h"
#include "ir/rewrite.h"
#include "ir/uses.h"
#include "tests/common/graph_builder.h"

using namespace onnxforge;
using onnxforge::test::GraphBuilder;

namespace {

NodeId node_of(const Graph& g, ValueId v) { return g.producer(v); }

ValueId f16_scalar(GraphBuilder& b, const std::string& name, float x) {
  std::vector<uint16_t> bits{float_to_half(x)};
  return b.init(name, {}, bits, DType::Float16);
}

}  // namespace

TEST(Match, IsChecksDomainLivenessAndValidity) {
  GraphBuilder b;
  ValueId x = b.input("x", {2, 3});
  ValueId r = b.node("Relu", {x});
  Graph& g = b.g();
  ValueId ms = g.add_value(intern("ms"));
  NodeId contrib = g.add_node(intern("Relu"), intern("com.microsoft"), intern("ms_relu"), std::vector<ValueId>{r},
                              std::vector<ValueId>{ms});
  NodeId onnx = g.add_node(intern("Relu"), intern("ai.onnx"), intern("onnx_relu"), std::vector<ValueId>{ms},
                           std::vector<ValueId>{g.add_value(intern("y"))});
  EXPECT_TRUE(is(g, node_of(g, r), "Relu"));
  EXPECT_FALSE(is(g, node_of(g, r), "Sigmoid"));
  EXPECT_FALSE(is(g, contrib, "Relu"));  // another domain
  EXPECT_TRUE(is(g, onnx, "Relu"));      // "ai.onnx" is the default domain
  EXPECT_FALSE(is(g, NodeId{}, "Relu"));
  EXPECT_TRUE(is_one_of(g, onnx, {"Sigmoid", "Relu"}));
  EXPECT_FALSE(is_one_of(g, onnx, {"Sigmoid", "Tanh"}));
  g.kill_node(onnx);
  EXPECT_FALSE(is(g, onnx, "Relu"));  // dead
}

TEST(Match, ReadersProducersAndTheOtherInput) {
  GraphBuilder b;
  ValueId x = b.input("x", {4});
  ValueId c = b.f32("c", {4}, {1, 2, 3, 4});
  ValueId s = b.node("Sigmoid", {x});
  ValueId add = b.node("Add", {c, s});      // s read once, at slot 1
  ValueId mul = b.node("Mul", {add, add});  // add read twice
  ValueId neg = b.node("Neg", {mul});
  b.output(neg);
  const Graph& g = b.g();
  Uses uses(g);
  NodeId sig = g.producer(s), a = g.producer(add), m = g.producer(mul), n = g.producer(neg);

  Use u = single_use(uses, s);
  EXPECT_EQ(u.node, a);
  EXPECT_EQ(u.slot, 1u);
  EXPECT_EQ(single_consumer(g, uses, s), a);
  EXPECT_EQ(single_consumer(g, uses, sig), a);          // of the node's output 0
  EXPECT_FALSE(single_consumer(g, uses, add).valid());  // two reads
  EXPECT_FALSE(single_consumer(g, uses, neg).valid());  // a graph output
  EXPECT_EQ(single_consumer(g, uses, mul), n);

  EXPECT_EQ(other_input(g, a, s), c);
  EXPECT_EQ(other_input(g, a, c), s);
  EXPECT_EQ(producer_of(g, a, 1), sig);
  EXPECT_FALSE(producer_of(g, a, 0).valid());  // an initializer
  EXPECT_FALSE(producer_of(g, a, 5).valid());  // no such input
  EXPECT_EQ(input_op(g, a, 1, "Sigmoid"), sig);
  EXPECT_FALSE(input_op(g, a, 1, "Tanh").valid());

  EXPECT_TRUE(feeds_graph_output(g, uses, n));
  EXPECT_FALSE(feeds_graph_output(g, uses, m));
}

TEST(Match, CanForwardKeepsGraphOutputNamesWithoutAnIdentity) {
  GraphBuilder b;
  ValueId x = b.input("x", {4});
  ValueId r = b.node("Relu", {x});
  ValueId id1 = b.node("Identity", {r});
  ValueId id2 = b.node("Identity", {x});
  ValueId id3 = b.node("Identity", {r});
  b.output(id1);
  b.output(id2);
  b.output(r);
  const Graph& g = b.g();
  Uses uses(g);
  EXPECT_TRUE(can_forward(g, uses, id3, x));   // not a graph output: anything goes
  EXPECT_FALSE(can_forward(g, uses, id2, x));  // a graph input cannot take the output's name
  EXPECT_FALSE(can_forward(g, uses, id1, r));  // r is a graph output itself
  ValueId w = b.f32("w", {4}, {0, 0, 0, 0});
  EXPECT_FALSE(can_forward(g, uses, id1, w));  // nor an initializer
}

TEST(Match, ScalarsInEveryFormAMatcherMeets) {
  GraphBuilder b;
  ValueId f = b.f32("f", {1}, {1.41421356f});
  ValueId two = b.f32("two", {2}, {1, 2});
  ValueId i = b.i64("i", {7}, /*scalar=*/true);
  ValueId h = f16_scalar(b, "h", 0.5f);
  ValueId vf = b.node("Constant", {}, {NewAttr::Float("value_float", 0.25f)});
  ValueId vi = b.node("Constant", {}, {NewAttr::Int("value_int", -3)});
  ValueId x = b.input("x", {1});
  const Graph& g = b.g();
  EXPECT_FLOAT_EQ(*scalar(g, f), 1.41421356f);
  EXPECT_FALSE(scalar(g, two));  // two elements
  EXPECT_EQ(*scalar(g, i), 7.0);
  EXPECT_FALSE(scalar(g, i, DType::Float));  // dtype filter
  EXPECT_EQ(*scalar(g, h), 0.5);
  EXPECT_EQ(*scalar(g, vf, DType::Float), 0.25);
  EXPECT_EQ(*scalar(g, vi), -3.0);
  EXPECT_FALSE(scalar(g, vi, DType::Float));
  EXPECT_FALSE(scalar(g, x));  // not a constant
}

TEST(Match, ConstantNearAllowsFloatRoundingOnly) {
  GraphBuilder b;
  ValueId sqrt2 = b.f32("sqrt2", {}, {1.41421354f});  // as PyTorch prints it
  ValueId halves = b.f32("halves", {3}, {0.5f, 0.5f, 0.5000001f});
  ValueId empty = b.f32("empty", {0}, {});
  ValueId h = f16_scalar(b, "h", 0.044715f);  // float16 keeps ~3 decimal digits
  ValueId x = b.input("x", {1});
  const Graph& g = b.g();
  EXPECT_TRUE(constant_near(g, sqrt2, std::sqrt(2.0), 1e-6));
  EXPECT_FALSE(constant_near(g, sqrt2, std::sqrt(2.0), 1e-9));
  EXPECT_FALSE(constant_near(g, sqrt2, 1.5, 1e-4));
  EXPECT_TRUE(constant_near(g, halves, 0.5, 1e-6));  // every element
  EXPECT_FALSE(constant_all_equal(g, halves, 0.5));
  EXPECT_FALSE(constant_near(g, empty, 0.5, 1e-4));
  EXPECT_TRUE(constant_near(g, h, 0.044715, 1e-3));
  EXPECT_FALSE(constant_near(g, h, 0.044715, 1e-6));
  EXPECT_FALSE(constant_near(g, x, 0.0, 1.0));
}

TEST(Match, Float16AndBfloat16Conversions) {
  EXPECT_EQ(half_to_float(0x3c00), 1.0f);
  EXPECT_EQ(half_to_float(0xc000), -2.0f);
  EXPECT_EQ(half_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_TRUE(std::isinf(half_to_float(0x7c00)));
  EXPECT_TRUE(std::isnan(half_to_float(0x7e00)));
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // rounds to inf
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie to even
  for (uint32_t h = 0; h < 0x7c00; h += 7) EXPECT_EQ(float_to_half(half_to_float(static_cast<uint16_t>(h))), h);
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie to even
}

namespace {

struct Pair {
  NodeId first, second;
};

// Relu → Sigmoid, the Relu read only by the Sigmoid.
Found<Pair> match_pair(const Graph& g, const Uses& uses, NodeId n) {
  MATCH_IF(is(g, n, "Relu"), "not a Relu");
  NodeId s = single_consumer(g, uses, n);
  MATCH_IF(s.valid(), "Relu read more than once");
  MATCH_IF(is(g, s, "Sigmoid"), "no Sigmoid after the Relu");
  return Pair{n, s};
}

}  // namespace

TEST(Match, MatchIfReturnsTheFirstFailedCheck) {
  GraphBuilder b;
  ValueId x = b.input("x", {4});
  ValueId r = b.node("Relu", {x}), r2 = b.node("Relu", {x});
  ValueId s = b.node("Sigmoid", {r});
  for (ValueId out : {s, b.node("Tanh", {r2}), r2}) b.output(out);  // r2: read twice
  const Graph& g = b.g();
  Uses uses(g);
  auto hit = match_pair(g, uses, g.producer(r));
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->second, g.producer(s));
  EXPECT_EQ(hit.why(), "");
  EXPECT_EQ(match_pair(g, uses, g.producer(s)).why(), "not a Relu");
  EXPECT_EQ(match_pair(g, uses, g.producer(r2)).why(), "Relu read more than once");
  EXPECT_FALSE(match_pair(g, uses, g.producer(r2)));
}

// ---- chains (Link / Hop): alternatives, which one fit, shape apart from value, and never a node
// that does not read the chain's value.

TEST(Chain, DividedByTakesDivAndMulByTheReciprocalInEitherOrder) {
  GraphBuilder b;
  ValueId x = b.input("x", {4});
  ValueId d = b.node("Div", {x, b.f32("two", {}, {2})});
  ValueId m = b.node("Mul", {b.f32("half", {}, {0.5f}), x});
  ValueId off = b.node("Mul", {x, b.f32("four", {1}, {0.4f})});
  ValueId inv = b.node("Div", {b.f32("two2", {}, {2}), x});          // 2 / x: the chain sits at the divisor
  ValueId wide = b.node("Mul", {x, b.f32("v", {2}, {0.5f, 0.5f})});  // not one element
  for (ValueId v : {d, m, off, inv, wide}) b.output(v);
  const Graph& g = b.g();
  Uses u(g);

  const Hop sd = fits(g, g.producer(d), x, divided_by(2));
  ASSERT_TRUE(sd);
  EXPECT_EQ(sd.alt, 0);
  EXPECT_TRUE(sd.ok);
  EXPECT_EQ(sd.in, x);
  EXPECT_EQ(sd.out, d);
  const Hop sm = prev(g, m, divided_by(2));  // the chain's value found by the link
  ASSERT_TRUE(sm);
  EXPECT_EQ(sm.alt, 1);
  EXPECT_EQ(sm.in, x);
  EXPECT_TRUE(sm.ok);
  // The shape fits, the value does not: ok false, or no fit when the value is required.
  const Hop so = fits(g, g.producer(off), x, divided_by(2));
  ASSERT_TRUE(so);
  EXPECT_FALSE(so.ok);
  EXPECT_FALSE(fits(g, g.producer(off), x, divided_by(2, Operand::Fit::Value)));
  EXPECT_TRUE(fits(g, g.producer(m), x, divided_by(2, Operand::Fit::Value)));
  EXPECT_FALSE(fits(g, g.producer(inv), x, divided_by(2)));
  EXPECT_FALSE(fits(g, g.producer(wide), x, divided_by(2)));

  // next(): the first reader that fits (x's readers in order: d, m, off, inv, wide).
  const Hop first = next(g, u, x, {Link::first("Div", Operand::scalar()), Link::either("Mul", Operand::scalar())});
  EXPECT_EQ(first.node, g.producer(d));
  const Hop mul = next(g, u, x, {Link::either("Mul", Operand::scalar(0.4))});
  EXPECT_EQ(mul.node, g.producer(m));  // the shape fits first; its value is the caller's Miss
  EXPECT_FALSE(mul.ok);
  EXPECT_EQ(next(g, u, x, {Link::either("Mul", Operand::scalar(0.4, Operand::Fit::Value))}).node, g.producer(off));
  EXPECT_FALSE(next(g, u, x, {Link::unary("Sqrt")}));
}

TEST(Chain, SquaredAndOperandsThatNameValues) {
  GraphBuilder b;
  ValueId x = b.input("x", {4}), y = b.input("y", {4});
  ValueId p2 = b.node("Pow", {x, b.f32("e2", {}, {2})});
  ValueId p3 = b.node("Pow", {x, b.f32("e3", {}, {3})});
  ValueId pe = b.node("Pow", {x, y});  // a computed exponent: the shape of a square, never its value
  ValueId xx = b.node("Mul", {x, x});
  ValueId xy = b.node("Mul", {x, y});
  ValueId r = b.node("Reciprocal", {xx});
  ValueId q = b.node("Div", {xx, xx});
  for (ValueId v : {p2, p3, pe, xy, r, q}) b.output(v);
  const Graph& g = b.g();
  Uses u(g);

  EXPECT_TRUE(prev(g, p2, squared()).ok);
  EXPECT_FALSE(prev(g, p3, squared()).ok);
  const Hop se = prev(g, pe, squared());
  ASSERT_TRUE(se);
  EXPECT_FALSE(se.ok);
  const Hop sx = prev(g, xx, squared());
  ASSERT_TRUE(sx);
  EXPECT_EQ(sx.alt, 1);
  EXPECT_EQ(sx.in, x);
  EXPECT_FALSE(prev(g, xy, squared()));
  // A link never fits a node that does not read the chain's value.
  EXPECT_FALSE(fits(g, g.producer(xy), y, {Link::either("Mul", Operand::is_value(y))}));
  EXPECT_TRUE(fits(g, g.producer(xy), y, {Link::either("Mul", Operand::is_value(x))}));
  EXPECT_FALSE(fits(g, g.producer(xx), y, {Link::either("Mul", Operand::any())}));
  // Reciprocal(s) or Div(·, s) with another dividend: Div(s, s) is 1, not 1/s.
  const Link recip[] = {Link::unary("Reciprocal"), Link::second("Div", Operand::other())};
  const Hop sr = next(g, u, xx, recip);
  ASSERT_TRUE(sr);
  EXPECT_EQ(sr.node, g.producer(r));
  EXPECT_EQ(sr.alt, 0);
  EXPECT_FALSE(sr.other.valid());
  EXPECT_FALSE(fits(g, g.producer(q), xx, recip));
  // A graph input has no producer; an invalid value has neither producer nor readers.
  EXPECT_FALSE(prev(g, x, squared()));
  EXPECT_FALSE(prev(g, ValueId{}, squared()));
  EXPECT_FALSE(next(g, u, ValueId{}, squared()));
}
