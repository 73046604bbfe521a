#pragma once
// The one thing passes need from the runtime: "evaluate this node on these constants".
// fold_constants receives a NodeEvaluator; runtime_evaluator() adapts rt::evaluate_node.
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "ir/graph.h"

namespace onnxforge::passes {

// A constant tensor: dtype, dims and bytes, kept alive by `hold` when it owns them.
struct ConstTensor {
  DType dtype = DType::Undefined;  // Undefined: an absent optional input
  std::vector<int64_t> dims;
  const std::byte* data = nullptr;
  size_t size = 0;  // bytes
  std::shared_ptr<const void> hold;
  TensorId tensor;  // the store tensor this is a view of (data is null while it is deferred)
  // A result recorded as a recipe over store tensors instead of computed (a weight transpose):
  // adopted as a deferred tensor, computed only if something reads it.
  std::shared_ptr<const TensorRecipe> pending;
  std::span<const std::byte> bytes() const { return {data, size}; }
  // Makes `data` valid: computes a deferred store tensor or a pending recipe.
  void resolve(const TensorStore& ts);
};

struct NodeEvaluator {
  // Whether `evaluate` can run this node (kernel exists, no outer-scope reads...).
  std::function<bool(const Graph&, NodeId)> supports;
  // Outputs in order; throws onnxforge::Error when it cannot.
  std::function<std::vector<ConstTensor>(const Graph&, NodeId, std::span<const ConstTensor>)> evaluate;
};

// The runtime's kernels (rt::evaluate_node), or nullptr when built without the runtime.
const NodeEvaluator* runtime_evaluator();

// Transpose node `n` of the constant `x` as a recipe (ConstTensor::pending): nothing is read
// until the result is. fold_constants records large weight transposes this way; the audit folds
// every weight transpose this way, so the projections it counts read constant weights as they
// do in `optimize` without a weight page being read. nullopt when `n` is no Transpose of it.
std::optional<ConstTensor> transpose_recipe(const Graph& g, NodeId n, const ConstTensor& x);

// A view of a stored tensor (initializer or Constant attribute) as a ConstTensor.
ConstTensor view_of(const Model& m, TensorId t);

}  // namespace onnxforge::passes
