#pragma once
// Small read-only helpers shared by the passes: constants, scalars, shapes.
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "ir/uses.h"

namespace onnxforge::passes {

// The tensor behind a value when it is a constant: a non-overridable initializer or the output
// of a Constant node with a `value` tensor. Invalid otherwise.
TensorId constant_tensor(const Graph& g, ValueId v);
// Integer contents of a constant (int64 or int32), or nullopt.
std::optional<std::vector<int64_t>> constant_ints(const Graph& g, ValueId v);
// Every element of a numeric constant converted to double, or nullopt (non-numeric, not constant).
std::optional<std::vector<double>> constant_values(const Graph& g, ValueId v);
// Whether every element of constant `v` equals `x` (numeric types); false for non-constants.
bool constant_all_equal(const Graph& g, ValueId v, double x);
// Element i of a stored tensor as double (numeric dtypes incl. float16/bfloat16).
double element_as_double(const Model& m, TensorId t, uint64_t i);

// Static dims of a value (declared type, initializer or Constant); nullopt when any is unknown.
std::optional<std::vector<int64_t>> static_shape(const Graph& g, ValueId v);
// Rank of a value when known (declared or constant), else -1.
int64_t known_rank(const Graph& g, ValueId v);

// The single node reading `v` (exactly one use, not a graph output), or invalid.
NodeId single_consumer(const Graph& g, const Uses& uses, ValueId v);
// Whether `n` produces a graph output or a value some subgraph reads.
bool feeds_graph_output(const Graph& g, const Uses& uses, NodeId n);
// Node ops with side effects or randomness that must never be removed or merged.
bool is_nondeterministic(const Graph& g, NodeId n);
// `n` is in the default domain with op type `op`, and alive.
inline bool is(const Graph& g, NodeId n, std::string_view op) { return n.valid() && g.is_op(n, op); }

std::vector<std::byte> to_bytes(std::span<const int64_t> v);

}  // namespace onnxforge::passes

namespace onnxforge::passes {
// A node's attributes as NewAttrs (for re-creating a node with other inputs). Graph-typed
// attributes are kept by id; sparse/type-proto attributes are not supported (returns nullopt).
std::optional<std::vector<NewAttr>> copy_attrs(const Graph& g, NodeId n);
// Attribute rows equal (same name, type and payload).
bool same_attrs(const Graph& g, NodeId a, NodeId b);
}  // namespace onnxforge::passes
