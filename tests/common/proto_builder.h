#pragma once
// Building small ONNX models for tests with onnx's generated protobuf classes (tests only: the
// engine itself never parses into ModelProto).
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <string>
#include <vector>

namespace onnxforge::test {

// x[1,4] float -> Relu -> y, opset 13.
onnx::ModelProto tiny_model();
// op(inputs) -> outputs, named `name` (empty: no name), for a GraphProto's or FunctionProto's
// add_node(): `*g->add_node() = make_node("Neg", {"a"}, {"b"}, "neg");`.
onnx::NodeProto make_node(const std::string& op, const std::vector<std::string>& inputs,
                          const std::vector<std::string>& outputs, const std::string& name = "");
void add_value_info(onnx::ValueInfoProto* vi, const std::string& name, int elem_type, const std::vector<int64_t>& dims);
onnx::TensorProto float_tensor(const std::string& name, const std::vector<int64_t>& dims,
                               const std::vector<float>& values);
onnx::TensorProto int64_tensor(const std::string& name, const std::vector<int64_t>& dims,
                               const std::vector<int64_t>& values);
void write_model(const onnx::ModelProto& m, const std::filesystem::path& path);
void write_bytes(const std::filesystem::path& path, const std::string& bytes);
std::string read_bytes(const std::filesystem::path& path);
// Appends a length-delimited unknown field (for IR-10 fields onnx 1.12 does not know).
void add_unknown_bytes(google::protobuf::Message* m, int field, const std::string& payload);
std::string string_entry(const std::string& key, const std::string& value);  // StringStringEntryProto bytes

}  // namespace onnxforge::test
