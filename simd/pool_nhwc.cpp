// Channels-last pooling and layout conversions: the drivers (clipping, tiling, threading)
// around the per-ISA kernels of simd/kernels/pool.inl.
#include <algorithm>
#include <cmath>

#include "simd/detail/kernel_table.h"
#include "simd/detail/parallel.h"
#include "simd/nhwc.h"

namespace onnxforge::simd {
namespace {

using detail::active_table;
using detail::KernelTable;
using detail::PoolRowArgs;

// Work items are output rows (image, oh); about 32K window element-steps per chunk.
void pool2d(const Pool2d& p, const float* x, float* y, bool max, bool include_pad) {
  if (p.N <= 0 || p.OH <= 0 || p.OW <= 0 || p.C <= 0) return;
  const KernelTable& kt = active_table();
  const auto row_fn = max ? kt.max_pool_row : kt.avg_pool_row;
  const auto rows = static_cast<std::size_t>(p.N * p.OH);
  const auto row_cost = static_cast<std::size_t>(p.OW * p.C * std::max<std::int64_t>(1, p.KH * p.KW));
  parallel_chunks(rows, std::max<std::size_t>(1, 32768 / row_cost), [&](std::size_t b, std::size_t e) {
    for (auto i = static_cast<std::int64_t>(b); i < static_cast<std::int64_t>(e); ++i) {
      const std::int64_t n = i / p.OH, oh = i % p.OH;
      const std::int64_t h0 = oh * p.SH - p.pad_top;
      const std::int64_t a0 = std::max<std::int64_t>(h0, 0), a1 = std::min(h0 + p.KH, p.H);
      PoolRowArgs a;
      a.rows = a1 > a0 ? static_cast<std::size_t>(a1 - a0) : 0;
      a.x = a.rows != 0 ? x + (n * p.H + a0) * p.W * p.C : x;
      a.row_stride = static_cast<std::size_t>(p.W * p.C);
      a.W = p.W, a.C = p.C, a.KW = p.KW, a.SW = p.SW, a.pad_left = p.pad_left, a.pad_right = p.pad_right;
      a.ow0 = 0, a.ow1 = p.OW;
      a.y = y + i * p.OW * p.C;
      a.count_h = include_pad ? std::min(h0 + p.KH, p.H + p.pad_bottom) - h0 : static_cast<std::int64_t>(a.rows);
      a.include_pad = include_pad;
      row_fn(a);
    }
  });
}

// Items are (image, block of up to kChunk channels). Averages sum blocks of kRows pixels in
// float and the blocks in double.
constexpr std::int64_t kChunk = 256, kRows = 512;

void global_pool(std::int64_t N, std::int64_t HW, std::int64_t C, const float* x, float* y, bool max) {
  if (N <= 0 || C <= 0) return;
  if (HW <= 0) {
    std::fill(y, y + N * C, max ? -INFINITY : NAN);
    return;
  }
  const KernelTable& kt = active_table();
  const std::int64_t chunks = (C + kChunk - 1) / kChunk;
  const auto items = static_cast<std::size_t>(N * chunks);
  const auto item_cost = static_cast<std::size_t>(HW * std::min(C, kChunk));
  parallel_chunks(items, std::max<std::size_t>(1, 32768 / item_cost), [&](std::size_t b, std::size_t e) {
    for (auto i = static_cast<std::int64_t>(b); i < static_cast<std::int64_t>(e); ++i) {
      const std::int64_t n = i / chunks, c0 = i % chunks * kChunk, len = std::min(kChunk, C - c0);
      const float* src = x + n * HW * C + c0;
      float* dst = y + n * C + c0;
      if (max) {
        kt.pool_reduce_rows(true, src, static_cast<std::size_t>(HW), static_cast<std::size_t>(C),
                            static_cast<std::size_t>(len), dst);
        continue;
      }
      double acc[kChunk] = {};
      float part[kChunk];
      for (std::int64_t r0 = 0; r0 < HW; r0 += kRows) {
        kt.pool_reduce_rows(false, src + r0 * C, static_cast<std::size_t>(std::min(kRows, HW - r0)),
                            static_cast<std::size_t>(C), static_cast<std::size_t>(len), part);
        for (std::int64_t c = 0; c < len; ++c) acc[c] += part[c];
      }
      for (std::int64_t c = 0; c < len; ++c) dst[c] = static_cast<float>(acc[c] / static_cast<double>(HW));
    }
  });
}

// x [N][R][S] -> y [N][S][R] in tiles of up to 256 rows of x by 8 columns (as many more as keep
// a tile at 512 floats or more when R is small): each x row of a tile is read as one run of 32
// bytes and each y row written as one run of up to 1 KB. Measured on 64x112x112 and 256x56x56
// both ways, 1 and 2 threads: square 16 to 64 tiles ran up to 2x slower on the 256-channel
// NHWC -> NCHW case (x rows 1 KB apart), taller tiles gained little more.
void transpose_planes(std::int64_t N, std::int64_t R, std::int64_t S, const float* x, float* y) {
  if (N <= 0 || R <= 0 || S <= 0) return;
  const KernelTable& kt = active_table();
  const std::int64_t TR = std::min<std::int64_t>(R, 256), TS = 8 * std::max<std::int64_t>(1, 64 / TR);
  const std::int64_t tr = (R + TR - 1) / TR, ts = (S + TS - 1) / TS;
  const auto items = static_cast<std::size_t>(N * tr * ts);
  parallel_chunks(
      items, std::max<std::size_t>(1, static_cast<std::size_t>(32768 / (TR * TS))), [&](std::size_t b, std::size_t e) {
        for (auto i = static_cast<std::int64_t>(b); i < static_cast<std::int64_t>(e); ++i) {
          const std::int64_t n = i / (tr * ts), r0 = i / ts % tr * TR, s0 = i % ts * TS;
          kt.transpose_tile(x + (n * R + r0) * S + s0, static_cast<std::size_t>(S), y + (n * S + s0) * R + r0,
                            static_cast<std::size_t>(R), static_cast<std::size_t>(std::min(TR, R - r0)),
                            static_cast<std::size_t>(std::min(TS, S - s0)));
        }
      });
}

}  // namespace

void max_pool_nhwc(const Pool2d& p, const float* x, float* y) { pool2d(p, x, y, true, false); }

void avg_pool_nhwc(const Pool2d& p, const float* x, float* y, bool count_include_pad) {
  pool2d(p, x, y, false, count_include_pad);
}

void global_avg_pool_nhwc(std::int64_t N, std::int64_t HW, std::int64_t C, const float* x, float* y) {
  global_pool(N, HW, C, x, y, false);
}

void global_max_pool_nhwc(std::int64_t N, std::int64_t HW, std::int64_t C, const float* x, float* y) {
  global_pool(N, HW, C, x, y, true);
}

void nchw_to_nhwc(std::int64_t N, std::int64_t C, std::int64_t HW, const float* x, float* y) {
  transpose_planes(N, C, HW, x, y);
}

void nhwc_to_nchw(std::int64_t N, std::int64_t C, std::int64_t HW, const float* x, float* y) {
  transpose_planes(N, HW, C, x, y);
}

}  // namespace onnxforge::simd
