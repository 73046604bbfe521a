#pragma once
// Reusable per-thread scratch memory for packing buffers.
//
// Allocating (and page-faulting) a few MB per call would cost as much as a small GEMM, so
// buffers come from a per-thread pool and go back to it on destruction. A thread that waits in
// a TBB parallel_for can pick up another task that also needs scratch; blocks in use are never
// handed out twice, so nesting just takes another block.
#include <cstddef>

namespace onnxforge::simd::detail {

class Scratch {
 public:
  // At least `floats` floats, 64-byte aligned, contents unspecified.
  explicit Scratch(std::size_t floats);
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  float* data() const { return data_; }

 private:
  float* data_;
  int slot_;
};

// 64-byte aligned allocation, freed with aligned_free().
float* aligned_alloc_floats(std::size_t floats);
void aligned_free(float* p) noexcept;

}  // namespace onnxforge::simd::detail
