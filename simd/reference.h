#pragma once
// Scalar reference implementations of every simd kernel: straightforward loops accumulating in
// double, written for clarity, not speed. The tests compare the vectorized kernels against
// them; the runtime can use them as a second opinion. Arguments mean the same as in the
// corresponding simd/*.h function.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "simd/binary.h"
#include "simd/conv.h"
#include "simd/gemm.h"
#include "simd/pad.h"
#include "simd/reduce.h"
#include "simd/unary.h"

namespace onnxforge::simd::ref {

void gemm(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, float alpha, const float* A,
          std::size_t lda, const float* B, std::size_t ldb, float beta, float* C, std::size_t ldc,
          const Epilogue& ep = {});

void matmul(std::span<const std::int64_t> a_shape, const float* a, std::span<const std::int64_t> b_shape,
            const float* b, float* y);

void conv(const ConvParams& p, const float* x, const float* w, const float* bias, float* y, const Unary& act = {});

// f evaluated in double (then rounded to float).
double unary(const Unary& f, double x);
void unary(const Unary& f, const float* x, float* y, std::size_t n);

double binary(BinaryOp op, double a, double b);
std::int64_t binary(BinaryOp op, std::int64_t a, std::int64_t b, int bits);  // bits: 32 or 64 (wraps)
bool compare(CompareOp op, double a, double b);

// Broadcasting drivers over any element type, by plain index arithmetic.
void binary(BinaryOp op, Shape a_shape, const float* a, Shape b_shape, const float* b, float* y);
void binary(BinaryOp op, Shape a_shape, const std::int32_t* a, Shape b_shape, const std::int32_t* b, std::int32_t* y);
void binary(BinaryOp op, Shape a_shape, const std::int64_t* a, Shape b_shape, const std::int64_t* b, std::int64_t* y);
void compare(CompareOp op, Shape a_shape, const float* a, Shape b_shape, const float* b, std::uint8_t* y);
void compare(CompareOp op, Shape a_shape, const std::int64_t* a, Shape b_shape, const std::int64_t* b, std::uint8_t* y);

void layer_norm(std::size_t rows, std::size_t cols, const float* x, const float* scale, const float* bias, float eps,
                float* y, float* mean = nullptr, float* inv_std = nullptr);
void rms_norm(std::size_t rows, std::size_t cols, const float* x, const float* scale, float eps, float* y,
              float* inv_rms = nullptr);
void softmax(std::size_t rows, std::size_t cols, const float* x, float* y);
void log_softmax(std::size_t rows, std::size_t cols, const float* x, float* y);
void softmax_axis(std::size_t outer, std::size_t n, std::size_t inner, const float* x, float* y, bool log = false);

void reduce(ReduceOp op, std::span<const std::int64_t> shape, const float* x, std::span<const std::int64_t> axes,
            float* y);
void reduce(ReduceOp op, std::span<const std::int64_t> shape, const std::int64_t* x, std::span<const std::int64_t> axes,
            std::int64_t* y);

void transpose(std::size_t elem_size, std::span<const std::int64_t> in_shape, const void* x,
               std::span<const std::int64_t> perm, void* y, std::span<const std::int64_t> in_strides = {});

// Element by element from the definition: crop by the negative pads, then fill each output
// index from its own source index (its own mirror, clamp or wrap, not simd::pad_source_index).
void pad(std::size_t elem_size, std::span<const std::int64_t> in_shape, const void* x,
         std::span<const std::int64_t> begin, std::span<const std::int64_t> end, PadMode mode, const void* value,
         void* y);

}  // namespace onnxforge::simd::ref
