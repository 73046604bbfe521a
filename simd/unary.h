#pragma once
// Elementwise unary kernels and vectorized math over float arrays.
//
// Accuracy: max error against the double-precision std:: functions over dense sweeps (200k
// points per range; tests/simd/math_test.cpp prints the table for every ISA level), in ulps of
// the float result (a correctly rounded result scores <= 0.5):
//   exp 1.3, log 0.8, erf 2.3, tanh 1.4, sigmoid 2.3, silu 3.6 (x >= -87), softplus 1.8,
//   mish 2.8, elu/selu 1.8, sin/cos 0.7 (absolute, |x| <= 100), gelu 6 (erf form, whole range,
//   negative tail included: it uses erfc and an exact x^2, not 1 + erf), gelu_tanh 3.3 for
//   x >= -1 (the tanh form's cubic argument carries its rounding into exp: 15 ulp at x = -3
//   where y = -4e-3, ~200 ulp at x = -10 where |y| < 1e-35), sqrt/reciprocal 0.5,
//   piecewise-linear ops exact.
// Subnormal results are within a few 2^-149 steps (exp rounds once into the subnormal range;
// silu below x = -87 scales a subnormal sigmoid by |x|: ~50 steps). Inputs where a float result
// overflows give inf; NaN inputs give NaN for every op (Relu and Clip included, as ONNX Runtime
// does); the gated ops (gelu, gelu_tanh, silu, mish) give -0 at -inf, their limit.
#include <cstddef>
#include <cstdint>

namespace onnxforge::simd {

enum class UnaryOp : std::uint8_t {
  Identity,
  Abs,
  Neg,
  Relu,
  LeakyRelu,        // x < 0 ? alpha*x : x
  Clip,             // min(max(x, alpha), beta)    (alpha = lo, beta = hi)
  ThresholdedRelu,  // x > alpha ? x : 0
  Sigmoid,
  HardSigmoid,  // max(0, min(1, alpha*x + beta))
  HardSwish,    // x * HardSigmoid(x) with alpha = 1/6, beta = 1/2
  Tanh,
  Exp,
  Log,
  Erf,
  Sqrt,
  Reciprocal,
  Gelu,      // 0.5 x (1 + erf(x / sqrt 2))
  GeluTanh,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  Silu,      // x * sigmoid(x)
  Softplus,  // log(1 + exp(x))
  Softsign,  // x / (1 + |x|)
  Mish,      // x * tanh(softplus(x))
  Elu,       // x < 0 ? alpha*(exp(x) - 1) : x
  Selu,      // beta * (x <= 0 ? alpha*(exp(x) - 1) : x)   (alpha, beta = gamma)
  Floor,
  Ceil,
  Round,  // half to even, as ONNX Round
  Sin,
  Cos,
};

// An elementwise function with its parameters. Also the activation of GEMM/Conv epilogues.
struct Unary {
  UnaryOp op = UnaryOp::Identity;
  float alpha = 0.f;
  float beta = 0.f;

  static constexpr Unary none() { return {}; }
  static constexpr Unary of(UnaryOp op) { return {op, 0.f, 0.f}; }
  static constexpr Unary relu() { return {UnaryOp::Relu, 0.f, 0.f}; }
  static constexpr Unary leaky_relu(float alpha) { return {UnaryOp::LeakyRelu, alpha, 0.f}; }
  static constexpr Unary clip(float lo, float hi) { return {UnaryOp::Clip, lo, hi}; }
  static constexpr Unary hard_sigmoid(float alpha = 0.2f, float beta = 0.5f) {
    return {UnaryOp::HardSigmoid, alpha, beta};
  }
  static constexpr Unary hard_swish() { return {UnaryOp::HardSwish, 1.f / 6.f, 0.5f}; }
  static constexpr Unary elu(float alpha = 1.f) { return {UnaryOp::Elu, alpha, 0.f}; }
  static constexpr Unary selu(float alpha = 1.67326319f, float gamma = 1.05070102f) {
    return {UnaryOp::Selu, alpha, gamma};
  }
  static constexpr Unary thresholded_relu(float alpha = 1.f) { return {UnaryOp::ThresholdedRelu, alpha, 0.f}; }
};

// y[i] = f(x[i]) for i < n. x == y (in place) is allowed; partial overlap is not.
// Parallel over chunks when n is large.
void unary(const Unary& f, const float* x, float* y, std::size_t n);

// bfloat16 (its bits) <-> float32, round to nearest even, NaNs kept quiet NaNs: exactly
// ir/float16.h's bf16_to_float / float_to_bf16. Parallel over the span. (float16's are in
// resample.h.)
void bf16_to_float(const std::uint16_t* x, float* y, std::size_t n);
void float_to_bf16(const float* x, std::uint16_t* y, std::size_t n);

// Named shortcuts for the vectorized math functions (same contract as unary()).
namespace vmath {
void exp(const float* x, float* y, std::size_t n);
void log(const float* x, float* y, std::size_t n);
void erf(const float* x, float* y, std::size_t n);
void tanh(const float* x, float* y, std::size_t n);
void sigmoid(const float* x, float* y, std::size_t n);
void gelu(const float* x, float* y, std::size_t n);
void gelu_tanh(const float* x, float* y, std::size_t n);
void silu(const float* x, float* y, std::size_t n);
}  // namespace vmath

}  // namespace onnxforge::simd
