// ONNX wire-format reader on top of protobuf's CodedInputStream, over a memory mapping.
// Tensor data is never touched: raw_data (and packed float/double data) become spans into the
// mapping; fields the tables do not model are kept as verbatim field bytes.
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <deque>
#include <map>
#include <cstring>
#include <unordered_map>

#include "io/mapped_file.h"
#include "io/model_io.h"
#include "ir/error.h"
#include "ir/topo.h"

namespace onnxforge {

namespace pb = google::protobuf;
using WFL = pb::internal::WireFormatLite;

namespace {

constexpr int kMaxGraphDepth = 32;

// A view of one length-delimited message inside the mapping, read with CodedInputStream.
// Reads through `scan` (a transient mapping whose pages are released as parsing moves on);
// views it hands out for keeping (verbatim fields, tensor spans) point into `file`, the mapping
// the model keeps, which parsing never touches.
thread_local const MappedFile* t_scan = nullptr;

class Cursor {
 public:
  Cursor(const MappedFile& file, uint64_t begin, uint64_t end)
      : file_(file),
        base_(reinterpret_cast<const uint8_t*>(t_scan ? t_scan->data() : file.data()) + begin),
        begin_(begin),
        in_(base_, static_cast<int>(end - begin)) {
    in_.SetRecursionLimit(1000);
  }

  // Next field; false at the end of the message. Throws on a malformed tag.
  bool next() {
    field_start_ = static_cast<uint64_t>(in_.CurrentPosition());
    tag_ = in_.ReadTag();
    if (tag_ == 0) {
      if (in_.ConsumedEntireMessage() || at_end()) return false;
      bad("invalid field tag");
    }
    return true;
  }
  uint32_t field() const { return WFL::GetTagFieldNumber(tag_); }
  uint64_t field_begin() const { return begin_ + field_start_; }
  uint64_t position() const { return begin_ + static_cast<uint64_t>(in_.CurrentPosition()); }
  WFL::WireType wire() const { return WFL::GetTagWireType(tag_); }

  uint64_t varint() {
    expect(WFL::WIRETYPE_VARINT);
    uint64_t v;
    if (!in_.ReadVarint64(&v)) bad("truncated varint");
    return v;
  }
  int64_t int64() { return static_cast<int64_t>(varint()); }
  float fixed32_float() {
    expect(WFL::WIRETYPE_FIXED32);
    uint32_t v;
    if (!in_.ReadLittleEndian32(&v)) bad("truncated fixed32");
    float f;
    std::memcpy(&f, &v, 4);
    return f;
  }
  // A length-delimited field as (offset in the file, length); the bytes are skipped, not read.
  std::pair<uint64_t, uint64_t> span() {
    expect(WFL::WIRETYPE_LENGTH_DELIMITED);
    uint32_t len;
    if (!in_.ReadVarint32(&len)) bad("truncated length");
    uint64_t at = static_cast<uint64_t>(in_.CurrentPosition());
    if (len > static_cast<uint64_t>(in_.BytesUntilLimit()) || !in_.Skip(static_cast<int>(len)))
      bad("length field runs past the end of its message (file truncated or corrupt)");
    return {begin_ + at, len};
  }
  // Transient: valid during parsing only (reads the scan view).
  std::string_view bytes() {
    auto [at, len] = span();
    return {reinterpret_cast<const char*>(base_) + (at - begin_), len};
  }
  Sym sym() { return intern(bytes()); }
  // The whole current field (tag included), verbatim; skips it.
  std::string_view verbatim() {
    if (!WFL::SkipField(&in_, tag_)) bad("cannot skip field ", field());
    uint64_t end = static_cast<uint64_t>(in_.CurrentPosition());
    return {reinterpret_cast<const char*>(file_.data()) + begin_ + field_start_, end - field_start_};
  }
  // Packed (or single unpacked) repeated varints.
  template <class F>
  void varints(F&& each) {
    if (wire() == WFL::WIRETYPE_VARINT) return each(varint());
    auto [at, len] = span();
    Cursor sub(file_, at, at + len);
    while (!sub.at_end()) {
      uint64_t v;
      if (!sub.in_.ReadVarint64(&v)) bad("truncated packed varint");
      each(v);
    }
  }
  bool at_end() { return in_.BytesUntilLimit() == 0 || (in_.ExpectAtEnd(), in_.CurrentPosition() == size()); }
  int size() const { return static_cast<int>(in_.BytesUntilTotalBytesLimit() + in_.CurrentPosition()); }

  template <class... P>
  [[noreturn]] void bad(P&&... parts) const {
    fail(file_.path().string(), ": malformed ONNX protobuf at byte ", begin_ + field_start_, ": ",
         std::forward<P>(parts)...);
  }
  void expect(WFL::WireType w) const {
    if (wire() != w) bad("field ", field(), " has wire type ", int(wire()), ", expected ", int(w));
  }

 private:
  const MappedFile& file_;
  const uint8_t* base_;
  uint64_t begin_;
  pb::io::CodedInputStream in_;
  uint32_t tag_ = 0;
  uint64_t field_start_ = 0;
};

bool path_escapes(const std::filesystem::path& rel) {
  int depth = 0;
  for (const auto& part : rel) {
    if (part == "..") {
      if (--depth < 0) return true;
    } else if (part != "." && !part.empty()) {
      ++depth;
    }
  }
  return false;
}

}  // namespace

// Builds a Model from the mapping. Friend of Graph: fills the tables directly.
class Reader {
 public:
  Reader(Model& model, std::shared_ptr<MappedFile> file, const LoadOptions& options)
      : model_(model), file_(*file), options_(options) {
    model_.files.push_back(std::move(file));
    dir_ = model_.path.parent_path();
  }

  void read_model() {
    if (file_.size() == 0) fail(file_.path().string(), ": file is empty, not an ONNX model");
    if (file_.size() > kProtobufLimit)
      fail(file_.path().string(), ": file is ", file_.size(),
           " bytes; a protobuf message cannot exceed 2 GiB (store weights as external data)");
    auto scan = file_.scan_view();
    t_scan = scan.get();
    struct Reset {
      ~Reset() { t_scan = nullptr; }
    } reset;
    Cursor c(file_, 0, file_.size());
    bool saw_graph = false;
    while (c.next()) {
      switch (c.field()) {
        case 1: model_.ir_version = c.int64(); break;
        case 2: model_.producer_name = c.sym(); break;
        case 3: model_.producer_version = c.sym(); break;
        case 4: model_.domain = c.sym(); break;
        case 5: model_.model_version = c.int64(); break;
        case 7: {
          if (saw_graph) c.bad("model has two graphs");
          saw_graph = true;
          auto [at, len] = c.span();
          read_graph(model_.main(), at, len, 0);
          break;
        }
        case 8: model_.opsets.push_back(read_opset(c)); break;
        case 14: model_.metadata_props.push_back(read_string_pair(c)); break;
        case 25: read_function(c); break;
        default: model_.extra_fields.push_back(c.verbatim()); break;  // doc, training_info, ...
      }
    }
    if (!saw_graph) fail(file_.path().string(), ": not an ONNX model (no graph found)");
    check_opsets();
    if (model_.ir_version < 1 || model_.ir_version > 64)
      fail(file_.path().string(), ": ir_version ", model_.ir_version, " is not a valid ONNX IR version");
    for (size_t g = 0; g < model_.graph_count(); ++g) resolve_names(model_.graph(GraphId(static_cast<uint32_t>(g))));
    check_function_recursion();
    for (size_t g = 0; g < model_.graph_count(); ++g)
      check_shadowed_inputs(model_.graph(GraphId(static_cast<uint32_t>(g))));
    if (options_.validate)
      for (size_t g = 0; g < model_.graph_count(); ++g) validate(model_.graph(GraphId(static_cast<uint32_t>(g))));
  }

 private:
  // Node inputs and graph outputs are names until the whole model is read (a subgraph may
  // read a value its parent defines later in the file).
  // A ValueInfoProto as read: applied to the value its name resolves to.
  struct Declaration {
    Sym name;
    bool typed = false, has_shape = false;
    DType dtype = DType::Undefined;
    std::vector<Dim> dims;
    std::string_view type_raw;
    std::vector<std::string_view> extra;  // doc_string, metadata_props
    int64_t bad_elem_type = -1;           // an elem_type that is 0 (UNDEFINED) or unknown, as declared
  };

  // The model's interface must say what it takes and gives: an element type 0 (UNDEFINED) or
  // one ONNX does not define was run as float32 without a word.
  void check_interface_type(const Graph& g, const Declaration& d, const char* what) const {
    if (g.id().index() != 0 || d.bad_elem_type < 0) return;
    fail(file_.path().string(), ": graph ", what, " '", str(d.name), "' declares element type ", d.bad_elem_type,
         d.bad_elem_type == 0 ? " (UNDEFINED)" : ", which ONNX does not define",
         "; the model's inputs and outputs need a tensor element type");
  }
  struct Pending {
    std::vector<Sym> node_inputs;  // parallel to Graph::node_inputs_
    std::vector<Declaration> outputs, value_info;
  };

  OpsetImport read_opset(Cursor& c) {
    auto [at, len] = c.span();
    Cursor m(file_, at, at + len);
    OpsetImport o;
    o.domain_present = false;
    while (m.next()) {
      if (m.field() == 1) {
        o.domain = m.sym();
        o.domain_present = true;
      } else if (m.field() == 2)
        o.version = m.int64();
      else
        m.verbatim();
    }
    return o;
  }

  // An initializer with the name of a graph input is the input's default value (IR < 4 lists
  // every initializer as an input). One of another element type or shape than the input declares
  // cannot be that default: whether the declaration or the tensor is meant is anyone's guess, so
  // it is refused (docs/cli.md, "Files onnxforge reads"). The same holds for a graph output or a
  // value_info entry naming an initializer: the declaration would replace the tensor's type in
  // the graph, and a writer that declares IR < 4 initializers as inputs would turn it into a
  // shadowed input the reader then refuses.
  void check_shadowed_inputs(const Graph& g) const {
    for (ValueId v : g.initializers()) {
      TensorId t = g.init_tensor_[v.index()];
      if (!t.valid()) continue;
      const DType dt = model_.tensors.dtype(t);
      auto dims = model_.tensors.dims(t);
      bool clash = g.dtype(v) != DType::Undefined && g.dtype(v) != dt;
      if (g.has_shape(v)) {
        auto shape = g.shape(v);
        clash |= shape.size() != dims.size();
        for (size_t i = 0; !clash && i < shape.size(); ++i) clash |= shape[i].known() && shape[i].value != dims[i];
      }
      if (!clash) continue;
      std::string tshape, declared;
      for (size_t i = 0; i < dims.size(); ++i) tshape += (i ? "," : "") + std::to_string(dims[i]);
      if (g.has_shape(v)) {
        auto shape = g.shape(v);
        for (size_t i = 0; i < shape.size(); ++i)
          declared +=
              (i ? "," : "") + (shape[i].known() ? std::to_string(shape[i].value) : std::string(str(shape[i].param)));
        declared = " [" + declared + "]";
      }
      const bool input = g.flags_[v.index()] & Graph::kInput;
      fail(file_.path().string(), ": ", input ? "graph input '" : "initializer '", str(g.value_name(v)),
           input ? "' is declared " : "' is declared (graph output or value_info) ", dtype_name(g.dtype(v)), declared,
           input ? " but the initializer of the same name holds " : " but the tensor holds ", dtype_name(dt), " [",
           tshape, "]; ",
           input ? "an initializer shadowing an input must match its declared type and shape"
                 : "a declaration of an initializer must match its type and shape");
    }
  }

  // Opset versions outside what ONNX has defined, or one domain imported twice, made every op's
  // version ambiguous or meaningless; they were accepted silently. 1000 leaves room for the
  // future of every domain (the default domain is at 24, ai.onnx.ml at 5).
  void check_opsets() const {
    std::map<std::string, int64_t> seen;
    for (const OpsetImport& o : model_.opsets) {
      std::string domain(str(o.domain));
      if (domain == "ai.onnx") domain.clear();
      const std::string shown = domain.empty() ? "the default domain" : "domain '" + domain + "'";
      if (o.version < 1 || o.version > 1000)
        fail(file_.path().string(), ": ", shown, " is imported at opset ", o.version,
             ", which no ONNX release defines");
      if (auto [it, fresh] = seen.emplace(domain, o.version); !fresh)
        fail(file_.path().string(), ": ", shown, " is imported twice (opsets ", it->second, " and ", o.version, ")");
    }
  }

  std::pair<std::string, std::string> read_string_pair(Cursor& c) {
    auto [at, len] = c.span();
    Cursor m(file_, at, at + len);
    std::pair<std::string, std::string> kv;
    while (m.next()) {
      if (m.field() == 1)
        kv.first = std::string(m.bytes());
      else if (m.field() == 2)
        kv.second = std::string(m.bytes());
      else
        m.verbatim();
    }
    return kv;
  }

  MetadataEntry read_metadata(Cursor& c) {
    auto [k, v] = read_string_pair(c);
    return {intern(k), intern(v)};
  }

  // ------------------------------------------------------------------ graphs

  void read_graph(Graph& g, uint64_t at, uint64_t len, int depth) {
    if (depth > kMaxGraphDepth)
      fail(file_.path().string(), ": subgraphs nested more than ", kMaxGraphDepth, " deep (corrupt or hostile file)");
    Pending& p = pending_[g.id().index()];
    Cursor c(file_, at, at + len);
    while (c.next()) {
      switch (c.field()) {
        case 1: read_node(g, c, depth); break;
        case 2: g.name_ = c.sym(); break;
        case 5: read_initializer(g, c); break;
        case 11: {
          Declaration d = read_declaration(c);
          if (d.name.empty()) c.bad("graph input without a name");
          ValueId v = value_for(g, d.name);
          if (g.flags_[v.index()] & Graph::kInput) c.bad("graph input '", str(d.name), "' listed twice");
          if (g.producer_[v.index()].valid()) c.bad("graph input '", str(d.name), "' is also produced by a node");
          check_interface_type(g, d, "input");
          apply(g, v, d);
          g.inputs_.push_back(v);
          g.flags_[v.index()] |= Graph::kInput;
          break;
        }
        case 12: p.outputs.push_back(read_declaration(c)); break;
        case 13: p.value_info.push_back(read_declaration(c)); break;
        case 15: read_sparse_initializer(g, c); break;
        default: g.graph_extra_.push_back(c.verbatim()); break;  // doc, quantization, metadata
      }
      if (t_scan && depth == 0) t_scan->release(c.field_begin(), c.position());
    }
  }

  void read_node(Graph& g, Cursor& outer, int depth) {
    auto [at, len] = outer.span();
    Cursor c(file_, at, at + len);
    Pending& p = pending_[g.id().index()];
    NodeId n(g.node_capacity());
    g.op_type_.push_back(Sym{});
    g.domain_.push_back(Sym{});
    g.node_name_.push_back(Sym{});
    g.overload_.push_back(Sym{});
    g.in_begin_.push_back(static_cast<uint32_t>(g.node_inputs_.size()));
    g.out_begin_.push_back(static_cast<uint32_t>(g.node_outputs_.size()));
    g.attr_begin_.push_back(static_cast<uint32_t>(g.attrs_.size()));
    g.meta_begin_.push_back(static_cast<uint32_t>(g.metadata_.size()));
    g.node_extra_begin_.push_back(static_cast<uint32_t>(g.extra_.size()));
    g.scope_.push_back(0);
    g.alive_.push_back(1);
    g.present_.push_back(0);
    ++g.live_nodes_;
    uint32_t nin = 0, nout = 0, nattr = 0, nmeta = 0, nextra = 0;
    std::vector<Sym> output_names;  // defined once the node's name is known (for error messages)
    while (c.next()) {
      switch (c.field()) {
        case 1:
          p.node_inputs.push_back(c.sym());
          g.node_inputs_.push_back(ValueId{});
          ++nin;
          break;
        case 2:
          output_names.push_back(c.sym());
          ++nout;
          break;
        case 3:
          g.node_name_[n.index()] = c.sym();
          g.present_[n.index()] |= Graph::kNamePresent;
          break;
        case 4: g.op_type_[n.index()] = c.sym(); break;
        case 5:
          g.attrs_.push_back(read_attribute(g, c, n, depth));
          ++nattr;
          break;
        case 7:
          g.domain_[n.index()] = c.sym();
          g.present_[n.index()] |= Graph::kDomainPresent;
          break;
        case 8:
          g.overload_[n.index()] = c.sym();
          g.present_[n.index()] |= Graph::kOverloadPresent;
          break;
        case 9:
          g.metadata_.push_back(read_metadata(c));
          ++nmeta;
          break;
        default:
          g.extra_.push_back(c.verbatim());
          ++nextra;
          break;  // doc_string, device configs
      }
    }
    g.in_count_.push_back(nin);
    g.out_count_.push_back(nout);
    for (Sym name : output_names) g.node_outputs_.push_back(define_output(g, name, n));
    g.attr_count_.push_back(nattr);
    g.meta_count_.push_back(nmeta);
    g.node_extra_count_.push_back(nextra);
    if (g.op_type_[n.index()].empty())
      fail(file_.path().string(), ": node ", n.index(), describe_node(g, n), " has no op_type");
  }

  std::string describe_node(const Graph& g, NodeId n) const {
    std::string s;
    if (!g.node_name_[n.index()].empty()) s += " '" + std::string(str(g.node_name_[n.index()])) + "'";
    if (!g.op_type_[n.index()].empty()) s += " (" + std::string(str(g.op_type_[n.index()])) + ")";
    if (g.id().index() != 0) s += " in subgraph '" + std::string(str(g.name_)) + "'";
    return s;
  }

  ValueId define_output(Graph& g, Sym name, NodeId n) {
    if (name.empty()) return ValueId{};
    ValueId v = value_for(g, name);
    if (g.producer_[v.index()].valid()) {
      NodeId other = g.producer_[v.index()];
      fail(file_.path().string(), ": value '", str(name), "' has two producers: node ", other.index(),
           describe_node(g, other), " and node ", n.index(), describe_node(g, n));
    }
    if (g.flags_[v.index()] & Graph::kInput)
      fail(file_.path().string(), ": value '", str(name), "' is a graph input and also produced by node ", n.index(),
           describe_node(g, n));
    if (g.init_tensor_[v.index()].valid())
      fail(file_.path().string(), ": value '", str(name), "' is an initializer and also produced by node ", n.index(),
           describe_node(g, n));
    g.producer_[v.index()] = n;
    return v;
  }

  ValueId value_for(Graph& g, Sym name) {
    auto it = g.by_name_.find(name);
    if (it != g.by_name_.end()) return it->second;
    return g.add_value(name);
  }

  Attr read_attribute(Graph& g, Cursor& outer, NodeId n, int depth) {
    auto [at, len] = outer.span();
    Cursor c(file_, at, at + len);
    Attr a;
    std::vector<int64_t> ints;
    std::vector<float> floats;
    std::vector<Sym> strings;
    std::vector<TensorId> tensors;
    std::vector<GraphId> graphs;
    std::vector<std::string_view> extra;
    uint32_t payload = 0;  // bit f: payload field f (2..11) was present
    while (c.next()) {
      if (c.field() >= 2 && c.field() <= 11) payload |= 1u << c.field();
      switch (c.field()) {
        case 1: a.name = c.sym(); break;
        case 2: a.f = c.fixed32_float(); break;
        case 3: a.i = c.int64(); break;
        case 4: a.s = c.sym(); break;
        case 5: a.tensor = read_tensor(c, /*initializer=*/false); break;
        case 6: a.graph = read_subgraph(g, c, n, depth); break;
        case 7:
          if (c.wire() == WFL::WIRETYPE_FIXED32) {
            floats.push_back(c.fixed32_float());
          } else {
            auto [pat, plen] = c.span();
            if (plen % 4) c.bad("packed floats of length ", plen);
            size_t old = floats.size();
            floats.resize(old + plen / 4);
            if (plen) std::memcpy(floats.data() + old, (t_scan ? t_scan->data() : file_.data()) + pat, plen);
          }
          break;
        case 8: c.varints([&](uint64_t v) { ints.push_back(static_cast<int64_t>(v)); }); break;
        case 9: strings.push_back(c.sym()); break;
        case 10: tensors.push_back(read_tensor(c, false)); break;
        case 11: graphs.push_back(read_subgraph(g, c, n, depth)); break;
        case 20: {
          int64_t t = c.int64();
          if (t < 0 || t > 14) c.bad("attribute type ", t, " is not a valid AttributeType");
          a.type = static_cast<AttrType>(t);
          break;
        }
        case 21: a.ref_attr_name = c.sym(); break;
        default: extra.push_back(c.verbatim()); break;  // doc, sparse tensors, type protos
      }
    }
    check_attribute_payload(g, n, a, payload);
    if (a.type == AttrType::Undefined && payload) a.type = infer_attr_type(a, ints, floats, strings, tensors, graphs);
    // A list attribute's items go to the graph's pool of that kind; the attribute keeps the range.
    auto append = [&](auto& pool, const auto& items) {
      a.list_begin = static_cast<uint32_t>(pool.size());
      a.list_count = static_cast<uint32_t>(items.size());
      pool.insert(pool.end(), items.begin(), items.end());
    };
    switch (a.type) {
      case AttrType::Ints: append(g.ints_, ints); break;
      case AttrType::Floats: append(g.floats_, floats); break;
      case AttrType::Strings: append(g.strings_, strings); break;
      case AttrType::Tensors: append(g.tensor_list_, tensors); break;
      case AttrType::Graphs: append(g.graph_list_, graphs); break;
      default: break;
    }
    a.extra_begin = static_cast<uint32_t>(g.extra_.size());
    a.extra_count = static_cast<uint32_t>(extra.size());
    g.extra_.insert(g.extra_.end(), extra.begin(), extra.end());
    return a;
  }

  // The declared type must match the payload: an attribute declared GRAPH that holds no graph
  // crashed every command at load, one declared TENSOR without a tensor crashed the writer.
  // Function bodies may declare a type with only ref_attr_name (the caller supplies the value).
  void check_attribute_payload(const Graph& g, NodeId n, const Attr& a, uint32_t payload) const {
    static constexpr const char* kField[] = {"",
                                             "",
                                             "f (FLOAT)",
                                             "i (INT)",
                                             "s (STRING)",
                                             "t (TENSOR)",
                                             "g (GRAPH)",
                                             "floats (FLOATS)",
                                             "ints (INTS)",
                                             "strings (STRINGS)",
                                             "tensors (TENSORS)",
                                             "graphs (GRAPHS)"};
    auto where = [&] {
      return file_.path().string() + ": node " + std::to_string(n.index()) + describe_node(g, n) + ": attribute '" +
             std::string(str(a.name)) + "'";
    };
    if (a.name.empty()) fail(where(), " has no name");
    int own = 0;  // the payload field of the declared type (0: payload kept verbatim or none)
    switch (a.type) {
      case AttrType::Float: own = 2; break;
      case AttrType::Int: own = 3; break;
      case AttrType::String: own = 4; break;
      case AttrType::Tensor: own = 5; break;
      case AttrType::Graph: own = 6; break;
      case AttrType::Floats: own = 7; break;
      case AttrType::Ints: own = 8; break;
      case AttrType::Strings: own = 9; break;
      case AttrType::Tensors: own = 10; break;
      case AttrType::Graphs: own = 11; break;
      default: break;
    }
    if (a.type == AttrType::Undefined) {  // IR < 3: the type is whatever single payload is set
      if (payload & (payload - 1))
        fail(where(), " has no type and holds several values (fields ", describe_fields(payload, kField),
             "); an attribute holds exactly one");
      return;
    }
    const char* type_name = own ? kField[own] : "a type kept verbatim";
    if (uint32_t other = payload & ~(own ? 1u << own : 0u))
      fail(where(), " is declared ", type_name, " but holds ", describe_fields(other, kField),
           " (corrupt or hostile file)");
    if (!a.ref_attr_name.empty()) return;
    if (a.type == AttrType::Graph && !a.graph.valid()) fail(where(), " is declared GRAPH but holds no graph");
    if (a.type == AttrType::Tensor && !a.tensor.valid()) fail(where(), " is declared TENSOR but holds no tensor");
  }

  static std::string describe_fields(uint32_t bits, const char* const* names) {
    std::string s;
    for (int f = 2; f <= 11; ++f)
      if (bits & (1u << f)) s += (s.empty() ? "" : ", ") + std::string(names[f]);
    return s;
  }

  // IR < 3 style attributes carry no type field: infer it from what is set.
  static AttrType infer_attr_type(const Attr& a, const std::vector<int64_t>& ints, const std::vector<float>& floats,
                                  const std::vector<Sym>& strings, const std::vector<TensorId>& tensors,
                                  const std::vector<GraphId>& graphs) {
    if (!ints.empty()) return AttrType::Ints;
    if (!floats.empty()) return AttrType::Floats;
    if (!strings.empty()) return AttrType::Strings;
    if (!tensors.empty()) return AttrType::Tensors;
    if (!graphs.empty()) return AttrType::Graphs;
    if (a.tensor.valid()) return AttrType::Tensor;
    if (a.graph.valid()) return AttrType::Graph;
    if (!a.s.empty()) return AttrType::String;
    if (a.f != 0) return AttrType::Float;
    return AttrType::Int;
  }

  GraphId read_subgraph(Graph& g, Cursor& c, NodeId owner, int depth) {
    auto [at, len] = c.span();
    GraphId id = model_.add_graph(g.id(), owner);
    pending_.resize(model_.graph_count());
    read_graph(model_.graph(id), at, len, depth + 1);
    return id;
  }

  Declaration read_declaration(Cursor& outer) {
    auto [at, len] = outer.span();
    Cursor c(file_, at, at + len);
    Declaration d;
    while (c.next()) {
      if (c.field() == 1) {
        d.name = c.sym();
      } else if (c.field() == 2) {
        uint64_t field_at = c.field_begin();
        auto [tat, tlen] = c.span();
        if (!read_type(d, tat, tlen))  // a type with no element type: kept as it was, untyped
          d.extra.push_back({reinterpret_cast<const char*>(file_.data()) + field_at, tat + tlen - field_at});
      } else {
        d.extra.push_back(c.verbatim());
      }
    }
    return d;
  }

  void apply(Graph& g, ValueId v, const Declaration& d) {
    if (d.typed) {
      if (d.has_shape)
        g.set_type(v, d.dtype, d.dims);
      else
        g.set_dtype(v, d.dtype);
    }
    g.type_raw_[v.index()] = d.type_raw;
    if (!d.extra.empty()) {
      g.value_extra_begin_[v.index()] = static_cast<uint32_t>(g.extra_.size());
      g.value_extra_count_[v.index()] = static_cast<uint32_t>(d.extra.size());
      g.extra_.insert(g.extra_.end(), d.extra.begin(), d.extra.end());
    }
  }

  // f(sub) for each field-1 submessage of `c` (the one field of TypeProto and TensorShapeProto
  // that is modelled); any other field is kept verbatim and makes the type not plain.
  template <class F>
  void each_field_1(Cursor& c, bool& plain, F&& f) {
    while (c.next()) {
      if (c.field() != 1) {
        plain = false;
        c.verbatim();
        continue;
      }
      auto [at, len] = c.span();
      Cursor sub(file_, at, at + len);
      f(sub);
    }
  }

  // TypeProto. Plain tensor types (elem_type + dims with value/param) are modelled; anything else
  // (sequences, maps, optionals, sparse, denotations) is also kept verbatim in type_raw.
  // Returns false for a TypeProto that declares no element type (empty, or a tensor_type
  // without elem_type, as silero VAD v5 has): the value stays untyped and the caller keeps the
  // field verbatim, so a round trip does not invent `elem_type: 0`.
  bool read_type(Declaration& d, uint64_t at, uint64_t len) {
    Cursor c(file_, at, at + len);
    bool plain = true, elem_type = false;
    each_field_1(c, plain, [&](Cursor& t) {  // TypeProto.tensor_type
      while (t.next()) {
        if (t.field() == 1) {
          int64_t et = t.int64();
          elem_type = true;
          if (et != 0 && dtype_known(static_cast<int32_t>(et)) && et == static_cast<int32_t>(et))
            d.dtype = static_cast<DType>(et);
          else
            plain = false, d.bad_elem_type = et;  // kept verbatim, the value's dtype Undefined
        } else if (t.field() == 2) {
          d.has_shape = true;
          auto [sat, slen] = t.span();
          Cursor s(file_, sat, sat + slen);
          each_field_1(s, plain, [&](Cursor& dc) {  // TensorShapeProto.dim
            Dim dim;
            while (dc.next()) {
              if (dc.field() == 1)
                dim.value = dc.int64();
              else if (dc.field() == 2)
                dim.param = dc.sym();
              else {
                plain = false;
                dc.verbatim();
              }
            }
            if (dim.value < -1) plain = false;
            d.dims.push_back(dim);
          });
        } else {
          plain = false;
          t.verbatim();
        }
      }
    });
    if (plain && !elem_type) {
      if (!d.has_shape) return false;
      plain = false;  // a shape without an element type: modelled, and written back verbatim
    }
    d.typed = true;
    if (!plain) d.type_raw = {reinterpret_cast<const char*>(file_.data()) + at, len};
    return true;
  }

  void read_initializer(Graph& g, Cursor& c) {
    TensorId t = read_tensor(c, true);
    Sym name = model_.tensors.name(t);
    if (name.empty()) c.bad("initializer without a name");
    ValueId v = value_for(g, name);
    if (g.init_tensor_[v.index()].valid())
      fail(file_.path().string(), ": initializer '", str(name), "' is defined twice");
    if (g.producer_[v.index()].valid())
      fail(file_.path().string(), ": value '", str(name), "' is an initializer and also produced by a node");
    // Keep a graph input's declared type: set_initializer would overwrite it with the tensor's.
    bool declared = g.flags_[v.index()] & Graph::kInput;
    if (declared) {
      g.init_tensor_[v.index()] = t;
      g.initializers_.push_back(v);
    } else {
      g.set_initializer(v, t);
    }
  }

  void read_sparse_initializer(Graph& g, Cursor& c) {
    std::string_view whole = c.verbatim();
    // Find the name: SparseTensorProto.values (field 1) is a TensorProto whose name is the value's.
    uint64_t at = static_cast<uint64_t>(whole.data() - reinterpret_cast<const char*>(file_.data()));
    Cursor field(file_, at, at + whole.size());
    field.next();
    auto [mat, mlen] = field.span();
    Cursor m(file_, mat, mat + mlen);
    Sym name;
    while (m.next()) {
      if (m.field() != 1) {
        m.verbatim();
        continue;
      }
      auto [vat, vlen] = m.span();
      Cursor t(file_, vat, vat + vlen);
      while (t.next()) {
        if (t.field() == 8)
          name = t.sym();
        else
          t.verbatim();
      }
    }
    if (name.empty()) c.bad("sparse initializer without a name");
    ValueId v = value_for(g, name);
    g.flags_[v.index()] |= Graph::kSparse;
    g.sparse_.push_back({v, whole});
  }

  // ------------------------------------------------------------------ tensors

  TensorId read_tensor(Cursor& outer, bool initializer) {
    (void)initializer;
    auto [at, len] = outer.span();
    Cursor c(file_, at, at + len);
    TensorStore::Entry e;
    e.source.proto = {reinterpret_cast<const char*>(file_.data()) + at, len};
    e.source.file = &file_;
    std::vector<int64_t> dims;
    int32_t dtype = 0;
    std::vector<std::string> strings;
    std::vector<uint64_t> varint_data;
    std::vector<std::byte> unpacked;  // unpacked fixed32/fixed64 elements
    bool external = false;
    bool has_data = false, packed = false;
    uint32_t data_fields = 0;  // bit f: data field f was present
    while (c.next()) {
      switch (c.field()) {
        case 1: c.varints([&](uint64_t v) { dims.push_back(static_cast<int64_t>(v)); }); break;
        case 2: dtype = static_cast<int32_t>(c.int64()); break;
        case 8: e.name = c.sym(); break;
        case 9:
        case 4:
        case 10:
          data_fields |= 1u << c.field();
          if (c.wire() == WFL::WIRETYPE_LENGTH_DELIMITED) {
            auto [dat, dlen] = c.span();
            e.data = file_.data() + dat;
            e.size = dlen;
            e.source.file_offset = dat;
            packed = true;
          } else if (c.field() == 4) {  // an unpacked repeated float element
            float f = c.fixed32_float();
            auto* b = reinterpret_cast<const std::byte*>(&f);
            unpacked.insert(unpacked.end(), b, b + 4);
          } else if (c.field() == 10) {  // an unpacked repeated double element
            c.expect(WFL::WIRETYPE_FIXED64);
            std::string_view raw = c.verbatim();  // tag + 8 bytes
            auto* b = reinterpret_cast<const std::byte*>(raw.data()) + raw.size() - 8;
            unpacked.insert(unpacked.end(), b, b + 8);
          } else {
            c.expect(WFL::WIRETYPE_LENGTH_DELIMITED);  // raw_data: throws naming the wire type
          }
          e.source.data_field = c.field();
          has_data = true;
          break;
        case 5:
        case 7:
        case 11:
          data_fields |= 1u << c.field();
          c.varints([&](uint64_t v) { varint_data.push_back(v); });
          e.source.data_field = c.field();
          has_data = true;
          break;
        case 6:
          data_fields |= 1u << 6;
          strings.emplace_back(c.bytes());
          e.source.data_field = 6;
          has_data = true;
          break;
        case 13: e.external_info.push_back(read_string_pair(c)); break;
        case 14: external = c.int64() == 1; break;
        default: e.extra_fields.push_back(c.verbatim()); break;  // segment, doc, metadata
      }
    }
    std::string where = "tensor '" + std::string(str(e.name)) + "'";
    if (!dtype_known(dtype)) fail(file_.path().string(), ": ", where, " has unknown data_type ", dtype);
    e.dtype = static_cast<DType>(dtype);
    check_data_fields(e.dtype, data_fields, packed && !unpacked.empty(), where);
    uint64_t count = checked_count(dims, where);
    if (e.dtype == DType::String) {
      if (strings.size() != count && !(strings.empty() && count == 0))
        fail(file_.path().string(), ": ", where, " has ", strings.size(), " strings for ", count, " elements");
      TensorId t = model_.tensors.add_strings(e.name, dims, std::move(strings));
      auto& stored = model_.tensors.entry_mut(t);
      stored.source = e.source;
      stored.extra_fields = std::move(e.extra_fields);
      stored.changed = false;
      return t;
    }
    auto bytes = dtype_storage_bytes(e.dtype, count);
    if (!bytes) fail(file_.path().string(), ": ", where, " of ", count, " elements overflows its byte size");
    if (external) {
      resolve_external(e, where, *bytes);
    } else if (!varint_data.empty() || !unpacked.empty()) {
      decode_into_owned(e, varint_data, unpacked, count, where);
    } else {
      e.storage = TensorStorage::Embedded;
      if (!has_data && count > 0 && *bytes > 0)
        fail(file_.path().string(), ": ", where, " has dims with ", count, " elements but no data");
      if (has_data && e.size != *bytes)
        fail(file_.path().string(), ": ", where, " holds ", e.size, " data bytes but its dims and type need ", *bytes);
    }
    return model_.tensors.add(std::move(e), dims);
  }

  // Each typed data field holds the element types TensorProto documents for it; anything else
  // was read with the wrong width (a complex128 tensor in int64_data made the decoder copy 16
  // bytes out of each 8-byte value).
  void check_data_fields(DType t, uint32_t fields, bool mixed_packing, const std::string& where) const {
    static constexpr const char* kName[] = {"",
                                            "",
                                            "",
                                            "",
                                            "float_data",
                                            "int32_data",
                                            "string_data",
                                            "int64_data",
                                            "",
                                            "raw_data",
                                            "double_data",
                                            "uint64_data"};
    if (fields & (fields - 1) || mixed_packing)
      fail(file_.path().string(), ": ", where, " holds its data in more than one field; a tensor has one data field");
    if (!fields) return;
    int f = std::countr_zero(fields);
    bool ok = false;
    switch (f) {
      case 4: ok = t == DType::Float || t == DType::Complex64; break;
      case 5:
        ok = dtype_bits(t) > 4 && dtype_bits(t) <= 32 && t != DType::Float && t != DType::Uint32 && t != DType::String;
        break;
      case 6: ok = t == DType::String; break;
      case 7: ok = t == DType::Int64; break;
      case 9: ok = t != DType::String && dtype_bits(t) > 0; break;
      case 10: ok = t == DType::Double || t == DType::Complex128; break;
      case 11: ok = t == DType::Uint32 || t == DType::Uint64; break;
      default: break;
    }
    if (!ok)
      fail(file_.path().string(), ": ", where, " of type ", dtype_name(t), " stores its data in ", kName[f],
           ", which cannot hold that type");
  }

  uint64_t checked_count(const std::vector<int64_t>& dims, const std::string& where) const {
    uint64_t count = 1;
    for (int64_t d : dims) {
      if (d < 0) fail(file_.path().string(), ": ", where, " has negative dimension ", d);
      if (d != 0 && count > UINT64_MAX / static_cast<uint64_t>(d))
        fail(file_.path().string(), ": ", where, " has dimensions whose product overflows");
      count *= static_cast<uint64_t>(d);
    }
    return count;
  }

  // Typed varint fields (int32_data for small types, int64_data, uint64_data) decoded to the
  // natural little-endian layout. These are small in practice; weights use raw_data.
  void decode_into_owned(TensorStore::Entry& e, const std::vector<uint64_t>& v, const std::vector<std::byte>& unpacked,
                         uint64_t count, const std::string& where) {
    const uint64_t element_bytes = static_cast<uint64_t>(dtype_bits(e.dtype) / 8);
    if (!unpacked.empty() && unpacked.size() % element_bytes)
      fail(file_.path().string(), ": ", where, " holds ", unpacked.size(), " data bytes, not a whole number of ",
           dtype_name(e.dtype), " elements");
    uint64_t elements = unpacked.empty() ? v.size() : unpacked.size() / element_bytes;
    if (elements != count)
      fail(file_.path().string(), ": ", where, " has ", elements, " data elements but its dims need ", count);
    auto bytes = *dtype_storage_bytes(e.dtype, count);
    auto buf = model_.tensors.allocate(bytes);
    if (!unpacked.empty()) {
      std::memcpy(buf.data(), unpacked.data(), bytes);
    } else {
      int width = dtype_bits(e.dtype);
      if (width == 4)
        fail(file_.path().string(), ": ", where, ": 4-bit types in int32_data are not supported; use raw_data");
      for (uint64_t i = 0; i < count; ++i) {
        uint64_t x = v[i];
        std::memcpy(buf.data() + i * (width / 8), &x, static_cast<size_t>(width / 8));  // little-endian truncation
      }
    }
    e.data = buf.data();
    e.size = bytes;
    e.storage = TensorStorage::Owned;
  }

  void resolve_external(TensorStore::Entry& e, const std::string& where, uint64_t need) {
    std::string location;
    uint64_t offset = 0, length = 0;
    bool has_length = false;
    for (auto& [k, val] : e.external_info) {
      if (k == "location")
        location = val;
      else if (k == "offset")
        offset = parse_u64(val, where, "offset");
      else if (k == "length") {
        length = parse_u64(val, where, "length");
        has_length = true;
      }
    }
    if (location.empty()) fail(file_.path().string(), ": ", where, " is external but has no location");
    std::filesystem::path rel(location);
    if (rel.is_absolute())
      fail(file_.path().string(), ": ", where, " external data location '", location,
           "' is absolute; only paths relative to the model's folder are allowed");
    if (path_escapes(rel))
      fail(file_.path().string(), ": ", where, " external data location '", location, "' escapes the model's folder");
    const MappedFile& f = external_file(rel, where);
    if (!has_length) length = offset <= f.size() ? f.size() - offset : 0;
    if (offset > f.size() || length > f.size() - offset)
      fail(file_.path().string(), ": ", where, " external data [", offset, ", ", offset + length,
           ") is past the end of '", f.path().string(), "' (", f.size(), " bytes)");
    if (length != need)
      fail(file_.path().string(), ": ", where, " external data is ", length, " bytes but its dims and type need ",
           need);
    e.data = f.data() + offset;
    e.size = length;
    e.storage = TensorStorage::External;
    e.source.file = &f;
    e.source.file_offset = offset;
    e.source.data_field = 9;
  }

  uint64_t parse_u64(const std::string& s, const std::string& where, const char* what) const {
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size())
      fail(file_.path().string(), ": ", where, " external data ", what, " '", s, "' is not a non-negative integer");
    return v;
  }

  const MappedFile& external_file(const std::filesystem::path& rel, const std::string& where) {
    std::string key = rel.lexically_normal().string();
    if (auto it = externals_.find(key); it != externals_.end()) return *it->second;
    std::filesystem::path full = dir_ / rel;
    std::error_code ec;
    if (!std::filesystem::exists(full, ec))
      fail(file_.path().string(), ": ", where, " external data file '", full.string(), "' does not exist");
    // Symlinks may not lead out of the model's folder either.
    auto real = std::filesystem::canonical(full, ec);
    auto root = std::filesystem::canonical(dir_.empty() ? "." : dir_, ec);
    auto [r, _] = std::mismatch(root.begin(), root.end(), real.begin(), real.end());
    if (r != root.end())
      fail(file_.path().string(), ": ", where, " external data file '", full.string(), "' resolves to '", real.string(),
           "', outside the model's folder");
    auto mapped = MappedFile::open(full);
    const MappedFile* raw = mapped.get();
    model_.files.push_back(std::move(mapped));
    externals_[key] = raw;
    return *raw;
  }

  // ------------------------------------------------------------------ functions

  void read_function(Cursor& outer) {
    auto [at, len] = outer.span();
    Cursor c(file_, at, at + len);
    Function fn;
    fn.body = model_.add_graph(GraphId{}, NodeId{});
    pending_.resize(model_.graph_count());
    Graph& g = model_.graph(fn.body);
    g.is_function_ = true;
    Pending& p = pending_[fn.body.index()];
    while (c.next()) {
      switch (c.field()) {
        case 1:
          fn.name = c.sym();
          g.name_ = fn.name;
          break;
        case 4: {
          ValueId v = value_for(g, c.sym());
          g.inputs_.push_back(v);
          g.flags_[v.index()] |= Graph::kInput;
          break;
        }
        case 5: {
          Declaration d;
          d.name = c.sym();
          p.outputs.push_back(d);
          break;
        }
        case 6: fn.attributes.push_back(c.sym()); break;
        case 7: read_node(g, c, 0); break;
        case 10: fn.domain = c.sym(); break;
        case 13: fn.overload = c.sym(); break;
        default: fn.fields.push_back(c.verbatim()); break;  // doc, opset_import, attribute_proto, value_info, metadata
      }
    }
    model_.functions.push_back(std::move(fn));
  }

  // A model-local function that calls itself, directly or through others, has no finite
  // expansion: shape inference and the passes that follow function bodies recursed until the
  // stack overflowed (SIGSEGV, and a dead Python interpreter). Refused at load, naming the cycle.
  void check_function_recursion() const {
    const auto& fns = model_.functions;
    if (fns.empty()) return;
    auto key = [](Sym domain, Sym name) { return std::string(str(domain)) + "::" + std::string(str(name)); };
    std::map<std::string, size_t> by_key;
    for (size_t i = 0; i < fns.size(); ++i) by_key.emplace(key(fns[i].domain, fns[i].name), i);
    // The function each graph belongs to (subgraphs are created after their parent).
    std::vector<int> owner(model_.graph_count(), -1);
    for (size_t i = 0; i < fns.size(); ++i) owner[fns[i].body.index()] = static_cast<int>(i);
    std::vector<std::vector<size_t>> calls(fns.size());
    for (size_t gi = 0; gi < model_.graph_count(); ++gi) {
      const Graph& g = model_.graph(GraphId(static_cast<uint32_t>(gi)));
      if (owner[gi] < 0 && g.parent().valid() && g.parent().index() < gi) owner[gi] = owner[g.parent().index()];
      if (owner[gi] < 0) continue;
      for (NodeId n : g.nodes()) {
        auto it = by_key.find(key(g.domain(n), g.op_type(n)));
        if (it != by_key.end()) calls[static_cast<size_t>(owner[gi])].push_back(it->second);
      }
    }
    std::vector<uint8_t> state(fns.size(), 0);  // 0 new, 1 on the path, 2 done
    // Iterative depth-first search: a chain of thousands of functions must not overflow either.
    std::vector<std::pair<size_t, size_t>> stack;  // (function, next call to follow)
    for (size_t root = 0; root < fns.size(); ++root) {
      if (state[root]) continue;
      stack.push_back({root, 0});
      state[root] = 1;
      while (!stack.empty()) {
        auto& [f, next] = stack.back();
        if (next == calls[f].size()) {
          state[f] = 2;
          stack.pop_back();
          continue;
        }
        size_t callee = calls[f][next++];
        if (state[callee] == 1) {
          std::string cycle;
          bool on = false;
          for (const auto& [fn, unused] : stack) {
            on |= fn == callee;
            if (on) cycle += key(fns[fn].domain, fns[fn].name) + " -> ";
          }
          cycle += key(fns[callee].domain, fns[callee].name);
          fail(file_.path().string(), ": function ", key(fns[callee].domain, fns[callee].name), " is recursive (",
               cycle, "); ONNX functions cannot call themselves, directly or through others");
        }
        if (state[callee] == 0) {
          state[callee] = 1;
          stack.push_back({callee, 0});
        }
      }
    }
  }

  // ------------------------------------------------------------------ name resolution

  // Finds `name` visible from graph `g`, creating capture values in subgraphs as needed.
  ValueId resolve(Graph& g, Sym name) {
    auto it = g.by_name_.find(name);
    if (it != g.by_name_.end() && defines(g, it->second)) return it->second;
    if (!g.parent_.valid()) return ValueId{};
    ValueId up = resolve(model_.graph(g.parent_), name);
    if (!up.valid()) return ValueId{};
    ValueId v = it != g.by_name_.end() ? it->second : g.add_value(name);
    g.outer_[v.index()] = up;
    g.captures_.push_back(v);
    return v;
  }

  static bool defines(const Graph& g, ValueId v) {
    return g.producer_[v.index()].valid() || (g.flags_[v.index()] & Graph::kInput) ||
           g.init_tensor_[v.index()].valid() || (g.flags_[v.index()] & Graph::kSparse) || g.outer_[v.index()].valid();
  }

  void resolve_names(Graph& g) {
    Pending& p = pending_[g.id().index()];
    for (size_t i = 0; i < p.node_inputs.size(); ++i) {
      Sym name = p.node_inputs[i];
      if (name.empty()) continue;
      ValueId v = resolve(g, name);
      if (!v.valid()) {
        NodeId n = node_of_input(g, i);
        fail(file_.path().string(), ": node ", n.index(), describe_node(g, n), " reads '", str(name),
             "', which no node, graph input or initializer defines");
      }
      g.node_inputs_[i] = v;
    }
    std::vector<ValueId> outs;
    for (const Declaration& d : p.outputs) {
      ValueId v = resolve(g, d.name);
      if (!v.valid())
        fail(file_.path().string(), ": graph output '", str(d.name),
             "' is not defined by any node, input or initializer");
      check_interface_type(g, d, "output");
      apply(g, v, d);
      outs.push_back(v);
    }
    g.set_graph_outputs(std::move(outs));
    for (const Declaration& d : p.value_info) {
      ValueId v = resolve(g, d.name);
      if (!v.valid()) v = value_for(g, d.name);  // declares a value nothing defines: keep it
      apply(g, v, d);
      g.add_value_info(v);
    }
  }

  NodeId node_of_input(const Graph& g, size_t flat_index) const {
    for (uint32_t n = 0; n < g.node_capacity(); ++n)
      if (flat_index >= g.in_begin_[n] && flat_index < g.in_begin_[n] + g.in_count_[n]) return NodeId(n);
    return NodeId(0);
  }

  void validate(const Graph& g) { topological_order(g); }

 private:
  Model& model_;
  const MappedFile& file_;
  LoadOptions options_;
  std::filesystem::path dir_;
  std::deque<Pending> pending_ = std::deque<Pending>(1);  // deque: growing keeps references valid
  std::unordered_map<std::string, const MappedFile*> externals_;
};

std::unique_ptr<Model> load_model(const std::filesystem::path& path, const LoadOptions& options) {
  try {
    auto file = MappedFile::open(path);
    auto model = std::make_unique<Model>();
    model->path = path;
    Reader reader(*model, std::move(file), options);
    reader.read_model();
    return model;
  } catch (const Error& e) {
    throw e.about(path.string());  // errors name the model file for --json (an external file keeps its own)
  }
}

}  // namespace onnxforge
