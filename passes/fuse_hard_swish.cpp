// fuse_hard_swish — x · HardSigmoid(x) and x · ReLU6(x + 3) / 6 become HardSwish (opset ≥ 14).
//                                                                                        class 1
// The two spellings exporters write for MobileNetV3's h-swish:
//   torch below opset 14:   Mul(x, HardSigmoid(x, alpha=1/6, beta=0.5)), either operand order;
//   written out (Keras / tf2onnx, hand-written torch):
//                           Clip(x + 3, 0, 6) · x / 6, the 1/6 as Div(·, 6) or Mul(·, 1/6), applied
//                           to the product or to the Clip first.
// Anchors: HardSigmoid and Clip. A HardSigmoid of another value than the one it multiplies (the
// squeeze-excitation gate x · HardSigmoid(se(x))) is not an h-swish; other slopes (Keras's
// hard_sigmoid, 0.2·x + 0.5) or bounds are a Miss. Class 1: the op computes x·max(0, min(1,
// x/6 + 1/2)), which rounds differently from the chain's (x + 3)/6.
#include <cmath>

#include "passes/edits.h"
#include "passes/fusion.h"
#include "passes/fusion_patterns.h"
#include "passes/registry.h"

namespace onnxforge::passes {
namespace {

using namespace pattern;

// The node reading `v` that multiplies it by `x` (Mul(v, x) in either order), or invalid.
NodeId times(const Graph& g, const Uses& u, ValueId v, ValueId x) {
  return reader_if(g, u, v, [&](NodeId n) { return g.is_op(n, "Mul") && other_input(g, n, v) == x; });
}

// The node reading `v` that divides it by 6 (Div(v, 6) or Mul(v, 1/6)), or invalid.
NodeId sixth(const Graph& g, const Uses& u, ValueId v) {
  return reader_if(g, u, v, [&](NodeId n) {
    if (g.is_op(n, "Div")) return g.input(n, 0) == v && scalar_near(g, g.input(n, 1), 6);
    return g.is_op(n, "Mul") && scalar_near(g, other_input(g, n, v), 1.0 / 6);
  });
}

// x · HardSigmoid(x) with HardSwish's slope and offset.
Found<ActivationMatch> from_hard_sigmoid(const Graph& g, const Uses& u, NodeId hs) {
  const ValueId x = g.input(hs, 0);
  const NodeId mul = times(g, u, g.output(hs, 0), x);
  if (!mul.valid()) return {};  // x · HardSigmoid(y): a gate, not an h-swish
  const double alpha = g.attr_float(hs, "alpha", 0.2f), beta = g.attr_float(hs, "beta", 0.5f);
  if (std::abs(alpha - 1.0 / 6) > rounding(DType::Float) || beta != 0.5) return Miss{"HardSigmoid slope is not 1/6"};
  return finish_activation(g, u, {.op = "HardSwish", .nodes = {hs, mul}, .x = x, .out = g.output(mul, 0)});
}

// Clip(x + 3, 0, 6) · x / 6 in any of its arrangements.
Found<ActivationMatch> from_relu6(const Graph& g, const Uses& u, NodeId clip) {
  const NodeId add = producer_op(g, g.input(clip, 0), "Add");
  if (!add.valid()) return {};
  ValueId x;
  for (size_t i = 0; i < 2 && !x.valid(); ++i)
    if (scalar_near(g, g.input(add, 1 - i), 3)) x = g.input(add, i);
  if (!x.valid()) return {};
  const ValueId c = g.output(clip, 0);
  ActivationMatch r{.op = "HardSwish", .x = x};
  if (NodeId mul = times(g, u, c, x); mul.valid()) {  // (x · c) / 6
    const NodeId div = sixth(g, u, g.output(mul, 0));
    if (!div.valid()) return {};
    r.nodes = {add, clip, mul, div};
    r.out = g.output(div, 0);
  } else if (NodeId div = sixth(g, u, c); div.valid()) {  // x · (c / 6)
    mul = times(g, u, g.output(div, 0), x);
    if (!mul.valid()) return {};
    r.nodes = {add, clip, div, mul};
    r.out = g.output(mul, 0);
  } else {
    return {};
  }
  const ClipBounds b = clip_bounds(g, clip);
  if (!b.known || !b.min || !b.max || *b.min != 0 || *b.max != 6) return Miss{"Clip bounds are not [0, 6]"};
  return finish_activation(g, u, std::move(r));
}

Found<ActivationMatch> match(const Graph& g, const Uses& u, NodeId n, const PassOptions&) {
  if (is(g, n, "HardSigmoid")) return from_hard_sigmoid(g, u, n);
  if (is(g, n, "Clip")) return from_relu6(g, u, n);
  return {};
}

}  // namespace

ONNXFORGE_FUSION(fuse_hard_swish, ActivationMatch, match, apply_activation, .op = "HardSwish", .min_opset = 14,
                 .accuracy = AccuracyClass::FloatBounded, .anchors = {"HardSigmoid", "Clip"},
                 .summary = "x·HardSigmoid(x) (alpha 1/6) and x·Clip(x + 3, 0, 6)/6 become HardSwish");

}  // namespace onnxforge::passes
