// Convs with few output channels (simd::conv_few_outputs: weighted sums of input rows) against
// simd::ref::conv: pads (wider than the kernel reach too), dilations, vertical strides, batches,
// 1-4 outputs, a fused Relu, rows narrower than a vector.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "runtime/runtime.h"
#include "simd/reference.h"
#include "simd/resample.h"
#include "tests/runtime/tensors.h"

using namespace onnxforge;
using namespace onnxforge::test;

namespace {

struct Case {
  int64_t n, c, h, w, m, kh, kw, sh, dh, dw, pt, pl, pb, pr;
  bool relu;
};

}  // namespace

TEST(ConvFewOutputs, MatchesReference) {
  const Case cases[] = {
      {1, 64, 40, 45, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},  // ISNet side output
      {2, 16, 17, 33, 2, 3, 3, 1, 2, 2, 2, 2, 2, 2, true},   // dilated, batch 2, Relu
      {1, 8, 20, 21, 3, 5, 3, 2, 1, 3, 2, 0, 1, 4, false},   // vertical stride, asymmetric pads
      {1, 80, 9, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},     // rows narrower than a vector
      {1, 32, 12, 12, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, false},  // pointwise
      {1, 4, 8, 8, 1, 3, 7, 1, 1, 1, 0, 5, 0, 5, false},     // pads beyond the kernel reach
  };
  for (const Case& t : cases) {
    simd::ConvParams p;
    p.rank = 2;
    p.batch = t.n, p.in_channels = t.c, p.out_channels = t.m;
    p.in = {t.h, t.w, 1}, p.kernel = {t.kh, t.kw, 1}, p.stride = {t.sh, 1, 1}, p.dilation = {t.dh, t.dw, 1};
    p.pad_begin = {t.pt, t.pl, 0}, p.pad_end = {t.pb, t.pr, 0};
    ASSERT_TRUE(simd::conv_few_outputs_supported(p));
    const auto x = randn(static_cast<size_t>(t.n * t.c * t.h * t.w), 1);
    const auto w = randn(static_cast<size_t>(t.m * t.c * t.kh * t.kw), 2);
    const auto b = randn(static_cast<size_t>(t.m), 3);
    GraphBuilder g(17);
    ValueId xv = g.input("x", {t.n, t.c, t.h, t.w});
    ValueId conv = g.node("Conv", {xv, g.f32("w", {t.m, t.c, t.kh, t.kw}, w), g.f32("b", {t.m}, b)},
                          {NewAttr::Ints("strides", {t.sh, 1}), NewAttr::Ints("dilations", {t.dh, t.dw}),
                           NewAttr::Ints("pads", {t.pt, t.pl, t.pb, t.pr})});
    g.outputs({t.relu ? g.node("Relu", {conv}) : conv});
    rt::Session s(g.model());
    const auto got = values<float>(s.run({make<float>(DType::Float, {t.n, t.c, t.h, t.w}, x)})[0]);
    std::vector<float> want(static_cast<size_t>(t.n * t.m * p.out(0) * p.out(1)));
    simd::ref::conv(p, x.data(), w.data(), b.data(), want.data(),
                    t.relu ? simd::Unary::of(simd::UnaryOp::Relu) : simd::Unary{});
    ASSERT_EQ(got.size(), want.size());
    size_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i)
      if (!(std::fabs(got[i] - want[i]) <= 1e-4f * std::max(1.f, std::fabs(want[i]))) && bad++ < 5)
        ADD_FAILURE() << "case c=" << t.c << " m=" << t.m << " at " << i << ": " << got[i] << " want " << want[i];
  }
}
