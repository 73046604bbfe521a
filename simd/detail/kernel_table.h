#pragma once
// The per-ISA kernel table: serial kernels over contiguous memory, one set compiled per ISA
// level (simd/kernels/*.inl). The drivers (simd/*.cpp, baseline ISA) do the shape logic,
// blocking and threading and call through the active table.
#include <cstddef>
#include <cstdint>

#include "simd/binary.h"
#include "simd/isa.h"
#include "simd/unary.h"

namespace onnxforge::simd::detail {

inline constexpr int kMaxMr = 16;  // largest micro-tile row count of any ISA
inline constexpr int kMaxNv = 4;   // largest micro-tile width in vectors

// What a GEMM micro-kernel does with its tile once the K loop is done:
// C = act(alpha * acc + beta * C + bias_row[i] + bias_col[j]). beta == 0: C is not read.
struct TileEpilogue {
  float alpha = 1.f;
  float beta = 0.f;
  const float* bias_row = nullptr;  // tile's first row, or nullptr
  const float* bias_col = nullptr;  // tile's first column, or nullptr
  const Unary* act = nullptr;       // nullptr: identity
};

// Activations the micro-kernels apply in registers as they store. The drivers apply the others
// (Gelu, Sigmoid, HardSwish, ...) to whole tile rows once stored: one call per micro-tile
// costs about twice the arithmetic (GELU after Whisper's fc1 GEMM: 2.9 ms in the micro-tiles'
// stores, 1.6 ms as a separate pass over the whole output).
inline bool act_in_registers(const Unary* act) {
  return act == nullptr || act->op == UnaryOp::Identity || act->op == UnaryOp::Relu || act->op == UnaryOp::Clip ||
         act->op == UnaryOp::LeakyRelu;
}

// Computes an m x n tile (m rows and ceil(n / vec) vectors, from the table slot) from kc steps
// of packed A (mr floats per k) and B (the tile's ceil(n / vec) vectors of each k step start
// ldb floats apart: nr in packed panels, the row stride when B is used in place), then applies
// `ep` and stores n columns of each row.
using GemmUKernel = void (*)(std::size_t kc, const float* a, const float* b, std::size_t ldb, float* c, std::size_t ldc,
                             std::size_t n, const TileEpilogue& ep);

struct GemmKernels {
  int mr = 0;                                // rows of a full micro-tile (A panel width)
  int nr = 0;                                // columns of a full micro-tile (B panel width), a multiple of vec
  int kc = 0;                                // K block: packed panels hold kc steps
  GemmUKernel ukernel[kMaxMr][kMaxNv] = {};  // [rows - 1][vectors - 1]
  // dst[k * width + i] = src[i * ld + k] for i < rows, k < kc; zero for rows <= i < width.
  void (*pack_kmajor)(const float* src, std::size_t ld, std::size_t rows, std::size_t width, std::size_t kc,
                      float* dst) = nullptr;
};

// One output row of a channels-last 2-D pool (simd/pool_nhwc.cpp): output columns [ow0, ow1)
// of y, each pixel C floats. The driver clipped the kernel rows to the input: x is the first
// valid row (column 0), `rows` of them row_stride floats apart. Max: the largest value or the
// last NaN of the window, -inf for an empty window. Average: the sum divided by
// count_h * (the window's columns clipped to the input, or with include_pad to the padded
// input), at least 1.
struct PoolRowArgs {
  const float* x = nullptr;
  std::size_t rows = 0, row_stride = 0;
  std::int64_t W = 0, C = 0, KW = 1, SW = 1, pad_left = 0, pad_right = 0;
  std::int64_t ow0 = 0, ow1 = 0;
  float* y = nullptr;
  std::int64_t count_h = 0;
  bool include_pad = false;
};

// Row reductions: the value combined over the row, before any final transform.
enum class RowReduce : std::uint8_t { Sum, SumAbs, SumSquare, Max, Min, Prod };

inline constexpr std::size_t kFewOutputsMax = 4, kFewOutputsMaxTaps = 49;

struct KernelTable {
  Isa isa = Isa::Sse;
  int vec = 4;  // floats per vector
  GemmKernels gemm;

  // Elementwise spans: y may equal an input.
  void (*unary)(const Unary& f, const float* x, float* y, std::size_t n) = nullptr;
  void (*binary_vv)(BinaryOp op, const float* a, const float* b, float* y, std::size_t n) = nullptr;
  void (*binary_vs)(BinaryOp op, const float* a, float b, float* y, std::size_t n) = nullptr;
  void (*binary_sv)(BinaryOp op, float a, const float* b, float* y, std::size_t n) = nullptr;
  void (*compare_vv)(CompareOp op, const float* a, const float* b, std::uint8_t* y, std::size_t n) = nullptr;
  void (*compare_vs)(CompareOp op, const float* a, float b, std::uint8_t* y, std::size_t n) = nullptr;
  void (*compare_sv)(CompareOp op, float a, const float* b, std::uint8_t* y, std::size_t n) = nullptr;
  // bfloat16 (the top half of a float's bits) <-> float32, round to nearest even, NaN kept quiet
  // (ir/float16.h's float_to_bf16 bit for bit).
  void (*bf16_to_float)(const std::uint16_t* x, float* y, std::size_t n) = nullptr;
  void (*float_to_bf16)(const float* x, std::uint16_t* y, std::size_t n) = nullptr;

  // One row of the normalizations.
  void (*layer_norm_row)(const float* x, std::size_t n, const float* scale, const float* bias, float eps, float* y,
                         float* mean, float* inv_std) = nullptr;
  void (*rms_norm_row)(const float* x, std::size_t n, const float* scale, float eps, float* y,
                       float* inv_rms) = nullptr;
  void (*softmax_row)(const float* x, std::size_t n, float* y, bool log) = nullptr;

  // Reductions: over a contiguous row, and "acc[i] = acc[i] (op) x[i]" across rows.
  float (*reduce_row)(RowReduce op, const float* x, std::size_t n) = nullptr;
  void (*reduce_accumulate)(RowReduce op, const float* x, float* acc, std::size_t n) = nullptr;
  // sum_i exp(x[i] - shift) and acc[i] += exp(x[i] - shift[i]) (log-sum-exp, softmax_axis).
  float (*sum_exp_shifted)(const float* x, std::size_t n, float shift) = nullptr;
  void (*accumulate_exp_shifted)(const float* x, const float* shift, float* acc, std::size_t n) = nullptr;

  // One depthwise output plane: out[oh * ow_n + x] =
  //   act(bias + sum_t w[t] * plane[tap_offset[t] + oh * row_step + x]).
  void (*depthwise_plane)(const float* plane, const std::int64_t* tap_offset, std::size_t taps, const float* w,
                          float bias, std::size_t row_step, std::size_t oh_n, std::size_t ow_n, float* out,
                          const Unary* act) = nullptr;

  // Few output channels (M <= kFewOutputsMax), channels-last: for np pixels,
  // y[p * M + m] = bias[m] (0 without) + sum over t < ntaps (<= kFewOutputsMaxTaps) of the dot
  // product of the C floats at taps[t] + p * step with w[(m * ntaps + t) * C, +C).
  void (*few_outputs_pixels)(const float* const* taps, std::size_t ntaps, std::size_t step, std::size_t np,
                             std::size_t C, const float* w, std::size_t M, const float* bias, float* y) = nullptr;

  // Channels-last pooling: one output row, and out[j] = sum or max (NaN as in max_pool_row)
  // over r < rows of x[r * stride + j] for j < n.
  void (*max_pool_row)(const PoolRowArgs& a) = nullptr;
  void (*avg_pool_row)(const PoolRowArgs& a) = nullptr;
  void (*pool_reduce_rows)(bool max, const float* x, std::size_t rows, std::size_t stride, std::size_t n,
                           float* out) = nullptr;
  // y[j * ldy + i] = x[i * ldx + j] for i < rows, j < cols (a tile of a layout conversion).
  void (*transpose_tile)(const float* x, std::size_t ldx, float* y, std::size_t ldy, std::size_t rows,
                         std::size_t cols) = nullptr;

  // Resampling (kernels/resample.inl): y[i] = sum_k w[k] * rows[k][i]; y[i] = sum_k
  // w[k * stride + i] * x[index[k * stride + i]]; float16 <-> float32 (round to nearest even) and
  // y = float(half(x)).
  void (*blend_rows)(const float* const* rows, const float* w, std::size_t taps, float* y, std::size_t n) = nullptr;
  void (*gather_row)(const float* x, const std::int32_t* index, const float* w, std::size_t taps, std::size_t stride,
                     float* y, std::size_t n) = nullptr;
  void (*half_to_float)(const std::uint16_t* x, float* y, std::size_t n) = nullptr;
  void (*float_to_half)(const float* x, std::uint16_t* y, std::size_t n) = nullptr;
  void (*round_to_half)(const float* x, float* y, std::size_t n) = nullptr;

  // Pad (kernels/pad.inl), in bytes: y = fill[0, left) ++ x[0, n) ++ fill[0, right), where fill
  // is 64 bytes repeating one element (its size divides 64, and left and right are multiples
  // of it); x and y do not overlap.
  void (*fill_copy_fill_row)(const void* x, std::size_t n, void* y, std::size_t left, std::size_t right,
                             const void* fill) = nullptr;
};

// The drivers' activation of whole tile rows (act_in_registers): rows [r0, r0 + rows) of C,
// columns [j0, j0 + n), in place.
inline void activate_rows(const KernelTable& kt, const Unary& act, float* c, std::size_t ldc, std::size_t r0,
                          std::size_t rows, std::size_t j0, std::size_t n) {
  for (std::size_t r = r0; r < r0 + rows; ++r) kt.unary(act, c + r * ldc + j0, c + r * ldc + j0, n);
}

const KernelTable& active_table() noexcept;
const KernelTable& table_for(Isa isa) noexcept;

// Each kernels/<family>.inl, compiled once per ISA, installs its entries with these.
#define ONNXFORGE_SIMD_DECLARE_INSTALLERS(ns) \
  namespace ns {                              \
  void install_gemm(KernelTable& t);          \
  void install_eltwise(KernelTable& t);       \
  void install_rows(KernelTable& t);          \
  void install_depthwise(KernelTable& t);     \
  void install_pool(KernelTable& t);          \
  void install_resample(KernelTable& t);      \
  void install_pad(KernelTable& t);           \
  }
ONNXFORGE_SIMD_DECLARE_INSTALLERS(sse)
ONNXFORGE_SIMD_DECLARE_INSTALLERS(avx2)
ONNXFORGE_SIMD_DECLARE_INSTALLERS(avx512)
#undef ONNXFORGE_SIMD_DECLARE_INSTALLERS

}  // namespace onnxforge::simd::detail
