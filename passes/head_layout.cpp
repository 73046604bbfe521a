#include "passes/head_layout.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "analysis/shapes.h"
#include "passes/builder.h"
#include "passes/edits.h"
#include "passes/graph_util.h"

namespace onnxforge::passes::heads {

SymDim Sizes::size(char f) const {
  auto it = of.find(f);
  return it == of.end() ? SymDim::constant(1) : it->second;
}

SymDim Sizes::axis(const std::string& a) const {
  SymDim p = SymDim::constant(1);
  for (char c : a) p = p * size(c);
  return p;
}

std::string flat(const Layout& l) {
  std::string s;
  for (const auto& a : l) s += a;
  return s;
}

std::string to_string(const Layout& l) {
  std::string s;
  for (const auto& a : l) s += "[" + a + "]";
  return s;
}

Layout squeeze_ones(const Layout& l, const Sizes& s) {
  Layout out;
  for (const auto& a : l) {
    std::string k;
    for (char c : a)
      if (!s.size(c).is_constant(1)) k += c;
    out.push_back(k);
  }
  return out;
}

std::optional<std::vector<SymDim>> dims_of(const Graph& g, ValueId v) {
  if (!v.valid()) return std::nullopt;
  if (auto s = ShapeReport::shape(g, v)) return s;
  if (auto st = static_shape(g, v)) {
    std::vector<SymDim> out;
    for (int64_t d : *st) out.push_back(SymDim::constant(d));
    return out;
  }
  return std::nullopt;
}

Layout split_x(const Layout& l, const Sizes& sizes) {
  if (!sizes.has('b') || !sizes.has('h')) return l;
  std::string rep;
  if (!sizes.size('b').is_constant(1)) rep += 'b';
  if (!sizes.size('h').is_constant(1)) rep += 'h';
  Layout out;
  for (const auto& a : l) {
    std::string k;
    for (char c : a) {
      if (c == 'x')
        k += rep;
      else
        k += c;
    }
    out.push_back(k);
  }
  return out;
}

std::optional<Layout> regroup(const Layout& from, std::span<const SymDim> dims, Sizes& sizes) {
  std::string f = flat(split_x(from, sizes));
  Layout out;
  size_t k = 0;
  for (const SymDim& d : dims) {
    if (d.is_constant(1)) {
      out.push_back("");
      continue;
    }
    std::string axis;
    SymDim prod = SymDim::constant(1);
    while (!(prod == d)) {
      if (k >= f.size()) return std::nullopt;
      const char c = f[k];
      if (c == 'x' && !sizes.has('b')) {
        // The first dim that ends inside the merged batch·heads factor fixes the split: BERT-style
        // [B·H, S, D] → [B, H, S, D] (batch outermost, as every exporter merges them).
        const SymDim x = sizes.size('x');
        if (!(prod * x == d)) {
          auto b = SymDim::quotient({d}, {prod});
          auto h = b ? SymDim::quotient({x}, {*b}) : std::nullopt;
          if (h && h->is_constant() && h->value() > 1 && (*b * *h) == x) {
            sizes.of['b'] = *b;
            sizes.of['h'] = *h;
            std::string rep = std::string(b->is_constant(1) ? "" : "b") + "h";
            f = f.substr(0, k) + rep + f.substr(k + 1);
            continue;
          }
        }
      }
      prod = prod * sizes.size(c);
      axis += c;
      ++k;
    }
    out.push_back(axis);
  }
  if (k != f.size()) return std::nullopt;
  return out;
}

namespace {

bool reshape_like(const Graph& g, NodeId n) {
  return is(g, n, "Reshape") || is(g, n, "Squeeze") || is(g, n, "Unsqueeze") || is(g, n, "Flatten");
}

bool valid_perm(const std::vector<int64_t>& perm, size_t rank) {
  if (perm.size() != rank) return false;
  std::vector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(p)]) return false;
    seen[static_cast<size_t>(p)] = true;
  }
  return true;
}

// Llama's repeat_kv at Reshape `r` (output layout `l`): Reshape(Expand(Unsqueeze(x, [2]), ...))
// turning [B, Hkv, S, D] into [B, Hkv·n, S, D] with each kv head repeated n times in a row
// (the order Attention-23's grouped-query broadcast uses). Returns x, the nodes, n.
struct Repeat {
  ValueId x;
  NodeId reshape, expand, unsqueeze;
  int64_t n = 1;
};
std::optional<Repeat> kv_repeat(const Graph& g, NodeId r, const Layout& l) {
  if (!is(g, r, "Reshape") || l.size() != 4 || l[1] != "g") return std::nullopt;
  NodeId ex = g.producer(g.input(r, 0));
  if (!is(g, ex, "Expand")) return std::nullopt;
  NodeId un = g.producer(g.input(ex, 0));
  if (!is(g, un, "Unsqueeze")) return std::nullopt;
  auto axes = axes_of(g, un);
  if (!axes || axes->size() != 1 || ((*axes)[0] != 2 && (*axes)[0] != -3)) return std::nullopt;
  ValueId x = g.input(un, 0);
  auto xd = dims_of(g, x), ed = dims_of(g, g.output(ex, 0)), rd = dims_of(g, g.output(r, 0));
  if (!xd || !ed || !rd || xd->size() != 4 || ed->size() != 5 || rd->size() != 4) return std::nullopt;
  const auto& X = *xd;
  const auto& E = *ed;
  if (!E[2].is_constant() || E[2].value() < 1) return std::nullopt;
  if (!(E[0] == X[0] && E[1] == X[1] && E[3] == X[2] && E[4] == X[3])) return std::nullopt;
  if (!((*rd)[0] == X[0] && (*rd)[1] == X[1] * E[2] && (*rd)[2] == X[2] && (*rd)[3] == X[3])) return std::nullopt;
  return Repeat{x, r, ex, un, E[2].value()};
}

// The layout across Transpose `n`: its output's from its input's `l` (`forward`), or its input's
// from its output's; nullopt when the perm is not one of `l`'s rank.
std::optional<Layout> through_transpose(const Graph& g, NodeId n, const Layout& l, bool forward) {
  auto p = transpose_perm(g, n);
  if (!p || !valid_perm(*p, l.size())) return std::nullopt;
  Layout out(l.size());
  for (size_t i = 0; i < p->size(); ++i) {
    const auto j = static_cast<size_t>((*p)[i]);
    if (forward)
      out[i] = l[j];
    else
      out[j] = l[i];
  }
  return out;
}

}  // namespace

bool resolved(const std::optional<std::vector<SymDim>>& dims) {
  if (!dims) return false;
  for (const SymDim& d : *dims)
    for (Sym s : d.symbols())
      if (str(s).starts_with("unk__")) return false;
  return true;
}

std::vector<Step> walk_back(const Graph& g, ValueId v, const Layout& start, Sizes& shared, WalkOptions o,
                            bool* unresolved) {
  // 'g' shrinks at a kv repeat: a local copy; the b·h split found on the way is shared.
  Sizes sizes = shared;
  std::vector<Step> steps{{v, split_x(start, sizes), 1, 1, {}}};
  for (int guard = 0; guard < 32; ++guard) {
    const Step cur = steps.back();
    if (g.is_graph_input(cur.value) || constant_tensor(g, cur.value).valid()) break;
    NodeId n = g.producer(cur.value);
    if (!n.valid()) break;
    Step next = cur;
    next.nodes = {n};
    const bool had_split = sizes.has('b') && sizes.has('h');
    if (is(g, n, "Transpose")) {
      auto in = through_transpose(g, n, cur.layout, /*forward=*/false);
      if (!in) break;
      next.value = g.input(n, 0);
      next.layout = std::move(*in);
    } else if (auto rep = o.kv_repeat ? kv_repeat(g, n, cur.layout) : std::nullopt) {
      next.value = rep->x;
      next.repeat = cur.repeat * rep->n;
      next.nodes = {rep->reshape, rep->expand, rep->unsqueeze};
      auto xd = dims_of(g, rep->x);
      sizes.of['g'] = (*xd)[1];
      if ((*xd)[1].is_constant(1)) next.layout[1] = "";
    } else if (reshape_like(g, n)) {
      ValueId in = g.input(n, 0);
      auto d = dims_of(g, in);
      if (!d) {
        if (unresolved) *unresolved = true;
        break;
      }
      auto l = regroup(cur.layout, *d, sizes);
      if (!l) {
        // A fresh symbol (unk__N) where the export computes the shape: simplify_shape_chains may
        // still name it; a regroup that fails on named dims is final.
        if (unresolved && (!resolved(d) || !resolved(dims_of(g, cur.value)))) *unresolved = true;
        break;
      }
      next.value = in;
      next.layout = *l;
    } else if (o.scale && (is(g, n, "Mul") || is(g, n, "Div"))) {
      ValueId a = g.input(n, 0), b = g.input(n, 1);
      std::optional<double> c = scalar(g, b);
      ValueId other = a;
      if (!c && is(g, n, "Mul")) {
        c = scalar(g, a);
        other = b;
      }
      if (!c || *c == 0) break;
      auto od = dims_of(g, other), nd = dims_of(g, g.output(n, 0));
      if (!od || !nd || *od != *nd) break;  // the constant must not broadcast the tensor
      next.value = other;
      next.scale = is(g, n, "Mul") ? cur.scale * *c : cur.scale / *c;
    } else {
      break;
    }
    if (!had_split && sizes.has('b') && sizes.has('h')) {
      for (Step& s : steps) s.layout = split_x(s.layout, sizes);
      shared.of['b'] = sizes.of['b'];
      shared.of['h'] = sizes.of['h'];
    }
    next.layout = split_x(next.layout, sizes);
    steps.push_back(next);
  }
  return steps;
}

std::vector<Step> walk_forward(const Graph& g, const Uses& uses, ValueId v, const Layout& start, Sizes& sizes,
                               bool* unresolved) {
  std::vector<Step> steps{{v, split_x(start, sizes), 1, 1, {}}};
  for (int guard = 0; guard < 32; ++guard) {
    const Step cur = steps.back();
    NodeId n = single_consumer(g, uses, cur.value);
    if (!n.valid() && unresolved && !uses.is_graph_output(cur.value)) {
      // One layout op and Shape readers: the raw export's shape chain (BERT computes the merged
      // shape from the permuted context), simplified in a later round.
      int layout_readers = 0, shape_readers = 0;
      for (const Use& u : uses.of(cur.value)) {
        if (is(g, u.node, "Shape"))
          ++shape_readers;
        else if (is(g, u.node, "Transpose") || reshape_like(g, u.node))
          ++layout_readers;
      }
      if (shape_readers > 0 && layout_readers == 1 &&
          shape_readers + layout_readers == static_cast<int>(uses.count(cur.value)))
        *unresolved = true;
    }
    if (!n.valid() || g.input(n, 0) != cur.value) break;
    Step next = cur;
    next.nodes = {n};
    next.value = g.output(n, 0);
    const bool had_split = sizes.has('b') && sizes.has('h');
    if (is(g, n, "Transpose")) {
      auto out = through_transpose(g, n, cur.layout, /*forward=*/true);
      if (!out) break;
      next.layout = std::move(*out);
    } else if (reshape_like(g, n)) {
      auto d = dims_of(g, next.value);
      if (!d) {
        if (unresolved) *unresolved = true;
        break;
      }
      auto l = regroup(cur.layout, *d, sizes);
      if (!l) {
        if (unresolved && !resolved(d)) *unresolved = true;
        break;
      }
      next.layout = *l;
    } else {
      break;
    }
    if (!had_split && sizes.has('b') && sizes.has('h'))
      for (Step& s : steps) s.layout = split_x(s.layout, sizes);
    steps.push_back(next);
  }
  return steps;
}

namespace {

// A constant Reshape target turning dims `in` into `out`, or nullopt (see Conversion).
std::optional<std::vector<int64_t>> reshape_target(const std::vector<SymDim>& in, const std::vector<SymDim>& out) {
  std::vector<int64_t> t;
  bool minus = false;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].is_constant()) {
      if (out[i].value() == 0) return std::nullopt;
      t.push_back(out[i].value());
    } else if (i < in.size() && in[i] == out[i]) {
      t.push_back(0);
    } else if (!minus) {
      minus = true;
      t.push_back(-1);
    } else {
      return std::nullopt;
    }
  }
  return t;
}

std::vector<SymDim> dims_for(const Layout& l, const SizeOf& size) {
  std::vector<SymDim> d;
  for (const auto& a : l) {
    SymDim p = SymDim::constant(1);
    for (char c : a) p = p * size(c);
    d.push_back(p);
  }
  return d;
}

}  // namespace

std::optional<Conversion> plan_conversion(const Layout& src, const Layout& dst, const SizeOf& size) {
  const std::string fs = flat(src), fd = flat(dst);
  std::string a = fs, b = fd;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  if (a != b || std::adjacent_find(a.begin(), a.end()) != a.end()) return std::nullopt;
  Conversion c;
  if (src == dst) return c;
  // Blocks: maximal runs of factors adjacent and in the same order on both sides.
  Layout blocks_dst;
  for (size_t i = 0; i < fd.size(); ++i) {
    if (i == 0 || fs.find(fd[i]) != fs.find(fd[i - 1]) + 1) blocks_dst.push_back("");
    blocks_dst.back() += fd[i];
  }
  Layout blocks_src = blocks_dst;
  std::sort(blocks_src.begin(), blocks_src.end(),
            [&](const std::string& x, const std::string& y) { return fs.find(x[0]) < fs.find(y[0]); });
  std::vector<int64_t> perm;
  bool identity = true;
  for (size_t i = 0; i < blocks_dst.size(); ++i) {
    auto it = std::find(blocks_src.begin(), blocks_src.end(), blocks_dst[i]);
    perm.push_back(it - blocks_src.begin());
    identity &= perm.back() == static_cast<int64_t>(i);
  }
  const auto src_d = dims_for(src, size), dst_d = dims_for(dst, size);
  if (identity) {  // one Reshape straight to dst
    auto t = reshape_target(src_d, dst_d);
    if (!t) return std::nullopt;
    c.reshape1 = t;
    return c;
  }
  const auto bs_d = dims_for(blocks_src, size);
  if (src != blocks_src) {
    auto t = reshape_target(src_d, bs_d);
    if (!t) return std::nullopt;
    c.reshape1 = t;
  }
  c.perm = perm;
  if (dst != blocks_dst) {
    std::vector<SymDim> bd;
    for (int64_t p : perm) bd.push_back(bs_d[static_cast<size_t>(p)]);
    auto t = reshape_target(bd, dst_d);
    if (!t) return std::nullopt;
    c.reshape2 = t;
  }
  return c;
}

ValueId emit(Builder& b, ValueId v, const Conversion& c) {
  auto reshape = [&](const std::vector<int64_t>& t) {
    v = b.named("heads_reshaped", "Reshape", {v, b.ints("heads_shape", t)});
  };
  if (c.reshape1) reshape(*c.reshape1);
  if (!c.perm.empty()) v = b.named("heads_transposed", "Transpose", {v}, {NewAttr::Ints("perm", c.perm)});
  if (c.reshape2) reshape(*c.reshape2);
  return v;
}

bool replace_block(Builder& b, std::span<const NodeId> block, ValueId replaced, std::string_view op,
                   std::vector<ValueId> inputs, std::vector<NewAttr> attrs, const Conversion& out_conv,
                   std::string_view hint) {
  const ValueId y = b.named(hint, op, std::move(inputs), std::move(attrs));
  b.edits().replace_uses(replaced, emit(b, y, out_conv));
  kill_unused(b.edits(), block, std::span<const ValueId>(&replaced, 1));
  return true;
}

void kill_unused(Edits& e, std::span<const NodeId> block, std::span<const ValueId> replaced) {
  std::set<NodeId> dead;
  for (bool changed = true; changed;) {
    changed = false;
    for (NodeId n : block) {
      if (!n.valid() || dead.count(n)) continue;
      bool unused = true;
      for (ValueId o : e.g.outputs(n)) {
        if (!o.valid() || std::find(replaced.begin(), replaced.end(), o) != replaced.end()) continue;
        if (e.uses.is_graph_output(o)) unused = false;
        for (const Use& u : e.uses.of(o))
          if (u.slot == Use::kImplicit || !dead.count(u.node)) unused = false;
      }
      if (unused) {
        dead.insert(n);
        changed = true;
      }
    }
  }
  for (NodeId n : dead) e.kill(n);
}

}  // namespace onnxforge::passes::heads
