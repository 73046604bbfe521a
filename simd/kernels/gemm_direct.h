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

// Indirect ("implicit GEMM") micro-kernels: A is not a matrix but `segs` segments of `len` k
// steps each; in segment s, row i of the tile reads its len floats at ptrs[s * rows + i] + off
// (rows: the tile's row count, the table slot). B is one packed panel (its width per k step),
// the segments' k steps consecutive in it. The sums stay in registers across the segments;
// then the epilogue as GemmUKernel. Used by the channels-last conv (conv_nhwc.cpp): one
// segment per kernel tap, each row pointing at an input pixel (or at zeros in the padding).
using GemmUKernelIndirect = void (*)(std::size_t segs, std::size_t len, const float* const* ptrs, std::size_t off,
                                     const float* b, float* c, std::size_t ldc, std::size_t n, const TileEpilogue& ep);

// Per panel width: panels[0] is the GEMM's own (GemmKernels::nr, mr rows); panels[1], where
// the ISA has one (nv > 0), a wider panel with fewer rows (AVX-512: 64 columns x 6 rows, so
// that 64, 128, 256 ... output channels leave no partial panel).
struct GemmIndirectKernels {
  struct Panel {
    int nv = 0;                                        // vectors per panel row (panel width nv * vec, B's k stride)
    int mr = 0;                                        // rows of a full micro-tile
    GemmUKernelIndirect ukernel[kMaxMr][kMaxNv] = {};  // [rows - 1][vectors - 1], as GemmKernels
  };
  Panel panels[2];
};

// One table of each per ISA level (kernels/gemm.inl).
#define ONNXFORGE_SIMD_DECLARE_GEMM_TABLES(ns)                 \
  namespace ns {                                               \
  const GemmDirectKernels& gemm_direct_kernels() noexcept;     \
  const GemmIndirectKernels& gemm_indirect_kernels() noexcept; \
  }
ONNXFORGE_SIMD_DECLARE_GEMM_TABLES(sse)
ONNXFORGE_SIMD_DECLARE_GEMM_TABLES(avx2)
ONNXFORGE_SIMD_DECLARE_GEMM_TABLES(avx512)
#undef ONNXFORGE_SIMD_DECLARE_GEMM_TABLES

}  // namespace onnxforge::simd::detail
