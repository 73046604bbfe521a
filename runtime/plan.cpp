#include "runtime/plan.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <numeric>

#include <sys/mman.h>
#include <unistd.h>

#include "io/mapped_file.h"
#include "ir/error.h"
#include "ir/topo.h"
#include "ir/uses.h"

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
  const Registry& reg = Registry::get();
  for (NodeId n : order) {
    if (skipped[n.index()]) continue;
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
    if (opts.fuse_activations && k->fuses_activation && !s.outputs.empty() && s.outputs[0].valid() &&
        (g.dtype(s.outputs[0]) == DType::Float || g.dtype(s.outputs[0]) == DType::Undefined) &&
        uses.single(s.outputs[0]) && uses.of(s.outputs[0])[0].slot == 0) {
      NodeId c = uses.of(s.outputs[0])[0].node;
      if (auto act = fusable_activation(g, c)) {
        s.act = *act;
        s.outputs[0] = g.output(c, 0);
        skipped[c.index()] = 1;
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
    if (layout_) arena_ = alloc_bytes(layout_->arena_bytes);
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
    outs.push_back(t.hold ? t : t.clone());
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
  for (ValueId v : s.release) vals_[v.index()] = Tensor{};
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

std::vector<OpProfile> Session::profile() const {
  std::map<std::string, OpProfile> by;
  for (size_t i = 0; i < plan_->steps.size(); ++i) {
    const Step& s = plan_->steps[i];
    std::string op(str(plan_->graph.op_type(s.node)));
    if (s.act.op != simd::UnaryOp::Identity) op += "+act";
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
