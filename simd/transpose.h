#pragma once
// N-d transpose (ONNX Transpose, also a strided gather into a contiguous tensor).
//
// y[i0, .., ir-1] = x[j] where output dim d is input dim perm[d]; y is row-major contiguous
// with shape in_shape[perm[d]]. Elements are `elem_size` bytes (1, 2, 4 or 8). `in_strides`
// gives the input layout in elements (any non-negative strides, e.g. a slice of a bigger
// tensor); empty means contiguous row-major. perm must be a permutation of 0..rank-1.
// x and y must not overlap. Throws std::invalid_argument on a bad perm or element size.
#include <cstddef>
#include <cstdint>
#include <span>

namespace onnxforge::simd {

void transpose(std::size_t elem_size, std::span<const std::int64_t> in_shape, const void* x,
               std::span<const std::int64_t> perm, void* y, std::span<const std::int64_t> in_strides = {});

}  // namespace onnxforge::simd
