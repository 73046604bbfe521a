// The plan of one graph: topological order, one kernel per node, plan-time folding, kernel
// preparation, the fusions (fusions.cpp), and each value's last reader; weights are packed,
// released or copied in weights.cpp. Channels-last planning and the arena are in layout.cpp,
// execution in frame.cpp.
#include "runtime/plan.h"

#include <algorithm>

#include "ir/error.h"
#include "ir/match.h"
#include "ir/op_traits.h"
#include "ir/topo.h"
#include "ir/uses.h"
#include "runtime/fusions.h"

namespace onnxforge::rt {

std::string_view norm_domain(Sym d) {
  std::string_view s = str(d);
  return s == "ai.onnx" ? std::string_view{} : s;
}

namespace {

// split_attention (fusions.cpp) fuses a Split into the Attention that reads its three outputs
// only if the Attention's other inputs exist when the Split's step is planned. An export may
// compute them later: BERT's padding mask (Unsqueeze, Cast, Sub, Mul, Expand) came after the
// first layer's QKV Split, so that layer kept its Split (a 1.2 MB copy per run). Their
// producers that do not depend on the Split move to just before it, in their own order.
void hoist_attention_inputs(const Graph& g, const Uses& uses, std::vector<NodeId>& order) {
  std::vector<int64_t> pos(g.node_capacity(), -1);
  auto renumber = [&] {
    for (size_t i = 0; i < order.size(); ++i) pos[order[i].index()] = static_cast<int64_t>(i);
  };
  renumber();
  for (size_t i = 0; i < order.size(); ++i) {
    const NodeId split = order[i];
    if (!g.is_op(split, "Split") || g.outputs(split).empty() || !g.output(split, 0).valid()) continue;
    const Use u = single_use(uses, g.output(split, 0));
    if (!u.node.valid() || !g.is_op(u.node, "Attention") || u.slot != 0) continue;
    // The cone of producers after the Split that the Attention's inputs past Q, K, V need.
    std::vector<NodeId> cone, stack;
    std::vector<uint8_t> seen(g.node_capacity(), 0);
    bool depends = false;
    for (size_t k = 3; k < g.inputs(u.node).size(); ++k) stack.push_back(g.producer(g.input(u.node, k)));
    while (!stack.empty() && !depends) {
      const NodeId n = stack.back();
      stack.pop_back();
      if (!n.valid() || seen[n.index()] || pos[n.index()] < static_cast<int64_t>(i)) continue;
      seen[n.index()] = 1;
      depends = n == split;
      cone.push_back(n);
      for (ValueId v : g.inputs(n)) stack.push_back(g.producer(v));
      for (ValueId v : g.implicit_inputs(n)) stack.push_back(g.producer(v));
    }
    if (depends || cone.empty()) continue;
    std::sort(cone.begin(), cone.end(), [&](NodeId a, NodeId b) { return pos[a.index()] < pos[b.index()]; });
    std::erase_if(order, [&](NodeId n) { return seen[n.index()] != 0; });
    order.insert(order.begin() + static_cast<std::ptrdiff_t>(i), cone.begin(), cone.end());
    i += cone.size();
    renumber();
  }
}

}  // namespace

std::string node_desc(const Graph& g, NodeId n) {
  std::string d(norm_domain(g.domain(n)));
  return "node '" + std::string(str(g.node_name(n))) + "' (" + (d.empty() ? "" : d + "::") +
         std::string(str(g.op_type(n))) + ")";
}

std::string node_ref(const Graph& g, NodeId n) {
  std::string name(str(g.node_name(n)));
  return name.empty() ? std::string(str(g.op_type(n))) + "#" + std::to_string(n.index()) : name;
}

// ------------------------------------------------------------------------------------ Plan

Plan::Plan(const Graph& g, const SessionOptions& opts, const Plan* parent) : graph(g), options(opts) {
  const uint32_t nv = g.value_count();
  constants.resize(nv);
  graph_output.assign(nv, 0);
  const TensorStore& ts = g.model().tensors;
  // A float16 model's chains round at every node; the fusions below compute a chain in float32 and
  // round once, so in such a model they fuse only what they can prove float32 (fusions.h).
  const bool narrow_floats = opts.fuse_activations && narrowest_float_bits(g.model()) < 23;
  deferred_.assign(nv, TensorId{});
  for (ValueId v : g.initializers()) {
    TensorId t = g.initializer(v);
    auto dims = ts.dims(t);
    // A deferred tensor (a folded weight transpose, a concatenated QKV weight) is computed when a
    // node first needs it, into memory of this plan that goes once the plan-time readers (weight
    // packing) are done; reading it through the store would keep every computed copy for the
    // model's lifetime (verifying TinyLlama-1.1B: 12 GiB).
    if (ts.is_deferred(t)) {
      constants[v.index()] = Tensor::view(ts.dtype(t), Shape(dims.begin(), dims.end()), nullptr);
      deferred_[v.index()] = t;
      continue;
    }
    constants[v.index()] = Tensor::view(ts.dtype(t), Shape(dims.begin(), dims.end()), ts.bytes(t).data());
  }
  for (ValueId v : g.graph_outputs()) graph_output[v.index()] = 1;
  for (ValueId v : g.graph_inputs())
    if (!g.is_initializer(v) || g.parent().valid()) inputs.push_back(v);

  is_const.assign(nv, 0);
  folded_.assign(nv, 0);
  lazy_fold_.assign(nv, NodeId{});
  for (ValueId v : g.initializers())
    if (g.is_constant(v) || g.parent().valid()) is_const[v.index()] = 1;
  // A capture of a value the enclosing plan knows (an initializer, a folded node) is a constant
  // here: silero VAD slices and concatenates its LSTM weights inside nested If bodies, which
  // copied 0.5 MB per call before the bodies folded them at plan time.
  for (ValueId c : g.captures()) {
    const ValueId o = g.outer(c);
    if (parent && o.valid() && parent->is_const[o.index()] && parent->constants[o.index()].data &&
        parent->constants[o.index()].dtype != DType::String) {
      constants[c.index()] = parent->constants[o.index()];
      is_const[c.index()] = 1;
    } else {
      run_captures.push_back(c);
    }
  }
  std::vector<NodeId> order = topological_order(g);
  Uses uses(g);
  if (opts.fuse_activations) hoist_attention_inputs(g, uses, order);
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
  std::vector<size_t> to_prepare;  // steps whose kernel packs constant inputs (below)
  for (NodeId n : order) {
    if (skipped[n.index()]) continue;
    for (ValueId v : g.outputs(n))
      if (v.valid()) available[v.index()] = 1;
    std::string_view dom = norm_domain(g.domain(n));
    const KernelDef* k = reg.find(dom, str(g.op_type(n)));
    int64_t version = g.model().opset(dom);
    if (!k)  // one line naming the file: the user cannot act on a path into our source tree
      throw Error("the runtime has no kernel for operator " + (dom.empty() ? "" : std::string(dom) + "::") +
                      std::string(str(g.op_type(n))) + " (domain '" + std::string(dom.empty() ? "ai.onnx" : dom) +
                      "', opset " + std::to_string(version) + ") used by " + node_desc(g, n),
                  Error::Kind::Input, g.model().path.string(), node_ref(g, n));
    // Deferred constants are computed for a node that folds (all inputs constant) or reads them
    // at run time; a weight the kernel packs is packed from its recipe's source when it can be.
    bool all_const = true;
    for (ValueId v : g.inputs(n)) all_const &= !v.valid() || is_const[v.index()];
    if (all_const)
      for (ValueId v : g.inputs(n)) resolve_deferred(v);
    for (ValueId v : g.implicit_inputs(n)) resolve_deferred(v);
    // A weight transpose (an export's MatMul(x, Transpose(W))) folds when something needs its
    // bytes; a MatMul packs straight from W (prepare_from_transpose), so no transposed copy of
    // a weight exists next to the packed ones (verifying TinyLlama: the 262 MB lm_head).
    if (opts.fold_constants && weight_transpose(n)) {
      const ValueId y = g.output(n, 0);
      const Tensor& w = constants[g.input(n, 0).index()];
      constants[y.index()] = Tensor::view(w.dtype, Shape{w.shape[1], w.shape[0]}, nullptr);
      is_const[y.index()] = 1;
      folded_[y.index()] = 1;
      lazy_fold_[y.index()] = n;
      continue;
    }
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
    if (opts.fuse_activations) {
      const FusionSite site{g, uses, available, is_const, graph_output, narrow_floats};
      for (const Fusion& f : fusions()) {
        Found<FusedStep> m = f.match(site, s);
        if (!m) continue;
        if (m->kernel) k = s.kernel = m->kernel;
        if (m->node.valid()) s.node = m->node;
        if (m->inputs) s.inputs = std::move(*m->inputs);
        if (m->act) s.act = *m->act;
        s.round_half |= m->round_half;
        if (m->state) s.state = std::move(m->state);
        s.outputs[0] = m->output;
        if (m->outputs) s.outputs = std::move(*m->outputs);
        for (NodeId c : m->absorbed) skipped[c.index()] = 1;
        for (ValueId v : s.outputs)
          if (v.valid()) available[v.index()] = 1;
        fused += m->fused;
      }
    }
    for (GraphId sub : g.subgraphs(n)) subplans_[sub] = std::make_unique<Plan>(g.model().graph(sub), opts, this);
    if (k->prepare)
      to_prepare.push_back(steps.size());
    else
      for (ValueId v : s.inputs) resolve_deferred(v);  // a fusion may have brought in other inputs
    steps.push_back(std::move(s));
  }

  pack_weights(std::move(to_prepare));
  drop_unread_constants();
  step_ns = std::vector<std::atomic<uint64_t>>(steps.size());
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
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& st = steps[i];
    if (!norm_domain(g.domain(st.node)).empty() || str(g.op_type(st.node)) != "Gather" || st.inputs.empty()) continue;
    const ValueId data = st.inputs[0];
    if (!data.valid() || !is_const[data.index()] || folded_[data.index()] ||
        last[data.index()] != static_cast<int64_t>(i))
      continue;
    const Tensor& t = constants[data.index()];
    if (t.data && !t.hold && t.bytes() > (size_t{1} << 20) && !graph_output[data.index()])
      steps[i].drop_pages.push_back(data);
  }
  plan_layouts();
}

void Plan::drop_pages(const Tensor& t) const { release_pages(graph.model(), t); }

// A plan-time reader of `v` is done with it (folded, or packed its bytes): when no reader is
// left, a folded value is freed (or kept as a shape only) and a weight's pages are released now,
// so the plan's peak memory stays near the packed weights rather than all copies at once.
void Plan::consumed(ValueId v, bool shape_still_read) {
  if (!v.valid() || remaining_[v.index()] == 0) return;
  // Any packing reader keeps the shape, whichever reader comes last (a weight packed by a MatMul
  // and folded into another node lost its shape when the fold came last).
  if (shape_still_read) {
    if (shape_kept_.empty()) shape_kept_.assign(graph.value_count(), 0);
    shape_kept_[v.index()] = 1;
  }
  if (--remaining_[v.index()] > 0) return;
  Tensor& t = constants[v.index()];
  if (!t.data) return;
  if (!folded_[v.index()]) release_pages(graph.model(), t);
  if (shape_still_read || (!shape_kept_.empty() && shape_kept_[v.index()])) {
    t.data = nullptr;
    t.hold.reset();
  } else if (folded_[v.index()]) {
    t = Tensor{};
  }
}

// Computes a deferred initializer into plan memory, accounted like a folded value: consumed()
// frees it after the last plan-time reader, a run-time reader keeps it.
void Plan::resolve_deferred(ValueId v) {
  if (v.valid() && v.index() < lazy_fold_.size() && lazy_fold_[v.index()].valid()) {
    const NodeId n = lazy_fold_[v.index()];
    lazy_fold_[v.index()] = NodeId{};
    if (fold(n))
      for (ValueId in : graph.inputs(n)) consumed(in);
    return;
  }
  if (!v.valid() || v.index() >= deferred_.size() || !deferred_[v.index()].valid()) return;
  const TensorId t = deferred_[v.index()];
  deferred_[v.index()] = TensorId{};
  Tensor& c = constants[v.index()];
  Tensor x = Tensor::alloc(c.dtype, c.shape);
  graph.model().tensors.compute_into(t, {x.data, x.bytes()});
  c = std::move(x);
  if (folded_.empty()) folded_.assign(graph.value_count(), 0);
  folded_[v.index()] = 1;
}

bool Plan::fold(NodeId n) {
  const Graph& g = graph;
  // Random ops draw per run (Session::run's seed): never computed once at plan time.
  if (!g.subgraphs(n).empty() || has_fact(g, n, kRandom)) return false;
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

}  // namespace onnxforge::rt
