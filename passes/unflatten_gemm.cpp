// unflatten_gemm — Reshape(x[..., K] → [M, K]) → Gemm(W, b) → Reshape(→ [..., N]) that only
// merged x's leading axes and restores them becomes MatMul(x, Wᵀ) + b on x itself: a Gemm works
// row by row, so the flattening is bookkeeping. Three nodes become two (the Transpose of a
// constant W folds into a deferred weight), and the row-wise MatMul lets a Transpose around it
// cancel (sink_transposes: ViT's out-projection, torch's nn.MultiheadAttention exports the
// out-projection as exactly this chain). Both Reshapes' shapes are checked symbolically
// (head_layout's dims_of), so a Reshape that moves data across rows never matches.   class 1
//
// Class 1: Gemm adds its bias in the epilogue; MatMul + Add is the same sum, which the runtime
// also fuses into the epilogue but need not order identically.
#include "passes/edits.h"
#include "passes/graph_util.h"
#include "passes/head_layout.h"
#include "passes/registry.h"

namespace onnxforge::passes {
namespace {

struct Match {
  NodeId flatten, gemm, unflatten;
};

bool attr_is(const Graph& g, NodeId n, std::string_view name, int64_t want) {
  return g.attr_int(n, name, want) == want;
}

bool float_one(const Graph& g, NodeId n, std::string_view name) {
  const Attr* a = g.attr(n, name);
  return !a || (a->type == AttrType::Float && a->f == 1.0f);
}

std::optional<Match> match_at(const Graph& g, const Uses& uses, NodeId gemm) {
  if (!attr_is(g, gemm, "transA", 0) || !float_one(g, gemm, "alpha") || !float_one(g, gemm, "beta"))
    return std::nullopt;
  if (g.inputs(gemm).size() > 2 && g.input(gemm, 2).valid()) {
    int64_t rc = known_rank(g, g.input(gemm, 2));
    if (rc < 0 || rc > 1) return std::nullopt;  // a [M,N] bias is per row: it needs the flat rows
  }
  ValueId w = g.input(gemm, 1);
  if (attr_is(g, gemm, "transB", 1) && !g.is_constant(w)) return std::nullopt;  // a Transpose per run
  NodeId flatten = producer_of(g, gemm, 0);
  if (!is(g, flatten, "Reshape") || !uses.single(g.output(flatten, 0))) return std::nullopt;
  NodeId unflatten = single_consumer(g, uses, gemm);
  if (!is(g, unflatten, "Reshape") || g.input(unflatten, 0) != g.output(gemm, 0)) return std::nullopt;
  auto x = heads::dims_of(g, g.input(flatten, 0)), flat = heads::dims_of(g, g.output(flatten, 0));
  auto y = heads::dims_of(g, g.output(gemm, 0)), out = heads::dims_of(g, g.output(unflatten, 0));
  if (!x || !flat || !y || !out || x->size() < 3 || flat->size() != 2 || y->size() != 2 || out->size() != x->size())
    return std::nullopt;
  std::span<const SymDim> lead(x->data(), x->size() - 1);
  if ((*flat)[1] != x->back() || (*flat)[0] != product(lead)) return std::nullopt;
  for (size_t i = 0; i + 1 < x->size(); ++i)
    if ((*out)[i] != (*x)[i]) return std::nullopt;
  if (out->back() != (*y)[1]) return std::nullopt;
  return Match{flatten, gemm, unflatten};
}

std::vector<Match> analyze(const Graph& g, const Uses& uses, const PassOptions&) {
  std::vector<Match> out;
  for (NodeId n : g.nodes())
    if (is(g, n, "Gemm"))
      if (auto m = match_at(g, uses, n)) out.push_back(*m);
  return out;
}

bool apply(Edits& e, const Match& m) {
  const Graph& g = e.g;
  if (e.any_touched(m.flatten, m.gemm, m.unflatten)) return false;
  const NodeId tags[] = {m.gemm};
  ValueId w = g.input(m.gemm, 1);
  if (g.attr_int(m.gemm, "transB", 0) == 1) {
    ValueId wt = e.new_value(std::string(str(g.value_name(w))) + "_t");
    e.add_node("Transpose", {w}, {wt}, {NewAttr::Ints("perm", {1, 0})}, tags);
    w = wt;
  }
  ValueId bias = g.inputs(m.gemm).size() > 2 ? g.input(m.gemm, 2) : ValueId{};
  const std::vector<NodeId> group{m.flatten, m.gemm, m.unflatten};
  if (!bias.valid()) return e.replace_with(group, "MatMul", {g.input(m.flatten, 0), w}).valid();
  ValueId mm = e.new_value(std::string(str(g.value_name(g.output(m.gemm, 0)))) + "_matmul");
  e.add_node("MatMul", {g.input(m.flatten, 0), w}, {mm}, {}, tags);
  return e.replace_with(group, "Add", {mm, bias}).valid();
}

}  // namespace

ONNXFORGE_PASS(unflatten_gemm, Match, AccuracyClass::FloatBounded, analyze, apply, {"Gemm"},
               "Reshape → Gemm → Reshape that only flattens and restores the leading axes becomes a MatMul (+ bias "
               "Add) on the unflattened value");

}  // namespace onnxforge::passes
