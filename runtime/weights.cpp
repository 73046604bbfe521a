// The plan's weights: packed for their kernels (largest first), read in place, or packed
// straight from a transposed weight's source; released from the mapping once no plan-time
// reader is left, or copied out of it when small and read at run time. Plan::Plan (plan.cpp)
// calls pack_weights and drop_unread_constants once every step is planned.
#include <algorithm>
#include <cstring>

#include <sys/mman.h>
#include <unistd.h>

#include "io/mapped_file.h"
#include "runtime/plan.h"

namespace onnxforge::rt {

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

namespace {

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

void Plan::pack_weights(std::vector<size_t> to_prepare) {
  const Graph& g = graph;
  // Weights are packed after planning, largest first. Packing reads a mapped weight (file-backed
  // pages) into a new packed copy, then releases the source pages: the resident peak is every
  // weight packed so far plus the one being read. In step order TinyLlama's 250 MiB lm_head comes
  // last, on top of all the others (a tinyllama_2l session: 849 MiB peak in step order, 642 MiB
  // largest first; docs/benchmarks.md).
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
}

// Folded values nobody reads at run time are dropped; a weight only a kernel packed keeps its
// shape and loses its pages; a small weight read at run time leaves the mapping (copy_small_weight).
void Plan::drop_unread_constants() {
  const Graph& g = graph;
  const uint32_t nv = g.value_count();
  std::vector<uint8_t> needed(nv, 0), shape_only(nv, 0);
  for (const Step& st : steps) {
    for (size_t i = 0; i < st.inputs.size(); ++i) {
      ValueId v = st.inputs[i];
      if (!v.valid()) continue;
      if (st.state && i < 32 && (st.kernel->prepared_inputs >> i & 1u))
        shape_only[v.index()] = 1;
      else
        needed[v.index()] = 1;
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
    } catch (const std::exception&) { return nullptr; }
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
  } catch (const std::exception&) { return nullptr; }
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
        if (auto bl = block_of(src))
          out.blocks.push_back(std::move(*bl));
        else
          return std::nullopt;
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
  } catch (const std::exception&) { return nullptr; }
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

}  // namespace onnxforge::rt
