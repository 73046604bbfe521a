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

using namespace pattern;

constexpr double kSqrt2 = 1.4142135623730951;
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kKappa = 0.044715;

// Mul(v, c) or Mul(c, v) with c a one-element constant: c, else invalid.
ValueId scalar_operand(const Graph& g, NodeId mul) {
  if (!is(g, mul, "Mul")) return {};
  for (size_t i = 0; i < 2; ++i)
    if (scalar(g, g.input(mul, i))) return g.input(mul, i);
  return {};
}

// v = x³ (Pow(x, 3), Mul(x, Mul(x, x)), Mul(Mul(x, x), x)) with base x: the nodes, else empty.
std::vector<NodeId> cube_of(const Graph& g, ValueId v, ValueId x, bool& exponent_ok) {
  NodeId n = g.producer(v);
  if (is(g, n, "Pow") && g.input(n, 0) == x) {
    exponent_ok = scalar_near(g, g.input(n, 1), 3.0);
    return {n};
  }
  if (!is(g, n, "Mul")) return {};
  ValueId sq = other_input(g, n, x);
  NodeId m = g.producer(sq);
  if (sq.valid() && is(g, m, "Mul") && g.input(m, 0) == x && g.input(m, 1) == x) {
    exponent_ok = true;
    return {n, m};
  }
  return {};
}

// Erf's input x/√2: (x, nodes, constant ok) or nothing.
bool erf_input(const Graph& g, ValueId z, ValueId& x, std::vector<NodeId>& nodes, bool& ok) {
  NodeId p = g.producer(z);
  if (is(g, p, "Div") && scalar(g, g.input(p, 1))) {
    x = g.input(p, 0);
    ok = scalar_near(g, g.input(p, 1), kSqrt2);
  } else if (ValueId c = scalar_operand(g, p); c.valid()) {
    x = other_input(g, p, c);
    ok = scalar_near(g, c, 1 / kSqrt2);
  } else {
    return false;
  }
  nodes.push_back(p);
  return x.valid();
}

// Tanh's input √(2/π)·(x + 0.044715·x³).
bool tanh_input(const Graph& g, ValueId z, ValueId& x, std::vector<NodeId>& nodes, bool& ok) {
  NodeId outer = g.producer(z);
  ValueId beta = scalar_operand(g, outer);
  if (!beta.valid()) return false;
  NodeId add = g.producer(other_input(g, outer, beta));
  if (!is(g, add, "Add")) return false;
  for (size_t i = 0; i < 2; ++i) {
    ValueId base = g.input(add, i), k = g.input(add, 1 - i);
    NodeId kmul = g.producer(k);
    ValueId kappa = scalar_operand(g, kmul);
    if (!kappa.valid()) continue;
    bool exp_ok = false;
    auto cube = cube_of(g, other_input(g, kmul, kappa), base, exp_ok);
    if (cube.empty()) continue;
    x = base;
    ok = exp_ok && scalar_near(g, beta, kSqrt2OverPi) && scalar_near(g, kappa, kKappa);
    nodes.insert(nodes.end(), {outer, add, kmul});
    nodes.insert(nodes.end(), cube.begin(), cube.end());
    return true;
  }
  return false;
}

// ½ applied by `n` to `v`: Mul(v, 0.5) / Mul(0.5, v) / Div(v, 2). Sets ok when the constant is right.
bool halves(const Graph& g, NodeId n, ValueId v, bool& ok) {
  if (is(g, n, "Div") && g.input(n, 0) == v && scalar(g, g.input(n, 1))) {
    ok = scalar_near(g, g.input(n, 1), 2.0);
    return true;
  }
  ValueId c = scalar_operand(g, n);
  if (!c.valid() || other_input(g, n, c) != v) return false;
  ok = scalar_near(g, c, 0.5);
  return true;
}

Found<ActivationMatch> match(const Graph& g, const Uses& u, NodeId anchor, const PassOptions&) {
  ActivationMatch r{.op = "Gelu"};
  const bool tanh = g.is_op(anchor, "Tanh");
  if (tanh) r.attrs.push_back(NewAttr::String("approximate", "tanh"));
  const ValueId z = g.input(anchor, 0), t = g.output(anchor, 0);
  bool ok = false;
  if (!(tanh ? tanh_input(g, z, r.x, r.nodes, ok) : erf_input(g, z, r.x, r.nodes, ok))) return {};
  const ValueId x = r.x;
  r.nodes.push_back(anchor);
  // 1 + t
  const NodeId plus = reader_if(g, u, t, [&](NodeId n) {
    ValueId c = other_input(g, n, t);
    return g.is_op(n, "Add") && c != t && scalar(g, c);
  });
  if (!plus.valid()) return {};
  ok = ok && scalar_near(g, other_input(g, plus, t), 1.0);
  r.nodes.push_back(plus);
  const ValueId a = g.output(plus, 0);
  // x · ½ · a in its three associations.
  const NodeId mul = reader_op(g, u, a, "Mul");
  if (!mul.valid()) return {};
  const ValueId o = other_input(g, mul, a);
  const ValueId p = g.output(mul, 0);
  bool half_ok = false;
  if (o == x) {  // (x · a) · ½
    NodeId h = reader_if(g, u, p, [&](NodeId n) { return halves(g, n, p, half_ok); });
    if (!h.valid()) return {};
    r.nodes.insert(r.nodes.end(), {mul, h});
    r.out = g.output(h, 0);
  } else if (NodeId hx = g.producer(o); hx.valid() && halves(g, hx, x, half_ok)) {  // (x · ½) · a
    r.nodes.insert(r.nodes.end(), {hx, mul});
    r.out = p;
  } else if (halves(g, mul, a, half_ok)) {  // x · (a · ½)
    NodeId last = reader_if(g, u, p, [&](NodeId n) { return g.is_op(n, "Mul") && other_input(g, n, p) == x; });
    if (!last.valid()) return {};
    r.nodes.insert(r.nodes.end(), {mul, last});
    r.out = g.output(last, 0);
  } else {
    return {};
  }
  if (!ok || !half_ok) return Miss{"constants differ"};
  return finish_activation(g, u, std::move(r));
}

}  // namespace

ONNXFORGE_FUSION(fuse_gelu, ActivationMatch, match, apply_activation, .op = "Gelu", .min_opset = 20,
                 .accuracy = AccuracyClass::FloatBounded, .anchors = {"Erf", "Tanh"},
                 .summary =
                     "x·½·(1+erf(x/√2)) becomes Gelu, ½x(1+tanh(√(2/π)(x+0.044715x³))) Gelu(approximate=tanh); "
                     "constants matched by value");

}  // namespace onnxforge::passes
