// sink_transposes — a Transpose that keeps the last axis in place commutes with every op that
// works row by row on the last axis: MatMul by a matrix, Add/Sub/Mul/Div by a vector (rank ≤ 1),
// Slice along the last axis, unary elementwise ops. When every path out of such a Transpose
// through those ops ends in the inverse Transpose, the row-wise ops run on the untransposed value
// and all the Transposes go (1 + one per path). ViT's seq-first nn.MultiheadAttention is the
// instance: [B,S,E] → Transpose(1,0,2) → in-projection MatMul + bias → three Slices → Attention's
// three Transpose(1,0,2) back to batch-first (4 Transposes per block), and after it
// Transpose(1,0,2) → out-projection → Transpose(1,0,2) (2 more once unflatten_gemm made the
// out-projection a 3-D MatMul + Add).                                                    class 1
//
// Class 1, not 0: the row-wise ops compute the same values per row, but a GEMM sees its rows in
// another order and its tail rows (M not a multiple of the kernel's tile) in other tiles; nothing
// here proves the kernel rounds a row independently of where it sits.
#include <algorithm>
#include <numeric>

#include "passes/edits.h"
#include "passes/graph_util.h"
#include "passes/registry.h"

namespace onnxforge::passes {
namespace {

struct Match {
  NodeId transpose;
  std::vector<NodeId> region;    // the row-wise ops, parents before children
  std::vector<NodeId> frontier;  // the inverse Transposes ending every path
};

constexpr size_t kMaxRegion = 64;  // a ViT block's region is 5 nodes; bounds the walk

bool keeps_last_axis(const std::vector<int64_t>& p) {
  return p.size() >= 2 && p.back() == static_cast<int64_t>(p.size()) - 1;
}

bool is_identity(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

// Whether node `n`, reading a rank-`r` region value at input `slot`, computes its output row by
// row on the last axis (so it commutes with a permutation of the other axes).
bool row_wise(const Graph& g, NodeId n, uint32_t slot, int64_t r) {
  if (g.outputs(n).size() != 1 || !g.output(n, 0).valid() || !g.subgraphs(n).empty()) return false;
  if (is(g, n, "MatMul")) return slot == 0 && known_rank(g, g.input(n, 1)) == 2;
  if (is_one_of(g, n, {"Add", "Sub", "Mul", "Div"})) {
    if (g.inputs(n).size() != 2 || slot > 1) return false;
    int64_t other = known_rank(g, g.input(n, 1 - slot));
    return other >= 0 && other <= 1;  // broadcasts along the last axis only
  }
  if (is(g, n, "Slice")) {
    if (slot != 0 || g.inputs(n).size() < 4 || !g.input(n, 3).valid()) return false;  // default axes: 0..
    auto axes = constant_ints(g, g.input(n, 3));
    if (!axes || axes->empty()) return false;
    return std::all_of(axes->begin(), axes->end(), [&](int64_t a) { return a == -1 || a == r - 1; });
  }
  return slot == 0 && g.inputs(n).size() == 1 && has_fact(g, n, kUnary);
}

std::optional<Match> match_at(const Graph& g, const Uses& uses, NodeId t) {
  auto p = transpose_perm(g, t);
  if (!p || !keeps_last_axis(*p) || is_identity(*p)) return std::nullopt;
  const int64_t r = static_cast<int64_t>(p->size());
  std::vector<int64_t> inv(p->size());
  for (size_t i = 0; i < p->size(); ++i) inv[(*p)[i]] = static_cast<int64_t>(i);
  Match m{t, {}, {}};
  std::vector<ValueId> todo{g.output(t, 0)};
  while (!todo.empty()) {
    ValueId v = todo.back();
    todo.pop_back();
    if (uses.is_graph_output(v) || uses.count(v) == 0) return std::nullopt;
    for (const Use& u : uses.of(v)) {
      if (u.slot == Use::kImplicit) return std::nullopt;
      if (is(g, u.node, "Transpose") && u.slot == 0) {
        auto q = transpose_perm(g, u.node);
        if (!q || *q != inv || uses.is_graph_output(g.output(u.node, 0))) return std::nullopt;
        m.frontier.push_back(u.node);
        continue;
      }
      if (!row_wise(g, u.node, u.slot, r)) return std::nullopt;
      // A node reading two region values (Add(a, a)) would be reached twice: refuse.
      if (std::find(m.region.begin(), m.region.end(), u.node) != m.region.end()) return std::nullopt;
      m.region.push_back(u.node);
      if (m.region.size() > kMaxRegion) return std::nullopt;
      todo.push_back(g.output(u.node, 0));
    }
  }
  if (m.frontier.empty()) return std::nullopt;
  return m;
}

std::vector<Match> analyze(const Graph& g, const Uses& uses, const PassOptions&) {
  std::vector<Match> out;
  for (NodeId t : g.nodes())
    if (is(g, t, "Transpose"))
      if (auto m = match_at(g, uses, t)) out.push_back(std::move(*m));
  return out;
}

bool apply(Edits& e, const Match& m) {
  const Graph& g = e.g;
  if (e.any_touched(m.transpose) || e.any_touched(std::span<const NodeId>(m.region)) ||
      e.any_touched(std::span<const NodeId>(m.frontier)))
    return false;
  // Each region node reads exactly one region value (checked in analyze), and the walk pushed a
  // node only after its region input's producer: `region` is in data-flow order.
  std::vector<std::pair<ValueId, ValueId>> now{{g.output(m.transpose, 0), g.input(m.transpose, 0)}};
  auto mapped = [&](ValueId v) {
    for (auto& [from, to] : now)
      if (from == v) return to;
    return v;
  };
  std::vector<std::vector<NewAttr>> attrs;
  for (NodeId n : m.region) {
    auto a = copy_attrs(g, n);
    if (!a) return false;
    attrs.push_back(std::move(*a));
  }
  for (size_t i = 0; i < m.region.size(); ++i) {
    NodeId n = m.region[i];
    std::vector<ValueId> ins(g.inputs(n).begin(), g.inputs(n).end());
    for (ValueId& v : ins) v = mapped(v);
    ValueId y = e.new_value(str(g.value_name(g.output(n, 0))));
    const NodeId tags[] = {n};
    e.add_node(str(g.op_type(n)), std::move(ins), {y}, std::move(attrs[i]), tags, str(g.domain(n)));
    now.emplace_back(g.output(n, 0), y);
  }
  for (NodeId f : m.frontier) {
    e.replace_uses(g.output(f, 0), mapped(g.input(f, 0)));
    e.kill(f);
  }
  for (NodeId n : m.region) e.kill(n);
  e.kill(m.transpose);
  return true;
}

}  // namespace

ONNXFORGE_PASS(sink_transposes, Match, AccuracyClass::FloatBounded, analyze, apply, {"Transpose"},
               "a last-axis-keeping Transpose whose row-wise readers (MatMul by a matrix, bias Add, last-axis Slice, "
               "unary) all end in its inverse: both go");

}  // namespace onnxforge::passes
