// Resize (opset 10-19: nearest, linear, cubic; every coordinate transformation) and Upsample.
// Separable: each output dim gets a list of (source index, weight) taps; the output element is
// the weighted sum over the product of its dims' taps.
#include <cmath>

#include "io/budget.h"
#include "ir/match.h"
#include "runtime/ops/common.h"
#include "simd/resample.h"

namespace onnxforge::rt {
namespace {

struct Tap {
  int64_t index;
  double weight;
};

struct Options {
  std::string_view mode = "nearest", ctm = "half_pixel", nearest = "round_prefer_floor";
  double cubic_a = -0.75, extrapolation = 0;
  bool exclude_outside = false;
  bool antialias = false;  // opset 18: linear/cubic downsampling widens the kernel by 1/scale
};

// `out_len` is the resized length before flooring (in * scale), as the spec's reference uses.
double source_coord(const Options& o, double x, double scale, int64_t in, int64_t out, double out_len, double roi_start,
                    double roi_end, bool* outside) {
  *outside = false;
  if (o.ctm == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  if (o.ctm == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (o.ctm == "pytorch_half_pixel") return out > 1 ? (x + 0.5) / scale - 0.5 : 0;
  if (o.ctm == "align_corners") return out_len == 1 ? 0 : x * static_cast<double>(in - 1) / (out_len - 1);
  if (o.ctm == "asymmetric") return x / scale;
  if (o.ctm == "half_pixel_symmetric") {
    double adj = static_cast<double>(out) / (scale * static_cast<double>(in));
    double center = static_cast<double>(in) / 2, offset = center * (1 - adj);
    return offset + (x + 0.5) / scale - 0.5;
  }
  if (o.ctm == "tf_crop_and_resize") {
    double v = out > 1 ? roi_start * static_cast<double>(in - 1) +
                             x * (roi_end - roi_start) * static_cast<double>(in - 1) / static_cast<double>(out - 1)
                       : 0.5 * (roi_start + roi_end) * static_cast<double>(in - 1);
    *outside = v < 0 || v > static_cast<double>(in - 1);
    return v;
  }
  fail("unsupported coordinate_transformation_mode '", o.ctm, "'");
}

// Antialiased linear/cubic taps at scale < 1 (the ONNX reference's _linear_coeffs_antialias and
// _cubic_coeffs_antialias): the kernel stretched by 1/scale over 2 - 2 * start taps around x,
// normalized to sum 1; sources beyond the edges read the edge (or, with exclude_outside, drop).
std::vector<Tap> antialias_taps(const Options& o, double x, int64_t in, double scale) {
  const bool cubic = o.mode == "cubic";
  const double A = o.cubic_a;
  auto kernel = [&](double d) {
    d = std::fabs(d);
    if (!cubic) return std::max(0.0, 1 - d);
    if (d <= 1) return ((A + 2) * d - (A + 3)) * d * d + 1;
    if (d < 2) return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A;
    return 0.0;
  };
  const int64_t start = static_cast<int64_t>(std::floor((cubic ? -2 : -1) / scale)) + 1;
  const int64_t n = 2 - 2 * start;
  const int64_t base = static_cast<int64_t>(std::ceil(x)) - 1;
  const double ratio = x - static_cast<double>(base);
  std::vector<Tap> out;
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    const int64_t idx = base + start + j;
    const double w = kernel((static_cast<double>(start + j) - ratio) * scale);
    if (o.exclude_outside && (idx < 0 || idx >= in)) continue;
    out.push_back({std::clamp<int64_t>(idx, 0, in - 1), w});
    sum += w;
  }
  if (sum != 0)
    for (auto& tp : out) tp.weight /= sum;
  return out;
}

std::vector<Tap> taps(const Options& o, double x, int64_t in, bool outside, double scale) {
  if (outside) return {};
  if (o.antialias && scale < 1 && o.mode != "nearest") return antialias_taps(o, x, in, scale);
  if (o.mode == "nearest") {
    double f = std::floor(x), frac = x - f;
    int64_t i;
    if (o.nearest == "floor")
      i = static_cast<int64_t>(std::floor(x));
    else if (o.nearest == "ceil")
      i = static_cast<int64_t>(std::ceil(x));
    else if (o.nearest == "round_prefer_ceil")
      i = static_cast<int64_t>(frac == 0.5 ? std::ceil(x) : std::round(x));
    else
      i = static_cast<int64_t>(frac == 0.5 ? f : std::round(x));
    return {{std::clamp<int64_t>(i, 0, in - 1), 1.0}};
  }
  if (o.mode == "linear") {
    double c = std::clamp(x, 0.0, static_cast<double>(in - 1));
    int64_t i0 = static_cast<int64_t>(std::floor(c)), i1 = std::min(i0 + 1, in - 1);
    double w = c - static_cast<double>(i0);
    if (i1 == i0) return {{i0, 1.0}};
    return {{i0, 1 - w}, {i1, w}};
  }
  // cubic
  const double A = o.cubic_a;
  int64_t i0 = static_cast<int64_t>(std::floor(x));
  double t = x - static_cast<double>(i0);
  auto k = [&](double d) {
    d = std::fabs(d);
    if (d <= 1) return ((A + 2) * d - (A + 3)) * d * d + 1;
    if (d < 2) return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A;
    return 0.0;
  };
  std::vector<Tap> out;
  double sum = 0;
  for (int64_t j = -1; j <= 2; ++j) {
    int64_t idx = i0 + j;
    double w = k(static_cast<double>(j) - t);
    if (o.exclude_outside && (idx < 0 || idx >= in)) continue;
    out.push_back({std::clamp<int64_t>(idx, 0, in - 1), w});
    sum += w;
  }
  if (o.exclude_outside && sum != 0)
    for (auto& tp : out) tp.weight /= sum;
  return out;
}

// The tables of one axis for simd::resize_*, padded to the axis's largest tap count with weight
// 0; false if an output has no taps (tf_crop_and_resize outside the input: extrapolation).
bool axis_table(const std::vector<std::vector<Tap>>& per_out, int64_t in, simd::ResizeAxis& a) {
  a.in = in;
  a.out = static_cast<int64_t>(per_out.size());
  a.taps = 1;
  for (const auto& t : per_out) {
    if (t.empty()) return false;
    a.taps = std::max(a.taps, t.size());
  }
  if (a.taps > 64) return false;
  const size_t out = per_out.size();
  a.index.assign(a.taps * out, 0);
  a.weight.assign(a.taps * out, 0.f);
  for (size_t i = 0; i < out; ++i)
    for (size_t k = 0; k < a.taps; ++k) {
      const bool real = k < per_out[i].size();
      a.index[k * out + i] = static_cast<int32_t>(per_out[i][real ? k : 0].index);
      a.weight[k * out + i] = real ? static_cast<float>(per_out[i][k].weight) : 0.f;
    }
  return true;
}

// Float (and float16, through float) inputs on the table-driven SIMD kernels: the last two axes
// in one pass (simd::resize_2d: NCHW images), any other set of axes one axis at a time. False
// (the caller runs the general loop) for extrapolated outputs and other element types.
// Measured on PaddleOCR's detector head (6 Resizes, 640x640 input, 2 threads): 303 ms/run in the
// general loop (a tap product and a double accumulation per element).
// A channels-last x (logical shape [N, C, H, W], bytes [N, H, W, C]) resized over H and W only
// is written channels-last too (simd::resize_2d_nhwc: the same arithmetic as the NCHW kernel);
// false for anything else, and the caller converts x to NCHW first.
bool resize_fast(OpContext& c, const Tensor& x, const Shape& ys,
                 const std::vector<std::vector<std::vector<Tap>>>& per_dim) {
  if (x.dtype != DType::Float && x.dtype != DType::Float16) return false;
  const size_t r = per_dim.size();
  std::vector<simd::ResizeAxis> axes(r);
  std::vector<size_t> active;
  for (size_t d = 0; d < r; ++d) {
    if (!axis_table(per_dim[d], x.shape[d], axes[d])) return false;
    if (!axes[d].identity()) active.push_back(d);
  }
  if (x.shape.size() > 0 && x.numel() >= (int64_t{1} << 31)) return false;  // int32 tables
  if (x.nhwc && (r != 4 || !axes[0].identity() || !axes[1].identity())) return false;
  Tensor xf;
  const float* px;
  if (x.dtype == DType::Float) {
    px = x.ptr<float>();
  } else {
    xf = Tensor::alloc(DType::Float, x.shape);
    simd::half_to_float(x.ptr<uint16_t>(), xf.ptr<float>(), static_cast<size_t>(x.numel()));
    px = xf.ptr<float>();
  }
  Tensor& y = c.output(0, x.dtype, ys);
  Tensor yf;
  float* py = x.dtype == DType::Float ? y.ptr<float>() : (yf = Tensor::alloc(DType::Float, ys)).ptr<float>();
  const int64_t total = numel(ys);
  if (x.nhwc) {
    simd::resize_2d_nhwc(static_cast<size_t>(x.shape[0]), axes[2], axes[3], static_cast<size_t>(x.shape[1]), px, py);
    y.nhwc = true;
  } else if (active.empty()) {
    if (total) std::memcpy(py, px, static_cast<size_t>(total) * sizeof(float));
  } else if (r >= 2 && active.front() >= r - 2) {
    size_t planes = 1;
    for (size_t d = 0; d + 2 < r; ++d) planes *= static_cast<size_t>(x.shape[d]);
    simd::resize_2d(planes, axes[r - 2], axes[r - 1], px, py);
  } else {
    // One axis at a time, innermost first when it upsamples (its gather then runs on the
    // smaller tensor), last otherwise.
    std::vector<size_t> order(active.begin(), active.end());
    if (order.back() == r - 1 && axes[r - 1].out >= axes[r - 1].in)
      std::rotate(order.begin(), order.end() - 1, order.end());
    Shape cur(x.shape.begin(), x.shape.end());
    Tensor bufs[2];
    const float* src = px;
    for (size_t step = 0; step < order.size(); ++step) {
      const size_t d = order[step];
      size_t outer = 1, inner = 1;
      for (size_t e = 0; e < d; ++e) outer *= static_cast<size_t>(cur[e]);
      for (size_t e = d + 1; e < r; ++e) inner *= static_cast<size_t>(cur[e]);
      cur[d] = ys[d];
      float* dst = step + 1 == order.size() ? py : (bufs[step % 2] = Tensor::alloc(DType::Float, cur)).ptr<float>();
      simd::resize_axis(outer, axes[d], inner, src, dst);
      src = dst;
    }
  }
  if (x.dtype == DType::Float16) simd::float_to_half(py, y.ptr<uint16_t>(), static_cast<size_t>(total));
  return true;
}

void resize_loop(OpContext& c, const Tensor& x, const Shape& ys,
                 const std::vector<std::vector<std::vector<Tap>>>& per_dim, const Options& o);

void run_resize(OpContext& c, const Tensor& x, std::vector<double> scales, std::vector<int64_t> sizes,
                std::vector<double> roi, const Options& o, bool keep_scales = false) {
  const int64_t r = x.rank();
  // One scale or size per axis and two roi values per axis (fuzz_runtime: a shorter sizes input
  // read past its end); sizes must be non-negative and scales positive.
  const auto ur = static_cast<size_t>(r);
  if (!sizes.empty() && sizes.size() != ur)
    c.error("sizes has " + std::to_string(sizes.size()) + " values for rank " + std::to_string(r));
  if (sizes.empty() && scales.size() != ur)
    c.error("scales has " + std::to_string(scales.size()) + " values for rank " + std::to_string(r));
  if (!roi.empty() && roi.size() != 2 * ur)
    c.error("roi has " + std::to_string(roi.size()) + " values for rank " + std::to_string(r));
  for (int64_t v : sizes)
    if (v < 0) c.error("sizes must not be negative");
  if (sizes.empty())
    for (double v : scales)
      if (!(v > 0) || !std::isfinite(v)) c.error("scales must be positive and finite");
  Shape ys(static_cast<size_t>(r));
  for (size_t d = 0; d < static_cast<size_t>(r); ++d) {
    double rs = roi.empty() ? 0 : roi[d], re = roi.empty() ? 1 : roi[d + static_cast<size_t>(r)];
    if (!sizes.empty()) {
      ys[d] = sizes[d];
      if (!keep_scales) {
        scales.resize(static_cast<size_t>(r));
        scales[d] = static_cast<double>(sizes[d]) / static_cast<double>(x.shape[d]);
      }
    } else {
      const double len = std::floor(static_cast<double>(x.shape[d]) * (re - rs) * scales[d]);
      if (!(len >= 0 && len < 0x1p62)) c.error("the output size on axis " + std::to_string(d) + " is out of range");
      ys[d] = static_cast<int64_t>(len);
    }
  }
  // The output and the per-axis tap tables are sized from the data (scales of 1e9, sizes of
  // 2^40): both go through the memory budget before anything is allocated (a table of 2^40
  // entries aborted inside the allocator).
  const uint64_t out_bytes = checked_bytes(x.dtype, ys);
  if (out_bytes == 0) {  // an empty output: no table, however long its other axes
    c.output(0, x.dtype, ys);
    return;
  }
  double table_bytes = 0;
  for (int64_t n : ys) table_bytes += static_cast<double>(n) * (sizeof(std::vector<Tap>) + 4 * sizeof(Tap));
  check_memory(table_bytes > 0x1p63 ? UINT64_MAX : out_bytes + static_cast<uint64_t>(table_bytes),
               "the output " + shape_str(ys) + " and its interpolation tables");
  std::vector<std::vector<std::vector<Tap>>> per_dim(static_cast<size_t>(r));
  for (size_t d = 0; d < static_cast<size_t>(r); ++d) {
    per_dim[d].resize(static_cast<size_t>(ys[d]));
    double rs = roi.empty() ? 0 : roi[d], re = roi.empty() ? 1 : roi[d + static_cast<size_t>(r)];
    for (int64_t i = 0; i < ys[d]; ++i) {
      if (ys[d] == x.shape[d] && scales[d] == 1.0 && o.ctm != "tf_crop_and_resize") {
        per_dim[d][static_cast<size_t>(i)] = {{i, 1.0}};
        continue;
      }
      bool outside;
      const double out_len = sizes.empty() ? static_cast<double>(x.shape[d]) * scales[d] : static_cast<double>(ys[d]);
      double src = source_coord(o, static_cast<double>(i), scales[d], x.shape[d], ys[d], out_len, rs, re, &outside);
      per_dim[d][static_cast<size_t>(i)] = taps(o, src, x.shape[d], outside, scales[d]);
    }
  }
  if (x.nhwc && c.prefer_nhwc && resize_fast(c, x, ys, per_dim)) return;
  const Tensor plain = to_nchw(x);
  if (resize_fast(c, plain, ys, per_dim)) return;
  resize_loop(c, plain, ys, per_dim, o);
}

// The general loop: a tap product and a double accumulation per element (extrapolated
// tf_crop_and_resize outputs, integer element types).
void resize_loop(OpContext& c, const Tensor& x, const Shape& ys,
                 const std::vector<std::vector<std::vector<Tap>>>& per_dim, const Options& o) {
  const int64_t r = x.rank();
  Tensor& y = c.output(0, x.dtype, ys);
  auto xs = contiguous_strides(x.shape);
  std::vector<int64_t> idx(static_cast<size_t>(r), 0);
  Tensor xd = x.dtype == DType::Float ? x : cast(x, DType::Float);
  std::vector<float> outv(static_cast<size_t>(y.numel()));
  std::vector<size_t> tap(static_cast<size_t>(r));
  for (int64_t i = 0, n = y.numel(); i < n; ++i) {
    bool empty = false;
    for (size_t d = 0; d < static_cast<size_t>(r); ++d) empty |= per_dim[d][static_cast<size_t>(idx[d])].empty();
    double acc = 0;
    if (empty)
      acc = o.extrapolation;
    else {
      std::fill(tap.begin(), tap.end(), 0);
      while (true) {
        double w = 1;
        int64_t off = 0;
        for (size_t d = 0; d < static_cast<size_t>(r); ++d) {
          const Tap& t = per_dim[d][static_cast<size_t>(idx[d])][tap[d]];
          w *= t.weight;
          off += t.index * xs[d];
        }
        acc += w * xd.ptr<float>()[off];
        size_t d = static_cast<size_t>(r);
        while (d-- > 0) {
          if (++tap[d] < per_dim[d][static_cast<size_t>(idx[d])].size()) break;
          tap[d] = 0;
        }
        if (d == static_cast<size_t>(-1)) break;
      }
    }
    outv[static_cast<size_t>(i)] = static_cast<float>(acc);
    next_index(idx, ys);
  }
  Tensor tmp = Tensor::view(DType::Float, ys, outv.data());
  if (x.dtype != DType::Float && x.dtype != DType::Double) {
    // Integer outputs round to nearest.
    for (auto& v : outv) v = std::nearbyint(v);
  }
  cast_into(tmp, y);
}

void resize(OpContext& c) {
  const Tensor& x = c.input(0);
  Options o;
  o.mode = c.attr_s("mode", "nearest");
  o.ctm = c.attr_s("coordinate_transformation_mode", c.opset < 11 ? "asymmetric" : "half_pixel");
  o.nearest = c.attr_s("nearest_mode", "round_prefer_floor");
  o.cubic_a = c.attr_f("cubic_coeff_a", -0.75f);
  o.exclude_outside = c.attr_i("exclude_outside", 0);
  o.extrapolation = c.attr_f("extrapolation_value", 0.f);
  o.antialias = c.attr_i("antialias", 0) != 0;
  if (c.opset < 11) o.nearest = "floor";  // Resize-10 used floor like Upsample
  std::vector<double> scales, roi;
  std::vector<int64_t> sizes;
  const size_t scale_in = c.opset < 11 ? 1 : 2;
  if (c.opset >= 11 && c.in(1) && c.in(1)->numel()) {
    auto f = floats_of(*c.in(1));
    roi.assign(f.begin(), f.end());
  }
  if (c.in(scale_in) && c.in(scale_in)->numel()) {
    auto f = floats_of(*c.in(scale_in));
    scales.assign(f.begin(), f.end());
  }
  if (c.opset >= 11 && c.in(3) && c.in(3)->numel()) sizes = ints_of(*c.in(3));
  auto axes = c.attr_ints("axes");
  if (!axes.empty()) {  // opset 18: scales/sizes/roi for a subset of axes
    const int64_t r = x.rank();
    std::vector<double> fs(static_cast<size_t>(r), 1.0), froi;
    std::vector<int64_t> fz(x.shape.begin(), x.shape.end());
    if (!roi.empty()) {
      froi.assign(static_cast<size_t>(2 * r), 0);
      for (size_t i = static_cast<size_t>(r); i < froi.size(); ++i) froi[i] = 1;
    }
    if ((!scales.empty() && scales.size() != axes.size()) || (!sizes.empty() && sizes.size() != axes.size()) ||
        (!roi.empty() && roi.size() != 2 * axes.size()))
      c.error("scales, sizes and roi need one value (roi: two) per entry of axes");
    for (size_t i = 0; i < axes.size(); ++i) {
      size_t a = static_cast<size_t>(norm_axis(c, axes[i], r));
      if (!scales.empty()) fs[a] = scales[i];
      if (!sizes.empty()) fz[a] = sizes[i];
      if (!roi.empty()) {
        froi[a] = roi[i];
        froi[a + static_cast<size_t>(r)] = roi[i + axes.size()];
      }
    }
    if (!scales.empty()) scales = fs;
    if (!sizes.empty()) sizes = fz;
    roi = froi;
  }
  if (o.ctm != "tf_crop_and_resize") roi.clear();
  std::string_view policy = c.attr_s("keep_aspect_ratio_policy", "stretch");
  if (!sizes.empty() && policy != "stretch") {
    double s = policy == "not_larger" ? INFINITY : 0;
    for (size_t d = 0; d < sizes.size(); ++d) {
      if (sizes[d] == x.shape[d] && axes.size() && std::find(axes.begin(), axes.end(), int64_t(d)) == axes.end())
        continue;
      double q = static_cast<double>(sizes[d]) / static_cast<double>(x.shape[d]);
      s = policy == "not_larger" ? std::min(s, q) : std::max(s, q);
    }
    scales.assign(sizes.size(), 1.0);
    for (size_t d = 0; d < sizes.size(); ++d) {
      bool in_axes = axes.empty() || std::find(axes.begin(), axes.end(), int64_t(d)) != axes.end();
      if (!in_axes) continue;
      scales[d] = s;
      sizes[d] = static_cast<int64_t>(std::nearbyint(s * static_cast<double>(x.shape[d])));
    }
    // sizes decide the output, scales the coordinate mapping
    run_resize(c, x, scales, sizes, roi, o, true);
    return;
  }
  if (scales.empty() && sizes.empty()) c.error("either scales or sizes is required");
  run_resize(c, x, scales, sizes, roi, o);
}

void upsample(OpContext& c) {
  const Tensor& x = c.input(0);
  Options o;
  o.mode = c.attr_s("mode", "nearest");
  o.ctm = "asymmetric";
  o.nearest = "floor";
  std::vector<double> scales;
  if (c.in(1)) {
    auto f = floats_of(*c.in(1));
    scales.assign(f.begin(), f.end());
  } else {
    auto f = c.attr_floats("scales");
    scales.assign(f.begin(), f.end());
  }
  run_resize(c, x, scales, {}, {}, o);
}

// Plan time: whether the node resizes a channels-last input in its layout (run_resize: over H
// and W only, on the table kernels, not tf_crop_and_resize). Constant scales or sizes that
// change N or C say no here; others are only known at run time, where such a resize converts
// its input to NCHW instead (a transpose, never a wrong result).
bool resize_takes_nhwc(const Graph& g, NodeId n) {
  if (g.attr_string(n, "coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize") return false;
  const ValueId x = g.input(n, 0);
  if (g.rank(x) >= 0 && g.rank(x) != 4) return false;
  for (int64_t a : g.attr_ints(n, "axes"))
    if (a == 0 || a == 1 || a == -4 || a == -3) return false;
  const bool partial = !g.attr_ints(n, "axes").empty();
  const size_t count = g.inputs(n).size();
  // Upsample and Resize-10: (X, scales); Resize-11+: (X, roi, scales, sizes).
  const ValueId scales = count == 2 ? g.input(n, 1) : count > 2 ? g.input(n, 2) : ValueId{};
  const ValueId sizes = count > 3 ? g.input(n, 3) : ValueId{};
  std::vector<double> sc;
  for (float f : g.attr_floats(n, "scales")) sc.push_back(f);  // Upsample-7
  if (auto v = constant_values(g, scales)) sc = *v;
  if (!partial && sc.size() >= 2 && (sc[0] != 1 || sc[1] != 1)) return false;
  if (auto v = constant_ints(g, sizes); v && !partial && v->size() == 4 && g.has_shape(x)) {
    auto xs = g.shape(x);
    for (size_t d = 0; d < 2; ++d)
      if (xs[d].known() && xs[d].value != (*v)[d]) return false;
  }
  return true;
}

}  // namespace

void register_resize(Registry& r) {
  r.add("", "Resize", {.run = resize, .layout = LayoutUse::Aware, .takes_nhwc = resize_takes_nhwc});
  r.add("", "Upsample", {.run = upsample, .layout = LayoutUse::Aware, .takes_nhwc = resize_takes_nhwc});
}

}  // namespace onnxforge::rt
