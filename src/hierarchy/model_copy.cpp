#include "hierarchy/model_copy.h"

#include "ir/error.h"
#include "ir/topo.h"

namespace onnxforge::hier {

ModelCopier::ModelCopier(const Model& from, Model& to) : from_(from), to_(to) {}

void ModelCopier::copy_header() {
  to_.ir_version = from_.ir_version;
  to_.opsets = from_.opsets;
  to_.producer_name = from_.producer_name;
  to_.producer_version = from_.producer_version;
  to_.domain = from_.domain;
  to_.model_version = from_.model_version;
  to_.metadata_props = from_.metadata_props;
  to_.files = from_.files;  // tensor bytes and verbatim fields point into these
}

TensorId ModelCopier::tensor(TensorId t) {
  if (!t.valid()) return t;
  auto it = tensors_.find(t.index());
  if (it != tensors_.end()) return it->second;
  const TensorStore::Entry e = from_.tensors.resolved(t);
  auto dims = from_.tensors.dims(t);
  TensorId out = e.storage == TensorStorage::Strings ? to_.tensors.add_strings(e.name, dims, from_.tensors.strings(t))
                                                     : to_.tensors.add(e, dims);
  shared_bytes_ += e.size;
  tensors_[t.index()] = out;
  return out;
}

ValueId ModelCopier::value(const Graph& from, ValueId v, Graph& to) {
  uint64_t key = (uint64_t{to.id().index()} << 48) ^ (uint64_t{from.id().index()} << 32) ^ v.index();
  auto it = values_.find(key);
  if (it != values_.end()) return it->second;
  ValueId out;
  if (from.outer(v).valid()) {
    // A capture: read the copy of the outer value in the destination parent (copied first, so
    // nested captures chain up to the main graph as the reader builds them).
    if (!from.parent().valid() || !to.parent().valid())
      fail("capture '", str(from.value_name(v)), "' copied into a graph without a parent");
    ValueId outer = value(from_.graph(from.parent()), from.outer(v), to_.graph(to.parent()));
    out = to.add_capture(from.value_name(v), outer);
  } else {
    out = to.add_value(from.value_name(v));
  }
  if (from.has_shape(v)) {
    std::vector<Dim> dims(from.shape(v).begin(), from.shape(v).end());
    to.set_type(out, from.dtype(v), dims);
  } else if (from.has_type(v)) {
    to.set_dtype(out, from.dtype(v));
  }
  values_[key] = out;
  return out;
}

void ModelCopier::initializer(const Graph& from, ValueId v, Graph& to) {
  ValueId out = value(from, v, to);
  if (!to.is_initializer(out)) to.set_initializer(out, tensor(from.initializer(v)));
}

NodeId ModelCopier::node(const Graph& from, NodeId n, Graph& to) {
  std::vector<ValueId> ins, outs;
  for (ValueId v : from.inputs(n)) ins.push_back(v.valid() ? value(from, v, to) : ValueId{});
  for (ValueId v : from.outputs(n)) outs.push_back(v.valid() ? value(from, v, to) : ValueId{});
  NodeId id(to.node_capacity());
  std::vector<NewAttr> attrs;
  for (const Attr& a : from.attrs(n)) {
    NewAttr na;
    na.name = str(a.name);
    na.type = a.type;
    switch (a.type) {
      case AttrType::Int: na.i = a.i; break;
      case AttrType::Float: na.f = a.f; break;
      case AttrType::String: na.s = str(a.s); break;
      case AttrType::Ints: na.ints.assign(from.ints(a).begin(), from.ints(a).end()); break;
      case AttrType::Floats: na.floats.assign(from.floats(a).begin(), from.floats(a).end()); break;
      case AttrType::Strings:
        for (Sym s : from.strings(a)) na.strings.emplace_back(str(s));
        break;
      case AttrType::Tensor: na.tensor = tensor(a.tensor); break;
      case AttrType::Graph: {
        // ORT rejects unnamed subgraphs and onnx.checker any unnamed graph: keep the original
        // name, else name it after its owner and attribute.
        Sym owner = from.node_name(n).empty() ? from.op_type(n) : from.node_name(n);
        na.graph = subgraph(from_.graph(a.graph), to.id(), id, std::string(str(owner)) + "_" + na.name);
        break;
      }
      default:
        fail("node '", str(from.node_name(n)), "' (", str(from.op_type(n)), ") has attribute '", str(a.name),
             "' of a type extraction cannot copy yet (", static_cast<int>(a.type), ")");
    }
    if (!a.ref_attr_name.empty()) fail("function-body attribute references cannot be extracted");
    attrs.push_back(std::move(na));
  }
  NodeId made = to.add_node(from.op_type(n), from.domain(n), from.node_name(n), ins, outs, attrs);
  std::vector<MetadataEntry> meta(from.metadata(n).begin(), from.metadata(n).end());
  if (!meta.empty()) to.set_metadata(made, meta);
  auto tags = from_.tags(from.scope(n));
  to.set_scope(made, to_.tag_set(std::vector<Sym>(tags.begin(), tags.end())));
  return made;
}

GraphId ModelCopier::subgraph(const Graph& from, GraphId parent, NodeId owner, std::string_view fallback_name) {
  GraphId id = to_.add_graph(parent, owner);
  Graph& to = to_.graph(id);
  to.set_name(from.name().empty() ? intern(fallback_name) : from.name());
  std::vector<ValueId> ins, outs;
  for (ValueId v : from.graph_inputs()) ins.push_back(value(from, v, to));
  for (ValueId v : from.initializers()) initializer(from, v, to);
  // Outer-scope reads stay captures (Graph::outer set), so the copy runs without a save/load.
  for (ValueId c : from.captures()) value(from, c, to);
  for (NodeId n : topological_order(from)) node(from, n, to);
  for (ValueId v : from.graph_outputs()) outs.push_back(value(from, v, to));
  to.set_graph_inputs(std::move(ins));
  to.set_graph_outputs(std::move(outs));
  return id;
}

}  // namespace onnxforge::hier
