#include "passes/decompose.h"

#include <cstring>

#include "ir/error.h"
#include "ir/float16.h"
#include "passes/fusion_patterns.h"
#include "passes/graph_util.h"

namespace onnxforge::passes::decompose {

ValueId Chain::node(std::string_view op, std::vector<ValueId> inputs, std::vector<NewAttr> attrs) {
  return node_named(prefix_ + "/" + std::string(op) + "_" + std::to_string(k_++), op, std::move(inputs),
                    std::move(attrs));
}

ValueId Chain::node_named(std::string_view name, std::string_view op, std::vector<ValueId> inputs,
                          std::vector<NewAttr> attrs) {
  ValueId out = e_.new_value(name);
  const NodeId tags[] = {from_};
  e_.add_node(op, std::move(inputs), {out}, std::move(attrs), tags);
  return out;
}

ValueId Chain::scalar(std::string_view hint, DType t, double v) {
  if (t != DType::Float && t != DType::Double && t != DType::Float16 && t != DType::BFloat16)
    fail("decompose: no scalar constant of type ", dtype_name(t));
  return e_.scalar_constant(prefix_ + "/" + std::string(hint), t, v);
}

ValueId Chain::reduce_mean(ValueId x, const std::vector<int64_t>& axes) {
  if (e_.g.model().opset("") >= 18) {
    return node("ReduceMean", {x, e_.ints_constant(prefix_ + "/axes_" + std::to_string(k_), axes)});
  }
  return node("ReduceMean", {x}, {NewAttr::Ints("axes", axes)});
}

ValueId Chain::ints(std::string_view hint, const std::vector<int64_t>& v) {
  return e_.ints_constant(prefix_ + "/" + std::string(hint) + "_" + std::to_string(k_++), v);
}

ValueId Chain::tensor(std::string_view hint, DType t, const std::vector<int64_t>& dims,
                      const std::vector<double>& values) {
  std::vector<std::byte> b;
  auto put = [&b](const auto x) {
    const size_t at = b.size();
    b.resize(at + sizeof x);
    std::memcpy(b.data() + at, &x, sizeof x);
  };
  for (double v : values) {
    if (t == DType::Bool)
      put(static_cast<uint8_t>(v != 0));
    else if (t == DType::Float)
      put(static_cast<float>(v));
    else if (t == DType::Int64)
      put(static_cast<int64_t>(v));
    else
      fail("decompose: no constant tensor of type ", dtype_name(t));
  }
  return e_.new_constant(prefix_ + "/" + std::string(hint) + "_" + std::to_string(k_++), t, dims, b);
}

ValueId Chain::unsqueeze(ValueId x, const std::vector<int64_t>& axes) {
  if (opset() >= 13) return node("Unsqueeze", {x, ints("axes", axes)});
  return node("Unsqueeze", {x}, {NewAttr::Ints("axes", axes)});
}

ValueId Chain::slice(ValueId x, int64_t axis, int64_t start, int64_t end, int64_t step) {
  if (opset() < 10) fail("decompose: Slice below opset 10 (the passes refuse such models)");
  std::vector<ValueId> in = {x, ints("starts", {start}), ints("ends", {end}), ints("axes", {axis})};
  if (step != 1) in.push_back(ints("steps", {step}));
  return node("Slice", std::move(in));
}

void Chain::bind(size_t i, ValueId v) { e_.replace_uses(e_.g.output(from_, i), v); }

void Chain::finish(std::string_view op, std::vector<ValueId> inputs, std::vector<NewAttr> attrs) {
  const ValueId y = e_.g.output(from_, 0);
  const ValueId r = node_named(str(e_.g.value_name(y)), op, std::move(inputs), std::move(attrs));
  e_.replace_uses(y, r);
  e_.kill(from_);
}

std::vector<int64_t> trailing_axes_of(const Graph& g, ValueId x, int64_t axis) {
  std::vector<int64_t> axes;
  if (axis < 0) {
    for (int64_t a = axis; a < 0; ++a) axes.push_back(a);
    return axes;
  }
  const int64_t r = rank_of(g, x);
  for (int64_t a = axis; a < r; ++a) axes.push_back(a);
  return axes;
}

int64_t static_dim(const Graph& g, ValueId v, int64_t i) {
  if (!g.has_shape(v)) return -1;
  const auto s = g.shape(v);
  if (i < 0) i += static_cast<int64_t>(s.size());
  if (i < 0 || i >= static_cast<int64_t>(s.size())) return -1;
  return s[static_cast<size_t>(i)].known() ? s[static_cast<size_t>(i)].value : -1;
}

bool output_read(const Graph& g, const Uses& u, NodeId n, size_t i) {
  if (i >= g.outputs(n).size()) return false;
  const ValueId v = g.output(n, i);
  return v.valid() && (u.used(v) || u.is_graph_output(v));
}

bool is_half_type(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

}  // namespace onnxforge::passes::decompose
