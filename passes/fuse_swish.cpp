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

using namespace pattern;

Found<ActivationMatch> match(const Graph& g, const Uses& u, NodeId sig, const PassOptions&) {
  const ValueId z = g.input(sig, 0), s = g.output(sig, 0);
  auto times = [&](ValueId x) {
    return reader_if(g, u, s, [&](NodeId n) { return g.is_op(n, "Mul") && other_input(g, n, s) == x; });
  };
  ActivationMatch r{.op = "Swish"};
  // x · Sigmoid(α · x)
  if (NodeId pre = producer_op(g, z, "Mul"); pre.valid()) {
    for (size_t i = 0; i < 2 && r.nodes.empty(); ++i) {
      const ValueId c = g.input(pre, i), x = g.input(pre, 1 - i);
      if (!constant_tensor(g, c).valid()) continue;
      NodeId mul = times(x);
      if (!mul.valid()) continue;
      auto alpha = scalar(g, c);
      if (!alpha) return Miss{"alpha not a scalar"};
      r.nodes = {pre, sig, mul};
      r.x = x;
      if (const auto a = static_cast<float>(*alpha); a != 1.0f) r.attrs.push_back(NewAttr::Float("alpha", a));
      r.out = g.output(mul, 0);
    }
  }
  if (r.nodes.empty()) {  // x · Sigmoid(x)
    NodeId mul = times(z);
    if (!mul.valid()) return {};
    r.nodes = {sig, mul};
    r.x = z;
    r.out = g.output(mul, 0);
  }
  return finish_activation(g, u, std::move(r));
}

}  // namespace

ONNXFORGE_FUSION(fuse_swish, ActivationMatch, match, apply_activation, .op = "Swish", .min_opset = 24,
                 .accuracy = AccuracyClass::FloatBounded, .anchors = {"Sigmoid"},
                 .summary = "x·Sigmoid(x) becomes Swish, x·Sigmoid(α·x) Swish(alpha=α)");

}  // namespace onnxforge::passes
