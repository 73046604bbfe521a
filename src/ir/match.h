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
#include <array>
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

// ---- readers: walking from a value to its readers and producer, types and ranks that see through
// a subgraph's captures to the outer value, constants within their type's rounding, and the
// parameters of ops whose inputs moved between opsets (Unsqueeze/Squeeze/ReduceMean axes, Slice).

// A value's declaration: `v` itself, or for a subgraph's capture the outer value it reads (through
// every enclosing scope), with the graph that declares it.
std::pair<const Graph*, ValueId> declaring_scope(const Graph& g, ValueId v);

// The first node that reads `v` as an explicit input and satisfies `pred(node)`, or invalid.
template <class P>
NodeId reader_if(const Graph& g, const Uses& u, ValueId v, P&& pred) {
  if (!v.valid()) return {};
  for (const Use& use : u.of(v))
    if (use.slot != Use::kImplicit && g.alive(use.node) && pred(use.node)) return use.node;
  return {};
}
// The first reader of `v` that is an `op` (other readers may exist: the caller's private_values
// check reports them as a Miss).
inline NodeId reader_op(const Graph& g, const Uses& u, ValueId v, std::string_view op) {
  return reader_if(g, u, v, [&](NodeId n) { return g.is_op(n, op); });
}
// The single reader of `v` (single_consumer of ir/match.h) when it is an `op`, else invalid.
inline NodeId only_reader(const Graph& g, const Uses& u, ValueId v, std::string_view op) {
  NodeId n = single_consumer(g, u, v);
  return is(g, n, op) ? n : NodeId{};
}
// The producer of `v` when it is a default-domain `op`, else invalid.
inline NodeId producer_op(const Graph& g, ValueId v, std::string_view op) {
  NodeId p = v.valid() ? g.producer(v) : NodeId{};
  return is(g, p, op) ? p : NodeId{};
}
// The element type of a value (declared/inferred, or its constant's; a subgraph's capture has
// those of the outer value it reads), Undefined when unknown.
DType dtype_of(const Graph& g, ValueId v);
// Rank likewise, -1 when unknown.
int64_t rank_of(const Graph& g, ValueId v);
// The relative rounding of a constant stored as `t`: two units in the last place of float32,
// float16 or bfloat16 (float64 gets float32's: exporters widen float32 values, torch writes
// √(2/π) as 0.7978845834732056); 0 for integers.
double rounding(DType t);
// A one-element constant (scalar() of ir/match.h) within its own type's rounding of `want`:
// exporters store √2, 1/√2, √(2/π), 0.044715 at whatever precision their framework printed.
bool scalar_near(const Graph& g, ValueId v, double want);
bool is_float(DType t);  // float32/float16/bfloat16/float64
bool is_half(DType t);   // float16/bfloat16

// The trailing `k` dims of `v` when all known (captures: the outer value's).
std::optional<std::vector<int64_t>> trailing_dims(const Graph& g, ValueId v, int64_t k);

// A Transpose's permutation: its `perm`, or the reversal when absent (needs the input's rank);
// nullopt when neither is known.
std::optional<std::vector<int64_t>> transpose_perm(const Graph& g, NodeId t);

// The `axes` of Unsqueeze/Squeeze in either opset form (an input from opset 13, the attribute
// before) when constant; nullopt when not constant or not given.
std::optional<std::vector<int64_t>> axes_of(const Graph& g, NodeId n);

// A Clip's bounds in either opset form (attributes before opset 11, optional inputs from 11), each
// nullopt when absent (unbounded); `known` is false when a bound is given but not a one-element
// constant.
struct ClipBounds {
  bool known = false;
  std::optional<double> min, max;
};
ClipBounds clip_bounds(const Graph& g, NodeId clip);

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

// ---- chains: a linear chain with alternatives, onnxscript's `OrValue` idea in three functions. A
// Link is one node of a chain: an op reading the chain's value, with a condition on its other
// operand; fits()/next()/prev() take the first of several links that fits and say which. The
// spellings exporters vary between are named once (divided_by, squared):
//
//   Hop h = next(g, u, p, divided_by(2));  // the reader of p: Div(p, 2) | Mul(p, ½) | Mul(½, p)
//   Hop s = prev(g, v, squared());         // v = Pow(x, 2) | Mul(x, x); s.in is x
//   if (!h || !s) return {};                // not a block of this kind
//   MATCH_IF(h.ok && s.ok, "constants differ");
//
// Shape and value are two outcomes: a hop whose op or operands do not fit is invalid (the
// caller's `return {}`), a constant that has the shape but not the value leaves `ok` false (the
// caller's Miss, which the census counts). A link never fits a node that does not read the
// chain's value.

// What a binary link asks of the operand that is not the chain's value.
struct Operand {
  enum class Is : uint8_t { Nothing, Anything, NotChain, Chain, Value, Constant, Scalar };
  enum class Fit : uint8_t { Shape, Value };  // a wrong constant: ok = false, or no fit
  Is is = Is::Nothing;
  ValueId value{};
  double expect = 0;
  bool check = false;  // Hop::ok compares the operand with `expect` (scalar_near)
  Fit fit = Fit::Shape;

  // Anything (an absent input too); with `expect`, Hop::ok says whether it is a one-element
  // constant near it (Pow's exponent, which a wrong value makes a Miss, not a non-match).
  static Operand any() { return {.is = Is::Anything}; }
  static Operand any(double expect) { return {.is = Is::Anything, .expect = expect, .check = true}; }
  static Operand other() { return {.is = Is::NotChain}; }  // any value but the chain's
  static Operand same() { return {.is = Is::Chain}; }      // the chain's value again: Mul(x, x)
  static Operand is_value(ValueId v) { return {.is = Is::Value, .value = v}; }
  static Operand constant() { return {.is = Is::Constant}; }  // any constant tensor
  // A one-element constant; with `expect`, near it within its type's rounding (Hop::ok), or with
  // Fit::Value the link fits only then.
  static Operand scalar() { return {.is = Is::Scalar}; }
  static Operand scalar(double expect, Fit fit = Fit::Shape) {
    return {.is = Is::Scalar, .expect = expect, .check = true, .fit = fit};
  }
};

struct Link {
  std::string_view op;
  Operand other{};
  int8_t slot = 0;  // the chain value's input: 0 or 1, or -1 for either (Add, Mul)

  static Link unary(std::string_view op) { return {op, {}, 0}; }
  static Link either(std::string_view op, Operand o) { return {op, o, -1}; }  // commutative
  static Link first(std::string_view op, Operand o) { return {op, o, 0}; }    // op(chain, o)
  static Link second(std::string_view op, Operand o) { return {op, o, 1}; }   // op(o, chain)
};

// One hop along a chain: the node a link found, the chain's value it reads (`in`), its other operand and output 0,
// which link of the alternatives fit (`alt`), and whether a checked constant has its value (`ok`).
struct Hop {
  NodeId node{};
  ValueId in{}, other{}, out{};
  int alt = -1;
  bool ok = true;
  explicit operator bool() const { return node.valid(); }
};

// `n` as one of `links` reading `v` (invalid `v`: whichever input the link puts the chain in; a
// commutative link tries the chain at input 0 first).
Hop fits(const Graph& g, NodeId n, ValueId v, std::span<const Link> links);
Hop fits(const Graph& g, NodeId n, ValueId v, std::initializer_list<Link> links);
// The first reader of `v` (explicit input, alive) that fits one of `links`.
Hop next(const Graph& g, const Uses& u, ValueId v, std::span<const Link> links);
Hop next(const Graph& g, const Uses& u, ValueId v, std::initializer_list<Link> links);
// The producer of `v` when it fits one of `links`; `in` is the chain's value before it.
Hop prev(const Graph& g, ValueId v, std::span<const Link> links);
Hop prev(const Graph& g, ValueId v, std::initializer_list<Link> links);

// v / c as exporters write it: Div(v, c) or Mul by 1/c in either order (alt 0: the Div).
std::array<Link, 2> divided_by(double c, Operand::Fit fit = Operand::Fit::Shape);
// v² as Pow(v, 2) (the exponent checked: Hop::ok) or Mul(v, v) (alt 1).
std::array<Link, 2> squared();

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
// How a matcher's step hands its failure up unchanged: `if (!step) return step.failure();` keeps
// both "not a block of this kind" and the Miss's reason.
struct Failure {
  std::string_view why;  // empty: not a block of this kind
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
  Found(Failure f) : why_(f.why) {}                                        // NOLINT
  explicit operator bool() const { return match_.has_value(); }
  // A block that failed a check (why() names it).
  bool missed() const { return !match_ && !why_.empty(); }
  const M& operator*() const { return *match_; }
  M& operator*() { return *match_; }
  const M* operator->() const { return &*match_; }
  M* operator->() { return &*match_; }
  // The failed check ("" when matched).
  std::string_view why() const { return why_; }
  // This outcome as a step's failure, for the matcher that called the step.
  Failure failure() const { return {why_}; }

 private:
  std::optional<M> match_;
  std::string_view why_;
};

#define MATCH_IF(cond, why)                     \
  do {                                          \
    if (!(cond)) return ::onnxforge::Miss{why}; \
  } while (0)

}  // namespace onnxforge
