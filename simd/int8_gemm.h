#pragma once
// Integer GEMM for the quantized ops (MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv):
//
//   C[m, n] = sum_k (A[m, k] - za) * (B[k, n] - zb[n])      (int32, wrapping like the spec's int32)
//
// A and B are 8-bit, each signed or unsigned; zb is one value (per tensor) or N values (per
// column: per output channel of a weight). The kernels multiply an unsigned A' by a signed B'
// and fold the rest into zero points (the usual offset tricks): a signed A is A' = A ^ 0x80 =
// A + 128 with za' = za + 128, an unsigned B is B' = B ^ 0x80 = B - 128 with zb' = zb - 128. Then
//   C = sum A'B' - zb'[n] * rowsum(A')[m] - za' * colsum(B')[n] + K * za' * zb'[n]
// computed modulo 2^32, which is exact whenever the true result fits int32 (the spec's output
// type; ONNX Runtime wraps the same way).
//
// Kernels, by active ISA level (simd/isa.h):
//   avx512 with AVX512-VNNI: vpdpbusd (u8 x s8, four products into int32 without intermediate
//     rounding or saturation: exact), 8 x 32 tiles.
//   avx2 (and avx512 without VNNI): not vpmaddubsw: its u8 x s8 pair sums saturate at int16
//     (255 * 127 * 2 = 64770 > 32767), so results would depend on the data. Instead A' and B'
//     are widened to int16 at packing time and vpmaddwd sums pairs into int32 (|pair| <= 2 *
//     255 * 128 = 65280: exact), 6 x 16 tiles. Half vpmaddubsw's rate, but never wrong.
//   sse: the same arithmetic in scalar C++ on the VNNI layout.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "simd/isa.h"
#include "simd/unary.h"

namespace onnxforge::simd {

enum class Int8Kernel : std::uint8_t { Scalar, Avx2, Vnni };

// Kernel the active ISA level uses, and its name ("scalar", "avx2-vpmaddwd", "avx512-vnni").
Int8Kernel active_int8_kernel() noexcept;
const char* int8_kernel_name(Int8Kernel k) noexcept;
// Whether the CPU has AVX512-VNNI (and the level allows it).
bool cpu_has_vnni() noexcept;

// op(B) (K x N) packed once for the kernel active when packing (constant weights: per plan).
class PackedB8 {
 public:
  PackedB8() = default;
  std::size_t k() const { return k_; }
  std::size_t n() const { return n_; }
  Int8Kernel kernel() const { return kernel_; }
  std::size_t bytes() const { return bytes_; }
  bool empty() const { return data_ == nullptr; }

 private:
  friend PackedB8 pack_b8(bool, std::size_t, std::size_t, const void*, std::size_t, bool, const std::int32_t*,
                          std::size_t);
  friend struct Int8Access;
  std::shared_ptr<std::uint8_t[]> data_;  // panels, then colsum[n_pad] and zb'[n_pad] (int32)
  std::size_t k_ = 0, n_ = 0, kg_ = 0, nr_ = 0, n_pad_ = 0, bytes_ = 0;
  bool zb_zero_ = true;  // every zb' is 0 (signed B with zero point 0: the rowsum term drops)
  Int8Kernel kernel_ = Int8Kernel::Scalar;
};

// B element (k, n) is B[n * ldb + k] with trans_b, else B[k * ldb + n]; int8 when b_signed,
// else uint8. zb: nullptr (0), zb_count == 1 (per tensor) or N (per column), in B's type range.
PackedB8 pack_b8(bool trans_b, std::size_t K, std::size_t N, const void* B, std::size_t ldb, bool b_signed,
                 const std::int32_t* zb, std::size_t zb_count);

// C (M x N, row stride ldc) = sum_k (A[m, k] - za) * (B[k, n] - zb[n]) with op(B) packed; A is
// row-major (row stride lda), int8 when a_signed else uint8. parallel: split over threads
// (simd/parallel.h); false when the caller already runs in parallel (conv chunks).
void gemm8(std::size_t M, const void* A, std::size_t lda, bool a_signed, std::int32_t za, const PackedB8& B,
           std::int32_t* C, std::size_t ldc, bool parallel = true);

// The same product with A given k-major: element (m, k) at At[k * ld_at + m]. A conv's patches
// come this way (each k is a run of output positions, a contiguous copy of an input row; a 1x1
// conv's A is the input itself), so no per-position im2col is needed: the rows are interleaved
// into the kernel's panels here with byte unpacks. Runs on the calling thread (conv chunks are
// already parallel).
void gemm8_at(std::size_t M, const void* At, std::size_t ld_at, bool a_signed, std::int32_t za, const PackedB8& B,
              std::int32_t* C, std::size_t ldc);

// ---- direct int8 convolution -------------------------------------------------------------
//
// The conv GEMM the other way round: y[m][p] = sum_k (W'[m][k]) * (X'[k][p]) with the weights as
// the broadcast operand (MR output channels per tile, packed once) and the patches as the vector
// operand (NR positions per tile, VNNI cells of 4 k per position). The tile's rows are output
// channels and its columns positions, so the result is stored straight into the NCHW output with
// its epilogue (int32, or float * scale + bias, Relu/Clip) instead of a [position][channel]
// int32 tile transposed and converted afterwards. Patch row k at position q is x[off[k] + q]: a
// stride-1 conv over an input padded with its zero point has every patch row contiguous across
// whole output rows (positions counted over the padded width, the pad columns discarded), so the
// patches are packed from x directly, never copied K-row-major first.

// Weights W (M x K, row stride ldw; int8 when w_signed else uint8, zero points zw: nullptr, one
// or M values) packed for conv8 under the kernel active when packing.
class PackedW8 {
 public:
  PackedW8() = default;
  std::size_t m() const { return m_; }
  std::size_t k() const { return k_; }
  Int8Kernel kernel() const { return kernel_; }
  bool empty() const { return data_ == nullptr; }

 private:
  friend PackedW8 pack_w8(std::size_t, std::size_t, const void*, std::size_t, bool, const std::int32_t*,
                          std::size_t);
  friend struct Int8Access;
  std::shared_ptr<std::uint8_t[]> data_;  // panels, then rowsum(W')[m_pad] and zw'[m_pad] (int32)
  std::size_t m_ = 0, k_ = 0, kg_ = 0, mr_ = 0, m_pad_ = 0;
  bool zw_zero_ = true;
  Int8Kernel kernel_ = Int8Kernel::Scalar;
};

PackedW8 pack_w8(std::size_t M, std::size_t K, const void* W, std::size_t ldw, bool w_signed, const std::int32_t* zw,
                 std::size_t zw_count);

// Where conv8 writes y[m][position]: int32 as is, or float: float(acc) * mult[m] (+ bias[m]),
// the two roundings in that order (the dequantize graph's Cast -> Mul -> Add), then act when it
// is Relu or Clip (bit for bit simd::unary's: maxps(lo, v) then minps(hi, .)); other activations
// are the caller's to apply.
struct Conv8Output {
  std::int32_t* i32 = nullptr;  // one of i32 / f32
  float* f32 = nullptr;
  std::size_t ld = 0;           // elements between output channels
  const float* mult = nullptr;  // float: mult_count (1 or M) values
  std::size_t mult_count = 1;
  const float* bias = nullptr;  // float: nullptr, or bias_count (1 or M) values
  std::size_t bias_count = 1;
  Unary act{};
};

// y[m][pos(q)] = sum_k (x[off[k] + q] - zx) * (W[m][k] - zw[m]) for q in [0, Q), where position q
// is output row q / row_len, column q % row_len, kept only when the column is < out_w (out_w <=
// row_len; the output row stride is out_w). x[off[k] + q] must be readable for every q < Q.
// parallel: split over threads (simd/parallel.h).
void conv8(std::size_t Q, std::size_t row_len, std::size_t out_w, const std::uint8_t* x, const std::size_t* off,
           bool x_signed, std::int32_t zx, const PackedW8& w, const Conv8Output& out, bool parallel = true);

// A stride-1 2-D convolution of one image (and group) on conv8: x is [C][H][W], the weights
// [M][C * KH * KW] packed by pack_w8, padding with x's zero point, any dilation; the output
// [M][OH][OW] (out.ld = OH * OW for NCHW). With padding the input is first copied into a padded
// plane per channel (per-thread scratch, one pass over the input: small against the K = C*KH*KW
// multiply-adds per output), so that every patch row is a run of the padded input.
struct Conv8Shape {
  std::size_t C, H, W, KH, KW;
  std::size_t pad_t, pad_l, pad_b, pad_r, dil_h, dil_w;
  std::size_t out_h() const { return H + pad_t + pad_b - (KH - 1) * dil_h; }
  std::size_t out_w() const { return W + pad_l + pad_r - (KW - 1) * dil_w; }
};
void conv8_2d(const Conv8Shape& s, const std::uint8_t* x, bool x_signed, std::int32_t zx, const PackedW8& w,
              const Conv8Output& out, bool parallel = true);

// Scalar int64 reference of the same product (tests, and the spec's meaning), truncated to int32.
void gemm8_reference(std::size_t M, std::size_t N, std::size_t K, const void* A, std::size_t lda, bool a_signed,
                     std::int32_t za, bool trans_b, const void* B, std::size_t ldb, bool b_signed,
                     const std::int32_t* zb, std::size_t zb_count, std::int32_t* C, std::size_t ldc);

}  // namespace onnxforge::simd
