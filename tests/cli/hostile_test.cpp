// Hostile input through the command line (issue 14): each test is the minimal reproducer of a
// crash, hang or silent wrong result found against the binary, run as a user runs it. Every run
// must end by itself with exit 2 (bad input) and a message that names the problem: never a
// signal, never a hang.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "io/model_io.h"
#include "tests/cli/cli_runner.h"
#include "tests/common/models.h"
#include "tests/common/proto_builder.h"

namespace fs = std::filesystem;
using namespace onnxforge;
using namespace onnxforge::test;
using ::testing::HasSubstr;

namespace {

constexpr int kFloat = onnx::TensorProto::FLOAT, kInt64 = onnx::TensorProto::INT64, kBool = onnx::TensorProto::BOOL;

fs::path write_to(const onnx::ModelProto& m, const std::string& tag, const std::string& name = "model.onnx") {
  fs::path p = temp_dir(tag) / name;
  write_model(m, p);
  return p;
}

// Runs `args` and expects a clean refusal: exit 2 with `needle` in the message.
void expect_refused(const std::vector<std::string>& args, const std::string& needle, double timeout = 120) {
  CliResult r = run_cli(args, timeout);
  std::string cmd;
  for (const auto& a : args) cmd += a + " ";
  ASSERT_TRUE(r.exited()) << cmd << r.describe();
  EXPECT_EQ(r.code, 2) << cmd << r.describe();
  EXPECT_THAT(r.err, HasSubstr(needle)) << cmd << r.describe();
}

onnx::ModelProto if_with_empty_branches() {
  auto n = make_node("If", {"c"}, {"y"}, "if0");
  for (const char* b : {"then_branch", "else_branch"}) {
    auto* a = n.add_attribute();
    a->set_name(b);
    a->set_type(onnx::AttributeProto::GRAPH);
  }
  return make_model({n}, {tensor_info("c", kBool, {})}, {tensor_info("y", kFloat, {1})});
}

onnx::ModelProto conv_with_strides(std::vector<int64_t> strides) {
  auto n = make_node("Conv", {"x", "w"}, {"y"}, "conv0");
  add_ints(n, "strides", strides);
  return make_model({n}, {tensor_info("x", kFloat, {1, 1, 8, 8})}, {tensor_info("y", kFloat, {})},
                    {float_tensor("w", {2, 1, 3, 3}, std::vector<float>(18, 1.f))});
}

// A Loop whose body stacks a 4 KiB scan output per iteration, `trips` times.
onnx::ModelProto stacking_loop(int64_t trips) {
  onnx::GraphProto body;
  body.set_name("body");
  *body.add_node() = make_node("Identity", {"cond_in"}, {"cond_out"}, "keep_going");
  *body.add_node() = make_node("Identity", {"v"}, {"scan"}, "emit");
  *body.add_input() = tensor_info("i", kInt64, {});
  *body.add_input() = tensor_info("cond_in", kBool, {});
  *body.add_output() = tensor_info("cond_out", kBool, {});
  *body.add_output() = tensor_info("scan", kFloat, {1024});
  *body.add_initializer() = float_tensor("v", {1024}, std::vector<float>(1024, 1.f));
  auto n = make_node("Loop", {"M", "cond"}, {"out"}, "loop0");
  auto* a = n.add_attribute();
  a->set_name("body");
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = body;
  onnx::TensorProto cond;
  cond.set_name("cond");
  cond.set_data_type(kBool);
  cond.set_raw_data(std::string(1, '\1'));
  return make_model({n}, {}, {tensor_info("out", kFloat, {})}, {int64_tensor("M", {}, {trips}), cond});
}

// A Loop of `trips` iterations that adds `adds` to a carried value (one Add node each) and has
// no scan outputs: nothing grows, so the memory budget never stops it. With inner_trips, each
// of its iterations runs an inner Loop of inner_trips such iterations instead.
onnx::GraphProto counting_body(int adds, int64_t inner_trips = 0);

onnx::NodeProto loop_node(const std::string& name, const std::string& trips, const std::string& acc_in,
                          const std::string& acc_out, const onnx::GraphProto& body) {
  auto n = make_node("Loop", {trips, "cond", acc_in}, {acc_out}, name);
  auto* a = n.add_attribute();
  a->set_name("body");
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = body;
  return n;
}

onnx::TensorProto true_tensor() {
  onnx::TensorProto cond;
  cond.set_name("cond");
  cond.set_data_type(kBool);
  cond.set_raw_data(std::string(1, '\1'));
  return cond;
}

onnx::GraphProto counting_body(int adds, int64_t inner_trips) {
  onnx::GraphProto body;
  body.set_name("body");
  *body.add_node() = make_node("Identity", {"cond_in"}, {"cond_out"}, "keep_going");
  if (inner_trips) {
    *body.add_node() = loop_node("inner0", "M_inner", "acc_in", "acc_out", counting_body(adds));
    *body.add_initializer() = int64_tensor("M_inner", {}, {inner_trips});
  } else {
    for (int k = 0; k < adds; ++k)
      *body.add_node() = make_node("Add", {k ? "t" + std::to_string(k - 1) : "acc_in", "one"},
                                   {k + 1 == adds ? "acc_out" : "t" + std::to_string(k)}, "count" + std::to_string(k));
    *body.add_initializer() = float_tensor("one", {1}, {1.f});
  }
  *body.add_input() = tensor_info("i", kInt64, {});
  *body.add_input() = tensor_info("cond_in", kBool, {});
  *body.add_input() = tensor_info("acc_in", kFloat, {1});
  *body.add_output() = tensor_info("cond_out", kBool, {});
  *body.add_output() = tensor_info("acc_out", kFloat, {1});
  return body;
}

onnx::ModelProto counting_loop(int64_t trips, int adds = 1, int64_t inner_trips = 0) {
  return make_model({loop_node("loop0", "M", "a0", "acc", counting_body(adds, inner_trips))},
                    {tensor_info("a0", kFloat, {1})}, {tensor_info("acc", kFloat, {1})},
                    {int64_tensor("M", {}, {trips}), true_tensor()});
}

}  // namespace

TEST(Hostile, LoopsThatAllocateNothingStop) {
  // 2^62 trips of a body that allocates nothing ran until killed, in `run` and in `optimize`'s
  // verification: the iteration limit refuses it after the first iteration (the body's
  // condition is its input passed through, so every trip would run).
  fs::path m = write_to(counting_loop(int64_t{1} << 62), "loopcount");
  expect_refused({"run", m},
                 "would run all 4611686018427387904 iterations of its trip count at 4 node steps each (the body's "
                 "condition is always true): over the limit of 8388608 node steps per Loop (iterations x the body's "
                 "nodes + 2; raise it with --max-loop-iterations N)",
                 60);
  expect_refused({"optimize", m, m.parent_path() / "out.onnx"}, "--max-loop-iterations", 60);
  // With the limit raised past the trip count (2^60 trips of 4 steps), the time budget stops
  // it, naming the node.
  fs::path m60 = write_to(counting_loop(int64_t{1} << 60), "loopcount60");
  expect_refused({"run", m60, "--max-loop-iterations", "9000000000000000000", "--max-time", "1"}, "loop0' (Loop)", 60);
  expect_refused({"run", m60, "--max-loop-iterations", "9000000000000000000", "--max-time", "0.5"},
                 "over the time budget of 500.0 ms (raise it with --max-time SECONDS)", 60);
  // Under the limits, the same Loop runs: 1000 trips of 4 steps (Identity, Add, the iteration's
  // own 2) add 1000.
  fs::path ok = write_to(counting_loop(1000), "loopcount_ok");
  CliResult r = run_cli({"run", ok, "--max-loop-iterations", "4000", "--max-time", "60"}, 60);
  EXPECT_EQ(r.code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("sum 100")) << r.describe();  // 1000 + a0, a generated value in [0, 2)
  // Malformed limits are usage errors naming the option.
  expect_refused({"run", ok, "--max-time", "-1"}, "--max-time");
  expect_refused({"run", ok, "--max-loop-iterations", "abc"}, "--max-loop-iterations");
  // Past 2^63 - 1 strtoll saturates; that is refused, not read as the largest limit.
  expect_refused({"run", ok, "--max-loop-iterations", "99999999999999999999999"}, "--max-loop-iterations");
}

TEST(Hostile, LoopStepsCountTheBodyAndNestedLoops) {
  // The limit counts node steps, not iterations: under an iteration limit (2^24 before), 10^4
  // trips of a 1000-node body were allowed and so was anything nested; a 1000-node body costs
  // 375 us per iteration, so 2^24 of them would have run for 1.7 hours.
  fs::path big = write_to(counting_loop(10000, 1000), "loopsteps_big");
  expect_refused({"run", big},
                 "would run all 10000 iterations of its trip count at 1003 node steps each (the body's condition is "
                 "always true): over the limit of 8388608 node steps per Loop",
                 60);
  fs::path fits = write_to(counting_loop(500, 1000), "loopsteps_fits");
  CliResult r = run_cli({"run", fits, "--max-loop-iterations", "501500"}, 120);  // 500 x 1003: fits exactly
  EXPECT_EQ(r.code, 0) << r.describe();
  expect_refused({"run", fits, "--max-loop-iterations", "501499"}, "would run all 500 iterations", 60);
  // Nested: 100 outer trips of 1000 inner ones (4 steps each) are 4 * 10^5 inner steps. Each
  // Loop alone is far under a limit of 10^5, but the inner ones spend from the outer's budget.
  fs::path nested = write_to(counting_loop(100, 1, 1000), "loopsteps_nested");
  expect_refused({"run", nested, "--max-loop-iterations", "100000"},
                 "node 'inner0' (Loop): would run all 1000 iterations of its trip count at 4 node steps each", 60);
  r = run_cli({"run", nested, "--max-loop-iterations", "500000"}, 120);  // 100 x (4 + 1000 x 4) = 400400
  EXPECT_EQ(r.code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("sum 100")) << r.describe();  // 100000 + a0
}

TEST(Hostile, SubgraphAttributeDeclaredButEmptyInEveryCommand) {
  fs::path m = write_to(if_with_empty_branches(), "emptygraph");
  fs::path out = m.parent_path() / "out.onnx";
  for (std::vector<std::string> args : {std::vector<std::string>{"inspect", m},
                                        {"convert", m, out},
                                        {"optimize", m, out},
                                        {"run", m},
                                        {"hierarchy", m}})
    expect_refused(args, "declared GRAPH but holds no graph");
}

TEST(Hostile, TensorAttributeDeclaredButEmpty) {
  auto n = make_node("Constant", {}, {"y"}, "const0");
  auto* a = n.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  fs::path m = write_to(make_model({n}, {}, {tensor_info("y", kFloat, {1})}), "emptytensor");
  expect_refused({"convert", m, m.parent_path() / "out.onnx"}, "declared TENSOR but holds no tensor");
  expect_refused({"optimize", m, m.parent_path() / "out2.onnx"}, "declared TENSOR but holds no tensor");
}

TEST(Hostile, ConvStridesZero) {
  fs::path m = write_to(conv_with_strides({0, 0}), "strides0");
  expect_refused({"run", m}, "strides must be positive");
  expect_refused({"optimize", m, m.parent_path() / "out.onnx"}, "strides must be positive");
  // A strides list of the wrong length was read past its end.
  fs::path m1 = write_to(conv_with_strides({1}), "strides1");
  expect_refused({"run", m1}, "strides has 1 values");
}

TEST(Hostile, ConvAttributeOfTheWrongType) {
  // `strides` as an INT, not INTS: refused, never run silently with stride 1.
  auto n = make_node("Conv", {"x", "w"}, {"y"}, "conv0");
  add_int(n, "strides", 2);
  fs::path m = write_to(make_model({n}, {tensor_info("x", kFloat, {1, 1, 8, 8})}, {tensor_info("y", kFloat, {})},
                                   {float_tensor("w", {2, 1, 3, 3}, std::vector<float>(18, 1.f))}),
                        "stridesint");
  expect_refused({"run", m}, "attribute 'strides' is INT, but Conv defines it as INTS");
}

TEST(Hostile, EmptyFirstInputName) {
  // Mul("", half): the identity-op pass read the absent input's type out of bounds (SIGSEGV).
  onnx::TensorProto half = float_tensor("half", {}, {0.5f});
  fs::path m = write_to(make_model({make_node("Mul", {"", "half"}, {"y"}, "mul0")}, {tensor_info("x", kFloat, {2})},
                                   {tensor_info("y", kFloat, {2})}, {half}),
                        "emptyname");
  for (std::vector<std::string> args :
       {std::vector<std::string>{"optimize", m, m.parent_path() / "out.onnx"}, {"run", m}})
    expect_refused(args, "node 'mul0' (Mul): input 0 is required");
  // Without verification the passes must leave it alone (or refuse it), not crash.
  CliResult r = run_cli({"optimize", m, m.parent_path() / "out2.onnx", "--no-verify"});
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_TRUE(r.code == 0 || r.code == 2) << r.describe();
}

TEST(Hostile, InputWithTwoToThe31Elements) {
  fs::path m =
      write_to(make_model({make_node("Relu", {"x"}, {"y"}, "relu0")}, {tensor_info("x", kFloat, {int64_t{1} << 31})},
                          {tensor_info("y", kFloat, {int64_t{1} << 31})}),
               "input2p31");
  expect_refused({"run", m, "--max-memory", "1G"}, "input 'x' of shape [2147483648]");
  expect_refused({"run", m, "--max-memory", "1G"}, "memory budget of 1.00 GiB");
  // Dims whose product overflows are refused whatever the budget.
  fs::path big = write_to(
      make_model({make_node("Relu", {"x"}, {"y"}, "relu0")},
                 {tensor_info("x", kFloat, {int64_t{1} << 40, int64_t{1} << 40})}, {tensor_info("y", kFloat, {})}),
      "input2p80");
  expect_refused({"run", big}, "more elements than memory can address");
}

TEST(Hostile, RangeToTwoToThe62) {
  fs::path m = write_to(
      make_model({make_node("Range", {"s", "l", "d"}, {"y"}, "range0")}, {}, {tensor_info("y", kInt64, {})},
                 {int64_tensor("s", {}, {0}), int64_tensor("l", {}, {int64_t{1} << 62}), int64_tensor("d", {}, {1})}),
      "range");
  expect_refused({"run", m}, "range0");
  expect_refused({"optimize", m, m.parent_path() / "out.onnx"}, "range0");
  // --no-verify: folding must not crash either (it leaves the node, or refuses).
  CliResult r = run_cli({"optimize", m, m.parent_path() / "out2.onnx", "--no-verify"});
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_TRUE(r.code == 0 || r.code == 2) << r.describe();
}

TEST(Hostile, Complex128StoredAsInt64Values) {
  onnx::TensorProto t;
  t.set_name("c");
  t.set_data_type(onnx::TensorProto::COMPLEX128);
  t.add_dims(2);
  for (int64_t v : {1, 2, 3, 4}) t.add_int64_data(v);
  fs::path m = write_to(make_model({make_node("Identity", {"c"}, {"y"}, "id0")}, {}, {tensor_info("y", 15, {2})}, {t}),
                        "complex");
  expect_refused({"inspect", m}, "stores its data in int64_data, which cannot hold that type");
}

TEST(Hostile, FifoModelAndExternalData) {
  fs::path dir = temp_dir("fifo");
  ASSERT_EQ(::mkfifo((dir / "model.onnx").c_str(), 0644), 0);
  for (const char* cmd : {"inspect", "convert", "optimize", "run", "hierarchy"}) {
    std::vector<std::string> args{cmd, (dir / "model.onnx").string()};
    if (std::string(cmd) == "convert" || std::string(cmd) == "optimize") args.push_back((dir / "out.onnx").string());
    expect_refused(args, "is a FIFO (named pipe), not a regular file", 60);
  }
  // External data that is a FIFO, a directory or a character device.
  auto m = tiny_model();
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(kFloat);
  t->add_dims(4);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* e = t->add_external_data();
  e->set_key("location");
  e->set_value("w.bin");
  fs::path ext = temp_dir("fifo_ext");
  write_model(m, ext / "model.onnx");
  ASSERT_EQ(::mkfifo((ext / "w.bin").c_str(), 0644), 0);
  expect_refused({"inspect", (ext / "model.onnx").string()}, "is a FIFO (named pipe)", 60);
  fs::remove(ext / "w.bin");
  fs::create_directory(ext / "w.bin");
  expect_refused({"inspect", (ext / "model.onnx").string()}, "is a directory, not a regular file");
}

TEST(Hostile, LoopTripCountsAreBounded) {
  // Under the default limits: the body's condition is Identity(cond_in), so all 2^62 trips
  // would run, which the Loop step limit refuses before the first.
  fs::path m = write_to(stacking_loop(int64_t{1} << 62), "loop62");
  CliResult r = run_cli({"run", m}, 300);
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code, 2) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("loop0")) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("would run all 4611686018427387904 iterations")) << r.describe();
  // With the step limit out of the way (2^40 trips, 2^50 steps allowed), the memory budget
  // refuses the scan outputs' total after the first trip (it ran 4.5 million iterations, 53 s,
  // before the running total reached the budget): a given one, and the default (3/4 of RAM).
  fs::path m40 = write_to(stacking_loop(int64_t{1} << 40), "loop40");
  r = run_cli({"run", m40, "--max-loop-iterations", "1125899906842624", "--max-memory", "64M"}, 300);
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code, 2) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("memory budget of 64.0 MiB")) << r.describe();
  r = run_cli({"run", m40, "--max-loop-iterations", "1125899906842624"}, 300);
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code, 2) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("the scan outputs of all 1099511627776 iterations (4")) << r.describe();
  // 2^64 - 1 stored in an int64 reads as -1: refused instead of running zero iterations.
  fs::path neg = write_to(stacking_loop(-1), "loopneg");
  expect_refused({"run", neg}, "trip count M = -1 is negative");
}

TEST(Hostile, ConstantOfShapeOverflow) {
  fs::path m =
      write_to(make_model({make_node("ConstantOfShape", {"shape"}, {"y"}, "cos0")}, {}, {tensor_info("y", kFloat, {})},
                          {int64_tensor("shape", {3}, {int64_t{1} << 32, int64_t{1} << 32, 2})}),
               "cos");
  fs::path out = m.parent_path() / "outs";
  expect_refused({"run", m, "--out", out.string()}, "more elements than memory can address");
  EXPECT_FALSE(fs::exists(out / "y.npy"));  // an .npy numpy cannot load was written before
}

TEST(Hostile, IrVersion3InitializersPassTheChecker) {
  // IR 3: every initializer must be a graph input too. Turning the Constant node into an
  // initializer added one that was not (the ONNX checker rejected the output).
  auto k = make_node("Constant", {}, {"k"}, "k0");
  auto* a = k.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  *a->mutable_t() = float_tensor("kv", {4}, {1, 2, 3, 4});
  auto mul = make_node("Mul", {"x", "k"}, {"y"}, "mul0");
  auto m = make_model({k, mul}, {tensor_info("x", kFloat, {4})}, {tensor_info("y", kFloat, {4})}, {}, 8, 3);
  fs::path in = write_to(m, "ir3");
  fs::path out = in.parent_path() / "out.onnx";
  CliResult r = run_cli({"optimize", in, out});
  ASSERT_TRUE(r.exited() && r.code == 0) << r.describe();
  std::string check =
      "/usr/bin/python3 -c \"import onnx,sys; m=onnx.load(sys.argv[1]); onnx.checker.check_model(m); "
      "print(len(m.graph.initializer), len(m.graph.input))\" " +
      out.string() + " 2>&1";
  FILE* p = ::popen(check.c_str(), "r");
  char buf[4096] = {};
  size_t n = std::fread(buf, 1, sizeof buf - 1, p);
  int status = ::pclose(p);
  EXPECT_EQ(status, 0) << std::string(buf, n);
}

TEST(Hostile, ExternalFileMustStayInTheOutputFolder) {
  fs::path in = write_to(tiny_model(), "extfile");
  fs::path dir = in.parent_path() / "out";
  fs::create_directory(dir);
  expect_refused({"convert", in, (dir / "m.onnx").string(), "--external-data", "--external-file", "../x.data"},
                 "must be a file name relative to the output's folder");
  expect_refused({"convert", in, (dir / "m.onnx").string(), "--external-data", "--external-file", "/tmp/x.data"},
                 "must be a file name relative to the output's folder");
  EXPECT_FALSE(fs::exists(in.parent_path() / "x.data"));
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST(Hostile, ReportToAnUnwritablePath) {
  fs::path in = write_to(tiny_model(), "report");
  fs::path out = in.parent_path() / "out.onnx";
  expect_refused({"optimize", in, out, "--report", "/nonexistent/dir/r.json"}, "--report");
  EXPECT_FALSE(fs::exists(out));  // refused before any work
}

TEST(Hostile, ConvertDoesNotOverwriteUnlessAsked) {
  fs::path in = write_to(tiny_model(), "overwrite");
  fs::path out = in.parent_path() / "out.onnx";
  write_bytes(out, "precious");
  expect_refused({"convert", in, out}, "exists; pass --overwrite");
  EXPECT_EQ(read_bytes(out), "precious");
  CliResult r = run_cli({"convert", in, out, "--overwrite"});
  EXPECT_EQ(r.code, 0) << r.describe();
  EXPECT_NE(read_bytes(out), "precious");
  r = run_cli({"convert", in, out, "--force"});
  EXPECT_EQ(r.code, 0) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("--force is deprecated"));
}

TEST(Hostile, StaleTemporaryFilesAreRemoved) {
  fs::path in = write_to(tiny_model(), "stale");
  fs::path dir = in.parent_path();
  // A temporary of a process that no longer exists (pid_max + 1 never runs), and one of a live
  // process (ours), which must be left alone.
  std::ifstream pm("/proc/sys/kernel/pid_max");
  long pid_max = 4194304;
  pm >> pid_max;
  fs::path stale = dir / (".out.onnx.onnxforge-tmp." + std::to_string(pid_max + 1) + ".42");
  fs::path live = dir / (".out.onnx.onnxforge-tmp." + std::to_string(::getpid()) + ".43");
  write_bytes(stale, "half a model");
  write_bytes(live, "being written");
  CliResult r = run_cli({"convert", in, dir / "out.onnx"});
  ASSERT_EQ(r.code, 0) << r.describe();
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live));
}

TEST(Hostile, SigkillWhileWritingLeavesNothingBehind) {
  // A model large enough that writing it takes a while; killed at several points of the write,
  // the folder holds either nothing new or the complete output, never a temporary.
  auto m = tiny_model();
  *m.mutable_graph()->add_initializer() = float_tensor("w", {1 << 24}, std::vector<float>(1 << 24, 0.5f));
  fs::path in = write_to(m, "sigkill");
  for (int delay_ms : {5, 20, 60, 150}) {
    fs::path dir = temp_dir("sigkill_out");
    pid_t pid = ::fork();
    if (pid == 0) {
      int devnull = ::open("/dev/null", O_WRONLY);
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
      std::string bin = onnxforge_binary().string(), a = in.string(), b = (dir / "out.onnx").string();
      char* argv[] = {bin.data(), const_cast<char*>("convert"), a.data(), b.data(), nullptr};
      ::execv(bin.c_str(), argv);
      ::_exit(127);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    for (const auto& e : fs::directory_iterator(dir)) {
      EXPECT_EQ(e.path().filename(), "out.onnx") << "left behind after SIGKILL at " << delay_ms << " ms";
      EXPECT_NO_THROW(load_model(e.path()));
    }
  }
}
