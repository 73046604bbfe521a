#pragma once
// The kernels' parallel helpers live in simd/parallel.h; the drivers use them unqualified.
#include "simd/parallel.h"

namespace onnxforge::simd::detail {
using simd::elementwise_grain;
using simd::max_threads;
using simd::parallel_chunks;
using simd::parallel_each;
}  // namespace onnxforge::simd::detail
