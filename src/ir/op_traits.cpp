#include "ir/op_traits.h"

#include <string>
#include <unordered_map>

namespace onnxforge {

namespace {

constexpr std::string_view kMicrosoft = "com.microsoft";
constexpr OpCategory Math = OpCategory::Math, Act = OpCategory::Activation, NN = OpCategory::NNLayer,
                     Red = OpCategory::Reduction, Tensor = OpCategory::TensorManipulation, Const = OpCategory::Constant,
                     Cast = OpCategory::Cast, Logic = OpCategory::ComparisonLogic, Flow = OpCategory::ControlFlow,
                     Other = OpCategory::Other;

// One row per op, sorted by name. kUnary marks the elementwise unary ops whose output keeps the
// input's type (Identity and Not included; IsNaN, IsInf and Cast not). Categories are those of the
// hierarchy's coverage table.
const OpTraits kTable[] = {
    {"Abs", Math, kUnary},
    {"Acos", Math, kUnary},
    {"Acosh", Math, kUnary},
    {"Add", Math, kCommutative, 0.0},
    {"And", Logic, kCommutative},
    {"ArgMax", Red, 0},
    {"ArgMin", Red, 0},
    {"Asin", Math, kUnary},
    {"Asinh", Math, kUnary},
    {"Atan", Math, kUnary},
    {"Atanh", Math, kUnary},
    {"Attention", NN, 0},
    {"AveragePool", NN, 0},
    {"BatchNormalization", NN, 0},
    {"Bernoulli", Other, kRandom},
    {"BiasGelu", Act, 0, {}, kMicrosoft},
    {"BitShift", Math, 0},
    {"BitwiseAnd", Logic, kCommutative},
    {"BitwiseNot", Logic, kUnary},
    {"BitwiseOr", Logic, kCommutative},
    {"BitwiseXor", Logic, kCommutative},
    {"BlackmanWindow", Other, 0},
    {"Cast", Cast, 0},
    {"CastLike", Cast, 0},
    {"Ceil", Math, kUnary},
    {"Celu", Act, kUnary},
    {"CenterCropPad", Tensor, 0},
    {"Clip", Act, kEpilogue},
    {"Col2Im", Tensor, 0},
    {"Compress", Tensor, 0},
    {"Concat", Tensor, 0},
    {"ConcatFromSequence", Tensor, 0},
    {"Constant", Const, kNoFold},
    {"ConstantOfShape", Const, 0},
    {"Conv", NN, 0},
    {"ConvInteger", NN, 0},
    {"ConvTranspose", NN, 0},
    {"Cos", Math, kUnary},
    {"Cosh", Math, kUnary},
    {"CumSum", Red, 0},
    {"DepthToSpace", Tensor, 0},
    {"DequantizeLinear", Cast, kNoFold},
    {"Det", Math, 0},
    {"Div", Math, 0, 1.0},
    {"Dropout", NN, 0},
    {"DynamicQuantizeLinear", Cast, kNoFold},
    {"DynamicQuantizeMatMul", Math, 0, {}, kMicrosoft},
    {"Einsum", Math, 0},
    {"Elu", Act, kUnary},
    {"Equal", Logic, kCommutative},
    {"Erf", Math, kUnary},
    {"Exp", Math, kUnary},
    {"Expand", Tensor, 0},
    {"EyeLike", Tensor, 0},
    {"FastGelu", Act, 0, {}, kMicrosoft},
    {"Flatten", Tensor, 0},
    {"Floor", Math, kUnary},
    {"FusedMatMul", Math, 0, {}, kMicrosoft},
    {"GRU", NN, 0},
    {"Gather", Tensor, 0},
    {"GatherElements", Tensor, 0},
    {"GatherND", Tensor, 0},
    {"Gelu", Act, kUnary | kEpilogue},
    {"Gemm", Math, 0},
    {"GlobalAveragePool", NN, 0},
    {"GlobalLpPool", NN, 0},
    {"GlobalMaxPool", NN, 0},
    {"Greater", Logic, 0},
    {"GreaterOrEqual", Logic, 0},
    {"GridSample", Tensor, 0},
    {"GroupNormalization", NN, 0},
    {"HammingWindow", Other, 0},
    {"HannWindow", Other, 0},
    {"HardSigmoid", Act, kUnary | kEpilogue},
    {"HardSwish", Act, kUnary | kEpilogue},
    {"Hardmax", Act, 0},
    {"Identity", Tensor, kUnary},
    {"If", Flow, 0},
    {"InstanceNormalization", NN, 0},
    {"IsInf", Logic, 0},
    {"IsNaN", Logic, 0},
    {"LRN", NN, 0},
    {"LSTM", NN, 0},
    {"LayerNormalization", NN, 0},
    {"LeakyRelu", Act, kUnary | kEpilogue},
    {"Less", Logic, 0},
    {"LessOrEqual", Logic, 0},
    {"Log", Math, kUnary},
    {"LogSoftmax", Act, 0},
    {"Loop", Flow, 0},
    {"LpNormalization", NN, 0},
    {"LpPool", NN, 0},
    {"MatMul", Math, 0},
    {"MatMulInteger", Math, 0},
    {"MatMulIntegerToFloat", Math, 0, {}, kMicrosoft},
    {"Max", Math, kCommutative},
    {"MaxPool", NN, 0},
    {"Mean", Math, kCommutative},
    {"MeanVarianceNormalization", NN, 0},
    {"Min", Math, kCommutative},
    {"Mish", Act, kUnary},
    {"Mod", Math, 0},
    {"Mul", Math, kCommutative, 1.0},
    {"MultiHeadAttention", NN, 0, {}, kMicrosoft},
    {"Multinomial", Other, kRandom},
    {"Neg", Math, kUnary},
    {"NegativeLogLikelihoodLoss", Other, 0},
    {"NonMaxSuppression", Other, 0},
    {"NonZero", Tensor, 0},
    {"Not", Logic, kUnary},
    {"OneHot", Tensor, 0},
    {"Optional", Other, kNoFold},
    {"OptionalGetElement", Other, kNoFold},
    {"OptionalHasElement", Other, 0},
    {"Or", Logic, kCommutative},
    {"PRelu", Act, 0},
    {"Pad", Tensor, 0},
    {"Pow", Math, 0},
    {"QGemm", Math, 0, {}, kMicrosoft},
    {"QLinearAdd", Math, 0, {}, kMicrosoft},
    {"QLinearAveragePool", NN, 0, {}, kMicrosoft},
    {"QLinearConcat", Tensor, 0, {}, kMicrosoft},
    {"QLinearConv", NN, 0},
    {"QLinearGlobalAveragePool", NN, 0, {}, kMicrosoft},
    {"QLinearLeakyRelu", Act, 0, {}, kMicrosoft},
    {"QLinearMatMul", Math, 0},
    {"QLinearMul", Math, 0, {}, kMicrosoft},
    {"QLinearSigmoid", Act, 0, {}, kMicrosoft},
    {"QLinearSoftmax", Act, 0, {}, kMicrosoft},
    {"QLinearWhere", Math, 0, {}, kMicrosoft},
    {"QuantizeLinear", Cast, kNoFold},
    {"QuickGelu", Act, 0, {}, kMicrosoft},
    {"RMSNormalization", NN, 0},
    {"RNN", NN, 0},
    {"RandomNormal", Const, kRandom},
    {"RandomNormalLike", Const, kRandom},
    {"RandomUniform", Const, kRandom},
    {"RandomUniformLike", Const, kRandom},
    {"Range", Tensor, 0},
    {"Reciprocal", Math, kUnary},
    {"ReduceL1", Red, 0},
    {"ReduceL2", Red, 0},
    {"ReduceLogSum", Red, 0},
    {"ReduceLogSumExp", Red, 0},
    {"ReduceMax", Red, 0},
    {"ReduceMean", Red, 0},
    {"ReduceMin", Red, 0},
    {"ReduceProd", Red, 0},
    {"ReduceSum", Red, 0},
    {"ReduceSumSquare", Red, 0},
    {"Relu", Act, kUnary | kEpilogue},
    {"Reshape", Tensor, 0},
    {"Resize", Tensor, 0},
    {"ReverseSequence", Tensor, 0},
    {"RoiAlign", Other, 0},
    {"RotaryEmbedding", NN, 0},
    {"Round", Math, kUnary},
    {"Scan", Flow, 0},
    {"Scatter", Tensor, 0},
    {"ScatterElements", Tensor, 0},
    {"ScatterND", Tensor, 0},
    {"Selu", Act, kUnary},
    {"SequenceAt", Tensor, kNoFold},
    {"SequenceConstruct", Tensor, kNoFold},
    {"SequenceEmpty", Tensor, kNoFold},
    {"SequenceErase", Tensor, kNoFold},
    {"SequenceInsert", Tensor, kNoFold},
    {"SequenceLength", Tensor, kNoFold},
    {"SequenceMap", Tensor, kNoFold},
    {"Shape", Tensor, 0},
    {"Shrink", Act, kUnary},
    {"Sigmoid", Act, kUnary | kEpilogue},
    {"Sign", Math, kUnary},
    {"SimplifiedLayerNormalization", NN, 0},
    {"Sin", Math, kUnary},
    {"Sinh", Math, kUnary},
    {"Size", Tensor, 0},
    {"SkipLayerNormalization", NN, 0, {}, kMicrosoft},
    {"Slice", Tensor, 0},
    {"Softmax", Act, 0},
    {"SoftmaxCrossEntropyLoss", Other, 0},
    {"Softplus", Act, kUnary},
    {"Softsign", Act, kUnary},
    {"SpaceToDepth", Tensor, 0},
    {"Split", Tensor, 0},
    {"SplitToSequence", Tensor, 0},
    {"Sqrt", Math, kUnary},
    {"Squeeze", Tensor, 0},
    {"Sub", Math, 0, 0.0},
    {"Sum", Math, kCommutative},
    {"Swish", Act, kEpilogue},  // kernel and shape function in the transformer files; fused when alpha = 1
    {"Tan", Math, kUnary},
    {"Tanh", Math, kUnary | kEpilogue},
    {"ThresholdedRelu", Act, kUnary},
    {"Tile", Tensor, 0},
    {"TopK", Red, 0},
    {"Transpose", Tensor, 0},
    {"Trilu", Tensor, 0},
    {"Unique", Tensor, 0},
    {"Unsqueeze", Tensor, 0},
    {"Upsample", Tensor, 0},
    {"Where", Logic, 0},
    {"Xor", Logic, kCommutative},
};

std::string_view normal_domain(std::string_view d) { return d == "ai.onnx" ? std::string_view{} : d; }

struct Index {
  std::unordered_map<std::string, const OpTraits*> by_key;    // domain + '\0' + op
  std::unordered_map<std::string_view, OpCategory> category;  // op type, any domain
  Index() {
    for (const OpTraits& t : kTable) {
      by_key.emplace(std::string(t.domain) + '\0' + std::string(t.op), &t);
      category.emplace(t.op, t.category);
    }
  }
};

const Index& index() {
  static const Index i;
  return i;
}

}  // namespace

std::span<const OpTraits> all_op_traits() { return kTable; }

const OpTraits* op_traits(std::string_view domain, std::string_view op) {
  std::string key(normal_domain(domain));
  key += '\0';
  key += op;
  auto it = index().by_key.find(key);
  return it == index().by_key.end() ? nullptr : it->second;
}

const OpTraits* op_traits(const Graph& g, NodeId n) { return op_traits(str(g.domain(n)), str(g.op_type(n))); }

bool has_fact(const Graph& g, NodeId n, OpFact f) {
  const OpTraits* t = op_traits(g, n);
  return t && t->has(f);
}

namespace {

template <class Pred>
std::vector<std::string> default_domain_ops(Pred pred, std::initializer_list<std::string_view> also) {
  std::vector<std::string> out;
  for (const OpTraits& t : kTable)  // sorted by name
    if (t.domain.empty() && pred(t)) out.emplace_back(t.op);
  out.insert(out.end(), also.begin(), also.end());
  return out;
}

}  // namespace

std::vector<std::string> ops_with(OpFact f, std::initializer_list<std::string_view> also) {
  return default_domain_ops([f](const OpTraits& t) { return t.has(f); }, also);
}

std::vector<std::string> ops_with_neutral(std::initializer_list<std::string_view> also) {
  return default_domain_ops([](const OpTraits& t) { return t.neutral.has_value(); }, also);
}

OpCategory op_category(std::string_view op) {
  auto it = index().category.find(op);
  return it == index().category.end() ? OpCategory::Other : it->second;
}

bool is_nondeterministic(const Graph& g, NodeId n) {
  std::string_view domain = normal_domain(str(g.domain(n)));
  if (!domain.empty()) return true;  // unknown domains: assume the worst
  const OpTraits* t = op_traits(domain, str(g.op_type(n)));
  return t && t->has(kRandom);
}

}  // namespace onnxforge
