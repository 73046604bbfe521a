#include "runtime/plan.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <numeric>

#include <sys/mman.h>
#include <unistd.h>

#include "io/mapped_file.h"
#include "ir/error.h"
#include "ir/topo.h"
#include "ir/uses.h"
#include "simd/parallel.h"

namespace onnxforge::rt {
namespace {

std::string_view norm_domain(Sym d) {
  std::string_view s = str(d);
  return s == "ai.onnx" ? std::string_view{} : s;
}

std::string node_desc(const Graph& g, NodeId n) {
  std::string d(norm_domain(g.domain(n)));
  return "node '" + std::string(str(g.node_name(n))) + "' (" + (d.empty() ? "" : d + "::") +
         std::string(str(g.op_type(n))) + ")";
}

// The activation a plan can fuse into the producer's epilogue, if `n` is one.
std::optional<simd::Unary> fusable_activation(const Graph& g, NodeId n) {
  if (!norm_domain(g.domain(n)).empty()) return std::nullopt;
  std::string_view op = str(g.op_type(n));
  if (op == "Relu") return simd::Unary::relu();
  if (op == "Sigmoid") return simd::Unary::of(simd::UnaryOp::Sigmoid);
  if (op == "Tanh") return simd::Unary::of(simd::UnaryOp::Tanh);
  if (op == "HardSwish") return simd::Unary::hard_swish();
  if (op == "LeakyRelu") return simd::Unary::leaky_relu(g.attr_float(n, "alpha", 0.01f));
  if (op == "HardSigmoid") return simd::Unary::hard_sigmoid(g.attr_float(n, "alpha", 0.2f), g.attr_float(n, "beta", 0.5f));
  if (op == "Clip") {
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
  return std::nullopt;
}

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
    if (!p.valid() || !norm_domain(g.domain(p)).empty() || str(g.op_type(p)) != "Constant") return std::nullopt;
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

// An activation the plan can run in the epilogue of the node producing `v`: one activation
// node reading v, or the exporters' erf GELU, x * (1 + erf(x / sqrt 2)) * 0.5 (five nodes).
struct ActChain {
  simd::Unary act;
  ValueId out;
  std::vector<NodeId> nodes;  // skipped by the plan
};

std::optional<ActChain> match_activation(const Graph& g, const Uses& uses, ValueId v) {
  auto is_op = [&](NodeId n, std::string_view op) {
    return norm_domain(g.domain(n)).empty() && str(g.op_type(n)) == op && g.outputs(n).size() >= 1 &&
           g.output(n, 0).valid();
  };
  auto near = [](std::optional<float> x, float want) { return x && std::fabs(*x - want) <= 1e-4f * std::fabs(want); };
  if (uses.single(v) && uses.of(v)[0].slot == 0) {
    NodeId c = uses.of(v)[0].node;
    if (auto act = fusable_activation(g, c)) return ActChain{*act, g.output(c, 0), {c}};
  }
  // GELU: v -> Div(v, sqrt 2) -> Erf -> Add(., 1) -> Mul(v, .) -> Mul(., 0.5); every
  // intermediate read once.
  if (uses.count(v) != 2 || uses.is_graph_output(v)) return std::nullopt;
  NodeId div, mul;
  for (const Use& u : uses.of(v)) {
    if (is_op(u.node, "Div") && u.slot == 0) div = u.node;
    else if (is_op(u.node, "Mul") && u.slot < 2) mul = u.node;
  }
  if (!div.valid() || !mul.valid() || g.inputs(div).size() != 2 || !near(scalar_constant(g, g.input(div, 1)), 1.41421356f))
    return std::nullopt;
  auto next = [&](NodeId n) -> NodeId {  // the single reader of n's output
    ValueId o = g.output(n, 0);
    return uses.single(o) ? uses.of(o)[0].node : NodeId{};
  };
  NodeId erf = next(div);
  if (!erf.valid() || !is_op(erf, "Erf")) return std::nullopt;
  NodeId add = next(erf);
  if (!add.valid() || !is_op(add, "Add") || g.inputs(add).size() != 2) return std::nullopt;
  ValueId one = g.input(add, 0) == g.output(erf, 0) ? g.input(add, 1) : g.input(add, 0);
  if (!near(scalar_constant(g, one), 1.f) || next(add) != mul || g.inputs(mul).size() != 2) return std::nullopt;
  NodeId half = next(mul);
  if (!half.valid() || !is_op(half, "Mul") || g.inputs(half).size() != 2) return std::nullopt;
  ValueId h = g.input(half, 0) == g.output(mul, 0) ? g.input(half, 1) : g.input(half, 0);
  if (!near(scalar_constant(g, h), 0.5f)) return std::nullopt;
  return ActChain{simd::Unary::of(simd::UnaryOp::Gelu), g.output(half, 0), {div, erf, add, mul, half}};
}

// LayerNormalization over the last axis as exporters write it out, starting at the first
// ReduceMean `n`: y = (x - mean) / sqrt(mean((x - mean)^2) + eps) * scale + bias.
struct LayerNormChain {
  ValueId x, scale, bias, out;
  float eps = 0;
  std::vector<NodeId> nodes;  // after `n`, skipped by the plan
};

std::optional<LayerNormChain> match_layer_norm(const Graph& g, const Uses& uses, NodeId n) {
  // `last`: the chain's final node, whose output may be a graph output.
  auto is_op = [&](NodeId m, std::string_view op, size_t n_in, bool last = false) {
    return m.valid() && norm_domain(g.domain(m)).empty() && str(g.op_type(m)) == op && g.inputs(m).size() == n_in &&
           g.outputs(m).size() == 1 && g.output(m, 0).valid() && (last || !uses.is_graph_output(g.output(m, 0)));
  };
  auto last_axis_mean = [&](NodeId m) {
    if (!(is_op(m, "ReduceMean", 1) || is_op(m, "ReduceMean", 2)) || g.attr_int(m, "keepdims", 1) != 1) return false;
    if (g.inputs(m).size() == 1) {
      auto axes = g.attr_ints(m, "axes");
      return axes.size() == 1 && axes[0] == -1;
    }
    // Opset 18: the axes are an input (an initializer or a Constant), so that an upgraded model
    // keeps this fusion and computes the same bits.
    ValueId v = g.input(m, 1);
    TensorId t = g.is_constant(v) ? g.initializer(v) : TensorId{};
    if (NodeId p = g.producer(v); p.valid() && norm_domain(g.domain(p)).empty() && str(g.op_type(p)) == "Constant")
      if (const Attr* a = g.attr(p, "value"); a && a->type == AttrType::Tensor) t = a->tensor;
    const TensorStore& ts = g.model().tensors;
    int64_t axis = 0;
    if (!t.valid() || ts.dtype(t) != DType::Int64 || ts.element_count(t) != 1) return false;
    std::memcpy(&axis, ts.bytes(t).data(), 8);
    return axis == -1;
  };
  auto only = [&](NodeId m) -> Use {  // the single reader of m's output
    ValueId o = g.output(m, 0);
    return uses.single(o) ? uses.of(o)[0] : Use{NodeId{}, 0};
  };
  auto other = [&](NodeId m, ValueId v) { return g.input(m, 0) == v ? g.input(m, 1) : g.input(m, 0); };
  if (!last_axis_mean(n)) return std::nullopt;
  LayerNormChain ch;
  ch.x = g.input(n, 0);
  const Use u_sub = only(n);
  NodeId sub = u_sub.node;
  if (!is_op(sub, "Sub", 2) || u_sub.slot != 1 || g.input(sub, 0) != ch.x) return std::nullopt;
  ValueId d = g.output(sub, 0);
  if (uses.count(d) != 2) return std::nullopt;
  NodeId pow, div;
  for (const Use& u : uses.of(d)) {
    if (is_op(u.node, "Pow", 2) && u.slot == 0) pow = u.node;
    else if (is_op(u.node, "Div", 2) && u.slot == 0) div = u.node;
  }
  if (!pow.valid() || !div.valid()) return std::nullopt;
  auto two = scalar_constant(g, g.input(pow, 1));
  if (!two || *two != 2.f) return std::nullopt;
  NodeId mean2 = only(pow).node;
  if (!last_axis_mean(mean2)) return std::nullopt;
  NodeId add = only(mean2).node;
  if (!is_op(add, "Add", 2)) return std::nullopt;
  auto eps = scalar_constant(g, other(add, g.output(mean2, 0)));
  if (!eps) return std::nullopt;
  NodeId sqrt = only(add).node;
  if (!is_op(sqrt, "Sqrt", 1)) return std::nullopt;
  const Use u_div = only(sqrt);
  if (u_div.node != div || u_div.slot != 1) return std::nullopt;
  NodeId mul = only(div).node;
  if (!is_op(mul, "Mul", 2)) return std::nullopt;
  ch.scale = other(mul, g.output(div, 0));
  NodeId badd = only(mul).node;
  if (!is_op(badd, "Add", 2, true)) return std::nullopt;
  ch.bias = other(badd, g.output(mul, 0));
  if (!g.is_constant(ch.scale) || !g.is_constant(ch.bias)) return std::nullopt;
  for (ValueId v : {ch.scale, ch.bias})
    if (g.model().tensors.dtype(g.initializer(v)) != DType::Float || g.model().tensors.dims(g.initializer(v)).size() != 1)
      return std::nullopt;
  ch.eps = *eps;
  ch.out = g.output(badd, 0);
  ch.nodes = {sub, pow, mean2, add, sqrt, div, mul, badd};
  return ch;
}

// Drops the resident pages of a weight the plan no longer reads (it was folded or packed): a
// read-only file mapping re-reads them from the page cache if anything touches them again.
void release_pages(const Model& m, const Tensor& t) {
  if (!t.data || t.hold) return;
  for (const auto& f : m.files) {
    if (!f->contains(t.data)) continue;
    const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    uintptr_t b = reinterpret_cast<uintptr_t>(t.data), e = b + t.bytes();
    b = (b + page - 1) & ~(page - 1);
    e &= ~(page - 1);
    if (e > b) ::madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
    return;
  }
}

// A small weight read at run time (bias, norm scale) is copied out of the mapping. The page cache
// maps files in large folios (up to 2 MB on ext4 with kernel 6.x): reading a bias that shares a
// folio with a packed-and-released weight maps the weight's pages back in. Measured on BERT-base:
// 219 MiB of released weights were resident again after the first run.
void copy_small_weight(const Model& m, Tensor& t) {
  constexpr size_t kSmall = size_t{1} << 20;
  if (!t.data || t.hold || t.bytes() > kSmall || t.dtype == DType::String) return;
  bool mapped = false;
  for (const auto& f : m.files) mapped = mapped || f->contains(t.data);
  if (!mapped) return;
  Tensor copy = Tensor::alloc(t.dtype, t.shape);
  std::memcpy(copy.data, t.data, t.bytes());
  release_pages(m, t);
  t = std::move(copy);
}

}  // namespace

// ------------------------------------------------------------------------------------ Plan

Plan::Plan(const Graph& g, const SessionOptions& opts) : graph(g), options(opts) {
  const uint32_t nv = g.value_count();
  constants.resize(nv);
  graph_output.assign(nv, 0);
  const TensorStore& ts = g.model().tensors;
  for (ValueId v : g.initializers()) {
    TensorId t = g.initializer(v);
    auto dims = ts.dims(t);
    constants[v.index()] = Tensor::view(ts.dtype(t), Shape(dims.begin(), dims.end()), ts.bytes(t).data());
  }
  for (ValueId v : g.graph_outputs()) graph_output[v.index()] = 1;
  for (ValueId v : g.graph_inputs())
    if (!g.is_initializer(v) || g.parent().valid()) inputs.push_back(v);

  is_const.assign(nv, 0);
  folded_.assign(nv, 0);
  for (ValueId v : g.initializers())
    if (g.is_constant(v) || g.parent().valid()) is_const[v.index()] = 1;
  std::vector<NodeId> order = topological_order(g);
  Uses uses(g);
  remaining_.assign(nv, 0);
  for (uint32_t v = 0; v < nv; ++v) remaining_[v] = static_cast<uint32_t>(uses.count(ValueId{v})) + graph_output[v];
  std::vector<uint8_t> skipped(g.node_capacity(), 0);
  // Values computed before the step being planned (residual fusion moves an Add earlier: its
  // other operand must already exist).
  std::vector<uint8_t> available(nv, 0);
  for (ValueId v : g.graph_inputs()) available[v.index()] = 1;
  for (ValueId v : g.initializers()) available[v.index()] = 1;
  for (ValueId v : g.captures()) available[v.index()] = 1;
  const Registry& reg = Registry::get();
  for (NodeId n : order) {
    if (skipped[n.index()]) continue;
    for (ValueId v : g.outputs(n))
      if (v.valid()) available[v.index()] = 1;
    std::string_view dom = norm_domain(g.domain(n));
    const KernelDef* k = reg.find(dom, str(g.op_type(n)));
    int64_t version = g.model().opset(dom);
    if (!k)
      fail("the runtime has no kernel for operator ", dom.empty() ? "" : std::string(dom) + "::", str(g.op_type(n)),
           " (domain '", dom.empty() ? "ai.onnx" : dom, "', opset ", version, ") used by ", node_desc(g, n),
           "; see runtime/README.md to add one");
    // Nodes whose inputs are all constants run once, here (weight transposes, Constant, shape
    // arithmetic on constants), unless they own subgraphs.
    if (opts.fold_constants && fold(n)) {
      for (ValueId v : g.inputs(n)) consumed(v);
      continue;
    }
    Step s;
    s.node = n;
    s.kernel = k;
    s.opset = version;
    s.inputs.assign(g.inputs(n).begin(), g.inputs(n).end());
    s.outputs.assign(g.outputs(n).begin(), g.outputs(n).end());
    auto float_out = [&](ValueId v) { return g.dtype(v) == DType::Float || g.dtype(v) == DType::Undefined; };
    // A LayerNormalization written out in nine nodes: one step.
    if (opts.fuse_activations && dom.empty() && str(g.op_type(n)) == "ReduceMean" && !s.outputs.empty() &&
        s.outputs[0].valid() && float_out(s.outputs[0])) {
      if (auto ln = match_layer_norm(g, uses, n); ln && available[ln->x.index()]) {
        k = s.kernel = &decomposed_layer_norm_kernel();
        s.inputs = {ln->x, ln->scale, ln->bias};
        s.outputs = {ln->out};
        s.state = std::make_shared<const float>(ln->eps);
        for (NodeId m : ln->nodes) skipped[m.index()] = 1;
        available[ln->out.index()] = 1;
        fused += ln->nodes.size();
      }
    }
    // MatMul -> Softmax over the last axis -> MatMul (attention): one step, scores kept in cache.
    if (opts.fuse_activations && dom.empty() && str(g.op_type(n)) == "MatMul" && s.inputs.size() == 2 &&
        s.outputs.size() == 1 && s.outputs[0].valid() && float_out(s.outputs[0]) && uses.single(s.outputs[0]) &&
        uses.of(s.outputs[0])[0].slot == 0 && s.inputs[1].valid() && !is_const[s.inputs[1].index()]) {
      NodeId sm = uses.of(s.outputs[0])[0].node;
      const Attr* axis = g.attr(sm, "axis");
      ValueId p = g.outputs(sm).empty() ? ValueId{} : g.output(sm, 0);
      if (norm_domain(g.domain(sm)).empty() && str(g.op_type(sm)) == "Softmax" && g.outputs(sm).size() == 1 &&
          p.valid() && float_out(p) && ((axis && axis->type == AttrType::Int && axis->i == -1) || (!axis && version >= 13)) &&
          uses.single(p) && uses.of(p)[0].slot == 0) {
        NodeId mm = uses.of(p)[0].node;
        ValueId vv = g.inputs(mm).size() == 2 ? g.input(mm, 1) : ValueId{};
        if (norm_domain(g.domain(mm)).empty() && str(g.op_type(mm)) == "MatMul" && g.outputs(mm).size() == 1 &&
            g.output(mm, 0).valid() && vv.valid() && available[vv.index()]) {
          k = s.kernel = &softmax_attention_kernel();
          s.inputs.push_back(vv);
          s.outputs[0] = g.output(mm, 0);
          skipped[sm.index()] = skipped[mm.index()] = 1;
          available[s.outputs[0].index()] = 1;
          fused += 2;
        }
      }
    }
    if (opts.fuse_activations && k->residual_input >= 0 && !s.outputs.empty() && s.outputs[0].valid() &&
        float_out(s.outputs[0]) && uses.single(s.outputs[0]) && !graph_output[s.outputs[0].index()]) {
      const Use& u = uses.of(s.outputs[0])[0];
      NodeId add = u.node;
      if (norm_domain(g.domain(add)).empty() && str(g.op_type(add)) == "Add" && g.inputs(add).size() == 2 &&
          u.slot < 2 && g.outputs(add).size() == 1 && g.output(add, 0).valid() && float_out(g.output(add, 0))) {
        ValueId other = g.input(add, 1 - u.slot);
        const auto slot = static_cast<size_t>(k->residual_input);
        bool ok = other.valid() && other != s.outputs[0] && available[other.index()] && s.inputs.size() <= slot;
        for (ValueId v : s.inputs) ok = ok && v != other;
        if (ok) {
          s.inputs.resize(slot + 1);
          s.inputs[slot] = other;
          s.outputs[0] = g.output(add, 0);
          skipped[add.index()] = 1;
          available[s.outputs[0].index()] = 1;
          ++fused;
        }
      }
    }
    if (opts.fuse_activations && k->fuses_activation && !s.outputs.empty() && s.outputs[0].valid() &&
        float_out(s.outputs[0]) && !graph_output[s.outputs[0].index()]) {
      if (auto chain = match_activation(g, uses, s.outputs[0])) {
        s.act = chain->act;
        s.outputs[0] = chain->out;
        for (NodeId c : chain->nodes) skipped[c.index()] = 1;
        available[s.outputs[0].index()] = 1;
        ++fused;
      }
    }
    for (GraphId sub : g.subgraphs(n)) subplans_[sub] = std::make_unique<Plan>(g.model().graph(sub), opts);
    if (k->prepare) {
      std::vector<const Tensor*> cins(s.inputs.size(), nullptr);
      for (size_t i = 0; i < s.inputs.size(); ++i)
        if (s.inputs[i].valid() && is_const[s.inputs[i].index()] && constants[s.inputs[i].index()].data)
          cins[i] = &constants[s.inputs[i].index()];
      try {
        s.state = k->prepare(g, n, cins);
      } catch (const std::exception&) {
        s.state = nullptr;  // the kernel reports the problem when it runs
      }
      if (s.state)
        for (size_t i = 0; i < s.inputs.size() && i < 32; ++i)
          if (k->prepared_inputs >> i & 1u) consumed(s.inputs[i], true);
    }
    steps.push_back(std::move(s));
  }

  step_ns = std::vector<std::atomic<uint64_t>>(steps.size());
  // Folded values nobody reads at run time are dropped.
  {
    std::vector<uint8_t> needed(nv, 0), shape_only(nv, 0);
    for (const Step& st : steps) {
      for (size_t i = 0; i < st.inputs.size(); ++i) {
        ValueId v = st.inputs[i];
        if (!v.valid()) continue;
        if (st.state && i < 32 && (st.kernel->prepared_inputs >> i & 1u)) shape_only[v.index()] = 1;
        else needed[v.index()] = 1;
      }
      if (!g.subgraphs(st.node).empty())
        for (ValueId v : g.implicit_inputs(st.node)) needed[v.index()] = 1;
    }
    for (ValueId v : g.graph_outputs()) needed[v.index()] = 1;
    for (uint32_t v = 0; v < nv; ++v) {
      if (needed[v] && !folded_[v]) copy_small_weight(g.model(), constants[v]);
      if (needed[v] || !constants[v].data) continue;
      if (shape_only[v]) {
        if (!folded_[v]) release_pages(g.model(), constants[v]);
        constants[v].data = nullptr;  // kept for its shape
        constants[v].hold.reset();
      } else if (folded_[v]) {
        constants[v] = Tensor{};
      } else if (g.is_initializer(ValueId{v}) && is_const[v]) {
        release_pages(g.model(), constants[v]);  // only read by folded nodes
      }
    }
  }
  // Liveness: the last step reading each value (explicitly or from a subgraph).
  std::vector<int64_t> last(nv, -1);
  for (size_t i = 0; i < steps.size(); ++i) {
    for (ValueId v : steps[i].inputs)
      if (v.valid()) last[v.index()] = static_cast<int64_t>(i);
    if (!g.subgraphs(steps[i].node).empty())
      for (ValueId v : g.implicit_inputs(steps[i].node)) last[v.index()] = static_cast<int64_t>(i);
    for (ValueId v : steps[i].outputs)
      if (v.valid() && last[v.index()] < static_cast<int64_t>(i)) last[v.index()] = static_cast<int64_t>(i);
  }
  for (uint32_t v = 0; v < nv; ++v)
    if (last[v] >= 0 && !graph_output[v]) steps[static_cast<size_t>(last[v])].release.push_back(ValueId{v});
  plan_layouts();
}

// Channels-last planning. A layout-aware step (Conv, pools) writes its output 0 as NHWC when
// every reader takes NHWC: an aware kernel whose takes_nhwc() holds for the node (reading it as
// its data input or fused residual), or an elementwise step whose own outputs all qualify.
// Graph outputs, values read by subgraphs and non-float values stay plain. Readers that get an
// NHWC input anyway (an elementwise op with an operand that cannot be viewed channels-last)
// have it converted by the frame, so a wrong guess costs a transpose, never a wrong result.
void Plan::plan_layouts() {
  const char* env = std::getenv("ONNXFORGE_CHANNELS_LAST");
  if (!options.channels_last || (env != nullptr && std::string_view(env) == "0")) return;
  const Graph& g = graph;
  const uint32_t nv = g.value_count();
  std::vector<std::vector<std::pair<size_t, size_t>>> readers(nv);  // (step, input slot)
  std::vector<uint8_t> pinned(graph_output);
  for (size_t i = 0; i < steps.size(); ++i) {
    for (size_t k = 0; k < steps[i].inputs.size(); ++k)
      if (steps[i].inputs[k].valid()) readers[steps[i].inputs[k].index()].emplace_back(i, k);
    if (!g.subgraphs(steps[i].node).empty())
      for (ValueId v : g.implicit_inputs(steps[i].node)) pinned[v.index()] = 1;
  }
  std::vector<uint8_t> ok(nv, 0);
  for (size_t i = steps.size(); i-- > 0;) {
    for (ValueId v : steps[i].outputs) {
      if (!v.valid() || pinned[v.index()] || readers[v.index()].empty()) continue;
      if (g.dtype(v) != DType::Float && g.dtype(v) != DType::Undefined) continue;
      bool all = true;
      for (auto [r, slot] : readers[v.index()]) {
        const Step& rs = steps[r];
        const KernelDef& k = *rs.kernel;
        if (k.layout == LayoutUse::Aware) {
          all = all && k.takes_nhwc != nullptr && (slot == 0 || static_cast<int>(slot) == k.residual_input) &&
                k.takes_nhwc(g, rs.node);
        } else if (k.layout == LayoutUse::Elementwise) {
          for (ValueId o : rs.outputs) all = all && o.valid() && ok[o.index()];
        } else {
          all = false;
        }
      }
      ok[v.index()] = all;
    }
  }
  // Forward: which values will be NHWC. A chain starts only where its first step reads NCHW
  // for free (starts_nhwc: CNN stems); elsewhere the entry would transpose its input, and with
  // chains broken by NCHW-only ops (MobileNet's depthwise convs) every pointwise conv would pay
  // a transpose in and out (measured: MobileNetV2 1.2x, EfficientNet-B0 1.1x slower).
  std::vector<uint8_t> nhwc(nv, 0);
  for (Step& s : steps) {
    if (s.outputs.empty() || !s.outputs[0].valid()) continue;
    const KernelDef& k = *s.kernel;
    const ValueId in = s.inputs.empty() ? ValueId{} : s.inputs[0];
    const bool in_nhwc = in.valid() && nhwc[in.index()];
    bool out = false;
    if (k.layout == LayoutUse::Aware && ok[s.outputs[0].index()]) {
      out = in_nhwc || (k.starts_nhwc != nullptr && k.starts_nhwc(g, s.node));
      s.prefer_nhwc = out;
      channels_last += out;
    } else if (k.layout == LayoutUse::Elementwise) {
      for (ValueId v : s.inputs) out = out || (v.valid() && nhwc[v.index()]);
    }
    for (ValueId v : s.outputs)
      if (v.valid()) nhwc[v.index()] = out;
  }
}

// A plan-time reader of `v` is done with it (folded, or packed its bytes): when no reader is
// left, a folded value is freed (or kept as a shape only) and a weight's pages are released now,
// so the plan's peak memory stays near the packed weights rather than all copies at once.
void Plan::consumed(ValueId v, bool shape_still_read) {
  if (!v.valid() || remaining_[v.index()] == 0 || --remaining_[v.index()] > 0) return;
  Tensor& t = constants[v.index()];
  if (!t.data) return;
  if (!folded_[v.index()]) release_pages(graph.model(), t);
  if (shape_still_read) {
    t.data = nullptr;
    t.hold.reset();
  } else if (folded_[v.index()]) {
    t = Tensor{};
  }
}

bool Plan::fold(NodeId n) {
  const Graph& g = graph;
  if (!g.subgraphs(n).empty()) return false;
  std::vector<Tensor> ins;
  for (ValueId v : g.inputs(n)) {
    if (!v.valid()) {
      ins.emplace_back();
      continue;
    }
    if (!is_const[v.index()] || constants[v.index()].dtype == DType::Undefined ||
        constants[v.index()].dtype == DType::String)
      return false;
    ins.push_back(constants[v.index()]);
  }
  std::vector<Tensor> outs;
  try {
    outs = evaluate_node(g, n, ins);
  } catch (const std::exception&) {
    return false;  // reported when the node runs
  }
  if (folded_.empty()) folded_.assign(g.value_count(), 0);
  for (size_t i = 0; i < outs.size(); ++i) {
    ValueId v = g.output(n, i);
    if (!v.valid()) continue;
    constants[v.index()] = std::move(outs[i]);
    is_const[v.index()] = 1;
    folded_[v.index()] = 1;
  }
  ++folded;
  return true;
}

Plan* Plan::subplan(GraphId g) const {
  auto it = subplans_.find(g);
  if (it == subplans_.end()) fail("internal: no plan for subgraph ", g.index());
  return it->second.get();
}

std::shared_ptr<const Layout> Plan::layout(const std::vector<Shape>& shapes) const {
  std::lock_guard lock(mu_);
  auto it = layouts_.find(shapes);
  return it == layouts_.end() ? nullptr : it->second;
}

void Plan::record(const std::vector<Shape>& shapes, const std::vector<uint64_t>& bytes,
                  const std::vector<ValueId>& alias_of) const {
  const size_t nv = bytes.size();
  auto L = std::make_shared<Layout>();
  L->offset.assign(nv, Layout::kNone);
  L->size.assign(nv, 0);
  constexpr int64_t kUnset = -1;
  std::vector<int64_t> def(nv, kUnset), end(nv, kUnset);
  for (size_t i = 0; i < steps.size(); ++i) {
    for (ValueId v : steps[i].outputs)
      if (v.valid()) def[v.index()] = end[v.index()] = static_cast<int64_t>(i);
    for (ValueId v : steps[i].inputs)
      if (v.valid()) end[v.index()] = std::max(end[v.index()], static_cast<int64_t>(i));
    if (!graph.subgraphs(steps[i].node).empty())
      for (ValueId v : graph.implicit_inputs(steps[i].node))
        end[v.index()] = std::max(end[v.index()], static_cast<int64_t>(i));
  }
  // Union-find over values sharing memory: views (recorded aliases) and in-place outputs.
  std::vector<uint32_t> root(nv);
  std::iota(root.begin(), root.end(), 0u);
  auto find = [&](uint32_t v) {
    while (root[v] != v) v = root[v] = root[root[v]];
    return v;
  };
  std::vector<uint8_t> in_arena(nv, 0);
  for (size_t v = 0; v < nv; ++v) in_arena[v] = bytes[v] > 0 && !graph_output[v] && def[v] != kUnset;
  for (size_t v = 0; v < nv; ++v)
    if (alias_of[v].valid() && !graph_output[v]) {
      uint32_t r = find(alias_of[v].index());
      root[v] = r;
      end[r] = std::max(end[r], end[v]);
    }
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    for (int k : {s.kernel->inplace_input, s.kernel->inplace_input2}) {
      if (k < 0 || static_cast<size_t>(k) >= s.inputs.size() || s.outputs.empty()) continue;
      ValueId u = s.inputs[static_cast<size_t>(k)], o = s.outputs[0];
      if (!u.valid() || !o.valid() || !in_arena[o.index()] || root[o.index()] != o.index()) continue;
      uint32_t r = find(u.index());
      if (!in_arena[r] || end[r] != static_cast<int64_t>(i) || bytes[r] != bytes[o.index()]) continue;
      root[o.index()] = r;
      end[r] = std::max(end[r], end[o.index()]);
      break;
    }
  }
  // Greedy placement, largest first, at the lowest offset free for the whole lifetime.
  std::vector<uint32_t> roots;
  for (uint32_t v = 0; v < nv; ++v)
    if (in_arena[v] && find(v) == v) roots.push_back(v);
  std::sort(roots.begin(), roots.end(), [&](uint32_t a, uint32_t b) { return bytes[a] > bytes[b]; });
  struct Placed { int64_t b, e; uint64_t off, size; };
  std::vector<Placed> placed;
  auto round = [](uint64_t x) { return (x + 63) & ~uint64_t{63}; };
  for (uint32_t r : roots) {
    uint64_t size = round(bytes[r]);
    std::vector<std::pair<uint64_t, uint64_t>> busy;
    for (const Placed& p : placed)
      if (!(p.e < def[r] || end[r] < p.b)) busy.push_back({p.off, p.off + p.size});
    std::sort(busy.begin(), busy.end());
    uint64_t off = 0;
    for (auto [b, e] : busy) {
      if (off + size <= b) break;
      off = std::max(off, e);
    }
    placed.push_back({def[r], end[r], off, size});
    L->offset[r] = off;
    L->arena_bytes = std::max(L->arena_bytes, off + size);
  }
  for (uint32_t v = 0; v < nv; ++v) {
    uint32_t r = find(v);
    if (in_arena[v] && L->offset[r] != Layout::kNone) {
      L->offset[v] = L->offset[r];
      L->size[v] = bytes[v];
    }
  }
  L->root.resize(nv);
  for (uint32_t v = 0; v < nv; ++v) L->root[v] = find(v);
  std::lock_guard lock(mu_);
  layouts_.emplace(shapes, std::move(L));
}

std::shared_ptr<std::byte> Plan::take_arena(uint64_t bytes) const {
  {
    std::lock_guard lock(mu_);
    // The smallest idle arena that fits.
    size_t best = arenas_.size();
    for (size_t i = 0; i < arenas_.size(); ++i)
      if (arenas_[i].first >= bytes && (best == arenas_.size() || arenas_[i].first < arenas_[best].first)) best = i;
    if (best < arenas_.size()) {
      auto a = std::move(arenas_[best].second);
      arenas_.erase(arenas_.begin() + static_cast<std::ptrdiff_t>(best));
      return a;
    }
  }
  return alloc_bytes(bytes);
}

void Plan::give_arena(std::shared_ptr<std::byte> arena, uint64_t bytes) const {
  constexpr size_t kKeep = 2;  // enough for a caller running two frames at once
  std::lock_guard lock(mu_);
  arenas_.emplace_back(bytes, std::move(arena));
  if (arenas_.size() > kKeep) {
    // Drop the smallest: the larger ones serve any layout the smaller ones did.
    auto it = std::min_element(arenas_.begin(), arenas_.end(), [](auto& a, auto& b) { return a.first < b.first; });
    arenas_.erase(it);
  }
}

// ----------------------------------------------------------------------------------- Frame

namespace {

// Routes a kernel's outputs into the frame (or into temporaries when the step converts
// float16/bfloat16 inputs, see Frame::run_step).
class StepSink final : public OutputSink {
 public:
  StepSink(Frame& f, const Step& s, std::span<const Tensor* const> ins, std::vector<Tensor>* temps,
           std::function<Tensor&(size_t, DType, Shape)> alloc, std::function<void(size_t, size_t, Shape)> alias,
           std::function<void(size_t, Tensor)> set, std::function<std::vector<Tensor>(GraphId, std::vector<Tensor>)> sub)
      : f_(f), s_(s), ins_(ins), temps_(temps), alloc_(std::move(alloc)), alias_(std::move(alias)),
        set_(std::move(set)), sub_(std::move(sub)) {}
  Tensor& alloc(size_t i, DType dtype, Shape shape) override {
    if (temps_) return (*temps_)[i] = Tensor::alloc(dtype, std::move(shape));
    return alloc_(i, dtype, std::move(shape));
  }
  void alias(size_t i, size_t input, Shape shape) override {
    if (temps_) {
      Tensor t = ins_[input]->hold ? *ins_[input] : ins_[input]->clone();
      t.shape = std::move(shape);
      (*temps_)[i] = std::move(t);
      return;
    }
    alias_(i, input, std::move(shape));
  }
  void set(size_t i, Tensor t) override {
    if (temps_) (*temps_)[i] = std::move(t);
    else set_(i, std::move(t));
  }
  std::vector<Tensor> run_subgraph(GraphId g, std::vector<Tensor> inputs) override { return sub_(g, std::move(inputs)); }

 private:
  [[maybe_unused]] Frame& f_;
  [[maybe_unused]] const Step& s_;
  std::span<const Tensor* const> ins_;
  std::vector<Tensor>* temps_;
  std::function<Tensor&(size_t, DType, Shape)> alloc_;
  std::function<void(size_t, size_t, Shape)> alias_;
  std::function<void(size_t, Tensor)> set_;
  std::function<std::vector<Tensor>(GraphId, std::vector<Tensor>)> sub_;
};

}  // namespace

Frame::Frame(const Plan& plan, Frame* parent) : plan_(plan), parent_(parent) {}

const Tensor& Frame::lookup(ValueId v) const { return vals_[v.index()]; }

std::vector<Tensor> Frame::run(std::vector<Tensor> inputs) {
  const Graph& g = plan_.graph;
  const uint32_t nv = g.value_count();
  vals_ = plan_.constants;
  for (ValueId c : g.captures()) {
    ValueId o = g.outer(c);
    if (parent_ && o.valid()) vals_[c.index()] = parent_->lookup(o);
  }
  if (inputs.size() != plan_.inputs.size())
    fail("the graph takes ", plan_.inputs.size(), " inputs but ", inputs.size(), " were given");
  std::vector<Shape> shapes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    shapes.push_back(inputs[i].shape);
    vals_[plan_.inputs[i].index()] = std::move(inputs[i]);
  }
  if (!parent_ && plan_.options.arena) {
    layout_ = plan_.layout(shapes);
    if (layout_) arena_ = plan_.take_arena(layout_->arena_bytes);
    else {
      recording_ = true;
      sizes_.assign(nv, 0);
      alias_of_.assign(nv, ValueId{});
    }
  }
  if (plan_.options.profile) {
    for (size_t i = 0; i < plan_.steps.size(); ++i) {
      auto t0 = std::chrono::steady_clock::now();
      run_step(plan_.steps[i], i);
      plan_.step_ns[i] += static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
    }
  } else {
    for (size_t i = 0; i < plan_.steps.size(); ++i) run_step(plan_.steps[i], i);
  }
  if (recording_) plan_.record(shapes, sizes_, alias_of_);
  std::vector<Tensor> outs;
  for (ValueId v : g.graph_outputs()) {
    Tensor& t = vals_[v.index()];
    if (t.dtype == DType::Undefined) fail("graph output '", str(g.value_name(v)), "' was not computed");
    outs.push_back(t.nhwc ? to_nchw(t) : t.hold ? t : t.clone());
  }
  if (arena_) {
    vals_.clear();  // views into the arena
    plan_.give_arena(std::move(arena_), layout_->arena_bytes);
  }
  return outs;
}

Tensor& Frame::alloc(const Step& s, size_t i, DType dtype, Shape shape) {
  ValueId v = i < s.outputs.size() ? s.outputs[i] : ValueId{};
  if (!v.valid()) {
    scratch_.push_back(Tensor::alloc(dtype, std::move(shape)));
    return scratch_.back();
  }
  Tensor& t = vals_[v.index()];
  uint64_t bytes = static_cast<uint64_t>(numel(shape)) * dtype_size(dtype);
  if (layout_ && layout_->offset[v.index()] != Layout::kNone && layout_->size[v.index()] == bytes) {
    t = Tensor::view(dtype, std::move(shape), arena_.get() + layout_->offset[v.index()]);
  } else {
    t = Tensor::alloc(dtype, std::move(shape));
    if (recording_) sizes_[v.index()] = bytes;
  }
  return t;
}

void Frame::run_step(const Step& s, size_t index) {
  (void)index;
  const Graph& g = plan_.graph;
  std::vector<const Tensor*> ins(s.inputs.size(), nullptr);
  bool convert = false;
  for (size_t k = 0; k < s.inputs.size(); ++k) {
    if (!s.inputs[k].valid()) continue;
    const Tensor& t = vals_[s.inputs[k].index()];
    if (t.dtype == DType::Undefined)
      fail(node_desc(g, s.node), ": input '", str(g.value_name(s.inputs[k])), "' has no value",
           g.outer(s.inputs[k]).valid() ? " (outer-scope value not available)" : "");
    ins[k] = &t;
    convert |= s.kernel->float_compute && is_stored_float(t.dtype);
  }
  std::vector<Tensor> layout_held;
  const bool relabel_nhwc = layout_inputs(s, ins, layout_held);
  std::vector<Tensor> converted, temps;
  DType stored = DType::Undefined;
  if (convert) {
    converted.resize(ins.size());
    for (size_t k = 0; k < ins.size(); ++k)
      if (ins[k] && is_stored_float(ins[k]->dtype)) {
        if (stored == DType::Undefined) stored = ins[k]->dtype;
        if (ins[k]->data) {
          converted[k] = cast(*ins[k], DType::Float);
        } else {  // a prepared constant: only its shape is read
          converted[k] = *ins[k];
          converted[k].dtype = DType::Float;
        }
        ins[k] = &converted[k];
      }
    temps.resize(s.outputs.size());
  }
  scratch_.clear();
  StepSink sink(
      *this, s, ins, convert ? &temps : nullptr,
      [&](size_t i, DType d, Shape sh) -> Tensor& { return alloc(s, i, d, std::move(sh)); },
      [&](size_t i, size_t input, Shape sh) {
        ValueId v = i < s.outputs.size() ? s.outputs[i] : ValueId{};
        if (!v.valid()) return;
        const Tensor& src = *ins.at(input);
        Tensor t;
        ValueId u = s.inputs[input];
        bool view_ok = src.hold || (!plan_.graph_output[v.index()] &&
                                    (!layout_ || layout_->offset[u.index()] == Layout::kNone ||
                                     layout_->root[v.index()] == layout_->root[u.index()]));
        t = view_ok ? src : src.clone();
        t.shape = std::move(sh);
        if (t.bytes() != src.bytes()) fail(node_desc(g, s.node), ": internal: alias with a different size");
        if (recording_) alias_of_[v.index()] = u;
        vals_[v.index()] = std::move(t);
      },
      [&](size_t i, Tensor t) {
        ValueId v = i < s.outputs.size() ? s.outputs[i] : ValueId{};
        if (v.valid()) vals_[v.index()] = t.hold ? std::move(t) : t.clone();
      },
      [&](GraphId sub, std::vector<Tensor> inputs) {
        Frame child(*plan_.subplan(sub), this);
        return child.run(std::move(inputs));
      });
  OpContext ctx(g, s.node, s.opset, ins, s.outputs.size(), &sink);
  ctx.fused_act = s.act;
  ctx.state = s.state.get();
  ctx.prefer_nhwc = s.prefer_nhwc && !convert;
  try {
    s.kernel->run(ctx);
  } catch (const Error& e) {
    std::string what = e.what();
    if (what.find(node_desc(g, s.node)) != std::string::npos) throw;
    fail(node_desc(g, s.node), ": ", what);
  } catch (const std::exception& e) {
    fail(node_desc(g, s.node), ": ", e.what());
  }
  if (convert) {
    for (size_t i = 0; i < temps.size(); ++i) {
      if (temps[i].dtype == DType::Undefined || !s.outputs[i].valid()) continue;
      if (temps[i].dtype == DType::Float) {
        Tensor& out = alloc(s, i, stored, temps[i].shape);
        cast_into(temps[i], out);
      } else {
        vals_[s.outputs[i].index()] = std::move(temps[i]);
      }
    }
  }
  if (relabel_nhwc)
    for (ValueId v : s.outputs) {
      if (!v.valid()) continue;
      Tensor& t = vals_[v.index()];
      if (t.rank() != 4) fail(node_desc(g, s.node), ": internal: channels-last elementwise output of rank ", t.rank());
      t.shape = {t.shape[0], t.shape[3], t.shape[1], t.shape[2]};
      t.nhwc = true;
    }
  for (ValueId v : s.release) vals_[v.index()] = Tensor{};
}

// Channels-last inputs for this step's kernel (see LayoutUse): views of their physical bytes
// for an elementwise kernel when every other operand is laid out the same way in both layouts
// (rank <= 4, not both channels > 1 and pixels > 1: a [N, C, 1, 1] scale, a scalar), else
// plain copies. Returns whether the outputs are then channels-last.
bool Frame::layout_inputs(const Step& s, std::vector<const Tensor*>& ins, std::vector<Tensor>& held) const {
  bool any = false;
  for (const Tensor* t : ins) any = any || (t != nullptr && t->nhwc);
  if (!any || s.kernel->layout == LayoutUse::Aware) return false;
  held.resize(ins.size());
  bool views = s.kernel->layout == LayoutUse::Elementwise;
  for (const Tensor* t : ins) {
    if (!views || t == nullptr || t->nhwc) continue;
    if (t->rank() > 4) {
      views = false;
      continue;
    }
    const Shape e = nhwc_physical_shape(t->shape);  // [n, h, w, c]
    views = !(e[3] > 1 && e[1] * e[2] > 1);
  }
  for (size_t k = 0; k < ins.size(); ++k) {
    if (ins[k] == nullptr || (!views && !ins[k]->nhwc)) continue;
    if (views) {
      held[k] = *ins[k];
      held[k].shape = nhwc_physical_shape(ins[k]->shape);
      held[k].nhwc = false;
    } else {
      held[k] = to_nchw(*ins[k]);
    }
    ins[k] = &held[k];
  }
  return views;
}

// ---------------------------------------------------------------------------- OpContext

const Tensor& OpContext::input(size_t i) const {
  const Tensor* t = in(i);
  if (!t) error("input " + std::to_string(i) + " is required");
  return *t;
}

bool OpContext::has_output(size_t i) const { return graph.output(node, i).valid(); }

void OpContext::error(const std::string& what) const { fail(where(), ": ", what); }

std::string OpContext::where() const { return node_desc(graph, node); }

// ------------------------------------------------------------------------------- Session

Session::Session(const Model& model, SessionOptions options)
    : model_(&model), plan_(std::make_unique<Plan>(model.main(), options)) {}
Session::~Session() = default;

const std::vector<ValueId>& Session::input_values() const { return plan_->inputs; }
std::vector<std::string> Session::input_names() const {
  std::vector<std::string> out;
  for (ValueId v : plan_->inputs) out.emplace_back(str(model_->main().value_name(v)));
  return out;
}
std::vector<std::string> Session::output_names() const {
  std::vector<std::string> out;
  for (ValueId v : model_->main().graph_outputs()) out.emplace_back(str(model_->main().value_name(v)));
  return out;
}
size_t Session::step_count() const { return plan_->steps.size(); }
size_t Session::fused_count() const { return plan_->fused; }
size_t Session::channels_last_count() const { return plan_->channels_last; }

namespace {
std::string step_op(const Plan& plan, const Step& s) {
  std::string op(str(plan.graph.op_type(s.node)));
  if (s.kernel == &softmax_attention_kernel()) op = "MatMul+Softmax+MatMul";
  if (s.kernel == &decomposed_layer_norm_kernel()) op = "LayerNorm(decomposed)";
  if (s.act.op != simd::UnaryOp::Identity) op += "+act";
  return op;
}
}  // namespace

std::vector<StepProfile> Session::step_profile() const {
  std::vector<StepProfile> out;
  for (size_t i = 0; i < plan_->steps.size(); ++i) {
    const Step& s = plan_->steps[i];
    out.push_back({node_desc(plan_->graph, s.node), step_op(*plan_, s), static_cast<double>(plan_->step_ns[i].load()) * 1e-6});
  }
  std::stable_sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.ms > b.ms; });
  return out;
}

std::vector<OpProfile> Session::profile() const {
  std::map<std::string, OpProfile> by;
  for (size_t i = 0; i < plan_->steps.size(); ++i) {
    const Step& s = plan_->steps[i];
    const std::string op = step_op(*plan_, s);
    OpProfile& p = by[op];
    p.op = op;
    p.ms += static_cast<double>(plan_->step_ns[i].load()) * 1e-6;
    ++p.nodes;
  }
  std::vector<OpProfile> out;
  for (auto& [k, v] : by) out.push_back(v);
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.ms > b.ms; });
  return out;
}

std::vector<Tensor> Session::run(const std::vector<Tensor>& inputs) const {
  simd::WarmWorkers warm;
  Frame f(*plan_, nullptr);
  return f.run(inputs);
}

// -------------------------------------------------------------------------- evaluate_node

namespace {

class EvalSink final : public OutputSink {
 public:
  EvalSink(const Graph& g, NodeId n, std::span<const Tensor* const> ins, std::vector<Tensor>& outs)
      : g_(g), n_(n), ins_(ins), outs_(outs) {}
  Tensor& alloc(size_t i, DType dtype, Shape shape) override {
    if (i >= outs_.size()) outs_.resize(i + 1);
    return outs_[i] = Tensor::alloc(dtype, std::move(shape));
  }
  void alias(size_t i, size_t input, Shape shape) override {
    Tensor t = ins_[input]->clone();
    t.shape = std::move(shape);
    set(i, std::move(t));
  }
  void set(size_t i, Tensor t) override {
    if (i >= outs_.size()) outs_.resize(i + 1);
    outs_[i] = t.hold ? std::move(t) : t.clone();
  }
  std::vector<Tensor> run_subgraph(GraphId sub, std::vector<Tensor> inputs) override {
    Plan p(g_.model().graph(sub), SessionOptions{true, false});
    Frame f(p, nullptr);
    return f.run(std::move(inputs));
  }

 private:
  const Graph& g_;
  [[maybe_unused]] NodeId n_;
  std::span<const Tensor* const> ins_;
  std::vector<Tensor>& outs_;
};

}  // namespace

std::vector<OwnedTensor> evaluate_node(const Graph& g, NodeId n, std::span<const TensorView> inputs) {
  std::string_view dom = norm_domain(g.domain(n));
  const KernelDef* k = Registry::get().find(dom, str(g.op_type(n)));
  int64_t version = g.model().opset(dom);
  if (!k)
    fail("the runtime has no kernel for operator ", str(g.op_type(n)), " (domain '", dom.empty() ? "ai.onnx" : dom,
         "', opset ", version, ") used by ", node_desc(g, n));
  std::vector<Tensor> converted(inputs.size());
  std::vector<const Tensor*> ins(inputs.size(), nullptr);
  DType stored = DType::Undefined;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].dtype == DType::Undefined) continue;
    ins[i] = &inputs[i];
    if (k->float_compute && is_stored_float(inputs[i].dtype)) {
      if (stored == DType::Undefined) stored = inputs[i].dtype;
      converted[i] = cast(inputs[i], DType::Float);
      ins[i] = &converted[i];
    }
  }
  std::vector<Tensor> outs(g.outputs(n).size());
  EvalSink sink(g, n, ins, outs);
  OpContext ctx(g, n, version, ins, outs.size(), &sink);
  try {
    k->run(ctx);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(node_desc(g, n), ": ", e.what());
  }
  outs.resize(g.outputs(n).size());
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!g.output(n, i).valid()) outs[i] = Tensor{};
    else if (stored != DType::Undefined && outs[i].dtype == DType::Float) outs[i] = cast(outs[i], stored);
  }
  return outs;
}

bool has_kernel(std::string_view domain, std::string_view op) {
  return Registry::get().find(domain == "ai.onnx" ? std::string_view{} : domain, op) != nullptr;
}

std::vector<std::string> supported_ops() { return Registry::get().ops(); }

}  // namespace onnxforge::rt
