// Broadcasting binary ops, comparisons, logic, Where, PRelu and the variadic Sum/Mean/Max/Min.
#include <cmath>

#include "runtime/ops/common.h"
#include "simd/binary.h"
#include "simd/resample.h"

namespace onnxforge::rt {
namespace {

using simd::BinaryOp;
using simd::CompareOp;

template <class T>
T scalar_binary(BinaryOp op, T a, T b) {
  switch (op) {
    case BinaryOp::Add: return static_cast<T>(a + b);
    case BinaryOp::Sub: return static_cast<T>(a - b);
    case BinaryOp::Mul: return static_cast<T>(a * b);
    case BinaryOp::Div:
      if constexpr (std::is_integral_v<T>)
        return b == 0 ? T{0} : static_cast<T>(a / b);
      else
        return a / b;
    case BinaryOp::Max:
      if constexpr (std::is_floating_point_v<T>)
        if (std::isnan(a) || std::isnan(b)) return NAN;
      return std::max(a, b);
    case BinaryOp::Min:
      if constexpr (std::is_floating_point_v<T>)
        if (std::isnan(a) || std::isnan(b)) return NAN;
      return std::min(a, b);
    case BinaryOp::Pow:
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        // As simd's int_op: converting pow's double back to a narrow integer is undefined once
        // it passes the type's range (UBSan, a hostile int8 exponent); wrap instead.
        using U = std::make_unsigned_t<T>;
        if (b < 0)
          return a == 1                                             ? T{1}
                 : (std::is_signed_v<T> && a == static_cast<T>(-1)) ? (b % 2 == 0 ? T{1} : static_cast<T>(-1))
                                                                    : T{0};
        U acc = 1, base = static_cast<U>(a);
        for (T e = b; e > 0; e = static_cast<T>(e >> 1)) {
          if (e & 1) acc = static_cast<U>(acc * base);
          base = static_cast<U>(base * base);
        }
        return static_cast<T>(acc);
      } else {
        return static_cast<T>(std::pow(static_cast<double>(a), static_cast<double>(b)));
      }
  }
  return a;
}

// y = op(a, b) with y preallocated at the broadcast shape.
void binary_into(const OpContext& c, BinaryOp op, const Tensor& a, const Tensor& b, Tensor& y) {
  if (a.dtype != b.dtype) c.error("operand types differ");
  switch (a.dtype) {
    case DType::Float: simd::binary(op, a.shape, a.ptr<float>(), b.shape, b.ptr<float>(), y.ptr<float>()); return;
    case DType::Int32: simd::binary(op, a.shape, a.ptr<int32_t>(), b.shape, b.ptr<int32_t>(), y.ptr<int32_t>()); return;
    case DType::Int64: simd::binary(op, a.shape, a.ptr<int64_t>(), b.shape, b.ptr<int64_t>(), y.ptr<int64_t>()); return;
    default: break;
  }
  dispatch_arithmetic(c, a.dtype, "bool operands are not supported", [&](auto v) {
    using T = decltype(v);
    const T* pa = a.ptr<T>();
    const T* pb = b.ptr<T>();
    T* py = y.ptr<T>();
    for_each_broadcast_pair(a.shape, b.shape, y.shape,
                            [&](int64_t i, int64_t ia, int64_t ib) { py[i] = scalar_binary(op, pa[ia], pb[ib]); });
  });
}

template <BinaryOp OP>
void binary_kernel(OpContext& c) {
  const Tensor& a = c.input(0);
  const Tensor& b0 = c.input(1);
  Tensor cb;
  const Tensor* b = &b0;
  if (OP == BinaryOp::Pow && b0.dtype != a.dtype) {
    cb = cast(b0, a.dtype);
    b = &cb;
  }
  if (is_stored_float(a.dtype) && b->dtype == a.dtype) {
    // float16/bfloat16 (registered without float_compute, so not converted by the frame): equal
    // shapes in L1-sized blocks, at memory speed (ISNet fp16: 11 Adds over 64x512x512, 644 ms
    // with whole float32 copies of both inputs and the output, see git log); broadcasts
    // through float32 as the frame would.
    Tensor& y = c.output(0, a.dtype, broadcast_shapes(c, a.shape, b->shape));
    if (a.dtype == DType::Float16 && a.shape == b->shape) {
      simd::half_binary(OP, a.ptr<uint16_t>(), b->ptr<uint16_t>(), y.ptr<uint16_t>(), static_cast<size_t>(y.numel()));
      return;
    }
    const Tensor af = cast(a, DType::Float), bf = cast(*b, DType::Float);
    Tensor yf = Tensor::alloc(DType::Float, y.shape);
    binary_into(c, OP, af, bf, yf);
    cast_into(yf, y);
    return;
  }
  Tensor& y = c.output(0, a.dtype, broadcast_shapes(c, a.shape, b->shape));
  binary_into(c, OP, a, *b, y);
}

template <BinaryOp OP, bool MEAN = false>
void variadic_kernel(OpContext& c) {
  Shape shape = c.input(0).shape;
  for (size_t i = 1; i < c.input_count(); ++i) shape = broadcast_shapes(c, shape, c.input(i).shape);
  const Tensor& x0 = c.input(0);
  if (c.input_count() == 1) {
    Tensor& y = c.output(0, x0.dtype, shape);
    std::memcpy(y.data, x0.data, x0.bytes());
    return;
  }
  Tensor acc = Tensor::alloc(x0.dtype, shape);
  binary_into(c, OP, x0, c.input(1), acc);
  for (size_t i = 2; i < c.input_count(); ++i) binary_into(c, OP, acc, c.input(i), acc);
  Tensor& y = c.output(0, x0.dtype, shape);
  if (MEAN) {
    Tensor n = Tensor::alloc(x0.dtype, {});
    cast_into(Tensor::view(DType::Double, {}, std::array<double, 1>{double(c.input_count())}.data()), n);
    binary_into(c, BinaryOp::Div, acc, n, y);
  } else {
    std::memcpy(y.data, acc.data, acc.bytes());
  }
}

template <CompareOp OP>
bool scalar_compare(double a, double b) {
  switch (OP) {
    case CompareOp::Equal: return a == b;
    case CompareOp::NotEqual: return a != b;
    case CompareOp::Less: return a < b;
    case CompareOp::LessOrEqual: return a <= b;
    case CompareOp::Greater: return a > b;
    case CompareOp::GreaterOrEqual: return a >= b;
  }
  return false;
}

template <CompareOp OP>
void compare_kernel(OpContext& c) {
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(1);
  Tensor& y = c.output(0, DType::Bool, broadcast_shapes(c, a.shape, b.shape));
  auto* py = y.ptr<uint8_t>();
  if (a.dtype == b.dtype) {
    switch (a.dtype) {
      case DType::Float: simd::compare(OP, a.shape, a.ptr<float>(), b.shape, b.ptr<float>(), py); return;
      case DType::Int32: simd::compare(OP, a.shape, a.ptr<int32_t>(), b.shape, b.ptr<int32_t>(), py); return;
      case DType::Int64: simd::compare(OP, a.shape, a.ptr<int64_t>(), b.shape, b.ptr<int64_t>(), py); return;
      default: break;
    }
  }
  if (a.dtype == DType::Int64 || a.dtype == DType::Uint64) {  // exact for large integers
    for_each_broadcast_pair(a.shape, b.shape, y.shape, [&](int64_t i, int64_t ia, int64_t ib) {
      int64_t x = a.get_i64(ia), z = b.get_i64(ib);
      py[i] = scalar_compare<OP>(x < z ? -1 : x > z ? 1 : 0, 0);
    });
    return;
  }
  for_each_broadcast_pair(a.shape, b.shape, y.shape, [&](int64_t i, int64_t ia, int64_t ib) {
    py[i] = scalar_compare<OP>(a.get_f64(ia), b.get_f64(ib));
  });
}

enum class Logic { And, Or, Xor };
template <Logic L>
void logic_kernel(OpContext& c) {
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(1);
  if (a.dtype != DType::Bool || b.dtype != DType::Bool) c.error("inputs must be bool");
  Tensor& y = c.output(0, DType::Bool, broadcast_shapes(c, a.shape, b.shape));
  const auto* pa = a.ptr<uint8_t>();
  const auto* pb = b.ptr<uint8_t>();
  auto* py = y.ptr<uint8_t>();
  for_each_broadcast_pair(a.shape, b.shape, y.shape, [&](int64_t i, int64_t ia, int64_t ib) {
    bool x = pa[ia], z = pb[ib];
    py[i] = L == Logic::And ? (x && z) : L == Logic::Or ? (x || z) : (x != z);
  });
}

void where_kernel(OpContext& c) {
  const Tensor& cond = c.input(0);
  const Tensor& a = c.input(1);
  const Tensor& b = c.input(2);
  need_same_type(c, a, b);
  if (cond.dtype != DType::Bool) c.error("condition must be bool, got " + std::string(dtype_name(cond.dtype)));
  Shape shape = broadcast_shapes(c, broadcast_shapes(c, cond.shape, a.shape), b.shape);
  Tensor& y = c.output(0, a.dtype, shape);
  const size_t es = dtype_size(a.dtype);
  const auto* pc = cond.ptr<uint8_t>();
  auto typed = [&](auto tag) {  // element copies of a fixed size
    using T = decltype(tag);
    const T* pa = a.ptr<T>();
    const T* pb = b.ptr<T>();
    T* py = y.ptr<T>();
    if (cond.shape == shape && a.shape == shape && b.shape == shape) {
      for (int64_t i = 0, n = y.numel(); i < n; ++i) py[i] = pc[i] ? pa[i] : pb[i];
      return;
    }
    for_each_broadcast<3>(
        shape, {bcast_strides(cond.shape, shape), bcast_strides(a.shape, shape), bcast_strides(b.shape, shape)},
        [&](int64_t i, const std::array<int64_t, 3>& o) { py[i] = pc[o[0]] ? pa[o[1]] : pb[o[2]]; });
  };
  switch (es) {
    case 1: typed(uint8_t{}); return;
    case 2: typed(uint16_t{}); return;
    case 4: typed(uint32_t{}); return;
    case 8: typed(uint64_t{}); return;
    default: break;
  }
  for_each_broadcast<3>(
      shape, {bcast_strides(cond.shape, shape), bcast_strides(a.shape, shape), bcast_strides(b.shape, shape)},
      [&](int64_t i, const std::array<int64_t, 3>& o) {
        const std::byte* src = pc[o[0]] ? a.data + o[1] * es : b.data + o[2] * es;
        std::memcpy(y.data + i * es, src, es);
      });
}

void prelu_kernel(OpContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& s = c.input(1);
  need_same_type(c, x, s);
  Shape slope_shape = s.shape;
  // Opset < 7 style: a slope of shape [C] for x [N, C, ...] means per channel.
  if (slope_shape.size() == 1 && x.rank() > 2 && slope_shape[0] == x.shape[1] && slope_shape[0] != x.shape.back()) {
    slope_shape.resize(static_cast<size_t>(x.rank() - 1), 1);
  }
  Tensor& y = c.output(0, x.dtype, broadcast_shapes(c, x.shape, slope_shape));
  dispatch_type(x.dtype, [&](auto v) {
    using T = decltype(v);
    const T* px = x.ptr<T>();
    const T* ps = s.ptr<T>();
    T* py = y.ptr<T>();
    for_each_broadcast_pair(x.shape, slope_shape, y.shape, [&](int64_t i, int64_t ia, int64_t ib) {
      T z = px[ia];
      if constexpr (std::is_same_v<T, bool>)
        py[i] = z;
      else
        py[i] = z < 0 ? wrap_mul(z, ps[ib]) : z;  // int32/int64 wrap as Mul does (no UB)
    });
  });
}

void mod_kernel(OpContext& c) {
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(1);
  bool fmod = c.attr_i("fmod", 0);
  need_same_type(c, a, b);
  Tensor& y = c.output(0, a.dtype, broadcast_shapes(c, a.shape, b.shape));
  dispatch_type(a.dtype, [&](auto v) {
    using T = decltype(v);
    const T* pa = a.ptr<T>();
    const T* pb = b.ptr<T>();
    T* py = y.ptr<T>();
    for_each_broadcast_pair(a.shape, b.shape, y.shape, [&](int64_t i, int64_t ia, int64_t ib) {
      T x = pa[ia], z = pb[ib];
      if constexpr (std::is_floating_point_v<T>) {
        T r = std::fmod(x, z);
        if (!fmod && r != 0 && ((r < 0) != (z < 0))) r += z;
        py[i] = r;
      } else if constexpr (std::is_same_v<T, bool>) {
        py[i] = x;
      } else {
        // x % -1 is 0, and INT_MIN % -1 traps (SIGFPE) on x86.
        if (z == 0 || (std::is_signed_v<T> && z == static_cast<T>(-1))) {
          py[i] = 0;
          return;
        }
        T r = static_cast<T>(x % z);
        if (!fmod && r != 0 && ((r < 0) != (z < 0))) r = static_cast<T>(r + z);
        py[i] = r;
      }
    });
  });
}

}  // namespace

void register_binary(Registry& r) {
  auto add = [&](const char* name, KernelFn f) {
    r.add("", name, {.run = f, .inplace_input = 0, .inplace_input2 = 1, .layout = LayoutUse::Elementwise});
  };
  auto variadic = [&](const char* name, KernelFn f) { r.add("", name, {.run = f, .layout = LayoutUse::Elementwise}); };
  // float16/bfloat16 operands reach these kernels as they are (binary_kernel converts them).
  auto add_stored = [&](const char* name, KernelFn f) {
    r.add(
        "", name,
        {.run = f, .float_compute = false, .inplace_input = 0, .inplace_input2 = 1, .layout = LayoutUse::Elementwise});
  };
  add_stored("Add", binary_kernel<BinaryOp::Add>);
  add_stored("Sub", binary_kernel<BinaryOp::Sub>);
  add_stored("Mul", binary_kernel<BinaryOp::Mul>);
  add_stored("Div", binary_kernel<BinaryOp::Div>);
  add("Pow", binary_kernel<BinaryOp::Pow>);
  variadic("Sum", variadic_kernel<BinaryOp::Add>);
  variadic("Mean", variadic_kernel<BinaryOp::Add, true>);
  variadic("Max", variadic_kernel<BinaryOp::Max>);
  variadic("Min", variadic_kernel<BinaryOp::Min>);
  r.add("", "Equal", {.run = compare_kernel<CompareOp::Equal>});
  r.add("", "Less", {.run = compare_kernel<CompareOp::Less>});
  r.add("", "LessOrEqual", {.run = compare_kernel<CompareOp::LessOrEqual>});
  r.add("", "Greater", {.run = compare_kernel<CompareOp::Greater>});
  r.add("", "GreaterOrEqual", {.run = compare_kernel<CompareOp::GreaterOrEqual>});
  r.add("", "And", {.run = logic_kernel<Logic::And>, .float_compute = false});
  r.add("", "Or", {.run = logic_kernel<Logic::Or>, .float_compute = false});
  r.add("", "Xor", {.run = logic_kernel<Logic::Xor>, .float_compute = false});
  r.add("", "Where", {.run = where_kernel, .float_compute = false});
  r.add("", "PRelu", {.run = prelu_kernel});
  r.add("", "Mod", {.run = mod_kernel});
}

}  // namespace onnxforge::rt
