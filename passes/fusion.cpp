#include "passes/fusion.h"

#include <algorithm>

#include "ir/inline_functions.h"
#include "ir/uses.h"
#include "passes/registry.h"

namespace onnxforge::passes {

CensusRow& CensusRow::operator+=(const CensusRow& o) {
  found += o.found;
  fusable_here += o.fusable_here;
  fusable_after_upgrade += o.fusable_after_upgrade;
  for (const auto& [reason, n] : o.missed) missed[reason] += n;
  return *this;
}

int64_t fusion_opset(const Graph& g, const PassOptions&) { return g.model().opset(""); }

std::vector<CensusRow> fusion_census(const Model& m, const PassOptions& o) {
  std::vector<CensusRow> rows;
  for (const Fusion* f : all_fusions()) {
    const FusionInfo& i = f->info();
    CensusRow& r = rows.emplace_back();
    r.fusion = i.name;
    r.op = i.op;
    r.min_opset = i.min_opset;
  }
  for (size_t gi = 0; gi < m.graph_count(); ++gi) {
    const Graph& g = m.graph(GraphId(static_cast<uint32_t>(gi)));
    if (g.detached()) continue;
    // A block in a function body counts once per call that reaches it, as in the flat export
    // (BERT's BertOutput function, called by both layers, holds two LayerNorms); a function
    // nothing calls holds none.
    const Function* f = function_of(m, g);
    const int64_t calls = f ? reached_calls(m, *f) : 1;
    if (calls == 0) continue;
    const Uses uses(g);
    for (size_t k = 0; k < rows.size(); ++k) {
      CensusRow r = all_fusions()[k]->census(g, uses, o);
      r.found *= calls;
      r.fusable_here *= calls;
      r.fusable_after_upgrade *= calls;
      for (auto& [reason, n] : r.missed) n *= calls;
      rows[k] += r;
    }
  }
  return rows;
}

std::string upgrade_hint(const std::vector<CensusRow>& census) {
  int need = 0;
  int64_t total = 0;
  std::vector<std::string> parts;
  for (const CensusRow& r : census) {
    if (r.fusable_after_upgrade == 0) continue;
    total += r.fusable_after_upgrade;
    need = std::max(need, r.min_opset);
    parts.push_back(std::to_string(r.fusable_after_upgrade) + " " + r.op);
  }
  if (parts.empty()) return {};
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) s += i + 1 == parts.size() ? " and " : ", ";
    s += parts[i];
  }
  return s + (total == 1 ? " block" : " blocks") + " can be fused with --target-opset " + std::to_string(need);
}

}  // namespace onnxforge::passes
