#pragma once
// Reductions over any set of axes of a row-major contiguous tensor.
//
// `axes` are non-negative (the caller normalizes negative axes), each < rank, any order;
// duplicates are ignored. The output holds the kept dims in order (keepdims only changes the
// shape, which is the caller's business). An empty `axes` reduces nothing: every output is the
// op applied to one element (Sum/Mean/Max/Min/Prod copy, L1/L2 give |x|, SumSquare x*x,
// LogSum log x, LogSumExp x); ONNX's "empty axes = all axes" must be expanded by the caller.
// Reducing a zero-size dim gives the identity: Sum/L1/L2/SumSquare 0, Prod 1, Max -inf
// (integers: the type's lowest), Min +inf (highest), Mean NaN (integers: 0), LogSum and
// LogSumExp -inf. Float Max/Min propagate NaN. Float sums accumulate in float with many
// independent partial sums (relative error ~ eps * log2(n) in practice).
// Throws std::invalid_argument for an axis out of range or an op the type does not support.
#include <cstdint>
#include <span>

namespace onnxforge::simd {

enum class ReduceOp : std::uint8_t { Sum, Mean, Max, Min, Prod, L1, L2, SumSquare, LogSum, LogSumExp };

void reduce(ReduceOp op, std::span<const std::int64_t> shape, const float* x, std::span<const std::int64_t> axes,
            float* y);
// Integers: Sum, Mean (truncating), Max, Min, Prod, L1, SumSquare (wrapping arithmetic).
void reduce(ReduceOp op, std::span<const std::int64_t> shape, const std::int64_t* x, std::span<const std::int64_t> axes,
            std::int64_t* y);
void reduce(ReduceOp op, std::span<const std::int64_t> shape, const std::int32_t* x, std::span<const std::int64_t> axes,
            std::int32_t* y);

}  // namespace onnxforge::simd
