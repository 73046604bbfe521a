#pragma once
// What the decompose_* passes share: building a chain of primitive nodes that replaces one
// standard op (LayerNormalization, RMSNormalization, Gelu, Swish, RotaryEmbedding, Attention) at
// the model's own opset, for a --target that lacks the op (passes/targets.h). The inverse of each
// fusion.
//
// Verification stays independent: these passes find their node by op type alone and share no
// matcher with the fusions (passes/fuse_*.cpp) or with the runtime's fusions of decomposed
// patterns (runtime/); dtype_of / rank_of (ir/match.h) are only type look-ups.
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/uses.h"
#include "passes/edits.h"
#include "passes/pass.h"

namespace onnxforge::passes::decompose {

// The nodes one standard op becomes, written in data-flow order. Every node carries the tags of
// `from` (the op it replaces), so module hierarchies survive the round trip.
class Chain {
 public:
  Chain(Edits& e, NodeId from) : e_(e), from_(from), prefix_(std::string(str(e.g.node_name(from)))) {}
  // op(inputs) with one new output.
  ValueId node(std::string_view op, std::vector<ValueId> inputs, std::vector<NewAttr> attrs = {});
  ValueId node_named(std::string_view name, std::string_view op, std::vector<ValueId> inputs,
                     std::vector<NewAttr> attrs);
  // A rank-0 constant of type `t` (Float, Double, Float16, BFloat16).
  ValueId scalar(std::string_view hint, DType t, double v);
  // ReduceMean over `axes`, keepdims, in the form of the model's opset (attribute < 18, input >= 18).
  ValueId reduce_mean(ValueId x, const std::vector<int64_t>& axes);
  ValueId cast(ValueId x, DType to) { return node("Cast", {x}, {NewAttr::Int("to", static_cast<int64_t>(to))}); }
  // A 1-D int64 constant.
  ValueId ints(std::string_view hint, const std::vector<int64_t>& v);
  // A constant of type `t` (Bool, Float or Int64) and shape `dims` from row-major values.
  ValueId tensor(std::string_view hint, DType t, const std::vector<int64_t>& dims, const std::vector<double>& values);
  // The ops whose form changed with the opset, in the model's form: Unsqueeze axes as an
  // attribute (< 13) or an input (>= 13); Slice starts/ends/axes/steps as inputs (>= 10; the
  // passes that slice refuse lower opsets).
  ValueId unsqueeze(ValueId x, const std::vector<int64_t>& axes);
  ValueId slice(ValueId x, int64_t axis, int64_t start, int64_t end, int64_t step = 1);
  ValueId reshape(ValueId x, const std::vector<int64_t>& shape) { return node("Reshape", {x, ints("shape", shape)}); }
  ValueId transpose(ValueId x, const std::vector<int64_t>& perm) {
    return node("Transpose", {x}, {NewAttr::Ints("perm", perm)});
  }
  // Element `i` (negative: from the back) of Shape(x), as a 1-D int64 of one element.
  ValueId dim(ValueId x, int64_t i) {
    return slice(node("Shape", {x}), 0, i, i == -1 ? std::numeric_limits<int64_t>::max() : i + 1);
  }
  int64_t opset() const { return e_.g.model().opset(""); }
  // The readers of output `i` of the replaced op read `v` (a graph output keeps its name).
  void bind(size_t i, ValueId v);
  // The chain's last node, op(inputs): its output is named after the replaced op's output 0 and
  // takes over its readers (and its place among the graph outputs); the replaced op goes.
  void finish(std::string_view op, std::vector<ValueId> inputs, std::vector<NewAttr> attrs = {});

 private:
  Edits& e_;
  NodeId from_;
  std::string prefix_;
  int k_ = 0;
};

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
