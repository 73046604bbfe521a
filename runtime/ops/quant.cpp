// Quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear (elementwise, vectorized
// loops over contiguous rows), MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv and the
// com.microsoft MatMulIntegerToFloat / DynamicQuantizeMatMul (on simd/int8_gemm.h, constant
// weights packed once per plan).
//
// Rounding is the spec's: round half to even, then the zero point, then saturation. The float
// steps are the ones the spec (and ONNX Runtime) write: x / scale in float32, and
// (x - zero_point) * scale in float32. Requantization (QLinear*) multiplies the int32 sum by the
// float32 a_scale * b_scale / y_scale, as ONNX Runtime's MLAS does.
#include <immintrin.h>

#include <cmath>
#include <limits>
#include <mutex>
#include <optional>
#include <type_traits>

#include "runtime/ops/common.h"
#include "runtime/ops/conv_util.h"
#include "simd/conv8_depthwise.h"
#include "simd/int8_gemm.h"
#include "simd/isa.h"
#include "simd/parallel.h"
#include "simd/transpose.h"

namespace onnxforge::rt {
namespace {

// ---- quantization parameters -------------------------------------------------------------

// Where element i of x finds its scale / zero point: per tensor, per axis (a 1-D parameter along
// `axis`) or per block (opset 21's block_size: parameters shaped like x with the axis divided).
struct QParams {
  int64_t axis_n = 1, inner = 1, block = 0;  // block > 0: blocked
  bool per_axis = false;
  int64_t at(int64_t i) const {
    if (!per_axis) return 0;
    const int64_t a = (i / inner) % axis_n;
    if (block == 0) return a;
    const int64_t nb = (axis_n + block - 1) / block, o = i / (inner * axis_n);
    return (o * nb + a / block) * inner + i % inner;
  }
};

QParams qparams(const OpContext& c, const Tensor& x, const Tensor& scale) {
  QParams p;
  if (scale.numel() <= 1 && c.attr_i("block_size", 0) == 0) return p;
  const int64_t axis = norm_axis(c, c.attr_i("axis", 1), x.rank());
  p.per_axis = true;
  p.axis_n = x.shape[static_cast<size_t>(axis)];
  for (int64_t i = axis + 1; i < x.rank(); ++i) p.inner *= x.shape[static_cast<size_t>(i)];
  p.block = c.attr_i("block_size", 0);
  if (p.block < 0) c.error("block_size must be positive");
  const int64_t want =
      p.block ? x.numel() / std::max<int64_t>(1, p.axis_n) * ((p.axis_n + p.block - 1) / p.block) : p.axis_n;
  if (scale.numel() != want)
    c.error("scale has " + std::to_string(scale.numel()) + " elements, the quantization axis needs " +
            std::to_string(want));
  return p;
}

int32_t zero_point_at(const Tensor* zp, int64_t k) {
  return zp && zp->numel() ? static_cast<int32_t>(zp->get_i64(zp->numel() > 1 ? k : 0)) : 0;
}

// QuantizeLinear's float -> 8-bit step, shared with the int8 kernels that quantize their input
// while packing it (simd/int8_gemm.h: a DynamicQuantizeLinear fused into its readers must give
// the bytes this op gives).
using simd::saturate_round;

template <class Q>
void quantize_span(const float* x, Q* y, size_t n, float scale, float zp) {
  simd::quantize_span(x, y, n, scale, zp);
}

template <class Q>
void dequantize_span(const Q* x, float* y, size_t n, float scale, int32_t zp) {
  for (size_t i = 0; i < n; ++i) y[i] = static_cast<float>(static_cast<int32_t>(x[i]) - zp) * scale;
}

// Runs f(begin, end) over rows of `inner` elements in parallel chunks of about 64 KiB.
template <class F>
void over_rows(int64_t rows, int64_t inner, F&& f) {
  const size_t grain = static_cast<size_t>(std::max<int64_t>(1, 65536 / std::max<int64_t>(1, inner)));
  simd::parallel_chunks(static_cast<size_t>(rows), grain, [&](size_t r0, size_t r1) { f(r0, r1); });
}

void dequantize(OpContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& s = c.input(1);
  const Tensor* zp = c.in(2);
  if (zp && zp->numel() && zp->dtype != x.dtype) c.error("x and x_zero_point must have the same type");
  const QParams qp = qparams(c, x, s);
  // The fast path reads one scale (and zero point) per row's axis index: an empty or short
  // x_scale read past its end (fuzz_runtime, ASan).
  if (qp.block == 0 && s.numel() < (qp.per_axis ? qp.axis_n : 1))
    c.error("x_scale has " + std::to_string(s.numel()) + " elements, fewer than the quantization axis needs");
  if (qp.block == 0 && zp && zp->numel() && zp->numel() < (qp.per_axis ? qp.axis_n : 1))
    c.error("x_zero_point has " + std::to_string(zp->numel()) + " elements, fewer than the quantization axis needs");
  const DType out = s.dtype == DType::Float ? DType::Float : s.dtype;
  if (out == DType::Float && qp.block == 0 &&
      (x.dtype == DType::Uint8 || x.dtype == DType::Int8 || x.dtype == DType::Int32)) {
    Tensor& y = c.output(0, DType::Float, x.shape);
    const int64_t rows = qp.per_axis ? x.numel() / qp.inner : 1, inner = qp.per_axis ? qp.inner : x.numel();
    over_rows(rows, inner, [&](size_t r0, size_t r1) {
      for (size_t r = r0; r < r1; ++r) {
        const int64_t k = qp.per_axis ? static_cast<int64_t>(r) % qp.axis_n : 0;
        const float sc = s.ptr<float>()[k];
        const int32_t z = zero_point_at(zp, k);
        const size_t off = r * static_cast<size_t>(inner), n = static_cast<size_t>(inner);
        float* yp = y.ptr<float>() + off;
        if (x.dtype == DType::Uint8)
          dequantize_span(x.ptr<uint8_t>() + off, yp, n, sc, z);
        else if (x.dtype == DType::Int8)
          dequantize_span(x.ptr<int8_t>() + off, yp, n, sc, z);
        else
          dequantize_span(x.ptr<int32_t>() + off, yp, n, sc, z);
      }
    });
    return;
  }
  // Other types (16-bit integers, float16/bfloat16 scales, blocks): element by element.
  Tensor& y = c.output(0, out, x.shape);
  std::vector<float> v(static_cast<size_t>(x.numel()));
  for (int64_t i = 0, n = x.numel(); i < n; ++i) {
    const int64_t k = qp.at(i);
    v[static_cast<size_t>(i)] =
        static_cast<float>(x.get_i64(i) - zero_point_at(zp, k)) * static_cast<float>(s.get_f64(k));
  }
  cast_into(Tensor::view(DType::Float, x.shape, v.data()), y);
}

template <class Q>
void quantize_rows(const OpContext& c, const Tensor& x, const Tensor& s, const Tensor* zp, const QParams& qp,
                   Tensor& y) {
  (void)c;
  const int64_t rows = qp.per_axis ? x.numel() / qp.inner : 1, inner = qp.per_axis ? qp.inner : x.numel();
  over_rows(rows, inner, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      const int64_t k = qp.per_axis ? static_cast<int64_t>(r) % qp.axis_n : 0;
      const size_t off = r * static_cast<size_t>(inner);
      quantize_span<Q>(x.ptr<float>() + off, y.ptr<Q>() + off, static_cast<size_t>(inner), s.ptr<float>()[k],
                       static_cast<float>(zero_point_at(zp, k)));
    }
  });
}

void quantize(OpContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& s = c.input(1);
  const Tensor* zp = c.in(2);
  DType to = zp ? zp->dtype : DType::Uint8;
  if (c.attr_i("output_dtype", 0)) to = static_cast<DType>(c.attr_i("output_dtype", 0));
  if (zp && zp->dtype != to) c.error("output_dtype and y_zero_point's type differ");
  const QParams qp = qparams(c, x, s);
  Tensor& y = c.output(0, to, x.shape);
  if (x.dtype == DType::Float && s.dtype == DType::Float && qp.block == 0) {
    if (to == DType::Uint8) return quantize_rows<uint8_t>(c, x, s, zp, qp, y);
    if (to == DType::Int8) return quantize_rows<int8_t>(c, x, s, zp, qp, y);
  }
  double lo = 0, hi = 0;
  switch (to) {
    case DType::Int8: lo = -128, hi = 127; break;
    case DType::Uint8: lo = 0, hi = 255; break;
    case DType::Int16: lo = -32768, hi = 32767; break;
    case DType::Uint16: lo = 0, hi = 65535; break;
    default:
      c.error("QuantizeLinear to " + std::string(dtype_name(to)) + " is not supported (int8/uint8/int16/uint16)");
  }
  std::vector<double> q(static_cast<size_t>(x.numel()));
  for (int64_t i = 0, n = x.numel(); i < n; ++i) {
    const int64_t k = qp.at(i);
    const float r = static_cast<float>(x.get_f64(i)) / static_cast<float>(s.get_f64(k));
    const double v = std::nearbyint(static_cast<double>(r)) + zero_point_at(zp, k);
    q[static_cast<size_t>(i)] = std::isnan(v) ? hi : std::clamp(v, lo, hi);
  }
  cast_into(Tensor::view(DType::Double, x.shape, q.data()), y);
}

// ---- DynamicQuantizeLinear ---------------------------------------------------------------

struct MinMax {
  float lo = 0, hi = 0;  // the spec's range always includes 0
};

// min and max of x[0, n) folded into r. NaN is skipped (minps / maxps return their second
// operand, the running value, when the element is NaN; the scalar tail's comparisons are false),
// so the result depends neither on the vector width nor on how the threads split x. The SSE
// form with one chain per bound ran at one element per cycle: DynamicQuantizeLinear of a
// 256x56x56 activation spent as long in it as in its division-bound quantize pass (perf).
void min_max_tail(const float* x, size_t i, size_t n, MinMax& r) {
  for (; i < n; ++i) {
    r.lo = x[i] < r.lo ? x[i] : r.lo;
    r.hi = x[i] > r.hi ? x[i] : r.hi;
  }
}

void min_max_sse(const float* x, size_t n, MinMax& r) {
  __m128 lo0 = _mm_set1_ps(r.lo), lo1 = lo0, hi0 = _mm_set1_ps(r.hi), hi1 = hi0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128 a = _mm_loadu_ps(x + i), b = _mm_loadu_ps(x + i + 4);
    lo0 = _mm_min_ps(a, lo0), lo1 = _mm_min_ps(b, lo1), hi0 = _mm_max_ps(a, hi0), hi1 = _mm_max_ps(b, hi1);
  }
  alignas(16) float l4[4], h4[4];
  _mm_store_ps(l4, _mm_min_ps(lo0, lo1)), _mm_store_ps(h4, _mm_max_ps(hi0, hi1));
  for (int k = 0; k < 4; ++k) r.lo = std::min(r.lo, l4[k]), r.hi = std::max(r.hi, h4[k]);
  min_max_tail(x, i, n, r);
}

__attribute__((target("avx512f"))) void min_max_avx512(const float* x, size_t n, MinMax& r) {
  constexpr __mmask16 all = 0xFFFF;
  __m512 lo0 = _mm512_set1_ps(r.lo), lo1 = lo0, lo2 = lo0, lo3 = lo0;
  __m512 hi0 = _mm512_set1_ps(r.hi), hi1 = hi0, hi2 = hi0, hi3 = hi0;
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16), c = _mm512_loadu_ps(x + i + 32),
                 d = _mm512_loadu_ps(x + i + 48);
    lo0 = _mm512_mask_min_ps(lo0, all, a, lo0), lo1 = _mm512_mask_min_ps(lo1, all, b, lo1);
    lo2 = _mm512_mask_min_ps(lo2, all, c, lo2), lo3 = _mm512_mask_min_ps(lo3, all, d, lo3);
    hi0 = _mm512_mask_max_ps(hi0, all, a, hi0), hi1 = _mm512_mask_max_ps(hi1, all, b, hi1);
    hi2 = _mm512_mask_max_ps(hi2, all, c, hi2), hi3 = _mm512_mask_max_ps(hi3, all, d, hi3);
  }
  alignas(64) float l[64], h[64];
  _mm512_store_ps(l, lo0), _mm512_store_ps(l + 16, lo1), _mm512_store_ps(l + 32, lo2), _mm512_store_ps(l + 48, lo3);
  _mm512_store_ps(h, hi0), _mm512_store_ps(h + 16, hi1), _mm512_store_ps(h + 32, hi2), _mm512_store_ps(h + 48, hi3);
  for (int k = 0; k < 64; ++k) r.lo = std::min(r.lo, l[k]), r.hi = std::max(r.hi, h[k]);
  min_max_sse(x + i, n - i, r);
}

MinMax min_max(const float* x, size_t n) {
  MinMax r;
  std::mutex mu;
  const bool wide = simd::active_isa_level() == simd::Isa::Avx512;
  simd::parallel_chunks(n, 1 << 16, [&](size_t b, size_t e) {
    MinMax part;
    if (wide)
      min_max_avx512(x + b, e - b, part);
    else
      min_max_sse(x + b, e - b, part);
    std::lock_guard l(mu);
    r.lo = std::min(r.lo, part.lo), r.hi = std::max(r.hi, part.hi);
  });
  return r;
}

// scale = (max(0, max x) - min(0, min x)) / 255; zero point = saturate(round(0 - min / scale)).
// An all-zero input gives scale 0 and zero point 0 (ONNX Runtime's result; the spec's formula
// divides by zero there).
std::pair<float, uint8_t> dynamic_params(const float* x, size_t n) {
  const MinMax m = min_max(x, n);
  const float scale = (m.hi - m.lo) / 255.f;
  const uint8_t zp = scale == 0 ? 0 : saturate_round<uint8_t>((0.f - m.lo) / scale, 0.f);
  return {scale, zp};
}

void dynamic_quantize(OpContext& c) {
  const Tensor& x = c.input(0);
  if (x.dtype != DType::Float) c.error("DynamicQuantizeLinear takes float32 input");
  const size_t n = static_cast<size_t>(x.numel());
  // Not a structured binding: the lambdas below capture them, which clang 14 (the fuzz build) rejects.
  const std::pair<float, uint8_t> params = dynamic_params(x.ptr<float>(), n);
  const float scale = params.first;
  const uint8_t zp = params.second;
  Tensor& y = c.output(0, DType::Uint8, x.shape);
  simd::parallel_chunks(n, 1 << 16, [&](size_t b, size_t e) {
    simd::dynamic_quantize_span(x.ptr<float>() + b, y.ptr<uint8_t>() + b, e - b, scale, zp);
  });
  c.output(1, DType::Float, {}).ptr<float>()[0] = scale;
  c.output(2, DType::Uint8, {}).ptr<uint8_t>()[0] = zp;
}

// The plan's DynamicQuantizeLinear whose uint8 output is read only by integer convs / matmuls
// that quantize x themselves while packing it (dynamic_quantize_in_packing, runtime/fusions.cpp):
// only the range pass and the scale and zero point (outputs 1 and 2); output 0 is never
// written. ISNet's 256 -> 64 1x1 chain spent 29% of its time writing that tensor (perf).
void dynamic_quantize_params(OpContext& c) {
  const Tensor& x = c.input(0);
  if (x.dtype != DType::Float) c.error("DynamicQuantizeLinear takes float32 input");
  const std::pair<float, uint8_t> params = dynamic_params(x.ptr<float>(), static_cast<size_t>(x.numel()));
  c.output(1, DType::Float, {}).ptr<float>()[0] = params.first;
  c.output(2, DType::Uint8, {}).ptr<uint8_t>()[0] = params.second;
}

// The quantization a fused reader applies to its float input (input 0): the scale from
// kQuantScaleInput (the DynamicQuantizeLinear's output 1), the zero point from the reader's own
// zero-point input (the op's output 2, which the fusion checks). Readers' inputs 4..6 may be
// empty: the slot is past every fused kernel's own inputs.
constexpr size_t kQuantScaleInput = 7;

struct InputQuant {
  float scale;
  uint8_t zero;
};

// nullopt when input 0 is 8-bit (the op as written); else the quantization, checked.
std::optional<InputQuant> input_quant(const OpContext& c, bool quantizing, const Tensor* zp) {
  if (!quantizing) return std::nullopt;
  const Tensor& x = c.input(0);
  const Tensor& s = c.input(kQuantScaleInput);
  if (x.dtype != DType::Float || s.dtype != DType::Float || s.numel() != 1 || !zp || zp->dtype != DType::Uint8 ||
      zp->numel() != 1)
    c.error("internal: the fused DynamicQuantizeLinear's input, scale or zero point has the wrong type");
  return InputQuant{s.ptr<float>()[0], zp->ptr<uint8_t>()[0]};
}

// ---- integer matmul ----------------------------------------------------------------------

bool is_8bit(DType t) { return t == DType::Uint8 || t == DType::Int8; }

// A weight packed for simd::gemm8 at plan time (2-D constant B with a constant or absent zero
// point), or per group for a conv.
struct PackedWeights {
  std::vector<simd::PackedB8> groups;
  std::vector<simd::PackedW8> direct;  // convs on simd::conv8_nd: per group
  std::vector<int32_t> depthwise;      // depthwise convs: w - w_zero_point per (channel, tap)
  // QLinearConv over few positions (conv_int8_gemm): per group, W^T as gemm8's B, packed by the
  // first run that takes the path from a copy of W's bytes kept for it (the plan drops W's own
  // bytes after preparing; the copy, one byte per weight, goes once packed).
  mutable std::once_flag gemm_once;
  mutable std::vector<simd::PackedB8> gemm;
  mutable std::vector<uint8_t> w_bytes;
};

// Zero points as int32 (empty when absent). 8-bit ones through typed pointers: they are read on
// every run, and per element through get_i64 a per-channel conv's 960 took 4 us (MobileNetV2
// QOperator: 2% of its time with the multipliers below).
std::vector<int32_t> zero_points(const Tensor* zp) {
  std::vector<int32_t> v;
  if (!zp) return v;
  const auto n = static_cast<size_t>(zp->numel());
  v.resize(n);
  if (zp->dtype == DType::Uint8)
    std::copy_n(zp->ptr<uint8_t>(), n, v.begin());
  else if (zp->dtype == DType::Int8)
    std::copy_n(zp->ptr<int8_t>(), n, v.begin());
  else
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(zp->get_i64(static_cast<int64_t>(i)));
  return v;
}

// Constant input i of node n: present (in) or absent in the graph (ok, nullptr); a
// non-constant present input makes the preparation give up.
bool const_or_absent(const Graph& g, NodeId n, std::span<const Tensor* const> in, size_t i) {
  return (i < in.size() && in[i]) || !g.input(n, i).valid();
}

std::shared_ptr<const void> prepare_matmul_b(const Graph& g, NodeId n, std::span<const Tensor* const> in, size_t b_at,
                                             size_t zp_at) {
  if (b_at >= in.size() || !in[b_at] || in[b_at]->rank() != 2 || !is_8bit(in[b_at]->dtype)) return nullptr;
  if (!const_or_absent(g, n, in, zp_at)) return nullptr;
  const Tensor& b = *in[b_at];
  const Tensor* zp = zp_at < in.size() ? in[zp_at] : nullptr;
  const auto K = static_cast<size_t>(b.shape[0]), N = static_cast<size_t>(b.shape[1]);
  if (zp && zp->numel() != 1 && static_cast<size_t>(zp->numel()) != N) return nullptr;
  const std::vector<int32_t> z = zero_points(zp);
  auto p = std::make_shared<PackedWeights>();
  p->groups.push_back(simd::pack_b8(false, K, N, b.data, N, b.dtype == DType::Int8, z.data(), z.size()));
  return p;
}

std::shared_ptr<const void> prepare_matmul_integer(const Graph& g, NodeId n, std::span<const Tensor* const> in) {
  return prepare_matmul_b(g, n, in, 1, 3);
}

// The int32 product of a MatMulInteger-style node: A (inputs a_at, zero point az_at) times B
// (b_at, bz_at), numpy.matmul shapes. Calls done(y) with the int32 result (its own buffer, or
// `into` when given and the shapes allow).
struct IntProduct {
  Shape shape;
  std::vector<int32_t> owned;
  int32_t* data = nullptr;
};

Shape matmul_out_shape(const OpContext& c, const Shape& as0, const Shape& bs0) {
  Shape as = as0, bs = bs0;
  if (as.empty() || bs.empty()) c.error("MatMul operands must have rank >= 1");
  const bool a1 = as.size() == 1, b1 = bs.size() == 1;
  if (a1) as.insert(as.begin(), 1);
  if (b1) bs.push_back(1);
  if (as.back() != bs[bs.size() - 2]) c.error("inner dimensions differ: " + shape_str(as0) + " x " + shape_str(bs0));
  Shape batch = broadcast_shapes(c, Shape(as.begin(), as.end() - 2), Shape(bs.begin(), bs.end() - 2));
  if (!a1) batch.push_back(as[as.size() - 2]);
  if (!b1) batch.push_back(bs.back());
  return batch;
}

// y (int32, shape matmul_out_shape) = (A - za) x (B - zb). aq: A is float, quantized to uint8
// with (aq->scale, aq->zero) as it is packed (az is then that zero point).
// rq (QLinearMatMul): the product requantized in gemm8's store into rq->y instead, when B is
// shared by every row and A's zero point is one value; returns false (nothing written) otherwise.
bool int_matmul(const OpContext& c, const Tensor& a0, const Tensor* az, const Tensor& b, const Tensor* bz,
                const PackedWeights* packed, int32_t* y, std::optional<InputQuant> aq = std::nullopt,
                const simd::Gemm8Requant* rq = nullptr) {
  const Tensor* ap = &a0;
  Tensor a_q;  // aq on a path that does not quantize while packing: A quantized here first
  if (aq && !(packed || b.rank() <= 2)) {
    a_q = Tensor::alloc(DType::Uint8, a0.shape);
    simd::dynamic_quantize_span(a0.ptr<float>(), a_q.ptr<uint8_t>(), static_cast<size_t>(a0.numel()), aq->scale,
                                aq->zero);
    ap = &a_q, aq.reset();
  }
  const Tensor& a = *ap;
  if ((!aq && !is_8bit(a.dtype)) || !is_8bit(b.dtype)) c.error("A and B must be int8 or uint8");
  if (!aq && az && az->numel() && az->dtype != a.dtype) c.error("a_zero_point's type differs from A's");
  if (bz && bz->numel() && bz->dtype != b.dtype) c.error("b_zero_point's type differs from B's");
  Shape as = a.shape, bs = b.shape;
  const bool a1 = as.size() == 1;
  if (a1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  const bool a_signed = a.dtype == DType::Int8, b_signed = b.dtype == DType::Int8;
  const std::vector<int32_t> zb = zero_points(bz);
  if (!zb.empty() && zb.size() != 1 && static_cast<int64_t>(zb.size()) != N)
    c.error("b_zero_point must have 1 or N elements (per column)");
  if (packed || bs.size() == 2) {
    // B shared by every row of every batch: one GEMM over all of A's rows.
    simd::PackedB8 local;
    if (!packed)
      local = simd::pack_b8(false, static_cast<size_t>(K), static_cast<size_t>(N), b.data, static_cast<size_t>(N),
                            b_signed, zb.data(), zb.size());
    const simd::PackedB8& pb = packed ? packed->groups[0] : local;
    const auto rows = static_cast<size_t>(a.numel() / std::max<int64_t>(K, 1));
    if (aq) {
      simd::gemm8_quantizing(rows, a.ptr<float>(), static_cast<size_t>(K), aq->scale, aq->zero, pb, y,
                             static_cast<size_t>(N));
      return true;
    }
    if (rq) {
      if (az && az->numel() > 1) return false;
      simd::gemm8_requantize(rows, a.data, static_cast<size_t>(K), a_signed, zero_point_at(az, 0), pb, *rq);
      return true;
    }
    if (az && az->numel() > 1) {
      // Per-row A zero points (the spec allows them for 2-D A): one row at a time.
      if (as.size() != 2 || az->numel() != M) c.error("a_zero_point must have 1 or M elements");
      for (int64_t m = 0; m < M; ++m)
        simd::gemm8(1, reinterpret_cast<const uint8_t*>(a.data) + m * K, static_cast<size_t>(K), a_signed,
                    zero_point_at(az, m), pb, y + m * N, static_cast<size_t>(N));
      return true;
    }
    simd::gemm8(rows, a.data, static_cast<size_t>(K), a_signed, zero_point_at(az, 0), pb, y, static_cast<size_t>(N));
    return true;
  }
  if (rq) return false;
  if (az && az->numel() > 1) c.error("a_zero_point must be a scalar when B has batch dimensions");
  const int32_t za = zero_point_at(az, 0);
  Shape abatch(as.begin(), as.end() - 2), bbatch(bs.begin(), bs.end() - 2);
  Shape batch = broadcast_shapes(c, abatch, bbatch);
  for_each_broadcast<2>(batch, {bcast_strides(abatch, batch), bcast_strides(bbatch, batch)},
                        [&](int64_t bi, const std::array<int64_t, 2>& o) {
                          const auto* bp = reinterpret_cast<const uint8_t*>(b.data) + o[1] * K * N;
                          simd::PackedB8 pb = simd::pack_b8(false, static_cast<size_t>(K), static_cast<size_t>(N), bp,
                                                            static_cast<size_t>(N), b_signed, zb.data(), zb.size());
                          simd::gemm8(static_cast<size_t>(M), reinterpret_cast<const uint8_t*>(a.data) + o[0] * M * K,
                                      static_cast<size_t>(K), a_signed, za, pb, y + bi * M * N, static_cast<size_t>(N));
                        });
  return true;
}

const PackedWeights* packed_state(const OpContext& c) { return static_cast<const PackedWeights*>(c.state); }

void matmul_integer_body(OpContext& c, bool quantizing) {
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(1);
  Tensor& y = c.output(0, DType::Int32, matmul_out_shape(c, a.shape, b.shape));
  int_matmul(c, a, c.in(2), b, c.in(3), packed_state(c), y.ptr<int32_t>(), input_quant(c, quantizing, c.in(2)));
}

void matmul_integer(OpContext& c) { matmul_integer_body(c, false); }
void matmul_integer_quantizing(OpContext& c) { matmul_integer_body(c, true); }

// Requantization of int32 sums: y = saturate(round(acc * mult[col]) + zp), mult per column.
template <class Q>
void requantize(const int32_t* acc, Q* y, size_t rows, size_t cols, const float* mult, bool per_col, float zp) {
  for (size_t r = 0; r < rows; ++r)
    for (size_t j = 0; j < cols; ++j)
      y[r * cols + j] = saturate_round<Q>(static_cast<float>(acc[r * cols + j]) * mult[per_col ? j : 0], zp);
}

// The float32 a_scale * b_scale[n] / y_scale per column (one value when b_scale is per tensor).
std::vector<float> multipliers(const OpContext& c, const Tensor& as, const Tensor& bs, const Tensor* ys, int64_t n) {
  if (as.numel() != 1) c.error("a_scale must be a scalar");
  if (bs.numel() != 1 && bs.numel() != n) c.error("b_scale must have 1 or N elements");
  std::vector<float> m(static_cast<size_t>(bs.numel()));
  const auto a = static_cast<float>(as.get_f64(0));
  const float y = ys ? static_cast<float>(ys->get_f64(0)) : 1.f;
  auto b = [&](int64_t i) { return bs.dtype == DType::Float ? bs.ptr<float>()[i] : static_cast<float>(bs.get_f64(i)); };
  for (int64_t i = 0; i < bs.numel(); ++i) {
    m[static_cast<size_t>(i)] = a * b(i);
    if (ys) m[static_cast<size_t>(i)] /= y;
  }
  return m;
}

// QLinearMatMul: with B shared by every row (a constant weight, or any 2-D B) gemm8 requantizes
// in its store (simd::gemm8_requantize: no int32 product in memory, as QLinearConv); batched B
// and per-row A zero points go through the int32 product and requantize().
void qlinear_matmul(OpContext& c) {
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(3);
  const Tensor* yz = c.in(7);
  const Shape ys = matmul_out_shape(c, a.shape, b.shape);
  const int64_t N = b.rank() == 1 ? 1 : b.shape.back();
  const std::vector<float> mult = multipliers(c, c.input(1), c.input(4), &c.input(6), N);
  const DType to = yz ? yz->dtype : DType::Uint8;
  if (to != DType::Uint8 && to != DType::Int8) c.error("y_zero_point must be int8 or uint8");
  if (yz && yz->numel() > 1) c.error("y_zero_point must be a scalar (per-row output quantization is not supported)");
  Tensor& y = c.output(0, to, ys);
  const float z = static_cast<float>(zero_point_at(yz, 0));
  simd::Gemm8Requant rq;
  rq.y = y.data, rq.ldy = static_cast<size_t>(N), rq.y_signed = to == DType::Int8, rq.zero = z;
  rq.mult = mult.data(), rq.mult_count = mult.size();
  if (int_matmul(c, a, c.in(2), b, c.in(5), packed_state(c), nullptr, std::nullopt, &rq)) return;
  std::vector<int32_t> acc(static_cast<size_t>(numel(ys)));
  int_matmul(c, a, c.in(2), b, c.in(5), packed_state(c), acc.data());
  const size_t rows = acc.size() / static_cast<size_t>(std::max<int64_t>(N, 1));
  if (to == DType::Uint8)
    requantize(acc.data(), y.ptr<uint8_t>(), rows, static_cast<size_t>(N), mult.data(), mult.size() > 1, z);
  else
    requantize(acc.data(), y.ptr<int8_t>(), rows, static_cast<size_t>(N), mult.data(), mult.size() > 1, z);
}

std::shared_ptr<const void> prepare_qlinear_matmul(const Graph& g, NodeId n, std::span<const Tensor* const> in) {
  return prepare_matmul_b(g, n, in, 3, 5);
}

// com.microsoft MatMulIntegerToFloat(A, B, a_scale, b_scale, a_zp, b_zp, bias):
// float(A x B) * a_scale * b_scale (+ bias), what ONNX Runtime fuses DynamicQuantizeLinear ->
// MatMulInteger -> Cast -> Mul into.
void integer_product_to_float(OpContext& c, const Tensor& a, const Tensor* az, float a_scale, const Tensor& b,
                              const Tensor* bz, const Tensor& b_scale, const Tensor* bias,
                              std::optional<InputQuant> aq = std::nullopt) {
  const Shape ys = matmul_out_shape(c, a.shape, b.shape);
  const int64_t N = b.rank() == 1 ? 1 : b.shape.back();
  Tensor& y = c.output(0, DType::Float, ys);
  // The int32 product goes to y's bytes and is converted in place (same size, element by element).
  auto* acc = reinterpret_cast<int32_t*>(y.data);
  int_matmul(c, a, az, b, bz, packed_state(c), acc, aq);
  if (b_scale.numel() != 1 && b_scale.numel() != N) c.error("b_scale must have 1 or N elements");
  if (bias && bias->numel() != N) c.error("bias must have N elements");
  std::vector<float> mult(static_cast<size_t>(b_scale.numel()));
  for (size_t i = 0; i < mult.size(); ++i)
    mult[i] = a_scale * static_cast<float>(b_scale.get_f64(static_cast<int64_t>(i)));
  const size_t rows = static_cast<size_t>(numel(ys) / std::max<int64_t>(N, 1)), cols = static_cast<size_t>(N);
  float* out = y.ptr<float>();
  over_rows(static_cast<int64_t>(rows), static_cast<int64_t>(cols), [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r)
      for (size_t j = 0; j < cols; ++j) {
        int32_t v;
        std::memcpy(&v, out + r * cols + j, 4);
        float f = static_cast<float>(v) * mult[mult.size() > 1 ? j : 0];
        if (bias) f += bias->ptr<float>()[j];
        out[r * cols + j] = f;
      }
    // A fused activation (the plan's activation fusion), on the rows while they are in cache.
    if (c.fused_act.op != simd::UnaryOp::Identity)
      simd::unary(c.fused_act, out + r0 * cols, out + r0 * cols, (r1 - r0) * cols);
  });
}

void matmul_integer_to_float_body(OpContext& c, bool quantizing) {
  integer_product_to_float(c, c.input(0), c.in(4), static_cast<float>(c.input(2).get_f64(0)), c.input(1), c.in(5),
                           c.input(3), c.in(6), input_quant(c, quantizing, c.in(4)));
}

void matmul_integer_to_float(OpContext& c) { matmul_integer_to_float_body(c, false); }
void matmul_integer_to_float_quantizing(OpContext& c) { matmul_integer_to_float_body(c, true); }

std::shared_ptr<const void> prepare_matmul_integer_to_float(const Graph& g, NodeId n,
                                                            std::span<const Tensor* const> in) {
  return prepare_matmul_b(g, n, in, 1, 5);
}

// com.microsoft DynamicQuantizeMatMul(A float, B, b_scale, b_zp, bias): A quantized as
// DynamicQuantizeLinear does, then MatMulIntegerToFloat.
void dynamic_quantize_matmul(OpContext& c) {
  const Tensor& x = c.input(0);
  if (x.dtype != DType::Float) c.error("A must be float32");
  const std::pair<float, uint8_t> params = dynamic_params(x.ptr<float>(), static_cast<size_t>(x.numel()));
  // A quantized as it is packed (no uint8 copy of A).
  uint8_t zpv = params.second;
  const Tensor az = Tensor::view(DType::Uint8, {}, &zpv);
  integer_product_to_float(c, x, &az, params.first, c.input(1), c.in(3), c.input(2), c.in(4),
                           InputQuant{params.first, params.second});
}

std::shared_ptr<const void> prepare_dynamic_quantize_matmul(const Graph& g, NodeId n,
                                                            std::span<const Tensor* const> in) {
  return prepare_matmul_b(g, n, in, 1, 3);
}

// ---- integer convolution -----------------------------------------------------------------

// Input indices of ConvInteger and QLinearConv.
struct ConvSlots {
  size_t x, x_zp, w, w_zp;
};
constexpr ConvSlots kConvInteger{0, 2, 1, 3};
constexpr ConvSlots kQLinearConv{0, 2, 3, 5};

// A depthwise conv's weights minus their zero points, [M][taps].
std::vector<int32_t> depthwise_weights(const Tensor& w, const std::vector<int32_t>& z) {
  const int64_t M = w.shape[0], taps = w.numel() / std::max<int64_t>(M, 1);
  std::vector<int32_t> v(static_cast<size_t>(w.numel()));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < taps; ++k)
      v[static_cast<size_t>(m * taps + k)] = static_cast<int32_t>(w.get_i64(m * taps + k)) -
                                             (z.empty() ? 0 : z[z.size() > 1 ? static_cast<size_t>(m) : 0]);
  return v;
}

// Per group: the weights packed for simd::conv8_nd (every non-depthwise conv: 1-D to 3-D, any
// stride, dilation and padding), or a depthwise conv's taps.
std::shared_ptr<const void> prepare_conv(const Graph& g, NodeId n, std::span<const Tensor* const> in, ConvSlots s) {
  if (s.w >= in.size() || !in[s.w] || in[s.w]->rank() < 3 || in[s.w]->rank() > 5 || !is_8bit(in[s.w]->dtype))
    return nullptr;
  if (!const_or_absent(g, n, in, s.w_zp)) return nullptr;
  const Tensor& w = *in[s.w];
  const Tensor* zp = s.w_zp < in.size() ? in[s.w_zp] : nullptr;
  const int64_t M = w.shape[0], group = g.attr_int(n, "group", 1);
  if (group < 1 || M % group) return nullptr;
  if (zp && zp->numel() != 1 && zp->numel() != M) return nullptr;
  const int64_t Mg = M / group, K = w.numel() / std::max<int64_t>(M, 1);
  const std::vector<int32_t> z = zero_points(zp);
  auto p = std::make_shared<PackedWeights>();
  if (Mg == 1 && w.shape[1] == 1) {
    p->depthwise = depthwise_weights(w, z);
    return p;
  }
  if (s.w == kQLinearConv.w) {
    const auto* wb = reinterpret_cast<const uint8_t*>(w.data);
    p->w_bytes.assign(wb, wb + w.bytes());
  }
  for (int64_t gi = 0; gi < group; ++gi)
    p->direct.push_back(simd::pack_w8(static_cast<size_t>(Mg), static_cast<size_t>(K),
                                      reinterpret_cast<const uint8_t*>(w.data) + gi * Mg * K, static_cast<size_t>(K),
                                      w.dtype == DType::Int8, z.size() > 1 ? z.data() + gi * Mg : z.data(),
                                      z.size() > 1 ? static_cast<size_t>(Mg) : z.size()));
  return p;
}

struct ConvRun {
  ConvGeometry geo;
  std::array<int64_t, 3> out{1, 1, 1};
  int64_t N = 0, C = 0, M = 0, group = 1, Cg = 0, Mg = 0, K = 0, P = 0, in_sp = 1;
};

// Below this many output positions per image a (requantized) conv runs as a GEMM over its patches
// (conv_int8_gemm): conv8's tiles span 32 positions (VNNI), so a 2x2 output used 4 of every 32
// lanes. ResNet's late stages, resnet_small QOperator at 96x96: layer4's 3x3 (512 -> 512, 2x2
// out) took 3.2 ms, layer3's 1x1s and 3x3 (6x6) 0.3-1.6 ms each.
constexpr int64_t kConvGemmPositions = 64;

// The conv as Y^T = patches x W^T per image and group: the patches [P][K] gathered as 8-bit rows
// (x's zero point where the window leaves the input), W^T packed once as gemm8's B (or per call
// without a state), gemm8_requantize storing [P][Mg] with the conv output's multipliers and
// int32 bias per channel (its columns), transposed into the NCHW output. 8-bit outputs (q8) only.
// K runs tap-major (k = tap * Cg + channel, the weights reordered to match when packed): with x
// transposed to [position][channel] once, each tap of a patch row is one copy of Cg bytes. The
// byte-per-channel gather took a quarter of ResNet's 256 -> 256 3x3 stride-2 conv on 12x12 (perf).
template <class Direct, class Dims>
void conv_int8_gemm(const ConvRun& cr, const Tensor& w, const std::vector<int32_t>& wz, const PackedWeights* packed,
                    bool x_signed, int32_t xzv, const uint8_t* xb, const Dims& I, const Dims& O, const Dims& KS,
                    const Dims& ST, const Dims& DL, const Dims& PB, Direct&& direct) {
  const size_t Mg = static_cast<size_t>(cr.Mg), K = static_cast<size_t>(cr.K), P = static_cast<size_t>(cr.P);
  const size_t Cg = static_cast<size_t>(cr.Cg), taps = K / std::max<size_t>(Cg, 1);
  auto pack = [&](const void* wb, std::vector<simd::PackedB8>& out) {
    std::vector<uint8_t> wt(taps > 1 ? Mg * K : 0);
    for (int64_t gi = 0; gi < cr.group; ++gi) {
      const uint8_t* src = static_cast<const uint8_t*>(wb) + gi * cr.Mg * cr.K;
      if (taps > 1) {
        for (size_t m = 0; m < Mg; ++m)
          for (size_t c = 0; c < Cg; ++c)
            for (size_t t = 0; t < taps; ++t) wt[m * K + t * Cg + c] = src[m * K + c * taps + t];
        src = wt.data();
      }
      out.push_back(simd::pack_b8(true, K, Mg, src, K, w.dtype == DType::Int8,
                                  wz.size() > 1 ? wz.data() + gi * cr.Mg : wz.data(), wz.size() > 1 ? Mg : wz.size()));
    }
  };
  std::vector<simd::PackedB8> local;
  const std::vector<simd::PackedB8>* b = &local;
  if (packed && !packed->direct.empty()) {
    std::call_once(packed->gemm_once, [&] {
      if (packed->w_bytes.size() != static_cast<size_t>(w.bytes()))
        fail("internal: QLinearConv's weight bytes are gone");
      pack(packed->w_bytes.data(), packed->gemm);
      std::vector<uint8_t>().swap(packed->w_bytes);
    });
    b = &packed->gemm;
  } else {
    pack(w.data, local);
  }
  const auto pad = static_cast<uint8_t>(xzv);  // x's zero point as x's byte (int8: two's complement)
  const bool pointwise =
      taps == 1 && cr.P == cr.in_sp && PB == std::array<int64_t, 3>{} && ST == std::array<int64_t, 3>{1, 1, 1};
  // src[q * taps + t]: where output position q's tap t reads x (element index in a channel's
  // plane), or -1 (padding); one table for every image and group.
  std::vector<int64_t> src(P * taps);
  for (int64_t od = 0, q = 0; od < O[0]; ++od)
    for (int64_t oh = 0; oh < O[1]; ++oh)
      for (int64_t ow = 0; ow < O[2]; ++ow, ++q)
        for (int64_t kd = 0, t = 0; kd < KS[0]; ++kd)
          for (int64_t kh = 0; kh < KS[1]; ++kh)
            for (int64_t kw = 0; kw < KS[2]; ++kw, ++t) {
              const int64_t id = od * ST[0] + kd * DL[0] - PB[0], ih = oh * ST[1] + kh * DL[1] - PB[1],
                            iw = ow * ST[2] + kw * DL[2] - PB[2];
              src[static_cast<size_t>(q * static_cast<int64_t>(taps) + t)] =
                  id < 0 || id >= I[0] || ih < 0 || ih >= I[1] || iw < 0 || iw >= I[2] ? -1
                                                                                       : (id * I[1] + ih) * I[2] + iw;
            }
  // One tap: the patches are x (a strided 1x1's: its positions picked per channel first) transposed.
  std::vector<uint8_t> patches(P * K), yt(P * Mg);
  std::vector<uint8_t> xt(pointwise ? 0 : taps == 1 ? P * Cg : static_cast<size_t>(cr.in_sp) * Cg);
  for (int64_t n = 0; n < cr.N; ++n)
    for (int64_t gi = 0; gi < cr.group; ++gi) {
      const uint8_t* xg = xb + (n * cr.C + gi * cr.Cg) * cr.in_sp;
      if (taps == 1) {
        for (size_t c = 0; c < Cg && !pointwise; ++c) {
          const uint8_t* xc = xg + c * static_cast<size_t>(cr.in_sp);
          for (size_t q = 0; q < P; ++q) xt[c * P + q] = src[q] < 0 ? pad : xc[src[q]];
        }
        simd::transpose(1, std::array<int64_t, 2>{cr.Cg, cr.P}, pointwise ? xg : xt.data(),
                        std::array<int64_t, 2>{1, 0}, patches.data());
      } else {
        // patches[q][t * Cg + c] for output position q and tap t.
        simd::transpose(1, std::array<int64_t, 2>{cr.Cg, cr.in_sp}, xg, std::array<int64_t, 2>{1, 0}, xt.data());
        for (size_t i = 0; i < P * taps; ++i) {
          uint8_t* row = patches.data() + i * Cg;
          if (src[i] < 0)
            std::memset(row, pad, Cg);
          else
            std::memcpy(row, xt.data() + static_cast<size_t>(src[i]) * Cg, Cg);
        }
      }
      const simd::Conv8Output o = direct(n, gi);
      simd::Gemm8Requant rq;
      rq.y = yt.data(), rq.ldy = Mg, rq.y_signed = o.q8_signed, rq.zero = o.q8_zero;
      rq.mult = o.mult, rq.mult_count = o.mult_count > 1 ? Mg : 1, rq.acc_bias = o.acc_bias;
      simd::gemm8_requantize(P, patches.data(), K, x_signed, xzv, (*b)[static_cast<size_t>(gi)], rq);
      // y[m][q] = yt[q][m] (the group's channels are contiguous planes: o.ld == P).
      simd::transpose(1, std::array<int64_t, 2>{cr.P, cr.Mg}, yt.data(), std::array<int64_t, 2>{1, 0}, o.q8);
    }
}

// The int32 convolution. Every conv but a depthwise one runs on simd::conv8_nd per image and
// group, writing where direct(n, gi) says (a Conv8Output: int32, dequantized float or
// requantized 8-bit, stored from the kernel); a depthwise conv runs on simd::conv8_depthwise,
// writing every channel where direct(n, 0) says. The gathering path strided and 3-D convs took
// before (im2col chunks into gemm8 and an int32 tile per chunk) is gone: at stride 2 the phase
// split of conv8_nd is one pass over the input, where the gathering copied it K / C times.
// xq: x is float, quantized to uint8 as it is packed (a fused DynamicQuantizeLinear).
template <class Direct>
void conv_int8(const OpContext& c, ConvSlots s, const PackedWeights* packed, ConvRun& cr, Direct&& direct,
               std::optional<InputQuant> xq = std::nullopt) {
  const Tensor& x = c.input(s.x);
  const Tensor& w = c.input(s.w);
  if ((!xq && !is_8bit(x.dtype)) || !is_8bit(w.dtype)) c.error("x and w must be int8 or uint8");
  const Tensor* xz = c.in(s.x_zp);
  if (xz && xz->numel() > 1) c.error("x_zero_point must be a scalar (per-tensor)");
  if (!xq && xz && xz->numel() && xz->dtype != x.dtype) c.error("x_zero_point's type differs from x's");
  cr.geo = conv_geometry(c, x.shape, w.shape, false);
  const ConvGeometry& g = cr.geo;
  cr.N = x.shape[0], cr.C = x.shape[1], cr.M = w.shape[0], cr.group = c.attr_i("group", 1);
  if (cr.group < 1 || cr.C % cr.group || cr.M % cr.group || w.shape[1] != cr.C / cr.group)
    c.error("channels " + std::to_string(cr.C) + " and weight " + shape_str(w.shape) + " do not match group " +
            std::to_string(cr.group));
  cr.Cg = cr.C / cr.group, cr.Mg = cr.M / cr.group;
  // A kernel_shape attribute that disagrees with the weight would size K past the weight's end.
  for (int i = 0; i < g.rank; ++i)
    if (g.kernel[static_cast<size_t>(i)] != w.shape[static_cast<size_t>(i) + 2])
      c.error("kernel_shape does not match weight " + shape_str(w.shape));
  int64_t ksp = 1;
  cr.P = 1;
  for (int i = 0; i < g.rank; ++i) {
    const size_t u = static_cast<size_t>(i);
    cr.out[u] = (g.in[u] + g.pad_begin[u] + g.pad_end[u] - g.dilation[u] * (g.kernel[u] - 1) - 1) / g.stride[u] + 1;
    // (The division truncates: a window one short of the padded input at stride 2 gave 1.)
    if (cr.out[u] < 1 || g.in[u] + g.pad_begin[u] + g.pad_end[u] < g.dilation[u] * (g.kernel[u] - 1) + 1)
      c.error("the convolution's output would be empty: input " + shape_str(x.shape));
    cr.P *= cr.out[u], ksp *= g.kernel[u], cr.in_sp *= g.in[u];
  }
  cr.K = cr.Cg * ksp;
  const std::vector<int32_t> wz = zero_points(c.in(s.w_zp));
  if (!wz.empty() && wz.size() != 1 && static_cast<int64_t>(wz.size()) != cr.M)
    c.error("w_zero_point must have 1 or M elements");
  const bool x_signed = !xq && x.dtype == DType::Int8;
  const int32_t xzv = zero_point_at(xz, 0);
  const auto* xb = reinterpret_cast<const uint8_t*>(x.data);
  const float* xf = xq ? x.ptr<float>() : nullptr;
  // 3-D view of the geometry (missing leading dims are 1).
  auto dim3 = [&](const std::array<int64_t, 3>& a, int64_t fill) {
    return std::array<int64_t, 3>{g.rank == 3 ? a[0] : fill, g.rank >= 2 ? a[static_cast<size_t>(g.rank - 2)] : fill,
                                  a[static_cast<size_t>(g.rank - 1)]};
  };
  const auto I = dim3(g.in, 1), O = dim3(cr.out, 1), KS = dim3(g.kernel, 1), ST = dim3(g.stride, 1),
             DL = dim3(g.dilation, 1), PB = dim3(g.pad_begin, 0), PE = dim3(g.pad_end, 0);
  auto u3 = [](const std::array<int64_t, 3>& a) {
    return std::array<size_t, 3>{static_cast<size_t>(a[0]), static_cast<size_t>(a[1]), static_cast<size_t>(a[2])};
  };
  // One group's shape (a depthwise conv's: every channel).
  const bool depthwise = cr.Mg == 1 && cr.Cg == 1;
  const simd::Conv8Shape shape{
      static_cast<size_t>(depthwise ? cr.C : cr.Cg), u3(I), u3(KS), u3(PB), u3(PE), u3(DL), u3(ST)};
  PackedWeights local;
  const PackedWeights* const from_plan = packed;  // the plan's state, before `local` may stand in
  if (!depthwise) {
    if (!packed || packed->direct.empty()) {
      for (int64_t gi = 0; gi < cr.group; ++gi)
        local.direct.push_back(simd::pack_w8(static_cast<size_t>(cr.Mg), static_cast<size_t>(cr.K),
                                             reinterpret_cast<const uint8_t*>(w.data) + gi * cr.Mg * cr.K,
                                             static_cast<size_t>(cr.K), w.dtype == DType::Int8,
                                             wz.size() > 1 ? wz.data() + gi * cr.Mg : wz.data(),
                                             wz.size() > 1 ? static_cast<size_t>(cr.Mg) : wz.size()));
      packed = &local;
    }
    if (!xq && cr.P < kConvGemmPositions && direct(0, 0).q8) {
      conv_int8_gemm(cr, w, wz, from_plan, x_signed, xzv, xb, I, O, KS, ST, DL, PB, direct);
      return;
    }
    for (int64_t n = 0; n < cr.N; ++n)
      for (int64_t gi = 0; gi < cr.group; ++gi) {
        const int64_t at = (n * cr.C + gi * cr.Cg) * cr.in_sp;
        if (xq)
          simd::conv8_nd_quantizing(shape, xf + at, xq->scale, xq->zero, packed->direct[static_cast<size_t>(gi)],
                                    direct(n, gi));
        else
          simd::conv8_nd(shape, xb + at, x_signed, xzv, packed->direct[static_cast<size_t>(gi)], direct(n, gi));
      }
    return;
  }
  // A depthwise conv reads each element a few times: x quantized once first.
  std::vector<uint8_t> x_q;
  if (xq) {
    x_q.resize(static_cast<size_t>(x.numel()));
    simd::parallel_chunks(x_q.size(), 1 << 16, [&](size_t b, size_t e) {
      simd::dynamic_quantize_span(xf + b, x_q.data() + b, e - b, xq->scale, xq->zero);
    });
    xb = x_q.data();
  }
  if (!packed || packed->depthwise.empty()) {
    local.depthwise = depthwise_weights(w, wz);
    packed = &local;
  }
  // simd::conv8_depthwise: int16 tap pairs into int32, stored as direct(n, 0) says for every
  // channel (group gi's output starts at channel gi). On the float depthwise kernel with the rows
  // requantized afterwards, MobileNetV2 QOperator's 17 depthwise convs took 18 of its 30 ms.
  for (int64_t n = 0; n < cr.N; ++n)
    simd::conv8_depthwise(shape, xb + n * cr.C * cr.in_sp, x_signed, xzv, packed->depthwise.data(), direct(n, 0));
}

// [N, M, output spatial...] of a conv with input x and weight w.
Shape conv_shape(const OpContext& c, const Tensor& x, const Tensor& w) {
  const ConvGeometry g = conv_geometry(c, x.shape, w.shape, false);
  Shape s{x.shape[0], w.shape[0]};
  for (int i = 0; i < g.rank; ++i) {
    const size_t u = static_cast<size_t>(i);
    s.push_back((g.in[u] + g.pad_begin[u] + g.pad_end[u] - g.dilation[u] * (g.kernel[u] - 1) - 1) / g.stride[u] + 1);
  }
  return s;
}

void conv_integer_body(OpContext& c, bool quantizing) {
  ConvRun cr;
  Tensor* y = &c.output(0, DType::Int32, conv_shape(c, c.input(0), c.input(1)));
  int32_t* yp = y->ptr<int32_t>();
  conv_int8(
      c, kConvInteger, packed_state(c), cr,
      [&](int64_t n, int64_t gi) {
        simd::Conv8Output o;
        o.i32 = yp + (n * cr.M + gi * cr.Mg) * cr.P, o.ld = static_cast<size_t>(cr.P);
        return o;
      },
      input_quant(c, quantizing, c.in(2)));
}

void conv_integer(OpContext& c) { conv_integer_body(c, false); }
// The plan's ConvInteger reading a DynamicQuantizeLinear's float input (kQuantScaleInput).
void conv_integer_quantizing(OpContext& c) { conv_integer_body(c, true); }

std::shared_ptr<const void> prepare_conv_integer(const Graph& g, NodeId n, std::span<const Tensor* const> in) {
  return prepare_conv(g, n, in, kConvInteger);
}

// The plan's ConvInteger -> Cast(float) -> Mul(Mul(s0, s1)) [-> Add(bias)] [-> activation]
// step (integer_dequantize in runtime/fusions.cpp; inputs x, w, x_zp, w_zp, s0, s1, bias):
// y = float(acc) * float(s0 * s1) (+ bias), the graph's roundings in its order, written once as
// float. Unfused, the int32 tensor is written, read by Cast, written as float, read and written
// again by Mul, Add and Relu. Relu and Clip run in the store (simd::Conv8Output, bit for bit
// simd::unary's); another fused activation runs over the output.
void conv_integer_to_float_body(OpContext& c, bool quantizing) {
  ConvRun cr;
  const Tensor& w = c.input(1);
  const int64_t M = w.shape.empty() ? 0 : w.shape[0];
  const Tensor& s0 = c.input(4);
  const Tensor& s1 = c.input(5);
  for (const Tensor* t : {&s0, &s1})
    if (t->dtype != DType::Float || (t->numel() != 1 && t->numel() != M))
      c.error("the dequantize scales must be float with 1 or M elements");
  const Tensor* bias = c.in(6);
  if (bias && (bias->dtype != DType::Float || (bias->numel() != 1 && bias->numel() != M)))
    c.error("the bias must be float with 1 or M elements");
  std::vector<float> mult(static_cast<size_t>(M));
  for (int64_t m = 0; m < M; ++m)
    mult[static_cast<size_t>(m)] = s0.ptr<float>()[s0.numel() > 1 ? m : 0] * s1.ptr<float>()[s1.numel() > 1 ? m : 0];
  std::vector<float> bv;
  if (bias)
    for (int64_t m = 0; m < M; ++m) bv.push_back(bias->ptr<float>()[bias->numel() > 1 ? m : 0]);
  Tensor& y = c.output(0, DType::Float, conv_shape(c, c.input(0), w));
  float* yp = y.ptr<float>();
  const simd::Unary act = c.fused_act;
  const bool act_in_store = act.op == simd::UnaryOp::Relu || act.op == simd::UnaryOp::Clip;
  bool stored_act = false;
  conv_int8(
      c, kConvInteger, packed_state(c), cr,
      [&](int64_t n, int64_t gi) {
        simd::Conv8Output o;
        o.f32 = yp + (n * cr.M + gi * cr.Mg) * cr.P, o.ld = static_cast<size_t>(cr.P);
        o.mult = mult.data() + gi * cr.Mg, o.mult_count = static_cast<size_t>(M);
        if (bias) o.bias = bv.data() + gi * cr.Mg, o.bias_count = static_cast<size_t>(M);
        if (act_in_store) o.act = act, stored_act = true;
        return o;
      },
      input_quant(c, quantizing, c.in(2)));
  if (act.op != simd::UnaryOp::Identity && !stored_act) simd::unary(act, yp, yp, static_cast<size_t>(y.numel()));
}

void conv_integer_to_float(OpContext& c) { conv_integer_to_float_body(c, false); }
void conv_integer_to_float_quantizing(OpContext& c) { conv_integer_to_float_body(c, true); }
std::shared_ptr<const void> prepare_qlinear_conv(const Graph& g, NodeId n, std::span<const Tensor* const> in) {
  return prepare_conv(g, n, in, kQLinearConv);
}

// QLinearConv: conv8 requantizes in its store (simd::Conv8Output::q8: the int32 sums plus the
// bias, times the multiplier, rounded half to even, plus y's zero point, saturated), so no int32
// tensor is written and read back; so does simd::conv8_depthwise for a depthwise conv.
template <class Q>
void qlinear_conv_typed(OpContext& c, Tensor& y, const std::vector<float>& mult, const Tensor* bias, float zp) {
  ConvRun cr;
  Q* yp = y.ptr<Q>();
  const int32_t* b = bias ? bias->ptr<int32_t>() : nullptr;
  const bool per_channel = mult.size() > 1;
  conv_int8(c, kQLinearConv, packed_state(c), cr, [&](int64_t n, int64_t gi) {
    simd::Conv8Output o;
    o.q8 = yp + (n * cr.M + gi * cr.Mg) * cr.P, o.ld = static_cast<size_t>(cr.P);
    o.q8_signed = std::is_signed_v<Q>, o.q8_zero = zp;
    o.mult = per_channel ? mult.data() + gi * cr.Mg : mult.data(), o.mult_count = per_channel ? mult.size() : 1;
    if (b) o.acc_bias = b + gi * cr.Mg;
    return o;
  });
}

void qlinear_conv(OpContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& w = c.input(3);
  const Tensor* yz = c.in(7);
  const Tensor* bias = c.in(8);
  const int64_t M = w.shape.empty() ? 0 : w.shape[0];
  if (bias && (bias->dtype != DType::Int32 || bias->numel() != M)) c.error("B must be int32 with M elements");
  const std::vector<float> mult = multipliers(c, c.input(1), c.input(4), &c.input(6), M);
  const Shape s = conv_shape(c, x, w);
  const DType to = yz ? yz->dtype : DType::Uint8;
  Tensor& y = c.output(0, to, s);
  const float z = static_cast<float>(zero_point_at(yz, 0));
  if (to == DType::Uint8) return qlinear_conv_typed<uint8_t>(c, y, mult, bias, z);
  if (to == DType::Int8) return qlinear_conv_typed<int8_t>(c, y, mult, bias, z);
  c.error("y_zero_point must be int8 or uint8");
}

}  // namespace

const KernelDef& conv_integer_to_float_kernel() {
  static const KernelDef def{.run = conv_integer_to_float,
                             .float_compute = false,
                             .fuses_activation = true,
                             .prepare = prepare_conv_integer,
                             .prepared_inputs = 1u << 1};
  return def;
}

// Per-tensor spans for the com.microsoft QLinear* ops (qlinear.cpp): the same float steps and
// rounding as QuantizeLinear / DequantizeLinear.
void quantize_floats(const float* x, DType q, void* y, size_t n, float scale, int32_t zp) {
  const auto z = static_cast<float>(zp);
  if (q == DType::Uint8) return quantize_span(x, static_cast<uint8_t*>(y), n, scale, z);
  if (q == DType::Int8) return quantize_span(x, static_cast<int8_t*>(y), n, scale, z);
  fail("quantize_floats: not an 8-bit type");
}
void dequantize_8bit(DType q, const void* x, float* y, size_t n, float scale, int32_t zp) {
  if (q == DType::Uint8) return dequantize_span(static_cast<const uint8_t*>(x), y, n, scale, zp);
  if (q == DType::Int8) return dequantize_span(static_cast<const int8_t*>(x), y, n, scale, zp);
  fail("dequantize_8bit: not an 8-bit type");
}

const KernelDef& dynamic_quantize_params_kernel() {
  static const KernelDef def{.run = dynamic_quantize_params};
  return def;
}

const KernelDef* quantizing_variant(const KernelDef& k) {
  static const KernelDef conv{.run = conv_integer_quantizing,
                              .float_compute = false,
                              .prepare = prepare_conv_integer,
                              .prepared_inputs = 1u << 1};
  static const KernelDef conv_f{.run = conv_integer_to_float_quantizing,
                                .float_compute = false,
                                .fuses_activation = true,
                                .prepare = prepare_conv_integer,
                                .prepared_inputs = 1u << 1};
  static const KernelDef mm{.run = matmul_integer_quantizing,
                            .float_compute = false,
                            .prepare = prepare_matmul_integer,
                            .prepared_inputs = 1u << 1};
  static const KernelDef mm_f{.run = matmul_integer_to_float_quantizing,
                              .fuses_activation = true,
                              .prepare = prepare_matmul_integer_to_float,
                              .prepared_inputs = 1u << 1};
  if (k.run == conv_integer) return &conv;
  if (k.run == conv_integer_to_float) return &conv_f;
  if (k.run == matmul_integer) return &mm;
  if (k.run == matmul_integer_to_float) return &mm_f;
  return nullptr;
}

size_t quantizing_scale_input() { return kQuantScaleInput; }

void register_quant(Registry& r) {
  r.add("", "DequantizeLinear", {.run = dequantize, .float_compute = false});
  r.add("", "QuantizeLinear", {.run = quantize});
  r.add("", "DynamicQuantizeLinear", {.run = dynamic_quantize});
  r.add("", "MatMulInteger",
        {.run = matmul_integer, .float_compute = false, .prepare = prepare_matmul_integer, .prepared_inputs = 1u << 1});
  r.add("", "ConvInteger",
        {.run = conv_integer, .float_compute = false, .prepare = prepare_conv_integer, .prepared_inputs = 1u << 1});
  r.add("", "QLinearMatMul",
        {.run = qlinear_matmul, .float_compute = false, .prepare = prepare_qlinear_matmul, .prepared_inputs = 1u << 3});
  r.add("", "QLinearConv",
        {.run = qlinear_conv, .float_compute = false, .prepare = prepare_qlinear_conv, .prepared_inputs = 1u << 3});
  r.add("com.microsoft", "MatMulIntegerToFloat",
        {.run = matmul_integer_to_float,
         .fuses_activation = true,
         .prepare = prepare_matmul_integer_to_float,
         .prepared_inputs = 1u << 1});
  r.add("com.microsoft", "DynamicQuantizeMatMul",
        {.run = dynamic_quantize_matmul, .prepare = prepare_dynamic_quantize_matmul, .prepared_inputs = 1u << 1});
}

}  // namespace onnxforge::rt
