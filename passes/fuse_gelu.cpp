// fuse_gelu — GELU written out in primitives becomes Gelu (opset ≥ 20).                class 1
//   erf form:  x · ½ · (1 + erf(x / √2))          → Gelu(x)
//   tanh form: ½ · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))  → Gelu(x, approximate="tanh")
// Spellings taken: x/√2 as Div(x, √2) or Mul(x, 1/√2); x³ as Pow(x, 3), x·(x·x) or (x·x)·x; the ½
// as Mul by 0.5 or Div by 2, applied to x first (HF's `x * 0.5 * (1 + erf)`, GPT-2's gelu_new
// `0.5 * x * (...)`), to the product last (torch's F.gelu export) or to (1 + erf) first; every
// operand order of Add and Mul. Constants are matched by value within the rounding of their type
// (exporters store them in float32, float64 or float16); a GELU-shaped block with other constants
// is a Miss "constants differ", never a fusion.
//
// Anchor: the Erf or Tanh. A chain computed in float16/bfloat16 fuses too: it rounds every step,
// and 1 + erf(x/√2) keeps few digits where erf is near −1, so the fused op (float inside, one
// rounding) differs from it by 0.00195 on seeded 64×64 inputs — a few float16 ulps of the output's
// scale, how verification judges a float16 model (finish_activation). The same chain between a
// Cast to float and back is fused in float (the Casts stay).
#include <cmath>

#include "passes/edits.h"
#include "passes/fusion.h"
#include "passes/fusion_patterns.h"
#include "passes/registry.h"

namespace onnxforge::passes {
namespace {

// What --list-passes says of this pass.
constexpr const char* kSummary =
    "x·½·(1+erf(x/√2)) becomes Gelu, ½x(1+tanh(√(2/π)(x+0.044715x³))) Gelu(approximate=tanh); constants matched by "
    "value";

using namespace pattern;

constexpr double kSqrt2 = 1.4142135623730951;
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kKappa = 0.044715;

// v = x³ (Pow(x, 3), Mul(x, Mul(x, x)), Mul(Mul(x, x), x)): the nodes, else empty.
std::vector<NodeId> cube_of(const Graph& g, ValueId v, ValueId x, bool& ok) {
  if (!x.valid()) return {};
  const Hop c = fits(g, g.producer(v), x, {Link::first("Pow", Operand::any(3.0)), Link::either("Mul", Operand::any())});
  if (!c) return {};
  ok = c.ok;
  if (c.alt == 0) return {c.node};
  const Hop sq = fits(g, g.producer(c.other), x, {Link::either("Mul", Operand::same())});
  return sq ? std::vector<NodeId>{c.node, sq.node} : std::vector<NodeId>{};
}

// Tanh's input √(2/π)·(x + 0.044715·x³): x, or invalid.
ValueId tanh_input(const Graph& g, ValueId z, std::vector<NodeId>& nodes, bool& ok) {
  const Hop outer = prev(g, z, {Link::either("Mul", Operand::scalar(kSqrt2OverPi))});
  const NodeId add = outer ? producer_op(g, outer.in, "Add") : NodeId{};
  if (!add.valid()) return {};
  for (size_t i = 0; i < 2; ++i) {
    const ValueId base = g.input(add, i);
    const Hop kmul = prev(g, g.input(add, 1 - i), {Link::either("Mul", Operand::scalar(kKappa))});
    bool exp_ok = false;
    auto cube = kmul ? cube_of(g, kmul.in, base, exp_ok) : std::vector<NodeId>{};
    if (cube.empty()) continue;
    ok = exp_ok && outer.ok && kmul.ok;
    nodes.insert(nodes.end(), {outer.node, add, kmul.node});
    nodes.insert(nodes.end(), cube.begin(), cube.end());
    return base;
  }
  return {};
}

Found<ActivationMatch> match(const Graph& g, const Uses& u, NodeId anchor, const PassOptions&) {
  ActivationMatch r{.op = "Gelu"};
  const bool tanh = g.is_op(anchor, "Tanh");
  if (tanh) r.attrs.push_back(NewAttr::String("approximate", "tanh"));
  const ValueId z = g.input(anchor, 0), t = g.output(anchor, 0);
  bool ok = false;
  if (tanh) {
    r.x = tanh_input(g, z, r.nodes, ok);
  } else if (const Hop in = prev(g, z, divided_by(kSqrt2))) {  // x/√2 or x·(1/√2)
    r.x = in.in;
    ok = in.ok;
    r.nodes.push_back(in.node);
  }
  if (!r.x.valid()) return {};
  const ValueId x = r.x;
  r.nodes.push_back(anchor);
  const Hop plus = next(g, u, t, {Link::either("Add", Operand::scalar(1.0))});  // 1 + t
  if (!plus) return {};
  ok = ok && plus.ok;
  r.nodes.push_back(plus.node);
  const ValueId a = plus.out;
  // x · ½ · a in its three associations; the ½ is Mul by 0.5 or Div by 2.
  const Hop mul = next(g, u, a, {Link::either("Mul", Operand::any())});
  if (!mul) return {};
  Hop half;
  if (mul.other == x) {  // (x · a) · ½
    half = next(g, u, mul.out, divided_by(2));
    r.nodes.insert(r.nodes.end(), {mul.node, half.node});
    r.out = half.out;
  } else if ((half = fits(g, g.producer(mul.other), x, divided_by(2)))) {  // (x · ½) · a
    r.nodes.insert(r.nodes.end(), {half.node, mul.node});
    r.out = mul.out;
  } else if ((half = fits(g, mul.node, a, divided_by(2)))) {  // x · (a · ½)
    const Hop last = next(g, u, mul.out, {Link::either("Mul", Operand::is_value(x))});
    if (!last) return {};
    r.nodes.insert(r.nodes.end(), {mul.node, last.node});
    r.out = last.out;
  }
  if (!half) return {};
  if (!ok || !half.ok) return Miss{"constants differ"};
  return finish_activation(g, u, std::move(r));
}

}  // namespace

ONNXFORGE_FUSION(fuse_gelu, ActivationMatch, match, apply_activation, .op = "Gelu", .min_opset = 20,
                 .accuracy = AccuracyClass::FloatBounded, .anchors = {"Erf", "Tanh"}, .summary = kSummary);

}  // namespace onnxforge::passes
