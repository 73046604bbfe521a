#pragma once
// Edits: the Rewrite batch of one round as the passes see it. Rewrite records the edits (and
// which nodes die, and what a replaced value resolves to); Edits alone decides staleness:
//  - conservative staleness: a node is touched when it is killed, its inputs change, it reads a
//    value being replaced, or it produces a value that something is redirected to (its use count
//    grew, so a "used once" condition checked at analysis time may no longer hold);
//  - per-pass accounting of nodes, initializers and bytes removed;
//  - initializer removal and constants from raw bytes.
#include <initializer_list>
#include <span>
#include <string_view>
#include <vector>

#include "ir/rewrite.h"
#include "ir/uses.h"
#include "passes/pass.h"

namespace onnxforge::passes {

struct Delta {
  int64_t nodes = 0, initializers = 0, bytes = 0;  // removed (negative: added)
};

class Edits {
 public:
  Edits(Graph& g, const Uses& uses, const PassOptions& options);

  Graph& g;
  const Uses& uses;  // as of the start of the round
  const PassOptions& options;

  // Accounting goes to this delta until changed (the driver sets it per pass).
  void charge_to(Delta* d) {
    delta_ = d ? d : &sink_;
    ++epoch_;
  }

  bool touched(NodeId n) const;
  // Touched by an earlier pass of this round (not by the current pass's own matches).
  bool touched_earlier(NodeId n) const;
  // Whether something was redirected to read `v` this round (its use count may have grown).
  bool gained_uses(ValueId v) const { return v.index() < gained_.size() && gained_[v.index()]; }
  // A change outside the Rewrite (node metadata): the round is not quiet.
  void note_change() { other_change_ = true; }
  template <class... N>
  bool any_touched(N... n) const {
    return (... || (n.valid() && touched(n)));
  }
  bool any_touched(std::span<const NodeId> ns) const;

  ValueId new_value(std::string_view hint) { return rw_.new_value(hint); }
  // A value of known type and shape (so later passes and the writer see it).
  ValueId new_typed_value(std::string_view hint, DType t, std::span<const int64_t> dims);
  // A new initializer with bytes the store owns.
  ValueId new_constant(std::string_view hint, DType t, std::span<const int64_t> dims, std::span<const std::byte> bytes);
  // Constants, built one way by every pass (passes/builder.h writes through these): a 1-D int64
  // of `v` (`rank0`: a scalar, v of one element), and a rank-0 value `x` of type `t` (any type
  // scalar_type accepts; float16/bfloat16 rounded to nearest even from the float32 value, as a
  // Cast would).
  ValueId ints_constant(std::string_view hint, const std::vector<int64_t>& v, bool rank0 = false);
  ValueId scalar_constant(std::string_view hint, DType t, double x);
  static bool scalar_type(DType t);
  // A new initializer computed from store tensors only when read (TensorStore::add_deferred).
  ValueId new_deferred_constant(std::string_view hint, DType t, std::span<const int64_t> dims, uint64_t size,
                                TensorRecipe recipe);
  // A new initializer holding an existing tensor (e.g. a Constant node's value).
  ValueId new_initializer(std::string_view hint, TensorId t);
  NodeId add_node(std::string_view op, std::vector<ValueId> inputs, std::vector<ValueId> outputs,
                  std::vector<NewAttr> attrs, std::span<const NodeId> tags_from, std::string_view domain = {},
                  Sym name = {});
  void replace_uses(ValueId from, ValueId to);
  void set_input(NodeId n, size_t i, ValueId v);
  void kill(NodeId n);
  bool killed(NodeId n) const { return rw_.killed(n); }
  // Removes an initializer (and a graph input of the same value, IR < 4) at commit.
  void remove_initializer(ValueId v);

  // ---- actions: the rules every rewrite needs, written once (pass.h has an example)
  // The nodes of `group` (data-flow order, the result last; invalid ids are skipped) become one
  // node `op(inputs)` with `attrs`. Returns invalid and does nothing when a member was touched
  // earlier this round. Otherwise: the new node's output is named after the last member's
  // output 0 and takes over its readers; its tags are the union of the group's; every member
  // whose outputs nothing outside the group reads is killed (one still read elsewhere stays for
  // those readers). Returns the new node.
  NodeId replace_with(std::span<const NodeId> group, std::string_view op, std::vector<ValueId> inputs,
                      std::vector<NewAttr> attrs = {}, std::string_view domain = {});
  NodeId replace_with(std::initializer_list<NodeId> group, std::string_view op, std::vector<ValueId> inputs,
                      std::vector<NewAttr> attrs = {}, std::string_view domain = {}) {
    return replace_with(std::span<const NodeId>(group.begin(), group.size()), op, std::move(inputs), std::move(attrs),
                        domain);
  }
  // Node `n` rebuilt as op(inputs) writing `outputs` (its own or new ones), keeping its name,
  // metadata and tags; `n` dies. The rewrite of a node whose form changed (the opset upgrade).
  NodeId rebuild(NodeId n, std::string_view op, std::vector<ValueId> inputs, std::vector<ValueId> outputs,
                 std::vector<NewAttr> attrs);
  // Node `n` goes away and the readers of its output 0 read `kept` instead. Returns false and
  // does nothing when `n` was touched this round, `kept`'s producer was killed, another output
  // of `n` is read, or `n`'s output is a graph output `kept` cannot take the name of
  // (can_forward in ir/match.h: an analysis should check it too, so it never reports a match
  // that only moves an Identity around).
  bool forward(NodeId n, ValueId kept);
  // Kills `n` when the rewrite just moved the one reader of its output 0 elsewhere: the output
  // had a single reader at the start of the round and is no graph output. Returns whether.
  bool drop_if_unshared(NodeId n);

  bool empty() const { return rw_.empty() && removed_inits_.empty() && !other_change_; }
  int64_t commit();

 private:
  void mark(NodeId n);
  void gain(ValueId v);  // something new reads v: its producer is touched
  Rewrite rw_;
  std::vector<uint32_t> touched_;  // epoch of the pass that touched the node, 0 = untouched
  std::vector<uint8_t> gained_;
  uint32_t epoch_ = 1;
  bool other_change_ = false;
  std::vector<ValueId> removed_inits_;
  Delta* delta_ = nullptr;
  Delta sink_;
};

// A FunctionProto holds no initializers: the constants a rewrite made in a function body (a
// folded value, a fused node's parameter, an upgrade adapter's axes) become Constant nodes there
// once the rewriting is done (each round of the passes would fold them again). Returns how many.
size_t constants_as_nodes(Graph& g);

}  // namespace onnxforge::passes
