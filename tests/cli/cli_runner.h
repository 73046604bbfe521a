#pragma once
// Runs the built onnxforge executable as a user would (tests/cli): arguments, exit code or
// signal, stdout and stderr, and a timeout after which the process is killed and the run counts
// as a hang.
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/common/proto_builder.h"  // int64_tensor, float_tensor

namespace onnxforge::test {

struct CliResult {
  int code = -1;   // exit status, when the process exited
  int signal = 0;  // the signal that ended it, 0 when it exited
  bool timed_out = false;
  std::string out, err;
  bool exited() const { return signal == 0 && !timed_out; }
  std::string describe() const;  // for failure messages
};

std::filesystem::path onnxforge_binary();
CliResult run_cli(const std::vector<std::string>& args, double timeout_seconds = 120);

// Small models for the hostile-input reproducers (onnx protobuf, opset 13 unless given).
onnx::ModelProto make_model(const std::vector<onnx::NodeProto>& nodes, const std::vector<onnx::ValueInfoProto>& inputs,
                            const std::vector<onnx::ValueInfoProto>& outputs,
                            const std::vector<onnx::TensorProto>& initializers = {}, int opset = 13,
                            int ir_version = 8);
// A tensor value info; dims < 0 are unnamed symbolic dims, `params` names dims by index.
onnx::ValueInfoProto tensor_info(const std::string& name, int elem_type, const std::vector<int64_t>& dims,
                                 const std::vector<std::pair<int, std::string>>& params = {});
onnx::ValueInfoProto untyped_info(const std::string& name);  // no type at all
void add_ints(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v);
void add_int(onnx::NodeProto& n, const std::string& name, int64_t v);

}  // namespace onnxforge::test
