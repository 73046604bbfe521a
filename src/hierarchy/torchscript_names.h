#pragma once
// Module paths from the node names torch.onnx.export (TorchScript exporter, torch >= 1.13)
// writes: `/encoder/layer.0/attention/self/query/MatMul` -> `encoder.layer.0.attention.self.query`.
//
// The name is "/" + one component per module scope + "/" + op type (with a `_N` de-duplication
// suffix). A component is the module's qualified name relative to the enclosing scope, which
// gives these quirks, undone here:
//   - a ModuleList/ModuleDict is never called, so it adds no level: its attribute name stays in
//     the child's component (`layer.0` under `encoder` is `encoder.layer.0`);
//   - an invoked nn.Sequential repeats its own name in each child (`/layer1/layer1.0/conv1/Conv`
//     is `layer1.0.conv1`; nested: `/features/features.0/features.0.0/Conv`);
//   - a module called again gets `_N` after its component (`relu_1` = second call of `relu`);
//   - `OpType_N` with no leading "/" has no scope at all (nullopt); `/OpType` is the root ("").
// Ambiguities (a module really named `relu_1`, a ModuleList named like its parent) are settled
// with the module paths implied by initializer names (state_dict names) when given.
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

#include "ir/graph.h"

namespace onnxforge::hier {

using ModuleSet = std::unordered_set<std::string>;

// Module paths implied by the state_dict-style initializer names of every graph of `model`
// (`encoder.layer.0.attention.self.query.weight` -> `encoder`, `encoder.layer`, ...).
ModuleSet modules_from_initializers(const Model& model);

std::optional<std::string> module_from_node_name(std::string_view node_name, const ModuleSet& known = {});

}  // namespace onnxforge::hier
