#include "hierarchy/op_category.h"

#include "ir/op_traits.h"

namespace onnxforge::hier {

OpCategory categorize(std::string_view, std::string_view op_type) { return op_category(op_type); }

std::string_view category_name(OpCategory c) {
  switch (c) {
    case OpCategory::Math: return "math";
    case OpCategory::Activation: return "activation";
    case OpCategory::NNLayer: return "nn-layer";
    case OpCategory::Reduction: return "reduction";
    case OpCategory::TensorManipulation: return "tensor-manipulation";
    case OpCategory::Constant: return "constant";
    case OpCategory::Cast: return "cast";
    case OpCategory::ComparisonLogic: return "comparison-logic";
    case OpCategory::ControlFlow: return "control-flow";
    case OpCategory::Other: return "other";
    case OpCategory::kCount: break;
  }
  return "?";
}

bool is_compute(OpCategory c) {
  return c == OpCategory::Math || c == OpCategory::Activation || c == OpCategory::NNLayer || c == OpCategory::Reduction;
}

std::optional<double> category_threshold(OpCategory c) {
  if (is_compute(c)) return 0.95;
  if (c == OpCategory::TensorManipulation) return 0.85;
  return std::nullopt;
}

}  // namespace onnxforge::hier
