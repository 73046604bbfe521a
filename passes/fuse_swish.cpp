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

struct Match {
  std::vector<NodeId> nodes;
  ValueId x, out;
  float alpha = 1;
};

Found<Match> match(const Graph& g, const Uses& u, NodeId sig, const PassOptions&) {
  const ValueId z = g.input(sig, 0), s = g.output(sig, 0);
  auto times = [&](ValueId x) {
    return reader_if(g, u, s, [&](NodeId n) { return g.is_op(n, "Mul") && other_input(g, n, s) == x; });
  };
  Match r;
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
      r.alpha = static_cast<float>(*alpha);
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
  if (const char* why = private_values(g, u, r.nodes, r.out)) return Miss{why};
  const DType type = dtype_of(g, r.x);
  if (type == DType::Undefined) return Miss{"type unknown"};
  if (!is_float(type)) return Miss{"not floating point"};
  result_last(g, r.nodes, r.out);
  return r;
}

bool apply(Edits& e, const Match& m) {
  std::vector<NewAttr> attrs;
  if (m.alpha != 1.0f) attrs.push_back(NewAttr::Float("alpha", m.alpha));
  return e.replace_with(m.nodes, "Swish", {m.x}, std::move(attrs)).valid();
}

const FusionOf<Match>& fusion() {
  static const FusionOf<Match> p{{.name = "fuse_swish",
                                  .op = "Swish",
                                  .min_opset = 24,
                                  .accuracy = AccuracyClass::FloatBounded,
                                  .summary = "x·Sigmoid(x) becomes Swish, x·Sigmoid(α·x) Swish(alpha=α)",
                                  .anchors = {"Sigmoid"}},
                                 match, apply};
  return p;
}

}  // namespace

const Fusion& fuse_swish_fusion() { return fusion(); }
const Pass& fuse_swish_pass() { return fusion(); }

}  // namespace onnxforge::passes
