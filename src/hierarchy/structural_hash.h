#pragma once
// Name-independent hashes of nodes, for `onnxforge diff`.
//
//   local(n)  op type, domain, attributes (tensor attributes and initializers by content,
//             subgraphs by their own canonical hash) — what the node is;
//   near(n)   local(n) + for every input slot the local hash of its producer and the output
//             index read (or the content hash of an initializer, or the position of a graph
//             input): one Weisfeiler-Lehman round, which localises a difference to the nodes
//             next to it;
//   cone(n)   local(n) + for every input slot cone(producer) and the output index: a Merkle
//             hash of the node's whole upstream cone (the graph is a DAG), so two graphs with
//             equal multisets of cone hashes and equal output hashes compute the same thing
//             from the same inputs and weights, whatever their names;
//   form(n)   cone(n) with floating-point (and large) initializers and tensor attributes hashed
//             by dtype and dims only, small integer ones (shapes, axes) by content: the same
//             graph structure, whatever the weight values.
#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace onnxforge::hier {

struct NodeHashes {
  std::vector<uint64_t> local, near, cone, form;  // indexed by NodeId (dead nodes: 0)
  std::vector<uint64_t> outputs, form_outputs;    // per graph output, in order: cone/form of producer + index
};

NodeHashes hash_graph(const Model& model, const Graph& g);
uint64_t hash_tensor(const Model& model, TensorId t, bool content = true);

}  // namespace onnxforge::hier
