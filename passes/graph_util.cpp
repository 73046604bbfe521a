#include "passes/graph_util.h"

#include <algorithm>
#include <cstring>

namespace onnxforge::passes {

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
      case AttrType::Ints: {
        auto v = g.ints(a);
        na.ints.assign(v.begin(), v.end());
        break;
      }
      case AttrType::Floats: {
        auto v = g.floats(a);
        na.floats.assign(v.begin(), v.end());
        break;
      }
      case AttrType::Strings:
        for (Sym s : g.strings(a)) na.strings.emplace_back(str(s));
        break;
      default: return std::nullopt;
    }
    out.push_back(std::move(na));
  }
  return out;
}

namespace {

template <class S>
bool same(S p, S q) {
  return std::equal(p.begin(), p.end(), q.begin(), q.end());
}

}  // namespace

bool same_attrs(const Graph& g, NodeId x, NodeId y) {
  auto ax = g.attrs(x), ay = g.attrs(y);
  if (ax.size() != ay.size()) return false;
  for (const Attr& a : ax) {
    const Attr* b = g.attr(y, str(a.name));
    if (!b || a.type != b->type || a.extra_count || b->extra_count || a.ref_attr_name != b->ref_attr_name) return false;
    switch (a.type) {
      case AttrType::Int:
        if (a.i != b->i) return false;
        break;
      case AttrType::Float:
        if (std::memcmp(&a.f, &b->f, 4) != 0) return false;
        break;
      case AttrType::String:
        if (a.s != b->s) return false;
        break;
      case AttrType::Ints:
        if (!same(g.ints(a), g.ints(*b))) return false;
        break;
      case AttrType::Floats: {
        auto p = g.floats(a), q = g.floats(*b);
        if (p.size() != q.size() || (!p.empty() && std::memcmp(p.data(), q.data(), p.size() * 4) != 0)) return false;
        break;
      }
      case AttrType::Strings:
        if (!same(g.strings(a), g.strings(*b))) return false;
        break;
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
