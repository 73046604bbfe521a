#pragma once
// Kept for tests/runtime/transformer_ops_test.cpp only (written against it in parallel with the
// move to tests/common/graph_builder.h); port that test and delete this file.
// Builds small models in memory for runtime tests.
#include <gtest/gtest.h>

#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/runtime.h"

namespace onnxforge::test {

struct TinyModel {
  Model model;
  Graph& g = model.main();
  explicit TinyModel(int64_t opset = 17) { model.opsets.push_back({Sym{}, opset, true}); }

  ValueId input(const std::string& name, DType t, std::vector<int64_t> shape) {
    ValueId v = g.add_value(intern(name));
    std::vector<Dim> dims;
    for (int64_t d : shape) dims.push_back(d >= 0 ? Dim::of(d) : Dim::symbol(intern("dyn" + std::to_string(dims.size()))));
    g.set_type(v, t, dims);
    auto ins = g.graph_inputs();
    ins.push_back(v);
    g.set_graph_inputs(ins);
    return v;
  }
  template <class T>
  ValueId constant(const std::string& name, DType t, std::vector<int64_t> shape, std::vector<T> values) {
    ValueId v = g.add_value(intern(name));
    TensorId id = model.tensors.add_owned(intern(name), t, shape,
                                          std::as_bytes(std::span<const T>(values.data(), values.size())));
    g.set_initializer(v, id);
    return v;
  }
  std::vector<ValueId> node(const std::string& op, std::vector<ValueId> ins, std::vector<NewAttr> attrs = {},
                            size_t n_out = 1, const std::string& domain = "") {
    std::vector<ValueId> outs;
    for (size_t i = 0; i < n_out; ++i)
      outs.push_back(g.add_value(intern(op + "_" + std::to_string(g.node_capacity()) + "_" + std::to_string(i))));
    g.add_node(intern(op), intern(domain), intern(op + std::to_string(g.node_capacity())), ins, outs, attrs);
    return outs;
  }
  ValueId op(const std::string& op, std::vector<ValueId> ins, std::vector<NewAttr> attrs = {}) {
    return node(op, std::move(ins), std::move(attrs))[0];
  }
  void outputs(std::vector<ValueId> outs) { g.set_graph_outputs(std::move(outs)); }
};

template <class T>
rt::Tensor make(DType t, std::vector<int64_t> shape, std::vector<T> values) {
  rt::Tensor x = rt::Tensor::alloc(t, shape);
  EXPECT_EQ(static_cast<size_t>(x.numel()), values.size());
  std::memcpy(x.data, values.data(), values.size() * sizeof(T));
  return x;
}

template <class T>
std::vector<T> values(const rt::Tensor& t) {
  return std::vector<T>(t.ptr<T>(), t.ptr<T>() + t.numel());
}

}  // namespace onnxforge::test
