// Unary kernels and vector math: max error against std:: in double over dense sweeps, special
// values (inf, NaN, overflow, subnormal results), tails and in-place use.
#include <cmath>
#include <cstdio>
#include <limits>

#include "simd/reference.h"
#include "simd/unary.h"
#include "tests/simd/simd_test_util.h"

namespace onnxforge::simd::test {
namespace {

struct Sweep {
  Unary f;
  const char* name;
  float lo, hi;
  double max_ulp;      // allowed error in ulps of the result (normal-range results)...
  double abs_floor;    // ...where results smaller than this count as this big (functions with roots)
  double max_sub = 4;  // allowed error for subnormal results, in subnormal steps (2^-149)
};

// Dense grid over [lo, hi] plus special values.
std::vector<float> inputs(float lo, float hi) {
  const std::size_t n = 200003;  // odd count: the kernel tail runs too
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i)
    x[i] = lo + (hi - lo) * static_cast<float>(static_cast<double>(i) / static_cast<double>(n - 1));
  const float inf = std::numeric_limits<float>::infinity();
  for (float s : {0.f, -0.f, 1e-30f, -1e-30f, 1e-45f, 1.f, -1.f, 0.5f, -0.5f, 3e38f, -3e38f, inf, -inf,
                  std::numeric_limits<float>::quiet_NaN()})
    x.push_back(s);
  return x;
}

bool subnormal(const Sweep& s, double want) {
  return std::max(std::fabs(want), s.abs_floor) < std::numeric_limits<float>::min();
}

// Error in ulps of the result, or in subnormal steps for subnormal results.
double error_of(const Sweep& s, float got, double want) {
  if (std::isnan(want) || std::isinf(static_cast<float>(want)) || std::isnan(got) || std::isinf(got))
    return ulp_error(got, want);
  if (subnormal(s, want)) return std::fabs(got - want) / std::numeric_limits<float>::denorm_min();
  const float w = static_cast<float>(std::max(std::fabs(want), s.abs_floor));
  const double ulp = static_cast<double>(std::nextafter(w, INFINITY)) - w;
  return std::fabs(got - want) / ulp;
}

class Math : public SimdTest {};
ONNXFORGE_SIMD_ALL_ISAS(Math);

TEST_P(Math, AccuracyAgainstDoubleReference) {
  const Sweep sweeps[] = {
      {Unary::of(UnaryOp::Exp), "exp", -110.f, 90.f, 2, 0},
      {Unary::of(UnaryOp::Log), "log", 0.f, 100.f, 2, 0},
      {Unary::of(UnaryOp::Log), "log(large)", 1e3f, 3e38f, 2, 0},
      {Unary::of(UnaryOp::Erf), "erf", -6.f, 6.f, 3, 0},
      {Unary::of(UnaryOp::Tanh), "tanh", -20.f, 20.f, 3, 0},
      {Unary::of(UnaryOp::Sigmoid), "sigmoid", -100.f, 100.f, 3, 0},
      {Unary::of(UnaryOp::Silu), "silu", -87.f, 100.f, 4, 0},
      // Below -87 sigmoid(x) is subnormal and x * sigmoid(x) scales its rounding by |x|.
      {Unary::of(UnaryOp::Silu), "silu(tail)", -110.f, -87.f, 64, 0, 128},
      {Unary::of(UnaryOp::Gelu), "gelu", -13.f, 14.f, 6, 0},
      {Unary::of(UnaryOp::Gelu), "gelu(tail)", -15.f, -13.f, 8, 0, 8},
      {Unary::of(UnaryOp::GeluTanh), "gelu_tanh", -1.f, 13.f, 4, 0},
      {Unary::of(UnaryOp::GeluTanh), "gelu_tanh(-3..-1)", -3.f, -1.f, 16, 0},
      // The tanh form's argument 2u ~ 0.07 x^3 carries its rounding into exp: error ~ |2u| ulps.
      {Unary::of(UnaryOp::GeluTanh), "gelu_tanh(tail)", -11.f, -3.f, 256, 0, 256},
      {Unary::of(UnaryOp::Softplus), "softplus", -100.f, 100.f, 4, 0},
      {Unary::of(UnaryOp::Mish), "mish", -30.f, 30.f, 6, 0},
      {Unary::elu(0.7f), "elu", -30.f, 10.f, 3, 0},
      {Unary::selu(), "selu", -30.f, 10.f, 3, 0},
      {Unary::of(UnaryOp::Sin), "sin", -100.f, 100.f, 2, 1},
      {Unary::of(UnaryOp::Cos), "cos", -100.f, 100.f, 2, 1},
      {Unary::of(UnaryOp::Sqrt), "sqrt", 0.f, 1e6f, 0.5, 0},
      {Unary::of(UnaryOp::Reciprocal), "reciprocal", -1e3f, 1e3f, 0.5, 0},
      {Unary::of(UnaryOp::Softsign), "softsign", -1e3f, 1e3f, 2, 0},
      // alpha*x + beta cancels near the corners; without FMA that costs ulps of 1, not of the result.
      {Unary::hard_sigmoid(), "hard_sigmoid", -10.f, 10.f, 1, 1},
      {Unary::hard_swish(), "hard_swish", -10.f, 10.f, 4, 1},
      {Unary::of(UnaryOp::Abs), "abs", -10.f, 10.f, 0, 0},
      {Unary::of(UnaryOp::Neg), "neg", -10.f, 10.f, 0, 0},
      {Unary::relu(), "relu", -10.f, 10.f, 0, 0},
      {Unary::leaky_relu(0.01f), "leaky_relu", -10.f, 10.f, 0.5, 0},
      {Unary::clip(-1.5f, 2.5f), "clip", -10.f, 10.f, 0, 0},
      {Unary::thresholded_relu(0.5f), "thresholded_relu", -10.f, 10.f, 0, 0},
      {Unary::of(UnaryOp::Floor), "floor", -1e3f, 1e3f, 0, 0},
      {Unary::of(UnaryOp::Ceil), "ceil", -1e3f, 1e3f, 0, 0},
      {Unary::of(UnaryOp::Round), "round", -1e3f, 1e3f, 0, 0},
      {Unary::of(UnaryOp::Identity), "identity", -1e3f, 1e3f, 0, 0},
  };
  std::printf("  [%s] max error vs double std:: (ulps)\n", isa_name(GetParam()));
  for (const Sweep& s : sweeps) {
    const std::vector<float> x = inputs(s.lo, s.hi);
    std::vector<float> y(x.size());
    unary(s.f, x.data(), y.data(), x.size());
    double worst = 0, worst_sub = 0;
    float worst_at = 0, worst_sub_at = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double want = ref::unary(s.f, static_cast<double>(x[i]));
      const double e = error_of(s, y[i], want);
      if (subnormal(s, want) && !std::isnan(want)) {
        if (e > worst_sub) worst_sub = e, worst_sub_at = x[i];
      } else if (e > worst) {
        worst = e, worst_at = x[i];
      }
    }
    std::printf("    %-17s %7.2f ulp (at x = %-11g) subnormal results: %g steps\n", s.name, worst,
                static_cast<double>(worst_at), worst_sub);
    EXPECT_LE(worst, s.max_ulp) << s.name << " at x = " << worst_at;
    EXPECT_LE(worst_sub, s.max_sub) << s.name << " (subnormal result) at x = " << worst_sub_at;
  }
}

TEST_P(Math, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  auto one = [](UnaryOp op, float x) {
    float y;
    unary(Unary::of(op), &x, &y, 1);
    return y;
  };
  EXPECT_EQ(one(UnaryOp::Exp, 89.f), inf);
  EXPECT_EQ(one(UnaryOp::Exp, inf), inf);
  EXPECT_EQ(one(UnaryOp::Exp, -inf), 0.f);
  EXPECT_EQ(one(UnaryOp::Exp, -104.f), 0.f);
  EXPECT_GT(one(UnaryOp::Exp, -100.f), 0.f);  // subnormal, not flushed
  EXPECT_EQ(one(UnaryOp::Exp, 0.f), 1.f);
  EXPECT_EQ(one(UnaryOp::Log, 0.f), -inf);
  EXPECT_TRUE(std::isnan(one(UnaryOp::Log, -1.f)));
  EXPECT_EQ(one(UnaryOp::Sigmoid, inf), 1.f);
  EXPECT_EQ(one(UnaryOp::Sigmoid, -inf), 0.f);
  EXPECT_EQ(one(UnaryOp::Tanh, inf), 1.f);
  EXPECT_EQ(one(UnaryOp::Tanh, -inf), -1.f);
  EXPECT_EQ(one(UnaryOp::Erf, inf), 1.f);
  EXPECT_EQ(one(UnaryOp::Gelu, inf), inf);
  EXPECT_EQ(one(UnaryOp::Gelu, -inf), 0.f);
  EXPECT_EQ(one(UnaryOp::Round, 2.5f), 2.f);
  EXPECT_EQ(one(UnaryOp::Round, -0.5f), -0.f);
  EXPECT_EQ(one(UnaryOp::Round, 3.5f), 4.f);
  for (UnaryOp op : {UnaryOp::Exp, UnaryOp::Log, UnaryOp::Erf, UnaryOp::Tanh, UnaryOp::Sigmoid, UnaryOp::Gelu,
                     UnaryOp::GeluTanh, UnaryOp::Silu, UnaryOp::Relu, UnaryOp::Abs, UnaryOp::Softplus, UnaryOp::Mish,
                     UnaryOp::Floor, UnaryOp::Sqrt, UnaryOp::Sin})
    EXPECT_TRUE(std::isnan(one(op, nan))) << "op " << static_cast<int>(op);
  float y;
  const Unary clip = Unary::clip(0.f, 6.f);
  unary(clip, &nan, &y, 1);
  EXPECT_TRUE(std::isnan(y));
  const Unary leaky = Unary::leaky_relu(0.1f);
  unary(leaky, &nan, &y, 1);
  EXPECT_TRUE(std::isnan(y));
}

TEST_P(Math, TailsAndInPlace) {
  for (std::size_t n : {0, 1, 2, 3, 5, 15, 16, 17, 31, 33, 63, 65, 100}) {
    auto x = random_floats(n, static_cast<unsigned>(n) + 1, -5.f, 5.f);
    std::vector<float> want(n), got(n);
    ref::unary(Unary::of(UnaryOp::Tanh), x.data(), want.data(), n);
    vmath::tanh(x.data(), got.data(), n);
    expect_close(got, want, 0.f, 3e-7f, "tanh n=" + std::to_string(n));
    vmath::tanh(x.data(), x.data(), n);
    EXPECT_EQ(x, got) << "in place, n=" << n;
  }
}

TEST_P(Math, NamedShortcutsMatchUnary) {
  const auto x = random_floats(1001, 9, -8.f, 8.f);
  struct Named {
    void (*fn)(const float*, float*, std::size_t);
    UnaryOp op;
  };
  const Named named[] = {{vmath::exp, UnaryOp::Exp},   {vmath::erf, UnaryOp::Erf},
                         {vmath::tanh, UnaryOp::Tanh}, {vmath::sigmoid, UnaryOp::Sigmoid},
                         {vmath::gelu, UnaryOp::Gelu}, {vmath::gelu_tanh, UnaryOp::GeluTanh},
                         {vmath::silu, UnaryOp::Silu}};
  for (const Named& n : named) {
    std::vector<float> a(x.size()), b(x.size());
    n.fn(x.data(), a.data(), x.size());
    unary(Unary::of(n.op), x.data(), b.data(), x.size());
    EXPECT_EQ(a, b) << static_cast<int>(n.op);
  }
  std::vector<float> pos = random_floats(100, 3, 0.1f, 10.f), a(100), b(100);
  vmath::log(pos.data(), a.data(), 100);
  unary(Unary::of(UnaryOp::Log), pos.data(), b.data(), 100);
  EXPECT_EQ(a, b);
}

TEST_P(Math, LargeArraysInParallelMatchSerial) {
  const std::size_t n = (1 << 20) + 7;
  const auto x = random_floats(n, 4, -10.f, 10.f);
  std::vector<float> y(n);
  vmath::gelu(x.data(), y.data(), n);
  for (std::size_t i = 0; i < n; i += 9973) {
    float single;
    vmath::gelu(&x[i], &single, 1);
    EXPECT_EQ(y[i], single) << i;
  }
}

}  // namespace
}  // namespace onnxforge::simd::test
