// The quantized ops (runtime/ops/quant.cpp) against int64/float references written from the ONNX
// spec in this file: MatMulInteger and ConvInteger (every signedness, per-tensor and per-column
// zero points, constant weights packed at plan time and weights given at run time, padding with
// the input's zero point, strides, dilations, groups, 1-D convs), QLinearMatMul / QLinearConv
// (requantization, bias, per-channel scales), DynamicQuantizeLinear (ties round half to even),
// QuantizeLinear / DequantizeLinear (saturation, per axis, blocks). Each case runs at every ISA
// level the CPU supports (each packs for its own int8 kernel).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "runtime/runtime.h"
#include "simd/isa.h"
#include "tests/common/graph_builder.h"
#include "tests/runtime/tensors.h"

using namespace onnxforge;
using namespace onnxforge::test;
using onnxforge::rt::Shape;

namespace {

std::mt19937 rng(42);

// Random bytes of dtype t (int8 or uint8), as the raw byte vector.
std::vector<uint8_t> random_bytes(size_t n) {
  std::uniform_int_distribution<int> d(0, 255);
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = static_cast<uint8_t>(d(rng));
  return v;
}
int64_t val(const std::vector<uint8_t>& v, size_t i, DType t) {
  return t == DType::Int8 ? static_cast<int8_t>(v[i]) : v[i];
}
// A zero point in t's range, stored as a byte.
uint8_t random_zp(DType t) {
  std::uniform_int_distribution<int> d(t == DType::Int8 ? -128 : 0, t == DType::Int8 ? 127 : 255);
  return static_cast<uint8_t>(d(rng));
}

rt::Tensor bytes_tensor(DType t, std::vector<int64_t> shape, const std::vector<uint8_t>& v) {
  return make<uint8_t>(t, std::move(shape), v);
}

// Runs `body` at every ISA level (restoring the level after).
template <class F>
void at_every_isa(F&& body) {
  const simd::Isa saved = simd::active_isa_level();
  for (simd::Isa isa : simd::available_isas()) {
    ASSERT_TRUE(simd::set_isa(isa));
    SCOPED_TRACE(simd::isa_name(isa));
    body();
  }
  simd::set_isa(saved);
}

}  // namespace

TEST(QuantOps, MatMulIntegerMatchesSpec) {
  at_every_isa([] {
    for (DType ta : {DType::Uint8, DType::Int8})
      for (DType tb : {DType::Uint8, DType::Int8})
        for (bool const_b : {true, false})
          for (bool per_col : {false, true}) {
            const int64_t B0 = 2, M = 5, K = 37, N = 19;
            auto a = random_bytes(B0 * M * K), b = random_bytes(K * N);
            std::vector<uint8_t> za{random_zp(ta)}, zb(per_col ? N : 1);
            for (auto& z : zb) z = random_zp(tb);
            GraphBuilder g(10);
            ValueId A = g.input("a", {B0, M, K}, ta);
            ValueId B = const_b ? g.init<uint8_t>("b", {K, N}, b, tb) : g.input("b", {K, N}, tb);
            ValueId ZA = g.init<uint8_t>("za", {}, za, ta);
            ValueId ZB = g.init<uint8_t>("zb", per_col ? std::vector<int64_t>{N} : std::vector<int64_t>{}, zb, tb);
            g.outputs({g.node("MatMulInteger", {A, B, ZA, ZB})});
            rt::Session s(g.model());
            std::vector<rt::Tensor> in{bytes_tensor(ta, {B0, M, K}, a)};
            if (!const_b) in.push_back(bytes_tensor(tb, {K, N}, b));
            auto y = s.run(in)[0];
            ASSERT_EQ(y.dtype, DType::Int32);
            ASSERT_EQ(y.shape, (Shape{B0, M, N}));
            for (int64_t r = 0; r < B0 * M; ++r)
              for (int64_t n = 0; n < N; ++n) {
                int64_t acc = 0;
                for (int64_t k = 0; k < K; ++k)
                  acc +=
                      (val(a, static_cast<size_t>(r * K + k), ta) - val(za, 0, ta)) *
                      (val(b, static_cast<size_t>(k * N + n), tb) - val(zb, per_col ? static_cast<size_t>(n) : 0, tb));
                ASSERT_EQ(y.ptr<int32_t>()[r * N + n], acc) << r << "," << n;
              }
          }
  });
}

// B with batch dimensions (broadcast against A's), given at run time.
TEST(QuantOps, MatMulIntegerBatchedB) {
  const int64_t M = 3, K = 10, N = 4;
  auto a = random_bytes(M * K), b = random_bytes(2 * K * N);
  GraphBuilder g(10);
  ValueId A = g.input("a", {M, K}, DType::Uint8);
  ValueId B = g.input("b", {2, K, N}, DType::Int8);
  g.outputs({g.node("MatMulInteger", {A, B})});
  rt::Session s(g.model());
  auto y = s.run({bytes_tensor(DType::Uint8, {M, K}, a), bytes_tensor(DType::Int8, {2, K, N}, b)})[0];
  ASSERT_EQ(y.shape, (Shape{2, M, N}));
  for (int64_t bi = 0; bi < 2; ++bi)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        int64_t acc = 0;
        for (int64_t k = 0; k < K; ++k)
          acc += val(a, static_cast<size_t>(m * K + k), DType::Uint8) *
                 val(b, static_cast<size_t>((bi * K + k) * N + n), DType::Int8);
        EXPECT_EQ(y.ptr<int32_t>()[(bi * M + m) * N + n], acc);
      }
}

namespace {

struct ConvCase {
  std::vector<int64_t> x_shape, w_shape, strides, dilations, pads;
  int64_t group = 1;

  std::vector<NewAttr> attrs() const {
    return {NewAttr::Ints("strides", strides), NewAttr::Ints("dilations", dilations), NewAttr::Ints("pads", pads),
            NewAttr::Int("group", group)};
  }
};

// Random operands of one case: x and w, x's zero point and w's (one per output channel when
// per_channel).
struct ConvOperands {
  std::vector<uint8_t> x, w, xz, wz;
  bool per_channel;

  ConvOperands(const ConvCase& cc, DType tx, DType tw, bool per_channel_) : per_channel(per_channel_) {
    int64_t nx = 1, nw = 1;
    for (int64_t d : cc.x_shape) nx *= d;
    for (int64_t d : cc.w_shape) nw *= d;
    x = random_bytes(static_cast<size_t>(nx));
    w = random_bytes(static_cast<size_t>(nw));
    xz = {random_zp(tx)};
    wz.resize(per_channel ? static_cast<size_t>(cc.w_shape[0]) : 1);
    for (auto& z : wz) z = random_zp(tw);
  }
  std::vector<int64_t> wz_shape() const {
    return per_channel ? std::vector<int64_t>{static_cast<int64_t>(wz.size())} : std::vector<int64_t>{};
  }
};

// Runs the one-node model, feeding w when it is a graph input rather than a constant.
rt::Tensor run_conv(const Model& m, const ConvCase& cc, const ConvOperands& d, DType tx, DType tw, bool const_w) {
  rt::Session s(m);
  std::vector<rt::Tensor> feeds{bytes_tensor(tx, cc.x_shape, d.x)};
  if (!const_w) feeds.push_back(bytes_tensor(tw, cc.w_shape, d.w));
  return s.run(feeds)[0];
}

// int64 reference of ConvInteger (outside the input counts as x's zero point).
std::vector<int64_t> conv_reference(const ConvCase& c, const std::vector<uint8_t>& x, DType tx, int64_t xz,
                                    const std::vector<uint8_t>& w, DType tw, const std::vector<uint8_t>& wz,
                                    Shape* out_shape) {
  const size_t r = c.x_shape.size() - 2;
  const int64_t N = c.x_shape[0], C = c.x_shape[1], M = c.w_shape[0], Cg = C / c.group, Mg = M / c.group;
  std::vector<int64_t> in(c.x_shape.begin() + 2, c.x_shape.end()), ks(c.w_shape.begin() + 2, c.w_shape.end()), out(r);
  *out_shape = {N, M};
  int64_t P = 1, KS = 1, IS = 1;
  for (size_t i = 0; i < r; ++i) {
    out[i] = (in[i] + c.pads[i] + c.pads[i + r] - c.dilations[i] * (ks[i] - 1) - 1) / c.strides[i] + 1;
    out_shape->push_back(out[i]);
    P *= out[i], KS *= ks[i], IS *= in[i];
  }
  std::vector<int64_t> y(static_cast<size_t>(N * M * P));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t p = 0; p < P; ++p) {
        int64_t acc = 0;
        const int64_t g = m / Mg, wzv = val(wz, wz.size() > 1 ? static_cast<size_t>(m) : 0, tw);
        for (int64_t cc = 0; cc < Cg; ++cc)
          for (int64_t k = 0; k < KS; ++k) {
            int64_t pr = p, kr = k, off = 0, stride_acc = 1;
            bool inside = true;
            std::array<int64_t, 3> pos{};
            for (size_t i = r; i-- > 0;) {
              const int64_t o = pr % out[i], kk = kr % ks[i];
              pr /= out[i], kr /= ks[i];
              pos[i] = o * c.strides[i] + kk * c.dilations[i] - c.pads[i];
              inside &= pos[i] >= 0 && pos[i] < in[i];
            }
            for (size_t i = r; i-- > 0;) off += pos[i] * stride_acc, stride_acc *= in[i];
            const int64_t xv = inside ? val(x, static_cast<size_t>((n * C + g * Cg + cc) * IS + off), tx) : xz;
            acc += (xv - xz) * (val(w, static_cast<size_t>((m * Cg + cc) * KS + k), tw) - wzv);
          }
        y[static_cast<size_t>((n * M + m) * P + p)] = acc;
      }
  return y;
}

}  // namespace

TEST(QuantOps, ConvIntegerMatchesSpec) {
  const std::vector<ConvCase> cases = {
      {{1, 3, 7, 9}, {8, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {{2, 4, 11, 10}, {6, 2, 3, 2}, {2, 1}, {2, 1}, {0, 2, 1, 0}, 2},  // groups, dilation, uneven pads
      {{1, 16, 5, 5}, {40, 16, 1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}},    // pointwise
      {{1, 5, 20}, {7, 5, 4}, {3}, {2}, {2, 1}},                        // 1-D
      {{1, 4, 6, 6}, {4, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 4},    // depthwise
      {{1, 2, 9, 40}, {33, 2, 3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}},     // more positions than a chunk
      // ISNet's dilated 3x3s (pad = dilation): chunks span output rows, taps fall in the padding
      {{1, 3, 13, 11}, {5, 3, 3, 3}, {1, 1}, {4, 4}, {4, 4, 4, 4}},
      {{1, 3, 23, 29}, {6, 3, 3, 3}, {1, 1}, {2, 2}, {2, 2, 2, 2}},                  // three chunks, each across rows
      {{1, 2, 10, 7}, {9, 2, 3, 3}, {1, 1}, {8, 8}, {8, 8, 8, 8}},                   // dilation past the image
      {{1, 3, 12, 15}, {4, 3, 3, 3}, {2, 2}, {1, 1}, {1, 0, 2, 1}},                  // stride 2, uneven pads
      {{1, 6, 17, 13}, {11, 6, 1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}},                 // pointwise, 221 positions
      {{1, 2, 4, 5, 6}, {3, 2, 2, 3, 2}, {1, 2, 1}, {2, 1, 1}, {1, 0, 1, 0, 1, 0}},  // 3-D
      // depthwise with 289 taps: past the float kernel's exact range, the row loop
      {{1, 2, 18, 18}, {2, 1, 17, 17}, {1, 1}, {1, 1}, {8, 8, 8, 8}, 2},
      {{1, 4, 30}, {4, 1, 5}, {1}, {2}, {4, 4}, 4},  // depthwise 1-D, dilated
  };
  at_every_isa([&] {
    for (const ConvCase& cc : cases)
      for (DType tx : {DType::Uint8, DType::Int8})
        for (DType tw : {DType::Int8, DType::Uint8})
          for (bool const_w : {true, false})
            for (bool per_channel : {false, true}) {
              const ConvOperands d(cc, tx, tw, per_channel);
              GraphBuilder g(10);
              ValueId X = g.input("x", cc.x_shape, tx);
              ValueId W = const_w ? g.init<uint8_t>("w", cc.w_shape, d.w, tw) : g.input("w", cc.w_shape, tw);
              ValueId XZ = g.init<uint8_t>("xz", {}, d.xz, tx);
              ValueId WZ = g.init<uint8_t>("wz", d.wz_shape(), d.wz, tw);
              g.outputs({g.node("ConvInteger", {X, W, XZ, WZ}, cc.attrs())});
              auto y = run_conv(g.model(), cc, d, tx, tw, const_w);
              Shape want_shape;
              auto want = conv_reference(cc, d.x, tx, val(d.xz, 0, tx), d.w, tw, d.wz, &want_shape);
              ASSERT_EQ(y.shape, want_shape);
              for (size_t i = 0; i < want.size(); ++i)
                ASSERT_EQ(y.ptr<int32_t>()[i], want[i]) << "case x" << rt::shape_str(cc.x_shape) << " at " << i;
            }
  });
}

TEST(QuantOps, QLinearConvRequantizesWithBiasAndPerChannelScales) {
  const ConvCase cc{{1, 3, 6, 5}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 0, 1, 0}};
  auto x = random_bytes(90), w = random_bytes(108);
  const std::vector<uint8_t> xz{7}, wz{0, 0, 0, 0}, yz{250};  // uint8 x/y, int8 w (symmetric)
  const std::vector<float> xs{0.02f}, ws{0.01f, 0.003f, 0.05f, 0.001f}, ys{0.07f};
  const std::vector<int32_t> bias{100, -2000, 5, 0};
  at_every_isa([&] {
    GraphBuilder g(10);
    ValueId X = g.input("x", cc.x_shape, DType::Uint8);
    g.outputs({g.node("QLinearConv",
                      {X, g.f32("xs", {}, xs), g.init<uint8_t>("xz", {}, xz, DType::Uint8),
                       g.init<uint8_t>("w", cc.w_shape, w, DType::Int8), g.f32("ws", {4}, ws),
                       g.init<uint8_t>("wz", {4}, wz, DType::Int8), g.f32("ys", {}, ys),
                       g.init<uint8_t>("yz", {}, yz, DType::Uint8), g.init<int32_t>("b", {4}, bias, DType::Int32)},
                      {NewAttr::Ints("pads", cc.pads)})});
    rt::Session s(g.model());
    auto y = s.run({bytes_tensor(DType::Uint8, cc.x_shape, x)})[0];
    Shape shape;
    auto acc = conv_reference(cc, x, DType::Uint8, 7, w, DType::Int8, wz, &shape);
    ASSERT_EQ(y.shape, shape);
    ASSERT_EQ(y.dtype, DType::Uint8);
    const int64_t P = shape[2] * shape[3];
    int saturated = 0;
    for (size_t i = 0; i < acc.size(); ++i) {
      const size_t m = i / static_cast<size_t>(P);
      const float mult = xs[0] * ws[m] / ys[0];
      const double v = std::nearbyint(static_cast<double>(static_cast<float>(acc[i] + bias[m]) * mult)) + 250;
      const int want = static_cast<int>(std::clamp(v, 0.0, 255.0));
      saturated += want == 255;
      ASSERT_EQ(y.ptr<uint8_t>()[i], want) << i;
    }
    EXPECT_GT(saturated, 0);  // the zero point 250 makes the top of the range saturate
  });
}

// QLinearConv on every conv path (stride 2, 1-D, 3-D, groups, depthwise, dilation, padding;
// conv8 on larger maps, the GEMM over patches below 64 output positions (a pointwise conv's
// patches by transpose), depthwise on simd::conv8_depthwise), int8 and uint8 x / w / y,
// per-channel and per-tensor scales, with and without bias: the requantization happens in the
// kernels' stores, so each is checked against the spec's formula on the int64 reference sums.
// w_scale 0.5 / x_scale 1 / y_scale 1 makes every odd sum an exact tie (half to even), and the
// zero points near the range's ends make both ends saturate.
TEST(QuantOps, QLinearConvRequantizesOnEveryConvShape) {
  const std::vector<ConvCase> cases = {
      {{1, 5, 11, 13}, {9, 5, 3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}},
      {{2, 16, 14, 14}, {20, 16, 1, 1}, {2, 2}, {1, 1}, {0, 0, 0, 0}},
      {{1, 4, 10, 9}, {6, 2, 3, 3}, {1, 1}, {2, 2}, {2, 2, 2, 2}, 2},
      {{1, 6, 9, 9}, {6, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 6},
      {{1, 5, 40}, {7, 5, 5}, {2}, {1}, {2, 2}},
      {{1, 3, 5, 6, 7}, {8, 3, 3, 3, 3}, {1, 2, 2}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
      {{1, 5, 21, 23}, {9, 5, 3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}},       // conv8: 483 positions
      {{2, 4, 6, 6}, {6, 2, 3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 2},      // GEMM, groups, two images
      {{1, 3, 2, 2}, {70, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}},        // GEMM: 4 positions, 70 channels
      {{1, 3, 20, 20}, {3, 1, 17, 17}, {1, 1}, {1, 1}, {8, 8, 8, 8}, 3},  // depthwise, 289 taps
      {{1, 4, 30}, {4, 1, 5}, {1}, {2}, {4, 4}, 4},                       // depthwise 1-D, dilated
      {{2, 6, 17, 19}, {6, 1, 5, 5}, {2, 2}, {1, 1}, {2, 1, 1, 2}, 6},    // depthwise 5x5 stride 2, two images
      {{1, 3, 4, 6, 7}, {3, 1, 3, 3, 3}, {1, 2, 2}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}, 3},  // depthwise 3-D
      {{2, 16, 5, 7}, {20, 16, 1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}},  // GEMM, pointwise: transposed patches
  };
  size_t ties = 0, saturated = 0;
  at_every_isa([&] {
    for (const ConvCase& cc : cases)
      for (DType tx : {DType::Uint8, DType::Int8})
        for (DType ty : {DType::Uint8, DType::Int8})
          for (int variant = 0; variant < 3; ++variant) {
            // 0, 1: per tensor, per channel (constant weights, packed at plan time); 2: per
            // channel with the weights a graph input (packed per run).
            const bool per_channel = variant > 0, const_w = variant < 2;
            const DType tw = tx == DType::Uint8 ? DType::Int8 : DType::Uint8;
            const int64_t M = cc.w_shape[0];
            const ConvOperands d(cc, tx, tw, per_channel);
            const uint8_t yz =
                ty == DType::Uint8 ? (per_channel ? 5 : 250) : static_cast<uint8_t>(per_channel ? -120 : 110);
            std::vector<float> ws(per_channel ? static_cast<size_t>(M) : 1);
            for (size_t m = 0; m < ws.size(); ++m) ws[m] = m % 3 == 0 ? 0.5f : m % 3 == 1 ? 0.013f : 7.7e-4f;
            std::vector<int32_t> bias(static_cast<size_t>(M));
            for (size_t m = 0; m < bias.size(); ++m) bias[m] = static_cast<int32_t>(m * 37) - 100;
            GraphBuilder g(10);
            ValueId X = g.input("x", cc.x_shape, tx);
            std::vector<ValueId> ins{X,
                                     g.f32("xs", {}, {1.f}),
                                     g.init<uint8_t>("xz", {}, d.xz, tx),
                                     const_w ? g.init<uint8_t>("w", cc.w_shape, d.w, tw) : g.input("w", cc.w_shape, tw),
                                     g.f32("ws", d.wz_shape(), ws),
                                     g.init<uint8_t>("wz", d.wz_shape(), d.wz, tw),
                                     g.f32("ys", {}, {1.f}),
                                     g.init<uint8_t>("yz", {}, {yz}, ty)};
            if (per_channel) ins.push_back(g.init<int32_t>("b", {M}, bias, DType::Int32));
            g.outputs({g.node("QLinearConv", ins, cc.attrs())});
            auto y = run_conv(g.model(), cc, d, tx, tw, const_w);
            Shape shape;
            auto acc = conv_reference(cc, d.x, tx, val(d.xz, 0, tx), d.w, tw, d.wz, &shape);
            ASSERT_EQ(y.shape, shape);
            ASSERT_EQ(y.dtype, ty);
            int64_t P = 1;
            for (size_t i = 2; i < shape.size(); ++i) P *= shape[i];
            const double lo = ty == DType::Int8 ? -128 : 0, hi = ty == DType::Int8 ? 127 : 255;
            for (size_t i = 0; i < acc.size(); ++i) {
              const size_t m = (i / static_cast<size_t>(P)) % static_cast<size_t>(M);
              const int32_t sum = static_cast<int32_t>(acc[i] + (per_channel ? bias[m] : 0));
              const float prod = static_cast<float>(sum) * (1.f * ws[per_channel ? m : 0] / 1.f);
              ties += std::fabs(prod - std::trunc(prod)) == 0.5f;
              const double v = std::clamp(std::nearbyint(static_cast<double>(prod)) + val({yz}, 0, ty), lo, hi);
              saturated += v == lo || v == hi;
              const int64_t got = ty == DType::Int8 ? y.ptr<int8_t>()[i] : y.ptr<uint8_t>()[i];
              ASSERT_EQ(got, static_cast<int64_t>(v)) << "case x" << rt::shape_str(cc.x_shape) << " at " << i;
            }
          }
  });
  EXPECT_GT(ties, 0u);
  EXPECT_GT(saturated, 0u);
}

TEST(QuantOps, QLinearMatMulPerColumnScales) {
  const int64_t M = 9, K = 70, N = 21;
  auto a = random_bytes(M * K), b = random_bytes(K * N);
  std::vector<float> bs(N);
  for (int64_t n = 0; n < N; ++n) bs[static_cast<size_t>(n)] = 0.001f * static_cast<float>(n + 1);
  at_every_isa([&] {
    GraphBuilder g(10);
    ValueId A = g.input("a", {M, K}, DType::Int8);
    g.outputs(
        {g.node("QLinearMatMul", {A, g.f32("as", {}, {0.05f}), g.init<uint8_t>("az", {}, {uint8_t(3)}, DType::Int8),
                                  g.init<uint8_t>("b", {K, N}, b, DType::Int8), g.f32("bs", {N}, bs),
                                  g.init<uint8_t>("bz", {N}, std::vector<uint8_t>(N, 0), DType::Int8),
                                  g.f32("ys", {}, {0.2f}), g.init<uint8_t>("yz", {}, {uint8_t(0xF6)}, DType::Int8)})});
    rt::Session s(g.model());
    auto y = s.run({bytes_tensor(DType::Int8, {M, K}, a)})[0];
    ASSERT_EQ(y.dtype, DType::Int8);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        int64_t acc = 0;
        for (int64_t k = 0; k < K; ++k)
          acc += (val(a, static_cast<size_t>(m * K + k), DType::Int8) - 3) *
                 val(b, static_cast<size_t>(k * N + n), DType::Int8);
        const float mult = 0.05f * bs[static_cast<size_t>(n)] / 0.2f;
        const double v = std::nearbyint(static_cast<double>(static_cast<float>(acc) * mult)) - 10;
        ASSERT_EQ(y.ptr<int8_t>()[m * N + n], static_cast<int>(std::clamp(v, -128.0, 127.0))) << m << "," << n;
      }
  });
}

TEST(QuantOps, DynamicQuantizeLinearRoundsHalfToEven) {
  GraphBuilder g(11);
  ValueId x = g.input("x", {6});
  auto outs = g.node_n("DynamicQuantizeLinear", {x}, {}, 3);
  g.outputs(outs);
  rt::Session s(g.model());
  // min -1, max 254: scale exactly 1, zero point 1; x = 0.5 and 1.5 are ties.
  auto o = s.run({make<float>(DType::Float, {6}, {-1.f, 254.f, 0.5f, 1.5f, 2.5f, 253.5f})});
  EXPECT_EQ(values<uint8_t>(o[0]), (std::vector<uint8_t>{0, 255, 1, 3, 3, 255}));
  EXPECT_EQ(o[1].ptr<float>()[0], 1.f);
  EXPECT_EQ(o[2].ptr<uint8_t>()[0], 1);
  // All zeros: scale 0, zero point 0, output 0 (no division by zero).
  auto z = s.run({make<float>(DType::Float, {6}, std::vector<float>(6, 0.f))});
  EXPECT_EQ(values<uint8_t>(z[0]), std::vector<uint8_t>(6, 0));
  EXPECT_EQ(z[1].ptr<float>()[0], 0.f);
}

TEST(QuantOps, QuantizeDequantizePerAxisAndBlocked) {
  // x [2, 3, 4]; per axis 1 (3 scales) and, opset 21, blocks of 3 along axis 2 (2 blocks).
  std::vector<float> xv(24);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = (static_cast<float>(i) - 11.5f) * 13.7f;
  const std::vector<float> axis_s{0.5f, 0.25f, 2.f};
  std::vector<float> block_s(12);
  for (size_t i = 0; i < block_s.size(); ++i) block_s[i] = 0.1f + 0.2f * static_cast<float>(i);
  for (bool blocked : {false, true}) {
    GraphBuilder g(21);
    ValueId x = g.input("x", {2, 3, 4});
    const std::vector<float>& sv = blocked ? block_s : axis_s;
    ValueId s = g.f32("s", blocked ? std::vector<int64_t>{2, 3, 2} : std::vector<int64_t>{3}, sv);
    const std::vector<uint8_t> zv(sv.size(), 0xFE);  // int8 -2
    ValueId z =
        g.init<uint8_t>("z", blocked ? std::vector<int64_t>{2, 3, 2} : std::vector<int64_t>{3}, zv, DType::Int8);
    std::vector<NewAttr> at{NewAttr::Int("axis", blocked ? 2 : 1)};
    if (blocked) at.push_back(NewAttr::Int("block_size", 3));
    ValueId q = g.node("QuantizeLinear", {x, s, z}, at);
    g.outputs({q, g.node("DequantizeLinear", {q, s, z}, at)});
    rt::Session sess(g.model());
    auto o = sess.run({make<float>(DType::Float, {2, 3, 4}, xv)});
    int saturated = 0;
    for (int64_t i = 0; i < 24; ++i) {
      const int64_t k = blocked ? (i / 4) * 2 + (i % 4) / 3 : (i / 4) % 3;
      const float sc = sv[static_cast<size_t>(k)];
      const double r =
          std::clamp(std::nearbyint(static_cast<double>(xv[static_cast<size_t>(i)] / sc)) - 2, -128.0, 127.0);
      saturated += r == -128 || r == 127;
      ASSERT_EQ(o[0].ptr<int8_t>()[i], static_cast<int>(r)) << (blocked ? "blocked " : "axis ") << i;
      ASSERT_EQ(o[1].ptr<float>()[i], static_cast<float>(static_cast<int>(r) + 2) * sc) << i;
    }
    EXPECT_GT(saturated, 0);
  }
}

namespace {

// A [M, K] uint8 times B [K, N] int8 with zero points, as int64.
int64_t dot(const std::vector<uint8_t>& a, int64_t za, const std::vector<uint8_t>& b, int64_t m, int64_t n, int64_t K,
            int64_t N) {
  int64_t acc = 0;
  for (int64_t k = 0; k < K; ++k)
    acc += (a[static_cast<size_t>(m * K + k)] - za) * val(b, static_cast<size_t>(k * N + n), DType::Int8);
  return acc;
}

}  // namespace

// com.microsoft MatMulIntegerToFloat and DynamicQuantizeMatMul (what ONNX Runtime fuses the
// dynamic quantizer's MatMulInteger -> Cast -> Mul into): float(acc) * (a_scale * b_scale[n]) + bias.
TEST(QuantOps, ContribIntegerMatMulsToFloat) {
  const int64_t M = 6, K = 40, N = 9;
  auto b = random_bytes(K * N);
  std::vector<float> bs(N), bias(N);
  for (int64_t n = 0; n < N; ++n)
    bs[static_cast<size_t>(n)] = 0.002f * static_cast<float>(n + 1),
    bias[static_cast<size_t>(n)] = 0.5f - 0.1f * static_cast<float>(n);
  at_every_isa([&] {
    {
      auto a = random_bytes(M * K);
      GraphBuilder g(13);
      g.model().opsets.push_back({intern("com.microsoft"), 1, true});
      ValueId A = g.input("a", {M, K}, DType::Uint8);
      g.outputs(
          {g.node_n("MatMulIntegerToFloat",
                    {A, g.init<uint8_t>("b", {K, N}, b, DType::Int8), g.f32("as", {}, {0.03f}), g.f32("bs", {N}, bs),
                     g.init<uint8_t>("az", {}, {uint8_t(9)}, DType::Uint8),
                     g.init<uint8_t>("bz", {N}, std::vector<uint8_t>(N, 0), DType::Int8), g.f32("bias", {N}, bias)},
                    {}, 1, "", "com.microsoft")[0]});
      rt::Session s(g.model());
      auto y = s.run({bytes_tensor(DType::Uint8, {M, K}, a)})[0];
      ASSERT_EQ(y.dtype, DType::Float);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n)
          ASSERT_EQ(y.ptr<float>()[m * N + n],
                    static_cast<float>(dot(a, 9, b, m, n, K, N)) * (0.03f * bs[static_cast<size_t>(n)]) +
                        bias[static_cast<size_t>(n)]);
    }
    {
      std::vector<float> x(static_cast<size_t>(M * K));
      std::normal_distribution<float> d;
      for (auto& v : x) v = d(rng);
      GraphBuilder g(13);
      g.model().opsets.push_back({intern("com.microsoft"), 1, true});
      ValueId X = g.input("x", {M, K});
      g.outputs(
          {g.node_n("DynamicQuantizeMatMul",
                    {X, g.init<uint8_t>("b", {K, N}, b, DType::Int8), g.f32("bs", {N}, bs),
                     g.init<uint8_t>("bz", {N}, std::vector<uint8_t>(N, 0), DType::Int8), g.f32("bias", {N}, bias)},
                    {}, 1, "", "com.microsoft")[0]});
      rt::Session s(g.model());
      auto y = s.run({make<float>(DType::Float, {M, K}, x)})[0];
      // DynamicQuantizeLinear from the spec.
      float lo = 0, hi = 0;
      for (float v : x) lo = std::min(lo, v), hi = std::max(hi, v);
      const float scale = (hi - lo) / 255.f;
      const int64_t zp = static_cast<int64_t>(std::clamp(std::nearbyint(-lo / scale), 0.f, 255.f));
      std::vector<uint8_t> q(x.size());
      for (size_t i = 0; i < x.size(); ++i)
        q[i] = static_cast<uint8_t>(std::clamp(std::nearbyint(x[i] / scale) + static_cast<float>(zp), 0.f, 255.f));
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n)
          ASSERT_EQ(y.ptr<float>()[m * N + n],
                    static_cast<float>(dot(q, zp, b, m, n, K, N)) * (scale * bs[static_cast<size_t>(n)]) +
                        bias[static_cast<size_t>(n)]);
    }
  });
}

namespace {

// x -> DynamicQuantizeLinear -> ConvInteger / MatMulInteger (constant weight, per-tensor or
// per-channel zero points) -> Cast(to) -> Mul(., Mul(x_scale, w_scale)), as quantize_dynamic
// writes it; variants the integer_dequantize fusion must refuse.
struct DequantCase {
  bool conv = true, per_channel = false, uint8_w = true;
  int64_t cast_to = 1;               // Cast's `to`
  std::vector<int64_t> scale_shape;  // w_scale's shape
  bool extra_reader = false;         // the integer output is also a graph output
  // Epilogue after the Mul: bias Add (shape; empty: none), how the bias is written, and an
  // activation ("" none, "Relu", "Clip", "Sigmoid").
  std::vector<int64_t> bias_shape = {};
  bool bias_reshaped = false;  // Reshape(initializer) as ISNet's quantize_dynamic twin has it
  bool bias_first = false;     // Add(bias, y)
  bool bias_input = false;     // the bias is a graph input (not known at plan time)
  std::string act = "";
  int64_t stride = 1;      // conv strides (2: conv8_nd's stride phases)
  bool pointwise = false;  // 1x1 conv, no padding
  bool depthwise = false;  // group = C = M = 5 (simd::conv8_depthwise, the store's Relu / Clip)
};

// Runs the graph fused and unfused; returns fused_count of the fused session and checks the
// two agree bit for bit.
size_t run_dequant(const DequantCase& dc) {
  std::normal_distribution<float> nd(0.f, 2.f);
  GraphBuilder g(13);
  const std::vector<int64_t> xs = dc.conv ? std::vector<int64_t>{1, 5, 13, 11} : std::vector<int64_t>{2, 7, 37};
  const std::vector<int64_t> ws = !dc.conv ? std::vector<int64_t>{37, 19}
                                  : dc.depthwise
                                      ? std::vector<int64_t>{5, 1, 3, 3}
                                      : std::vector<int64_t>{9, 5, dc.pointwise ? 1 : 3, dc.pointwise ? 1 : 3};
  const int64_t cols = dc.conv ? ws[0] : ws[1];
  const DType wt = dc.uint8_w ? DType::Uint8 : DType::Int8;
  int64_t nw = 1, nx = 1, ns = 1;
  for (int64_t d : ws) nw *= d;
  for (int64_t d : xs) nx *= d;
  for (int64_t d : dc.scale_shape) ns *= d;
  ValueId X = g.input("x", xs);
  auto q = g.node_n("DynamicQuantizeLinear", {X}, {}, 3);
  ValueId W = g.init<uint8_t>("w", ws, random_bytes(static_cast<size_t>(nw)), wt);
  std::vector<uint8_t> wz(dc.per_channel ? static_cast<size_t>(cols) : 1);
  for (auto& z : wz) z = random_zp(wt);
  ValueId WZ = g.init<uint8_t>("wz", dc.per_channel ? std::vector<int64_t>{cols} : std::vector<int64_t>{}, wz, wt);
  std::vector<float> sv(static_cast<size_t>(ns));
  for (auto& v : sv) v = std::fabs(nd(rng)) * 0.01f + 1e-3f;
  ValueId WS = g.f32("w_scale", dc.scale_shape, sv);
  std::vector<NewAttr> attrs;
  if (dc.conv && !dc.pointwise)
    attrs = {NewAttr::Ints("pads", {2, 2, 2, 2}), NewAttr::Ints("dilations", {2, 2}),
             NewAttr::Ints("strides", {dc.stride, dc.stride})};
  if (dc.depthwise) attrs.push_back(NewAttr::Int("group", 5));
  ValueId acc = g.node(dc.conv ? "ConvInteger" : "MatMulInteger", {q[0], W, q[2], WZ}, attrs);
  ValueId f = g.node("Cast", {acc}, {NewAttr::Int("to", dc.cast_to)});
  ValueId s = g.node("Mul", {q[1], WS});
  if (dc.cast_to != 1) s = g.node("Cast", {s}, {NewAttr::Int("to", dc.cast_to)});
  ValueId y = g.node("Mul", {f, s});
  std::vector<float> bv;
  if (!dc.bias_shape.empty() || dc.bias_input) {
    int64_t nb = 1;
    for (int64_t d : dc.bias_shape) nb *= d;
    bv.resize(static_cast<size_t>(nb));
    for (auto& v : bv) v = nd(rng);
    ValueId B;
    if (dc.bias_input) {
      B = g.input("bias", dc.bias_shape);
    } else if (dc.bias_reshaped) {
      B = g.node("Reshape",
                 {g.f32("bias", {nb}, bv), g.init<int64_t>("bias_shape", {static_cast<int64_t>(dc.bias_shape.size())},
                                                           dc.bias_shape, DType::Int64)});
    } else {
      B = g.f32("bias", dc.bias_shape, bv);
    }
    y = dc.bias_first ? g.node("Add", {B, y}) : g.node("Add", {y, B});
  }
  if (dc.act == "Clip")
    y = g.node("Clip", {y, g.f32("lo", {}, {-0.25f}), g.f32("hi", {}, {0.5f})});
  else if (!dc.act.empty())
    y = g.node(dc.act, {y});
  if (dc.extra_reader)
    g.outputs({y, acc});
  else
    g.outputs({y});
  std::vector<float> xv(static_cast<size_t>(nx));
  for (auto& v : xv) v = nd(rng);
  std::vector<rt::Tensor> ins{make<float>(DType::Float, xs, xv)};
  if (dc.bias_input) ins.push_back(make<float>(DType::Float, dc.bias_shape, bv));
  rt::Session fused(g.model());
  rt::SessionOptions off;
  off.fuse_activations = false;
  rt::Session plain(g.model(), off);
  const auto a = fused.run(ins)[0], e = plain.run(ins)[0];
  EXPECT_EQ(a.shape, e.shape);
  EXPECT_EQ(a.dtype, e.dtype);
  EXPECT_EQ(a.bytes(), e.bytes());
  EXPECT_EQ(std::memcmp(a.data, e.data, std::min(a.bytes(), e.bytes())), 0) << "fused and unfused outputs differ";
  return fused.fused_count();
}

}  // namespace

// Fused (float(acc) * (x_scale * w_scale) in the integer kernel's epilogue) equals the graph's
// Cast -> Mul bit for bit: conv and matmul, uint8/int8 weights with asymmetric zero points,
// per-tensor and per-channel scales and zero points.
TEST(QuantOps, IntegerDequantizeFusionMatchesTheGraph) {
  at_every_isa([&] {
    for (bool u8 : {true, false})
      for (bool pc : {false, true}) {
        EXPECT_EQ(run_dequant({true, pc, u8, 1, pc ? std::vector<int64_t>{9, 1, 1} : std::vector<int64_t>{}}), 3u);
        EXPECT_EQ(run_dequant({true, pc, u8, 1, pc ? std::vector<int64_t>{1, 9, 1, 1} : std::vector<int64_t>{1}}), 3u);
        EXPECT_EQ(run_dequant({false, pc, u8, 1, pc ? std::vector<int64_t>{19} : std::vector<int64_t>{}}), 3u);
      }
  });
}

// The epilogue after the dequantize: a per-channel (per-column) bias Add, as an initializer or
// a Reshape of one (ISNet's quantize_dynamic twin), on either side of the Add, then Relu / Clip
// (in the conv's store) or Sigmoid (over the output): bit for bit the graph's Cast -> Mul -> Add
// -> activation, on the stride-1 (1x1) and the strided (stride 2, phase split) conv paths, the
// depthwise one and the MatMul, at every ISA level. The fused count is the nodes absorbed.
TEST(QuantOps, IntegerDequantizeFusionTakesBiasAndActivation) {
  at_every_isa([&] {
    for (bool u8 : {true, false})
      for (int64_t stride : {1, 2}) {
        DequantCase c{true, true, u8, 1, {9, 1, 1}};
        c.stride = stride;
        c.bias_shape = {9, 1, 1};
        EXPECT_EQ(run_dequant(c), 4u);
        c.act = "Relu";
        EXPECT_EQ(run_dequant(c), 5u);
        c.bias_reshaped = true, c.bias_first = true, c.act = "Clip";
        EXPECT_EQ(run_dequant(c), 5u);
        c.bias_shape = {1, 9, 1, 1}, c.bias_reshaped = false, c.act = "Sigmoid";
        EXPECT_EQ(run_dequant(c), 5u);
        c.bias_shape = {1}, c.act = "Relu";  // one value for every channel
        EXPECT_EQ(run_dequant(c), 5u);
      }
    DequantCase pw{true, false, true, 1, {}};
    pw.pointwise = true, pw.bias_shape = {9, 1, 1}, pw.act = "Relu";
    EXPECT_EQ(run_dequant(pw), 5u);
    for (bool u8 : {true, false})
      for (int64_t stride : {1, 2}) {
        DequantCase dw{true, true, u8, 1, {5, 1, 1}};
        dw.depthwise = true, dw.stride = stride, dw.bias_shape = {5, 1, 1}, dw.act = "Relu";
        EXPECT_EQ(run_dequant(dw), 5u);
        dw.act = "Clip", dw.bias_first = true;
        EXPECT_EQ(run_dequant(dw), 5u);
      }
    for (bool u8 : {true, false}) {
      DequantCase m{false, true, u8, 1, {19}};
      m.bias_shape = {19};
      EXPECT_EQ(run_dequant(m), 4u);
      m.act = "Relu", m.bias_first = true;
      EXPECT_EQ(run_dequant(m), 5u);
    }
  });
}

// The bias Add stays a node (the dequantize still fuses): a bias along the conv's width, a bias
// known only at run time, a MatMul bias with a leading 1 (rank 2 could change the output's shape).
TEST(QuantOps, IntegerDequantizeBiasRefusals) {
  DequantCase c{true, false, true, 1, {}};
  c.bias_shape = {11};
  EXPECT_EQ(run_dequant(c), 3u);
  c.bias_shape = {9, 1, 1}, c.bias_input = true;
  EXPECT_EQ(run_dequant(c), 3u);
  DequantCase m{false, false, true, 1, {}};
  m.bias_shape = {1, 19};
  EXPECT_EQ(run_dequant(m), 3u);
}

// Must not fuse: a Cast to double, a scale along another axis, a 2-D per-column scale on a
// MatMul (its rank could change the output's), the integer output read twice. The graph's
// result either way.
TEST(QuantOps, IntegerDequantizeFusionRefusals) {
  EXPECT_EQ(run_dequant({true, false, true, 11, {}}), 1u);
  EXPECT_EQ(run_dequant({true, true, true, 1, {11}}), 1u);  // along the output's width, not its channels
  EXPECT_EQ(run_dequant({false, true, true, 1, {1, 19}}), 1u);
  EXPECT_EQ(run_dequant({true, false, true, 1, {}, true}), 1u);
  EXPECT_EQ(run_dequant({false, false, false, 1, {}, true}), 1u);
}

// QuantizeLinear and DynamicQuantizeLinear over a long span (the 16- and 8-wide loops plus their
// tails) give the spec's bytes at every ISA level: round half to even of the float32 x / scale,
// then the zero point, then saturation; ties, values past either end, infinities, NaN (the
// bottom of the range, as on the SSE form).
TEST(QuantOps, QuantizeSpansAgreeAtEveryIsaLevel) {
  const size_t n = 1003;
  std::vector<float> xv(n);
  std::mt19937 r(7);
  std::uniform_real_distribution<float> u(-300.f, 300.f);
  for (size_t i = 0; i < n; ++i) xv[i] = i % 7 == 0 ? static_cast<float>(static_cast<int>(i % 41) - 20) + 0.5f : u(r);
  xv[3] = std::numeric_limits<float>::infinity(), xv[40] = -std::numeric_limits<float>::infinity();
  xv[77] = std::numeric_limits<float>::quiet_NaN(), xv[500] = 1e30f, xv[1001] = -1e30f;
  auto spec = [](float x, float scale, float zp, float lo, float hi) {
    const float v = std::nearbyint(x / scale) + zp;  // float32 division, ties to even (default mode)
    return std::isnan(v) ? lo : std::clamp(v, lo, hi);
  };
  at_every_isa([&] {
    for (DType t : {DType::Uint8, DType::Int8}) {
      const float scale = 0.5f, zp = t == DType::Uint8 ? 3.f : -5.f;
      GraphBuilder g(13);
      ValueId x = g.input("x", {static_cast<int64_t>(n)});
      ValueId y = g.node("QuantizeLinear", {x, g.f32("s", {}, {scale}),
                                            g.init<uint8_t>("z", {}, {static_cast<uint8_t>(static_cast<int>(zp))}, t)});
      g.outputs({y});
      rt::Session s(g.model());
      const auto o = s.run({make<float>(DType::Float, {static_cast<int64_t>(n)}, xv)})[0];
      const float lo = t == DType::Uint8 ? 0.f : -128.f, hi = t == DType::Uint8 ? 255.f : 127.f;
      for (size_t i = 0; i < n; ++i) {
        const int got = t == DType::Uint8 ? o.ptr<uint8_t>()[i] : o.ptr<int8_t>()[i];
        ASSERT_EQ(got, static_cast<int>(spec(xv[i], scale, zp, lo, hi)))
            << dtype_name(t) << " at " << i << " x=" << xv[i];
      }
    }
    // DynamicQuantizeLinear (finite input: its range must be finite).
    std::vector<float> fin(xv);
    for (float& v : fin)
      if (!std::isfinite(v) || std::fabs(v) > 1e3f) v = 0.25f;
    GraphBuilder g(11);
    ValueId x = g.input("x", {static_cast<int64_t>(n)});
    g.outputs(g.node_n("DynamicQuantizeLinear", {x}, {}, 3));
    rt::Session s(g.model());
    const auto o = s.run({make<float>(DType::Float, {static_cast<int64_t>(n)}, fin)});
    const float scale = o[1].ptr<float>()[0], zp = static_cast<float>(o[2].ptr<uint8_t>()[0]);
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(o[0].ptr<uint8_t>()[i], static_cast<uint8_t>(spec(fin[i], scale, zp, 0.f, 255.f))) << "at " << i;
  });
}

// DynamicQuantizeLinear's range (vectorized min/max, 4 / 16 lanes and threaded chunks): the
// scale and zero point the spec's formulas give on the extremes, wherever they sit (vector body,
// tail, another thread's chunk), at every ISA level; NaN elements do not move the range.
TEST(QuantOps, DynamicQuantizeLinearRangeAtEveryIsaLevel) {
  std::mt19937 r(11);
  std::uniform_real_distribution<float> u(-3.f, 5.f);
  for (size_t n : {size_t{7}, size_t{1003}, size_t{200003}}) {
    std::vector<float> xv(n);
    for (float& v : xv) v = u(r);
    for (size_t where : {size_t{0}, n / 2 + 1, n - 1}) {
      std::vector<float> x = xv;
      x[where] = -7.25f;
      x[(where + n / 3) % n] = 9.5f;
      if (n > 8) x[(where + 5) % n] = std::numeric_limits<float>::quiet_NaN();
      float lo = 0, hi = 0;
      for (float v : x)
        if (!std::isnan(v)) lo = std::min(lo, v), hi = std::max(hi, v);
      const float want_scale = (hi - lo) / 255.f;
      const float want_zp = std::clamp(std::nearbyint((0.f - lo) / want_scale), 0.f, 255.f);
      at_every_isa([&] {
        GraphBuilder g(11);
        ValueId xi = g.input("x", {static_cast<int64_t>(n)});
        g.outputs(g.node_n("DynamicQuantizeLinear", {xi}, {}, 3));
        rt::Session s(g.model());
        const auto o = s.run({make<float>(DType::Float, {static_cast<int64_t>(n)}, x)});
        ASSERT_EQ(o[1].ptr<float>()[0], want_scale) << "n=" << n << " extremes at " << where;
        ASSERT_EQ(o[2].ptr<uint8_t>()[0], static_cast<uint8_t>(want_zp)) << "n=" << n << " extremes at " << where;
      });
    }
  }
}

namespace {

// Float inputs for DynamicQuantizeLinear: 0 normal, 1 with NaN and +-inf (an infinite range: the
// scale is inf, every finite element quantizes to the zero point's side), 2 all equal, 3 all zero
// (scale 0: the zero point everywhere).
std::vector<float> dq_input(int64_t n, int kind) {
  std::normal_distribution<float> nd(0.2f, 3.f);
  std::vector<float> x(static_cast<size_t>(n));
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = kind == 2 ? -2.5f : kind == 3 ? 0.f : nd(rng);
    if (kind == 1 && i % 13 == 4) x[i] = std::numeric_limits<float>::quiet_NaN();
    if (kind == 1 && i % 31 == 7)
      x[i] = i % 2 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
  }
  return x;
}

// Runs g fused and unfused on `ins`, checks every output equal byte for byte, returns the fused
// session's fused_count.
size_t fused_equals_plain(const Model& m, const std::vector<rt::Tensor>& ins) {
  rt::Session fused(m);
  rt::SessionOptions off;
  off.fuse_activations = false;
  rt::Session plain(m, off);
  const auto a = fused.run(ins), e = plain.run(ins);
  EXPECT_EQ(a.size(), e.size());
  for (size_t i = 0; i < std::min(a.size(), e.size()); ++i) {
    EXPECT_EQ(a[i].shape, e[i].shape) << "output " << i;
    EXPECT_EQ(a[i].dtype, e[i].dtype) << "output " << i;
    EXPECT_EQ(a[i].bytes(), e[i].bytes()) << "output " << i;
    EXPECT_EQ(std::memcmp(a[i].data, e[i].data, std::min(a[i].bytes(), e[i].bytes())), 0)
        << "fused and unfused output " << i << " differ";
  }
  return fused.fused_count();
}

}  // namespace

// DynamicQuantizeLinear -> ConvInteger with the uint8 tensor never written (the conv quantizes x
// while packing it): the int32 output equals the graph's byte for byte on every conv family
// (1-D to 3-D, padding, strides, dilations, groups, depthwise, 1x1 and unpadded 3x3), for normal,
// NaN/inf, all-equal and all-zero inputs, at every ISA level; the fusion is counted once.
TEST(QuantOps, DynamicQuantizeFusedIntoConvInteger) {
  const std::vector<ConvCase> cases = {
      {{1, 3, 7, 9}, {8, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {{2, 4, 11, 10}, {6, 2, 3, 2}, {2, 1}, {2, 1}, {0, 2, 1, 0}, 2},               // groups, dilation, uneven pads
      {{1, 16, 5, 5}, {40, 16, 1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}},                 // pointwise: quantized per block
      {{2, 6, 17, 13}, {11, 6, 1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}},                 // pointwise, two images
      {{1, 5, 9, 8}, {7, 5, 3, 3}, {1, 1}, {1, 1}, {0, 0, 0, 0}},                    // unpadded 3x3: quantized once
      {{1, 5, 20}, {7, 5, 4}, {3}, {2}, {2, 1}},                                     // 1-D
      {{1, 4, 6, 6}, {4, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 4},                 // depthwise
      {{1, 3, 13, 11}, {5, 3, 3, 3}, {1, 1}, {4, 4}, {4, 4, 4, 4}},                  // ISNet's dilated 3x3
      {{1, 3, 12, 15}, {4, 3, 3, 3}, {2, 2}, {1, 1}, {1, 0, 2, 1}},                  // stride 2, uneven pads
      {{1, 8, 14, 14}, {12, 8, 1, 1}, {2, 2}, {1, 1}, {0, 0, 0, 0}},                 // strided 1x1
      {{1, 2, 4, 5, 6}, {3, 2, 2, 3, 2}, {1, 2, 1}, {2, 1, 1}, {1, 0, 1, 0, 1, 0}},  // 3-D
  };
  at_every_isa([&] {
    for (const ConvCase& cc : cases)
      for (DType tw : {DType::Int8, DType::Uint8})
        for (int kind = 0; kind < 4; ++kind) {
          int64_t nx = 1, nw = 1;
          for (int64_t d : cc.x_shape) nx *= d;
          for (int64_t d : cc.w_shape) nw *= d;
          const bool per_channel = kind % 2 == 1;
          std::vector<uint8_t> wz(per_channel ? static_cast<size_t>(cc.w_shape[0]) : 1);
          for (auto& z : wz) z = random_zp(tw);
          GraphBuilder g(11);
          ValueId X = g.input("x", cc.x_shape);
          auto q = g.node_n("DynamicQuantizeLinear", {X}, {}, 3);
          ValueId W = g.init<uint8_t>("w", cc.w_shape, random_bytes(static_cast<size_t>(nw)), tw);
          ValueId WZ =
              g.init<uint8_t>("wz", per_channel ? std::vector<int64_t>{cc.w_shape[0]} : std::vector<int64_t>{}, wz, tw);
          g.outputs({g.node("ConvInteger", {q[0], W, q[2], WZ}, cc.attrs())});
          SCOPED_TRACE("x" + rt::shape_str(cc.x_shape) + " kind " + std::to_string(kind));
          EXPECT_EQ(fused_equals_plain(g.model(), {make<float>(DType::Float, cc.x_shape, dq_input(nx, kind))}), 1u);
        }
  });
}

// The MatMulInteger side: bare (int32 out) with 2-D and 3-D A, a constant B and a B given at run
// time (2-D; and batched 3-D, where A is quantized first); one DynamicQuantizeLinear read by
// three projections each dequantized, biased and (one) activated as quantize_dynamic writes BERT's
// Q, K, V (not fused: each reader would quantize again); every input kind, at every ISA level.
TEST(QuantOps, DynamicQuantizeFusedIntoMatMulInteger) {
  at_every_isa([&] {
    for (int kind = 0; kind < 4; ++kind) {
      SCOPED_TRACE("kind " + std::to_string(kind));
      for (const std::vector<int64_t>& as : {std::vector<int64_t>{9, 70}, std::vector<int64_t>{2, 7, 37}}) {
        const int64_t K = as.back(), N = 21;
        int64_t na = 1;
        for (int64_t d : as) na *= d;
        for (int b_kind = 0; b_kind < 3; ++b_kind) {  // constant, run-time 2-D, run-time batched
          GraphBuilder g(11);
          ValueId A = g.input("a", as);
          auto q = g.node_n("DynamicQuantizeLinear", {A}, {}, 3);
          const std::vector<int64_t> bs =
              b_kind == 2 ? std::vector<int64_t>{as.size() == 3 ? as[0] : 1, K, N} : std::vector<int64_t>{K, N};
          int64_t nb = 1;
          for (int64_t d : bs) nb *= d;
          const auto bv = random_bytes(static_cast<size_t>(nb));
          ValueId B = b_kind == 0 ? g.init<uint8_t>("b", bs, bv, DType::Int8) : g.input("b", bs, DType::Int8);
          g.outputs({g.node("MatMulInteger", {q[0], B, q[2], g.init<uint8_t>("bz", {}, {uint8_t(5)}, DType::Int8)})});
          std::vector<rt::Tensor> ins{make<float>(DType::Float, as, dq_input(na, kind))};
          if (b_kind) ins.push_back(bytes_tensor(DType::Int8, bs, bv));
          EXPECT_EQ(fused_equals_plain(g.model(), ins), 1u) << "B kind " << b_kind;
        }
      }
      // Q, K, V from one quantized activation.
      const int64_t M = 2, S = 9, K = 48, N = 40;
      GraphBuilder g(11);
      ValueId X = g.input("x", {M, S, K});
      auto q = g.node_n("DynamicQuantizeLinear", {X}, {}, 3);
      std::vector<ValueId> outs;
      std::normal_distribution<float> nd(0.f, 1.f);
      for (int p = 0; p < 3; ++p) {
        const std::string t = std::to_string(p);
        std::vector<float> ws(N), bias(N);
        for (auto& v : ws) v = std::fabs(nd(rng)) * 0.01f + 1e-3f;
        for (auto& v : bias) v = nd(rng);
        std::vector<uint8_t> bz(N, 0);
        ValueId acc = g.node("MatMulInteger", {q[0], g.init<uint8_t>("b" + t, {K, N}, random_bytes(K * N), DType::Int8),
                                               q[2], g.init<uint8_t>("bz" + t, {N}, bz, DType::Int8)});
        ValueId f = g.node("Cast", {acc}, {NewAttr::Int("to", 1)});
        ValueId y = g.node("Mul", {f, g.node("Mul", {q[1], g.f32("ws" + t, {N}, ws)})});
        y = g.node("Add", {y, g.f32("bias" + t, {N}, bias)});
        if (p == 2) y = g.node("Relu", {y});
        outs.push_back(y);
      }
      g.outputs(outs);
      // Per projection Cast, Mul, Add (+ Relu); the quantize stays a step of its own (three
      // readers would quantize x three times).
      EXPECT_EQ(fused_equals_plain(g.model(), {make<float>(DType::Float, {M, S, K}, dq_input(M * S * K, kind))}), 10u);
    }
  });
}

// Where the uint8 tensor has another reader, is a graph output, or feeds a reader with another
// zero point, the op writes it as before (no fusion) and the result is the graph's.
TEST(QuantOps, DynamicQuantizeFusionRefusals) {
  const std::vector<int64_t> xs{1, 4, 6, 7}, ws{5, 4, 1, 1};
  for (int variant = 0; variant < 3; ++variant) {
    GraphBuilder g(11);
    ValueId X = g.input("x", xs);
    auto q = g.node_n("DynamicQuantizeLinear", {X}, {}, 3);
    ValueId W = g.init<uint8_t>("w", ws, random_bytes(20), DType::Int8);
    ValueId xz = variant == 2 ? g.init<uint8_t>("xz", {}, {uint8_t(128)}, DType::Uint8) : q[2];
    ValueId acc = g.node("ConvInteger", {q[0], W, xz});
    if (variant == 0) g.outputs({acc, q[0]});                                             // a graph output
    if (variant == 1) g.outputs({acc, g.node("Cast", {q[0]}, {NewAttr::Int("to", 1)})});  // another reader
    if (variant == 2) g.outputs({acc});                                                   // another zero point
    EXPECT_EQ(fused_equals_plain(g.model(), {make<float>(DType::Float, xs, dq_input(168, 0))}), 0u) << variant;
  }
}

// QLinearMatMul requantizes in gemm8's store (no int32 product in memory): against the int64
// reference requantized by the spec's rule (float32 a_scale * b_scale / y_scale, round half to
// even, saturation), uint8 and int8 A / B / Y, per-tensor and per-column b scales and zero
// points, 2-D and 3-D A, a constant B and a run-time (2-D and batched) one; ties and both ends
// saturating; at every ISA level.
TEST(QuantOps, QLinearMatMulRequantizesInTheStore) {
  size_t ties = 0, saturated = 0;
  at_every_isa([&] {
    for (DType ta : {DType::Uint8, DType::Int8})
      for (DType tb : {DType::Int8, DType::Uint8})
        for (DType ty : {DType::Uint8, DType::Int8})
          for (bool per_col : {false, true})
            for (int b_kind = 0; b_kind < 3; ++b_kind) {
              const std::vector<int64_t> as =
                  b_kind == 2 ? std::vector<int64_t>{2, 9, 37} : std::vector<int64_t>{3, 13, 37};
              const int64_t K = 37, N = 35, rows = as[0] * as[1];
              const std::vector<int64_t> bs = b_kind == 2 ? std::vector<int64_t>{2, K, N} : std::vector<int64_t>{K, N};
              const int64_t batches = b_kind == 2 ? 2 : 1;
              auto a = random_bytes(static_cast<size_t>(rows * K)),
                   b = random_bytes(static_cast<size_t>(batches * K * N));
              const uint8_t az = random_zp(ta);
              std::vector<uint8_t> bz(per_col ? static_cast<size_t>(N) : 1);
              for (auto& z : bz) z = random_zp(tb);
              std::vector<float> bsc(per_col ? static_cast<size_t>(N) : 1);
              for (size_t j = 0; j < bsc.size(); ++j) bsc[j] = j % 3 == 0 ? 0.25f : j % 3 == 1 ? 0.0021f : 3.3e-4f;
              const float a_scale = 0.5f, y_scale = 0.25f;  // multiplier 0.5 * 0.25 / 0.25: ties
              const uint8_t yz = ty == DType::Uint8 ? (per_col ? 3 : 250) : static_cast<uint8_t>(per_col ? -100 : 100);
              GraphBuilder g(10);
              ValueId A = g.input("a", as, ta);
              ValueId B = b_kind == 0 ? g.init<uint8_t>("b", bs, b, tb) : g.input("b", bs, tb);
              g.outputs(
                  {g.node("QLinearMatMul",
                          {A, g.f32("as", {}, {a_scale}), g.init<uint8_t>("az", {}, {az}, ta), B,
                           g.f32("bs", per_col ? std::vector<int64_t>{N} : std::vector<int64_t>{}, bsc),
                           g.init<uint8_t>("bz", per_col ? std::vector<int64_t>{N} : std::vector<int64_t>{}, bz, tb),
                           g.f32("ys", {}, {y_scale}), g.init<uint8_t>("yz", {}, {yz}, ty)})});
              rt::Session s(g.model());
              std::vector<rt::Tensor> ins{bytes_tensor(ta, as, a)};
              if (b_kind) ins.push_back(bytes_tensor(tb, bs, b));
              const auto y = s.run(ins)[0];
              ASSERT_EQ(y.dtype, ty);
              const double lo = ty == DType::Int8 ? -128 : 0, hi = ty == DType::Int8 ? 127 : 255;
              const int64_t per_batch = rows / batches;
              for (int64_t r = 0; r < rows; ++r)
                for (int64_t n = 0; n < N; ++n) {
                  const int64_t bb = b_kind == 2 ? r / per_batch : 0;
                  int64_t acc = 0;
                  for (int64_t k = 0; k < K; ++k)
                    acc += (val(a, static_cast<size_t>(r * K + k), ta) - val({az}, 0, ta)) *
                           (val(b, static_cast<size_t>(bb * K * N + k * N + n), tb) -
                            val(bz, per_col ? static_cast<size_t>(n) : 0, tb));
                  const float mult = a_scale * bsc[per_col ? static_cast<size_t>(n) : 0] / y_scale;
                  const float prod = static_cast<float>(static_cast<int32_t>(acc)) * mult;
                  ties += std::fabs(prod - std::trunc(prod)) == 0.5f;
                  const double v = std::clamp(
                      std::nearbyint(static_cast<double>(prod)) + static_cast<double>(val({yz}, 0, ty)), lo, hi);
                  saturated += v == lo || v == hi;
                  const int64_t got = ty == DType::Int8 ? y.ptr<int8_t>()[r * N + n] : y.ptr<uint8_t>()[r * N + n];
                  ASSERT_EQ(got, static_cast<int64_t>(v)) << "b kind " << b_kind << " at " << r << "," << n;
                }
            }
  });
  EXPECT_GT(ties, 0u);
  EXPECT_GT(saturated, 0u);
}
