// The file rules (issue 26, docs/cli.md "Files"): what the command line may write and read, and
// the second round of hostile inputs it found (recursive functions, data-sized kernels, declared
// types). Each test builds its reproducer and runs the binary as a user would; every refusal is
// exit 2 with a message naming the path, and nothing outside the declared outputs changes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"
#include "tests/common/models.h"
#include "tests/common/proto_builder.h"

namespace fs = std::filesystem;
using namespace onnxforge;
using namespace onnxforge::test;
using ::testing::HasSubstr;

namespace {

constexpr int kFloat = onnx::TensorProto::FLOAT, kInt64 = onnx::TensorProto::INT64;

// y = x + w, with a 16 KiB initializer (so --external-data writes a data file).
onnx::ModelProto add_model() {
  return make_model({make_node("Add", {"x", "w"}, {"y"}, "add0")}, {tensor_info("x", kFloat, {64, 64})},
                    {tensor_info("y", kFloat, {64, 64})},
                    {float_tensor("w", {64, 64}, std::vector<float>(4096, 0.5f))});
}

// Every entry of a folder: kind, inode, size and bytes (regular files), link target (links).
using Snapshot = std::map<std::string, std::string>;
Snapshot snapshot(const fs::path& dir) {
  Snapshot s;
  for (const auto& e : fs::directory_iterator(dir)) {
    struct stat st {};
    ::lstat(e.path().c_str(), &st);
    std::string v = std::to_string(st.st_mode) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size);
    if (S_ISREG(st.st_mode)) v += ":" + read_bytes(e.path());
    if (S_ISLNK(st.st_mode)) v += ":" + fs::read_symlink(e.path()).string();
    s[e.path().filename().string()] = v;
  }
  return s;
}

void expect_refused(const std::vector<std::string>& args, const std::string& needle) {
  CliResult r = run_cli(args, 120);
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code, 2) << r.describe();
  EXPECT_THAT(r.err, HasSubstr(needle)) << r.describe();
}

struct Folder {
  fs::path dir, model;
  explicit Folder(const std::string& tag) : dir(temp_dir(tag)), model(dir / "m.onnx") {
    write_model(add_model(), model);
  }
  std::string at(const std::string& name) const { return (dir / name).string(); }
};

}  // namespace

TEST(Files, OverwriteRefusesDevicesFifosDirectoriesAndLinks) {
  // `-o /dev/null --overwrite` replaced the system's /dev/null with a regular file, and
  // `-o link --overwrite` replaced the link. Both are refused, with or without --overwrite.
  Folder f("files_devices");
  ASSERT_EQ(::mkfifo(f.at("fifo").c_str(), 0644), 0);
  fs::create_directory(f.at("dir"));
  write_bytes(f.at("target.onnx"), "keep");
  fs::create_symlink("target.onnx", f.at("link.onnx"));
  fs::create_symlink("nowhere.onnx", f.at("dangling.onnx"));
  const Snapshot before = snapshot(f.dir);
  struct stat null_before {};
  ASSERT_EQ(::stat("/dev/null", &null_before), 0);
  for (const char* cmd : {"optimize", "convert"}) {
    expect_refused({cmd, f.model.string(), "/dev/null", "--overwrite"}, "character device");
    expect_refused({cmd, f.model.string(), f.at("fifo"), "--overwrite"}, "FIFO");
    expect_refused({cmd, f.model.string(), f.at("dir"), "--overwrite"}, "directory");
    expect_refused({cmd, f.model.string(), f.at("link.onnx"), "--overwrite"}, "symbolic link to 'target.onnx'");
    expect_refused({cmd, f.model.string(), f.at("dangling.onnx")}, "symbolic link");
  }
  expect_refused({"optimize", f.model.string(), f.at("o.onnx"), "--report", "/dev/null", "--overwrite"},
                 "--report '/dev/null'");
  struct stat null_after {};
  ASSERT_EQ(::stat("/dev/null", &null_after), 0);
  EXPECT_TRUE(S_ISCHR(null_after.st_mode));
  EXPECT_EQ(null_before.st_ino, null_after.st_ino);
  EXPECT_EQ(snapshot(f.dir), before);
}

TEST(Files, OverwriteCoversTheWholeOutputSet) {
  // The external-data file replaced an existing file without --overwrite (out.onnx.data,
  // --external-file notes.txt, --external-file other.onnx).
  Folder f("files_set");
  write_bytes(f.at("out.onnx.data"), "old data");
  write_bytes(f.at("notes.txt"), "my notes");
  write_model(add_model(), f.at("other.onnx"));
  const Snapshot before = snapshot(f.dir);
  expect_refused({"convert", f.model.string(), f.at("out.onnx"), "--external-data"}, "out.onnx.data' exists");
  expect_refused({"convert", f.model.string(), f.at("new.onnx"), "--external-data", "--external-file", "notes.txt"},
                 "notes.txt' exists");
  expect_refused({"convert", f.model.string(), f.at("new.onnx"), "--external-data", "--external-file", "other.onnx"},
                 "other.onnx' exists");
  expect_refused(
      {"convert", f.model.string(), f.at("new.onnx"), "--external-data", "--external-file", "m.onnx", "--overwrite"},
      "one of the command's inputs");
  EXPECT_EQ(snapshot(f.dir), before);
  // With --overwrite the set is replaced, and the result loads.
  CliResult r = run_cli({"convert", f.model.string(), f.at("out.onnx"), "--external-data", "--overwrite"});
  ASSERT_EQ(r.code, 0) << r.describe();
  EXPECT_NE(read_bytes(f.at("out.onnx.data")), "old data");
  r = run_cli({"run", f.at("out.onnx")});
  EXPECT_EQ(r.code, 0) << r.describe();
}

TEST(Files, ReportNeverReplacesAnInputOrAnExistingFile) {
  // `--report in.onnx` turned the input model into JSON (exit 0).
  Folder f("files_report");
  fs::create_hard_link(f.model, f.at("hard.onnx"));
  write_bytes(f.at("r.json"), "previous");
  const Snapshot before = snapshot(f.dir);
  expect_refused({"optimize", f.model.string(), f.at("o.onnx"), "--report", f.model.string(), "--overwrite"},
                 "one of the command's inputs");
  expect_refused({"optimize", f.model.string(), f.at("o.onnx"), "--report", f.at("hard.onnx"), "--overwrite"},
                 "one of the command's inputs");
  expect_refused({"optimize", f.model.string(), f.at("o.onnx"), "--report", f.at("r.json")}, "r.json' exists");
  expect_refused({"optimize", f.model.string(), f.at("o.onnx"), "--report", f.at("o.onnx")}, "same file");
  expect_refused({"optimize", f.model.string(), f.at("hard.onnx"), "--overwrite"}, "one of the command's inputs");
  CliResult j = run_cli({"optimize", f.model.string(), f.at("o.onnx"), "--report", f.model.string(), "--json"});
  EXPECT_EQ(j.code, 2) << j.describe();
  auto err = nlohmann::json::parse(j.out)["error"];
  EXPECT_EQ(err["kind"], "usage") << j.describe();
  EXPECT_EQ(err["file"], f.model.string()) << j.describe();
  EXPECT_EQ(snapshot(f.dir), before);
  CliResult r = run_cli({"optimize", f.model.string(), f.at("o.onnx"), "--report", f.at("r.json"), "--overwrite"});
  ASSERT_EQ(r.code, 0) << r.describe();
  EXPECT_TRUE(nlohmann::json::parse(read_bytes(f.at("r.json"))).contains("output"));
  // No temporary is left behind, whatever its name.
  for (const auto& e : fs::directory_iterator(f.dir))
    EXPECT_EQ(e.path().filename().string().find("onnxforge-tmp"), std::string::npos) << e.path();
}

TEST(Files, RunOutFilesAreNotReplacedAndNamesDoNotCollide) {
  // `run --out DIR` replaced existing .npy files, and outputs `a/b` and `a_b` became one file.
  Folder f("files_run_out");
  auto m =
      make_model({make_node("Relu", {"x"}, {"a/b"}, "r0"), make_node("Neg", {"x"}, {"a_b"}, "n0")},
                 {tensor_info("x", kFloat, {2})}, {tensor_info("a/b", kFloat, {2}), tensor_info("a_b", kFloat, {2})});
  write_model(m, f.at("two.onnx"));
  fs::create_directory(f.at("out"));
  CliResult r = run_cli({"run", f.at("two.onnx"), "--out", f.at("out"), "--json"});
  ASSERT_EQ(r.code, 0) << r.describe();
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["outputs"].size(), 2u);
  EXPECT_NE(j["outputs"][0]["file"], j["outputs"][1]["file"]);
  EXPECT_TRUE(fs::exists(f.at("out/a_b.npy")));
  EXPECT_TRUE(fs::exists(f.at("out/a_b_2.npy")));
  const Snapshot before = snapshot(f.at("out"));
  expect_refused({"run", f.at("two.onnx"), "--out", f.at("out")}, "a_b.npy' exists");
  EXPECT_EQ(snapshot(f.at("out")), before);
  r = run_cli({"run", f.at("two.onnx"), "--out", f.at("out"), "--overwrite"});
  EXPECT_EQ(r.code, 0) << r.describe();
  // An --out file that is the model's own input file is refused, --overwrite or not.
  fs::create_directory(f.at("out2"));
  fs::create_hard_link(f.at("two.onnx"), f.at("out2/a_b.npy"));
  expect_refused({"run", f.at("two.onnx"), "--out", f.at("out2"), "--overwrite"}, "one of the command's inputs");
}

TEST(Files, SideFilesMustBeRegularFiles) {
  // A FIFO sidecar hung forever; `--input x=/dev/zero` grew to 2 GB and aborted; /dev/urandom
  // ran until killed; a directory gave "element type undefined".
  Folder f("files_side");
  ASSERT_EQ(::mkfifo(f.at("fifo").c_str(), 0644), 0);
  fs::create_directory(f.at("dir"));
  for (const std::string& side : {f.at("fifo"), std::string("/dev/zero"), std::string("/dev/urandom"), f.at("dir")}) {
    expect_refused({"run", f.model.string(), "--input", "x=" + side}, "not a regular file");
    expect_refused({"hierarchy", f.model.string(), "--hierarchy", side},
                   side == f.at("dir") ? "directory" : "not a regular file");
  }
  write_bytes(f.at("list.json"), "[1, 2, 3]");
  expect_refused({"hierarchy", f.model.string(), "--hierarchy", f.at("list.json")}, "not a JSON object");
}

TEST(Files, FullDiskNamesThePathAndTheReason) {
  // A full disk was reported as "cannot write 'output'" (the literal word).
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount a small tmpfs";
  Folder f("files_full");
  fs::path mnt = f.at("small");
  fs::create_directory(mnt);
  if (std::system(("mount -t tmpfs -o size=64k tmpfs " + mnt.string() + " 2>/dev/null").c_str()) != 0)
    GTEST_SKIP() << "cannot mount a tmpfs here";
  // Fill the file system first: the model's 16 KiB of weights then do not fit.
  if (std::system(("dd if=/dev/zero of=" + (mnt / "fill").string() + " bs=4k count=100 2>/dev/null").c_str()) == 0)
    ADD_FAILURE() << "the small tmpfs did not fill";
  CliResult r = run_cli({"convert", f.model.string(), (mnt / "o2.onnx").string(), "--external-data"});
  std::system(("umount " + mnt.string()).c_str());
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code, 2) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("o2.onnx"));
  EXPECT_THAT(r.err, HasSubstr("No space left on device"));
}

TEST(Files, RecursiveFunctionsAreRefused) {
  // A function calling itself (or two calling each other) crashed optimize --no-verify, audit,
  // attribute and convert --target-opset with SIGSEGV.
  Folder f("files_recursive");
  for (int pair = 0; pair < 2; ++pair) {
    auto m = make_model({make_node("F", {"x"}, {"y"}, "call0")}, {tensor_info("x", kFloat, {2})},
                        {tensor_info("y", kFloat, {2})}, {}, 17);
    m.mutable_graph()->mutable_node(0)->set_domain("local");
    auto* op = m.add_opset_import();
    op->set_domain("local");
    op->set_version(1);
    auto add_fn = [&](const std::string& name, const std::string& calls) {
      auto* fn = m.add_functions();
      fn->set_name(name);
      fn->set_domain("local");
      fn->add_input("a");
      fn->add_output("b");
      auto* n = fn->add_node();
      *n = make_node(calls, {"a"}, {"b"}, "inner");
      n->set_domain("local");
      auto* o = fn->add_opset_import();
      o->set_version(17);
    };
    if (pair)
      add_fn("F", "G"), add_fn("G", "F");
    else
      add_fn("F", "F");
    const std::string p = f.at("rec" + std::to_string(pair) + ".onnx");
    write_model(m, p);
    const std::string needle = pair ? "local::F -> local::G -> local::F" : "local::F -> local::F";
    expect_refused({"optimize", p, f.at("o.onnx"), "--no-verify"}, needle);
    expect_refused({"audit", p}, "recursive");
    expect_refused({"attribute", p}, "recursive");
    expect_refused({"convert", p, f.at("c.onnx"), "--target-opset", "18"}, "recursive");
    expect_refused({"inspect", p}, "recursive");
  }
}

TEST(Files, DataSizedKernelsStopBeforeAllocating) {
  // Resize with sizes of 2^40 aborted inside the allocator (no message, no JSON even with
  // --max-memory 1G --json): the output and its tables are checked against the budget first.
  Folder f("files_kernels");
  struct Case {
    std::string name;
    onnx::ModelProto m;
  };
  std::vector<Case> cases;
  auto resize = make_model({make_node("Resize", {"x", "", "", "sizes"}, {"y"}, "resize0")},
                           {tensor_info("x", kFloat, {1, 1, 2, 2})}, {tensor_info("y", kFloat, {})},
                           {int64_tensor("sizes", {4}, {1, 1, int64_t{1} << 40, 2})});
  cases.push_back({"resize0", resize});
  auto resize_scales =
      make_model({make_node("Resize", {"x", "", "scales"}, {"y"}, "resize1")}, {tensor_info("x", kFloat, {1, 1, 2, 2})},
                 {tensor_info("y", kFloat, {})}, {float_tensor("scales", {4}, {1, 1, 1e9f, 1e9f})});
  cases.push_back({"resize1", resize_scales});
  cases.push_back({"tile0", make_model({make_node("Tile", {"x", "r"}, {"y"}, "tile0")}, {tensor_info("x", kFloat, {2})},
                                       {tensor_info("y", kFloat, {})}, {int64_tensor("r", {1}, {int64_t{1} << 40})})});
  cases.push_back(
      {"expand0", make_model({make_node("Expand", {"x", "s"}, {"y"}, "expand0")}, {tensor_info("x", kFloat, {1})},
                             {tensor_info("y", kFloat, {})}, {int64_tensor("s", {2}, {1 << 20, 1 << 20})})});
  cases.push_back({"cos0", make_model({make_node("ConstantOfShape", {"s"}, {"y"}, "cos0")}, {},
                                      {tensor_info("y", kFloat, {})}, {int64_tensor("s", {2}, {1 << 20, 1 << 20})})});
  for (const auto& c : cases) {
    const std::string p = f.at(c.name + ".onnx");
    write_model(c.m, p);
    CliResult r = run_cli({"run", p, "--max-memory", "1G", "--json"}, 120);
    ASSERT_TRUE(r.exited()) << c.name << r.describe();
    EXPECT_EQ(r.code, 2) << c.name << r.describe();
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << c.name << r.describe();
    EXPECT_EQ(j["error"]["kind"], "memory") << c.name << r.describe();
    EXPECT_THAT(j["error"]["message"].get<std::string>(), HasSubstr(c.name)) << r.describe();
  }
}

TEST(Files, DeclarationsThatCannotBeRunAreBadInput) {
  // Element types 0 and 99 ran as float32; opsets 0, -5, 10000 and the default domain imported
  // twice were accepted; an initializer shadowing an input with another dtype was accepted.
  Folder f("files_declared");
  auto check = [&](const std::string& name, onnx::ModelProto m, const std::string& needle) {
    const std::string p = f.at(name + ".onnx");
    write_model(m, p);
    expect_refused({"run", p}, needle);
    expect_refused({"inspect", p}, needle);
  };
  for (int et : {0, 99}) {
    auto m = add_model();
    m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(et);
    check("in" + std::to_string(et), m, "graph input 'x' declares element type " + std::to_string(et));
    m = add_model();
    m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(et);
    check("out" + std::to_string(et), m, "graph output 'y' declares element type " + std::to_string(et));
  }
  for (int v : {0, -5, 10000}) {
    auto m = add_model();
    m.mutable_opset_import(0)->set_version(v);
    check("opset" + std::to_string(v), m, "imported at opset " + std::to_string(v));
  }
  auto twice = add_model();
  *twice.add_opset_import() = twice.opset_import(0);
  check("twice", twice, "imported twice");
  auto shadow = add_model();
  *shadow.mutable_graph()->add_input() = tensor_info("w", kInt64, {3});
  check("shadow", shadow, "initializer of the same name holds float32 [64,64]");
  // A value_info or graph output naming an initializer with another type: the declaration
  // replaced the tensor's type in the graph, and an IR 3 model saved again (its initializers
  // declared as inputs) became one the reader refuses.
  auto declared = add_model();
  *declared.mutable_graph()->add_value_info() = tensor_info("w", kInt64, {64, 64});
  check("value_info", declared, "initializer 'w' is declared (graph output or value_info) int64 [64,64]");
  declared.set_ir_version(3);
  check("value_info_ir3", declared, "but the tensor holds float32 [64,64]");
  auto as_output = add_model();
  *as_output.mutable_graph()->add_output() = tensor_info("w", kFloat, {64, 3});
  check("output", as_output, "a declaration of an initializer must match its type and shape");
  // Declarations that agree, or say less, are accepted.
  auto agrees = add_model();
  *agrees.mutable_graph()->add_value_info() = tensor_info("w", kFloat, {64, 64});
  write_model(agrees, f.at("agrees.onnx"));
  EXPECT_EQ(run_cli({"run", f.at("agrees.onnx")}).code, 0);
  // The same input declared as the initializer is: a default value, accepted.
  auto same = add_model();
  *same.mutable_graph()->add_input() = tensor_info("w", kFloat, {64, 64});
  write_model(same, f.at("same.onnx"));
  EXPECT_EQ(run_cli({"run", f.at("same.onnx")}).code, 0);
}

TEST(Files, SmallSilentAcceptances) {
  Folder f("files_small");
  // MaxPool with a kernel larger than its input returned an empty tensor (Conv errors).
  auto pool = make_model({make_node("MaxPool", {"x"}, {"y"}, "pool0")}, {tensor_info("x", kFloat, {1, 1, 2, 2})},
                         {tensor_info("y", kFloat, {})});
  add_ints(*pool.mutable_graph()->mutable_node(0), "kernel_shape", {5, 5});
  write_model(pool, f.at("pool.onnx"));
  expect_refused({"run", f.at("pool.onnx")}, "pool0");
  expect_refused({"run", f.at("pool.onnx")}, "larger than the padded input");
  // --target-opset 5 is kind usage, as docs/cli.md says.
  CliResult r = run_cli({"convert", f.model.string(), f.at("t.onnx"), "--target-opset", "5", "--json"});
  EXPECT_EQ(r.code, 2) << r.describe();
  EXPECT_EQ(nlohmann::json::parse(r.out)["error"]["kind"], "usage") << r.describe();
  // `verify A B` where B fails names B.
  auto broken = make_model({make_node("Reshape", {"x", "s"}, {"y"}, "reshape0")}, {tensor_info("x", kFloat, {64, 64})},
                           {tensor_info("y", kFloat, {64, 64})}, {int64_tensor("s", {2}, {3, 7})});
  write_model(broken, f.at("broken.onnx"));
  expect_refused({"verify", f.model.string(), f.at("broken.onnx"), "--seeds", "1"},
                 "candidate '" + f.at("broken.onnx") + "'");
  // An output declared int32 [9,9] that computes float [64,64]: a warning from run, verify and inspect.
  auto liar = add_model();
  auto* t = liar.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::INT32);
  t->mutable_shape()->mutable_dim(0)->set_dim_value(9);
  t->mutable_shape()->mutable_dim(1)->set_dim_value(9);
  write_model(liar, f.at("liar.onnx"));
  r = run_cli({"run", f.at("liar.onnx")});
  EXPECT_EQ(r.code, 0) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("warning: output 'y' is declared int32 [9,9] but computes float32 [64,64]"));
  r = run_cli({"verify", f.model.string(), f.at("liar.onnx"), "--seeds", "1", "--json"});
  EXPECT_EQ(r.code, 0) << r.describe();
  EXPECT_THAT(nlohmann::json::parse(r.out)["warnings"].dump(), HasSubstr("declared int32 [9,9]"));
  r = run_cli({"inspect", f.at("liar.onnx"), "--json"});
  EXPECT_EQ(r.code, 0) << r.describe();
  EXPECT_THAT(nlohmann::json::parse(r.out)["warnings"].dump(), HasSubstr("int32"));
}
