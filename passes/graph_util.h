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

// A Transpose's permutation: its `perm`, or the reversal when absent (needs the input's rank);
// nullopt when neither is known.
std::optional<std::vector<int64_t>> transpose_perm(const Graph& g, NodeId t);

// The `axes` of Unsqueeze/Squeeze in either opset form (an input from opset 13, the attribute
// before) when constant; nullopt when not constant or not given.
std::optional<std::vector<int64_t>> axes_of(const Graph& g, NodeId n);

// A Slice's parameters in either opset form (inputs from opset 10, attributes before), `axes`
// defaulting to 0..n-1 and `steps` to 1; nullopt when starts, axes or steps are not constant or
// the lengths differ. `ends` may be computed (GPT-2 slices its causal table to key_length): then
// it is nullopt and only matchers that do not need it go on.
struct SliceParams {
  std::vector<int64_t> starts;
  std::optional<std::vector<int64_t>> ends;
  std::vector<int64_t> axes, steps;
};
std::optional<SliceParams> slice_params(const Graph& g, NodeId s);

}  // namespace onnxforge::passes
