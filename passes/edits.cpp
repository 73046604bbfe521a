#include "passes/edits.h"

#include <algorithm>
#include <cstring>

#include "ir/error.h"
#include "ir/float16.h"
#include "ir/match.h"

namespace onnxforge::passes {

Edits::Edits(Graph& graph, const Uses& u, const PassOptions& o)
    : g(graph), uses(u), options(o), rw_(graph), touched_(graph.node_capacity(), 0), delta_(&sink_) {}

void Edits::mark(NodeId n) {
  if (!n.valid()) return;
  if (n.index() >= touched_.size()) touched_.resize(n.index() + 1, 0);
  touched_[n.index()] = epoch_;
}

bool Edits::touched(NodeId n) const { return n.index() >= touched_.size() || touched_[n.index()]; }
bool Edits::touched_earlier(NodeId n) const {
  return n.index() >= touched_.size() || (touched_[n.index()] && touched_[n.index()] != epoch_);
}

bool Edits::any_touched(std::span<const NodeId> ns) const {
  return std::any_of(ns.begin(), ns.end(), [&](NodeId n) { return n.valid() && touched(n); });
}

ValueId Edits::new_typed_value(std::string_view hint, DType t, std::span<const int64_t> dims) {
  ValueId v = rw_.new_value(hint);
  std::vector<Dim> d;
  for (int64_t x : dims) d.push_back(Dim::of(x));
  g.set_type(v, t, d);
  return v;
}

ValueId Edits::new_constant(std::string_view hint, DType t, std::span<const int64_t> dims,
                            std::span<const std::byte> bytes) {
  TensorId id = g.model().tensors.add_owned(intern(hint), t, dims, bytes);
  delta_->initializers -= 1;
  delta_->bytes -= static_cast<int64_t>(bytes.size());
  return rw_.new_initializer(hint, id);
}

ValueId Edits::ints_constant(std::string_view hint, const std::vector<int64_t>& v, bool rank0) {
  const int64_t n = static_cast<int64_t>(v.size());
  if (rank0 && n != 1) fail("internal: a rank-0 int64 constant of ", n, " elements");
  return new_constant(hint, DType::Int64, rank0 ? std::span<const int64_t>() : std::span<const int64_t>(&n, 1),
                      std::as_bytes(std::span<const int64_t>(v)));
}

namespace {

// `x` as one element of type `t` into `out` (8 bytes): its size, 0 for a type with no scalar.
size_t encode_scalar(DType t, double x, std::byte* out) {
  size_t n = 0;
  auto put = [&](const auto v) { std::memcpy(out, &v, n = sizeof v); };
  switch (t) {
    case DType::Float: put(static_cast<float>(x)); break;
    case DType::Double: put(x); break;
    case DType::Float16: put(float_to_half(static_cast<float>(x))); break;
    case DType::BFloat16: put(float_to_bf16(static_cast<float>(x))); break;
    case DType::Int64: put(static_cast<int64_t>(x)); break;
    case DType::Int32: put(static_cast<int32_t>(x)); break;
    case DType::Int16: put(static_cast<int16_t>(x)); break;
    case DType::Int8: put(static_cast<int8_t>(x)); break;
    case DType::Uint8: put(static_cast<uint8_t>(x)); break;
    case DType::Bool: put(static_cast<uint8_t>(x != 0)); break;
    default: break;
  }
  return n;
}

}  // namespace

ValueId Edits::scalar_constant(std::string_view hint, DType t, double x) {
  std::byte bytes[8];
  const size_t n = encode_scalar(t, x, bytes);
  if (n == 0) fail("internal: no scalar constant of type ", dtype_name(t));
  return new_constant(hint, t, {}, std::span<const std::byte>(bytes, n));
}

bool Edits::scalar_type(DType t) {
  std::byte bytes[8];
  return encode_scalar(t, 0, bytes) != 0;
}

ValueId Edits::new_deferred_constant(std::string_view hint, DType t, std::span<const int64_t> dims, uint64_t size,
                                     TensorRecipe recipe) {
  TensorId id = g.model().tensors.add_deferred(intern(hint), t, dims, size, std::move(recipe));
  delta_->initializers -= 1;
  delta_->bytes -= static_cast<int64_t>(size);
  return rw_.new_initializer(hint, id);
}

ValueId Edits::new_initializer(std::string_view hint, TensorId t) {
  delta_->initializers -= 1;
  delta_->bytes -= static_cast<int64_t>(g.model().tensors.byte_size(t));
  return rw_.new_initializer(hint, t);
}

void Edits::gain(ValueId v) {
  v = rw_.resolve(v);  // the value the reader will really read
  if (!v.valid()) return;
  if (v.index() >= gained_.size()) gained_.resize(v.index() + 1, 0);
  gained_[v.index()] = 1;
  mark(g.producer(v));  // it gained a reader: not dead, not "used once" any more
}

NodeId Edits::add_node(std::string_view op, std::vector<ValueId> inputs, std::vector<ValueId> outputs,
                       std::vector<NewAttr> attrs, std::span<const NodeId> tags_from, std::string_view domain,
                       Sym name) {
  delta_->nodes -= 1;
  for (ValueId v : inputs) gain(v);
  NodeId n = rw_.add_node(op, std::move(inputs), std::move(outputs), std::move(attrs), tags_from, domain, name);
  mark(n);
  return n;
}

NodeId Edits::rebuild(NodeId n, std::string_view op, std::vector<ValueId> inputs, std::vector<ValueId> outputs,
                      std::vector<NewAttr> attrs) {
  const std::vector<MetadataEntry> meta(g.metadata(n).begin(), g.metadata(n).end());
  kill(n);  // first: the new node may write n's outputs
  const NodeId tags[] = {n};
  const NodeId r = add_node(op, std::move(inputs), std::move(outputs), std::move(attrs), tags, {}, g.node_name(n));
  if (!meta.empty()) g.set_metadata(r, meta);
  return r;
}

void Edits::replace_uses(ValueId from, ValueId to) {
  if (from == rw_.resolve(to)) return;
  gain(to);
  mark(g.producer(from));
  // Values created this round are not in the use index (their readers are new, hence touched).
  if (from.index() < uses.value_capacity())
    for (const Use& u : uses.of(from)) mark(u.node);
  rw_.replace_uses(from, to);
}

void Edits::set_input(NodeId n, size_t i, ValueId v) {
  mark(n);
  gain(v);
  rw_.set_input(n, i, v);
}

void Edits::kill(NodeId n) {
  if (killed(n)) return;
  mark(n);
  delta_->nodes += 1;
  rw_.kill(n);
}

void Edits::remove_initializer(ValueId v) {
  if (std::find(removed_inits_.begin(), removed_inits_.end(), v) != removed_inits_.end()) return;
  removed_inits_.push_back(v);
  delta_->initializers += 1;
  delta_->bytes += static_cast<int64_t>(g.model().tensors.byte_size(g.initializer(v)));
}

NodeId Edits::replace_with(std::span<const NodeId> group, std::string_view op, std::vector<ValueId> inputs,
                           std::vector<NewAttr> attrs, std::string_view domain) {
  std::vector<NodeId> members;
  for (NodeId n : group)
    if (n.valid()) members.push_back(n);
  if (members.empty() || any_touched(std::span<const NodeId>(members))) return {};
  ValueId y = g.output(members.back(), 0);
  ValueId r = new_value(str(g.value_name(y)));
  NodeId added = add_node(op, std::move(inputs), {r}, std::move(attrs), members, domain);
  // Which members die is decided on the round's use index, before the readers move.
  auto read_outside = [&](NodeId n) {
    for (ValueId v : g.outputs(n)) {
      if (!v.valid() || v == y) continue;
      if (uses.is_graph_output(v)) return true;
      for (const Use& u : uses.of(v))
        if (std::find(members.begin(), members.end(), u.node) == members.end()) return true;
    }
    return false;
  };
  std::vector<NodeId> dead;
  for (NodeId n : members)
    if (!read_outside(n)) dead.push_back(n);
  replace_uses(y, r);
  for (NodeId n : dead) kill(n);
  return added;
}

bool Edits::forward(NodeId n, ValueId kept) {
  if (touched(n) || !kept.valid() || killed(g.producer(kept))) return false;
  for (size_t i = 1; i < g.outputs(n).size(); ++i)
    if (ValueId v = g.output(n, i); v.valid() && uses.used(v)) return false;
  ValueId out = g.output(n, 0);
  if (!can_forward(g, uses, out, kept)) return false;
  replace_uses(out, kept);
  kill(n);
  return true;
}

bool Edits::drop_if_unshared(NodeId n) {
  if (!uses.single(g.output(n, 0))) return false;
  kill(n);
  return true;
}

int64_t Edits::commit() {
  if (!removed_inits_.empty()) {
    std::vector<ValueId> ins = g.graph_inputs();
    size_t before = ins.size();
    for (ValueId v : removed_inits_) {
      g.remove_initializer(v);
      std::erase(ins, v);
    }
    if (ins.size() != before) g.set_graph_inputs(std::move(ins));
    removed_inits_.clear();
  }
  int64_t removed = rw_.commit();
  touched_.assign(g.node_capacity(), 0);
  gained_.clear();
  other_change_ = false;
  return removed;
}

size_t constants_as_nodes(Graph& g) {
  const std::vector<ValueId> inits = g.initializers();
  for (ValueId v : inits) {
    const TensorId t = g.initializer(v);
    g.remove_initializer(v);
    const NewAttr value = NewAttr::Tensor("value", t);
    g.add_node(intern("Constant"), Sym{}, fresh_name(g, "Constant"), {}, std::span<const ValueId>(&v, 1),
               std::span<const NewAttr>(&value, 1));
  }
  return inits.size();
}

}  // namespace onnxforge::passes
