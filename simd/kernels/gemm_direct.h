#pragma once
// GEMM micro-kernels that read A in place from a row-major op(A) (row i of the tile at
// a + i * lda, k steps contiguous) instead of from a packed A panel: the same contract as
// GemmUKernel (kernel_table.h) otherwise. They spare the driver the A packing pass when op(A)
// is not transposed; the sum order per element is the same as the packed kernels'.
#include <cstddef>

#include "simd/detail/kernel_table.h"

namespace onnxforge::simd::detail {

using GemmUKernelDirectA = void (*)(std::size_t kc, const float* a, std::size_t lda, const float* b, std::size_t ldb,
                                    float* c, std::size_t ldc, std::size_t n, const TileEpilogue& ep);

// Full-width tiles of `rows` rows over wide_panels consecutive B panels, panel p at
// b + p * pstride (pstride = nr for a B read in place, kc * nr for packed panels).
using GemmUKernelWide = void (*)(std::size_t kc, const float* a, std::size_t lda, const float* b, std::size_t ldb,
                                 std::size_t pstride, float* c, std::size_t ldc, const TileEpilogue& ep);

struct GemmDirectKernels {
  GemmUKernelDirectA ukernel[kMaxMr][kMaxNv] = {};  // [rows - 1][vectors - 1], as GemmKernels
  int wide_panels = 0;
  GemmUKernelWide wide[2] = {};  // [rows - 1], nullptr where the ISA has no such kernel
};

// One table per ISA level (kernels/gemm.inl).
namespace sse {
const GemmDirectKernels& gemm_direct_kernels() noexcept;
}
namespace avx2 {
const GemmDirectKernels& gemm_direct_kernels() noexcept;
}
namespace avx512 {
const GemmDirectKernels& gemm_direct_kernels() noexcept;
}

}  // namespace onnxforge::simd::detail
