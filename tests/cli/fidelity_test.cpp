// `convert` is a faithful copy (issue 14, round-trip fidelity): what python-onnx sees in the
// output equals the input, including a value_info whose type is empty and the node order of a
// model that is not topologically sorted (which `optimize` sorts).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <google/protobuf/util/message_differencer.h>

#include "io/model_io.h"
#include "tests/cli/cli_runner.h"
#include "tests/common/models.h"
#include "tests/common/proto_builder.h"

namespace fs = std::filesystem;
using namespace onnxforge;
using namespace onnxforge::test;
using ::testing::HasSubstr;

namespace {

onnx::ModelProto parse(const fs::path& p) {
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(read_bytes(p))) << p;
  return m;
}

std::string differences(const onnx::ModelProto& a, const onnx::ModelProto& b) {
  std::string report;
  google::protobuf::util::MessageDifferencer d;
  d.ReportDifferencesToString(&report);
  return d.Compare(a, b) ? "" : report;
}

}  // namespace

TEST(Fidelity, ValueInfoWithEmptyTypeIsKept) {
  auto m = tiny_model();
  auto* g = m.mutable_graph();
  auto* n = g->add_node();
  *n = make_node("Neg", {"y"}, {"z"}, "neg0");
  *g->mutable_output(0) = tensor_info("z", onnx::TensorProto::FLOAT, {1, 4});
  auto* vi = g->add_value_info();  // `type {}`: present, but empty (silero VAD v5)
  vi->set_name("y");
  vi->mutable_type();
  auto* vi2 = g->add_value_info();  // `type { tensor_type {} }`
  vi2->set_name("x2");
  vi2->mutable_type()->mutable_tensor_type();
  fs::path dir = temp_dir("emptytype");
  write_model(m, dir / "in.onnx");
  CliResult r = run_cli({"convert", dir / "in.onnx", dir / "out.onnx"});
  ASSERT_EQ(r.code, 0) << r.describe();
  auto out = parse(dir / "out.onnx");
  ASSERT_EQ(out.graph().value_info_size(), 2);
  EXPECT_TRUE(out.graph().value_info(0).has_type());
  EXPECT_FALSE(out.graph().value_info(0).type().has_tensor_type());
  EXPECT_TRUE(out.graph().value_info(1).type().has_tensor_type());
  EXPECT_FALSE(out.graph().value_info(1).type().tensor_type().has_elem_type());
  EXPECT_EQ(differences(m, out), "");
}

TEST(Fidelity, UnsortedNodeOrderIsKeptAndReported) {
  // z = Neg(y) listed before y = Relu(x): valid graph, not sorted (an ISNet export from npm).
  auto m = make_model({make_node("Neg", {"y"}, {"z"}, "neg0"), make_node("Relu", {"x"}, {"y"}, "relu0")},
                      {tensor_info("x", onnx::TensorProto::FLOAT, {1, 4})},
                      {tensor_info("z", onnx::TensorProto::FLOAT, {1, 4})});
  fs::path dir = temp_dir("unsorted");
  write_model(m, dir / "in.onnx");
  CliResult r = run_cli({"convert", dir / "in.onnx", dir / "out.onnx"});
  ASSERT_EQ(r.code, 0) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("not topologically sorted"));
  EXPECT_EQ(differences(m, parse(dir / "out.onnx")), "");
  r = run_cli({"inspect", dir / "in.onnx"});
  EXPECT_THAT(r.out, HasSubstr("not topologically sorted"));
  // optimize sorts (a pass ran).
  r = run_cli({"optimize", dir / "in.onnx", dir / "opt.onnx"});
  ASSERT_EQ(r.code, 0) << r.describe();
  auto opt = parse(dir / "opt.onnx");
  ASSERT_EQ(opt.graph().node_size(), 2);
  EXPECT_EQ(opt.graph().node(0).op_type(), "Relu");
}

TEST(Fidelity, ConvertOfEveryZooModelIsIdentical) {
  // Models without external data, compared message to message (python-onnx does the same for
  // every backend-suite and zoo model in tests/cli/roundtrip_fidelity.py).
  fs::path dir = temp_dir("zoo_fidelity");
  int compared = 0;
  for (const fs::path& p : zoo_models()) {
    if (fs::file_size(p) > (64u << 20)) continue;  // keep the test quick; the Python test covers all
    SCOPED_TRACE(p.string());
    fs::path out = dir / p.filename();
    CliResult r = run_cli({"convert", p, out});
    ASSERT_EQ(r.code, 0) << r.describe();
    EXPECT_EQ(differences(parse(p), parse(out)), "");
    fs::remove(out);
    ++compared;
  }
  EXPECT_GT(compared, 5);
}
