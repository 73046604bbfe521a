#include "tests/common/proto_builder.h"

#include <google/protobuf/unknown_field_set.h>

#include <fstream>
#include <sstream>

namespace onnxforge::test {

void add_value_info(onnx::ValueInfoProto* vi, const std::string& name, int elem_type,
                    const std::vector<int64_t>& dims) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  auto* shape = tt->mutable_shape();
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
}

onnx::NodeProto make_node(const std::string& op, const std::vector<std::string>& inputs,
                          const std::vector<std::string>& outputs, const std::string& name) {
  onnx::NodeProto n;
  n.set_op_type(op);
  if (!name.empty()) n.set_name(name);
  for (const auto& i : inputs) n.add_input(i);
  for (const auto& o : outputs) n.add_output(o);
  return n;
}

onnx::ModelProto tiny_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("onnxforge-test");
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("tiny");
  *g->add_node() = make_node("Relu", {"x"}, {"y"}, "relu");
  add_value_info(g->add_input(), "x", onnx::TensorProto::FLOAT, {1, 4});
  add_value_info(g->add_output(), "y", onnx::TensorProto::FLOAT, {1, 4});
  return m;
}

namespace {
template <class T>
onnx::TensorProto raw_tensor(const std::string& name, int elem_type, const std::vector<int64_t>& dims,
                             const std::vector<T>& values) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(elem_type);
  for (int64_t d : dims) t.add_dims(d);
  t.set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T)));
  return t;
}
}  // namespace

onnx::TensorProto float_tensor(const std::string& name, const std::vector<int64_t>& dims,
                               const std::vector<float>& values) {
  return raw_tensor(name, onnx::TensorProto::FLOAT, dims, values);
}

onnx::TensorProto int64_tensor(const std::string& name, const std::vector<int64_t>& dims,
                               const std::vector<int64_t>& values) {
  return raw_tensor(name, onnx::TensorProto::INT64, dims, values);
}

void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void write_model(const onnx::ModelProto& m, const std::filesystem::path& path) {
  write_bytes(path, m.SerializeAsString());
}

std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

void add_unknown_bytes(google::protobuf::Message* m, int field, const std::string& payload) {
  m->GetReflection()->MutableUnknownFields(m)->AddLengthDelimited(field, payload);
}

std::string string_entry(const std::string& key, const std::string& value) {
  onnx::StringStringEntryProto e;
  e.set_key(key);
  e.set_value(value);
  return e.SerializeAsString();
}

}  // namespace onnxforge::test
