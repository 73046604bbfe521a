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

void resize_2d_nhwc(std::size_t planes, const ResizeAxis& h, const ResizeAxis& w, std::size_t channels, const float* x,
                    float* y) {
  check(h, "resize_2d_nhwc"), check(w, "resize_2d_nhwc");
  const std::size_t C = channels;
  const auto IH = static_cast<std::size_t>(h.in), IW = static_cast<std::size_t>(w.in);
  const auto OH = static_cast<std::size_t>(h.out), OW = static_cast<std::size_t>(w.out);
  if (planes == 0 || OH == 0 || OW == 0 || C == 0) return;
  const detail::KernelTable& kt = detail::active_table();
  const bool w_identity = w.identity();
  const std::size_t in_row = IW * C, out_row = OW * C;
  const std::size_t rows = planes * OH;
  const std::size_t grain = std::max<std::size_t>(1, 16384 / (out_row * (w.taps + h.taps)));
  parallel_chunks(rows, grain, [&](std::size_t r0, std::size_t r1) {
    detail::Scratch tmp(in_row);
    const float* taps_rows[kMaxResizeTaps];
    float taps_w[kMaxResizeTaps];
    for (std::size_t r = r0; r < r1; ++r) {
      const std::size_t p = r / OH, oy = r % OH;
      float* out = y + r * out_row;
      if (r > r0 && oy > 0 && same_taps(h, oy)) {  // nearest upsampling: the previous row again
        std::memcpy(out, out - out_row, out_row * sizeof(float));
        continue;
      }
      // Vertical: the blend of whole source rows (W * C floats each).
      const float* plane = x + p * IH * in_row;
      std::size_t n = 0;
      for (std::size_t k = 0; k < h.taps; ++k) {
        const float wk = h.weight[k * OH + oy];
        if (wk == 0.f && h.taps > 1) continue;
        taps_rows[n] = plane + static_cast<std::size_t>(h.index[k * OH + oy]) * in_row;
        taps_w[n++] = wk;
      }
      const float* src;
      float* blend_to = w_identity ? out : tmp.data();
      if (n == 1 && taps_w[0] == 1.f) {
        src = taps_rows[0];
        if (w_identity) std::memcpy(out, src, out_row * sizeof(float));
      } else if (n == 0) {
        std::memset(blend_to, 0, in_row * sizeof(float));
        src = blend_to;
      } else {
        kt.blend_rows(taps_rows, taps_w, n, blend_to, in_row);
        src = blend_to;
      }
      if (w_identity) continue;
      // Horizontal: output pixel ox blends its source pixels' C channels.
      for (std::size_t ox = 0; ox < OW; ++ox) {
        std::size_t m = 0;
        for (std::size_t k = 0; k < w.taps; ++k) {
          const float wk = w.weight[k * OW + ox];
          if (wk == 0.f && w.taps > 1) continue;
          taps_rows[m] = src + static_cast<std::size_t>(w.index[k * OW + ox]) * C;
          taps_w[m++] = wk;
        }
        float* o = out + ox * C;
        if (m == 0)
          std::memset(o, 0, C * sizeof(float));
        else if (m == 1 && taps_w[0] == 1.f)
          std::memcpy(o, taps_rows[0], C * sizeof(float));
        else
          kt.blend_rows(taps_rows, taps_w, m, o, C);
      }
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
      if (n == 0)
        std::memset(out, 0, inner * sizeof(float));
      else if (n == 1 && taps_w[0] == 1.f)
        std::memcpy(out, taps_rows[0], inner * sizeof(float));
      else
        kt.blend_rows(taps_rows, taps_w, n, out, inner);
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

bool conv_few_outputs_supported(const ConvParams& p) {
  return p.rank == 2 && p.group == 1 && p.out_channels >= 1 && p.out_channels <= 4 && p.stride[1] == 1 &&
         p.in_channels * p.kernel[0] * p.kernel[1] >= 16 && p.out(0) > 0 && p.out(1) > 0;
}

void conv_few_outputs(const ConvParams& p, const float* x, const float* w, const float* bias, float* y) {
  if (!conv_few_outputs_supported(p)) fail("conv_few_outputs: unsupported parameters");
  const auto& kt = detail::active_table();
  const std::int64_t C = p.in_channels, M = p.out_channels, H = p.in[0], W = p.in[1], KH = p.kernel[0],
                     KW = p.kernel[1], OH = p.out(0), OW = p.out(1), SH = p.stride[0], DH = p.dilation[0],
                     DW = p.dilation[1], PT = p.pad_begin[0], PL = p.pad_begin[1];
  // Columns [lo, hi) read every kw tap inside the row; the others are summed with bounds checks.
  std::int64_t lo = 0, hi = OW;
  for (std::int64_t kw = 0; kw < KW; ++kw) {
    const std::int64_t off = kw * DW - PL;  // iw = ow + off
    lo = std::max(lo, -off);
    hi = std::min(hi, W - off);
  }
  hi = std::max(hi, lo);
  const std::size_t rows = static_cast<std::size_t>(p.batch * M * OH);
  parallel_chunks(rows, 4, [&](std::size_t r0, std::size_t r1) {
    const float* src[kMaxResizeTaps];
    float wt[kMaxResizeTaps];
    for (std::size_t r = r0; r < r1; ++r) {
      const std::int64_t oh = static_cast<std::int64_t>(r) % OH, m = static_cast<std::int64_t>(r) / OH % M,
                         n = static_cast<std::int64_t>(r) / OH / M;
      float* yr = y + r * static_cast<std::size_t>(OW);
      const float b = bias ? bias[m] : 0.f;
      for (std::int64_t j = 0; j < OW; ++j) yr[j] = b;
      const float* xn = x + n * C * H * W;
      const float* wm = w + m * C * KH * KW;
      std::size_t t = 0;
      auto flush = [&] {
        if (t <= 1) return;  // only the accumulator itself
        kt.blend_rows(src, wt, t, yr + lo, static_cast<std::size_t>(hi - lo));
        t = 0;
      };
      for (std::int64_t c = 0; c < C; ++c)
        for (std::int64_t kh = 0; kh < KH; ++kh) {
          const std::int64_t ih = oh * SH + kh * DH - PT;
          if (ih < 0 || ih >= H) continue;
          const float* xrow = xn + (c * H + ih) * W;
          for (std::int64_t kw = 0; kw < KW; ++kw) {
            const float wv = wm[(c * KH + kh) * KW + kw];
            const std::int64_t off = kw * DW - PL;
            for (std::int64_t j = 0; j < lo; ++j)
              if (j + off >= 0 && j + off < W) yr[j] += wv * xrow[j + off];
            for (std::int64_t j = hi; j < OW; ++j)
              if (j + off >= 0 && j + off < W) yr[j] += wv * xrow[j + off];
            if (hi <= lo) continue;
            if (t == 0) {  // the accumulator is tap 0 with weight 1
              src[0] = yr + lo;
              wt[0] = 1.f;
              t = 1;
            }
            src[t] = xrow + lo + off;
            wt[t++] = wv;
            if (t == kMaxResizeTaps) flush();
          }
        }
      flush();
    }
  });
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
