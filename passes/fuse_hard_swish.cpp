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

// What --list-passes says of this pass.
constexpr const char* kSummary = "x·HardSigmoid(x) (alpha 1/6) and x·Clip(x + 3, 0, 6)/6 become HardSwish";

using namespace pattern;

// The reader of `v` that multiplies it by `x` (either order), and the one that divides it by 6
// (Div(v, 6) or Mul(v, 1/6)).
Hop times(const Graph& g, const Uses& u, ValueId v, ValueId x) {
  return next(g, u, v, {Link::either("Mul", Operand::is_value(x))});
}
Hop sixth(const Graph& g, const Uses& u, ValueId v) { return next(g, u, v, divided_by(6, Operand::Fit::Value)); }

// x · HardSigmoid(x) with HardSwish's slope and offset.
Found<ActivationMatch> from_hard_sigmoid(const Graph& g, const Uses& u, NodeId hs) {
  const ValueId x = g.input(hs, 0);
  const Hop mul = times(g, u, g.output(hs, 0), x);
  if (!mul) return {};  // x · HardSigmoid(y): a gate, not an h-swish
  const double alpha = g.attr_float(hs, "alpha", 0.2f), beta = g.attr_float(hs, "beta", 0.5f);
  if (std::abs(alpha - 1.0 / 6) > rounding(DType::Float) || beta != 0.5) return Miss{"HardSigmoid slope is not 1/6"};
  return finish_activation(g, u, {.op = "HardSwish", .nodes = {hs, mul.node}, .x = x, .out = mul.out});
}

// Clip(x + 3, 0, 6) · x / 6 in any of its arrangements.
Found<ActivationMatch> from_relu6(const Graph& g, const Uses& u, NodeId clip) {
  const Hop add = prev(g, g.input(clip, 0), {Link::either("Add", Operand::scalar(3, Operand::Fit::Value))});
  if (!add || !add.in.valid()) return {};
  const ValueId x = add.in, c = g.output(clip, 0);
  ActivationMatch r{.op = "HardSwish", .x = x};
  if (Hop mul = times(g, u, c, x)) {  // (x · c) / 6
    const Hop div = sixth(g, u, mul.out);
    if (!div) return {};
    r.nodes = {add.node, clip, mul.node, div.node};
    r.out = div.out;
  } else if (Hop div = sixth(g, u, c)) {  // x · (c / 6)
    mul = times(g, u, div.out, x);
    if (!mul) return {};
    r.nodes = {add.node, clip, div.node, mul.node};
    r.out = mul.out;
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
                 .accuracy = AccuracyClass::FloatBounded, .anchors = {"HardSigmoid", "Clip"}, .summary = kSummary);

}  // namespace onnxforge::passes
