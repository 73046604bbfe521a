#pragma once
// Building small models in memory (the graph tables directly, no protobuf) for the tests of
// passes/ and runtime/ and the passes' fuzzer. tests/analysis builds ModelProtos instead
// (shape_builder.h), because shape inference is tested through the reader.
//
//   GraphBuilder b;                                   // opset 17 in the default domain
//   ValueId x = b.input("x", {1, 4});                 // float; -1 = a symbolic dim
//   ValueId w = b.f32("w", {4, 4}, weights);          // an initializer
//   b.output(b.node("MatMul", {x, w}));               // value "MatMul_0", node "MatMul_0_node"
//   rt::Session s(b.model());  /  optimize(*b.m);
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace onnxforge::test {

class GraphBuilder {
 public:
  explicit GraphBuilder(int64_t opset = 17) : m(std::make_unique<Model>()) {
    m->opsets.push_back({Sym{}, opset, true});
    m->ir_version = 8;
    m->producer_name = intern("onnxforge-test");
  }
  std::unique_ptr<Model> m;
  Model& model() const { return *m; }
  Graph& g() const { return m->main(); }

  // A graph input. dims: -1 means a symbolic dim named syms[i] (default "s<i>").
  ValueId input(const std::string& name, std::vector<int64_t> dims, DType t = DType::Float,
                const std::vector<std::string>& syms = {}) {
    ValueId v = g().add_value(intern(name));
    std::vector<Dim> d;
    for (size_t i = 0; i < dims.size(); ++i)
      d.push_back(dims[i] >= 0 ? Dim::of(dims[i])
                               : Dim::symbol(intern(i < syms.size() ? syms[i] : "s" + std::to_string(i))));
    g().set_type(v, t, d);
    auto ins = g().graph_inputs();
    ins.push_back(v);
    g().set_graph_inputs(ins);
    return v;
  }
  // An initializer holding `data` (C++ element type T stored as dtype t).
  template <class T>
  ValueId init(const std::string& name, std::vector<int64_t> dims, const std::vector<T>& data, DType t) {
    ValueId v = g().add_value(intern(name));
    TensorId id = m->tensors.add_owned(
        intern(name), t, dims,
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(data.data()), data.size() * sizeof(T)));
    g().set_initializer(v, id);
    return v;
  }
  ValueId f32(const std::string& name, std::vector<int64_t> dims, std::vector<float> data) {
    return init(name, std::move(dims), data, DType::Float);
  }
  ValueId i64(const std::string& name, std::vector<int64_t> data, bool scalar = false) {
    std::vector<int64_t> dims;
    if (!scalar) dims.push_back(static_cast<int64_t>(data.size()));
    return init(name, dims, data, DType::Int64);
  }
  // A Constant node holding `data`.
  ValueId constant_i64(const std::string& name, std::vector<int64_t> data) {
    int64_t n = static_cast<int64_t>(data.size());
    TensorId t = m->tensors.add_owned(
        Sym{}, DType::Int64, std::span<const int64_t>(&n, 1),
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(data.data()), data.size() * 8));
    return node("Constant", {}, {NewAttr::Tensor("value", t)}, name);
  }
  // A node with `outs` outputs, named `name` (default "<op>_<counter>"; the node gets "_node"
  // appended, outputs after the first "_out<i>").
  std::vector<ValueId> node_n(const std::string& op, std::vector<ValueId> ins, std::vector<NewAttr> attrs, size_t outs,
                              const std::string& name = {}, const std::string& domain = {}) {
    std::string base = name.empty() ? op + "_" + std::to_string(counter_++) : name;
    std::vector<ValueId> o;
    for (size_t i = 0; i < outs; ++i) o.push_back(g().add_value(intern(base + (i ? "_out" + std::to_string(i) : ""))));
    g().add_node(intern(op), intern(domain), intern(base + "_node"), ins, o, attrs);
    return o;
  }
  ValueId node(const std::string& op, std::vector<ValueId> ins, std::vector<NewAttr> attrs = {},
               const std::string& name = {}) {
    return node_n(op, std::move(ins), std::move(attrs), 1, name)[0];
  }
  // An If node in the main graph reading `cond`, its output a new value named `out_name`, and its
  // two branch bodies, empty: the caller captures, adds nodes and sets the bodies' outputs.
  struct If {
    NodeId node;
    ValueId out;
    Graph& then_body;
    Graph& else_body;
  };
  If add_if(ValueId cond, const std::string& out_name) {
    Graph& main = g();
    const GraphId then_id(static_cast<uint32_t>(m->graph_count())), else_id(then_id.index() + 1);
    const ValueId out = main.add_value(intern(out_name));
    const NodeId n = main.add_node(
        intern("If"), Sym{}, intern("if"), std::vector<ValueId>{cond}, std::vector<ValueId>{out},
        std::vector<NewAttr>{NewAttr::Graph("then_branch", then_id), NewAttr::Graph("else_branch", else_id)});
    Graph& then_body = m->graph(m->add_graph(main.id(), n));
    return {n, out, then_body, m->graph(m->add_graph(main.id(), n))};
  }
  // Appends v to the graph outputs. An untyped value gets type t (the writer and the passes
  // want typed outputs); DType::Undefined leaves it untyped (the runtime takes the kernel's).
  void output(ValueId v, DType t = DType::Float) {
    if (t != DType::Undefined && !g().has_type(v)) g().set_dtype(v, t);
    auto outs = g().graph_outputs();
    outs.push_back(v);
    g().set_graph_outputs(outs);
  }
  // Several untyped outputs at once (runtime tests).
  void outputs(const std::vector<ValueId>& vs) {
    for (ValueId v : vs) output(v, DType::Undefined);
  }

 private:
  int counter_ = 0;
};

inline size_t count_op(const Graph& g, std::string_view op) {
  size_t n = 0;
  for (NodeId x : g.nodes())
    if (g.is_op(x, op)) ++n;
  return n;
}

}  // namespace onnxforge::test
