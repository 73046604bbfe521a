#pragma once
// The per-ISA kernels behind simd/attention.h (kernels/attention.inl, compiled once per level).
// A table of their own rather than entries of KernelTable: the drivers pick it by the active
// level (simd/attention.cpp).
#include <cstddef>

namespace onnxforge::simd::detail {

struct AttentionKernels {
  void (*scores)(std::size_t rows, const float* const* q, std::size_t n, std::size_t d, const float* k, std::size_t ldk,
                 float scale, float* s, std::size_t lds) = nullptr;
  void (*exp)(std::size_t rows, std::size_t n, float* s, std::size_t lds, float* max, float* sum) = nullptr;
  void (*values)(std::size_t rows, std::size_t n, std::size_t dv, const float* p, std::size_t ldp, const float* v,
                 std::size_t ldv, float* const* acc) = nullptr;
};

namespace sse {
const AttentionKernels& attention_kernels();
}
namespace avx2 {
const AttentionKernels& attention_kernels();
}
namespace avx512 {
const AttentionKernels& attention_kernels();
}

}  // namespace onnxforge::simd::detail
