#include "passes/decompose.h"

#include <cstring>

#include "ir/error.h"
#include "ir/float16.h"
#include "passes/fusion_patterns.h"
#include "passes/graph_util.h"

namespace onnxforge::passes::decompose {

ValueId Chain::node(std::string_view op, std::vector<ValueId> inputs, std::vector<NewAttr> attrs) {
  return node_named(prefix_ + "/" + std::string(op) + "_" + std::to_string(k_++), op, std::move(inputs), std::move(attrs));
}

ValueId Chain::node_named(std::string_view name, std::string_view op, std::vector<ValueId> inputs,
                          std::vector<NewAttr> attrs) {
  ValueId out = e_.new_value(name);
  const NodeId tags[] = {from_};
  e_.add_node(op, std::move(inputs), {out}, std::move(attrs), tags);
  return out;
}

ValueId Chain::scalar(std::string_view hint, DType t, double v) {
  std::byte bytes[8];
  size_t n = 0;
  switch (t) {
    case DType::Float: {
      const float f = static_cast<float>(v);
      std::memcpy(bytes, &f, n = 4);
      break;
    }
    case DType::Double: std::memcpy(bytes, &v, n = 8); break;
    case DType::Float16: {
      const uint16_t h = float_to_half(static_cast<float>(v));
      std::memcpy(bytes, &h, n = 2);
      break;
    }
    case DType::BFloat16: {
      const uint16_t h = float_to_bf16(static_cast<float>(v));
      std::memcpy(bytes, &h, n = 2);
      break;
    }
    default: fail("decompose: no scalar constant of type ", dtype_name(t));
  }
  return e_.new_constant(prefix_ + "/" + std::string(hint), t, {}, std::span<const std::byte>(bytes, n));
}

ValueId Chain::reduce_mean(ValueId x, const std::vector<int64_t>& axes) {
  if (e_.g.model().opset("") >= 18) {
    const std::vector<std::byte> b = to_bytes(axes);
    const int64_t dims[] = {static_cast<int64_t>(axes.size())};
    return node("ReduceMean", {x, e_.new_constant(prefix_ + "/axes_" + std::to_string(k_), DType::Int64, dims, b)});
  }
  return node("ReduceMean", {x}, {NewAttr::Ints("axes", axes)});
}

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
  const int64_t r = pattern::rank_of(g, x);
  for (int64_t a = axis; a < r; ++a) axes.push_back(a);
  return axes;
}

bool is_half_type(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

}  // namespace onnxforge::passes::decompose
