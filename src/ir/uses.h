#pragma once
// Consumers of every value as a CSR index, rebuilt on demand (one pass over the flat input array).
#include <span>
#include <vector>

#include "ir/graph.h"

namespace onnxforge {

struct Use {
  NodeId node;
  uint32_t slot;  // input index, or kImplicit for a read from inside the node's subgraphs
  static constexpr uint32_t kImplicit = 0xffffffffu;
};

class Uses {
 public:
  explicit Uses(const Graph& g);

  // An absent value (invalid id) has no uses, like Graph's readers (graph.h).
  std::span<const Use> of(ValueId v) const {
    if (!v.valid()) return {};
    return {uses_.data() + offsets_[v.index()], offsets_[v.index() + 1] - offsets_[v.index()]};
  }
  uint32_t value_capacity() const { return static_cast<uint32_t>(graph_output_.size()); }
  size_t count(ValueId v) const { return v.valid() ? offsets_[v.index() + 1] - offsets_[v.index()] : 0; }
  // Read by exactly one node input and not a graph output.
  bool single(ValueId v) const { return count(v) == 1 && !graph_output_[v.index()]; }
  bool is_graph_output(ValueId v) const { return v.valid() && graph_output_[v.index()]; }
  // Used at all: by a node (explicitly or from a subgraph) or as a graph output.
  bool used(ValueId v) const { return count(v) > 0 || is_graph_output(v); }

 private:
  std::vector<uint32_t> offsets_;
  std::vector<Use> uses_;
  std::vector<uint8_t> graph_output_;
};

}  // namespace onnxforge
