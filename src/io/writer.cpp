// Streams a Model out as ONNX protobuf. Small fields are encoded into buffers; large tensor
// payloads are "holes" filled at write time straight from their source mapping
// (copy_file_range where possible), so unchanged weights are never copied through user space.
#include <algorithm>
#include <cstring>
#include <future>

#include "io/mapped_file.h"
#include "io/model_io.h"
#include "io/safe_file.h"
#include "ir/anonymous_memory.h"
#include "ir/error.h"
#include "ir/topo.h"

namespace onnxforge {
namespace {

// Deferred tensors (folded weight transposes) in the order the writer emits them: each is
// computed into one of two scratch buffers while the previous one is being written, so the
// transposes overlap the file writes and memory stays at two tensors.
class ComputeAhead {
 public:
  ComputeAhead(const TensorStore& ts, std::vector<TensorId> order) : ts_(ts), order_(std::move(order)) {
    size_t largest = 0;
    for (TensorId t : order_) largest = std::max<size_t>(largest, ts_.byte_size(t));
    for (auto& b : buffers_)
      b = std::make_unique<AnonymousMemory>(order_.empty() ? 0 : largest, "write a computed tensor");
    start(0);
  }
  ~ComputeAhead() {
    if (pending_.valid()) pending_.wait();
  }
  // The bytes of the next tensor in order (`t` must be it); valid until the following call.
  std::span<const std::byte> next(TensorId t) {
    if (next_ >= order_.size() || order_[next_] != t) fail("internal: computed tensors written out of order");
    pending_.get();  // rethrows a compute failure
    std::byte* done = buffers_[next_ % 2]->data();
    start(++next_);
    return {done, ts_.byte_size(t)};
  }

 private:
  void start(size_t i) {
    if (i >= order_.size()) return;
    TensorId t = order_[i];
    std::byte* dst = buffers_[i % 2]->data();
    pending_ = std::async(std::launch::async, [this, t, dst] { ts_.compute_into(t, {dst, ts_.byte_size(t)}); });
  }
  const TensorStore& ts_;
  std::vector<TensorId> order_;
  size_t next_ = 0;
  std::unique_ptr<AnonymousMemory> buffers_[2];  // TinyLlama streams 4 GB through these two
  std::future<void> pending_;
};

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLen = 2, kFixed32 = 5 };

// An encoded message: bytes plus holes (large payloads inserted at write time).
class Encoder {
 public:
  struct Hole {
    uint64_t at;  // position in buf_ before which the payload goes
    const std::byte* data;
    uint64_t size;
    const MappedFile* file;              // when set, data lives in this mapping (copy_file_range-able)
    const TensorStore* store = nullptr;  // when set, the payload is deferred tensor `tensor`
    TensorId tensor;
  };

  uint64_t size() const { return buf_.size() + hole_bytes_; }

  void varint(uint64_t v) {
    char tmp[10];
    size_t n = 0;
    while (v >= 0x80) {
      tmp[n++] = static_cast<char>(v | 0x80);
      v >>= 7;
    }
    tmp[n++] = static_cast<char>(v);
    append(tmp, n);
  }
  void tag(uint32_t field, WireType w) { varint((uint64_t{field} << 3) | w); }
  void int_field(uint32_t field, int64_t v) {
    tag(field, kVarint);
    varint(static_cast<uint64_t>(v));
  }
  void float_field(uint32_t field, float f) {
    tag(field, kFixed32);
    char b[4];
    std::memcpy(b, &f, 4);
    append(b, 4);
  }
  void bytes_field(uint32_t field, std::string_view s) {
    tag(field, kLen);
    varint(s.size());
    append(s.data(), s.size());
  }
  void sym_field(uint32_t field, Sym s) { bytes_field(field, str(s)); }
  void sym_if(uint32_t field, Sym s) {
    if (!s.empty()) sym_field(field, s);
  }
  // Verbatim field bytes (tag included); big ones become holes.
  void raw(std::string_view field_bytes, const MappedFile* file) {
    if (field_bytes.size() >= kHoleMin)
      hole(reinterpret_cast<const std::byte*>(field_bytes.data()), field_bytes.size(), file);
    else
      append(field_bytes.data(), field_bytes.size());
  }
  void raw_all(std::span<const std::string_view> fields, const MappedFile* file) {
    for (std::string_view f : fields) raw(f, file);
  }
  // A length-delimited field whose payload is a hole.
  void payload(uint32_t field, const std::byte* data, uint64_t size, const MappedFile* file) {
    tag(field, kLen);
    varint(size);
    if (size >= kHoleMin)
      hole(data, size, file);
    else
      append(reinterpret_cast<const char*>(data), size);
  }
  // A length-delimited field whose payload is a deferred tensor, computed at write time.
  void computed_payload(uint32_t field, const TensorStore& ts, TensorId t) {
    tag(field, kLen);
    varint(ts.byte_size(t));
    holes_.push_back({buf_.size(), nullptr, ts.byte_size(t), nullptr, &ts, t});
    hole_bytes_ += ts.byte_size(t);
  }
  void message(uint32_t field, const Encoder& child) {
    tag(field, kLen);
    varint(child.size());
    for (const Hole& h : child.holes_) {
      holes_.push_back(h);
      holes_.back().at += buf_.size();
    }
    hole_bytes_ += child.hole_bytes_;
    append(child.buf_.data(), child.buf_.size());
  }

  // Deferred tensors among the holes, in write order.
  std::vector<TensorId> computed_tensors() const {
    std::vector<TensorId> out;
    for (const Hole& h : holes_)
      if (h.store) out.push_back(h.tensor);
    return out;
  }

  // Writes everything to fd, in order.
  void write(int fd, const std::filesystem::path& what, const TensorStore& ts) const {
    ComputeAhead computed(ts, computed_tensors());
    uint64_t pos = 0;
    for (const Hole& h : holes_) {
      write_all(fd, buf_.data() + pos, h.at - pos, what);
      pos = h.at;
      if (h.store) {
        auto b = computed.next(h.tensor);
        write_all(fd, b.data(), b.size(), what);
      } else if (h.file)
        copy_to_fd(*h.file, h.file->offset_of(h.data), h.size, fd, what);
      else
        write_all(fd, h.data, h.size, what);
    }
    write_all(fd, buf_.data() + pos, buf_.size() - pos, what);
  }

 private:
  static constexpr uint64_t kHoleMin = 64 * 1024;
  // Appends through a vector-like resize + memcpy: GCC 12 reports a false -Wrestrict on
  // std::string::append in this pattern.
  void append(const char* p, size_t n) {
    if (n == 0) return;
    size_t old = buf_.size();
    buf_.resize(old + n);
    std::memcpy(buf_.data() + old, p, n);
  }
  void hole(const std::byte* data, uint64_t size, const MappedFile* file) {
    const MappedFile* f = file && file->contains(data) && file->contains(data + size) ? file : nullptr;
    holes_.push_back({buf_.size(), data, size, f, nullptr, TensorId{}});
    hole_bytes_ += size;
  }
  std::string buf_;
  std::vector<Hole> holes_;
  uint64_t hole_bytes_ = 0;
};

class Writer {
 public:
  Writer(const Model& m, const std::filesystem::path& out, const SaveOptions& o) : model_(m), out_(out), options_(o) {}

  SaveStats save() {
    check_external_file_name();
    WriteRules rules;
    rules.overwrite = options_.overwrite;
    rules.inputs = options_.inputs;
    for (const auto& f : model_.files)  // never onto one of the model's own files
      if (f) rules.inputs.push_back(FileIdentity{f->device(), f->inode()});
    external_ = decide_external();
    const std::filesystem::path data_path = external_data_path(out_, options_);
    if (external_) {
      const std::filesystem::path set[] = {out_, data_path};
      const std::string what[] = {"output", "external-data file"};
      check_outputs(set, what, rules);
    } else {
      check_output(out_, rules);
    }
    remove_stale_temporaries(out_.parent_path());
    if (external_) {
      data_name_ = options_.external_file.empty() ? data_path.filename().string() : options_.external_file;
      data_file_ = std::make_unique<AtomicFile>(data_path, rules);
    }
    Encoder enc = encode_model();
    if (!external_ && enc.size() > kProtobufLimit)
      fail("cannot write '", out_.string(), "' with embedded weights: ", enc.size(),
           " bytes exceeds protobuf's 2 GiB limit; use external data (--external-data)");
    if (data_file_) write_external_data();
    AtomicFile model_file(out_, rules);
    enc.write(model_file.fd(), out_, model_.tensors);
    stats_.model_bytes = enc.size();
    if (data_file_) data_file_->commit();
    model_file.commit();
    return stats_;
  }

 private:
  // The external-data file lives in the output folder: a name that leads elsewhere wrote a
  // model that onnxforge's own reader (and ONNX Runtime's) then refused.
  void check_external_file_name() const {
    const std::string& name = options_.external_file;
    if (name.empty()) return;
    std::filesystem::path rel(name);
    bool escapes = rel.is_absolute() || rel.filename().empty() || rel.filename() == "." || rel.filename() == "..";
    int depth = 0;
    for (const auto& part : rel) {
      if (part == "..")
        escapes |= --depth < 0;
      else if (part != "." && !part.empty())
        ++depth;
    }
    if (escapes)
      throw Error("external data file '" + name +
                      "' must be a file name relative to the output's folder (no absolute "
                      "path, no '..' leading out of it)",
                  Error::Kind::Usage);
    if ((out_.parent_path() / rel).lexically_normal() == out_.lexically_normal())
      throw Error("external data file '" + name + "' is the output model itself; choose another name",
                  Error::Kind::Usage);
  }

  bool decide_external() const {
    switch (options_.placement) {
      case WeightPlacement::External: return true;
      case WeightPlacement::Embed: return false;
      case WeightPlacement::Auto: break;
    }
    // Headroom for everything that is not tensor data.
    return model_.tensors.total_bytes() + (64u << 20) > kProtobufLimit;
  }

  // ------------------------------------------------------------------ model

  Encoder encode_model() {
    Encoder m;
    m.int_field(1, model_.ir_version);
    m.sym_if(2, model_.producer_name);
    m.sym_if(3, model_.producer_version);
    m.sym_if(4, model_.domain);
    if (model_.model_version) m.int_field(5, model_.model_version);
    m.message(7, encode_graph(model_.main()));
    for (const OpsetImport& o : model_.opsets) {
      Encoder e;
      if (o.domain_present || !o.domain.empty()) e.sym_field(1, o.domain);
      e.int_field(2, o.version);
      m.message(8, e);
    }
    for (const auto& [k, v] : model_.metadata_props) m.message(14, string_pair(k, v));
    for (const Function& f : model_.functions) m.message(25, encode_function(f));
    m.raw_all(model_.extra_fields, source());
    return m;
  }

  const MappedFile* source() const { return model_.files.empty() ? nullptr : model_.files[0].get(); }

  static Encoder string_pair(std::string_view k, std::string_view v) {
    Encoder e;
    e.bytes_field(1, k);
    e.bytes_field(2, v);
    return e;
  }

  // Nodes in the graph's table order when asked to keep it (a faithful copy of a loaded model
  // keeps the file's order even when it is not topologically sorted), else sorted.
  std::vector<NodeId> node_order(const Graph& g) const {
    return options_.keep_node_order ? g.nodes() : topological_order(g);
  }

  Encoder encode_graph(const Graph& g) {
    Encoder e;
    for (NodeId n : node_order(g)) e.message(1, encode_node(g, n));
    e.sym_if(2, g.name());
    for (ValueId v : g.initializers())
      e.message(5, encode_tensor(model_.tensors, g.initializer(v), g.value_name(v), true));
    for (ValueId v : g.graph_inputs()) e.message(11, encode_value_info(g, v));
    // IR < 4: every initializer must also be a graph input (the ONNX checker rejects the model
    // otherwise); initializers a pass added (folded constants) are declared from their tensor.
    // (The main graph only: a subgraph's inputs are its node's loop variables and arguments.)
    if (model_.ir_version < 4 && &g == &model_.main())
      for (ValueId v : g.initializers())
        if (!g.is_graph_input(v)) e.message(11, encode_initializer_input(g, v));
    for (ValueId v : g.graph_outputs()) e.message(12, encode_value_info(g, v));
    for (ValueId v : g.value_infos()) e.message(13, encode_value_info(g, v));
    for (const auto& [v, bytes] : g.sparse_initializers()) e.raw(bytes, source());
    e.raw_all(g.graph_extra(), source());
    return e;
  }

  Encoder encode_node(const Graph& g, NodeId n) {
    Encoder e;
    for (ValueId v : g.inputs(n)) e.bytes_field(1, v.valid() ? str(g.value_name(v)) : std::string_view());
    for (ValueId v : g.outputs(n)) e.bytes_field(2, v.valid() ? str(g.value_name(v)) : std::string_view());
    if (g.name_present(n) || !g.node_name(n).empty()) e.sym_field(3, g.node_name(n));
    e.sym_field(4, g.op_type(n));
    for (const Attr& a : g.attrs(n)) e.message(5, encode_attr(g, a));
    if (g.domain_present(n) || !g.domain(n).empty()) e.sym_field(7, g.domain(n));
    e.sym_if(8, g.overload(n));
    for (const MetadataEntry& m : g.metadata(n)) e.message(9, string_pair(str(m.key), str(m.value)));
    e.raw_all(g.node_extra(n), source());
    return e;
  }

  Encoder encode_attr(const Graph& g, const Attr& a) {
    Encoder e;
    e.sym_field(1, a.name);
    switch (a.type) {
      case AttrType::Float: e.float_field(2, a.f); break;
      case AttrType::Int: e.int_field(3, a.i); break;
      case AttrType::String: e.sym_field(4, a.s); break;
      case AttrType::Tensor:
        e.message(5, encode_tensor(model_.tensors, a.tensor, model_.tensors.name(a.tensor), false));
        break;
      case AttrType::Graph: e.message(6, encode_graph(model_.graph(a.graph))); break;
      case AttrType::Floats:
        for (float f : g.floats(a)) e.float_field(7, f);
        break;
      case AttrType::Ints: {
        for (int64_t i : g.ints(a)) e.int_field(8, i);
        break;
      }
      case AttrType::Strings:
        for (Sym s : g.strings(a)) e.sym_field(9, s);
        break;
      case AttrType::Tensors:
        for (TensorId t : g.tensors(a)) e.message(10, encode_tensor(model_.tensors, t, model_.tensors.name(t), false));
        break;
      case AttrType::Graphs:
        for (GraphId sg : g.graphs(a)) e.message(11, encode_graph(model_.graph(sg)));
        break;
      default: break;
    }
    e.raw_all(g.attr_extra(a), source());
    e.int_field(20, static_cast<int64_t>(a.type));
    e.sym_if(21, a.ref_attr_name);
    return e;
  }

  Encoder encode_value_info(const Graph& g, ValueId v) {
    Encoder e;
    e.sym_field(1, g.value_name(v));
    if (!g.type_raw(v).empty()) {
      e.bytes_field(2, g.type_raw(v));
    } else if (g.has_type(v)) {
      Encoder tensor_type;
      tensor_type.int_field(1, static_cast<int64_t>(g.dtype(v)));
      if (g.has_shape(v)) {
        Encoder shape;
        for (const Dim& d : g.shape(v)) {
          Encoder dim;
          if (d.known())
            dim.int_field(1, d.value);
          else if (!d.param.empty())
            dim.sym_field(2, d.param);
          shape.message(1, dim);
        }
        tensor_type.message(2, shape);
      }
      Encoder type;
      type.message(1, tensor_type);
      e.message(2, type);
    }
    e.raw_all(g.value_extra(v), source());
    return e;
  }

  Encoder encode_initializer_input(const Graph& g, ValueId v) {
    const TensorStore& ts = model_.tensors;
    TensorId t = g.initializer(v);
    Encoder shape;
    for (int64_t d : ts.dims(t)) {
      Encoder dim;
      dim.int_field(1, d);
      shape.message(1, dim);
    }
    Encoder tensor_type;
    tensor_type.int_field(1, static_cast<int64_t>(ts.dtype(t)));
    tensor_type.message(2, shape);
    Encoder type;
    type.message(1, tensor_type);
    Encoder e;
    e.sym_field(1, g.value_name(v));
    e.message(2, type);
    return e;
  }

  Encoder encode_function(const Function& f) {
    const Graph& body = model_.graph(f.body);
    Encoder e;
    e.sym_field(1, f.name);
    for (ValueId v : body.graph_inputs()) e.sym_field(4, body.value_name(v));
    for (ValueId v : body.graph_outputs()) e.sym_field(5, body.value_name(v));
    for (Sym a : f.attributes) e.sym_field(6, a);
    for (NodeId n : node_order(body)) e.message(7, encode_node(body, n));
    e.sym_if(10, f.domain);
    e.sym_if(13, f.overload);
    e.raw_all(f.fields, source());
    return e;
  }

  // ------------------------------------------------------------------ tensors

  Encoder encode_tensor(const TensorStore& ts, TensorId t, Sym name, bool initializer) {
    const TensorStore::Entry& te = ts.entry(t);
    bool to_external =
        external_ && initializer && te.storage != TensorStorage::Strings && te.size >= options_.external_min_bytes;
    bool verbatim = !te.changed && !to_external && te.storage != TensorStorage::External && !te.source.proto.empty() &&
                    te.name == name;
    Encoder e;
    if (verbatim) {
      // The original message, byte for byte: raw_data or typed fields as they were.
      e.raw(te.source.proto, te.source.file);
      ++stats_.tensors_verbatim;
      return e;
    }
    ++stats_.tensors_reencoded;
    for (int64_t d : ts.dims(t)) e.int_field(1, d);
    e.int_field(2, static_cast<int64_t>(te.dtype));
    e.sym_if(8, name);
    if (te.storage == TensorStorage::Strings) {
      for (const std::string& s : ts.strings(t)) e.bytes_field(6, s);
    } else if (to_external) {
      uint64_t offset = append_external(ts, t);
      e.message(13, string_pair("location", data_name_));
      e.message(13, string_pair("offset", std::to_string(offset)));
      e.message(13, string_pair("length", std::to_string(te.size)));
      e.int_field(14, 1);
      ++stats_.tensors_external;
    } else if (ts.is_deferred(t)) {
      e.computed_payload(9, ts, t);
    } else {
      const MappedFile* f = te.storage == TensorStorage::Owned || te.deferred ? nullptr : te.source.file;
      e.payload(9, ts.bytes(t).data(), te.size, f);
    }
    e.raw_all(te.extra_fields, source());
    return e;
  }

  // Lays a tensor out in the external data file (written after encoding, in this order).
  uint64_t append_external(const TensorStore& ts, TensorId t) {
    // Page-align large tensors so readers can map them directly; 64 bytes for the rest.
    uint64_t size = ts.byte_size(t);
    uint64_t align = size >= (64u << 10) ? 4096 : 64;
    uint64_t offset = (external_end_ + align - 1) / align * align;
    external_layout_.push_back({offset, t});
    external_end_ = offset + size;
    stats_.external_bytes = external_end_;
    stats_.used_external = true;
    return offset;
  }

  void write_external_data() {
    const TensorStore& ts = model_.tensors;
    std::vector<TensorId> computed_order;
    for (const auto& [offset, t] : external_layout_)
      if (ts.is_deferred(t)) computed_order.push_back(t);
    ComputeAhead computed(ts, std::move(computed_order));
    int fd = data_file_->fd();
    uint64_t pos = 0;
    for (const auto& [offset, t] : external_layout_) {
      static const char zeros[4096] = {};
      if (offset > pos) write_all(fd, zeros, offset - pos, data_file_->target());
      const TensorStore::Entry& te = ts.entry(t);
      const MappedFile* f = te.storage == TensorStorage::Owned || te.deferred ? nullptr : te.source.file;
      if (ts.is_deferred(t)) {
        auto b = computed.next(t);
        write_all(fd, b.data(), b.size(), data_file_->target());
      } else if (f && f->contains(te.data)) {
        copy_to_fd(*f, f->offset_of(te.data), te.size, fd, data_file_->target());
      } else {
        write_all(fd, ts.bytes(t).data(), te.size, data_file_->target());
      }
      pos = offset + te.size;
    }
  }

  const Model& model_;
  std::filesystem::path out_;
  SaveOptions options_;
  bool external_ = false;
  std::string data_name_;
  std::unique_ptr<AtomicFile> data_file_;
  std::vector<std::pair<uint64_t, TensorId>> external_layout_;  // (offset, tensor) in the data file
  uint64_t external_end_ = 0;
  SaveStats stats_;
};

}  // namespace

SaveStats save_model(const Model& model, const std::filesystem::path& path, const SaveOptions& options) {
  try {
    std::filesystem::path out = path;
    if (out.parent_path().empty()) out = std::filesystem::path(".") / out;
    Writer w(model, out, options);
    return w.save();
  } catch (const Error& e) { throw e.about(path.string()); }
}

bool nodes_topologically_sorted(const Model& model) {
  for (size_t i = 0; i < model.graph_count(); ++i) {
    const Graph& g = model.graph(GraphId(static_cast<uint32_t>(i)));
    if (g.detached()) continue;
    std::vector<uint8_t> done(g.node_capacity(), 0);
    for (NodeId n : g.nodes()) {
      auto ready = [&](ValueId v) {
        if (!v.valid()) return true;
        NodeId p = g.producer(v);
        return !p.valid() || !g.alive(p) || done[p.index()];
      };
      for (ValueId v : g.inputs(n))
        if (!ready(v)) return false;
      for (ValueId v : g.implicit_inputs(n))
        if (!ready(v)) return false;
      done[n.index()] = 1;
    }
  }
  return true;
}

std::filesystem::path external_data_path(const std::filesystem::path& path, const SaveOptions& options) {
  return path.parent_path() /
         (options.external_file.empty() ? path.filename().string() + ".data" : options.external_file);
}

}  // namespace onnxforge
