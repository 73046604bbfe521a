#pragma once
// Run-time tensors: a dtype, a shape and a pointer. A tensor either views memory someone else
// owns (a weight in the model's mapping, an arena slot, a caller's buffer) or holds a reference
// to heap memory it keeps alive (`hold`). Copying a Tensor copies the view, never the bytes.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "io/budget.h"  // the memory budget alloc_bytes and Tensor::alloc enforce
#include "ir/float16.h"
#include "ir/types.h"

namespace onnxforge::rt {

using Shape = std::vector<int64_t>;

int64_t numel(std::span<const int64_t> shape);
size_t dtype_size(DType t);  // bytes per element; throws for String and sub-byte types
std::string shape_str(std::span<const int64_t> shape);

struct Tensor {
  DType dtype = DType::Undefined;
  Shape shape;
  std::byte* data = nullptr;
  std::shared_ptr<std::byte> hold;  // set when the tensor owns (a share of) heap memory
  // Channels-last: a rank-4 float tensor whose shape is [N, C, H, W] but whose bytes are laid
  // out as [N, H, W, C]. Only the runtime's frame and layout-aware kernels ever see one
  // (runtime/README.md, "Layouts").
  bool nhwc = false;

  int64_t numel() const { return rt::numel(shape); }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  template <class T>
  T* ptr() {
    return reinterpret_cast<T*>(data);
  }
  template <class T>
  const T* ptr() const {
    return reinterpret_cast<const T*>(data);
  }
  std::span<const std::byte> byte_span() const { return {data, bytes()}; }

  // A new heap tensor (64-byte aligned, uninitialised; mimalloc underneath).
  static Tensor alloc(DType dtype, Shape shape);
  // A view of memory owned elsewhere.
  static Tensor view(DType dtype, Shape shape, const void* data);
  // A deep copy into new heap memory (same layout).
  Tensor clone() const;
  // Scalar helpers: element i converted to double / int64 (any numeric dtype).
  double get_f64(int64_t i) const;
  int64_t get_i64(int64_t i) const;
};

// An input of a node as handed to evaluate_node (a view), and what comes back (owning).
using TensorView = Tensor;
using OwnedTensor = Tensor;

// Heap buffer with mimalloc, 64-byte aligned, released with the last shared_ptr. Counted against
// the memory budget: throws onnxforge::Error (Kind::Memory) instead of exceeding it.
std::shared_ptr<std::byte> alloc_bytes(size_t bytes);

// Bytes of a dense tensor; throws on a negative dim or an element count that overflows.
uint64_t checked_bytes(DType dtype, std::span<const int64_t> shape);

// float16 / bfloat16 conversions: ir/float16.h (half_to_float, float_to_half, bf16_to_float, float_to_bf16).

// The tensor with its bytes in the plain row-major layout of its shape: `t` itself, or a
// converted copy of a channels-last one.
Tensor to_nchw(const Tensor& t);
// [N, C, H, W] -> [N, H, W, C]: the shape a channels-last tensor's bytes have (ranks below 4
// are first extended with leading 1s, as broadcasting does).
Shape nhwc_physical_shape(const Shape& logical);

bool is_float_dtype(DType t);   // Float, Double, Float16, BFloat16
bool is_stored_float(DType t);  // Float16, BFloat16: converted to float for compute

// double -> To as Cast does: out-of-range float->int casts are UB in C++, so integers saturate
// like ORT does on x86 for int64, and NaN becomes 0.
template <class To>
To from_double(double v) {
  if constexpr (std::is_same_v<To, bool>)
    return v != 0;
  else if constexpr (std::is_floating_point_v<To>)
    return static_cast<To>(v);
  else {
    if (std::isnan(v)) return To{0};
    if (v >= static_cast<double>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    if (v <= static_cast<double>(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
    return static_cast<To>(v);
  }
}
// Converts any numeric tensor to `to` (ONNX Cast semantics for numerics and bool).
Tensor cast(const Tensor& x, DType to);
void cast_into(const Tensor& x, Tensor& y);  // y preallocated with x's shape

// Calls f(T{}) with T the C++ type of dtype t (numeric and bool). Throws for others.
template <class F>
decltype(auto) dispatch_type(DType t, F&& f);

}  // namespace onnxforge::rt

#include "runtime/tensor_dispatch.h"
