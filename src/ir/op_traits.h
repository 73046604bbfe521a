#pragma once
// Facts about operators, one row per op (op_traits.cpp), so that every list that needs one is
// derived from the same table: the passes' anchors and op lists, the hierarchy's op categories,
// the shape engine's elementwise list. The table says *whether* (an op is an activation a
// convolution can apply in its epilogue); the runtime says *how* (its simd::Unary mapping).
//
// Facts are about the op in the row's domain (the default ONNX domain unless a row says
// com.microsoft); `op_category` is looked up by op type alone, whatever the domain, as the
// hierarchy's coverage report always did. A default-domain op with no row is treated as
// deterministic, foldable and without other facts — as before the table existed.
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace onnxforge {

// Categories for tagging coverage (design revision R17; hierarchy/op_category.h has the
// thresholds): compute categories, tensor manipulation, and the context-dependent rest.
enum class OpCategory : uint8_t {
  Math,
  Activation,
  NNLayer,
  Reduction,  // compute
  TensorManipulation,
  Constant,
  Cast,
  ComparisonLogic,  // context-dependent
  ControlFlow,
  Other,
  kCount
};

enum OpFact : uint32_t {
  // Elementwise with one input and one output of the same shape: y[i] = f(x[i]). A layout
  // change (Transpose) commutes with it.
  kUnary = 1u << 0,
  // An activation a convolution / GEMM can apply to its result in its epilogue.
  kEpilogue = 1u << 1,
  // op(a, b) == op(b, a) for its (variadic) inputs.
  kCommutative = 1u << 2,
  // Random or otherwise not a function of its inputs: never removed as a duplicate, merged or
  // folded.
  kRandom = 1u << 3,
  // Never folded even when every input is constant (quantization keeps its form, Constant is
  // its own pass, sequences and optionals are not tensors).
  kNoFold = 1u << 4,
};

struct OpTraits {
  std::string_view op;
  OpCategory category = OpCategory::Other;
  uint32_t facts = 0;
  // x op e == x (and e op x == x when commutative), e.g. 0 for Add and Sub, 1 for Mul and Div.
  std::optional<double> neutral{};
  std::string_view domain{};  // "" = the default ONNX domain

  bool has(OpFact f) const { return (facts & f) != 0; }
};

// Every row.
std::span<const OpTraits> all_op_traits();
// The row of (domain, op) — "" and "ai.onnx" are the same domain — or nullptr.
const OpTraits* op_traits(std::string_view domain, std::string_view op);
// The row of node `n`'s op in its domain, or nullptr.
const OpTraits* op_traits(const Graph& g, NodeId n);
// Node `n`'s op has fact `f`.
bool has_fact(const Graph& g, NodeId n, OpFact f);
// Default-domain ops with fact `f` (or with a neutral element), then `also`: anchors and lists.
std::vector<std::string> ops_with(OpFact f, std::initializer_list<std::string_view> also = {});
std::vector<std::string> ops_with_neutral(std::initializer_list<std::string_view> also = {});
// The category of an op type in any domain; Other when the table has no row.
OpCategory op_category(std::string_view op);
// Ops with any random row fact, an unknown domain counting as random: never merge or fold.
bool is_nondeterministic(const Graph& g, NodeId n);

}  // namespace onnxforge
