// Resize on the table-driven SIMD kernels (runtime/ops/resize.cpp, simd/resample) against a
// scalar reference written here from the ONNX reference implementation (onnx/reference/ops/
// op_resize.py): per axis, the coordinate transform, then the n source points nearest to it
// (ties to the left) read from the edge-padded input, weighted by the mode's coefficients; the
// N-D output is the tensor product. Independent of the op's own tap tables.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "ir/float16.h"
#include "runtime/runtime.h"
#include "simd/isa.h"
#include "tests/runtime/tensors.h"

using namespace onnxforge;
using namespace onnxforge::test;

namespace {

struct Cfg {
  std::string mode = "nearest", ctm = "half_pixel", nearest = "round_prefer_floor";
  double a = -0.75;
  bool exclude_outside = false, antialias = false;
  double extrapolation = 0;
};

struct Taps1 {
  std::vector<int64_t> idx;  // unclamped; the input is edge-padded
  std::vector<double> w;
  bool outside = false;
};

double cubic_k(double x, double A) {
  x = std::fabs(x);
  if (x <= 1) return (A + 2) * x * x * x - (A + 3) * x * x + 1;
  if (x < 2) return A * x * x * x - 5 * A * x * x + 8 * A * x - 4 * A;
  return 0;
}

// Output index i of an axis of length `in` resized by `scale` to `out` elements.
Taps1 ref_axis(const Cfg& c, int64_t i, int64_t in, int64_t out, double scale, double rs, double re) {
  Taps1 t;
  // An axis left at its length with scale 1 is copied, whatever the transform (the runtime's
  // choice, as ONNX Runtime's: tf_half_pixel_for_nn would otherwise shift it by half a pixel).
  if (out == in && scale == 1 && c.ctm != "tf_crop_and_resize") {
    t.idx = {i};
    t.w = {1};
    return t;
  }
  const double xi = static_cast<double>(i), len = scale * static_cast<double>(in);
  double x;
  if (c.ctm == "half_pixel")
    x = (xi + 0.5) / scale - 0.5;
  else if (c.ctm == "asymmetric")
    x = xi / scale;
  else if (c.ctm == "pytorch_half_pixel")
    x = out > 1 ? (xi + 0.5) / scale - 0.5 : 0;
  else if (c.ctm == "tf_half_pixel_for_nn")
    x = (xi + 0.5) / scale;
  else if (c.ctm == "align_corners")
    x = len == 1 ? 0 : xi * static_cast<double>(in - 1) / (len - 1);
  else if (c.ctm == "half_pixel_symmetric") {
    const double adj = static_cast<double>(out) / len, center = static_cast<double>(in) / 2;
    x = center * (1 - adj) + (xi + 0.5) / scale - 0.5;
  } else {  // tf_crop_and_resize
    x = out > 1 ? rs * static_cast<double>(in - 1) +
                      xi * (re - rs) * static_cast<double>(in - 1) / static_cast<double>(out - 1)
                : 0.5 * (rs + re) * static_cast<double>(in - 1);
    if (x < 0 || x > static_cast<double>(in - 1)) {
      t.outside = true;
      return t;
    }
  }
  if (c.mode == "nearest") {
    double r;
    const double f = std::floor(x);
    if (c.nearest == "floor")
      r = f;
    else if (c.nearest == "ceil")
      r = std::ceil(x);
    else if (x - f == 0.5)
      r = c.nearest == "round_prefer_ceil" ? f + 1 : f;
    else
      r = std::round(x);
    t.idx = {static_cast<int64_t>(r)};
    t.w = {1};
    return t;
  }
  const double xf = std::floor(x);
  const double ratio = x == xf ? 1 : x - xf;
  std::vector<double> coeffs;
  const double s = std::min(scale, 1.0);
  if (c.mode == "linear") {
    if (c.antialias) {
      const int64_t start = static_cast<int64_t>(std::floor(-1 / s)) + 1, n = 2 - 2 * start;
      for (int64_t j = 0; j < n; ++j)
        coeffs.push_back(std::clamp(1 - std::fabs((static_cast<double>(start + j) - ratio) * s), 0.0, 1.0));
    } else {
      coeffs = {1 - ratio, ratio};
    }
  } else {
    if (c.antialias) {
      const int64_t start = static_cast<int64_t>(std::floor(-2 / s)) + 1, end = 2 - start;
      for (int64_t j = start; j < end; ++j) coeffs.push_back(cubic_k(s * (static_cast<double>(j) - ratio), c.a));
    } else {
      coeffs = {cubic_k(ratio + 1, c.a), cubic_k(ratio, c.a), cubic_k(1 - ratio, c.a), cubic_k(2 - ratio, c.a)};
    }
  }
  if (c.antialias) {
    double sum = 0;
    for (double v : coeffs) sum += v;
    for (double& v : coeffs) v /= sum;
  }
  // The n integer positions nearest to x, ties to the smaller one, in increasing order.
  const auto n = static_cast<int64_t>(coeffs.size());
  std::vector<int64_t> cand;
  for (int64_t k = static_cast<int64_t>(xf) - n - 1; k <= static_cast<int64_t>(xf) + n + 1; ++k) cand.push_back(k);
  std::sort(cand.begin(), cand.end(), [&](int64_t p, int64_t q) {
    const double dp = std::fabs(x - static_cast<double>(p)), dq = std::fabs(x - static_cast<double>(q));
    return dp != dq ? dp < dq : p < q;
  });
  cand.resize(static_cast<size_t>(n));
  std::sort(cand.begin(), cand.end());
  if (c.exclude_outside) {
    double sum = 0;
    for (size_t k = 0; k < cand.size(); ++k) {
      if (cand[k] < 0 || cand[k] >= in) coeffs[k] = 0;
      sum += coeffs[k];
    }
    for (double& v : coeffs) v /= sum;
  }
  t.idx = cand;
  t.w = coeffs;
  return t;
}

std::vector<double> ref_resize(const Cfg& c, const std::vector<int64_t>& xs, const std::vector<float>& x,
                               const std::vector<int64_t>& ys, const std::vector<double>& scales,
                               const std::vector<double>& roi) {
  const size_t r = xs.size();
  std::vector<std::vector<Taps1>> axes(r);
  for (size_t d = 0; d < r; ++d)
    for (int64_t i = 0; i < ys[d]; ++i)
      axes[d].push_back(
          ref_axis(c, i, xs[d], ys[d], scales[d], roi.empty() ? 0 : roi[d], roi.empty() ? 1 : roi[d + r]));
  int64_t total = 1;
  for (int64_t v : ys) total *= v;
  std::vector<double> y(static_cast<size_t>(total));
  std::vector<int64_t> o(r, 0);
  for (int64_t e = 0; e < total; ++e) {
    bool outside = false;
    for (size_t d = 0; d < r; ++d) outside |= axes[d][static_cast<size_t>(o[d])].outside;
    double acc = 0;
    if (outside) {
      acc = c.extrapolation;
    } else {
      std::vector<size_t> k(r, 0);
      while (true) {
        double w = 1;
        int64_t off = 0;
        for (size_t d = 0; d < r; ++d) {
          const Taps1& t = axes[d][static_cast<size_t>(o[d])];
          w *= t.w[k[d]];
          off = off * xs[d] + std::clamp<int64_t>(t.idx[k[d]], 0, xs[d] - 1);
        }
        acc += w * x[static_cast<size_t>(off)];
        size_t d = r;
        while (d-- > 0) {
          if (++k[d] < axes[d][static_cast<size_t>(o[d])].idx.size()) break;
          k[d] = 0;
        }
        if (d == static_cast<size_t>(-1)) break;
      }
    }
    y[static_cast<size_t>(e)] = acc;
    for (size_t d = r; d-- > 0;) {
      if (++o[d] < ys[d]) break;
      o[d] = 0;
    }
  }
  return y;
}

// Runs Resize (opset 19) on x [xs] with `scales` (sizes empty) or `sizes`; checks shape and
// values against ref_resize. Returns the number of elements compared.
void check_resize(const Cfg& c, std::vector<int64_t> xs, std::vector<float> scales, std::vector<int64_t> sizes,
                  std::vector<float> roi = {}, DType dt = DType::Float) {
  GraphBuilder m(19);
  ValueId x = m.input("x", xs, dt);
  std::vector<NewAttr> attrs = {NewAttr::String("mode", c.mode),
                                NewAttr::String("coordinate_transformation_mode", c.ctm),
                                NewAttr::String("nearest_mode", c.nearest),
                                NewAttr::Float("cubic_coeff_a", static_cast<float>(c.a)),
                                NewAttr::Int("exclude_outside", c.exclude_outside),
                                NewAttr::Int("antialias", c.antialias),
                                NewAttr::Float("extrapolation_value", static_cast<float>(c.extrapolation))};
  ValueId vroi = m.f32("roi", {static_cast<int64_t>(roi.size())}, roi);
  ValueId vsc = m.f32("sc", {static_cast<int64_t>(scales.size())}, scales);
  std::vector<ValueId> ins{x, vroi, vsc};
  if (!sizes.empty()) ins.push_back(m.i64("sz", sizes));
  m.outputs({m.node("Resize", ins, attrs)});
  const size_t r = xs.size();
  int64_t n = 1;
  for (int64_t v : xs) n *= v;
  std::vector<float> xv = noise(static_cast<size_t>(n), 7, -2.f, 2.f);
  rt::Tensor xt;
  if (dt == DType::Float16) {
    std::vector<uint16_t> h(xv.size());
    for (size_t i = 0; i < h.size(); ++i) {
      h[i] = float_to_half(xv[i]);
      xv[i] = half_to_float(h[i]);
    }
    xt = make<uint16_t>(dt, xs, h);
  } else {
    xt = make<float>(dt, xs, xv);
  }
  std::vector<int64_t> ys(r);
  std::vector<double> sd(r);
  for (size_t d = 0; d < r; ++d) {
    const double rs = roi.empty() ? 0 : roi[d], re = roi.empty() ? 1 : roi[d + r];
    if (!sizes.empty()) {
      ys[d] = sizes[d];
      sd[d] = static_cast<double>(sizes[d]) / static_cast<double>(xs[d]);
    } else {
      sd[d] = scales[d];
      ys[d] = static_cast<int64_t>(std::floor(static_cast<double>(xs[d]) * (re - rs) * scales[d]));
    }
  }
  std::vector<double> rd(roi.begin(), roi.end());
  const auto want = ref_resize(c, xs, xv, ys, sd, c.ctm == "tf_crop_and_resize" ? rd : std::vector<double>{});
  rt::Session s(m.model());
  auto out = s.run({xt});
  ASSERT_EQ(out[0].shape, rt::Shape(ys.begin(), ys.end()));
  std::vector<float> got;
  if (dt == DType::Float16) {
    for (uint16_t h : values<uint16_t>(out[0])) got.push_back(half_to_float(h));
  } else {
    got = values<float>(out[0]);
  }
  ASSERT_EQ(got.size(), want.size());
  const double tol = dt == DType::Float16 ? 2e-3 : 2e-6;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= tol * std::max(1.0, std::fabs(want[i]))) && bad++ < 5)
      ADD_FAILURE() << c.mode << " " << c.ctm << " " << c.nearest << (c.antialias ? " antialias" : "") << " at " << i
                    << ": got " << got[i] << " want " << want[i];
}

const char* kCtms[] = {"half_pixel",           "asymmetric",    "pytorch_half_pixel",
                       "tf_half_pixel_for_nn", "align_corners", "half_pixel_symmetric"};

}  // namespace

TEST(Resize, NearestEveryModeAndTransform) {
  for (const char* nm : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"})
    for (const char* ctm : kCtms) {
      Cfg c;
      c.nearest = nm;
      c.ctm = ctm;
      check_resize(c, {2, 3, 7, 9}, {1, 1, 2.f, 3.f}, {});     // integer upsampling
      check_resize(c, {1, 2, 9, 13}, {1, 1, 0.6f, 1.7f}, {});  // down and up, fractional
      check_resize(c, {1, 2, 8, 10}, {}, {1, 2, 13, 4});       // sizes
    }
}

TEST(Resize, LinearAndCubicEveryTransform) {
  for (const char* mode : {"linear", "cubic"})
    for (const char* ctm : kCtms)
      for (bool excl : {false, true}) {
        Cfg c;
        c.mode = mode;
        c.ctm = ctm;
        c.exclude_outside = excl;
        c.a = excl ? -0.5 : -0.75;
        check_resize(c, {1, 3, 8, 8}, {1, 1, 2.f, 2.f}, {});
        check_resize(c, {2, 2, 11, 7}, {1, 1, 0.5f, 1.5f}, {});
        check_resize(c, {1, 1, 5, 40}, {}, {1, 1, 17, 33});
        check_resize(c, {1, 1, 1, 6}, {}, {1, 1, 3, 1});  // length-1 axes both ways
      }
}

TEST(Resize, Antialias) {
  for (const char* mode : {"linear", "cubic"})
    for (const char* ctm : {"half_pixel", "align_corners", "asymmetric"}) {
      Cfg c;
      c.mode = mode;
      c.ctm = ctm;
      c.antialias = true;
      check_resize(c, {1, 2, 16, 20}, {1, 1, 0.5f, 0.3f}, {});
      check_resize(c, {1, 1, 9, 9}, {}, {1, 1, 4, 13});  // down one axis, up (plain) the other
      c.exclude_outside = true;
      check_resize(c, {1, 1, 12, 12}, {1, 1, 0.25f, 0.6f}, {});
    }
}

TEST(Resize, OtherAxesAndRanks) {
  Cfg lin;
  lin.mode = "linear";
  check_resize(lin, {1, 2, 4, 5, 6}, {1, 1, 2.f, 0.8f, 1.5f}, {});  // trilinear: axes 2, 3, 4
  check_resize(lin, {3, 4, 5}, {1, 2.f, 1}, {});                    // a middle axis only
  check_resize(lin, {2, 6, 5}, {0.5f, 1, 3.f}, {});                 // an outer axis and the innermost
  check_resize(lin, {37}, {2.5f}, {});                              // rank 1
  Cfg cub;
  cub.mode = "cubic";
  check_resize(cub, {4, 9, 3, 2}, {1.5f, 0.7f, 1, 1}, {});  // leading axes, rows copied whole
  Cfg nn;
  check_resize(nn, {2, 3, 4, 4}, {1, 2.f, 2.f, 2.f}, {});  // channels too
}

TEST(Resize, CropAndResizeExtrapolates) {
  for (const char* mode : {"nearest", "linear", "cubic"}) {
    Cfg c;
    c.mode = mode;
    c.ctm = "tf_crop_and_resize";
    c.extrapolation = 10;
    check_resize(c, {1, 1, 6, 7}, {}, {1, 1, 5, 9}, {0, 0, 0.4f, -0.2f, 1, 1, 1.3f, 0.9f});  // partly outside
    check_resize(c, {1, 1, 6, 7}, {}, {1, 1, 4, 4}, {0, 0, 0.1f, 0.2f, 1, 1, 0.8f, 0.7f});   // inside
  }
}

TEST(Resize, Float16) {
  Cfg c;
  c.mode = "linear";
  check_resize(c, {1, 4, 9, 10}, {1, 1, 2.f, 2.f}, {}, {}, DType::Float16);
  Cfg n;
  check_resize(n, {1, 4, 9, 10}, {1, 1, 2.f, 2.f}, {}, {}, DType::Float16);
}

TEST(Resize, LargeRowsAcrossThreads) {
  // Rows longer than a vector and enough of them to split across threads.
  Cfg c;
  c.mode = "linear";
  check_resize(c, {1, 8, 64, 70}, {1, 1, 2.f, 2.f}, {});
  Cfg n;
  check_resize(n, {1, 8, 64, 70}, {1, 1, 2.f, 2.f}, {});
  Cfg cub;
  cub.mode = "cubic";
  check_resize(cub, {1, 8, 64, 70}, {1, 1, 0.5f, 0.5f}, {});
}

TEST(Resize, EveryIsaLevel) {
  // The kernels exist per ISA level (simd/kernels/resample.inl): gathers on AVX2/AVX-512, scalar
  // tails, the SSE build.
  const simd::Isa was = simd::active_isa_level();
  for (simd::Isa isa : simd::available_isas()) {
    ASSERT_TRUE(simd::set_isa(isa));
    for (const char* mode : {"nearest", "linear", "cubic"}) {
      Cfg c;
      c.mode = mode;
      check_resize(c, {1, 3, 13, 37}, {1, 1, 2.f, 1.75f}, {});
      check_resize(c, {1, 3, 13, 37}, {1, 1, 0.5f, 0.4f}, {});
      check_resize(c, {2, 5, 3}, {1, 2.5f, 1}, {});
    }
    Cfg h;
    h.mode = "linear";
    check_resize(h, {1, 2, 9, 21}, {1, 1, 2.f, 2.f}, {}, {}, DType::Float16);
  }
  simd::set_isa(was);
}
