#pragma once
// dispatch_type: the C++ type for a DType (included from tensor.h).
#include "ir/error.h"

namespace onnxforge::rt {

template <class F>
decltype(auto) dispatch_type(DType t, F&& f) {
  switch (t) {
    case DType::Float: return f(float{});
    case DType::Double: return f(double{});
    case DType::Int64: return f(int64_t{});
    case DType::Int32: return f(int32_t{});
    case DType::Int16: return f(int16_t{});
    case DType::Int8: return f(int8_t{});
    case DType::Uint8: return f(uint8_t{});
    case DType::Uint16: return f(uint16_t{});
    case DType::Uint32: return f(uint32_t{});
    case DType::Uint64: return f(uint64_t{});
    case DType::Bool: return f(bool{});
    default: fail("element type ", dtype_name(t), " is not supported by this operation");
  }
}

}  // namespace onnxforge::rt
