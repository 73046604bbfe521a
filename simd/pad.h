#pragma once
// N-d padding (ONNX Pad) over elements of any size that divides 64 bytes (1, 2, 4, 8, 16).
//
// y has shape in_shape[d] + begin[d] + end[d], row-major. A negative pad crops the input on
// that side first (as ONNX Runtime does: the other modes then mirror, clamp or wrap within the
// cropped input), then the non-negative pads are filled: Constant writes `value` (elem_size
// bytes), Edge repeats the border element, Reflect mirrors without repeating it (period
// 2 (n - 1), so pads wider than the axis keep reflecting; n = 1 repeats), Wrap repeats the input
// periodically. x and y must not overlap.
//
// Trailing axes that are neither padded nor cropped merge into the element (a channels-last
// image padded over H and W copies whole pixels). Each output row is written once, border and
// copy in one pass of the ISA's row kernel; rows run in parallel. Throws std::invalid_argument
// when a crop exceeds its axis, when a non-constant mode would pad an empty axis, or for an
// element size that does not divide 64.
#include <cstddef>
#include <cstdint>
#include <span>

namespace onnxforge::simd {

enum class PadMode : std::uint8_t { Constant, Reflect, Edge, Wrap };

void pad(std::size_t elem_size, std::span<const std::int64_t> in_shape, const void* x,
         std::span<const std::int64_t> begin, std::span<const std::int64_t> end, PadMode mode, const void* value,
         void* y);

// The input index output index `o` reads along an axis of length n (already cropped) padded by
// `before` at its start, or -1 when it is outside in Constant mode (n > 0 unless Constant).
std::int64_t pad_source_index(std::int64_t o, std::int64_t before, std::int64_t n, PadMode mode);

}  // namespace onnxforge::simd
