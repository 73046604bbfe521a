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
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
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

// ---- direct int8 convolution -------------------------------------------------------------
//
// The conv GEMM the other way round: y[m][p] = sum_k (W'[m][k]) * (X'[k][p]) with the weights as
// the broadcast operand (MR output channels per tile, packed once) and the patches as the vector
// operand (NR positions per tile, VNNI cells of 4 k per position). The tile's rows are output
// channels and its columns positions, so the result is stored straight into the NCHW output with
// its epilogue (int32; float * scale + bias, Relu/Clip; or requantized 8-bit) instead of a
// [position][channel] int32 tile transposed and converted afterwards. On VNNI a tile whose 32
// positions are one run of the output is converted and stored from the registers. Patch row k at position q is x[off[k]
// + q]: a stride-1 conv over an input padded with its zero point has every patch row contiguous across whole output
// rows (positions counted over the padded width, the pad columns discarded), so the patches are packed from x directly,
// never copied K-row-major first.

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
  friend PackedW8 pack_w8(std::size_t, std::size_t, const void*, std::size_t, bool, const std::int32_t*, std::size_t);
  friend struct Int8Access;
  std::shared_ptr<std::uint8_t[]> data_;  // panels, then rowsum(W')[m_pad] and zw'[m_pad] (int32)
  std::size_t m_ = 0, k_ = 0, kg_ = 0, mr_ = 0, m_pad_ = 0;
  bool zw_zero_ = true;
  Int8Kernel kernel_ = Int8Kernel::Scalar;
};

PackedW8 pack_w8(std::size_t M, std::size_t K, const void* W, std::size_t ldw, bool w_signed, const std::int32_t* zw,
                 std::size_t zw_count);

// Where conv8 writes y[m][position], one of:
//   i32: the int32 sums as they are;
//   f32: float(acc) * mult[m] (+ bias[m]), the two roundings in that order (the dequantize
//     graph's Cast -> Mul -> Add), then act when it is Relu or Clip (bit for bit simd::unary's:
//     maxps(lo, v) then minps(hi, .)); other activations are the caller's to apply;
//   q8 (QLinearConv): saturate(round_half_even(float(acc + acc_bias[m]) * mult[m]) + q8_zero) as
//     uint8, or int8 when q8_signed; the int32 add wraps, NaN gives the bottom of the range and
//     +-inf the ends (what runtime/ops/quant.cpp's QuantizeLinear gives), no float tensor between.
struct Conv8Output {
  std::int32_t* i32 = nullptr;
  float* f32 = nullptr;
  void* q8 = nullptr;
  bool q8_signed = false;
  float q8_zero = 0;
  const std::int32_t* acc_bias = nullptr;  // q8: nullptr or M values
  std::size_t ld = 0;                      // elements between output channels
  const float* mult = nullptr;             // f32 / q8: mult_count (1 or M) values
  std::size_t mult_count = 1;
  const float* bias = nullptr;  // f32: nullptr, or bias_count (1 or M) values
  std::size_t bias_count = 1;
  Unary act{};
};

// Which positions conv8 computes and where each lands. Position q is row q / row_len, column
// q % row_len; row r is depth slice r / plane_rows, row r % plane_rows of it. A position is kept
// when its column is < out_w and its row in the slice < out_h, and written at
// (slice * out_h + row) * out_w + column; the rest (a padded input's pad columns and rows) is
// computed and discarded.
struct Conv8Positions {
  std::size_t Q, row_len, out_w, plane_rows, out_h;
};

// y[m][pos(q)] = sum_k (x[off[k] + q] - zx) * (W[m][k] - zw[m]) for q in [0, Q). x[off[k] + q]
// must be readable for every q < Q. parallel: split over threads (simd/parallel.h).
void conv8(const Conv8Positions& pos, const std::uint8_t* x, const std::size_t* off, bool x_signed, std::int32_t zx,
           const PackedW8& w, const Conv8Output& out, bool parallel = true);

// A 1-D, 2-D or 3-D convolution of one image (and group) on conv8, any padding, dilation and
// stride: x is [C][D][H][W] (missing leading dims 1), the weights [M][C * KD * KH * KW] packed by
// pack_w8, padding with x's zero point; the output [M][OD][OH][OW] (out.ld = OD * OH * OW for
// NCHW). A padded or strided input is first rearranged, one pass per channel into per-call
// scratch, into its stride phases: phase (a, b, c) holds the padded input's elements (d, h, w)
// with d % sd = a, h % sh = b, w % sw = c, so that every tap reads one phase at stride 1 and each
// patch row is again a run of memory (only the phases some tap reads are built: a strided 1x1
// conv keeps one of four). The pass costs one read and write of the input, small against the
// K = C * KD * KH * KW multiply-adds per output.
struct Conv8Shape {
  std::size_t C;
  std::array<std::size_t, 3> in, kernel, pad_begin, pad_end, dilation, stride;  // depth, height, width
  // Output extent along dimension i (0 when the dilated kernel does not fit the padded input).
  std::size_t out(std::size_t i) const {
    const std::size_t span = (kernel[i] - 1) * dilation[i] + 1, padded = in[i] + pad_begin[i] + pad_end[i];
    return padded < span ? 0 : (padded - span) / stride[i] + 1;
  }
};
void conv8_nd(const Conv8Shape& s, const std::uint8_t* x, bool x_signed, std::int32_t zx, const PackedW8& w,
              const Conv8Output& out, bool parallel = true);

// gemm8 with QLinearMatMul's requantization in the store: y[m][n] = saturate(round_half_even(
// float(C[m][n] + acc_bias[n]) * mult[n]) + zero) (mult_count 1: one multiplier for every column;
// acc_bias: nullptr or N values, added with int32 wrap-around: QLinearConv's bias when its output
// channels are the columns), uint8, or int8 when y_signed, row stride ldy; C's int32 sums go from
// the kernel's tile (in L1) straight to y, never to an int32 matrix. The float steps and their
// order are QuantizeLinear's (saturate_round below), NaN the bottom of the range.
struct Gemm8Requant {
  void* y = nullptr;
  std::size_t ldy = 0;
  bool y_signed = false;
  float zero = 0;
  const float* mult = nullptr;
  std::size_t mult_count = 1;
  const std::int32_t* acc_bias = nullptr;
};
void gemm8_requantize(std::size_t M, const void* A, std::size_t lda, bool a_signed, std::int32_t za, const PackedB8& B,
                      const Gemm8Requant& out, bool parallel = true);

// ---- quantization of float input ---------------------------------------------------------
//
// QuantizeLinear's and DynamicQuantizeLinear's float -> 8-bit step, one definition for the ops
// (runtime/ops/quant.cpp) and for the kernels below that quantize their input while packing it,
// so a fused DynamicQuantizeLinear gives the bytes the op writes:
//   y = saturate(round_half_even(x / scale) + zero)
// with x / scale an IEEE float32 division, NaN giving the bottom of the range and +-inf the ends.
// Every ISA level computes the same bytes (4, 8 or 16 lanes of the same IEEE steps).

// The scalar form. v is clamped to +-2^22 first (cannot change the saturated result: |zp| <
// 2^16) so that adding and subtracting 1.5 * 2^23 rounds half to even in the default rounding
// mode; this form vectorizes (nearbyint does not, without -fno-trapping-math). NaN gives the
// bottom of the range (as the SSE path: maxps returns its second operand).
template <class Q>
inline Q saturate_round(float v, float zp) {
  constexpr float kMagic = 12582912.f, kBig = 4194304.f;
  constexpr float lo = static_cast<float>(std::numeric_limits<Q>::min()),
                  hi = static_cast<float>(std::numeric_limits<Q>::max());
  v = v > -kBig ? v : -kBig;
  v = v < kBig ? v : kBig;
  v = (v + kMagic) - kMagic;
  v += zp;
  v = v > lo ? v : lo;
  v = v < hi ? v : hi;
  return static_cast<Q>(static_cast<std::int32_t>(v));
}

void quantize_span(const float* x, std::uint8_t* y, std::size_t n, float scale, float zero);
void quantize_span(const float* x, std::int8_t* y, std::size_t n, float scale, float zero);
// QLinearAdd / QLinearMul of equal shapes, element by element, in registers:
//   y = quantize(float(a - za) * sa OP float(b - zb) * sb, sy, zy)
// with OP + or * (mul), each operand dequantized as DequantizeLinear (int32 difference, then one
// float multiply) and the result quantized as quantize_span: the bytes of dequantize, the float
// op, quantize_span, at every ISA level.
struct QLinearBinary {
  bool mul = false;
  bool a_signed = false, b_signed = false, y_signed = false;
  float sa = 1, sb = 1, sy = 1;
  std::int32_t za = 0, zb = 0;
  float zy = 0;
};
void qlinear_binary_span(const QLinearBinary& p, const std::uint8_t* a, const std::uint8_t* b, std::uint8_t* y,
                         std::size_t n);

// DynamicQuantizeLinear's uint8 output for its (scale, zero): scale 0 (an all-zero or all-NaN
// input) gives the zero point everywhere, else quantize_span.
void dynamic_quantize_span(const float* x, std::uint8_t* y, std::size_t n, float scale, std::uint8_t zero);

// conv8_nd and gemm8 on a float input quantized to uint8 by dynamic_quantize_span(scale, zero)
// on the way (DynamicQuantizeLinear fused into its integer readers: no uint8 tensor is written):
// bit for bit conv8_nd / gemm8 on that op's output with zero point `zero`. A padded or strided
// conv quantizes each channel in its stride-phase pass (one pass over x fewer); an unpadded
// stride-1 conv, which reads x in place, quantizes x into per-call scratch first; gemm8 quantizes
// each panel's rows as it packs them.
void conv8_nd_quantizing(const Conv8Shape& s, const float* x, float scale, std::uint8_t zero, const PackedW8& w,
                         const Conv8Output& out, bool parallel = true);
void gemm8_quantizing(std::size_t M, const float* A, std::size_t lda, float scale, std::uint8_t zero, const PackedB8& B,
                      std::int32_t* C, std::size_t ldc, bool parallel = true);

// Scalar int64 reference of the same product (tests, and the spec's meaning), truncated to int32.
void gemm8_reference(std::size_t M, std::size_t N, std::size_t K, const void* A, std::size_t lda, bool a_signed,
                     std::int32_t za, bool trans_b, const void* B, std::size_t ldb, bool b_signed,
                     const std::int32_t* zb, std::size_t zb_count, std::int32_t* C, std::size_t ldc);

}  // namespace onnxforge::simd
