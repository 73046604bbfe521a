#include "passes/graph_util.h"

#include <algorithm>
#include <cstring>

namespace onnxforge::passes {

namespace {

float half_bits_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0) {
    if (man == 0) bits = sign;
    else {  // subnormal
      exp = 127 - 15 + 1;
      while (!(man & 0x400)) { man <<= 1; --exp; }
      bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
    }
  } else if (exp == 31) bits = sign | 0x7f800000u | (man << 13);
  else bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

template <class T>
T load(const std::byte* p, uint64_t i) {
  T x;
  std::memcpy(&x, p + i * sizeof(T), sizeof(T));
  return x;
}

}  // namespace

double element_as_double(const Model& m, TensorId t, uint64_t i) {
  const std::byte* p = m.tensors.bytes(t).data();
  switch (m.tensors.dtype(t)) {
    case DType::Float: return load<float>(p, i);
    case DType::Double: return load<double>(p, i);
    case DType::Float16: return half_bits_to_float(load<uint16_t>(p, i));
    case DType::BFloat16: {
      uint32_t u = static_cast<uint32_t>(load<uint16_t>(p, i)) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
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

static bool numeric(DType t) {
  switch (t) {
    case DType::Float: case DType::Double: case DType::Float16: case DType::BFloat16: case DType::Int64:
    case DType::Int32: case DType::Int16: case DType::Int8: case DType::Uint8: case DType::Uint16:
    case DType::Uint32: case DType::Uint64: case DType::Bool:
      return true;
    default: return false;
  }
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
  TensorId t = constant_tensor(g, v);
  if (!t.valid() || !numeric(g.model().tensors.dtype(t))) return std::nullopt;
  uint64_t n = g.model().tensors.element_count(t);
  auto bits = dtype_storage_bytes(g.model().tensors.dtype(t), n);
  if (!bits || *bits > g.model().tensors.byte_size(t)) return std::nullopt;
  std::vector<double> out(n);
  for (uint64_t i = 0; i < n; ++i) out[i] = element_as_double(g.model(), t, i);
  return out;
}

bool constant_all_equal(const Graph& g, ValueId v, double x) {
  TensorId t = constant_tensor(g, v);
  if (!t.valid() || !numeric(g.model().tensors.dtype(t))) return false;
  uint64_t n = g.model().tensors.element_count(t);
  auto need = dtype_storage_bytes(g.model().tensors.dtype(t), n);
  if (!need || *need > g.model().tensors.byte_size(t) || n > (uint64_t{1} << 24)) return false;
  for (uint64_t i = 0; i < n; ++i)
    if (element_as_double(g.model(), t, i) != x) return false;
  return true;
}

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

NodeId single_consumer(const Graph&, const Uses& uses, ValueId v) {
  if (!uses.single(v)) return {};
  const Use& u = uses.of(v)[0];
  return u.slot == Use::kImplicit ? NodeId{} : u.node;
}

bool feeds_graph_output(const Graph& g, const Uses& uses, NodeId n) {
  for (ValueId v : g.outputs(n))
    if (v.valid() && uses.is_graph_output(v)) return true;
  return false;
}

bool is_nondeterministic(const Graph& g, NodeId n) {
  std::string_view op = str(g.op_type(n));
  if (!g.is_op(n, op)) return true;  // unknown domains: assume the worst
  return op.starts_with("Random") || op == "Multinomial" || op == "Bernoulli";
}

std::vector<std::byte> to_bytes(std::span<const int64_t> v) {
  std::vector<std::byte> b(v.size() * 8);
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

}  // namespace onnxforge::passes

namespace onnxforge::passes {

std::optional<std::vector<NewAttr>> copy_attrs(const Graph& g, NodeId n) {
  std::vector<NewAttr> out;
  for (const Attr& a : g.attrs(n)) {
    if (!a.ref_attr_name.empty() || a.extra_count) return std::nullopt;
    NewAttr na;
    na.name = std::string(str(a.name));
    na.type = a.type;
    switch (a.type) {
      case AttrType::Int: na.i = a.i; break;
      case AttrType::Float: na.f = a.f; break;
      case AttrType::String: na.s = std::string(str(a.s)); break;
      case AttrType::Tensor: na.tensor = a.tensor; break;
      case AttrType::Graph: na.graph = a.graph; break;
      case AttrType::Ints: { auto v = g.ints(a); na.ints.assign(v.begin(), v.end()); break; }
      case AttrType::Floats: { auto v = g.floats(a); na.floats.assign(v.begin(), v.end()); break; }
      case AttrType::Strings:
        for (Sym s : g.strings(a)) na.strings.emplace_back(str(s));
        break;
      default: return std::nullopt;
    }
    out.push_back(std::move(na));
  }
  return out;
}

bool same_attrs(const Graph& g, NodeId x, NodeId y) {
  auto ax = g.attrs(x), ay = g.attrs(y);
  if (ax.size() != ay.size()) return false;
  for (const Attr& a : ax) {
    const Attr* b = g.attr(y, str(a.name));
    if (!b || a.type != b->type || a.extra_count || b->extra_count || a.ref_attr_name != b->ref_attr_name) return false;
    switch (a.type) {
      case AttrType::Int: if (a.i != b->i) return false; break;
      case AttrType::Float: if (std::memcmp(&a.f, &b->f, 4) != 0) return false; break;
      case AttrType::String: if (a.s != b->s) return false; break;
      case AttrType::Ints: { auto p = g.ints(a), q = g.ints(*b); if (!std::equal(p.begin(), p.end(), q.begin(), q.end())) return false; break; }
      case AttrType::Floats: {
        auto p = g.floats(a), q = g.floats(*b);
        if (p.size() != q.size() || (!p.empty() && std::memcmp(p.data(), q.data(), p.size() * 4) != 0)) return false;
        break;
      }
      case AttrType::Strings: { auto p = g.strings(a), q = g.strings(*b); if (!std::equal(p.begin(), p.end(), q.begin(), q.end())) return false; break; }
      case AttrType::Tensor: {
        const TensorStore& ts = g.model().tensors;
        if (a.tensor == b->tensor) break;
        if (ts.dtype(a.tensor) != ts.dtype(b->tensor) || ts.dtype(a.tensor) == DType::String) return false;
        auto da = ts.dims(a.tensor), db = ts.dims(b->tensor);
        if (!std::equal(da.begin(), da.end(), db.begin(), db.end())) return false;
        auto ba = ts.bytes(a.tensor), bb = ts.bytes(b->tensor);
        if (ba.size() != bb.size() || (ba.size() && std::memcmp(ba.data(), bb.data(), ba.size()) != 0)) return false;
        break;
      }
      default: return false;  // subgraphs and unmodelled attributes: never equal
    }
  }
  return true;
}

}  // namespace onnxforge::passes
