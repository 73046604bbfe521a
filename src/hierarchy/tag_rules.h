#pragma once
// Tags for nodes no source named, by rule (see hierarchy.h), to a fixed point:
//   consumers all in one module -> that module; producers all in one module -> that module;
//   otherwise the lowest common ancestor of the tagged neighbours; subgraph nodes still
//   untagged take their owner node's tags (and an untagged owner takes the common ancestor of
//   its subgraphs' tags).
#include "hierarchy/hierarchy.h"

namespace onnxforge::hier {

void apply_tag_rules(Model& model, TagReport& report);

// The class path to use for `module` from the tags already in the model ("" when unknown).
class ClassPaths {
 public:
  explicit ClassPaths(const Model& model);
  Sym tag_for(const std::string& module) const;

 private:
  std::unordered_map<std::string, std::string> by_module_;
};

}  // namespace onnxforge::hier
