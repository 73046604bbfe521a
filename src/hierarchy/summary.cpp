#include "hierarchy/summary.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>

#include "ir/uses.h"

namespace onnxforge::hier {
namespace {

template <class F>
void for_each_live_graph(const Model& model, F&& f) {
  for (size_t gi = 0; gi < model.graph_count(); ++gi) {
    const Graph& g = model.graph(GraphId(static_cast<uint32_t>(gi)));
    if (!g.detached()) f(g);
  }
}

int module_depth(std::string_view m) {
  return m.empty() ? 0 : 1 + static_cast<int>(std::count(m.begin(), m.end(), '.'));
}

std::string percent(uint64_t a, uint64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", b ? 100.0 * double(a) / double(b) : 100.0);
  return buf;
}

void add_to_group(std::map<std::pair<std::string, std::string>, NodeGroup>& groups, std::string why, std::string op,
                  std::string_view name) {
  NodeGroup& gr = groups[{why, op}];
  gr.why = std::move(why);
  gr.op = std::move(op);
  ++gr.count;
  if (gr.examples.size() < 3) gr.examples.emplace_back(name);
}

std::vector<NodeGroup> sorted_groups(std::map<std::pair<std::string, std::string>, NodeGroup>& groups) {
  std::vector<NodeGroup> out;
  for (auto& [k, v] : groups) out.push_back(std::move(v));
  std::stable_sort(out.begin(), out.end(), [](const NodeGroup& a, const NodeGroup& b) { return a.count > b.count; });
  return out;
}

// Tree order: a module sorts right after its parent; siblings numerically by index.
bool tree_less(const std::string& a, const std::string& b) {
  auto pa = split(a, '.'), pb = split(b, '.');
  if (a.empty()) return !b.empty();
  if (b.empty()) return false;
  for (size_t i = 0; i < pa.size() && i < pb.size(); ++i) {
    if (pa[i] == pb[i]) continue;
    bool da = !pa[i].empty() && std::all_of(pa[i].begin(), pa[i].end(), ::isdigit);
    bool db = !pb[i].empty() && std::all_of(pb[i].begin(), pb[i].end(), ::isdigit);
    if (da && db) return std::stoull(std::string(pa[i])) < std::stoull(std::string(pb[i]));
    return pa[i] < pb[i];
  }
  return pa.size() < pb.size();
}

}  // namespace

bool HierarchySummary::thresholds_met() const {
  return std::all_of(categories.begin(), categories.end(), [](const CategoryCoverage& c) { return c.ok(); });
}

HierarchySummary summarize_hierarchy(const Model& model, const TagReport& report) {
  HierarchySummary s;
  std::map<std::string, ModuleStats> modules;
  std::array<CategoryCoverage, static_cast<size_t>(OpCategory::kCount)> cats;
  std::map<std::pair<std::string, std::string>, NodeGroup> untagged, by_rule;
  for_each_live_graph(model, [&](const Graph& g) {
    for (NodeId n : g.nodes()) {
      TagSource src = report.at(g.id(), n);
      bool tagged = g.scope(n) != 0, direct = tagged && is_direct(src);
      ++s.nodes;
      s.tagged += tagged;
      s.direct += direct;
      ++s.by_source[std::string(source_name(src))];
      OpCategory c = categorize(str(g.domain(n)), str(g.op_type(n)));
      CategoryCoverage& cc = cats[static_cast<size_t>(c)];
      cc.category = c;
      ++cc.nodes;
      cc.tagged += tagged;
      cc.direct += direct;
      if (is_compute(c)) {
        ++s.compute_nodes;
        s.compute_tagged += tagged;
        s.compute_direct += direct;
      }
      std::string op(str(g.op_type(n)));
      std::string_view name = str(g.node_name(n));
      NoTagReason why = report.reason[g.id().index()][n.index()];
      if (!tagged)
        add_to_group(untagged, std::string(reason_name(why)), op, name);
      else if (!direct)
        add_to_group(by_rule, std::string(reason_name(why)) + " -> " + std::string(source_name(src)), op, name);
      for (Sym t : model.tags(g.scope(n))) {
        ModuleStats& m = modules[std::string(tag_module(t))];
        ++m.nodes;
        if (m.class_path.empty()) m.class_path = tag_class_path(t);
      }
    }
  });
  // every ancestor of a tagged module is in the tree
  std::vector<std::string> names;
  for (auto& [name, _] : modules) names.push_back(name);
  for (const std::string& name : names)
    for (std::string p = name; !p.empty();) {
      p = parent_module(p);
      modules.try_emplace(p);
    }
  for (auto& [name, m] : modules) {
    m.module = name;
    m.depth = module_depth(name);
    m.total = m.nodes;
  }
  std::vector<std::string> order;
  for (auto& [name, _] : modules) order.push_back(name);
  std::sort(order.begin(), order.end(), [](auto& a, auto& b) { return module_depth(a) > module_depth(b); });
  for (const std::string& name : order)
    if (!name.empty()) modules[parent_module(name)].total += modules[name].total;
  std::sort(order.begin(), order.end(), tree_less);
  for (const std::string& name : order) s.modules.push_back(modules[name]);
  for (size_t i = 0; i < cats.size(); ++i) {
    cats[i].category = static_cast<OpCategory>(i);
    cats[i].threshold = category_threshold(cats[i].category);
    if (cats[i].nodes) s.categories.push_back(cats[i]);
  }
  s.untagged = sorted_groups(untagged);
  s.by_rule = sorted_groups(by_rule);
  return s;
}

nlohmann::json HierarchySummary::to_json() const {
  using nlohmann::json;
  json j;
  j["nodes"] = nodes;
  j["tagged"] = tagged;
  j["direct"] = direct;
  j["coverage"] = nodes ? double(tagged) / double(nodes) : 1.0;
  j["compute"] = {{"nodes", compute_nodes},
                  {"tagged", compute_tagged},
                  {"direct", compute_direct},
                  {"coverage", compute_nodes ? double(compute_tagged) / double(compute_nodes) : 1.0},
                  {"direct_coverage", compute_nodes ? double(compute_direct) / double(compute_nodes) : 1.0}};
  j["by_source"] = by_source;
  j["thresholds_met"] = thresholds_met();
  json cats = json::array();
  for (const CategoryCoverage& c : categories) {
    json e = {{"category", category_name(c.category)},
              {"nodes", c.nodes},
              {"tagged", c.tagged},
              {"direct", c.direct},
              {"coverage", c.nodes ? double(c.tagged) / double(c.nodes) : 1.0},
              {"ok", c.ok()}};
    e["threshold"] = c.threshold ? json(*c.threshold) : json(nullptr);
    cats.push_back(e);
  }
  j["categories"] = cats;
  json mods = json::array();
  for (const ModuleStats& m : modules)
    mods.push_back({{"module", m.module}, {"class_path", m.class_path}, {"nodes", m.nodes}, {"total", m.total}});
  j["modules"] = mods;
  auto groups = [](const std::vector<NodeGroup>& v) {
    json a = json::array();
    for (const NodeGroup& g : v)
      a.push_back({{"why", g.why}, {"op", g.op}, {"count", g.count}, {"examples", g.examples}});
    return a;
  };
  j["untagged"] = groups(untagged);
  j["tagged_by_rule"] = groups(by_rule);
  return j;
}

std::string format_hierarchy(const HierarchySummary& s, bool tree, bool color) {
  std::ostringstream os;
  const char* bold = color ? "\033[1m" : "";
  const char* red = color ? "\033[31m" : "";
  const char* reset = color ? "\033[0m" : "";
  os << bold << "Tagged " << s.tagged << "/" << s.nodes << " nodes (" << percent(s.tagged, s.nodes) << "), " << s.direct
     << " directly (" << percent(s.direct, s.nodes) << "); compute ops " << s.compute_tagged << "/" << s.compute_nodes
     << " (" << percent(s.compute_tagged, s.compute_nodes) << ")" << reset << "\n";
  os << "Sources:";
  for (auto& [k, v] : s.by_source) os << " " << k << "=" << v;
  os << "\n\nCoverage by category (R17):\n";
  for (const CategoryCoverage& c : s.categories) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-20s %6llu/%-6llu %7s  direct %7s  %s",
                  std::string(category_name(c.category)).c_str(), (unsigned long long)c.tagged,
                  (unsigned long long)c.nodes, percent(c.tagged, c.nodes).c_str(), percent(c.direct, c.nodes).c_str(),
                  c.threshold ? (c.ok() ? ("ok (>= " + percent(uint64_t(*c.threshold * 100), 100) + ")").c_str()
                                        : ("BELOW " + percent(uint64_t(*c.threshold * 100), 100)).c_str())
                              : "context-dependent");
    os << (c.ok() ? "" : red) << line << (c.ok() ? "" : reset) << "\n";
  }
  if (tree) {
    os << "\nModule tree (nodes in module / in subtree):\n";
    for (const ModuleStats& m : s.modules) {
      os << std::string(2 + 2 * m.depth, ' ');
      std::string_view last = m.module.empty() ? "(root)" : std::string_view(m.module).substr(m.module.rfind('.') + 1);
      os << last;
      if (!m.class_path.empty()) os << " [" << last_class(m.class_path) << "]";
      os << "  " << m.nodes << "/" << m.total << "\n";
    }
  } else {
    os << "\n" << s.modules.size() << " modules (--tree prints them)\n";
  }
  auto print_groups = [&](const char* title, const std::vector<NodeGroup>& groups) {
    if (groups.empty()) return;
    os << "\n" << title << "\n";
    for (const NodeGroup& g : groups) {
      os << "  " << g.count << " x " << g.op << ": " << g.why << "  e.g.";
      for (const std::string& e : g.examples) os << " " << e;
      os << "\n";
    }
  };
  print_groups("Untagged nodes by why:", s.untagged);
  print_groups("Nodes tagged by rule (no direct tag) by why:", s.by_rule);
  return os.str();
}

nlohmann::json consuming_modules(const Model& model) {
  using nlohmann::json;
  json tensors = json::object(), nodes = json::object();
  for_each_live_graph(model, [&](const Graph& g) {
    Uses uses(g);
    for (uint32_t vi = 0; vi < g.value_count(); ++vi) {
      ValueId v(vi);
      if (uses.count(v) == 0) continue;
      std::set<std::string> mods;
      for (const Use& u : uses.of(v))
        for (const std::string& m : modules_of(model, g.scope(u.node))) mods.insert(m);
      if (!mods.empty()) tensors[std::string(str(g.value_name(v)))] = mods;
    }
    for (NodeId n : g.nodes()) {
      std::set<std::string> mods;
      for (ValueId v : g.outputs(n))
        if (v.valid())
          for (const Use& u : uses.of(v))
            for (const std::string& m : modules_of(model, g.scope(u.node))) mods.insert(m);
      std::string name(str(g.node_name(n)));
      if (name.empty()) name = "#" + std::to_string(g.id().index()) + ":" + std::to_string(n.index());
      nodes[name] = {{"modules", modules_of(model, g.scope(n))}, {"consumed_by", mods}};
    }
  });
  return {{"tensors", tensors}, {"nodes", nodes}};
}

std::string format_consumers(const nlohmann::json& c, size_t limit) {
  std::ostringstream os;
  size_t shared = 0, shown = 0;
  for (auto it = c["tensors"].begin(); it != c["tensors"].end(); ++it)
    if (it->size() > 1) ++shared;
  os << "\nTensors consumed by more than one module: " << shared << " of " << c["tensors"].size() << "\n";
  for (auto it = c["tensors"].begin(); it != c["tensors"].end() && shown < limit; ++it) {
    if (it->size() < 2) continue;
    ++shown;
    os << "  " << it.key() << " ->";
    for (const auto& m : *it) os << " " << (m.get<std::string>().empty() ? "(root)" : m.get<std::string>());
    os << "\n";
  }
  if (shared > shown) os << "  ... (--json lists all tensors and nodes)\n";
  return os.str();
}

}  // namespace onnxforge::hier
