#include "ir/types.h"

#include <array>
#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

namespace onnxforge {
namespace {

// Strings live in fixed-size chunks that never move, so str() can read without a lock while
// another thread interns.
class Interner {
 public:
  Interner() { insert_locked(""); }

  Sym intern(std::string_view s) {
    {
      std::shared_lock lock(mutex_);
      if (auto it = index_.find(s); it != index_.end()) return Sym(it->second);
    }
    std::unique_lock lock(mutex_);
    if (auto it = index_.find(s); it != index_.end()) return Sym(it->second);
    return Sym(insert_locked(s));
  }

  std::optional<Sym> lookup(std::string_view s) const {
    std::shared_lock lock(mutex_);
    if (auto it = index_.find(s); it != index_.end()) return Sym(it->second);
    return std::nullopt;
  }

  std::string_view str(Sym s) const {
    const std::string* chunk = chunks_[s.v / kChunk].load(std::memory_order_acquire);
    return chunk[s.v % kChunk];
  }

 private:
  static constexpr uint32_t kChunk = 4096;
  static constexpr uint32_t kMaxChunks = 1u << 16;

  uint32_t insert_locked(std::string_view s) {
    uint32_t id = count_;
    uint32_t c = id / kChunk;
    if (c >= kMaxChunks) throw std::length_error("onnxforge: too many distinct strings");
    std::string* chunk = chunks_[c].load(std::memory_order_relaxed);
    if (!chunk) {
      owned_.push_back(std::make_unique<std::string[]>(kChunk));
      chunk = owned_.back().get();
      chunks_[c].store(chunk, std::memory_order_release);
    }
    chunk[id % kChunk] = std::string(s);
    index_.emplace(std::string_view(chunk[id % kChunk]), id);
    ++count_;
    return id;
  }

  mutable std::shared_mutex mutex_;
  std::unordered_map<std::string_view, uint32_t> index_;
  std::vector<std::unique_ptr<std::string[]>> owned_;
  std::unique_ptr<std::atomic<std::string*>[]> chunks_ = std::make_unique<std::atomic<std::string*>[]>(kMaxChunks);
  uint32_t count_ = 0;
};

Interner& interner() {
  static Interner* instance = new Interner();  // never destroyed: Syms may be read at exit
  return *instance;
}

}  // namespace

Sym intern(std::string_view s) { return s.empty() ? Sym{} : interner().intern(s); }
std::optional<Sym> lookup(std::string_view s) { return interner().lookup(s); }
std::string_view str(Sym s) { return interner().str(s); }

std::string_view dtype_name(DType t) {
  static constexpr std::array<std::string_view, 24> names = {
      "undefined",      "float32",    "uint8",          "int8",       "uint16",   "int16",
      "int32",          "int64",      "string",         "bool",       "float16",  "float64",
      "uint32",         "uint64",     "complex64",      "complex128", "bfloat16", "float8e4m3fn",
      "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "uint4",      "int4",     "float4e2m1"};
  auto i = static_cast<size_t>(t);
  return i < names.size() ? names[i] : std::string_view("unknown");
}

bool dtype_known(int32_t t) { return t >= 0 && t <= 23; }

int dtype_bits(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::Uint8:
    case DType::Int8:
    case DType::Float8E4M3FN:
    case DType::Float8E4M3FNUZ:
    case DType::Float8E5M2:
    case DType::Float8E5M2FNUZ: return 8;
    case DType::Uint16:
    case DType::Int16:
    case DType::Float16:
    case DType::BFloat16: return 16;
    case DType::Float:
    case DType::Int32:
    case DType::Uint32: return 32;
    case DType::Int64:
    case DType::Uint64:
    case DType::Double:
    case DType::Complex64: return 64;
    case DType::Complex128: return 128;
    case DType::Uint4:
    case DType::Int4:
    case DType::Float4E2M1: return 4;
    default: return 0;
  }
}

std::optional<uint64_t> dtype_storage_bytes(DType t, uint64_t count) {
  int bits = dtype_bits(t);
  if (bits == 0) return std::nullopt;
  if (bits == 4) return count / 2 + (count % 2);
  uint64_t per = static_cast<uint64_t>(bits / 8);
  if (count != 0 && per > UINT64_MAX / count) return std::nullopt;
  return count * per;
}

}  // namespace onnxforge
