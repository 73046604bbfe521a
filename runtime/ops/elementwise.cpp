// Unary elementwise ops: float32 through simd::unary, other types through a scalar path.
#include <cmath>

#include "ir/match.h"
#include "runtime/ops/common.h"
#include "simd/unary.h"

namespace onnxforge::rt {
namespace {

using simd::Unary;
using simd::UnaryOp;

double scalar(const Unary& u, double x) {
  switch (u.op) {
    case UnaryOp::Identity: return x;
    case UnaryOp::Abs: return std::fabs(x);
    case UnaryOp::Neg: return -x;
    case UnaryOp::Relu: return x < 0 ? 0 : x;
    case UnaryOp::LeakyRelu: return x < 0 ? u.alpha * x : x;
    case UnaryOp::Clip: return std::isnan(x) ? x : std::min<double>(std::max<double>(x, u.alpha), u.beta);
    case UnaryOp::ThresholdedRelu: return x > u.alpha ? x : 0;
    case UnaryOp::Sigmoid: return 1 / (1 + std::exp(-x));
    case UnaryOp::HardSigmoid: return std::max(0.0, std::min(1.0, u.alpha * x + u.beta));
    case UnaryOp::HardSwish: return x * std::max(0.0, std::min(1.0, x / 6 + 0.5));
    case UnaryOp::Tanh: return std::tanh(x);
    case UnaryOp::Exp: return std::exp(x);
    case UnaryOp::Log: return std::log(x);
    case UnaryOp::Erf: return std::erf(x);
    case UnaryOp::Sqrt: return std::sqrt(x);
    case UnaryOp::Reciprocal: return 1 / x;
    case UnaryOp::Gelu: return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
    case UnaryOp::GeluTanh: return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case UnaryOp::Silu: return x / (1 + std::exp(-x));
    case UnaryOp::Softplus: return std::log1p(std::exp(x));
    case UnaryOp::Softsign: return x / (1 + std::fabs(x));
    case UnaryOp::Mish: return x * std::tanh(std::log1p(std::exp(x)));
    case UnaryOp::Elu: return x < 0 ? u.alpha * (std::exp(x) - 1) : x;
    case UnaryOp::Selu: return u.beta * (x <= 0 ? u.alpha * (std::exp(x) - 1) : x);
    case UnaryOp::Floor: return std::floor(x);
    case UnaryOp::Ceil: return std::ceil(x);
    case UnaryOp::Round: return std::nearbyint(x);
    case UnaryOp::Sin: return std::sin(x);
    case UnaryOp::Cos: return std::cos(x);
  }
  return x;
}

// The function node n applies (its attributes read): the kernel's, and the plan's when it fuses
// the node into its producer's epilogue (KernelDef::epilogue).
Unary params(const Graph& g, NodeId n, UnaryOp op) {
  switch (op) {
    case UnaryOp::LeakyRelu: return Unary::leaky_relu(g.attr_float(n, "alpha", 0.01f));
    case UnaryOp::ThresholdedRelu: return Unary::thresholded_relu(g.attr_float(n, "alpha", 1.f));
    case UnaryOp::HardSigmoid:
      return Unary::hard_sigmoid(g.attr_float(n, "alpha", 0.2f), g.attr_float(n, "beta", 0.5f));
    case UnaryOp::HardSwish: return Unary::hard_swish();
    case UnaryOp::Elu: return Unary::elu(g.attr_float(n, "alpha", 1.f));
    case UnaryOp::Selu:
      return Unary::selu(g.attr_float(n, "alpha", 1.67326319217681884765625f),
                         g.attr_float(n, "gamma", 1.05070102214813232421875f));
    case UnaryOp::Gelu:
      return Unary::of(g.attr_string(n, "approximate", "none") == "tanh" ? UnaryOp::GeluTanh : UnaryOp::Gelu);
    default: return Unary::of(op);
  }
}

void apply(OpContext& c, const Unary& u) {
  const Tensor& x = c.input(0);
  Tensor& y = c.output(0, x.dtype, x.shape);
  const int64_t n = x.numel();
  if (x.dtype == DType::Float) {
    simd::unary(u, x.ptr<float>(), y.ptr<float>(), static_cast<size_t>(n));
    return;
  }
  dispatch_arithmetic(c, x.dtype, "bool input is not supported", [&](auto v) {
    using T = decltype(v);
    const T* a = x.ptr<T>();
    T* b = y.ptr<T>();
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_integral_v<T>) {
        // Negation wraps (as ONNX Runtime: -INT_MIN is INT_MIN) instead of overflowing.
        using U = std::make_unsigned_t<T>;
        if (u.op == UnaryOp::Abs)
          b[i] = a[i] < 0 ? static_cast<T>(U{0} - static_cast<U>(a[i])) : a[i];
        else if (u.op == UnaryOp::Neg)
          b[i] = static_cast<T>(U{0} - static_cast<U>(a[i]));
        else if (u.op == UnaryOp::Relu)
          b[i] = a[i] < 0 ? T{0} : a[i];
        else
          b[i] = from_double<T>(scalar(u, static_cast<double>(a[i])));
      } else {
        b[i] = static_cast<T>(scalar(u, static_cast<double>(a[i])));
      }
    }
  });
}

template <UnaryOp OP>
void unary_kernel(OpContext& c) {
  apply(c, params(c.graph, c.node, OP));
}

template <UnaryOp OP>
std::optional<Unary> unary_epilogue(const Graph& g, NodeId n) {
  return params(g, n, OP);
}

// Ops without a simd kernel: scalar on double.
enum class Extra { Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh, Sign, Celu, Shrink };

template <Extra E>
void extra_kernel(OpContext& c) {
  const Tensor& x = c.input(0);
  Tensor& y = c.output(0, x.dtype, x.shape);
  const float alpha = c.attr_f("alpha", 1.f), lambd = c.attr_f("lambd", 0.5f), bias = c.attr_f("bias", 0.f);
  dispatch_type(x.dtype, [&](auto v) {
    using T = decltype(v);
    const T* a = x.ptr<T>();
    T* b = y.ptr<T>();
    for (int64_t i = 0, n = x.numel(); i < n; ++i) {
      double d = static_cast<double>(a[i]), r = 0;
      switch (E) {
        case Extra::Tan: r = std::tan(d); break;
        case Extra::Asin: r = std::asin(d); break;
        case Extra::Acos: r = std::acos(d); break;
        case Extra::Atan: r = std::atan(d); break;
        case Extra::Sinh: r = std::sinh(d); break;
        case Extra::Cosh: r = std::cosh(d); break;
        case Extra::Asinh: r = std::asinh(d); break;
        case Extra::Acosh: r = std::acosh(d); break;
        case Extra::Atanh: r = std::atanh(d); break;
        case Extra::Sign: r = d > 0 ? 1 : d < 0 ? -1 : d; break;
        case Extra::Celu: r = std::max(0.0, d) + std::min(0.0, alpha * (std::exp(d / alpha) - 1)); break;
        case Extra::Shrink: r = d < -lambd ? d + bias : d > lambd ? d - bias : 0; break;
      }
      b[i] = from_double<T>(r);
    }
  });
}

void clip(OpContext& c) {
  const Tensor& x = c.input(0);
  if (c.opset < 11) {
    apply(c, Unary::clip(c.attr_f("min", -INFINITY), c.attr_f("max", INFINITY)));
    return;
  }
  const Tensor* lo = c.in(1);
  const Tensor* hi = c.in(2);
  // The bounds are scalars of x's type: an empty one or another type would be read past its end.
  for (const Tensor* t : {lo, hi})
    if (t && (t->numel() != 1 || (x.dtype != DType::Float && t->dtype != x.dtype)))
      c.error("min and max must be scalars of the input's type, got " + std::string(dtype_name(t->dtype)) + " " +
              shape_str(t->shape));
  if (x.dtype == DType::Float) {
    apply(c, Unary::clip(lo ? static_cast<float>(lo->get_f64(0)) : -INFINITY,
                         hi ? static_cast<float>(hi->get_f64(0)) : INFINITY));
    return;
  }
  Tensor& y = c.output(0, x.dtype, x.shape);
  dispatch_type(x.dtype, [&](auto v) {
    using T = decltype(v);
    T l = lo ? lo->ptr<T>()[0] : std::numeric_limits<T>::lowest();
    T h = hi ? hi->ptr<T>()[0] : std::numeric_limits<T>::max();
    for (int64_t i = 0, n = x.numel(); i < n; ++i) y.ptr<T>()[i] = std::min(std::max(x.ptr<T>()[i], l), h);
  });
}

// As an epilogue the bounds must be known at plan time: attributes before opset 11, then
// initializers (a Constant node's output is only a value once it has run).
std::optional<Unary> clip_epilogue(const Graph& g, NodeId n) {
  float lo = -INFINITY, hi = INFINITY;
  if (g.model().opset("") < 11) return Unary::clip(g.attr_float(n, "min", lo), g.attr_float(n, "max", hi));
  for (size_t i = 1; i < 3; ++i) {
    const ValueId v = g.input(n, i);
    if (!v.valid()) continue;
    const std::optional<double> x = g.is_constant(v) ? onnxforge::scalar(g, v, DType::Float) : std::nullopt;
    if (!x) return std::nullopt;
    (i == 1 ? lo : hi) = static_cast<float>(*x);
  }
  return Unary::clip(lo, hi);
}

void is_nan(OpContext& c) {
  const Tensor& x = c.input(0);
  Tensor& y = c.output(0, DType::Bool, x.shape);
  for (int64_t i = 0, n = x.numel(); i < n; ++i) y.ptr<uint8_t>()[i] = std::isnan(x.get_f64(i));
}

void is_inf(OpContext& c) {
  const Tensor& x = c.input(0);
  Tensor& y = c.output(0, DType::Bool, x.shape);
  bool pos = c.attr_i("detect_positive", 1), neg = c.attr_i("detect_negative", 1);
  for (int64_t i = 0, n = x.numel(); i < n; ++i) {
    double v = x.get_f64(i);
    y.ptr<uint8_t>()[i] = std::isinf(v) && ((v > 0 && pos) || (v < 0 && neg));
  }
}

void not_op(OpContext& c) {
  const Tensor& x = c.input(0);
  Tensor& y = c.output(0, DType::Bool, x.shape);
  for (int64_t i = 0, n = x.numel(); i < n; ++i) y.ptr<uint8_t>()[i] = !x.ptr<uint8_t>()[i];
}

}  // namespace

void register_elementwise(Registry& r) {
  // Every unary op can run as an epilogue; op_traits' kEpilogue says which ones the plan fuses.
  auto add = [&](const char* name, KernelFn f, KernelDef::EpilogueFn epilogue = nullptr) {
    r.add("", name, {.run = f, .inplace_input = 0, .layout = LayoutUse::Elementwise, .epilogue = epilogue});
  };
  add("Abs", unary_kernel<UnaryOp::Abs>, unary_epilogue<UnaryOp::Abs>);
  add("Neg", unary_kernel<UnaryOp::Neg>, unary_epilogue<UnaryOp::Neg>);
  add("Relu", unary_kernel<UnaryOp::Relu>, unary_epilogue<UnaryOp::Relu>);
  add("LeakyRelu", unary_kernel<UnaryOp::LeakyRelu>, unary_epilogue<UnaryOp::LeakyRelu>);
  add("ThresholdedRelu", unary_kernel<UnaryOp::ThresholdedRelu>, unary_epilogue<UnaryOp::ThresholdedRelu>);
  add("Sigmoid", unary_kernel<UnaryOp::Sigmoid>, unary_epilogue<UnaryOp::Sigmoid>);
  add("HardSigmoid", unary_kernel<UnaryOp::HardSigmoid>, unary_epilogue<UnaryOp::HardSigmoid>);
  add("HardSwish", unary_kernel<UnaryOp::HardSwish>, unary_epilogue<UnaryOp::HardSwish>);
  add("Tanh", unary_kernel<UnaryOp::Tanh>, unary_epilogue<UnaryOp::Tanh>);
  add("Exp", unary_kernel<UnaryOp::Exp>, unary_epilogue<UnaryOp::Exp>);
  add("Log", unary_kernel<UnaryOp::Log>, unary_epilogue<UnaryOp::Log>);
  add("Erf", unary_kernel<UnaryOp::Erf>, unary_epilogue<UnaryOp::Erf>);
  add("Sqrt", unary_kernel<UnaryOp::Sqrt>, unary_epilogue<UnaryOp::Sqrt>);
  add("Reciprocal", unary_kernel<UnaryOp::Reciprocal>, unary_epilogue<UnaryOp::Reciprocal>);
  add("Gelu", unary_kernel<UnaryOp::Gelu>, unary_epilogue<UnaryOp::Gelu>);
  add("Softplus", unary_kernel<UnaryOp::Softplus>, unary_epilogue<UnaryOp::Softplus>);
  add("Softsign", unary_kernel<UnaryOp::Softsign>, unary_epilogue<UnaryOp::Softsign>);
  add("Mish", unary_kernel<UnaryOp::Mish>, unary_epilogue<UnaryOp::Mish>);
  add("Elu", unary_kernel<UnaryOp::Elu>, unary_epilogue<UnaryOp::Elu>);
  add("Selu", unary_kernel<UnaryOp::Selu>, unary_epilogue<UnaryOp::Selu>);
  add("Floor", unary_kernel<UnaryOp::Floor>, unary_epilogue<UnaryOp::Floor>);
  add("Ceil", unary_kernel<UnaryOp::Ceil>, unary_epilogue<UnaryOp::Ceil>);
  add("Round", unary_kernel<UnaryOp::Round>, unary_epilogue<UnaryOp::Round>);
  add("Sin", unary_kernel<UnaryOp::Sin>, unary_epilogue<UnaryOp::Sin>);
  add("Cos", unary_kernel<UnaryOp::Cos>, unary_epilogue<UnaryOp::Cos>);
  add("Tan", extra_kernel<Extra::Tan>);
  add("Asin", extra_kernel<Extra::Asin>);
  add("Acos", extra_kernel<Extra::Acos>);
  add("Atan", extra_kernel<Extra::Atan>);
  add("Sinh", extra_kernel<Extra::Sinh>);
  add("Cosh", extra_kernel<Extra::Cosh>);
  add("Asinh", extra_kernel<Extra::Asinh>);
  add("Acosh", extra_kernel<Extra::Acosh>);
  add("Atanh", extra_kernel<Extra::Atanh>);
  add("Sign", extra_kernel<Extra::Sign>);
  add("Celu", extra_kernel<Extra::Celu>);
  add("Shrink", extra_kernel<Extra::Shrink>);
  add("Clip", clip, clip_epilogue);
  r.add("", "IsNaN", {.run = is_nan});
  r.add("", "IsInf", {.run = is_inf});
  r.add("", "Not", {.run = not_op, .float_compute = false, .inplace_input = 0});
}

double scalar_unary(const simd::Unary& u, double x) { return scalar(u, x); }

}  // namespace onnxforge::rt
