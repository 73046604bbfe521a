// Drivers of the resampling kernels (kernels/resample.inl): blocking and threading.
#include "simd/resample.h"

#include <algorithm>
#include <cstring>

#include "ir/error.h"
#include "simd/detail/kernel_table.h"
#include "simd/detail/scratch.h"
#include "simd/parallel.h"

namespace onnxforge::simd {

bool ResizeAxis::identity() const {
  if (in != out) return false;
  for (std::int64_t i = 0; i < out; ++i) {
    const auto u = static_cast<std::size_t>(i);
    if (index[u] != i || weight[u] != 1.f) return false;
    for (std::size_t k = 1; k < taps; ++k)
      if (weight[k * static_cast<std::size_t>(out) + u] != 0.f) return false;
  }
  return true;
}

namespace {

constexpr std::size_t kMaxResizeTaps = 64;

void check(const ResizeAxis& a, const char* fn) {
  const auto n = a.taps * static_cast<std::size_t>(a.out);
  if (a.taps < 1 || a.taps > kMaxResizeTaps || a.in < 1 || a.out < 0 || a.index.size() != n || a.weight.size() != n)
    fail(fn, ": malformed resize table (taps ", a.taps, ", in ", a.in, ", out ", a.out, ")");
}

// Whether output row r's taps equal row r - 1's.
bool same_taps(const ResizeAxis& a, std::size_t r) {
  const auto o = static_cast<std::size_t>(a.out);
  for (std::size_t k = 0; k < a.taps; ++k)
    if (a.index[k * o + r] != a.index[k * o + r - 1] || a.weight[k * o + r] != a.weight[k * o + r - 1]) return false;
  return true;
}

}  // namespace

void resize_2d(std::size_t planes, const ResizeAxis& h, const ResizeAxis& w, const float* x, float* y) {
  check(h, "resize_2d"), check(w, "resize_2d");
  const auto IH = static_cast<std::size_t>(h.in), IW = static_cast<std::size_t>(w.in);
  const auto OH = static_cast<std::size_t>(h.out), OW = static_cast<std::size_t>(w.out);
  if (planes == 0 || OH == 0 || OW == 0) return;
  const detail::KernelTable& kt = detail::active_table();
  const bool w_identity = w.identity();
  // Work items are runs of output rows of one plane; a run starts cold (no previous row to copy).
  const std::size_t rows = planes * OH;
  const std::size_t grain = std::max<std::size_t>(1, 16384 / (OW * (w.taps + h.taps)));
  parallel_chunks(rows, grain, [&](std::size_t r0, std::size_t r1) {
    detail::Scratch tmp(IW);
    const float* taps_rows[kMaxResizeTaps];
    float taps_w[kMaxResizeTaps];
    for (std::size_t r = r0; r < r1; ++r) {
      const std::size_t p = r / OH, oy = r % OH;
      float* out = y + r * OW;
      if (r > r0 && oy > 0 && same_taps(h, oy)) {
        std::memcpy(out, out - OW, OW * sizeof(float));
        continue;
      }
      const float* plane = x + p * IH * IW;
      std::size_t n = 0;
      for (std::size_t k = 0; k < h.taps; ++k) {
        const float wk = h.weight[k * OH + oy];
        if (wk == 0.f && h.taps > 1) continue;
        taps_rows[n] = plane + static_cast<std::size_t>(h.index[k * OH + oy]) * IW;
        taps_w[n++] = wk;
      }
      const float* src;
      float* blend_to = w_identity ? out : tmp.data();
      if (n == 1 && taps_w[0] == 1.f) {
        src = taps_rows[0];
        if (w_identity) std::memcpy(out, src, OW * sizeof(float));
      } else if (n == 0) {  // every weight zero (a degenerate cubic table): the row is 0
        std::memset(blend_to, 0, IW * sizeof(float));
        src = blend_to;
      } else {
        kt.blend_rows(taps_rows, taps_w, n, blend_to, IW);
        src = blend_to;
      }
      if (!w_identity) kt.gather_row(src, w.index.data(), w.weight.data(), w.taps, OW, out, OW);
    }
  });
}

void resize_axis(std::size_t outer, const ResizeAxis& a, std::size_t inner, const float* x, float* y) {
  check(a, "resize_axis");
  const auto IN = static_cast<std::size_t>(a.in), OUT = static_cast<std::size_t>(a.out);
  if (outer == 0 || OUT == 0 || inner == 0) return;
  const detail::KernelTable& kt = detail::active_table();
  if (inner == 1) {  // the innermost axis: gather each row
    const std::size_t grain = std::max<std::size_t>(1, 16384 / (OUT * a.taps));
    parallel_chunks(outer, grain, [&](std::size_t b, std::size_t e) {
      for (std::size_t o = b; o < e; ++o)
        kt.gather_row(x + o * IN, a.index.data(), a.weight.data(), a.taps, OUT, y + o * OUT, OUT);
    });
    return;
  }
  const std::size_t rows = outer * OUT;
  const std::size_t grain = std::max<std::size_t>(1, 16384 / (inner * a.taps));
  parallel_chunks(rows, grain, [&](std::size_t r0, std::size_t r1) {
    const float* taps_rows[kMaxResizeTaps];
    float taps_w[kMaxResizeTaps];
    for (std::size_t r = r0; r < r1; ++r) {
      const std::size_t o = r / OUT, i = r % OUT;
      std::size_t n = 0;
      for (std::size_t k = 0; k < a.taps; ++k) {
        const float wk = a.weight[k * OUT + i];
        if (wk == 0.f) continue;
        taps_rows[n] = x + (o * IN + static_cast<std::size_t>(a.index[k * OUT + i])) * inner;
        taps_w[n++] = wk;
      }
      float* out = y + r * inner;
      if (n == 0) std::memset(out, 0, inner * sizeof(float));
      else if (n == 1 && taps_w[0] == 1.f) std::memcpy(out, taps_rows[0], inner * sizeof(float));
      else kt.blend_rows(taps_rows, taps_w, n, out, inner);
    }
  });
}

namespace {
template <class F>
void convert_parallel(std::size_t n, F f) {
  parallel_chunks(n, std::size_t{1} << 16, [&](std::size_t b, std::size_t e) { f(b, e - b); });
}
}  // namespace

void half_to_float(const std::uint16_t* x, float* y, std::size_t n) {
  const auto& kt = detail::active_table();
  convert_parallel(n, [&](std::size_t b, std::size_t m) { kt.half_to_float(x + b, y + b, m); });
}
void float_to_half(const float* x, std::uint16_t* y, std::size_t n) {
  const auto& kt = detail::active_table();
  convert_parallel(n, [&](std::size_t b, std::size_t m) { kt.float_to_half(x + b, y + b, m); });
}
void round_to_half(const float* x, float* y, std::size_t n) {
  const auto& kt = detail::active_table();
  convert_parallel(n, [&](std::size_t b, std::size_t m) { kt.round_to_half(x + b, y + b, m); });
}

void half_binary(BinaryOp op, const std::uint16_t* a, const std::uint16_t* b, std::uint16_t* y, std::size_t n) {
  const auto& kt = detail::active_table();
  constexpr std::size_t kBlock = 2048;  // 3 x 8 KiB of float32 stay in L1
  parallel_chunks(n, std::size_t{1} << 15, [&](std::size_t b0, std::size_t e0) {
    alignas(64) float fa[kBlock], fb[kBlock];
    for (std::size_t i = b0; i < e0; i += kBlock) {
      const std::size_t m = std::min(kBlock, e0 - i);
      kt.half_to_float(a + i, fa, m);
      kt.half_to_float(b + i, fb, m);
      kt.binary_vv(op, fa, fb, fa, m);
      kt.float_to_half(fa, y + i, m);
    }
  });
}

}  // namespace onnxforge::simd
