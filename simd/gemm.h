#pragma once
// Single-precision GEMM: C = act(alpha * op(A) * op(B) + beta * C + bias), row-major.
//
// op(A) is M x K, op(B) is K x N, C is M x N with leading dimension ldc (elements between rows).
// With trans_a the stored A is K x M (lda >= M), otherwise M x K (lda >= K); likewise for B.
// beta == 0 means C is write-only (its old contents, NaN included, are ignored), as in BLAS.
// The epilogue (bias, then activation) is applied once, after the full K sum, while the tile is
// still in cache. K == 0 (or alpha == 0) gives C = act(beta * C + bias).
// Work is split into register-blocked micro-tiles over packed A/B panels and run on TBB.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "simd/isa.h"
#include "simd/unary.h"

namespace onnxforge::simd {

enum class Bias : std::uint8_t {
  None,
  PerCol,  // bias[n] added to column n (length N): Gemm/MatMul + Add of a row vector
  PerRow,  // bias[m] added to row m (length M): Conv output channels
};

struct Epilogue {
  Bias bias_kind = Bias::None;
  const float* bias = nullptr;
  Unary act{};
};

void gemm(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, float alpha, const float* A,
          std::size_t lda, const float* B, std::size_t ldb, float beta, float* C, std::size_t ldc,
          const Epilogue& ep = {});

// B packed once into the micro-kernel's panel layout, for constant weights reused across calls.
// The packing is tied to the ISA level active when it was made; gemm_packed() always uses that
// level's kernel, so a PackedB stays valid if set_isa() changes the level later.
class PackedB {
 public:
  PackedB() = default;
  std::size_t k() const { return k_; }
  std::size_t n() const { return n_; }
  Isa isa() const { return isa_; }
  bool empty() const { return data_ == nullptr; }
  std::size_t bytes() const { return floats_ * sizeof(float); }
  const float* data() const { return data_.get(); }

 private:
  friend PackedB pack_b(bool, std::size_t, std::size_t, const float*, std::size_t);
  struct Free {
    void operator()(float* p) const noexcept;
  };
  std::unique_ptr<float[], Free> data_;
  std::size_t k_ = 0, n_ = 0, floats_ = 0;
  Isa isa_ = Isa::Sse;
};

// Packs op(B) (K x N) for the active ISA level; B is read only during the call.
PackedB pack_b(bool trans_b, std::size_t K, std::size_t N, const float* B, std::size_t ldb);

// As gemm() with op(B) = the packed matrix (K = packed.k(), N = packed.n()).
void gemm_packed(bool trans_a, std::size_t M, float alpha, const float* A, std::size_t lda, const PackedB& B,
                 float beta, float* C, std::size_t ldc, const Epilogue& ep = {});

// Batched GEMM with a constant element stride between consecutive problems (a stride of 0
// broadcasts that operand, e.g. shared weights). A PerRow/PerCol bias is shared by all problems.
struct BatchStrides {
  std::size_t a = 0, b = 0, c = 0;
};
void gemm_batched(std::size_t batch, bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K,
                  float alpha, const float* A, std::size_t lda, const float* B, std::size_t ldb, float beta, float* C,
                  std::size_t ldc, BatchStrides strides, const Epilogue& ep = {});

// Batched GEMM over arbitrary per-problem pointers (C pointers must be distinct).
void gemm_batched(std::size_t batch, bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K,
                  float alpha, const float* const* A, std::size_t lda, const float* const* B, std::size_t ldb,
                  float beta, float* const* C, std::size_t ldc, const Epilogue& ep = {});

// ONNX MatMul (numpy.matmul) on contiguous tensors, including 1-D operands and broadcasting of
// the batch dims. y has shape matmul_shape(a_shape, b_shape). Throws std::invalid_argument on
// incompatible shapes.
std::vector<std::int64_t> matmul_shape(std::span<const std::int64_t> a_shape, std::span<const std::int64_t> b_shape);
void matmul(std::span<const std::int64_t> a_shape, const float* a, std::span<const std::int64_t> b_shape,
            const float* b, float* y, const Epilogue& ep = {});

}  // namespace onnxforge::simd
