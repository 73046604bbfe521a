#include "passes/evaluator.h"

#include <cstring>
#include <string>

#include "ir/error.h"
#ifdef ONNXFORGE_HAVE_RUNTIME
#include "runtime/runtime.h"
#endif

namespace onnxforge::passes {

ConstTensor view_of(const Model& m, TensorId t) {
  ConstTensor c;
  c.dtype = m.tensors.dtype(t);
  auto d = m.tensors.dims(t);
  c.dims.assign(d.begin(), d.end());
  c.tensor = t;
  c.size = m.tensors.byte_size(t);
  if (!m.tensors.is_deferred(t)) c.data = m.tensors.bytes(t).data();
  return c;
}

void ConstTensor::resolve(const TensorStore& ts) {
  if (data || size == 0) return;
  if (pending) {
    auto buf = std::make_shared<std::vector<std::byte>>(size);
    std::vector<std::span<const std::byte>> sources;
    for (TensorId s : pending->sources) sources.push_back(ts.bytes(s));
    pending->compute(sources, *buf);
    data = buf->data();
    hold = std::move(buf);
  } else if (tensor.valid()) {
    data = ts.bytes(tensor).data();
  }
}

#ifdef ONNXFORGE_HAVE_RUNTIME
namespace {

bool runtime_supports(const Graph& g, NodeId n) {
  std::string_view dom = str(g.domain(n));
  if (!rt::has_kernel(dom, str(g.op_type(n)))) return false;
  // Subgraphs reading outer-scope values cannot be evaluated on their own.
  return g.implicit_inputs(n).empty();
}

std::vector<ConstTensor> runtime_evaluate(const Graph& g, NodeId n, std::span<const ConstTensor> ins) {
  std::vector<rt::Tensor> views;
  views.reserve(ins.size());
  for (const ConstTensor& c : ins) {
    if (c.dtype == DType::Undefined) {
      views.emplace_back();
      continue;
    }
    if (c.dtype == DType::String) fail("string tensors are not folded");
    views.push_back(rt::Tensor::view(c.dtype, rt::Shape(c.dims.begin(), c.dims.end()), c.data));
  }
  std::vector<rt::Tensor> outs = rt::evaluate_node(g, n, views);
  std::vector<ConstTensor> res;
  res.reserve(outs.size());
  for (rt::Tensor& t : outs) {
    ConstTensor c;
    c.dtype = t.dtype;
    if (t.dtype != DType::Undefined) {
      c.dims.assign(t.shape.begin(), t.shape.end());
      c.size = t.bytes();
      if (t.hold) {
        c.data = t.data;
        c.hold = t.hold;
      } else {  // a view into an input: copy so the result owns its bytes
        auto buf = std::make_shared<std::vector<std::byte>>(c.size);
        if (c.size) std::memcpy(buf->data(), t.data, c.size);
        c.data = buf->data();
        c.hold = buf;
      }
    }
    res.push_back(std::move(c));
  }
  return res;
}

}  // namespace

const NodeEvaluator* runtime_evaluator() {
  static const NodeEvaluator e{runtime_supports, runtime_evaluate};
  return &e;
}
#else
const NodeEvaluator* runtime_evaluator() { return nullptr; }
#endif

}  // namespace onnxforge::passes
