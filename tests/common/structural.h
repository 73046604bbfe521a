#pragma once
// Structural comparison of two models: every node (in topological order), attribute, initializer
// byte, value declaration, metadata entry, function and subgraph. Returns "" when equal, else a
// description of the first difference.
#include <string>

#include "ir/graph.h"

namespace onnxforge::test {

std::string structural_diff(const Model& a, const Model& b);

}  // namespace onnxforge::test
