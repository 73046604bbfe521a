#pragma once
// Helpers only the passes need (building attributes and constants). The read-only pattern
// vocabulary — constants, scalars, shapes, readers, `is` — is ir/match.h, shared with the runtime;
// facts about ops (elementwise, random, neutral element...) are ir/op_traits.h.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "ir/graph.h"
#include "ir/match.h"
#include "ir/op_traits.h"

namespace onnxforge::passes {

std::vector<std::byte> to_bytes(std::span<const int64_t> v);

// A node's attributes as NewAttrs (for re-creating a node with other inputs). Graph-typed
// attributes are kept by id; sparse/type-proto attributes are not supported (returns nullopt).
std::optional<std::vector<NewAttr>> copy_attrs(const Graph& g, NodeId n);
// Attribute rows equal (same name, type and payload).
bool same_attrs(const Graph& g, NodeId a, NodeId b);

}  // namespace onnxforge::passes
