#include "passes/builder.h"

#include <cstring>

#include "ir/error.h"

namespace onnxforge::passes {

Builder::Builder(Edits& e, std::span<const NodeId> tags, std::string prefix)
    : e_(e), tags_(tags.begin(), tags.end()), prefix_(std::move(prefix)) {}

Builder::Builder(Edits& e, NodeId from)
    : e_(e), tags_{from}, from_(from), prefix_(std::string(str(e.g.node_name(from)))) {}

ValueId Builder::value(std::string_view hint) { return e_.new_value(name(hint)); }

NodeId Builder::add(std::string_view op, std::vector<ValueId> inputs, std::vector<ValueId> outputs,
                    std::vector<NewAttr> attrs, std::string_view domain) {
  ++added_;
  return e_.add_node(op, std::move(inputs), std::move(outputs), std::move(attrs), tags_, domain);
}

ValueId Builder::named(std::string_view hint, std::string_view op, std::vector<ValueId> inputs,
                       std::vector<NewAttr> attrs) {
  const ValueId out = e_.new_value(hint);
  add(op, std::move(inputs), {out}, std::move(attrs));
  return out;
}

ValueId Builder::node(std::string_view op, std::vector<ValueId> inputs, std::vector<NewAttr> attrs) {
  return named(name(std::string(op) + "_" + std::to_string(k_++)), op, std::move(inputs), std::move(attrs));
}

ValueId Builder::ints(std::string_view hint, const std::vector<int64_t>& v, bool rank0) {
  return e_.ints_constant(name(std::string(hint) + "_" + std::to_string(k_++)), v, rank0);
}

ValueId Builder::scalar(std::string_view hint, DType t, double x) { return e_.scalar_constant(name(hint), t, x); }

ValueId Builder::tensor(std::string_view hint, DType t, const std::vector<int64_t>& dims,
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
      fail("internal: no constant tensor of type ", dtype_name(t));
  }
  return bytes(std::string(hint) + "_" + std::to_string(k_++), t, dims, b);
}

ValueId Builder::bytes(std::string_view hint, DType t, std::span<const int64_t> dims, std::span<const std::byte> data) {
  return e_.new_constant(name(hint), t, dims, data);
}

ValueId Builder::reduce_mean(ValueId x, const std::vector<int64_t>& axes) {
  if (opset() >= 18) return node("ReduceMean", {x, ints("axes", axes)});
  return node("ReduceMean", {x}, {NewAttr::Ints("axes", axes)});
}

ValueId Builder::unsqueeze(ValueId x, const std::vector<int64_t>& axes) {
  if (opset() >= 13) return node("Unsqueeze", {x, ints("axes", axes)});
  return node("Unsqueeze", {x}, {NewAttr::Ints("axes", axes)});
}

ValueId Builder::slice(ValueId x, int64_t axis, int64_t start, int64_t end, int64_t step) {
  if (opset() < 10) fail("internal: Slice below opset 10 (the passes that slice refuse such models)");
  std::vector<ValueId> in = {x, ints("starts", {start}), ints("ends", {end}), ints("axes", {axis})};
  if (step != 1) in.push_back(ints("steps", {step}));
  return node("Slice", std::move(in));
}

void Builder::bind(size_t i, ValueId v) { e_.replace_uses(e_.g.output(from_, i), v); }

void Builder::finish(std::string_view op, std::vector<ValueId> inputs, std::vector<NewAttr> attrs) {
  const ValueId y = e_.g.output(from_, 0);
  const ValueId r = named(str(e_.g.value_name(y)), op, std::move(inputs), std::move(attrs));
  e_.replace_uses(y, r);
  e_.kill(from_);
}

NodeId Builder::rebuild(std::string_view op, std::vector<ValueId> inputs, std::vector<NewAttr> attrs,
                        std::optional<std::vector<ValueId>> outputs) {
  while (!inputs.empty() && !inputs.back().valid()) inputs.pop_back();
  const Graph& g = e_.g;
  std::vector<ValueId> outs =
      outputs ? std::move(*outputs) : std::vector<ValueId>(g.outputs(from_).begin(), g.outputs(from_).end());
  return e_.rebuild(from_, op, std::move(inputs), std::move(outs), std::move(attrs));
}

}  // namespace onnxforge::passes
