// eliminate_dead_nodes — nodes whose outputs reach no graph output are removed.      class 0
// Liveness runs backwards from the graph outputs through node inputs and through the values a
// node's subgraphs read from this scope, so a value a subgraph captures keeps its producer.
#include "ir/topo.h"
#include "passes/edits.h"
#include "passes/graph_util.h"
#include "passes/registry.h"

namespace onnxforge::passes {
namespace {

// What --list-passes says of this pass.
constexpr const char* kSummary = "remove nodes whose outputs reach no graph output";

struct Match {
  NodeId node;
};

std::vector<Match> analyze(const Graph& g, const Uses&, const PassOptions&) {
  std::vector<uint8_t> live(g.node_capacity(), 0);
  std::vector<NodeId> stack;
  auto reach = [&](ValueId v) {
    if (!v.valid()) return;
    NodeId p = g.producer(v);
    if (p.valid() && !live[p.index()]) {
      live[p.index()] = 1;
      stack.push_back(p);
    }
  };
  for (ValueId v : g.graph_outputs()) reach(v);
  while (!stack.empty()) {
    NodeId n = stack.back();
    stack.pop_back();
    for (ValueId v : g.inputs(n)) reach(v);
    if (!g.subgraphs(n).empty())
      for (ValueId v : g.implicit_inputs(n)) reach(v);
  }
  // Consumers before producers, so apply knows whether every reader of a node went away.
  std::vector<Match> out;
  std::vector<NodeId> order = topological_order(g);
  for (auto it = order.rbegin(); it != order.rend(); ++it)
    if (!live[it->index()]) out.push_back({*it});
  return out;
}

bool apply(Edits& e, const Match& m) {
  // Something redirected to read this node's outputs this round: it may be live now.
  if (e.touched(m.node)) return false;
  // A reader kept alive this round (touched by another pass) still needs this node.
  for (ValueId v : e.g.outputs(m.node))
    if (v.valid())
      for (const Use& u : e.uses.of(v))
        if (!e.killed(u.node)) return false;
  e.kill(m.node);
  return true;
}

}  // namespace

ONNXFORGE_PASS(eliminate_dead_nodes, Match, AccuracyClass::Lossless, analyze, apply, {}, kSummary);

}  // namespace onnxforge::passes
