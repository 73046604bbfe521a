// annotate_conv_activation — Conv → Relu/Clip/LeakyRelu/Sigmoid... pairs stay two standard
// nodes (see passes/README.md, Experiment 05: every single-node encoding ONNX Runtime accepts is
// either non-standard or loses the fusion); the pass only records the pair on the Conv as node
// metadata `onnxforge.epilogue = <activation op>` for tools that want it. It fuses nothing:
// onnxforge's runtime plan finds Conv → activation pairs by itself and does not read the
// annotation; ORT ignores it. The activations are the op facts' epilogue ones (ir/op_traits.h). It also
// removes activations made redundant by the one before: Relu(Relu(x)), Relu(Clip(x, min >= 0)).
//                                                                                      class 0
#include "passes/edits.h"
#include "passes/graph_util.h"
#include "passes/registry.h"

namespace onnxforge::passes {
namespace {

constexpr std::string_view kKey = "onnxforge.epilogue";

struct Match {
  NodeId conv;  // annotate conv with act's op type
  NodeId act;   // or: remove `act` (a redundant Relu) when conv is invalid
};

bool clip_nonnegative(const Graph& g, NodeId clip) {
  const ClipBounds b = clip_bounds(g, clip);
  return b.known && b.min && *b.min >= 0;
}

std::vector<Match> analyze(const Graph& g, const Uses& uses, const PassOptions&) {
  std::vector<Match> out;
  for (NodeId n : g.nodes()) {
    if (is(g, n, "Relu")) {
      NodeId prev = producer_of(g, n, 0);
      bool redundant = is(g, prev, "Relu") || (is(g, prev, "Clip") && clip_nonnegative(g, prev));
      if (redundant && can_forward(g, uses, g.output(n, 0), g.input(n, 0))) {
        out.push_back({NodeId{}, n});
        continue;
      }
    }
    if (!is_one_of(g, n, {"Conv", "ConvTranspose"})) continue;
    NodeId act = single_consumer(g, uses, n);
    if (!act.valid() || !has_fact(g, act, kEpilogue)) continue;
    if (g.metadata_value(n, kKey) == str(g.op_type(act))) continue;  // already recorded
    out.push_back({n, act});
  }
  return out;
}

bool apply(Edits& e, const Match& m) {
  Graph& g = e.g;
  if (!m.conv.valid())  // the activation before it must still be the one analyze saw
    return !e.touched(producer_of(g, m.act, 0)) && e.forward(m.act, g.input(m.act, 0));
  if (e.any_touched(m.conv, m.act)) return false;
  std::vector<MetadataEntry> meta;
  for (const MetadataEntry& x : g.metadata(m.conv))
    if (str(x.key) != kKey) meta.push_back(x);
  meta.push_back({intern(kKey), g.op_type(m.act)});
  g.set_metadata(m.conv, meta);
  e.note_change();
  return true;
}

}  // namespace

ONNXFORGE_PASS(annotate_conv_activation, Match, AccuracyClass::Lossless, analyze, apply,
               ops_with(kEpilogue, {"Conv", "ConvTranspose"}),
               "mark Conv+activation pairs for epilogue fusion (standard graph), drop redundant Relus");

}  // namespace onnxforge::passes
