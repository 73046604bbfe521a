#pragma once
// `onnxforge diff A B`: name-independent topology comparison (R7/R8), overall and per module.
//
// Node count and op histogram; then nodes are matched as multisets of structural hashes
// (structural_hash.h): `cone` matches mean the same computation from the same inputs and
// weights; `near` matches (one Weisfeiler-Lehman round) localise what changed. The graphs are
// *identical* when every node matches by cone hash one-to-one and the graph outputs are the same
// computations in the same order. Per module (tags read from both models), the same counts over
// the nodes tagged with that module or a descendant. `same_structure` compares with weights
// (floating-point initializers and tensor attributes) by dtype and dims only.
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace onnxforge::hier {

struct OpDelta {
  uint64_t a = 0, b = 0;
};

struct MatchCounts {
  uint64_t nodes_a = 0, nodes_b = 0, cone = 0, near = 0, form = 0;  // form: structure, weights ignored
  std::map<std::string, OpDelta> ops;                               // every op, counts in A and B
};

struct ModuleDiff {
  std::string module;
  MatchCounts counts;
};

struct ModelDiff {
  MatchCounts total;
  bool outputs_match = false;
  bool identical = false;           // same computation, same weights
  bool same_structure = false;      // same graph, weight values aside
  std::vector<ModuleDiff> modules;  // tree order; only modules that have nodes in A or B
  nlohmann::json to_json(bool all_modules) const;
  std::string to_text(bool all_modules) const;
};

// Compares the main graphs (subgraphs count through their owner's attributes). Tags must have
// been read into both models (read_tags) for the per-module part.
ModelDiff diff_models(const Model& a, const Model& b);

}  // namespace onnxforge::hier
