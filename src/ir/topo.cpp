#include "ir/topo.h"

#include <queue>

#include "ir/error.h"
#include "ir/uses.h"

namespace onnxforge {

std::vector<NodeId> topological_order(const Graph& g) {
  const uint32_t cap = g.node_capacity();
  std::vector<uint32_t> pending(cap, 0);
  auto count_dep = [&](NodeId n, ValueId v) {
    if (v.valid() && g.producer(v).valid() && g.alive(g.producer(v))) ++pending[n.index()];
  };
  for (NodeId n : g.nodes()) {
    for (ValueId v : g.inputs(n)) count_dep(n, v);
    for (ValueId v : g.implicit_inputs(n)) count_dep(n, v);
  }
  Uses uses(g);
  // Min-heap on table index: the order stays as close to the file order as the edges allow.
  std::priority_queue<uint32_t, std::vector<uint32_t>, std::greater<>> ready;
  for (NodeId n : g.nodes())
    if (pending[n.index()] == 0) ready.push(n.index());
  std::vector<NodeId> order;
  order.reserve(g.node_count());
  while (!ready.empty()) {
    NodeId n(ready.top());
    ready.pop();
    order.push_back(n);
    for (ValueId out : g.outputs(n)) {
      if (!out.valid()) continue;
      for (const Use& u : uses.of(out))
        if (--pending[u.node.index()] == 0) ready.push(u.node.index());
    }
  }
  if (order.size() != g.node_count()) {
    std::string names;
    int shown = 0;
    for (NodeId n : g.nodes()) {
      if (pending[n.index()] == 0 || shown == 5) continue;
      names += (shown++ ? ", " : "") + std::string("'") + std::string(str(g.node_name(n))) + "' (" +
               std::string(str(g.op_type(n))) + ")";
    }
    fail("graph '", str(g.name()), "' has a cycle: ", g.node_count() - order.size(),
         " nodes never become ready, among them ", names);
  }
  return order;
}

}  // namespace onnxforge
