// float16 activations: the Casts' F16C spans give the bits of ir/float16.h's scalar conversions
// (round to nearest even, subnormals, overflow, NaN), on every ISA level; a Conv with a float16
// output absorbs a following Relu/Clip only where that is bit-identical to the graph's
// Conv -> round to float16 -> activation.
#include <gtest/gtest.h>

#include <bit>
#include <functional>
#include <cmath>
#include <limits>
#include <random>

#include "ir/float16.h"
#include "runtime/runtime.h"
#include "simd/isa.h"
#include "tests/common/graph_builder.h"
#include "tests/runtime/tensors.h"

using namespace onnxforge;
using onnxforge::test::GraphBuilder;
using onnxforge::test::make;
using onnxforge::test::values;

namespace {

// Values around every float16 rounding hazard: ties between neighbours, the subnormal range and
// its edge, the overflow threshold (65520 rounds to inf), infinities, NaN, signed zeros.
std::vector<float> hazard_floats() {
  std::vector<float> v = {0.f,
                          -0.f,
                          1.f,
                          -1.f,
                          65504.f,
                          65519.99f,
                          65520.f,
                          -65520.f,
                          1e9f,
                          -1e9f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(),
                          6.1035156e-05f,
                          6.0975552e-05f,
                          5.9604645e-08f,
                          2.9802322e-08f,
                          2.9802326e-08f,
                          1e-10f,
                          -1e-10f,
                          std::numeric_limits<float>::denorm_min()};
  for (uint16_t h = 0; h < 0x7c00; h += 37) {  // exact halves and the ties just above them
    const float f = half_to_float(h);
    v.push_back(f);
    v.push_back(-f);
    const uint32_t u = std::bit_cast<uint32_t>(f) + 0x1000u;  // half-way to the next float16
    v.push_back(std::bit_cast<float>(u));
    v.push_back(std::bit_cast<float>(u + 1));
    v.push_back(std::bit_cast<float>(u - 1));
  }
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 5000; ++i) {
    float f = std::bit_cast<float>(bits(rng));
    if (!std::isnan(f)) v.push_back(f);
  }
  return v;
}

// Casts float -> `narrow` -> float of `xs` on every ISA level: the narrow bits must be
// `to_narrow`'s and the widened floats `to_float`'s of them, bit for bit.
void expect_casts_match_scalar(const std::vector<float>& xs, DType narrow, uint16_t (*to_narrow)(float),
                               float (*to_float)(uint16_t)) {
  const auto n = static_cast<int64_t>(xs.size());
  GraphBuilder m(17);
  ValueId x = m.input("x", {n});
  ValueId h = m.node("Cast", {x}, {NewAttr::Int("to", static_cast<int64_t>(narrow))});
  ValueId back = m.node("Cast", {h}, {NewAttr::Int("to", static_cast<int64_t>(DType::Float))});
  m.outputs({h, back});
  const simd::Isa was = simd::active_isa_level();
  for (simd::Isa isa : simd::available_isas()) {
    ASSERT_TRUE(simd::set_isa(isa));
    rt::Session s(m.model());
    auto out = s.run({make<float>(DType::Float, {n}, xs)});
    const auto got_h = values<uint16_t>(out[0]);
    const auto got_f = values<float>(out[1]);
    size_t bad = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      const uint16_t want = to_narrow(xs[i]);
      const float want_f = to_float(want);
      if ((got_h[i] != want || std::bit_cast<uint32_t>(got_f[i]) != std::bit_cast<uint32_t>(want_f)) && bad++ < 5)
        ADD_FAILURE() << simd::isa_name(isa) << ": " << xs[i] << " (0x" << std::hex << std::bit_cast<uint32_t>(xs[i])
                      << ") -> 0x" << got_h[i] << " want 0x" << want << std::dec;
    }
  }
  simd::set_isa(was);
}

}  // namespace

TEST(Float16, CastsMatchScalarConversionBitForBit) {
  expect_casts_match_scalar(hazard_floats(), DType::Float16, float_to_half, half_to_float);
}

TEST(Float16, HalfToFloatEveryBitPattern) {
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  GraphBuilder m(17);
  ValueId x = m.input("x", {65536}, DType::Float16);
  m.outputs({m.node("Cast", {x}, {NewAttr::Int("to", static_cast<int64_t>(DType::Float))})});
  const simd::Isa was = simd::active_isa_level();
  for (simd::Isa isa : simd::available_isas()) {
    ASSERT_TRUE(simd::set_isa(isa));
    rt::Session s(m.model());
    const auto got = values<float>(s.run({make<uint16_t>(DType::Float16, {65536}, all)})[0]);
    size_t bad = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      const float want = half_to_float(all[i]);
      const bool same =
          std::isnan(want) ? std::isnan(got[i]) : std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want);
      if (!same && bad++ < 5)
        ADD_FAILURE() << simd::isa_name(isa) << ": half " << i << " -> " << got[i] << " want " << want;
    }
  }
  simd::set_isa(was);
}

TEST(Float16, ConvActivationFusionIsBitIdentical) {
  // Conv (float16 in, weights, out) -> Relu / Clip: fused into the Conv's epilogue, the outputs
  // must equal the unfused graph's bit for bit; a Sigmoid must not fuse (its float result rounds
  // differently once rounded to float16 first).
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.f, 1.f);
  auto halves = [&](size_t n) {
    std::vector<uint16_t> v(n);
    for (auto& h : v) h = float_to_half(d(rng));
    return v;
  };
  for (const char* act : {"Relu", "Clip", "Sigmoid"}) {
    GraphBuilder m(17);
    ValueId x = m.input("x", {1, 8, 12, 12}, DType::Float16);
    ValueId w = m.init("w", {16, 8, 3, 3}, halves(16 * 8 * 9), DType::Float16);
    ValueId b = m.init("b", {16}, halves(16), DType::Float16);
    ValueId c = m.node("Conv", {x, w, b}, {NewAttr::Ints("pads", {1, 1, 1, 1}), NewAttr::Ints("dilations", {1, 1})});
    ValueId y;
    if (std::string(act) == "Clip") {
      ValueId lo = m.init("lo", {}, std::vector<uint16_t>{float_to_half(-0.3f)}, DType::Float16);
      ValueId hi = m.init("hi", {}, std::vector<uint16_t>{float_to_half(0.7f)}, DType::Float16);
      y = m.node("Clip", {c, lo, hi});
    } else {
      y = m.node(act, {c});
    }
    m.outputs({y});
    const rt::Tensor xt = make<uint16_t>(DType::Float16, {1, 8, 12, 12}, halves(8 * 144));
    rt::Session fused(m.model());
    rt::SessionOptions off;
    off.fuse_activations = false;
    rt::Session plain(m.model(), off);
    const auto a = values<uint16_t>(fused.run({xt})[0]);
    const auto e = values<uint16_t>(plain.run({xt})[0]);
    // (Clip fuses only with float bounds: its float16 bounds keep it a step of its own.)
    if (std::string(act) != "Clip") { EXPECT_EQ(fused.fused_count(), std::string(act) == "Relu" ? 1u : 0u) << act; }
    EXPECT_EQ(plain.fused_count(), 0u);
    ASSERT_EQ(a.size(), e.size());
    size_t diff = 0;
    for (size_t i = 0; i < a.size(); ++i) diff += a[i] != e[i];
    EXPECT_EQ(diff, 0u) << act << ": fused and unfused float16 outputs differ";
  }
}

TEST(Float16, BinaryOpsRoundOnceFromFloat32) {
  // Add/Sub/Mul/Div on float16 operands (blocked kernels for equal shapes, float32 for
  // broadcasts): each element is half(float(a) op float(b)), bit for bit, also in place.
  std::mt19937 rng(9);
  std::normal_distribution<float> d(0.f, 3.f);
  const int64_t n = 70001;  // several blocks and threads, a ragged tail
  std::vector<uint16_t> a(static_cast<size_t>(n)), b(static_cast<size_t>(n)), row(7);
  for (auto& h : a) h = float_to_half(d(rng));
  for (auto& h : b) h = float_to_half(d(rng));
  for (auto& h : row) h = float_to_half(d(rng));
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    GraphBuilder m(17);
    ValueId x = m.input("x", {n}, DType::Float16);
    ValueId y = m.input("y", {n}, DType::Float16);
    ValueId z = m.input("z", {n / 7, 7}, DType::Float16);
    ValueId r = m.init("r", {7}, row, DType::Float16);
    m.outputs({m.node(op, {x, y}), m.node(op, {z, r})});
    rt::Session s(m.model());
    auto out =
        s.run({make<uint16_t>(DType::Float16, {n}, a), make<uint16_t>(DType::Float16, {n}, b),
               make<uint16_t>(DType::Float16, {n / 7, 7}, std::vector<uint16_t>(a.begin(), a.begin() + n / 7 * 7))});
    auto f = [&](float p, float q) {
      const std::string o = op;
      return o == "Add" ? p + q : o == "Sub" ? p - q : o == "Mul" ? p * q : p / q;
    };
    const auto same = values<uint16_t>(out[0]), bc = values<uint16_t>(out[1]);
    size_t bad = 0;
    for (size_t i = 0; i < same.size(); ++i) {
      const uint16_t want = float_to_half(f(half_to_float(a[i]), half_to_float(b[i])));
      if (same[i] != want && bad++ < 5) ADD_FAILURE() << op << " at " << i << ": " << same[i] << " want " << want;
    }
    for (size_t i = 0; i < bc.size(); ++i) {
      const uint16_t want = float_to_half(f(half_to_float(a[i]), half_to_float(row[i % 7])));
      if (bc[i] != want && bad++ < 5) ADD_FAILURE() << op << " broadcast at " << i << ": " << bc[i] << " want " << want;
    }
  }
}

TEST(Float16, ScalarOperandsConvertIntoFreshBuffers) {
  // The first conversion into a run's buffer slot may be a scalar (a Clip bound): the slot must
  // be allocated even though an empty tensor's shape {} also counts one element.
  GraphBuilder m(13);
  ValueId x = m.input("x", {4}, DType::Float16);
  ValueId lo = m.input("lo", {}, DType::Float16);
  ValueId hi = m.input("hi", {}, DType::Float16);
  m.outputs({m.node("Clip", {lo, lo, hi}), m.node("Clip", {x, lo, hi})});
  rt::Session s(m.model());
  const uint16_t l = float_to_half(-0.5f), h = float_to_half(0.25f);
  auto out = s.run({make<uint16_t>(DType::Float16, {4},
                                   {float_to_half(-1.f), float_to_half(0.f), float_to_half(0.1f), float_to_half(3.f)}),
                    make<uint16_t>(DType::Float16, {}, {l}), make<uint16_t>(DType::Float16, {}, {h})});
  EXPECT_EQ(values<uint16_t>(out[0]), std::vector<uint16_t>{l});
  EXPECT_EQ(values<uint16_t>(out[1]), (std::vector<uint16_t>{l, float_to_half(0.f), float_to_half(0.1f), h}));
}

// bfloat16 Casts run on vector spans (simd::bf16_to_float / float_to_bf16); they must give
// ir/float16.h's scalar bits on every ISA level, NaN payloads included (narrowing sets the quiet
// bit rather than rounding a NaN's payload into infinity), over lengths that leave a tail.
TEST(BFloat16, CastsMatchScalarConversionBitForBit) {
  std::vector<float> xs = hazard_floats();
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 3000; ++i) xs.push_back(std::bit_cast<float>(bits(rng)));  // NaNs with payloads too
  for (uint32_t b = 0; b < 0x10000u; b += 97) {  // every kept-bits pattern's tie, and one either side
    const uint32_t u = b << 16 | 0x8000u;
    for (uint32_t d : {u - 1, u, u + 1}) xs.push_back(std::bit_cast<float>(d));
  }
  xs.push_back(std::bit_cast<float>(0x7f7fffffu));  // rounds to infinity
  xs.push_back(std::bit_cast<float>(0x7fffffffu));  // NaN whose rounding would carry
  xs.push_back(std::bit_cast<float>(0xff800001u));
  for (size_t n : {xs.size(), size_t{7}, size_t{23}})
    expect_casts_match_scalar({xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(n)}, DType::BFloat16, float_to_bf16,
                              bf16_to_float);
}

// A bfloat16 op computes in float32 from widened operands and rounds its result once, as the
// float16 ops do: Add and Relu on bfloat16 against float32 math rounded by the scalar rule.
TEST(BFloat16, OpsRoundOnceFromFloat32) {
  const int64_t n = 1000;
  std::mt19937 rng(11);
  std::normal_distribution<float> d(0.f, 3.f);
  std::vector<uint16_t> a(n), b(n);
  for (int64_t i = 0; i < n; ++i) a[i] = float_to_bf16(d(rng)), b[i] = float_to_bf16(d(rng));
  GraphBuilder m(17);
  ValueId x = m.input("a", {n}, DType::BFloat16), y = m.input("b", {n}, DType::BFloat16);
  m.outputs({m.node("Relu", {m.node("Add", {x, y})})});
  const simd::Isa was = simd::active_isa_level();
  for (simd::Isa isa : simd::available_isas()) {
    ASSERT_TRUE(simd::set_isa(isa));
    rt::Session s(m.model());
    const auto got =
        values<uint16_t>(s.run({make<uint16_t>(DType::BFloat16, {n}, a), make<uint16_t>(DType::BFloat16, {n}, b)})[0]);
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t sum = float_to_bf16(bf16_to_float(a[i]) + bf16_to_float(b[i]));
      const uint16_t want = float_to_bf16(std::max(bf16_to_float(sum), 0.f));
      ASSERT_EQ(got[i], want) << simd::isa_name(isa) << " at " << i;
    }
  }
  simd::set_isa(was);
}

namespace {
// Bits of a float vector, NaNs compared as NaN.
size_t differing(const std::vector<float>& a, const std::vector<float>& b) {
  size_t n = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    n += std::isnan(a[i]) ? !std::isnan(b[i]) : std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i]);
  return n;
}
}  // namespace

// Mixed precision's Cast(to=FLOAT16) -> Cast(to=FLOAT) after a float32 result (runtime/fusions.cpp:
// half_round_trip): absorbed into a MatMul/Conv step (rounded in place after the kernel and its
// activation) or run as one step from the first Cast; bit-identical to the unfused plan on every
// rounding hazard, at every ISA level.
TEST(Float16, CastRoundTripFusesBitIdentically) {
  std::vector<float> hz;
  for (float f : hazard_floats())
    if (std::isfinite(f)) hz.push_back(f);
  const auto n = static_cast<int64_t>(hz.size());
  auto cast = [](GraphBuilder& m, ValueId v, DType t) {
    return m.node("Cast", {v}, {NewAttr::Int("to", static_cast<int64_t>(t))});
  };
  struct Case {
    const char* name;
    size_t fused;  // fused_count of the fused plan
    std::function<void(GraphBuilder&, ValueId)> build;
  };
  const std::vector<Case> cases = {
      // MatMul by [[1]]: y = x exactly, then the round trip.
      {"MatMul", 2,
       [&](GraphBuilder& m, ValueId x) {
         ValueId w = m.init("w", {1, 1}, std::vector<float>{1.f}, DType::Float);
         m.outputs({cast(m, cast(m, m.node("MatMul", {x, w}), DType::Float16), DType::Float)});
       }},
      // + Relu before the round trip: the activation fuses, then the rounding (the graph's order).
      {"MatMul+Relu", 3,
       [&](GraphBuilder& m, ValueId x) {
         ValueId w = m.init("w", {1, 1}, std::vector<float>{-1.f}, DType::Float);
         m.outputs({cast(m, cast(m, m.node("Relu", {m.node("MatMul", {x, w})}), DType::Float16), DType::Float)});
       }},
      // An activation after the round trip stays after it (Sigmoid does not commute with rounding).
      {"MatMul then Sigmoid", 2,
       [&](GraphBuilder& m, ValueId x) {
         ValueId w = m.init("w", {1, 1}, std::vector<float>{0.01f}, DType::Float);
         m.outputs({m.node("Sigmoid", {cast(m, cast(m, m.node("MatMul", {x, w}), DType::Float16), DType::Float)})});
       }},
      // The first Cast reads a graph input: one step of float(half(x)).
      {"standalone", 1,
       [&](GraphBuilder& m, ValueId x) { m.outputs({cast(m, cast(m, x, DType::Float16), DType::Float)}); }},
  };
  const simd::Isa was = simd::active_isa_level();
  for (const Case& c : cases) {
    GraphBuilder m(17);
    ValueId x = m.input("x", {n, 1});
    c.build(m, x);
    const rt::Tensor xt = make<float>(DType::Float, {n, 1}, hz);
    rt::SessionOptions off;
    off.fuse_activations = false;
    for (simd::Isa isa : simd::available_isas()) {  // (Sigmoid's last bit may differ between levels)
      ASSERT_TRUE(simd::set_isa(isa));
      rt::Session plain(m.model(), off);
      const auto want = values<float>(plain.run({xt})[0]);
      rt::Session fused(m.model());
      const auto got = values<float>(fused.run({xt})[0]);
      EXPECT_EQ(fused.fused_count(), c.fused) << c.name;
      EXPECT_EQ(differing(got, want), 0u) << c.name << " at " << simd::isa_name(isa);
    }
    simd::set_isa(was);
  }
}

// Where the float16 value has another reader, is a graph output, or comes back as another type,
// the Casts stay steps of their own.
TEST(Float16, CastRoundTripMustNotFuse) {
  auto cast = [](GraphBuilder& m, ValueId v, DType t) {
    return m.node("Cast", {v}, {NewAttr::Int("to", static_cast<int64_t>(t))});
  };
  for (int variant = 0; variant < 3; ++variant) {
    GraphBuilder m(17);
    ValueId x = m.input("x", {4, 1});
    ValueId w = m.init("w", {1, 1}, std::vector<float>{3.f}, DType::Float);
    ValueId h = cast(m, m.node("MatMul", {x, w}), DType::Float16);
    if (variant == 0) m.outputs({cast(m, h, DType::Float), m.node("Neg", {h})});  // a second reader
    if (variant == 1) m.outputs({cast(m, h, DType::Float), h});                   // a graph output
    if (variant == 2) m.outputs({cast(m, h, DType::Double)});                     // not back to float
    rt::Session s(m.model());
    auto out = s.run({make<float>(DType::Float, {4, 1}, {1.f, 1e-3f, 7e4f, -0.1f})});
    EXPECT_EQ(s.fused_count(), 0u) << variant;
    if (variant < 2) {
      EXPECT_EQ(values<float>(out[0])[2], std::numeric_limits<float>::infinity());  // 21e4 overflows float16
    }
  }
}
