#pragma once
// Copying parts of a Model into another Model without copying tensor bytes: tensors are added
// to the destination's store pointing at the same mapped bytes (the destination shares the
// source's `files`), nodes are copied with their attributes, subgraphs, metadata and tags.
#include <string_view>
#include <unordered_map>

#include "ir/graph.h"

namespace onnxforge::hier {

class ModelCopier {
 public:
  ModelCopier(const Model& from, Model& to);

  TensorId tensor(TensorId t);
  // The destination value for `v` of source graph `from` in destination graph `to`, created
  // on first use with v's name and type.
  ValueId value(const Graph& from, ValueId v, Graph& to);
  // Copies node `n` of `from` into `to` (inputs/outputs through value()).
  NodeId node(const Graph& from, NodeId n, Graph& to);
  // Makes `v` an initializer of `to` sharing the source tensor.
  void initializer(const Graph& from, ValueId v, Graph& to);
  // Whole graph `from` as a new subgraph of `parent` owned by node `owner`, named like `from`
  // (`fallback_name` when `from` has no name). Captures of `from` become captures of the copy
  // reading the copies of their outer values, which must be copied into `parent` (they are
  // created there on first use otherwise).
  GraphId subgraph(const Graph& from, GraphId parent, NodeId owner, std::string_view fallback_name = {});
  void copy_header();

  uint64_t shared_bytes() const { return shared_bytes_; }

 private:
  const Model& from_;
  Model& to_;
  std::unordered_map<uint32_t, TensorId> tensors_;
  // (source graph, source value) -> destination value, per destination graph
  std::unordered_map<uint64_t, ValueId> values_;
  uint64_t shared_bytes_ = 0;
};

}  // namespace onnxforge::hier
