// fuse_swish — x · Sigmoid(x) becomes Swish (opset ≥ 24); x · Sigmoid(α·x) becomes Swish(alpha=α).
//                                                                                        class 1
// SiLU as torch exports it (Llama's MLP gate, EfficientNet's activations): Mul(x, Sigmoid(x)) in
// either operand order. Anchor: the Sigmoid. A Sigmoid whose output something else also reads
// (a gate used twice) is a Miss; α must be a one-element constant (x · Sigmoid(W·x) with a tensor
// W is not a Swish).
#include <cmath>

#include "passes/edits.h"
#include "passes/fusion.h"
#include "passes/fusion_patterns.h"
#include "passes/registry.h"

namespace onnxforge::passes {
namespace {

// What --list-passes says of this pass.
constexpr const char* kSummary = "x·Sigmoid(x) becomes Swish, x·Sigmoid(α·x) Swish(alpha=α)";

using namespace pattern;

Found<ActivationMatch> match(const Graph& g, const Uses& u, NodeId sig, const PassOptions&) {
  const ValueId z = g.input(sig, 0), s = g.output(sig, 0);
  auto times = [&](ValueId x) { return next(g, u, s, {Link::either("Mul", Operand::is_value(x))}); };
  const Hop pre = prev(g, z, {Link::either("Mul", Operand::constant())});
  if (const Hop mul = pre ? times(pre.in) : Hop{}) {  // x · Sigmoid(α · x)
    auto alpha = scalar(g, pre.other);
    if (!alpha) return Miss{"alpha not a scalar"};
    ActivationMatch r{.op = "Swish", .nodes = {pre.node, sig, mul.node}, .x = pre.in, .out = mul.out};
    if (const auto a = static_cast<float>(*alpha); a != 1.0f) r.attrs.push_back(NewAttr::Float("alpha", a));
    return finish_activation(g, u, std::move(r));
  }
  const Hop mul = times(z);  // x · Sigmoid(x)
  if (!mul) return {};
  return finish_activation(g, u, {.op = "Swish", .nodes = {sig, mul.node}, .x = z, .out = mul.out});
}

}  // namespace

ONNXFORGE_FUSION(fuse_swish, ActivationMatch, match, apply_activation, .op = "Swish", .min_opset = 24,
                 .accuracy = AccuracyClass::FloatBounded, .anchors = {"Sigmoid"}, .summary = kSummary);

}  // namespace onnxforge::passes
