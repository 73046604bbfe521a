// Quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger,
// ConvInteger (integer arithmetic exact in int64/double).
#include <cmath>

#include "runtime/ops/common.h"
#include "runtime/ops/conv_util.h"

namespace onnxforge::rt {
namespace {

// Per-tensor or per-axis parameter index of element i.
struct AxisParam {
  int64_t inner = 1, n = 1;
  bool per_axis = false;
  int64_t at(int64_t i) const { return per_axis ? (i / inner) % n : 0; }
};

AxisParam axis_param(const OpContext& c, const Tensor& x, const Tensor& scale) {
  AxisParam p;
  if (scale.numel() <= 1) return p;
  const int64_t axis = norm_axis(c, c.attr_i("axis", 1), x.rank());
  p.per_axis = true;
  p.n = x.shape[static_cast<size_t>(axis)];
  for (int64_t i = axis + 1; i < x.rank(); ++i) p.inner *= x.shape[static_cast<size_t>(i)];
  return p;
}

void dequantize(OpContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& s = c.input(1);
  const Tensor* zp = c.in(2);
  AxisParam ap = axis_param(c, x, s);
  Tensor& y = c.output(0, s.dtype == DType::Float ? DType::Float : s.dtype, x.shape);
  std::vector<float> out(static_cast<size_t>(x.numel()));
  for (int64_t i = 0, n = x.numel(); i < n; ++i) {
    int64_t k = ap.at(i);
    double z = zp && zp->numel() ? static_cast<double>(zp->get_i64(k)) : 0.0;
    out[static_cast<size_t>(i)] = static_cast<float>((static_cast<double>(x.get_i64(i)) - z) * s.get_f64(k));
  }
  cast_into(Tensor::view(DType::Float, x.shape, out.data()), y);
}

void quantize(OpContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& s = c.input(1);
  const Tensor* zp = c.in(2);
  DType to = zp ? zp->dtype : DType::Uint8;
  if (c.has_attr("output_dtype") && c.attr_i("output_dtype", 0)) to = static_cast<DType>(c.attr_i("output_dtype", 2));
  AxisParam ap = axis_param(c, x, s);
  Tensor& y = c.output(0, to, x.shape);
  const double lo = to == DType::Int8 ? -128 : to == DType::Uint8 ? 0 : to == DType::Int16 ? -32768 : 0;
  const double hi = to == DType::Int8 ? 127 : to == DType::Uint8 ? 255 : to == DType::Int16 ? 32767 : 65535;
  std::vector<double> q(static_cast<size_t>(x.numel()));
  for (int64_t i = 0, n = x.numel(); i < n; ++i) {
    int64_t k = ap.at(i);
    double z = zp && zp->numel() ? static_cast<double>(zp->get_i64(k)) : 0.0;
    double v = std::nearbyint(static_cast<double>(static_cast<float>(x.get_f64(i) / s.get_f64(k)))) + z;
    q[static_cast<size_t>(i)] = std::clamp(v, lo, hi);
  }
  cast_into(Tensor::view(DType::Double, x.shape, q.data()), y);
}

void dynamic_quantize(OpContext& c) {
  const Tensor& x = c.input(0);
  float mn = 0, mx = 0;
  for (int64_t i = 0, n = x.numel(); i < n; ++i) {
    mn = std::min(mn, x.ptr<float>()[i]);
    mx = std::max(mx, x.ptr<float>()[i]);
  }
  float scale = (mx - mn) / 255.f;
  float zpf = scale == 0 ? 0 : std::clamp(std::nearbyint(0 - mn / scale), 0.f, 255.f);
  Tensor& y = c.output(0, DType::Uint8, x.shape);
  for (int64_t i = 0, n = x.numel(); i < n; ++i) {
    float v = scale == 0 ? zpf : std::nearbyint(x.ptr<float>()[i] / scale) + zpf;
    y.ptr<uint8_t>()[i] = static_cast<uint8_t>(std::clamp(v, 0.f, 255.f));
  }
  c.output(1, DType::Float, {}).ptr<float>()[0] = scale;
  c.output(2, DType::Uint8, {}).ptr<uint8_t>()[0] = static_cast<uint8_t>(zpf);
}

void matmul_integer(OpContext& c) {
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(1);
  const Tensor* az = c.in(2);
  const Tensor* bz = c.in(3);
  Shape as = a.shape, bs = b.shape;
  const bool a1 = as.size() == 1, b1 = bs.size() == 1;
  if (a1) as.insert(as.begin(), 1);
  if (b1) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  Shape abatch(as.begin(), as.end() - 2), bbatch(bs.begin(), bs.end() - 2);
  Shape batch = broadcast_shapes(c, abatch, bbatch);
  Shape ys = batch;
  if (!a1) ys.push_back(M);
  if (!b1) ys.push_back(N);
  Tensor& y = c.output(0, DType::Int32, ys);
  for_each_broadcast<2>(batch, {bcast_strides(abatch, batch), bcast_strides(bbatch, batch)},
                        [&](int64_t bi, const std::array<int64_t, 2>& o) {
                          for (int64_t m = 0; m < M; ++m)
                            for (int64_t n = 0; n < N; ++n) {
                              int64_t acc = 0;
                              for (int64_t k = 0; k < K; ++k) {
                                int64_t za = az ? az->get_i64(az->numel() > 1 ? m : 0) : 0;
                                int64_t zb = bz ? bz->get_i64(bz->numel() > 1 ? n : 0) : 0;
                                acc += (a.get_i64(o[0] * M * K + m * K + k) - za) * (b.get_i64(o[1] * K * N + k * N + n) - zb);
                              }
                              y.ptr<int32_t>()[bi * M * N + m * N + n] = static_cast<int32_t>(acc);
                            }
                        });
}

void conv_integer(OpContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& w = c.input(1);
  const int64_t xz = c.in(2) ? c.in(2)->get_i64(0) : 0;
  const Tensor* wz = c.in(3);
  ConvGeometry g = conv_geometry(c, x.shape, w.shape, false);
  const int r = g.rank;
  const int64_t group = c.attr_i("group", 1);
  if (group < 1 || x.shape[1] % group || w.shape[0] % group || w.shape[1] * group != x.shape[1])
    c.error("weight " + shape_str(w.shape) + " does not match input " + shape_str(x.shape) + " with group " +
            std::to_string(group));
  for (int i = 0; i < g.rank; ++i)
    if (g.kernel[static_cast<size_t>(i)] != w.shape[static_cast<size_t>(i) + 2]) c.error("kernel_shape does not match weight");
  const int64_t N = x.shape[0], C = x.shape[1], M = w.shape[0], Cg = C / group;
  std::array<int64_t, 3> out{1, 1, 1};
  Shape ys{N, M};
  for (int i = 0; i < r; ++i) {
    size_t u = static_cast<size_t>(i);
    out[u] = (g.in[u] + g.pad_begin[u] + g.pad_end[u] - g.dilation[u] * (g.kernel[u] - 1) - 1) / g.stride[u] + 1;
    ys.push_back(out[u]);
  }
  Tensor& y = c.output(0, DType::Int32, ys);
  int64_t osp = 1, isp = 1, ksp = 1;
  for (int i = 0; i < r; ++i) {
    osp *= out[static_cast<size_t>(i)];
    isp *= g.in[static_cast<size_t>(i)];
    ksp *= g.kernel[static_cast<size_t>(i)];
  }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) {
      const int64_t gi = m / (M / group);
      const int64_t wzv = wz ? wz->get_i64(wz->numel() > 1 ? m : 0) : 0;
      for (int64_t o = 0; o < osp; ++o) {
        int64_t oi[3] = {0, 0, 0}, rem = o;
        for (int i = r; i-- > 0;) { oi[i] = rem % out[static_cast<size_t>(i)]; rem /= out[static_cast<size_t>(i)]; }
        int64_t acc = 0;
        for (int64_t cc = 0; cc < Cg; ++cc)
          for (int64_t k = 0; k < ksp; ++k) {
            int64_t ki[3] = {0, 0, 0}, kr = k, off = 0;
            for (int i = r; i-- > 0;) { ki[i] = kr % g.kernel[static_cast<size_t>(i)]; kr /= g.kernel[static_cast<size_t>(i)]; }
            bool inside = true;
            for (int i = 0; i < r; ++i) {
              size_t u = static_cast<size_t>(i);
              int64_t p = oi[i] * g.stride[u] + ki[i] * g.dilation[u] - g.pad_begin[u];
              inside &= p >= 0 && p < g.in[u];
              off = off * g.in[u] + p;
            }
            int64_t xv = inside ? x.get_i64((n * C + gi * Cg + cc) * isp + off) : xz;
            acc += (xv - xz) * (w.get_i64((m * Cg + cc) * ksp + k) - wzv);
          }
        y.ptr<int32_t>()[(n * M + m) * osp + o] = static_cast<int32_t>(acc);
      }
    }
}

}  // namespace

void register_quant(Registry& r) {
  r.add("", "DequantizeLinear", {.run = dequantize, .float_compute = false});
  r.add("", "QuantizeLinear", {.run = quantize});
  r.add("", "DynamicQuantizeLinear", {.run = dynamic_quantize});
  r.add("", "MatMulInteger", {.run = matmul_integer, .float_compute = false});
  r.add("", "ConvInteger", {.run = conv_integer, .float_compute = false});
}

}  // namespace onnxforge::rt
