#include "hierarchy/diff.h"

#include <algorithm>
#include <set>
#include <sstream>
#include <unordered_map>

#include "hierarchy/structural_hash.h"
#include "hierarchy/tag.h"

namespace onnxforge::hier {
namespace {

std::string op_name(const Graph& g, NodeId n) {
  std::string_view d = str(g.domain(n));
  if (d.empty() || d == "ai.onnx") return std::string(str(g.op_type(n)));
  return std::string(d) + "::" + std::string(str(g.op_type(n)));
}

struct Side {
  const Model& model;
  const Graph& g;
  NodeHashes h;
  std::vector<NodeId> nodes;
};

// Multiset intersection size of two hash lists.
uint64_t matched(std::vector<uint64_t> a, std::vector<uint64_t> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  uint64_t m = 0;
  for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    if (a[i] == b[j]) {
      ++m;
      ++i;
      ++j;
    } else if (a[i] < b[j]) {
      ++i;
    } else {
      ++j;
    }
  }
  return m;
}

// Modules (and their ancestors) a node belongs to.
std::set<std::string> module_chain(const Model& m, const Graph& g, NodeId n) {
  std::set<std::string> out;
  for (Sym t : m.tags(g.scope(n))) {
    std::string mod(tag_module(t));
    out.insert(mod);
    while (!mod.empty()) {
      size_t dot = mod.rfind('.');
      mod = dot == std::string::npos ? std::string() : mod.substr(0, dot);
      out.insert(mod);
    }
  }
  return out;
}

MatchCounts count(const Side& a, const std::vector<NodeId>& na, const Side& b, const std::vector<NodeId>& nb) {
  MatchCounts c;
  c.nodes_a = na.size();
  c.nodes_b = nb.size();
  std::vector<uint64_t> ca, cb, ra, rb, fa, fb;
  for (NodeId n : na) {
    fa.push_back(a.h.form[n.index()]);
    ca.push_back(a.h.cone[n.index()]);
    ra.push_back(a.h.near[n.index()]);
    ++c.ops[op_name(a.g, n)].a;
  }
  for (NodeId n : nb) {
    fb.push_back(b.h.form[n.index()]);
    cb.push_back(b.h.cone[n.index()]);
    rb.push_back(b.h.near[n.index()]);
    ++c.ops[op_name(b.g, n)].b;
  }
  c.cone = matched(ca, cb);
  c.near = matched(ra, rb);
  c.form = matched(fa, fb);
  return c;
}

nlohmann::json counts_json(const MatchCounts& c, bool only_changed_ops) {
  nlohmann::json ops = nlohmann::json::object();
  for (auto& [op, d] : c.ops)
    if (!only_changed_ops || d.a != d.b) ops[op] = {d.a, d.b};
  return {{"nodes_a", c.nodes_a},   {"nodes_b", c.nodes_b},   {"matched_cone", c.cone},
          {"matched_near", c.near}, {"matched_form", c.form}, {only_changed_ops ? "ops_changed" : "ops", ops}};
}

bool unchanged(const MatchCounts& c) { return c.nodes_a == c.nodes_b && c.cone == c.nodes_a; }

}  // namespace

ModelDiff diff_models(const Model& ma, const Model& mb) {
  Side a{ma, ma.main(), hash_graph(ma, ma.main()), ma.main().nodes()};
  Side b{mb, mb.main(), hash_graph(mb, mb.main()), mb.main().nodes()};
  ModelDiff d;
  d.total = count(a, a.nodes, b, b.nodes);
  d.outputs_match = a.h.outputs == b.h.outputs;
  d.identical = d.outputs_match && unchanged(d.total);
  d.same_structure =
      a.h.form_outputs == b.h.form_outputs && d.total.nodes_a == d.total.nodes_b && d.total.form == d.total.nodes_a;
  std::map<std::string, std::pair<std::vector<NodeId>, std::vector<NodeId>>> by_module;
  for (NodeId n : a.nodes)
    for (const std::string& m : module_chain(ma, a.g, n)) by_module[m].first.push_back(n);
  for (NodeId n : b.nodes)
    for (const std::string& m : module_chain(mb, b.g, n)) by_module[m].second.push_back(n);
  for (auto& [m, nodes] : by_module) d.modules.push_back({m, count(a, nodes.first, b, nodes.second)});
  return d;
}

nlohmann::json ModelDiff::to_json(bool all_modules) const {
  nlohmann::json j = counts_json(total, false);
  j["outputs_match"] = outputs_match;
  j["identical"] = identical;
  j["same_structure"] = same_structure;
  nlohmann::json mods = nlohmann::json::array();
  for (const ModuleDiff& m : modules) {
    if (!all_modules && unchanged(m.counts)) continue;
    nlohmann::json e = counts_json(m.counts, true);
    e["module"] = m.module;
    e["unchanged"] = unchanged(m.counts);
    mods.push_back(e);
  }
  j["modules"] = mods;
  j["modules_total"] = modules.size();
  return j;
}

std::string ModelDiff::to_text(bool all_modules) const {
  std::ostringstream os;
  os << (identical        ? "IDENTICAL"
         : same_structure ? "SAME STRUCTURE, WEIGHTS DIFFER"
                          : "DIFFERENT")
     << ": nodes " << total.nodes_a << " -> " << total.nodes_b << ", matched by upstream cone " << total.cone
     << " (weights aside " << total.form << "), by neighbourhood " << total.near << ", graph outputs "
     << (outputs_match ? "same computations" : "differ") << "\n";
  bool header = false;
  for (auto& [op, dd] : total.ops)
    if (dd.a != dd.b) {
      if (!header) os << "Op counts that differ:\n";
      header = true;
      os << "  " << op << ": " << dd.a << " -> " << dd.b << "\n";
    }
  size_t changed = 0;
  for (const ModuleDiff& m : modules) changed += !unchanged(m.counts);
  os << "Modules: " << modules.size() << ", changed " << changed << "\n";
  for (const ModuleDiff& m : modules) {
    if (!all_modules && unchanged(m.counts)) continue;
    const MatchCounts& c = m.counts;
    os << "  " << (m.module.empty() ? "(root)" : m.module) << ": " << c.nodes_a << " -> " << c.nodes_b
       << " nodes, cone-matched " << c.cone << ", near-matched " << c.near;
    std::string ops;
    for (auto& [op, dd] : c.ops)
      if (dd.a != dd.b) ops += " " + op + " " + std::to_string(dd.a) + "->" + std::to_string(dd.b);
    if (!ops.empty()) os << ";" << ops;
    os << "\n";
  }
  return os.str();
}

}  // namespace onnxforge::hier
