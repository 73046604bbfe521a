#pragma once
// The tensor store: one table per model holding every initializer and tensor attribute.
// A tensor's bytes are a span into a memory-mapped file (the model itself or an external-data
// file) or into memory the store owns. Loading never touches weight pages; saving copies only
// tensors that changed.
#include <cstddef>
#include <cstdint>
#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/types.h"

namespace onnxforge {

class MappedFile;

enum class TensorStorage : uint8_t {
  Embedded,  // raw_data (or packed float/double data) inside the mapped model file
  External,  // a span of a mapped external-data file
  Owned,     // bytes owned by the store (decoded typed fields, new or changed tensors)
  Strings,   // a string tensor (strings kept in the store)
  Deferred,  // computed from other tensors of the store when first read (see TensorRecipe)
};

class TensorStore;

// How a deferred tensor's bytes are computed from other tensors of the same store: a folded
// weight transpose (TinyLlama: 4 GB) is recorded instead of computed. The writer streams such
// tensors one at a time (bounded memory); anything else that reads their bytes materializes them.
struct TensorRecipe {
  // What is computed, e.g. "Transpose 1,0": equal keys over equal sources give equal bytes.
  std::string key;
  std::vector<TensorId> sources;
  // Fills `out` (the tensor's size) from the sources' bytes (in `sources` order).
  std::function<void(std::span<const std::span<const std::byte>> sources, std::span<std::byte> out)> compute;
};

// Where a tensor came from in its source file, so the writer can copy it verbatim.
struct TensorSource {
  std::string_view proto;            // the complete TensorProto message bytes (empty for new tensors)
  const MappedFile* file = nullptr;  // mapping that holds the data bytes (model or external file)
  uint64_t file_offset = 0;          // offset of the data bytes inside `file`
  uint32_t data_field = 0;           // TensorProto field number the data came from (9 = raw_data...)
};

class TensorStore {
 public:
  struct Entry {
    Sym name;
    DType dtype = DType::Undefined;
    uint32_t dims_begin = 0, rank = 0;
    const std::byte* data = nullptr;
    uint64_t size = 0;  // bytes
    TensorStorage storage = TensorStorage::Owned;
    uint32_t strings_index = 0;  // into strings_ when storage == Strings
    TensorSource source;
    // External-data key/values as read (location, offset, length, checksum, ...), kept so an
    // unchanged external tensor can be written back pointing at the same file when asked.
    std::vector<std::pair<std::string, std::string>> external_info;
    std::vector<std::string_view> extra_fields;  // unmodelled TensorProto fields, verbatim
    bool changed = false;                        // data or dims differ from `source.proto`
    // Set for TensorStorage::Deferred; `data` stays null, the bytes live in `deferred->data`.
    struct Deferred;
    std::shared_ptr<Deferred> deferred;
  };

  TensorId add(Entry e, std::span<const int64_t> dims);
  // New tensor with bytes the store owns (copied from `bytes`).
  TensorId add_owned(Sym name, DType dtype, std::span<const int64_t> dims, std::span<const std::byte> bytes);
  TensorId add_strings(Sym name, std::span<const int64_t> dims, std::vector<std::string> strings);
  // A tensor computed from others when first read. Sources must not be replaced afterwards
  // without materializing it first (replace() does that).
  TensorId add_deferred(Sym name, DType dtype, std::span<const int64_t> dims, uint64_t size, TensorRecipe recipe);
  // Allocates owned bytes for a tensor the caller fills in (e.g. a folded constant).
  // Thread-safe: parallel folding allocates while other threads read the store.
  std::span<std::byte> allocate(size_t bytes);

  size_t size() const { return entries_.size(); }
  const Entry& entry(TensorId t) const { return entries_[t.index()]; }
  Entry& entry_mut(TensorId t) { return entries_[t.index()]; }

  Sym name(TensorId t) const { return entry(t).name; }
  DType dtype(TensorId t) const { return entry(t).dtype; }
  std::span<const int64_t> dims(TensorId t) const {
    const Entry& e = entry(t);
    return {dims_.data() + e.dims_begin, e.rank};
  }
  uint64_t element_count(TensorId t) const;
  // Size in bytes, without computing a deferred tensor.
  uint64_t byte_size(TensorId t) const { return entry(t).size; }
  // The bytes; a deferred tensor is computed on first use (thread-safe) and kept.
  std::span<const std::byte> bytes(TensorId t) const { return {data(t), entry(t).size}; }

  // Deferred tensors whose bytes have not been computed yet.
  bool is_deferred(TensorId t) const;
  const TensorRecipe* recipe(TensorId t) const;
  // Computes a deferred tensor's bytes into `out` (byte_size(t) bytes) without keeping them, then
  // drops the mapped pages of file-backed sources from this process (the writer's streaming path).
  void compute_into(TensorId t, std::span<std::byte> out) const;
  // A copy of the entry with a deferred tensor's bytes computed, for copying into another store.
  Entry resolved(TensorId t) const;
  // Typed view of a tensor's bytes. Bytes embedded in a protobuf file are not aligned: use as<T>
  // only when aligned_for<T>(t) holds (owned and page-aligned external tensors are); otherwise
  // read through values<T>() (a copy) or element<T>().
  template <class T>
  std::span<const T> as(TensorId t) const {
    return {reinterpret_cast<const T*>(data(t)), entry(t).size / sizeof(T)};
  }
  template <class T>
  bool aligned_for(TensorId t) const {
    return reinterpret_cast<uintptr_t>(data(t)) % alignof(T) == 0;
  }
  template <class T>
  std::vector<T> values(TensorId t) const {
    std::vector<T> out(entry(t).size / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), data(t), out.size() * sizeof(T));
    return out;
  }
  template <class T>
  T element(TensorId t, size_t i) const {
    T v;
    std::memcpy(&v, data(t) + i * sizeof(T), sizeof(T));
    return v;
  }
  const std::vector<std::string>& strings(TensorId t) const { return strings_[entry(t).strings_index]; }

  // Replaces a tensor's contents (dims and bytes), marking it changed. Deferred tensors computed
  // from `t` are materialized first.
  void replace(TensorId t, std::span<const int64_t> dims, std::span<const std::byte> bytes);
  void rename(TensorId t, Sym name) {
    entries_[t.index()].name = name;
    entries_[t.index()].changed = true;
  }

  uint64_t total_bytes() const;

  // This store becomes a copy of `from` whose entries view `from`'s bytes (valid while it lives);
  // a deferred tensor gets its own recipe state, computed into this store when first read.
  void share(const TensorStore& from);

 private:
  const std::byte* data(TensorId t) const {
    const Entry& e = entry(t);
    return e.deferred ? materialize(t) : e.data;
  }
  const std::byte* materialize(TensorId t) const;
  void release_source_pages(TensorId source) const;

  std::vector<Entry> entries_;
  std::vector<int64_t> dims_;
  std::vector<std::vector<std::string>> strings_;
  struct AlignedDelete {
    void operator()(std::byte* p) const;
  };
  std::span<std::byte> allocate_owned(size_t bytes) const;
  mutable std::vector<std::unique_ptr<std::byte[], AlignedDelete>> owned_;
  mutable std::mutex owned_mutex_;
  bool has_deferred_ = false;
};

struct TensorStore::Entry::Deferred {
  TensorRecipe recipe;
  std::atomic<const std::byte*> data{nullptr};
  std::mutex mutex;
};

}  // namespace onnxforge
