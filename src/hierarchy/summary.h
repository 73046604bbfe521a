#pragma once
// What `onnxforge hierarchy` prints: the module tree with node counts, tagging coverage overall
// and per operator category (R17), and the nodes without a direct tag grouped by why.
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hierarchy/hierarchy.h"
#include "hierarchy/op_category.h"

namespace onnxforge::hier {

struct ModuleStats {
  std::string module;      // dotted, "" = root
  std::string class_path;  // "" when unknown
  uint64_t nodes = 0;      // nodes tagged with exactly this module (a multi-tag node counts once per module)
  uint64_t total = 0;      // nodes + descendants' totals
  int depth = 0;           // 0 = root
};

struct CategoryCoverage {
  OpCategory category = OpCategory::Other;
  uint64_t nodes = 0, tagged = 0, direct = 0;
  std::optional<double> threshold;
  bool ok() const { return !threshold || nodes == 0 || double(tagged) >= *threshold * double(nodes); }
};

struct NodeGroup {
  std::string why;  // reason, and for rule-tagged nodes the rule that tagged them
  std::string op;
  uint64_t count = 0;
  std::vector<std::string> examples;  // up to 3 node names
};

struct HierarchySummary {
  uint64_t nodes = 0, tagged = 0, direct = 0;
  uint64_t compute_nodes = 0, compute_tagged = 0, compute_direct = 0;
  std::map<std::string, uint64_t> by_source;
  std::vector<ModuleStats> modules;  // tree order (parents before children)
  std::vector<CategoryCoverage> categories;
  std::vector<NodeGroup> untagged;  // no tag at all
  std::vector<NodeGroup> by_rule;   // tagged, but by a rule
  bool thresholds_met() const;
  nlohmann::json to_json() const;
};

HierarchySummary summarize_hierarchy(const Model& model, const TagReport& report);
std::string format_hierarchy(const HierarchySummary& s, bool tree, bool color);

// R13: every tensor and node with all modules that consume it (main graph and subgraphs).
nlohmann::json consuming_modules(const Model& model);
std::string format_consumers(const nlohmann::json& consumers, size_t limit);

}  // namespace onnxforge::hier
