// The plan's fusions (see fusions.h): one matcher per fusion, the table at the end.
#include "runtime/fusions.h"

#include "ir/match.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace onnxforge::rt {
namespace {

// ---------------------------------------------------------------------- pattern helpers

// The single reader of v (one use, not a graph output), or an invalid node.
Use only_reader(const Uses& uses, ValueId v) { return uses.single(v) ? uses.of(v)[0] : Use{NodeId{}, 0}; }

// The input of binary node n that is not v.
ValueId other_input(const Graph& g, NodeId n, ValueId v) { return g.input(n, 0) == v ? g.input(n, 1) : g.input(n, 0); }

// The value of a float scalar known before any run (an initializer or a Constant node's output,
// which the plan may not have folded yet when it looks ahead from a producer).
std::optional<float> scalar_constant(const Graph& g, ValueId v) {
  if (!v.valid()) return std::nullopt;
  const TensorStore& ts = g.model().tensors;
  TensorId t;
  if (g.is_initializer(v) && g.is_constant(v)) {
    t = g.initializer(v);
  } else {
    NodeId p = g.producer(v);
    if (!p.valid() || !g.is_op(p, "Constant")) return std::nullopt;
    if (const Attr* a = g.attr(p, "value_float"); a && a->type == AttrType::Float) return a->f;
    const Attr* a = g.attr(p, "value");
    if (!a || a->type != AttrType::Tensor) return std::nullopt;
    t = a->tensor;
  }
  if (!t.valid() || ts.dtype(t) != DType::Float || ts.element_count(t) != 1) return std::nullopt;
  float x;
  std::memcpy(&x, ts.bytes(t).data(), 4);
  return x;
}

bool float_out(const Graph& g, ValueId v) { return g.dtype(v) == DType::Float || g.dtype(v) == DType::Undefined; }

// Output 0 of the step exists and is float (the fused kernels compute in float32).
bool float_output0(const Graph& g, const Step& s) {
  return !s.outputs.empty() && s.outputs[0].valid() && float_out(g, s.outputs[0]);
}

// The activation a kernel can apply in its epilogue (simd::Unary), if `n` is one.
std::optional<simd::Unary> fusable_activation(const Graph& g, NodeId n) {
  if (g.is_op(n, "Relu")) return simd::Unary::relu();
  if (g.is_op(n, "Sigmoid")) return simd::Unary::of(simd::UnaryOp::Sigmoid);
  if (g.is_op(n, "Tanh")) return simd::Unary::of(simd::UnaryOp::Tanh);
  if (g.is_op(n, "HardSwish")) return simd::Unary::hard_swish();
  if (g.is_op(n, "LeakyRelu")) return simd::Unary::leaky_relu(g.attr_float(n, "alpha", 0.01f));
  if (g.is_op(n, "HardSigmoid"))
    return simd::Unary::hard_sigmoid(g.attr_float(n, "alpha", 0.2f), g.attr_float(n, "beta", 0.5f));
  if (!g.is_op(n, "Clip")) return std::nullopt;
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  if (g.model().opset("") < 11) {
    lo = g.attr_float(n, "min", lo);
    hi = g.attr_float(n, "max", hi);
  } else {
    for (size_t i = 1; i < 3; ++i) {
      ValueId v = g.input(n, i);
      if (!v.valid()) continue;
      if (!g.is_constant(v)) return std::nullopt;
      TensorId t = g.initializer(v);
      if (g.model().tensors.dtype(t) != DType::Float || g.model().tensors.element_count(t) != 1) return std::nullopt;
      float x;
      std::memcpy(&x, g.model().tensors.bytes(t).data(), 4);
      (i == 1 ? lo : hi) = x;
    }
  }
  return simd::Unary::clip(lo, hi);
}

// ------------------------------------------------------------------------------ fusions

// LayerNormalization over the last axis as exporters write it out, from its first ReduceMean:
// y = (x - mean) / sqrt(mean((x - mean)^2) + eps) * scale + bias (nine nodes, one step of
// decomposed_layer_norm_kernel()).
std::optional<FusedStep> decomposed_layer_norm(const FusionSite& site, const Step& s) {
  const Graph& g = site.g;
  const Uses& uses = site.uses;
  const NodeId n = s.node;
  if (!g.is_op(n, "ReduceMean") || !float_output0(g, s)) return std::nullopt;
  // `last`: the chain's final node, whose output may be a graph output.
  auto is_op = [&](NodeId m, std::string_view op, size_t n_in, bool last = false) {
    return m.valid() && g.is_op(m, op) && g.inputs(m).size() == n_in && g.outputs(m).size() == 1 &&
           g.output(m, 0).valid() && (last || !uses.is_graph_output(g.output(m, 0)));
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
  auto next = [&](NodeId m) { return only_reader(uses, g.output(m, 0)); };
  if (!last_axis_mean(n)) return std::nullopt;
  const ValueId x = g.input(n, 0);
  if (!site.available[x.index()]) return std::nullopt;
  const Use u_sub = next(n);
  const NodeId sub = u_sub.node;
  if (!is_op(sub, "Sub", 2) || u_sub.slot != 1 || g.input(sub, 0) != x) return std::nullopt;
  const ValueId d = g.output(sub, 0);
  if (uses.count(d) != 2) return std::nullopt;
  NodeId pow, div;
  for (const Use& u : uses.of(d)) {
    if (is_op(u.node, "Pow", 2) && u.slot == 0) pow = u.node;
    else if (is_op(u.node, "Div", 2) && u.slot == 0) div = u.node;
  }
  if (!pow.valid() || !div.valid()) return std::nullopt;
  if (auto two = scalar_constant(g, g.input(pow, 1)); !two || *two != 2.f) return std::nullopt;
  const NodeId mean2 = next(pow).node;
  if (!last_axis_mean(mean2)) return std::nullopt;
  const NodeId add = next(mean2).node;
  if (!is_op(add, "Add", 2)) return std::nullopt;
  const auto eps = scalar_constant(g, other_input(g, add, g.output(mean2, 0)));
  if (!eps) return std::nullopt;
  const NodeId sqrt = next(add).node;
  if (!is_op(sqrt, "Sqrt", 1)) return std::nullopt;
  if (const Use u_div = next(sqrt); u_div.node != div || u_div.slot != 1) return std::nullopt;
  const NodeId mul = next(div).node;
  if (!is_op(mul, "Mul", 2)) return std::nullopt;
  const ValueId scale = other_input(g, mul, g.output(div, 0));
  const NodeId badd = next(mul).node;
  if (!is_op(badd, "Add", 2, true)) return std::nullopt;
  const ValueId bias = other_input(g, badd, g.output(mul, 0));
  if (!g.is_constant(scale) || !g.is_constant(bias)) return std::nullopt;
  for (ValueId v : {scale, bias})
    if (g.model().tensors.dtype(g.initializer(v)) != DType::Float || g.model().tensors.dims(g.initializer(v)).size() != 1)
      return std::nullopt;
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
std::optional<FusedStep> softmax_attention(const FusionSite& site, const Step& s) {
  const Graph& g = site.g;
  const Uses& uses = site.uses;
  if (!g.is_op(s.node, "MatMul") || s.inputs.size() != 2 || s.outputs.size() != 1 || !float_output0(g, s))
    return std::nullopt;
  if (!s.inputs[1].valid() || site.is_const[s.inputs[1].index()]) return std::nullopt;
  const Use u_sm = only_reader(uses, s.outputs[0]);
  const NodeId sm = u_sm.node;
  if (!sm.valid() || u_sm.slot != 0 || !g.is_op(sm, "Softmax") || g.outputs(sm).size() != 1) return std::nullopt;
  const ValueId p = g.output(sm, 0);
  const Attr* axis = g.attr(sm, "axis");
  const bool last_axis = axis ? axis->type == AttrType::Int && axis->i == -1 : s.opset >= 13;
  if (!p.valid() || !float_out(g, p) || !last_axis) return std::nullopt;
  const Use u_mm = only_reader(uses, p);
  const NodeId mm = u_mm.node;
  if (!mm.valid() || u_mm.slot != 0 || !g.is_op(mm, "MatMul") || g.outputs(mm).size() != 1 || !g.output(mm, 0).valid())
    return std::nullopt;
  const ValueId v = g.inputs(mm).size() == 2 ? g.input(mm, 1) : ValueId{};
  if (!v.valid() || !site.available[v.index()]) return std::nullopt;
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
std::optional<FusedStep> residual_add(const FusionSite& site, const Step& s) {
  const Graph& g = site.g;
  if (s.kernel->residual_input < 0 || !float_output0(g, s) || site.graph_output[s.outputs[0].index()])
    return std::nullopt;
  const Use u = only_reader(site.uses, s.outputs[0]);
  const NodeId add = u.node;
  if (!add.valid() || !g.is_op(add, "Add") || g.inputs(add).size() != 2 || u.slot >= 2 || g.outputs(add).size() != 1 ||
      !g.output(add, 0).valid() || !float_out(g, g.output(add, 0)))
    return std::nullopt;
  const ValueId other = g.input(add, 1 - u.slot);
  const auto slot = static_cast<size_t>(s.kernel->residual_input);
  if (!other.valid() || other == s.outputs[0] || !site.available[other.index()] || s.inputs.size() > slot)
    return std::nullopt;
  for (ValueId v : s.inputs)
    if (v == other) return std::nullopt;
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
std::optional<FusedStep> activation(const FusionSite& site, const Step& s) {
  const Graph& g = site.g;
  const Uses& uses = site.uses;
  if (!s.kernel->fuses_activation || !float_output0(g, s) || site.graph_output[s.outputs[0].index()])
    return std::nullopt;
  const ValueId v = s.outputs[0];
  FusedStep f;
  if (const Use u = only_reader(uses, v); u.node.valid() && u.slot == 0) {
    if (auto act = fusable_activation(g, u.node)) {
      f.act = *act;
      f.output = g.output(u.node, 0);
      f.absorbed = {u.node};
      return f;
    }
  }
  // GELU: v -> Div(v, sqrt 2) -> Erf -> Add(., 1) -> Mul(v, .) -> Mul(., 0.5); every
  // intermediate read once.
  auto is_op = [&](NodeId n, std::string_view op) {
    return n.valid() && g.is_op(n, op) && g.outputs(n).size() >= 1 && g.output(n, 0).valid();
  };
  auto near = [](std::optional<float> x, float want) { return x && std::fabs(*x - want) <= 1e-4f * std::fabs(want); };
  auto next = [&](NodeId n) { return only_reader(uses, g.output(n, 0)).node; };
  if (uses.count(v) != 2 || uses.is_graph_output(v)) return std::nullopt;
  NodeId div, mul;
  for (const Use& u : uses.of(v)) {
    if (is_op(u.node, "Div") && u.slot == 0) div = u.node;
    else if (is_op(u.node, "Mul") && u.slot < 2) mul = u.node;
  }
  if (!div.valid() || !mul.valid() || g.inputs(div).size() != 2 || !near(scalar_constant(g, g.input(div, 1)), 1.41421356f))
    return std::nullopt;
  const NodeId erf = next(div);
  if (!is_op(erf, "Erf")) return std::nullopt;
  const NodeId add = next(erf);
  if (!is_op(add, "Add") || g.inputs(add).size() != 2) return std::nullopt;
  if (!near(scalar_constant(g, other_input(g, add, g.output(erf, 0))), 1.f) || next(add) != mul || g.inputs(mul).size() != 2)
    return std::nullopt;
  const NodeId half = next(mul);
  if (!is_op(half, "Mul") || g.inputs(half).size() != 2) return std::nullopt;
  if (!near(scalar_constant(g, other_input(g, half, g.output(mul, 0))), 0.5f)) return std::nullopt;
  f.act = simd::Unary::of(simd::UnaryOp::Gelu);
  f.output = g.output(half, 0);
  f.absorbed = {div, erf, add, mul, half};
  return f;
}

constexpr Fusion kFusions[] = {
    {"decomposed_layer_norm", decomposed_layer_norm},
    {"softmax_attention", softmax_attention},
    {"residual_add", residual_add},
    {"activation", activation},
};

}  // namespace

std::span<const Fusion> fusions() { return kFusions; }

}  // namespace onnxforge::rt
