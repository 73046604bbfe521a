#include "ir/rewrite.h"

#include <algorithm>
#include <string>

#include "ir/error.h"
#include "ir/uses.h"

namespace onnxforge {

namespace {

bool name_taken(const Model& m, const Graph& g, Sym name) {
  for (const Graph* s = &g;; s = &m.graph(s->parent())) {
    if (s->find_value(str(name))) return true;
    if (!s->parent().valid()) return false;
  }
}

}  // namespace

Sym fresh_name(const Graph& g, std::string_view hint) {
  uint64_t& counter = g.model().next_fresh_name;
  std::string base(hint.empty() ? std::string_view("onnxforge") : hint);
  for (;;) {
    std::string candidate = base + "__" + std::to_string(counter++);
    Sym s = intern(candidate);
    if (!name_taken(g.model(), g, s)) return s;
  }
}

// ------------------------------------------------------------------ recording

ValueId Rewrite::new_value(std::string_view hint) { return g_.add_value(fresh_name(g_, hint)); }

ValueId Rewrite::new_initializer(std::string_view hint, TensorId t) {
  ValueId v = new_value(hint);
  g_.model().tensors.rename(t, g_.value_name(v));
  g_.set_initializer(v, t);
  return v;
}

NodeId Rewrite::add_node(std::string_view op_type, std::vector<ValueId> inputs, std::vector<ValueId> outputs,
                         std::vector<NewAttr> attrs, std::span<const NodeId> tags_from, std::string_view domain,
                         Sym name) {
  for (ValueId v : outputs)
    if (v.valid() && g_.producer(v).valid() && !killed(g_.producer(v)))
      fail("internal: add_node(", op_type, ") would give value '", str(g_.value_name(v)), "' a second producer");
  NodeId n = g_.add_node(intern(op_type), intern(domain), name.empty() ? fresh_name(g_, op_type) : name, inputs,
                         outputs, attrs);
  if (!tags_from.empty()) {
    std::vector<uint32_t> sets;
    for (NodeId t : tags_from) sets.push_back(g_.scope(t));
    g_.set_scope(n, g_.model().union_tags(sets));
  }
  added_.push_back(n);
  return n;
}

void Rewrite::replace_uses(ValueId from, ValueId to) {
  to = resolve(to);  // a -> b then b -> a must not make a cycle
  if (from == to) return;
  replacements_[from] = to;
}

void Rewrite::set_input(NodeId n, size_t i, ValueId v) { input_edits_.emplace_back(n, i, v); }

void Rewrite::kill(NodeId n) {
  if (killed(n)) return;
  kills_.push_back(n);
  if (killed_.size() <= n.index()) killed_.resize(std::max<size_t>(g_.node_capacity(), n.index() + 1), 0);
  killed_[n.index()] = 1;
}

bool Rewrite::killed(NodeId n) const { return n.index() < killed_.size() && killed_[n.index()]; }

// ------------------------------------------------------------------ commit

ValueId Rewrite::resolve(ValueId v) const {
  for (int guard = 0; guard < 1 << 20; ++guard) {
    auto it = replacements_.find(v);
    if (it == replacements_.end()) return v;
    v = it->second;
  }
  fail("internal: cyclic value replacement in a rewrite");
}

void Rewrite::apply_input_edits() {
  for (auto& [n, i, v] : input_edits_) g_.set_input(n, i, v);
}

void Rewrite::apply_replacements() {
  if (replacements_.empty()) return;
  for (uint32_t i = 0; i < g_.node_inputs_.size(); ++i)
    if (g_.node_inputs_[i].valid()) g_.node_inputs_[i] = resolve(g_.node_inputs_[i]);
  // Subgraph captures that read a replaced value follow it.
  Model& m = g_.model();
  for (size_t gi = 0; gi < m.graph_count(); ++gi) {
    Graph& child = m.graph(GraphId(static_cast<uint32_t>(gi)));
    if (child.parent() != g_.id()) continue;
    for (ValueId c : child.captures()) child.set_outer(c, resolve(child.outer(c)));
  }
  keep_output_names();
}

void Rewrite::keep_output_names() {
  std::vector<ValueId> outs = g_.graph_outputs();
  bool changed = false;
  for (ValueId& out : outs) {
    ValueId to = resolve(out);
    if (to == out) continue;
    changed = true;
    ValueId old = out;
    bool other_output = std::count(outs.begin(), outs.end(), to) > 0 || g_.is_graph_output(to);
    bool renamable = g_.producer(to).valid() && !g_.is_graph_input(to) && !g_.is_initializer(to) &&
                     !g_.outer(to).valid() && !other_output;
    Sym name = g_.value_name(old);
    // The old value loses its name (it stays only if its producer is not being killed).
    g_.set_value_name(old, fresh_name(g_, str(name)));
    if (renamable) {
      g_.set_value_name(to, name);
      // The interface keeps its declared type: a graph output declared [.., total_sequence, ..]
      // stays so when the value taking its name was inferred as [.., past_sequence+sequence, ..]
      // (dims the declaration leaves unnamed take the inferred ones).
      const bool same_rank = g_.has_shape(old) && g_.has_shape(to) && g_.shape(old).size() == g_.shape(to).size();
      if (g_.has_shape(old) && (same_rank || !g_.has_type(to))) {
        std::vector<Dim> dims(g_.shape(old).begin(), g_.shape(old).end());
        if (same_rank)
          for (size_t i = 0; i < dims.size(); ++i)
            if (!dims[i].known() && dims[i].param.empty()) dims[i] = g_.shape(to)[i];
        const DType t = g_.dtype(old) != DType::Undefined ? g_.dtype(old) : g_.dtype(to);
        g_.set_type(to, t, dims);
      } else if (!g_.has_type(to) && g_.has_type(old)) {
        g_.set_dtype(to, g_.dtype(old));
      }
      out = to;
    } else {
      ValueId keep = g_.add_value(name);
      if (g_.has_shape(old))
        g_.set_type(keep, g_.dtype(old), g_.shape(old));
      else if (g_.has_type(old))
        g_.set_dtype(keep, g_.dtype(old));
      NodeId id = g_.add_node(intern("Identity"), Sym{}, fresh_name(g_, "Identity"), std::span<const ValueId>(&to, 1),
                              std::span<const ValueId>(&keep, 1));
      if (g_.producer(old).valid()) g_.set_scope(id, g_.scope(g_.producer(old)));
      out = keep;
    }
  }
  if (changed) g_.set_graph_outputs(std::move(outs));
}

void Rewrite::check_no_dangling_reads() const {
  Uses uses(g_);
  for (NodeId n : kills_) {
    for (ValueId v : g_.outputs(n)) {
      if (!v.valid() || g_.producer(v) != n) continue;  // another node of the batch writes it now
      for (const Use& u : uses.of(v))
        if (!killed(u.node))
          fail("internal: rewrite removes node '", str(g_.node_name(n)), "' (", str(g_.op_type(n)), ") but node '",
               str(g_.node_name(u.node)), "' (", str(g_.op_type(u.node)), ") still reads its output '",
               str(g_.value_name(v)), "'");
      if (uses.is_graph_output(v))
        fail("internal: rewrite removes node '", str(g_.node_name(n)), "' whose output '", str(g_.value_name(v)),
             "' is a graph output");
    }
  }
}

int64_t Rewrite::commit() {
  int64_t before = g_.node_count();
  apply_input_edits();
  apply_replacements();
  check_no_dangling_reads();
  for (NodeId n : kills_) g_.kill_node(n);
  compact(g_);
  kills_.clear();
  added_.clear();
  killed_.clear();
  replacements_.clear();
  input_edits_.clear();
  return before - static_cast<int64_t>(g_.node_count());
}

}  // namespace onnxforge

namespace onnxforge {

namespace {

template <class T>
void keep_rows(std::vector<T>& column, const std::vector<uint32_t>& old_of_new) {
  std::vector<T> out;
  out.reserve(old_of_new.size());
  for (uint32_t old : old_of_new) out.push_back(column[old]);
  column.swap(out);
}

}  // namespace

void compact(Graph& g) {
  Model& m = g.model();
  // ---- nodes
  const uint32_t ncap = g.node_capacity();
  std::vector<uint32_t> node_map(ncap, NodeId::kNone), node_old;
  for (uint32_t i = 0; i < ncap; ++i)
    if (g.alive_[i]) {
      node_map[i] = static_cast<uint32_t>(node_old.size());
      node_old.push_back(i);
    }

  // ---- values: keep what is defined, declared in the interface, or read
  const uint32_t nval = g.value_count();
  std::vector<uint8_t> keep(nval, 0);
  for (uint32_t n : node_old) {
    for (uint32_t k = 0; k < g.in_count_[n]; ++k)
      if (ValueId v = g.node_inputs_[g.in_begin_[n] + k]; v.valid()) keep[v.index()] = 1;
    for (uint32_t k = 0; k < g.out_count_[n]; ++k)
      if (ValueId v = g.node_outputs_[g.out_begin_[n] + k]; v.valid()) keep[v.index()] = 1;
  }
  for (ValueId v : g.inputs_) keep[v.index()] = 1;
  for (ValueId v : g.outputs_) keep[v.index()] = 1;
  for (ValueId v : g.initializers_) keep[v.index()] = 1;
  for (auto& [v, bytes] : g.sparse_) keep[v.index()] = 1;
  for (ValueId v : g.captures_) keep[v.index()] = 1;
  std::vector<Graph*> children;
  for (size_t gi = 0; gi < m.graph_count(); ++gi) {
    Graph& c = m.graph(GraphId(static_cast<uint32_t>(gi)));
    if (c.parent() != g.id() || c.detached_) continue;
    if (!c.owner_node_.valid() || !g.alive_[c.owner_node_.index()]) {
      c.detached_ = true;
      continue;
    }
    children.push_back(&c);
    for (ValueId cap : c.captures_)
      if (c.outer_[cap.index()].valid()) keep[c.outer_[cap.index()].index()] = 1;
  }
  std::vector<uint32_t> value_map(nval, ValueId::kNone), value_old;
  for (uint32_t v = 0; v < nval; ++v)
    if (keep[v]) {
      value_map[v] = static_cast<uint32_t>(value_old.size());
      value_old.push_back(v);
    }
  auto mv = [&](ValueId v) { return v.valid() ? ValueId(value_map[v.index()]) : v; };
  auto mn = [&](NodeId n) { return n.valid() && n.index() < ncap ? NodeId(node_map[n.index()]) : NodeId{}; };

  // ---- rebuild node columns and flat arrays
  std::vector<ValueId> ins, outs;
  std::vector<Attr> attrs;
  std::vector<MetadataEntry> meta;
  std::vector<uint32_t> in_begin, out_begin, attr_begin, meta_begin;
  for (uint32_t n : node_old) {
    in_begin.push_back(static_cast<uint32_t>(ins.size()));
    for (uint32_t k = 0; k < g.in_count_[n]; ++k) ins.push_back(mv(g.node_inputs_[g.in_begin_[n] + k]));
    out_begin.push_back(static_cast<uint32_t>(outs.size()));
    for (uint32_t k = 0; k < g.out_count_[n]; ++k) outs.push_back(mv(g.node_outputs_[g.out_begin_[n] + k]));
    attr_begin.push_back(static_cast<uint32_t>(attrs.size()));
    attrs.insert(attrs.end(), g.attrs_.begin() + g.attr_begin_[n],
                 g.attrs_.begin() + g.attr_begin_[n] + g.attr_count_[n]);
    meta_begin.push_back(static_cast<uint32_t>(meta.size()));
    meta.insert(meta.end(), g.metadata_.begin() + g.meta_begin_[n],
                g.metadata_.begin() + g.meta_begin_[n] + g.meta_count_[n]);
  }
  keep_rows(g.op_type_, node_old);
  keep_rows(g.domain_, node_old);
  keep_rows(g.node_name_, node_old);
  keep_rows(g.overload_, node_old);
  keep_rows(g.in_count_, node_old);
  keep_rows(g.out_count_, node_old);
  keep_rows(g.attr_count_, node_old);
  keep_rows(g.meta_count_, node_old);
  keep_rows(g.node_extra_begin_, node_old);
  keep_rows(g.node_extra_count_, node_old);
  keep_rows(g.scope_, node_old);
  keep_rows(g.alive_, node_old);
  keep_rows(g.present_, node_old);
  g.in_begin_ = std::move(in_begin);
  g.out_begin_ = std::move(out_begin);
  g.attr_begin_ = std::move(attr_begin);
  g.meta_begin_ = std::move(meta_begin);
  g.node_inputs_ = std::move(ins);
  g.node_outputs_ = std::move(outs);
  g.attrs_ = std::move(attrs);
  g.metadata_ = std::move(meta);
  g.live_nodes_ = static_cast<uint32_t>(node_old.size());

  // ---- rebuild value columns
  for (NodeId& p : g.producer_) p = mn(p);
  keep_rows(g.value_name_, value_old);
  keep_rows(g.dtype_, value_old);
  keep_rows(g.rank_, value_old);
  keep_rows(g.dim_begin_, value_old);
  keep_rows(g.producer_, value_old);
  keep_rows(g.init_tensor_, value_old);
  keep_rows(g.outer_, value_old);
  keep_rows(g.flags_, value_old);
  keep_rows(g.type_raw_, value_old);
  keep_rows(g.value_extra_begin_, value_old);
  keep_rows(g.value_extra_count_, value_old);
  auto remap_list = [&](std::vector<ValueId>& list) {
    std::vector<ValueId> out;
    for (ValueId v : list)
      if (v.valid() && value_map[v.index()] != ValueId::kNone) out.push_back(mv(v));
    list.swap(out);
  };
  remap_list(g.inputs_);
  remap_list(g.outputs_);
  remap_list(g.value_info_);
  remap_list(g.initializers_);
  remap_list(g.captures_);
  for (auto& [v, bytes] : g.sparse_) v = mv(v);
  g.by_name_.clear();
  for (uint32_t v = 0; v < g.value_count(); ++v)
    if (!g.value_name_[v].empty()) g.by_name_[g.value_name_[v]] = ValueId(v);

  // ---- children point into g
  for (Graph* c : children) {
    c->owner_node_ = mn(c->owner_node_);
    for (ValueId cap : c->captures_) c->outer_[cap.index()] = mv(c->outer_[cap.index()]);
  }
}

}  // namespace onnxforge
