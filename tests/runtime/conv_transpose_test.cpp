// ConvTranspose (GEMM + row-clipped col2im, runtime/ops/conv.cpp) against the definition written
// out as a scatter in double: every input pixel times every kernel tap lands at
// i * stride + k * dilation - pad_begin. Groups, strides, dilations, asymmetric pads,
// output_padding, output_shape and auto_pad, 1-D to 3-D.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "runtime/runtime.h"
#include "tests/runtime/tensors.h"

using namespace onnxforge;
using namespace onnxforge::test;

namespace {

struct CtCase {
  std::vector<int64_t> x;  // [N, C, spatial...]
  int64_t m_per_group, group;
  std::vector<int64_t> kernel, stride, dilation, pads, out_pad;
  std::vector<int64_t> output_shape = {};
  std::string auto_pad = "NOTSET";
};

void check(const CtCase& t) {
  const size_t r = t.kernel.size();
  const int64_t N = t.x[0], C = t.x[1], G = t.group, Cg = C / G, M = t.m_per_group * G;
  std::vector<int64_t> ws{C, t.m_per_group};
  for (int64_t k : t.kernel) ws.push_back(k);
  int64_t wn = 1, xn = 1, kp = 1;
  for (int64_t v : ws) wn *= v;
  for (int64_t v : t.x) xn *= v;
  for (int64_t k : t.kernel) kp *= k;
  const auto xv = randn(static_cast<size_t>(xn), 1), wv = randn(static_cast<size_t>(wn), 2),
             bv = randn(static_cast<size_t>(M), 3);
  GraphBuilder m(17);
  ValueId x = m.input("x", t.x);
  std::vector<NewAttr> attrs = {NewAttr::Int("group", G), NewAttr::Ints("kernel_shape", t.kernel),
                                NewAttr::Ints("strides", t.stride), NewAttr::Ints("dilations", t.dilation)};
  if (!t.pads.empty()) attrs.push_back(NewAttr::Ints("pads", t.pads));
  if (!t.out_pad.empty()) attrs.push_back(NewAttr::Ints("output_padding", t.out_pad));
  if (!t.output_shape.empty()) attrs.push_back(NewAttr::Ints("output_shape", t.output_shape));
  if (t.auto_pad != "NOTSET") attrs.push_back(NewAttr::String("auto_pad", t.auto_pad));
  m.outputs({m.node("ConvTranspose", {x, m.f32("w", ws, wv), m.f32("b", {M}, bv)}, attrs)});
  // Output size and pads as the spec defines them.
  std::vector<int64_t> out(r), pb(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t op = t.out_pad.empty() ? 0 : t.out_pad[i];
    const int64_t full = t.stride[i] * (t.x[i + 2] - 1) + op + (t.kernel[i] - 1) * t.dilation[i] + 1;
    if (!t.output_shape.empty() || t.auto_pad != "NOTSET") {
      const int64_t target = t.output_shape.empty() ? t.x[i + 2] * t.stride[i] : t.output_shape[i];
      const int64_t total = full - target;
      pb[i] = t.auto_pad == "SAME_LOWER" ? total - total / 2 : total / 2;
      out[i] = target;
    } else {
      pb[i] = t.pads[i];
      out[i] = full - t.pads[i] - t.pads[i + r];
    }
  }
  int64_t osp = 1, isp = 1;
  for (size_t i = 0; i < r; ++i) osp *= out[i], isp *= t.x[i + 2];
  std::vector<double> want(static_cast<size_t>(N * M * osp));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t mo = 0; mo < M; ++mo)
      for (int64_t o = 0; o < osp; ++o) want[static_cast<size_t>((n * M + mo) * osp + o)] = bv[static_cast<size_t>(mo)];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t s = 0; s < isp; ++s)
        for (int64_t mg = 0; mg < t.m_per_group; ++mg)
          for (int64_t k = 0; k < kp; ++k) {
            int64_t rs = s, rk = k, off = 0;
            std::vector<int64_t> ii(r), kk(r);
            for (size_t i = r; i-- > 0;) {
              ii[i] = rs % t.x[i + 2], rs /= t.x[i + 2];
              kk[i] = rk % t.kernel[i], rk /= t.kernel[i];
            }
            bool ok = true;
            for (size_t i = 0; i < r; ++i) {
              const int64_t o = ii[i] * t.stride[i] + kk[i] * t.dilation[i] - pb[i];
              ok = ok && o >= 0 && o < out[i];
              off = off * out[i] + o;
            }
            if (!ok) continue;
            const int64_t mo = (c / Cg) * t.m_per_group + mg;
            want[static_cast<size_t>((n * M + mo) * osp + off)] +=
                static_cast<double>(xv[static_cast<size_t>((n * C + c) * isp + s)]) *
                wv[static_cast<size_t>((c * t.m_per_group + mg) * kp + k)];
          }
  rt::Session sess(m.model());
  auto y = sess.run({make<float>(DType::Float, t.x, xv)});
  rt::Shape ys{N, M};
  for (int64_t o : out) ys.push_back(o);
  ASSERT_EQ(y[0].shape, ys);
  const auto got = values<float>(y[0]);
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-4 * std::max(1.0, std::fabs(want[i]))) && bad++ < 5)
      ADD_FAILURE() << "element " << i << ": got " << got[i] << " want " << want[i];
}

}  // namespace

TEST(ConvTranspose, MatchesScatterDefinition) {
  const CtCase cases[] = {
      {{1, 8, 10, 10}, 4, 1, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, {}},                  // OCR head: 2x2 stride 2
      {{2, 6, 7, 9}, 5, 1, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, {1, 1}},                // output_padding
      {{1, 4, 6, 5}, 3, 2, {3, 2}, {1, 3}, {2, 1}, {0, 2, 1, 0}, {}},                    // groups, dilations, asym pads
      {{1, 6, 5, 5}, 1, 6, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, {}},                    // depthwise
      {{1, 3, 4, 6}, 2, 1, {4, 4}, {3, 2}, {2, 3}, {3, 2, 1, 4}, {2, 0}},                // stride 3, big pads
      {{1, 3, 5}, 4, 1, {3}, {2}, {2}, {1, 0}, {}},                                      // 1-D
      {{1, 2, 3, 4, 3}, 2, 1, {2, 3, 2}, {2, 1, 2}, {1, 2, 1}, {0, 1, 0, 1, 0, 1}, {}},  // 3-D
  };
  for (const CtCase& c : cases) check(c);
  CtCase shape{{1, 4, 5, 6}, 3, 1, {3, 3}, {2, 2}, {1, 1}, {}, {}, {10, 13}};
  check(shape);
  CtCase same{{1, 4, 5, 6}, 3, 1, {3, 3}, {2, 2}, {1, 1}, {}, {}, {}, "SAME_UPPER"};
  check(same);
  same.auto_pad = "SAME_LOWER";
  check(same);
}
