#pragma once
// What the decompose_* passes share: building a chain of primitive nodes that replaces one
// standard op (LayerNormalization, RMSNormalization, Gelu, Swish) at the model's own opset, for a
// --target that lacks the op (passes/targets.h). The inverse of each fusion.
//
// Verification stays independent: these passes find their node by op type alone and share no
// matcher with the fusions (passes/fuse_*.cpp) or with the runtime's fusions of decomposed
// patterns (runtime/); pattern::dtype_of / rank_of are only type look-ups.
#include <string>
#include <vector>

#include "passes/edits.h"

namespace onnxforge::passes::decompose {

// The nodes one standard op becomes, written in data-flow order. Every node carries the tags of
// `from` (the op it replaces), so module hierarchies survive the round trip.
class Chain {
 public:
  Chain(Edits& e, NodeId from) : e_(e), from_(from), prefix_(std::string(str(e.g.node_name(from)))) {}
  // op(inputs) with one new output.
  ValueId node(std::string_view op, std::vector<ValueId> inputs, std::vector<NewAttr> attrs = {});
  ValueId node_named(std::string_view name, std::string_view op, std::vector<ValueId> inputs, std::vector<NewAttr> attrs);
  // A rank-0 constant of type `t` (Float, Double, Float16, BFloat16).
  ValueId scalar(std::string_view hint, DType t, double v);
  // ReduceMean over `axes`, keepdims, in the form of the model's opset (attribute < 18, input >= 18).
  ValueId reduce_mean(ValueId x, const std::vector<int64_t>& axes);
  ValueId cast(ValueId x, DType to) { return node("Cast", {x}, {NewAttr::Int("to", static_cast<int64_t>(to))}); }
  // The chain's last node, op(inputs): its output is named after the replaced op's output 0 and
  // takes over its readers (and its place among the graph outputs); the replaced op goes.
  void finish(std::string_view op, std::vector<ValueId> inputs, std::vector<NewAttr> attrs = {});

 private:
  Edits& e_;
  NodeId from_;
  std::string prefix_;
  int k_ = 0;
};

// The axes axis..rank-1 of a normalization op's `axis` attribute: negative when the axis is
// (they need no rank), else from the known rank; empty when the rank is unknown.
std::vector<int64_t> trailing_axes_of(const Graph& g, ValueId x, int64_t axis);

// Float16 and bfloat16: the decompositions compute in float (the ops' stash_type=1 semantics).
bool is_half_type(DType t);

}  // namespace onnxforge::passes::decompose
