// MaxPool, AveragePool, LpPool, GlobalAveragePool, GlobalMaxPool, GlobalLpPool: 1-3 spatial dims.

#include <array>
#include <cmath>
#include <tuple>

#include "runtime/ops/common.h"
#include "runtime/ops/conv_util.h"
#include "simd/nhwc.h"
#include "simd/reduce.h"
#include "simd/parallel.h"

namespace onnxforge::rt {
namespace {

enum class Pool { Max, Avg, Lp };

// NaN-propagating max (a NaN in the window gives NaN), written so the compiler vectorizes it.
inline float pool_max(float acc, float v) { return (v > acc || v != v) ? v : acc; }

// y[o] = op(y[o], col[o * S - pad + b]) for o in [lo, hi): one tap of the horizontal pass.
template <Pool P, int S>
void pool_tap(const float* col, float* y, int64_t lo, int64_t hi, int64_t off, int64_t stride) {
  const int64_t s = S > 0 ? S : stride;
  for (int64_t o = lo; o < hi; ++o) {
    const float v = col[o * s + off];
    if constexpr (P == Pool::Max)
      y[o] = pool_max(y[o], v);
    else
      y[o] += v;
  }
}

// Taps [lo, hi) of a window starting at `start` (dilation d, k taps) that fall inside [0, in):
// computed, not stepped to, so a hostile kernel of 2^40 taps (with pads as large) does not
// turn into a 2^40-iteration loop per output (a hang).
inline std::pair<int64_t, int64_t> tap_range(int64_t start, int64_t k, int64_t d, int64_t in) {
  const int64_t lo = start >= 0 ? 0 : std::min(k, (-start + d - 1) / d);
  const int64_t hi = start >= in ? 0 : std::min(k, (in - 1 - start) / d + 1);
  return {lo, std::max(lo, hi)};
}

// 2-D max/average pooling with dilation 1, separable: each output row first reduces its window
// rows into `col` (contiguous, vectorized), then reduces the window columns of `col` tap by tap
// over all outputs whose window is inside the input (vectorized over outputs), with the
// clipped border outputs done one by one.
template <Pool P>
void pool2d_separable(const float* X, float* Y, const ConvGeometry& g, const std::array<int64_t, 3>& out,
                      bool include_pad, float* col) {
  const int64_t H = g.in[0], W = g.in[1], kh = g.kernel[0], kw = g.kernel[1], sh = g.stride[0], sw = g.stride[1];
  const int64_t ph = g.pad_begin[0], pw = g.pad_begin[1], ow_n = out[1];
  constexpr float init = P == Pool::Max ? -INFINITY : 0.f;
  // Outputs [lo, hi) have their whole window inside [0, W).
  int64_t lo = pw > 0 ? (pw + sw - 1) / sw : 0, hi = W >= kw ? (W - kw + pw) / sw + 1 : 0;
  lo = std::min(lo, ow_n);
  hi = std::max(lo, std::min(hi, ow_n));
  for (int64_t oh = 0; oh < out[0]; ++oh) {
    const int64_t h0 = oh * sh - ph;
    const int64_t a0 = std::max<int64_t>(h0, 0), a1 = std::min(h0 + kh, H);
    float* y = Y + oh * ow_n;
    if (a1 <= a0) {
      std::fill(col, col + W, init);
    } else {
      std::memcpy(col, X + a0 * W, static_cast<size_t>(W) * sizeof(float));
      for (int64_t h = a0 + 1; h < a1; ++h) {
        const float* row = X + h * W;
        for (int64_t w = 0; w < W; ++w) {
          if constexpr (P == Pool::Max)
            col[w] = pool_max(col[w], row[w]);
          else
            col[w] += row[w];
        }
      }
    }
    auto border = [&](int64_t ow) {
      const int64_t w0 = ow * sw - pw;
      float acc = init;
      for (int64_t w = std::max<int64_t>(w0, 0), we = std::min(w0 + kw, W); w < we; ++w) {
        if constexpr (P == Pool::Max)
          acc = pool_max(acc, col[w]);
        else
          acc += col[w];
      }
      y[ow] = acc;
    };
    for (int64_t ow = 0; ow < lo; ++ow) border(ow);
    for (int64_t ow = hi; ow < ow_n; ++ow) border(ow);
    if (hi > lo) {
      std::fill(y + lo, y + hi, init);
      for (int64_t b = 0; b < kw; ++b) {
        if (sw == 1)
          pool_tap<P, 1>(col, y, lo, hi, b - pw, 1);
        else if (sw == 2)
          pool_tap<P, 2>(col, y, lo, hi, b - pw, 2);
        else
          pool_tap<P, 0>(col, y, lo, hi, b - pw, sw);
      }
    }
    if constexpr (P == Pool::Avg) {
      const int64_t hend = std::min(h0 + kh, H + g.pad_end[0]);
      for (int64_t ow = 0; ow < ow_n; ++ow) {
        const int64_t w0 = ow * sw - pw;
        int64_t cnt;
        if (include_pad)
          cnt = (hend - h0) * (std::min(w0 + kw, W + g.pad_end[1]) - w0);
        else
          cnt = std::max<int64_t>(a1 - a0, 0) * std::max<int64_t>(std::min(w0 + kw, W) - std::max<int64_t>(w0, 0), 0);
        y[ow] /= static_cast<float>(std::max<int64_t>(cnt, 1));
      }
    }
  }
}

// Plan time: a 2-D max/average pool without dilation or Indices output runs channels-last.
bool pool_takes_nhwc(const Graph& g, NodeId n) {
  if (g.attr_ints(n, "kernel_shape").size() != 2) return false;
  for (int64_t d : g.attr_ints(n, "dilations"))
    if (d != 1) return false;
  return g.outputs(n).size() < 2 || !g.output(n, 1).valid();
}

bool global_pool_takes_nhwc(const Graph&, NodeId) { return true; }

template <Pool P>
void pool(OpContext& c) {
  const Tensor& x_in = c.input(0);
  const bool channels_last = x_in.nhwc && c.prefer_nhwc && P != Pool::Lp && pool_takes_nhwc(c.graph, c.node);
  const Tensor x = channels_last ? x_in : to_nchw(x_in);
  if (x.dtype != DType::Float && !(P == Pool::Max && (x.dtype == DType::Int8 || x.dtype == DType::Uint8)))
    c.error("unsupported element type");
  auto ks = c.attr_ints("kernel_shape");
  if (ks.empty()) c.error("kernel_shape is required");
  Shape wshape{1, 1};
  wshape.insert(wshape.end(), ks.begin(), ks.end());
  ConvGeometry g = conv_geometry(c, x.shape, wshape, false);
  const int r = g.rank;
  const bool ceil_mode = c.attr_i("ceil_mode", 0), include_pad = c.attr_i("count_include_pad", 0);
  const double p = static_cast<double>(c.attr_i("p", 2));
  std::array<int64_t, 3> out{1, 1, 1};
  Shape ys{x.shape[0], x.shape[1]};
  int64_t out_sp = 1, in_sp = 1;
  for (int i = 0; i < r; ++i) {
    size_t u = static_cast<size_t>(i);
    int64_t span = g.in[u] + g.pad_begin[u] + g.pad_end[u] - ((g.kernel[u] - 1) * g.dilation[u] + 1);
    // As Conv: a window that fits nowhere is an error, not an empty output (an empty input stays empty).
    if (span < 0 && g.in[u] > 0)
      c.error("the kernel (with dilations) is larger than the padded input " + shape_str(x.shape));
    int64_t o = (ceil_mode ? (span + g.stride[u] - 1) / g.stride[u] : span / g.stride[u]) + 1;
    if (ceil_mode && (o - 1) * g.stride[u] >= g.in[u] + g.pad_begin[u]) --o;
    out[u] = std::max<int64_t>(o, 0);
    ys.push_back(out[u]);
    out_sp *= out[u];
    in_sp *= g.in[u];
  }
  Tensor& y = c.output(0, x.dtype, ys);
  Tensor* idx = c.output_count() > 1 && c.has_output(1) ? &c.output(1, DType::Int64, ys) : nullptr;
  const bool col_major = c.attr_i("storage_order", 0) == 1;
  const int64_t planes = x.shape[0] * x.shape[1];
  if (channels_last) {
    simd::Pool2d q;
    q.N = x.shape[0], q.C = x.shape[1], q.H = g.in[0], q.W = g.in[1], q.OH = out[0], q.OW = out[1];
    q.KH = g.kernel[0], q.KW = g.kernel[1], q.SH = g.stride[0], q.SW = g.stride[1];
    q.pad_top = g.pad_begin[0], q.pad_left = g.pad_begin[1], q.pad_bottom = g.pad_end[0], q.pad_right = g.pad_end[1];
    if constexpr (P == Pool::Max)
      simd::max_pool_nhwc(q, x.ptr<float>(), y.ptr<float>());
    else
      simd::avg_pool_nhwc(q, x.ptr<float>(), y.ptr<float>(), include_pad);
    y.nhwc = true;
    return;
  }
  if (r == 2 && !idx && x.dtype == DType::Float && P != Pool::Lp && g.dilation[0] == 1 && g.dilation[1] == 1) {
    simd::parallel_chunks(static_cast<size_t>(planes), 1, [&](size_t p0, size_t p1) {
      std::vector<float> col(static_cast<size_t>(std::max<int64_t>(g.in[1], 1)));
      for (auto pl = static_cast<int64_t>(p0); pl < static_cast<int64_t>(p1); ++pl)
        pool2d_separable<P>(x.ptr<float>() + pl * in_sp, y.ptr<float>() + pl * out_sp, g, out, include_pad, col.data());
    });
    return;
  }
  if (r == 2 && !idx && x.dtype == DType::Float && P != Pool::Lp) {
    // The common case (CNN stems and downsampling): clipped window bounds per output, float sums.
    simd::parallel_for(planes, [&](int64_t pl) {
      const float* X = x.ptr<float>() + pl * in_sp;
      float* Y = y.ptr<float>() + pl * out_sp;
      for (int64_t oh = 0; oh < out[0]; ++oh) {
        const int64_t h0 = oh * g.stride[0] - g.pad_begin[0];
        const auto [kh0, kh1] = tap_range(h0, g.kernel[0], g.dilation[0], g.in[0]);
        const int64_t hend = std::min(h0 + (g.kernel[0] - 1) * g.dilation[0] + 1, g.in[0] + g.pad_end[0]);
        for (int64_t ow = 0; ow < out[1]; ++ow) {
          const int64_t w0 = ow * g.stride[1] - g.pad_begin[1];
          const auto [kw0, kw1] = tap_range(w0, g.kernel[1], g.dilation[1], g.in[1]);
          float acc = P == Pool::Max ? -INFINITY : 0.f;
          for (int64_t a = kh0; a < kh1; ++a) {
            const float* row = X + (h0 + a * g.dilation[0]) * g.in[1] + w0;
            for (int64_t b = kw0; b < kw1; ++b) {
              const float v = row[b * g.dilation[1]];
              if constexpr (P == Pool::Max)
                acc = (v > acc || std::isnan(v)) ? v : acc;
              else
                acc += v;
            }
          }
          if constexpr (P == Pool::Avg) {
            int64_t cnt;
            if (include_pad) {
              const int64_t wend = std::min(w0 + (g.kernel[1] - 1) * g.dilation[1] + 1, g.in[1] + g.pad_end[1]);
              cnt =
                  ((hend - h0 + g.dilation[0] - 1) / g.dilation[0]) * ((wend - w0 + g.dilation[1] - 1) / g.dilation[1]);
            } else {
              cnt = (kh1 - kh0) * (kw1 - kw0);
            }
            acc /= static_cast<float>(std::max<int64_t>(cnt, 1));
          }
          Y[oh * out[1] + ow] = acc;
        }
      }
    });
    return;
  }
  // 8-bit MaxPool (QOperator models pool their uint8 activations): the maximum of exact values is
  // exact in float, so each plane is widened, pooled on the separable float path and narrowed.
  // The generic loop below (a double per tap) took 4.6 ms of a 29 ms QOperator resnet_small run.
  if (P == Pool::Max && r == 2 && !idx && (x.dtype == DType::Uint8 || x.dtype == DType::Int8) && g.dilation[0] == 1 &&
      g.dilation[1] == 1) {
    const bool s8 = x.dtype == DType::Int8;
    simd::parallel_chunks(static_cast<size_t>(planes), 1, [&](size_t p0, size_t p1) {
      std::vector<float> in(static_cast<size_t>(in_sp)), res(static_cast<size_t>(out_sp)),
          col(static_cast<size_t>(std::max<int64_t>(g.in[1], 1)));
      for (auto pl = static_cast<int64_t>(p0); pl < static_cast<int64_t>(p1); ++pl) {
        const auto* X = x.ptr<uint8_t>() + pl * in_sp;
        for (int64_t i = 0; i < in_sp; ++i)
          in[static_cast<size_t>(i)] = s8 ? static_cast<float>(static_cast<int8_t>(X[i])) : static_cast<float>(X[i]);
        pool2d_separable<P>(in.data(), res.data(), g, out, include_pad, col.data());
        auto* Y = y.ptr<uint8_t>() + pl * out_sp;
        for (int64_t i = 0; i < out_sp; ++i)
          Y[i] = s8 ? static_cast<uint8_t>(static_cast<int8_t>(res[static_cast<size_t>(i)]))
                    : static_cast<uint8_t>(res[static_cast<size_t>(i)]);
      }
    });
    return;
  }
  auto body = [&](auto tag) {
    using T = decltype(tag);
    simd::parallel_for(planes, [&](int64_t pl) {
      const T* X = x.ptr<T>() + pl * in_sp;
      T* Y = y.ptr<T>() + pl * out_sp;
      for (int64_t o = 0; o < out_sp; ++o) {
        int64_t oi[3] = {0, 0, 0}, rem = o;
        for (int i = r; i-- > 0;) {
          oi[i] = rem % out[static_cast<size_t>(i)];
          rem /= out[static_cast<size_t>(i)];
        }
        int64_t start[3], kdim[3], t0[3] = {0, 0, 0}, t1[3] = {1, 1, 1};
        int64_t padded_count = 1;
        for (int i = 0; i < 3; ++i) {
          size_t u = static_cast<size_t>(i);
          start[i] = i < r ? oi[i] * g.stride[u] - g.pad_begin[u] : 0;
          kdim[i] = i < r ? g.kernel[u] : 1;
          if (i < r) {
            int64_t end = std::min(start[i] + (kdim[i] - 1) * g.dilation[u] + 1, g.in[u] + g.pad_end[u]);
            padded_count *= (end - start[i] + g.dilation[u] - 1) / g.dilation[u];
            std::tie(t0[i], t1[i]) = tap_range(start[i], kdim[i], g.dilation[u], g.in[u]);
          }
        }
        double acc = P == Pool::Max ? -INFINITY : 0.0;
        int64_t best = -1, count = 0;
        for (int64_t a = t0[0]; a < t1[0]; ++a) {
          int64_t h = start[0] + a * g.dilation[0];
          for (int64_t b = t0[1]; b < t1[1]; ++b) {
            int64_t w = start[1] + b * g.dilation[1];
            for (int64_t d = t0[2]; d < t1[2]; ++d) {
              int64_t z = start[2] + d * g.dilation[2];
              int64_t off = (h * (r >= 2 ? g.in[1] : 1) + (r >= 2 ? w : 0)) * (r >= 3 ? g.in[2] : 1) + (r >= 3 ? z : 0);
              double v = static_cast<double>(X[off]);
              if constexpr (P == Pool::Max) {
                if (v > acc || best < 0) {
                  acc = v;
                  int64_t pos = off;
                  if (col_major && r == 2) pos = w * g.in[0] + h;
                  best = pos;
                }
              } else if constexpr (P == Pool::Avg) {
                acc += v;
              } else {
                acc += std::pow(std::fabs(v), p);
              }
              ++count;
            }
          }
        }
        if constexpr (P == Pool::Avg)
          acc = acc / static_cast<double>(include_pad ? padded_count : std::max<int64_t>(count, 1));
        if constexpr (P == Pool::Lp) acc = std::pow(acc, 1.0 / p);
        Y[o] = static_cast<T>(acc);
        if (idx) idx->ptr<int64_t>()[pl * out_sp + o] = best + pl * in_sp;
      }
    });
  };
  if (x.dtype == DType::Float)
    body(float{});
  else if (x.dtype == DType::Int8)
    body(int8_t{});
  else
    body(uint8_t{});
}

template <Pool P>
void global_pool(OpContext& c) {
  const Tensor& x_in = c.input(0);
  if (x_in.rank() < 2) c.error("input must have rank >= 2");
  Shape ys(x_in.shape.begin(), x_in.shape.begin() + 2);
  ys.resize(x_in.shape.size(), 1);
  if (x_in.nhwc && P != Pool::Lp) {  // [N, C, 1, 1] is the same bytes in both layouts
    Tensor& y = c.output(0, x_in.dtype, ys);
    const int64_t N = x_in.shape[0], C = x_in.shape[1], HW = x_in.shape[2] * x_in.shape[3];
    if constexpr (P == Pool::Max)
      simd::global_max_pool_nhwc(N, HW, C, x_in.ptr<float>(), y.ptr<float>());
    else
      simd::global_avg_pool_nhwc(N, HW, C, x_in.ptr<float>(), y.ptr<float>());
    return;
  }
  const Tensor x = to_nchw(x_in);
  Tensor& y = c.output(0, x.dtype, ys);
  const int64_t planes = x.shape[0] * x.shape[1], sp = numel(Shape(x.shape.begin() + 2, x.shape.end()));
  if (x.dtype == DType::Float && P != Pool::Lp && sp > 0) {
    // Vector partial sums in float, as the channels-last path: the scalar double loop below is
    // one dependent add per element (PaddleOCR det's 10 squeeze-excite pools: 7.7 ms, ORT 0.9).
    const std::array<int64_t, 2> shape{planes, sp};
    const std::array<int64_t, 1> axes{1};
    simd::reduce(P == Pool::Max ? simd::ReduceOp::Max : simd::ReduceOp::Mean, shape, x.ptr<float>(), axes,
                 y.ptr<float>());
    return;
  }
  const double p = static_cast<double>(c.attr_i("p", 2));
  dispatch_type(x.dtype, [&](auto v) {
    using T = decltype(v);
    if constexpr (std::is_floating_point_v<T>) {
      simd::parallel_for(planes, [&](int64_t pl) {
        const T* X = x.ptr<T>() + pl * sp;
        double acc = P == Pool::Max ? -INFINITY : 0.0;
        for (int64_t i = 0; i < sp; ++i) {
          if (P == Pool::Max)
            acc = (X[i] > acc || X[i] != X[i]) ? static_cast<double>(X[i]) : acc;
          else if (P == Pool::Avg)
            acc += X[i];
          else
            acc += std::pow(std::fabs(static_cast<double>(X[i])), p);
        }
        if (P == Pool::Avg) acc /= static_cast<double>(sp);
        if (P == Pool::Lp) acc = std::pow(acc, 1.0 / p);
        y.ptr<T>()[pl] = static_cast<T>(acc);
      });
    } else {
      c.error("unsupported element type");
    }
  });
}

}  // namespace

void register_pool(Registry& r) {
  auto aware = [](KernelFn f, bool (*takes)(const Graph&, NodeId)) {
    return KernelDef{.run = f, .layout = LayoutUse::Aware, .takes_nhwc = takes};
  };
  r.add("", "MaxPool", aware(pool<Pool::Max>, pool_takes_nhwc));
  r.add("", "AveragePool", aware(pool<Pool::Avg>, pool_takes_nhwc));
  r.add("", "LpPool", {.run = pool<Pool::Lp>});
  r.add("", "GlobalAveragePool", aware(global_pool<Pool::Avg>, global_pool_takes_nhwc));
  r.add("", "GlobalMaxPool", aware(global_pool<Pool::Max>, global_pool_takes_nhwc));
  r.add("", "GlobalLpPool", {.run = global_pool<Pool::Lp>});
}

}  // namespace onnxforge::rt
