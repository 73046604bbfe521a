// Memory and data layout of a plan: which steps write channels-last (plan_layouts, at plan time)
// and where every intermediate lives in the arena (record, after the first run with a set of
// input shapes), plus the idle arenas kept between runs.
#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "runtime/plan.h"

namespace onnxforge::rt {

// Channels-last planning. A layout-aware step (Conv, pools) writes its output 0 as NHWC when
// every reader takes NHWC: an aware kernel whose takes_nhwc() holds for the node (reading it as
// its data input or fused residual), or an elementwise step whose own outputs all qualify.
// Graph outputs, values read by subgraphs and values that are not float32/float16/bfloat16
// stay plain (float16 values are converted to float32 around the kernels, in the same layout;
// Cast is elementwise, so a float16 model's Cast pairs stay in the chain). Readers that get an
// NHWC input anyway (an elementwise op with an operand that cannot be viewed channels-last)
// have it converted by the frame, so a wrong guess costs a transpose, never a wrong result.
void Plan::plan_layouts() {
  const char* env = std::getenv("ONNXFORGE_CHANNELS_LAST");
  if (!options.channels_last || (env != nullptr && std::string_view(env) == "0")) return;
  const Graph& g = graph;
  const uint32_t nv = g.value_count();
  std::vector<std::vector<std::pair<size_t, size_t>>> readers(nv);  // (step, input slot)
  std::vector<uint8_t> pinned(graph_output), by_subgraph(nv, 0);
  for (size_t i = 0; i < steps.size(); ++i) {
    for (size_t k = 0; k < steps[i].inputs.size(); ++k)
      if (steps[i].inputs[k].valid()) readers[steps[i].inputs[k].index()].emplace_back(i, k);
    if (!g.subgraphs(steps[i].node).empty())
      for (ValueId v : g.implicit_inputs(steps[i].node)) pinned[v.index()] = by_subgraph[v.index()] = 1;
  }
  // ok: the value may be written NHWC. out_ok: an elementwise step may write it NHWC, also
  // when it is a graph output (converted once when the run returns it, the transpose its NCHW
  // producer would have done): ISNet returns every decoder stage's output through a Cast, and
  // with those Casts as NCHW-only readers its whole decoder ran NCHW.
  std::vector<uint8_t> ok(nv, 0), out_ok(nv, 0);
  for (size_t i = steps.size(); i-- > 0;) {
    for (ValueId v : steps[i].outputs) {
      if (!v.valid() || by_subgraph[v.index()] || (readers[v.index()].empty() && !graph_output[v.index()])) continue;
      const DType t = g.dtype(v);
      if (t != DType::Float && t != DType::Float16 && t != DType::BFloat16 && t != DType::Undefined) continue;
      bool all = true;
      for (auto [r, slot] : readers[v.index()]) {
        const Step& rs = steps[r];
        const KernelDef& k = *rs.kernel;
        if (k.layout == LayoutUse::Aware) {
          all = all && k.takes_nhwc != nullptr &&
                (slot == 0 || k.nhwc_all_inputs || static_cast<int>(slot) == k.residual_input) &&
                k.takes_nhwc(g, rs.node);
        } else if (k.layout == LayoutUse::Elementwise) {
          for (ValueId o : rs.outputs) all = all && o.valid() && out_ok[o.index()];
        } else {
          all = false;
        }
      }
      out_ok[v.index()] = all;
      ok[v.index()] = all && !pinned[v.index()] && !readers[v.index()].empty();
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
    bool in_nhwc = in.valid() && nhwc[in.index()];
    if (k.nhwc_all_inputs)
      for (ValueId v : s.inputs) in_nhwc = in_nhwc || (v.valid() && nhwc[v.index()]);
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
  struct Placed {
    int64_t b, e;
    uint64_t off, size;
  };
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

}  // namespace onnxforge::rt

namespace onnxforge::rt {

std::unique_ptr<Frame> Plan::take_frame() const {
  {
    std::lock_guard lock(mu_);
    if (!frames_.empty()) {
      auto f = std::move(frames_.back());
      frames_.pop_back();
      return f;
    }
  }
  return std::make_unique<Frame>(*this, nullptr);
}

void Plan::give_frame(std::unique_ptr<Frame> f) const {
  constexpr size_t kKeep = 2;  // as the arenas: a caller running two runs at once
  std::lock_guard lock(mu_);
  if (frames_.size() < kKeep) frames_.push_back(std::move(f));
}

size_t Plan::layouts_recorded() const {
  std::lock_guard lock(mu_);
  return layouts_.size();
}

}  // namespace onnxforge::rt
