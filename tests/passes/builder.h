#pragma once
// Building small models in memory for pass tests and the fuzzer.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/driver.h"
#include "passes/registry.h"

namespace onnxforge::test {

class Builder {
 public:
  explicit Builder(int64_t opset = 17) : m(std::make_unique<Model>()) {
    m->opsets.push_back({Sym{}, opset, true});
    m->ir_version = 8;
    m->producer_name = intern("onnxforge-test");
  }
  std::unique_ptr<Model> m;
  Graph& g() { return m->main(); }

  // dims: -1 means a symbolic dim named after `sym`.
  ValueId input(const std::string& name, std::vector<int64_t> dims, DType t = DType::Float,
                const std::vector<std::string>& syms = {}) {
    ValueId v = g().add_value(intern(name));
    std::vector<Dim> d;
    for (size_t i = 0; i < dims.size(); ++i)
      d.push_back(dims[i] >= 0 ? Dim::of(dims[i]) : Dim::symbol(intern(i < syms.size() ? syms[i] : "s" + std::to_string(i))));
    g().set_type(v, t, d);
    auto ins = g().graph_inputs();
    ins.push_back(v);
    g().set_graph_inputs(ins);
    return v;
  }
  template <class T>
  ValueId init(const std::string& name, std::vector<int64_t> dims, const std::vector<T>& data, DType t) {
    ValueId v = g().add_value(intern(name));
    TensorId id = m->tensors.add_owned(intern(name), t, dims,
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
    TensorId t = m->tensors.add_owned(Sym{}, DType::Int64, std::span<const int64_t>(&n, 1),
                                      std::span<const std::byte>(reinterpret_cast<const std::byte*>(data.data()), data.size() * 8));
    return node("Constant", {}, {NewAttr::Tensor("value", t)}, name);
  }
  std::vector<ValueId> node_n(const std::string& op, std::vector<ValueId> ins, std::vector<NewAttr> attrs, size_t outs,
                              const std::string& name = {}) {
    std::string base = name.empty() ? op + "_" + std::to_string(counter_++) : name;
    std::vector<ValueId> o;
    for (size_t i = 0; i < outs; ++i) o.push_back(g().add_value(intern(base + (i ? "_out" + std::to_string(i) : ""))));
    g().add_node(intern(op), Sym{}, intern(base + "_node"), ins, o, attrs);
    return o;
  }
  ValueId node(const std::string& op, std::vector<ValueId> ins, std::vector<NewAttr> attrs = {}, const std::string& name = {}) {
    return node_n(op, std::move(ins), std::move(attrs), 1, name)[0];
  }
  void output(ValueId v, DType t = DType::Float) {
    if (!g().has_type(v)) g().set_dtype(v, t);
    auto outs = g().graph_outputs();
    outs.push_back(v);
    g().set_graph_outputs(outs);
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

// Runs the named passes (all when empty) to a fixed point.
inline passes::RunResult optimize(Model& m, std::vector<std::string> names = {}, uint64_t fold_size = 1 << 20) {
  passes::RunOptions o;
  o.pass.evaluator = passes::runtime_evaluator();
  o.pass.fold_size = fold_size;
  std::vector<const passes::Pass*> list;
  if (names.empty()) list = passes::all_passes();
  else
    for (auto& n : names) list.push_back(passes::find_pass(n));
  return passes::run_passes(m, list, o);
}

}  // namespace onnxforge::test
