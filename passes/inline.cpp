#include "passes/inline.h"

#include "ir/rewrite.h"
#include "passes/edits.h"
#include "passes/upgrade_opset.h"

namespace onnxforge::passes {

InlineReport inline_model_functions(Model& m) {
  const int64_t model_opset = m.opset("");
  bool below = false;
  for (const Function& f : m.functions)
    for (const FunctionImport& imp : function_imports(f)) below |= imp.domain.empty() && imp.version < model_opset;
  // upgrade_opset raises every graph below the target, function bodies included, to the model's
  // opset; models older than the upgrade's range keep their functions and the inliner says why.
  if (below && model_opset >= kMinTargetOpset && model_opset <= kMaxRuntimeOpset) upgrade_opset(m, model_opset);
  InlineReport r = inline_functions(m);
  for (size_t gi = 0; gi < m.graph_count(); ++gi)
    if (Graph& g = m.graph(GraphId(static_cast<uint32_t>(gi))); !g.detached()) compact(g);
  return r;
}

namespace {

// What --list-passes says of this pass.
constexpr const char* kSummary =
    "expands every call of a model-local function (FunctionProto) into its caller and drops the functions "
    "(optimize --inline-functions)";

struct InlineMatch {};

std::vector<InlineMatch> analyze_inline(const Graph& g, const Uses&, const PassOptions&) {
  if (g.id().index() != 0 || g.model().functions.empty()) return {};
  return {{}};
}

bool apply_inline(Edits& e, const InlineMatch&) {
  if (e.g.model().functions.empty()) return false;
  inline_model_functions(e.g.model());
  e.note_change();
  return true;
}

}  // namespace

ONNXFORGE_PASS(inline_functions, InlineMatch, AccuracyClass::Lossless, analyze_inline, apply_inline, {}, kSummary);

}  // namespace onnxforge::passes
