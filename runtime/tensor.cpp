#include "runtime/tensor.h"

#include <mimalloc.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "io/budget.h"
#include "io/units.h"
#include "ir/error.h"
#include "simd/nhwc.h"
#include "simd/transpose.h"
#include "simd/resample.h"
#include "simd/unary.h"

namespace onnxforge::rt {

int64_t numel(std::span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

size_t dtype_size(DType t) {
  int bits = dtype_bits(t);
  if (bits < 8) fail("element type ", dtype_name(t), " is not supported by the runtime");
  return static_cast<size_t>(bits / 8);
}

std::string shape_str(std::span<const int64_t> shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? "," : "") << shape[i];
  os << "]";
  return os.str();
}

// ------------------------------------------------------------------------- memory budget
//
// Every runtime buffer comes from alloc_bytes, which counts the bytes alive and refuses one that
// would take the total past the budget. A hostile model (a Loop of 2^62 iterations stacking scan
// outputs, Range to 2^62, ConstantOfShape of 2^64 elements) then stops with an error naming the
// node and the size instead of growing until the OOM killer ends the process.

uint64_t checked_bytes(DType dtype, std::span<const int64_t> shape) {
  uint64_t n = 1;
  bool overflow = false;
  for (int64_t d : shape) {
    if (d < 0) fail("a tensor of shape ", shape_str(shape), " has a negative dimension");
    if (d != 0 && n > UINT64_MAX / static_cast<uint64_t>(d))
      overflow = true;
    else
      n *= static_cast<uint64_t>(d);
  }
  for (int64_t d : shape)
    if (d == 0) return 0;  // an empty tensor, however large its other dims
  const uint64_t es = dtype_size(dtype);
  if (overflow || n > static_cast<uint64_t>(INT64_MAX) || n > UINT64_MAX / es)
    throw Error("a tensor of shape " + shape_str(shape) + " (" + std::string(dtype_name(dtype)) +
                    ") has more elements than memory can address",
                Error::Kind::Memory);
  return n * es;
}

// Under AddressSanitizer tensors come from the system allocator, which ASan instruments: an
// out-of-bounds kernel write into a mimalloc block would go unseen (the fuzz targets rely on it).
// Under ThreadSanitizer too: mimalloc's uninstrumented reuse of a block freed by another thread
// would show as a race between the old and the new owner.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ONNXFORGE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ONNXFORGE_ASAN 1
#endif
#endif

std::shared_ptr<std::byte> alloc_bytes(size_t bytes) {
  check_memory(bytes, "a buffer of " + std::to_string(bytes) + " bytes");
#ifdef ONNXFORGE_ASAN
  void* p = nullptr;
  if (::posix_memalign(&p, 64, std::max<size_t>(bytes, 1)) != 0) p = nullptr;  // exact size: ASan sees 1 byte past
  auto release = [](void* q) { std::free(q); };
#else
  void* p = mi_malloc_aligned(bytes ? bytes : 1, 64);
  auto release = [](void* q) { mi_free(q); };
#endif
  if (!p) throw Error("out of memory allocating " + human_bytes(bytes), Error::Kind::Memory);
  note_allocated(bytes);
  return std::shared_ptr<std::byte>(static_cast<std::byte*>(p), [bytes, release](std::byte* q) {
    note_released(bytes);
    release(q);
  });
}

Tensor Tensor::alloc(DType dtype, Shape shape) {
  const uint64_t bytes = checked_bytes(dtype, shape);
  check_memory(bytes, "a tensor of shape " + shape_str(shape) + " (" + std::string(dtype_name(dtype)) + ")");
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.hold = alloc_bytes(bytes);
  t.data = t.hold.get();
  return t;
}

Tensor Tensor::view(DType dtype, Shape shape, const void* data) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = const_cast<std::byte*>(static_cast<const std::byte*>(data));
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = alloc(dtype, shape);
  if (bytes()) std::memcpy(t.data, data, bytes());
  t.nhwc = nhwc;
  return t;
}

Tensor to_nchw(const Tensor& t) {
  if (!t.nhwc) return t;
  Tensor y = Tensor::alloc(t.dtype, t.shape);
  if (t.rank() != 4) throw std::logic_error("to_nchw: channels-last tensors are rank 4");
  if (t.dtype == DType::Float) {
    simd::nhwc_to_nchw(t.shape[0], t.shape[1], t.shape[2] * t.shape[3], t.ptr<float>(), y.ptr<float>());
  } else {  // float16 chains (and what an elementwise op such as Cast derives from them)
    const int64_t perm[] = {0, 3, 1, 2};
    simd::transpose(dtype_size(t.dtype), nhwc_physical_shape(t.shape), t.data, perm, y.data);
  }
  return y;
}

Shape nhwc_physical_shape(const Shape& logical) {
  Shape s(logical);
  while (s.size() < 4) s.insert(s.begin(), 1);
  return {s[0], s[2], s[3], s[1]};
}

double Tensor::get_f64(int64_t i) const {
  if (dtype == DType::Float16) return half_to_float(ptr<uint16_t>()[i]);
  if (dtype == DType::BFloat16) return bf16_to_float(ptr<uint16_t>()[i]);
  return dispatch_type(dtype, [&](auto v) {
    using T = decltype(v);
    T x;
    std::memcpy(&x, data + i * sizeof(T), sizeof(T));
    return static_cast<double>(x);
  });
}

int64_t Tensor::get_i64(int64_t i) const {
  if (is_float_dtype(dtype)) return from_double<int64_t>(get_f64(i));
  return dispatch_type(dtype, [&](auto v) {
    using T = decltype(v);
    T x;
    std::memcpy(&x, data + i * sizeof(T), sizeof(T));
    return static_cast<int64_t>(x);
  });
}

bool is_float_dtype(DType t) {
  return t == DType::Float || t == DType::Double || t == DType::Float16 || t == DType::BFloat16;
}
bool is_stored_float(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

namespace {

template <class To>
To convert_from_double(double v) {
  return from_double<To>(v);
}

}  // namespace

void cast_into(const Tensor& x, Tensor& y) {
  const int64_t n = x.numel();
  if (x.dtype == y.dtype) {
    if (n) std::memmove(y.data, x.data, x.bytes());
    return;
  }
  // float16 <-> float32 on F16C, in parallel: every op of a float16 model converts its inputs
  // and outputs through here (ISNet fp16 at 1024x1024: the scalar loops took 1.2 s of Casts and
  // most of 3.9 s of Relu per run).
  if (x.dtype == DType::Float16 && y.dtype == DType::Float) {
    simd::half_to_float(x.ptr<uint16_t>(), y.ptr<float>(), static_cast<size_t>(n));
    return;
  }
  if (x.dtype == DType::Float && y.dtype == DType::Float16) {
    simd::float_to_half(x.ptr<float>(), y.ptr<uint16_t>(), static_cast<size_t>(n));
    return;
  }
  if (x.dtype == DType::BFloat16 && y.dtype == DType::Float) {
    simd::bf16_to_float(x.ptr<uint16_t>(), y.ptr<float>(), static_cast<size_t>(n));
    return;
  }
  if (x.dtype == DType::Float && y.dtype == DType::BFloat16) {
    simd::float_to_bf16(x.ptr<float>(), y.ptr<uint16_t>(), static_cast<size_t>(n));
    return;
  }
  // Read side: stored floats go through float.
  auto read = [&](auto store) {
    using To = decltype(store);
    To* out = y.ptr<To>();
    if (x.dtype == DType::Float16) {
      for (int64_t i = 0; i < n; ++i) out[i] = convert_from_double<To>(half_to_float(x.ptr<uint16_t>()[i]));
    } else if (x.dtype == DType::BFloat16) {
      for (int64_t i = 0; i < n; ++i) out[i] = convert_from_double<To>(bf16_to_float(x.ptr<uint16_t>()[i]));
    } else {
      dispatch_type(x.dtype, [&](auto from) {
        using From = decltype(from);
        const From* in = x.ptr<From>();
        for (int64_t i = 0; i < n; ++i) {
          if constexpr (std::is_integral_v<From> && std::is_integral_v<To> && !std::is_same_v<To, bool>)
            out[i] = static_cast<To>(in[i]);  // integer casts wrap (two's complement), as in numpy
          else if constexpr (std::is_same_v<From, float> && std::is_same_v<To, double>)
            out[i] = in[i];
          else
            out[i] = convert_from_double<To>(static_cast<double>(in[i]));
        }
      });
    }
  };
  if (y.dtype == DType::Float16 || y.dtype == DType::BFloat16) {
    std::vector<float> tmp(static_cast<size_t>(n));
    Tensor t = Tensor::view(DType::Float, x.shape, tmp.data());
    cast_into(x, t);
    if (y.dtype == DType::Float16)
      simd::float_to_half(tmp.data(), y.ptr<uint16_t>(), tmp.size());
    else
      simd::float_to_bf16(tmp.data(), y.ptr<uint16_t>(), tmp.size());
    return;
  }
  dispatch_type(y.dtype, read);
}

Tensor cast(const Tensor& x, DType to) {
  Tensor y = Tensor::alloc(to, x.shape);
  cast_into(x, y);
  return y;
}

}  // namespace onnxforge::rt
