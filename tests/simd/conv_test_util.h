#pragma once
// Shared helpers of the 2-D conv kernel tests: shapes, random data and the expected output
// (the double reference, NCHW) with a tolerance scaling with sum |x * w|.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "simd/conv.h"
#include "simd/reference.h"
#include "tests/simd/simd_test_util.h"

namespace onnxforge::simd::test {

struct Shape {
  std::int64_t n, c, m, h, w, kh, kw, sh, sw;
  std::int64_t pt, pl, pb, pr;  // pads: top, left, bottom, right
  std::int64_t dh = 1, dw = 1;  // dilations
};

inline ConvParams params(const Shape& s) {
  ConvParams p;
  p.rank = 2, p.batch = s.n, p.in_channels = s.c, p.out_channels = s.m;
  p.in = {s.h, s.w, 1}, p.kernel = {s.kh, s.kw, 1}, p.stride = {s.sh, s.sw, 1};
  p.dilation = {s.dh, s.dw, 1};
  p.pad_begin = {s.pt, s.pl, 0}, p.pad_end = {s.pb, s.pr, 0};
  return p;
}

inline std::string describe(const ConvParams& p) {
  auto pair = [](const std::array<std::int64_t, 3>& a) { return std::to_string(a[0]) + "," + std::to_string(a[1]); };
  return "N" + std::to_string(p.batch) + " C" + std::to_string(p.in_channels) + " M" + std::to_string(p.out_channels) +
         " in " + pair(p.in) + " k " + pair(p.kernel) + " s " + pair(p.stride) + " d " + pair(p.dilation) + " pads " +
         pair(p.pad_begin) + "/" + pair(p.pad_end);
}

struct Data {
  std::vector<float> x, w, b, res;
};

inline Data make_data(const ConvParams& p, unsigned seed) {
  const auto n_out = static_cast<std::size_t>(std::max<std::int64_t>(0, p.batch * p.out_channels * p.out_spatial()));
  return {random_floats(static_cast<std::size_t>(p.batch * p.in_channels * p.in[0] * p.in[1]), seed),
          random_floats(static_cast<std::size_t>(p.out_channels * p.in_channels * p.kernel[0] * p.kernel[1]), seed + 1),
          random_floats(static_cast<std::size_t>(p.out_channels), seed + 2), random_floats(n_out, seed + 3)};
}

// act(conv + bias (+ residual)) in double, and a tolerance scaling with sum |x * w|.
inline void expected(const ConvParams& p, const Data& d, const Unary& act, bool with_bias, bool accumulate,
                     std::vector<float>& want, std::vector<float>& tol) {
  const auto n_out = d.res.size();
  std::vector<float> plain(n_out), ax(d.x.size()), aw(d.w.size()), ab(d.b.size());
  want.resize(n_out), tol.resize(n_out);
  ref::conv(p, d.x.data(), d.w.data(), with_bias ? d.b.data() : nullptr, plain.data());
  for (std::size_t i = 0; i < ax.size(); ++i) ax[i] = std::fabs(d.x[i]);
  for (std::size_t i = 0; i < aw.size(); ++i) aw[i] = std::fabs(d.w[i]);
  for (std::size_t i = 0; i < ab.size(); ++i) ab[i] = std::fabs(d.b[i]);
  ref::conv(p, ax.data(), aw.data(), with_bias ? ab.data() : nullptr, tol.data());
  for (std::size_t i = 0; i < n_out; ++i) {
    const double pre = static_cast<double>(plain[i]) + (accumulate ? d.res[i] : 0.f);
    want[i] = static_cast<float>(ref::unary(act, pre));
    tol[i] = 4e-6f * (tol[i] + 1.f + (accumulate ? std::fabs(d.res[i]) : 0.f));
  }
}

}  // namespace onnxforge::simd::test
