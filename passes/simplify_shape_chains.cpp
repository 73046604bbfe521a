// simplify_shape_chains — Shape → Gather/Slice → Unsqueeze/Squeeze → Concat → Reshape/Expand/
// ConstantOfShape chains are evaluated symbolically: each element of a small int64 vector is a
// known number or "dim i of value x" (with its symbolic name when declared). Then
//  - a chain value whose elements are all known becomes a constant (static shapes);
//  - a Reshape whose target is only partly known gets a constant target that uses 0 for the
//    unknown dims copied from the same position of its own input, and -1 for the one remaining
//    unknown dim (dynamic batch/sequence stay dynamic, the chain disappears).          class 0
#include <unordered_map>

#include "ir/topo.h"
#include "passes/edits.h"
#include "passes/graph_util.h"
#include "passes/registry.h"

namespace onnxforge::passes {
namespace {

struct El {
  bool known = false;
  int64_t value = 0;
  ValueId src;  // unknown: dim `axis` of value `src`
  int64_t axis = -1;
  Sym param;    // and its declared symbolic name, if any
  bool operator==(const El& o) const {
    if (known || o.known) return known == o.known && value == o.value;
    if (!param.empty() && param == o.param) return true;
    return src.valid() && src == o.src && axis == o.axis;
  }
};

struct SymVec {
  std::vector<El> els;
  bool scalar = false;
  ValueId lazy_shape_of;  // Shape(x) with x's rank unknown: element i is dim i of x
  bool all_known() const {
    if (lazy_shape_of.valid()) return false;
    for (const El& e : els)
      if (!e.known) return false;
    return true;
  }
};

struct Match {
  NodeId consumer;        // node whose input `slot` gets the constant
  uint32_t slot = 0;
  ValueId value;          // value replaced (for the all-known case; invalid for Reshape targets)
  std::vector<int64_t> constant;
  bool scalar = false;
};

El dim_el(const Graph& g, ValueId x, int64_t i) {
  El e;
  if (g.has_shape(x) && i < g.rank(x)) {
    const Dim& d = g.shape(x)[i];
    if (d.known()) return El{true, d.value, {}, -1, {}};
    e.param = d.param;
  }
  e.src = x;
  e.axis = i;
  return e;
}

class Evaluator {
 public:
  Evaluator(const Graph& g) : g_(g) {}
  const SymVec* get(ValueId v) {
    auto it = vals_.find(v.index());
    if (it != vals_.end()) return &it->second;
    if (auto c = constant_ints(g_, v); c && c->size() <= 64) {
      TensorId t = constant_tensor(g_, v);
      if (g_.model().tensors.dims(t).size() > 1 || g_.model().tensors.dtype(t) != DType::Int64) return nullptr;
      SymVec s;
      s.scalar = g_.model().tensors.dims(t).empty();
      for (int64_t x : *c) s.els.push_back(El{true, x, {}, -1, {}});
      return &(vals_[v.index()] = s);
    }
    return nullptr;
  }
  void eval(NodeId n) {
    std::optional<SymVec> r = compute(n);
    if (r) vals_[g_.output(n, 0).index()] = std::move(*r);
  }

 private:
  std::optional<SymVec> compute(NodeId n) {
    const Graph& g = g_;
    if (g.outputs(n).size() != 1) return std::nullopt;
    if (g.is_op(n, "Shape")) {
      ValueId x = g.input(n, 0);
      SymVec s;
      int64_t start = g.attr_int(n, "start", 0);
      bool has_end = g.attr(n, "end") != nullptr;
      if (!g.has_shape(x)) {
        if (start != 0 || has_end) return std::nullopt;
        s.lazy_shape_of = x;
        return s;
      }
      int64_t r = g.rank(x), end = g.attr_int(n, "end", r);
      if (start < 0) start += r;
      if (end < 0) end += r;
      for (int64_t i = std::max<int64_t>(start, 0); i < std::min(end, r); ++i) s.els.push_back(dim_el(g, x, i));
      return s;
    }
    const SymVec* a = get(g.input(n, 0));
    if (!a) return std::nullopt;
    if (g.is_op(n, "Identity") || (g.is_op(n, "Cast") && g.attr_int(n, "to", 0) == 7))
      return *a;
    if (g.is_op(n, "Gather")) {
      if (g.attr_int(n, "axis", 0) != 0 || (!a->lazy_shape_of.valid() && a->scalar)) return std::nullopt;
      auto idx = constant_ints(g, g.input(n, 1));
      TensorId it = constant_tensor(g, g.input(n, 1));
      if (!idx || g.model().tensors.dims(it).size() > 1) return std::nullopt;
      SymVec s;
      s.scalar = g.model().tensors.dims(it).empty();
      for (int64_t i : *idx) {
        if (a->lazy_shape_of.valid()) {
          if (i < 0) return std::nullopt;
          s.els.push_back(dim_el(g, a->lazy_shape_of, i));
        } else {
          int64_t sz = static_cast<int64_t>(a->els.size());
          if (i < 0) i += sz;
          if (i < 0 || i >= sz) return std::nullopt;
          s.els.push_back(a->els[i]);
        }
      }
      return s;
    }
    if (a->lazy_shape_of.valid()) {
      if (!g.is_op(n, "Slice")) return std::nullopt;
    }
    if (g.is_op(n, "Unsqueeze")) {
      std::vector<int64_t> axes;
      if (auto at = g.attr_ints(n, "axes"); !at.empty()) axes.assign(at.begin(), at.end());
      else if (auto c = constant_ints(g, g.input(n, 1))) axes = *c;
      if (!a->scalar || axes.size() != 1 || (axes[0] != 0 && axes[0] != -1)) return std::nullopt;
      SymVec s = *a;
      s.scalar = false;
      return s;
    }
    if (g.is_op(n, "Squeeze")) {
      if (a->scalar || a->els.size() != 1) return std::nullopt;
      SymVec s = *a;
      s.scalar = true;
      return s;
    }
    if (g.is_op(n, "Concat")) {
      if (g.attr_int(n, "axis", 0) != 0 && g.attr_int(n, "axis", 0) != -1) return std::nullopt;
      SymVec s;
      for (ValueId v : g.inputs(n)) {
        const SymVec* p = get(v);
        if (!p || p->scalar || p->lazy_shape_of.valid()) return std::nullopt;
        s.els.insert(s.els.end(), p->els.begin(), p->els.end());
      }
      return s;
    }
    if (g.is_op(n, "Slice")) {
      if (a->scalar || g.inputs(n).size() < 3) return std::nullopt;
      auto st = constant_ints(g, g.input(n, 1)), en = constant_ints(g, g.input(n, 2));
      if (!st || !en || st->size() != 1 || en->size() != 1) return std::nullopt;
      if (ValueId ax = g.input(n, 3); ax.valid()) {
        auto axv = constant_ints(g, ax);
        if (!axv || axv->size() != 1 || ((*axv)[0] != 0 && (*axv)[0] != -1)) return std::nullopt;
      }
      if (ValueId sp = g.input(n, 4); sp.valid()) {
        auto spv = constant_ints(g, sp);
        if (!spv || spv->size() != 1 || (*spv)[0] != 1) return std::nullopt;
      }
      int64_t b = (*st)[0], e = (*en)[0];
      SymVec s;
      if (a->lazy_shape_of.valid()) {
        if (b < 0 || e < 0 || e > 64) return std::nullopt;  // unknown rank: only absolute ranges
        for (int64_t i = b; i < e; ++i) s.els.push_back(dim_el(g, a->lazy_shape_of, i));
        return s;
      }
      int64_t sz = static_cast<int64_t>(a->els.size());
      if (b < 0) b += sz;
      if (e < 0) e += sz;
      b = std::clamp<int64_t>(b, 0, sz);
      e = std::clamp<int64_t>(e, b, sz);
      s.els.assign(a->els.begin() + b, a->els.begin() + e);
      return s;
    }
    return std::nullopt;
  }

  const Graph& g_;
  std::unordered_map<uint32_t, SymVec> vals_;
};

bool chain_op(const Graph& g, NodeId n) {
  return is(g, n, "Shape") || is(g, n, "Gather") || is(g, n, "Unsqueeze") || is(g, n, "Squeeze") ||
         is(g, n, "Concat") || is(g, n, "Slice") || is(g, n, "Cast") || is(g, n, "Identity");
}

std::vector<Match> analyze(const Graph& g, const Uses& uses, const PassOptions&) {
  std::vector<Match> out;
  Evaluator ev(g);
  for (NodeId n : topological_order(g)) {
    if (chain_op(g, n)) {
      ev.eval(n);
      continue;
    }
    // A consumer of chain values.
    for (uint32_t i = 0; i < g.inputs(n).size(); ++i) {
      ValueId v = g.input(n, i);
      if (!v.valid() || constant_tensor(g, v).valid()) continue;
      NodeId p = g.producer(v);
      if (!p.valid() || !chain_op(g, p)) continue;
      const SymVec* s = ev.get(v);
      if (!s) continue;
      if (s->all_known()) {
        Match m{n, i, v, {}, s->scalar};
        for (const El& e : s->els) m.constant.push_back(e.value);
        out.push_back(std::move(m));
        continue;
      }
      if (!g.is_op(n, "Reshape") || i != 1 || g.attr_int(n, "allowzero", 0) != 0 || s->lazy_shape_of.valid()) continue;
      // Partly known Reshape target: 0 copies dim j of the Reshape's input, -1 infers one dim.
      ValueId data = g.input(n, 0);
      std::vector<int64_t> target;
      int unknown = 0;
      bool ok = true;
      for (size_t j = 0; j < s->els.size() && ok; ++j) {
        const El& e = s->els[j];
        if (e.known) {
          if (e.value == -1) ++unknown;
          target.push_back(e.value);
        } else if (e == dim_el(g, data, static_cast<int64_t>(j))) {
          target.push_back(0);
        } else {
          target.push_back(-1);
          ++unknown;
        }
      }
      if (!ok || unknown > 1) continue;
      out.push_back({n, 1, ValueId{}, std::move(target), false});
    }
  }
  (void)uses;
  return out;
}

bool apply(Edits& e, const Match& m) {
  if (e.touched(m.consumer)) return false;
  std::vector<int64_t> dims;
  if (!m.scalar) dims.push_back(static_cast<int64_t>(m.constant.size()));
  ValueId c = e.new_constant("shape", DType::Int64, dims, to_bytes(m.constant));
  e.set_input(m.consumer, m.slot, c);
  return true;
}

}  // namespace

const Pass& simplify_shape_chains_pass() {
  static const PassOf<Match> p{"simplify_shape_chains", AccuracyClass::Lossless,
                               "evaluate Shape→Gather→Unsqueeze→Concat chains; Reshape targets with 0/-1 for dynamic dims",
                               analyze, apply};
  return p;
}

}  // namespace onnxforge::passes
