#include "ir/tensor.h"

#include <cstring>

#include "ir/error.h"

namespace onnxforge {

TensorId TensorStore::add(Entry e, std::span<const int64_t> dims) {
  e.dims_begin = static_cast<uint32_t>(dims_.size());
  e.rank = static_cast<uint32_t>(dims.size());
  dims_.insert(dims_.end(), dims.begin(), dims.end());
  entries_.push_back(std::move(e));
  return TensorId(static_cast<uint32_t>(entries_.size() - 1));
}

void TensorStore::AlignedDelete::operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t(64)); }

std::span<std::byte> TensorStore::allocate(size_t bytes) {
  // 64-byte alignment: kernels read weights with aligned vector loads where they can.
  auto* raw = static_cast<std::byte*>(::operator new[](bytes == 0 ? 1 : bytes, std::align_val_t(64)));
  std::lock_guard lock(owned_mutex_);
  owned_.emplace_back(raw);
  return {raw, bytes};
}

TensorId TensorStore::add_owned(Sym name, DType dtype, std::span<const int64_t> dims,
                                std::span<const std::byte> bytes) {
  auto buf = allocate(bytes.size());
  if (!bytes.empty()) std::memcpy(buf.data(), bytes.data(), bytes.size());
  Entry e;
  e.name = name;
  e.dtype = dtype;
  e.data = buf.data();
  e.size = bytes.size();
  e.storage = TensorStorage::Owned;
  e.changed = true;
  return add(std::move(e), dims);
}

TensorId TensorStore::add_strings(Sym name, std::span<const int64_t> dims, std::vector<std::string> strings) {
  Entry e;
  e.name = name;
  e.dtype = DType::String;
  e.storage = TensorStorage::Strings;
  e.strings_index = static_cast<uint32_t>(strings_.size());
  e.changed = true;
  strings_.push_back(std::move(strings));
  return add(std::move(e), dims);
}

uint64_t TensorStore::element_count(TensorId t) const {
  uint64_t n = 1;
  for (int64_t d : dims(t)) n *= static_cast<uint64_t>(d);
  return n;
}

void TensorStore::replace(TensorId t, std::span<const int64_t> dims, std::span<const std::byte> bytes) {
  auto buf = allocate(bytes.size());
  if (!bytes.empty()) std::memcpy(buf.data(), bytes.data(), bytes.size());
  Entry& e = entries_[t.index()];
  e.data = buf.data();
  e.size = bytes.size();
  e.storage = TensorStorage::Owned;
  e.changed = true;
  e.external_info.clear();
  if (dims.size() == e.rank) {
    std::copy(dims.begin(), dims.end(), dims_.begin() + e.dims_begin);
  } else {
    e.dims_begin = static_cast<uint32_t>(dims_.size());
    e.rank = static_cast<uint32_t>(dims.size());
    dims_.insert(dims_.end(), dims.begin(), dims.end());
  }
}

uint64_t TensorStore::total_bytes() const {
  uint64_t total = 0;
  for (const Entry& e : entries_) total += e.size;
  return total;
}

}  // namespace onnxforge
