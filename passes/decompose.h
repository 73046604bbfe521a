#pragma once
// What the decompose_* passes share: building a chain of primitive nodes that replaces one
// standard op (LayerNormalization, RMSNormalization, Gelu, Swish, RotaryEmbedding, Attention) at
// the model's own opset, for a --target that lacks the op (passes/targets.h). The inverse of each
// fusion.
//
// Verification stays independent: these passes find their node by op type alone and share no
// matcher with the fusions (passes/fuse_*.cpp) or with the runtime's fusions of decomposed
// patterns (runtime/); dtype_of / rank_of (ir/match.h) are only type look-ups.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/uses.h"
#include "passes/builder.h"
#include "passes/edits.h"
#include "passes/pass.h"

namespace onnxforge::passes::decompose {

// The analyze of every decomposition: each node of `op` that `match` takes (nullopt: the node is
// left alone, e.g. a type or attribute its chain does not compute).
template <class M>
std::vector<M> analyze_op(const Graph& g, const Uses& u, std::string_view op,
                          std::optional<M> (*match)(const Graph&, const Uses&, NodeId)) {
  std::vector<M> out;
  for (NodeId n : g.nodes())
    if (g.is_op(n, op))
      if (std::optional<M> m = match(g, u, n)) out.push_back(std::move(*m));
  return out;
}

// The match of a decomposition whose refusal (rotary_refusal, attention_refusal below) says why
// a node is left: the node itself when there is no reason.
template <std::string (*refusal)(const Graph&, NodeId)>
std::optional<NodeId> unrefused(const Graph& g, const Uses&, NodeId n) {
  if (!refusal(g, n).empty()) return std::nullopt;
  return n;
}

// The axes axis..rank-1 of a normalization op's `axis` attribute: negative when the axis is
// (they need no rank), else from the known rank; empty when the rank is unknown.
std::vector<int64_t> trailing_axes_of(const Graph& g, ValueId x, int64_t axis);

// The static size of dim `i` of `v` (negative counts from the back), or -1.
int64_t static_dim(const Graph& g, ValueId v, int64_t i);

// Whether output `i` of `n` exists and is read (by a node or as a graph output).
bool output_read(const Graph& g, const Uses& u, NodeId n, size_t i);

// Why decompose_rotary_embedding / decompose_attention leave node `n` alone, "" when they
// decompose it: one reason, said in optimize's report for every node a --target lacks and
// that is left in the model (targets.h: left_for_target).
std::string rotary_refusal(const Graph& g, NodeId n);
std::string attention_refusal(const Graph& g, NodeId n);

// Float16 and bfloat16: the decompositions compute in float (the ops' stash_type=1 semantics).
bool is_half_type(DType t);

}  // namespace onnxforge::passes::decompose

// The line that ends a decomposition file: ONNXFORGE_PASS (pass.h) with the analyze every
// decomposition shares, decompose::analyze_op over the nodes of OP (also the pass's anchor).
#define ONNXFORGE_DECOMPOSITION(NAME, Match, accuracy, OP, match, apply, summary)                                      \
  ONNXFORGE_PASS(                                                                                                      \
      NAME, Match, accuracy,                                                                                           \
      [](const Graph& g, const Uses& u, const PassOptions&) { return decompose::analyze_op<Match>(g, u, OP, match); }, \
      apply, {OP}, summary)
