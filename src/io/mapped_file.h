#pragma once
// A read-only memory mapping of a whole file. Kept in a translation unit without ONNX headers:
// <sys/mman.h> defines MAP_TYPE, which breaks onnx/defs/parser.h.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

namespace onnxforge {

class MappedFile {
 public:
  // Maps `path` read-only. Throws onnxforge::Error naming the file if it cannot be opened.
  static std::shared_ptr<MappedFile> open(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  uint64_t size() const { return size_; }
  std::span<const std::byte> bytes() const { return {data_, size_}; }
  std::string_view view() const { return {reinterpret_cast<const char*>(data_), size_}; }
  const std::filesystem::path& path() const { return path_; }
  int fd() const { return fd_; }
  uint64_t device() const { return device_; }
  uint64_t inode() const { return inode_; }
  bool contains(const void* p) const {
    auto* b = static_cast<const std::byte*>(p);
    return b >= data_ && b <= data_ + size_;
  }
  uint64_t offset_of(const void* p) const { return static_cast<uint64_t>(static_cast<const std::byte*>(p) - data_); }

  // Hints for the kernel: we are about to read these bytes sequentially (or not at all).
  void advise_sequential() const;
  void advise_random() const;

  // A second mapping of the same file for a one-off scan (the reader's parse). Pages a scan
  // touches can be released from this process with release(), while spans into the original
  // mapping stay valid and untouched. (Recent kernels map whole large page-cache folios on a
  // fault, so touching a tensor header would otherwise map megabytes of weights.)
  std::unique_ptr<MappedFile> scan_view() const;
  void release(uint64_t begin, uint64_t end) const;

 private:
  MappedFile() = default;
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  uint64_t size_ = 0;
  int fd_ = -1;
  uint64_t device_ = 0, inode_ = 0;
};

// Identity of a file on disk (device, inode), to refuse writing over an input.
struct FileIdentity {
  uint64_t device = 0, inode = 0;
  bool operator==(const FileIdentity&) const = default;
};
std::optional<FileIdentity> file_identity(const std::filesystem::path& path);

// "a directory", "a FIFO (named pipe)", "a character device", ... for a stat st_mode.
const char* file_kind(uint32_t st_mode);

// Copies `length` bytes of `src` at `offset` to the current position of `out_fd`
// (copy_file_range where the kernel allows, else write() from the mapping); an error names `what`.
void copy_to_fd(const MappedFile& src, uint64_t offset, uint64_t length, int out_fd, const std::filesystem::path& what);

// Writes all bytes to `fd` (retrying partial writes); throws onnxforge::Error naming `what`.
void write_all(int fd, const void* data, size_t size, const std::filesystem::path& what);

}  // namespace onnxforge
