// Convolutions and pooling: Conv, ConvTranspose, ConvInteger, QLinearConv, MaxPool,
// AveragePool, LpPool, global pools, DepthToSpace/SpaceToDepth. Output sizes are symbolic:
// floor((in + pads - dilation*(k-1) - 1) / stride) + 1, ceil for ceil_mode and SAME padding.
#include "analysis/shape_engine.h"

namespace onnxforge::shape {
namespace {

struct Window {
  std::vector<int64_t> kernel, strides, dilations, pads, output_padding;
  std::string auto_pad;
  bool ceil_mode = false;
};

// Reads the window attributes for `ns` spatial dims; `kernel` comes from the attribute or,
// for convolutions, from the weight's trailing dims.
std::optional<Window> window(OpCtx& c, size_t ns, const VState* weight) {
  Window w;
  auto ks = c.attr_ints("kernel_shape");
  w.kernel.assign(ks.begin(), ks.end());
  if (w.kernel.empty() && weight && weight->ranked && weight->rank() == ns + 2)
    for (size_t i = 0; i < ns; ++i) {
      if (!weight->dims[2 + i].is_constant()) return std::nullopt;
      w.kernel.push_back(weight->dims[2 + i].value());
    }
  if (w.kernel.size() != ns) return std::nullopt;
  auto get = [&](std::string_view name, std::vector<int64_t>& out, size_t n, int64_t dflt) {
    auto v = c.attr_ints(name);
    out.assign(v.begin(), v.end());
    if (out.empty()) out.assign(n, dflt);
    return out.size() == n;
  };
  if (!get("strides", w.strides, ns, 1) || !get("dilations", w.dilations, ns, 1) || !get("pads", w.pads, 2 * ns, 0) ||
      !get("output_padding", w.output_padding, ns, 0)) {
    c.conflict("kernel_shape, strides, dilations, pads or output_padding do not match the input's " +
               std::to_string(ns) + " spatial dims");
    return std::nullopt;
  }
  // Strides of 0 divided by zero (SIGFPE in optimize); the runtime refuses these too.
  // Above 2^31 the window arithmetic (dilation * (kernel - 1) + pads) could overflow int64
  // (fuzz: dilations of INT64_MAX); no real model comes near.
  auto positive = [&](const std::vector<int64_t>& v, const char* name, int64_t least) {
    for (int64_t x : v)
      if (x < least || x > (int64_t{1} << 31)) {
        c.conflict(std::string(name) + " value " + std::to_string(x) + " is out of range");
        return false;
      }
    return true;
  };
  if (!positive(w.kernel, "kernel_shape", 1) || !positive(w.strides, "strides", 1) ||
      !positive(w.dilations, "dilations", 1) || !positive(w.pads, "pads", 0) ||
      !positive(w.output_padding, "output_padding", 0))
    return std::nullopt;
  w.auto_pad = std::string(c.attr_string("auto_pad", "NOTSET"));
  w.ceil_mode = c.attr_int("ceil_mode", 0) != 0;
  return w;
}

SymDim window_out(const Window& w, size_t i, const SymDim& in) {
  int64_t s = w.strides[i], eff = w.dilations[i] * (w.kernel[i] - 1) + 1;
  if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") return ceil_div(in, s);
  int64_t pads = w.auto_pad == "VALID" ? 0 : w.pads[i] + w.pads[i + w.kernel.size()];
  SymDim span = in + SymDim::constant(pads - eff);
  return (w.ceil_mode ? ceil_div(span, s) : floor_div(span, s)) + SymDim::constant(1);
}

SymDim transpose_out(const Window& w, size_t i, const SymDim& in) {
  int64_t s = w.strides[i];
  if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") return in * SymDim::constant(s);
  int64_t eff = w.dilations[i] * (w.kernel[i] - 1) + 1;
  int64_t pads = w.auto_pad == "VALID" ? 0 : w.pads[i] + w.pads[i + w.kernel.size()];
  return SymDim::constant(s) * (in - SymDim::constant(1)) + SymDim::constant(w.output_padding[i] + eff - pads);
}

// Conv-like: output [N, channels, window(spatial)...].
void conv_like(OpCtx& c, DType t, size_t wi, bool pool) {
  const VState& x = c.in(0);
  if (!x.ranked || x.rank() < 3) return c.set_dtype(0, t);
  size_t ns = x.rank() - 2;
  const VState* weight = pool ? nullptr : &c.in(wi);
  auto w = window(c, ns, weight);
  SymDim channels = x.dims[1];
  if (!pool) channels = weight->ranked && weight->rank() == ns + 2 ? weight->dims[0] : c.fresh();
  if (!w) return c.set_dtype(0, t);
  std::vector<SymDim> out{x.dims[0], channels};
  for (size_t i = 0; i < ns; ++i) out.push_back(window_out(*w, i, x.dims[2 + i]));
  c.set(0, t, out);
  if (pool && c.has_output(1)) c.set(1, DType::Int64, out);
}

void conv(OpCtx& c) { conv_like(c, c.in(0).dtype, 1, false); }
void conv_integer(OpCtx& c) { conv_like(c, DType::Int32, 1, false); }
void qlinear_conv(OpCtx& c) { conv_like(c, c.in(7).dtype, 3, false); }
void pool(OpCtx& c) { conv_like(c, c.in(0).dtype, 0, true); }

void conv_transpose(OpCtx& c) {
  const VState &x = c.in(0), &wt = c.in(1);
  DType t = x.dtype;
  if (!x.ranked || x.rank() < 3) return c.set_dtype(0, t);
  size_t ns = x.rank() - 2;
  SymDim channels =
      wt.ranked && wt.rank() == ns + 2 ? wt.dims[1] * SymDim::constant(c.attr_int("group", 1)) : c.fresh();
  std::vector<SymDim> out{x.dims[0], channels};
  auto shape = c.attr_ints("output_shape");
  if (!shape.empty()) {
    for (size_t i = shape.size() - ns; i < shape.size(); ++i) out.push_back(SymDim::constant(shape[i]));
    return c.set(0, t, out);
  }
  auto w = window(c, ns, &wt);
  if (!w) return c.set_dtype(0, t);
  for (size_t i = 0; i < ns; ++i) out.push_back(transpose_out(*w, i, x.dims[2 + i]));
  c.set(0, t, out);
}

void global_pool(OpCtx& c) {
  const VState& x = c.in(0);
  if (!x.ranked || x.rank() < 2) return c.set_dtype(0, x.dtype);
  std::vector<SymDim> out(x.dims.begin(), x.dims.begin() + 2);
  out.resize(x.rank(), SymDim::constant(1));
  c.set(0, x.dtype, out);
}

// com.microsoft QLinearAveragePool / QLinearGlobalAveragePool (X, x_scale, x_zp, y_scale, y_zp):
// the float pool's shape in Y's type; channels_last = 1 puts channels last.
DType qpool_type(OpCtx& c) { return c.has_input(4) ? c.in(4).dtype : c.in(0).dtype; }
void qlinear_avg_pool(OpCtx& c) {
  if (c.attr_int("channels_last", 0) != 0) return c.set_dtype(0, qpool_type(c));
  conv_like(c, qpool_type(c), 0, true);
}
void qlinear_global_pool(OpCtx& c) {
  const VState& x = c.in(0);
  const DType t = qpool_type(c);
  if (!x.ranked || x.rank() < 3) return c.set_dtype(0, t);
  std::vector<SymDim> out(x.rank(), SymDim::constant(1));
  out[0] = x.dims[0];
  const bool last = c.attr_int("channels_last", 0) != 0;
  out[last ? x.rank() - 1 : 1] = x.dims[last ? x.rank() - 1 : 1];
  c.set(0, t, out);
}

void depth_to_space(OpCtx& c) {
  const VState& x = c.in(0);
  int64_t b = c.attr_int("blocksize", 1);
  if (!x.ranked || x.rank() != 4) return c.set_dtype(0, x.dtype);
  auto ch = exact_div(x.dims[1], SymDim::constant(b * b));
  SymDim k = SymDim::constant(b);
  c.set(0, x.dtype, {x.dims[0], ch ? *ch : c.fresh(), x.dims[2] * k, x.dims[3] * k});
}

void space_to_depth(OpCtx& c) {
  const VState& x = c.in(0);
  int64_t b = c.attr_int("blocksize", 1);
  if (!x.ranked || x.rank() != 4) return c.set_dtype(0, x.dtype);
  auto h = exact_div(x.dims[2], SymDim::constant(b));
  auto w = exact_div(x.dims[3], SymDim::constant(b));
  c.set(0, x.dtype, {x.dims[0], x.dims[1] * SymDim::constant(b * b), h ? *h : c.fresh(), w ? *w : c.fresh()});
}

}  // namespace

void register_conv(const Registrar& reg) {
  reg("Conv", conv);
  reg("ConvInteger", conv_integer);
  reg("QLinearConv", qlinear_conv);
  reg("com.microsoft::QLinearAveragePool", qlinear_avg_pool);
  reg("com.microsoft::QLinearGlobalAveragePool", qlinear_global_pool);
  reg("ConvTranspose", conv_transpose);
  for (const char* op : {"MaxPool", "AveragePool", "LpPool"}) reg(op, pool);
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"}) reg(op, global_pool);
  reg("DepthToSpace", depth_to_space);
  reg("SpaceToDepth", space_to_depth);
}

}  // namespace onnxforge::shape
