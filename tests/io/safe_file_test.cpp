// io/safe_file.h: the write and read rules every command goes through (docs/cli.md "Files").
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/safe_file.h"
#include "ir/error.h"
#include "tests/common/models.h"
#include "tests/common/proto_builder.h"

namespace fs = std::filesystem;
using namespace onnxforge;
using namespace onnxforge::test;
using ::testing::HasSubstr;

namespace {

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) { return e.what(); }
  return "(no error)";
}

size_t entries(const fs::path& dir) {
  return static_cast<size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

}  // namespace

TEST(SafeFile, UncommittedWriteLeavesNothingAndCommitReplacesOnlyWithOverwrite) {
  fs::path dir = temp_dir("safe_file_commit");
  {
    AtomicFile f(dir / "a.bin", WriteRules());
    f.write("abc", 3);
  }  // destroyed uncommitted (an error while writing)
  EXPECT_EQ(entries(dir), 0u);
  write_file_atomically(dir / "a.bin", "one", WriteRules());
  EXPECT_EQ(read_bytes(dir / "a.bin"), "one");
  EXPECT_THAT(message_of([&] { write_file_atomically(dir / "a.bin", "two", WriteRules()); }), HasSubstr("--overwrite"));
  // A file appearing between the check and the rename is not replaced without overwrite.
  {
    AtomicFile late(dir / "b.bin", WriteRules());
    late.write("late", 4);
    write_bytes(dir / "b.bin", "first");
    EXPECT_THAT(message_of([&] { late.commit(); }), HasSubstr("b.bin"));
  }
  EXPECT_EQ(read_bytes(dir / "b.bin"), "first");
  write_file_atomically(dir / "a.bin", "two", WriteRules(true));
  EXPECT_EQ(read_bytes(dir / "a.bin"), "two");
  EXPECT_EQ(entries(dir), 2u);  // no temporary left
}

TEST(SafeFile, RulesRefuseLinksSpecialFilesInputsAndDuplicates) {
  fs::path dir = temp_dir("safe_file_rules");
  write_bytes(dir / "in.onnx", "model");
  fs::create_symlink("in.onnx", dir / "link");
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0644), 0);
  WriteRules rules(true);
  rules.protect(dir / "in.onnx");
  EXPECT_THAT(message_of([&] { check_output(dir / "link", rules); }), HasSubstr("symbolic link"));
  EXPECT_THAT(message_of([&] { check_output(dir / "fifo", rules); }), HasSubstr("FIFO"));
  EXPECT_THAT(message_of([&] { check_output("/dev/null", rules); }), HasSubstr("character device"));
  EXPECT_THAT(message_of([&] { check_output(dir, rules); }), HasSubstr("directory"));
  EXPECT_THAT(message_of([&] { check_output(dir / "in.onnx", rules); }), HasSubstr("inputs"));
  EXPECT_THAT(message_of([&] { check_output(dir / "no" / "x", rules); }), HasSubstr("does not exist"));
  const fs::path set[] = {dir / "x.onnx", dir / "." / "x.onnx"};
  const std::string what[] = {"output", "--report"};
  EXPECT_THAT(message_of([&] { check_outputs(set, what, rules); }), HasSubstr("same file"));
  EXPECT_EQ(read_bytes(dir / "in.onnx"), "model");
}

TEST(SafeFile, SideFilesAreRegularAndBounded) {
  fs::path dir = temp_dir("safe_file_read");
  write_bytes(dir / "s.json", "{\"a\": 1}");
  EXPECT_EQ(read_side_file(dir / "s.json", "sidecar"), "{\"a\": 1}");
  fs::create_symlink("s.json", dir / "link.json");  // a link to a regular file is read
  EXPECT_EQ(read_side_file(dir / "link.json", "sidecar"), "{\"a\": 1}");
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0644), 0);
  EXPECT_THAT(message_of([&] { read_side_file(dir / "fifo", "sidecar"); }), HasSubstr("FIFO"));  // no hang
  EXPECT_THAT(message_of([&] { read_side_file("/dev/zero", "input file"); }), HasSubstr("character device"));
  EXPECT_THAT(message_of([&] { read_side_file(dir, "sidecar"); }), HasSubstr("directory"));
  EXPECT_THAT(message_of([&] { read_side_file(dir / "s.json", "sidecar", 4); }), HasSubstr("more than the 4"));
  EXPECT_THAT(message_of([&] { read_side_file(dir / "none", "sidecar"); }), HasSubstr("No such file"));
}
