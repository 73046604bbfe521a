// Structured mutator, linked into every target: half of the mutations parse the input as an
// ONNX ModelProto and change it where hostile models differ from honest ones (attributes,
// dims, dtypes, external-data entries, node wiring, subgraphs), the other half are libFuzzer's
// raw byte mutations. Inputs that do not parse get raw mutations only.
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

using Rng = std::mt19937_64;

template <class T>
T pick(Rng& r, std::initializer_list<T> xs) {
  return *(xs.begin() + static_cast<std::ptrdiff_t>(r() % xs.size()));
}

int64_t hostile_int(Rng& r) {
  switch (r() % 12) {
    case 0: return 0;
    case 1: return -1;
    case 2: return 1;
    case 3: return int64_t{1} << 31;
    case 4: return int64_t{1} << 62;
    case 5: return INT64_MAX;
    case 6: return INT64_MIN;
    case 7: return -(int64_t{1} << 31);
    case 8: return static_cast<int64_t>(r() % 5) - 2;
    case 9: return 65536;
    default: return static_cast<int64_t>(r() % 17);
  }
}

// Every ValueInfoProto of a graph (inputs, outputs, value_info).
std::vector<onnx::ValueInfoProto*> value_infos(onnx::GraphProto* g) {
  std::vector<onnx::ValueInfoProto*> v;
  for (auto& x : *g->mutable_input()) v.push_back(&x);
  for (auto& x : *g->mutable_output()) v.push_back(&x);
  for (auto& x : *g->mutable_value_info()) v.push_back(&x);
  return v;
}

// A graph of the model, sometimes a subgraph held by an attribute.
onnx::GraphProto* some_graph(onnx::ModelProto& m, Rng& r) {
  onnx::GraphProto* g = m.mutable_graph();
  for (int depth = 0; depth < 3 && r() % 3 == 0; ++depth) {
    std::vector<onnx::GraphProto*> subs;
    for (auto& n : *g->mutable_node())
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_g()) subs.push_back(a.mutable_g());
        for (auto& sg : *a.mutable_graphs()) subs.push_back(&sg);
      }
    if (subs.empty()) break;
    g = subs[r() % subs.size()];
  }
  return g;
}

std::vector<std::string> names(const onnx::GraphProto& g) {
  std::vector<std::string> v{""};
  for (const auto& x : g.input()) v.push_back(x.name());
  for (const auto& x : g.initializer()) v.push_back(x.name());
  for (const auto& n : g.node())
    for (const auto& o : n.output()) v.push_back(o);
  return v;
}

void mutate_attribute(onnx::NodeProto& n, Rng& r) {
  if (n.attribute_size() == 0 || r() % 4 == 0) {
    auto* a = n.add_attribute();
    a->set_name(pick<const char*>(r, {"strides", "dilations", "pads", "kernel_shape", "axis", "axes", "perm", "group",
                                      "value", "body", "then_branch", "to", "alpha", "mode", "keepdims", "blocksize"}));
    a->set_type(static_cast<onnx::AttributeProto::AttributeType>(r() % 15));
    if (r() % 2)
      a->set_i(hostile_int(r));
    else
      for (int k = 0; k < static_cast<int>(r() % 5); ++k) a->add_ints(hostile_int(r));
    return;
  }
  auto* a = n.mutable_attribute(static_cast<int>(r() % static_cast<uint64_t>(n.attribute_size())));
  switch (r() % 8) {
    case 0: a->set_type(static_cast<onnx::AttributeProto::AttributeType>(r() % 16)); break;  // declared type vs payload
    case 1:
      a->clear_g();
      a->clear_t();
      a->clear_ints();
      a->clear_i();
      break;  // declared, holds none
    case 2:
      for (auto& x : *a->mutable_ints())
        if (r() % 2) x = hostile_int(r);
      if (a->ints_size() == 0) a->add_ints(hostile_int(r));
      break;
    case 3: a->set_i(hostile_int(r)); break;
    case 4: a->add_ints(hostile_int(r)); break;
    case 5:
      if (a->ints_size()) a->mutable_ints()->RemoveLast();
      break;
    case 6:
      a->set_f(pick<float>(r, {0.f, -1.f, 1e30f, -1e30f, std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::infinity()}));
      break;
    default:
      a->set_s(pick<const char*>(r, {"", "SAME_UPPER", "VALID", "NOTSET", "linear", "cubic", "nearest", "xx"}));
      break;
  }
}

void mutate_dims(onnx::ModelProto& m, Rng& r) {
  onnx::GraphProto* g = some_graph(m, r);
  auto vis = value_infos(g);
  if (!vis.empty() && r() % 2) {
    auto* t = vis[r() % vis.size()]->mutable_type()->mutable_tensor_type();
    auto* s = t->mutable_shape();
    if (s->dim_size() == 0 || r() % 4 == 0)
      s->add_dim()->set_dim_value(hostile_int(r));
    else {
      auto* d = s->mutable_dim(static_cast<int>(r() % static_cast<uint64_t>(s->dim_size())));
      if (r() % 3 == 0)
        d->set_dim_param(pick<const char*>(r, {"batch", "seq", "N", ""}));
      else
        d->set_dim_value(hostile_int(r));
    }
    return;
  }
  if (g->initializer_size()) {
    auto* t = g->mutable_initializer(static_cast<int>(r() % static_cast<uint64_t>(g->initializer_size())));
    if (t->dims_size() && r() % 2)
      t->set_dims(static_cast<int>(r() % static_cast<uint64_t>(t->dims_size())), hostile_int(r));
    else
      t->add_dims(pick<int64_t>(r, {0, 1, 2, int64_t{1} << 31}));
  }
}

void mutate_dtype(onnx::ModelProto& m, Rng& r) {
  onnx::GraphProto* g = some_graph(m, r);
  auto vis = value_infos(g);
  if (!vis.empty() && r() % 2) {
    vis[r() % vis.size()]->mutable_type()->mutable_tensor_type()->set_elem_type(static_cast<int>(r() % 26));
    return;
  }
  if (g->initializer_size()) {
    auto* t = g->mutable_initializer(static_cast<int>(r() % static_cast<uint64_t>(g->initializer_size())));
    t->set_data_type(static_cast<int>(r() % 26));
    if (r() % 3 == 0) {  // move the data to a typed field
      int n = static_cast<int>(r() % 5);
      switch (r() % 4) {
        case 0:
          for (int i = 0; i < n; ++i) t->add_int64_data(hostile_int(r));
          break;
        case 1:
          for (int i = 0; i < n; ++i) t->add_int32_data(static_cast<int32_t>(hostile_int(r)));
          break;
        case 2:
          for (int i = 0; i < n; ++i) t->add_double_data(1.5);
          break;
        default:
          for (int i = 0; i < n; ++i) t->add_float_data(0.5f);
          break;
      }
    }
  }
}

void mutate_external(onnx::ModelProto& m, Rng& r) {
  onnx::GraphProto* g = m.mutable_graph();
  onnx::TensorProto* t = nullptr;
  if (g->initializer_size() && r() % 3)
    t = g->mutable_initializer(static_cast<int>(r() % static_cast<uint64_t>(g->initializer_size())));
  else {
    t = g->add_initializer();
    t->set_name("ext" + std::to_string(r() % 4));
    t->set_data_type(1);
    t->add_dims(static_cast<int64_t>(r() % 1100));
  }
  t->clear_raw_data();
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  t->clear_external_data();
  auto add = [&](const char* k, std::string v) {
    auto* e = t->add_external_data();
    e->set_key(k);
    e->set_value(std::move(v));
  };
  // Locations in the fuzz scratch folder (fuzz_common.h) and hostile ones.
  add("location", pick<const char*>(r, {"data.bin", "data.bin", "fifo", "dir", "missing.bin", "../data.bin",
                                        "/etc/passwd", "dir/../data.bin", "", "model.onnx"}));
  if (r() % 2) add("offset", std::to_string(pick<int64_t>(r, {0, 4, 4096, 4095, -1, int64_t{1} << 62})));
  if (r() % 2) add("length", std::to_string(pick<int64_t>(r, {0, 4, 16, 4096, 4100, int64_t{1} << 62})));
  if (r() % 5 == 0) add("offset", "abc");
}

void mutate_wiring(onnx::ModelProto& m, Rng& r) {
  onnx::GraphProto* g = some_graph(m, r);
  if (g->node_size() == 0) return;
  auto all = names(*g);
  auto* n = g->mutable_node(static_cast<int>(r() % static_cast<uint64_t>(g->node_size())));
  switch (r() % 7) {
    case 0:
      if (n->input_size())
        n->set_input(static_cast<int>(r() % static_cast<uint64_t>(n->input_size())), all[r() % all.size()]);
      break;
    case 1: n->add_input(all[r() % all.size()]); break;
    case 2:
      if (n->input_size()) n->mutable_input()->RemoveLast();
      break;
    case 3:
      if (n->output_size()) n->set_output(0, all[r() % all.size()]);
      break;                             // two producers, cycles
    case 4: *g->add_node() = *n; break;  // duplicate
    case 5: {                            // move a node to another place (unsorted graphs)
      int i = static_cast<int>(r() % static_cast<uint64_t>(g->node_size()));
      int j = static_cast<int>(r() % static_cast<uint64_t>(g->node_size()));
      g->mutable_node()->SwapElements(i, j);
      break;
    }
    default:
      n->set_op_type(pick<const char*>(r, {"Conv",         "Loop",          "If",
                                           "Scan",         "Range",         "ConstantOfShape",
                                           "Reshape",      "Expand",        "Gather",
                                           "Resize",       "Pad",           "Slice",
                                           "Tile",         "Concat",        "Split",
                                           "MatMul",       "Gemm",          "Transpose",
                                           "Einsum",       "TopK",          "NonZero",
                                           "Unsqueeze",    "Squeeze",       "Cast",
                                           "DepthToSpace", "SpaceToDepth",  "MaxPool",
                                           "AveragePool",  "ConvTranspose", "LSTM",
                                           "GRU",          "Softmax",       "LayerNormalization",
                                           "Attention",    "CumSum"}));
      break;
  }
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  Rng r(seed);
  onnx::ModelProto m;
  if (r() % 2 == 0 || !m.ParseFromArray(data, static_cast<int>(size))) return LLVMFuzzerMutate(data, size, max_size);
  int steps = 1 + static_cast<int>(r() % 3);
  for (int s = 0; s < steps; ++s) {
    switch (r() % 6) {
      case 0: {
        onnx::GraphProto* g = some_graph(m, r);
        if (g->node_size())
          mutate_attribute(*g->mutable_node(static_cast<int>(r() % static_cast<uint64_t>(g->node_size()))), r);
        break;
      }
      case 1: mutate_dims(m, r); break;
      case 2: mutate_dtype(m, r); break;
      case 3: mutate_external(m, r); break;
      case 4: mutate_wiring(m, r); break;
      default: m.set_ir_version(pick<int64_t>(r, {3, 4, 7, 8, 10, 0, 65})); break;
    }
  }
  std::string out = m.SerializeAsString();
  if (out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}
