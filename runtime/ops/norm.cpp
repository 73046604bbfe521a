// Normalizations and softmax: BatchNormalization, InstanceNormalization, LayerNormalization,
// RMSNormalization, GroupNormalization, LRN, MeanVarianceNormalization, Softmax, LogSoftmax,
// Hardmax.

#include <cmath>

#include "runtime/ops/common.h"
#include "simd/norm.h"
#include "simd/parallel.h"

namespace onnxforge::rt {
namespace {

void need_float(const OpContext& c, const Tensor& t) {
  if (t.dtype != DType::Float)
    c.error("expects float32 (or float16/bfloat16) data, got " + std::string(dtype_name(t.dtype)));
}

// Plan time: inference-mode BatchNormalization is per channel in either layout.
bool batch_norm_takes_nhwc(const Graph& g, NodeId n) {
  return g.attr_int(n, "training_mode", 0) == 0 && (g.outputs(n).size() < 2 || !g.output(n, 1).valid());
}

// Training mode: the training_mode attribute from opset 14; before, the presence of the
// mean/var outputs ("output case #1" of BatchNormalization-9).
bool bn_training(const OpContext& c) {
  if (c.opset >= 14) return c.attr_i("training_mode", 0) != 0;
  for (size_t i = 1; i < c.output_count(); ++i)
    if (c.has_output(i)) return true;
  return false;
}

void batch_norm(OpContext& c) {
  const bool training = bn_training(c);
  const Tensor x = training || !c.prefer_nhwc ? to_nchw(c.input(0)) : c.input(0);
  need_float(c, x);
  const Tensor &scale = c.input(1), &bias = c.input(2), &mean = c.input(3), &var = c.input(4);
  const float eps = c.attr_f("epsilon", 1e-5f);
  if (x.rank() < 1) c.error("input must have rank >= 1");
  const int64_t N = x.shape[0], C = x.rank() > 1 ? x.shape[1] : 1;
  for (auto [t, what] : {std::pair{&scale, "scale"}, {&bias, "B"}, {&mean, "input_mean"}, {&var, "input_var"}})
    need_elements(c, *t, C, DType::Float, what);
  Tensor& y = c.output(0, x.dtype, x.shape);
  const int64_t sp = x.numel() / std::max<int64_t>(N * C, 1);
  std::vector<double> m(static_cast<size_t>(C)), v(static_cast<size_t>(C));
  for (int64_t ch = 0; ch < C; ++ch) {
    if (!training) {
      m[static_cast<size_t>(ch)] = mean.ptr<float>()[ch];
      v[static_cast<size_t>(ch)] = var.ptr<float>()[ch];
      continue;
    }
    double s = 0, sq = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < sp; ++i) {
        double z = x.ptr<float>()[(n * C + ch) * sp + i];
        s += z;
        sq += z * z;
      }
    const double cnt = static_cast<double>(N * sp);
    m[static_cast<size_t>(ch)] = s / cnt;
    v[static_cast<size_t>(ch)] = sq / cnt - (s / cnt) * (s / cnt);
  }
  std::vector<float> a(static_cast<size_t>(C)), b(static_cast<size_t>(C));
  for (int64_t ch = 0; ch < C; ++ch) {
    double inv = 1.0 / std::sqrt(v[static_cast<size_t>(ch)] + eps);
    a[static_cast<size_t>(ch)] = static_cast<float>(scale.ptr<float>()[ch] * inv);
    b[static_cast<size_t>(ch)] =
        static_cast<float>(bias.ptr<float>()[ch] - m[static_cast<size_t>(ch)] * scale.ptr<float>()[ch] * inv);
  }
  if (x.nhwc) {  // channels last: a row of C per pixel
    y.nhwc = true;
    simd::parallel_for(N * sp, [&](int64_t px) {
      const float* X = x.ptr<float>() + px * C;
      float* Y = y.ptr<float>() + px * C;
      for (int64_t ch = 0; ch < C; ++ch) Y[ch] = X[ch] * a[static_cast<size_t>(ch)] + b[static_cast<size_t>(ch)];
    });
    return;
  }
  simd::parallel_for(N * C, [&](int64_t pl) {
    const float* X = x.ptr<float>() + pl * sp;
    float* Y = y.ptr<float>() + pl * sp;
    const float s = a[static_cast<size_t>(pl % C)], t = b[static_cast<size_t>(pl % C)];
    for (int64_t i = 0; i < sp; ++i) Y[i] = X[i] * s + t;
  });
  // Training mode: running statistics updated with momentum (inference passes them through).
  const double mom = c.attr_f("momentum", 0.9f);
  for (int k = 1; k <= 2; ++k) {
    if (c.output_count() <= static_cast<size_t>(k) || !c.has_output(static_cast<size_t>(k))) continue;
    const Tensor& run = k == 1 ? mean : var;
    Tensor& o = c.output(static_cast<size_t>(k), DType::Float, run.shape);
    for (int64_t ch = 0; ch < C; ++ch) {
      const double cur = (k == 1 ? m : v)[static_cast<size_t>(ch)];
      o.ptr<float>()[ch] =
          static_cast<float>(training ? run.ptr<float>()[ch] * mom + cur * (1 - mom) : run.ptr<float>()[ch]);
    }
  }
}

void instance_norm(OpContext& c) {
  const Tensor& x = c.input(0);
  need_float(c, x);
  const Tensor &scale = c.input(1), &bias = c.input(2);
  const float eps = c.attr_f("epsilon", 1e-5f);
  if (x.rank() < 2) c.error("input must have rank >= 2, got " + shape_str(x.shape));
  Tensor& y = c.output(0, x.dtype, x.shape);
  if (x.numel() == 0) return;
  const int64_t N = x.shape[0], C = x.shape[1], sp = x.numel() / (N * C);
  need_elements(c, scale, C, DType::Float, "scale");
  need_elements(c, bias, C, DType::Float, "B");
  const std::vector<float> ones(static_cast<size_t>(sp), 1.f);
  simd::parallel_for(N * C, [&](int64_t pl) {
    const float* X = x.ptr<float>() + pl * sp;
    float* Y = y.ptr<float>() + pl * sp;
    const float s = scale.ptr<float>()[pl % C], b = bias.ptr<float>()[pl % C];
    simd::layer_norm(1, static_cast<size_t>(sp), X, ones.data(), nullptr, eps, Y);
    for (int64_t i = 0; i < sp; ++i) Y[i] = Y[i] * s + b;
  });
}

// Expands a parameter broadcastable to the normalized shape into `cols` contiguous values.
const float* expand_param(const OpContext& c, const Tensor* p, const Shape& norm_shape, std::vector<float>& buf) {
  if (!p) return nullptr;
  const int64_t cols = numel(norm_shape);
  if (p->numel() == cols) return p->ptr<float>();
  // Anything that does not broadcast to the normalized shape would be read past its end.
  if (!broadcasts_to(p->shape, norm_shape))
    c.error("scale/bias " + shape_str(p->shape) + " do not broadcast to the normalized shape " + shape_str(norm_shape));
  buf.resize(static_cast<size_t>(cols));
  auto st = bcast_strides(p->shape, norm_shape);
  for_each_broadcast<1>(norm_shape, {st}, [&](int64_t i, const std::array<int64_t, 1>& o) {
    buf[static_cast<size_t>(i)] = p->ptr<float>()[o[0]];
  });
  return buf.data();
}

// LayerNormalization and RMSNormalization convert float16/bfloat16 themselves (KernelDef
// float_compute = false): their outputs do not all take X's type (LayerNormalization's Mean and
// InvStdDev are float, stash_type's precision; RMSNormalization's Y takes the scale's type).
// Stage one always runs in float32, which is stash_type = 1, the default.
Tensor float_of(const OpContext& c, const Tensor& t) {
  if (is_stored_float(t.dtype)) return cast(t, DType::Float);
  need_float(c, t);
  return t;
}

// Output i of type `type`: written directly when float32, else through a float32 temporary
// that finish() converts.
struct FloatOut {
  OpContext& c;
  size_t index;
  DType type;
  Tensor tmp;
  Tensor* out = nullptr;
  FloatOut(OpContext& ctx, size_t i, DType t, const Shape& shape) : c(ctx), index(i), type(t) {
    if (type == DType::Float)
      out = &c.output(i, DType::Float, shape);
    else
      tmp = Tensor::alloc(DType::Float, shape);
  }
  float* ptr() { return out ? out->ptr<float>() : tmp.ptr<float>(); }
  void finish() {
    if (!out) cast_into(tmp, c.output(index, type, tmp.shape));
  }
};

void layer_norm(OpContext& c) {
  const Tensor x = float_of(c, c.input(0));
  const DType ytype = c.input(0).dtype;
  const int64_t axis = norm_axis(c, c.attr_i("axis", -1), x.rank());
  const float eps = c.attr_f("epsilon", 1e-5f);
  Shape norm_shape(x.shape.begin() + axis, x.shape.end());
  const int64_t cols = numel(norm_shape), rows = cols ? x.numel() / cols : 0;
  std::vector<float> sb, bb;
  const Tensor sc = c.in(1) ? float_of(c, *c.in(1)) : Tensor{};
  const Tensor bi = c.in(2) ? float_of(c, *c.in(2)) : Tensor{};
  const float* scale = expand_param(c, c.in(1) ? &sc : nullptr, norm_shape, sb);
  const float* bias = expand_param(c, c.in(2) ? &bi : nullptr, norm_shape, bb);
  FloatOut y(c, 0, ytype, x.shape);
  Shape stat_shape(x.shape.begin(), x.shape.begin() + axis);
  stat_shape.resize(x.shape.size(), 1);
  float* mean = c.output_count() > 1 && c.has_output(1) ? c.output(1, DType::Float, stat_shape).ptr<float>() : nullptr;
  float* inv = c.output_count() > 2 && c.has_output(2) ? c.output(2, DType::Float, stat_shape).ptr<float>() : nullptr;
  std::vector<float> ones;
  if (!scale) {
    ones.assign(static_cast<size_t>(cols), 1.f);
    scale = ones.data();
  }
  simd::layer_norm(static_cast<size_t>(rows), static_cast<size_t>(cols), x.ptr<float>(), scale, bias, eps, y.ptr(),
                   mean, inv);
  if (c.fused_act.op != simd::UnaryOp::Identity)
    simd::unary(c.fused_act, y.ptr(), y.ptr(), static_cast<size_t>(x.numel()));
  y.finish();
}

void rms_norm(OpContext& c) {
  const Tensor x = float_of(c, c.input(0));
  const int64_t axis = norm_axis(c, c.attr_i("axis", -1), x.rank());
  const float eps = c.attr_f("epsilon", 1e-5f);
  Shape norm_shape(x.shape.begin() + axis, x.shape.end());
  const int64_t cols = numel(norm_shape), rows = cols ? x.numel() / cols : 0;
  std::vector<float> sb;
  const Tensor sc = c.in(1) ? float_of(c, *c.in(1)) : Tensor{};
  const float* scale = expand_param(c, c.in(1) ? &sc : nullptr, norm_shape, sb);
  FloatOut y(c, 0, c.in(1) ? c.in(1)->dtype : c.input(0).dtype, x.shape);
  simd::rms_norm(static_cast<size_t>(rows), static_cast<size_t>(cols), x.ptr<float>(), scale, eps, y.ptr());
  y.finish();
}

void group_norm(OpContext& c) {
  const Tensor& x = c.input(0);
  need_float(c, x);
  const Tensor &scale = c.input(1), &bias = c.input(2);
  const int64_t G = c.attr_i("num_groups", 1);
  const float eps = c.attr_f("epsilon", 1e-5f);
  if (x.rank() < 2) c.error("input must have rank >= 2, got " + shape_str(x.shape));
  const int64_t N = x.shape[0], C = x.shape[1];
  if (G <= 0 || C % G != 0)
    c.error("num_groups " + std::to_string(G) + " does not divide the " + std::to_string(C) + " channels");
  Tensor& y = c.output(0, x.dtype, x.shape);
  if (x.numel() == 0) return;
  const int64_t sp = x.numel() / (N * C);
  // Per group (opset 18) or per channel (21): anything shorter would be read past its end.
  need_elements(c, scale, scale.numel() == G ? G : C, DType::Float, "scale");
  need_elements(c, bias, scale.numel() == G ? G : C, DType::Float, "bias");
  const int64_t cpg = C / G;
  const std::vector<float> ones(static_cast<size_t>(cpg * sp), 1.f);
  simd::layer_norm(static_cast<size_t>(N * G), static_cast<size_t>(cpg * sp), x.ptr<float>(), ones.data(), nullptr, eps,
                   y.ptr<float>());
  // Opset 18 has per-group scale/bias, opset 21 per-channel.
  const bool per_group = scale.numel() == G && G != C;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ch = 0; ch < C; ++ch) {
      float s = scale.ptr<float>()[per_group ? ch / cpg : ch], b = bias.ptr<float>()[per_group ? ch / cpg : ch];
      float* Y = y.ptr<float>() + (n * C + ch) * sp;
      for (int64_t i = 0; i < sp; ++i) Y[i] = Y[i] * s + b;
    }
}

template <int MODE>  // 0 softmax, 1 log-softmax, 2 hardmax
void softmax(OpContext& c) {
  const Tensor& x = c.input(0);
  need_float(c, x);
  const int64_t rank = x.rank();
  Tensor& y = c.output(0, x.dtype, x.shape);
  if (x.numel() == 0) return;
  if (rank == 0) {
    y.ptr<float>()[0] = MODE == 1 ? 0.f : 1.f;
    return;
  }
  int64_t axis = norm_axis(c, c.attr_i("axis", c.opset < 13 ? 1 : -1), rank);
  int64_t outer = 1, n = x.shape[static_cast<size_t>(axis)], inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= x.shape[static_cast<size_t>(i)];
  for (int64_t i = axis + 1; i < rank; ++i) inner *= x.shape[static_cast<size_t>(i)];
  if (c.opset < 13) {  // coerced to 2-D [outer, n * inner]
    n *= inner;
    inner = 1;
  }
  if (MODE == 2) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const float* X = x.ptr<float>() + o * n * inner + i;
        float* Y = y.ptr<float>() + o * n * inner + i;
        int64_t best = 0;
        for (int64_t k = 0; k < n; ++k) {
          if (X[k * inner] > X[best * inner]) best = k;
        }
        for (int64_t k = 0; k < n; ++k) Y[k * inner] = k == best ? 1.f : 0.f;
      }
    return;
  }
  if (inner == 1) {
    if (MODE == 0)
      simd::softmax(static_cast<size_t>(outer), static_cast<size_t>(n), x.ptr<float>(), y.ptr<float>());
    else
      simd::log_softmax(static_cast<size_t>(outer), static_cast<size_t>(n), x.ptr<float>(), y.ptr<float>());
  } else {
    simd::softmax_axis(static_cast<size_t>(outer), static_cast<size_t>(n), static_cast<size_t>(inner), x.ptr<float>(),
                       y.ptr<float>(), MODE == 1);
  }
}

void lrn(OpContext& c) {
  const Tensor& x = c.input(0);
  need_float(c, x);
  const float alpha = c.attr_f("alpha", 1e-4f), beta = c.attr_f("beta", 0.75f), bias = c.attr_f("bias", 1.f);
  const int64_t size = c.attr_i("size", 1);
  if (x.rank() < 2 || size <= 0)
    c.error("needs an input of rank >= 2 and a positive size, got " + shape_str(x.shape) + " and " +
            std::to_string(size));
  Tensor& y = c.output(0, x.dtype, x.shape);
  if (x.numel() == 0) return;
  const int64_t N = x.shape[0], C = x.shape[1], sp = x.numel() / (N * C);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t s = 0; s < sp; ++s) {
        double sq = 0;
        for (int64_t k = std::max<int64_t>(0, ch - (size - 1) / 2); k <= std::min(C - 1, ch + size / 2); ++k) {
          double v = x.ptr<float>()[(n * C + k) * sp + s];
          sq += v * v;
        }
        y.ptr<float>()[(n * C + ch) * sp + s] = static_cast<float>(
            x.ptr<float>()[(n * C + ch) * sp + s] / std::pow(bias + alpha / static_cast<double>(size) * sq, beta));
      }
}

void mvn(OpContext& c) {
  const Tensor& x = c.input(0);
  need_float(c, x);
  std::vector<int64_t> axes;
  auto a = c.attr_ints("axes");
  if (a.empty())
    axes = {0, 2, 3};
  else
    axes.assign(a.begin(), a.end());
  for (auto& ax : axes) ax = norm_axis(c, ax, x.rank());
  Tensor& y = c.output(0, x.dtype, x.shape);
  Shape rshape = x.shape;
  for (auto ax : axes) rshape[static_cast<size_t>(ax)] = 1;
  std::vector<double> sum(static_cast<size_t>(numel(rshape))), sq(sum.size());
  auto st = bcast_strides(rshape, x.shape);
  for_each_broadcast<1>(x.shape, {st}, [&](int64_t i, const std::array<int64_t, 1>& o) {
    double v = x.ptr<float>()[i];
    sum[static_cast<size_t>(o[0])] += v;
    sq[static_cast<size_t>(o[0])] += v * v;
  });
  const double cnt = static_cast<double>(x.numel()) / static_cast<double>(sum.size());
  for_each_broadcast<1>(x.shape, {st}, [&](int64_t i, const std::array<int64_t, 1>& o) {
    double m = sum[static_cast<size_t>(o[0])] / cnt, var = sq[static_cast<size_t>(o[0])] / cnt - m * m;
    y.ptr<float>()[i] = static_cast<float>((x.ptr<float>()[i] - m) / (std::sqrt(var) + 1e-9));
  });
}

// LayerNormalization over the last axis written out as ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/
// Div/Mul/Add (PyTorch exports before opset 17), fused by the plan: inputs x, scale, bias;
// epsilon in the step's state.
void decomposed_layer_norm(OpContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& scale = c.input(1);
  const Tensor& bias = c.input(2);
  need_float(c, x);
  if (x.rank() < 1 || c.state == nullptr) c.error("internal: bad fused LayerNorm");
  const int64_t cols = x.shape.back(), rows = cols ? x.numel() / cols : 0;
  auto ok = [&](const Tensor& t) { return t.dtype == DType::Float && (t.numel() == cols || t.numel() == 1); };
  if (!ok(scale) || !ok(bias))
    c.error("fused LayerNorm: scale/bias do not match the normalized axis of " + shape_str(x.shape));
  // A one-element scale or bias broadcasts along the axis.
  std::vector<float> s1, b1;
  const float* ps = scale.ptr<float>();
  const float* pb = bias.ptr<float>();
  if (scale.numel() != cols) s1.assign(static_cast<size_t>(cols), ps[0]), ps = s1.data();
  if (bias.numel() != cols) b1.assign(static_cast<size_t>(cols), pb[0]), pb = b1.data();
  const float eps = *static_cast<const float*>(c.state);
  Tensor& y = c.output(0, DType::Float, x.shape);
  simd::layer_norm(static_cast<size_t>(rows), static_cast<size_t>(cols), x.ptr<float>(), ps, pb, eps, y.ptr<float>());
}

}  // namespace

const KernelDef& decomposed_layer_norm_kernel() {
  static const KernelDef def{.run = decomposed_layer_norm, .inplace_input = 0};  // y may overwrite x when x dies here
  return def;
}

void register_norm(Registry& r) {
  r.add("", "BatchNormalization", {.run = batch_norm, .layout = LayoutUse::Aware, .takes_nhwc = batch_norm_takes_nhwc});
  r.add("", "InstanceNormalization", {.run = instance_norm});
  r.add("", "LayerNormalization", {.run = layer_norm, .float_compute = false, .fuses_activation = true});
  r.add("", "RMSNormalization", {.run = rms_norm, .float_compute = false});
  r.add("", "SimplifiedLayerNormalization",
        {.run = rms_norm, .float_compute = false});  // ORT's name for RMSNorm in the default domain
  r.add("", "GroupNormalization", {.run = group_norm});
  r.add("", "Softmax", {.run = softmax<0>, .inplace_input = 0});
  r.add("", "LogSoftmax", {.run = softmax<1>, .inplace_input = 0});
  r.add("", "Hardmax", {.run = softmax<2>});
  r.add("", "LRN", {.run = lrn});
  r.add("", "MeanVarianceNormalization", {.run = mvn});
}

}  // namespace onnxforge::rt
