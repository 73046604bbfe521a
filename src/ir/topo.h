#pragma once
#include <vector>

#include "ir/graph.h"

namespace onnxforge {

// Alive nodes in a topological order that keeps the table (file) order wherever the data
// dependencies allow. Subgraph captures count as inputs of the node that owns the subgraph.
// Throws onnxforge::Error naming nodes on a cycle.
std::vector<NodeId> topological_order(const Graph& g);

}  // namespace onnxforge
