// Channels-last planning (Plan::plan_layouts, Frame::layout_inputs): models run with NHWC
// activations between convs, pools, BatchNormalization and elementwise ops must give the
// results of the plain NCHW plan, including where the layouts meet (graph outputs, ops that
// need NCHW, elementwise operands that cannot be viewed channels-last).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "runtime/runtime.h"
#include "tests/runtime/tensors.h"

using namespace onnxforge;
using namespace onnxforge::test;

namespace {

struct Builder {
  GraphBuilder m{17};
  uint32_t seed = 1;
  ValueId conv(ValueId x, int64_t c, int64_t mo, int64_t k, int64_t stride, int64_t pad, bool bias = true) {
    const std::string n = "w" + std::to_string(seed);
    ValueId w =
        m.f32(n, {mo, c, k, k}, randn(static_cast<size_t>(mo * c * k * k), ++seed, 1.f / std::sqrt(float(c * k * k))));
    std::vector<ValueId> ins{x, w};
    if (bias) ins.push_back(m.f32(n + "b", {mo}, randn(static_cast<size_t>(mo), ++seed, 0.1f)));
    return m.node("Conv", ins,
                  {NewAttr::Ints("kernel_shape", {k, k}), NewAttr::Ints("strides", {stride, stride}),
                   NewAttr::Ints("pads", {pad, pad, pad, pad})});
  }
  ValueId batch_norm(ValueId x, int64_t c) {
    const std::string n = "bn" + std::to_string(++seed);
    auto vec = [&](const std::string& s, float base) {
      auto v = randn(static_cast<size_t>(c), ++seed, 0.1f);
      for (float& f : v) f = base + std::fabs(f);
      return m.f32(n + s, {c}, v);
    };
    return m.node("BatchNormalization", {x, vec("s", 0.9f), vec("b", 0.f), vec("m", 0.f), vec("v", 0.5f)});
  }
};

void run_both(const Model& model, const std::vector<rt::Tensor>& inputs, size_t min_channels_last) {
  rt::SessionOptions plain_opts;
  plain_opts.channels_last = false;
  rt::Session nhwc(model), plain(model, plain_opts);
  EXPECT_EQ(plain.channels_last_count(), 0u);
  EXPECT_GE(nhwc.channels_last_count(), min_channels_last);
  auto ref = plain.run(inputs);
  for (int run = 0; run < 3; ++run) {  // the first run records sizes, the others use the arena
    auto got = nhwc.run(inputs);
    EXPECT_EQ(got.size(), ref.size());
    for (size_t o = 0; o < ref.size() && o < got.size(); ++o) {
      EXPECT_EQ(got[o].shape, ref[o].shape) << "output " << o;
      EXPECT_FALSE(got[o].nhwc);
      auto a = values<float>(got[o]), b = values<float>(ref[o]);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < b.size(); ++i)
        ASSERT_NEAR(a[i], b[i], 1e-4f * (1.f + std::fabs(b[i]))) << "output " << o << " run " << run << " i=" << i;
    }
  }
}

}  // namespace

TEST(Layout, ResidualNetworkMatchesThePlainPlan) {
  // Stem conv reading the NCHW graph input, BatchNormalization, MaxPool (ceil mode), two
  // bottleneck blocks (one with a strided downsample conv), AveragePool, GlobalAveragePool,
  // Flatten and Gemm after the chain.
  Builder b;
  GraphBuilder& m = b.m;
  ValueId x = m.input("x", {2, 3, 23, 21});
  ValueId s = m.node("Relu", {b.batch_norm(b.conv(x, 3, 16, 7, 2, 3, false), 16)});
  s = m.node("MaxPool", {s},
             {NewAttr::Ints("kernel_shape", {3, 3}), NewAttr::Ints("strides", {2, 2}),
              NewAttr::Ints("pads", {1, 1, 1, 1}), NewAttr::Int("ceil_mode", 1)});
  auto block = [&](ValueId in, int64_t c, int64_t mid, int64_t out, int64_t stride) {
    ValueId y = m.node("Relu", {b.conv(in, c, mid, 1, 1, 0)});
    y = m.node("Relu", {b.conv(y, mid, mid, 3, stride, 1)});
    y = b.conv(y, mid, out, 1, 1, 0);
    ValueId shortcut = c == out && stride == 1 ? in : b.conv(in, c, out, 1, stride, 0);
    return m.node("Relu", {m.node("Add", {y, shortcut})});
  };
  s = block(s, 16, 8, 32, 1);
  s = block(s, 32, 16, 32, 1);
  s = block(s, 32, 16, 48, 2);
  s = m.node("AveragePool", {s},
             {NewAttr::Ints("kernel_shape", {2, 2}), NewAttr::Ints("pads", {0, 0, 1, 1}),
              NewAttr::Int("count_include_pad", 1)});
  ValueId g = m.node("GlobalAveragePool", {s});
  ValueId flat = m.node("Flatten", {g});
  ValueId fc = m.f32("fc", {48, 10}, randn(480, 99, 0.2f));
  m.outputs({m.node("Gemm", {flat, fc})});
  run_both(m.model(), {make<float>(DType::Float, {2, 3, 23, 21}, randn(2 * 3 * 23 * 21, 7))}, 12);
}

TEST(Layout, BoundariesConvertWhereNchwIsNeeded) {
  Builder b;
  GraphBuilder& m = b.m;
  ValueId x = m.input("x", {1, 3, 9, 10});  // a stem starts the chain
  ValueId z = m.input("z", {1, 8, 9, 10});
  // A full NCHW tensor as the fused residual of a channels-last conv (converted by the conv),
  // then as an elementwise operand that cannot be viewed channels-last (the frame converts the
  // NHWC input of the Mul instead).
  ValueId a = m.node("Mul", {m.node("Add", {b.conv(x, 3, 8, 3, 1, 1), z}), z});
  ValueId c1 = m.node("Relu", {b.conv(a, 8, 8, 1, 1, 0)});
  // Squeeze-and-excitation: a [1, C, 1, 1] scale broadcast over the NHWC activations.
  ValueId se = m.node("Sigmoid", {b.conv(m.node("GlobalAveragePool", {c1}), 8, 8, 1, 1, 0)});
  ValueId scaled = m.node("Mul", {c1, se});
  // A pool whose reader needs NCHW (Concat), and a conv output that is also a graph output.
  ValueId p = m.node("MaxPool", {b.conv(scaled, 8, 8, 3, 1, 1)},
                     {NewAttr::Ints("kernel_shape", {2, 2}), NewAttr::Ints("strides", {2, 2})});
  ValueId cat = m.node("Concat", {p, p}, {NewAttr::Int("axis", 1)});
  ValueId direct = b.conv(scaled, 8, 4, 1, 1, 0);
  ValueId after = m.node("Relu", {b.conv(direct, 4, 4, 3, 1, 1)});
  m.outputs({cat, direct, after, p});  // p: NHWC (MaxPool keeps its input's layout), converted on the way out
  run_both(m.model(),
           {make<float>(DType::Float, {1, 3, 9, 10}, randn(270, 3)),
            make<float>(DType::Float, {1, 8, 9, 10}, randn(720, 4))},
           3);
}

TEST(Layout, NoChainWithoutAStem) {
  // Pointwise convs between depthwise ones (MobileNet): a channels-last chain would start and
  // end at every pointwise conv, a transpose in and out each; everything stays NCHW.
  Builder b;
  GraphBuilder& m = b.m;
  ValueId x = m.input("x", {1, 8, 12, 12});
  ValueId dw_w = m.f32("dw", {16, 1, 3, 3}, randn(144, 5));
  ValueId e = m.node("Relu", {b.conv(x, 8, 16, 1, 1, 0)});
  ValueId d =
      m.node("Conv", {e, dw_w},
             {NewAttr::Ints("kernel_shape", {3, 3}), NewAttr::Ints("pads", {1, 1, 1, 1}), NewAttr::Int("group", 16)});
  ValueId p = b.conv(m.node("Relu", {d}), 16, 8, 1, 1, 0);
  m.outputs({m.node("Relu", {b.conv(m.node("Add", {p, x}), 8, 8, 1, 1, 0)})});
  rt::Session s(m.model());
  EXPECT_EQ(s.channels_last_count(), 0u);
  run_both(m.model(), {make<float>(DType::Float, {1, 8, 12, 12}, randn(8 * 144, 6))}, 0);
}

TEST(Layout, OffWhenDisabledOrNothingTakesIt) {
  Builder b;
  GraphBuilder& m = b.m;
  ValueId x = m.input("x", {1, 4, 6, 6});
  ValueId shape = m.i64("shape", {1, -1});
  m.outputs({m.node("Reshape", {m.node("Relu", {b.conv(x, 4, 4, 3, 1, 1)}), shape})});
  rt::Session s(m.model());
  EXPECT_EQ(s.channels_last_count(), 0u);  // Reshape reads NCHW: the conv stays plain
}
