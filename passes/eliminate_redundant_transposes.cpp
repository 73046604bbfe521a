// eliminate_redundant_transposes — Transpose(Transpose(x, p1), p2) becomes x when the composed
// permutation is the identity and one Transpose otherwise; an identity Transpose is removed; and
// Transpose → unary elementwise → Transpose that cancels becomes the elementwise op alone. class 0
#include <numeric>

#include "passes/edits.h"
#include "passes/graph_util.h"
#include "passes/registry.h"

namespace onnxforge::passes {
namespace {

struct Match {
  NodeId outer, middle, inner;    // middle: elementwise op (invalid for a plain pair)
  std::vector<int64_t> composed;  // empty: identity
};

bool is_identity(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

bool elementwise_unary(const Graph& g, NodeId n) {
  return g.inputs(n).size() == 1 && g.outputs(n).size() == 1 && has_fact(g, n, kUnary);
}

std::vector<Match> analyze(const Graph& g, const Uses& uses, const PassOptions&) {
  std::vector<Match> out;
  for (NodeId t2 : g.nodes()) {
    if (!is(g, t2, "Transpose")) continue;
    auto p2 = transpose_perm(g, t2);
    if (!p2) continue;
    if (is_identity(*p2)) {
      if (can_forward(g, uses, g.output(t2, 0), g.input(t2, 0))) out.push_back({t2, {}, {}, {}});
      continue;
    }
    NodeId prev = producer_of(g, t2, 0), middle;
    if (prev.valid() && elementwise_unary(g, prev) && uses.single(g.input(t2, 0))) {
      middle = prev;
      prev = producer_of(g, middle, 0);
      if (!prev.valid() || !uses.single(g.input(middle, 0))) continue;
    }
    if (!is(g, prev, "Transpose")) continue;
    auto p1 = transpose_perm(g, prev);
    if (!p1 || p1->size() != p2->size()) continue;
    std::vector<int64_t> q(p2->size());
    for (size_t i = 0; i < q.size(); ++i) q[i] = (*p1)[(*p2)[i]];
    if (middle.valid() && !is_identity(q)) continue;  // pushing through only pays when it cancels
    out.push_back({t2, middle, prev, is_identity(q) ? std::vector<int64_t>{} : q});
  }
  return out;
}

bool apply(Edits& e, const Match& m) {
  const Graph& g = e.g;
  if (!m.inner.valid()) return e.forward(m.outer, g.input(m.outer, 0));  // identity transpose
  ValueId x = g.input(m.inner, 0);
  if (m.middle.valid()) {  // T(E(T(x))) with T∘T = id  →  E(x)
    auto attrs = copy_attrs(g, m.middle);
    if (!attrs) return false;
    return e
        .replace_with({m.inner, m.middle, m.outer}, str(g.op_type(m.middle)), {x}, std::move(*attrs),
                      str(g.domain(m.middle)))
        .valid();
  }
  if (!m.composed.empty())  // the inner Transpose stays if something else reads it
    return e.replace_with({m.inner, m.outer}, "Transpose", {x}, {NewAttr::Ints("perm", m.composed)}).valid();
  // Cancelling pair: not Edits::forward, whose graph-output rule is for one node. Two nodes go,
  // so even an Identity that Rewrite adds to keep a graph output's name is a gain.
  if (e.any_touched(m.outer, m.inner)) return false;
  e.replace_uses(g.output(m.outer, 0), x);
  e.kill(m.outer);
  e.drop_if_unshared(m.inner);
  return true;
}

}  // namespace

ONNXFORGE_PASS(eliminate_redundant_transposes, Match, AccuracyClass::Lossless, analyze, apply,
               ops_with(kUnary, {"Transpose"}),
               "cancel or compose consecutive Transposes, push through unary elementwise ops");

}  // namespace onnxforge::passes
