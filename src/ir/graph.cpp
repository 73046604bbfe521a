#include "ir/graph.h"

#include <algorithm>

#include "io/mapped_file.h"
#include "ir/error.h"

namespace onnxforge {

// ---------------------------------------------------------------- Graph: nodes

std::vector<NodeId> Graph::nodes() const {
  std::vector<NodeId> out;
  out.reserve(live_nodes_);
  for (uint32_t i = 0; i < node_capacity(); ++i)
    if (alive_[i]) out.push_back(NodeId(i));
  return out;
}

bool Graph::is_op(NodeId n, std::string_view op) const {
  Sym d = domain_[n.index()];
  if (!d.empty() && str(d) != "ai.onnx") return false;
  return str(op_type_[n.index()]) == op;
}

std::string_view Graph::metadata_value(NodeId n, std::string_view key) const {
  for (const MetadataEntry& e : metadata(n))
    if (str(e.key) == key) return str(e.value);
  return {};
}

const Attr* Graph::attr(NodeId n, std::string_view name) const {
  for (const Attr& a : attrs(n))
    if (str(a.name) == name) return &a;
  return nullptr;
}

namespace {

const char* attr_type_name(AttrType t) {
  switch (t) {
    case AttrType::Float: return "FLOAT";
    case AttrType::Int: return "INT";
    case AttrType::String: return "STRING";
    case AttrType::Tensor: return "TENSOR";
    case AttrType::Graph: return "GRAPH";
    case AttrType::Floats: return "FLOATS";
    case AttrType::Ints: return "INTS";
    case AttrType::Strings: return "STRINGS";
    case AttrType::Tensors: return "TENSORS";
    case AttrType::Graphs: return "GRAPHS";
    case AttrType::SparseTensor: return "SPARSE_TENSOR";
    case AttrType::SparseTensors: return "SPARSE_TENSORS";
    case AttrType::TypeProto: return "TYPE_PROTO";
    case AttrType::TypeProtos: return "TYPE_PROTOS";
    default: return "UNDEFINED";
  }
}

}  // namespace

// Every typed read goes through here: an attribute of another type than the op defines is an
// error naming the node (a Conv whose `strides` is an INT, not INTS, silently ran with stride 1
// before), never a silent fallback or a read of an unset payload. An attribute without any
// value (type UNDEFINED, IR < 3) reads as absent.
const Attr* Graph::typed_attr(NodeId n, std::string_view name, AttrType want) const {
  const Attr* a = attr(n, name);
  if (!a || a->type == AttrType::Undefined || !a->ref_attr_name.empty()) return nullptr;
  if (a->type != want) {
    std::string node = "node";
    if (!node_name(n).empty()) node += " '" + std::string(str(node_name(n))) + "'";
    fail(node, " (", str(op_type(n)), "): attribute '", name, "' is ", attr_type_name(a->type), ", but ",
         str(op_type(n)), " defines it as ", attr_type_name(want));
  }
  return a;
}

int64_t Graph::attr_int(NodeId n, std::string_view name, int64_t fallback) const {
  const Attr* a = typed_attr(n, name, AttrType::Int);
  return a ? a->i : fallback;
}

float Graph::attr_float(NodeId n, std::string_view name, float fallback) const {
  const Attr* a = typed_attr(n, name, AttrType::Float);
  return a ? a->f : fallback;
}

std::string_view Graph::attr_string(NodeId n, std::string_view name, std::string_view fallback) const {
  const Attr* a = typed_attr(n, name, AttrType::String);
  return a ? str(a->s) : fallback;
}

std::span<const int64_t> Graph::attr_ints(NodeId n, std::string_view name) const {
  const Attr* a = typed_attr(n, name, AttrType::Ints);
  return a ? ints(*a) : std::span<const int64_t>{};
}

std::span<const float> Graph::attr_floats(NodeId n, std::string_view name) const {
  const Attr* a = typed_attr(n, name, AttrType::Floats);
  return a ? floats(*a) : std::span<const float>{};
}

GraphId Graph::attr_graph(NodeId n, std::string_view name) const {
  const Attr* a = typed_attr(n, name, AttrType::Graph);
  return a ? a->graph : GraphId{};
}

TensorId Graph::attr_tensor(NodeId n, std::string_view name) const {
  const Attr* a = typed_attr(n, name, AttrType::Tensor);
  return a ? a->tensor : TensorId{};
}

std::vector<GraphId> Graph::subgraphs(NodeId n) const {
  std::vector<GraphId> out;
  for (const Attr& a : attrs(n)) {
    // Function bodies may declare a GRAPH attribute by reference only (no graph of their own).
    if (a.type == AttrType::Graph && a.graph.valid()) out.push_back(a.graph);
    if (a.type == AttrType::Graphs)
      for (GraphId g : graphs(a)) out.push_back(g);
  }
  return out;
}

std::vector<ValueId> Graph::implicit_inputs(NodeId n) const {
  std::vector<ValueId> out;
  for (GraphId g : subgraphs(n))
    for (ValueId c : model_->graph(g).captures()) {
      ValueId target = model_->graph(g).outer(c);
      if (target.valid() && std::find(out.begin(), out.end(), target) == out.end()) out.push_back(target);
    }
  return out;
}

// ---------------------------------------------------------------- Graph: values

Sym Graph::value_name(ValueId v) const {
  if (!v.valid()) return Sym{};
  ValueId o = outer_[v.index()];
  if (o.valid()) return model_->graph(parent_).value_name(o);
  return value_name_[v.index()];
}

std::optional<ValueId> Graph::find_value(std::string_view name) const {
  auto sym = lookup(name);
  if (!sym) return std::nullopt;
  auto it = by_name_.find(*sym);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

std::span<const Dim> Graph::shape(ValueId v) const {
  if (!v.valid()) return {};
  int32_t r = rank_[v.index()];
  if (r <= 0) return {};
  return {dims_.data() + dim_begin_[v.index()], static_cast<size_t>(r)};
}

ValueId Graph::add_value(Sym name) {
  ValueId v(value_count());
  value_name_.push_back(name);
  dtype_.push_back(DType::Undefined);
  rank_.push_back(-1);
  dim_begin_.push_back(0);
  producer_.push_back(NodeId{});
  init_tensor_.push_back(TensorId{});
  outer_.push_back(ValueId{});
  flags_.push_back(0);
  type_raw_.push_back({});
  value_extra_begin_.push_back(0);
  value_extra_count_.push_back(0);
  if (!name.empty()) by_name_[name] = v;
  return v;
}

ValueId Graph::add_capture(Sym name, ValueId outer) {
  ValueId v = add_value(name);
  outer_[v.index()] = outer;
  captures_.push_back(v);
  return v;
}

void Graph::set_type(ValueId v, DType t, std::span<const Dim> dims_in) {
  std::vector<Dim> dims(dims_in.begin(), dims_in.end());  // dims_in may point into dims_
  dtype_[v.index()] = t;
  flags_[v.index()] |= kTyped;
  type_raw_[v.index()] = {};  // the modelled type is now the truth
  int32_t rank = static_cast<int32_t>(dims.size());
  if (rank_[v.index()] >= rank) {  // reuse the slot: repeated inference does not grow the array
    std::copy(dims.begin(), dims.end(), dims_.begin() + dim_begin_[v.index()]);
  } else {
    dim_begin_[v.index()] = static_cast<uint32_t>(dims_.size());
    dims_.insert(dims_.end(), dims.begin(), dims.end());
  }
  rank_[v.index()] = rank;
}

void Graph::set_value_name(ValueId v, Sym name) {
  Sym old = value_name_[v.index()];
  if (!old.empty()) {
    auto it = by_name_.find(old);
    if (it != by_name_.end() && it->second == v) by_name_.erase(it);
  }
  value_name_[v.index()] = name;
  if (!name.empty()) by_name_[name] = v;
}

void Graph::set_initializer(ValueId v, TensorId t) {
  if (!init_tensor_[v.index()].valid()) initializers_.push_back(v);
  init_tensor_[v.index()] = t;
  flags_[v.index()] |= kTyped;
  if (t.valid()) {
    const TensorStore& ts = model_->tensors;
    dtype_[v.index()] = ts.dtype(t);
    std::vector<Dim> dims;
    for (int64_t d : ts.dims(t)) dims.push_back(Dim::of(d));
    set_type(v, ts.dtype(t), dims);
  }
}

void Graph::remove_initializer(ValueId v) {
  init_tensor_[v.index()] = TensorId{};
  std::erase(initializers_, v);
}

void Graph::set_metadata(NodeId n, std::span<const MetadataEntry> entries) {
  meta_begin_[n.index()] = static_cast<uint32_t>(metadata_.size());
  meta_count_[n.index()] = static_cast<uint32_t>(entries.size());
  metadata_.insert(metadata_.end(), entries.begin(), entries.end());
}

void Graph::set_graph_outputs(std::vector<ValueId> outs) {
  for (ValueId v : outputs_) flags_[v.index()] &= ~kOutput;
  outputs_ = std::move(outs);
  for (ValueId v : outputs_) flags_[v.index()] |= kOutput;
}

void Graph::set_graph_inputs(std::vector<ValueId> ins) {
  for (ValueId v : inputs_) flags_[v.index()] &= ~kInput;
  inputs_ = std::move(ins);
  for (ValueId v : inputs_) flags_[v.index()] |= kInput;
}

void Graph::add_value_info(ValueId v) {
  if (flags_[v.index()] & kValueInfo) return;
  flags_[v.index()] |= kValueInfo;
  value_info_.push_back(v);
}

// ---------------------------------------------------------------- Graph: editing

Attr Graph::attr_from(const NewAttr& na) {
  Attr a;
  a.name = intern(na.name);
  a.type = na.type;
  a.i = na.i;
  a.f = na.f;
  a.tensor = na.tensor;
  a.graph = na.graph;
  switch (na.type) {
    case AttrType::String: a.s = intern(na.s); break;
    case AttrType::Ints:
      a.list_begin = static_cast<uint32_t>(ints_.size());
      a.list_count = static_cast<uint32_t>(na.ints.size());
      ints_.insert(ints_.end(), na.ints.begin(), na.ints.end());
      break;
    case AttrType::Floats:
      a.list_begin = static_cast<uint32_t>(floats_.size());
      a.list_count = static_cast<uint32_t>(na.floats.size());
      floats_.insert(floats_.end(), na.floats.begin(), na.floats.end());
      break;
    case AttrType::Strings:
      a.list_begin = static_cast<uint32_t>(strings_.size());
      a.list_count = static_cast<uint32_t>(na.strings.size());
      for (const std::string& s : na.strings) strings_.push_back(intern(s));
      break;
    default: break;
  }
  return a;
}

NodeId Graph::add_node(Sym op_type, Sym domain, Sym name, std::span<const ValueId> inputs,
                       std::span<const ValueId> outputs, std::span<const NewAttr> attrs) {
  NodeId n(node_capacity());
  op_type_.push_back(op_type);
  domain_.push_back(domain);
  node_name_.push_back(name);
  overload_.push_back(Sym{});
  in_begin_.push_back(static_cast<uint32_t>(node_inputs_.size()));
  in_count_.push_back(static_cast<uint32_t>(inputs.size()));
  node_inputs_.insert(node_inputs_.end(), inputs.begin(), inputs.end());
  out_begin_.push_back(static_cast<uint32_t>(node_outputs_.size()));
  out_count_.push_back(static_cast<uint32_t>(outputs.size()));
  node_outputs_.insert(node_outputs_.end(), outputs.begin(), outputs.end());
  attr_begin_.push_back(static_cast<uint32_t>(attrs_.size()));
  attr_count_.push_back(static_cast<uint32_t>(attrs.size()));
  for (const NewAttr& a : attrs) attrs_.push_back(attr_from(a));
  meta_begin_.push_back(0);
  meta_count_.push_back(0);
  node_extra_begin_.push_back(0);
  node_extra_count_.push_back(0);
  scope_.push_back(0);
  alive_.push_back(1);
  present_.push_back(0);
  ++live_nodes_;
  for (ValueId v : outputs)
    if (v.valid()) producer_[v.index()] = n;
  return n;
}

void Graph::kill_node(NodeId n) {
  if (!alive_[n.index()]) return;
  alive_[n.index()] = 0;
  --live_nodes_;
  for (ValueId v : outputs(n))
    if (v.valid() && producer_[v.index()] == n) producer_[v.index()] = NodeId{};
}

// ---------------------------------------------------------------- Model

Model::Model() {
  graphs_.push_back(std::make_unique<Graph>(*this, GraphId(0), GraphId{}));
  tag_sets_.emplace_back();
  tag_index_[{}] = 0;
}

Model::~Model() = default;

std::unique_ptr<Model> Model::clone() const {
  auto m = std::make_unique<Model>();
  m->ir_version = ir_version;
  m->opsets = opsets;
  m->producer_name = producer_name;
  m->producer_version = producer_version;
  m->domain = domain;
  m->model_version = model_version;
  m->metadata_props = metadata_props;
  m->functions = functions;
  m->extra_fields = extra_fields;
  m->tensors.share(tensors);
  m->next_fresh_name = next_fresh_name;
  m->path = path;
  m->files = files;  // verbatim fields and tensor bytes point into these
  m->graphs_.clear();
  for (const auto& g : graphs_) {
    m->graphs_.push_back(std::make_unique<Graph>(*g));
    m->graphs_.back()->model_ = m.get();
  }
  m->tag_sets_ = tag_sets_;
  m->tag_index_ = tag_index_;
  return m;
}

GraphId Model::add_graph(GraphId parent, NodeId owner) {
  GraphId id(static_cast<uint32_t>(graphs_.size()));
  graphs_.push_back(std::make_unique<Graph>(*this, id, parent));
  graphs_.back()->owner_node_ = owner;
  return id;
}

int64_t Model::opset(std::string_view d) const {
  if (d == "ai.onnx") d = "";
  for (const OpsetImport& o : opsets) {
    std::string_view od = str(o.domain);
    if (od == "ai.onnx") od = "";
    if (od == d) return o.version;
  }
  return 0;
}

uint32_t Model::tag_set(std::vector<Sym> tags) {
  std::sort(tags.begin(), tags.end());
  tags.erase(std::unique(tags.begin(), tags.end()), tags.end());
  auto [it, inserted] = tag_index_.try_emplace(tags, static_cast<uint32_t>(tag_sets_.size()));
  if (inserted) tag_sets_.push_back(std::move(tags));
  return it->second;
}

uint32_t Model::union_tags(std::span<const uint32_t> sets) {
  std::vector<Sym> all;
  for (uint32_t s : sets) all.insert(all.end(), tag_sets_[s].begin(), tag_sets_[s].end());
  return tag_set(std::move(all));
}

int narrowest_float_bits(const Model& m) {
  auto bits = [](DType t) {
    switch (t) {
      case DType::Float16: return 10;
      case DType::BFloat16: return 7;
      case DType::Float8E4M3FN:
      case DType::Float8E4M3FNUZ: return 3;
      case DType::Float8E5M2:
      case DType::Float8E5M2FNUZ: return 2;
      case DType::Float4E2M1: return 1;
      default: return 23;
    }
  };
  int out = 23;
  for (size_t gi = 0; gi < m.graph_count(); ++gi) {
    const Graph& g = m.graph(GraphId{static_cast<uint32_t>(gi)});
    for (ValueId v : g.graph_inputs())
      if (!g.is_initializer(v)) out = std::min(out, bits(g.dtype(v)));
    for (NodeId n : g.nodes()) {
      for (ValueId v : g.outputs(n)) out = std::min(out, bits(g.dtype(v)));
      if (g.is_op(n, "Cast")) {
        if (const Attr* to = g.attr(n, "to"); to && to->type == AttrType::Int && to->i >= 0 && to->i < 64)
          out = std::min(out, bits(static_cast<DType>(to->i)));
        continue;
      }
      for (ValueId v : g.inputs(n)) {
        if (TensorId t = g.initializer(v); t.valid()) out = std::min(out, bits(m.tensors.dtype(t)));
        const NodeId p = g.producer(v);
        if (p.valid() && g.is_op(p, "Constant"))
          if (const Attr* a = g.attr(p, "value"); a && a->type == AttrType::Tensor && a->tensor.valid())
            out = std::min(out, bits(m.tensors.dtype(a->tensor)));
      }
    }
  }
  return out;
}

}  // namespace onnxforge
