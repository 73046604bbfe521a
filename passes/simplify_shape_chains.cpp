// simplify_shape_chains — integer values computed from shapes (Shape → Gather/Slice →
// Unsqueeze/Squeeze → Concat, with Cast/Add/Mul/Div/Where/Range... on the way) read through the
// shape engine's symbolic values (src/analysis: each element is a constant or an expression of
// named dims such as seq*12). Per reader of such a value:
//  - all elements known: the reader gets an initializer (unless the reader's own outputs are all
//    known too: then its readers get them and it dies);
//  - Reshape target partly symbolic: a constant with 0 where the element is provably the input's
//    dim at the same position (allowzero=0) and -1 for the one remaining element;
//  - Expand target partly symbolic: a constant with 1 where the element is provably the input's
//    (right-aligned) dim;
//  - Slice end provably the data's full dim on its axis: INT64_MAX;
//  - otherwise, a value equal to one computed earlier (same symbolic elements, e.g. Shape of two
//    tensors both [batch, seq, 64]): the reader reads the earlier one, so the copies die.
// Values read by a subgraph or that are graph outputs keep their producers; captured values are
// not folded inside bodies.                                                               class 0
#include <limits>
#include <unordered_map>

#include "analysis/shape_engine.h"
#include "analysis/shapes.h"
#include "ir/topo.h"
#include "passes/edits.h"
#include "passes/graph_util.h"
#include "passes/registry.h"

namespace onnxforge::passes {
namespace {

// What --list-passes says of this pass.
constexpr const char* kSummary =
    "shape-engine values: known chains → constants; Reshape targets with 0/-1, Expand targets with 1, Slice ends "
    "INT64_MAX for dynamic dims; equal chains merged";

// What one input of a reader becomes: a new constant, or an equal value computed earlier.
struct NewInput {
  uint32_t slot = 0;
  DType dtype = DType::Int64;
  bool scalar = false;
  std::vector<int64_t> values;
  ValueId earlier;  // valid: read this value instead of making a constant
};

struct Match {
  NodeId consumer;
  std::vector<NewInput> inputs;
};

// The shape engine's values for the graph being optimized. The driver's infer_shapes() of this
// round wrote the dims into the graph tables; the engine runs again read-only for the values.
class Values {
 public:
  Values(const Graph& g, const Uses& uses, const PassOptions& o)
      : g(g), uses(uses), own_(o.shapes ? ShapeReport{} : infer(g, o)), rep_(o.shapes ? *o.shapes : own_) {}

  const Graph& g;
  const Uses& uses;

  // Symbolic value of `v` when a node of this graph computes it (not a Constant, initializer or
  // capture: those are constants already, or the enclosing graph's business).
  const std::vector<SymDim>* computed(ValueId v) const {
    if (!v.valid() || g.outer(v).valid() || g.is_initializer(v)) return nullptr;
    NodeId p = g.producer(v);
    if (!p.valid() || g.is_op(p, "Constant")) return nullptr;
    return rep_.value(g.id(), v);
  }

  // computed(v) for a small integer/bool tensor whose rank and length agree with the value.
  const std::vector<SymDim>* small(ValueId v) const {
    const std::vector<SymDim>* val = computed(v);
    if (!val || !g.has_shape(v) || g.shape(v).size() > 1) return nullptr;
    DType t = g.dtype(v);
    if (t != DType::Int64 && t != DType::Int32 && t != DType::Bool) return nullptr;
    bool scalar = g.shape(v).empty();
    if (scalar ? val->size() != 1 : g.shape(v)[0] != Dim::of(static_cast<int64_t>(val->size()))) return nullptr;
    return val;
  }

  // `v` as a constant when every element is known.
  std::optional<NewInput> known(ValueId v) const {
    const std::vector<SymDim>* val = small(v);
    if (!val) return std::nullopt;
    NewInput c{0, g.dtype(v), g.shape(v).empty(), {}, {}};
    for (const SymDim& d : *val) {
      if (!d.is_constant()) return std::nullopt;
      c.values.push_back(d.value());
    }
    return c;
  }

  // Every output of `n` is known and read only by nodes of this graph, which then get the
  // constants themselves: `n` dies, so folding its inputs would only add initializers.
  bool folds_away(NodeId n) const {
    if (g.outputs(n).empty()) return false;
    for (ValueId o : g.outputs(n)) {
      if (!o.valid()) continue;
      if (uses.is_graph_output(o) || !known(o)) return false;
      for (const Use& u : uses.of(o))
        if (u.slot == Use::kImplicit) return false;
    }
    return true;
  }

 private:
  static ShapeReport infer(const Graph& g, const PassOptions& o) {
    ShapeOptions so;
    for (const auto& [k, v] : o.dims) so.dims[k] = v;
    return shape::infer_values(g.model(), so);
  }
  ShapeReport own_;  // inferred here when the driver did not pass its round's report
  const ShapeReport& rep_;
};

// For each partly symbolic small value, the first value in topological order with the same
// dtype, rank and elements. The first one cannot depend on the later one's readers, so they may
// read it instead.
std::unordered_map<uint32_t, ValueId> earlier_equals(const Values& vals) {
  const Graph& g = vals.g;
  std::unordered_map<std::string, ValueId> first;
  std::unordered_map<uint32_t, ValueId> out;
  for (NodeId n : topological_order(g)) {
    for (ValueId v : g.outputs(n)) {
      const std::vector<SymDim>* val = vals.small(v);
      if (!val || vals.known(v)) continue;
      std::string key =
          std::to_string(static_cast<int>(g.dtype(v))) + (g.shape(v).empty() ? "s" : "v") + to_string(*val);
      auto [it, inserted] = first.emplace(std::move(key), v);
      if (!inserted) out.emplace(v.index(), it->second);
    }
  }
  return out;
}

// Shape of `v` as SymDims; a capture's is its outer value's (captures carry no type of their own).
std::optional<std::vector<SymDim>> shape_of(const Graph& g, ValueId v) {
  const Graph* at = &g;
  while (at->outer(v).valid()) {
    v = at->outer(v);
    at = &g.model().graph(at->parent());
  }
  return ShapeReport::shape(*at, v);
}

// Reshape(x, t) with t partly symbolic: an element that is a positive constant stays, one equal
// to x's dim at the same position becomes 0, and at most one other becomes -1. An element -1 is
// first resolved from the inferred output shape (BERT's [batch*heads, -1, 64]).
std::optional<NewInput> reshape_target(const Values& vals, NodeId n) {
  const Graph& g = vals.g;
  if (!is(g, n, "Reshape") || g.inputs(n).size() != 2 || g.attr_int(n, "allowzero", 0) != 0) return std::nullopt;
  const std::vector<SymDim>* t = vals.small(g.input(n, 1));
  if (!t) return std::nullopt;
  auto x = shape_of(g, g.input(n, 0));
  auto y = shape_of(g, g.output(n, 0));
  if (y && y->size() != t->size()) y.reset();
  NewInput c{1, DType::Int64, false, {}, {}};
  int inferred = 0;
  for (size_t j = 0; j < t->size(); ++j) {
    SymDim d = (*t)[j];
    if (d.is_constant() && d.value() < -1) return std::nullopt;  // an invalid target: not ours to fix
    if (d.is_constant(-1) && y) d = (*y)[j];
    if (d.is_constant() && d.value() >= 0 && !(d.value() == 0 && !(*t)[j].is_constant(0))) {
      c.values.push_back(d.value());  // a 0 only where t has it (copy); a resolved 0 is an empty dim
    } else if (!d.is_constant() && x && j < x->size() && (*x)[j] == d) {
      c.values.push_back(0);
    } else {
      ++inferred;
      c.values.push_back(-1);
    }
  }
  if (inferred > 1) return std::nullopt;
  return c;
}

// Expand(x, t) with t partly symbolic: 1 broadcasts to x's dim when that (right-aligned) dim is
// the element.
std::optional<NewInput> expand_target(const Values& vals, NodeId n) {
  const Graph& g = vals.g;
  if (!is(g, n, "Expand") || g.inputs(n).size() != 2) return std::nullopt;
  const std::vector<SymDim>* t = vals.small(g.input(n, 1));
  auto x = shape_of(g, g.input(n, 0));
  if (!t || !x) return std::nullopt;
  int64_t shift = static_cast<int64_t>(x->size()) - static_cast<int64_t>(t->size());
  NewInput c{1, DType::Int64, false, {}, {}};
  for (size_t j = 0; j < t->size(); ++j) {
    const SymDim& d = (*t)[j];
    int64_t xi = static_cast<int64_t>(j) + shift;
    if (d.is_constant())
      c.values.push_back(d.value());
    else if (xi >= 0 && (*x)[static_cast<size_t>(xi)] == d)
      c.values.push_back(1);
    else
      return std::nullopt;
  }
  return c;
}

// Slice(x, starts, ends, axes...) with symbolic ends: an end equal to x's dim on its axis is
// clamped to that dim for either step sign, exactly like INT64_MAX.
std::optional<NewInput> slice_ends(const Values& vals, NodeId n) {
  const Graph& g = vals.g;
  if (!is(g, n, "Slice") || g.inputs(n).size() < 3) return std::nullopt;
  ValueId ends = g.input(n, 2);
  const std::vector<SymDim>* e = vals.small(ends);
  auto x = shape_of(g, g.input(n, 0));
  if (!e || !x || g.dtype(ends) != DType::Int64) return std::nullopt;
  std::vector<int64_t> axes;
  if (g.inputs(n).size() > 3 && g.input(n, 3).valid()) {
    auto a = constant_ints(g, g.input(n, 3));
    if (!a) return std::nullopt;
    axes = *a;
  } else {
    for (size_t i = 0; i < e->size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (axes.size() != e->size()) return std::nullopt;
  int64_t rank = static_cast<int64_t>(x->size());
  NewInput c{2, DType::Int64, g.shape(ends).empty(), {}, {}};
  for (size_t i = 0; i < e->size(); ++i) {
    int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    const SymDim& d = (*e)[i];
    if (d.is_constant())
      c.values.push_back(d.value());
    else if (a >= 0 && a < rank && (*x)[a] == d)
      c.values.push_back(std::numeric_limits<int64_t>::max());
    else
      return std::nullopt;
  }
  return c;
}

std::optional<NewInput> partly_symbolic(const Values& vals, NodeId n, uint32_t slot) {
  if (slot == 1) {
    if (auto c = reshape_target(vals, n)) return c;
    if (auto c = expand_target(vals, n)) return c;
  }
  if (slot == 2) return slice_ends(vals, n);
  return std::nullopt;
}

std::vector<Match> analyze(const Graph& g, const Uses& uses, const PassOptions& o) {
  Values vals(g, uses, o);
  auto equal = earlier_equals(vals);
  std::vector<Match> out;
  for (NodeId n : g.nodes()) {
    Match m{n, {}};
    std::optional<bool> dies;  // folds_away(n), computed once when needed
    for (uint32_t i = 0; i < g.inputs(n).size(); ++i) {
      ValueId v = g.input(n, i);
      if (auto c = vals.known(v)) {
        if (!dies) dies = vals.folds_away(n);
        if (*dies) break;
        c->slot = i;
        m.inputs.push_back(std::move(*c));
      } else if (auto p = partly_symbolic(vals, n, i)) {
        m.inputs.push_back(std::move(*p));
      } else if (auto it = v.valid() ? equal.find(v.index()) : equal.end(); it != equal.end()) {
        m.inputs.push_back(NewInput{i, DType::Int64, false, {}, it->second});
      }
    }
    if (!m.inputs.empty() && !(dies && *dies)) out.push_back(std::move(m));
  }
  return out;
}

std::vector<std::byte> encode(const NewInput& c) {
  if (c.dtype == DType::Int64) return to_bytes(c.values);
  std::vector<std::byte> b;
  for (int64_t x : c.values) {
    if (c.dtype == DType::Bool) {
      b.push_back(static_cast<std::byte>(x != 0));
    } else {
      int32_t v = static_cast<int32_t>(x);
      const auto* p = reinterpret_cast<const std::byte*>(&v);
      b.insert(b.end(), p, p + sizeof v);
    }
  }
  return b;
}

bool apply(Edits& e, const Match& m) {
  if (e.touched(m.consumer)) return false;
  for (const NewInput& c : m.inputs)  // an earlier pass may have replaced or killed its producer
    if (c.earlier.valid() && e.touched_earlier(e.g.producer(c.earlier))) return false;
  for (const NewInput& c : m.inputs) {
    if (c.earlier.valid()) {
      e.set_input(m.consumer, c.slot, c.earlier);
      continue;
    }
    std::vector<int64_t> dims;
    if (!c.scalar) dims.push_back(static_cast<int64_t>(c.values.size()));
    e.set_input(m.consumer, c.slot, e.new_constant("shape", c.dtype, dims, encode(c)));
  }
  return true;
}

}  // namespace

ONNXFORGE_PASS(simplify_shape_chains, Match, AccuracyClass::Lossless, analyze, apply, {}, kSummary);

}  // namespace onnxforge::passes
