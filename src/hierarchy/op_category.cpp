#include "hierarchy/op_category.h"

#include <string>
#include <unordered_map>

namespace onnxforge::hier {
namespace {

const std::unordered_map<std::string_view, OpCategory>& table() {
  static const auto* t = [] {
    auto* m = new std::unordered_map<std::string_view, OpCategory>;
    auto put = [&](OpCategory c, std::initializer_list<std::string_view> ops) {
      for (auto op : ops) (*m)[op] = c;
    };
    put(OpCategory::Math, {"Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "MatMul", "Gemm", "Neg", "Abs", "Exp", "Log",
                           "Reciprocal", "Erf", "Floor", "Ceil", "Round", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan",
                           "Sinh", "Cosh", "Tanh", "Max", "Min", "Sum", "Mean", "Mod", "Sign", "Einsum",
                           "MatMulInteger", "QLinearMatMul", "Det", "BitShift", "FusedMatMul"});
    put(OpCategory::Activation, {"Relu", "Sigmoid", "Softmax", "LogSoftmax", "Gelu", "LeakyRelu", "Elu", "Selu",
                                 "HardSigmoid", "HardSwish", "Softplus", "Softsign", "PRelu", "Mish", "Clip",
                                 "ThresholdedRelu", "Celu", "Hardmax", "QuickGelu", "FastGelu", "BiasGelu"});
    put(OpCategory::NNLayer, {"Conv", "ConvTranspose", "ConvInteger", "QLinearConv", "BatchNormalization",
                              "LayerNormalization", "SimplifiedLayerNormalization", "SkipLayerNormalization",
                              "InstanceNormalization", "GroupNormalization", "RMSNormalization", "MaxPool",
                              "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LpPool", "GlobalLpPool", "LRN",
                              "Dropout", "RNN", "LSTM", "GRU", "Attention", "MultiHeadAttention",
                              "LpNormalization", "MeanVarianceNormalization", "RotaryEmbedding"});
    put(OpCategory::Reduction, {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                                "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin",
                                "CumSum", "TopK"});
    put(OpCategory::TensorManipulation,
        {"Reshape", "Transpose", "Concat", "Split", "Slice", "Gather", "GatherElements", "GatherND", "Scatter",
         "ScatterElements", "ScatterND", "Squeeze", "Unsqueeze", "Flatten", "Expand", "Tile", "Pad", "Shape", "Size",
         "Range", "Identity", "DepthToSpace", "SpaceToDepth", "Resize", "Upsample", "OneHot", "NonZero", "Trilu",
         "Compress", "ReverseSequence", "SplitToSequence", "ConcatFromSequence", "SequenceAt", "SequenceConstruct",
         "EyeLike", "Unique", "CenterCropPad", "Col2Im", "GridSample"});
    put(OpCategory::Constant, {"Constant", "ConstantOfShape", "RandomNormal", "RandomUniform", "RandomNormalLike",
                               "RandomUniformLike"});
    put(OpCategory::Cast, {"Cast", "CastLike", "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"});
    put(OpCategory::ComparisonLogic, {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or",
                                      "Not", "Xor", "Where", "IsNaN", "IsInf", "BitwiseAnd", "BitwiseOr",
                                      "BitwiseNot", "BitwiseXor"});
    put(OpCategory::ControlFlow, {"If", "Loop", "Scan"});
    return m;
  }();
  return *t;
}

}  // namespace

OpCategory categorize(std::string_view, std::string_view op_type) {
  auto it = table().find(op_type);
  return it == table().end() ? OpCategory::Other : it->second;
}

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
