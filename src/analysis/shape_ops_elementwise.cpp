// Elementwise ops: unary, broadcasting binary/variadic (with value propagation for small
// integer tensors), comparisons and logic, Where, Cast, normalization and activation families,
// quantization.
#include <algorithm>
#include <cmath>

#include "analysis/shape_engine.h"
#include "ir/op_traits.h"

namespace onnxforge::shape {
namespace {

// ---------------------------------------------------------------- unary and same-shape

void unary(OpCtx& c) { same_as(c, 0); }

void identity(OpCtx& c) {
  same_as(c, 0);
  if (const auto* v = c.value(0)) c.set_value(0, *v);
}

void to_bool(OpCtx& c) { same_as(c, 0, 0, DType::Bool); }

void cast(OpCtx& c) {
  DType to = dtype_of(c.attr_int("to", 0));
  same_as(c, 0, 0, to);
  if (const auto* v = c.value(0)) c.set_value(0, *v);
}

void cast_like(OpCtx& c) {
  same_as(c, 0, 0, c.in(1).dtype);
  if (const auto* v = c.value(0)) c.set_value(0, *v);
}

void dropout(OpCtx& c) {
  same_as(c, 0);
  if (c.has_output(1)) same_as(c, 0, 1, DType::Bool);
}

// ---------------------------------------------------------------- broadcasting

// Output dtype: `t`, or the first input's when Undefined.
void broadcast_to(OpCtx& c, DType t, size_t first = 0);

// com.microsoft QLinear* (ONNX Runtime's QOperator format): the output's type is its zero
// point's (input `zp`) when given, else input `x`'s.
DType qlinear_type(OpCtx& c, size_t zp, size_t x) { return c.has_input(zp) ? c.in(zp).dtype : c.in(x).dtype; }
void qlinear_shaped(OpCtx& c, DType t, std::initializer_list<size_t> data) {
  std::vector<std::vector<SymDim>> shapes;
  for (size_t i : data) {
    if (!c.has_input(i) || !c.in(i).ranked) return c.set_dtype(0, t);
    shapes.push_back(c.in(i).dims);
  }
  c.set(0, t, broadcast(c, shapes));
}
void qlinear_binary(OpCtx& c) { qlinear_shaped(c, qlinear_type(c, 7, 0), {0, 3}); }  // QLinearAdd/Mul
void qlinear_unary(OpCtx& c) { qlinear_shaped(c, qlinear_type(c, 4, 0), {0}); }      // Sigmoid/LeakyRelu/Softmax
void qlinear_where(OpCtx& c) { qlinear_shaped(c, qlinear_type(c, 8, 1), {0, 1, 4}); }

void broadcast_to(OpCtx& c, DType t, size_t first) {
  DType dt = t == DType::Undefined ? c.in(first).dtype : t;
  std::vector<std::vector<SymDim>> shapes;
  for (size_t i = first; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    if (!c.in(i).ranked) return c.set_dtype(0, dt);
    shapes.push_back(c.in(i).dims);
  }
  c.set(0, dt, broadcast(c, shapes));
}

// Elementwise on tracked values with numpy broadcasting of lengths (1 against n).
template <class F>
void value_op(OpCtx& c, F f) {
  const auto* a = c.value(0);
  const auto* b = c.value(1);
  if (!a || !b) return;
  size_t n = std::max(a->size(), b->size());
  if ((a->size() != n && a->size() != 1) || (b->size() != n && b->size() != 1)) return;
  std::vector<SymDim> out;
  for (size_t i = 0; i < n; ++i) {
    auto r = f((*a)[a->size() == 1 ? 0 : i], (*b)[b->size() == 1 ? 0 : i]);
    if (!r) return;
    out.push_back(*r);
  }
  c.set_value(0, std::move(out));
}

using Opt = std::optional<SymDim>;

void add(OpCtx& c) {
  broadcast_to(c, DType::Undefined);
  value_op(c, [](SymDim a, SymDim b) -> Opt { return a + b; });
}
void sub(OpCtx& c) {
  broadcast_to(c, DType::Undefined);
  value_op(c, [](SymDim a, SymDim b) -> Opt { return a - b; });
}
void mul(OpCtx& c) {
  broadcast_to(c, DType::Undefined);
  value_op(c, [](SymDim a, SymDim b) -> Opt { return a * b; });
}
// Integer Div truncates; shape values are non-negative, where truncation is floor.
void div(OpCtx& c) {
  broadcast_to(c, DType::Undefined);
  value_op(c, [](SymDim a, SymDim b) -> Opt {
    if (b.is_constant() && b.value() > 0) {
      if (a.is_constant() && a.value() < 0) return SymDim::constant(a.value() / b.value());
      return floor_div(a, b.value());
    }
    return exact_div(a, b);
  });
}
void mod(OpCtx& c) {
  broadcast_to(c, DType::Undefined);
  value_op(c, [](SymDim a, SymDim b) -> Opt {
    if (a.is_constant() && b.is_constant() && b.value() != 0) {
      int64_t r = a.value() % b.value();
      if (r != 0 && ((r < 0) != (b.value() < 0))) r += b.value();  // Python-style (fmod=0)
      return SymDim::constant(r);
    }
    return std::nullopt;
  });
}
void min_max(OpCtx& c, bool want_max) {
  broadcast_to(c, DType::Undefined);
  if (c.num_inputs() != 2) return;
  value_op(c, [want_max](SymDim a, SymDim b) -> Opt {
    if (a == b) return a;
    if (a.is_constant() && b.is_constant())
      return SymDim::constant(want_max ? std::max(a.value(), b.value()) : std::min(a.value(), b.value()));
    // Symbolic dims are >= 0: max(sym, c<=0) = sym, min(sym, c<=0) = c.
    const SymDim& k = a.is_constant() ? a : b;
    const SymDim& s = a.is_constant() ? b : a;
    if (k.is_constant() && k.value() <= 0) return want_max ? s : k;
    return std::nullopt;
  });
}
void max_(OpCtx& c) { min_max(c, true); }
void min_(OpCtx& c) { min_max(c, false); }
void variadic(OpCtx& c) { broadcast_to(c, DType::Undefined); }
void pow_(OpCtx& c) { broadcast_to(c, DType::Undefined); }
void prelu(OpCtx& c) { broadcast_to(c, DType::Undefined); }

// Shape values are >= 0, so sym == negative constant is false (torch's Where(Equal(s, -1))).
Opt known_equal(SymDim a, SymDim b) {
  if (a == b) return SymDim::constant(1);
  if (a.is_constant() && b.is_constant()) return SymDim::constant(0);
  if ((a.is_constant() && a.value() < 0) || (b.is_constant() && b.value() < 0)) return SymDim::constant(0);
  return std::nullopt;
}

void equal(OpCtx& c) {
  broadcast_to(c, DType::Bool);
  value_op(c, known_equal);
}
void compare(OpCtx& c) { broadcast_to(c, DType::Bool); }
void logic(OpCtx& c) { broadcast_to(c, DType::Bool); }

void not_(OpCtx& c) {
  same_as(c, 0, 0, DType::Bool);
  if (auto v = c.const_ints(0)) {
    std::vector<SymDim> out;
    for (int64_t x : *v) out.push_back(SymDim::constant(x == 0));
    c.set_value(0, out);
  }
}

void where(OpCtx& c) {
  broadcast_to(c, c.in(1).dtype);
  auto cond = c.const_ints(0);
  const auto* x = c.value(1);
  const auto* y = c.value(2);
  if (!cond || !x || !y) return;
  size_t n = std::max({cond->size(), x->size(), y->size()});
  auto at = [n](const auto& v, size_t i) { return v.size() == n ? v[i] : v[0]; };
  std::vector<SymDim> out;
  for (size_t i = 0; i < n; ++i) {
    if ((cond->size() != n && cond->size() != 1) || (x->size() != n && x->size() != 1) ||
        (y->size() != n && y->size() != 1))
      return;
    out.push_back(at(*cond, i) ? at(*x, i) : at(*y, i));
  }
  c.set_value(0, std::move(out));
}

// ---------------------------------------------------------------- normalization

void batch_norm(OpCtx& c) {
  same_as(c, 0);
  for (size_t i = 1; i < c.num_outputs(); ++i) same_as(c, 1, i, c.in(0).dtype);  // running stats: [C]
}

// LayerNormalization: Mean and InvStdDev keep the leading dims and have 1 from `axis` on.
void layer_norm(OpCtx& c) {
  same_as(c, 0);
  const VState& x = c.in(0);
  if (c.num_outputs() < 2) return;
  int64_t stash = c.attr_int("stash_type", 1);
  DType st = dtype_of(stash);
  if (!x.ranked) {
    for (size_t i = 1; i < c.num_outputs(); ++i) c.set_dtype(i, st);
    return;
  }
  auto a = c.axis(c.attr_int("axis", -1), x.rank());
  if (!a) return;
  std::vector<SymDim> dims = x.dims;
  for (size_t i = *a; i < dims.size(); ++i) dims[i] = SymDim::constant(1);
  for (size_t i = 1; i < c.num_outputs(); ++i) c.set(i, st, dims);
}

// com.microsoft SkipLayerNormalization / SkipSimplifiedLayerNormalization: output 3 is the sum.
void skip_layer_norm(OpCtx& c) {
  same_as(c, 0);
  if (c.num_outputs() > 3) same_as(c, 0, 3);
  const VState& x = c.in(0);
  for (size_t i = 1; i < 3 && i < c.num_outputs(); ++i) {
    if (!x.ranked) continue;
    std::vector<SymDim> dims = x.dims;
    if (!dims.empty()) dims.back() = SymDim::constant(1);
    c.set(i, DType::Float, dims);
  }
}

// ---------------------------------------------------------------- quantization

void quantize(OpCtx& c) {
  DType t = c.has_input(2) ? c.in(2).dtype : DType::Uint8;
  if (c.has_attr("output_dtype") && c.attr_int("output_dtype", 0) != 0) t = dtype_of(c.attr_int("output_dtype", 0));
  same_as(c, 0, 0, t);
}

void dequantize(OpCtx& c) {
  DType t = c.in(1).dtype == DType::Undefined ? DType::Float : c.in(1).dtype;
  same_as(c, 0, 0, t);
}

void dynamic_quantize(OpCtx& c) {
  same_as(c, 0, 0, DType::Uint8);
  c.set(1, DType::Float, {});
  c.set(2, DType::Uint8, {});
}

void clip(OpCtx& c) {
  same_as(c, 0);
  if (const auto* v = c.value(0); v && c.num_inputs() == 1) c.set_value(0, *v);
}

}  // namespace

void register_elementwise(const Registrar& reg) {
  // Elementwise unary ops (ir/op_traits.h); Identity and Not get their own functions below.
  for (const std::string& op : ops_with(kUnary)) reg(op, unary);
  // Other ops whose output 0 has input 0's type and shape.
  for (const char* op : {"Softmax",
                         "LogSoftmax",
                         "Hardmax",
                         "CumSum",
                         "Trilu",
                         "LpNormalization",
                         "MeanVarianceNormalization",
                         "LRN",
                         "InstanceNormalization",
                         "RotaryEmbedding",
                         "GroupNormalization",
                         "ReverseSequence",
                         "Scatter",
                         "ScatterElements",
                         "ScatterND",
                         "EyeLike",
                         "RandomNormalLike",
                         "RandomUniformLike",
                         "Bernoulli",
                         "com.microsoft::Gelu",
                         "com.microsoft::FastGelu",
                         "com.microsoft::BiasGelu",
                         "com.microsoft::QuickGelu",
                         "com.microsoft::RotaryEmbedding",
                         "com.microsoft::BiasAdd"})
    reg(op, unary);
  reg("Identity", identity);
  reg("Clip", clip);
  reg("IsNaN", to_bool);
  reg("IsInf", to_bool);
  reg("Not", not_);
  reg("Cast", cast);
  reg("CastLike", cast_like);
  reg("Dropout", dropout);
  reg("Add", add);
  reg("Sub", sub);
  reg("Mul", mul);
  reg("Div", div);
  reg("Mod", mod);
  reg("Max", max_);
  reg("Min", min_);
  reg("Pow", pow_);
  reg("PRelu", prelu);
  for (const char* op : {"Sum", "Mean", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor"}) reg(op, variadic);
  reg("Equal", equal);
  for (const char* op : {"Less", "LessOrEqual", "Greater", "GreaterOrEqual"}) reg(op, compare);
  for (const char* op : {"And", "Or", "Xor"}) reg(op, logic);
  reg("Where", where);
  reg("com.microsoft::QLinearAdd", qlinear_binary);
  reg("com.microsoft::QLinearMul", qlinear_binary);
  reg("com.microsoft::QLinearSigmoid", qlinear_unary);
  reg("com.microsoft::QLinearLeakyRelu", qlinear_unary);
  reg("com.microsoft::QLinearSoftmax", qlinear_unary);
  reg("com.microsoft::QLinearWhere", qlinear_where);
  reg("BatchNormalization", batch_norm);
  reg("LayerNormalization", layer_norm);
  reg("com.microsoft::LayerNormalization", layer_norm);
  reg("com.microsoft::SkipLayerNormalization", skip_layer_norm);
  reg("com.microsoft::SkipSimplifiedLayerNormalization", skip_layer_norm);
  reg("QuantizeLinear", quantize);
  reg("DequantizeLinear", dequantize);
  reg("DynamicQuantizeLinear", dynamic_quantize);
}

}  // namespace onnxforge::shape
