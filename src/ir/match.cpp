#include "ir/match.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>
#include <unordered_set>

#include "ir/float16.h"
#include "ir/op_traits.h"

namespace onnxforge {

namespace {

template <class T>
T load(const std::byte* p, uint64_t i) {
  T x;
  std::memcpy(&x, p + i * sizeof(T), sizeof(T));
  return x;
}

bool numeric(DType t) {
  switch (t) {
    case DType::Float:
    case DType::Double:
    case DType::Float16:
    case DType::BFloat16:
    case DType::Int64:
    case DType::Int32:
    case DType::Int16:
    case DType::Int8:
    case DType::Uint8:
    case DType::Uint16:
    case DType::Uint32:
    case DType::Uint64:
    case DType::Bool: return true;
    default: return false;
  }
}

// A numeric constant tensor whose bytes cover its elements (a truncated file is not a value).
TensorId numeric_constant(const Graph& g, ValueId v) {
  TensorId t = constant_tensor(g, v);
  if (!t.valid() || !numeric(g.model().tensors.dtype(t))) return {};
  const TensorStore& ts = g.model().tensors;
  auto need = dtype_storage_bytes(ts.dtype(t), ts.element_count(t));
  return need && *need <= ts.byte_size(t) ? t : TensorId{};
}

}  // namespace

// ---------------------------------------------------------------- nodes

bool is(const Graph& g, NodeId n, std::string_view op) { return n.valid() && g.alive(n) && g.is_op(n, op); }

bool is_one_of(const Graph& g, NodeId n, std::initializer_list<std::string_view> ops) {
  for (std::string_view op : ops)
    if (is(g, n, op)) return true;
  return false;
}

NodeId producer_of(const Graph& g, NodeId n, size_t i) {
  ValueId v = g.input(n, i);
  return v.valid() ? g.producer(v) : NodeId{};
}

NodeId input_op(const Graph& g, NodeId n, size_t i, std::string_view op) {
  NodeId p = producer_of(g, n, i);
  return is(g, p, op) ? p : NodeId{};
}

ValueId other_input(const Graph& g, NodeId n, ValueId v) { return g.input(n, 0) == v ? g.input(n, 1) : g.input(n, 0); }

// ---------------------------------------------------------------- readers

Use single_use(const Uses& uses, ValueId v) {
  if (!v.valid() || !uses.single(v)) return {NodeId{}, 0};
  const Use& u = uses.of(v)[0];
  return u.slot == Use::kImplicit ? Use{NodeId{}, 0} : u;
}

NodeId single_consumer(const Graph&, const Uses& uses, ValueId v) { return single_use(uses, v).node; }

NodeId single_consumer(const Graph& g, const Uses& uses, NodeId n) {
  return n.valid() ? single_use(uses, g.output(n, 0)).node : NodeId{};
}

bool feeds_graph_output(const Graph& g, const Uses& uses, NodeId n) {
  for (ValueId v : g.outputs(n))
    if (v.valid() && uses.is_graph_output(v)) return true;
  return false;
}

bool can_forward(const Graph& g, const Uses& uses, ValueId out, ValueId kept) {
  if (!uses.is_graph_output(out)) return true;
  return g.producer(kept).valid() && !g.is_graph_input(kept) && !g.is_initializer(kept) && !g.outer(kept).valid() &&
         !uses.is_graph_output(kept);
}

// ---------------------------------------------------------------- constants

double element_as_double(const Model& m, TensorId t, uint64_t i) {
  const std::byte* p = m.tensors.bytes(t).data();
  switch (m.tensors.dtype(t)) {
    case DType::Float: return load<float>(p, i);
    case DType::Double: return load<double>(p, i);
    case DType::Float16: return half_to_float(load<uint16_t>(p, i));
    case DType::BFloat16: return bf16_to_float(load<uint16_t>(p, i));
    case DType::Int64: return static_cast<double>(load<int64_t>(p, i));
    case DType::Int32: return load<int32_t>(p, i);
    case DType::Int16: return load<int16_t>(p, i);
    case DType::Int8: return load<int8_t>(p, i);
    case DType::Uint8: return load<uint8_t>(p, i);
    case DType::Uint16: return load<uint16_t>(p, i);
    case DType::Uint32: return load<uint32_t>(p, i);
    case DType::Uint64: return static_cast<double>(load<uint64_t>(p, i));
    case DType::Bool: return load<uint8_t>(p, i) ? 1.0 : 0.0;
    default: return 0;
  }
}

TensorId constant_tensor(const Graph& g, ValueId v) {
  if (!v.valid()) return {};
  if (g.is_constant(v)) return g.initializer(v);
  NodeId p = g.producer(v);
  if (p.valid() && g.is_op(p, "Constant")) {
    const Attr* a = g.attr(p, "value");
    if (a && a->type == AttrType::Tensor) return a->tensor;
  }
  return {};
}

std::optional<double> scalar(const Graph& g, ValueId v, DType want) {
  if (!v.valid()) return std::nullopt;
  auto wanted = [&](DType t) { return want == DType::Undefined || want == t; };
  if (TensorId t = numeric_constant(g, v); t.valid()) {
    const TensorStore& ts = g.model().tensors;
    if (ts.element_count(t) != 1 || !wanted(ts.dtype(t))) return std::nullopt;
    return element_as_double(g.model(), t, 0);
  }
  NodeId p = g.producer(v);
  if (!is(g, p, "Constant")) return std::nullopt;
  if (const Attr* a = g.attr(p, "value_float"); a && a->type == AttrType::Float && wanted(DType::Float)) return a->f;
  if (const Attr* a = g.attr(p, "value_int"); a && a->type == AttrType::Int && wanted(DType::Int64))
    return static_cast<double>(a->i);
  return std::nullopt;
}

std::optional<std::vector<int64_t>> constant_ints(const Graph& g, ValueId v) {
  TensorId t = constant_tensor(g, v);
  if (!t.valid()) return std::nullopt;
  const TensorStore& ts = g.model().tensors;
  DType d = ts.dtype(t);
  if (d != DType::Int64 && d != DType::Int32) return std::nullopt;
  uint64_t n = ts.element_count(t);
  if (ts.byte_size(t) < n * (d == DType::Int64 ? 8 : 4)) return std::nullopt;
  std::vector<int64_t> out(n);
  for (uint64_t i = 0; i < n; ++i)
    out[i] = d == DType::Int64 ? load<int64_t>(ts.bytes(t).data(), i) : load<int32_t>(ts.bytes(t).data(), i);
  return out;
}

std::optional<std::vector<double>> constant_values(const Graph& g, ValueId v) {
  TensorId t = numeric_constant(g, v);
  if (!t.valid()) return std::nullopt;
  uint64_t n = g.model().tensors.element_count(t);
  std::vector<double> out(n);
  for (uint64_t i = 0; i < n; ++i) out[i] = element_as_double(g.model(), t, i);
  return out;
}

namespace {

// Every element of numeric constant `v` satisfies `pred`; false for non-constants and for
// tensors too large to scan in a matcher (16 M elements).
template <class Pred>
bool all_elements(const Graph& g, ValueId v, Pred pred) {
  TensorId t = numeric_constant(g, v);
  if (!t.valid()) return false;
  uint64_t n = g.model().tensors.element_count(t);
  if (n > (uint64_t{1} << 24)) return false;
  for (uint64_t i = 0; i < n; ++i)
    if (!pred(element_as_double(g.model(), t, i))) return false;
  return true;
}

}  // namespace

bool constant_all_equal(const Graph& g, ValueId v, double x) {
  return all_elements(g, v, [x](double e) { return e == x; });
}

bool constant_near(const Graph& g, ValueId v, double x, double rel) {
  TensorId t = numeric_constant(g, v);
  if (!t.valid() || g.model().tensors.element_count(t) == 0) return false;
  return all_elements(g, v, [x, tol = rel * std::fabs(x)](double e) { return std::fabs(e - x) <= tol; });
}

// ---------------------------------------------------------------- shapes

std::optional<std::vector<int64_t>> static_shape(const Graph& g, ValueId v) {
  if (!v.valid()) return std::nullopt;
  TensorId t = constant_tensor(g, v);
  if (t.valid()) {
    auto d = g.model().tensors.dims(t);
    return std::vector<int64_t>(d.begin(), d.end());
  }
  if (!g.has_shape(v)) return std::nullopt;
  std::vector<int64_t> out;
  for (const Dim& d : g.shape(v)) {
    if (!d.known()) return std::nullopt;
    out.push_back(d.value);
  }
  return out;
}

int64_t known_rank(const Graph& g, ValueId v) {
  if (!v.valid()) return -1;
  TensorId t = constant_tensor(g, v);
  if (t.valid()) return static_cast<int64_t>(g.model().tensors.dims(t).size());
  return g.has_shape(v) ? g.rank(v) : -1;
}

DType known_dtype(const Graph& g, ValueId v, const std::function<DType(ValueId)>& graph_input_type) {
  static const std::unordered_set<std::string_view> keeps_type{"Add",
                                                               "Sub",
                                                               "Mul",
                                                               "Div",
                                                               "Pow",
                                                               "Min",
                                                               "Max",
                                                               "Sum",
                                                               "Mean",
                                                               "Clip",
                                                               "MatMul",
                                                               "Gemm",
                                                               "Conv",
                                                               "ConvTranspose",
                                                               "Softmax",
                                                               "LogSoftmax",
                                                               "ReduceMean",
                                                               "ReduceSum",
                                                               "ReduceMax",
                                                               "ReduceMin",
                                                               "ReduceProd",
                                                               "ReduceL2",
                                                               "Transpose",
                                                               "Reshape",
                                                               "Flatten",
                                                               "Squeeze",
                                                               "Unsqueeze",
                                                               "Expand",
                                                               "Slice",
                                                               "Gather",
                                                               "Concat",
                                                               "Split",
                                                               "Tile",
                                                               "Pad",
                                                               "Dropout",
                                                               "LayerNormalization",
                                                               "BatchNormalization",
                                                               "InstanceNormalization",
                                                               "GroupNormalization",
                                                               "RMSNormalization",
                                                               "MaxPool",
                                                               "AveragePool",
                                                               "GlobalAveragePool",
                                                               "GlobalMaxPool",
                                                               "Resize",
                                                               "PRelu",
                                                               "Attention",
                                                               "RotaryEmbedding",
                                                               "Swish"};
  for (int hops = 0; v.valid() && hops < 256; ++hops) {
    if (g.dtype(v) != DType::Undefined) return g.dtype(v);
    if (TensorId t = g.initializer(v); t.valid()) return g.model().tensors.dtype(t);
    const NodeId p = g.producer(v);
    if (!p.valid() && graph_input_type) {
      const auto ins = g.graph_inputs();
      if (std::find(ins.begin(), ins.end(), v) != ins.end()) return graph_input_type(v);
    }
    if (!p.valid() || g.inputs(p).empty()) return DType::Undefined;
    if (is(g, p, "Cast")) {
      const Attr* to = g.attr(p, "to");
      return to && to->type == AttrType::Int && to->i > 0 && to->i < 64 ? static_cast<DType>(to->i) : DType::Undefined;
    }
    if (is(g, p, "Constant")) {
      const Attr* a = g.attr(p, "value");
      return a && a->type == AttrType::Tensor && a->tensor.valid() ? g.model().tensors.dtype(a->tensor)
                                                                   : DType::Undefined;
    }
    if (is(g, p, "Where")) {
      v = g.input(p, 1);
      continue;
    }
    const bool same = has_fact(g, p, kUnary) || keeps_type.count(str(g.op_type(p)));
    if (!same || (v != g.output(p, 0) && !is(g, p, "Split"))) return DType::Undefined;
    v = g.input(p, 0);
  }
  return DType::Undefined;
}

// Where a capture's type lives: the outer value it reads (through every enclosing scope).
std::pair<const Graph*, ValueId> declaring_scope(const Graph& g, ValueId v) {
  const Graph* at = &g;
  while (v.valid() && !at->has_type(v) && at->outer(v).valid() && at->parent().valid()) {
    v = at->outer(v);
    at = &at->model().graph(at->parent());
  }
  return {at, v};
}

DType dtype_of(const Graph& g, ValueId v) {
  if (!v.valid()) return DType::Undefined;
  if (TensorId t = constant_tensor(g, v); t.valid()) return g.model().tensors.dtype(t);
  auto [at, d] = declaring_scope(g, v);
  return at->has_type(d) ? at->dtype(d) : DType::Undefined;
}

int64_t rank_of(const Graph& g, ValueId v) {
  if (!v.valid()) return -1;
  if (int64_t r = known_rank(g, v); r >= 0) return r;
  auto [at, d] = declaring_scope(g, v);
  return known_rank(*at, d);
}

bool is_half(DType t) { return t == DType::Float16 || t == DType::BFloat16; }
bool is_float(DType t) { return t == DType::Float || t == DType::Double || is_half(t); }

double rounding(DType t) {
  switch (t) {
    case DType::Float16: return std::ldexp(2.0, -10);
    case DType::BFloat16: return std::ldexp(2.0, -7);
    case DType::Float:
    case DType::Double: return std::ldexp(2.0, -23);
    default: return 0;
  }
}

bool scalar_near(const Graph& g, ValueId v, double want) {
  if (!scalar(g, v)) return false;
  // A Constant's value_float / value_int carry no tensor: float32 rounding.
  TensorId t = constant_tensor(g, v);
  return constant_near(g, v, want, rounding(t.valid() ? g.model().tensors.dtype(t) : DType::Float));
}

std::optional<std::vector<int64_t>> trailing_dims(const Graph& graph, ValueId value, int64_t k) {
  auto [at, v] = declaring_scope(graph, value);
  const Graph& g = *at;
  if (!v.valid() || !g.has_shape(v) || g.rank(v) < k) return std::nullopt;
  auto shape = g.shape(v);
  std::vector<int64_t> out;
  for (size_t i = shape.size() - static_cast<size_t>(k); i < shape.size(); ++i) {
    if (!shape[i].known()) return std::nullopt;
    out.push_back(shape[i].value);
  }
  return out;
}

std::optional<std::vector<int64_t>> transpose_perm(const Graph& g, NodeId t) {
  auto p = g.attr_ints(t, "perm");
  if (!p.empty()) return std::vector<int64_t>(p.begin(), p.end());
  int64_t r = known_rank(g, g.input(t, 0));
  if (r < 0) return std::nullopt;
  std::vector<int64_t> rev(r);
  for (int64_t i = 0; i < r; ++i) rev[i] = r - 1 - i;
  return rev;
}

std::optional<std::vector<int64_t>> axes_of(const Graph& g, NodeId n) {
  if (g.input(n, 1).valid()) return constant_ints(g, g.input(n, 1));
  auto a = g.attr_ints(n, "axes");
  if (a.empty()) return std::nullopt;
  return std::vector<int64_t>(a.begin(), a.end());
}

std::optional<SliceParams> slice_params(const Graph& g, NodeId s) {
  SliceParams p;
  auto ints = [&](size_t input, const char* attr) -> std::optional<std::vector<int64_t>> {
    if (g.input(s, 1).valid()) {  // opset 10+: every parameter an input
      if (!g.input(s, input).valid()) return std::vector<int64_t>{};
      return constant_ints(g, g.input(s, input));
    }
    if (!attr) return std::vector<int64_t>{};
    auto a = g.attr_ints(s, attr);
    return std::vector<int64_t>(a.begin(), a.end());
  };
  auto starts = ints(1, "starts"), ends = ints(2, "ends"), axes = ints(3, "axes"), steps = ints(4, nullptr);
  if (!starts || !axes || !steps || (ends && starts->size() != ends->size())) return std::nullopt;
  p.starts = std::move(*starts);
  p.ends = std::move(ends);
  p.axes = std::move(*axes);
  p.steps = std::move(*steps);
  if (p.axes.empty())
    for (size_t i = 0; i < p.starts.size(); ++i) p.axes.push_back(static_cast<int64_t>(i));
  if (p.steps.empty()) p.steps.assign(p.starts.size(), 1);
  if (p.axes.size() != p.starts.size() || p.steps.size() != p.starts.size()) return std::nullopt;
  return p;
}

ClipBounds clip_bounds(const Graph& g, NodeId clip) {
  ClipBounds b;
  if (g.model().opset("") < 11) {
    if (g.attr(clip, "min")) b.min = g.attr_float(clip, "min", 0);
    if (g.attr(clip, "max")) b.max = g.attr_float(clip, "max", 0);
    b.known = true;
    return b;
  }
  for (size_t i : {1, 2}) {
    if (g.inputs(clip).size() <= i || !g.input(clip, i).valid()) continue;
    auto v = scalar(g, g.input(clip, i));
    if (!v) return b;
    (i == 1 ? b.min : b.max) = *v;
  }
  b.known = true;
  return b;
}

// ---------------------------------------------------------------- chains

namespace {

// Whether `o` (the operand that is not the chain's value `v`) is what `want` asks; sets `ok`.
bool admits(const Graph& g, const Operand& want, ValueId o, ValueId v, bool& ok) {
  using Is = Operand::Is;
  switch (want.is) {
    case Is::Nothing:
    case Is::Anything: break;
    case Is::NotChain:
      if (o == v) return false;
      break;
    case Is::Chain:
      if (o != v) return false;
      break;
    case Is::Value:
      if (o != want.value) return false;
      break;
    case Is::Constant:
      if (!constant_tensor(g, o).valid()) return false;
      break;
    case Is::Scalar:
      if (!scalar(g, o)) return false;
      break;
  }
  ok = !want.check || scalar_near(g, o, want.expect);
  return ok || want.fit == Operand::Fit::Shape;
}

// `n` as `link` with the chain's value at input `slot` (`v` invalid: whatever is there).
Hop fits_at(const Graph& g, NodeId n, ValueId v, const Link& link, size_t slot) {
  const ValueId in = g.input(n, slot);
  if (v.valid() && in != v) return {};
  Hop s{.node = n, .in = in, .out = g.output(n, 0)};
  if (link.other.is != Operand::Is::Nothing) s.other = g.input(n, 1 - slot);
  if (!admits(g, link.other, s.other, in, s.ok)) return {};
  return s;
}

}  // namespace

Hop fits(const Graph& g, NodeId n, ValueId v, std::span<const Link> links) {
  for (size_t i = 0; i < links.size(); ++i) {
    const Link& link = links[i];
    if (!is(g, n, link.op)) continue;
    Hop s = fits_at(g, n, v, link, link.slot == 1 ? 1 : 0);
    if (!s && link.slot < 0) s = fits_at(g, n, v, link, 1);
    if (s) {
      s.alt = static_cast<int>(i);
      return s;
    }
  }
  return {};
}

Hop next(const Graph& g, const Uses& u, ValueId v, std::span<const Link> links) {
  if (!v.valid()) return {};
  for (const Use& use : u.of(v))
    if (use.slot != Use::kImplicit && g.alive(use.node))
      if (Hop s = fits(g, use.node, v, links)) return s;
  return {};
}

Hop prev(const Graph& g, ValueId v, std::span<const Link> links) {
  return v.valid() ? fits(g, g.producer(v), {}, links) : Hop{};
}

Hop fits(const Graph& g, NodeId n, ValueId v, std::initializer_list<Link> links) {
  return fits(g, n, v, std::span<const Link>(links.begin(), links.size()));
}
Hop next(const Graph& g, const Uses& u, ValueId v, std::initializer_list<Link> links) {
  return next(g, u, v, std::span<const Link>(links.begin(), links.size()));
}
Hop prev(const Graph& g, ValueId v, std::initializer_list<Link> links) {
  return prev(g, v, std::span<const Link>(links.begin(), links.size()));
}

std::array<Link, 2> divided_by(double c, Operand::Fit fit) {
  return {Link::first("Div", Operand::scalar(c, fit)), Link::either("Mul", Operand::scalar(1 / c, fit))};
}

std::array<Link, 2> squared() { return {Link::first("Pow", Operand::any(2.0)), Link::either("Mul", Operand::same())}; }

}  // namespace onnxforge
