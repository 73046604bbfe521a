// load -> save -> load is structurally equal, for the ONNX backend test models, the zoo and
// models with IR-10/11 fields onnx 1.12 does not know.
#include <gtest/gtest.h>

#include <cstring>

#include "io/model_io.h"
#include "ir/error.h"
#include "tests/common/models.h"
#include "tests/common/proto_builder.h"
#include "tests/common/structural.h"

namespace fs = std::filesystem;
using namespace onnxforge;
using namespace onnxforge::test;

namespace {

std::string roundtrip_diff(const fs::path& in, const fs::path& dir, const SaveOptions& opts = {}) {
  auto a = load_model(in);
  fs::path out = dir / "out.onnx";
  save_model(*a, out, opts);
  auto b = load_model(out);
  return structural_diff(*a, *b);
}

std::vector<fs::path> backend_models() {
  std::vector<fs::path> out;
  for (auto& e : fs::recursive_directory_iterator(backend_data_dir()))
    if (e.path().filename() == "model.onnx") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST(RoundTrip, EveryBackendTestModel) {
  auto models = backend_models();
  ASSERT_GT(models.size(), 1000u) << "libonnx-testdata missing?";
  fs::path dir = temp_dir("rt_backend");
  size_t failures = 0;
  for (const auto& m : models) {
    std::string d;
    try {
      d = roundtrip_diff(m, dir);
    } catch (const Error& e) { d = e.what(); }
    if (!d.empty() && ++failures <= 10) ADD_FAILURE() << m << ": " << d;
  }
  EXPECT_EQ(failures, 0u);
}

TEST(RoundTrip, EveryZooModelEmbeddedAndExternal) {
  for (const auto& m : zoo_models()) {
    fs::path dir = temp_dir("rt_zoo");
    EXPECT_EQ(roundtrip_diff(m, dir), "") << m;
    SaveOptions ext;
    ext.placement = WeightPlacement::External;
    EXPECT_EQ(roundtrip_diff(m, dir, ext), "") << m << " (external data)";
  }
}

TEST(RoundTrip, ExternalDataThenEmbeddedKeepsEveryByte) {
  fs::path dir = temp_dir("rt_ext");
  auto m = tiny_model();
  std::vector<float> big(100000), small{1, 2, 3};
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i) * 0.5f;
  *m.mutable_graph()->add_initializer() = float_tensor("big", {100000}, big);
  *m.mutable_graph()->add_initializer() = float_tensor("small", {3}, small);
  write_model(m, dir / "in.onnx");
  auto a = load_model(dir / "in.onnx");
  SaveOptions ext;
  ext.placement = WeightPlacement::External;
  ext.external_min_bytes = 1024;
  SaveStats s = save_model(*a, dir / "ext.onnx", ext);
  EXPECT_TRUE(s.used_external);
  EXPECT_EQ(s.tensors_external, 1u);  // only the big one passes the threshold
  ASSERT_TRUE(fs::exists(dir / "ext.onnx.data"));
  auto b = load_model(dir / "ext.onnx");
  EXPECT_EQ(structural_diff(*a, *b), "");
  // Large tensors are page-aligned in the data file.
  ValueId big_v = *b->main().find_value("big");
  EXPECT_EQ(b->tensors.entry(b->main().initializer(big_v)).storage, TensorStorage::External);
  EXPECT_EQ(b->tensors.entry(b->main().initializer(big_v)).source.file_offset % 4096, 0u);
  // And back to embedded.
  SaveOptions emb;
  emb.placement = WeightPlacement::Embed;
  save_model(*b, dir / "emb.onnx", emb);
  EXPECT_FALSE(fs::exists(dir / "emb.onnx.data"));
  auto c = load_model(dir / "emb.onnx");
  EXPECT_EQ(structural_diff(*a, *c), "");
}

TEST(RoundTrip, KeepsFieldsOnnx112DoesNotKnow) {
  fs::path dir = temp_dir("rt_ir10");
  auto m = tiny_model();
  m.set_ir_version(10);
  auto* node = m.mutable_graph()->mutable_node(0);
  add_unknown_bytes(node, 9,
                    string_entry("pkg.torch.onnx.name_scopes", "['', 'encoder']"));   // NodeProto.metadata_props
  add_unknown_bytes(node, 8, "fast");                                                 // NodeProto.overload
  add_unknown_bytes(m.mutable_graph()->mutable_input(0), 4, string_entry("k", "v"));  // ValueInfoProto.metadata_props
  add_unknown_bytes(m.mutable_graph(), 16, string_entry("graph", "meta"));            // GraphProto.metadata_props
  auto* fn = m.add_functions();
  fn->set_name("MyFn");
  fn->set_domain("custom");
  fn->add_input("a");
  fn->add_output("b");
  *fn->add_node() = make_node("Neg", {"a"}, {"b"});
  add_unknown_bytes(fn, 13, "ov");                        // FunctionProto.overload
  add_unknown_bytes(fn, 14, string_entry("fn", "meta"));  // FunctionProto.metadata_props
  auto* ti = m.add_training_info();
  ti->mutable_algorithm()->set_name("train");
  auto* sparse = m.mutable_graph()->add_sparse_initializer();
  *sparse->mutable_values() = float_tensor("sp", {2}, {1.f, 2.f});
  sparse->mutable_indices()->set_name("sp_idx");
  sparse->mutable_indices()->set_data_type(onnx::TensorProto::INT64);
  sparse->mutable_indices()->add_dims(2);
  sparse->mutable_indices()->add_int64_data(0);
  sparse->mutable_indices()->add_int64_data(3);
  sparse->add_dims(4);
  auto* typed = m.mutable_graph()->add_initializer();  // typed data fields instead of raw_data
  typed->set_name("ints");
  typed->set_data_type(onnx::TensorProto::INT64);
  typed->add_dims(3);
  for (int64_t v : {int64_t{-1}, int64_t{0}, int64_t{1} << 40}) typed->add_int64_data(v);
  auto* strs = m.mutable_graph()->add_initializer();
  strs->set_name("strs");
  strs->set_data_type(onnx::TensorProto::STRING);
  strs->add_dims(2);
  strs->add_string_data("hello");
  strs->add_string_data(std::string("\0bin", 4));
  write_model(m, dir / "in.onnx");

  auto a = load_model(dir / "in.onnx");
  const Graph& g = a->main();
  NodeId relu = g.nodes()[0];
  EXPECT_EQ(g.metadata_value(relu, "pkg.torch.onnx.name_scopes"), "['', 'encoder']");
  EXPECT_EQ(str(g.overload(relu)), "fast");
  ValueId ints = *g.find_value("ints");
  auto values = a->tensors.as<int64_t>(g.initializer(ints));
  ASSERT_EQ(values.size(), 3u);
  EXPECT_EQ(values[2], 1LL << 40);
  EXPECT_EQ(a->tensors.strings(g.initializer(*g.find_value("strs")))[1], std::string("\0bin", 4));
  ASSERT_EQ(a->functions.size(), 1u);
  EXPECT_EQ(str(a->functions[0].overload), "ov");
  EXPECT_EQ(g.sparse_initializers().size(), 1u);

  save_model(*a, dir / "out.onnx");
  auto b = load_model(dir / "out.onnx");
  EXPECT_EQ(structural_diff(*a, *b), "");
  // protobuf itself sees the same message, unknown fields included.
  onnx::ModelProto reread;
  ASSERT_TRUE(reread.ParseFromString(read_bytes(dir / "out.onnx")));
  EXPECT_EQ(reread.graph().node(0).unknown_fields().field_count(), 2);
  EXPECT_EQ(reread.graph().input(0).unknown_fields().field_count(), 1);
  EXPECT_EQ(reread.graph().unknown_fields().field_count(), 1);
  EXPECT_EQ(reread.functions(0).unknown_fields().field_count(), 2);
  EXPECT_EQ(reread.training_info_size(), 1);
  EXPECT_EQ(reread.graph().sparse_initializer(0).values().name(), "sp");
  EXPECT_EQ(reread.graph().initializer(0).int64_data(2), 1LL << 40);  // typed field kept as typed
}

TEST(RoundTrip, UnchangedTensorsAreWrittenVerbatim) {
  fs::path dir = temp_dir("rt_verbatim");
  auto m = tiny_model();
  std::vector<float> w(50000, 0.25f);
  *m.mutable_graph()->add_initializer() = float_tensor("w", {50000}, w);
  write_model(m, dir / "in.onnx");
  auto a = load_model(dir / "in.onnx");
  SaveStats s = save_model(*a, dir / "out.onnx");
  EXPECT_EQ(s.tensors_verbatim, 1u);
  EXPECT_EQ(s.tensors_reencoded, 0u);
}
