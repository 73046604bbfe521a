// Fast paths of the runtime against plain references: separable 2-D pooling, the fused
// Conv + Add (+ Relu) residual epilogue (fused plan vs unfused plan, heap and arena runs).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "runtime/runtime.h"
#include "tests/runtime/tensors.h"

using namespace onnxforge;
using namespace onnxforge::test;

namespace {

struct PoolCase {
  int64_t h, w, kh, kw, sh, sw, pt, pl, pb, pr;
  bool ceil, include_pad;
};

// Plain 2-D pooling over one plane (dilation 1), the ONNX definition.
std::vector<float> pool_ref(bool is_max, const std::vector<float>& x, int64_t planes, const PoolCase& p, int64_t oh_n,
                            int64_t ow_n) {
  std::vector<float> y(static_cast<size_t>(planes * oh_n * ow_n));
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t oh = 0; oh < oh_n; ++oh)
      for (int64_t ow = 0; ow < ow_n; ++ow) {
        const int64_t h0 = oh * p.sh - p.pt, w0 = ow * p.sw - p.pl;
        double acc = is_max ? -INFINITY : 0.0;
        bool nan = false;
        int64_t cnt = 0;
        for (int64_t a = 0; a < p.kh; ++a)
          for (int64_t b = 0; b < p.kw; ++b) {
            const int64_t h = h0 + a, w = w0 + b;
            if (h < 0 || h >= p.h || w < 0 || w >= p.w) continue;
            const float v = x[static_cast<size_t>((pl * p.h + h) * p.w + w)];
            nan |= std::isnan(v);
            acc = is_max ? std::max(acc, static_cast<double>(v)) : acc + v;
            ++cnt;
          }
        if (!is_max) {
          const int64_t hend = std::min(h0 + p.kh, p.h + p.pb), wend = std::min(w0 + p.kw, p.w + p.pr);
          const int64_t padded = (hend - h0) * (wend - w0);
          acc /= static_cast<double>(std::max<int64_t>(p.include_pad ? padded : cnt, 1));
        }
        y[static_cast<size_t>((pl * oh_n + oh) * ow_n + ow)] = nan ? NAN : static_cast<float>(acc);
      }
  return y;
}

}  // namespace

TEST(FastPaths, Pool2dSeparableMatchesReference) {
  const PoolCase cases[] = {
      {112, 112, 3, 3, 2, 2, 1, 1, 1, 1, false, false},  // ResNet stem
      {13, 11, 3, 3, 2, 2, 1, 1, 1, 1, true, false},     // ceil mode, odd sizes
      {9, 10, 2, 3, 1, 2, 0, 1, 1, 2, false, true},      // asymmetric pads, count_include_pad
      {7, 7, 3, 3, 3, 3, 0, 0, 0, 0, true, false},       // stride 3, ceil
      {5, 6, 5, 6, 1, 1, 2, 2, 2, 2, false, true},       // window larger than the input with pads
      {4, 3, 2, 2, 1, 1, 0, 0, 0, 0, false, false},
      {6, 17, 1, 4, 1, 3, 0, 1, 0, 2, true, true},
      // Stride 2 across (even/odd column split): even and odd widths, even windows, taps left of
      // the output's column (pads 1 and 2) and none.
      {10, 15, 2, 4, 2, 2, 0, 0, 0, 0, false, false},
      {8, 9, 3, 5, 1, 2, 1, 2, 1, 2, false, true},
      {5, 20, 2, 2, 2, 2, 0, 0, 1, 1, true, false},
      {3, 1, 1, 1, 1, 2, 0, 0, 0, 0, false, false},
  };
  uint32_t seed = 1;
  for (const PoolCase& pc : cases)
    for (bool is_max : {true, false}) {
      GraphBuilder m(17);
      const int64_t planes = 3;
      ValueId x = m.input("x", {1, planes, pc.h, pc.w});
      std::vector<NewAttr> attrs{
          NewAttr::Ints("kernel_shape", {pc.kh, pc.kw}), NewAttr::Ints("strides", {pc.sh, pc.sw}),
          NewAttr::Ints("pads", {pc.pt, pc.pl, pc.pb, pc.pr}), NewAttr::Int("ceil_mode", pc.ceil ? 1 : 0)};
      if (!is_max) attrs.push_back(NewAttr::Int("count_include_pad", pc.include_pad ? 1 : 0));
      m.outputs({m.node(is_max ? "MaxPool" : "AveragePool", {x}, attrs)});
      auto in = randn(static_cast<size_t>(planes * pc.h * pc.w), seed++);
      in[5] = NAN;  // NaN propagates through max
      rt::Session s(m.model());
      auto out = s.run({make<float>(DType::Float, {1, planes, pc.h, pc.w}, in)});
      const int64_t oh_n = out[0].shape[2], ow_n = out[0].shape[3];
      auto ref = pool_ref(is_max, in, planes, pc, oh_n, ow_n);
      auto got = values<float>(out[0]);
      ASSERT_EQ(got.size(), ref.size());
      for (size_t i = 0; i < ref.size(); ++i) {
        if (std::isnan(ref[i])) {
          EXPECT_TRUE(std::isnan(got[i])) << (is_max ? "max" : "avg") << " case h=" << pc.h << " i=" << i;
        } else {
          EXPECT_NEAR(got[i], ref[i], 1e-5f * (1.f + std::fabs(ref[i])))
              << (is_max ? "max" : "avg") << " case h=" << pc.h << " w=" << pc.w << " i=" << i;
        }
      }
    }
}

namespace {

struct ConvCase {
  int64_t c, m, h, w, k, stride, pad, dil, group;
  bool relu, bias, residual_first, broadcast_residual;
};

// Conv -> Add(residual) [-> Relu]: fused (default options) vs unfused (fuse_activations off),
// first (heap) and second (arena, in place) runs.
void check_residual(const ConvCase& cc, uint32_t seed) {
  GraphBuilder m(17);
  ValueId x = m.input("x", {1, cc.c, cc.h, cc.w});
  const int64_t oh = (cc.h + 2 * cc.pad - cc.dil * (cc.k - 1) - 1) / cc.stride + 1;
  const int64_t ow = (cc.w + 2 * cc.pad - cc.dil * (cc.k - 1) - 1) / cc.stride + 1;
  std::vector<int64_t> rshape =
      cc.broadcast_residual ? std::vector<int64_t>{1, cc.m, 1, 1} : std::vector<int64_t>{1, cc.m, oh, ow};
  ValueId r = m.input("r", rshape);
  ValueId rr = m.node("Neg", {m.node("Neg", {r})});  // the residual is an intermediate (arena slot)
  std::vector<int64_t> wshape{cc.m, cc.c / cc.group, cc.k, cc.k};
  ValueId w = m.f32("w", wshape, randn(static_cast<size_t>(numel(wshape)), seed));
  std::vector<ValueId> ins{x, w};
  if (cc.bias) ins.push_back(m.f32("b", {cc.m}, randn(static_cast<size_t>(cc.m), seed + 1)));
  ValueId y = m.node("Conv", ins,
                     {NewAttr::Ints("kernel_shape", {cc.k, cc.k}), NewAttr::Ints("strides", {cc.stride, cc.stride}),
                      NewAttr::Ints("pads", {cc.pad, cc.pad, cc.pad, cc.pad}),
                      NewAttr::Ints("dilations", {cc.dil, cc.dil}), NewAttr::Int("group", cc.group)});
  ValueId s = cc.residual_first ? m.node("Add", {rr, y}) : m.node("Add", {y, rr});
  if (cc.relu) s = m.node("Relu", {s});
  m.outputs({m.node("Neg", {s})});
  rt::Session fused(m.model()), plain(m.model(), rt::SessionOptions{false, true, false, true});
  EXPECT_GE(fused.fused_count(), 1u);
  auto xin = make<float>(DType::Float, {1, cc.c, cc.h, cc.w}, randn(static_cast<size_t>(cc.c * cc.h * cc.w), seed + 2));
  auto rin = make<float>(DType::Float, rshape, randn(static_cast<size_t>(numel(rshape)), seed + 3));
  auto ref = values<float>(plain.run({xin, rin})[0]);
  for (int run = 0; run < 2; ++run) {
    auto got = values<float>(fused.run({xin, rin})[0]);
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(got[i], ref[i], 1e-4f * (1.f + std::fabs(ref[i])))
          << "c=" << cc.c << " m=" << cc.m << " k=" << cc.k << " stride=" << cc.stride << " group=" << cc.group
          << " run " << run << " i=" << i;
  }
}

}  // namespace

TEST(FastPaths, ConvResidualEpilogueMatchesUnfused) {
  const ConvCase cases[] = {
      {16, 24, 9, 7, 1, 1, 0, 1, 1, true, true, false, false},    // pointwise: plain GEMM, beta = 1
      {8, 12, 11, 9, 3, 1, 1, 1, 1, true, true, true, false},     // 3x3 stride 1: padded rows, cropped
      {8, 12, 11, 9, 3, 1, 0, 1, 1, false, false, false, false},  // 3x3 no pad: wide rows, cropped
      {6, 10, 13, 10, 3, 2, 1, 1, 1, true, true, false, false},   // stride 2: implicit im2col
      {8, 8, 10, 10, 3, 1, 2, 2, 1, true, true, true, false},     // dilation
      {12, 12, 9, 9, 3, 1, 1, 1, 12, true, true, false, false},   // depthwise
      {12, 24, 9, 8, 3, 2, 1, 1, 12, false, true, true, false},   // depthwise with multiplier, stride 2
      {8, 12, 7, 7, 3, 1, 1, 1, 4, true, false, false, false},    // groups
      {150, 200, 5, 5, 1, 1, 0, 1, 1, true, true, false, false},  // M > one tile row: packed B blocks
      {8, 12, 7, 9, 3, 1, 1, 1, 1, true, true, false, true},      // broadcast residual [1, M, 1, 1]
  };
  uint32_t seed = 10;
  for (const ConvCase& cc : cases) check_residual(cc, seed += 7);
}

TEST(FastPaths, ConvResidualFromALaterConvAndAViewOfTheInput) {
  // Add(conv_a(x), conv_b(x)): conv_b's output is computed after conv_a in the order, so the Add
  // fuses into conv_b; and Add(Conv(x), Reshape(x)) where the residual views x (in place on x's
  // slot would overwrite what the conv reads).
  GraphBuilder m(17);
  ValueId x0 = m.input("x", {1, 8, 6, 6});
  ValueId x = m.node("Neg", {x0});
  auto conv = [&](const std::string& name, ValueId in, int64_t k, int64_t pad, uint32_t seed) {
    ValueId w = m.f32(name, {8, 8, k, k}, randn(static_cast<size_t>(64 * k * k), seed));
    return m.node("Conv", {in, w},
                  {NewAttr::Ints("kernel_shape", {k, k}), NewAttr::Ints("pads", {pad, pad, pad, pad})});
  };
  ValueId a = conv("wa", x, 3, 1, 1);
  ValueId b = conv("wb", x, 1, 0, 2);
  ValueId s1 = m.node("Relu", {m.node("Add", {a, b})});
  ValueId shape = m.i64("shape", {1, 8, 6, 6});
  ValueId xv = m.node("Reshape", {s1, shape});
  ValueId c = conv("wc", s1, 1, 0, 3);
  ValueId s2 = m.node("Add", {c, xv});
  m.outputs({s2});
  rt::Session fused(m.model()), plain(m.model(), rt::SessionOptions{false, true, false, true});
  EXPECT_GE(fused.fused_count(), 3u);
  auto xin = make<float>(DType::Float, {1, 8, 6, 6}, randn(8 * 36, 5));
  auto ref = values<float>(plain.run({xin})[0]);
  for (int run = 0; run < 3; ++run) {
    auto got = values<float>(fused.run({xin})[0]);
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-4f * (1.f + std::fabs(ref[i]))) << i;
  }
}

namespace {

// A float scalar from a Constant node (as PyTorch exports them) or an initializer.
ValueId scalar(GraphBuilder& m, const std::string& name, float v, bool as_node) {
  if (!as_node) return m.f32(name, {}, {v});
  std::vector<float> data{v};
  TensorId t = m.model().tensors.add_owned(intern(name), DType::Float, std::vector<int64_t>{},
                                           std::as_bytes(std::span<const float>(data)));
  return m.node("Constant", {}, {NewAttr::Tensor("value", t)});
}

// x * (1 + erf(x / sqrt 2)) * 0.5 as exported, with the operands of Add/Mul in either order.
ValueId gelu_chain(GraphBuilder& m, ValueId x, bool as_nodes, bool swap) {
  ValueId d = m.node("Div", {x, scalar(m, "sqrt2_" + std::to_string(x.index()), 1.4142135f, as_nodes)});
  ValueId e = m.node("Erf", {d});
  ValueId one = scalar(m, "one_" + std::to_string(x.index()), 1.f, as_nodes);
  ValueId a = swap ? m.node("Add", {one, e}) : m.node("Add", {e, one});
  ValueId mm = swap ? m.node("Mul", {a, x}) : m.node("Mul", {x, a});
  ValueId half = scalar(m, "half_" + std::to_string(x.index()), 0.5f, as_nodes);
  return swap ? m.node("Mul", {half, mm}) : m.node("Mul", {mm, half});
}

void expect_same(const std::vector<float>& got, const std::vector<float>& ref, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (size_t i = 0; i < ref.size(); ++i)
    ASSERT_NEAR(got[i], ref[i], 1e-4f * (1.f + std::fabs(ref[i]))) << what << " i=" << i;
}

}  // namespace

TEST(FastPaths, MatMulBiasResidualAndGeluEpilogues) {
  for (bool as_nodes : {false, true})
    for (bool swap : {false, true}) {
      GraphBuilder m(13);
      const int64_t T = 37, D = 24, F = 53;
      ValueId x = m.input("x", {1, T, D});
      ValueId w1 = m.f32("w1", {D, F}, randn(D * F, 1));
      ValueId b1 = m.f32("b1", {F}, randn(F, 2));
      ValueId w2 = m.f32("w2", {F, D}, randn(F * D, 3));
      ValueId b2 = m.f32("b2", {D}, randn(D, 4));
      ValueId xr = m.node("Neg", {x});  // before the MatMul it is added to (the plan only fuses then)
      ValueId h = m.node("MatMul", {x, w1});
      h = swap ? m.node("Add", {b1, h}) : m.node("Add", {h, b1});  // bias -> per-column epilogue
      h = gelu_chain(m, h, as_nodes, swap);                        // GELU -> activation epilogue
      ValueId y = m.node("MatMul", {h, w2});
      y = m.node("Add", {y, xr});  // same-shape residual, beta = 1
      y = m.node("Relu", {y});
      ValueId z = m.node("MatMul", {y, m.f32("w3", {D, 1}, randn(D, 5))});
      z = m.node("Add", {z, b2});                              // [.., 1] + [D]: broadcasts wider
      ValueId v = m.node("MatMul", {x, m.node("Neg", {w1})});  // B not constant: no packed weights
      v = m.node("Add", {v, m.node("Sigmoid", {v})});
      m.outputs({m.node("Neg", {z}), m.node("Neg", {v})});
      rt::Session fused(m.model()), plain(m.model(), rt::SessionOptions{false, true, false, true});
      EXPECT_GE(fused.fused_count(), 5u);
      auto xin = make<float>(DType::Float, {1, T, D}, randn(T * D, 6));
      auto ref = plain.run({xin});
      for (int run = 0; run < 2; ++run) {
        auto got = fused.run({xin});
        ASSERT_EQ(got.size(), ref.size());
        EXPECT_EQ(got[0].shape, ref[0].shape);
        for (size_t o = 0; o < ref.size(); ++o)
          expect_same(
              values<float>(got[o]), values<float>(ref[o]),
              "output " + std::to_string(o) + (as_nodes ? " const nodes" : " initializers") + (swap ? " swapped" : ""));
      }
    }
}

TEST(FastPaths, ConvGeluAndIntegerMatMulAdd) {
  GraphBuilder m(13);
  ValueId x = m.input("x", {1, 6, 20});
  ValueId w = m.f32("w", {8, 6, 3}, randn(8 * 6 * 3, 7));
  ValueId b = m.f32("b", {8}, randn(8, 8));
  ValueId c = m.node("Conv", {x, w, b}, {NewAttr::Ints("kernel_shape", {3}), NewAttr::Ints("pads", {1, 1})});
  ValueId g = gelu_chain(m, c, true, false);
  ValueId i = m.input("i", {3, 4}, DType::Int64);
  ValueId k = m.init<int64_t>("k", {4, 2}, {1, -2, 3, 4, -5, 6, 7, 8}, DType::Int64);
  ValueId s = m.node("Add", {m.node("MatMul", {i, k}), m.i64("kb", {10, -20})});
  m.outputs({m.node("Neg", {g}), s});
  rt::Session fused(m.model()), plain(m.model(), rt::SessionOptions{false, true, false, true});
  auto xin = make<float>(DType::Float, {1, 6, 20}, randn(120, 9));
  auto iin = make<int64_t>(DType::Int64, {3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, -1, -2, -3, -4});
  auto ref = plain.run({xin, iin});
  for (int run = 0; run < 2; ++run) {
    auto got = fused.run({xin, iin});
    expect_same(values<float>(got[0]), values<float>(ref[0]), "conv gelu");
    EXPECT_EQ(values<int64_t>(got[1]), values<int64_t>(ref[1]));
  }
}

TEST(FastPaths, MatMulSoftmaxMatMulIsOneStepAndMatchesUnfused) {
  struct Case {
    std::vector<int64_t> q, k, v;
    int64_t opset;
    bool axis_attr;
  };
  const Case cases[] = {
      {{1, 3, 150, 16}, {1, 3, 16, 45}, {1, 3, 45, 8}, 17, false},  // several row blocks
      {{2, 37, 5}, {2, 5, 70}, {2, 70, 33}, 11, true},              // opset 11 with axis = -1
      {{2, 3, 9, 4}, {4, 11}, {3, 11, 6}, 17, true},                // broadcast batch dims: unfused inside
  };
  uint32_t seed = 40;
  for (const Case& cs : cases) {
    GraphBuilder m(cs.opset);
    ValueId q = m.input("q", cs.q);
    ValueId k = m.input("k", cs.k);
    ValueId v = m.input("v", cs.v);
    ValueId s = m.node("MatMul", {m.node("Neg", {q}), k});
    std::vector<NewAttr> attrs;
    if (cs.axis_attr) attrs.push_back(NewAttr::Int("axis", -1));
    ValueId p = m.node("Softmax", {s}, attrs);
    m.outputs({m.node("Neg", {m.node("MatMul", {p, v})})});
    rt::Session fused(m.model()), plain(m.model(), rt::SessionOptions{false, true, false, true});
    EXPECT_GE(fused.fused_count(), 2u);
    EXPECT_EQ(fused.step_count() + 2, plain.step_count());
    std::vector<rt::Tensor> ins;
    for (const auto& sh : {cs.q, cs.k, cs.v})
      ins.push_back(make<float>(DType::Float, sh, randn(static_cast<size_t>(numel(sh)), seed++)));
    auto ref = values<float>(plain.run(ins)[0]);
    for (int run = 0; run < 2; ++run)
      expect_same(values<float>(fused.run(ins)[0]), ref,
                  "attention case " + std::to_string(seed) + " run " + std::to_string(run));
  }
}

TEST(FastPaths, DecomposedLayerNormIsOneStep) {
  for (bool as_nodes : {false, true}) {
    GraphBuilder m(13);
    const int64_t T = 7, D = 45;
    ValueId x0 = m.input("x", {2, T, D});
    ValueId x = m.node("Neg", {x0});
    ValueId mean = m.node("ReduceMean", {x}, {NewAttr::Ints("axes", {-1})});
    ValueId d = m.node("Sub", {x, mean});
    ValueId var =
        m.node("ReduceMean", {m.node("Pow", {d, scalar(m, "two", 2.f, as_nodes)})}, {NewAttr::Ints("axes", {-1})});
    ValueId sd = m.node("Sqrt", {m.node("Add", {var, scalar(m, "eps", 1e-5f, as_nodes)})});
    ValueId n = m.node("Div", {d, sd});
    ValueId g = m.f32("gamma", {D}, randn(D, 11));
    ValueId b = m.f32("beta", {D}, randn(D, 12));
    ValueId y = m.node("Add", {b, m.node("Mul", {g, n})});
    // Not a LayerNorm over the last axis: left alone.
    ValueId z = m.node("ReduceMean", {x}, {NewAttr::Ints("axes", {1})});
    m.outputs({m.node("Add", {y, x}), z, y});  // the LayerNorm's output is also a graph output
    rt::Session fused(m.model()), plain(m.model(), rt::SessionOptions{false, true, false, true});
    EXPECT_EQ(fused.step_count() + 8, plain.step_count());
    auto xin = make<float>(DType::Float, {2, T, D}, randn(2 * T * D, 13));
    auto ref = plain.run({xin});
    for (int run = 0; run < 2; ++run) {
      auto got = fused.run({xin});
      expect_same(values<float>(got[0]), values<float>(ref[0]), "layer norm");
      expect_same(values<float>(got[1]), values<float>(ref[1]), "other mean");
      expect_same(values<float>(got[2]), values<float>(ref[2]), "layer norm output");
    }
  }
}
