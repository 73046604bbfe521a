#include "ir/uses.h"

namespace onnxforge {

Uses::Uses(const Graph& g) {
  const uint32_t nv = g.value_count();
  offsets_.assign(nv + 1, 0);
  graph_output_.assign(nv, 0);
  std::vector<std::pair<NodeId, std::vector<ValueId>>> implicit;
  for (NodeId n : g.nodes()) {
    for (ValueId v : g.inputs(n))
      if (v.valid()) ++offsets_[v.index() + 1];
    if (!g.subgraphs(n).empty()) {
      implicit.emplace_back(n, g.implicit_inputs(n));
      for (ValueId v : implicit.back().second) ++offsets_[v.index() + 1];
    }
  }
  for (uint32_t i = 0; i < nv; ++i) offsets_[i + 1] += offsets_[i];
  uses_.resize(offsets_[nv]);
  std::vector<uint32_t> fill(offsets_.begin(), offsets_.end() - 1);
  for (NodeId n : g.nodes()) {
    auto ins = g.inputs(n);
    for (uint32_t i = 0; i < ins.size(); ++i)
      if (ins[i].valid()) uses_[fill[ins[i].index()]++] = Use{n, i};
  }
  for (auto& [n, values] : implicit)
    for (ValueId v : values) uses_[fill[v.index()]++] = Use{n, Use::kImplicit};
  for (ValueId v : g.graph_outputs()) graph_output_[v.index()] = 1;
}

}  // namespace onnxforge
