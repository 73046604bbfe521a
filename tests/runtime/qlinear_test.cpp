// ONNX Runtime's QOperator contrib ops (runtime/ops/qlinear.cpp): QLinearAdd, QLinearMul,
// QLinearSigmoid, QLinearLeakyRelu, QLinearGlobalAveragePool, QLinearAveragePool, QLinearConcat.
// Each against (a) a scalar reference written here from the contrib spec (dequantize, the float
// op, quantize: round half to even, zero point, saturation), and (b) the same graph spelled as
// QDQ (DequantizeLinear -> float op -> QuantizeLinear), bit for bit, with uint8 and int8, zero
// points that are not 0 and values that saturate; then ONNX Runtime 1.30 on the contrib graph.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "analysis/shapes.h"
#include "io/model_io.h"
#include "runtime/runtime.h"
#include "tests/common/graph_builder.h"
#include "tests/common/models.h"
#include "tests/runtime/ort_run.h"
#include "tests/runtime/tensors.h"

using namespace onnxforge;
using onnxforge::test::GraphBuilder;
using onnxforge::test::make;
using onnxforge::test::values;

namespace {

struct Q {
  DType type;
  float scale;
  int32_t zp;
};

int32_t qmin(DType t) { return t == DType::Uint8 ? 0 : -128; }
int32_t qmax(DType t) { return t == DType::Uint8 ? 255 : 127; }

// The spec's quantization of one float: x / scale in float32, round half to even, + zp, saturate.
int32_t quantize_ref(float x, Q q) {
  const float r = std::nearbyint(x / q.scale);
  const float v = r + static_cast<float>(q.zp);
  return static_cast<int32_t>(std::min<float>(std::max<float>(v, qmin(q.type)), qmax(q.type)));
}
float dequantize_ref(int32_t v, Q q) { return static_cast<float>(v - q.zp) * q.scale; }

rt::Tensor random_q(DType t, rt::Shape shape, std::mt19937& rng) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::uniform_int_distribution<int32_t> d(qmin(t), qmax(t));
  if (t == DType::Uint8) {
    std::vector<uint8_t> v(static_cast<size_t>(n));
    for (auto& x : v) x = static_cast<uint8_t>(d(rng));
    return make<uint8_t>(t, shape, v);
  }
  std::vector<int8_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<int8_t>(d(rng));
  return make<int8_t>(t, shape, v);
}

std::vector<int32_t> ints(const rt::Tensor& t) {
  std::vector<int32_t> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(static_cast<int32_t>(t.get_i64(i)));
  return v;
}

ValueId scale_of(GraphBuilder& m, const std::string& name, Q q) {
  return m.init(name + "_s", {}, std::vector<float>{q.scale}, DType::Float);
}
ValueId zp_of(GraphBuilder& m, const std::string& name, Q q) {
  if (q.type == DType::Uint8) return m.init(name + "_z", {}, std::vector<uint8_t>{static_cast<uint8_t>(q.zp)}, q.type);
  return m.init(name + "_z", {}, std::vector<int8_t>{static_cast<int8_t>(q.zp)}, q.type);
}
ValueId contrib(GraphBuilder& m, const std::string& op, std::vector<ValueId> ins, std::vector<NewAttr> attrs = {}) {
  return m.node_n(op, std::move(ins), std::move(attrs), 1, "", "com.microsoft")[0];
}
GraphBuilder with_contrib() {
  GraphBuilder m(13);
  m.model().opsets.push_back({intern("com.microsoft"), 1, true});
  return m;
}
ValueId dq(GraphBuilder& m, ValueId x, const std::string& name, Q q) {
  return m.node("DequantizeLinear", {x, scale_of(m, name + "dq", q), zp_of(m, name + "dq", q)});
}
ValueId qz(GraphBuilder& m, ValueId x, const std::string& name, Q q) {
  return m.node("QuantizeLinear", {x, scale_of(m, name + "q", q), zp_of(m, name + "q", q)});
}

struct Built {
  GraphBuilder contrib, qdq;
  std::vector<std::pair<std::string, rt::Tensor>> feeds;
};

std::vector<int32_t> run(GraphBuilder& m, const std::vector<std::pair<std::string, rt::Tensor>>& feeds) {
  rt::Session s(m.model());
  std::vector<rt::Tensor> ins;
  for (const auto& f : feeds) ins.push_back(f.second);
  return ints(s.run(ins)[0]);
}

// Runs the contrib graph, its QDQ spelling and the scalar reference; all three must agree. Then
// ONNX Runtime, where one quantization step apart is allowed (its MLAS kernels fold the scales)
// and the count of such elements is printed.
void check(Built& b, const std::vector<int32_t>& ref, const std::string& tag) {
  SCOPED_TRACE(tag);
  const auto ours = run(b.contrib, b.feeds), qdq = run(b.qdq, b.feeds);
  ASSERT_EQ(ours.size(), ref.size());
  size_t off_ref = 0, off_qdq = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    off_ref += ours[i] != ref[i];
    off_qdq += ours[i] != qdq[i];
    if (ours[i] != ref[i] && off_ref < 4) ADD_FAILURE() << "element " << i << ": " << ours[i] << " want " << ref[i];
  }
  EXPECT_EQ(off_ref, 0u) << "against the scalar reference";
  EXPECT_EQ(off_qdq, 0u) << "against the QDQ spelling";
  if (!test::ort_peer_installed()) return;
  infer_shapes(b.contrib.model());
  const auto path = test::temp_dir("qlinear_" + tag) / "m.onnx";
  save_model(b.contrib.model(), path);
  std::string error;
  auto theirs = test::ort_run(path, b.feeds, &error);
  ASSERT_TRUE(error.empty()) << error;
  ASSERT_EQ(theirs.size(), 1u);
  const auto t = ints(theirs.begin()->second);
  ASSERT_EQ(t.size(), ours.size());
  size_t apart = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_LE(std::abs(t[i] - ours[i]), 1) << "element " << i;
    apart += t[i] != ours[i];
  }
  std::printf("[ %s ] ONNX Runtime: %zu of %zu elements one step apart\n", tag.c_str(), apart, t.size());
}

const Q kTypes[][3] = {
    // (a, b, out): uint8 and int8, zero points not 0, scales that saturate
    {{DType::Uint8, 0.05f, 128}, {DType::Uint8, 0.02f, 100}, {DType::Uint8, 0.04f, 120}},
    {{DType::Int8, 0.03f, -5}, {DType::Int8, 0.07f, 9}, {DType::Int8, 0.02f, 3}},
};

}  // namespace

// QLinearAdd / QLinearMul of a and b (contrib) beside its QDQ spelling, on random inputs.
Built binary_pair(const Q& qa, const Q& qb, const Q& qc, bool mul, const rt::Shape& sa, const rt::Shape& sb,
                  std::mt19937& rng) {
  Built b{with_contrib(), GraphBuilder(13), {}};
  const rt::Tensor ta = random_q(qa.type, sa, rng), tb = random_q(qb.type, sb, rng);
  b.feeds = {{"a", ta}, {"b", tb}};
  const std::vector<int64_t> da(sa.begin(), sa.end()), db(sb.begin(), sb.end());
  for (GraphBuilder* m : {&b.contrib, &b.qdq}) {
    ValueId a = m->input("a", da, qa.type), bb = m->input("b", db, qb.type);
    if (m == &b.contrib) {
      m->outputs({contrib(*m, mul ? "QLinearMul" : "QLinearAdd",
                          {a, scale_of(*m, "a", qa), zp_of(*m, "a", qa), bb, scale_of(*m, "b", qb), zp_of(*m, "b", qb),
                           scale_of(*m, "c", qc), zp_of(*m, "c", qc)})});
    } else {
      m->outputs({qz(*m, m->node(mul ? "Mul" : "Add", {dq(*m, a, "a", qa), dq(*m, bb, "b", qb)}), "c", qc)});
    }
  }
  return b;
}

TEST(QLinearOps, AddAndMulWithBroadcasting) {
  std::mt19937 rng(1);
  for (const auto& p : kTypes)
    for (int mul = 0; mul < 2; ++mul) {
      const Q qa = p[0], qb = p[1], qc = mul ? Q{p[2].type, 0.3f, p[2].zp} : p[2];
      // b broadcasts over batch and axis 2
      Built b = binary_pair(qa, qb, qc, mul, {2, 3, 4, 5}, {3, 1, 5}, rng);
      const auto va = ints(b.feeds[0].second), vb = ints(b.feeds[1].second);
      std::vector<int32_t> ref;
      for (int64_t n = 0; n < 2; ++n)
        for (int64_t c = 0; c < 3; ++c)
          for (int64_t h = 0; h < 4; ++h)
            for (int64_t w = 0; w < 5; ++w) {
              const float x = dequantize_ref(va[static_cast<size_t>(((n * 3 + c) * 4 + h) * 5 + w)], qa);
              const float y = dequantize_ref(vb[static_cast<size_t>(c * 5 + w)], qb);
              ref.push_back(quantize_ref(mul ? x * y : x + y, qc));
            }
      check(b, ref, std::string(mul ? "mul_" : "add_") + (qa.type == DType::Uint8 ? "u8" : "s8"));
    }
}

// Same shapes (the residual adds of MobileNetV2 QOperator, computed block by block without float
// tensors): the same bytes as the QDQ graph and the reference, over more than one 1024-element
// block, every type pairing; and a ResNet-sized one whose blocks are split across threads (16
// blocks per chunk: 36 blocks make three chunks).
TEST(QLinearOps, AddAndMulOfSameShapesInBlocks) {
  std::mt19937 rng(7);
  for (const rt::Shape& s : {rt::Shape{1, 24, 9, 11}, rt::Shape{1, 64, 24, 24}})  // 2376 and 36864 elements
    for (const auto& p : kTypes)
      for (int mul = 0; mul < 2; ++mul) {
        const Q qa = p[0], qb = p[1], qc = mul ? Q{p[2].type, 0.3f, p[2].zp} : p[2];
        Built b = binary_pair(qa, qb, qc, mul, s, s, rng);
        const auto va = ints(b.feeds[0].second), vb = ints(b.feeds[1].second);
        std::vector<int32_t> ref;
        for (size_t i = 0; i < va.size(); ++i) {
          const float x = dequantize_ref(va[i], qa), y = dequantize_ref(vb[i], qb);
          ref.push_back(quantize_ref(mul ? x * y : x + y, qc));
        }
        check(b, ref,
              std::string(mul ? "mul_same_" : "add_same_") + (qa.type == DType::Uint8 ? "u8_" : "s8_") +
                  std::to_string(va.size()));
      }
}

TEST(QLinearOps, SigmoidAndLeakyReluOverEveryInputValue) {
  for (const auto& p : kTypes)
    for (int leaky = 0; leaky < 2; ++leaky) {
      const Q qx = p[0], qy = leaky ? p[2] : Q{p[2].type, 1.f / 256, qmin(p[2].type)};
      std::vector<int32_t> all;  // every 8-bit value
      for (int32_t v = qmin(qx.type); v <= qmax(qx.type); ++v) all.push_back(v);
      rt::Tensor tx = qx.type == DType::Uint8
                          ? make<uint8_t>(qx.type, {1, 256}, std::vector<uint8_t>(all.begin(), all.end()))
                          : make<int8_t>(qx.type, {1, 256}, std::vector<int8_t>(all.begin(), all.end()));
      Built b{with_contrib(), GraphBuilder(13), {{"x", tx}}};
      const float alpha = 0.1f;
      for (GraphBuilder* m : {&b.contrib, &b.qdq}) {
        ValueId x = m->input("x", {1, 256}, qx.type);
        std::vector<NewAttr> attrs;
        if (leaky) attrs.push_back(NewAttr::Float("alpha", alpha));
        if (m == &b.contrib) {
          m->outputs({contrib(*m, leaky ? "QLinearLeakyRelu" : "QLinearSigmoid",
                              {x, scale_of(*m, "x", qx), zp_of(*m, "x", qx), scale_of(*m, "y", qy), zp_of(*m, "y", qy)},
                              attrs)});
        } else {
          m->outputs({qz(*m, m->node(leaky ? "LeakyRelu" : "Sigmoid", {dq(*m, x, "x", qx)}, attrs), "y", qy)});
        }
      }
      std::vector<int32_t> ref;
      for (int32_t v : all) {
        const float f = dequantize_ref(v, qx);
        // (Sigmoid in double: a float sigmoid within 2.3 ulps may round a value near a step
        // boundary the other way; none of these 256 is that close.)
        ref.push_back(
            quantize_ref(leaky ? (f < 0 ? alpha * f : f) : static_cast<float>(1 / (1 + std::exp(-double(f)))), qy));
      }
      check(b, ref, std::string(leaky ? "leaky_" : "sigmoid_") + (qx.type == DType::Uint8 ? "u8" : "s8"));
    }
}

TEST(QLinearOps, GlobalAndWindowedAveragePoolInBothLayouts) {
  std::mt19937 rng(2);
  for (const auto& p : kTypes)
    for (int global = 0; global < 2; ++global)
      for (int cl = 0; cl < 2; ++cl) {
        const Q qx = p[0], qy = p[2];
        const int64_t N = 2, C = 3, H = 5, W = 6;
        const rt::Shape xs = cl ? rt::Shape{N, H, W, C} : rt::Shape{N, C, H, W};
        const rt::Tensor tx = random_q(qx.type, xs, rng);
        Built b{with_contrib(), GraphBuilder(13), {{"x", tx}}};
        std::vector<NewAttr> pool;
        if (!global)
          pool = {NewAttr::Ints("kernel_shape", {3, 3}), NewAttr::Ints("pads", {1, 1, 1, 1}),
                  NewAttr::Ints("strides", {2, 2}), NewAttr::Int("count_include_pad", 0)};
        for (GraphBuilder* m : {&b.contrib, &b.qdq}) {
          ValueId x = m->input("x", std::vector<int64_t>(xs.begin(), xs.end()), qx.type);
          if (m == &b.contrib) {
            std::vector<NewAttr> attrs = pool;
            attrs.push_back(NewAttr::Int("channels_last", cl));
            m->outputs({contrib(
                *m, global ? "QLinearGlobalAveragePool" : "QLinearAveragePool",
                {x, scale_of(*m, "x", qx), zp_of(*m, "x", qx), scale_of(*m, "y", qy), zp_of(*m, "y", qy)}, attrs)});
          } else {
            ValueId f = dq(*m, x, "x", qx);
            if (cl) f = m->node("Transpose", {f}, {NewAttr::Ints("perm", {0, 3, 1, 2})});
            f = m->node(global ? "GlobalAveragePool" : "AveragePool", {f}, pool);
            if (cl) f = m->node("Transpose", {f}, {NewAttr::Ints("perm", {0, 2, 3, 1})});
            m->outputs({qz(*m, f, "y", qy)});
          }
        }
        // Reference: the mean of the dequantized window (float sums in window order), quantized.
        const auto vx = ints(tx);
        auto at = [&](int64_t n, int64_t c, int64_t h, int64_t w) {
          return dequantize_ref(
              vx[static_cast<size_t>(cl ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w)], qx);
        };
        const int64_t OH = global ? 1 : 3, OW = global ? 1 : 3;
        std::vector<float> mean(static_cast<size_t>(N * C * OH * OW));
        for (int64_t n = 0; n < N; ++n)
          for (int64_t c = 0; c < C; ++c)
            for (int64_t oh = 0; oh < OH; ++oh)
              for (int64_t ow = 0; ow < OW; ++ow) {
                double s = 0;
                int cnt = 0;
                for (int64_t h = global ? 0 : oh * 2 - 1; h < (global ? H : oh * 2 + 2); ++h)
                  for (int64_t w = global ? 0 : ow * 2 - 1; w < (global ? W : ow * 2 + 2); ++w)
                    if (h >= 0 && h < H && w >= 0 && w < W) s += at(n, c, h, w), ++cnt;
                const size_t o =
                    static_cast<size_t>(cl ? ((n * OH + oh) * OW + ow) * C + c : ((n * C + c) * OH + oh) * OW + ow);
                mean[o] = static_cast<float>(s / cnt);
              }
        std::vector<int32_t> ref;
        for (float f : mean) ref.push_back(quantize_ref(f, qy));
        // The float mean is summed in float32 by the kernels: where it lands within a float
        // rounding of a step boundary the reference (summed in double) may differ; count those.
        const auto ours = run(b.contrib, b.feeds);
        ASSERT_EQ(ours.size(), ref.size());
        for (size_t i = 0; i < ref.size(); ++i) {
          const float exact = mean[i] / qy.scale;
          const bool near_tie = std::fabs(exact - std::floor(exact) - 0.5f) < 1e-4f;
          if (!near_tie) {
            EXPECT_EQ(ours[i], ref[i]) << "element " << i;
          } else {
            ref[i] = ours[i];
          }
        }
        check(b, ref,
              std::string(global ? "gap_" : "avgpool_") + (cl ? "nhwc_" : "nchw_") +
                  (qx.type == DType::Uint8 ? "u8" : "s8"));
      }
}

TEST(QLinearOps, ConcatRequantizesEachInput) {
  std::mt19937 rng(3);
  for (const auto& p : kTypes) {
    const Q q0 = p[0], q1 = p[2], qy = p[2];  // input 1 has Y's parameters: copied as is
    const rt::Tensor t0 = random_q(q0.type, {2, 3, 4}, rng), t1 = random_q(q1.type, {2, 5, 4}, rng);
    Built b{with_contrib(), GraphBuilder(13), {{"x0", t0}, {"x1", t1}}};
    for (GraphBuilder* m : {&b.contrib, &b.qdq}) {
      ValueId x0 = m->input("x0", {2, 3, 4}, q0.type), x1 = m->input("x1", {2, 5, 4}, q1.type);
      if (m == &b.contrib) {
        m->outputs({contrib(*m, "QLinearConcat",
                            {scale_of(*m, "y", qy), zp_of(*m, "y", qy), x0, scale_of(*m, "x0", q0), zp_of(*m, "x0", q0),
                             x1, scale_of(*m, "x1", q1), zp_of(*m, "x1", q1)},
                            {NewAttr::Int("axis", 1)})});
      } else {
        m->outputs({qz(*m, m->node("Concat", {dq(*m, x0, "x0", q0), dq(*m, x1, "x1", q1)}, {NewAttr::Int("axis", 1)}),
                       "y", qy)});
      }
    }
    const auto v0 = ints(t0), v1 = ints(t1);
    std::vector<int32_t> ref;
    for (int64_t n = 0; n < 2; ++n) {
      for (int64_t i = 0; i < 12; ++i)
        ref.push_back(quantize_ref(dequantize_ref(v0[static_cast<size_t>(n * 12 + i)], q0), qy));
      for (int64_t i = 0; i < 20; ++i) ref.push_back(v1[static_cast<size_t>(n * 20 + i)]);
    }
    check(b, ref, std::string("concat_") + (q0.type == DType::Uint8 ? "u8" : "s8"));
  }
}

TEST(QLinearOps, BadParametersAreClearErrors) {
  auto expect_error = [](GraphBuilder& m, const rt::Tensor& x, const std::string& needle) {
    try {
      rt::Session s(m.model());
      s.run({x});
      ADD_FAILURE() << "no error, expected one naming " << needle;
    } catch (const Error& e) { EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what(); }
  };
  const Q q{DType::Uint8, 0.1f, 3};
  {  // a per-channel scale: the contrib ops take one per tensor
    GraphBuilder m = with_contrib();
    ValueId x = m.input("x", {1, 4}, DType::Uint8);
    ValueId s4 = m.init("s4", {4}, std::vector<float>{1, 2, 3, 4}, DType::Float);
    m.outputs({contrib(m, "QLinearSigmoid", {x, s4, zp_of(m, "x", q), scale_of(m, "y", q), zp_of(m, "y", q)})});
    expect_error(m, make<uint8_t>(DType::Uint8, {1, 4}, {1, 2, 3, 4}), "scale");
  }
  {  // a float input
    GraphBuilder m = with_contrib();
    ValueId x = m.input("x", {1, 4});
    m.outputs({contrib(m, "QLinearLeakyRelu",
                       {x, scale_of(m, "x", q), zp_of(m, "x", q), scale_of(m, "y", q), zp_of(m, "y", q)})});
    expect_error(m, make<float>(DType::Float, {1, 4}, {1, 2, 3, 4}), "not uint8/int8");
  }
  {  // channels_last on a 3-D input
    GraphBuilder m = with_contrib();
    ValueId x = m.input("x", {1, 4, 2}, DType::Uint8);
    m.outputs({contrib(m, "QLinearGlobalAveragePool",
                       {x, scale_of(m, "x", q), zp_of(m, "x", q), scale_of(m, "y", q), zp_of(m, "y", q)},
                       {NewAttr::Int("channels_last", 1)})});
    expect_error(m, make<uint8_t>(DType::Uint8, {1, 4, 2}, std::vector<uint8_t>(8, 7)), "channels_last");
  }
}

// QGemm: the int32 sum of (A - a_zp)(B - b_zp) plus the int32 bias, times alpha * a_scale *
// b_scale[n] (/ y_scale, rounded half to even, + y_zp, saturated) — per-tensor and per-column B,
// transposes, quantized and float outputs; the reference sums in int64 and takes the float steps
// in the same order.
TEST(QLinearOps, QGemmQuantizedAndFloatOutputs) {
  std::mt19937 rng(4);
  struct Case {
    bool trans_a, trans_b, per_column, float_out;
    int bias;  // 0 none, 1 [N], 2 [M, N], 3 [M, 1]
    DType ta, tb;
  };
  const Case cases[] = {{false, true, true, false, 1, DType::Uint8, DType::Int8},
                        {true, false, false, false, 2, DType::Int8, DType::Int8},
                        {false, true, true, true, 1, DType::Uint8, DType::Uint8},
                        {false, false, false, false, 3, DType::Uint8, DType::Int8},
                        {true, true, false, true, 0, DType::Int8, DType::Int8}};
  int idx = 0;
  for (const Case& k : cases) {
    const int64_t M = 5, K = 7, N = 4;
    const float alpha = idx == 1 ? 0.5f : 1.f;
    const Q qa{k.ta, 0.03f, k.ta == DType::Uint8 ? 120 : -3}, qy{k.ta, 0.2f, k.ta == DType::Uint8 ? 100 : 4};
    std::vector<float> bscale(k.per_column ? N : 1);
    std::vector<int32_t> bzp(bscale.size());
    for (size_t j = 0; j < bscale.size(); ++j) {
      bscale[j] = 0.01f * static_cast<float>(j + 1);
      bzp[j] = k.tb == DType::Uint8 ? 128 + static_cast<int32_t>(j) : 0;
    }
    const rt::Tensor ta = random_q(k.ta, k.trans_a ? rt::Shape{K, M} : rt::Shape{M, K}, rng);
    const rt::Tensor tb = random_q(k.tb, k.trans_b ? rt::Shape{N, K} : rt::Shape{K, N}, rng);
    std::vector<int32_t> bias;
    std::uniform_int_distribution<int32_t> bd(-2000, 2000);
    const int64_t nbias = k.bias == 0 ? 0 : k.bias == 1 ? N : k.bias == 2 ? M * N : M;
    for (int64_t i = 0; i < nbias; ++i) bias.push_back(bd(rng));
    GraphBuilder m = with_contrib();
    ValueId a = m.input("a", std::vector<int64_t>(ta.shape.begin(), ta.shape.end()), k.ta);
    const bool b_input = idx == 1;                    // B computed at run time: not packed by the plan
    auto bytes = [](const std::vector<int32_t>& v) {  // 8-bit storage of int values
      std::vector<uint8_t> b;
      for (int32_t x : v) b.push_back(static_cast<uint8_t>(x));
      return b;
    };
    ValueId b = b_input ? m.input("b", std::vector<int64_t>(tb.shape.begin(), tb.shape.end()), k.tb)
                        : m.init("b", std::vector<int64_t>(tb.shape.begin(), tb.shape.end()), bytes(ints(tb)), k.tb);
    const std::vector<int64_t> pshape = k.per_column ? std::vector<int64_t>{N} : std::vector<int64_t>{};
    ValueId bs = m.init("bs", pshape, bscale, DType::Float);
    ValueId bz = m.init("bz", pshape, bytes(bzp), k.tb);
    ValueId c = k.bias == 0 ? ValueId{}
                            : m.init("c",
                                     k.bias == 1   ? std::vector<int64_t>{N}
                                     : k.bias == 2 ? std::vector<int64_t>{M, N}
                                                   : std::vector<int64_t>{M, 1},
                                     bias, DType::Int32);
    std::vector<ValueId> ins{a, scale_of(m, "a", qa), zp_of(m, "a", qa), b, bs, bz, c};
    if (!k.float_out) {
      ins.push_back(scale_of(m, "y", qy));
      ins.push_back(zp_of(m, "y", qy));
    }
    m.outputs({contrib(
        m, "QGemm", ins,
        {NewAttr::Float("alpha", alpha), NewAttr::Int("transA", k.trans_a), NewAttr::Int("transB", k.trans_b)})});
    const auto va = ints(ta), vb = ints(tb);
    std::vector<float> want;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        int64_t s = 0;
        const size_t pj = k.per_column ? static_cast<size_t>(j) : 0;
        for (int64_t t = 0; t < K; ++t) {
          const int32_t x = va[static_cast<size_t>(k.trans_a ? t * M + i : i * K + t)] - qa.zp;
          const int32_t w = vb[static_cast<size_t>(k.trans_b ? j * K + t : t * N + j)] - bzp[pj];
          s += int64_t{x} * w;
        }
        if (k.bias) s += bias[static_cast<size_t>(k.bias == 1 ? j : k.bias == 2 ? i * N + j : i)];
        float mult = alpha * qa.scale * bscale[pj];
        if (!k.float_out) mult /= qy.scale;
        const float v = static_cast<float>(s) * mult;
        want.push_back(k.float_out ? v
                                   : static_cast<float>(std::min<float>(
                                         std::max<float>(std::nearbyint(v) + qy.zp, qmin(qy.type)), qmax(qy.type))));
      }
    rt::Session sess(m.model());
    const rt::Tensor y = b_input ? sess.run({ta, tb})[0] : sess.run({ta})[0];
    ASSERT_EQ(y.numel(), M * N);
    for (int64_t i = 0; i < M * N; ++i)
      EXPECT_EQ(y.get_f64(i), want[static_cast<size_t>(i)]) << "case " << idx << " element " << i;
    if (test::ort_peer_installed()) {
      infer_shapes(m.model());
      const auto path = test::temp_dir("qgemm_" + std::to_string(idx)) / "m.onnx";
      save_model(m.model(), path);
      std::string error;
      using Feeds = std::vector<std::pair<std::string, rt::Tensor>>;
      const Feeds feeds = b_input ? Feeds{{"a", ta}, {"b", tb}} : Feeds{{"a", ta}};
      auto theirs = test::ort_run(path, feeds, &error);
      ASSERT_TRUE(error.empty()) << error;
      const rt::Tensor& t = theirs.begin()->second;
      ASSERT_EQ(t.numel(), M * N);
      for (int64_t i = 0; i < M * N; ++i)
        EXPECT_NEAR(t.get_f64(i), want[static_cast<size_t>(i)],
                    k.float_out ? 1e-5 * std::fabs(want[static_cast<size_t>(i)]) + 1e-6 : 0.0)
            << "ORT, case " << idx << " element " << i;
    }
    ++idx;
  }
}

// QLinearSoftmax (opset 13: one axis; opset 11: the 2-D coercion) and QLinearWhere with
// broadcasting, against their QDQ spellings bit for bit and ORT within one step.
TEST(QLinearOps, SoftmaxAndWhere) {
  std::mt19937 rng(5);
  for (const auto& p : kTypes)
    for (int64_t opset : {int64_t{13}, int64_t{11}}) {
      const Q qx = p[0], qy{p[2].type, 1.f / 256, qmin(p[2].type)};
      const rt::Tensor tx = random_q(qx.type, {2, 3, 8}, rng);
      Built b{with_contrib(), GraphBuilder(opset), {{"x", tx}}};
      for (GraphBuilder* m : {&b.contrib, &b.qdq}) {
        ValueId x = m->input("x", {2, 3, 8}, qx.type);
        if (m == &b.contrib)
          m->outputs({contrib(*m, "QLinearSoftmax",
                              {x, scale_of(*m, "x", qx), zp_of(*m, "x", qx), scale_of(*m, "y", qy), zp_of(*m, "y", qy)},
                              {NewAttr::Int("axis", 1), NewAttr::Int("opset", opset)})});
        else
          m->outputs({qz(*m, m->node("Softmax", {dq(*m, x, "x", qx)}, {NewAttr::Int("axis", 1)}), "y", qy)});
      }
      check(b, run(b.qdq, b.feeds), "softmax" + std::to_string(opset) + (qx.type == DType::Uint8 ? "_u8" : "_s8"));
    }
  for (const auto& p : kTypes) {
    const Q qx = p[0], qy = p[1], qz_ = p[2];
    const rt::Tensor tx = random_q(qx.type, {3, 4}, rng), ty = random_q(qy.type, {4}, rng);
    std::vector<uint8_t> cv;
    for (int i = 0; i < 12; ++i) cv.push_back(static_cast<uint8_t>(rng() & 1));
    const rt::Tensor tc = make<uint8_t>(DType::Bool, {3, 4}, cv);
    Built b{with_contrib(), GraphBuilder(16), {{"c", tc}, {"x", tx}, {"y", ty}}};
    for (GraphBuilder* m : {&b.contrib, &b.qdq}) {
      ValueId c = m->input("c", {3, 4}, DType::Bool), x = m->input("x", {3, 4}, qx.type),
              y = m->input("y", {4}, qy.type);
      if (m == &b.contrib)
        m->outputs({contrib(*m, "QLinearWhere",
                            {c, x, scale_of(*m, "x", qx), zp_of(*m, "x", qx), y, scale_of(*m, "y", qy),
                             zp_of(*m, "y", qy), scale_of(*m, "z", qz_), zp_of(*m, "z", qz_)})});
      else
        m->outputs({qz(*m, m->node("Where", {c, dq(*m, x, "x", qx), dq(*m, y, "y", qy)}), "z", qz_)});
    }
    const auto vx = ints(tx), vy = ints(ty);
    std::vector<int32_t> ref;
    for (size_t i = 0; i < 12; ++i)
      ref.push_back(quantize_ref(cv[i] ? dequantize_ref(vx[i], qx) : dequantize_ref(vy[i % 4], qy), qz_));
    check(b, ref, std::string("where_") + (qx.type == DType::Uint8 ? "u8" : "s8"));
  }
}

// MaxPool on 8-bit tensors (QOperator models pool their uint8 activations): the same values as
// MaxPool on their float copies, with padding, strides and ceil_mode.
TEST(QLinearOps, MaxPoolOnEightBitsEqualsFloat) {
  std::mt19937 rng(6);
  for (DType t : {DType::Uint8, DType::Int8})
    for (int ceil : {0, 1}) {
      const rt::Tensor x = random_q(t, {2, 3, 11, 9}, rng);
      std::vector<NewAttr> attrs{NewAttr::Ints("kernel_shape", {3, 3}), NewAttr::Ints("pads", {1, 1, 1, 1}),
                                 NewAttr::Ints("strides", {2, 2}), NewAttr::Int("ceil_mode", ceil)};
      GraphBuilder q(13), f(13);
      q.outputs({q.node("MaxPool", {q.input("x", {2, 3, 11, 9}, t)}, attrs)});
      f.outputs({f.node("MaxPool", {f.input("x", {2, 3, 11, 9})}, attrs)});
      const auto xi = ints(x);
      std::vector<float> xf(xi.begin(), xi.end());
      rt::Session sq(q.model()), sf(f.model());
      const auto got = ints(sq.run({x})[0]);
      const rt::Tensor want = sf.run({make<float>(DType::Float, {2, 3, 11, 9}, xf)})[0];
      ASSERT_EQ(static_cast<int64_t>(got.size()), want.numel());
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got[i], static_cast<int32_t>(want.get_f64(static_cast<int64_t>(i)))) << i;
    }
}
