#pragma once
// Builder: the one way a rewrite writes nodes and constants, over the round's Edits batch. The
// fusions' apply functions, the decompositions (the chain one standard op becomes) and the opset
// upgrade's adapters all write through it:
//   - every node it adds carries the union of the module tags of the nodes it replaces (`tags`),
//     so hierarchies survive every rewrite;
//   - constants are built one way (Edits::ints_constant / scalar_constant / new_constant); in a
//     function body they become Constant nodes when the rewrite is done (constants_as_nodes);
//   - the ops whose form changed between opsets (ReduceMean, Unsqueeze, Slice) are written in
//     the form of the model's opset.
// Value names are fresh (ir/rewrite.h: fresh_name) and follow `prefix`: a decomposition's values
// are named after the op it replaces ("ln/Mul_3__12"), a fusion's after what they hold.
//
//   Builder b(e, m.nodes);                                      // tags of the replaced block
//   ValueId c = b.named("rope_cos", "Cos", {freqs});
//   ValueId y = b.node("Mul", {x, b.scalar("half", DType::Float, 0.5)});
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "passes/edits.h"

namespace onnxforge::passes {

class Builder {
 public:
  // Nodes carrying the tags of `tags` (the replaced nodes); value names start with `prefix/`
  // (empty: just the hint).
  Builder(Edits& e, std::span<const NodeId> tags, std::string prefix = {});
  Builder(Edits& e, std::initializer_list<NodeId> tags, std::string prefix = {})
      : Builder(e, std::span<const NodeId>(tags.begin(), tags.size()), std::move(prefix)) {}
  // Nodes replacing `from`: its tags, value names after its name (what a decomposition or an
  // upgrade adapter writes).
  Builder(Edits& e, NodeId from);

  Edits& edits() const { return e_; }
  int64_t opset() const { return e_.g.model().opset(""); }
  // Nodes this builder added (constants in function bodies are counted when they become nodes).
  size_t added() const { return added_; }

  // ---- nodes
  // op(inputs) with one new output, named `prefix/op_k`.
  ValueId node(std::string_view op, std::vector<ValueId> inputs, std::vector<NewAttr> attrs = {});
  // op(inputs) with one new output named after `hint`.
  ValueId named(std::string_view hint, std::string_view op, std::vector<ValueId> inputs,
                std::vector<NewAttr> attrs = {});
  // op(inputs) writing `outputs` (new values, or values whose producer this round kills).
  NodeId add(std::string_view op, std::vector<ValueId> inputs, std::vector<ValueId> outputs,
             std::vector<NewAttr> attrs = {}, std::string_view domain = {});
  // A new value named `prefix/hint`.
  ValueId value(std::string_view hint);

  // ---- constants (Edits' constant builders, named `prefix/hint`)
  // A 1-D int64 of `v` (`rank0`: a scalar, v of one element).
  ValueId ints(std::string_view hint, const std::vector<int64_t>& v, bool rank0 = false);
  // A rank-0 value of type `t` (Edits::scalar_type: float, integer and bool types).
  ValueId scalar(std::string_view hint, DType t, double x);
  // A constant of type `t` (Bool, Float or Int64) and shape `dims` from row-major values.
  ValueId tensor(std::string_view hint, DType t, const std::vector<int64_t>& dims, const std::vector<double>& values);
  // A constant from raw little-endian bytes.
  ValueId bytes(std::string_view hint, DType t, std::span<const int64_t> dims, std::span<const std::byte> data);

  // ---- ops whose form changed with the opset, in the model's form
  // ReduceMean over `axes`, keepdims (axes an attribute < 18, an input >= 18).
  ValueId reduce_mean(ValueId x, const std::vector<int64_t>& axes);
  // Unsqueeze axes as an attribute (< 13) or an input (>= 13).
  ValueId unsqueeze(ValueId x, const std::vector<int64_t>& axes);
  // Slice starts/ends/axes/steps as inputs (>= 10; the passes that slice refuse lower opsets).
  ValueId slice(ValueId x, int64_t axis, int64_t start, int64_t end, int64_t step = 1);
  ValueId cast(ValueId x, DType to) { return node("Cast", {x}, {NewAttr::Int("to", static_cast<int64_t>(to))}); }
  ValueId reshape(ValueId x, const std::vector<int64_t>& shape) { return node("Reshape", {x, ints("shape", shape)}); }
  ValueId transpose(ValueId x, const std::vector<int64_t>& perm) {
    return node("Transpose", {x}, {NewAttr::Ints("perm", perm)});
  }
  // Element `i` (negative: from the back) of Shape(x), as a 1-D int64 of one element.
  ValueId dim(ValueId x, int64_t i) {
    return slice(node("Shape", {x}), 0, i, i == -1 ? std::numeric_limits<int64_t>::max() : i + 1);
  }

  // ---- replacing `from` (the constructor's node)
  // The readers of output `i` of `from` read `v` (a graph output keeps its name).
  void bind(size_t i, ValueId v);
  // The chain's last node, op(inputs): its output is named after `from`'s output 0 and takes
  // over its readers (and its place among the graph outputs); `from` goes.
  void finish(std::string_view op, std::vector<ValueId> inputs, std::vector<NewAttr> attrs = {});
  // `from` rewritten in place as op(inputs) writing `outputs` (default: its own, so readers,
  // types and graph outputs stay as they are), keeping its name and metadata; trailing absent
  // inputs are dropped. Returns the new node.
  NodeId rebuild(std::string_view op, std::vector<ValueId> inputs, std::vector<NewAttr> attrs,
                 std::optional<std::vector<ValueId>> outputs = std::nullopt);

 private:
  std::string name(std::string_view hint) const {
    return prefix_.empty() ? std::string(hint) : prefix_ + "/" + std::string(hint);
  }
  Edits& e_;
  std::vector<NodeId> tags_;
  NodeId from_;
  std::string prefix_;
  int k_ = 0;
  size_t added_ = 0;
};

}  // namespace onnxforge::passes
