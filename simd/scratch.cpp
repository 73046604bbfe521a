// Per-thread scratch pool (see detail/scratch.h).
#include "simd/detail/scratch.h"

#include <cstdlib>
#include <new>

#include <sys/mman.h>
#include <vector>

namespace onnxforge::simd::detail {
namespace {

// Blocks larger than this go back to the system on release instead of staying cached.
constexpr std::size_t kMaxCachedFloats = std::size_t{32} << 20;

struct Block {
  float* data = nullptr;
  std::size_t floats = 0;
  bool used = false;
};

struct Pool {
  std::vector<Block> blocks;
  ~Pool() {
    for (Block& b : blocks) aligned_free(b.data);
  }
};

thread_local Pool pool;

}  // namespace

// Buffers of a few MB (packed B) are backed by 2 MB pages where the kernel allows it: packed
// panels are streamed through the caches, and with 4 KB pages both the TLB misses and the
// luck of the physical page placement (L2 set conflicts) made GEMM speed vary by 20% from run
// to run.
constexpr std::size_t kHugePage = std::size_t{2} << 20;

float* aligned_alloc_floats(std::size_t floats) {
  const std::size_t bytes = ((floats * sizeof(float) + 63) / 64) * 64;
  // Only whole 2 MB blocks get huge pages; the tail stays in 4 KB pages (rounding every packed
  // weight up to 2 MB cost BERT-base 76 MiB of resident memory).
  const bool huge = bytes >= kHugePage;
  constexpr std::size_t kPage = 4096;
  const std::size_t align = huge ? kHugePage : 64;
  const std::size_t size = huge ? (bytes + kPage - 1) / kPage * kPage : (bytes == 0 ? 64 : bytes);
  void* p = nullptr;  // posix_memalign: unlike aligned_alloc, the size need not be a multiple of the alignment
  if (posix_memalign(&p, align, size) != 0) throw std::bad_alloc();
  if (huge) madvise(p, size / kHugePage * kHugePage, MADV_HUGEPAGE);  // advisory: ignored where THP is off
  return static_cast<float*>(p);
}

void aligned_free(float* p) noexcept { std::free(p); }

Scratch::Scratch(std::size_t floats) {
  auto& blocks = pool.blocks;
  int free_slot = -1;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i].used) continue;
    if (blocks[i].floats >= floats) {
      blocks[i].used = true;
      slot_ = static_cast<int>(i);
      data_ = blocks[i].data;
      return;
    }
    free_slot = static_cast<int>(i);
  }
  if (free_slot < 0) {
    blocks.push_back({});
    free_slot = static_cast<int>(blocks.size() - 1);
  }
  Block& b = blocks[free_slot];
  aligned_free(b.data);
  b.data = nullptr;
  b.floats = 0;
  b.data = aligned_alloc_floats(floats);
  b.floats = floats;
  b.used = true;
  slot_ = free_slot;
  data_ = b.data;
}

Scratch::~Scratch() {
  Block& b = pool.blocks[slot_];
  b.used = false;
  if (b.floats > kMaxCachedFloats) {
    aligned_free(b.data);
    b.data = nullptr;
    b.floats = 0;
  }
}

}  // namespace onnxforge::simd::detail
