// Conv (simd: depthwise, 1x1 GEMM, implicit im2col; fused bias and activation) and
// ConvTranspose (GEMM + col2im).
#include <cmath>
#include <mutex>

#include "runtime/ops/common.h"
#include "ir/match.h"
#include "runtime/ops/conv_util.h"
#include "simd/binary.h"
#include "simd/conv.h"
#include "simd/gemm.h"
#include "simd/nhwc.h"
#include "simd/parallel.h"
#include "simd/resample.h"

namespace onnxforge::rt {

ConvGeometry conv_geometry(const OpContext& c, const Shape& x, const Shape& w, bool transpose,
                           std::span<const int64_t> extra_pads) {
  ConvGeometry g;
  g.rank = static_cast<int>(x.size()) - 2;
  if (g.rank < 1 || g.rank > 3) c.error("only 1-D, 2-D and 3-D convolutions are supported, input is " + shape_str(x));
  if (static_cast<int>(w.size()) != g.rank + 2) c.error("weight rank does not match input rank");
  auto ks = c.attr_ints("kernel_shape"), st = c.attr_ints("strides"), di = c.attr_ints("dilations"),
       pads = c.attr_ints("pads");
  // Hostile attributes: strides=0 divided by zero (SIGFPE), short lists were read past their end.
  const size_t r = static_cast<size_t>(g.rank);
  auto check_len = [&](std::span<const int64_t> v, size_t n, const char* name) {
    if (!v.empty() && v.size() != n)
      c.error(std::string(name) + " has " + std::to_string(v.size()) + " values; input " + shape_str(x) + " needs " +
              std::to_string(n));
  };
  check_len(ks, r, "kernel_shape");
  check_len(st, r, "strides");
  check_len(di, r, "dilations");
  check_len(pads, 2 * r, "pads");
  if (!extra_pads.empty() && extra_pads.size() != 2 * r)
    c.error("the folded Pad pads " + std::to_string(extra_pads.size() / 2) + " spatial axes; input " + shape_str(x) +
            " has " + std::to_string(r));
  for (int64_t v : st)
    if (v < 1) c.error("strides must be positive, got " + std::to_string(v));
  for (int64_t v : di)
    if (v < 1) c.error("dilations must be positive, got " + std::to_string(v));
  for (int64_t v : pads)
    if (v < 0) c.error("pads must not be negative, got " + std::to_string(v));
  for (size_t u = 0; u < r; ++u) {
    if (x[u + 2] < 0 || w[u + 2] < 0) c.error("negative spatial size");
    if (!ks.empty() && ks[u] < 1) c.error("kernel_shape must be positive, got " + std::to_string(ks[u]));
  }
  for (int i = 0; i < g.rank; ++i) {
    size_t u = static_cast<size_t>(i);
    g.in[u] = x[u + 2];
    g.kernel[u] = ks.empty() ? w[u + 2] : ks[u];
    g.stride[u] = st.empty() ? 1 : st[u];
    g.dilation[u] = di.empty() ? 1 : di[u];
    g.pad_begin[u] = pads.empty() ? 0 : pads[u];
    g.pad_end[u] = pads.empty() ? 0 : pads[u + r];
    if (!extra_pads.empty() && (__builtin_add_overflow(g.pad_begin[u], extra_pads[u], &g.pad_begin[u]) ||
                                __builtin_add_overflow(g.pad_end[u], extra_pads[u + r], &g.pad_end[u])))
      c.error("pads and the folded Pad's pads are out of range");
    // The output size arithmetic ((k - 1) * d + 1, in + pads, stride * in) must not overflow
    // for hostile attribute values (UBSan); real models are many orders below these bounds.
    int64_t ek = 0, padded = 0, sin = 0;
    if (__builtin_mul_overflow(g.kernel[u] - 1, g.dilation[u], &ek) || __builtin_add_overflow(ek, 1, &ek) ||
        __builtin_add_overflow(g.in[u], g.pad_begin[u], &padded) ||
        __builtin_add_overflow(padded, g.pad_end[u], &padded) ||
        __builtin_mul_overflow(g.in[u] + 1, g.stride[u], &sin) || __builtin_add_overflow(sin, ek, &sin))
      c.error("kernel_shape, strides, dilations or pads are out of range for input " + shape_str(x));
  }
  std::string_view ap = c.attr_s("auto_pad", "NOTSET");
  // The fusion folds a Pad only into explicit pads: SAME would size its pads on the unpadded input.
  if (!extra_pads.empty() && ap != "NOTSET")
    c.error("internal: a Pad folded into a conv with auto_pad " + std::string(ap));
  if (!transpose && (ap == "SAME_UPPER" || ap == "SAME_LOWER")) {
    for (int i = 0; i < g.rank; ++i) {
      size_t u = static_cast<size_t>(i);
      int64_t out = (g.in[u] + g.stride[u] - 1) / g.stride[u];
      int64_t total = std::max<int64_t>(0, (out - 1) * g.stride[u] + (g.kernel[u] - 1) * g.dilation[u] + 1 - g.in[u]);
      g.pad_begin[u] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
      g.pad_end[u] = total - g.pad_begin[u];
    }
  } else if (ap == "VALID") {
    g.pad_begin = g.pad_end = {0, 0, 0};
  }
  return g;
}

namespace {

// Plan-time state of a Conv with constant weights: the weights packed for
// simd::conv_packed(), made on the first run whose shapes prefer that path (the input shape is
// only known then), once, shared by concurrent runs.
struct ConvState {
  bool packable = true;            // float weights: the packed paths may be used
  std::vector<int64_t> pad_extra;  // pad_conv_kernel(): the folded Pad's spatial pads
  mutable std::once_flag once, nhwc_once;
  mutable simd::ConvPackedWeights packed;
  mutable simd::ConvNhwcWeights nhwc;  // for the channels-last path
};

// Plan time: a 2-D conv with group 1 and constant weights runs channels-last (simd/nhwc.h).
bool conv_takes_nhwc(const Graph& g, NodeId n) {
  if (g.attr_int(n, "group", 1) != 1 || g.inputs(n).size() < 2 || !g.input(n, 1).valid()) return false;
  ValueId w = g.input(n, 1);
  if (!g.is_initializer(w)) return false;
  return g.model().tensors.dims(g.initializer(w)).size() == 4;
}

// Plan time: a stem (at most 4 input channels) reads the NCHW graph input straight into NHWC
// output (simd::conv_nhwc's few-channel kernel), so it may start a channels-last chain.
bool conv_starts_nhwc(const Graph& g, NodeId n) {
  return conv_takes_nhwc(g, n) && g.model().tensors.dims(g.initializer(g.input(n, 1)))[1] <= 4;
}

// y (shape ys, NHWC when y_nhwc) = act(conv(x) + bias (+ residual)) on the channels-last path.
// The residual, of shape ys in either layout, may share y's buffer.
void conv_channels_last(OpContext& c, const simd::ConvParams& p, const Tensor& x, const ConvState& st,
                        const float* bias, const Tensor* res, const Shape& ys, bool y_nhwc) {
  const int64_t N = p.batch, M = p.out_channels, OHW = p.out_spatial();
  Tensor& y = c.output(0, DType::Float, ys);
  Tensor xcopy, rcopy;
  const float* px = x.ptr<float>();
  auto overlap = [&](const Tensor& t) { return y.data < t.data + t.bytes() && t.data < y.data + y.bytes(); };
  if (overlap(x)) {  // y took the slot of a residual that views x
    xcopy = x.clone();
    px = xcopy.ptr<float>();
  }
  Tensor tmp;
  float* out = y.ptr<float>();
  if (!y_nhwc) {
    tmp = Tensor::alloc(DType::Float, {N, OHW, M});
    out = tmp.ptr<float>();
  }
  if (res) {  // the residual, channels-last, into `out`
    const Tensor* r = res;
    if (overlap(*res) && !(y_nhwc && res->nhwc)) {
      rcopy = res->clone();
      r = &rcopy;
    }
    if (r->nhwc) {
      if (r->data != reinterpret_cast<const std::byte*>(out)) std::memmove(out, r->data, y.bytes());
    } else {
      simd::nchw_to_nhwc(N, M, OHW, r->ptr<float>(), out);
    }
  }
  simd::conv_nhwc(p, px, !x.nhwc, st.nhwc, bias, out, c.fused_act, res != nullptr);
  if (y_nhwc)
    y.nhwc = true;
  else
    simd::nhwc_to_nchw(N, M, OHW, out, y.ptr<float>());
}

// The state is made at plan time; the weights are packed on the first run from the float32
// weights the kernel sees there (float16/bfloat16 weights: the frame's converted copy), so a
// float16 model's convs get the packed and channels-last paths too (ISNet fp16: 119 convs).
bool packable_weight(std::span<const Tensor* const> in) {
  return in.size() >= 2 && in[1] && in[1]->numel() != 0 &&
         (in[1]->dtype == DType::Float || is_stored_float(in[1]->dtype));
}

std::shared_ptr<const void> prepare_conv(const Graph&, NodeId, std::span<const Tensor* const> in) {
  return packable_weight(in) ? std::make_shared<ConvState>() : nullptr;
}

// pad_conv_kernel(): the state always exists, since it carries the folded Pad's pads.
std::shared_ptr<const void> prepare_pad_conv(const Graph& g, NodeId n, std::span<const Tensor* const> in) {
  const ValueId x = g.inputs(n).empty() ? ValueId{} : g.input(n, 0);
  const NodeId pad = x.valid() ? g.producer(x) : NodeId{};
  auto pads = pad.valid() ? zero_spatial_pads(g, pad, g.model().opset("")) : std::nullopt;
  if (!pads) return nullptr;  // the kernel reports it
  auto st = std::make_shared<ConvState>();
  st->packable = packable_weight(in);
  st->pad_extra = std::move(*pads);
  return st;
}

void conv(OpContext& c) {
  const Tensor& x_in = c.input(0);
  const Tensor& w = c.input(1);
  const Tensor* b = c.in(2);
  if (x_in.dtype != DType::Float) c.error("Conv supports float32 (and float16/bfloat16 stored) inputs only");
  if (w.dtype != DType::Float)
    c.error("the weight must be float like the input, got " + std::string(dtype_name(w.dtype)));
  const auto* state = static_cast<const ConvState*>(c.state);
  ConvGeometry geo = conv_geometry(c, x_in.shape, w.shape, false,
                                   state ? std::span<const int64_t>(state->pad_extra) : std::span<const int64_t>{});
  if (!state || !state->packable) state = nullptr;  // below: the packed paths' state
  simd::ConvParams p;
  p.rank = geo.rank;
  p.batch = x_in.shape[0];
  p.in_channels = x_in.shape[1];
  p.out_channels = w.shape[0];
  p.group = c.attr_i("group", 1);
  p.in = geo.in;
  p.kernel = geo.kernel;
  p.stride = geo.stride;
  p.dilation = geo.dilation;
  p.pad_begin = geo.pad_begin;
  p.pad_end = geo.pad_end;
  for (int i = 0; i < p.rank; ++i)
    if (p.kernel[static_cast<size_t>(i)] != w.shape[static_cast<size_t>(i) + 2])
      c.error("kernel_shape does not match weight " + shape_str(w.shape));
  if (p.group < 1 || p.out_channels % p.group != 0)
    c.error("group " + std::to_string(p.group) + " must be positive and divide the " + std::to_string(p.out_channels) +
            " output channels");
  for (int i = 0; i < p.rank; ++i)
    if (p.out(i) < 1) c.error("the kernel (with dilations) is larger than the padded input " + shape_str(x_in.shape));
  if (w.shape[1] * p.group != p.in_channels)
    c.error("weight " + shape_str(w.shape) + " does not match input " + shape_str(x_in.shape) + " with group " +
            std::to_string(p.group));
  Shape ys{p.batch, p.out_channels};
  for (int i = 0; i < p.rank; ++i) ys.push_back(p.out(i));
  if (b) need_elements(c, *b, p.out_channels, DType::Float, "B");
  const float* pb = b ? b->ptr<float>() : nullptr;
  const Tensor* res = c.in(3);  // fused residual Add (KernelDef::residual_input)
  if (res && res->dtype != DType::Float) c.error("the fused residual of Conv must be float32");
  // Channels-last when the input already is or the readers want it (Plan::plan_layouts).
  // Few output channels (ISNet's 1-channel side outputs) take conv_nhwc's per-pixel dot
  // products there, else the row-sum kernel on an NCHW copy: the implicit GEMM would pad one
  // output column to a whole panel.
  const bool few = simd::conv_few_outputs_supported(p);
  if (state && (x_in.nhwc || c.prefer_nhwc) && (!few || simd::conv_nhwc_few_outputs(p)) &&
      simd::conv_nhwc_supported(p) && (!res || res->shape == ys)) {
    const ConvState& st = *state;
    std::call_once(st.nhwc_once, [&] { st.nhwc = simd::pack_conv_weights_nhwc(p, w.ptr<float>()); });
    conv_channels_last(c, p, x_in, st, pb, res, ys, c.prefer_nhwc);
    return;
  }
  const Tensor x = to_nchw(x_in);
  Tensor res_plain;
  if (res && res->nhwc) {
    res_plain = to_nchw(*res);
    res = &res_plain;
  }
  // Few output channels: the row-sum kernel never accumulates onto a residual (a fused residual
  // goes through a temporary and an Add below), so that fused and unfused plans give the same
  // bits, conv + bias first, then + residual, as the GEMM paths do.
  const simd::ConvPackedWeights* packed = nullptr;
  if (!few && state && (simd::conv_prefers_packed(p) || simd::conv_prefers_direct(p))) {
    const ConvState& st = *state;
    std::call_once(st.once, [&] { st.packed = simd::pack_conv_weights(p, w.ptr<float>()); });
    packed = &st.packed;
  }
  auto run = [&](const float* px, float* py, const simd::Unary& act, bool accumulate) {
    if (few) {
      simd::conv_few_outputs(p, px, w.ptr<float>(), pb, py);
      if (act.op != simd::UnaryOp::Identity) simd::unary(act, py, py, static_cast<size_t>(numel(ys)));
      return;
    }
    if (packed)
      simd::conv_packed(p, px, *packed, pb, py, act, accumulate);
    else
      simd::conv(p, px, w.ptr<float>(), pb, py, act, accumulate);
  };
  if (!res) {
    Tensor& y = c.output(0, DType::Float, ys);
    run(x.ptr<float>(), y.ptr<float>(), c.fused_act, false);
    return;
  }
  auto overlap = [](const Tensor& a, const Tensor& t) {
    const auto* p0 = static_cast<const std::byte*>(a.data);
    const auto* q0 = static_cast<const std::byte*>(t.data);
    return p0 < q0 + t.bytes() && q0 < p0 + a.bytes();
  };
  if (res->shape == ys && !few) {
    // y = act(conv + bias + residual): the residual is copied into y (or y already is its
    // buffer, in place) and the GEMM accumulates onto it.
    Tensor& y = c.output(0, DType::Float, ys);
    Tensor xcopy;
    const float* px = x.ptr<float>();
    if (overlap(y, x)) {  // y took the slot of a residual that views x
      xcopy = x.clone();
      px = xcopy.ptr<float>();
    }
    if (y.data != res->data) std::memmove(y.data, res->data, y.bytes());
    run(px, y.ptr<float>(), c.fused_act, true);
    return;
  }
  // A residual that broadcasts: conv into a temporary, then the Add, then the activation.
  Tensor tmp = Tensor::alloc(DType::Float, ys);
  run(x.ptr<float>(), tmp.ptr<float>(), simd::Unary{}, false);
  Shape out = broadcast_shapes(c, ys, res->shape);
  Tensor& y = c.output(0, DType::Float, out);
  Tensor rcopy;
  const Tensor* r = res;
  if (overlap(y, *res)) {
    rcopy = res->clone();
    r = &rcopy;
  }
  simd::binary(simd::BinaryOp::Add, tmp.shape, tmp.ptr<float>(), r->shape, r->ptr<float>(), y.ptr<float>());
  if (c.fused_act.op != simd::UnaryOp::Identity)
    simd::unary(c.fused_act, y.ptr<float>(), y.ptr<float>(), static_cast<size_t>(y.numel()));
}

void conv_transpose(OpContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& w = c.input(1);
  const Tensor* b = c.in(2);
  if (x.dtype != DType::Float) c.error("ConvTranspose supports float32 inputs only");
  if (w.dtype != DType::Float)
    c.error("the weight must be float like the input, got " + std::string(dtype_name(w.dtype)));
  ConvGeometry geo = conv_geometry(c, x.shape, w.shape, true);
  const int r = geo.rank;
  const int64_t N = x.shape[0], C = x.shape[1], group = c.attr_i("group", 1);
  if (group < 1 || C % group != 0 || w.shape[0] != C)
    c.error("weight " + shape_str(w.shape) + " does not match input " + shape_str(x.shape) + " with group " +
            std::to_string(group));
  const int64_t Mg = w.shape[1], M = mul_dim(c, Mg, group), Cg = C / group;
  if (b) need_elements(c, *b, M, DType::Float, "B");
  auto out_pad = c.attr_ints("output_padding"), out_shape = c.attr_ints("output_shape");
  if (!out_pad.empty() && out_pad.size() != static_cast<size_t>(r))
    c.error("output_padding does not match the input rank");
  if (!out_shape.empty() && out_shape.size() < static_cast<size_t>(r))
    c.error("output_shape does not match the input rank");
  for (int i = 0; i < r; ++i)
    if (geo.kernel[static_cast<size_t>(i)] != w.shape[static_cast<size_t>(i) + 2])
      c.error("kernel_shape does not match weight " + shape_str(w.shape));
  std::string_view ap = c.attr_s("auto_pad", "NOTSET");
  std::array<int64_t, 3> out{1, 1, 1};
  for (int i = 0; i < r; ++i) {
    size_t u = static_cast<size_t>(i);
    int64_t op = out_pad.empty() ? 0 : out_pad[u];
    // Bounded by conv_geometry except output_padding and output_shape, checked here.
    if (op < 0 || op >= std::max(geo.stride[u], geo.dilation[u]))
      c.error("output_padding must lie in [0, max(stride, dilation)), got " + std::to_string(op));
    if (!out_shape.empty() && (out_shape[out_shape.size() - static_cast<size_t>(r) + u] < 0 ||
                               out_shape[out_shape.size() - static_cast<size_t>(r) + u] > (int64_t{1} << 40)))
      c.error("output_shape is out of range");
    int64_t full = geo.stride[u] * (geo.in[u] - 1) + op + (geo.kernel[u] - 1) * geo.dilation[u] + 1;
    if (!out_shape.empty() || ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      int64_t target =
          !out_shape.empty() ? out_shape[out_shape.size() - static_cast<size_t>(r) + u] : geo.in[u] * geo.stride[u];
      int64_t total = full - target;
      if (ap == "SAME_LOWER") {
        geo.pad_begin[u] = total - total / 2;
        geo.pad_end[u] = total / 2;
      } else {
        geo.pad_begin[u] = total / 2;
        geo.pad_end[u] = total - total / 2;
      }
    }
    // An output_shape past the natural size gives negative pads (the conformance test
    // convtranspose_output_shape does): col2im clips each row to the output, so they are safe.
    out[u] = full - geo.pad_begin[u] - geo.pad_end[u];
    if (out[u] < 1) c.error("the output would be empty: pads exceed the output size");
  }
  Shape ys{N, M};
  int64_t in_sp = 1, out_sp = 1, kprod = 1;
  for (int i = 0; i < r; ++i) {
    size_t u = static_cast<size_t>(i);
    ys.push_back(out[u]);
    in_sp *= geo.in[u];
    out_sp *= out[u];
    kprod *= geo.kernel[u];
  }
  Tensor& y = c.output(0, DType::Float, ys);
  float* py = y.ptr<float>();
  // Through the memory budget (a hostile kernel x input size is refused, not a bad_alloc).
  Tensor cols_t = Tensor::alloc(DType::Float, {mul_dim(c, mul_dim(c, Mg, kprod), in_sp)});
  std::span<float> cols(cols_t.ptr<float>(), static_cast<size_t>(cols_t.numel()));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t gi = 0; gi < group; ++gi) {
      const float* X = x.ptr<float>() + (n * C + gi * Cg) * in_sp;
      const float* W = w.ptr<float>() + gi * Cg * Mg * kprod;
      // cols[Mg*kprod, in_sp] = W^T[Mg*kprod, Cg] * X[Cg, in_sp]
      simd::gemm(true, false, static_cast<size_t>(Mg * kprod), static_cast<size_t>(in_sp), static_cast<size_t>(Cg), 1.f,
                 W, static_cast<size_t>(Mg * kprod), X, static_cast<size_t>(in_sp), 0.f, cols.data(),
                 static_cast<size_t>(in_sp));
      // col2im, one output channel per work item: Y[m] = bias + sum over kernel taps of the
      // tap's column block scattered to its strided, dilated output positions. Rows are
      // clipped once per (tap, input row), so the inner loop has no bounds checks (PaddleOCR
      // det's 2x2/stride-2 heads: 142 ms with per-element index arithmetic, see git log).
      simd::parallel_for(Mg, [&](int64_t m) {
        float* Y = py + (n * M + gi * Mg + m) * out_sp;
        const float bias = b ? b->ptr<float>()[gi * Mg + m] : 0.f;
        std::fill(Y, Y + out_sp, bias);
        for (int64_t k = 0; k < kprod; ++k) {
          int64_t kk[3] = {0, 0, 0}, rem = k;
          for (int i = r; i-- > 0;) {
            kk[i] = rem % geo.kernel[static_cast<size_t>(i)];
            rem /= geo.kernel[static_cast<size_t>(i)];
          }
          const float* col = cols.data() + (m * kprod + k) * in_sp;
          // The innermost axis as a row; the outer axes (up to two) enumerate rows.
          const size_t inner = static_cast<size_t>(r - 1);
          const int64_t IW = geo.in[inner], OW = out[inner], SW = geo.stride[inner];
          const int64_t off_w = kk[inner] * geo.dilation[inner] - geo.pad_begin[inner];
          // iw in [lo, hi): 0 <= iw * SW + off_w < OW
          const int64_t lo = off_w >= 0 ? 0 : (-off_w + SW - 1) / SW;
          const int64_t hi = std::min<int64_t>(IW, OW - off_w <= 0 ? 0 : (OW - off_w - 1) / SW + 1);
          if (lo >= hi) continue;
          const int64_t rows_in = in_sp / IW;
          for (int64_t row = 0; row < rows_in; ++row) {
            int64_t rs = row, orow = 0;
            bool ok = true;
            int64_t oi[2] = {0, 0}, ii[2] = {0, 0};
            for (int i = r - 1; i-- > 0;) {
              ii[i] = rs % geo.in[static_cast<size_t>(i)];
              rs /= geo.in[static_cast<size_t>(i)];
            }
            for (int i = 0; i < r - 1 && ok; ++i) {
              const size_t u = static_cast<size_t>(i);
              oi[i] = ii[i] * geo.stride[u] + kk[i] * geo.dilation[u] - geo.pad_begin[u];
              ok = oi[i] >= 0 && oi[i] < out[u];
              orow = orow * out[u] + oi[i];
            }
            if (!ok) continue;
            float* yrow = Y + orow * OW + (lo * SW + off_w);  // output of iw = lo
            const float* crow = col + row * IW + lo;
            const int64_t len = hi - lo;
            if (SW == 1) {
              for (int64_t j = 0; j < len; ++j) yrow[j] += crow[j];
            } else {
              for (int64_t j = 0; j < len; ++j) yrow[j * SW] += crow[j];
            }
          }
        }
      });
    }
  if (c.fused_act.op != simd::UnaryOp::Identity) simd::unary(c.fused_act, py, py, static_cast<size_t>(y.numel()));
}

void pad_conv(OpContext& c) {
  if (!c.state) c.error("internal: the Pad folded into this Conv lost its pads");
  conv(c);
}

}  // namespace

// Kept apart from passes/fuse_pad_into_conv.cpp's reader of the same parameters: the original is
// verified through this fusion, which must not share its reading with the pass under test.
std::optional<std::vector<int64_t>> zero_spatial_pads(const Graph& g, NodeId pad, int64_t opset) {
  if (!is(g, pad, "Pad") || g.inputs(pad).empty() || g.attr_string(pad, "mode", "constant") != "constant")
    return std::nullopt;
  std::optional<std::vector<int64_t>> pads;
  std::optional<double> fill;
  if (opset < 11) {
    auto a = g.attr(pad, "pads") || opset >= 2 ? g.attr_ints(pad, "pads") : g.attr_ints(pad, "paddings");
    pads.emplace(a.begin(), a.end());
    fill = g.attr_float(pad, "value", 0.f);
  } else {
    if (g.inputs(pad).size() < 2 || !g.input(pad, 1).valid()) return std::nullopt;
    pads = constant_ints(g, g.input(pad, 1));
    const ValueId v = g.inputs(pad).size() > 2 ? g.input(pad, 2) : ValueId{};
    fill = v.valid() ? scalar(g, v) : 0.0;
    // Opset 18: the pads are for the axes of input 3 only.
    if (const ValueId axes_v = g.inputs(pad).size() > 3 ? g.input(pad, 3) : ValueId{}; pads && axes_v.valid()) {
      auto axes = constant_ints(g, axes_v);
      const int64_t r = known_rank(g, g.input(pad, 0));
      if (!axes || r < 0 || pads->size() != 2 * axes->size()) return std::nullopt;
      std::vector<int64_t> full(static_cast<size_t>(2 * r), 0);
      std::vector<uint8_t> seen(static_cast<size_t>(r), 0);
      for (size_t i = 0; i < axes->size(); ++i) {
        int64_t a = (*axes)[i];
        if (a < -r || a >= r) return std::nullopt;
        if (a < 0) a += r;
        if (seen[static_cast<size_t>(a)]++) return std::nullopt;
        full[static_cast<size_t>(a)] = (*pads)[i];
        full[static_cast<size_t>(a + r)] = (*pads)[i + axes->size()];
      }
      pads = std::move(full);
    }
  }
  // +0 only: a -0 fill is the one zero the conv's own padding does not reproduce.
  if (!pads || !fill || *fill != 0.0 || std::signbit(*fill) || pads->size() % 2 != 0 || pads->size() < 6)
    return std::nullopt;
  const size_t r = pads->size() / 2;
  if (const int64_t xr = known_rank(g, g.input(pad, 0)); xr >= 0 && static_cast<size_t>(xr) != r) return std::nullopt;
  if ((*pads)[0] != 0 || (*pads)[1] != 0 || (*pads)[r] != 0 || (*pads)[r + 1] != 0) return std::nullopt;
  std::vector<int64_t> spatial;
  for (size_t half = 0; half < 2; ++half)
    for (size_t i = 2; i < r; ++i) {
      const int64_t p = (*pads)[half * r + i];
      if (p < 0) return std::nullopt;  // a crop is no padding
      spatial.push_back(p);
    }
  return spatial;
}

namespace {

KernelDef conv_def(KernelFn run, KernelDef::PrepareFn prepare) {
  return {.run = run,
          .inplace_input = 3,  // the fused residual, whose slot y may take
          .fuses_activation = true,
          .prepare = prepare,  // nothing packed yet: the weights stay readable (prepared_inputs 0)
          .residual_input = 3,
          .layout = LayoutUse::Aware,
          .takes_nhwc = conv_takes_nhwc,
          .starts_nhwc = conv_starts_nhwc};
}

}  // namespace

const KernelDef& pad_conv_kernel() {
  static const KernelDef k = conv_def(pad_conv, prepare_pad_conv);
  return k;
}

void register_conv(Registry& r) {
  r.add("", "Conv", conv_def(conv, prepare_conv));
  r.add("", "ConvTranspose", {.run = conv_transpose, .fuses_activation = true});
}

}  // namespace onnxforge::rt
