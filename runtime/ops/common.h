#pragma once
// Helpers shared by the op kernels.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <cstring>
#include <vector>

#include "ir/error.h"
#include "runtime/kernel.h"

namespace onnxforge::rt {

// ONNX axis in [-rank, rank) to [0, rank).
inline int64_t norm_axis(const OpContext& c, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    c.error("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

// A per-channel (or otherwise sized) parameter: `t` must hold at least `n` elements of `type`
// (a hostile model may give a shorter one or another type; the kernel would read past it).
inline void need_elements(const OpContext& c, const Tensor& t, int64_t n, DType type, std::string_view what) {
  if (t.numel() < n || t.dtype != type)
    c.error(std::string(what) + " needs " + std::to_string(n) + " " + std::string(dtype_name(type)) +
            " elements, got " + std::string(dtype_name(t.dtype)) + " " + shape_str(t.shape));
}

// Inputs the schema types alike (type parameter T): a kernel reads both as one type, so another
// type would read past the smaller buffer (fuzz_runtime: Where over float and int8).
inline void need_same_type(const OpContext& c, const Tensor& a, const Tensor& b) {
  if (a.dtype != b.dtype)
    c.error("inputs of types " + std::string(dtype_name(a.dtype)) + " and " + std::string(dtype_name(b.dtype)) +
            " must have the same type");
}

// Index inputs (Gather*, Scatter*): int32 or int64 as the schemas say (Tind); a float index
// would go through a double-to-int64 conversion that is undefined past int64's range.
inline void need_index_type(const OpContext& c, const Tensor& t, std::string_view what) {
  if (t.dtype != DType::Int64 && t.dtype != DType::Int32)
    c.error(std::string(what) + " must be int32 or int64, got " + std::string(dtype_name(t.dtype)));
}

// a * b for a dimension computed from the model's values (Tile repeats, Expand...): an error,
// not signed overflow, when a hostile value makes it unrepresentable.
inline int64_t mul_dim(const OpContext& c, int64_t a, int64_t b) {
  int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r))
    c.error("dimension " + std::to_string(a) + " x " + std::to_string(b) + " is out of range");
  return r;
}

// Integer arithmetic of a kernel's generic (non-SIMD) path: wraps like the SIMD kernels
// (simd/binary.cpp int_op) instead of signed overflow, which is undefined (UBSan on a hostile
// int32 MatMul/CumSum). Other types: the plain operation.
template <class T>
T wrap_add(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return static_cast<T>(a + b);
  }
}
template <class T>
T wrap_mul(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // At least unsigned int: uint16 operands promote to (signed) int, whose product overflows.
    using U = std::common_type_t<std::make_unsigned_t<T>, unsigned>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return static_cast<T>(a * b);
  }
}
// dispatch_type for the arithmetic kernels' generic paths: f(T{}) for every numeric type; a bool
// tensor is refused with `bool_error` (they have no arithmetic on bool).
template <class F>
void dispatch_arithmetic(const OpContext& c, DType t, const char* bool_error, F&& f) {
  dispatch_type(t, [&](auto v) {
    if constexpr (std::is_same_v<decltype(v), bool>)
      c.error(bool_error);
    else
      f(v);
  });
}
// An integer tensor's elements (int32/int64/...), e.g. shapes, axes, pads (a hostile model's
// floats saturate: Tensor::get_i64).
inline std::vector<int64_t> ints_of(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  if (t.dtype == DType::Int64) {
    if (!v.empty()) std::memcpy(v.data(), t.data, v.size() * 8);
  } else {
    for (size_t i = 0; i < v.size(); ++i) v[i] = t.get_i64(static_cast<int64_t>(i));
  }
  return v;
}
inline std::vector<float> floats_of(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(t.get_f64(static_cast<int64_t>(i)));
  return v;
}

// Axes from attribute `name` (older opsets) or input `index` (newer), normalised; `present`
// tells whether either was given.
inline std::vector<int64_t> axes_of(const OpContext& c, size_t index, std::string_view name, int64_t rank,
                                    bool* present = nullptr) {
  std::vector<int64_t> axes;
  bool given = false;
  if (const Tensor* t = c.in(index)) {
    axes = ints_of(*t);
    given = true;
  } else if (c.has_attr(name)) {
    auto a = c.attr_ints(name);
    axes.assign(a.begin(), a.end());
    given = true;
  }
  for (auto& a : axes) a = norm_axis(c, a, rank);
  if (present) *present = given;
  return axes;
}

// A shape around `axis`: the product of the dims before it, its length, the product of those after.
// Callers copy the fields into locals rather than a structured binding, which clang 14 (the fuzz
// build) cannot capture in a lambda.
struct AroundAxis {
  int64_t outer = 1, n = 1, inner = 1;
};
inline AroundAxis around_axis(const Shape& s, int64_t axis) {
  const auto a = static_cast<size_t>(axis);
  return {numel(std::span(s).first(a)), s[a], numel(std::span(s).subspan(a + 1))};
}

inline Shape broadcast_shapes(const OpContext& c, const Shape& a, const Shape& b) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t y = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (x != y && x != 1 && y != 1) c.error("shapes " + shape_str(a) + " and " + shape_str(b) + " do not broadcast");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

// Whether `s` broadcasts to `out` unidirectionally (Gemm's C, normalization parameters): a
// kernel reading it through bcast_strides would otherwise index past its end.
inline bool broadcasts_to(const Shape& s, const Shape& out) {
  if (s.size() > out.size()) return false;
  for (size_t i = 0; i < s.size(); ++i)
    if (s[s.size() - 1 - i] != 1 && s[s.size() - 1 - i] != out[out.size() - 1 - i]) return false;
  return true;
}

// Element strides of `s` broadcast to `out` (0 along broadcast dims).
inline std::vector<int64_t> bcast_strides(const Shape& s, const Shape& out) {
  std::vector<int64_t> st(out.size(), 0);
  int64_t acc = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    size_t si = s.size() - 1 - i, oi = out.size() - 1 - i;
    st[oi] = s[si] == 1 ? 0 : acc;
    acc *= s[si];
  }
  return st;
}

inline std::vector<int64_t> contiguous_strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

// Calls f(out_index, offset of each operand) over a broadcast of N operands to `out`.
template <size_t N, class F>
void for_each_broadcast(const Shape& out, const std::array<std::vector<int64_t>, N>& strides, F&& f) {
  const int64_t total = numel(out);
  if (total == 0) return;
  const size_t r = out.size();
  std::vector<int64_t> idx(r, 0);
  std::array<int64_t, N> off{};
  for (int64_t i = 0; i < total; ++i) {
    f(i, off);
    for (size_t d = r; d-- > 0;) {
      ++idx[d];
      for (size_t k = 0; k < N; ++k) off[k] += strides[k][d];
      if (idx[d] < out[d]) break;
      for (size_t k = 0; k < N; ++k) off[k] -= strides[k][d] * out[d];
      idx[d] = 0;
    }
  }
}

// Steps the multi-index `idx` to the next element of `shape` in row-major order (back to zeros
// after the last); idx has shape's rank.
inline void next_index(std::vector<int64_t>& idx, std::span<const int64_t> shape) {
  for (size_t d = idx.size(); d-- > 0;) {
    if (++idx[d] < shape[d]) return;
    idx[d] = 0;
  }
}

// f(i, ia, ib) for every element i of y (shape `out`) = a op b broadcast: the elements of a and b it
// reads.
template <class F>
void for_each_broadcast_pair(const Shape& a, const Shape& b, const Shape& out, F&& f) {
  for_each_broadcast<2>(out, {bcast_strides(a, out), bcast_strides(b, out)},
                        [&](int64_t i, const std::array<int64_t, 2>& o) { f(i, o[0], o[1]); });
}

}  // namespace onnxforge::rt
