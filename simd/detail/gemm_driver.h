#pragma once
// The blocked GEMM driver shared by gemm(), matmul() and conv().
//
// The micro-kernels read B as panels: kc rows of nr floats (k stride nr), zero-padded past the
// last column, or straight from a row-major B (k stride ldb) when that is cheaper than copying.
// Panels of a packed column range [j0, j0 + width) live at
//   base + k0 * npad + ((j - j0) / nr) * kc * nr        (npad = width rounded up to nr)
// for the K block starting at k0 (kc = min(table kc, K - k0)). pack_b() stores whole matrices
// in this layout; the driver packs column blocks of unpacked B the same way, or packs each
// tile's own columns when the problem has a single row of tiles (gemm.cpp, PanelView).
#include <cstddef>

#include "simd/detail/kernel_table.h"
#include "simd/gemm.h"

namespace onnxforge::simd::detail {

// Writes columns [j0, j0 + n) of rows [k0, k0 + kc) of op(B) to dst as ceil(n / nr) consecutive
// panels of kc rows of nr floats, zero-padding the columns past n. `ctx` is the source's own
// state.
struct BSource {
  void (*pack)(const void* ctx, std::size_t k0, std::size_t kc, std::size_t j0, std::size_t n, std::size_t nr,
               float* dst) = nullptr;
  const void* ctx = nullptr;
  // When op(B) is a plain row-major matrix, the driver may read whole panels in place.
  const float* direct = nullptr;
  std::size_t direct_ld = 0;
};

// op(B) from a row-major matrix.
struct StridedB {
  const float* b;
  std::size_t ldb;
  bool trans;
  const GemmKernels* kernels;  // for the transposing pack
};
BSource strided_b_source(const StridedB& b);

struct GemmProblem {
  std::size_t M = 0, N = 0, K = 0;
  float alpha = 1.f, beta = 0.f;
  const float* a = nullptr;  // op(A) as in gemm()
  std::size_t lda = 0;
  bool trans_a = false;
  BSource b;                        // used when packed_b is nullptr
  const float* packed_b = nullptr;  // whole op(B) in panel layout (pack_b)
  float* c = nullptr;
  std::size_t ldc = 0;
  const Epilogue* ep = nullptr;  // nullptr: none
};

inline std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

// A tile's rows in micro-rows of near-equal height (at most mr): a remainder of one or two rows
// would run a kernel with too few independent sums to hide the FMA latency (49 rows: 7 x 7,
// not 6 x 8 + 1).
struct RowSplit {
  std::size_t count, height, tall;  // `tall` micro-rows of `height` rows, then height - 1 rows
  RowSplit(std::size_t mc, std::size_t mr)
      : count(ceil_div(mc, mr)), height(ceil_div(mc, count)), tall(mc - count * (height - 1)) {}
  std::size_t first(std::size_t t) const { return t * height - (t > tall ? t - tall : 0); }
  std::size_t rows(std::size_t t) const { return t < tall ? height : height - 1; }
};

// Tile sizes (multiples of mr / nr) giving at least `threads` tiles when the problem allows,
// preferring to split M (splitting N reads the same A rows once more per extra tile, and
// re-packs them when A is transposed), then evened out so that the last tile in each direction
// is not a sliver. `max_cols` caps a tile's width (0: the driver's default, 768 columns).
void choose_tiles(std::size_t M, std::size_t N, std::size_t mr, std::size_t nr, std::size_t threads, std::size_t& tm,
                  std::size_t& tn, std::size_t max_cols = 0);

// Runs one problem. `parallel` false keeps it on the calling thread (used when the caller
// already runs many problems in parallel).
void gemm_run(const KernelTable& kt, const GemmProblem& p, bool parallel);

// Packs columns [j0, j0 + width) of all K rows of `b` into `dst` (layout above), in parallel.
void pack_b_columns(const GemmKernels& g, const BSource& b, std::size_t K, std::size_t j0, std::size_t width,
                    float* dst, bool parallel);

// Runs `count` independent problems: spread over threads when they are small or many,
// otherwise one after another with each parallel inside. run(i, parallel_inside).
template <class Run>
void run_problems(std::size_t count, double flops_each, Run&& run);

}  // namespace onnxforge::simd::detail

#include "simd/detail/parallel.h"

namespace onnxforge::simd::detail {

template <class Run>
void run_problems(std::size_t count, double flops_each, Run&& run) {
  const auto threads = static_cast<std::size_t>(max_threads());
  const bool outer = count > 1 && threads > 1 && (count >= 2 * threads || (count >= threads && flops_each < 3.2e7));
  if (outer) {
    parallel_each(count, true, [&](std::size_t i) { run(i, false); });
  } else {
    for (std::size_t i = 0; i < count; ++i) run(i, true);
  }
}

}  // namespace onnxforge::simd::detail
