// ONNX Runtime's QOperator contrib ops (com.microsoft), as its static quantizer writes them in
// QOperator format beside the standard QLinearConv/QLinearMatMul: QLinearAdd, QLinearMul,
// QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax, QLinearWhere, QLinearGlobalAveragePool,
// QLinearAveragePool, QLinearConcat and QGemm. 8-bit (uint8/int8) tensors with per-tensor scale and zero point (QGemm's
// B per column too).
//
// Each computes what its contrib spec writes: dequantize ((q - zero_point) * scale in float32),
// the float op, quantize (x / scale rounded half to even, + zero point, saturated) — the steps of
// DequantizeLinear -> op -> QuantizeLinear, with this runtime's float kernels for the op (the
// registry's Add, Mul, AveragePool, GlobalAveragePool, the vectorized sigmoid), so such a model
// computes the same bits as its QDQ spelling. Unary ops over 8 bits are a 256-entry table built
// once per run. ONNX Runtime's MLAS kernels fold the scales into one ratio and may round a value
// to the neighbouring step (tests/runtime/qlinear_test.cpp measures it).
#include <algorithm>
#include <array>
#include <cstring>

#include "runtime/ops/common.h"
#include "simd/int8_gemm.h"
#include "simd/nhwc.h"
#include "simd/parallel.h"
#include "simd/unary.h"

namespace onnxforge::rt {
namespace {

struct QParam {
  float scale = 1.f;
  int32_t zp = 0;
};

bool is_8bit(DType t) { return t == DType::Uint8 || t == DType::Int8; }

// Scale (float scalar) at input `s`, zero point (optional 8-bit scalar of type `q`) at `z`.
QParam qparam(const OpContext& c, size_t s, size_t z, DType q, std::string_view what) {
  const Tensor& scale = c.input(s);
  if (scale.dtype != DType::Float || scale.numel() != 1)
    c.error(std::string(what) + "'s scale must be one float (per tensor), got " + std::string(dtype_name(scale.dtype)) +
            " " + shape_str(scale.shape));
  QParam p;
  p.scale = scale.ptr<float>()[0];
  if (const Tensor* zp = c.in(z); zp && zp->data) {
    if (zp->dtype != q || zp->numel() != 1)
      c.error(std::string(what) + "'s zero point must be one " + std::string(dtype_name(q)) + " value");
    p.zp = static_cast<int32_t>(zp->get_i64(0));
  }
  return p;
}

const Tensor& quantized_input(const OpContext& c, size_t i) {
  const Tensor& x = c.input(i);
  if (!is_8bit(x.dtype))
    c.error("input " + std::to_string(i) + " is " + std::string(dtype_name(x.dtype)) + ", not uint8/int8");
  return x;
}

Tensor dequantized(const Tensor& x, QParam p) {
  Tensor f = Tensor::alloc(DType::Float, x.shape);
  dequantize_8bit(x.dtype, x.data, f.ptr<float>(), static_cast<size_t>(x.numel()), p.scale, p.zp);
  f.nhwc = x.nhwc;
  return f;
}

// The output's type: the zero point's when given, else the first input's.
DType out_type(const OpContext& c, size_t zp_at, DType fallback) {
  const Tensor* zp = c.in(zp_at);
  return zp && zp->data ? zp->dtype : fallback;
}

// Runs a float kernel of the registry on `ins` for this node (its attributes are the float op's:
// AveragePool's kernel_shape/pads/strides/ceil_mode/count_include_pad) and returns output 0.
class CaptureSink final : public OutputSink {
 public:
  Tensor out;
  Tensor& alloc(size_t i, DType dtype, Shape shape) override {
    if (i != 0) fail("qlinear: the float kernel wrote output ", i);
    return out = Tensor::alloc(dtype, std::move(shape));
  }
  void alias(size_t, size_t, Shape) override { fail("qlinear: the float kernel aliased its input"); }
  void set(size_t i, Tensor t) override {
    if (i != 0) fail("qlinear: the float kernel wrote output ", i);
    out = t.hold ? std::move(t) : t.clone();
  }
  std::vector<Tensor> run_subgraph(GraphId, std::vector<Tensor>) override { fail("qlinear: no subgraphs"); }
};

Tensor run_float(const OpContext& c, std::string_view op, int64_t opset, std::vector<const Tensor*> ins) {
  const KernelDef* k = Registry::get().find("", op);
  if (k == nullptr) c.error("no " + std::string(op) + " kernel");
  CaptureSink sink;
  OpContext inner(c.graph, c.node, opset, ins, 1, &sink);
  k->run(inner);
  if (sink.out.dtype != DType::Float) c.error("internal: the float " + std::string(op) + " wrote no float output");
  return std::move(sink.out);
}

void quantize_to(OpContext& c, const Tensor& f, DType q, QParam p, Shape shape) {
  Tensor& y = c.output(0, q, std::move(shape));
  quantize_floats(f.ptr<float>(), q, y.data, static_cast<size_t>(f.numel()), p.scale, p.zp);
}

// The output's type and parameters (scale at `s`, zero point at `z`, else `fallback`'s type).
std::pair<DType, QParam> out_params(const OpContext& c, size_t s, size_t z, DType fallback, std::string_view what) {
  const DType q = out_type(c, z, fallback);
  if (!is_8bit(q)) c.error(std::string(what) + "'s zero point is not uint8/int8");
  return {q, qparam(c, s, z, q, what)};
}

// The operands of the one-input ops (X, X_scale, X_zero_point, Y_scale, Y_zero_point): X, its
// parameters, Y's type and Y's parameters.
struct UnaryOperands {
  const Tensor& x;
  QParam px;
  DType q;
  QParam py;
};
UnaryOperands unary_operands(const OpContext& c) {
  const Tensor& x = quantized_input(c, 0);
  const QParam px = qparam(c, 1, 2, x.dtype, "X");
  const auto [q, py] = out_params(c, 3, 4, x.dtype, "Y");
  return {x, px, q, py};
}

// QLinearAdd / QLinearMul (A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale,
// C_zero_point), with broadcasting.
template <int kMul>
void qlinear_binary(OpContext& c) {
  const Tensor& a = quantized_input(c, 0);
  const Tensor& b = quantized_input(c, 3);
  const QParam pa = qparam(c, 1, 2, a.dtype, "A"), pb = qparam(c, 4, 5, b.dtype, "B");
  const auto [q, pc] = out_params(c, 6, 7, a.dtype, "C");
  if (a.shape == b.shape && !a.nhwc && !b.nhwc) {
    // Same shapes (the residual adds): dequantize, the op and quantize per element in registers
    // (simd::qlinear_binary_span), where the dequantized inputs and the float sum were three
    // tensors written and read back (QLinearAdd: 5% of MobileNetV2 QOperator's time). The float
    // op is one IEEE add or multiply per element, as the registry's Add / Mul: the same bits.
    // Blocks are independent, so they are split across threads: ResNet's residual add of
    // 64x56x56 took 0.19 ms on one thread, the largest non-conv step at 2 threads.
    Tensor& y = c.output(0, q, a.shape);
    constexpr size_t kBlock = 1024;
    const auto* ab = a.ptr<uint8_t>();
    const auto* bb = b.ptr<uint8_t>();
    auto* yb = y.ptr<uint8_t>();
    const size_t n = static_cast<size_t>(a.numel());
    simd::QLinearBinary p;
    p.mul = kMul != 0, p.a_signed = a.dtype == DType::Int8, p.b_signed = b.dtype == DType::Int8;
    p.y_signed = q == DType::Int8;
    p.sa = pa.scale, p.sb = pb.scale, p.sy = pc.scale, p.za = pa.zp, p.zb = pb.zp;
    p.zy = static_cast<float>(pc.zp);
    simd::parallel_chunks((n + kBlock - 1) / kBlock, 16, [&](size_t b0, size_t b1) {
      const size_t i = b0 * kBlock, end = std::min(n, b1 * kBlock);
      simd::qlinear_binary_span(p, ab + i, bb + i, yb + i, end - i);
    });
    return;
  }
  const Tensor fa = dequantized(a, pa), fb = dequantized(b, pb);
  const Tensor f = run_float(c, kMul ? "Mul" : "Add", 14, {&fa, &fb});
  quantize_to(c, f, q, pc, f.shape);
}

// QLinearSigmoid / QLinearLeakyRelu (X, X_scale, X_zero_point, Y_scale, Y_zero_point): a table of
// the 256 inputs' results, then a lookup per element.
template <int kLeaky>
void qlinear_unary(OpContext& c) {
  const auto [x, px, q, py] = unary_operands(c);
  std::array<uint8_t, 256> codes{};  // input bits -> output bits
  for (size_t i = 0; i < 256; ++i) codes[i] = static_cast<uint8_t>(i);
  std::array<float, 256> v{};
  dequantize_8bit(x.dtype, codes.data(), v.data(), 256, px.scale, px.zp);
  if (kLeaky) {
    const float alpha = c.attr_f("alpha", 0.01f);
    for (float& f : v) f = f < 0.f ? alpha * f : f;
  } else {
    simd::vmath::sigmoid(v.data(), v.data(), 256);
  }
  std::array<uint8_t, 256> table{};
  quantize_floats(v.data(), q, table.data(), 256, py.scale, py.zp);
  Tensor& y = c.output(0, q, x.shape);
  const auto* in = x.ptr<uint8_t>();
  auto* out = y.ptr<uint8_t>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) out[i] = table[in[i]];
  y.nhwc = x.nhwc;
}

// channels_last = 1: x is [N, H, W, C] (4-D only), and so is the result.
bool channels_last(const OpContext& c, const Tensor& x) {
  if (c.attr_i("channels_last", 0) == 0) return false;
  if (x.rank() != 4) c.error("channels_last needs a 4-D input, got rank " + std::to_string(x.rank()));
  return true;
}

// QLinearGlobalAveragePool / QLinearAveragePool (X, x_scale, x_zero_point, y_scale, y_zero_point).
template <int kGlobal>
void qlinear_pool(OpContext& c) {
  const auto [x, px, q, py] = unary_operands(c);
  if (x.rank() < 3) c.error("the input needs a batch, a channel and a spatial axis");
  const bool cl = channels_last(c, x);
  const int64_t N = x.shape[0], C = cl ? x.shape[3] : x.shape[1];
  const int64_t sp = N * C != 0 ? x.numel() / (N * C) : 0;
  if (kGlobal && !x.nhwc && sp > 0 && sp <= (int64_t{1} << 22)) {
    // Each plane's mean straight from the bytes. Every term float(x - zx) * sx is a float whose
    // exponent lies within 8 of sx's, so a double holds any sum of up to 2^22 of them exactly
    // (31 + 22 bits): the sum does not depend on the order, and four lanes give the double the
    // float GlobalAveragePool sums one element at a time. Through a float tensor and the float
    // pool, MobileNetV2's 1280x7x7 pool took 0.17 ms against ONNX Runtime's 0.017.
    std::array<double, 256> term{};
    for (int v = 0; v < 256; ++v) {
      const auto b = static_cast<uint8_t>(v);
      float f = 0;
      dequantize_8bit(x.dtype, &b, &f, 1, px.scale, px.zp);
      term[static_cast<size_t>(v)] = f;
    }
    Shape ys = cl ? Shape{N, 1, 1, C} : Shape(x.shape.begin(), x.shape.begin() + 2);
    if (!cl) ys.resize(x.shape.size(), 1);
    std::vector<float> mean(static_cast<size_t>(N * C));
    const auto* xb = x.ptr<uint8_t>();
    const int64_t step = cl ? C : 1;  // between a plane's elements
    simd::parallel_chunks(mean.size(), std::max<size_t>(1, 65536 / static_cast<size_t>(sp)), [&](size_t p0, size_t p1) {
      for (size_t pl = p0; pl < p1; ++pl) {
        const int64_t n = static_cast<int64_t>(pl) / C, ch = static_cast<int64_t>(pl) % C;
        const uint8_t* src = xb + (cl ? n * sp * C + ch : static_cast<int64_t>(pl) * sp);
        double acc[4] = {};
        int64_t i = 0;
        for (; i + 4 <= sp; i += 4)
          for (int64_t l = 0; l < 4; ++l) acc[l] += term[src[(i + l) * step]];
        for (; i < sp; ++i) acc[0] += term[src[i * step]];
        mean[pl] = static_cast<float>((acc[0] + acc[1] + (acc[2] + acc[3])) / static_cast<double>(sp));
      }
    });
    Tensor& y = c.output(0, q, ys);
    quantize_floats(mean.data(), q, y.data, mean.size(), py.scale, py.zp);
    return;
  }
  Tensor fx = dequantized(x, px);
  if (cl) {  // through NCHW, so that the window sums add in the order of the QDQ spelling's pool
    const Shape& s = x.shape;
    Tensor t = Tensor::alloc(DType::Float, {s[0], s[3], s[1], s[2]});
    simd::nhwc_to_nchw(s[0], s[3], s[1] * s[2], fx.ptr<float>(), t.ptr<float>());
    fx = std::move(t);
  }
  Tensor f = run_float(c, kGlobal ? "GlobalAveragePool" : "AveragePool", kGlobal ? 1 : 11, {&fx});
  if (f.nhwc || (cl && f.rank() != 4)) c.error("internal: the float pool wrote no plain result");
  if (cl) {
    Tensor t = Tensor::alloc(DType::Float, {f.shape[0], f.shape[2], f.shape[3], f.shape[1]});
    simd::nchw_to_nhwc(f.shape[0], f.shape[1], f.shape[2] * f.shape[3], f.ptr<float>(), t.ptr<float>());
    f = std::move(t);
  }
  quantize_to(c, f, q, py, f.shape);
}

// QLinearConcat (Y_scale, Y_zero_point, then X, X_scale, X_zero_point per input; attribute axis):
// each input requantized to Y's parameters (copied when they are its own), then concatenated.
void qlinear_concat(OpContext& c) {
  const size_t n_in = c.input_count();
  if (n_in < 5 || (n_in - 2) % 3 != 0) c.error("needs Y_scale, Y_zero_point and (X, X_scale, X_zero_point) triples");
  const Tensor& x0 = quantized_input(c, 2);
  const DType q = out_type(c, 1, x0.dtype);
  if (!is_8bit(q)) c.error("Y's zero point is not uint8/int8");
  const QParam py = qparam(c, 0, 1, q, "Y");
  const int64_t rank = x0.rank();
  const int64_t axis = norm_axis(c, c.attr_i("axis", 0), rank);
  Shape shape = x0.shape;
  int64_t total = 0;
  for (size_t i = 2; i < n_in; i += 3) {
    const Tensor& x = quantized_input(c, i);
    if (x.dtype != q) c.error("input " + std::to_string(i) + " is not of Y's type");
    if (x.rank() != rank) c.error("inputs of different ranks");
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && x.shape[static_cast<size_t>(d)] != shape[static_cast<size_t>(d)])
        c.error("input " + std::to_string(i) + " differs from the first outside the axis");
    total += x.shape[static_cast<size_t>(axis)];
  }
  shape[static_cast<size_t>(axis)] = total;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= shape[static_cast<size_t>(d)];
  Tensor& y = c.output(0, q, shape);
  auto* out = y.ptr<uint8_t>();
  int64_t at = 0;  // offset along the axis
  for (size_t i = 2; i < n_in; i += 3) {
    const Tensor& x = c.input(i);
    const QParam px = qparam(c, i + 1, i + 2, x.dtype, "X");
    const int64_t len = x.shape[static_cast<size_t>(axis)] * inner, row = total * inner;
    const bool same = px.scale == py.scale && px.zp == py.zp;  // (q - zp) * s / s rounds back to q - zp
    const Tensor f = same ? Tensor{} : dequantized(x, px);
    for (int64_t o = 0; o < outer; ++o) {
      uint8_t* dst = out + o * row + at * inner;
      if (same)
        std::memcpy(dst, x.ptr<uint8_t>() + o * len, static_cast<size_t>(len));
      else
        quantize_floats(f.ptr<float>() + o * len, q, dst, static_cast<size_t>(len), py.scale, py.zp);
    }
    at += x.shape[static_cast<size_t>(axis)];
  }
}

// QLinearSoftmax (X, X_scale, x_zero_point, y_scale, y_zero_point; axis, opset = the original
// Softmax's opset, which decides between the 2-D coercion (< 13) and one axis).
void qlinear_softmax(OpContext& c) {
  const auto [x, px, q, py] = unary_operands(c);
  const int64_t opset = c.attr_i("opset", -1);
  if (opset < 1) c.error("the 'opset' attribute (the original Softmax's) is missing");
  const Tensor fx = dequantized(x, px);
  const Tensor f = run_float(c, "Softmax", opset, {&fx});
  quantize_to(c, f, q, py, f.shape);
}

// QLinearWhere (condition, X, x_scale, x_zero_point, Y, y_scale, y_zero_point, z_scale,
// z_zero_point): the chosen value requantized to Z's parameters, with broadcasting.
void qlinear_where(OpContext& c) {
  const Tensor& cond = c.input(0);
  if (cond.dtype != DType::Bool) c.error("the condition must be bool");
  const Tensor& x = quantized_input(c, 1);
  const Tensor& y = quantized_input(c, 4);
  const QParam px = qparam(c, 2, 3, x.dtype, "X"), py = qparam(c, 5, 6, y.dtype, "Y");
  const auto [q, pz] = out_params(c, 7, 8, x.dtype, "Z");
  const Tensor fx = dequantized(x, px), fy = dequantized(y, py);
  const Tensor f = run_float(c, "Where", 16, {&cond, &fx, &fy});
  quantize_to(c, f, q, pz, f.shape);
}

// A 2-D 8-bit matrix, transposed when `trans`.
Tensor matrix(const OpContext& c, const Tensor& x, bool trans, std::string_view what) {
  if (x.rank() != 2) c.error(std::string(what) + " must be 2-D, got " + shape_str(x.shape));
  if (!trans) return x.hold ? x : x.clone();
  const int64_t R = x.shape[0], C = x.shape[1];
  Tensor t = Tensor::alloc(x.dtype, {C, R});
  const auto* in = x.ptr<uint8_t>();
  auto* out = t.ptr<uint8_t>();
  for (int64_t r = 0; r < R; ++r)
    for (int64_t k = 0; k < C; ++k) out[k * R + r] = in[r * C + k];
  return t;
}

struct QGemmState {
  simd::PackedB8 b;
  int64_t k = 0, n = 0;
};

// A constant B (and constant or absent zero points) packed once for gemm8, transposed as transB says.
std::shared_ptr<const void> prepare_qgemm(const Graph& g, NodeId n, std::span<const Tensor* const> in) {
  if (in.size() < 5 || !in[3] || !in[3]->data || in[3]->rank() != 2 || !is_8bit(in[3]->dtype)) return nullptr;
  const Tensor& b = *in[3];
  const Tensor* bz = in.size() > 5 ? in[5] : nullptr;
  if (g.inputs(n).size() > 5 && g.input(n, 5).valid() && (!bz || !bz->data)) return nullptr;  // computed at run time
  const bool tb = g.attr_int(n, "transB", 0) != 0;
  const int64_t K = b.shape[tb ? 1 : 0], N = b.shape[tb ? 0 : 1];
  std::vector<int32_t> zb;
  if (bz && bz->data) {
    if (bz->dtype != b.dtype || (bz->numel() != 1 && bz->numel() != N)) return nullptr;  // the run reports it
    for (int64_t i = 0; i < bz->numel(); ++i) zb.push_back(static_cast<int32_t>(bz->get_i64(i)));
  }
  auto st = std::make_shared<QGemmState>();
  st->b = simd::pack_b8(tb, static_cast<size_t>(K), static_cast<size_t>(N), b.data, static_cast<size_t>(b.shape[1]),
                        b.dtype == DType::Int8, zb.empty() ? nullptr : zb.data(), zb.size());
  st->k = K;
  st->n = N;
  return st;
}

// QGemm (A, a_scale, a_zero_point, B, b_scale, b_zero_point, C, y_scale, y_zero_point; alpha,
// transA, transB), as ONNX Runtime's static quantizer writes Gemm: the int32 sum of
// (A - a_zp)(B - b_zp) (the MatMulInteger kernel, b's scale and zero point per tensor or per
// column), plus the int32 bias C (broadcast from (), (N), (1, N), (M, 1) or (M, N)), times
// alpha * a_scale * b_scale[n] (/ y_scale, then rounded half to even, + y_zp, saturated, when
// y_scale is given; else the float product is the output), in ONNX Runtime's order of those
// float steps.
void qgemm(OpContext& c) {
  const Tensor& a0 = quantized_input(c, 0);
  const Tensor& b0 = quantized_input(c, 3);
  const bool tb = c.attr_i("transB", 0) != 0;
  const Tensor a = matrix(c, a0, c.attr_i("transA", 0) != 0, "A");
  if (b0.rank() != 2) c.error("B must be 2-D, got " + shape_str(b0.shape));
  // (With B packed at plan time its bytes may be gone: only its shape is read then.)
  const Tensor b = c.state ? b0 : matrix(c, b0, tb, "B");
  const int64_t M = a.shape[0], K = a.shape[1], N = c.state ? b0.shape[tb ? 0 : 1] : b.shape[1];
  if ((c.state ? b0.shape[tb ? 1 : 0] : b.shape[0]) != K)
    c.error("A is " + shape_str(a.shape) + " and B " + shape_str(b0.shape) + ", transB " + std::to_string(tb));
  const QParam pa = qparam(c, 1, 2, a.dtype, "A");
  const Tensor& bs = c.input(4);
  if (bs.dtype != DType::Float || (bs.numel() != 1 && bs.numel() != N) || bs.rank() > 1)
    c.error("b_scale must be one float or N of them, got " + shape_str(bs.shape));
  const Tensor* bz = c.in(5);
  if (bz && bz->data && (bz->dtype != b.dtype || bz->numel() != bs.numel()))
    c.error("b_zero_point must be of B's type and b_scale's size");
  const float alpha = c.attr_f("alpha", 1.f);
  Tensor azp = Tensor::alloc(a.dtype, {});
  *azp.ptr<uint8_t>() = static_cast<uint8_t>(pa.zp);
  const auto* packed = static_cast<const QGemmState*>(c.state);
  const Tensor acc = packed ? [&] {  // B packed once by the plan (prepare_qgemm)
    if (packed->k != K || packed->n != N) c.error("internal: the packed B does not match A");
    Tensor t = Tensor::alloc(DType::Int32, {M, N});
    simd::gemm8(static_cast<size_t>(M), a.data, static_cast<size_t>(K), a.dtype == DType::Int8, pa.zp, packed->b,
                t.ptr<int32_t>(), static_cast<size_t>(N));
    return t;
  }() : [&] {
    const KernelDef* k = Registry::get().find("", "MatMulInteger");
    if (k == nullptr) c.error("no MatMulInteger kernel");
    CaptureSink sink;
    std::vector<const Tensor*> ins{&a, &b, &azp, bz && bz->data ? bz : nullptr};
    OpContext inner(c.graph, c.node, 10, ins, 1, &sink);
    k->run(inner);
    return std::move(sink.out);
  }();
  std::vector<int32_t> sum(acc.ptr<int32_t>(), acc.ptr<int32_t>() + M * N);
  if (const Tensor* bias = c.in(6); bias && bias->data) {
    if (bias->dtype != DType::Int32) c.error("C must be int32");
    const Shape& cs = bias->shape;
    const int64_t n = bias->numel();
    const bool per_row = cs.size() == 2 && cs[0] == M && cs[1] == 1 && M != 1;
    if (!(n == 1 || n == M * N || (n == N && (cs.size() == 1 || cs[0] == 1)) || per_row))
      c.error("C of shape " + shape_str(cs) + " does not broadcast to [" + std::to_string(M) + "," + std::to_string(N) +
              "]");
    const int32_t* cb = bias->ptr<int32_t>();
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j)
        sum[static_cast<size_t>(i * N + j)] += cb[n == 1 ? 0 : n == M * N ? i * N + j : per_row ? i : j];
  }
  const Tensor* ys = c.in(7);
  const bool requant = ys && ys->data;
  std::vector<float> mult(static_cast<size_t>(bs.numel()));
  for (size_t j = 0; j < mult.size(); ++j) {
    mult[j] = alpha * pa.scale * bs.ptr<float>()[j];
    if (requant) {
      if (ys->dtype != DType::Float || ys->numel() != 1) c.error("y_scale must be one float");
      mult[j] /= ys->ptr<float>()[0];
    }
  }
  std::vector<float> f(sum.size());
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      f[static_cast<size_t>(i * N + j)] =
          static_cast<float>(sum[static_cast<size_t>(i * N + j)]) * mult[mult.size() == 1 ? 0 : static_cast<size_t>(j)];
  if (!requant) {
    Tensor& y = c.output(0, DType::Float, {M, N});
    std::memcpy(y.data, f.data(), f.size() * sizeof(float));
    return;
  }
  const DType q = out_type(c, 8, a.dtype);
  if (!is_8bit(q)) c.error("y_zero_point is not uint8/int8");
  const QParam py = qparam(c, 7, 8, q, "Y");
  Tensor& y = c.output(0, q, {M, N});
  quantize_floats(f.data(), q, y.data, f.size(), 1.f, py.zp);  // (the scale is in mult)
}

}  // namespace

void register_qlinear(Registry& r) {
  const KernelDef q{.float_compute = false};
  auto add = [&](const char* op, KernelFn fn) {
    KernelDef k = q;
    k.run = fn;
    r.add("com.microsoft", op, k);
  };
  add("QLinearAdd", qlinear_binary<0>);
  add("QLinearMul", qlinear_binary<1>);
  add("QLinearSigmoid", qlinear_unary<0>);
  add("QLinearLeakyRelu", qlinear_unary<1>);
  add("QLinearGlobalAveragePool", qlinear_pool<1>);
  add("QLinearAveragePool", qlinear_pool<0>);
  add("QLinearConcat", qlinear_concat);
  r.add("com.microsoft", "QGemm",
        {.run = qgemm, .float_compute = false, .prepare = prepare_qgemm, .prepared_inputs = 1u << 3});
  add("QLinearSoftmax", qlinear_softmax);
  add("QLinearWhere", qlinear_where);
}

}  // namespace onnxforge::rt
