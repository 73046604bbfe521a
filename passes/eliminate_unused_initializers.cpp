// eliminate_unused_initializers — initializers nothing reads are removed, and with them a graph
// input of the same name (IR < 4 models list every initializer as an input too).       class 0
#include "passes/edits.h"
#include "passes/graph_util.h"
#include "passes/registry.h"

namespace onnxforge::passes {
namespace {

// What --list-passes says of this pass.
constexpr const char* kSummary = "remove initializers nothing reads (and inputs shadowing them, IR < 4)";

struct Match {
  ValueId value;
};

std::vector<Match> analyze(const Graph& g, const Uses& uses, const PassOptions&) {
  std::vector<Match> out;
  for (ValueId v : g.initializers()) {
    if (uses.used(v)) continue;
    // A graph input with a default (IR >= 4) is part of the interface users feed: keep it.
    if (g.is_graph_input(v) && g.model().ir_version >= 4) continue;
    out.push_back({v});
  }
  return out;
}

bool apply(Edits& e, const Match& m) {
  if (e.gained_uses(m.value)) return false;
  e.remove_initializer(m.value);
  return true;
}

}  // namespace

ONNXFORGE_PASS(eliminate_unused_initializers, Match, AccuracyClass::Lossless, analyze, apply, {}, kSummary);

}  // namespace onnxforge::passes
