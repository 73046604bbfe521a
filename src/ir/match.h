#pragma once
// The pattern vocabulary: read-only questions a matcher asks of a graph, shared by the passes
// (passes/*.cpp) and the runtime's plan fusions, so that a fusion reads like its comment:
//
//   NodeId erf = single_consumer(g, uses, div);                // the one reader of div's output
//   MATCH_IF(is(g, erf, "Erf"), "no Erf after the division");
//   NodeId add = single_consumer(g, uses, erf);
//   MATCH_IF(is(g, add, "Add") && constant_near(g, other_input(g, add, g.output(erf, 0)), 1.0, 1e-4),
//            "Erf not followed by + 1");
//
// Everything here is read-only and safe to call concurrently on one graph. `Uses` is the
// consumer index (ir/uses.h) of the graph as the caller last built it.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "ir/uses.h"

namespace onnxforge {

// ---------------------------------------------------------------- nodes

// `n` is valid, alive, in the default ONNX domain ("" or "ai.onnx") and of type `op`.
bool is(const Graph& g, NodeId n, std::string_view op);
bool is_one_of(const Graph& g, NodeId n, std::initializer_list<std::string_view> ops);
// The node producing input `i` of `n`; invalid when the input is absent or a graph input,
// initializer or capture.
NodeId producer_of(const Graph& g, NodeId n, size_t i);
// producer_of(g, n, i) when it is an `op` node (is()), else invalid.
NodeId input_op(const Graph& g, NodeId n, size_t i, std::string_view op);
// Of a binary node reading `v`: its other input (input 0 when `v` is input 1, else input 1).
ValueId other_input(const Graph& g, NodeId n, ValueId v);

// ---------------------------------------------------------------- readers

// The one reader of `v` (exactly one use, by a node input, and `v` not a graph output), with
// the input slot; {invalid, 0} otherwise.
Use single_use(const Uses& uses, ValueId v);

// The element type of v as far as the graph says without running it: its declared type, else
// through ops whose output 0 has their first input's type (or a Where's second), up to a Cast's
// `to`, a constant's type or a graph input's (`graph_input_type` answers for an undeclared graph
// input: a Loop body's carried value has its initial value's type). Undefined where the walk
// meets anything else.
DType known_dtype(const Graph& g, ValueId v, const std::function<DType(ValueId)>& graph_input_type = {});
// The node of single_use(uses, v), or invalid.
NodeId single_consumer(const Graph& g, const Uses& uses, ValueId v);
// The single reader of `n`'s output 0.
NodeId single_consumer(const Graph& g, const Uses& uses, NodeId n);
// Whether `n` produces a graph output.
bool feeds_graph_output(const Graph& g, const Uses& uses, NodeId n);
// Whether the readers of `out` may read `kept` instead without an Identity coming back: `out`
// is no graph output, or `kept` can take its name (computed by a node of this graph, and not a
// graph input, initializer, capture or another graph output). Rewrite keeps output names by
// renaming `kept` or, when it cannot, by inserting an Identity — removing one node to add one
// is a rewrite the next round would find again (passes/pass.h, Edits::forward).
bool can_forward(const Graph& g, const Uses& uses, ValueId out, ValueId kept);

// ---------------------------------------------------------------- constants

// The tensor behind a value when it is a constant: a non-overridable initializer or the output
// of a Constant node with a `value` tensor. Invalid otherwise.
TensorId constant_tensor(const Graph& g, ValueId v);
// Element i of a stored tensor as double (numeric dtypes incl. float16/bfloat16).
double element_as_double(const Model& m, TensorId t, uint64_t i);
// A one-element numeric constant (any rank: [], [1], [1,1]...), also from the Constant node's
// `value_float` / `value_int` forms; nullopt otherwise. With `want` set, only of that dtype.
std::optional<double> scalar(const Graph& g, ValueId v, DType want = DType::Undefined);
// Integer contents of a constant (int64 or int32), or nullopt.
std::optional<std::vector<int64_t>> constant_ints(const Graph& g, ValueId v);
// Every element of a numeric constant converted to double, or nullopt (non-numeric, not constant).
std::optional<std::vector<double>> constant_values(const Graph& g, ValueId v);
// Whether every element of constant `v` equals `x` (numeric types); false for non-constants.
bool constant_all_equal(const Graph& g, ValueId v, double x);
// Whether `v` is a non-empty numeric constant whose every element is within float rounding of
// `x`: |e - x| <= rel * |x| (exporters write sqrt(2), 1/sqrt(2), 0.044715... at whatever
// precision their framework printed).
bool constant_near(const Graph& g, ValueId v, double x, double rel);

// ---------------------------------------------------------------- shapes

// Static dims of a value (declared type, initializer or Constant); nullopt when any is unknown.
std::optional<std::vector<int64_t>> static_shape(const Graph& g, ValueId v);
// Rank of a value when known (declared or constant), else -1.
int64_t known_rank(const Graph& g, ValueId v);

// ---------------------------------------------------------------- early returns

// A matcher's outcome: the match, or the first check that failed (a fusion reports what it did not
// fuse and why: docs/architecture.md, "Fusions report what they did not fuse"). MATCH_IF returns a
// Miss from a function returning Found<M>:
//
//   Found<GeluMatch> match_gelu(const Graph& g, const Uses& uses, NodeId div) {
//     MATCH_IF(is(g, div, "Div"), "not a Div");
//     MATCH_IF(constant_near(g, g.input(div, 1), 1.41421356, 1e-4), "divisor is not sqrt(2)");
//     ...
//     return GeluMatch{...};
//   }
struct Miss {
  std::string_view why;
};

//
// A third outcome serves the fusions' census (passes/fusion.h): `return {};` says the anchor is
// not a block of this kind at all (an ordinary ReduceMean, not a LayerNorm), as opposed to a
// block that failed a check.
template <class M>
class Found {
 public:
  Found() = default;                    // not a block of this kind
  Found(M m) : match_(std::move(m)) {}  // NOLINT: implicit, so matchers `return M{...}`
  Found(Miss miss) : why_(miss.why.empty() ? "unspecified" : miss.why) {}  // NOLINT
  explicit operator bool() const { return match_.has_value(); }
  // A block that failed a check (why() names it).
  bool missed() const { return !match_ && !why_.empty(); }
  const M& operator*() const { return *match_; }
  M& operator*() { return *match_; }
  const M* operator->() const { return &*match_; }
  M* operator->() { return &*match_; }
  // The failed check ("" when matched).
  std::string_view why() const { return why_; }

 private:
  std::optional<M> match_;
  std::string_view why_;
};

#define MATCH_IF(cond, why)                     \
  do {                                          \
    if (!(cond)) return ::onnxforge::Miss{why}; \
  } while (0)

}  // namespace onnxforge
