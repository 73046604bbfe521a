#pragma once
// Content hash of tensor bytes (and strings): 8 bytes at a time, fast enough for GB-sized weights
// from the page cache. Used to find identical constants and to compare models structurally.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace onnxforge {

inline uint64_t content_hash(std::span<const std::byte> b) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ b.size();
  size_t i = 0;
  for (; i + 8 <= b.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, b.data() + i, 8);
    h = (h ^ w) * 0x100000001B3ull;
    h ^= h >> 29;
  }
  uint64_t tail = 0;
  if (i < b.size()) std::memcpy(&tail, b.data() + i, b.size() - i);
  h = (h ^ tail) * 0x100000001B3ull;
  return h ^ (h >> 31);
}

}  // namespace onnxforge
