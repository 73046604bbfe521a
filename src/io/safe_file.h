#pragma once
// The file rules (docs/cli.md, "Files"): every file onnxforge writes (a model, its external data,
// a --report, `run --out` tensors) goes through AtomicFile, and every side file it reads (a
// hierarchy sidecar, a `run --input` tensor) through read_side_file.
//
// Writing: an output is absent or a regular file. A symbolic link, a directory, a device, a FIFO
// or a socket is refused, with or without --overwrite (`-o /dev/null --overwrite` must not turn
// the system's /dev/null into a regular file; a link is refused rather than followed so that what
// gets replaced is always the path the user typed). An existing regular file is replaced only
// with `overwrite`, and never when it is one of the command's inputs (compared by device and
// inode, so another name or a hard link of the input is caught too). The bytes go to a temporary
// in the target folder, created with O_EXCL|O_NOFOLLOW under an unpredictable name (or anonymous,
// O_TMPFILE), and are renamed over the target only when complete; without `overwrite` the rename
// itself refuses to replace a file that appeared meanwhile (RENAME_NOREPLACE).
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/mapped_file.h"  // FileIdentity

namespace onnxforge {

struct WriteRules {
  WriteRules() = default;
  explicit WriteRules(bool replace) : overwrite(replace) {}
  bool overwrite = false;            // replace an existing regular file
  std::vector<FileIdentity> inputs;  // files never written onto (the command's inputs)
  // Adds the file at `path` (when it exists) to `inputs`.
  WriteRules& protect(const std::filesystem::path& path);
};

// Checks an output set before any work, so that a long job does not end in a refusal: each path
// by the rules above (a usage error naming the path and `what`: "output", "--report", ...), its
// folder exists, and no two paths of the set are the same file. `what` has one entry per path.
void check_outputs(std::span<const std::filesystem::path> paths, std::span<const std::string> what,
                   const WriteRules& rules);
void check_output(const std::filesystem::path& path, const WriteRules& rules, const std::string& what = "output");

// A file being written: a temporary in the target folder until commit() renames it into place
// (checking the target again by the rules); destroyed uncommitted, it leaves nothing.
class AtomicFile {
 public:
  AtomicFile(const std::filesystem::path& target, WriteRules rules);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  int fd() const { return fd_; }
  const std::filesystem::path& target() const { return target_; }
  void write(const void* data, size_t size);  // all of it; an Error naming the target and errno text
  void commit();

 private:
  std::filesystem::path target_, tmp_;
  WriteRules rules_;
  int fd_ = -1;
  bool anonymous_ = false, linked_ = false, committed_ = false;
};

// Writes `bytes` to `path` through an AtomicFile.
void write_file_atomically(const std::filesystem::path& path, std::string_view bytes, const WriteRules& rules);

// Removes temporaries (`.NAME.onnxforge-tmp.PID.RANDOM`) in `dir` left by a process that no
// longer exists (killed while writing on a file system without O_TMPFILE).
void remove_stale_temporaries(const std::filesystem::path& dir);

// Reads a whole side file: a regular file (a symbolic link to one is fine) of at most `max_bytes`,
// opened without blocking, so that a FIFO, /dev/zero, /dev/urandom or a directory is a clear error
// naming the path and `what` ("hierarchy sidecar", "input file") instead of a hang or a 2 GB read.
inline constexpr uint64_t kSideFileLimit = uint64_t{1} << 30;
std::string read_side_file(const std::filesystem::path& path, std::string_view what,
                           uint64_t max_bytes = kSideFileLimit);

}  // namespace onnxforge
