// eliminate_identity_ops — Identity, Dropout in inference mode (attribute form before opset 12,
// input form after), Cast to the type it already has, and x*1, 1*x, x+0, 0+x, x-0, x/1 when the
// constant cannot change the shape (one element, rank not above x's).                  class 0
#include "passes/edits.h"
#include "passes/graph_util.h"
#include "passes/registry.h"

namespace onnxforge::passes {
namespace {

struct Match {
  NodeId node;
  ValueId keep;  // the value that replaces the node's output 0
};

bool neutral_constant(const Graph& g, ValueId c, ValueId x, double neutral) {
  TensorId t = constant_tensor(g, c);
  if (!t.valid()) return false;
  const TensorStore& ts = g.model().tensors;
  if (ts.element_count(t) != 1) return false;
  int64_t crank = static_cast<int64_t>(ts.dims(t).size());
  if (crank > 0 && known_rank(g, x) < crank) return false;
  if (g.has_type(x) && g.dtype(x) != DType::Undefined && g.dtype(x) != ts.dtype(t)) return false;
  return constant_all_equal(g, c, neutral);
}

bool only_output0_used(const Graph& g, const Uses& uses, NodeId n) {
  for (size_t i = 1; i < g.outputs(n).size(); ++i)
    if (ValueId v = g.output(n, i); v.valid() && uses.used(v)) return false;
  return true;
}

ValueId identity_input(const Graph& g, const Uses& uses, NodeId n) {
  ValueId x = g.input(n, 0);
  if (g.is_op(n, "Identity")) return x;
  if (g.is_op(n, "Dropout")) {
    if (!only_output0_used(g, uses, n)) return {};
    int64_t opset = g.model().opset("");
    if (opset < 7) return g.attr_int(n, "is_test", 0) ? x : ValueId{};  // is_test defaults to training
    if (opset < 12) return x;                                           // always inference
    ValueId mode = g.input(n, 2);
    if (!mode.valid()) return x;
    return constant_all_equal(g, mode, 0) ? x : ValueId{};
  }
  if (g.is_op(n, "Cast")) {
    if (!g.has_type(x) || g.dtype(x) == DType::Undefined) return {};
    return static_cast<int64_t>(g.dtype(x)) == g.attr_int(n, "to", -1) ? x : ValueId{};
  }
  // x+0, x*1, x-0, x/1; 0+x and 1*x for the commutative ones.
  const OpTraits* t = op_traits(g, n);
  if (!t || !t->neutral || g.inputs(n).size() != 2) return {};
  if (neutral_constant(g, g.input(n, 1), x, *t->neutral)) return x;
  if (t->has(kCommutative) && neutral_constant(g, x, g.input(n, 1), *t->neutral)) return g.input(n, 1);
  return {};
}

std::vector<Match> analyze(const Graph& g, const Uses& uses, const PassOptions&) {
  std::vector<Match> out;
  for (NodeId n : g.nodes()) {
    if (g.outputs(n).empty() || !g.output(n, 0).valid()) continue;
    ValueId keep = identity_input(g, uses, n);
    if (!keep.valid()) continue;
    ValueId y = g.output(n, 0);
    // Types must agree exactly (an identity never changes dtype).
    if (g.has_type(y) && g.has_type(keep) && g.dtype(y) != DType::Undefined && g.dtype(keep) != DType::Undefined &&
        g.dtype(y) != g.dtype(keep))
      continue;
    if (!can_forward(g, uses, y, keep)) continue;  // removing it would only move an Identity
    out.push_back({n, keep});
  }
  return out;
}

bool apply(Edits& e, const Match& m) { return e.forward(m.node, m.keep); }

}  // namespace

ONNXFORGE_PASS(eliminate_identity_ops, Match, AccuracyClass::Lossless, analyze, apply,
               ops_with_neutral({"Cast", "Dropout", "Identity"}),
               "remove Identity, inference Dropout, same-type Cast, x*1, x+0, x-0, x/1");

}  // namespace onnxforge::passes
