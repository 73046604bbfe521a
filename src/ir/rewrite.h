#pragma once
// A batch of graph edits committed at once.
//
//   Rewrite rw(g);
//   ValueId y = rw.new_value("fused");
//   rw.add_node("Gemm", {a, w, b}, {y}, {}, /*tags_from=*/{matmul, add});
//   rw.replace_uses(g.output(add, 0), y);   // consumers of add's output read y
//   rw.kill(matmul); rw.kill(add);
//   rw.commit();                            // applies, then compacts the tables
//
// Guarantees on commit:
// - graph input and output names never change: replacing a graph output renames the new value
//   to the output's name, or inserts an Identity when the new value is itself an input,
//   initializer, another output or an outer-scope value;
// - subgraph captures of a replaced value follow the replacement;
// - a killed node's outputs that are still read somewhere is an error (a pass bug), reported
//   with the node and value names;
// - handles (NodeId, ValueId) taken before commit are invalid afterwards.
// Which pending matches an edit invalidates ("touched") is the passes' business (passes/edits.h).
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "ir/uses.h"

namespace onnxforge {

class Rewrite {
 public:
  explicit Rewrite(Graph& g) : g_(g) {}

  Graph& graph() const { return g_; }

  // A new value named after `hint`, unique in the model's scope chain.
  ValueId new_value(std::string_view hint);
  // A new initializer holding tensor `t` (named after `hint`).
  ValueId new_initializer(std::string_view hint, TensorId t);
  // A new node. Its hierarchy tags are the union of `tags_from`'s tags; its name is `name`, or
  // fresh after its op type when empty. An output may be one whose producer this batch kills (a
  // node rebuilt in place keeps its outputs).
  NodeId add_node(std::string_view op_type, std::vector<ValueId> inputs, std::vector<ValueId> outputs,
                  std::vector<NewAttr> attrs = {}, std::span<const NodeId> tags_from = {}, std::string_view domain = {},
                  Sym name = {});
  // Every reader of `from` (nodes, subgraph captures, graph outputs) reads `to` instead —
  // including nodes added later in this batch. Applied at commit.
  void replace_uses(ValueId from, ValueId to);
  void set_input(NodeId n, size_t i, ValueId v);
  void kill(NodeId n);

  bool killed(NodeId n) const;
  // The value readers of `v` will read after commit (replacements followed).
  ValueId resolve(ValueId v) const;
  bool empty() const { return kills_.empty() && replacements_.empty() && input_edits_.empty() && added_.empty(); }

  // Applies everything and compacts the tables. Returns the number of nodes removed (net).
  int64_t commit();

 private:
  void apply_input_edits();
  void apply_replacements();
  void keep_output_names();
  void check_no_dangling_reads() const;

  Graph& g_;
  std::vector<NodeId> kills_, added_;
  std::vector<uint8_t> killed_;
  std::unordered_map<ValueId, ValueId> replacements_;
  std::vector<std::tuple<NodeId, size_t, ValueId>> input_edits_;
};

// Removes dead nodes and unreferenced values from `g`'s tables and renumbers handles
// (also in child subgraphs that point into `g`). Called by Rewrite::commit.
void compact(Graph& g);

// A fresh value name based on `hint`, unused in `g` and in its enclosing graphs: `hint__k`, k from
// the model's own counter (Model::next_fresh_name), so the same model rewritten the same way gets
// the same names whatever else the process did.
Sym fresh_name(const Graph& g, std::string_view hint);

}  // namespace onnxforge
