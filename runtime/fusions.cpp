// The plan's fusions (see fusions.h): one matcher per fusion, the table at the end.
#include "runtime/fusions.h"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <unordered_set>

#include "ir/error.h"
#include "ir/match.h"
#include "ir/op_traits.h"
#include "runtime/ops/conv_util.h"
#include "simd/resample.h"

namespace onnxforge::rt {
namespace {

// ---------------------------------------------------------------------- helpers

// v is float32: declared, or proven by known_dtype. In a model with no narrower float anywhere an
// undeclared type is taken as float32 (exporters rarely declare intermediates; the kernels check
// the real type when they run).
bool float_out(const FusionSite& site, ValueId v) {
  const DType t = site.g.dtype(v) != DType::Undefined ? site.g.dtype(v) : known_dtype(site.g, v);
  return t == DType::Float || (t == DType::Undefined && !site.narrow_floats);
}

// Output 0 of the step exists and is float (the fused kernels compute in float32).
bool float_output0(const FusionSite& site, const Step& s) {
  return !s.outputs.empty() && s.outputs[0].valid() && float_out(site, s.outputs[0]);
}

// A float scalar known before any run, as float (an initializer or a Constant node's output,
// which the plan may not have folded yet when it looks ahead from a producer).
std::optional<float> float_scalar(const Graph& g, ValueId v) {
  auto x = scalar(g, v, DType::Float);
  return x ? std::optional<float>(static_cast<float>(*x)) : std::nullopt;
}

// Within float rounding of the constant an exporter wrote (sqrt 2 at whatever precision).
bool near(std::optional<float> x, float want) { return x && std::fabs(*x - want) <= 1e-4f * std::fabs(want); }

// The activation a producer can apply in its epilogue, if `n` is one: whether from op_traits
// (kEpilogue), how from the activation's kernel (KernelDef::epilogue, the function its kernel
// applies, parameters read the same way).
std::optional<simd::Unary> fusable_activation(const Graph& g, NodeId n) {
  if (!n.valid() || !has_fact(g, n, kEpilogue)) return std::nullopt;
  const KernelDef* k = Registry::get().find(norm_domain(g.domain(n)), str(g.op_type(n)));
  return k && k->epilogue ? k->epilogue(g, n) : std::nullopt;
}

// ------------------------------------------------------------------------------ fusions

// LayerNormalization over the last axis as exporters write it out, from its first ReduceMean:
// y = (x - mean) / sqrt(mean((x - mean)^2) + eps) * scale + bias (nine nodes, one step of
// decomposed_layer_norm_kernel()).
Found<FusedStep> decomposed_layer_norm(const FusionSite& site, const Step& s) {
  const Graph& g = site.g;
  const Uses& uses = site.uses;
  // One output read by the chain; `last`: the chain's final node, whose output may be a graph output.
  auto is_op = [&](NodeId m, std::string_view op, size_t n_in, bool last = false) {
    return is(g, m, op) && g.inputs(m).size() == n_in && g.outputs(m).size() == 1 && g.output(m, 0).valid() &&
           (last || !uses.is_graph_output(g.output(m, 0)));
  };
  auto last_axis_mean = [&](NodeId m) {
    if (!(is_op(m, "ReduceMean", 1) || is_op(m, "ReduceMean", 2)) || g.attr_int(m, "keepdims", 1) != 1) return false;
    if (g.inputs(m).size() == 1) {
      auto axes = g.attr_ints(m, "axes");
      return axes.size() == 1 && axes[0] == -1;
    }
    // Opset 18: the axes are an input, so that an upgraded model keeps this fusion and
    // computes the same bits.
    auto axes = constant_ints(g, g.input(m, 1));
    return axes && axes->size() == 1 && (*axes)[0] == -1;
  };
  auto next = [&](NodeId m) { return single_use(uses, g.output(m, 0)); };
  const NodeId n = s.node;
  MATCH_IF(is(g, n, "ReduceMean") && float_output0(site, s), "not a float ReduceMean");
  MATCH_IF(last_axis_mean(n), "not a mean over the last axis");
  const ValueId x = g.input(n, 0);
  MATCH_IF(site.available[x.index()], "x not computed yet");
  const Use u_sub = next(n);
  const NodeId sub = u_sub.node;
  MATCH_IF(is_op(sub, "Sub", 2) && u_sub.slot == 1 && g.input(sub, 0) == x, "no x - mean");
  const ValueId d = g.output(sub, 0);
  MATCH_IF(uses.count(d) == 2, "x - mean not read twice");
  NodeId pow, div;
  for (const Use& u : uses.of(d)) {
    if (is_op(u.node, "Pow", 2) && u.slot == 0)
      pow = u.node;
    else if (is_op(u.node, "Div", 2) && u.slot == 0)
      div = u.node;
  }
  MATCH_IF(pow.valid() && div.valid(), "x - mean not read by a Pow and a Div");
  const auto two = float_scalar(g, g.input(pow, 1));
  MATCH_IF(two && *two == 2.f, "not squared");
  const NodeId mean2 = next(pow).node;
  MATCH_IF(last_axis_mean(mean2), "no variance over the last axis");
  const NodeId add = next(mean2).node;
  MATCH_IF(is_op(add, "Add", 2), "no variance + eps");
  const auto eps = float_scalar(g, other_input(g, add, g.output(mean2, 0)));
  MATCH_IF(eps, "eps not a float scalar");
  const NodeId sqrt = next(add).node;
  MATCH_IF(is_op(sqrt, "Sqrt", 1), "no sqrt");
  const Use u_div = next(sqrt);
  MATCH_IF(u_div.node == div && u_div.slot == 1, "the sqrt does not divide x - mean");
  const NodeId mul = next(div).node;
  MATCH_IF(is_op(mul, "Mul", 2), "no scale");
  const ValueId scale = other_input(g, mul, g.output(div, 0));
  const NodeId badd = next(mul).node;
  MATCH_IF(is_op(badd, "Add", 2, true), "no bias");
  const ValueId bias = other_input(g, badd, g.output(mul, 0));
  MATCH_IF(g.is_constant(scale) && g.is_constant(bias), "scale or bias not an initializer");
  for (ValueId v : {scale, bias})
    MATCH_IF(g.model().tensors.dtype(g.initializer(v)) == DType::Float &&
                 g.model().tensors.dims(g.initializer(v)).size() == 1,
             "scale or bias not a float vector");
  FusedStep f;
  f.kernel = &decomposed_layer_norm_kernel();
  f.inputs = std::vector<ValueId>{x, scale, bias};
  f.output = g.output(badd, 0);
  f.state = std::make_shared<const float>(*eps);
  f.absorbed = {sub, pow, mean2, add, sqrt, div, mul, badd};
  f.fused = f.absorbed.size();
  return f;
}

// MatMul -> Softmax over the last axis -> MatMul (attention): one step of
// softmax_attention_kernel(), the scores kept in cache.
Found<FusedStep> softmax_attention(const FusionSite& site, const Step& s) {
  const Graph& g = site.g;
  MATCH_IF(is(g, s.node, "MatMul") && s.inputs.size() == 2 && s.outputs.size() == 1 && float_output0(site, s),
           "not a float MatMul");
  MATCH_IF(s.inputs[1].valid() && !site.is_const[s.inputs[1].index()], "B is a constant (a projection)");
  const Use u_sm = single_use(site.uses, s.outputs[0]);
  const NodeId sm = u_sm.node;
  MATCH_IF(is(g, sm, "Softmax") && u_sm.slot == 0 && g.outputs(sm).size() == 1, "not read by one Softmax");
  const ValueId p = g.output(sm, 0);
  const Attr* axis = g.attr(sm, "axis");
  const bool last_axis = axis ? axis->type == AttrType::Int && axis->i == -1 : s.opset >= 13;
  MATCH_IF(p.valid() && float_out(site, p) && last_axis, "not a float softmax over the last axis");
  const Use u_mm = single_use(site.uses, p);
  const NodeId mm = u_mm.node;
  MATCH_IF(is(g, mm, "MatMul") && u_mm.slot == 0 && g.outputs(mm).size() == 1 && g.output(mm, 0).valid(),
           "the probabilities are not the A of one MatMul");
  const ValueId v = g.inputs(mm).size() == 2 ? g.input(mm, 1) : ValueId{};
  MATCH_IF(v.valid() && site.available[v.index()], "V not computed yet");
  FusedStep f;
  f.kernel = &softmax_attention_kernel();
  f.inputs = s.inputs;
  f.inputs->push_back(v);
  f.output = g.output(mm, 0);
  f.absorbed = {sm, mm};
  f.fused = 2;
  return f;
}

// Residual epilogue: a Conv/MatMul (KernelDef::residual_input) whose only reader is an Add takes
// the Add's other operand as an extra input when that operand is computed earlier in the order.
Found<FusedStep> residual_add(const FusionSite& site, const Step& s) {
  const Graph& g = site.g;
  MATCH_IF(s.kernel->residual_input >= 0 && float_output0(site, s), "no residual epilogue");
  MATCH_IF(!site.graph_output[s.outputs[0].index()], "output 0 is a graph output");
  const Use u = single_use(site.uses, s.outputs[0]);
  const NodeId add = u.node;
  MATCH_IF(is(g, add, "Add") && g.inputs(add).size() == 2 && u.slot < 2 && g.outputs(add).size() == 1 &&
               g.output(add, 0).valid() && float_out(site, g.output(add, 0)),
           "not read by one float Add");
  const ValueId other = g.input(add, 1 - u.slot);
  const auto slot = static_cast<size_t>(s.kernel->residual_input);
  MATCH_IF(other.valid() && other != s.outputs[0] && site.available[other.index()], "the other operand comes later");
  MATCH_IF(s.inputs.size() <= slot, "the residual slot is taken");
  for (ValueId v : s.inputs) MATCH_IF(v != other, "the other operand is also an input");
  FusedStep f;
  f.inputs = s.inputs;
  f.inputs->resize(slot + 1);
  (*f.inputs)[slot] = other;
  f.output = g.output(add, 0);
  f.absorbed = {add};
  return f;
}

// Activation epilogue (KernelDef::fuses_activation): one activation node reading output 0, or the
// exporters' erf GELU, x * (1 + erf(x / sqrt 2)) * 0.5 (five nodes), runs as OpContext::fused_act.
Found<FusedStep> activation(const FusionSite& site, const Step& s) {
  const Graph& g = site.g;
  const Uses& uses = site.uses;
  // A float16 (or bfloat16) output: the kernel computes in float and the frame rounds its output to float16
  // (Frame::run_step), so only activations that commute with that rounding may move before it:
  // Relu and Clip (monotone, fixing 0, and Clip's bounds are float16 values, exact in float)
  // give bit for bit what the graph's Conv -> float16 -> Relu gives.
  // The output's type where the graph does not say: the producers that fuse activations
  // (Conv, ConvTranspose, Gemm, MatMul) output their inputs' type.
  bool f16 = false;
  if (!s.outputs.empty() && s.outputs[0].valid()) {
    DType t = g.dtype(s.outputs[0]);
    for (size_t i = 0; t == DType::Undefined && i < s.inputs.size(); ++i)
      if (s.inputs[i].valid())
        t = g.is_initializer(s.inputs[i]) ? g.model().tensors.dtype(g.initializer(s.inputs[i])) : g.dtype(s.inputs[i]);
    f16 = t == DType::Float16 || t == DType::BFloat16;
  }
  MATCH_IF(s.kernel->fuses_activation && (float_output0(site, s) || f16), "no activation epilogue");
  MATCH_IF(!site.graph_output[s.outputs[0].index()], "output 0 is a graph output");
  const ValueId v = s.outputs[0];
  FusedStep f;
  if (const Use u = single_use(uses, v); u.node.valid() && u.slot == 0) {
    auto act = fusable_activation(g, u.node);
    MATCH_IF(!f16 || (act && (act->op == simd::UnaryOp::Relu || act->op == simd::UnaryOp::Clip)),
             "float16 output: only Relu and Clip commute with its rounding");
    if (act) {
      f.act = *act;
      f.output = g.output(u.node, 0);
      f.absorbed = {u.node};
      return f;
    }
  }
  // GELU: v -> Div(v, sqrt 2) -> Erf -> Add(., 1) -> Mul(v, .) -> Mul(., 0.5); every
  // intermediate read once.
  auto is_op = [&](NodeId n, std::string_view op) {
    return is(g, n, op) && g.outputs(n).size() >= 1 && g.output(n, 0).valid();
  };
  auto next = [&](NodeId n) { return single_consumer(g, uses, n); };
  MATCH_IF(!f16, "float16 output: no GELU epilogue");
  MATCH_IF(uses.count(v) == 2 && !uses.is_graph_output(v), "no single activation, and not read twice (GELU)");
  NodeId div, mul;
  for (const Use& u : uses.of(v)) {
    if (is_op(u.node, "Div") && u.slot == 0)
      div = u.node;
    else if (is_op(u.node, "Mul") && u.slot < 2)
      mul = u.node;
  }
  MATCH_IF(div.valid() && mul.valid() && g.inputs(div).size() == 2, "not read by a Div and a Mul");
  MATCH_IF(near(float_scalar(g, g.input(div, 1)), 1.41421356f), "the divisor is not sqrt(2)");
  const NodeId erf = next(div);
  MATCH_IF(is_op(erf, "Erf"), "no Erf after the division");
  const NodeId add = next(erf);
  MATCH_IF(is_op(add, "Add") && g.inputs(add).size() == 2, "no Add after the Erf");
  MATCH_IF(near(float_scalar(g, other_input(g, add, g.output(erf, 0))), 1.f), "Erf not followed by + 1");
  MATCH_IF(next(add) == mul && g.inputs(mul).size() == 2, "1 + erf does not multiply x");
  const NodeId half = next(mul);
  MATCH_IF(is_op(half, "Mul") && g.inputs(half).size() == 2, "no Mul after x * (1 + erf)");
  MATCH_IF(near(float_scalar(g, other_input(g, half, g.output(mul, 0))), 0.5f), "not halved");
  f.act = simd::Unary::of(simd::UnaryOp::Gelu);
  f.output = g.output(half, 0);
  f.absorbed = {div, erf, add, mul, half};
  return f;
}

// Dynamic quantization's dequantize (ORT's quantize_dynamic writes it): MatMulInteger or
// ConvInteger -> Cast(to float) -> Mul(., Mul(s0, s1)) [-> Add(., bias)], where s0 and s1 are
// float scalars known at run time (DynamicQuantizeLinear's scale) or constants with one element
// per output column / channel, and the bias a float constant with one element per column /
// channel (a conv's may be one value). MatMulInteger becomes com.microsoft MatMulIntegerToFloat
// (scalar at a_scale, the bias its input 6), ConvInteger conv_integer_to_float_kernel(); both
// compute float(acc) * (s0 * s1) then + bias, the graph's roundings in its order. A Relu/Clip
// (or other activation) after it is then the activation fusion's (both kernels fuse one).
Found<FusedStep> integer_dequantize(const FusionSite& site, const Step& s) {
  const Graph& g = site.g;
  const bool conv = is(g, s.node, "ConvInteger");
  MATCH_IF((conv || is(g, s.node, "MatMulInteger")) && s.outputs.size() == 1 && s.inputs.size() >= 2,
           "not a MatMulInteger/ConvInteger");
  MATCH_IF(s.inputs.size() < 4 || !s.inputs[3].valid() || site.is_const[s.inputs[3].index()],
           "the weight's zero point is computed at run time");
  const auto w_shape = static_shape(g, s.inputs[1]);
  MATCH_IF(w_shape && site.is_const[s.inputs[1].index()] && w_shape->size() >= 2 && (conv || w_shape->size() == 2),
           "the weight is not a constant of known shape");
  const int64_t cols = conv ? (*w_shape)[0] : (*w_shape)[1];
  const Use u_cast = single_use(site.uses, s.outputs[0]);
  const NodeId cast = u_cast.node;
  MATCH_IF(is(g, cast, "Cast") && g.outputs(cast).size() == 1 && g.output(cast, 0).valid(), "not read by one Cast");
  const Attr* to = g.attr(cast, "to");
  MATCH_IF(to && to->type == AttrType::Int && to->i == static_cast<int64_t>(DType::Float), "the Cast is not to float");
  const Use u_mul = single_use(site.uses, g.output(cast, 0));
  const NodeId mul = u_mul.node;
  MATCH_IF(is(g, mul, "Mul") && g.inputs(mul).size() == 2 && u_mul.slot < 2 && g.outputs(mul).size() == 1 &&
               g.output(mul, 0).valid(),
           "the float product is not read by one Mul");
  const NodeId sm = producer_of(g, mul, 1 - u_mul.slot);
  MATCH_IF(is(g, sm, "Mul") && g.inputs(sm).size() == 2, "the multiplier is not a product of two scales");
  // Each factor: a scalar at run time (DynamicQuantizeLinear's y_scale) or a float constant whose
  // shape broadcasts along the output's column (MatMul: rank <= 1) / channel axis only, so the
  // Mul changes neither the output's shape nor what each element is multiplied by.
  const auto out_rank = static_cast<int64_t>(w_shape->size());
  auto factor = [&](ValueId v) -> int64_t {  // elements (1 or cols), 0 when it does not qualify
    if (!v.valid()) return 0;
    const NodeId p = g.producer(v);
    if (is(g, p, "DynamicQuantizeLinear") && g.outputs(p).size() > 1 && g.output(p, 1) == v)
      return site.available[v.index()] ? 1 : 0;
    const TensorId t = constant_tensor(g, v);
    if (!t.valid() || g.model().tensors.dtype(t) != DType::Float) return 0;
    const auto sh = static_shape(g, v);
    if (!sh) return 0;
    int64_t n = 1;
    for (int64_t d : *sh) n *= d;
    const auto r = static_cast<int64_t>(sh->size());
    if (n == 1) return conv ? (r <= out_rank ? 1 : 0) : (r <= 1 ? 1 : 0);
    if (n != cols) return 0;
    if (!conv) return r == 1 ? n : 0;
    // Right-aligned with [N, M, spatial...]: M at axis 1, ones elsewhere.
    if (r < out_rank - 1 || r > out_rank) return 0;
    for (int64_t i = 0; i < r; ++i)
      if ((*sh)[static_cast<size_t>(i)] != (i + out_rank - r == 1 ? cols : 1)) return 0;
    return n;
  };
  const ValueId f0 = g.input(sm, 0), f1 = g.input(sm, 1);
  const int64_t n0 = factor(f0), n1 = factor(f1);
  MATCH_IF(n0 && n1, "a scale is neither a run-time scalar nor a per-column constant");
  MATCH_IF(n0 == 1 || n1 == 1, "both scales are per column");
  // The bias Add: a float constant shaped like a per-channel factor (so the Add neither
  // broadcasts the output to a larger shape nor mixes channels), read once from the Mul.
  NodeId add;
  ValueId bias;
  if (const Use u_add = single_use(site.uses, g.output(mul, 0));
      is(g, u_add.node, "Add") && g.inputs(u_add.node).size() == 2 && u_add.slot < 2 &&
      g.outputs(u_add.node).size() == 1 && g.output(u_add.node, 0).valid()) {
    ValueId b = g.input(u_add.node, 1 - u_add.slot);
    std::optional<std::vector<int64_t>> sh;
    // A Reshape of a float initializer to a constant shape (quantize_dynamic writes the conv bias
    // as Reshape(bias, [M, 1, 1])): its shape is the constant's, and when the plan has not folded
    // it yet (it comes later in the order) the step reads the initializer itself (same elements,
    // same order; the kernel takes 1 or M values).
    if (const NodeId r = b.valid() ? g.producer(b) : NodeId{}; is(g, r, "Reshape") && g.inputs(r).size() == 2) {
      const auto dims = constant_ints(g, g.input(r, 1));
      if (dims && std::all_of(dims->begin(), dims->end(), [](int64_t d) { return d > 0; })) sh = dims;
      if (sh && !(site.available[b.index()] && site.is_const[b.index()])) {
        const ValueId src = g.input(r, 0);
        if (src.valid() && g.is_initializer(src) && g.model().tensors.dtype(g.initializer(src)) == DType::Float)
          b = src;
        else
          sh.reset();
      }
    } else if (b.valid() && site.available[b.index()] && site.is_const[b.index()] &&
               (g.dtype(b) == DType::Float || g.dtype(b) == DType::Undefined)) {
      sh = static_shape(g, b);
    }
    bool ok = sh.has_value();
    if (ok) {
      int64_t n = 1;
      for (int64_t d : *sh) n *= d;
      const auto r = static_cast<int64_t>(sh->size());
      if (!conv) {
        ok = r == 1 && n == cols;  // MatMulIntegerToFloat's bias: N values
      } else {
        ok = r <= out_rank && (n == 1 || n == cols);
        for (int64_t i = 0; ok && i < r; ++i) ok = (*sh)[static_cast<size_t>(i)] == (i + out_rank - r == 1 ? n : 1);
      }
    }
    if (ok) add = u_add.node, bias = b;
  }
  FusedStep f;
  f.inputs = s.inputs;
  if (conv) {
    f.kernel = &conv_integer_to_float_kernel();
    f.inputs->resize(4);
    f.inputs->push_back(f0);
    f.inputs->push_back(f1);
    if (add.valid()) f.inputs->push_back(bias);
  } else {
    const KernelDef* k = Registry::get().find("com.microsoft", "MatMulIntegerToFloat");
    MATCH_IF(k, "no MatMulIntegerToFloat kernel");
    f.kernel = k;
    // MatMulIntegerToFloat(A, B, a_scale, b_scale, a_zero_point, b_zero_point).
    auto at = [&](size_t i) { return i < s.inputs.size() ? s.inputs[i] : ValueId{}; };
    f.inputs = std::vector<ValueId>{at(0), at(1), n0 == 1 ? f0 : f1, n0 == 1 ? f1 : f0, at(2), at(3)};
    if (add.valid()) f.inputs->push_back(bias);
  }
  f.output = g.output(add.valid() ? add : mul, 0);
  f.absorbed = {cast, mul};
  if (add.valid()) f.absorbed.push_back(add);
  f.fused = f.absorbed.size();
  return f;
}

// DynamicQuantizeLinear node q whose uint8 output y is read only as the 8-bit input (input 0) of
// one ConvInteger / MatMulInteger node that takes the op's y_zero_point as its zero point (input
// 2), as quantize_dynamic writes them; y no graph output and the scale an output. Then the op's
// step computes only the scale and zero point, and every reader (planned later, as written or as
// the dequantize step above) quantizes x itself while packing it: y is never written. Both
// matchers below decide on this one graph condition, so no reader is left without its y.
bool quantize_moves_to_readers(const FusionSite& site, NodeId q) {
  const Graph& g = site.g;
  if (!is(g, q, "DynamicQuantizeLinear") || g.inputs(q).size() != 1 || g.outputs(q).size() != 3) return false;
  const ValueId y = g.output(q, 0), scale = g.output(q, 1), zp = g.output(q, 2);
  // One reader: each reader quantizes x again, so BERT's Q, K and V projections reading one
  // quantized activation ran 0.84-0.99x the unfused time (perf/int8_matmul_cpu_time.py, qkv).
  if (!y.valid() || !scale.valid() || !zp.valid() || site.graph_output[y.index()] || site.uses.count(y) != 1)
    return false;
  for (const Use& u : site.uses.of(y)) {
    const NodeId n = u.node;
    if (u.slot != 0 || !(is(g, n, "ConvInteger") || is(g, n, "MatMulInteger")) || g.inputs(n).size() < 3 ||
        g.input(n, 2) != zp)
      return false;
  }
  return true;
}

// The DynamicQuantizeLinear side: scale and zero point only (dynamic_quantize_params_kernel).
// Counted as one fused node: its quantize pass is the readers'. ISNet's 256 -> 64 1x1 chain
// spent 29% of its time in that pass (a 3.2 MB float read, a 0.8 MB write), which the conv then
// read again to pack it.
Found<FusedStep> dynamic_quantize_params(const FusionSite& site, const Step& s) {
  MATCH_IF(quantize_moves_to_readers(site, s.node), "not a DynamicQuantizeLinear read only by integer convs/matmuls");
  MATCH_IF(s.outputs.size() == 3, "outputs already changed");
  FusedStep f;
  f.kernel = &dynamic_quantize_params_kernel();
  f.output = ValueId{};
  f.outputs = std::vector<ValueId>{ValueId{}, s.outputs[1], s.outputs[2]};
  return f;
}

// The readers' side: the step of a ConvInteger / MatMulInteger (or its dequantize step) whose
// input 0 is such an op's y reads the op's float input instead, with the op's scale at
// quantizing_scale_input(), on its kernel's quantizing variant.
Found<FusedStep> dynamic_quantize_in_packing(const FusionSite& site, const Step& s) {
  const Graph& g = site.g;
  MATCH_IF(is(g, s.node, "ConvInteger") || is(g, s.node, "MatMulInteger"), "not a ConvInteger/MatMulInteger");
  MATCH_IF(!s.inputs.empty() && s.inputs[0].valid(), "no input");
  const NodeId q = g.producer(s.inputs[0]);
  MATCH_IF(quantize_moves_to_readers(site, q), "input 0 is not a DynamicQuantizeLinear's that moves to its readers");
  const KernelDef* k = quantizing_variant(*s.kernel);
  const size_t slot = quantizing_scale_input();
  // The op's step no longer writes y: a reader that could not take x would read nothing.
  if (!k || s.inputs.size() > slot)
    fail("internal: ", node_desc(g, s.node), " cannot quantize its input while packing it");
  FusedStep f;
  f.kernel = k;
  f.inputs = s.inputs;
  (*f.inputs)[0] = g.input(q, 0);
  f.inputs->resize(slot + 1);
  (*f.inputs)[slot] = g.output(q, 1);
  f.output = s.outputs[0];
  f.fused = 0;
  return f;
}

// A fused QKV projection's Split (three outputs) read only by one Attention as its Q, K and V:
// one step of split_attention_kernel(), which reads them as column ranges of the Split's input
// when the split is on the last axis of a 3-D input (found at run time: the optimized model
// declares no ranks, and GPT-2's export writes axis 2, not -1), or splits them out itself
// otherwise. The Split's copy cost BERT-base 12 x 0.26 ms (128 x 2304 floats each).
Found<FusedStep> split_attention(const FusionSite& site, const Step& s) {
  const Graph& g = site.g;
  MATCH_IF(is(g, s.node, "Split") && s.outputs.size() == 3 && !s.inputs.empty() && s.inputs[0].valid(),
           "not a Split in three");
  MATCH_IF(s.inputs.size() < 2 || !s.inputs[1].valid() || site.is_const[s.inputs[1].index()], "sizes not constant");
  NodeId attn;
  for (size_t i = 0; i < 3; ++i) {
    MATCH_IF(s.outputs[i].valid() && !site.graph_output[s.outputs[i].index()], "an output is a graph output or unused");
    const Use u = single_use(site.uses, s.outputs[i]);
    MATCH_IF(u.node.valid() && u.slot == i && (i == 0 || u.node == attn), "not Q, K and V of one node");
    attn = u.node;
  }
  MATCH_IF(is(g, attn, "Attention") && g.attr(attn, "q_num_heads") && g.attr(attn, "kv_num_heads"),
           "not read by a 3-D Attention");
  std::vector<ValueId> inputs{s.inputs[0], ValueId{}, ValueId{}};
  for (size_t i = 3; i < g.inputs(attn).size(); ++i) {
    const ValueId v = g.input(attn, i);
    MATCH_IF(!v.valid() || site.available[v.index()], "an input of the Attention is computed later");
    inputs.push_back(v);
  }
  inputs.resize(SplitAttentionState::kSplitInput + 1);
  inputs[SplitAttentionState::kSplitInput] = s.inputs.size() > 1 ? s.inputs[1] : ValueId{};
  FusedStep f;
  f.kernel = &split_attention_kernel();
  f.inputs = std::move(inputs);
  f.outputs = std::vector<ValueId>(g.outputs(attn).begin(), g.outputs(attn).end());
  MATCH_IF(!f.outputs->empty() && (*f.outputs)[0].valid(), "the Attention's output 0 is unused");
  f.output = (*f.outputs)[0];
  f.state = std::make_shared<const SplitAttentionState>(SplitAttentionState{attn});
  f.absorbed = {attn};
  return f;
}

// A zero Pad of the spatial axes read only by a Conv as its data (tf2onnx writes every TF "SAME"
// stride-2 conv and MobileNet's ZeroPadding2D so): the Pad's step becomes the Conv's, on
// pad_conv_kernel(), which adds the Pad's pads to the Conv's own (its prepare reads them again
// from the graph: zero_spatial_pads). No padded copy: the line detector's three Pads took 55 ms
// of a 115 ms run before the Pad kernel, and each still writes a [1, 96, 160, 160] copy that the
// depthwise conv reads once. The same conditions as the pass fuse_pad_into_conv, float Conv only.
Found<FusedStep> pad_into_conv(const FusionSite& site, const Step& s) {
  const Graph& g = site.g;
  MATCH_IF(
      is(g, s.node, "Pad") && s.outputs.size() == 1 && s.outputs[0].valid() && !s.inputs.empty() && s.inputs[0].valid(),
      "not a Pad");
  const ValueId y = s.outputs[0];
  MATCH_IF(!site.graph_output[y.index()], "the padded value is a graph output");
  const Use u = single_use(site.uses, y);
  const NodeId conv = u.node;
  MATCH_IF(is(g, conv, "Conv") && u.slot == 0 && g.outputs(conv).size() == 1 && g.output(conv, 0).valid(),
           "not read by one Conv as its data input");
  MATCH_IF(g.attr_string(conv, "auto_pad", "NOTSET") == "NOTSET", "the Conv sizes its own pads (auto_pad)");
  MATCH_IF(g.inputs(conv).size() >= 2 && g.input(conv, 1).valid() && site.is_const[g.input(conv, 1).index()],
           "the Conv's weight is computed at run time");
  for (size_t i = 1; i < g.inputs(conv).size(); ++i)
    MATCH_IF(!g.input(conv, i).valid() || site.available[g.input(conv, i).index()], "a Conv input comes later");
  MATCH_IF(zero_spatial_pads(g, s.node, s.opset), "not a constant zero padding of the spatial axes");
  FusedStep f;
  f.kernel = &pad_conv_kernel();
  f.node = conv;
  f.inputs = std::vector<ValueId>(g.inputs(conv).begin(), g.inputs(conv).end());
  (*f.inputs)[0] = s.inputs[0];
  f.output = g.output(conv, 0);
  f.absorbed = {conv};
  return f;
}

// Mixed precision's round trip (AMP exports, float16 converters' block lists): a float32 value
// read only by Cast(to=FLOAT16) whose result is read only by Cast(to=FLOAT). Where the value is
// output 0 of a step with an epilogue (Conv, MatMul, Gemm & co.: it writes a fresh tensor), the
// step rounds it in place after its kernel (Step::round_half), after any activation it fused,
// as the graph orders them; where the value is the first Cast's input, that Cast's step
// computes float(half(x)) into the second Cast's output (round_half_kernel). Either way one pass
// and no float16 tensor, with the two Casts' bits (simd::round_to_half is checked against
// ir/float16.h's conversions at every ISA level). Last in kFusions: an activation after the
// round trip is not moved before it.
const KernelDef& round_half_kernel() {
  static const KernelDef k{.run =
                               [](OpContext& c) {
                                 const Tensor& x = c.input(0);
                                 Tensor& y = c.output(0, DType::Float, x.shape);
                                 if (x.dtype == DType::Float) {
                                   simd::round_to_half(x.ptr<float>(), y.ptr<float>(), static_cast<size_t>(x.numel()));
                                   return;
                                 }
                                 cast_into(cast(x, DType::Float16), y);  // not float32 after all: as the Casts do
                               },
                           .float_compute = false,
                           .inplace_input = 0};
  return k;
}

Found<FusedStep> half_round_trip(const FusionSite& site, const Step& s) {
  const Graph& g = site.g;
  auto cast_to = [&](NodeId n, DType t) {
    const Attr* to = is(g, n, "Cast") ? g.attr(n, "to") : nullptr;
    return to && to->type == AttrType::Int && to->i == static_cast<int64_t>(t) && g.outputs(n).size() == 1 &&
           g.output(n, 0).valid();
  };
  // The second Cast, reading `half` (a float16 value) and nothing else reading it.
  auto back = [&](ValueId half) -> NodeId {
    if (site.graph_output[half.index()]) return {};
    const Use u = single_use(site.uses, half);
    return u.node.valid() && u.slot == 0 && cast_to(u.node, DType::Float) ? u.node : NodeId{};
  };
  FusedStep f;
  if (cast_to(s.node, DType::Float16) && s.outputs.size() == 1 && s.outputs[0] == g.output(s.node, 0)) {
    MATCH_IF(!s.inputs.empty() && s.inputs[0].valid() && float_out(site, s.inputs[0]),
             "the Cast's input is not float32");
    const NodeId second = back(s.outputs[0]);
    MATCH_IF(second.valid(), "the float16 value is not read by one Cast to float only");
    f.kernel = &round_half_kernel();
    f.output = g.output(second, 0);
    f.absorbed = {second};
    return f;
  }
  MATCH_IF(s.kernel->fuses_activation && s.outputs.size() == 1 && float_output0(site, s) && !s.round_half,
           "not a float32 output of a step with an epilogue");
  const ValueId v = s.outputs[0];
  MATCH_IF(!site.graph_output[v.index()], "output 0 is a graph output");
  const Use u = single_use(site.uses, v);
  MATCH_IF(u.node.valid() && u.slot == 0 && cast_to(u.node, DType::Float16), "not read by one Cast to float16 only");
  const NodeId second = back(g.output(u.node, 0));
  MATCH_IF(second.valid(), "the float16 value is not read by one Cast to float only");
  f.output = g.output(second, 0);
  f.round_half = true;
  f.absorbed = {u.node, second};
  f.fused = 2;
  return f;
}

constexpr Fusion kFusions[] = {
    {"integer_dequantize", integer_dequantize},
    {"dynamic_quantize_params", dynamic_quantize_params},
    {"dynamic_quantize_in_packing", dynamic_quantize_in_packing},
    {"pad_into_conv", pad_into_conv},
    {"decomposed_layer_norm", decomposed_layer_norm},
    {"softmax_attention", softmax_attention},
    {"residual_add", residual_add},
    {"activation", activation},
    {"split_attention", split_attention},
    {"half_round_trip", half_round_trip},
};

}  // namespace

std::span<const Fusion> fusions() { return kFusions; }

}  // namespace onnxforge::rt
