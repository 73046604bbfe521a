// The plan of one graph: topological order, one kernel per node, plan-time folding, kernel
// preparation, the fusions (fusions.cpp), weights released or copied, and each value's last
// reader. Channels-last planning and the arena are in layout.cpp, execution in frame.cpp.
#include "runtime/plan.h"

#include <cstring>

#include <sys/mman.h>
#include <unistd.h>

#include "io/mapped_file.h"
#include "ir/error.h"
#include "ir/topo.h"
#include "ir/uses.h"
#include "runtime/fusions.h"

namespace onnxforge::rt {
namespace {

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

std::string_view norm_domain(Sym d) {
  std::string_view s = str(d);
  return s == "ai.onnx" ? std::string_view{} : s;
}

std::string node_desc(const Graph& g, NodeId n) {
  std::string d(norm_domain(g.domain(n)));
  return "node '" + std::string(str(g.node_name(n))) + "' (" + (d.empty() ? "" : d + "::") +
         std::string(str(g.op_type(n))) + ")";
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
    if (!k)
      fail("the runtime has no kernel for operator ", dom.empty() ? "" : std::string(dom) + "::", str(g.op_type(n)),
           " (domain '", dom.empty() ? "ai.onnx" : dom, "', opset ", version, ") used by ", node_desc(g, n),
           "; see runtime/README.md to add one");
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
        if (m->inputs) s.inputs = std::move(*m->inputs);
        if (m->act) s.act = *m->act;
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
    if (k->prepare) to_prepare.push_back(steps.size());
    else
      for (ValueId v : s.inputs) resolve_deferred(v);  // a fusion may have brought in other inputs
    steps.push_back(std::move(s));
  }

  // Weights are packed after planning, largest first. Packing reads a mapped weight (file-backed
  // pages) into a new packed copy, then releases the source pages: the resident peak is every
  // weight packed so far plus the one being read. In step order TinyLlama's 250 MiB lm_head came
  // last, on top of all the others (tinyllama_2l session: 584 MiB packed + 259 MiB of lm_head pages
  // = 849 MiB peak; largest first the peak is the packed weights plus the largest other source).
  auto prepared_bytes = [&](const Step& s) {
    size_t b = 0;
    for (size_t i = 0; i < s.inputs.size() && i < 32; ++i)
      if ((s.kernel->prepared_inputs >> i & 1u) && s.inputs[i].valid() && is_const[s.inputs[i].index()])
        b += constants[s.inputs[i].index()].bytes();
    return b;
  };
  std::stable_sort(to_prepare.begin(), to_prepare.end(),
                   [&](size_t a, size_t b) { return prepared_bytes(steps[a]) > prepared_bytes(steps[b]); });
  for (size_t si : to_prepare) {
    Step& s = steps[si];
    const KernelDef* k = s.kernel;
    const NodeId n = s.node;
    if (!options.pack_weights && k->in_place_b)
      if (auto st = prepare_in_place(s, k)) {
        s.state = std::move(st);  // read in place at run time: input 1 keeps its shape only
        ++in_place;
        consumed(s.inputs[1], true);
        for (size_t i = 0; i < s.inputs.size(); ++i)
          if (i != 1) resolve_deferred(s.inputs[i]);
        continue;
      }
    if (auto direct = prepare_from_transpose(s, k)) {
      s.state = std::move(direct);  // packed from the transpose's source: input 1 keeps its shape only
      consumed(s.inputs[1], true);
      for (size_t i = 0; i < s.inputs.size(); ++i)
        if (i != 1) resolve_deferred(s.inputs[i]);
    } else {
      for (ValueId v : s.inputs) resolve_deferred(v);  // a fusion may have brought in other inputs
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
    for (uint32_t v = 0; v < nv; ++v)
      if (needed[v]) resolve_deferred(ValueId{v});
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
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& st = steps[i];
    if (!norm_domain(g.domain(st.node)).empty() || str(g.op_type(st.node)) != "Gather" || st.inputs.empty()) continue;
    const ValueId data = st.inputs[0];
    if (!data.valid() || !is_const[data.index()] || folded_[data.index()] || last[data.index()] != static_cast<int64_t>(i))
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

// A MatMul whose weight is a deferred 2-D transpose of a stored tensor W: the kernel's
// prepare_transposed_b packs from W's bytes (then W's pages are released), nullptr otherwise.
std::shared_ptr<const void> Plan::prepare_from_transpose(const Step& s, const KernelDef* k) {
  if (!k->prepare_transposed_b || !(k->prepared_inputs >> 1 & 1u) || s.inputs.size() < 2) return nullptr;
  const ValueId b = s.inputs[1];
  if (b.valid() && b.index() < lazy_fold_.size() && lazy_fold_[b.index()].valid()) {
    const ValueId w = graph.input(lazy_fold_[b.index()], 0);
    std::vector<const Tensor*> cins(s.inputs.size(), nullptr);
    cins[1] = &constants[w.index()];
    std::shared_ptr<const void> state;
    try {
      state = k->prepare_transposed_b(graph, s.node, cins);
    } catch (const std::exception&) {
      return nullptr;
    }
    if (state) consumed(w);  // this reader of W is done (W's pages go with its last reader)
    return state;
  }
  if (!b.valid() || b.index() >= deferred_.size() || !deferred_[b.index()].valid()) return nullptr;
  const TensorStore& ts = graph.model().tensors;
  const TensorRecipe* r = ts.recipe(deferred_[b.index()]);
  if (!r || r->key != "Transpose 1 0" || r->sources.size() != 1) return nullptr;
  const TensorId w = r->sources[0];
  auto wd = ts.dims(w);
  if (ts.is_deferred(w) || ts.dtype(w) != DType::Float || wd.size() != 2) return nullptr;
  Tensor wt = Tensor::view(DType::Float, Shape(wd.begin(), wd.end()), ts.bytes(w).data());
  std::vector<const Tensor*> cins(s.inputs.size(), nullptr);
  cins[1] = &wt;
  std::shared_ptr<const void> state;
  try {
    state = k->prepare_transposed_b(graph, s.node, cins);
  } catch (const std::exception&) {
    return nullptr;
  }
  if (state) release_pages(graph.model(), wt);
  return state;
}

// Input 1 of a MatMul as column blocks of stored bytes (KernelDef::in_place_b): a stored weight,
// a weight Transpose folded lazily or recorded as a recipe (W itself, transposed), or a
// ConcatColumns recipe over those (a fused QKV weight: its three parts, never concatenated).
// nullopt when the bytes would have to be computed.
std::optional<InPlaceB> Plan::in_place_b(ValueId b) {
  if (!b.valid() || !is_const[b.index()]) return std::nullopt;
  const Tensor& c = constants[b.index()];
  if (c.dtype != DType::Float || c.rank() != 2 || c.numel() == 0) return std::nullopt;
  const TensorStore& ts = graph.model().tensors;
  using Block = InPlaceB::Block;
  auto stored = [&](TensorId t) -> std::optional<Tensor> {
    if (!t.valid() || ts.is_deferred(t) || ts.dtype(t) != DType::Float || ts.dims(t).size() != 2) return std::nullopt;
    auto d = ts.dims(t);
    return Tensor::view(DType::Float, Shape(d.begin(), d.end()), ts.bytes(t).data());
  };
  auto block_of = [&](TensorId t) -> std::optional<Block> {
    if (auto v = stored(t)) return Block{*v, false};
    const TensorRecipe* r = ts.recipe(t);
    if (r && r->key == "Transpose 1 0" && r->sources.size() == 1)
      if (auto v = stored(r->sources[0])) return Block{*v, true};
    return std::nullopt;
  };
  InPlaceB out;
  out.k = c.shape[0];
  out.n = c.shape[1];
  if (b.index() < lazy_fold_.size() && lazy_fold_[b.index()].valid()) {
    const Tensor& w = constants[graph.input(lazy_fold_[b.index()], 0).index()];
    if (!w.data || w.dtype != DType::Float || w.rank() != 2) return std::nullopt;
    out.blocks.push_back({w, true});
  } else if (b.index() < deferred_.size() && deferred_[b.index()].valid()) {
    const TensorId t = deferred_[b.index()];
    const TensorRecipe* r = ts.recipe(t);
    if (r && r->key.rfind("ConcatColumns ", 0) == 0) {
      for (TensorId src : r->sources)
        if (auto bl = block_of(src)) out.blocks.push_back(std::move(*bl));
        else return std::nullopt;
    } else if (auto bl = block_of(t)) {
      out.blocks.push_back(std::move(*bl));
    } else {
      return std::nullopt;
    }
  } else if (c.data) {
    out.blocks.push_back({c, false});
  } else {
    return std::nullopt;
  }
  int64_t cols = 0;
  for (const Block& bl : out.blocks) {
    const int64_t k = bl.trans ? bl.t.shape[1] : bl.t.shape[0], n = bl.trans ? bl.t.shape[0] : bl.t.shape[1];
    if (k != out.k || n <= 0) return std::nullopt;
    cols += n;
  }
  if (cols != out.n) return std::nullopt;
  return out;
}

// KernelDef::in_place_b on the step's input 1; its blocks' pages are dropped after each run.
std::shared_ptr<const void> Plan::prepare_in_place(Step& s, const KernelDef* k) {
  if (!(k->prepared_inputs >> 1 & 1u) || s.inputs.size() < 2) return nullptr;
  auto ib = in_place_b(s.inputs[1]);
  if (!ib) return nullptr;
  std::shared_ptr<const void> state;
  try {
    state = k->in_place_b(graph, s.node, *ib);
  } catch (const std::exception&) {
    return nullptr;
  }
  if (!state) return nullptr;
  const ValueId b = s.inputs[1];
  if (b.index() < lazy_fold_.size() && lazy_fold_[b.index()].valid()) consumed(graph.input(lazy_fold_[b.index()], 0));
  for (InPlaceB::Block& bl : ib->blocks)
    if (!bl.t.hold) s.drop_views.push_back(std::move(bl.t));
  return state;
}

// Transpose(W) of a 2-D float initializer, swapping its axes.
bool Plan::weight_transpose(NodeId n) const {
  const Graph& g = graph;
  if (!g.is_op(n, "Transpose") || g.inputs(n).size() != 1 || g.outputs(n).size() != 1 || !g.output(n, 0).valid())
    return false;
  const ValueId x = g.input(n, 0);
  if (!x.valid() || !is_const[x.index()] || folded_[x.index()] || !g.is_initializer(x)) return false;
  const Tensor& w = constants[x.index()];
  if (!w.data || w.dtype != DType::Float || w.rank() != 2) return false;
  auto p = g.attr_ints(n, "perm");
  return p.empty() || (p.size() == 2 && p[0] == 1 && p[1] == 0);
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

}  // namespace onnxforge::rt
