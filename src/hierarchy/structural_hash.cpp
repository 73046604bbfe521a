#include "hierarchy/structural_hash.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "ir/hash.h"
#include "ir/topo.h"

namespace onnxforge::hier {
namespace {

inline uint64_t mix(uint64_t h, uint64_t v) {
  v += 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  v ^= v >> 30;
  v *= 0xbf58476d1ce4e5b9ull;
  v ^= v >> 27;
  v *= 0x94d049bb133111ebull;
  v ^= v >> 31;
  return h ^ v;
}

uint64_t hash_str(std::string_view s) { return content_hash(std::as_bytes(std::span(s.data(), s.size()))); }

uint64_t hash_attr(const Model& model, const Graph& g, const Attr& a, bool content) {
  uint64_t h = mix(hash_str(str(a.name)), static_cast<uint64_t>(a.type));
  switch (a.type) {
    case AttrType::Int: return mix(h, static_cast<uint64_t>(a.i));
    case AttrType::Float: {
      uint32_t bits;
      std::memcpy(&bits, &a.f, 4);
      return mix(h, bits);
    }
    case AttrType::String: return mix(h, hash_str(str(a.s)));
    case AttrType::Ints:
      for (int64_t v : g.ints(a)) h = mix(h, static_cast<uint64_t>(v));
      return h;
    case AttrType::Floats:
      for (float f : g.floats(a)) {
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        h = mix(h, bits);
      }
      return h;
    case AttrType::Strings:
      for (Sym s : g.strings(a)) h = mix(h, hash_str(str(s)));
      return h;
    case AttrType::Tensor: return mix(h, hash_tensor(model, a.tensor, content));
    case AttrType::Tensors:
      for (TensorId t : g.tensors(a)) h = mix(h, hash_tensor(model, t, content));
      return h;
    case AttrType::Graph: {
      NodeHashes sub = hash_graph(model, model.graph(a.graph));
      for (uint64_t o : sub.outputs) h = mix(h, o);
      return h;
    }
    case AttrType::Graphs:
      for (GraphId sg : g.graphs(a)) {
        NodeHashes sub = hash_graph(model, model.graph(sg));
        for (uint64_t o : sub.outputs) h = mix(h, o);
      }
      return h;
    default:
      for (std::string_view e : g.attr_extra(a)) h = mix(h, hash_str(e));
      return h;
  }
}

}  // namespace

uint64_t hash_tensor(const Model& model, TensorId t, bool content) {
  if (!t.valid()) return 0;
  const TensorStore& ts = model.tensors;
  uint64_t h = mix(0x1234, static_cast<uint64_t>(ts.dtype(t)));
  for (int64_t d : ts.dims(t)) h = mix(h, static_cast<uint64_t>(d));
  if (!content) {
    DType d = ts.dtype(t);
    bool integer = d == DType::Int64 || d == DType::Int32 || d == DType::Int8 || d == DType::Uint8 || d == DType::Bool;
    if (!integer || ts.element_count(t) > 64) return h;  // weights: dtype and dims only
  }
  if (ts.entry(t).storage == TensorStorage::Strings) {
    for (const std::string& s : ts.strings(t)) h = mix(h, hash_str(s));
    return h;
  }
  return mix(h, content_hash(ts.bytes(t)));
}

NodeHashes hash_graph(const Model& model, const Graph& g) {
  NodeHashes out;
  out.local.assign(g.node_capacity(), 0);
  out.near.assign(g.node_capacity(), 0);
  out.cone.assign(g.node_capacity(), 0);
  out.form.assign(g.node_capacity(), 0);
  std::vector<uint64_t> local_form(g.node_capacity(), 0);
  std::vector<uint64_t> input_position(g.value_count(), 0);
  for (size_t i = 0; i < g.graph_inputs().size(); ++i) input_position[g.graph_inputs()[i].index()] = i + 1;
  auto output_index = [&](ValueId v) -> uint64_t {
    auto outs = g.outputs(g.producer(v));
    for (size_t i = 0; i < outs.size(); ++i)
      if (outs[i] == v) return i;
    return 0;
  };
  // What a consumer sees of value v: (local or cone hash of its producer, output index), the
  // content of an initializer, or the position of a graph input / an outer-scope read.
  auto source = [&](ValueId v, const std::vector<uint64_t>& producer_hash, bool content = true) -> uint64_t {
    if (!v.valid()) return 0x0a;
    if (g.is_constant(v)) return mix(0x1c, hash_tensor(model, g.initializer(v), content));
    if (g.producer(v).valid()) return mix(producer_hash[g.producer(v).index()], output_index(v));
    if (input_position[v.index()]) return mix(0x1b, input_position[v.index()]);
    if (g.outer(v).valid()) return mix(0x0c, static_cast<uint64_t>(g.dtype(v)));
    return 0x0d;
  };
  std::vector<NodeId> order = topological_order(g);
  for (NodeId n : order) {
    uint64_t h = mix(hash_str(str(g.domain(n)) == "ai.onnx" ? "" : str(g.domain(n))), hash_str(str(g.op_type(n))));
    // attributes in name order, so attribute order in the file does not matter
    uint64_t hf = h;
    std::vector<uint64_t> attrs, attrs_form;
    for (const Attr& a : g.attrs(n)) {
      attrs.push_back(hash_attr(model, g, a, true));
      attrs_form.push_back(hash_attr(model, g, a, false));
    }
    std::sort(attrs.begin(), attrs.end());
    std::sort(attrs_form.begin(), attrs_form.end());
    for (uint64_t a : attrs) h = mix(h, a);
    for (uint64_t a : attrs_form) hf = mix(hf, a);
    out.local[n.index()] = mix(h, g.outputs(n).size());
    local_form[n.index()] = mix(hf, g.outputs(n).size());
  }
  for (NodeId n : order) {
    uint64_t near = out.local[n.index()], cone = out.local[n.index()], form = local_form[n.index()];
    std::vector<ValueId> ins(g.inputs(n).begin(), g.inputs(n).end());
    for (ValueId v : g.implicit_inputs(n)) ins.push_back(v);
    for (ValueId v : ins) {
      near = mix(near, source(v, out.local));
      cone = mix(cone, source(v, out.cone));
      form = mix(form, source(v, out.form, false));
    }
    out.near[n.index()] = near;
    out.cone[n.index()] = cone;
    out.form[n.index()] = form;
  }
  for (ValueId v : g.graph_outputs()) {
    out.outputs.push_back(source(v, out.cone));
    out.form_outputs.push_back(source(v, out.form, false));
  }
  return out;
}

}  // namespace onnxforge::hier
