#pragma once
// Anonymous memory (mmap) unmapped when dropped, for computed tensor bytes that must not stay
// resident in an allocator's cache after their use: the writer's two compute-ahead buffers
// (TinyLlama streams 4 GB through them) and a deferred recipe's not-yet-computed sources.
#include <sys/mman.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <span>
#include <utility>

#include "ir/error.h"

namespace onnxforge {

class AnonymousMemory {
 public:
  AnonymousMemory() = default;
  // `purpose` completes the error "cannot allocate N bytes to ...".
  AnonymousMemory(size_t size, const char* purpose) : size_(size) {
    if (size_ == 0) return;
    void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) fail("cannot allocate ", size_, " bytes to ", purpose, ": ", std::strerror(errno));
    data_ = static_cast<std::byte*>(p);
  }
  ~AnonymousMemory() {
    if (data_) ::munmap(data_, size_);
  }
  AnonymousMemory(AnonymousMemory&& o) noexcept : data_(std::exchange(o.data_, nullptr)), size_(o.size_) {}
  AnonymousMemory(const AnonymousMemory&) = delete;
  AnonymousMemory& operator=(const AnonymousMemory&) = delete;
  AnonymousMemory& operator=(AnonymousMemory&&) = delete;
  std::byte* data() { return data_; }
  std::span<std::byte> span() { return {data_, size_}; }

 private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace onnxforge
