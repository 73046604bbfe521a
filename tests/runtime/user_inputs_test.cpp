// The user's inputs (runtime/inputs.h SeedInputs): .npy per input, .npz archives (stored and
// deflated), backend test-data folders of TensorProto .pb files, constants; input sets as the
// first seeds; malformed and non-regular files as one-line errors. Generated inputs that follow
// how the graph uses them, and verification that says when it ran on degenerate inputs.
#include <gtest/gtest.h>
#include <minizip/zip.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>

#include <fstream>
#include <thread>

#include "io/model_io.h"
#include "runtime/inputs.h"
#include "runtime/runtime.h"
#include "runtime/tensor_io.h"
#include "runtime/verify.h"
#include "tests/common/graph_builder.h"
#include "tests/common/models.h"

using namespace onnxforge;
using onnxforge::test::GraphBuilder;

namespace {

namespace fs = std::filesystem;

// y = x * 2 + n: x float [batch, seq], n an int64 scalar.
std::unique_ptr<Model> scaled_sum() {
  GraphBuilder b;
  ValueId x = b.input("x", {-1, -1}, DType::Float, {"batch", "seq"});
  ValueId n = b.input("n", {}, DType::Int64);
  ValueId two = b.f32("two", {}, {2.f});
  ValueId nf = b.node("Cast", {n}, {NewAttr::Int("to", static_cast<int64_t>(DType::Float))});
  b.output(b.node("Add", {b.node("Mul", {x, two}), nf}, {}, "y"));
  return std::move(b.m);
}

rt::Tensor floats(rt::Shape shape, float v) {
  rt::Tensor t = rt::Tensor::alloc(DType::Float, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = v;
  return t;
}

rt::Tensor scalar_i64(int64_t v) {
  rt::Tensor t = rt::Tensor::alloc(DType::Int64, {});
  t.ptr<int64_t>()[0] = v;
  return t;
}

std::string npy_bytes(const fs::path& tmp, const rt::Tensor& t) {
  rt::write_npy(tmp, t);
  std::ifstream f(tmp, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// An .npz as np.savez writes it (stored) or np.savez_compressed (deflated).
void write_npz(const fs::path& path, const std::vector<std::pair<std::string, std::string>>& entries, bool deflate) {
  zipFile z = zipOpen64(path.c_str(), 0);
  ASSERT_NE(z, nullptr);
  for (const auto& [name, bytes] : entries) {
    zip_fileinfo info{};
    ASSERT_EQ(zipOpenNewFileInZip64(z, name.c_str(), &info, nullptr, 0, nullptr, 0, nullptr, deflate ? Z_DEFLATED : 0,
                                    deflate ? Z_DEFAULT_COMPRESSION : 0, 0),
              ZIP_OK);
    ASSERT_EQ(zipWriteInFileInZip(z, bytes.data(), static_cast<unsigned>(bytes.size())), ZIP_OK);
    zipCloseFileInZip(z);
  }
  zipClose(z, nullptr);
}

void write_pb(const fs::path& path, const std::string& name, const rt::Tensor& t) {
  onnx::TensorProto p;
  if (!name.empty()) p.set_name(name);
  p.set_data_type(static_cast<int>(t.dtype));
  for (int64_t d : t.shape) p.add_dims(d);
  p.set_raw_data(std::string(reinterpret_cast<const char*>(t.data), t.bytes()));
  std::ofstream(path, std::ios::binary) << p.SerializeAsString();
}

std::string error_of(const std::function<void()>& f, std::string* file = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (file) *file = e.file();
    return e.what();
  }
  return "no error";
}

struct Fixture {
  std::unique_ptr<Model> model = scaled_sum();
  rt::Session session{*model};
  rt::SeedInputs inputs(const rt::UserInputs& u, std::map<std::string, int64_t> dims = {}) const {
    return rt::SeedInputs(model->main(), session.input_values(), std::move(dims), u);
  }
  // y[0] of run `index`
  float first_y(const rt::SeedInputs& in, size_t index, uint64_t seed) const {
    return session.run(in.make(index, seed))[0].ptr<float>()[0];
  }
};

}  // namespace

TEST(UserInputs, NpyGivenOnceFeedsEverySeedAndGivenTwiceMakesTwoSets) {
  Fixture f;
  auto dir = test::temp_dir("user_inputs_npy");
  rt::write_npy(dir / "a.npy", floats({1, 5}, 1.f));
  rt::write_npy(dir / "b.npy", floats({1, 7}, 3.f));
  rt::write_npy(dir / "n.npy", scalar_i64(4));
  auto once = f.inputs(
      {.specs = {"x=" + (dir / "a.npy").string(), "n=" + (dir / "n.npy").string()}, .values = {}, .arrays = {}});
  EXPECT_EQ(once.sets(), 0u);
  for (uint64_t seed : {0, 5}) {
    auto in = once.make(seed, seed);
    EXPECT_EQ(in[0].shape, (rt::Shape{1, 5}));
    EXPECT_FLOAT_EQ(f.session.run(in)[0].ptr<float>()[0], 6.f);  // 1 * 2 + 4
  }
  auto twice = f.inputs(
      {.specs = {"x=" + (dir / "a.npy").string(), "x=" + (dir / "b.npy").string()}, .values = {"n=10"}, .arrays = {}});
  ASSERT_EQ(twice.sets(), 2u);
  EXPECT_EQ(twice.make(0, 0)[0].shape, (rt::Shape{1, 5}));
  EXPECT_EQ(twice.make(1, 1)[0].shape, (rt::Shape{1, 7}));  // each set sizes its own dims
  EXPECT_FLOAT_EQ(f.first_y(twice, 1, 1), 16.f);            // 3 * 2 + 10 (--input-value on every seed)
  auto generated = twice.make(2, 2);                        // past the sets: generated, the constant kept
  EXPECT_EQ(generated[0].shape, (rt::Shape{1, rt::kDefaultSequence}));
  EXPECT_EQ(generated[1].get_i64(0), 10);
}

TEST(UserInputs, NpzArchivesStoredAndDeflatedAreInputSets) {
  Fixture f;
  auto dir = test::temp_dir("user_inputs_npz");
  const std::string x = npy_bytes(dir / "t.npy", floats({1, 4}, 1.5f)), n = npy_bytes(dir / "t.npy", scalar_i64(2));
  write_npz(dir / "stored.npz", {{"x.npy", x}, {"n.npy", n}}, false);
  write_npz(dir / "deflated.npz", {{"arr_0.npy", x}}, true);  // np.savez(a): positional names
  auto in =
      f.inputs({.specs = {(dir / "stored.npz").string(), (dir / "deflated.npz").string()}, .values = {}, .arrays = {}});
  ASSERT_EQ(in.sets(), 2u);
  EXPECT_FLOAT_EQ(f.first_y(in, 0, 0), 5.f);  // 1.5 * 2 + 2
  auto second = in.make(1, 1);
  EXPECT_EQ(second[0].shape, (rt::Shape{1, 4}));
  EXPECT_FLOAT_EQ(second[0].ptr<float>()[3], 1.5f);
}

TEST(UserInputs, BackendTestDataFoldersGiveOneSetPerDataSet) {
  Fixture f;
  auto dir = test::temp_dir("user_inputs_pb");
  for (int k = 0; k < 2; ++k) {
    fs::create_directories(dir / ("test_data_set_" + std::to_string(k)));
    write_pb(dir / ("test_data_set_" + std::to_string(k)) / "input_0.pb", "x",
             floats({1, 3 + k}, static_cast<float>(k)));
    write_pb(dir / ("test_data_set_" + std::to_string(k)) / "input_1.pb", "",
             scalar_i64(5 + k));  // nameless: by position
  }
  auto in = f.inputs({.specs = {dir.string()}, .values = {}, .arrays = {}});
  ASSERT_EQ(in.sets(), 2u);
  EXPECT_FLOAT_EQ(f.first_y(in, 0, 0), 5.f);
  EXPECT_FLOAT_EQ(f.first_y(in, 1, 1), 8.f);  // 1 * 2 + 6
  auto one = f.inputs({.specs = {(dir / "test_data_set_1").string()}, .values = {}, .arrays = {}});
  EXPECT_EQ(one.sets(), 1u);

  // Verification runs every set (the seed count grows to hold them) and then generated seeds.
  rt::VerifyOptions o;
  o.seeds = 1;
  o.inputs = {.specs = {dir.string()}, .values = {}, .arrays = {}};
  rt::VerifyReport r = rt::verify(*f.model, *f.model, o);
  EXPECT_EQ(r.seeds, 2);
  EXPECT_TRUE(r.pass);
  o.seeds = 4;
  EXPECT_EQ(rt::verify(*f.model, *f.model, o).seeds, 4);
}

TEST(UserInputs, MalformedAndNonRegularFilesAreOneLineErrorsNamingTheFile) {
  Fixture f;
  auto dir = test::temp_dir("user_inputs_bad");
  auto spec_error = [&](const std::string& spec, std::string* file = nullptr) {
    return error_of([&] { f.inputs({.specs = {spec}, .values = {}, .arrays = {}}); }, file);
  };
  std::ofstream(dir / "garbage.npy") << "\x93NUMPY\x01";
  using namespace std::string_literals;  // the header holds NUL bytes
  std::ofstream(dir / "header.npy", std::ios::binary) << "\x93NUMPY\x01\x00\xff\x00{'descr': '<f4'"s;
  std::ofstream(dir / "garbage.npz") << "PK\x03\x04 not really";
  std::ofstream(dir / "garbage.pb") << "\xff\xff\xff";
  const std::string good = npy_bytes(dir / "t.npy", floats({1, 4}, 1.f));
  std::ofstream(dir / "short.npy", std::ios::binary) << good.substr(0, good.size() - 3);
  write_npz(dir / "text.npz", {{"notes.txt", "hello"}}, false);
  write_npz(dir / "cut.npz", {{"x.npy", good.substr(0, good.size() - 5)}}, true);
  struct Case {
    std::string spec, says;
  } cases[] = {
      {"x=" + (dir / "garbage.npy").string(), "not a .npy file"},
      {"x=" + (dir / "header.npy").string(), "truncated .npy header"},
      {"x=" + (dir / "short.npy").string(), "truncated data"},
      {(dir / "garbage.npz").string(), "not a .npz file"},
      {(dir / "text.npz").string(), "entry 'notes.txt' is not a .npy array"},
      {(dir / "cut.npz").string(), "truncated data"},
      {"x=" + (dir / "garbage.pb").string(), "malformed TensorProto"},
      {"x=" + (dir / "missing.npy").string(), "No such file"},
      {"x=" + (dir / "t.npy").string(), "no error"},
  };
  for (const Case& c : cases) {
    std::string file;
    const std::string msg = spec_error(c.spec, &file);
    EXPECT_NE(msg.find(c.says), std::string::npos) << c.spec << ": " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    if (c.says != "no error") { EXPECT_FALSE(file.empty()) << msg; }
  }
  EXPECT_NE(spec_error("x=" + (dir / "t.npz").string()).find("is a whole input set"), std::string::npos);
  EXPECT_NE(spec_error("y=" + (dir / "t.npy").string()).find("the model has no input 'y'"), std::string::npos);
  EXPECT_NE(spec_error(dir.string()).find("no input_K.pb files"), std::string::npos);
  EXPECT_NE(error_of([&] { f.inputs({.specs = {}, .values = {"n=abc"}, .arrays = {}}); }).find("expected NAME=NUMBER"),
            std::string::npos);

  // A FIFO fails at once instead of waiting for a writer.
  const fs::path fifo = dir / "fifo.npy";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(spec_error("x=" + fifo.string()).find("FIFO"), std::string::npos);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
}

// Generated inputs follow the graph: a sample-rate switch takes each compared value, a length
// feeding a Range and a sequence mask stays within the sequence, named dims get the documented
// default sequence length.
TEST(UserInputs, GeneratedInputsFollowHowTheGraphUsesThem) {
  GraphBuilder b;
  ValueId x = b.input("phonemes", {1, -1}, DType::Int64, {"", "phonemes"});
  ValueId sr = b.input("sr", {}, DType::Int64);
  ValueId lengths = b.input("input_lengths", {1}, DType::Int64);
  ValueId is16k = b.node("Equal", {sr, b.i64("k16", {16000}, true)});
  ValueId is8k = b.node("Equal", {sr, b.i64("k8", {8000}, true)});
  ValueId zero = b.i64("zero", {0}, true), one = b.i64("one", {1}, true);
  ValueId limit = b.node("Squeeze", {lengths});
  ValueId range = b.node("Range", {zero, limit, one});
  ValueId mask = b.node("Less", {b.node("Unsqueeze", {range, zero}), b.node("Unsqueeze", {lengths, one})});
  b.output(x, DType::Int64);
  b.output(is16k, DType::Bool);
  b.output(is8k, DType::Bool);
  b.output(mask, DType::Bool);
  rt::Session s(*b.m);
  rt::InputPlan plan = rt::plan_inputs(b.g(), s.input_values(), {});
  EXPECT_EQ(plan.inputs[0].shape, (rt::Shape{1, rt::kDefaultSequence}));
  EXPECT_EQ(plan.inputs[1].kind, rt::InputSpec::Kind::Choice);
  EXPECT_EQ(plan.inputs[2].kind, rt::InputSpec::Kind::Length);
  std::set<int64_t> rates;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    auto in = rt::make_inputs(plan, seed);
    rates.insert(in[1].get_i64(0));
    const int64_t len = in[2].get_i64(0);
    EXPECT_GE(len, 1);
    EXPECT_LE(len, rt::kDefaultSequence);
    if (seed == 0) { EXPECT_EQ(len, rt::kDefaultSequence); }
    auto out = s.run(in);
    EXPECT_EQ(out[3].shape, (rt::Shape{1, len}));
  }
  EXPECT_EQ(rates, (std::set<int64_t>{16000, 8000}));
}

// The same inside an If body that reads the input from the enclosing graph, and through the
// command line's silero-style shapes: state [2,1,128] and a 512-sample frame.
TEST(UserInputs, ComparedConstantsAreFoundInsideIfBodies) {
  GraphBuilder b;
  Graph& g = b.g();
  ValueId sr = b.input("sr", {}, DType::Int64);
  ValueId flag = b.input("flag", {}, DType::Bool);
  ValueId y = g.add_value(intern("y"));
  const GraphId then_id(static_cast<uint32_t>(b.m->graph_count())), else_id(then_id.index() + 1);
  NodeId node =
      g.add_node(intern("If"), Sym{}, intern("if_node"), std::vector<ValueId>{flag}, std::vector<ValueId>{y},
                 std::vector<NewAttr>{NewAttr::Graph("then_branch", then_id), NewAttr::Graph("else_branch", else_id)});
  for (int64_t rate : {16000, 8000}) {
    Graph& body = b.m->graph(b.m->add_graph(g.id(), node));
    ValueId c = body.add_capture(intern("sr"), sr);
    const std::string k_name = "k" + std::to_string(rate);
    ValueId k = body.add_value(intern(k_name));
    body.set_initializer(k, b.m->tensors.add_owned(intern(k_name), DType::Int64, std::span<const int64_t>{},
                                                   std::as_bytes(std::span<const int64_t>(&rate, 1))));
    ValueId out = body.add_value(intern("eq" + std::to_string(rate)));
    body.add_node(intern("Equal"), Sym{}, intern("eq_node" + std::to_string(rate)), std::vector<ValueId>{c, k},
                  std::vector<ValueId>{out}, {});
    body.set_type(out, DType::Bool, std::vector<Dim>{});
    body.set_graph_outputs({out});
  }
  b.output(y, DType::Bool);
  rt::Session s(*b.m);
  rt::InputPlan plan = rt::plan_inputs(b.g(), s.input_values(), {});
  ASSERT_EQ(plan.inputs[0].kind, rt::InputSpec::Kind::Choice);
  std::vector<double> choices = plan.inputs[0].choices;
  std::sort(choices.begin(), choices.end());
  EXPECT_EQ(choices, (std::vector<double>{8000, 16000}));
  EXPECT_EQ(s.run(rt::make_inputs(plan, 0))[0].get_i64(0), 1);  // flag true, sr the first compared value
}

// Verification on an output that is empty on every seed (NonZero of x > 100 on normal inputs)
// says so instead of passing; an informative output is not flagged.
TEST(UserInputs, DegenerateVerificationIsSaidNeverAPlainPass) {
  GraphBuilder b;
  ValueId x = b.input("x", {1, -1}, DType::Float, {"", "seq"});
  ValueId idx = b.node("NonZero", {b.node("Greater", {x, b.f32("big", {}, {100.f})})}, {}, "idx");
  b.g().set_type(idx, DType::Int64, std::vector<Dim>{Dim::of(2), Dim::symbol(intern("nonzero"))});
  b.output(idx, DType::Int64);
  b.output(b.node("Relu", {x}, {}, "relu"));
  rt::VerifyOptions o;
  o.seeds = 3;
  rt::VerifyReport r = rt::verify(*b.m, *b.m, o);
  EXPECT_TRUE(r.pass);
  ASSERT_TRUE(r.degenerate());
  EXPECT_NE(r.outputs[0].degenerate.find("empty on every seed"), std::string::npos);
  EXPECT_TRUE(r.outputs[1].degenerate.empty());
  EXPECT_NE(r.degenerate_text().find("verified on degenerate inputs: output 'idx' is empty"), std::string::npos);
  EXPECT_NE(r.degenerate_text().find("--inputs"), std::string::npos);
  EXPECT_EQ(r.to_json()["degenerate"], true);
  EXPECT_NE(r.to_text().find("DEGENERATE"), std::string::npos);

  // With inputs that reach the threshold, the same output is informative.
  std::vector<float> big(16, 200.f);
  o.inputs.arrays.push_back({"x", "test", rt::Tensor::view(DType::Float, {1, 16}, big.data()).clone()});
  o.seeds = 1;
  rt::VerifyReport given = rt::verify(*b.m, *b.m, o);
  EXPECT_FALSE(given.degenerate()) << given.degenerate_text();
  EXPECT_EQ(given.outputs[0].shape, (rt::Shape{2, 16}));
}

// An output that does not change although the inputs do, and one whose value-dependent size
// stays tiny while it varies, are degenerate; a fixed small size (a pooled dim) is not.
TEST(UserInputs, ConstantOutputsAreDegenerate) {
  GraphBuilder b;
  ValueId x = b.input("x", {1, 32});
  ValueId c = b.node("Mul", {b.node("Shape", {x}), b.i64("z", {0}, true)}, {}, "zeros");
  b.output(c, DType::Int64);
  b.output(b.node("ReduceMean", {x}, {NewAttr::Ints("axes", {1})}, "mean"));
  rt::VerifyOptions o;
  o.seeds = 3;
  rt::VerifyReport r = rt::verify(*b.m, *b.m, o);
  EXPECT_NE(r.outputs[0].degenerate.find("the same values on every seed"), std::string::npos);
  EXPECT_TRUE(r.outputs[1].degenerate.empty());
}
