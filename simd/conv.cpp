// Convolution paths: depthwise direct; 1x1 as plain GEMM on the input (strided 1x1: on a dense
// copy of the sampled positions); other 1-D/2-D convs as GEMM over a padded (with strides:
// phase-split) copy of the input (B rows are contiguous slices of it); the rest as GEMM with B
// panels gathered straight from the input (implicit im2col, no column buffer).
#include "simd/conv.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <xmmintrin.h>

#include "simd/detail/conv_direct.h"
#include "simd/detail/conv_fewc.h"
#include "simd/detail/gemm_driver.h"
#include "simd/detail/parallel.h"
#include "simd/detail/scratch.h"

namespace onnxforge::simd {

std::int64_t ConvParams::out(int i) const {
  const std::int64_t span = dilation[i] * (kernel[i] - 1) + 1;
  const std::int64_t room = in[i] + pad_begin[i] + pad_end[i] - span;
  return room < 0 ? 0 : room / stride[i] + 1;
}

std::int64_t ConvParams::out_spatial() const {
  std::int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= out(i);
  return n;
}

namespace {

void validate(const ConvParams& p) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("simd::conv: " + what); };
  if (p.rank < 1 || p.rank > 3) fail("rank must be 1, 2 or 3, got " + std::to_string(p.rank));
  if (p.batch < 0 || p.in_channels < 0 || p.out_channels < 0) fail("negative batch or channel count");
  if (p.group < 1) fail("group must be >= 1");
  if (p.in_channels % p.group != 0 || p.out_channels % p.group != 0)
    fail("channels (" + std::to_string(p.in_channels) + " in, " + std::to_string(p.out_channels) +
         " out) are not divisible by group " + std::to_string(p.group));
  for (int i = 0; i < p.rank; ++i) {
    if (p.in[i] < 0) fail("negative input size");
    if (p.kernel[i] < 1 || p.stride[i] < 1 || p.dilation[i] < 1) fail("kernel, stride and dilation must be >= 1");
    if (p.pad_begin[i] < 0 || p.pad_end[i] < 0) fail("negative padding");
  }
}

// The spatial geometry right-aligned into three dims (missing leading dims are 1).
struct Geometry {
  std::int64_t in[3], k[3], s[3], d[3], pb[3], out[3];
  std::int64_t in_sp, k_sp, out_sp;
};

Geometry geometry(const ConvParams& p) {
  Geometry g{};
  for (int j = 0; j < 3; ++j) g.in[j] = g.k[j] = g.s[j] = g.d[j] = g.out[j] = 1, g.pb[j] = 0;
  for (int i = 0; i < p.rank; ++i) {
    const int j = 3 - p.rank + i;
    g.in[j] = p.in[i], g.k[j] = p.kernel[i], g.s[j] = p.stride[i], g.d[j] = p.dilation[i];
    g.pb[j] = p.pad_begin[i], g.out[j] = p.out(i);
  }
  g.in_sp = g.in[0] * g.in[1] * g.in[2];
  g.k_sp = g.k[0] * g.k[1] * g.k[2];
  g.out_sp = g.out[0] * g.out[1] * g.out[2];
  return g;
}

// ---- implicit im2col: B[k][j] = x[c, o*s - pad + kk*d] for k = (c, kk), j = output position ----

struct Im2col {
  const float* x;  // input channels of one (image, group)
  const Geometry* g;
};

// One panel (n <= nr columns).
void pack_im2col_panel(const Im2col& src, std::size_t k0, std::size_t kc, std::size_t j0, std::size_t n, std::size_t nr,
                       float* dst) {
  const Geometry& g = *src.g;
  // Columns come in runs sharing the two outer output coordinates (consecutive o2).
  struct Run {
    std::size_t col, len;
    std::int64_t o0, o1, o2;
  };
  Run runs[detail::kMaxNv * 16];
  std::size_t nruns = 0;
  for (std::size_t jj = 0; jj < n;) {
    const auto q = static_cast<std::int64_t>(j0 + jj);
    const std::int64_t o2 = q % g.out[2], o1 = (q / g.out[2]) % g.out[1], o0 = q / (g.out[2] * g.out[1]);
    const std::size_t len = std::min<std::size_t>(n - jj, static_cast<std::size_t>(g.out[2] - o2));
    runs[nruns++] = {jj, len, o0, o1, o2};
    jj += len;
  }
  // Kernel coordinates of row k, advanced incrementally.
  std::int64_t c = static_cast<std::int64_t>(k0) / g.k_sp, kr = static_cast<std::int64_t>(k0) % g.k_sp;
  std::int64_t kk2 = kr % g.k[2], kk1 = (kr / g.k[2]) % g.k[1], kk0 = kr / (g.k[2] * g.k[1]);
  for (std::size_t k = 0; k < kc; ++k) {
    float* row = dst + k * nr;
    std::fill(row, row + nr, 0.f);
    const float* plane = src.x + c * g.in_sp;
    for (std::size_t r = 0; r < nruns; ++r) {
      const Run& run = runs[r];
      const std::int64_t i0 = run.o0 * g.s[0] - g.pb[0] + kk0 * g.d[0];
      const std::int64_t i1 = run.o1 * g.s[1] - g.pb[1] + kk1 * g.d[1];
      if (i0 < 0 || i0 >= g.in[0] || i1 < 0 || i1 >= g.in[1]) continue;
      const float* line = plane + (i0 * g.in[1] + i1) * g.in[2];
      const std::int64_t first = run.o2 * g.s[2] - g.pb[2] + kk2 * g.d[2];
      float* out = row + run.col;
      if (g.s[2] == 1) {
        // Contiguous input: copy the in-bounds part of [first, first + len).
        const std::int64_t lo = std::max<std::int64_t>(0, -first);
        const std::int64_t hi = std::min<std::int64_t>(static_cast<std::int64_t>(run.len), g.in[2] - first);
        if (hi > lo) std::memcpy(out + lo, line + first + lo, static_cast<std::size_t>(hi - lo) * sizeof(float));
      } else {
        // Strided: the in-bounds outputs [lo, hi) are found once, then copied without checks.
        const std::int64_t s2 = g.s[2], len = static_cast<std::int64_t>(run.len);
        const std::int64_t lo = first >= 0 ? 0 : std::min(len, (-first + s2 - 1) / s2);
        const std::int64_t hi = first < g.in[2] ? std::min(len, (g.in[2] - first + s2 - 1) / s2) : 0;
        const float* src = line + first;
        if (s2 == 2) {
          for (std::int64_t t = lo; t < hi; ++t) out[t] = src[2 * t];
        } else {
          for (std::int64_t t = lo; t < hi; ++t) out[t] = src[t * s2];
        }
      }
    }
    if (++kk2 == g.k[2]) {
      kk2 = 0;
      if (++kk1 == g.k[1]) {
        kk1 = 0;
        if (++kk0 == g.k[0]) kk0 = 0, ++c;
      }
    }
  }
}

void pack_im2col(const void* ctx, std::size_t k0, std::size_t kc, std::size_t j0, std::size_t n, std::size_t nr,
                 float* dst) {
  const Im2col& src = *static_cast<const Im2col*>(ctx);
  for (std::size_t j = 0; j < n; j += nr) pack_im2col_panel(src, k0, kc, j0 + j, std::min(nr, n - j), nr, dst + j * kc);
}

// ---- B rows are slices of a padded copy of the input (stride 1 here; strides: see conv_padded_rows) ----
//
// With the input padded to hp x wp (exactly the rows and columns the output reads), output
// (oh, ow) of tap (kh, kw) reads xpad[c, oh + kh*dh, ow + kw*dw]. Computing the output over
// "wide rows" n = oh * wp + ow (ow < wp; the last wp - ow_n columns are garbage, cropped later)
// makes row k = (c, kh, kw) of B the contiguous slice of xpad starting at
// c*hp*wp + kh*dh*wp + kw*dw: packing a panel is one copy per row, with no bounds checks.

struct RowSlices {
  const float* base;
  const std::int64_t* offsets;  // per row of B
};

void pack_row_slices(const void* ctx, std::size_t k0, std::size_t kc, std::size_t j0, std::size_t n, std::size_t nr,
                     float* dst) {
  const RowSlices& src = *static_cast<const RowSlices*>(ctx);
  const std::size_t full = n / nr;
  for (std::size_t k = 0; k < kc; ++k) {
    const float* row = src.base + src.offsets[k0 + k] + j0;
    for (std::size_t p = 0; p < full; ++p) {  // nr is a multiple of 4: inline SSE copies, no memcpy call
      const float* in = row + p * nr;
      float* out = dst + (p * kc + k) * nr;
      for (std::size_t x = 0; x < nr; x += 4) _mm_storeu_ps(out + x, _mm_loadu_ps(in + x));
    }
    if (full * nr < n) {
      const std::size_t w = n - full * nr;
      float* out = dst + (full * kc + k) * nr;
      std::memcpy(out, row + full * nr, w * sizeof(float));
      std::fill(out + w, out + nr, 0.f);
    }
  }
}

bool is_pointwise(const ConvParams& p) {
  for (int i = 0; i < p.rank; ++i)
    if (p.kernel[i] != 1 || p.stride[i] != 1 || p.pad_begin[i] != 0 || p.pad_end[i] != 0) return false;
  return true;
}

bool is_unit_stride(const ConvParams& p) {
  for (int i = 0; i < p.rank; ++i)
    if (p.stride[i] != 1) return false;
  return true;
}

bool is_strided_pointwise(const ConvParams& p) {
  for (int i = 0; i < p.rank; ++i)
    if (p.kernel[i] != 1 || p.pad_begin[i] != 0 || p.pad_end[i] != 0) return false;
  return !is_unit_stride(p);
}

// dst[plane][o] = x[plane][o * s] for each of `planes` input planes: the positions a 1x1
// strided conv without padding reads, densely packed (out_sp per plane).
void subsample(const Geometry& g, const float* x, std::size_t planes, float* dst) {
  const auto out_sp = static_cast<std::size_t>(g.out_sp);
  detail::parallel_chunks(planes, std::max<std::size_t>(1, 32768 / std::max<std::size_t>(out_sp, 1)),
                          [&](std::size_t b, std::size_t e) {
                            for (std::size_t pl = b; pl < e; ++pl) {
                              const float* src = x + pl * static_cast<std::size_t>(g.in_sp);
                              float* out = dst + pl * out_sp;
                              for (std::int64_t o0 = 0; o0 < g.out[0]; ++o0)
                                for (std::int64_t o1 = 0; o1 < g.out[1]; ++o1) {
                                  const float* line = src + (o0 * g.s[0] * g.in[1] + o1 * g.s[1]) * g.in[2];
                                  const std::int64_t s2 = g.s[2];
                                  if (s2 == 2) {
                                    for (std::int64_t o2 = 0; o2 < g.out[2]; ++o2) out[o2] = line[2 * o2];
                                  } else {
                                    for (std::int64_t o2 = 0; o2 < g.out[2]; ++o2) out[o2] = line[o2 * s2];
                                  }
                                  out += g.out[2];
                                }
                            }
                          });
}

// Whether conv_padded_rows() handles p (rank <= 2, not a 1x1 without padding): always at stride
// 1; with strides when the wide rows waste at most a quarter of the columns.
bool padded_rows_fit(const ConvParams& p, const Geometry& g) {
  if (p.rank > 2 || is_pointwise(p) || is_strided_pointwise(p)) return false;
  if (is_unit_stride(p)) return true;
  const std::int64_t wp = (g.out[2] - 1) * g.s[2] + (g.k[2] - 1) * g.d[2] + 1;
  const std::int64_t wq = (wp + g.s[2] - 1) / g.s[2];
  return (wq - g.out[2]) * 4 <= g.out[2];
}

// With strides the padded input is split into sh x sw phase planes (padded row r, column c in
// phase (r % sh, c % sw) at (r / sh, c / sw), each hq x wq): output (oh, ow) of tap (kh, kw)
// then reads phase ((kh*dh) % sh, (kw*dw) % sw) at (oh + kh*dh / sh, ow + kw*dw / sw), so the
// B rows are again contiguous slices, over wide rows of wq columns.
void conv_padded_rows(const ConvParams& p, const Geometry& g, const float* x, const float* w, const float* bias,
                      float* y, const Unary& act, bool accumulate) {
  const detail::KernelTable& kt = detail::active_table();
  const std::int64_t G = p.group, Cg = p.in_channels / G, Mg = p.out_channels / G;
  const std::int64_t oh_n = g.out[1], ow_n = g.out[2], sh = g.s[1], sw = g.s[2];
  const std::int64_t hp = (oh_n - 1) * sh + (g.k[1] - 1) * g.d[1] + 1, wp = (ow_n - 1) * sw + (g.k[2] - 1) * g.d[2] + 1;
  const std::int64_t hq = (hp + sh - 1) / sh, wq = (wp + sw - 1) / sw, phase = hq * wq;
  const std::int64_t plane = sh * sw * phase, slack = ((g.k[2] - 1) * g.d[2]) / sw;
  // Row offsets of B, shared by every (image, group).
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(Cg * g.k_sp));
  for (std::int64_t c = 0, k = 0; c < Cg; ++c)
    for (std::int64_t kh = 0; kh < g.k[1]; ++kh)
      for (std::int64_t kw = 0; kw < g.k[2]; ++kw) {
        const std::int64_t r = kh * g.d[1], q = kw * g.d[2];
        offsets[static_cast<std::size_t>(k++)] = c * plane + ((r % sh) * sw + q % sw) * phase + (r / sh) * wq + q / sw;
      }
  const auto M = static_cast<std::size_t>(Mg), K = offsets.size(), N = static_cast<std::size_t>(oh_n * wq);
  const bool crop = wq != ow_n;
  detail::run_problems(
      static_cast<std::size_t>(p.batch * G), 2.0 * static_cast<double>(M * N * K), [&](std::size_t i, bool parallel) {
        const auto n = static_cast<std::int64_t>(i) / G, grp = static_cast<std::int64_t>(i) % G;
        // The copies before and after the GEMM are split over the threads too when the GEMM is
        // (one problem: they would otherwise run on one thread while the other waits).
        auto chunks = [&](std::size_t count, std::size_t floats_each, auto&& f) {
          if (parallel) {
            detail::parallel_chunks(count, std::max<std::size_t>(1, 32768 / std::max<std::size_t>(floats_each, 1)), f);
          } else {
            f(std::size_t{0}, count);
          }
        };
        detail::Scratch pad(static_cast<std::size_t>(Cg * plane + slack));
        float* xp = pad.data();
        std::fill(xp + Cg * plane, xp + Cg * plane + slack, 0.f);
        chunks(static_cast<std::size_t>(Cg), static_cast<std::size_t>(plane), [&](std::size_t c0, std::size_t c1) {
          for (auto c = static_cast<std::int64_t>(c0); c < static_cast<std::int64_t>(c1); ++c) {
            float* dst = xp + c * plane;
            std::fill(dst, dst + plane, 0.f);
            const float* src = x + ((n * p.in_channels + grp * Cg + c) * g.in_sp);
            for (std::int64_t ih = 0; ih < g.in[1]; ++ih) {
              const std::int64_t r = ih + g.pb[1];
              if (r >= hp) break;
              const float* line = src + ih * g.in[2];
              float* row = dst + (r % sh) * sw * phase + (r / sh) * wq;  // phase (r % sh, 0)
              if (sw == 1) {
                const std::int64_t cols = std::min(g.in[2], wp - g.pb[2]);
                if (cols > 0) std::memcpy(row + g.pb[2], line, static_cast<std::size_t>(cols) * sizeof(float));
                continue;
              }
              // Phase b holds padded columns b, b + sw, ...; input column = padded column - pad.
              const std::int64_t pl = g.pb[2], end = std::min(wp, g.in[2] + pl);  // columns past end stay 0
              for (std::int64_t b = 0; b < sw; ++b) {
                const std::int64_t q0 = b < pl ? (pl - b + sw - 1) / sw : 0;  // first index with column >= pl
                const std::int64_t count = end > b + q0 * sw ? (end - b - q0 * sw + sw - 1) / sw : 0;
                const float* from = line + b + q0 * sw - pl;
                float* to = row + b * phase + q0;
                if (sw == 2) {
                  for (std::int64_t t = 0; t < count; ++t) to[t] = from[2 * t];
                } else {
                  for (std::int64_t t = 0; t < count; ++t) to[t] = from[t * sw];
                }
              }
            }
          }
        });
        float* yg = y + (n * p.out_channels + grp * Mg) * g.out_sp;
        std::unique_ptr<detail::Scratch> wide;
        if (crop) wide = std::make_unique<detail::Scratch>(M * N);
        Epilogue ep;
        // Cropped with a residual: the residual is added (then `act` applied) while cropping.
        const bool late = crop && accumulate;
        if (!late) ep.act = act;
        if (bias != nullptr) ep.bias_kind = Bias::PerRow, ep.bias = bias + grp * Mg;
        const RowSlices rows{xp, offsets.data()};
        detail::GemmProblem q;
        q.M = M, q.N = N, q.K = K;
        q.a = w + grp * Mg * Cg * g.k_sp, q.lda = K;
        q.c = crop ? wide->data() : yg, q.ldc = N;
        q.beta = accumulate && !crop ? 1.f : 0.f;
        q.ep = &ep;
        q.b = {&pack_row_slices, &rows};
        detail::gemm_run(kt, q, parallel);
        if (crop)
          chunks(M, N, [&](std::size_t m0, std::size_t m1) {
            for (auto m = static_cast<std::int64_t>(m0); m < static_cast<std::int64_t>(m1); ++m)
              for (std::int64_t oh = 0; oh < oh_n; ++oh) {
                float* dst = yg + m * g.out_sp + oh * ow_n;
                const float* src = wide->data() + (m * oh_n + oh) * wq;
                if (!late) {
                  std::memcpy(dst, src, static_cast<std::size_t>(ow_n) * sizeof(float));
                  continue;
                }
                kt.binary_vv(BinaryOp::Add, src, dst, dst, static_cast<std::size_t>(ow_n));
                if (act.op != UnaryOp::Identity) kt.unary(act, dst, dst, static_cast<std::size_t>(ow_n));
              }
          });
      });
}

void conv_gemm(const ConvParams& p, const Geometry& g, const float* x, const float* w, const float* bias, float* y,
               const Unary& act, bool accumulate) {
  const detail::KernelTable& kt = detail::active_table();
  const std::int64_t G = p.group, Cg = p.in_channels / G, Mg = p.out_channels / G;
  const auto M = static_cast<std::size_t>(Mg), K = static_cast<std::size_t>(Cg * g.k_sp),
             N = static_cast<std::size_t>(g.out_sp);
  const bool pointwise = is_pointwise(p);
  const auto problems = static_cast<std::size_t>(p.batch * G);
  detail::run_problems(problems, 2.0 * static_cast<double>(M * N * K), [&](std::size_t i, bool parallel) {
    const auto n = static_cast<std::int64_t>(i) / G, grp = static_cast<std::int64_t>(i) % G;
    const float* xg = x + (n * p.in_channels + grp * Cg) * g.in_sp;
    Epilogue ep;
    ep.act = act;
    if (bias != nullptr) ep.bias_kind = Bias::PerRow, ep.bias = bias + grp * Mg;
    detail::GemmProblem q;
    q.M = M, q.N = N, q.K = K;
    q.a = w + grp * Mg * Cg * g.k_sp, q.lda = K;
    q.c = y + (n * p.out_channels + grp * Mg) * g.out_sp, q.ldc = N;
    q.beta = accumulate ? 1.f : 0.f;
    q.ep = &ep;
    const detail::StridedB direct{xg, N, false, &kt.gemm};
    const Im2col cols{xg, &g};
    q.b = pointwise ? detail::strided_b_source(direct) : detail::BSource{&pack_im2col, &cols};
    detail::gemm_run(kt, q, parallel);
  });
}

// ---- depthwise: group == C, each input channel feeds M / C output channels ----

// The depthwise loop over planes: each input plane is loaded into a zero-padded float plane
// (load(x plane, padded column offset) writes one row's values as floats), each output plane
// is computed by depthwise_plane into out(n, m) with the activation `act`, then done(n, m).
// load copies; out is y's plane, or a per-thread plane (extra_floats) when a residual is added.
template <class Src, class Load, class Out, class Done>
void depthwise_planes(const ConvParams& p, const Geometry& g, const Src* x, const float* w, const float* bias,
                      const Unary& act, std::size_t extra_floats, Load&& load, Out&& out_plane, Done&& done) {
  const detail::KernelTable& kt = detail::active_table();
  const std::int64_t C = p.in_channels, mult = p.out_channels / C;
  const std::int64_t kh = g.k[1], kw = g.k[2], sh = g.s[1], sw = g.s[2], dh = g.d[1], dw = g.d[2];
  const std::int64_t oh_n = g.out[1], ow_n = g.out[2], ih_n = g.in[1], iw_n = g.in[2];
  const std::int64_t pt = g.pb[1], pl = g.pb[2];
  // Padded plane, columns split into sw phases so every tap reads a contiguous run:
  // padded column c lives in phase c % sw at index c / sw.
  const std::int64_t hp = (oh_n - 1) * sh + (kh - 1) * dh + 1;
  const std::int64_t wp = (ow_n - 1) * sw + (kw - 1) * dw + 1;
  const std::int64_t wq = (wp + sw - 1) / sw;
  const std::int64_t plane_floats = hp * sw * wq;
  const auto planes = static_cast<std::size_t>(p.batch * C);
  const auto work = static_cast<std::size_t>(mult * oh_n * ow_n * kh * kw);
  std::vector<std::int64_t> taps(static_cast<std::size_t>(kh * kw));
  for (std::int64_t i = 0; i < kh; ++i)
    for (std::int64_t j = 0; j < kw; ++j)
      taps[static_cast<std::size_t>(i * kw + j)] = (i * dh * sw + (j * dw) % sw) * wq + (j * dw) / sw;
  detail::parallel_chunks(
      planes, std::max<std::size_t>(1, 65536 / std::max<std::size_t>(work, 1)), [&](std::size_t b, std::size_t e) {
        detail::Scratch buf(static_cast<std::size_t>(plane_floats) + extra_floats);
        float* plane = buf.data();
        float* extra = plane + plane_floats;  // the caller's per-thread output plane
        for (std::size_t pi = b; pi < e; ++pi) {
          const auto n = static_cast<std::int64_t>(pi) / C, c = static_cast<std::int64_t>(pi) % C;
          std::fill(plane, plane + plane_floats, 0.f);
          const Src* xin = x + (n * C + c) * g.in_sp;
          for (std::int64_t ih = 0; ih < ih_n && ih + pt < hp; ++ih) {
            const Src* src = xin + ih * iw_n;
            float* row = plane + (ih + pt) * sw * wq;
            if (sw == 1) {
              const std::int64_t cols = std::min(iw_n, wp - pl);
              if (cols > 0) load(row + pl, src, cols, std::int64_t{1});
              continue;
            }
            // Phase ph holds padded columns ph, ph + sw, ...; input column = padded column - pl.
            for (std::int64_t ph = 0; ph < sw; ++ph) {
              const std::int64_t q0 = ph < pl ? (pl - ph + sw - 1) / sw : 0;  // first index with column >= pl
              const std::int64_t end = std::min(wp, iw_n + pl);               // columns past this stay 0
              const std::int64_t count = end > ph + q0 * sw ? (end - ph - q0 * sw + sw - 1) / sw : 0;
              if (count > 0) load(row + ph * wq + q0, src + ph + q0 * sw - pl, count, sw);
            }
          }
          for (std::int64_t m = c * mult; m < (c + 1) * mult; ++m) {
            float* out = out_plane(n, m, extra);
            kt.depthwise_plane(plane, taps.data(), taps.size(), w + m * kh * kw, bias != nullptr ? bias[m] : 0.f,
                               static_cast<std::size_t>(sh * sw * wq), static_cast<std::size_t>(oh_n),
                               static_cast<std::size_t>(ow_n), out, &act);
            done(n, m, out);
          }
        }
      });
}

void conv_depthwise(const ConvParams& p, const Geometry& g, const float* x, const float* w, const float* bias, float* y,
                    const Unary& act, bool accumulate) {
  const detail::KernelTable& kt = detail::active_table();
  auto load = [](float* to, const float* from, std::int64_t count, std::int64_t step) {
    if (step == 1) {
      std::memcpy(to, from, static_cast<std::size_t>(count) * sizeof(float));
    } else if (step == 2) {  // the common strided case, with a constant stride the compiler can vectorize
      for (std::int64_t q = 0; q < count; ++q) to[q] = from[2 * q];
    } else {
      for (std::int64_t q = 0; q < count; ++q) to[q] = from[q * step];
    }
  };
  auto y_plane = [&](std::int64_t n, std::int64_t m) { return y + (n * p.out_channels + m) * g.out_sp; };
  if (!accumulate) {
    depthwise_planes(
        p, g, x, w, bias, act, 0, load, [&](std::int64_t n, std::int64_t m, float*) { return y_plane(n, m); },
        [](std::int64_t, std::int64_t, const float*) {});
    return;
  }
  // accumulate: each plane into a per-thread sum, then + the residual, then the activation.
  const Unary none{};
  depthwise_planes(
      p, g, x, w, bias, none, static_cast<std::size_t>(g.out_sp), load,
      [](std::int64_t, std::int64_t, float* extra) { return extra; },
      [&](std::int64_t n, std::int64_t m, const float* sum) {
        float* out = y_plane(n, m);
        kt.binary_vv(BinaryOp::Add, sum, out, out, static_cast<std::size_t>(g.out_sp));
        if (act.op != UnaryOp::Identity) kt.unary(act, out, out, static_cast<std::size_t>(g.out_sp));
      });
}

// ---- transposed form with packed weights: explicit im2col rows, output transposed back ----

// cols[k][j] (K x out_sp, row-major) = x[c, o*s - pad + kk*d] for k = (c, kk), 0 outside.
void im2col_rows(const float* x, const Geometry& g, std::size_t K, float* cols) {
  const auto N = static_cast<std::size_t>(g.out_sp);
  // Outputs [lo, hi) of a row read inside the input line, per kernel position k2 (the rest are
  // padding): two divisions per row by the stride were a third of silero VAD's convs.
  const std::int64_t s2 = g.s[2], len = g.out[2];
  std::vector<std::int64_t> lohi(static_cast<std::size_t>(2 * g.k[2]));
  for (std::int64_t k2 = 0; k2 < g.k[2]; ++k2) {
    const std::int64_t first = -g.pb[2] + k2 * g.d[2];
    const std::int64_t lo = first >= 0 ? 0 : std::min(len, (-first + s2 - 1) / s2);
    lohi[static_cast<std::size_t>(2 * k2)] = lo;
    lohi[static_cast<std::size_t>(2 * k2 + 1)] =
        first < g.in[2] ? std::max(lo, std::min(len, (g.in[2] - first + s2 - 1) / s2)) : lo;
  }
  detail::parallel_chunks(
      K, std::max<std::size_t>(1, 32768 / std::max<std::size_t>(N, 1)), [&](std::size_t b, std::size_t e) {
        // (c, k0, k1, k2) of row b, then stepped row by row: with few output positions (silero
        // VAD's 1-D convs over 1-4 positions) the five divisions per row were most of the conv.
        const auto kb = static_cast<std::int64_t>(b);
        const std::int64_t kr0 = kb % g.k_sp;
        std::int64_t c = kb / g.k_sp, k2 = kr0 % g.k[2], k1 = (kr0 / g.k[2]) % g.k[1], k0 = kr0 / (g.k[2] * g.k[1]);
        for (std::size_t k = b; k < e; ++k) {
          const float* plane = x + c * g.in_sp;
          float* row = cols + k * N;
          for (std::int64_t o0 = 0; o0 < g.out[0]; ++o0) {
            const std::int64_t i0 = o0 * g.s[0] - g.pb[0] + k0 * g.d[0];
            for (std::int64_t o1 = 0; o1 < g.out[1]; ++o1, row += g.out[2]) {
              const std::int64_t i1 = o1 * g.s[1] - g.pb[1] + k1 * g.d[1];
              if (i0 < 0 || i0 >= g.in[0] || i1 < 0 || i1 >= g.in[1]) {
                std::fill(row, row + g.out[2], 0.f);
                continue;
              }
              const float* line = plane + (i0 * g.in[1] + i1) * g.in[2];
              const std::int64_t first = -g.pb[2] + k2 * g.d[2];
              const std::int64_t lo = lohi[static_cast<std::size_t>(2 * k2)],
                                 hi = lohi[static_cast<std::size_t>(2 * k2 + 1)];
              std::fill(row, row + lo, 0.f);
              if (s2 == 1) {
                if (hi > lo)
                  std::memcpy(row + lo, line + first + lo, static_cast<std::size_t>(hi - lo) * sizeof(float));
              } else {
                for (std::int64_t o2 = lo; o2 < hi; ++o2) row[o2] = line[first + o2 * s2];
              }
              std::fill(row + hi, row + len, 0.f);
            }
          }
          if (++k2 == g.k[2]) {
            k2 = 0;
            if (++k1 == g.k[1]) {
              k1 = 0;
              if (++k0 == g.k[0]) k0 = 0, ++c;
            }
          }
        }
      });
}

// y[m][j] = t[j][m] (t: N x M), or with `accumulate` y[m][j] = act(y[m][j] + t[j][m]).
// 4 x 4 blocks through SSE registers (the baseline ISA), the edges one by one.
void transpose_out(const detail::KernelTable& kt, const float* t, std::size_t N, std::size_t M, float* y,
                   bool accumulate, const Unary& act) {
  constexpr std::size_t kB = 16;
  const std::size_t blocks = (M + kB - 1) / kB;
  auto edge = [&](std::size_t m, std::size_t j) {
    if (accumulate) {
      y[m * N + j] += t[j * M + m];
    } else {
      y[m * N + j] = t[j * M + m];
    }
  };
  detail::parallel_chunks(blocks, std::max<std::size_t>(1, 16384 / (kB * std::max<std::size_t>(N, 1))),
                          [&](std::size_t b, std::size_t e) {
                            for (std::size_t mb = b; mb < e; ++mb) {
                              const std::size_t m0 = mb * kB, m1 = std::min(M, m0 + kB), m4 = m0 + (m1 - m0) / 4 * 4;
                              std::size_t j = 0;
                              for (; j + 4 <= N; j += 4) {
                                for (std::size_t m = m0; m < m4; m += 4) {
                                  __m128 r0 = _mm_loadu_ps(t + j * M + m), r1 = _mm_loadu_ps(t + (j + 1) * M + m);
                                  __m128 r2 = _mm_loadu_ps(t + (j + 2) * M + m), r3 = _mm_loadu_ps(t + (j + 3) * M + m);
                                  _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
                                  const __m128 rows[4] = {r0, r1, r2, r3};
                                  for (std::size_t q = 0; q < 4; ++q) {
                                    float* out = y + (m + q) * N + j;
                                    _mm_storeu_ps(out, accumulate ? _mm_add_ps(_mm_loadu_ps(out), rows[q]) : rows[q]);
                                  }
                                }
                                for (std::size_t m = m4; m < m1; ++m)
                                  for (std::size_t q = j; q < j + 4; ++q) edge(m, q);
                              }
                              for (; j < N; ++j)
                                for (std::size_t m = m0; m < m1; ++m) edge(m, j);
                              if (accumulate && act.op != UnaryOp::Identity)
                                for (std::size_t m = m0; m < m1; ++m) kt.unary(act, y + m * N, y + m * N, N);
                            }
                          });
}

}  // namespace

ConvPackedWeights pack_conv_weights(const ConvParams& p, const float* w) {
  validate(p);
  const Geometry g = geometry(p);
  if (detail::conv_direct_routed(p)) return ConvPackedWeights{{}, detail::pack_conv_direct(p, w)};
  if (detail::conv_fewc_routed(p)) return ConvPackedWeights{{}, detail::pack_conv_fewc(p, w), true};
  const std::int64_t G = p.group, Cg = p.in_channels / G, Mg = p.out_channels / G;
  const auto K = static_cast<std::size_t>(Cg * g.k_sp);
  ConvPackedWeights out;
  for (std::int64_t grp = 0; grp < G; ++grp)
    out.groups.push_back(pack_b(true, K, static_cast<std::size_t>(Mg), w + grp * Mg * Cg * g.k_sp, K));
  return out;
}

bool conv_prefers_direct(const ConvParams& p) { return detail::conv_direct_routed(p) || detail::conv_fewc_routed(p); }

bool conv_prefers_packed(const ConvParams& p) {
  const bool depthwise = p.rank <= 2 && p.group == p.in_channels && p.group > 1;
  if (depthwise || p.out_channels % p.group != 0 || p.in_channels % p.group != 0) return false;
  // Measured (AVX-512, 1 and 2 threads): on ResNet's 7x7 stage every conv gains (pointwise
  // ~20%; the 3x3s, strided or not, and the strided 1x1 10-35%: conv() computes 49 columns as a
  // 48-wide panel plus a 1-column one); at 14x14 conv() is as fast or faster.
  const std::int64_t n = p.out_spatial(), mg = p.out_channels / p.group;
  return n > 0 && n <= 64 && mg >= 32;
}

void conv_packed(const ConvParams& p, const float* x, const ConvPackedWeights& w, const float* bias, float* y,
                 const Unary& act, bool accumulate) {
  validate(p);
  const Geometry g = geometry(p);
  if (w.fewc) {
    const auto floats = static_cast<std::size_t>((p.out_channels + 15) / 16 * p.in_channels * g.k_sp * 16);
    if (!detail::conv_fewc_fits(p) || w.direct.size() != floats)
      throw std::invalid_argument("simd::conv_packed: the weights were packed for other parameters");
    if (detail::conv_fewc_routed(p)) {
      detail::conv_fewc(p, x, w.direct.data(), bias, y, act, accumulate);
    } else {  // another ISA forced after packing: the plain path on unpacked weights
      detail::Scratch plain(static_cast<std::size_t>(p.out_channels * p.in_channels * g.k_sp));
      detail::unpack_conv_fewc(p, w.direct.data(), plain.data());
      conv(p, x, plain.data(), bias, y, act, accumulate);
    }
    return;
  }
  if (!w.direct.empty()) {
    const auto floats = static_cast<std::size_t>((p.out_channels + 15) / 16 * p.in_channels * 144);
    if (!detail::conv_direct_fits(p) || w.direct.size() != floats)
      throw std::invalid_argument("simd::conv_packed: the weights were packed for other parameters");
    if (p.batch == 0) return;
    if (detail::conv_direct_routed(p)) {
      detail::conv_direct(p, x, w.direct.data(), bias, y, act, accumulate);
    } else {  // another ISA forced after packing: the plain path on unpacked weights
      detail::Scratch plain(static_cast<std::size_t>(p.out_channels * p.in_channels * 9));
      detail::unpack_conv_direct(p, w.direct.data(), plain.data());
      conv(p, x, plain.data(), bias, y, act, accumulate);
    }
    return;
  }
  const std::int64_t G = p.group, Cg = p.in_channels / G, Mg = p.out_channels / G;
  const auto K = static_cast<std::size_t>(Cg * g.k_sp), M = static_cast<std::size_t>(Mg),
             N = static_cast<std::size_t>(g.out_sp);
  if (w.groups.size() != static_cast<std::size_t>(G) ||
      std::any_of(w.groups.begin(), w.groups.end(), [&](const PackedB& b) { return b.k() != K || b.n() != M; }))
    throw std::invalid_argument("simd::conv_packed: the weights were packed for other parameters");
  if (p.batch == 0 || M == 0 || N == 0) return;
  const detail::KernelTable& kt = detail::active_table();
  const bool direct = is_pointwise(p);  // x itself is im2col(x)
  detail::Scratch cols(direct ? 1 : K * N), tmp(N * M);
  for (std::int64_t n = 0; n < p.batch; ++n)
    for (std::int64_t grp = 0; grp < G; ++grp) {
      const float* xg = x + (n * p.in_channels + grp * Cg) * g.in_sp;
      const float* a = xg;
      if (!direct) {
        im2col_rows(xg, g, K, cols.data());
        a = cols.data();
      }
      Epilogue ep;
      if (!accumulate) ep.act = act;
      if (bias != nullptr) ep.bias_kind = Bias::PerCol, ep.bias = bias + grp * Mg;
      gemm_packed(true, N, 1.f, a, N, w.groups[static_cast<std::size_t>(grp)], 0.f, tmp.data(), M, ep);
      transpose_out(kt, tmp.data(), N, M, y + (n * p.out_channels + grp * Mg) * g.out_sp, accumulate, act);
    }
}

void conv(const ConvParams& p, const float* x, const float* w, const float* bias, float* y, const Unary& act,
          bool accumulate) {
  validate(p);
  const Geometry g = geometry(p);
  if (p.batch == 0 || p.out_channels == 0 || g.out_sp == 0) return;
  const bool depthwise = p.rank <= 2 && p.group == p.in_channels && p.group > 1;
  if (depthwise) {
    conv_depthwise(p, g, x, w, bias, y, act, accumulate);
  } else if (detail::conv_fewc_routed(p)) {  // packing its few weights costs next to nothing
    detail::conv_fewc(p, x, detail::pack_conv_fewc(p, w).data(), bias, y, act, accumulate);
  } else if (padded_rows_fit(p, g)) {
    conv_padded_rows(p, g, x, w, bias, y, act, accumulate);
  } else if (is_strided_pointwise(p)) {
    // 1x1 with strides, no padding: the sampled positions gathered once into a dense input
    // make it a plain pointwise conv (B read in place or packed with whole-panel copies).
    ConvParams q = p;
    for (int i = 0; i < p.rank; ++i) q.in[i] = p.out(i), q.stride[i] = 1;
    const Geometry gq = geometry(q);
    detail::Scratch dense(static_cast<std::size_t>(p.batch * p.in_channels * gq.in_sp));
    subsample(g, x, static_cast<std::size_t>(p.batch * p.in_channels), dense.data());
    conv_gemm(q, gq, dense.data(), w, bias, y, act, accumulate);
  } else {
    conv_gemm(p, g, x, w, bias, y, act, accumulate);
  }
}

}  // namespace onnxforge::simd
