#pragma once
// Vector math for one ISA level (include after isa_config.h). exp and tanh are our own
// (faster than xsimd's, and exp rounds once into the subnormal range); log, erf, erfc, expm1,
// log1p, sin, cos come from xsimd. All map NaN to NaN.
//
// x86 max/min return their second operand when either is NaN; the clamps below put x second
// so that NaN passes through.
#include "simd/kernels/isa_config.h"

namespace onnxforge::simd::detail::ONNXFORGE_ISA_NS {

// exp(x): Cody-Waite reduction x = k ln2 + r, |r| <= ln2/2, Cephes degree-6 polynomial, then
// 2^k applied as two exact power-of-two factors so that overflow gives inf and results in the
// subnormal range are rounded once.
inline V vexp(V x) {
  x = xsimd::min(V(88.8f), xsimd::max(V(-104.f), x));
  const V k = xsimd::nearbyint(x * V(1.44269504088896341f));
  V r = vfnma(k, V(0.693359375f), x);
  r = vfnma(k, V(-2.12194440e-4f), r);
  V p(1.9875691500e-4f);
  p = vfma(p, r, V(1.3981999507e-3f));
  p = vfma(p, r, V(8.3334519073e-3f));
  p = vfma(p, r, V(4.1665795894e-2f));
  p = vfma(p, r, V(1.6666665459e-1f));
  p = vfma(p, r, V(5.0000001201e-1f));
  p = vfma(p, r * r, r + V(1.f));
  const VI ki = xsimd::to_int(k);
  const VI k1 = ki >> 1;
  const VI k2 = ki - k1;
  const V s1 = xsimd::bitwise_cast<V>((k1 + VI(127)) << 23);
  const V s2 = xsimd::bitwise_cast<V>((k2 + VI(127)) << 23);
  return p * s1 * s2;
}

// tanh: odd polynomial below 0.625 (Cephes), 1 - 2 / (exp(2|x|) + 1) above.
inline V vtanh(V x) {
  const V ax = xsimd::abs(x);
  const V z = x * x;
  V p(-5.70498872745e-3f);
  p = vfma(p, z, V(2.06390887954e-2f));
  p = vfma(p, z, V(-5.37397155531e-2f));
  p = vfma(p, z, V(1.33314422036e-1f));
  p = vfma(p, z, V(-3.33332819422e-1f));
  const V small = vfma(p * z, x, x);
  const V big = V(1.f) - V(2.f) / (vexp(ax + ax) + V(1.f));
  return xsimd::select(ax < V(0.625f), small, xsimd::copysign(big, x));
}

// sigmoid from e = exp(-|x|), which never overflows: 1 / (1 + e) for x >= 0, e / (1 + e) below,
// so the negative tail keeps its relative accuracy down to the subnormal range.
inline V vsigmoid(V x) {
  const V e = vexp(-xsimd::abs(x));
  const V r = V(1.f) / (V(1.f) + e);
  return xsimd::select(x >= V(0.f), r, e * r);
}

// x * sigmoid(x); below -200 the result underflows, and clamping there makes -inf give -0
// instead of -inf * 0 = NaN.
inline V vsilu(V x) {
  const V xc = xsimd::max(V(-200.f), x);
  return xc * vsigmoid(xc);
}

// x^2 as an unevaluated sum h + l, exactly: with FMA the rounding error is one fma away,
// without it Dekker's split does the same.
inline void square_exact(V x, V& h, V& l) {
  h = x * x;
  if constexpr (kIsa != Isa::Sse) {
    l = vfms(x, x, h);  // exact: the rounding error of x * x
  } else {
    const V c = x * V(4097.f);
    const V xh = c - (c - x), xl = x - xh;
    l = ((xh * xh - h) + V(2.f) * xh * xl) + xl * xl;
  }
}

// c[0] + c[1] x + ... + c[N-1] x^(N-1), Horner with fused multiply-adds. xsimd's horner rounds
// the product and the sum apart here (-ffp-contract=off), so each coefficient costs a dependent
// mul + add: xsimd's two erfc polynomials alone kept vgelu at ~110 cycles a vector, latency-bound
// (BM_Gelu_1M 1.5-1.8x faster with FMA: docs/benchmarks.md, "Kernels").
template <std::size_t N>
inline V horner(V x, const float (&c)[N]) {
  V p(c[N - 1]);
  for (std::size_t i = N - 1; i-- > 0;) p = vfma(p, x, V(c[i]));
  return p;
}

// erfc(t) for t >= 0 given e = exp(-t^2) (computed accurately by the caller). Below 1.5 it uses
// xsimd's float erfc polynomials (its erf_kernel's erfc2 / erfc3 coefficients, evaluated with
// FMA) in z = t / (1 + t); above, z loses resolution, so erfc(t) = e / t * g(1 / t^2), g a
// degree-9 least-squares fit of t e^(t^2) erfc(t) on [1.5, 11] (1.7 ulp evaluated in float;
// fitted for this file with numpy + mpmath).
inline V verfc_pos(V t, V e) {
  static constexpr float kErfc2[] = {5.392844046572836e-01f,  -1.137035586823118e+00f, 1.603704761054187e-01f,
                                     3.843569094305250e-01f,  1.420508523645926e-01f,  1.562764709849380e-01f,
                                     -1.364514006347145e+00f, 3.260765682222576e+00f,  -6.409487379234005e+00f,
                                     6.702908785399893e+00f,  -2.628299919293280e+00f};
  static constexpr float kErfc3[] = {9.9999988e-01f, -1.2834737e-01f, -1.2585020e+00f, -1.9732213e+00f, -2.3560498e+00f,
                                     6.7576951e-01f, -2.2632651e+00f, 2.4271545e+00f,  2.1319498e+01f};
  static constexpr float kTail[] = {5.641894341e-01f, -2.820671499e-01f, 4.215421975e-01f, -1.012775421e+00f,
                                    2.952199936e+00f, -8.199786186e+00f, 1.805229950e+01f, -2.749238777e+01f,
                                    2.502806282e+01f, -1.013871861e+01f};
  const V z = t / (V(1.f) + t);
  const V inv = V(1.f) / t;
  const V tail = e * (inv * horner(inv * inv, kTail));  // e last: it may be near the subnormal range
  const V mid = e * horner(z - V(0.4f), kErfc2);
  const V low = (V(1.f) - z) * horner(z, kErfc3);
  return xsimd::select(t < V(2.f / 3.f), low, xsimd::select(t < V(1.5f), mid, tail));
}

// 0.5 x erfc(-x / sqrt 2), keeping relative accuracy in the negative tail: exp(-x^2 / 2) comes
// from the exact square (rounding x^2 first would cost about x^2 / 2 ulps).
inline V vgelu(V x) {
  const V xc = xsimd::max(V(-15.f), xsimd::min(V(15.f), x));  // |x| >= 15: the erfc term is 0 or 2
  V h, l;
  square_exact(xc, h, l);
  const V e = vexp(V(-0.5f) * h);
  const V r = verfc_pos(xsimd::abs(xc) * V(0.707106781186547524f), vfnma(e, V(0.5f) * l, e));
  return V(0.5f) * xsimd::max(V(-15.f), x) * xsimd::select(x < V(0.f), r, V(2.f) - r);
}

// 0.5 (1 + tanh(u)) == sigmoid(2u), which does not cancel for large negative u.
inline V vgelu_tanh(V x) {
  const V xc = xsimd::max(V(-200.f), x);
  const V u2 = V(2.f * 0.797884560802865356f) * vfma(V(0.044715f) * xc, xc * xc, xc);
  return xc * vsigmoid(u2);
}

// log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)).
inline V vsoftplus(V x) { return xsimd::max(x, V(0.f)) + xsimd::log1p(vexp(-xsimd::abs(x))); }

inline V vclip(V x, V lo, V hi) { return xsimd::min(hi, xsimd::max(lo, x)); }

// NaN-propagating max/min (ONNX Max/Min): max(a, b) already returns b if either is NaN.
// (xsimd's != is an ordered compare on AVX, so NaN tests use isnan.)
inline V vmax_nan(V a, V b) { return xsimd::select(xsimd::isnan(a), a, xsimd::max(a, b)); }
inline V vmin_nan(V a, V b) { return xsimd::select(xsimd::isnan(a), a, xsimd::min(a, b)); }

// Applies one elementwise function; `op` is a template argument so each span loop is
// specialized (the switch lives in apply_unary_span, outside the loop).
template <UnaryOp op>
inline V unary_op(V x, V alpha, V beta) {
  const V zero(0.f), one(1.f);
  if constexpr (op == UnaryOp::Identity) return x;
  if constexpr (op == UnaryOp::Abs) return xsimd::abs(x);
  if constexpr (op == UnaryOp::Neg) return -x;
  if constexpr (op == UnaryOp::Relu) return xsimd::max(zero, x);
  if constexpr (op == UnaryOp::LeakyRelu) return xsimd::select(x < zero, x * alpha, x);
  if constexpr (op == UnaryOp::Clip) return vclip(x, alpha, beta);
  if constexpr (op == UnaryOp::ThresholdedRelu)
    return xsimd::select(x > alpha, x, xsimd::select(xsimd::isnan(x), x, zero));
  if constexpr (op == UnaryOp::Sigmoid) return vsigmoid(x);
  if constexpr (op == UnaryOp::HardSigmoid) return vclip(vfma(alpha, x, beta), zero, one);
  if constexpr (op == UnaryOp::HardSwish) return x * vclip(vfma(alpha, x, beta), zero, one);
  if constexpr (op == UnaryOp::Tanh) return vtanh(x);
  if constexpr (op == UnaryOp::Exp) return vexp(x);
  if constexpr (op == UnaryOp::Log) return xsimd::log(x);
  if constexpr (op == UnaryOp::Erf) return xsimd::erf(x);
  if constexpr (op == UnaryOp::Sqrt) return xsimd::sqrt(x);
  if constexpr (op == UnaryOp::Reciprocal) return one / x;
  if constexpr (op == UnaryOp::Gelu) return vgelu(x);
  if constexpr (op == UnaryOp::GeluTanh) return vgelu_tanh(x);
  if constexpr (op == UnaryOp::Silu) return vsilu(x);
  if constexpr (op == UnaryOp::Softplus) return vsoftplus(x);
  if constexpr (op == UnaryOp::Softsign) return x / (one + xsimd::abs(x));
  if constexpr (op == UnaryOp::Mish) {
    const V xc = xsimd::max(V(-200.f), x);  // as silu: -inf gives -0
    return xc * vtanh(vsoftplus(xc));
  }
  if constexpr (op == UnaryOp::Elu) return xsimd::select(x < zero, alpha * xsimd::expm1(x), x);
  if constexpr (op == UnaryOp::Selu) return beta * xsimd::select(x <= zero, alpha * xsimd::expm1(x), x);
  if constexpr (op == UnaryOp::Floor) return xsimd::floor(x);
  if constexpr (op == UnaryOp::Ceil) return xsimd::ceil(x);
  if constexpr (op == UnaryOp::Round) return xsimd::nearbyint(x);
  if constexpr (op == UnaryOp::Sin) return xsimd::sin(x);
  if constexpr (op == UnaryOp::Cos) return xsimd::cos(x);
}

// Activations cheap enough to apply on the accumulators; the rest run over the stored rows.
inline bool in_register_act(const Unary* act) { return act_in_registers(act); }

inline V register_act(V r, const Unary* act) {
  if (act == nullptr) return r;
  switch (act->op) {
    case UnaryOp::Relu: return xsimd::max(V(0.f), r);
    case UnaryOp::Clip: return vclip(r, V(act->alpha), V(act->beta));
    case UnaryOp::LeakyRelu: return xsimd::select(r < V(0.f), r * V(act->alpha), r);
    default: return r;
  }
}

template <UnaryOp op>
inline void unary_span_op(const Unary& f, const float* x, float* y, std::size_t n) {
  const V alpha(f.alpha), beta(f.beta);
  map_span(x, y, n, [&](V v) { return unary_op<op>(v, alpha, beta); });
}

inline void apply_unary_span(const Unary& f, const float* x, float* y, std::size_t n) {
  switch (f.op) {
#define ONNXFORGE_UNARY_CASE(name) \
  case UnaryOp::name: return unary_span_op<UnaryOp::name>(f, x, y, n);
    ONNXFORGE_UNARY_CASE(Identity)
    ONNXFORGE_UNARY_CASE(Abs)
    ONNXFORGE_UNARY_CASE(Neg)
    ONNXFORGE_UNARY_CASE(Relu)
    ONNXFORGE_UNARY_CASE(LeakyRelu)
    ONNXFORGE_UNARY_CASE(Clip)
    ONNXFORGE_UNARY_CASE(ThresholdedRelu)
    ONNXFORGE_UNARY_CASE(Sigmoid)
    ONNXFORGE_UNARY_CASE(HardSigmoid)
    ONNXFORGE_UNARY_CASE(HardSwish)
    ONNXFORGE_UNARY_CASE(Tanh)
    ONNXFORGE_UNARY_CASE(Exp)
    ONNXFORGE_UNARY_CASE(Log)
    ONNXFORGE_UNARY_CASE(Erf)
    ONNXFORGE_UNARY_CASE(Sqrt)
    ONNXFORGE_UNARY_CASE(Reciprocal)
    ONNXFORGE_UNARY_CASE(Gelu)
    ONNXFORGE_UNARY_CASE(GeluTanh)
    ONNXFORGE_UNARY_CASE(Silu)
    ONNXFORGE_UNARY_CASE(Softplus)
    ONNXFORGE_UNARY_CASE(Softsign)
    ONNXFORGE_UNARY_CASE(Mish)
    ONNXFORGE_UNARY_CASE(Elu)
    ONNXFORGE_UNARY_CASE(Selu)
    ONNXFORGE_UNARY_CASE(Floor)
    ONNXFORGE_UNARY_CASE(Ceil)
    ONNXFORGE_UNARY_CASE(Round)
    ONNXFORGE_UNARY_CASE(Sin)
    ONNXFORGE_UNARY_CASE(Cos)
#undef ONNXFORGE_UNARY_CASE
  }
}

}  // namespace onnxforge::simd::detail::ONNXFORGE_ISA_NS
