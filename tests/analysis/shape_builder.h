#pragma once
// Hand-built ONNX graphs for the shape-inference tests: a thin layer over onnx's protobuf
// classes, written to a temporary file and loaded with the engine's reader.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "analysis/dim_relations.h"
#include "analysis/shapes.h"
#include "io/model_io.h"
#include "tests/common/models.h"
#include "tests/common/proto_builder.h"

namespace onnxforge::test {

// Element types of the built protos, short because every input() names one.
constexpr int F = onnx::TensorProto::FLOAT;
constexpr int F16 = onnx::TensorProto::FLOAT16;
constexpr int I64 = onnx::TensorProto::INT64;
constexpr int B = onnx::TensorProto::BOOL;

// Dims as text: "batch,seq,768" (a number is a dim_value, "?" unknown, else a dim_param);
// "" is a scalar.
inline void set_dims(onnx::TypeProto_Tensor* t, const std::string& dims) {
  auto* shape = t->mutable_shape();
  size_t b = 0;
  while (b < dims.size()) {
    size_t e = dims.find(',', b);
    if (e == std::string::npos) e = dims.size();
    std::string d = dims.substr(b, e - b);
    auto* dim = shape->add_dim();
    if (d == "?") {
    } else if (!d.empty() && (std::isdigit(static_cast<unsigned char>(d[0])) || d[0] == '-')) {
      dim->set_dim_value(std::stoll(d));
    } else {
      dim->set_dim_param(d);
    }
    b = e + 1;
  }
}

class GraphProtoBuilder {
 public:
  explicit GraphProtoBuilder(onnx::GraphProto* g) : g_(g) {}

  GraphProtoBuilder& input(const std::string& name, int elem, const std::string& dims) {
    add_typed(g_->add_input(), name, elem, dims);
    return *this;
  }
  GraphProtoBuilder& untyped_input(const std::string& name) {
    g_->add_input()->set_name(name);
    return *this;
  }
  GraphProtoBuilder& output(const std::string& name) {
    g_->add_output()->set_name(name);
    return *this;
  }
  GraphProtoBuilder& output(const std::string& name, int elem, const std::string& dims) {
    add_typed(g_->add_output(), name, elem, dims);
    return *this;
  }
  GraphProtoBuilder& value_info(const std::string& name, int elem, const std::string& dims) {
    add_typed(g_->add_value_info(), name, elem, dims);
    return *this;
  }
  GraphProtoBuilder& ints(const std::string& name, std::vector<int64_t> values, std::vector<int64_t> dims = {-1}) {
    auto* t = g_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    if (dims == std::vector<int64_t>{-1}) dims = {static_cast<int64_t>(values.size())};
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t v : values) t->add_int64_data(v);
    return *this;
  }
  GraphProtoBuilder& floats(const std::string& name, std::vector<int64_t> dims) {
    size_t n = 1;
    for (int64_t d : dims) n *= static_cast<size_t>(d);
    *g_->add_initializer() = float_tensor(name, dims, std::vector<float>(n, 0.5f));
    return *this;
  }
  onnx::NodeProto& node(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs) {
    auto* n = g_->add_node();
    n->set_op_type(op);
    n->set_name(op + "_" + std::to_string(g_->node_size()));
    for (auto& i : ins) n->add_input(i);
    for (auto& o : outs) n->add_output(o);
    return *n;
  }
  onnx::GraphProto* proto() { return g_; }

 private:
  static void add_typed(onnx::ValueInfoProto* vi, const std::string& name, int elem, const std::string& dims) {
    vi->set_name(name);
    auto* t = vi->mutable_type()->mutable_tensor_type();
    t->set_elem_type(elem);
    if (dims != "*") set_dims(t, dims);  // "*": rank unknown
  }
  onnx::GraphProto* g_;
};

inline onnx::AttributeProto& attr(onnx::NodeProto& n, const std::string& name) {
  auto* a = n.add_attribute();
  a->set_name(name);
  return *a;
}
inline void attr_i(onnx::NodeProto& n, const std::string& name, int64_t v) {
  auto& a = attr(n, name);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(v);
}
inline void attr_f(onnx::NodeProto& n, const std::string& name, float v) {
  auto& a = attr(n, name);
  a.set_type(onnx::AttributeProto::FLOAT);
  a.set_f(v);
}
inline void attr_s(onnx::NodeProto& n, const std::string& name, const std::string& v) {
  auto& a = attr(n, name);
  a.set_type(onnx::AttributeProto::STRING);
  a.set_s(v);
}
inline void attr_ints(onnx::NodeProto& n, const std::string& name, std::vector<int64_t> v) {
  auto& a = attr(n, name);
  a.set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a.add_ints(x);
}
inline onnx::GraphProto* attr_g(onnx::NodeProto& n, const std::string& name) {
  auto& a = attr(n, name);
  a.set_type(onnx::AttributeProto::GRAPH);
  a.mutable_g()->set_name(name);
  return a.mutable_g();
}

class ModelProtoBuilder : public GraphProtoBuilder {
 public:
  explicit ModelProtoBuilder(int opset = 17) : GraphProtoBuilder(nullptr) {
    m_.set_ir_version(8);
    auto* o = m_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    m_.mutable_graph()->set_name("test");
    static_cast<GraphProtoBuilder&>(*this) = GraphProtoBuilder(m_.mutable_graph());
  }
  std::unique_ptr<Model> load() {
    auto dir = temp_dir("shape");
    write_model(m_, dir / "m.onnx");
    return load_model(dir / "m.onnx");
  }
  onnx::ModelProto& proto_model() { return m_; }

 private:
  onnx::ModelProto m_;
};

// "float[batch, seq, 768]", "int64[?]" (rank unknown) or "?" (untyped) for a value by name.
inline std::string type_of(const Model& m, const std::string& name) {
  for (size_t gi = 0; gi < m.graph_count(); ++gi) {
    const Graph& g = m.graph(GraphId(static_cast<uint32_t>(gi)));
    auto v = g.find_value(name);
    if (!v || g.outer(*v).valid()) continue;
    if (!g.has_type(*v)) return "?";
    std::string s(dtype_name(g.dtype(*v)));
    if (!g.has_shape(*v)) return s + "[?]";
    std::vector<SymDim> dims;
    for (const Dim& d : g.shape(*v)) dims.push_back(SymDim::from_dim(d).value_or(SymDim::symbol("?")));
    return s + to_string(dims);
  }
  return "missing";
}

// A built model loaded and inferred: r["name"] is a value's type text, r.value("name") its
// symbolic value.
struct Inferred {
  std::unique_ptr<Model> model;
  ShapeReport report;
  std::string operator[](const std::string& name) const { return type_of(*model, name); }
  const std::vector<SymDim>* value(const std::string& name) const {
    auto v = model->main().find_value(name);
    return v ? report.value(GraphId(0), *v) : nullptr;
  }
};

// Expects each named value's type text, a table of {name, type} rows (a failure names the value).
inline void expect_types(const Inferred& r, std::initializer_list<std::pair<const char*, const char*>> want) {
  for (const auto& [name, type] : want) EXPECT_EQ(r[name], type) << name;
}

inline Inferred run(ModelProtoBuilder& b, const ShapeOptions& o = {}) {
  Inferred r;
  r.model = b.load();
  r.report = infer_shapes(*r.model, o);
  return r;
}

// The named input dims of `m` specialised as the reference runs use them (batch 2, every other
// name 7, then re-derived where the model needs them related: a decoder with past gets
// total_sequence 14 = past_sequence 7 + sequence 7, analysis/dim_relations.h), set in o.dims and
// returned in the order the inputs name them; each name once.
inline std::vector<std::pair<std::string, int64_t>> specialise_dims(const Model& m, ShapeOptions& o) {
  std::vector<std::pair<std::string, int64_t>> out;
  std::map<std::string, int64_t> start;
  for (ValueId v : m.main().graph_inputs())
    for (const Dim& d : m.main().shape(v)) {
      std::string name(str(d.param));
      if (d.param.empty() || start.count(name)) continue;
      out.emplace_back(name, name.find("batch") != std::string::npos ? 2 : 7);
      start[name] = out.back().second;
    }
  std::vector<DimRelation> rel = dim_relations(m);
  std::erase_if(rel, [&](const DimRelation& r) { return r.graph != m.main().id(); });
  const DimSolution sol = solve_dims(rel, start, {});
  for (auto& [name, value] : out) o.dims[name] = value = sol.values.at(name);
  return out;
}

// A zoo model as the reference runs see it: loaded, its named input dims specialised
// (specialise_dims) in `options`, and those dims as "name=value" items for the scripts' arguments.
struct SpecialisedModel {
  std::unique_ptr<Model> model;
  ShapeOptions options;
  std::vector<std::string> dims;
};

inline SpecialisedModel load_specialised(const std::filesystem::path& path) {
  SpecialisedModel s{load_model(path), {}, {}};
  for (const auto& [name, value] : specialise_dims(*s.model, s.options))
    s.dims.push_back(name + "=" + std::to_string(value));
  return s;
}

}  // namespace onnxforge::test
