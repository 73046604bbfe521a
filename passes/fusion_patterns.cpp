#include "passes/fusion_patterns.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ir/error.h"
#include "ir/float16.h"
#include "passes/edits.h"

namespace onnxforge::passes::pattern {

const char* private_values(const Graph& g, const Uses& u, std::span<const NodeId> block, ValueId out) {
  auto inside = [&](NodeId n) { return std::find(block.begin(), block.end(), n) != block.end(); };
  for (NodeId n : block)
    for (ValueId v : g.outputs(n)) {
      if (!v.valid() || v == out) continue;
      if (u.is_graph_output(v)) return "intermediate is a graph output";
      for (const Use& use : u.of(v)) {
        if (use.slot == Use::kImplicit) return "intermediate read by a subgraph";
        if (!inside(use.node)) return "intermediate has other readers";
      }
    }
  return nullptr;
}

void result_last(const Graph& g, std::vector<NodeId>& block, ValueId out) {
  auto it = std::find(block.begin(), block.end(), g.producer(out));
  if (it != block.end()) std::rotate(it, it + 1, block.end());
}

bool read_only_by(const Graph&, const Uses& u, ValueId v, std::span<const NodeId> nodes) {
  if (u.is_graph_output(v)) return false;
  for (const Use& use : u.of(v))
    if (use.slot == Use::kImplicit || std::find(nodes.begin(), nodes.end(), use.node) == nodes.end()) return false;
  return true;
}

ReduceAxes reduce_axes(const Graph& g, NodeId reduce) {
  ReduceAxes r;
  r.keepdims = g.attr_int(reduce, "keepdims", 1) != 0;
  if (g.model().opset("") >= 18) {
    ValueId a = g.input(reduce, 1);
    if (!a.valid()) {
      r.known = true;
      r.all = g.attr_int(reduce, "noop_with_empty_axes", 0) == 0;
      r.noop = !r.all;
      return r;
    }
    auto ints = constant_ints(g, a);
    if (!ints) return r;
    r.known = true;
    r.axes = *ints;
    if (r.axes.empty()) {
      r.all = g.attr_int(reduce, "noop_with_empty_axes", 0) == 0;
      r.noop = !r.all;
    }
    return r;
  }
  r.known = true;
  if (const Attr* a = g.attr(reduce, "axes"); a && a->type == AttrType::Ints) {
    auto ints = g.ints(*a);
    r.axes.assign(ints.begin(), ints.end());
  }
  r.all = r.axes.empty();
  return r;
}

std::optional<std::vector<int64_t>> negative_axes(const ReduceAxes& a, int64_t r) {
  std::vector<int64_t> out;
  if (a.all) {
    if (r < 0) return std::nullopt;
    for (int64_t i = -r; i < 0; ++i) out.push_back(i);
    return out;
  }
  for (int64_t x : a.axes) {
    if (x >= 0) {
      if (r < 0 || x >= r) return std::nullopt;
      x -= r;
    } else if (r >= 0 && x < -r) {
      return std::nullopt;
    }
    out.push_back(x);
  }
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) return std::nullopt;
  return out;
}

int64_t trailing_count(const std::vector<int64_t>& neg) {
  const int64_t k = static_cast<int64_t>(neg.size());
  for (int64_t i = 0; i < k; ++i)
    if (neg[static_cast<size_t>(i)] != i - k) return 0;
  return k;
}

std::optional<InvRms> match_inv_rms(const Graph& g, const Uses& u, ValueId v, ValueId num) {
  const Hop add = next(g, u, v, {Link::either("Add", Operand::any())});
  const Hop sqrt = add ? next(g, u, add.out, {Link::unary("Sqrt")}) : Hop{};
  if (!sqrt) return std::nullopt;
  InvRms m{.add = add.node, .sqrt = sqrt.node, .eps = add.other};
  // Div(num, s), else Reciprocal(s) or Div(1, s) and then Mul(num, ·).
  Hop scale = next(g, u, sqrt.out, {Link::second("Div", Operand::is_value(num))});
  if (!scale) {
    const Hop recip = next(g, u, sqrt.out, {Link::unary("Reciprocal"), Link::second("Div", Operand::other())});
    if (!recip) return std::nullopt;
    m.recip = recip.node;
    m.one = recip.other;
    scale = next(g, u, recip.out, {Link::either("Mul", Operand::is_value(num))});
    if (!scale) return std::nullopt;
  }
  m.scale = scale.node;
  m.normalized = scale.out;
  return m;
}

Found<float> inv_rms_constants(const Graph& g, const Hop& square, const InvRms& tail, ValueId x) {
  if (!square.ok) return Miss{"constants differ"};  // Pow's exponent (squared())
  if (tail.one.valid() && !scalar_near(g, tail.one, 1.0)) return Miss{"constants differ"};
  auto eps = scalar(g, tail.eps);
  if (!eps || !std::isfinite(*eps)) return Miss{"epsilon not constant"};
  if (const int64_t rx = rank_of(g, x); rx >= 0 && rank_of(g, tail.eps) > rx) return Miss{"epsilon broadcasts"};
  return static_cast<float>(*eps);
}

Found<int64_t> trailing_axes(const Graph& g, std::span<const NodeId> reduces, ValueId x) {
  const int64_t r = rank_of(g, x);
  std::optional<std::vector<int64_t>> first;
  for (NodeId n : reduces) {
    ReduceAxes a = reduce_axes(g, n);
    if (!a.known) return Miss{"axes not constant"};
    if (a.noop) return Miss{"reduces no axis"};
    if (!a.keepdims) return Miss{"keepdims=0"};
    auto neg = negative_axes(a, r);
    if (!neg) return Miss{"rank unknown"};
    if (first && *first != *neg) return Miss{"axes differ"};
    first = std::move(neg);
  }
  const int64_t k = first ? trailing_count(*first) : 0;
  if (k == 0) return Miss{"axes not trailing"};
  return k;
}

Found<int64_t> norm_checks(const Graph& g, const Uses& u, NormMatch& r, const Hop& square, const InvRms& tail,
                           std::span<const NodeId> reduces, ValueId x) {
  r.nodes.insert(r.nodes.end(), {tail.add, tail.sqrt, tail.scale});
  if (tail.recip.valid()) r.nodes.push_back(tail.recip);
  Found<float> eps = inv_rms_constants(g, square, tail, x);
  if (!eps) return eps.failure();
  r.eps = *eps;
  Found<int64_t> k = trailing_axes(g, reduces, x);
  if (!k) return k;
  if (const char* why = private_values(g, u, r.nodes, tail.normalized)) return Miss{why};
  r.type = dtype_of(g, x);
  r.x = x;
  return k;
}

ValueId stash_casts(const Graph& g, const Uses& u, NormMatch& r, ValueId n, std::span<const NodeId> readers) {
  const NodeId up = producer_op(g, r.x, "Cast");
  const DType t0 = up.valid() ? dtype_of(g, g.input(up, 0)) : DType::Undefined;
  if (r.type != DType::Float || !is_half(t0)) return n;
  const NodeId down = only_reader(g, u, n, "Cast");
  if (!down.valid() || g.attr_int(down, "to", 0) != static_cast<int64_t>(t0) || !read_only_by(g, u, r.x, readers))
    return n;
  r.stash = true;
  r.type = t0;
  r.x = g.input(up, 0);
  r.nodes.insert(r.nodes.end(), {up, down});
  return g.output(down, 0);
}

Found<NormMatch> finish_norm(const Graph& g, const Uses& u, NormMatch r, ValueId x, int64_t k, ValueId n,
                             bool with_bias) {
  if (r.type == DType::Double) return Miss{"float64 (no runtime kernel)"};
  // A chain in float16/bfloat16 itself: the op computes its statistics in float (stash_type=1, as
  // with the Casts) and rounds once where the chain rounds at each node; verification judges such
  // models in ulps of their type (docs/accuracy.md), and ONNX Runtime computes the op in float too.
  if (is_half(r.type)) r.stash = true;
  if (r.type == DType::Undefined) return Miss{"type unknown"};
  if (!is_float(r.type)) return Miss{"not floating point"};
  auto dims = trailing_dims(g, x, k);
  if (!dims) return Miss{"normalized shape unknown"};
  r.norm_dims = *dims;
  r.affine = absorb_affine(g, u, n, r.type, rank_of(g, x), r.norm_dims, with_bias);
  // float16 with a bias: the chain rounds x̂ and x̂·γ to float16 before adding β, the op (here and in
  // ONNX Runtime) rounds once at the end; where β cancels x̂·γ the two differ by an ulp of x̂·γ
  // (measured: max_diff 0.00195 on random data), beyond float32's bound at that small element but
  // an ulp of the output's scale, which is how verification judges a float16 model
  // (docs/accuracy.md). So γ and β are taken over, as for float32.
  if (r.affine.mul.valid()) r.nodes.push_back(r.affine.mul);
  if (r.affine.add.valid()) r.nodes.push_back(r.affine.add);
  r.out = r.affine.out;
  result_last(g, r.nodes, r.out);
  return r;
}

// float16 chains fuse too: GELU's 1 + erf(x/√2) keeps few digits in float16 where erf is near −1
// (the op and the chain differ by 0.00195 near 0), a few float16 ulps of the output's scale, which
// is how verification judges a model that computes in float16 (docs/accuracy.md).
Found<ActivationMatch> finish_activation(const Graph& g, const Uses& u, ActivationMatch r) {
  if (const char* why = private_values(g, u, r.nodes, r.out)) return Miss{why};
  const DType type = dtype_of(g, r.x);
  if (type == DType::Undefined) return Miss{"type unknown"};
  if (!is_float(type)) return Miss{"not floating point"};
  result_last(g, r.nodes, r.out);
  return r;
}

bool apply_activation(Edits& e, const ActivationMatch& m) {
  return e.replace_with(m.nodes, m.op, {m.x}, m.attrs).valid();
}

bool apply_norm(Edits& e, const NormMatch& m) {
  if (e.any_touched(std::span<const NodeId>(m.nodes))) return false;  // before adding constants
  const std::string_view op = m.op;
  const std::string hint(op);
  std::vector<ValueId> ins = {
      m.x, norm_parameter(e, hint + "_scale", m.affine.scale_base, m.affine.scale_offset, 1.0, m.type, m.norm_dims)};
  if (m.affine.bias.valid()) ins.push_back(norm_parameter(e, hint + "_bias", m.affine.bias, 0, 0, m.type, m.norm_dims));
  std::vector<NewAttr> attrs = {NewAttr::Int("axis", -static_cast<int64_t>(m.norm_dims.size())),
                                NewAttr::Float("epsilon", m.eps)};
  if (m.stash) attrs.push_back(NewAttr::Int("stash_type", 1));
  return e.replace_with(m.nodes, op, std::move(ins), std::move(attrs)).valid();
}

namespace {

// A constant of dims `c` multiplies a rank-`rank` value without growing it and varies only along
// its trailing `norm.size()` dims.
bool over_norm_dims(std::span<const int64_t> c, int64_t rank, std::span<const int64_t> norm) {
  const size_t k = norm.size();
  if (static_cast<int64_t>(c.size()) > rank) return false;
  for (size_t i = 0; i < c.size(); ++i) {
    const size_t j = c.size() - 1 - i;  // distance from the right
    if (j < k) {
      if (c[i] != 1 && c[i] != norm[k - 1 - j]) return false;
    } else if (c[i] != 1) {
      return false;
    }
  }
  return true;
}

bool param_ok(const Graph& g, ValueId c, DType t, int64_t rank, std::span<const int64_t> norm) {
  TensorId ct = constant_tensor(g, c);
  return ct.valid() && g.model().tensors.dtype(ct) == t && over_norm_dims(g.model().tensors.dims(ct), rank, norm);
}

}  // namespace

Affine absorb_affine(const Graph& g, const Uses& u, ValueId normalized, DType t, int64_t rank,
                     std::span<const int64_t> norm_dims, bool with_bias) {
  Affine a;
  a.out = normalized;
  if (NodeId mul = only_reader(g, u, normalized, "Mul"); mul.valid()) {
    ValueId c = other_input(g, mul, normalized);
    if (c != normalized && param_ok(g, c, t, rank, norm_dims)) {
      a.mul = mul;
      a.scale = a.scale_base = c;
    } else if (NodeId sum = producer_op(g, c, "Add"); sum.valid() && (t == DType::Float || t == DType::Double)) {
      // Gemma: x̂ · (1 + w), both constants; folded into one scale.
      for (int k = 0; k < 2 && !a.mul.valid(); ++k) {
        ValueId w = g.input(sum, static_cast<size_t>(k)), one = g.input(sum, static_cast<size_t>(1 - k));
        auto off = scalar(g, one);
        if (off && dtype_of(g, one) == t && param_ok(g, w, t, rank, norm_dims)) {
          a.mul = mul;
          a.scale = c;
          a.scale_base = w;
          a.scale_offset = *off;
        }
      }
    }
    if (a.mul.valid()) a.out = g.output(mul, 0);
  }
  if (!with_bias) return a;
  if (NodeId add = only_reader(g, u, a.out, "Add"); add.valid()) {
    ValueId b = other_input(g, add, a.out);
    if (b != a.out && param_ok(g, b, t, rank, norm_dims)) {
      a.add = add;
      a.bias = b;
      a.out = g.output(add, 0);
    }
  }
  return a;
}

namespace {

void encode(double v, DType t, std::byte* out) {
  switch (t) {
    case DType::Float: {
      float f = static_cast<float>(v);
      std::memcpy(out, &f, 4);
      return;
    }
    case DType::Double: std::memcpy(out, &v, 8); return;
    case DType::Float16: {
      uint16_t h = float_to_half(static_cast<float>(v));
      std::memcpy(out, &h, 2);
      return;
    }
    case DType::BFloat16: {
      uint16_t h = float_to_bf16(static_cast<float>(v));
      std::memcpy(out, &h, 2);
      return;
    }
    default: fail("internal: norm parameter of type " + std::string(dtype_name(t)));
  }
}

}  // namespace

ValueId norm_parameter(Edits& e, std::string_view hint, ValueId src, double offset, double fill, DType t,
                       std::span<const int64_t> dims) {
  const Graph& g = e.g;
  const TensorStore& ts = g.model().tensors;
  TensorId st = constant_tensor(g, src);
  if (st.valid() && offset == 0) {
    auto sd = ts.dims(st);
    if (std::equal(sd.begin(), sd.end(), dims.begin(), dims.end()) && g.is_constant(src)) return src;
  }
  const size_t esize = static_cast<size_t>(dtype_bits(t) / 8);
  uint64_t n = 1;
  for (int64_t d : dims) n *= static_cast<uint64_t>(d);
  std::vector<std::byte> bytes(n * esize);
  // Source strides right-aligned to `dims` (leading 1s of the source beyond dims.size() dropped;
  // absorb_affine checked they are 1), 0 where the source broadcasts.
  std::vector<uint64_t> stride(dims.size(), 0);
  if (st.valid()) {
    auto sd = ts.dims(st);
    uint64_t s = 1;
    for (size_t i = 0; i < sd.size() && i < dims.size(); ++i) {
      const int64_t d = sd[sd.size() - 1 - i];
      stride[dims.size() - 1 - i] = d == 1 ? 0 : s;
      s *= static_cast<uint64_t>(d);
    }
  }
  std::vector<int64_t> idx(dims.size(), 0);
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t from = 0;
    for (size_t k = 0; k < dims.size(); ++k) from += static_cast<uint64_t>(idx[k]) * stride[k];
    std::byte* out = bytes.data() + i * esize;
    if (!st.valid())
      encode(fill, t, out);
    else if (offset == 0)
      std::memcpy(out, ts.bytes(st).data() + from * esize, esize);
    else
      encode(element_as_double(g.model(), st, from) + offset, t, out);
    for (size_t k = dims.size(); k-- > 0;) {
      if (++idx[k] < dims[k]) break;
      idx[k] = 0;
    }
  }
  return e.new_constant(hint, t, dims, bytes);
}

}  // namespace onnxforge::passes::pattern
