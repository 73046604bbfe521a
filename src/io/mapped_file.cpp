#include "io/mapped_file.h"

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <fcntl.h>
#include <optional>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir/error.h"

namespace onnxforge {

const char* file_kind(uint32_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO (named pipe)";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISLNK(m)) return "a symbolic link";
  return "not a regular file";
}

std::shared_ptr<MappedFile> MappedFile::open(const std::filesystem::path& path) {
  // O_NONBLOCK: opening a FIFO for reading blocks until a writer appears (a model path or an
  // external-data location pointing at one hung every command); with it, open returns at once
  // and fstat refuses anything but a regular file. It has no effect on regular files.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    throw Error("cannot open '" + path.string() + "': " + std::strerror(errno), Error::Kind::Input, path.string());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw Error("cannot stat '" + path.string() + "': " + std::strerror(e), Error::Kind::Input, path.string());
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error("'" + path.string() + "' is " + file_kind(st.st_mode) +
                    ", not a regular file; onnxforge reads models and "
                    "external data only from regular files",
                Error::Kind::Input, path.string());
  }
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->fd_ = fd;
  f->size_ = static_cast<uint64_t>(st.st_size);
  f->device_ = st.st_dev;
  f->inode_ = st.st_ino;
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) fail("cannot memory-map '", path.string(), "': ", std::strerror(errno));
    f->data_ = static_cast<const std::byte*>(p);
  }
  return f;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
}

std::unique_ptr<MappedFile> MappedFile::scan_view() const {
  std::unique_ptr<MappedFile> v(new MappedFile());
  v->path_ = path_;
  v->size_ = size_;
  v->device_ = device_;
  v->inode_ = inode_;
  v->fd_ = ::dup(fd_);
  if (v->fd_ < 0) fail("cannot duplicate the descriptor of '", path_.string(), "': ", std::strerror(errno));
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, v->fd_, 0);
    if (p == MAP_FAILED) fail("cannot memory-map '", path_.string(), "': ", std::strerror(errno));
    v->data_ = static_cast<const std::byte*>(p);
    ::madvise(p, size_, MADV_RANDOM);
  }
  return v;
}

void MappedFile::release(uint64_t begin, uint64_t end) const {
  const uint64_t page = 4096;
  uint64_t b = (begin + page - 1) / page * page, e = std::min(end, size_) / page * page;
  if (data_ && e > b) ::madvise(const_cast<std::byte*>(data_) + b, e - b, MADV_DONTNEED);
}

void MappedFile::advise_sequential() const {
  if (data_) ::madvise(const_cast<std::byte*>(data_), size_, MADV_SEQUENTIAL);
}

void MappedFile::advise_random() const {
  if (data_) ::madvise(const_cast<std::byte*>(data_), size_, MADV_RANDOM);
}

std::optional<FileIdentity> file_identity(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileIdentity{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

void write_all(int fd, const void* data, size_t size, const std::filesystem::path& what) {
  auto* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write '", what.string(), "': ", std::strerror(errno));
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void copy_to_fd(const MappedFile& src, uint64_t offset, uint64_t length, int out_fd,
                const std::filesystem::path& what) {
  loff_t in_off = static_cast<loff_t>(offset);
  while (length > 0) {
    ssize_t n = ::copy_file_range(src.fd(), &in_off, out_fd, nullptr, length, 0);
    if (n > 0) {
      length -= static_cast<uint64_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;  // not supported here (EXDEV, EINVAL, ...) or short: finish from the mapping
  }
  if (length > 0) {
    uint64_t done = static_cast<uint64_t>(in_off);
    write_all(out_fd, src.data() + done, length, what);
  }
}

}  // namespace onnxforge
