#pragma once
// Broadcasting elementwise binary ops and comparisons (NumPy / ONNX multidirectional
// broadcasting) over row-major contiguous tensors.
//
// Shapes are right-aligned; a dim of 1 (or a missing leading dim) broadcasts. The output has
// shape broadcast_shape(a_shape, b_shape) and must not overlap an input unless it is that
// input exactly with the same shape (y == a with a_shape == output shape is fine).
// Zero-size outputs are no-ops. Mismatching shapes throw std::invalid_argument.
//
// Semantics follow ONNX:
//  - float Max/Min propagate NaN (if either side is NaN the result is NaN).
//  - integer Div truncates toward zero (C++ `/`, as ONNX Runtime and the ONNX spec);
//    division by zero gives 0 and INT_MIN / -1 gives INT_MIN instead of trapping.
//  - integer Pow: exponent < 0 gives 0 except for bases 1 and -1 (trunc of the real result).
//  - comparisons write 0/1 bytes (ONNX bool); any comparison with NaN is false.
#include <cstdint>
#include <span>
#include <vector>

namespace onnxforge::simd {

using Shape = std::span<const std::int64_t>;

enum class BinaryOp : std::uint8_t { Add, Sub, Mul, Div, Max, Min, Pow };
enum class CompareOp : std::uint8_t { Equal, NotEqual, Less, LessOrEqual, Greater, GreaterOrEqual };

// The broadcast result shape; throws std::invalid_argument if a and b are incompatible.
std::vector<std::int64_t> broadcast_shape(Shape a, Shape b);

void binary(BinaryOp op, Shape a_shape, const float* a, Shape b_shape, const float* b, float* y);
void binary(BinaryOp op, Shape a_shape, const std::int32_t* a, Shape b_shape, const std::int32_t* b, std::int32_t* y);
void binary(BinaryOp op, Shape a_shape, const std::int64_t* a, Shape b_shape, const std::int64_t* b, std::int64_t* y);

void compare(CompareOp op, Shape a_shape, const float* a, Shape b_shape, const float* b, std::uint8_t* y);
void compare(CompareOp op, Shape a_shape, const std::int32_t* a, Shape b_shape, const std::int32_t* b, std::uint8_t* y);
void compare(CompareOp op, Shape a_shape, const std::int64_t* a, Shape b_shape, const std::int64_t* b, std::uint8_t* y);

}  // namespace onnxforge::simd
