#pragma once
// The graph: flat struct-of-arrays tables with integer handles.
//
//   Model    ModelProto header, the tensor store, every Graph (main graph, subgraphs, function
//            bodies) by GraphId, the memory mappings everything points into.
//   Graph    node table (columns), value table (columns), attribute rows; node inputs/outputs are
//            slices of two flat ValueId arrays. Subgraphs (If/Loop/Scan bodies) are Graphs whose
//            `parent` is the graph of the node that owns them; a name a subgraph reads from an
//            enclosing scope is a *capture* value whose `outer` points at the parent's value.
//
// Handles are stable until Rewrite::commit() compacts the tables (see rewrite.h).
// Unmodelled protobuf fields are kept as verbatim field bytes (`std::string_view`s into the
// mapping) and written back unchanged, so IR-10/11 fields survive onnx-1.12-era tooling.
#include <filesystem>
#include <map>
#include <optional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/tensor.h"
#include "ir/types.h"

namespace onnxforge {

class MappedFile;
class Model;

// AttributeProto.AttributeType
enum class AttrType : uint8_t {
  Undefined = 0,
  Float = 1,
  Int = 2,
  String = 3,
  Tensor = 4,
  Graph = 5,
  Floats = 6,
  Ints = 7,
  Strings = 8,
  Tensors = 9,
  Graphs = 10,
  SparseTensor = 11,
  SparseTensors = 12,
  TypeProto = 13,
  TypeProtos = 14,
};

// One attribute row. Scalars inline; lists are slices of the graph's flat payload arrays.
// Sparse tensors and type protos are not modelled: their field bytes stay in `extra`.
struct Attr {
  Sym name;
  AttrType type = AttrType::Undefined;
  Sym ref_attr_name;  // function bodies: attribute reference
  int64_t i = 0;
  float f = 0;
  Sym s;
  TensorId tensor;
  GraphId graph;
  uint32_t list_begin = 0, list_count = 0;    // into ints/floats/strings/tensors/graphs
  uint32_t extra_begin = 0, extra_count = 0;  // verbatim fields (doc_string, sparse, type protos)
};

// A new attribute for Rewrite::add_node and friends.
struct NewAttr {
  std::string name;
  AttrType type = AttrType::Undefined;
  int64_t i = 0;
  float f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;
  TensorId tensor;
  GraphId graph;

  static NewAttr Int(std::string n, int64_t v) { return with<&NewAttr::i>(std::move(n), AttrType::Int, v); }
  static NewAttr Float(std::string n, float v) { return with<&NewAttr::f>(std::move(n), AttrType::Float, v); }
  static NewAttr String(std::string n, std::string v) {
    return with<&NewAttr::s>(std::move(n), AttrType::String, std::move(v));
  }
  static NewAttr Ints(std::string n, std::vector<int64_t> v) {
    return with<&NewAttr::ints>(std::move(n), AttrType::Ints, std::move(v));
  }
  static NewAttr Floats(std::string n, std::vector<float> v) {
    return with<&NewAttr::floats>(std::move(n), AttrType::Floats, std::move(v));
  }
  static NewAttr Tensor(std::string n, TensorId t) { return with<&NewAttr::tensor>(std::move(n), AttrType::Tensor, t); }
  static NewAttr Graph(std::string n, GraphId g) { return with<&NewAttr::graph>(std::move(n), AttrType::Graph, g); }

 private:
  // One factory for the family: the name, the type and the one payload field it sets.
  template <auto Field, class V>
  static NewAttr with(std::string n, AttrType t, V&& v) {
    NewAttr a;
    a.name = std::move(n);
    a.type = t;
    a.*Field = std::forward<V>(v);
    return a;
  }
};

struct MetadataEntry {
  Sym key, value;
};

class Graph {
 public:
  Graph(Model& model, GraphId id, GraphId parent) : model_(&model), id_(id), parent_(parent) {}

  // ---- identity ----
  Model& model() const { return *model_; }
  GraphId id() const { return id_; }
  GraphId parent() const { return parent_; }         // invalid for the main graph and function bodies
  NodeId owner_node() const { return owner_node_; }  // node in `parent` whose attribute holds us
  bool is_function_body() const { return is_function_; }
  // A subgraph whose owning node was removed: unreachable, not written, skipped by analyses.
  bool detached() const { return detached_; }
  // Marks a graph nothing reaches any more (the body of a dropped function, ir/inline_functions.h).
  void detach() { detached_ = true; }
  Sym name() const { return name_; }

  // ---- nodes ----
  uint32_t node_capacity() const { return static_cast<uint32_t>(op_type_.size()); }  // incl. dead
  uint32_t node_count() const { return live_nodes_; }
  bool alive(NodeId n) const { return alive_[n.index()]; }
  // Alive nodes in table order (file order for a loaded model; not necessarily topological).
  std::vector<NodeId> nodes() const;
  Sym op_type(NodeId n) const { return op_type_[n.index()]; }
  Sym domain(NodeId n) const { return domain_[n.index()]; }  // "" and "ai.onnx" are the same domain
  Sym node_name(NodeId n) const { return node_name_[n.index()]; }
  Sym overload(NodeId n) const { return overload_[n.index()]; }
  bool is_op(NodeId n, std::string_view op_type) const;  // in the default ONNX domain
  std::span<const ValueId> inputs(NodeId n) const {
    return {node_inputs_.data() + in_begin_[n.index()], in_count_[n.index()]};
  }
  std::span<const ValueId> outputs(NodeId n) const {
    return {node_outputs_.data() + out_begin_[n.index()], out_count_[n.index()]};
  }
  // Input/output i, or an invalid id when absent (optional "" or past the end).
  ValueId input(NodeId n, size_t i) const {
    auto s = inputs(n);
    return i < s.size() ? s[i] : ValueId{};
  }
  ValueId output(NodeId n, size_t i) const {
    auto s = outputs(n);
    return i < s.size() ? s[i] : ValueId{};
  }
  std::span<const MetadataEntry> metadata(NodeId n) const {
    return {metadata_.data() + meta_begin_[n.index()], meta_count_[n.index()]};
  }
  std::string_view metadata_value(NodeId n, std::string_view key) const;
  uint32_t scope(NodeId n) const { return scope_[n.index()]; }  // tag set id, 0 = untagged
  void set_scope(NodeId n, uint32_t tags) { scope_[n.index()] = tags; }
  // Whether the node's name/domain field was present in the file even when empty (proto2).
  bool domain_present(NodeId n) const { return present_[n.index()] & kDomainPresent; }
  bool name_present(NodeId n) const { return present_[n.index()] & kNamePresent; }
  std::span<const std::string_view> node_extra(NodeId n) const {
    return {extra_.data() + node_extra_begin_[n.index()], node_extra_count_[n.index()]};
  }

  // ---- attributes ----
  std::span<const Attr> attrs(NodeId n) const {
    return {attrs_.data() + attr_begin_[n.index()], attr_count_[n.index()]};
  }
  const Attr* attr(NodeId n, std::string_view name) const;
  int64_t attr_int(NodeId n, std::string_view name, int64_t fallback) const;
  float attr_float(NodeId n, std::string_view name, float fallback) const;
  std::string_view attr_string(NodeId n, std::string_view name, std::string_view fallback = {}) const;
  std::span<const int64_t> attr_ints(NodeId n, std::string_view name) const;  // empty if absent
  std::span<const float> attr_floats(NodeId n, std::string_view name) const;
  GraphId attr_graph(NodeId n, std::string_view name) const;    // invalid if absent
  TensorId attr_tensor(NodeId n, std::string_view name) const;  // invalid if absent
  // The attribute `name` when present with a value; throws onnxforge::Error naming the node when
  // its declared type is not `want`. The attr_* readers above all go through it.
  const Attr* typed_attr(NodeId n, std::string_view name, AttrType want) const;
  std::span<const int64_t> ints(const Attr& a) const { return {ints_.data() + a.list_begin, a.list_count}; }
  std::span<const float> floats(const Attr& a) const { return {floats_.data() + a.list_begin, a.list_count}; }
  std::span<const Sym> strings(const Attr& a) const { return {strings_.data() + a.list_begin, a.list_count}; }
  std::span<const TensorId> tensors(const Attr& a) const { return {tensor_list_.data() + a.list_begin, a.list_count}; }
  std::span<const GraphId> graphs(const Attr& a) const { return {graph_list_.data() + a.list_begin, a.list_count}; }
  std::span<const std::string_view> attr_extra(const Attr& a) const {
    return {extra_.data() + a.extra_begin, a.extra_count};
  }
  // Subgraphs held by a node's attributes (Graph and Graphs types).
  std::vector<GraphId> subgraphs(NodeId n) const;

  // ---- values ----
  uint32_t value_count() const { return static_cast<uint32_t>(value_name_.size()); }
  Sym value_name(ValueId v) const;  // captures report the name of the outer value they read
  std::optional<ValueId> find_value(std::string_view name) const;
  // The readers below take an absent value (an invalid id: an optional input left empty, or a
  // required one a hostile file left empty) as a value nothing is known about, so code that
  // forgets to check input(n, i).valid() reads "unknown" instead of out of bounds (a Mul whose
  // first input name was empty crashed `optimize`).
  DType dtype(ValueId v) const { return v.valid() ? dtype_[v.index()] : DType::Undefined; }
  bool has_shape(ValueId v) const { return v.valid() && rank_[v.index()] >= 0; }
  int32_t rank(ValueId v) const { return v.valid() ? rank_[v.index()] : -1; }  // -1 unknown
  std::span<const Dim> shape(ValueId v) const;
  NodeId producer(ValueId v) const { return v.valid() ? producer_[v.index()] : NodeId{}; }
  TensorId initializer(ValueId v) const { return v.valid() ? init_tensor_[v.index()] : TensorId{}; }
  ValueId outer(ValueId v) const { return v.valid() ? outer_[v.index()] : ValueId{}; }  // capture target in parent()
  bool is_graph_input(ValueId v) const { return v.valid() && (flags_[v.index()] & kInput); }
  bool is_graph_output(ValueId v) const { return v.valid() && (flags_[v.index()] & kOutput); }
  bool is_initializer(ValueId v) const { return v.valid() && init_tensor_[v.index()].valid(); }
  bool is_sparse_initializer(ValueId v) const { return v.valid() && (flags_[v.index()] & kSparse); }
  // An initializer whose value cannot be overridden at run time (not also a graph input).
  bool is_constant(ValueId v) const { return is_initializer(v) && !is_graph_input(v); }
  bool has_type(ValueId v) const { return v.valid() && (flags_[v.index()] & kTyped); }
  std::string_view type_raw(ValueId v) const {
    return v.valid() ? type_raw_[v.index()] : std::string_view();
  }  // non-tensor TypeProto
  std::span<const std::string_view> value_extra(ValueId v) const {
    return {extra_.data() + value_extra_begin_[v.index()], value_extra_count_[v.index()]};
  }

  // ---- graph interface ----
  const std::vector<ValueId>& graph_inputs() const { return inputs_; }
  const std::vector<ValueId>& graph_outputs() const { return outputs_; }
  const std::vector<ValueId>& value_infos() const { return value_info_; }
  const std::vector<ValueId>& initializers() const { return initializers_; }
  // Sparse initializers: the value they define and the SparseTensorProto bytes, verbatim.
  const std::vector<std::pair<ValueId, std::string_view>>& sparse_initializers() const { return sparse_; }
  const std::vector<ValueId>& captures() const { return captures_; }
  std::span<const std::string_view> graph_extra() const { return graph_extra_; }
  // Outer-scope values of `parent()` read by node `n`'s subgraphs (directly or nested deeper).
  std::vector<ValueId> implicit_inputs(NodeId n) const;

  // ---- editing (low level; passes use Rewrite) ----
  void set_name(Sym name) { name_ = name; }
  ValueId add_value(Sym name);
  // A value this subgraph reads from its parent (`outer` is a value of parent()).
  ValueId add_capture(Sym name, ValueId outer);
  NodeId add_node(Sym op_type, Sym domain, Sym name, std::span<const ValueId> inputs, std::span<const ValueId> outputs,
                  std::span<const NewAttr> attrs = {});
  void set_input(NodeId n, size_t i, ValueId v) { node_inputs_[in_begin_[n.index()] + i] = v; }
  void set_type(ValueId v, DType t, std::span<const Dim> dims);  // shape known
  void set_dtype(ValueId v, DType t) {
    dtype_[v.index()] = t;
    flags_[v.index()] |= kTyped;
  }
  void clear_shape(ValueId v) { rank_[v.index()] = -1; }
  void set_value_name(ValueId v, Sym name);
  void set_initializer(ValueId v, TensorId t);
  void set_metadata(NodeId n, std::span<const MetadataEntry> entries);
  void set_outer(ValueId capture, ValueId outer) { outer_[capture.index()] = outer; }
  void set_graph_outputs(std::vector<ValueId> outs);
  void set_graph_inputs(std::vector<ValueId> ins);
  void add_value_info(ValueId v);
  void remove_initializer(ValueId v);
  void kill_node(NodeId n);

  // Attribute payload building (used by the reader and add_node).
  uint32_t append_attr(Attr a) {
    attrs_.push_back(a);
    return static_cast<uint32_t>(attrs_.size() - 1);
  }
  Attr attr_from(const NewAttr& a);

 private:
  friend class Model;
  friend void compact(Graph& g);
  friend class Reader;
  friend class Rewrite;
  friend class GraphBuilder;

  enum Flags : uint8_t { kInput = 1, kOutput = 2, kTyped = 4, kSparse = 8, kValueInfo = 16 };
  enum Present : uint8_t { kNamePresent = 1, kDomainPresent = 2, kOverloadPresent = 4 };

  Model* model_;
  GraphId id_, parent_;
  NodeId owner_node_;
  bool is_function_ = false;
  bool detached_ = false;
  Sym name_;
  uint32_t live_nodes_ = 0;

  // node columns
  std::vector<Sym> op_type_, domain_, node_name_, overload_;
  std::vector<uint32_t> in_begin_, in_count_, out_begin_, out_count_, attr_begin_, attr_count_;
  std::vector<uint32_t> meta_begin_, meta_count_, node_extra_begin_, node_extra_count_, scope_;
  std::vector<uint8_t> alive_;
  std::vector<uint8_t> present_;  // proto2 presence of empty strings (kNamePresent, kDomainPresent)
  std::vector<ValueId> node_inputs_, node_outputs_;
  std::vector<MetadataEntry> metadata_;

  // attribute rows and their payload arrays
  std::vector<Attr> attrs_;
  std::vector<int64_t> ints_;
  std::vector<float> floats_;
  std::vector<Sym> strings_;
  std::vector<TensorId> tensor_list_;
  std::vector<GraphId> graph_list_;

  // value columns
  std::vector<Sym> value_name_;
  std::vector<DType> dtype_;
  std::vector<int32_t> rank_;
  std::vector<uint32_t> dim_begin_;
  std::vector<Dim> dims_;
  std::vector<NodeId> producer_;
  std::vector<TensorId> init_tensor_;
  std::vector<ValueId> outer_;
  std::vector<uint8_t> flags_;
  std::vector<std::string_view> type_raw_;
  std::vector<uint32_t> value_extra_begin_, value_extra_count_;
  std::unordered_map<Sym, ValueId> by_name_;

  // graph interface
  std::vector<ValueId> inputs_, outputs_, value_info_, initializers_, captures_;
  std::vector<std::pair<ValueId, std::string_view>> sparse_;
  std::vector<std::string_view> graph_extra_;

  std::vector<std::string_view> extra_;  // verbatim field bytes, sliced by nodes/attrs/values
};

struct OpsetImport {
  Sym domain;
  int64_t version = 0;
  bool domain_present = true;  // onnx writes domain "" explicitly; keep its absence when read so
};

// A local function (FunctionProto). Its body is a Graph whose inputs/outputs are the function's.
struct Function {
  Sym name, domain, overload;
  std::vector<Sym> attributes;           // attribute names
  std::vector<std::string_view> fields;  // attribute_proto, opset_import, doc, metadata... verbatim
  GraphId body;
};

class Model {
 public:
  Model();
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
  // A copy of every table (graphs, functions, header, tags) whose tensors are views of this
  // model's bytes: valid while this model lives. The runtime expands local functions on one
  // (ir/inline_functions.h), leaving the caller's model as it was.
  std::unique_ptr<Model> clone() const;

  int64_t ir_version = 8;
  std::vector<OpsetImport> opsets;
  Sym producer_name, producer_version, domain;
  int64_t model_version = 0;
  std::vector<std::pair<std::string, std::string>> metadata_props;
  std::vector<Function> functions;
  std::vector<std::string_view> extra_fields;  // doc_string, training_info, unknown: verbatim

  TensorStore tensors;

  Graph& main() { return *graphs_[0]; }
  const Graph& main() const { return *graphs_[0]; }
  Graph& graph(GraphId g) { return *graphs_[g.index()]; }
  const Graph& graph(GraphId g) const { return *graphs_[g.index()]; }
  size_t graph_count() const { return graphs_.size(); }
  GraphId add_graph(GraphId parent, NodeId owner);

  int64_t opset(std::string_view domain) const;  // 0 if not imported; "" == "ai.onnx"

  // Hierarchy tag sets: id 0 is the empty set. Each set is sorted and unique.
  uint32_t tag_set(std::vector<Sym> tags);
  std::span<const Sym> tags(uint32_t set) const { return tag_sets_[set]; }
  uint32_t union_tags(std::span<const uint32_t> sets);
  size_t tag_set_count() const { return tag_sets_.size(); }

  // The number fresh_name (ir/rewrite.h) tries next. Per model, not per process: the names a
  // rewrite invents depend on this model's history only, so optimizing the same file twice in one
  // process (the Python module, from one thread or several) writes the same bytes. A clone
  // continues from here.
  uint64_t next_fresh_name = 0;

  // Where the model was read from (empty for models built in memory).
  std::filesystem::path path;
  // Mappings that tensor bytes and verbatim fields point into; kept alive with the model.
  std::vector<std::shared_ptr<MappedFile>> files;

 private:
  std::vector<std::unique_ptr<Graph>> graphs_;
  std::vector<std::vector<Sym>> tag_sets_;
  std::map<std::vector<Sym>, uint32_t> tag_index_;
};

// Significand bits (without the implicit one) of the narrowest float type the model computes in:
// 23 for float32 only, 10 when a node output, a graph input, a Cast target or a constant read by
// anything but a Cast is float16, 7 for bfloat16, 1-3 for float8/float4. Constants that are only
// cast up (weights stored in float16, computed in float32) do not count: that Cast is exact.
// Verification widens bounded tolerances by it; the runtime's plan fuses no float chain it cannot
// prove float32 in such a model (the graph's narrow roundings are part of its meaning).
int narrowest_float_bits(const Model& m);

}  // namespace onnxforge
