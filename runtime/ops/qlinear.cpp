// ONNX Runtime's QOperator contrib ops (com.microsoft), as its static quantizer writes them in
// QOperator format beside the standard QLinearConv/QLinearMatMul: QLinearAdd, QLinearMul,
// QLinearSigmoid, QLinearLeakyRelu, QLinearGlobalAveragePool, QLinearAveragePool and
// QLinearConcat. 8-bit (uint8/int8) tensors with per-tensor scale and zero point.
//
// Each computes what its contrib spec writes: dequantize ((q - zero_point) * scale in float32),
// the float op, quantize (x / scale rounded half to even, + zero point, saturated) — the steps of
// DequantizeLinear -> op -> QuantizeLinear, with this runtime's float kernels for the op (the
// registry's Add, Mul, AveragePool, GlobalAveragePool, the vectorized sigmoid), so such a model
// computes the same bits as its QDQ spelling. Unary ops over 8 bits are a 256-entry table built
// once per run. ONNX Runtime's MLAS kernels fold the scales into one ratio and may round a value
// to the neighbouring step (tests/runtime/qlinear_test.cpp measures it).
#include <array>
#include <cstring>

#include "runtime/ops/common.h"
#include "simd/nhwc.h"
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
    c.error(std::string(what) + "'s scale must be one float (per tensor), got " + std::string(dtype_name(scale.dtype)) + " " +
            shape_str(scale.shape));
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
  if (!is_8bit(x.dtype)) c.error("input " + std::to_string(i) + " is " + std::string(dtype_name(x.dtype)) + ", not uint8/int8");
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

// QLinearAdd / QLinearMul (A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale,
// C_zero_point), with broadcasting.
template <int kMul>
void qlinear_binary(OpContext& c) {
  const Tensor& a = quantized_input(c, 0);
  const Tensor& b = quantized_input(c, 3);
  const QParam pa = qparam(c, 1, 2, a.dtype, "A"), pb = qparam(c, 4, 5, b.dtype, "B");
  const DType q = out_type(c, 7, a.dtype);
  if (!is_8bit(q)) c.error("C's zero point is not uint8/int8");
  const QParam pc = qparam(c, 6, 7, q, "C");
  const Tensor fa = dequantized(a, pa), fb = dequantized(b, pb);
  const Tensor f = run_float(c, kMul ? "Mul" : "Add", 14, {&fa, &fb});
  quantize_to(c, f, q, pc, f.shape);
}

// QLinearSigmoid / QLinearLeakyRelu (X, X_scale, X_zero_point, Y_scale, Y_zero_point): a table of
// the 256 inputs' results, then a lookup per element.
template <int kLeaky>
void qlinear_unary(OpContext& c) {
  const Tensor& x = quantized_input(c, 0);
  const QParam px = qparam(c, 1, 2, x.dtype, "X");
  const DType q = out_type(c, 4, x.dtype);
  if (!is_8bit(q)) c.error("Y's zero point is not uint8/int8");
  const QParam py = qparam(c, 3, 4, q, "Y");
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
  const Tensor& x = quantized_input(c, 0);
  const QParam px = qparam(c, 1, 2, x.dtype, "X");
  const DType q = out_type(c, 4, x.dtype);
  if (!is_8bit(q)) c.error("Y's zero point is not uint8/int8");
  const QParam py = qparam(c, 3, 4, q, "Y");
  if (x.rank() < 3) c.error("the input needs a batch, a channel and a spatial axis");
  const bool cl = channels_last(c, x);
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
      if (same) std::memcpy(dst, x.ptr<uint8_t>() + o * len, static_cast<size_t>(len));
      else quantize_floats(f.ptr<float>() + o * len, q, dst, static_cast<size_t>(len), py.scale, py.zp);
    }
    at += x.shape[static_cast<size_t>(axis)];
  }
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
}

}  // namespace onnxforge::rt
