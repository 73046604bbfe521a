#include "passes/inline.h"

#include "ir/rewrite.h"
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

}  // namespace onnxforge::passes
