// Row-parallel drivers for layer/RMS normalization and softmax.
#include "simd/norm.h"

#include <algorithm>
#include <cmath>
#include <xmmintrin.h>

#include "simd/detail/kernel_table.h"
#include "simd/detail/parallel.h"
#include "simd/detail/scratch.h"

namespace onnxforge::simd {
namespace {

// Rows per task: about 16K elements of work each.
std::size_t row_grain(std::size_t cols, std::size_t cost = 1) {
  return std::max<std::size_t>(1, 16384 / std::max<std::size_t>(cols * cost, 1));
}

}  // namespace

void layer_norm(std::size_t rows, std::size_t cols, const float* x, const float* scale, const float* bias, float eps,
                float* y, float* mean, float* inv_std) {
  const detail::KernelTable& kt = detail::active_table();
  detail::parallel_chunks(rows, row_grain(cols, 3), [&](std::size_t b, std::size_t e) {
    for (std::size_t r = b; r < e; ++r)
      kt.layer_norm_row(x + r * cols, cols, scale, bias, eps, y + r * cols, mean != nullptr ? mean + r : nullptr,
                        inv_std != nullptr ? inv_std + r : nullptr);
  });
}

void rms_norm(std::size_t rows, std::size_t cols, const float* x, const float* scale, float eps, float* y,
              float* inv_rms) {
  const detail::KernelTable& kt = detail::active_table();
  detail::parallel_chunks(rows, row_grain(cols, 2), [&](std::size_t b, std::size_t e) {
    for (std::size_t r = b; r < e; ++r)
      kt.rms_norm_row(x + r * cols, cols, scale, eps, y + r * cols, inv_rms != nullptr ? inv_rms + r : nullptr);
  });
}

namespace {

// Flushes subnormal results (and reads subnormal inputs as 0) on this thread while alive. Masked
// attention rows (-inf, -FLT_MAX or -1e4 added to the scores) make exp() return subnormals
// for most of the row, and each one costs a microcode assist: softmax ran ~3x slower on causal
// masks. Results below FLT_MIN (1.2e-38) become 0, far inside any tolerance.
class FlushSubnormals {
 public:
  FlushSubnormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | 0x8040u); }  // FTZ | DAZ
  ~FlushSubnormals() { _mm_setcsr(saved_); }
  FlushSubnormals(const FlushSubnormals&) = delete;
  FlushSubnormals& operator=(const FlushSubnormals&) = delete;

 private:
  unsigned saved_;
};

void softmax_rows(std::size_t rows, std::size_t cols, const float* x, float* y, bool log) {
  const detail::KernelTable& kt = detail::active_table();
  detail::parallel_chunks(rows, row_grain(cols, 8), [&](std::size_t b, std::size_t e) {
    const FlushSubnormals flush;
    for (std::size_t r = b; r < e; ++r) kt.softmax_row(x + r * cols, cols, y + r * cols, log);
  });
}

// Softmax over n rows of `width` strided floats (stride `inner`), for columns [c0, c0 + width).
void softmax_columns(const detail::KernelTable& kt, const float* x, float* y, std::size_t n, std::size_t inner,
                     std::size_t width, bool log) {
  detail::Scratch tmp(2 * width);
  float* max = tmp.data();
  float* sum = tmp.data() + width;
  std::copy(x, x + width, max);
  for (std::size_t k = 1; k < n; ++k) kt.reduce_accumulate(detail::RowReduce::Max, x + k * inner, max, width);
  std::fill(sum, sum + width, 0.f);
  for (std::size_t k = 0; k < n; ++k) kt.accumulate_exp_shifted(x + k * inner, max, sum, width);
  if (log) {
    for (std::size_t i = 0; i < width; ++i) sum[i] = std::log(sum[i]);
  }
  for (std::size_t k = 0; k < n; ++k) {
    float* yr = y + k * inner;
    kt.binary_vv(BinaryOp::Sub, x + k * inner, max, yr, width);
    if (log) {
      kt.binary_vv(BinaryOp::Sub, yr, sum, yr, width);
    } else {
      kt.unary(Unary::of(UnaryOp::Exp), yr, yr, width);
      kt.binary_vv(BinaryOp::Div, yr, sum, yr, width);
    }
  }
}

}  // namespace

void softmax(std::size_t rows, std::size_t cols, const float* x, float* y) { softmax_rows(rows, cols, x, y, false); }

void log_softmax(std::size_t rows, std::size_t cols, const float* x, float* y) { softmax_rows(rows, cols, x, y, true); }

void softmax_axis(std::size_t outer, std::size_t n, std::size_t inner, const float* x, float* y, bool log) {
  if (inner == 1) {
    softmax_rows(outer, n, x, y, log);
    return;
  }
  if (n == 0) return;
  const detail::KernelTable& kt = detail::active_table();
  constexpr std::size_t kChunk = 1024;
  const std::size_t chunks = (inner + kChunk - 1) / kChunk;
  detail::parallel_chunks(outer * chunks, std::max<std::size_t>(1, 16384 / (n * std::min(inner, kChunk) * 4)),
                          [&](std::size_t b, std::size_t e) {
                            for (std::size_t u = b; u < e; ++u) {
                              const std::size_t o = u / chunks, c0 = (u % chunks) * kChunk;
                              const std::size_t off = o * n * inner + c0;
                              softmax_columns(kt, x + off, y + off, n, inner, std::min(kChunk, inner - c0), log);
                            }
                          });
}

}  // namespace onnxforge::simd
