// Bad input gets a clear onnxforge::Error naming the file and the problem, never a crash.
#include <gtest/gtest.h>
#include <gmock/gmock.h>
#include <google/protobuf/text_format.h>

#include <sys/stat.h>

#include <algorithm>
#include <random>

#include "io/model_io.h"
#include "ir/error.h"
#include "tests/common/models.h"
#include "tests/common/proto_builder.h"

namespace fs = std::filesystem;
using namespace onnxforge;
using namespace onnxforge::test;
using ::testing::HasSubstr;

namespace {

std::string load_error(const fs::path& p) {
  try {
    load_model(p);
  } catch (const Error& e) { return e.what(); }
  return "(no error)";
}

std::string error_for_bytes(const std::string& bytes, const std::string& tag) {
  fs::path dir = temp_dir(tag);
  write_bytes(dir / "model.onnx", bytes);
  return load_error(dir / "model.onnx");
}

std::string error_for_model(const onnx::ModelProto& m, const std::string& tag) {
  return error_for_bytes(m.SerializeAsString(), tag);
}

// An initializer `name` of `type` and `dims` added to `m`, its data left to the test.
onnx::TensorProto* add_initializer(onnx::ModelProto& m, const std::string& name, int type,
                                   std::initializer_list<int64_t> dims) {
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (int64_t d : dims) t->add_dims(d);
  return t;
}

// A model whose initializer `w` (4 floats) lives in an external file described by `entries`.
onnx::ModelProto external_model(const std::vector<std::pair<std::string, std::string>>& entries) {
  auto m = tiny_model();
  auto* t = add_initializer(m, "w", onnx::TensorProto::FLOAT, {4});
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  for (auto& [k, v] : entries) {
    auto* e = t->add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
  return m;
}

}  // namespace

TEST(BadInput, EmptyFile) { EXPECT_THAT(error_for_bytes("", "empty"), HasSubstr("empty")); }

TEST(BadInput, MissingFile) { EXPECT_THAT(load_error("/nonexistent/model.onnx"), HasSubstr("cannot open")); }

TEST(BadInput, TruncatedFile) {
  auto m = tiny_model();
  *m.mutable_graph()->add_initializer() = float_tensor("w", {64}, std::vector<float>(64, 1.f));
  std::string bytes = m.SerializeAsString();
  for (size_t cut : {bytes.size() / 2, bytes.size() - 1, size_t{3}}) {
    std::string e = error_for_bytes(bytes.substr(0, cut), "trunc");
    EXPECT_THAT(e, HasSubstr("model.onnx")) << cut;
    EXPECT_THAT(e, ::testing::AnyOf(HasSubstr("malformed"), HasSubstr("no graph"), HasSubstr("truncated"))) << cut;
  }
}

TEST(BadInput, RandomBytes) {
  std::mt19937 rng(42);
  for (int i = 0; i < 200; ++i) {
    std::string bytes(1 + rng() % 4096, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    std::string e = error_for_bytes(bytes, "random");
    EXPECT_NE(e, "(no error)");
    EXPECT_THAT(e, HasSubstr("model.onnx"));
  }
}

TEST(BadInput, MutatedValidModelNeverCrashes) {
  auto m = tiny_model();
  *m.mutable_graph()->add_initializer() = float_tensor("w", {16}, std::vector<float>(16, 1.f));
  std::string good = m.SerializeAsString();
  std::mt19937 rng(7);
  fs::path dir = temp_dir("mutate");
  for (int i = 0; i < 500; ++i) {
    std::string bytes = good;
    for (int k = 0; k < 3; ++k) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    write_bytes(dir / "model.onnx", bytes);
    try {
      load_model(dir / "model.onnx");  // may succeed (a harmless mutation) or fail cleanly
    } catch (const Error&) {}
  }
}

TEST(BadInput, WrongWireType) {
  // ModelProto.ir_version (field 1) as a length-delimited field instead of a varint.
  std::string bytes = "\x0a\x02hi";
  EXPECT_THAT(error_for_bytes(bytes, "wire"), HasSubstr("wire type"));
}

TEST(BadInput, LengthPastTheEnd) {
  // Field 7 (graph) claims 100 bytes, 2 follow.
  std::string bytes = "\x08\x08\x3a\x64\x00\x00";
  EXPECT_THAT(error_for_bytes(bytes, "len"), HasSubstr("past the end"));
}

TEST(BadInput, NestingDepthBomb) {
  // If -> then_branch graph -> If -> ... 200 levels deep.
  onnx::GraphProto inner;
  inner.set_name("leaf");
  for (int i = 0; i < 200; ++i) {
    onnx::GraphProto outer;
    outer.set_name("level");
    auto* n = outer.add_node();
    n->set_op_type("If");
    n->add_input("c");
    auto* a = n->add_attribute();
    a->set_name("then_branch");
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = inner;
    inner = outer;
  }
  onnx::ModelProto m;
  m.set_ir_version(8);
  *m.mutable_graph() = inner;
  std::string e = error_for_model(m, "bomb");
  EXPECT_THAT(e, ::testing::AnyOf(HasSubstr("nested"), HasSubstr("malformed")));
}

TEST(BadInput, NegativeDims) {
  auto m = tiny_model();
  auto* t = m.mutable_graph()->add_initializer();
  *t = float_tensor("w", {2}, {1.f, 2.f});
  t->set_dims(0, -2);
  EXPECT_THAT(error_for_model(m, "negdim"), HasSubstr("negative dimension"));
}

TEST(BadInput, OverflowingDims) {
  auto m = tiny_model();
  auto* t = m.mutable_graph()->add_initializer();
  *t = float_tensor("w", {2}, {1.f, 2.f});
  t->clear_dims();
  for (int i = 0; i < 4; ++i) t->add_dims(int64_t{1} << 20);  // 2^80 elements
  EXPECT_THAT(error_for_model(m, "overflow"), HasSubstr("overflow"));
  t->clear_dims();
  t->add_dims(int64_t{1} << 62);  // element count fits, bytes (x4) do not
  EXPECT_THAT(error_for_model(m, "overflow2"), HasSubstr("overflow"));
}

TEST(BadInput, DataSizeDoesNotMatchDims) {
  auto m = tiny_model();
  auto* t = m.mutable_graph()->add_initializer();
  *t = float_tensor("w", {3}, {1.f, 2.f});
  EXPECT_THAT(error_for_model(m, "size"), HasSubstr("need"));
}

TEST(BadInput, ExternalLocationAbsolute) {
  auto m = external_model({{"location", "/etc/passwd"}});
  EXPECT_THAT(error_for_model(m, "abs"), HasSubstr("absolute"));
}

TEST(BadInput, ExternalLocationEscapes) {
  auto m = external_model({{"location", "../../etc/passwd"}});
  EXPECT_THAT(error_for_model(m, "escape"), HasSubstr("escapes"));
  auto m2 = external_model({{"location", "sub/../../x.bin"}});
  EXPECT_THAT(error_for_model(m2, "escape2"), HasSubstr("escapes"));
}

TEST(BadInput, ExternalSymlinkEscapes) {
  fs::path dir = temp_dir("symlink");
  fs::path outside = temp_dir("outside");
  write_bytes(outside / "w.bin", std::string(16, '\0'));
  fs::create_symlink(outside / "w.bin", dir / "w.bin");
  write_model(external_model({{"location", "w.bin"}}), dir / "model.onnx");
  EXPECT_THAT(load_error(dir / "model.onnx"), HasSubstr("outside the model's folder"));
}

TEST(BadInput, ExternalFileMissing) {
  auto m = external_model({{"location", "nothere.bin"}});
  EXPECT_THAT(error_for_model(m, "missing"), HasSubstr("does not exist"));
}

TEST(BadInput, ExternalRangePastEnd) {
  fs::path dir = temp_dir("extrange");
  write_bytes(dir / "w.bin", std::string(16, '\0'));
  write_model(external_model({{"location", "w.bin"}, {"offset", "8"}, {"length", "16"}}), dir / "model.onnx");
  EXPECT_THAT(load_error(dir / "model.onnx"), HasSubstr("past the end"));
  write_model(external_model({{"location", "w.bin"}, {"offset", "-1"}}), dir / "model.onnx");
  EXPECT_THAT(load_error(dir / "model.onnx"), HasSubstr("not a non-negative integer"));
}

TEST(BadInput, ExternalDataLoadsWhenValid) {
  fs::path dir = temp_dir("extok");
  std::vector<float> w{1, 2, 3, 4};
  write_bytes(dir / "w.bin", std::string(8, 'x') + std::string(reinterpret_cast<char*>(w.data()), 16));
  write_model(external_model({{"location", "w.bin"}, {"offset", "8"}, {"length", "16"}}), dir / "model.onnx");
  auto model = load_model(dir / "model.onnx");
  auto values = model->tensors.as<float>(model->main().initializer(*model->main().find_value("w")));
  ASSERT_EQ(values.size(), 4u);
  EXPECT_EQ(values[3], 4.f);
}

TEST(BadInput, NodeInputNamesNoValue) {
  auto m = tiny_model();
  m.mutable_graph()->mutable_node(0)->set_input(0, "ghost");
  std::string e = error_for_model(m, "dangling");
  EXPECT_THAT(e, HasSubstr("ghost"));
  EXPECT_THAT(e, HasSubstr("relu"));
}

TEST(BadInput, Cycle) {
  auto m = tiny_model();
  auto* g = m.mutable_graph();
  g->mutable_node(0)->set_input(0, "b");                   // relu: b -> y
  *g->add_node() = make_node("Neg", {"y"}, {"b"}, "neg");  // neg: y -> b
  EXPECT_THAT(error_for_model(m, "cycle"), HasSubstr("cycle"));
}

TEST(BadInput, TwoProducers) {
  auto m = tiny_model();
  *m.mutable_graph()->add_node() = make_node("Neg", {"x"}, {"y"}, "neg");
  std::string e = error_for_model(m, "twoprod");
  EXPECT_THAT(e, HasSubstr("two producers"));
  EXPECT_THAT(e, HasSubstr("neg"));
}

TEST(BadInput, NeverOverwritesTheInput) {
  fs::path dir = temp_dir("overwrite");
  write_model(tiny_model(), dir / "model.onnx");
  std::string before = read_bytes(dir / "model.onnx");
  auto model = load_model(dir / "model.onnx");
  try {
    save_model(*model, dir / "model.onnx");
    FAIL() << "overwrote the input";
  } catch (const Error& e) { EXPECT_THAT(std::string(e.what()), HasSubstr("refusing")); }
  fs::create_hard_link(dir / "model.onnx", dir / "alias.onnx");
  EXPECT_THROW(save_model(*model, dir / "alias.onnx"), Error);
  EXPECT_EQ(read_bytes(dir / "model.onnx"), before);
}

TEST(BadInput, FailedSaveLeavesNoFile) {
  fs::path dir = temp_dir("nofile");
  write_model(tiny_model(), dir / "model.onnx");
  auto model = load_model(dir / "model.onnx");
  EXPECT_THROW(save_model(*model, dir / "missing_dir" / "out.onnx"), Error);
  for (auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().filename(), "model.onnx");
}

// ---------------------------------------------------------------- issue 14 reproducers

namespace {

// tiny_model plus an `op` node whose one attribute is `attribute` in protobuf text format (the
// malformed ones a writer could produce: a type without its payload, the payload of another).
onnx::ModelProto with_attribute(const std::string& attribute, const std::string& op = "If") {
  auto m = tiny_model();
  auto* n = m.mutable_graph()->add_node();
  *n = make_node(op, {"x"}, {"z"}, "node0");
  if (!google::protobuf::TextFormat::ParseFromString(attribute, n->add_attribute()))
    ADD_FAILURE() << "not an AttributeProto: " << attribute;
  return m;
}

}  // namespace

TEST(BadInput, AttributeDeclaredGraphHoldingNone) {
  auto m = with_attribute("name: 'then_branch' type: GRAPH");
  std::string e = error_for_model(m, "attr_graph");
  EXPECT_THAT(e, HasSubstr("node 1 'node0' (If): attribute 'then_branch' is declared GRAPH but holds no graph"));
  EXPECT_THAT(e, HasSubstr("model.onnx"));
}

TEST(BadInput, AttributeDeclaredTensorHoldingNone) {
  auto m = with_attribute("name: 'value' type: TENSOR", "Constant");
  EXPECT_THAT(error_for_model(m, "attr_tensor"), HasSubstr("is declared TENSOR but holds no tensor"));
}

TEST(BadInput, AttributePayloadOfAnotherType) {
  auto m = with_attribute("name: 'alpha' type: INT floats: 1", "LeakyRelu");
  EXPECT_THAT(error_for_model(m, "attr_other"), HasSubstr("is declared i (INT) but holds floats (FLOATS)"));
  auto m2 = with_attribute("name: 'alpha' f: 1 i: 2", "LeakyRelu");  // IR < 3: no type, two payloads
  EXPECT_THAT(error_for_model(m2, "attr_two"), HasSubstr("has no type and holds several values"));
}

TEST(BadInput, TypedAccessorRefusesAnotherType) {
  auto m = with_attribute("name: 'strides' type: INT i: 2", "Conv");
  fs::path dir = temp_dir("accessor");
  write_model(m, dir / "model.onnx");
  auto model = load_model(dir / "model.onnx");
  const Graph& g = model->main();
  NodeId conv = g.nodes()[1];
  EXPECT_EQ(g.attr_int(conv, "strides", 1), 2);
  try {
    g.attr_ints(conv, "strides");
    FAIL() << "read an INT attribute as INTS";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()),
                HasSubstr("node 'node0' (Conv): attribute 'strides' is INT, but Conv defines it as INTS"));
  }
  EXPECT_TRUE(g.attr_ints(conv, "dilations").empty());  // absent: the default
  EXPECT_FALSE(g.attr_graph(conv, "body").valid());
}

TEST(BadInput, DataFieldMustHoldTheTensorsType) {
  auto m = tiny_model();
  auto* t = add_initializer(m, "c", onnx::TensorProto::COMPLEX128, {2});
  for (int64_t v : {1, 2, 3, 4}) t->add_int64_data(v);  // a 16-byte over-read per element before
  EXPECT_THAT(error_for_model(m, "complex"), HasSubstr("of type complex128 stores its data in int64_data"));
  t->clear_int64_data();
  for (double v : {1.0, 2.0, 3.0, 4.0}) t->add_double_data(v);
  fs::path dir = temp_dir("complex_ok");
  write_model(m, dir / "model.onnx");
  auto ok = load_model(dir / "model.onnx");
  EXPECT_EQ(ok->tensors.byte_size(ok->main().initializer(*ok->main().find_value("c"))), 32u);
  t->clear_double_data();
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_float_data(1.f);
  t->add_float_data(2.f);
  t->set_raw_data(std::string(8, '\0'));
  EXPECT_THAT(error_for_model(m, "twofields"), HasSubstr("more than one field"));
}

TEST(BadInput, RawDataWithTheWrongWireType) {
  // TensorProto field 9 (raw_data) as a varint: the reader took the 8 bytes before the field.
  auto m = tiny_model();
  auto* t = add_initializer(m, "w", onnx::TensorProto::FLOAT, {2});
  t->mutable_unknown_fields()->AddVarint(9, 7);
  EXPECT_THAT(error_for_model(m, "rawvarint"), HasSubstr("wire type"));
}

TEST(BadInput, FifoAndDirectoryAreRefusedWithoutBlocking) {
  fs::path dir = temp_dir("fifo");
  ASSERT_EQ(::mkfifo((dir / "model.onnx").c_str(), 0644), 0);
  EXPECT_THAT(load_error(dir / "model.onnx"), HasSubstr("is a FIFO (named pipe), not a regular file"));
  fs::create_directory(dir / "d.onnx");
  EXPECT_THAT(load_error(dir / "d.onnx"), HasSubstr("is a directory"));
  EXPECT_THAT(load_error("/dev/null"), HasSubstr("is a character device"));
  write_model(external_model({{"location", "w.bin"}}), dir / "ext.onnx");
  ASSERT_EQ(::mkfifo((dir / "w.bin").c_str(), 0644), 0);
  try {
    load_model(dir / "ext.onnx");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("FIFO"));
    EXPECT_EQ(e.file(), (dir / "w.bin").string());  // the file at fault, for --json
  }
}

TEST(BadInput, ErrorsNameTheirFile) {
  fs::path dir = temp_dir("errfile");
  write_bytes(dir / "model.onnx", "\x0a\x02hi");
  try {
    load_model(dir / "model.onnx");
    FAIL();
  } catch (const Error& e) { EXPECT_EQ(e.file(), (dir / "model.onnx").string()); }
}

TEST(BadInput, ExternalFileNameMustStayInTheOutputFolder) {
  fs::path dir = temp_dir("extname");
  write_model(tiny_model(), dir / "model.onnx");
  auto model = load_model(dir / "model.onnx");
  fs::create_directory(dir / "out");
  for (const char* bad : {"../x.data", "/tmp/x.data", "sub/../../x.data", "..", "out.onnx"}) {
    SaveOptions o;
    o.placement = WeightPlacement::External;
    o.external_file = bad;
    EXPECT_THROW(save_model(*model, dir / "out" / "out.onnx", o), Error) << bad;
  }
  EXPECT_TRUE(fs::is_empty(dir / "out"));
  EXPECT_FALSE(fs::exists(dir / "x.data"));
}

TEST(BadInput, SaveLeavesNoTemporaryAndRemovesStaleOnes) {
  fs::path dir = temp_dir("tmpfiles");
  write_model(tiny_model(), dir / "model.onnx");
  auto model = load_model(dir / "model.onnx");
  write_bytes(dir / ".out.onnx.onnxforge-tmp.2147483647.1", "stale");  // pid above any pid_max
  save_model(*model, dir / "out.onnx");
  std::vector<std::string> names;
  for (auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"model.onnx", "out.onnx"}));
  EXPECT_EQ(fs::status(dir / "out.onnx").permissions() & fs::perms::others_write, fs::perms::none);
  EXPECT_NE(fs::status(dir / "out.onnx").permissions() & fs::perms::owner_read, fs::perms::none);
}

TEST(BadInput, UnknownElementTypeInAValueInfoIsKeptVerbatim) {
  auto m = tiny_model();
  auto* vi = m.mutable_graph()->add_value_info();
  vi->set_name("ghost");
  vi->mutable_type()->mutable_tensor_type()->set_elem_type(9999);
  fs::path dir = temp_dir("elemtype");
  write_model(m, dir / "model.onnx");
  auto model = load_model(dir / "model.onnx");
  save_model(*model, dir / "out.onnx");
  onnx::ModelProto out;
  ASSERT_TRUE(out.ParseFromString(read_bytes(dir / "out.onnx")));
  EXPECT_EQ(out.graph().value_info(0).type().tensor_type().elem_type(), 9999);
}

TEST(BadInput, EmptyPackedFloatAttribute) {
  // fuzz_reader: an empty packed `floats` field reached memcpy with a null destination (UBSan).
  auto m = with_attribute("name: 'scales' type: FLOATS", "Upsample");
  m.mutable_graph()->mutable_node(1)->mutable_attribute(0)->mutable_unknown_fields()->AddLengthDelimited(7, "");
  fs::path dir = temp_dir("emptyfloats");
  write_model(m, dir / "model.onnx");
  auto model = load_model(dir / "model.onnx");
  EXPECT_TRUE(model->main().attr_floats(model->main().nodes()[1], "scales").empty());
}
