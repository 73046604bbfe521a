#include "hierarchy/tag_rules.h"

#include <unordered_map>

#include "ir/topo.h"
#include "ir/uses.h"

namespace onnxforge::hier {

ClassPaths::ClassPaths(const Model& model) {
  for (uint32_t s = 1; s < model.tag_set_count(); ++s)
    for (Sym t : model.tags(s)) {
      std::string_view c = tag_class_path(t);
      if (!c.empty()) by_module_.try_emplace(std::string(tag_module(t)), std::string(c));
    }
}

Sym ClassPaths::tag_for(const std::string& module) const {
  auto it = by_module_.find(module);
  return make_tag(module, it == by_module_.end() ? std::string_view{} : std::string_view(it->second));
}

namespace {

struct Neighbours {
  std::vector<uint32_t> sets;  // tag sets of tagged neighbours
  bool all_tagged = true;
  bool any = false;
};

class GraphRules {
 public:
  GraphRules(Model& model, Graph& g, TagReport& report, const ClassPaths& classes)
      : model_(model), g_(g), uses_(g), order_(topological_order(g)), report_(report), classes_(classes) {}

  // One sweep of each rule; returns whether anything changed.
  bool sweep() {
    bool changed = false;
    for (auto it = order_.rbegin(); it != order_.rend(); ++it)
      if (untagged(*it)) changed |= try_single(*it, consumers(*it), TagSource::Consumers);
    for (NodeId n : order_)
      if (untagged(n)) changed |= try_single(n, producers(n), TagSource::Producers);
    return changed;
  }

  bool sweep_common_ancestor() {
    bool changed = false;
    for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
      NodeId n = *it;
      if (!untagged(n)) continue;
      Neighbours a = consumers(n), b = producers(n);
      a.sets.insert(a.sets.end(), b.sets.begin(), b.sets.end());
      if (a.sets.empty()) continue;
      std::optional<std::string> lca;
      for (uint32_t s : a.sets)
        for (const std::string& m : modules_of(model_, s)) lca = lca ? common_ancestor(*lca, m) : m;
      set(n, model_.tag_set({classes_.tag_for(*lca)}), TagSource::CommonAncestor);
      changed = true;
    }
    return changed;
  }

 private:
  bool untagged(NodeId n) const { return g_.scope(n) == 0; }

  void set(NodeId n, uint32_t tags, TagSource why) {
    g_.set_scope(n, tags);
    report_.source[g_.id().index()][n.index()] = why;
  }

  Neighbours consumers(NodeId n) const {
    Neighbours out;
    for (ValueId v : g_.outputs(n)) {
      if (!v.valid()) continue;
      for (const Use& u : uses_.of(v)) add(out, u.node);
    }
    return out;
  }

  Neighbours producers(NodeId n) const {
    Neighbours out;
    for (ValueId v : g_.inputs(n))
      if (v.valid() && g_.producer(v).valid()) add(out, g_.producer(v));
    for (ValueId v : g_.implicit_inputs(n))
      if (v.valid() && g_.producer(v).valid()) add(out, g_.producer(v));
    return out;
  }

  void add(Neighbours& out, NodeId m) const {
    out.any = true;
    if (g_.scope(m) == 0)
      out.all_tagged = false;
    else
      out.sets.push_back(g_.scope(m));
  }

  // All neighbours tagged and in one module: take that module (with a class path if known).
  bool try_single(NodeId n, const Neighbours& nb, TagSource why) {
    if (!nb.any || !nb.all_tagged) return false;
    std::optional<Sym> tag;
    std::string module;
    for (uint32_t s : nb.sets)
      for (Sym t : model_.tags(s)) {
        if (!tag) {
          tag = t;
          module = tag_module(t);
        } else if (tag_module(t) != module) {
          return false;
        } else if (tag_class_path(*tag).empty()) {
          tag = t;
        }
      }
    if (!tag) return false;
    set(n, model_.tag_set({*tag}), why);
    return true;
  }

  Model& model_;
  Graph& g_;
  Uses uses_;
  std::vector<NodeId> order_;
  TagReport& report_;
  const ClassPaths& classes_;
};

void inherit_from_owner(Model& model, Graph& g, TagReport& report) {
  const Graph& parent = model.graph(g.parent());
  uint32_t owner_tags = parent.scope(g.owner_node());
  if (owner_tags == 0) return;
  for (NodeId n : g.nodes())
    if (g.scope(n) == 0) {
      g.set_scope(n, owner_tags);
      report.source[g.id().index()][n.index()] = TagSource::Parent;
    }
}

}  // namespace

void apply_tag_rules(Model& model, TagReport& report) {
  ClassPaths classes(model);
  // Owners first take what their subgraphs say (an If whose branches are tagged).
  for (size_t gi = model.graph_count(); gi-- > 1;) {
    Graph& g = model.graph(GraphId(static_cast<uint32_t>(gi)));
    if (g.detached() || !g.parent().valid()) continue;
    Graph& parent = model.graph(g.parent());
    NodeId owner = g.owner_node();
    if (!owner.valid() || parent.scope(owner) != 0) continue;
    std::optional<std::string> lca;
    for (NodeId n : g.nodes())
      for (const std::string& m : modules_of(model, g.scope(n))) lca = lca ? common_ancestor(*lca, m) : m;
    if (lca) {
      parent.set_scope(owner, model.tag_set({classes.tag_for(*lca)}));
      report.source[g.parent().index()][owner.index()] = TagSource::CommonAncestor;
    }
  }
  for (size_t gi = 0; gi < model.graph_count(); ++gi) {
    Graph& g = model.graph(GraphId(static_cast<uint32_t>(gi)));
    if (g.detached() || g.node_count() == 0) continue;
    GraphRules rules(model, g, report, classes);
    for (int round = 0; round < 8; ++round) {
      while (rules.sweep()) {}
      if (!rules.sweep_common_ancestor()) break;
    }
    if (g.parent().valid()) inherit_from_owner(model, g, report);
  }
}

}  // namespace onnxforge::hier
