#pragma once
// The tensor store: one table per model holding every initializer and tensor attribute.
// A tensor's bytes are a span into a memory-mapped file (the model itself or an external-data
// file) or into memory the store owns. Loading never touches weight pages; saving copies only
// tensors that changed.
#include <cstddef>
#include <cstdint>
#include <cstring>
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
  Embedded,   // raw_data (or packed float/double data) inside the mapped model file
  External,   // a span of a mapped external-data file
  Owned,      // bytes owned by the store (decoded typed fields, new or changed tensors)
  Strings,    // a string tensor (strings kept in the store)
};

// Where a tensor came from in its source file, so the writer can copy it verbatim.
struct TensorSource {
  std::string_view proto;        // the complete TensorProto message bytes (empty for new tensors)
  const MappedFile* file = nullptr;  // mapping that holds the data bytes (model or external file)
  uint64_t file_offset = 0;      // offset of the data bytes inside `file`
  uint32_t data_field = 0;       // TensorProto field number the data came from (9 = raw_data...)
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
    bool changed = false;  // data or dims differ from `source.proto`
  };

  TensorId add(Entry e, std::span<const int64_t> dims);
  // New tensor with bytes the store owns (copied from `bytes`).
  TensorId add_owned(Sym name, DType dtype, std::span<const int64_t> dims, std::span<const std::byte> bytes);
  TensorId add_strings(Sym name, std::span<const int64_t> dims, std::vector<std::string> strings);
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
  std::span<const std::byte> bytes(TensorId t) const { return {entry(t).data, entry(t).size}; }
  // Typed view of a tensor's bytes. Bytes embedded in a protobuf file are not aligned: use as<T>
  // only when aligned_for<T>(t) holds (owned and page-aligned external tensors are); otherwise
  // read through values<T>() (a copy) or element<T>().
  template <class T>
  std::span<const T> as(TensorId t) const {
    return {reinterpret_cast<const T*>(entry(t).data), entry(t).size / sizeof(T)};
  }
  template <class T>
  bool aligned_for(TensorId t) const {
    return reinterpret_cast<uintptr_t>(entry(t).data) % alignof(T) == 0;
  }
  template <class T>
  std::vector<T> values(TensorId t) const {
    std::vector<T> out(entry(t).size / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), entry(t).data, out.size() * sizeof(T));
    return out;
  }
  template <class T>
  T element(TensorId t, size_t i) const {
    T v;
    std::memcpy(&v, entry(t).data + i * sizeof(T), sizeof(T));
    return v;
  }
  const std::vector<std::string>& strings(TensorId t) const { return strings_[entry(t).strings_index]; }

  // Replaces a tensor's contents (dims and bytes), marking it changed.
  void replace(TensorId t, std::span<const int64_t> dims, std::span<const std::byte> bytes);
  void rename(TensorId t, Sym name) { entries_[t.index()].name = name; entries_[t.index()].changed = true; }

  uint64_t total_bytes() const;

 private:
  std::vector<Entry> entries_;
  std::vector<int64_t> dims_;
  std::vector<std::vector<std::string>> strings_;
  struct AlignedDelete {
    void operator()(std::byte* p) const;
  };
  std::vector<std::unique_ptr<std::byte[], AlignedDelete>> owned_;
  std::mutex owned_mutex_;
};

}  // namespace onnxforge
